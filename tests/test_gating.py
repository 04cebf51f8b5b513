"""Gating in training: the promotion rule (threshold or SPRT) and the evaluator that plays a new
generation against the incumbent and the baselines."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch
from smoke_config import smoke_raw

from takzero.config import ConfigError, load_config
from takzero.matches.results import MatchResult
from takzero.nn.model import TakNet
from takzero.pipeline.gating import GatingEvaluator, baseline_player, gate
from takzero.players import GreedyPlayer, UCTPlayer

ROOT = Path(__file__).resolve().parent.parent


def _synthetic(wins: int, draws: int, losses: int) -> MatchResult:
    m = MatchResult("cand", "inc")
    scores = [1.0] * wins + [0.5] * draws + [0.0] * losses
    for i, s in enumerate(scores):
        m.add(None, i % 2 == 0, s, i // 2)
    return m


def test_gate_threshold_and_sprt() -> None:
    strong = _synthetic(80, 10, 10)
    weak = _synthetic(10, 10, 80)
    even = _synthetic(6, 8, 6)
    g = gate(strong, "threshold", threshold=0.55)
    assert g.promote and g.decision == "accept" and g.score == pytest.approx(0.85)
    assert not gate(weak).promote
    assert not gate(_synthetic(5, 1, 4), threshold=0.6).promote  # 0.55 < 0.6
    assert gate(_synthetic(5, 2, 3), threshold=0.6).promote  # 0.6 >= 0.6
    s = gate(strong, "sprt", elo0=0, elo1=35)
    assert s.promote and s.decision == "accept" and s.sprt is not None
    w = gate(weak, "sprt")
    assert not w.promote and w.decision == "reject"
    e = gate(even, "sprt")
    assert not e.promote and e.decision == "continue"
    with pytest.raises(ValueError):
        gate(strong, "vote")
    with pytest.raises(ValueError):
        gate(MatchResult("a", "b"))
    with pytest.raises(ValueError):
        gate(strong, threshold=1.5)


_cfg = functools.partial(smoke_raw, run_name="test")


def test_baseline_specs_and_the_uct_rule() -> None:
    # "uct" without a count is uct:{evaluator.uct_simulations}; a count in the spec wins.
    p = baseline_player("uct", 37, seed=0)
    assert isinstance(p, UCTPlayer) and p.simulations == 37 and p.name == "uct37"
    assert baseline_player("uct:5", 37, seed=0).simulations == 5
    assert isinstance(baseline_player("greedy", 37, seed=0), GreedyPlayer)
    with pytest.raises(ValueError, match="unknown player"):
        baseline_player("minimax", 37, seed=0)


def test_config_checks_baselines_with_the_player_table() -> None:
    model = ROOT / "checkpoints" / "pretrained" / "5x5.pt"
    cfg = load_config(_cfg(**{"evaluator.baselines": ["random", "uct:50", f"model:{model}:8"]}))
    assert cfg.evaluator.baselines[1] == "uct:50"
    with pytest.raises(ConfigError, match=r"evaluator.baselines: unknown player 'minimax'.*greedy"):
        load_config(_cfg(**{"evaluator.baselines": ["minimax"]}))
    with pytest.raises(ConfigError, match="model file not found"):
        load_config(_cfg(**{"evaluator.baselines": ["model:missing.pt"]}))


def test_gating_evaluator_plays_gating_and_baselines() -> None:
    cfg = load_config(_cfg(**{
        "board.size": 3, "mcts.simulations": 4, "evaluator.games": 2, "evaluator.baseline_games": 2,
        "evaluator.baselines": ["random", "uct"], "evaluator.uct_simulations": 8,
        "selfplay.ply_limit": 30,
    }))
    ev = GatingEvaluator(cfg)
    torch.manual_seed(0)
    weights = TakNet(cfg.model_config()).state_dict()
    out = ev.evaluate((2, weights), (1, weights), play_baselines=True)
    assert out["decision"] in ("promote", "reject") and out["candidate_generation"] == 2
    assert "over 2 games" in out["summary"]
    for key in ("gating/score_vs_incumbent", "elo/vs_random", "score/vs_uct", "elo/vs_uct"):
        assert key in out["scalars"], out["scalars"]
    assert set(out["ptn"]) == {
        "gating_gen00002_vs_gen00001.ptn", "baseline_gen00002_vs_random.ptn",
        "baseline_gen00002_vs_uct.ptn",
    }
    assert '[Player2 "uct8"]' in out["ptn"]["baseline_gen00002_vs_uct.ptn"]
    # one record per match for the run's lines: gating first, then the baselines in order
    assert [(m["kind"], m["opponent"]) for m in out["matches"]] == [
        ("gating", "gen 1"), ("baseline", "random"), ("baseline", "uct")]
    for m in out["matches"]:
        assert m["wins"] + m["draws"] + m["losses"] == m["games"] == 2
        assert m["elo_model"] == "pentanomial" and m["seconds"] > 0
        assert m["elo_text"].endswith("(95%, pentanomial score-test interval, 1 game pair)")
    assert out["matches"][2]["score"] == out["scalars"]["score/vs_uct"]
