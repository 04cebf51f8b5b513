"""Road in one and tak: the one test of the rules the tinuë prover, the features and the
annotations share (compiled, on bitboards).

Terms: *tak* is a road threat (a player would complete a road with one more ply); *tinuë* is a
road threat that cannot be stopped (a forced road, proved by :mod:`takzero.game.tinue`). A *road
in one* for a player is a legal move of theirs -- a flat or capstone placement, or a spread --
after which they have a road (under the dragon clause the mover wins even when the move also
completes the opponent's road). A player is in tak -- threatens a road -- when they have a road in
one as if it were their turn, whoever is to move.

Method (bitboards, bit ``sq`` = square ``sq``; nothing is played but the last test below):

* placements: :func:`~takzero.game.core.road_win_squares`, the empty squares touching both
  edges' groups of the player's road pieces for one pair of opposite edges (a flat and a capstone
  per square, as the reserve allows);
* spreads: nothing to do unless the player's road pieces plus every square any of their spreads
  can change hold a road. Then per stack the player controls and per direction, a drop pattern
  covering p squares is only tested when the road pieces plus the first p reachable squares (and
  the origin, if a piece left there can be the player's) hold a road -- a spread changes no other
  square; the union is first checked to cover every rank or every file (a road crosses all of
  them), which needs no flood fill. The test itself (:func:`_spread_road`) rebuilds the player's
  road pieces after the spread from the stack's colour bits, again without playing the move.
* a win at once (:func:`wins_at_once`): a road in one of the side to move, else a flat win when
  one ply can end the game (the mover's last piece, or fewer empty squares than the board size),
  found by playing every move.

Sources: the rules of Tak as in ``docs/tak-rules.md`` (road, dragon clause, flat win, spreads and
drop patterns); the spread patterns and free runs come from :mod:`takzero.game.core`. The tests
compare both functions with playing every legal move (``tests/test_game_tinue.py``).

Public API: :func:`road_in_one_moves`, :func:`is_tak`; compiled :func:`road_moves` and
:func:`wins_at_once` for other compiled code (the prover's move restriction, the features'
spread-road planes in :mod:`takzero.nn.features`). Re-exported by :mod:`takzero.game.tinue`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from takzero.game import core
from takzero.game.core import (
    CAP,
    DIR_DOWN,
    DIR_RIGHT,
    DIR_UP,
    FLAT,
    I_CAPS,
    I_PLY,
    I_RESULT,
    I_SIZE,
    I_STONES,
    OFF_HEIGHT,
    OFF_LO,
    OFF_TOP,
    PATTERN_LIST,
    PATTERN_NUM,
    RESULT_NONE,
    WALL,
    _free_run,
    _road_on,
    _spread_bitboards,
    direction_step,
    lowest_bit,
    make_placement,
    road_bitboard,
    road_win_squares,
    winning_move,
)
from takzero.game.position import Position

# ---------------------------------------------------------------------------------------------
# Compiled: road in one, win at once
# ---------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _line_masks(bb: np.uint64, size: int) -> tuple[int, np.int64]:
    """(ranks, files) holding a piece of ``bb``, as masks (bit r = rank r, bit f = file f)."""
    row = (np.uint64(1) << np.uint64(size)) - np.uint64(1)
    files = np.uint64(0)
    ranks = 0
    for r in range(size):
        x = (bb >> np.uint64(r * size)) & row
        files |= x
        if x != np.uint64(0):
            ranks |= 1 << r
    return ranks, np.int64(files)


@njit(cache=True, inline="always")
def _spread_road(bb, colours, height, moving_road, pattern, sq, step, side, size) -> bool:
    """Whether spreading the top pieces of ``sq`` with drop ``pattern`` gives ``side`` a road,
    from the road pieces ``bb`` of ``side`` before the move, without playing it. ``colours``: the
    stack's colour bits (bit t = the piece t below the top); the origin's new top is the piece
    just under the carried ones (a flat), each square passed is topped by the last piece dropped
    on it: carried pieces go bottom first, so after ``r`` pieces are left to carry, the square's
    top is the piece ``r`` below the old top; the last square gets the moving piece itself, which
    is a road piece unless it is a wall (``moving_road``)."""
    one = np.uint64(1)
    k = core.bit_length(pattern)
    out = bb & ~(one << np.uint64(sq))
    if height > k and ((colours >> k) & 1) == side:
        out |= one << np.uint64(sq)
    r = k
    i = k - 1
    s = sq
    while r > 0:
        s += step
        d = 1
        i -= 1
        while i >= 0 and ((pattern >> i) & 1) == 0:
            d += 1
            i -= 1
        r -= d
        bit = one << np.uint64(s)
        out &= ~bit
        if ((colours >> r) & 1) == side and (r > 0 or moving_road):
            out |= bit
    return _road_on(out, size)


@njit(cache=True)
def road_moves(state: np.ndarray, side: int, out: np.ndarray, list_all: bool) -> int:
    """Moves of ``side`` (0 white, 1 black) that complete a road for ``side`` at once, as if it
    were ``side``'s turn (whoever is to move): written to ``out`` (int64 move codes, length
    >= ``num_actions(N)``), their number returned; with ``list_all=False`` it stops at the first
    (returns 0 or 1). Nothing is found in a finished position or during the opening plies.
    Compiled callers pass ``bool(True)``/``bool(False)``: numba compiles one more copy of a
    function for each literal argument it is called with, ``bool()`` makes it a plain bool.

    Placements: :func:`~takzero.game.core.road_win_squares` (flat and capstone per square, as the
    reserve allows). Spreads: nothing to do unless ``side``'s road pieces plus every square any of
    its spreads can change hold a road; then for each stack ``side`` controls and each direction,
    the first p squares the spread can reach (and the origin, if a piece left there can be
    ``side``'s) are added to ``side``'s road pieces; a drop pattern that covers p squares is only
    tested -- on bitboards, without playing it (:func:`_spread_road`) -- when that union holds a
    road for its p (a necessary condition: a spread changes no other square; the union is first
    checked to cover every rank or every file, which needs no flood fill). ``state`` is restored.
    """
    if state[I_RESULT] != RESULT_NONE:
        return 0
    ply = state[I_PLY]
    flip = (ply & 1) != side
    if flip:
        state[I_PLY] = ply + 1
    if state[I_PLY] < 2:
        state[I_PLY] = ply
        return 0
    size = state[I_SIZE]
    nsq = size * size
    n = 0
    stones = state[I_STONES + side]
    caps = state[I_CAPS + side]
    if stones > 0 or caps > 0:
        win = road_win_squares(state)
        while win != np.uint64(0):
            sq = lowest_bit(win)
            win &= win - np.uint64(1)
            if stones > 0:
                out[n] = make_placement(sq, FLAT)
                n += 1
            if caps > 0:
                out[n] = make_placement(sq, CAP)
                n += 1
            if not list_all:
                state[I_PLY] = ply
                return 1
    bb = road_bitboard(state, side)
    own, stops, walls = _spread_bitboards(state, nsq, side)
    one = np.uint64(1)
    # first all spreads at once: side's road pieces plus every square any spread can change
    union = bb
    rest = own
    while rest != np.uint64(0):
        sq = lowest_bit(rest)
        rest &= rest - one
        union |= one << np.uint64(sq)
        is_cap = state[OFF_TOP + sq] == CAP
        for direction in range(4):
            free, wall = _free_run(stops, walls, size, sq, direction)
            reach = free + (1 if (is_cap and wall) else 0)
            step = direction_step(direction, size)
            s = sq
            for _ in range(reach):
                s += step
                union |= one << np.uint64(s)
    if not _road_on(union, size):
        state[I_PLY] = ply
        return n
    while own != np.uint64(0):
        sq = lowest_bit(own)
        own &= own - one
        height = state[OFF_HEIGHT + sq]
        colours = state[OFF_LO + sq]  # bit t: colour of the piece t below the top
        carry = min(height, size)
        is_cap = state[OFF_TOP + sq] == CAP
        moving_road = state[OFF_TOP + sq] != WALL
        # the origin stays a road piece of side's only if a piece left on it can be side's flat
        bit = one << np.uint64(sq)
        base_cover = bb & ~bit
        for t in range(1, min(carry, height - 1) + 1):
            if ((colours >> t) & 1) == side:
                base_cover |= bit
                break
        # the ranks and files those pieces cover (bit r, bit f): a road crosses every rank or
        # every file, and a spread adds squares of its own line only
        rank_mask, file_mask = _line_masks(base_cover, size)
        full = (1 << size) - 1
        r0 = sq // size
        f0 = sq - r0 * size
        for direction in range(4):
            free, wall = _free_run(stops, walls, size, sq, direction)
            f = 1 if (is_cap and wall) else 0
            reach = free + f
            # a pattern dropping on p squares changes only the origin and those p squares: it can
            # only make a road if the road pieces plus them hold one; the fewest such squares, p0
            p0 = 0
            step = direction_step(direction, size)
            s = sq
            cover = base_cover
            for i in range(reach):
                s += step
                cover |= one << np.uint64(s)
                # lines covered with the first i + 1 squares of the spread
                if direction == DIR_UP:
                    rk = rank_mask | (((1 << (i + 1)) - 1) << (r0 + 1))
                    fl = file_mask | (1 << f0)
                elif direction == DIR_DOWN:
                    rk = rank_mask | (((1 << (i + 1)) - 1) << (r0 - i - 1))
                    fl = file_mask | (1 << f0)
                elif direction == DIR_RIGHT:
                    rk = rank_mask | (1 << r0)
                    fl = file_mask | (((1 << (i + 1)) - 1) << (f0 + 1))
                else:
                    rk = rank_mask | (1 << r0)
                    fl = file_mask | (((1 << (i + 1)) - 1) << (f0 - i - 1))
                if (rk == full or fl == full) and _road_on(cover, size):
                    p0 = i + 1
                    break
            if p0 == 0:
                continue
            base = sq | (direction << 8)
            for j in range(PATTERN_NUM[carry, free, f]):
                pattern = PATTERN_LIST[carry, free, f, j]
                if core.popcount(pattern) < p0:
                    continue
                if _spread_road(bb, colours, height, moving_road, pattern, sq, step, side, size):
                    m = base | (pattern << 10)
                    out[n] = m
                    n += 1
                    if not list_all:
                        state[I_PLY] = ply
                        return 1
    state[I_PLY] = ply
    return n


@njit(cache=True)
def wins_at_once(state: np.ndarray, buf: np.ndarray) -> int:
    """A move with which the side to move wins at once (a road; or a flat win when the move ends
    the game: it empties the mover's reserve or fills the board), or -1. ``buf``: int64 scratch of
    length >= ``num_actions(N)``. Roads via :func:`road_moves`; the flat count only needs a full
    scan of the moves when one ply can end the game (the mover has one piece left, or fewer empty
    squares than the board size: a spread fills at most size - 1). ``state`` is restored."""
    if state[I_RESULT] != RESULT_NONE:
        return -1
    mover = state[I_PLY] & 1
    if road_moves(state, mover, buf, bool(False)) > 0:  # noqa: UP018 (a plain bool, see threats.road_moves)
        return buf[0]
    size = state[I_SIZE]
    empties = 0
    for sq in range(size * size):
        if state[OFF_HEIGHT + sq] == 0:
            empties += 1
    if state[I_STONES + mover] + state[I_CAPS + mover] > 1 and empties >= size:
        return -1
    return winning_move(state, buf)


# ---------------------------------------------------------------------------------------------
# Python API
# ---------------------------------------------------------------------------------------------


def _state_of(position: Position | np.ndarray) -> np.ndarray:
    if isinstance(position, Position):
        return position.state
    if isinstance(position, np.ndarray) and position.dtype == np.int64 and position.shape == (core.STATE_LEN,):
        return position
    raise TypeError(
        f"expected a Position or an int64 state array of shape ({core.STATE_LEN},), got {type(position).__name__}"
    )


def _side(state: np.ndarray, side: int | None, default: int) -> int:
    if side is None:
        return default
    if side not in (0, 1):
        raise ValueError(f"side must be 0 (white) or 1 (black), got {side!r}")
    return int(side)


def road_in_one_moves(position: Position | np.ndarray, side: int | None = None) -> np.ndarray:
    """Move codes (int64 array, placements first) with which ``side`` (0 white, 1 black; default the
    side to move) would complete a road for itself with one ply, as if it were ``side``'s turn.
    Empty during the opening plies and in a finished position. Raises TypeError/ValueError for a
    bad position or side. Method: :func:`road_moves`."""
    state = _state_of(position)
    side = _side(state, side, int(state[I_PLY]) & 1)
    buf = np.empty(core.num_actions(int(state[I_SIZE])) + 8, dtype=np.int64)
    n = road_moves(state, side, buf, True)
    return buf[:n].copy()


def is_tak(position: Position | np.ndarray, side: int | None = None) -> bool:
    """True if ``side`` threatens a road: it has a road in one (see :func:`road_in_one_moves`).
    ``side`` defaults to the player who made the last ply (the one *not* to move), so
    ``is_tak(pos)`` says whether the move that led to ``pos`` was tak. False in a finished position.
    Raises TypeError/ValueError for a bad position or side."""
    state = _state_of(position)
    side = _side(state, side, 1 - (int(state[I_PLY]) & 1))
    buf = np.empty(core.num_actions(int(state[I_SIZE])) + 8, dtype=np.int64)
    return road_moves(state, side, buf, False) > 0


__all__ = ["is_tak", "road_in_one_moves", "road_moves", "wins_at_once"]
