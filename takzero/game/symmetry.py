"""The 8 symmetries of the square board, acting on squares, spread directions, moves and positions.

Transform ``t`` in 0..7: first mirror the files (a <-> last file) if ``t & 4``, then rotate
``t & 3`` quarter turns counter-clockwise. ``t = 0`` is the identity. Every consumer (rules, features,
action permutations) uses these tables, so all of them agree by construction; tests check it.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from takzero.game.core import (
    DIR_DOWN,
    DIR_LEFT,
    DIR_RIGHT,
    DIR_UP,
    I_HASH,
    I_SIZE,
    OFF_HEIGHT,
    OFF_HI,
    OFF_LO,
    OFF_TOP,
    SPREAD,
    hash_from_scratch,
)

NUM_SYMMETRIES = 8

# Quarter turn counter-clockwise: up -> left, left -> down, down -> right, right -> up.
_ROT_DIR = {DIR_UP: DIR_LEFT, DIR_LEFT: DIR_DOWN, DIR_DOWN: DIR_RIGHT, DIR_RIGHT: DIR_UP}
_MIRROR_DIR = {DIR_UP: DIR_UP, DIR_DOWN: DIR_DOWN, DIR_LEFT: DIR_RIGHT, DIR_RIGHT: DIR_LEFT}


def _map_coords(file: int, rank: int, size: int, t: int) -> tuple[int, int]:
    if t & 4:
        file = size - 1 - file
    for _ in range(t & 3):
        file, rank = size - 1 - rank, file
    return file, rank


@cache
def square_permutation(size: int, t: int) -> np.ndarray:
    """``perm[sq]`` = image of square ``sq`` under transform ``t``; int64 array of shape (N*N,)."""
    perm = np.empty(size * size, dtype=np.int64)
    for sq in range(size * size):
        f, r = _map_coords(sq % size, sq // size, size, t)
        perm[sq] = r * size + f
    perm.setflags(write=False)
    return perm


@cache
def direction_permutation(t: int) -> np.ndarray:
    """``perm[d]`` = image of spread direction ``d`` under transform ``t``; int64 (4,)."""
    perm = np.empty(4, dtype=np.int64)
    for d in range(4):
        x = d
        if t & 4:
            x = _MIRROR_DIR[x]
        for _ in range(t & 3):
            x = _ROT_DIR[x]
        perm[d] = x
    perm.setflags(write=False)
    return perm


def inverse(t: int) -> int:
    """The transform that undoes ``t``."""
    if t & 4:
        return t  # mirrors (with any rotation) are involutions
    return (4 - (t & 3)) & 3


def transform_move(code: int, size: int, t: int) -> int:
    """Move code ``code`` seen after applying transform ``t`` to the board."""
    sq = int(square_permutation(size, t)[code & 63])
    if (code >> 6) & 3 != SPREAD:
        return (code & ~63) | sq
    d = int(direction_permutation(t)[(code >> 8) & 3])
    return (code & ~(63 | (3 << 8))) | sq | (d << 8)


def transform_state(state: np.ndarray, t: int) -> np.ndarray:
    """A new state array: the position of ``state`` under transform ``t``, hash recomputed."""
    size = int(state[I_SIZE])
    n = size * size
    perm = square_permutation(size, t)
    out = state.copy()
    for off in (OFF_HEIGHT, OFF_TOP, OFF_LO, OFF_HI):
        out[off + perm] = state[off : off + n]
    out[I_HASH] = hash_from_scratch(out)
    return out
