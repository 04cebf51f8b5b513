"""The early baseline check (``evaluator.early_baseline_generation``, ``early_baseline_games``):
the generation owes a baseline check with its own game count, which survives being carried into
a newer check and a Ctrl-C (take_pending, the checkpoint's list form, restore); the config
refuses bad values naming the key; the evaluator plays the count it is given."""

from __future__ import annotations

import pytest
import torch
from smoke_config import smoke_raw

from takzero.config import ConfigError, load_config
from takzero.pipeline.schedule import Check, EvaluationSchedule, owed_kinds

_raw = smoke_raw


def test_the_early_generation_owes_a_baseline_check_with_its_own_game_count() -> None:
    assert owed_kinds(1, gating=False, baseline_every=4, early_baseline_generation=1) == ("baselines",)
    assert owed_kinds(2, gating=False, baseline_every=4, early_baseline_generation=1) == ()
    assert owed_kinds(1, gating=False, baseline_every=4) == ()  # 0: no early check
    assert owed_kinds(1, gating=False, baseline_every=0, early_baseline_generation=1) == ("baselines",)
    schedule = EvaluationSchedule(gating=False, baseline_every=4, early_generation=1, early_games=4)
    early = schedule.owe(1, 200)
    assert early is not None and early.baseline_games == 4
    assert schedule.owe(2, 400) is None and schedule.owe(3, 600) is None
    regular = schedule.owe(4, 800)
    assert regular is not None and regular.baseline_games == 0  # the configured baseline_games
    # a generation both early and a multiple of baseline_every plays the configured count
    both = EvaluationSchedule(gating=True, baseline_every=1, early_generation=1, early_games=4)
    check = both.owe(1, 100)
    assert check is not None and check.kinds == ("gating", "baselines") and check.baseline_games == 0


def test_a_carried_early_check_keeps_its_game_count() -> None:
    """The evaluator was busy: the early check of generation 1 is measured at generation 2 (which
    owed only gating), still with the early count; carried into a generation that owes its own
    baseline check, that generation's count wins."""
    schedule = EvaluationSchedule(gating=True, baseline_every=4, early_generation=1, early_games=4)
    schedule.owe(1, 100)
    schedule.owe(2, 200)
    check = schedule.next()
    assert check is not None and check.generation == 2 and check.carried == [1]
    assert check.kinds == ("gating", "baselines") and check.baseline_games == 4
    schedule.finished()
    schedule = EvaluationSchedule(gating=False, baseline_every=4, early_generation=1, early_games=4)
    schedule.owe(1, 100)
    schedule.owe(4, 400)
    check = schedule.next()
    assert check is not None and check.carried == [1] and check.baseline_games == 0


def test_a_cut_early_check_keeps_its_game_count_through_the_checkpoint() -> None:
    schedule = EvaluationSchedule(gating=False, baseline_every=4, early_generation=1, early_games=6)
    schedule.owe(1, 200)
    schedule.next()  # running when Ctrl-C comes
    schedule.owe(4, 800)
    schedule.owed[4].seed = 17  # the run draws it when the check is owed
    assert [c.to_list() for c in schedule.pending()] == [c.to_list() for c in schedule.pending()]  # left in
    kept = [c.to_list() for c in schedule.take_pending()]  # what RunCounters.owed_checks holds
    assert kept == [[1, 200, ["baselines"], 6, None, True], [4, 800, ["baselines"], 0, 17, False]]
    again = EvaluationSchedule(gating=False, baseline_every=4, early_generation=1, early_games=6)
    for entry in kept:
        again.restore(Check.from_list(entry))
    check = again.next()  # the one that was running completes first, with its own count
    assert check is not None and check.generation == 1 and check.baseline_games == 6 and not check.carried
    again.finished()
    check = again.next()
    assert check is not None and check.generation == 4 and check.carried == [] and check.baseline_games == 0
    restored = Check.from_list(kept[0])
    assert (restored.generation, restored.step, restored.kinds, restored.baseline_games) == (1, 200, ("baselines",), 6)
    assert Check.from_list(kept[1]).seed == 17 and restored.seed is None
    # a checkpoint written before the game count (or the seed) was kept: the configured count
    assert Check.from_list([4, 800, ["baselines"]]).baseline_games == 0
    assert Check.from_list([4, 800, ["baselines"], 2]).seed is None
    with pytest.raises(ValueError, match="owed check"):
        Check.from_list([4, 800])


def test_the_schedule_refuses_bad_early_settings() -> None:
    with pytest.raises(ValueError, match="early_baseline_generation"):
        EvaluationSchedule(gating=False, baseline_every=4, early_generation=-1)
    with pytest.raises(ValueError, match="early_baseline_games"):
        EvaluationSchedule(gating=False, baseline_every=4, early_generation=1, early_games=3)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("evaluator.early_baseline_generation", -1, r"^evaluator\.early_baseline_generation: must be >= 0"),
    ("evaluator.early_baseline_games", 3, r"^evaluator\.early_baseline_games: must be an even number >= 2 \(got 3\)"),
    ("evaluator.early_baseline_games", 0, r"^evaluator\.early_baseline_games: must be an even number >= 2 \(got 0\)"),
])
def test_the_config_refuses_bad_early_settings(key: str, value: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_raw(**{key: value}))


def test_the_config_refuses_an_early_check_without_baselines() -> None:
    with pytest.raises(ConfigError, match=r"^evaluator\.baselines: .*early_baseline_generation=0"):
        load_config(_raw(**{"evaluator.baseline_every": 0, "evaluator.early_baseline_generation": 1,
                            "evaluator.baselines": []}))


def test_the_6x6_preset_has_an_early_check() -> None:
    from takzero.config import compose_preset

    cfg = compose_preset("6x6", run_name="r")
    e = cfg.evaluator
    assert e.early_baseline_generation == 1 and e.early_baseline_games == 4 < e.baseline_games
    assert load_config(_raw()).evaluator.early_baseline_generation == 0  # off by default


def test_the_evaluator_plays_the_checks_game_count(one_torch_thread) -> None:
    from takzero.nn.model import TakNet
    from takzero.pipeline.gating import GatingEvaluator

    cfg = load_config(_raw(**{
        "board.size": 3, "mcts.simulations": 2, "evaluator.gating": "off", "evaluator.baseline_games": 2,
        "evaluator.baselines": ["random"], "selfplay.ply_limit": 20,
    }))
    torch.manual_seed(0)
    weights = TakNet(cfg.model_config()).state_dict()
    ev = GatingEvaluator(cfg)
    assert [m["games"] for m in ev.evaluate((1, weights), (0, weights), True, seed=1)["matches"]] == [2]
    out = ev.evaluate((1, weights), (0, weights), True, seed=1, baseline_games=4)
    assert [m["games"] for m in out["matches"]] == [4]
