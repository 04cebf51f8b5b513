"""Baseline players without search: a random mover and a one-ply greedy tactician.

* :class:`RandomPlayer` -- a uniformly random legal move;
* :class:`GreedyPlayer` -- one-ply tactics (win now, else avoid giving the opponent a win in one,
  else maximise the flat difference), compiled with numba.

Both are deterministic for a given seed. Compiled code draws random numbers from numba's
per-thread legacy ``np.random`` state, seeded at the start of every compiled call (numba compiles
the legacy API; hence the file-wide NPY002 waiver).
"""

# ruff: noqa: NPY002

from __future__ import annotations

import numpy as np
from numba import njit

from takzero.game.core import (
    I_PLY,
    I_RESULT,
    I_SIZE,
    RESULT_DRAW,
    RESULT_NONE,
    RESULT_ROAD_BLACK,
    RESULT_ROAD_WHITE,
    flat_counts,
    generate_moves,
    has_winning_move,
    make_move,
    num_actions,
    result_winner,
    unmake_move,
)
from takzero.game.position import Position
from takzero.players.base import BasePlayer, PlayerMove

# ---------------------------------------------------------------------------------------------
# Random
# ---------------------------------------------------------------------------------------------

class RandomPlayer(BasePlayer):
    """A uniformly random legal move. Raises ValueError if the game is over."""

    name = "random"

    def choose(self, position: Position) -> PlayerMove:
        self._check_open(position)
        codes = position.legal_move_codes()
        return PlayerMove(int(codes[int(self._rng.integers(len(codes)))]))


# ---------------------------------------------------------------------------------------------
# Greedy
# ---------------------------------------------------------------------------------------------

GREEDY_WIN = 0  # an immediate win (road, or a flat win when the game ends on the flat count)
GREEDY_SAFE = 1  # best flat difference among moves that leave the opponent no win in one
GREEDY_LOST = 2  # every move loses at once or lets the opponent win in one: best flat difference
GREEDY_KINDS = ("win", "safe", "lost")


@njit(cache=True)
def greedy_move(state: np.ndarray, seed: int) -> tuple[int, int, int]:
    """The greedy player's move in ``state`` (not over; restored on return).

    1. A move that wins at once, roads before flat wins (random among equals).
    2. Else among the "safe" moves -- not an immediate loss, and after which the opponent has no
       move that wins at once (so a one-move road threat is blocked when it can be) -- the one
       with the largest flat difference (own flat-topped stacks minus the opponent's) after the
       move, ties broken uniformly at random.
    3. If no move is safe, the largest flat difference among all moves.

    Returns (move code, kind: GREEDY_WIN / GREEDY_SAFE / GREEDY_LOST, flat difference after the
    move). Candidates are checked for safety in order of decreasing flat difference, so the
    opponent replies are only scanned for the best-scoring group (cost: one reply scan per
    candidate checked, each scan = make/unmake of every opponent move).
    """
    np.random.seed(seed)
    size = state[I_SIZE]
    mover = state[I_PLY] & 1
    nb = num_actions(size)
    moves = np.empty(nb, dtype=np.int64)
    replies = np.empty(nb, dtype=np.int64)
    n = generate_moves(state, moves)
    scores = np.empty(n, dtype=np.int64)
    results = np.empty(n, dtype=np.int64)
    road_wins = 0
    flat_wins = 0
    pick_road = -1
    pick_flat = -1
    for j in range(n):
        m = moves[j]
        u = make_move(state, m)
        r = state[I_RESULT]
        w, b = flat_counts(state)
        unmake_move(state, m, u)
        results[j] = r
        scores[j] = w - b if mover == 0 else b - w
        if r != RESULT_NONE and result_winner(r) == mover:
            if r == RESULT_ROAD_WHITE or r == RESULT_ROAD_BLACK:
                road_wins += 1
                if np.random.randint(road_wins) == 0:  # reservoir sampling: uniform among wins
                    pick_road = j
            else:
                flat_wins += 1
                if np.random.randint(flat_wins) == 0:
                    pick_flat = j
    if pick_road >= 0:
        return moves[pick_road], GREEDY_WIN, scores[pick_road]
    if pick_flat >= 0:
        return moves[pick_flat], GREEDY_WIN, scores[pick_flat]
    order = np.argsort(-scores, kind="mergesort")
    i = 0
    while i < n:
        group_score = scores[order[i]]
        k = i
        found = 0
        pick = -1
        while k < n and scores[order[k]] == group_score:
            j = order[k]
            k += 1
            r = results[j]
            if r != RESULT_NONE:
                if result_winner(r) != mover and r != RESULT_DRAW:
                    continue  # an immediate loss (suicide)
                safe = True  # a draw ends the game: the opponent cannot win after it
            else:
                m = moves[j]
                u = make_move(state, m)
                safe = not has_winning_move(state, replies)
                unmake_move(state, m, u)
            if safe:
                found += 1
                if np.random.randint(found) == 0:
                    pick = j
        if pick >= 0:
            return moves[pick], GREEDY_SAFE, scores[pick]
        i = k
    # Nothing is safe: the best flat difference, random among the best.
    best = scores[order[0]]
    count = 0
    while count < n and scores[order[count]] == best:
        count += 1
    j = order[np.random.randint(count)]
    return moves[j], GREEDY_LOST, scores[j]


class GreedyPlayer(BasePlayer):
    """One-ply tactics (see :func:`greedy_move`): win at once if possible, else a move that leaves
    the opponent no win in one with the best flat difference, random among equals.

    ``PlayerMove.info["kind"]`` is "win", "safe" or "lost"; ``value`` is +1 for "win", -1 for
    "lost", None otherwise. Raises ValueError if the game is over.
    """

    name = "greedy"

    def choose(self, position: Position) -> PlayerMove:
        self._check_open(position)
        code, kind, diff = greedy_move(position.state.copy(), self._next_seed())
        value = 1.0 if kind == GREEDY_WIN else (-1.0 if kind == GREEDY_LOST else None)
        return PlayerMove(
            int(code),
            value=value,
            nodes=0,
            info={"kind": GREEDY_KINDS[kind], "flat_diff": int(diff)},
        )


__all__ = [
    "GREEDY_KINDS",
    "GREEDY_LOST",
    "GREEDY_SAFE",
    "GREEDY_WIN",
    "GreedyPlayer",
    "RandomPlayer",
    "greedy_move",
]
