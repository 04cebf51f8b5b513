"""The training evaluator's yardsticks that keep discriminating (issue 56, item 1): the ladder
baseline ``generation:-K`` (the run's own network of K baseline checks back) and the presets'
``model:`` baselines (the shipped network of the run's size)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
import torch
from smoke_config import smoke_raw

from takzero.config import ConfigError, compose_preset, load_config
from takzero.nn.model import TakNet
from takzero.pipeline.evaluator_actor import localize_model_specs, model_spec_files
from takzero.pipeline.gating import GatingEvaluator
from takzero.players.registry import (
    MAX_LADDER_OFFSET,
    check_spec,
    ladder_offset,
    make_player,
    model_spec_path,
    spec_label,
)

ROOT = Path(__file__).resolve().parent.parent
_cfg = functools.partial(smoke_raw, run_name="test")


def test_the_ladder_spec_is_read_labelled_and_checked() -> None:
    assert ladder_offset("generation:-1") == 1 and ladder_offset(" Generation:-12 ") == 12
    assert ladder_offset("uct:200") is None and ladder_offset("model:x.pt") is None
    assert spec_label("generation:-2") == "generation-2"
    for bad in ("generation", "generation:", "generation:2", "generation:-0", "generation:-x",
                "generation:--1", "generation:-²", f"generation:-{MAX_LADDER_OFFSET + 1}"):
        with pytest.raises(ValueError, match="bad ladder baseline .* write generation:-K"):
            ladder_offset(bad)
        with pytest.raises(ConfigError, match=r"^evaluator\.baselines: bad ladder baseline"):
            load_config(_cfg(**{"evaluator.baselines": ["random", bad]}))
    # no command line builds it: it is no player kind
    for fn in (check_spec, make_player):
        with pytest.raises(ValueError, match="unknown player"):
            fn("generation:-1")
    cfg = load_config(_cfg(**{"evaluator.baselines": ["random", "generation:-1", "generation:-3"]}))
    assert cfg.evaluator.baselines[1:] == ["generation:-1", "generation:-3"]
    with pytest.raises(ConfigError, match="has the label 'generation-1'"):
        load_config(_cfg(**{"evaluator.baselines": ["generation:-1", "GENERATION:-1"]}))
    # the evaluator actor's model-file copies pass it through untouched
    assert model_spec_path("generation:-1") is None
    assert model_spec_files(["generation:-1"]) == {}
    assert localize_model_specs(["generation:-1"], {"x.pt": b""}) == ["generation:-1"]


def test_the_ladder_plays_the_candidate_of_k_checks_back() -> None:
    """Checks of generations 3, 6, 9, 12: generation:-1 plays the previous check's candidate from
    the second check on, generation:-2 from the third; a check played again (the same
    generation) does not play itself; the evaluator keeps only as many networks as it needs."""
    cfg = load_config(_cfg(**{
        "board.size": 3, "mcts.simulations": 2, "evaluator.simulations": 2, "evaluator.baseline_games": 2,
        "evaluator.baselines": ["random", "generation:-1", "generation:-2"], "evaluator.gating": "off",
        "selfplay.ply_limit": 12,
    }))
    ev = GatingEvaluator(cfg)
    assert ev.ladder_depth == 2
    nets = {}
    for gen in (3, 6, 9, 12):
        torch.manual_seed(gen)
        nets[gen] = TakNet(cfg.model_config()).state_dict()
    seen = []
    for gen in (3, 6, 6, 9, 12):
        out = ev.evaluate((gen, nets[gen]), (gen, nets[gen]), play_baselines=True, seed=gen)
        ladder = [(m["opponent"], m["opponent_generation"]) for m in out["matches"] if "opponent_generation" in m]
        seen.append((gen, ladder))
        for m in out["matches"]:
            assert m["wins"] + m["draws"] + m["losses"] == m["games"] == 2
        for label, _ in ladder:
            assert f"elo/vs_{label}" in out["scalars"] and f"score/vs_{label}" in out["scalars"]
            assert f"baseline_gen{gen:05d}_vs_{label}.ptn" in out["ptn"]
        assert out["matches"][0]["opponent"] == "random"
    assert seen == [
        (3, []),
        (6, [("generation-1", 3)]),
        (6, [("generation-1", 3)]),  # the same check again: not against itself
        (9, [("generation-1", 6), ("generation-2", 3)]),
        (12, [("generation-1", 9), ("generation-2", 6)]),
    ]
    assert [g for g, _ in ev.ladder] == [9, 12]
    ptn = ev.evaluate((15, nets[3]), (15, nets[3]), play_baselines=True, seed=1)["ptn"]
    assert '[Player2 "takzero-gen12"]' in ptn["baseline_gen00015_vs_generation-1.ptn"]
    # a check without baselines (gating only, tactics) adds no rung
    ev.evaluate((16, nets[3]), (16, nets[3]), play_baselines=False, seed=1)
    assert [g for g, _ in ev.ladder] == [12, 15]


@pytest.mark.parametrize(("preset", "size"), [("6x6", 6), ("5x5_cpu", 5), ("5x5_cpu_gumbel", 5)])
def test_presets_measure_against_a_ladder_and_a_shipped_network(preset: str, size: int, monkeypatch) -> None:
    """Each CPU preset's baselines end with the shipped network of its size at the evaluation's
    simulations (the strongest, last) and hold a ladder; the file is named relative to the folder
    the command starts in, and started elsewhere the run refuses it at start-up."""
    monkeypatch.chdir(ROOT)
    cfg = compose_preset(preset)
    baselines = cfg.evaluator.baselines
    assert any(ladder_offset(b) for b in baselines)
    path = model_spec_path(baselines[-1])
    assert path is not None and not os.path.isabs(path) and (ROOT / path).is_file()
    assert baselines[-1].endswith(f":{cfg.evaluation_simulations()}")
    player = make_player(baselines[-1])
    assert player.model_size == size == cfg.board.size
    monkeypatch.chdir(ROOT / "tests")
    with pytest.raises(ConfigError, match=r"^evaluator\.baselines: .*model file not found"):
        compose_preset(preset)
