"""Search tactics: immediate roads, blocking a road threat, proofs, tests/data/tactics.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from takzero.game import Position
from takzero.game.core import generate_moves, make_move, num_actions, unmake_move
from takzero.game.moves import parse_ptn
from takzero.nn.actions import action_to_move
from takzero.search import BatchedMCTS, SearchConfig, UniformEvaluator, search_position

DATA = Path(__file__).parent / "data" / "tactics.json"
# White to move, a2 (or Ca2) completes the road a2-e2.
WIN_IN_ONE = "x5/x,2,2,2,x/x2,2,x2/x,1,1,1,1/x5 1 5"
# White to move; black threatens e3 (a3-d3 are black flats); white has no road in one.
THREAT = "x5/x5/2,2,2,2,x/x5/1,1,1,x2 1 5"


def _opponent_wins_at_once(state: np.ndarray) -> bool:
    """True if the side to move in ``state`` has a move that wins the game for it at once."""
    buf = np.empty(num_actions(int(state[0])), dtype=np.int64)
    st = state.copy()
    mover = int(st[1]) & 1
    for m in buf[: generate_moves(st, buf)]:
        undo = make_move(st, int(m))
        res = int(st[8])
        unmake_move(st, int(m), undo)
        if (res in (1, 3) and mover == 0) or (res in (2, 4) and mover == 1):
            return True
    return False


@pytest.mark.parametrize("sims", [1, 8, 64])
def test_road_in_one_found(sims):
    pos = Position.from_tps(WIN_IN_ONE)
    r = search_position(pos, UniformEvaluator(5), simulations=sims)
    assert pos.ptn(r.move) in ("a2", "Ca2")
    assert r.value > 0
    assert r.proven == 1
    # policy target puts all its mass on winning moves
    winning = {parse_ptn("a2", 5), parse_ptn("Ca2", 5)}
    for a, p in zip(r.actions, r.probs, strict=True):
        if p > 0:
            assert action_to_move(int(a), 5) in winning


@pytest.mark.parametrize("road_check", [True, False])
def test_road_in_one_found_without_checks_at_expansion(road_check):
    """Only the root check is needed for a win in one; with it off the search still finds the
    road by visiting it."""
    pos = Position.from_tps(WIN_IN_ONE)
    cfg = SearchConfig(road_check=road_check, root_terminal_check=False).evaluation()
    r = search_position(pos, UniformEvaluator(5), simulations=400, config=cfg)
    assert pos.ptn(r.move) in ("a2", "Ca2")
    assert r.value > 0


def test_blocks_road_threat():
    pos = Position.from_tps(THREAT)
    assert not _opponent_wins_at_once(pos.state)  # white has no win in one
    r = search_position(pos, UniformEvaluator(5), simulations=300)
    after = pos.play(r.move)
    assert not _opponent_wins_at_once(after.state), pos.ptn(r.move)
    # every visited non-blocking move is proven lost; the proof shows in the root value
    assert r.proven is None


def test_prefers_proven_win_at_once():
    """A proven root stops its search: the budget is not spent."""
    pos = Position.from_tps(WIN_IN_ONE)
    mcts = BatchedMCTS(1, 5, SearchConfig().evaluation())
    mcts.reset(0, pos.state)
    stats = mcts.run(UniformEvaluator(5), simulations=500)
    assert stats.steps == 1  # the root evaluation only
    assert mcts.root_proven(0) == 1


def test_proven_loss_propagates():
    """Black to move against two white road threats (e1 and e2, rows 1 and 2): every black move
    loses once the road check finds white's reply, so the root is proven lost for black."""
    pos = Position.from_tps("x5/x5/x5/1,1,1,1,x/1,1,1,1,x 2 6")
    cfg = SearchConfig().evaluation()
    mcts = BatchedMCTS(1, 5, cfg)
    mcts.reset(0, pos.state)
    mcts.run(UniformEvaluator(5), simulations=2000)
    assert mcts.root_proven(0) == -1
    assert mcts.root_value(0) == -1.0
    assert mcts.is_active(0)
    move = mcts.choose_move(0)
    assert move in set(mcts.root_moves(0).tolist())


def _tactics():
    return [t for t in json.loads(DATA.read_text()) if t["kind"] == "win_in_1"]


@pytest.mark.parametrize("case", _tactics(), ids=lambda t: t["id"])
def test_tactics_win_in_one(case):
    pos = Position.from_tps(case["tps"], komi=case.get("komi", 0.0))
    size = case["size"]
    winning = {parse_ptn(m, size) for m in case["winning_moves"]}
    r = search_position(pos, UniformEvaluator(size), simulations=16)
    assert r.move in winning, (pos.ptn(r.move), case["winning_moves"])
    assert r.proven == 1 and r.value == 1.0


def test_tactics_in_batch_with_gumbel():
    """All win-in-one positions of one size in one batch, Gumbel root, self-play settings."""
    cases = [t for t in _tactics() if t["size"] == 5]
    cfg = SearchConfig(gumbel=True, simulations=16)
    mcts = BatchedMCTS(len(cases), 5, cfg, seed=3)
    for g, case in enumerate(cases):
        mcts.reset(g, Position.from_tps(case["tps"]).state)
    mcts.run(UniformEvaluator(5))
    for g, case in enumerate(cases):
        winning = {parse_ptn(m, 5) for m in case["winning_moves"]}
        assert mcts.choose_move(g) in winning


@pytest.mark.parametrize("size", [3, 4, 5, 6])
def test_road_win_squares_matches_brute_force(size):
    """The bitboard test of the road check agrees with playing every placement."""
    from takzero.game.core import (
        CAP,
        FLAT,
        I_CAPS,
        I_PLY,
        I_STONES,
        OFF_HEIGHT,
        make_placement,
        road_win_squares,
    )
    from takzero.nn.features import random_states

    states = random_states(size, 400, seed=size, min_plies=4 * size, max_plies=20 * size,
                           spread_bias=0.2)
    checked = 0
    positives = 0
    for st in states:
        if st[8] != 0 or st[I_PLY] < 2:
            continue
        mover = int(st[I_PLY]) & 1
        piece = FLAT if st[I_STONES + mover] > 0 else CAP
        if piece == CAP and st[I_CAPS + mover] == 0:
            continue
        expected = 0
        for sq in range(size * size):
            if st[OFF_HEIGHT + sq] != 0:
                continue
            s2 = st.copy()
            make_move(s2, make_placement(sq, piece))
            if s2[8] == (1 if mover == 0 else 2):  # RESULT_ROAD_WHITE / RESULT_ROAD_BLACK
                expected |= 1 << sq
        assert int(road_win_squares(st)) == expected
        checked += 1
        positives += expected != 0
    assert checked > 100 and positives >= 3


@pytest.mark.parametrize("size", [4, 5, 6])
def test_has_winning_move_matches_brute_force(size):
    """``core.has_winning_move`` (the compiled win-in-one test) agrees with playing every move,
    on random positions and the win-in-one fixtures, and leaves the position unchanged."""
    from takzero.game.core import has_winning_move
    from takzero.nn.features import random_states

    states = random_states(size, 300, seed=10 + size, min_plies=4 * size, max_plies=20 * size,
                           spread_bias=0.2)
    states = [s for s in states if s[8] == 0]
    states += [Position.from_tps(t["tps"]).state for t in _tactics() if t["size"] == size]
    buf = np.empty(num_actions(size), dtype=np.int64)
    positives = 0
    for st in states:
        before = st.copy()
        got = bool(has_winning_move(st, buf))
        np.testing.assert_array_equal(st, before)
        assert got == _opponent_wins_at_once(st)
        positives += got
    assert positives >= 3
