"""scripts/ablate.py: the fixed-compute protocol's evaluation, counters and table rows."""

from __future__ import annotations

import importlib.util
import json
import shlex
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _load_script():
    spec = importlib.util.spec_from_file_location("ablate", ROOT / "scripts" / "ablate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tiny_model(path: Path, seed: int) -> None:
    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict

    torch.manual_seed(seed)
    model = TakNet(ModelConfig(size=4, channels=8, blocks=1))
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint_dict(model), path)


@pytest.mark.slow  # whole ablation evaluations (matches of trained variants)
def test_eval_only_appends_one_row_per_variant(tmp_path: Path) -> None:
    ablate = _load_script()
    from takzero.pipeline.checkpoints import atomic_torch_save

    ref = tmp_path / "ref.pt"
    _tiny_model(ref, 0)
    table = tmp_path / "ablations.md"
    table.write_text("# Ablations\n\nSome text above the table.\n")
    for name, seed in (("a", 1), ("b", 2)):
        run = tmp_path / "runs" / name
        _tiny_model(run / "best.pt", seed)
        atomic_torch_save({"step": 7 * seed, "run": {"positions": 100 * seed, "games": seed}},
                          run / "ckpt_000000007.pt")
        code = ablate.main([
            "--name", name, "--eval-only", "--config", "smoke", "--reference", str(ref),
            "--pairs", "1", "--simulations", "2", "--ply-limit", "12", "--root", str(tmp_path / "runs"),
            "--table", str(table), "--", "mcts.simulations=4",
        ])
        assert code == 0
        # no record of the training: a reference other than the default is not the protocol's
        (path,) = run.glob("ablation_vs_ref_*_seed0.json")
        result = json.loads(path.read_text())
        ev = result["evaluation"]
        assert ev["games"] == 2 and ev["wins"] + ev["draws"] + ev["losses"] == 2
        assert result["counters"] == {"positions": 100 * seed, "games": seed, "steps": 7 * seed}
        assert result["overrides"] == ["mcts.simulations=4"]
    text = table.read_text()
    assert text.startswith("# Ablations\n\nSome text above the table.\n")
    assert text.count("| variant | overrides |") == 1  # one header, however many rows
    rows = [line for line in text.splitlines() if line.startswith("| a ") or line.startswith("| b ")]
    assert len(rows) == 2
    assert "`mcts.simulations=4`" in rows[0] and "| 100 | 7 |" in rows[0] and "| 200 | 14 |" in rows[1]
    assert "python scripts/ablate.py --eval-only --name a --config smoke" in rows[0]


def test_missing_best_model_and_bad_arguments(tmp_path: Path) -> None:
    ablate = _load_script()
    ref = tmp_path / "ref.pt"
    _tiny_model(ref, 0)
    assert ablate.main(["--name", "none", "--eval-only", "--config", "smoke", "--reference", str(ref),
                        "--root", str(tmp_path)]) == 1
    with pytest.raises(SystemExit):
        ablate.main(["--name", "x", "--minutes", "0", "--reference", str(ref)])
    with pytest.raises(SystemExit):
        ablate.main(["--name", "x", "--reference", str(tmp_path / "missing.pt")])
    with pytest.raises(SystemExit):
        ablate.main(["--name", "x", "--threads", "0", "--reference", str(ref)])


@pytest.mark.slow  # the whole queued protocol: an ablation evaluation of two networks
def test_train_only_then_eval_only_keeps_the_training_wall_time(tmp_path: Path, monkeypatch) -> None:
    """Queued protocol: --train-only records the wall time (adding up over a stopped and continued
    run) and evaluates nothing; --eval-only later reports that wall time in its row's JSON."""
    ablate = _load_script()
    from takzero.pipeline.checkpoints import atomic_torch_save

    ref = tmp_path / "ref.pt"
    _tiny_model(ref, 0)
    run = tmp_path / "runs" / "q"
    calls: list[list[str]] = []

    def fake_train(args, run_dir: Path) -> float:
        calls.append(list(args.overrides))
        _tiny_model(run_dir / "best.pt", 3)
        atomic_torch_save({"step": 5, "run": {"positions": 50, "games": 2}}, run_dir / "ckpt_000000005.pt")
        return 12.5

    monkeypatch.setattr(ablate, "train", fake_train)
    speeds = iter([101.0, 99.0, 98.0, 97.0])  # what the machine-speed checks measure, in order
    monkeypatch.setattr(ablate, "machine_speed", lambda config, seconds, seed: next(speeds))
    common = ["--name", "q", "--config", "smoke", "--reference", str(ref), "--root", str(tmp_path / "runs")]
    table = tmp_path / "t.md"
    for expected_wall in (12.5, 25.0):
        assert ablate.main([*common, "--train-only", "--table", str(table), "--", "mcts.simulations=4"]) == 0
        record = json.loads((run / "ablate_train.json").read_text())
        assert record["train_wall_s"] == expected_wall
        assert record["counters"] == {"positions": 50, "games": 2, "steps": 5}
    assert calls == [["mcts.simulations=4"]] * 2
    assert record["machine_speed"] == [101.0, 99.0, 98.0, 97.0]  # before and after each session
    assert not (run / "ablation.json").exists() and not table.exists()  # nothing evaluated yet
    args = [*common, "--eval-only", "--pairs", "1", "--simulations", "2", "--ply-limit", "12", "--table", str(table)]
    with pytest.raises(SystemExit):  # other overrides than the run was trained with: refused
        ablate.main([*args, "--", "mcts.simulations=8"])
    with pytest.raises(SystemExit):  # another config than the run was trained with: refused
        ablate.main([*args, "--config", "5x5_cpu"])
    assert ablate.main(args) == 0  # no overrides given: the recorded ones
    assert len(calls) == 2  # --eval-only trains nothing
    result = json.loads((run / "ablation.json").read_text())
    assert result["train_wall_s"] == 25.0
    assert result["overrides"] == ["mcts.simulations=4"]
    assert result["command"].endswith("-- mcts.simulations=4")
    assert "--eval-only" not in result["command"] and "--train-only" not in result["command"]
    assert table.read_text().count("| q |") == 1 and "| `mcts.simulations=4` |" in table.read_text()
    assert "| smoke, 30 min, machine 101/99/98/97 pos/s |" in table.read_text()
    assert result["machine_speed"] == [101.0, 99.0, 98.0, 97.0]
    with pytest.raises(SystemExit):
        ablate.main([*common, "--train-only", "--eval-only"])
    with pytest.raises(SystemExit):  # the openings' seed means nothing to a training
        ablate.main([*common, "--train-only", "--eval-seed", "1"])


def _two_runs(ablate, tmp_path: Path, monkeypatch) -> tuple[Path, Path, list[str], list[str]]:
    """A reference network and two fake-trained runs under tmp_path/runs: 'base' (seed 0) and
    'var' (seed 7), both recorded for that reference. Returns (ref, root, common, evals)."""
    from takzero.pipeline.checkpoints import atomic_torch_save

    ref = tmp_path / "ref.pt"
    _tiny_model(ref, 0)
    root = tmp_path / "runs"
    monkeypatch.setattr(ablate, "machine_speed", lambda config, seconds, seed: 100.0)

    def fake_train(args, run_dir: Path) -> float:
        _tiny_model(run_dir / "best.pt", 3 + args.seed)
        atomic_torch_save({"step": 5, "run": {"positions": 50, "games": 2}}, run_dir / "ckpt_000000005.pt")
        return 10.0

    monkeypatch.setattr(ablate, "train", fake_train)
    common = ["--config", "smoke", "--root", str(root), "--table", str(tmp_path / "t.md")]
    evals = ["--pairs", "2", "--simulations", "2", "--ply-limit", "12"]
    assert ablate.main(["--name", "base", "--train-only", "--reference", str(ref), *common]) == 0
    assert ablate.main(["--name", "var", "--train-only", "--seed", "7", "--reference", str(ref), *common]) == 0
    return ref, root, common, evals


def _results(run: Path, pattern: str = "ablation_vs_*.json") -> list[dict]:
    return [json.loads(f.read_text()) for f in sorted(run.glob(pattern))]


@pytest.mark.slow  # whole ablation evaluations
def test_head_to_head_against_another_run_on_other_openings(tmp_path: Path, monkeypatch, capsys) -> None:
    """--reference ROOT/base/best.pt --eval-seed N: the variant against the baseline run on the
    openings of seed N; its JSON goes beside (not over) the protocol's ablation.json, its row names
    the reference run and the openings, the training seed stays the recorded one, and two seeds
    are pooled."""
    ablate = _load_script()
    ref, root, common, evals = _two_runs(ablate, tmp_path, monkeypatch)
    table = tmp_path / "t.md"
    record = json.loads((root / "var" / "ablate_train.json").read_text())
    assert record["seed"] == 7 and record["reference"] == str(ref.resolve())
    base = root / "base" / "best.pt"
    with pytest.raises(SystemExit):  # another training seed than the recorded one: refused
        ablate.main(["--name", "var", "--eval-only", "--seed", "8", "--reference", str(base), *common, *evals])
    assert "trained with seed 7" in capsys.readouterr().err
    played = {}
    for seed in (0, 1):
        assert ablate.main(["--name", "var", "--eval-only", "--reference", str(base), "--eval-seed", str(seed),
                            *common, *evals]) == 0
        (path,) = (root / "var").glob(f"ablation_vs_base_best_*_seed{seed}.json")
        result = json.loads(path.read_text())
        assert result["eval_seed"] == seed and result["seed"] == 7
        assert result["reference"] == str(base) and result["evaluation"]["seed"] == seed
        assert result["evaluation"]["baseline"] == f"model:{base}:2"
        assert result["evaluation"]["games"] == 4
        # the command evaluates again, it does not train the variant again
        assert result["command"].startswith("python scripts/ablate.py --eval-only --seed 7 --name var")
        played[seed] = result["evaluation"]
        out = capsys.readouterr().out
        if seed == 0:  # one seed: nothing to pool
            assert "pooled" not in out
    wdl = [sum(played[s][k] for s in (0, 1)) for k in ("wins", "draws", "losses")]
    pooled = "[ablate] var against base/best.pt, pooled over the openings' seeds 0, 1: "
    assert f"{pooled}{wdl[0]}-{wdl[1]}-{wdl[2]} (W-D-L), Elo " in out
    assert not (root / "var" / "ablation.json").exists()  # the protocol's own evaluation is another file
    rows = [line for line in table.read_text().splitlines() if line.startswith("| var |")]
    assert len(rows) == 2
    assert "| base/best.pt, 4 games at 2 sims, openings seed 0 |" in rows[0]
    assert "| base/best.pt, 4 games at 2 sims, openings seed 1 |" in rows[1]
    assert ablate.reference_label(ref) == "ref.pt"
    assert ablate.reference_label(root / "base" / "ckpt_000000005.pt") == "base/ckpt_000000005.pt"
    # the recorded command replays the evaluation from any folder
    monkeypatch.chdir("/")
    assert ablate.main(shlex.split(result["command"].removeprefix("python scripts/ablate.py "))) == 0
    assert len(_results(root / "var")) == 2  # the same evaluation again, into the same file


@pytest.mark.slow  # whole ablation evaluations
def test_references_never_share_a_result_file(tmp_path: Path, monkeypatch) -> None:
    """Two references whose labels agree (the same run name under two roots, odd characters,
    a long name) get two files; a reference outside --root never replaces the protocol's
    ablation.json; a symlink names the file it points to."""
    ablate = _load_script()
    ref, root, common, evals = _two_runs(ablate, tmp_path, monkeypatch)
    var = root / "var"
    assert ablate.main(["--name", "var", "--eval-only", "--seed", "7", *common, *evals]) == 0  # the protocol's
    protocol = (var / "ablation.json").read_text()
    others = [tmp_path / "other" / "base" / "best.pt", root / "deep" / "base" / "best.pt",
              root / "base_best.pt", root / "a b" / "best.pt", root / "a_b" / "best.pt",
              root / ("y" * 240 + ".pt")]
    for other in others:
        _tiny_model(other, 11)
    (tmp_path / "link.pt").symlink_to(root / "a_b" / "best.pt")
    names = set()
    for other in [*others, tmp_path / "link.pt"]:
        args = ablate.argparse.Namespace(reference=str(other), root=str(root), eval_seed=7, seed=7)
        name = ablate.result_name(args, ref)
        assert len(name) < 120 and ablate.RESULT_FILE.fullmatch(name)
        names.add(name)
    assert len(names) == len(others)  # the symlink shares the file of what it points to
    for other in others[:2]:  # outside --root, and another run called base
        assert ablate.main(["--name", "var", "--eval-only", "--reference", str(other), *common, *evals]) == 0
    assert (var / "ablation.json").read_text() == protocol
    assert len(_results(var)) == 2


@pytest.mark.slow  # whole ablation evaluations
def test_pooling_skips_damaged_stray_and_other_network_files(tmp_path: Path, monkeypatch, capsys) -> None:
    """Hand-edited or damaged result files never break an evaluation and are never pooled; nor
    is a stray copy, an evaluation of another version of the reference or of the variant, or one
    played with another move choice (``select_q_fraction``; absent: the most visited move)."""
    ablate = _load_script()
    ref, root, common, evals = _two_runs(ablate, tmp_path, monkeypatch)
    var, base = root / "var", root / "base" / "best.pt"
    h2h = ["--name", "var", "--eval-only", "--reference", str(base), *common, *evals]
    assert ablate.main([*h2h, "--eval-seed", "1"]) == 0
    (good,) = var.glob("ablation_vs_*_seed1.json")
    template = json.loads(good.read_text())
    digest = good.name.split("_")[-2]
    damaged = {20: ("wins", None), 21: ("wins", -50), 22: ("wins", "x"), 23: ("wins", 1.5), 24: ("draws", True)}
    for seed, (key, value) in damaged.items():
        r = json.loads(json.dumps(template))
        r["eval_seed"] = seed
        r["evaluation"][key] = value
        (var / f"ablation_vs_base_best_{digest}_seed{seed}.json").write_text(json.dumps(r))
    (var / f"ablation_vs_base_best_{digest}_seed25.json").write_text('{"eval_seed": Infinity, "evaluation": [')
    (var / f"ablation_vs_base_best_{digest}_seed26.json").write_text('{"eval_seed": 1e999}')
    stray = json.loads(json.dumps(template)) | {"eval_seed": 30}
    (var / "ablation_old_copy.json").write_text(json.dumps(stray))
    for seed, field in ((31, "reference_sha256"), (32, "model_sha256")):  # another network
        r = json.loads(json.dumps(template)) | {"eval_seed": seed, field: "0" * 64}
        (var / f"ablation_vs_base_best_{digest}_seed{seed}.json").write_text(json.dumps(r))
    for seed, choice in ((33, None), (34, 0.0)):  # played with the most visited move (before the field)
        r = json.loads(json.dumps(template)) | {"eval_seed": seed}
        r["evaluation"].pop("select_q_fraction")
        if choice is not None:
            r["evaluation"]["select_q_fraction"] = choice
        (var / f"ablation_vs_base_best_{digest}_seed{seed}.json").write_text(json.dumps(r))
    capsys.readouterr()
    assert ablate.main([*h2h, "--eval-seed", "2"]) == 0
    assert "pooled over the openings' seeds 1, 2: " in capsys.readouterr().out
    _tiny_model(base, 99)  # the baseline trained further: older evaluations are of another network
    assert ablate.main([*h2h, "--eval-seed", "3"]) == 0
    assert "pooled" not in capsys.readouterr().out


def test_record_problems_and_paths(tmp_path: Path, monkeypatch, capsys) -> None:
    """A record with a bad value is named with status 2; a record written before the seed was
    recorded takes the run's config.yaml seed; a relative --root is the same folder for the
    training and for this script; a bare -- does not break the row's command; the variant is
    not its own reference."""
    ablate = _load_script()
    ref, root, common, evals = _two_runs(ablate, tmp_path, monkeypatch)
    path = root / "var" / "ablate_train.json"
    good = json.loads(path.read_text())
    for value in ("7", None, 7.0, True, -1):
        path.write_text(json.dumps(good | {"seed": value}))
        with pytest.raises(SystemExit) as e:
            ablate.main(["--name", "var", "--eval-only", *common, *evals])
        assert e.value.code == 2 and "ablate_train.json: seed" in capsys.readouterr().err
    path.write_text(json.dumps({k: v for k, v in good.items() if k != "seed"}))
    (root / "var" / "config.yaml").write_text("run_name: var\nseed: 7\n")
    with pytest.raises(SystemExit):
        ablate.main(["--name", "var", "--eval-only", "--seed", "5", *common, *evals])
    assert "trained with seed 7, not 5" in capsys.readouterr().err
    path.write_text(json.dumps(good))
    with pytest.raises(SystemExit):
        ablate.main(["--name", "var", "--eval-only", "--reference", str(root / "var" / "best.pt"), *common, *evals])
    assert "is the variant's own network" in capsys.readouterr().err
    seen: list[str] = []
    monkeypatch.setattr(ablate, "train", lambda args, run_dir: seen.append(args.root) or 1.0)
    monkeypatch.chdir(tmp_path)
    assert ablate.main(["--name", "var", "--train-only", "--config", "smoke", "--root", "runs", "--seed", "7",
                        "--"]) == 0
    assert seen == [str(root.resolve())]
    assert ablate.main(["--name", "var", "--eval-only", "--root", "runs", "--table", "t.md", *evals, "--"]) == 0
    command = json.loads((root / "var" / "ablation.json").read_text())["command"]
    assert command.count(" -- ") == 0 and f"--root {root.resolve()}" in command


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--minutes", "nan"], "--minutes must be a number > 0"),
        (["--minutes", "inf"], "--minutes must be a number > 0"),
        (["--pairs", "20000"], "--pairs must be in 1.."),
        (["--ply-limit", "0"], "--ply-limit must be in 1.."),
        (["--name", "a b;c"], "run_name"),
        (["--name", "../esc"], "run_name"),
        (["--config", "nosuch"], "config:"),
        (["--table", "/nonexistent-folder/t.md"], "no folder /nonexistent-folder"),
        (["--", "run_name=other"], "set it with --name"),
        (["--", "checkpoint_root=/elsewhere"], "set it with --root"),
        (["--", "train.max_minutes=5"], "set it with --minutes"),
        (["--", "notakeyvalue"], "is not key=value"),
        (["--", "mcts.bogus=1"], "mcts.bogus: not a config key"),
        (["--", "mcts.gumbel=maybe"], "mcts.gumbel"),
        (["--speed-seconds", "nan"], "--speed-seconds must be in 0..600"),
        (["--speed-seconds", "-1"], "--speed-seconds must be in 0..600"),
        (["--seed", "-1"], "--seed must be in 0.."),
        (["--eval-seed", "-3"], "--eval-seed must be in 0.."),
        (["--eval-seed", "4294967296"], "--eval-seed must be in 0.."),
    ],
)
def test_bad_input_is_refused_before_training(
    tmp_path: Path, monkeypatch, capsys, extra: list[str], message: str
) -> None:
    """Every mistake that can be found before a 30-minute training is: argparse's error (status
    2) naming the option, nothing trained, no run folder made."""
    ablate = _load_script()
    monkeypatch.setattr(ablate, "train", lambda *a: pytest.fail("trained despite bad input"))
    ref = tmp_path / "ref.pt"
    _tiny_model(ref, 0)
    root = tmp_path / "runs"
    args = ["--name", "v", "--config", "smoke", "--reference", str(ref), "--root", str(root),
            "--table", str(tmp_path / "t.md")]
    options = [a for a in extra if a != "--" and "=" not in a] if "--" not in extra else []
    for flag, value in zip(options[::2], options[1::2], strict=True):  # replace the option's default
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    if "--" in extra:
        args += extra
    with pytest.raises(SystemExit) as exc:
        ablate.main(args)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not root.exists()


def test_reference_of_another_board_size_and_a_corrupt_record(tmp_path: Path, capsys) -> None:
    ablate = _load_script()
    ref = tmp_path / "ref.pt"
    _tiny_model(ref, 0)  # 4x4
    with pytest.raises(SystemExit):
        ablate.main(["--name", "v", "--config", "5x5_cpu", "--reference", str(ref), "--root", str(tmp_path / "r")])
    assert "plays 4x4, but --config 5x5_cpu trains 5x5" in capsys.readouterr().err
    run = tmp_path / "r" / "v"
    run.mkdir(parents=True)
    (run / "ablate_train.json").write_text('{"train_wall_s": 5, "conf')
    with pytest.raises(SystemExit):
        ablate.main(["--name", "v", "--config", "smoke", "--reference", str(ref), "--root", str(tmp_path / "r")])
    assert "ablate_train.json cannot be read" in capsys.readouterr().err


def test_failed_training_is_a_message_not_a_traceback(tmp_path: Path, monkeypatch, capsys) -> None:
    ablate = _load_script()
    ref = tmp_path / "ref.pt"
    _tiny_model(ref, 0)

    def failing(args, run_dir: Path) -> float:
        raise RuntimeError(f"training exited with status 2; see {run_dir / 'ablate_train.log'}")

    monkeypatch.setattr(ablate, "train", failing)
    code = ablate.main(["--name", "v", "--config", "smoke", "--reference", str(ref), "--root", str(tmp_path / "r"),
                        "--speed-seconds", "0"])
    assert code == 1
    assert "[ablate] training exited with status 2" in capsys.readouterr().err
    assert not (tmp_path / "r" / "v" / "ablate_train.json").exists()  # nothing recorded for a failed training


def test_machine_speed_runs_the_fixed_self_play_workload() -> None:
    """The check plays real self-play steps of the plain preset: a positive rate, at least one
    step even when the time is shorter than a step, torch's thread count restored, and a time
    that is not > 0 refused."""
    ablate = _load_script()
    threads = torch.get_num_threads()
    speed = ablate.machine_speed("smoke", 0.01)
    assert speed > 0 and torch.get_num_threads() == threads
    with pytest.raises(ValueError, match="seconds must be > 0"):
        ablate.machine_speed("smoke", 0.0)


def test_eval_only_problems_are_messages_with_status_1(tmp_path: Path, capsys) -> None:
    """No run folder, a best.pt that is not a model: one line naming it, status 1, no traceback."""
    ablate = _load_script()
    ref = tmp_path / "ref.pt"
    _tiny_model(ref, 0)
    common = ["--eval-only", "--config", "smoke", "--reference", str(ref), "--root", str(tmp_path / "runs"),
              "--no-table"]
    assert ablate.main(["--name", "nothere", *common]) == 1
    assert "no run folder" in capsys.readouterr().err
    (tmp_path / "runs" / "bad").mkdir(parents=True)
    (tmp_path / "runs" / "bad" / "best.pt").write_text("garbage\n")
    assert ablate.main(["--name", "bad", *common]) == 1
    assert "[ablate] evaluation of" in capsys.readouterr().err


def test_a_reference_the_eval_backend_cannot_run_is_refused_before_training(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    pytest.importorskip("onnxruntime")
    ablate = _load_script()
    from takzero.nn.inference import Evaluator
    from takzero.nn.model_export import export_torchscript

    ref = tmp_path / "ref.pt"
    _tiny_model(ref, 0)
    ts = tmp_path / "ref.ts"
    export_torchscript(Evaluator.load(str(ref)).model, ts)
    monkeypatch.setattr(ablate, "train", lambda *a: pytest.fail("trained despite a reference onnx cannot run"))
    with pytest.raises(SystemExit) as e:
        ablate.main(["--name", "v", "--config", "smoke", "--reference", str(ts), "--root", str(tmp_path / "r")])
    assert e.value.code == 2 and "give --eval-backend torch" in capsys.readouterr().err


@pytest.mark.parametrize(("wdl", "elo"), [((0, 0, 2), "< +"), ((20, 0, 0), "> +"), ((1, 0, 1), "+0 [-")])
def test_row_elo_says_a_one_sided_result_as_its_bound(wdl: tuple[int, int, int], elo: str) -> None:
    ablate = _load_script()
    w, d, loss = wdl
    text = ablate._fmt_elo({"wins": w, "draws": d, "losses": loss})
    assert text.startswith(elo) and "inf" not in text
    assert ablate._fmt_elo({}) == "?"
