"""Input planes of the network: a batch of positions -> (B, C, N, N) float32, mover's view.

Feature version 1 (``FEATURE_VERSION``). ``L`` = number of stack layers encoded (``layers``),
N = board size. "own" is the player to move (``ply & 1``), "opp" the other one. Planes are indexed
``[rank, file]``: ``planes[b, c, rank, file]`` is square ``rank * N + file`` (a1 = [0, 0]), the same
square numbering as the rules core and the action space. ``C = num_channels(L) = 2 * L + 15``.

=================  =========================================================================
channel            content
=================  =========================================================================
2d, d < L          1 where the piece d places below the top of the stack (d = 0: the top) is
                   own
2d + 1, d < L      1 where that piece is the opponent's
2L                 own pieces deeper than the top L of the stack, count / 10
2L + 1             opponent's pieces deeper than the top L, count / 10
2L + 2             1 where the top piece is an own flat
2L + 3             1 where the top piece is an own wall
2L + 4             1 where the top piece is an own capstone
2L + 5             1 where the top piece is an opponent's flat
2L + 6             1 where the top piece is an opponent's wall
2L + 7             1 where the top piece is an opponent's capstone
2L + 8             own stones in reserve / standard stones of size N (broadcast)
2L + 9             own capstones in reserve / max(1, standard capstones of N) (broadcast)
2L + 10            opponent's stones in reserve / standard stones of N (broadcast)
2L + 11            opponent's capstones / max(1, standard capstones of N) (broadcast)
2L + 12            komi from the mover's view in half points / 4 (broadcast): +half_komi when
                   black (who receives komi) is to move, -half_komi when white is to move
2L + 13            1 on every square of the board (marks the board for multi-size nets)
2L + 14            1 everywhere during the opening swap (plies 0 and 1), else 0
=================  =========================================================================

Standard reserves are ``core.STANDARD_RESERVES`` (6x6: 30 stones, 1 capstone). The default
``layers`` is ``default_layers(N) = N + 2`` (the carry limit plus two): 8 on 6x6, 31 channels.

The side to move's colour is deliberately not a plane (the rules are colour-symmetric apart from
komi, which the komi plane carries).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from takzero.game.core import (
    I_CAPS,
    I_HALF_KOMI,
    I_PLY,
    I_RESULT,
    I_SIZE,
    I_STONES,
    MAX_SIZE,
    OFF_HEIGHT,
    OFF_HI,
    OFF_LO,
    OFF_TOP,
    STANDARD_RESERVES,
    STATE_LEN,
    WORD_BITS,
    generate_moves,
    make_move,
    num_actions,
    popcount,
    unmake_move,
)

#: Version of the channel layout documented above; models store it and refuse other versions.
FEATURE_VERSION = 1
#: Channels that do not depend on the number of layers.
NUM_FIXED_CHANNELS = 15
#: Divisor of the counts of pieces deeper than the encoded layers.
BURIED_SCALE = 10.0
#: Divisor of the mover's-view half-komi.
KOMI_SCALE = 4.0

__all__ = [
    "FEATURE_VERSION",
    "channel_names",
    "default_layers",
    "encode",
    "layers_from_channels",
    "new_planes",
    "num_channels",
    "random_states",
]

# per-size normalisers of the reserve planes, indexed by N
_STD_STONES = np.ones(MAX_SIZE + 1, dtype=np.float32)
_STD_CAPS = np.ones(MAX_SIZE + 1, dtype=np.float32)
for _n, (_stones, _caps) in STANDARD_RESERVES.items():
    _STD_STONES[_n] = _stones
    _STD_CAPS[_n] = max(1, _caps)


def default_layers(size: int) -> int:
    """Default number of stack layers for board size N: the carry limit N plus 2."""
    return int(size) + 2


def num_channels(layers: int) -> int:
    """Number of input planes C for ``layers`` stack layers: ``2 * layers + 15``."""
    if layers < 1:
        raise ValueError(f"layers must be >= 1, got {layers}")
    return 2 * int(layers) + NUM_FIXED_CHANNELS


def layers_from_channels(channels: int) -> int:
    """Inverse of ``num_channels``; raises ValueError if ``channels`` is not 2 * L + 15, L >= 1."""
    layers, odd = divmod(int(channels) - NUM_FIXED_CHANNELS, 2)
    if odd or layers < 1:
        raise ValueError(f"{channels} is not a valid channel count (2 * L + 15, L >= 1)")
    return layers


def channel_names(layers: int) -> list[str]:
    """Short names of the C channels, in order (for logs, docs and tests)."""
    names = []
    for d in range(layers):
        names += [f"own_layer{d}", f"opp_layer{d}"]
    names += ["own_buried", "opp_buried"]
    names += ["own_flat", "own_wall", "own_cap", "opp_flat", "opp_wall", "opp_cap"]
    names += ["own_stones", "own_caps", "opp_stones", "opp_caps", "komi", "board", "opening"]
    assert len(names) == num_channels(layers)
    return names


def new_planes(batch: int, size: int, layers: int | None = None) -> np.ndarray:
    """Zeroed (batch, C, N, N) float32 array for ``encode`` (C from ``layers``, default
    ``default_layers(size)``)."""
    if layers is None:
        layers = default_layers(size)
    return np.zeros((batch, num_channels(layers), size, size), dtype=np.float32)


@njit(cache=True, inline="always")
def _black_below(lo: int, hi: int, start: int, end: int) -> int:
    """Number of black pieces at depths start .. end - 1 from the top (bit d = depth d)."""
    n = 0
    if start < WORD_BITS:
        stop = min(end, WORD_BITS)
        if stop > start:
            n += popcount((lo >> start) & ((1 << (stop - start)) - 1))
    if end > WORD_BITS:
        s2 = max(start, WORD_BITS) - WORD_BITS
        e2 = end - WORD_BITS
        if e2 > s2:
            n += popcount((hi >> s2) & ((1 << (e2 - s2)) - 1))
    return n


@njit(cache=True)
def _encode(
    states: np.ndarray, out: np.ndarray, layers: int, std_stones: np.ndarray, std_caps: np.ndarray
) -> None:
    base = 2 * layers
    for b in range(states.shape[0]):
        s = states[b]
        n = s[I_SIZE]
        mover = s[I_PLY] & 1
        opp = 1 - mover
        o = out[b]
        o[: base + 8] = 0.0
        for sq in range(n * n):
            h = s[OFF_HEIGHT + sq]
            if h == 0:
                continue
            r = sq // n
            f = sq - r * n
            lo = s[OFF_LO + sq]
            hi = s[OFF_HI + sq]
            top = min(h, layers)
            for d in range(top):
                if d < WORD_BITS:
                    c = (lo >> d) & 1
                else:
                    c = (hi >> (d - WORD_BITS)) & 1
                o[2 * d + (c ^ mover), r, f] = 1.0
            if h > layers:
                black = _black_below(lo, hi, layers, h)
                total = h - layers
                own = black if mover == 1 else total - black
                o[base, r, f] = own / BURIED_SCALE
                o[base + 1, r, f] = (total - own) / BURIED_SCALE
            t = s[OFF_TOP + sq]
            o[base + 2 + 3 * ((lo & 1) ^ mover) + t - 1, r, f] = 1.0
        ss = std_stones[n]
        sc = std_caps[n]
        o[base + 8] = s[I_STONES + mover] / ss
        o[base + 9] = s[I_CAPS + mover] / sc
        o[base + 10] = s[I_STONES + opp] / ss
        o[base + 11] = s[I_CAPS + opp] / sc
        hk = s[I_HALF_KOMI]
        if mover == 0:
            hk = -hk
        o[base + 12] = hk / KOMI_SCALE
        o[base + 13] = 1.0
        o[base + 14] = 1.0 if s[I_PLY] < 2 else 0.0


def encode(states: np.ndarray, out: np.ndarray, layers: int | None = None) -> np.ndarray:
    """Encode a batch of positions into input planes (channel table in the module docstring).

    Args:
        states: (B, STATE_LEN) int64 positions, all of size N (may be finished positions).
        out: (B, C, N, N) float32, C-contiguous; fully overwritten.
        layers: stack layers L; by default inferred from C (= 2 L + 15). If given it must match.

    Returns:
        ``out``.

    Raises:
        ValueError: on wrong shapes/dtypes, mixed sizes or a C that does not match ``layers``.
    """
    if states.ndim != 2 or states.shape[1] != STATE_LEN or states.dtype != np.int64:
        raise ValueError(
            f"states must be (B, {STATE_LEN}) int64, got {states.shape} {states.dtype}"
        )
    if (
        out.ndim != 4
        or out.shape[0] != states.shape[0]
        or out.dtype != np.float32
        or not out.flags.c_contiguous
    ):
        raise ValueError(
            f"out must be a C-contiguous ({states.shape[0]}, C, N, N) float32 array, "
            f"got {out.shape} {out.dtype}"
        )
    inferred = layers_from_channels(out.shape[1])
    if layers is not None and layers != inferred:
        raise ValueError(f"out has {out.shape[1]} channels, which is L={inferred}, not {layers}")
    if states.shape[0] == 0:
        return out
    size = int(states[0, I_SIZE])
    if not (states[:, I_SIZE] == size).all() or out.shape[2] != size or out.shape[3] != size:
        raise ValueError("all positions must have the board size of out's last two axes")
    _encode(states, out, inferred, _STD_STONES, _STD_CAPS)
    return out


# ---------------------------------------------------------------------------------------------
# Random positions (tests and benchmarks)
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _random_states(
    start: np.ndarray,
    out: np.ndarray,
    min_plies: int,
    max_plies: int,
    spread_bias: float,
    seed: int,
) -> None:
    np.random.seed(seed)  # noqa: NPY002 (numba)
    size = start[I_SIZE]
    moves = np.empty(num_actions(size), dtype=np.int64)
    for i in range(out.shape[0]):
        s = start.copy()
        target = np.random.randint(min_plies, max_plies + 1)  # noqa: NPY002 (numba)
        for _ in range(target):
            n = generate_moves(s, moves)
            if n == 0:
                break
            first_spread = 0
            while first_spread < n and ((moves[first_spread] >> 6) & 3) != 0:
                first_spread += 1
            if first_spread < n and np.random.random() < spread_bias:  # noqa: NPY002 (numba)
                k = np.random.randint(n - first_spread)  # noqa: NPY002 (numba)
                m = moves[first_spread + k]
            else:
                m = moves[np.random.randint(n)]  # noqa: NPY002 (numba)
            undo = make_move(s, m)
            if s[I_RESULT] != 0:
                unmake_move(s, m, undo)
                break
        out[i] = s


def random_states(
    size: int,
    count: int,
    seed: int = 0,
    min_plies: int = 0,
    max_plies: int = 60,
    half_komi: int = 0,
    spread_bias: float = 0.5,
) -> np.ndarray:
    """(count, STATE_LEN) int64 unfinished positions from random games with standard reserves.

    Each game runs a random number of plies in [min_plies, max_plies] (stopping earlier, before the
    move that would end the game, when one does). With probability ``spread_bias`` a ply picks among
    the spreads only, which builds taller stacks than uniform play. Deterministic for a seed.
    """
    from takzero.game.core import new_state

    stones, caps = STANDARD_RESERVES[size]
    start = new_state(size, stones, caps, half_komi)
    out = np.empty((count, STATE_LEN), dtype=np.int64)
    if count:
        _random_states(start, out, min_plies, max_plies, spread_bias, seed)
    return out
