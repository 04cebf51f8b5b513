"""Perft (move-path counting) over :class:`~takzero.game.position.Position`: the standard check of
a move generator against published counts (``tests/data/perft.json``).

``perft(position, depth)`` is the number of move sequences of length ``depth`` from the position.
Convention (as in ``perft.json``): ``perft(p, 0) = 1``; for ``depth >= 1`` a finished position (a
road, a full board, an empty reserve) counts 0; a move that ends the game is still counted at the
ply it is played. ``terminal_counts_one=True`` gives the other convention some engines print
(a finished position inside the tree counts 1, as a leaf).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from takzero.game import core
from takzero.game.core import I_RESULT, RESULT_NONE
from takzero.game.position import Position


@njit(cache=True)
def _perft_terminal_one(state: np.ndarray, depth: int, buffers: np.ndarray) -> int:
    if state[I_RESULT] != RESULT_NONE:
        return 1
    if depth == 0:
        return 1
    if depth == 1:
        return core.count_moves(state)
    moves = buffers[depth]
    n = core.generate_moves(state, moves)
    total = 0
    for j in range(n):
        m = moves[j]
        undo = core.make_move(state, m)
        total += _perft_terminal_one(state, depth - 1, buffers)
        core.unmake_move(state, m, undo)
    return total


def _state_of(position: Position | np.ndarray) -> np.ndarray:
    state = position.state if isinstance(position, Position) else position
    if not (isinstance(state, np.ndarray) and state.dtype == np.int64 and state.shape == (core.STATE_LEN,)):
        raise TypeError("position must be a Position or a core state array (int64, STATE_LEN)")
    return state.copy()


def perft(position: Position | np.ndarray, depth: int, *, terminal_counts_one: bool = False) -> int:
    """Number of legal move sequences of length ``depth`` from ``position`` (a Position or a core
    state array; it is not modified). Single-threaded compiled code; the last ply is counted in
    bulk. Raises ValueError for a negative depth, TypeError for something that is not a position.

    ``terminal_counts_one``: count a position where the game is over as one leaf (the convention
    of some other engines) instead of 0; the two differ only where games end inside the tree.
    """
    if depth < 0:
        raise ValueError(f"depth must be >= 0, got {depth}")
    state = _state_of(position)
    if depth == 0:
        return 1
    if terminal_counts_one:
        if state[I_RESULT] != RESULT_NONE:
            return 1
        size = int(state[core.I_SIZE])
        buffers = np.empty((depth + 1, core.num_actions(size)), dtype=np.int64)
        return int(_perft_terminal_one(state, depth, buffers))
    return int(core.perft(state, depth))


def divide(
    position: Position | np.ndarray, depth: int, *, terminal_counts_one: bool = False
) -> dict[str, int]:
    """Perft split by first move: ``{ptn of move: perft(child, depth - 1)}`` in generation order
    (``*`` marks flattening spreads). The values sum to ``perft(position, depth)``.
    Raises ValueError unless ``depth >= 1``."""
    if depth < 1:
        raise ValueError(f"divide needs depth >= 1, got {depth}")
    pos = Position(_state_of(position))
    out: dict[str, int] = {}
    for code in pos.legal_move_codes().tolist():
        text = pos.ptn(code)
        undo = pos.make(code)
        out[text] = perft(pos, depth - 1, terminal_counts_one=terminal_counts_one)
        pos.unmake(code, undo)
    return out


__all__ = ["divide", "perft"]
