"""The 8 symmetries of the square board, acting on squares, spread directions, moves and positions.

Transform ``t`` in 0..7: first mirror the files (a <-> last file, rank kept) if ``t & 4``, then
rotate ``t & 3`` quarter turns counter-clockwise (seen from white's side, rank 1 at the bottom). A
quarter turn maps (file, rank) -> (N - 1 - rank, file) and the spread directions up -> left ->
down -> right -> up; the mirror swaps left and right. Drop patterns and piece kinds are unchanged.
``t = 0`` is the identity.

This module is the one implementation: compiled functions (numba, usable from the search and the
feature code) and the cached permutation tables built from them. The action-space permutations of
``takzero.nn.actions`` and the training augmentation use these, so rules, features and policy maps
agree by construction; tests check the convention against an independent coordinate definition.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from numba import njit

from takzero.game.core import (
    I_HASH,
    I_SIZE,
    MAX_SQ,
    OFF_HEIGHT,
    OFF_HI,
    OFF_LO,
    OFF_TOP,
    SPREAD,
    hash_from_scratch,
)

NUM_SYMMETRIES = 8


@njit(cache=True)
def transform_square(sq: int, size: int, t: int) -> int:
    """Image of square ``sq`` (rank * N + file) under transform ``t``."""
    rank = sq // size
    file = sq - rank * size
    if t & 4:
        file = size - 1 - file
    for _ in range(t & 3):
        new_file = size - 1 - rank
        rank = file
        file = new_file
    return rank * size + file


@njit(cache=True)
def transform_direction(direction: int, t: int) -> int:
    """Image of a spread direction (0 '+', 1 '-', 2 '>', 3 '<') under transform ``t``."""
    d = direction
    if t & 4:
        if d == 2:
            d = 3
        elif d == 3:
            d = 2
    for _ in range(t & 3):
        if d == 0:
            d = 3
        elif d == 3:
            d = 1
        elif d == 1:
            d = 2
        else:
            d = 0
    return d


@njit(cache=True)
def transform_move(code: int, size: int, t: int) -> int:
    """Move code ``code`` seen after applying transform ``t`` to the board: the square and the
    spread direction are mapped, the piece kind and the drop pattern are kept."""
    sq = transform_square(code & 63, size, t)
    kind = (code >> 6) & 3
    if kind != SPREAD:
        return sq | (kind << 6)
    return sq | (transform_direction((code >> 8) & 3, t) << 8) | (code & (255 << 10))


@njit(cache=True)
def transform_state_into(state: np.ndarray, t: int, out: np.ndarray) -> None:
    """Write the position ``state`` transformed by ``t`` into ``out`` (both (STATE_LEN,) int64,
    distinct arrays): header copied, per-square arrays permuted, hash recomputed."""
    size = state[I_SIZE]
    out[:] = state
    for sq in range(MAX_SQ):
        out[OFF_HEIGHT + sq] = 0
        out[OFF_TOP + sq] = 0
        out[OFF_LO + sq] = 0
        out[OFF_HI + sq] = 0
    for sq in range(size * size):
        s2 = transform_square(sq, size, t)
        out[OFF_HEIGHT + s2] = state[OFF_HEIGHT + sq]
        out[OFF_TOP + s2] = state[OFF_TOP + sq]
        out[OFF_LO + s2] = state[OFF_LO + sq]
        out[OFF_HI + s2] = state[OFF_HI + sq]
    out[I_HASH] = hash_from_scratch(out)


@cache
def square_permutation(size: int, t: int) -> np.ndarray:
    """``perm[sq]`` = image of square ``sq`` under transform ``t``; read-only int64 (N*N,)."""
    perm = np.array([transform_square(sq, size, t) for sq in range(size * size)], dtype=np.int64)
    perm.setflags(write=False)
    return perm


@cache
def direction_permutation(t: int) -> np.ndarray:
    """``perm[d]`` = image of spread direction ``d`` under transform ``t``; read-only int64 (4,)."""
    perm = np.array([transform_direction(d, t) for d in range(4)], dtype=np.int64)
    perm.setflags(write=False)
    return perm


def inverse(t: int) -> int:
    """The transform that undoes ``t``: a rotation by k is undone by 4 - k; mirror-then-rotate
    transforms are involutions."""
    if t & 4:
        return t
    return (4 - (t & 3)) & 3


def transform_squares(values: np.ndarray, size: int, t: int) -> np.ndarray:
    """Per-square values moved with the board: ``out[..., perm[sq]] = values[..., sq]`` with
    ``perm = square_permutation(size, t)`` (the map of ``transform_state``). ``values``: (..., N*N)
    any dtype, squares ``rank * N + file``; returns a new array of the same shape and dtype."""
    out = np.empty_like(values)
    out[..., square_permutation(size, int(t))] = values
    return out


def transform_state(state: np.ndarray, t: int) -> np.ndarray:
    """A new state array: the position of ``state`` under transform ``t``, hash recomputed."""
    out = np.empty_like(state)
    transform_state_into(state, int(t), out)
    return out
