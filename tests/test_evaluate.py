"""The evaluation CLI (``python -m takzero.evaluate``): a model against the baselines."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from takzero.evaluate import main
from takzero.matches.evaluation import evaluate_model
from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
from takzero.players.network import DEFAULT_SELECT_Q_FRACTION


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    net = TakNet(ModelConfig(size=3, channels=8, blocks=1))
    path = tmp_path / "tiny.pt"
    d = checkpoint_dict(net)
    d["half_komi"] = 1
    torch.save(d, path)
    return path


@pytest.mark.slow  # a whole paired match
def test_evaluate_model_plays_paired_games(tiny_model: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    out = evaluate_model(
        str(tiny_model), ["random", "uct:20"], pairs=3, simulations=8, ply_limit=40,
        ptn_dir=str(tmp_path / "games"), say=lines.append,
    )
    assert [r["baseline"] for r in out] == ["random", "uct:20"]
    for r, line in zip(out, lines, strict=True):
        printed = json.loads(line)
        assert printed == {k: (None if v in (float("inf"), float("-inf")) else v) for k, v in r.items()}
        assert r["games"] == 6 and r["wins"] + r["draws"] + r["losses"] == 6
        assert r["size"] == 3 and r["half_komi"] == 1  # the model's komi
        assert r["elo_model"] == "pentanomial"  # every opening with both colours
        assert 0.0 <= r["score_lower"] <= r["score"] <= r["score_upper"] <= 1.0
        assert 0.0 <= r["score_wilson_lower"] <= r["score"] <= r["score_wilson_upper"] <= 1.0
    text = (tmp_path / "games" / "vs_uct20.ptn").read_text()
    assert text.count("[Size \"3\"]") == 6 and "takzero:tiny.pt" in text


def test_evaluate_rejects_bad_arguments(tiny_model: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ValueError, match="unknown player"):
        evaluate_model(str(tiny_model), ["minimax"], pairs=1, simulations=4, ply_limit=20)
    with pytest.raises(ValueError, match="pairs must be in 1..10000"):
        evaluate_model(str(tiny_model), ["random"], pairs=0, simulations=4, ply_limit=20)
    for argv, message in (
        ([str(tiny_model), "--simulations", "0"], "simulations must be in 1..1000000"),
        ([str(tiny_model), "--ply-limit", "0"], "ply limit must be in 1..10000"),
        ([str(tiny_model), "--ply-limit", "99999999999999999999"], "ply limit must be in"),
        ([str(tiny_model), "--pairs", "99999999999999999999"], "pairs must be in 1..10000"),
        ([str(tiny_model), "--threads", "100000"], "--threads must be in 0..1024"),
        ([str(tiny_model), "--baselines", "random", "random"], "a baseline is given twice"),
        ([str(Path(__file__).parent)], "not a model file"),
        (["missing.pt"], "model file not found: missing.pt"),
        ([str(tiny_model), "--baselines", "uct:x"], "unknown player 'uct:x'"),
        ([str(tiny_model), "--komi", "0.3"], "komi must be a multiple of 0.5"),
        ([str(Path(__file__)), "--pairs", "1"], "cannot load model"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert message in capsys.readouterr().err


@pytest.mark.slow  # the command line as a process
def test_evaluate_cli_prints_json_lines(tiny_model: Path, capsys: pytest.CaptureFixture) -> None:
    assert main([str(tiny_model), "--baselines", "greedy", "--pairs", "1", "--simulations", "4",
                 "--komi", "0"]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    r = json.loads(line)
    assert r["baseline"] == "greedy" and r["games"] == 2 and r["half_komi"] == 0


def test_evaluate_links(tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``--links``: a JSON line per game before the summary, whose link opens that game."""
    from takzero.game.ptn import read_ptn, read_ptn_file
    from takzero.io.ptn_ninja import read_ptn_ninja_url

    assert main([str(tiny_model), "--baselines", "random", "--pairs", "1", "--simulations", "4",
                 "--ptn-dir", str(tmp_path), "--links"]) == 0
    *games, summary = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert summary["games"] == 2 and "ptn_ninja" not in summary
    written = read_ptn_file(tmp_path / "vs_random.ptn")
    assert [g["game"] for g in games] == [1, 2]
    for line, game in zip(games, written, strict=True):
        (linked,) = read_ptn(read_ptn_ninja_url(line["ptn_ninja"])[0])
        assert linked == game and line["result"] == game.result and line["plies"] == len(game.moves)
        assert line["white"] == game.tags["Player1"] and line["baseline"] == "random"


def test_wilson_interval() -> None:
    from takzero.matches.stats import wilson_interval

    assert wilson_interval(1.0, 200) == (0.9812, 1.0)  # all won: a real lower bound, not 1.0
    assert wilson_interval(0.0, 200) == (0.0, 0.0188)
    lo, hi = wilson_interval(0.5, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4) and hi == pytest.approx(0.5962, abs=1e-4)
    with pytest.raises(ValueError):
        wilson_interval(0.5, 0)


def test_shipped_5x5_model_beats_random() -> None:
    """The model in checkpoints/pretrained (docs/results.md) still loads and plays: it won 200 of
    200 games against random at 200 simulations; 16 simulations are plenty for 6 games."""
    model = Path(__file__).resolve().parents[1] / "checkpoints" / "pretrained" / "5x5.pt"
    (r,) = evaluate_model(str(model), ["random"], pairs=3, simulations=16, ply_limit=150, say=print)
    assert r["size"] == 5 and r["half_komi"] == 0
    assert r["wins"] == 6, r


def test_unwritable_ptn_file_fails_before_any_game(tiny_model: Path, tmp_path: Path) -> None:
    (tmp_path / "pd" / "vs_greedy.ptn").mkdir(parents=True)  # the second baseline's file
    lines: list[str] = []
    with pytest.raises(IsADirectoryError):
        evaluate_model(str(tiny_model), ["random", "greedy"], pairs=1, simulations=2, ply_limit=10,
                       ptn_dir=str(tmp_path / "pd"), say=lines.append)
    assert lines == []  # no game was played


def test_a_line_per_finished_game_and_the_elo(tiny_model: Path) -> None:
    progress: list[str] = []
    out = evaluate_model(str(tiny_model), ["random"], pairs=2, simulations=2, ply_limit=20,
                         say=lambda line: None, progress=progress.append)
    games = [ln for ln in progress if ln.startswith("vs random: game ")]
    assert [ln.split(":")[1].split("/")[0] for ln in games] == [" game 1", " game 2", " game 3", " game 4"]
    r = out[0]
    assert games[-1].endswith(f"{r['wins']}-{r['draws']}-{r['losses']} (W-D-L)")
    # stderr's Elo line is the JSON's interval, its model named
    tally = f"{r['wins']}-{r['draws']}-{r['losses']} (W-D-L)"
    assert r["elo_model"] == "pentanomial"
    assert progress[-1].startswith(f"vs random: {tally}, score {r['score']:.3f}, Elo ")
    assert progress[-1].endswith("(95%, pentanomial score-test interval, 2 game pairs)")
    shown = progress[-1].split("Elo ", 1)[1].split(" (")[0]  # '+12.3 [-200.1, +250.0]'
    def num(x: str) -> float:
        return float(x.strip("[],").replace("inf", "Infinity"))
    elo, lower, upper = (num(x) for x in shown.split())
    for got, key in ((elo, "elo"), (lower, "elo_lower"), (upper, "elo_upper")):
        want = r[key]
        assert got == pytest.approx(want, abs=0.051) if math.isfinite(want) else got == want
    assert r["elo_wilson_lower"] < r["elo_wilson_upper"]


def test_interrupt_reports_the_finished_games(tiny_model: Path, tmp_path: Path) -> None:
    """Ctrl-C (raised here after the first finished game) prints the score so far: a JSON line
    marked interrupted, the Elo line, the finished games as PTN; then MatchInterrupted."""
    from takzero.matches.results import MatchInterrupted

    said: list[str] = []
    progress: list[str] = []

    def on_progress(line: str) -> None:
        progress.append(line)
        if " game 1/" in line:
            raise KeyboardInterrupt

    with pytest.raises(MatchInterrupted) as info:
        evaluate_model(str(tiny_model), ["random", "greedy"], pairs=2, simulations=2, ply_limit=20,
                       say=said.append, progress=on_progress, ptn_dir=str(tmp_path))
    assert info.value.result.num_games == 1
    (line,) = said
    partial = json.loads(line)
    assert partial["interrupted"] is True and partial["games"] == 1 and partial["baseline"] == "random"
    tally = f"{partial['wins']}-{partial['draws']}-{partial['losses']} (W-D-L)"
    assert progress[-1] == (f"interrupted: vs random after 1 of 4 games; {tally}, score {partial['score']:.3f}, "
                            "Elo too few games (1) for an Elo interval")
    assert (tmp_path / "vs_random.ptn").read_text().count('[Size "3"]') == 1


def test_cli_ctrl_c_exits_130(tiny_model: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import takzero.evaluate as ev

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ev, "evaluate", interrupted)
    assert main([str(tiny_model), "--baselines", "random"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_a_baseline_network_of_another_size_is_refused(tiny_model: Path, tmp_path: Path) -> None:
    torch.manual_seed(0)
    other = tmp_path / "other.pt"
    torch.save(checkpoint_dict(TakNet(ModelConfig(size=4, channels=8, blocks=1))), other)
    with pytest.raises(ValueError, match=r"baseline model:.* plays 4x4, not the model's 3x3"):
        evaluate_model(str(tiny_model), ["random", f"model:{other}"], pairs=1, simulations=2, ply_limit=10)


def test_an_unusable_ptn_dir_is_refused_at_start_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """--ptn-dir a file (or below one): exit 2 naming --ptn-dir before the model is read; the PTN
    files of an earlier evaluation are not emptied by a run that plays no game."""
    not_a_model = tmp_path / "x.pt"
    not_a_model.write_text("not a model")
    (tmp_path / "afile").write_text("x")
    for ptn_dir in (tmp_path / "afile", tmp_path / "afile" / "sub"):
        with pytest.raises(SystemExit) as exc:
            main([str(not_a_model), "--ptn-dir", str(ptn_dir)])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "--ptn-dir" in err and "cannot load model" not in err
    games = tmp_path / "games"
    games.mkdir()
    (games / "vs_random.ptn").write_text("[Event \"earlier\"]\n\n1. a1 e5\n")
    with pytest.raises(SystemExit) as exc:
        main([str(not_a_model), "--baselines", "random", "--ptn-dir", str(games)])
    assert exc.value.code == 2 and "cannot load model" in capsys.readouterr().err
    assert (games / "vs_random.ptn").read_text().startswith("[Event \"earlier\"]")


def test_onnx_backend_runs_the_model_and_the_model_baselines_in_onnxruntime(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``backend='onnx'``: the model and each ``model:`` baseline are evaluated by onnxruntime
    sessions (other baselines are not networks); the JSON says which backend played."""
    pytest.importorskip("onnxruntime")
    import takzero.nn.backends as backends

    made = []
    real = backends.onnx_evaluator

    def recording(model, threads=1):
        made.append(real(model, threads))
        return made[-1]

    monkeypatch.setattr(backends, "onnx_evaluator", recording)
    (r1, r2) = evaluate_model(
        str(tiny_model), [f"model:{tiny_model}:4", "random"], pairs=1, simulations=4, ply_limit=20,
        say=lambda line: None, backend="onnx",
    )
    assert r1["backend"] == r2["backend"] == "onnx" and r1["games"] == r2["games"] == 2
    assert r1["baseline_simulations"] == 4 and "baseline_simulations" not in r2  # random is no network
    assert len(made) == 2 and all(m._session is not None for m in made)


def test_onnx_backend_agrees_with_torch_on_the_shipped_model() -> None:
    """The same network in both backends: priors and values agree to float rounding on mid-game
    5x5 positions of the shipped model."""
    pytest.importorskip("onnxruntime")
    import numpy as np

    from takzero.game import Position
    from takzero.nn.backends import with_backend
    from takzero.nn.inference import Evaluator

    ev = Evaluator.load(str(Path(__file__).resolve().parents[1] / "checkpoints/pretrained/5x5.pt"))
    ox = with_backend(ev, "onnx", threads=1)
    rng = np.random.default_rng(0)
    states = []
    for k in range(24):
        pos = Position.start(5)
        for _ in range(k):
            codes = pos.legal_move_codes()
            if len(codes) == 0:
                break
            pos = pos.play(int(codes[rng.integers(len(codes))]))
        states.append(pos.state.copy())
    s = np.stack(states)
    for a, b in zip(ev.evaluate(s), ox.evaluate(s), strict=True):
        assert np.abs(a - b).max() < 1e-4


def test_bad_backend_and_torchscript_with_onnx_are_refused(tiny_model: Path, tmp_path: Path, capsys) -> None:
    from takzero.nn.backends import with_backend
    from takzero.nn.inference import Evaluator
    from takzero.nn.model_export import export_torchscript

    with pytest.raises(ValueError, match="backend must be one of auto, torch, onnx"):
        evaluate_model(str(tiny_model), ["random"], pairs=1, simulations=2, ply_limit=10, backend="tpu")
    with pytest.raises(SystemExit):
        main([str(tiny_model), "--baselines", "random", "--backend", "tpu"])
    assert "invalid choice: 'tpu'" in capsys.readouterr().err
    ev = Evaluator.load(str(tiny_model))
    assert with_backend(ev, "torch") is ev
    ts = tmp_path / "tiny.ts"
    export_torchscript(ev.model, ts)
    pytest.importorskip("onnxruntime")
    with pytest.raises(ValueError, match="not a TorchScript export"):
        with_backend(Evaluator.load(str(ts)), "onnx")
    # auto: the checkpoint runs in onnxruntime quantized to int8 (and says so: it was labelled
    # "onnx"), the TorchScript baseline stays on torch
    (r,) = evaluate_model(str(tiny_model), [f"model:{ts}:2"], pairs=1, simulations=2, ply_limit=10,
                          say=lambda line: None)
    assert r["backend"] == "int8" and r["games"] == 2
    (r,) = evaluate_model(str(ts), ["random"], pairs=1, simulations=2, ply_limit=10, say=lambda line: None)
    assert r["backend"] == "torch"


def test_onnx_backend_errors_name_the_network_and_threads_follow_torch(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TorchScript baseline under ``backend='onnx'`` is named with the way out; with
    ``threads=0`` both sessions get torch's thread count as it was before a model baseline set
    one thread for its own searches."""
    pytest.importorskip("onnxruntime")
    import takzero.nn.backends as backends
    from takzero.nn.inference import Evaluator
    from takzero.nn.model_export import export_torchscript

    ts = tmp_path / "tiny.ts"
    export_torchscript(Evaluator.load(str(tiny_model)).model, ts)
    with pytest.raises(ValueError, match=rf"baseline model:{ts}: .*TorchScript.*use --backend torch"):
        evaluate_model(str(tiny_model), [f"model:{ts}"], pairs=1, simulations=2, ply_limit=10, backend="onnx")
    seen: list[int] = []
    real = backends.onnx_evaluator
    monkeypatch.setattr(backends, "onnx_evaluator",
                        lambda model, threads=1: seen.append(threads) or real(model, threads))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        evaluate_model(str(tiny_model), [f"model:{tiny_model}:2"], pairs=1, simulations=2, ply_limit=8,
                       say=lambda line: None, backend="onnx")
    finally:
        torch.set_num_threads(before)
    assert seen == [2, 2]


def test_gumbel_root_for_the_model_only(tiny_model: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """``gumbel_m`` >= 1 (``--gumbel M``) searches the model with the Gumbel root over M moves, and
    ``select_q_fraction`` (``--select-q F``, default the players') sets its PUCT move choice; the
    summary says which the model used, and bad values are refused before any game."""
    import takzero.matches.evaluation as evaluation

    seen = []
    real = evaluation.play_match

    def spy(side, player, *args, **kwargs):
        seen.append((side.config.gumbel, side.config.gumbel_m, side.config.root_noise,
                     side.config.select_q_fraction))
        return real(side, player, *args, **kwargs)

    monkeypatch.setattr(evaluation, "play_match", spy)
    (r,) = evaluate_model(str(tiny_model), ["random"], pairs=1, simulations=8, ply_limit=20,
                          say=lambda line: None, gumbel_m=4)
    assert seen[-1][:3] == (True, 4, False) and r["gumbel_m"] == 4 and r["games"] == 2
    (r,) = evaluate_model(str(tiny_model), ["random"], pairs=1, simulations=8, ply_limit=20, say=lambda line: None)
    assert seen[-1][0] is False and r["gumbel_m"] == 0  # the default: PUCT, with the players' move choice
    assert seen[-1][3] == r["select_q_fraction"] == DEFAULT_SELECT_Q_FRACTION
    (r,) = evaluate_model(str(tiny_model), ["random"], pairs=1, simulations=8, ply_limit=20,
                          say=lambda line: None, select_q_fraction=0.0)
    assert seen[-1][3] == r["select_q_fraction"] == 0.0
    import numpy as np

    (r,) = evaluate_model(str(tiny_model), ["random"], pairs=1, simulations=8, ply_limit=20,
                          say=lambda line: None, select_q_fraction=np.float32(0.25))  # any real number
    assert seen[-1][3] == r["select_q_fraction"] == 0.25
    for kwargs, message in (
        *(({"gumbel_m": bad}, "gumbel_m must be an integer in 0..100000") for bad in (-1, 1.5, "4", 10**20)),
        *(({"select_q_fraction": bad}, "select_q_fraction must be in") for bad in (-0.1, 1.5, float("nan"), "0.1")),
    ):
        with pytest.raises(ValueError, match=message):
            evaluate_model(str(tiny_model), ["random"], pairs=1, simulations=8, ply_limit=20, **kwargs)
    for argv, message in ((["--gumbel", "-2"], "--gumbel must be in 0..100000"),
                          (["--gumbel", str(10**20)], "--gumbel must be in 0..100000"),
                          (["--select-q", "2"], "--select-q must be in")):
        with pytest.raises(SystemExit) as exc:
            main([str(tiny_model), *argv])
        assert exc.value.code == 2 and message in capsys.readouterr().err
    assert len(seen) == 4  # nothing played for a refused value


def test_ptn_dir_keeps_an_earlier_runs_games(tiny_model: Path, tmp_path: Path) -> None:
    """``--ptn-dir`` of an earlier run: its vs_*.ptn files are kept; this run's files all get
    one number (vs_random_2.ptn beside vs_greedy_2.ptn, though only vs_greedy.ptn was there),
    and the progress lines say where the games went."""
    games = tmp_path / "games"
    games.mkdir()
    earlier = "[Event \"earlier\"]\n\n1. a1 c3\n"
    (games / "vs_greedy.ptn").write_text(earlier)
    for n in (2, 3):
        progress: list[str] = []
        evaluate_model(str(tiny_model), ["random", "greedy"], pairs=1, simulations=2, ply_limit=6,
                       ptn_dir=str(games), say=lambda _line: None, progress=progress.append)
        assert f"this run's games go to vs_random_{n}.ptn, vs_greedy_{n}.ptn" in progress[0]
        assert f"vs greedy: games written to {games / f'vs_greedy_{n}.ptn'}" in progress
        for name in (f"vs_random_{n}.ptn", f"vs_greedy_{n}.ptn"):
            assert (games / name).read_text().count('[Size "3"]') == 2
    assert (games / "vs_greedy.ptn").read_text() == earlier and not (games / "vs_random.ptn").exists()


def _onnx_with_metadata(tiny_model: Path, out: Path, **changes: object) -> Path:
    """``tiny_model`` exported to ONNX with its takzero metadata changed (a value of ``...``
    deletes the key)."""
    import onnx

    from takzero.pipeline.export import export_checkpoint

    plain = out.with_name("plain.onnx")
    if not plain.exists():
        export_checkpoint(str(tiny_model), plain, fmt="onnx")
    proto = onnx.load(str(plain))
    for entry in proto.metadata_props:
        if entry.key == "takzero":
            meta = json.loads(entry.value)
            for key, value in changes.items():
                if value is ...:
                    meta.pop(key)
                else:
                    meta[key] = value
            entry.value = json.dumps(meta)
    onnx.save(proto, str(out))
    return out


@pytest.mark.parametrize("model_config", [..., [], {"size": 9}, "x"])
def test_an_onnx_files_model_config_is_not_needed(tiny_model: Path, tmp_path: Path, model_config: object) -> None:
    """evaluate read the size from an ONNX file's unchecked model_config (KeyError when missing,
    AttributeError when a list): it plays the size the loader checked, as tei/play/match do."""
    model = _onnx_with_metadata(tiny_model, tmp_path / "m.onnx", model_config=model_config)
    out = evaluate_model(str(model), ["random"], pairs=1, simulations=2, ply_limit=6, say=lambda _line: None)
    assert out[0]["games"] == 2 and out[0]["size"] == 3


@pytest.mark.parametrize("half_komi", [[], "x", 1.5, True, 10**9])
def test_an_onnx_files_bad_half_komi_is_one_line(tiny_model: Path, tmp_path: Path, capsys, half_komi: object) -> None:
    model = _onnx_with_metadata(tiny_model, tmp_path / "m.onnx", half_komi=half_komi)
    with pytest.raises(SystemExit) as exc:
        main([str(model), "--baselines", "random", "--pairs", "1", "--simulations", "2"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "\n" not in err and "Traceback" not in err
    assert "half_komi" in err and "is not an integer in -200..200" in err
