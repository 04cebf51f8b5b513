"""Plain exhaustive AND/OR search to a fixed depth: the independent check of the tinuë prover.

``forced_win(position, plies)`` answers whether the side to move (the attacker) wins by force
within ``plies`` plies, looking at ALL legal moves of both sides: no proof numbers, no move
restriction, no transposition table, no threat heuristics. A win is any end of the game in the
attacker's favour by the rules (a road; a flat win when the board fills or a reserve empties);
a draw or a defender win is not. With ``roads_only=True`` only the attacker's road is a win (a
forced road), any other end of the game is not. Attacker nodes return at the first winning move, defender nodes
at the first reply that escapes (the usual AND/OR cut-offs, which change no answer).

The only shortcut is at the attacker's last ply (and as a first pass at every attacker node):
"does any move win at once" is answered by playing every move, unless a cheap necessary condition
rules a win out. That condition is written here independently of :mod:`takzero.game.tinue`: a
placement can only win if the attacker's road pieces plus that square hold a road; a spread from
a stack in one direction only if the road pieces plus its origin and every square it can reach
hold one; and a flat win only if the ply can end the game (the mover's last piece, or fewer empty
squares than the board size). Candidate moves that pass are played and judged by the rules core.

The cost grows like (moves per position) ** (plies / 2) with these cut-offs; 5 plies on a 6x6
middle game take from milliseconds to minutes, so every call takes a node budget (``max_nodes``,
node = position visited) and answers None when it runs out.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from takzero.game import core
from takzero.game.core import (
    CAP,
    I_CAPS,
    I_PLY,
    I_RESULT,
    I_SIZE,
    I_STONES,
    OFF_HEIGHT,
    OFF_LO,
    OFF_TOP,
    RESULT_NONE,
    RESULT_ROAD_BLACK,
    RESULT_ROAD_WHITE,
    WALL,
    direction_step,
    distance_to_edge,
    generate_moves,
    make_move,
    result_winner,
    unmake_move,
)
from takzero.game.position import Position

UNKNOWN_RESULT = -1


@njit(cache=True, inline="always")
def _wins(r: int, attacker: int, roads_only: bool) -> bool:
    """Whether result ``r`` (not RESULT_NONE) is a win for ``attacker`` that counts."""
    if result_winner(r) != attacker:
        return False
    return not roads_only or r == RESULT_ROAD_WHITE or r == RESULT_ROAD_BLACK


@njit(cache=True)
def _may_win_at_once(state: np.ndarray, roads_only: bool) -> bool:
    """False only when the side to move certainly has no move that wins at once (see the module
    docstring for the condition; with ``roads_only`` flat wins do not count)."""
    size = state[I_SIZE]
    nsq = size * size
    mover = state[I_PLY] & 1
    empties = 0
    for sq in range(nsq):
        if state[OFF_HEIGHT + sq] == 0:
            empties += 1
    reserve = state[I_STONES + mover] + state[I_CAPS + mover]
    if not roads_only and (reserve <= 1 or empties < size):
        return True  # the ply may end the game by the flat count
    one = np.uint64(1)
    roads = np.uint64(0)
    for sq in range(nsq):
        top = state[OFF_TOP + sq]
        if state[OFF_HEIGHT + sq] > 0 and top != WALL and (state[OFF_LO + sq] & 1) == mover:
            roads |= one << np.uint64(sq)
    if reserve > 0:
        for sq in range(nsq):
            if state[OFF_HEIGHT + sq] == 0 and core._road_on(roads | (one << np.uint64(sq)), size):
                return True
    for sq in range(nsq):
        h = state[OFF_HEIGHT + sq]
        if h == 0 or (state[OFF_LO + sq] & 1) != mover:
            continue
        is_cap = state[OFF_TOP + sq] == CAP
        for direction in range(4):
            step = direction_step(direction, size)
            cover = roads | (one << np.uint64(sq))
            s = sq
            reach = 0
            for _ in range(distance_to_edge(sq, direction, size)):
                s += step
                t = state[OFF_TOP + s]
                if t == CAP:
                    break
                if t == WALL:
                    if is_cap:
                        cover |= one << np.uint64(s)
                        reach += 1
                    break
                cover |= one << np.uint64(s)
                reach += 1
            if reach > 0 and core._road_on(cover, size):
                return True
    return False


@njit(cache=True)
def _search(state, plies, attacker, roads_only, bufs, ctr) -> int:
    """1 if ``attacker`` wins by force within ``plies`` plies from here (by a road only, with
    ``roads_only``), 0 if not, -1 when the node budget ``ctr[1]`` ran out (``ctr[0]`` counts
    nodes). ``bufs[plies]`` is this level's move list. ``state`` is restored."""
    if ctr[0] >= ctr[1]:
        return -1
    ctr[0] += 1
    if plies <= 0 or state[I_RESULT] != RESULT_NONE:
        return 0
    moves = bufs[plies]
    mover = state[I_PLY] & 1
    n = generate_moves(state, moves)
    unknown = False
    if mover == attacker:
        if _may_win_at_once(state, roads_only):
            for j in range(n):
                m = moves[j]
                u = make_move(state, m)
                r = state[I_RESULT]
                unmake_move(state, m, u)
                if r != RESULT_NONE and _wins(r, attacker, roads_only):
                    return 1
        if plies < 2:
            return 0
        for j in range(n):
            m = moves[j]
            u = make_move(state, m)
            v = 0
            if state[I_RESULT] == RESULT_NONE:
                v = _search(state, plies - 1, attacker, roads_only, bufs, ctr)
            unmake_move(state, m, u)
            if v == 1:
                return 1
            if v < 0:
                unknown = True
        return -1 if unknown else 0
    # defender: the attacker needs a forced win after every reply
    for j in range(n):
        m = moves[j]
        u = make_move(state, m)
        r = state[I_RESULT]
        if r != RESULT_NONE:
            v = 1 if _wins(r, attacker, roads_only) else 0
        else:
            v = _search(state, plies - 1, attacker, roads_only, bufs, ctr)
        unmake_move(state, m, u)
        if v == 0:
            return 0
        if v < 0:
            unknown = True
    return -1 if unknown else 1


@njit(cache=True)
def _winning_moves(state, plies, roads_only, bufs, ctr, out) -> int:
    """Write into ``out`` every move of the side to move after which it wins by force within
    ``plies`` plies in all (the move included); returns their number, or -1 if the budget ran out."""
    attacker = state[I_PLY] & 1
    moves = bufs[0]
    n = generate_moves(state, moves)
    k = 0
    for j in range(n):
        m = moves[j]
        u = make_move(state, m)
        r = state[I_RESULT]
        if r != RESULT_NONE:
            v = 1 if _wins(r, attacker, roads_only) else 0
        else:
            v = _search(state, plies - 1, attacker, roads_only, bufs, ctr)
        unmake_move(state, m, u)
        if v < 0:
            return -1
        if v == 1:
            out[k] = m
            k += 1
    return k


@njit(cache=True)
def _safe_moves(state, plies, bufs, ctr, out) -> int:
    """Write into ``out`` every move of the side to move after which the opponent has no forced
    win within ``plies`` plies (a move that ends the game counts as safe unless the opponent wins
    by it); returns their number, or -1 if the budget ran out."""
    me = state[I_PLY] & 1
    opp = 1 - me
    moves = bufs[0]
    n = generate_moves(state, moves)
    k = 0
    for j in range(n):
        m = moves[j]
        u = make_move(state, m)
        r = state[I_RESULT]
        if r != RESULT_NONE:
            v = 1 if result_winner(r) == opp else 0
        else:
            v = _search(state, plies, opp, bool(False), bufs, ctr)  # noqa: UP018 (a plain bool, see threats.road_moves)
        unmake_move(state, m, u)
        if v < 0:
            return -1
        if v == 0:
            out[k] = m
            k += 1
    return k


def _prepare(position: Position, plies: int, max_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not isinstance(position, Position):
        raise TypeError(f"position must be a Position, got {type(position).__name__}")
    if not (isinstance(plies, int) and 0 <= plies <= 12):
        raise ValueError(f"plies must be an integer in 0..12, got {plies!r}")
    if not (isinstance(max_nodes, int) and max_nodes >= 1):
        raise ValueError(f"max_nodes must be a positive integer, got {max_nodes!r}")
    state = position.state.copy()
    bufs = np.empty((plies + 2, core.num_actions(position.size) + 8), dtype=np.int64)
    ctr = np.array([0, max_nodes], dtype=np.int64)
    return state, bufs, ctr


def forced_win(
    position: Position,
    plies: int,
    max_nodes: int = 50_000_000,
    roads_only: bool = False,
    attacker: int | None = None,
) -> bool | None:
    """True if ``attacker`` (0 white, 1 black; default the side to move) wins by force within
    ``plies`` plies (all moves of both sides searched; with ``roads_only`` only a road counts as a
    win, a flat win is no win), False if not, None if ``max_nodes`` positions were not enough. When
    the attacker is not to move, every reply of the defender must lose within the plies. A finished
    position is False. Raises TypeError/ValueError for bad arguments (plies 0..12)."""
    state, bufs, ctr = _prepare(position, plies, max_nodes)
    if attacker is None:
        attacker = int(state[I_PLY]) & 1
    if attacker not in (0, 1):
        raise ValueError(f"attacker must be 0 (white) or 1 (black), got {attacker!r}")
    v = _search(state, plies, int(attacker), bool(roads_only), bufs, ctr)
    return None if v < 0 else bool(v)


def winning_moves(
    position: Position, plies: int, max_nodes: int = 50_000_000, roads_only: bool = False
) -> list[int] | None:
    """Move codes of the side to move that win by force within ``plies`` plies counting the move
    itself (``plies >= 1``; ``roads_only`` as in :func:`forced_win`), in move-generation order;
    None if ``max_nodes`` ran out."""
    if plies < 1:
        raise ValueError(f"plies must be >= 1, got {plies!r}")
    state, bufs, ctr = _prepare(position, plies, max_nodes)
    out = np.empty(bufs.shape[1], dtype=np.int64)
    k = _winning_moves(state, plies, bool(roads_only), bufs, ctr, out)
    return None if k < 0 else [int(c) for c in out[:k]]


def safe_moves(position: Position, plies: int, max_nodes: int = 50_000_000) -> list[int] | None:
    """Move codes of the side to move after which the opponent cannot force a win within
    ``plies`` more plies; None if ``max_nodes`` ran out."""
    state, bufs, ctr = _prepare(position, plies, max_nodes)
    out = np.empty(bufs.shape[1], dtype=np.int64)
    k = _safe_moves(state, plies, bufs, ctr, out)
    return None if k < 0 else [int(c) for c in out[:k]]


__all__ = ["forced_win", "safe_moves", "winning_moves"]
