"""Policy action space: move code <-> action index, legal masks and the 8 board symmetries.

Action space for board size N (``A = num_actions(N)``)::

    channel 0, 1, 2                          placement of a flat, wall, capstone
    channel 3 + d * (2**N - 2) + (p - 1)      spread in direction d (0 '+', 1 '-', 2 '>', 3 '<')
                                              with drop pattern p in 1 .. 2**N - 2 (core encoding)
    index = channel * N * N + square          square = rank * N + file (a1 = 0, as in core)

so ``A = (3 + 4 * (2**N - 2)) * N * N``: 3,075 on 5x5 (123 channels), 9,036 on 6x6 (251 channels).
The index is channel-major, so ``policy_logits.reshape(B, channels, N, N)[b, c, rank, file]`` is the
logit of action ``c * N * N + rank * N + file`` (the layout of the model's policy convolution).

The opening plies (0 and 1) place a flat of the opponent's colour; they use the flat-placement
channel like any flat placement.

Symmetries. Transform ``t`` in 0..7: ``t & 4`` mirrors the files first (a <-> last file, rank kept),
then ``t & 3`` rotates the board that many quarter turns counter-clockwise (seen from white's side,
rank 1 at the bottom). A quarter turn maps (file, rank) -> (N - 1 - rank, file) and the spread
directions up -> left -> down -> right -> up; the mirror swaps left and right. Drop patterns are
unchanged. This is ``takzero.game.symmetry``'s convention and implementation: the permutations here
are built from its tables and its compiled transforms are re-exported here.

Compiled functions (numba, ``cache=True``): ``move_to_action``, ``action_to_move``, ``legal_mask``,
``legal_actions``, ``transform_square``, ``transform_direction``, ``transform_move``,
``transform_state_into``.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from takzero.game import symmetry
from takzero.game.core import (
    I_SIZE,
    STATE_LEN,
    generate_moves,
    num_actions,  # re-exported: the action count is the rules' count of move codes
)
from takzero.game.symmetry import (  # re-exported: the compiled transforms live with the rules
    transform_direction,
    transform_move,
    transform_square,
    transform_state_into,
)

if TYPE_CHECKING:
    import torch

    ArrayLike = np.ndarray | torch.Tensor

#: Number of symmetry transforms of the square board.
NUM_SYMMETRIES = 8
#: Placement channels per square (flat, wall, capstone).
NUM_PLACEMENT_CHANNELS = 3

__all__ = [
    "NUM_SYMMETRIES",
    "action_channels",
    "action_permutation",
    "action_to_move",
    "inverse_transform",
    "legal_actions",
    "legal_mask",
    "legal_softmax",
    "move_to_action",
    "num_actions",
    "spread_patterns",
    "square_permutation",
    "transform_direction",
    "transform_move",
    "transform_planes",
    "transform_policy",
    "transform_square",
    "transform_state",
    "transform_state_into",
]


@njit(cache=True, inline="always")
def spread_patterns(size: int) -> int:
    """Number of drop patterns per spread direction on a size-N board: ``2**N - 2`` (compiled,
    callable from Python)."""
    return (1 << size) - 2


def action_channels(size: int) -> int:
    """Action channels per square: ``3 + 4 * (2**N - 2)`` (251 on 6x6)."""
    return NUM_PLACEMENT_CHANNELS + 4 * spread_patterns(size)


# ---------------------------------------------------------------------------------------------
# Move <-> action index
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def move_to_action(move: int, size: int) -> int:
    """Action index (int) of the core move code ``move`` on a size-``size`` board.

    No validation: a move code that cannot occur on this size (square >= N*N, pattern 0 or
    >= 2**N - 1) gives a meaningless index.
    """
    sq = move & 63
    kind = (move >> 6) & 3
    nsq = size * size
    if kind != 0:
        return (kind - 1) * nsq + sq
    direction = (move >> 8) & 3
    pattern = (move >> 10) & 255
    channel = 3 + direction * spread_patterns(size) + pattern - 1
    return channel * nsq + sq


@njit(cache=True)
def action_to_move(index: int, size: int) -> int:
    """Core move code of action ``index`` (0 <= index < num_actions(size)); inverse of
    ``move_to_action``. No validation of the range."""
    nsq = size * size
    channel = index // nsq
    sq = index - channel * nsq
    if channel < 3:
        return sq | ((channel + 1) << 6)
    r = channel - 3
    npat = spread_patterns(size)
    direction = r // npat
    pattern = r - direction * npat + 1
    return sq | (direction << 8) | (pattern << 10)


@njit(cache=True)
def legal_actions(state: np.ndarray, moves_out: np.ndarray, actions_out: np.ndarray) -> int:
    """Fill ``moves_out[:n]`` with the legal move codes of ``state`` (order of
    ``core.generate_moves``) and ``actions_out[:n]`` with their action indices; returns ``n``.

    Both outputs are int64 arrays of length >= num_actions(N). A finished position has n = 0.
    """
    size = state[I_SIZE]
    n = generate_moves(state, moves_out)
    for i in range(n):
        actions_out[i] = move_to_action(moves_out[i], size)
    return n


@njit(cache=True, nogil=True)
def _legal_mask_impl(states: np.ndarray, out: np.ndarray, moves: np.ndarray) -> None:
    g_count = states.shape[0]
    for g in range(g_count):
        state = states[g]
        size = state[I_SIZE]
        row = out[g]
        row[:] = False
        n = generate_moves(state, moves)
        for i in range(n):
            row[move_to_action(moves[i], size)] = True


def legal_mask(states: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Legal-move mask of a batch: ``out[g, a]`` is True iff action ``a`` is legal in ``states[g]``.

    Args:
        states: (G, STATE_LEN) int64 positions, all of one size N.
        out: (G, A) bool, A = num_actions(N); overwritten (rows of finished positions are all
            False).

    Returns:
        ``out``.

    Raises:
        ValueError: wrong dtypes/shapes, or a position whose size does not match ``out``.
    """
    if states.ndim != 2 or states.shape[1] != STATE_LEN or states.dtype != np.int64:
        raise ValueError(
            f"states must be (G, {STATE_LEN}) int64, got {states.shape} {states.dtype}"
        )
    if out.ndim != 2 or out.shape[0] != states.shape[0] or out.dtype != np.bool_:
        raise ValueError(f"out must be ({states.shape[0]}, A) bool, got {out.shape} {out.dtype}")
    if states.shape[0] == 0:
        return out
    sizes = states[:, I_SIZE]
    size = int(sizes[0])
    if not (sizes == size).all() or out.shape[1] != num_actions(size):
        raise ValueError(
            f"all positions must have the size whose action space has {out.shape[1]} entries"
        )
    _legal_mask_impl(states, out, np.empty(num_actions(size), dtype=np.int64))  # per call: threads
    return out


@njit(cache=True, nogil=True)
def softmax_at(logits: np.ndarray, out: np.ndarray, legal: np.ndarray, n: int) -> None:
    """Row kernel: ``out`` (A,) float32 gets the softmax of ``logits`` (A,) over the ``n`` action
    indices ``legal[:n]`` (int64) and 0 elsewhere; no legal entry, or all of them -inf, gives
    zeros; a NaN or +inf legal logit makes the legal entries NaN (the rules of
    ``model.masked_softmax``). Shared by :func:`legal_softmax` and the mask path of
    ``takzero.nn.outputs.masked_softmax_np``."""
    out[:] = 0.0
    mx = -np.inf
    for i in range(n):
        if logits[legal[i]] > mx:
            mx = logits[legal[i]]
    if not np.isfinite(mx):
        mx = 0.0
    total = 0.0
    for i in range(n):
        e = np.exp(np.float32(logits[legal[i]] - mx))
        out[legal[i]] = e
        total += e
    if total > 0.0 and total < np.inf:
        inv = np.float32(1.0 / total)
        for i in range(n):
            out[legal[i]] *= inv
    elif total != 0.0:  # NaN (a NaN logit) or +inf (a +inf logit): the row is broken, say so
        for i in range(n):
            out[legal[i]] = np.nan


@njit(cache=True, nogil=True)
def _legal_softmax_impl(states: np.ndarray, logits: np.ndarray, out: np.ndarray, moves: np.ndarray,
                        legal: np.ndarray) -> None:
    for g in range(states.shape[0]):
        size = states[g, I_SIZE]
        n = generate_moves(states[g], moves)
        for i in range(n):
            legal[i] = move_to_action(moves[i], size)
        softmax_at(logits[g], out[g], legal, n)


def legal_softmax(states: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """Policy priors: the softmax of each position's policy logits over its legal actions.

    The same numbers as ``masked_softmax_np(logits, legal_mask(states, ...))``
    (``takzero.nn.inference``): 0 on illegal actions, an all-zero row for a finished position
    (or one whose legal logits are all -inf), NaN on the legal entries of a row with a NaN or
    +inf legal logit. It walks each position's legal moves (a few dozen) instead of a (G, A)
    mask: on 6x6 (A = 9,036) the mask and its scan were about a seventh of an engine's search.

    Args:
        states: (G, STATE_LEN) int64 positions, all of one size N.
        logits: (G, A) float32 policy logits, A = num_actions(N).

    Returns:
        (G, A) float32 priors (a new array).

    Raises:
        ValueError: wrong shapes or dtypes, or positions of another size than the logits'.
    """
    if states.ndim != 2 or states.shape[1] != STATE_LEN or states.dtype != np.int64:
        raise ValueError(f"states must be (G, {STATE_LEN}) int64, got {states.shape} {states.dtype}")
    logits = np.ascontiguousarray(logits, dtype=np.float32)
    if logits.ndim != 2 or logits.shape[0] != states.shape[0]:
        raise ValueError(f"logits must be ({states.shape[0]}, A), got {logits.shape}")
    out = np.empty(logits.shape, np.float32)
    if states.shape[0] == 0:
        return out
    size = int(states[0, I_SIZE])
    if not (states[:, I_SIZE] == size).all() or logits.shape[1] != num_actions(size):
        raise ValueError(f"all positions must have the size whose action space has {logits.shape[1]} entries")
    a = num_actions(size)
    _legal_softmax_impl(states, logits, out, np.empty(a, np.int64), np.empty(a, np.int64))
    return out


# ---------------------------------------------------------------------------------------------
# Symmetries
# ---------------------------------------------------------------------------------------------


def transform_state(state: np.ndarray, t: int) -> np.ndarray:
    """Return a new (STATE_LEN,) int64 position: ``state`` transformed by ``t`` (hash recomputed).
    Same as ``takzero.game.symmetry.transform_state`` (which this calls), with argument checks.

    Raises ValueError for t outside 0..7 or a wrong shape/dtype.
    """
    _check_t(t)
    if state.shape != (STATE_LEN,) or state.dtype != np.int64:
        raise ValueError(f"state must be ({STATE_LEN},) int64, got {state.shape} {state.dtype}")
    return symmetry.transform_state(state, int(t))


def inverse_transform(t: int) -> int:
    """Index of the transform that undoes ``t`` (``takzero.game.symmetry.inverse``)."""
    _check_t(t)
    return symmetry.inverse(int(t))


def _check_t(t: int) -> None:
    if not 0 <= int(t) < NUM_SYMMETRIES:
        raise ValueError(f"symmetry index must be in 0..7, got {t}")


def square_permutation(size: int, t: int) -> np.ndarray:
    """(N*N,) int64 read-only array ``perm`` with ``perm[sq]`` = image of ``sq`` under ``t``
    (``takzero.game.symmetry.square_permutation``)."""
    _check_t(t)
    return symmetry.square_permutation(int(size), int(t))


@cache
def _action_permutation(size: int, t: int) -> np.ndarray:
    nsq = size * size
    npat = spread_patterns(size)
    sq_perm = symmetry.square_permutation(size, t)
    dir_perm = symmetry.direction_permutation(t)
    channel_map = np.arange(action_channels(size), dtype=np.int64)
    spread = channel_map[NUM_PLACEMENT_CHANNELS:] - NUM_PLACEMENT_CHANNELS
    direction, pattern = np.divmod(spread, npat)
    channel_map[NUM_PLACEMENT_CHANNELS:] = (
        NUM_PLACEMENT_CHANNELS + dir_perm[direction] * npat + pattern
    )
    perm = (channel_map[:, None] * nsq + sq_perm[None, :]).reshape(-1)
    perm.flags.writeable = False
    return perm


def action_permutation(size: int, t: int) -> np.ndarray:
    """(A,) int64 read-only permutation of the action indices under transform ``t``.

    ``perm[a]`` is the index of the transformed move of action ``a`` (square and spread direction
    mapped by ``takzero.game.symmetry``, piece kind and drop pattern kept), so for a policy vector
    ``p`` of a position, the policy of the transformed position is ``q`` with
    ``q[perm[a]] == p[a]`` (see ``transform_policy``). Cached per (size, t).
    """
    _check_t(t)
    return _action_permutation(int(size), int(t))


@cache
def _inverse_perm(size: int, t: int, kind: str) -> np.ndarray:
    perm = _action_permutation(size, t) if kind == "action" else square_permutation(size, t)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.shape[0], dtype=np.int64)
    inv.flags.writeable = False
    return inv


def transform_policy(policy: ArrayLike, size: int, t: int) -> ArrayLike:
    """Policy-shaped data (numpy array or torch tensor, last axis = A actions: logits,
    probabilities, legal masks) of a position, mapped to the position transformed by ``t``:
    ``out[..., perm[a]] = policy[..., a]``. Returns a new array/tensor of the same type."""
    _check_t(t)
    inv = _inverse_perm(int(size), int(t), "action")
    return _gather_last(policy, inv)


def transform_planes(planes: ArrayLike, t: int) -> ArrayLike:
    """Planes (numpy array or torch tensor, shape (..., N, N) indexed [rank, file]) of a position,
    mapped to the position transformed by ``t``: the value at square sq moves to the square's
    image. Returns a new array/tensor of the same type and shape."""
    _check_t(t)
    size = planes.shape[-1]
    if planes.shape[-2] != size:
        raise ValueError(f"planes must end in (N, N), got {tuple(planes.shape)}")
    inv = _inverse_perm(int(size), int(t), "square")
    flat = planes.reshape(*planes.shape[:-2], size * size)
    return _gather_last(flat, inv).reshape(planes.shape)


def _gather_last(x: ArrayLike, index: np.ndarray) -> ArrayLike:
    if isinstance(x, np.ndarray):
        return x[..., index]
    import torch

    if isinstance(x, torch.Tensor):
        return x.index_select(-1, torch.tensor(index, device=x.device))
    raise TypeError(f"expected a numpy array or torch tensor, got {type(x).__name__}")
