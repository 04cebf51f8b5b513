"""A one-sided match result is said as a bound, never as -inf/+inf: ``Elo < +113.2`` for a match
with nothing won, ``Elo > +45.9`` for one with everything won, in every line people read (the
match and evaluate lines, the training run's evaluation line, its progress line and its
summary), while the numbers (JSON, TensorBoard, the run's records) stay as they are. One
formatter, :func:`takzero.matches.stats.elo_text`, writes them all."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from takzero.matches.results import MatchResult
from takzero.matches.stats import (
    describe_elo,
    describe_estimate,
    elo_pentanomial,
    elo_text,
    elo_trinomial,
)
from takzero.pipeline.gating import match_record
from takzero.pipeline.progress import Snapshot, evaluation_line, strength_text, summary_lines

INF = math.inf


@pytest.mark.parametrize(
    ("numbers", "text"),
    [
        ((-INF, -INF, 113.2), "< +113.2"),
        ((INF, 45.9, INF), "> +45.9"),
        ((-INF, -INF, -7.04), "< -7.0"),
        ((35.2, -10.1, 80.3), "+35.2 [-10.1, +80.3]"),
        ((20.0, -INF, 300.0), "+20.0 [< +300.0]"),
        ((20.0, -300.0, INF), "+20.0 [> -300.0]"),
        ((0.0, -INF, INF), "+0.0 [no bound]"),
        ((-INF, -INF, INF), "no bound"),
        ((math.nan, 0.0, 1.0), "?"),
    ],
)
def test_elo_text_says_a_one_sided_result_as_its_bound(numbers: tuple[float, float, float], text: str) -> None:
    assert elo_text(*numbers) == text


def test_elo_text_in_whole_elo() -> None:
    assert elo_text(-INF, -INF, 113.2, digits=0) == "< +113"
    assert elo_text(107.5, -20.3, 250.1, digits=0) == "+108 [-20, +250]"


def _match(pair_scores: list[tuple[float, float]]) -> MatchResult:
    """A match of game pairs (A's score with white, then with black), openings 0, 1, ..."""
    m = MatchResult("gen 1", "uct")
    for i, (w, b) in enumerate(pair_scores):
        m.add(None, True, w, i)
        m.add(None, False, b, i)
    return m


def test_no_interval_text_holds_an_infinity() -> None:
    """Every W-D-L of 2..8 games (trinomial and Wilson) and every pentanomial count of 1..3 pairs:
    no 'inf' in the text, and a one-sided result reads as '<' or '>' its finite bound."""
    cases = []
    for games in range(2, 9):
        for wins in range(games + 1):
            for draws in range(games - wins + 1):
                losses = games - wins - draws
                estimate = elo_trinomial(wins, draws, losses)
                cases.append((estimate, describe_estimate(elo_trinomial(wins, draws, losses))))
                cases.append((None, describe_elo(wins, draws, losses)))
    for pairs in range(1, 4):
        for counts in itertools.product(range(pairs + 1), repeat=5):
            if sum(counts) == pairs:
                est = elo_pentanomial(list(counts))
                cases.append((est, describe_estimate(est)))
    for est, text in cases:
        assert "inf" not in text, text
        if est is not None and math.isinf(est.elo):
            bound = est.upper if est.elo < 0 else est.lower
            assert text.startswith(f"{'<' if est.elo < 0 else '>'} {bound:+.1f} ("), text


def test_a_match_with_nothing_won_prints_its_upper_bound() -> None:
    """The issue's case: generation 1 lost its four games (two pairs) to uct."""
    lost = _match([(0.0, 0.0), (0.0, 0.0)])
    assert lost.describe_elo() == "< +113.2 (95%, pentanomial score-test interval, 2 game pairs)"
    won = _match([(1.0, 1.0)] * 4)
    assert won.describe_elo().startswith("> +")


def test_the_runs_lines_say_a_bound_and_keep_the_numbers(tmp_path: Path) -> None:
    """The training run's evaluation line, progress field and summary curve read as a bound; the
    record it keeps (TensorBoard, the resume's points) keeps the infinite estimate."""
    record = match_record("baseline", "uct", _match([(0.0, 0.0), (0.0, 0.0)]), seconds=35.0)
    assert record["elo"] == -INF and record["elo_lower"] == -INF and record["elo_upper"] > 0
    line = evaluation_line(1, record)
    assert line == ("evaluation: gen 1 vs uct: 0-0-4 (W-D-L), score 0.000, Elo < +113.2 (95%, "
                    "pentanomial score-test interval, 2 game pairs), 4 games, 35 s")
    assert strength_text(1, record) == "Elo vs uct < +113 (gen 1)"
    won = match_record("baseline", "random", _match([(1.0, 1.0)] * 4), seconds=1.0)
    assert strength_text(2, won).startswith("Elo vs random > +") and "inf" not in strength_text(2, won)
    snap = Snapshot(step=400, generation=2, games=10, positions=100, minutes=1.0)
    points = [[1, record["elo"], record["elo_lower"], record["elo_upper"]],
              [2, won["elo"], won["elo_lower"], won["elo_upper"]], [3, 10.0, -50.0, 70.0]]
    text = "\n".join(summary_lines(reason="done", run_dir=tmp_path, snap=snap, best_generation=2,
                                   best_scores={}, resume_cmd="cmd", finished=True,
                                   strength_points=points, strength_label="uct"))
    assert "Elo vs uct, last points: gen 1 < +113, gen 2 > +" in text and "gen 3 +10 [-50, +70]" in text
    assert "inf" not in text
