"""The plain interval minimax the flat-endgame tests check the exact search against (no pruning,
every move of both sides): shared by tests/test_flat_endgame.py and tests/test_flat_endgame_play.py."""

from __future__ import annotations

import numpy as np

from takzero.game import core


def reference_bounds(state: np.ndarray, depth: int) -> tuple[int, int]:
    """Exact (lower, upper) bounds of the result for the side to move of the unfinished
    ``state`` when every line is searched ``depth`` plies (plain minimax, no pruning)."""
    if depth == 0:
        return -1, 1
    mover = int(state[core.I_PLY]) & 1
    buf = np.empty(core.num_actions(int(state[core.I_SIZE])) + 8, dtype=np.int64)
    n = core.generate_moves(state, buf)
    lo = hi = -2
    for code in buf[:n].tolist():
        undo = core.make_move(state, code)
        r = int(state[core.I_RESULT])
        if r != core.RESULT_NONE:
            w = core.result_winner(r)
            clo = chi = 0 if w < 0 else (1 if w == mover else -1)
        else:
            a, b = reference_bounds(state, depth - 1)
            clo, chi = -b, -a
        core.unmake_move(state, code, undo)
        lo, hi = max(lo, clo), max(hi, chi)
    return lo, hi
