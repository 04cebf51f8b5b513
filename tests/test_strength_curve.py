"""scripts/strength_curve.py: weight snapshots against a fixed network, placed by their lineage."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _load_script():
    spec = importlib.util.spec_from_file_location("strength_curve", ROOT / "scripts" / "strength_curve.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _model(path: Path, seed: int, size: int = 4, lineage: dict[str, Any] | None = None) -> Path:
    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
    from takzero.pipeline.checkpoints import atomic_torch_save

    torch.manual_seed(seed)
    extra = {"generation": seed, "run_name": "long"}
    if lineage is not None:
        extra["lineage"] = lineage
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_torch_save(checkpoint_dict(TakNet(ModelConfig(size=size, channels=8, blocks=1)), **extra), path)
    return path


def _lineage(minutes: float) -> dict[str, Any]:
    return {"minutes": minutes, "positions": int(100 * minutes), "games": 1, "steps": int(10 * minutes),
            "runs": ["a", "long"]}


def test_files_are_placed_by_lineage_and_not_played_twice(tmp_path: Path, monkeypatch, capsys) -> None:
    """Folders give their *.pt; files are played in order of the training behind them; a second
    call with --out plays none of those already there (same bytes, reference and settings) and
    plays a new one; a changed setting plays them again; --plot draws every point."""
    sc = _load_script()
    ref = _model(tmp_path / "ref.pt", 0)
    snaps = tmp_path / "run" / "snapshots"
    _model(snaps / "snapshot_00120.0min_gen0009.pt", 2, lineage=_lineage(120.0))
    _model(snaps / "snapshot_00060.0min_gen0004.pt", 1, lineage=_lineage(60.0))
    played: list[str] = []

    def fake_evaluate(path, lineage, generation, args, reference_sha, opponent=None):
        played.append(Path(path).name)
        return {"model": str(path), "model_sha256": sc.file_sha256(path), "reference_sha256": reference_sha,
                "pairs": args.pairs, "simulations": args.simulations, "ply_limit": args.ply_limit,
                "seed": args.seed, "select_q_fraction": sc.DEFAULT_SELECT_Q_FRACTION,
                "minutes": lineage.minutes, "wins": 3, "draws": 1, "losses": 2,
                "score": 7 / 12, "elo": 58.0, "elo_lower": -150.0, "elo_upper": 270.0}

    monkeypatch.setattr(sc, "evaluate_file", fake_evaluate)
    out = tmp_path / "curve.jsonl"
    assert sc.main([str(snaps), "--reference", str(ref), "--pairs", "3", "--out", str(out)]) == 0
    assert played == ["snapshot_00060.0min_gen0004.pt", "snapshot_00120.0min_gen0009.pt"]
    assert [json.loads(x)["minutes"] for x in out.read_text().splitlines()] == [60.0, 120.0]
    # a line written before the move choice was a setting was played with the most visited move
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    old_lines = tmp_path / "old.jsonl"
    old_lines.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "select_q_fraction"}) + "\n"
                                 for r in lines))
    played.clear()
    assert sc.main([str(snaps), "--reference", str(ref), "--pairs", "3", "--out", str(old_lines)]) == 0
    assert len(played) == 2
    new = _model(tmp_path / "best.pt", 3, lineage=_lineage(180.0))
    played.clear()
    plot = tmp_path / "curve.png"
    assert sc.main([str(snaps), str(new), "--reference", str(ref), "--pairs", "3", "--out", str(out),
                    "--plot", str(plot)]) == 0
    assert played == ["best.pt"]
    assert len(out.read_text().splitlines()) == 3
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "already in" in capsys.readouterr().err
    played.clear()
    assert sc.main([str(snaps), "--reference", str(ref), "--pairs", "4", "--out", str(out)]) == 0
    assert len(played) == 2  # other pairs: not the same evaluation
    played.clear()
    with out.open("a") as f:
        f.write('123\n["a"]\n{"model_sha256": "x"}\nnot json\n')
    assert sc.main([str(snaps), "--reference", str(ref), "--pairs", "4", "--out", str(out)]) == 0
    assert played == []  # the good lines still stand; the others are named and skipped
    err = capsys.readouterr().err
    assert err.count("not an evaluation line") == 3 and "not a JSON line" in err


def test_bad_inputs_are_named_before_any_game(tmp_path: Path, capsys) -> None:
    sc = _load_script()
    ref = _model(tmp_path / "ref.pt", 0)
    other = _model(tmp_path / "five.pt", 1, size=5)
    (tmp_path / "empty").mkdir()
    junk = tmp_path / "junk.pt"
    torch.save({"weights": torch.ones(2)}, junk)
    bad_lineage = _model(tmp_path / "bad.pt", 2, lineage={"minutes": -1})
    not_a_dict = _model(tmp_path / "str.pt", 2, lineage="abc")  # type: ignore[arg-type]
    from takzero.pipeline.checkpoints import atomic_torch_save

    d = torch.load(ref, weights_only=True)
    atomic_torch_save({**d, "model_state": {"x": torch.ones(1)}}, tmp_path / "state.pt")
    atomic_torch_save({**d, "generation": "abc"}, tmp_path / "gen.pt")
    cases = [
        ([str(not_a_dict)], "lineage: must be a dict of counts, got str"),
        ([str(tmp_path / "state.pt")], "state.pt: its weights do not build a network"),
        ([str(tmp_path / "gen.pt")], "gen.pt: its generation must be a whole number"),
        ([str(ref), "--out", str(tmp_path / "empty")], "--out .*: is a folder, not a file"),
        ([str(ref), "--plot", str(tmp_path / "no" / "c.png")], "--plot .*: no such folder"),
        ([str(ref), "--ply-limit", "0"], "--ply-limit must be in 1..10000, got 0"),
        ([str(tmp_path / "missing.pt")], "no such file or folder"),
        ([str(tmp_path / "empty")], "a folder with no \\*.pt model files"),
        ([str(other)], "plays 5x5, the reference .* plays 4x4"),
        ([str(junk)], "holds no model_config and model_state"),
        ([str(bad_lineage)], "lineage: counts must be finite and >= 0"),
    ]
    for paths, message in cases:
        with pytest.raises(SystemExit) as e:
            sc.main([*paths, "--reference", str(ref)])
        assert e.value.code == 2
        assert re.search(message, capsys.readouterr().err), message
    with pytest.raises(SystemExit):
        sc.main([str(ref), "--reference", str(ref), "--out", str(tmp_path / "no" / "curve.jsonl")])
    with pytest.raises(SystemExit):
        sc.main([str(ref), "--reference", str(ref), "--pairs", "0"])


@pytest.mark.slow  # real games (the search and rules kernels)
def test_a_real_curve_of_two_snapshots(tmp_path: Path) -> None:
    sc = _load_script()
    ref = _model(tmp_path / "ref.pt", 0)
    a = _model(tmp_path / "s" / "a.pt", 1, lineage=_lineage(30.0))
    b = _model(tmp_path / "s" / "b.pt", 2, lineage=_lineage(90.0))
    out = tmp_path / "curve.jsonl"
    assert sc.main([str(a), str(b), "--reference", str(ref), "--pairs", "1", "--simulations", "2",
                    "--ply-limit", "12", "--out", str(out), "--plot", str(tmp_path / "c.png")]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["hours"] for r in rows] == [0.5, 1.5]
    for r in rows:
        assert r["wins"] + r["draws"] + r["losses"] == 2
        assert r["runs"] == ["a", "long"] and r["simulations"] == 2


# -- one Elo scale over all pairs played (Bradley-Terry) ----------------------------------------


def _expected(
    true: list[float], pairs: list[tuple[int, int]], games: int
) -> list[tuple[int, int, float, float, float]]:
    """Each pair's expected W-D-L under the Bradley-Terry model of ratings ``true`` (Elo)."""
    out = []
    for i, j in pairs:
        p = 1 / (1 + 10 ** ((true[j] - true[i]) / 400))
        out.append((i, j, games * p, 0.0, games * (1 - p)))
    return out


def test_bradley_terry_recovers_known_ratings() -> None:
    """With the expected results of known ratings the maximum is those ratings exactly (a
    ladder: each against the one before and against the anchor); with games drawn from them the
    95% intervals hold the truth about 95% of the time; draws count half."""
    bt = _load_script().bradley_terry
    true = [0.0, -400.0, -250.0, -120.0, -30.0, 40.0]  # player 0 is the anchor (the reference)
    pairs = [(k, 0) for k in range(1, 6)] + [(k, k - 1) for k in range(2, 6)]
    elo, lo, hi = bt(_expected(true, pairs, 200), len(true))
    assert np.allclose(elo, true, atol=1e-6)
    assert elo[0] == lo[0] == hi[0] == 0.0 and np.all(lo[1:] < elo[1:]) and np.all(elo[1:] < hi[1:])
    # two players: the observed information is n p (1 - p), the textbook standard error
    elo2, lo2, hi2 = bt([(1, 0, 75.0, 0.0, 25.0)], 2)
    se = 1 / math.sqrt(100 * 0.75 * 0.25) * 400 / math.log(10)
    assert elo2[1] == pytest.approx(400 * math.log10(3)) and hi2[1] - elo2[1] == pytest.approx(1.959964 * se)
    # coverage on sampled games
    rng = np.random.default_rng(5)
    covered = total = 0
    for _ in range(40):
        results = []
        for i, j in pairs:
            p = 1 / (1 + 10 ** ((true[j] - true[i]) / 400))
            w = int(rng.binomial(60, p))
            results.append((i, j, float(w), 0.0, float(60 - w)))
        _, lo, hi = bt(results, len(true))
        covered += int(np.sum((lo[1:] <= true[1:]) & (true[1:] <= hi[1:])))
        total += 5
    assert 0.85 <= covered / total <= 1.0
    # draws are half wins; another anchor shifts the scale and nothing else
    assert bt([(0, 1, 0.0, 10.0, 0.0)], 2)[0][1] == pytest.approx(0.0)
    assert np.allclose(bt(_expected(true, pairs, 200), 6, anchor=3)[0], np.array(true) - true[3])


def test_bradley_terry_refuses_what_has_no_scale() -> None:
    bt = _load_script().bradley_terry
    with pytest.raises(ValueError, match=r"players \[2\] played no one linked to player 0"):
        bt([(1, 0, 3.0, 1.0, 2.0)], 3)
    with pytest.raises(ValueError, match=r"no finite ratings: players \[1\] never lost a point"):
        bt([(1, 0, 10.0, 0.0, 0.0), (2, 0, 3.0, 0.0, 3.0)], 3)
    elo, lo, hi = bt([(1, 0, 10.0, 0.0, 0.0), (2, 0, 3.0, 0.0, 3.0)], 3, prior_draws=1.0)
    assert np.all(np.isfinite(elo)) and elo[1] > 300 and lo[1] > 0
    for bad in ([(0, 0, 1.0, 0.0, 0.0)], [(0, 3, 1.0, 0.0, 0.0)], [(0, 1, -1.0, 0.0, 0.0)]):
        with pytest.raises(ValueError):
            bt(bad, 2)


def test_a_ladder_is_pooled_into_one_scale(tmp_path: Path, monkeypatch, capsys) -> None:
    """--ladder: each link plays the reference and the link before it (the reference, one of the
    links, never itself, and a pair already played the other way round not again); the pooled
    Bradley-Terry lines come out with the reference at 0 and the links in their true order; a
    second call plays nothing; --movetime lines are another evaluation than --simulations ones."""
    sc = _load_script()
    links = [_model(tmp_path / f"link{k}.pt", k, lineage=_lineage(60.0 * k)) for k in range(1, 5)]
    ref = links[-1]
    true = {sc.file_sha256(f): elo for f, elo in zip(links, [-300.0, -180.0, -60.0, 0.0], strict=True)}
    played: list[tuple[str, str, Any]] = []

    def fake_evaluate(path, lineage, generation, args, reference_sha, opponent=None):
        played.append((Path(path).name, Path(opponent).name, args.movetime))
        sha = sc.file_sha256(path)
        p = 1 / (1 + 10 ** ((true[reference_sha] - true[sha]) / 400))
        w = round(40 * p)
        return {"model": str(path), "model_sha256": sha, "reference": str(opponent),
                "reference_sha256": reference_sha, "pairs": args.pairs,
                "simulations": None if args.movetime else args.simulations, "movetime_ms": args.movetime,
                "ply_limit": args.ply_limit, "seed": args.seed, "select_q_fraction": sc.DEFAULT_SELECT_Q_FRACTION,
                "minutes": lineage.minutes, "wins": w, "draws": 0, "losses": 40 - w}

    monkeypatch.setattr(sc, "evaluate_file", fake_evaluate)
    out, plot = tmp_path / "ladder.jsonl", tmp_path / "ladder.png"
    argv = [*map(str, links), "--ladder", "--reference", str(ref), "--pairs", "20", "--movetime", "50",
            "--out", str(out), "--plot", str(plot)]
    assert sc.main(argv) == 0
    assert played == [("link1.pt", "link4.pt", 50), ("link2.pt", "link4.pt", 50), ("link2.pt", "link1.pt", 50),
                      ("link3.pt", "link4.pt", 50), ("link3.pt", "link2.pt", 50)]
    fit = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"fit"' in x]
    assert [r["model"] for r in fit] == [str(f) for f in links]
    assert [r["elo"] for r in fit] == pytest.approx([-300.0, -180.0, -60.0, 0.0], abs=15)
    assert fit[-1]["elo_lower"] == fit[-1]["elo_upper"] == 0.0 and fit[0]["matches"] == 2 and fit[0]["games"] == 80
    assert all(r["elo_lower"] < r["elo"] < r["elo_upper"] for r in fit[:-1])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    played.clear()
    assert sc.main(argv) == 0
    assert played == []
    assert sc.main([*map(str, links[:2]), "--ladder", "--reference", str(ref), "--pairs", "20", "--out", str(out)]) == 0
    assert played == [("link1.pt", "link4.pt", None), ("link2.pt", "link4.pt", None), ("link2.pt", "link1.pt", None)]
    with pytest.raises(SystemExit):
        sc.main([str(links[0]), "--reference", str(ref), "--movetime", "0"])


def test_movetime_plays_real_games_at_a_time_limit(tmp_path: Path) -> None:
    """--movetime: both networks think for the time given (the network player's limit); the line
    says so, with no simulation count."""
    sc = _load_script()
    ref = _model(tmp_path / "ref.pt", 0)
    a = _model(tmp_path / "a.pt", 1, lineage=_lineage(30.0))
    out = tmp_path / "curve.jsonl"
    assert sc.main([str(a), "--reference", str(ref), "--pairs", "1", "--movetime", "20", "--ply-limit", "6",
                    "--out", str(out)]) == 0
    (row,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert row["movetime_ms"] == 20 and row["simulations"] is None
    assert row["wins"] + row["draws"] + row["losses"] == 2 and row["reference"] == str(ref)
