"""Exact flat-endgame search: the result of a position whose game must end within a few plies.

Terms: the game ends by the *flat count* when the board fills or either reserve empties
(``docs/tak-rules.md``); a *flat endgame* here is a position where that can happen within a few
plies (a reserve nearly empty or few empty squares). The tinuë prover
(:mod:`takzero.game.tinue`) makes road wins exact; this module does the same for the end of the
game by count, where the network counts badly (``docs/results.md``, "Where the flat-count games
are lost").

Method
------
A full-width, depth-limited alpha-beta negamax (D. E. Knuth, R. W. Moore, "An analysis of
alpha-beta pruning", Artificial Intelligence 6 (1975)) over every legal move of both sides
(:func:`takzero.game.core.generate_moves`, ``make_move`` / ``unmake_move`` on one ``int64`` state
array; no per-node Python objects), compiled by numba. Values are game results for the side to
move: 1 win, 0 draw, -1 loss (a road or a flat count by the rules, komi included).

A position the depth limit cuts before the game ends has no exact value. The search is run twice
per depth, scoring such a leaf once as the worst result for the root's side to move (the
*pessimistic* pass, which gives a lower bound ``lower`` of the true value) and once as its best
(the *optimistic* pass: an upper bound ``upper``). When the two agree, the value is proved
whatever happens past the horizon: every line that matters ends within the depth. The bounds of
all depths searched are intersected. So ``lower == 1`` is a proof that the side to move wins by
force within ``depth`` plies (by a road or on the count), ``upper == -1`` that it loses, and
``lower == 0`` that it can at least draw; anything else is left open (``value`` None).

Each pass is iterated over depths 1, 2, ... ``max_plies`` and stops at the first depth that
proves the value. Move order at every node: the moves that end the game first (found by playing
every move and reading its result, a win ends the node at once), then the others in generation
order (placements, then spreads). At the last ply of a pass, a side whose cut leaf scores as a
win takes the first move that does not end the game; the other side only looks for a move that
ends the game in a draw or a win.

Budget: ``max_nodes`` counts node visits (one per non-final position searched, the root
included) over all passes and is never exceeded (node visits of a pass cut by the budget
count); ``max_seconds`` is checked between passes and
turned into a node cap for the next pass at the rate of the passes before (the first two passes,
depth 1, are a few hundred nodes), so a search can overrun it by a fraction of one pass. A pass
cut by the budget gives no bound; the bounds of the depths completed stand.

Public API: :func:`solve` (a :class:`FlatEndgameResult`), :func:`is_flat_endgame` (the cheap
test of whether the flat count can end the game within a given number of plies), and
:func:`format_result`. Checked against a plain minimax of intervals over every move, without
pruning, in ``tests/test_flat_endgame.py``, and against :func:`takzero.game.exhaustive.forced_win`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from takzero.game import core
from takzero.game.core import (
    I_CAPS,
    I_PLY,
    I_RESULT,
    I_SIZE,
    I_STONES,
    OFF_HEIGHT,
    RESULT_NONE,
    generate_moves,
    make_move,
    result_winner,
    unmake_move,
)
from takzero.game.position import Position

#: Deepest search :func:`solve` accepts (plies).
MAX_PLIES = 16
#: Default depth of :func:`solve` (plies).
DEFAULT_PLIES = 6
#: Default node budget of :func:`solve` (node visits over all passes).
DEFAULT_NODES = 1_000_000
#: Largest node budget accepted.
MAX_NODES = 10**12

# counters of a pass: nodes so far, node cap, aborted flag
_C_NODES = 0
_C_LIMIT = 1
_C_ABORT = 2


@njit(cache=True, inline="always")
def _final_value(r: int, mover: int) -> int:
    """Value for ``mover`` of the final result ``r`` that ``mover``'s own ply reached."""
    w = result_winner(r)
    if w < 0:
        return 0
    return 1 if w == mover else -1


# columns of a level's frame in :func:`_root_pass`
_F_COUNT = 0  # moves that do not end the game, kept at the front of the level's move list
_F_NEXT = 1  # index of the next of them to search
_F_BEST = 2  # best value so far (-2: none)
_F_ALPHA = 3
_F_BETA = 4
_F_MOVE = 5  # the move being searched
_F_UNDO = 6  # its undo token
F_LEN = 7


@njit(cache=True)
def _root_pass(state, depth, optimistic, bufs, frames, ctr, out) -> int:
    """One pass: the negamax value (-1, 0, 1 for the side to move) of the unfinished ``state``
    searched ``depth`` >= 1 plies deep, a cut leaf scored for the root's side to move as a win
    (``optimistic``) or a loss, by fail-soft alpha-beta. ``out[0]`` gets the first root move that
    reaches the value (-1 if none). ``bufs[l]``: the move list of level ``l`` (the root is level
    0); ``frames[l]``: its ``_F_*`` columns; ``ctr``: the pass counters (on an abort,
    ``ctr[_C_ABORT]`` is set and the value is meaningless). ``state`` is restored.

    An explicit stack rather than recursion: numba cannot reload a cached recursive function
    (as :mod:`takzero.game.dfpn`)."""
    root = state[I_PLY] & 1
    out[0] = -1
    level = 0
    lo = -2  # the window of the node being entered
    hi = 2
    entering = True
    ret = 0
    while True:
        if entering:
            if ctr[_C_NODES] >= ctr[_C_LIMIT]:
                ctr[_C_ABORT] = 1
                for ll in range(level - 1, -1, -1):  # back to the root position
                    unmake_move(state, frames[ll, _F_MOVE], frames[ll, _F_UNDO])
                return 0
            ctr[_C_NODES] += 1
            rem = depth - level
            mover = state[I_PLY] & 1
            cut = 1 if (mover == root) == optimistic else -1  # a cut leaf after this node's move
            moves = bufs[level]
            n = generate_moves(state, moves)
            best = -2
            k = 0
            done = False
            for j in range(n):  # the moves that end the game first
                m = moves[j]
                u = make_move(state, m)
                r = state[I_RESULT]
                unmake_move(state, m, u)
                if r != RESULT_NONE:
                    v = _final_value(r, mover)
                    if v > best:
                        best = v
                        if level == 0:
                            out[0] = m
                        if best >= hi or best == 1:
                            done = True
                            break
                elif rem == 1 and cut == 1:  # going on past the horizon counts as a win
                    best = 1
                    if level == 0:
                        out[0] = m
                    done = True
                    break
                else:
                    moves[k] = m
                    k += 1
            if not done and (k == 0 or rem == 1):
                if k > 0 and cut > best:
                    best = cut
                    if level == 0:
                        out[0] = moves[0]
                done = True
            if done:
                ret = best
                if level == 0:
                    return ret
                level -= 1
                entering = False
                continue
            a = lo if lo > best else best
            frames[level, _F_COUNT] = k
            frames[level, _F_NEXT] = 1
            frames[level, _F_BEST] = best
            frames[level, _F_ALPHA] = a
            frames[level, _F_BETA] = hi
            m = moves[0]
            frames[level, _F_MOVE] = m
            frames[level, _F_UNDO] = make_move(state, m)
            lo = -hi
            hi = -a
            level += 1
            continue
        # a child of ``level`` returned ``ret``
        m = frames[level, _F_MOVE]
        unmake_move(state, m, frames[level, _F_UNDO])
        v = -ret
        best = frames[level, _F_BEST]
        a = frames[level, _F_ALPHA]
        b = frames[level, _F_BETA]
        if v > best:
            best = v
            frames[level, _F_BEST] = best
            if level == 0:
                out[0] = m
            if best > a:
                a = best
                frames[level, _F_ALPHA] = a
        i = frames[level, _F_NEXT]
        if a >= b or best == 1 or i >= frames[level, _F_COUNT]:
            ret = best
            if level == 0:
                return ret
            level -= 1
            continue
        m = bufs[level, i]
        frames[level, _F_NEXT] = i + 1
        frames[level, _F_MOVE] = m
        frames[level, _F_UNDO] = make_move(state, m)
        lo = -b
        hi = -a
        level += 1
        entering = True


@njit(cache=True)
def _can_end_within(state, plies) -> bool:
    """Whether the flat count can end the game within ``plies`` plies: a reserve of at most
    ``ceil(plies / 2)`` pieces for the side to move (or ``floor(plies / 2)`` for the other), or
    at most ``plies * (N - 1)`` empty squares (a ply covers at most N - 1 of them, by a spread)."""
    size = state[I_SIZE]
    mover = state[I_PLY] & 1
    mine = state[I_STONES + mover] + state[I_CAPS + mover]
    theirs = state[I_STONES + 1 - mover] + state[I_CAPS + 1 - mover]
    if mine <= (plies + 1) // 2 or theirs <= plies // 2:
        return True
    empty = 0
    for sq in range(size * size):
        if state[OFF_HEIGHT + sq] == 0:
            empty += 1
    return empty <= plies * (size - 1)


# ---------------------------------------------------------------------------------------------
# Python API
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlatEndgameResult:
    """Answer of :func:`solve`, for the side to move of the position searched.

    * ``value``: the proved result, 1 win, 0 draw, -1 loss; None when not proved (the bounds
      differ: the game can go on past the depth searched, or the budget ran out).
    * ``lower`` / ``upper``: proved bounds of the result (-1 <= lower <= upper <= 1); ``lower``
      is what the side to move can force, ``upper`` what the opponent can hold it to.
    * ``move`` (PTN) / ``move_code``: a move that forces ``lower`` within ``depth`` plies (a win
      when ``lower`` is 1, at least a draw when it is 0); None when ``lower`` is -1.
    * ``depth``: plies of the deepest pass completed (0: none); ``nodes``: node visits;
      ``seconds``: wall time; ``note``: why the search stopped short ('nodes', 'seconds') or ''.
    """

    value: int | None
    lower: int
    upper: int
    move: str | None
    move_code: int | None
    depth: int
    nodes: int
    seconds: float
    note: str = ""


def _check_position(position: object) -> Position:
    if not isinstance(position, Position):
        raise TypeError(f"position must be a Position, got {type(position).__name__}")
    if position.is_over:
        raise ValueError(f"the game is over ({position.result}); nothing to solve")
    return position


def is_flat_endgame(position: Position, plies: int = DEFAULT_PLIES) -> bool:
    """Whether the flat count could end the game of ``position`` (unfinished) within ``plies``
    plies (>= 1): a reserve nearly empty or few empty squares (a necessary condition, cheap; the
    test a caller makes before :func:`solve`). Raises TypeError / ValueError for bad input."""
    _check_position(position)
    if not (isinstance(plies, int) and 1 <= plies <= MAX_PLIES):
        raise ValueError(f"plies must be an integer in 1..{MAX_PLIES}, got {plies!r}")
    return bool(_can_end_within(position.state, plies))


def solve(
    position: Position,
    max_plies: int = DEFAULT_PLIES,
    max_nodes: int | None = DEFAULT_NODES,
    max_seconds: float | None = None,
) -> FlatEndgameResult:
    """Prove the result of ``position`` for its side to move by searching every line up to
    ``max_plies`` plies (1..:data:`MAX_PLIES`), deepening one ply at a time until proved (see the
    module docstring).

    Budget: ``max_nodes`` node visits over all passes (never exceeded; None: none) and
    ``max_seconds`` wall time (checked between passes; None: none). Any result is sound: an
    unproved value is None, never a guess.

    Raises TypeError for a position that is not a :class:`Position`; ValueError for a finished
    position or a bad depth or budget.
    """
    _check_position(position)
    if not (isinstance(max_plies, int) and not isinstance(max_plies, bool) and 1 <= max_plies <= MAX_PLIES):
        raise ValueError(f"max_plies must be an integer in 1..{MAX_PLIES}, got {max_plies!r}")
    if max_nodes is not None and not (
        isinstance(max_nodes, int | np.integer) and not isinstance(max_nodes, bool) and 1 <= max_nodes <= MAX_NODES
    ):
        raise ValueError(f"max_nodes must be an integer in 1..{MAX_NODES}, got {max_nodes!r}")
    if max_seconds is not None and not (
        isinstance(max_seconds, int | float) and not isinstance(max_seconds, bool) and 0 < max_seconds < math.inf
    ):
        raise ValueError(f"max_seconds must be a finite number > 0, got {max_seconds!r}")
    state = position.state.copy()
    bufs = np.empty((max_plies + 1, core.num_actions(position.size) + 8), dtype=np.int64)
    frames = np.zeros((max_plies + 1, F_LEN), dtype=np.int64)
    out = np.full(1, -1, dtype=np.int64)
    ctr = np.zeros(3, dtype=np.int64)
    budget = MAX_NODES if max_nodes is None else int(max_nodes)
    _root_pass(state, 1, False, bufs, frames, ctr, out)  # no node to spend: compiles or loads the JIT code untimed
    t0 = time.perf_counter()
    lower, upper, best_move, depth, nodes, note = -1, 1, -1, 0, 0, ""
    for d in range(1, max_plies + 1):
        stopped = False
        for optimistic in (False, True):
            cap = budget - nodes
            by_time = False
            now = time.perf_counter()
            if max_seconds is not None:
                left = max_seconds - (now - t0)
                if left <= 0:
                    note, stopped = "seconds", True
                    break
                if nodes > 0 and now > t0 and int(nodes / (now - t0) * left) < cap:
                    cap, by_time = max(1, int(nodes / (now - t0) * left)), True
            if cap <= 0:
                note, stopped = "nodes", True
                break
            ctr[:] = (0, cap, 0)
            v = _root_pass(state, d, optimistic, bufs, frames, ctr, out)
            nodes += int(ctr[_C_NODES])
            if ctr[_C_ABORT]:
                note, stopped = ("seconds" if by_time else "nodes"), True
                break
            if optimistic:
                upper = min(upper, v)
            elif v >= lower:  # the pessimistic value never falls with depth
                lower = v
                best_move = int(out[0])
            if lower == upper:
                break
        if stopped:
            break
        depth = d
        if lower == upper:
            break
    seconds = time.perf_counter() - t0
    code = best_move if lower > -1 and best_move >= 0 else None
    return FlatEndgameResult(
        value=lower if lower == upper else None,
        lower=lower,
        upper=upper,
        move=position.ptn(code) if code is not None else None,
        move_code=code,
        depth=depth,
        nodes=nodes,
        seconds=seconds,
        note="" if lower == upper else note,
    )


def format_result(result: FlatEndgameResult) -> str:
    """One line of text for a result: value or bounds, move, depth, nodes, time."""
    names = {1: "win", 0: "draw", -1: "loss"}
    what = names[result.value] if result.value is not None else f"[{result.lower}, {result.upper}]"
    move = f" move {result.move}" if result.move else ""
    note = f" ({result.note})" if result.note else ""
    return f"{what}{move} depth {result.depth} nodes {result.nodes} time {result.seconds:.3f} s{note}"


__all__ = [
    "DEFAULT_NODES",
    "DEFAULT_PLIES",
    "MAX_NODES",
    "MAX_PLIES",
    "FlatEndgameResult",
    "format_result",
    "is_flat_endgame",
    "solve",
]
