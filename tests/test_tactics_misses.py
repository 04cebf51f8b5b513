"""scripts/tactics_misses.py: the miss line of a missed win entry and the summary's split."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import tactics_misses  # noqa: E402

from takzero.game.exhaustive import winning_moves  # noqa: E402
from takzero.matches.tactics_set import TACTICS_FILE, load_entries  # noqa: E402
from takzero.search.evaluators import UniformEvaluator  # noqa: E402


def test_miss_report_tells_a_slow_win_from_a_lost_one() -> None:
    """On the mined 4x4 wins in 3: the expected move keeps a forced road (the prover proves it with
    the defender to move); a move after which the opponent wins at once (the exhaustive search)
    does not; the winning move's prior rank is a rank among the legal moves (uniform priors)."""
    entries = [e for e in load_entries([TACTICS_FILE], size=4) if e["kind"] == "win_in_3"]
    ev = UniformEvaluator(4, masked=True)
    checked = 0
    for e in entries:
        pos = e["position"]
        codes = [int(c) for c in pos.legal_move_codes()]
        win = next(c for c in codes if pos.ptn(c) in e["expected"])
        line = tactics_misses.miss_report(e, win, ev, prover_nodes=100_000)
        assert line["chosen_keeps_forced_road"] and line["chosen"] == pos.ptn(win)
        assert 0 <= line["win_prior_rank"] < len(codes) == line["legal_moves"]
        assert line["root_value"] == 0.0  # the uniform evaluator's value
        lost = [c for c in codes if not pos.play(c).is_over and winning_moves(pos.play(c), 1)]
        if lost:
            assert not tactics_misses.miss_report(e, lost[0], ev, prover_nodes=100_000)["chosen_keeps_forced_road"]
            checked += 1
    assert checked >= 3


def test_summary_counts_each_reason() -> None:
    misses = [
        {"root_value": 0.95, "value_after_chosen": 0.97, "chosen_keeps_forced_road": True, "win_prior_rank": 2},
        {"root_value": 0.2, "value_after_chosen": None, "chosen_keeps_forced_road": False, "win_prior_rank": 40},
        {"root_value": 0.91, "value_after_chosen": 0.5, "chosen_keeps_forced_road": False, "win_prior_rank": None},
    ]
    s = tactics_misses.summarise(10, misses)
    assert (s["positions"], s["solved"], s["missed"]) == (10, 7, 3)
    assert s["missed_root_valued_won"] == 2 and s["missed_chosen_valued_won"] == 1
    assert s["missed_chosen_keeps_forced_road"] == 1 and s["missed_win_in_prior_top5"] == 1
