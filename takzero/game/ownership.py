"""Ownership of the board: the owner of each square's top piece (KataGo's ownership target).

KataGo (Wu 2019, "Accelerating Self-Play Learning in Go", arXiv:1902.10565, section 4.1) trains an
auxiliary head to predict, for every point, who owns it at the end of the game. The Tak analogue
used here: the colour of the top piece of each square (flat, wall or capstone) in the final
position of the game, seen from the player to move at the recorded position.
"""

from __future__ import annotations

import numpy as np

from takzero.game.core import I_SIZE, OFF_HEIGHT, OFF_LO

__all__ = ["ownership"]


def ownership(final_state: np.ndarray, mover: int) -> np.ndarray:
    """Owner of each square's top piece in ``final_state`` from ``mover``'s view.

    Args:
        final_state: (STATE_LEN,) int64 core state (normally the last position of a game).
        mover: 0 (white) or 1 (black), the player to move at the position the target is for.

    Returns:
        (N*N,) int8 indexed by square ``rank * N + file``: +1 where ``mover`` owns the top piece,
        -1 where the opponent does, 0 on an empty square.

    Raises:
        ValueError: ``mover`` is not 0 or 1.
    """
    if mover not in (0, 1):
        raise ValueError(f"mover must be 0 or 1, got {mover!r}")
    size = int(final_state[I_SIZE])
    nsq = size * size
    height = final_state[OFF_HEIGHT : OFF_HEIGHT + nsq]
    top_black = (final_state[OFF_LO : OFF_LO + nsq] & 1).astype(np.int8)  # colour bit of the top
    white_view = np.where(height > 0, 1 - 2 * top_black, 0).astype(np.int8)
    return white_view if mover == 0 else -white_view
