"""The exact flat-endgame search (takzero.search.flat_endgame) against independent searches.

* a plain minimax of intervals over every legal move, written here in Python without pruning,
  iterative deepening or move ordering: the exact bounds at a fixed depth (a line cut before the
  game ends is worth anything in [-1, 1]);
* :func:`takzero.game.exhaustive.forced_win`, the project's plain AND/OR search: ``lower == 1``
  must be a forced win of the side to move and ``upper == -1`` one of the opponent;
* endings of the shared engine matches (tests/data/flat_endgames.json, copied from
  ../shared/data/matches-2026-12-07) where the network, to move, had lost on the count.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from takzero.game.exhaustive import forced_win
from takzero.game.position import Position
from takzero.search.flat_endgame import format_result, is_flat_endgame, solve
from tests.flat_minimax import reference_bounds

DATA = Path(__file__).parent / "data" / "flat_endgames.json"




def _endings(size: int, flats: int, seed: int, count: int, plies: int, half_komi: int = 0) -> list[Position]:
    """``count`` unfinished positions reached by random games of ``size`` with ``flats`` stones
    each, taken once the flat count can end the game within ``plies`` plies."""
    rng = np.random.default_rng(seed)
    out: list[Position] = []
    while len(out) < count:
        pos = Position.start(size, flats=flats, caps=0, half_komi=half_komi)
        while not pos.is_over:
            if pos.ply >= 4 and is_flat_endgame(pos, plies) and rng.random() < 0.5:
                out.append(pos)
                break
            codes = pos.legal_move_codes()
            pos = pos.play(int(codes[rng.integers(len(codes))]))
    return out


def _check_against_reference(pos: Position, depth: int) -> str:
    res = solve(pos, depth, max_nodes=None)
    lo, hi = reference_bounds(pos.state.copy(), depth)
    assert (res.lower, res.upper) == (lo, hi), (pos.to_tps(), depth, res, (lo, hi))
    assert res.value == (lo if lo == hi else None)
    if res.lower > -1:  # the move forces the lower bound within the depth
        assert res.move_code is not None
        after = pos.play(res.move_code)
        if after.is_over:
            w = after.result.winner
            got = 0 if w is None else (1 if w == pos.side_to_move else -1)
        else:
            got = -reference_bounds(after.state.copy(), depth - 1)[1]
        assert got >= res.lower, (pos.to_tps(), res.move, got, res.lower)
    else:
        assert res.move_code is None
    return "proved" if res.value is not None else "open"


@pytest.mark.parametrize("size,flats,depth,half_komi", [(3, 5, 3, 0), (3, 6, 3, 1), (4, 4, 2, 0), (3, 4, 4, 2)])
def test_bounds_equal_plain_minimax(size: int, flats: int, depth: int, half_komi: int) -> None:
    kinds = {"proved": 0, "open": 0}
    values = set()
    for i, pos in enumerate(_endings(size, flats, seed=100 * size + depth, count=25, plies=depth, half_komi=half_komi)):
        kinds[_check_against_reference(pos, depth)] += 1
        values.add(solve(pos, depth).value)
        if i == 0:  # a shallower depth gives bounds as wide or wider, never contradictory ones
            shallow = solve(pos, 1)
            deep = solve(pos, depth)
            assert shallow.lower <= deep.lower <= deep.upper <= shallow.upper
    assert kinds["proved"] > 0  # the sample holds positions of both sorts, so both were checked
    assert len(values) >= 2


@pytest.mark.parametrize("size,flats,depth,near", [(3, 6, 5, 5), (4, 6, 4, 2), (5, 5, 3, 2)])
def test_win_and_loss_proofs_agree_with_exhaustive_search(size: int, flats: int, depth: int, near: int) -> None:
    """lower == 1 iff the side to move forces a win within the depth; upper == -1 iff the
    opponent does (exhaustive.forced_win, all moves, its own cut-offs)."""
    seen = {"win": 0, "loss": 0, "other": 0}
    for pos in _endings(size, flats, seed=7 + depth, count=30, plies=near):
        res = solve(pos, depth, max_nodes=None)
        me = pos.side_to_move
        wins = forced_win(pos, depth, attacker=me)
        loses = forced_win(pos, depth, attacker=1 - me)
        assert (res.lower == 1) == wins, pos.to_tps()
        assert (res.upper == -1) == loses, pos.to_tps()
        seen["win" if wins else "loss" if loses else "other"] += 1
    assert seen["win"] + seen["loss"] > 0 and seen["other"] < 30  # proofs of both answers were checked


def test_match_endings() -> None:
    """Positions of the engine matches, the network to move: the proved results, each checked
    here again by the exhaustive search."""
    entries = json.loads(DATA.read_text())
    assert entries
    for e in entries:
        pos = Position.from_tps(e["tps"], half_komi=e["half_komi"])
        res = solve(pos, e["plies"], max_nodes=2_000_000)
        assert res.value == e["value"], (e, format_result(res))
        me = pos.side_to_move
        if e["value"] == -1:
            assert forced_win(pos, e["plies"], attacker=1 - me)
        if e["value"] == 1:
            assert forced_win(pos, e["plies"], attacker=me)
            assert res.move in e["winning_moves"]


def test_budget_gives_bounds_not_guesses() -> None:
    pos = _endings(4, 8, seed=3, count=1, plies=4)[0]
    full = solve(pos, 4, max_nodes=None)
    for budget in (1, 10, 100):
        res = solve(pos, 4, max_nodes=budget)
        assert res.nodes <= budget
        assert res.lower <= full.lower and full.upper <= res.upper
        if res.value is None:
            assert res.note in ("nodes", "")
    res = solve(pos, 4, max_nodes=None, max_seconds=1e-9)
    assert res.lower <= full.lower and full.upper <= res.upper


def test_is_flat_endgame_and_bad_input() -> None:
    assert not is_flat_endgame(Position.start(5), 6)
    assert is_flat_endgame(Position.start(3, flats=3), 6)  # a reserve of three: ends within 6 plies
    full = Position.from_tps("1,2,1/2,x,2/1,2,1 1 5")  # one empty square
    assert is_flat_endgame(full, 1)
    with pytest.raises(TypeError):
        solve("x3/x3/x3 1 1", 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_plies"):
        solve(full, 0)
    with pytest.raises(ValueError, match="max_nodes"):
        solve(full, 2, max_nodes=0)
    with pytest.raises(ValueError, match="max_seconds"):
        solve(full, 2, max_seconds=float("nan"))
    with pytest.raises(ValueError, match="over"):
        solve(Position.from_tps("1,2,1/2,1,2/1,2,1 1 6"), 2)
