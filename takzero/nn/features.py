"""Input planes of the network: a batch of positions -> (B, C, N, N) float32, mover's view.

Feature version 2 (``FEATURE_VERSION``, the default for new models); version 1 (the shipped 5x5
model's) is still encoded, bit for bit as before: its channels are the first ``2 * L + 15`` of
version 2. ``encode(states, out, version=...)`` takes the version a model was built for
(``ModelConfig.feature_version``; ``FEATURE_VERSIONS`` lists the ones this code encodes).

``L`` = number of stack layers encoded (``layers``), N = board size. "own" is the player to move
(``ply & 1``), "opp" the other one. Planes are indexed ``[rank, file]``: ``planes[b, c, rank,
file]`` is square ``rank * N + file`` (a1 = [0, 0]), the same square numbering as the rules core and
the action space. ``C = num_channels(L, version)``: ``2 * L + 15`` in version 1, ``2 * L + 24`` in
version 2. A "road piece" is a flat or a capstone on top of a stack (walls never count).

The channels, in order: the stack layers, ``2d`` (1 where the piece ``d`` places below the top of
the stack is own; d = 0: the top) and ``2d + 1`` (the opponent's) for d < L; then the rows of
:data:`PLANES`, each ``Plane(names, version, meaning)`` at channel ``2L +`` its offset (the
widths of the rows above it), present from feature version ``version`` on. A version's channels
are those of the version before it followed by its own rows (version 1's are the first
``2 * L + 15`` of version 2's). The compiled encoder writes each row at its offset, a module
constant computed from the table (``C_<NAME>``).

Opponent's threats (``opp_place_road``, ``opp_spread_road``) are computed on a copy of the position
with the side to move flipped (``ply ^ 1``, which keeps plies >= 2 out of the opening). Reserves
are not read: in a position that goes on both players have a piece left (an empty reserve ends the
game) and every piece but a wall is a road piece, so a placement square is a threat whatever the
reserves hold. During the opening (plies 0 and 1) the four threat planes are 0 (no spreads, and a
road needs at least N >= 3 pieces). A finished position is encoded as if the game went on (its
result is not read). All planes are functions of the board alone and commute with the 8 board
symmetries.

Standard reserves are ``core.STANDARD_RESERVES`` (6x6: 30 stones, 1 capstone). The default
``layers`` is ``default_layers(N) = N + 2`` (the carry limit plus two): 8 on 6x6, 31 channels in
version 1, 40 in version 2.

The side to move's colour is deliberately not a plane (the rules are colour-symmetric apart from
komi, which the komi planes carry).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from takzero.game.core import (
    HEADER_LEN,
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
    SPREAD,
    STANDARD_RESERVES,
    STATE_LEN,
    WORD_BITS,
    _edge_masks,
    _flood,
    flat_counts,
    generate_moves,
    line_cover,
    lowest_bit,
    make_move,
    move_kind,
    move_square,
    num_actions,
    popcount,
    road_bitboards,
    road_win_squares,
    unmake_move,
)
from takzero.game.threats import road_moves


@dataclass(frozen=True)
class Plane:
    """One row of :data:`PLANES`: the channels' short ``names`` (its width is their number), the
    feature ``version`` that brought it, and what its channels hold."""

    names: tuple[str, ...]
    version: int
    meaning: str


#: The channels after the stack layers, in order (channel ``2L +`` the row's offset); a new
#: plane is a row at the end, in a new version (old models keep theirs), with its offset
#: constant below and its write in ``_encode``.
PLANES = (
    Plane(("own_buried", "opp_buried"), 1,
          "own / opponent's pieces deeper than the top L of the stack, count / 10"),
    Plane(("own_flat", "own_wall", "own_cap", "opp_flat", "opp_wall", "opp_cap"), 1,
          "1 where the top piece is an own flat, wall, capstone, an opponent's flat, wall, "
          "capstone"),
    Plane(("own_stones", "own_caps", "opp_stones", "opp_caps"), 1,
          "own stones, own capstones, opponent's stones, opponent's capstones in reserve / the "
          "standard stones of size N, / max(1, standard capstones of N) (broadcast)"),
    Plane(("komi",), 1,
          "komi from the mover's view in half points / 4 (broadcast): +half_komi when black "
          "(who receives komi) is to move, -half_komi when white is to move"),
    Plane(("board",), 1, "1 on every square of the board (marks the board for multi-size nets)"),
    Plane(("opening",), 1, "1 everywhere during the opening swap (plies 0 and 1), else 0"),
    Plane(("own_place_road", "opp_place_road"), 2,
          "placement-road squares: 1 on each empty square where a road piece (flat or "
          "capstone) of own completes own road (``core.road_win_squares``); the opponent's the "
          "same as if it were to move (see \"opponent's threats\" below)"),
    Plane(("own_spread_road", "opp_spread_road"), 2,
          "spread-road origins: 1 on each own stack (own piece on top) from which some legal "
          "spread leaves own with a road (a win: with the dragon clause the mover wins even if "
          "the spread also makes the opponent's road), 0 elsewhere (``spread_road_origins``); "
          "the opponent's as if it were to move"),
    Plane(("own_lines", "opp_lines"), 2,
          "line cover: ``(R[rank] + F[file]) / 2``, R[r] = 1 if the player has a road piece in "
          "rank r, F[f] = 1 if one in file f (a road crosses every rank or every file; one "
          "plane for both axes keeps it symmetric)"),
    Plane(("own_group_span", "opp_group_span"), 2,
          "group span: on each of the player's road pieces, ``max(ranks, files)`` spanned by "
          "its group (orthogonally connected road pieces of that player) / N; 0 elsewhere. "
          "1 = the group joins two opposite edges (a road)"),
    Plane(("flat_diff",), 2,
          "flat-count difference with komi from the mover's view, in flats / N (broadcast): "
          "``(2 * (own flats - opp flats) + hk) / (2 N)``, hk = +half_komi when black is to "
          "move, -half_komi when white is (flats: stacks topped by a flat, as the flat count "
          "counts them); > 0 means the mover would win the flat count if the game ended now"),
)


def _plane_offsets(planes: tuple[Plane, ...]) -> dict[str, int]:
    """{first channel name of each row: its offset after the stack layers}; raises ValueError
    when a row's version is below the one before it (a version's rows follow the older ones)."""
    offsets, at, version = {}, 0, 1
    for row in planes:
        if row.version < version or not row.names:
            raise ValueError(f"plane {row.names} of version {row.version} is out of order")
        offsets[row.names[0]], at, version = at, at + len(row.names), row.version
    return offsets


_OFFSET = _plane_offsets(PLANES)
# Offsets of the rows after the stack layers (channel 2L + C_...), read by the compiled encoder.
C_BURIED = _OFFSET["own_buried"]
C_TOPS = _OFFSET["own_flat"]
C_RESERVES = _OFFSET["own_stones"]
C_KOMI = _OFFSET["komi"]
C_BOARD = _OFFSET["board"]
C_OPENING = _OFFSET["opening"]
C_PLACE_ROAD = _OFFSET["own_place_road"]
C_SPREAD_ROAD = _OFFSET["own_spread_road"]
C_LINES = _OFFSET["own_lines"]
C_GROUP_SPAN = _OFFSET["own_group_span"]
C_FLAT_DIFF = _OFFSET["flat_diff"]

#: Versions ``encode`` can produce; models store theirs and other versions are refused.
FEATURE_VERSIONS = tuple(sorted({row.version for row in PLANES}))
#: Version of the channel layout that new models are built for: the newest.
FEATURE_VERSION = FEATURE_VERSIONS[-1]
#: Channels that do not depend on the number of layers, per feature version.
NUM_FIXED_CHANNELS = {
    v: sum(len(row.names) for row in PLANES if row.version <= v) for v in FEATURE_VERSIONS
}
#: Divisor of the counts of pieces deeper than the encoded layers.
BURIED_SCALE = 10.0
#: Divisor of the mover's-view half-komi.
KOMI_SCALE = 4.0

__all__ = [
    "FEATURE_VERSION",
    "FEATURE_VERSIONS",
    "PLANES",
    "Plane",
    "channel_names",
    "check_version",
    "default_layers",
    "encode",
    "layers_from_channels",
    "new_planes",
    "num_channels",
    "random_states",
    "spread_road_origins",
]

# per-size normalisers of the reserve planes, indexed by N
_STD_STONES = np.ones(MAX_SIZE + 1, dtype=np.float32)
_STD_CAPS = np.ones(MAX_SIZE + 1, dtype=np.float32)
for _n, (_stones, _caps) in STANDARD_RESERVES.items():
    _STD_STONES[_n] = _stones
    _STD_CAPS[_n] = max(1, _caps)


def check_version(version: int) -> int:
    """``version`` as an int if this code encodes it (``FEATURE_VERSIONS``); else ValueError."""
    if isinstance(version, bool) or int(version) != version or version not in FEATURE_VERSIONS:
        raise ValueError(
            f"feature version {version!r} is not one this code encodes {FEATURE_VERSIONS}"
        )
    return int(version)


def default_layers(size: int) -> int:
    """Default number of stack layers for board size N: the carry limit N plus 2."""
    return int(size) + 2


def num_channels(layers: int, version: int = FEATURE_VERSION) -> int:
    """Number of input planes C for ``layers`` stack layers: ``2 * layers + 15`` in feature
    version 1, ``2 * layers + 24`` in version 2. Raises ValueError for layers < 1 or an unknown
    version."""
    version = check_version(version)
    if layers < 1:
        raise ValueError(f"layers must be >= 1, got {layers}")
    return 2 * int(layers) + NUM_FIXED_CHANNELS[version]


def layers_from_channels(channels: int, version: int = FEATURE_VERSION) -> int:
    """Inverse of ``num_channels`` for ``version``; raises ValueError if ``channels`` is not
    ``num_channels(L, version)`` for some L >= 1 (or the version is unknown)."""
    version = check_version(version)
    fixed = NUM_FIXED_CHANNELS[version]
    layers, odd = divmod(int(channels) - fixed, 2)
    if odd or layers < 1:
        raise ValueError(
            f"{channels} is not a valid channel count of feature version {version} "
            f"(2 * L + {fixed}, L >= 1)"
        )
    return layers


def channel_names(layers: int, version: int = FEATURE_VERSION) -> list[str]:
    """Short names of the C channels of ``version``, in order (for logs, docs and tests)."""
    version = check_version(version)
    names = []
    for d in range(layers):
        names += [f"own_layer{d}", f"opp_layer{d}"]
    for row in PLANES:
        if row.version <= version:
            names += row.names
    assert len(names) == num_channels(layers, version)
    return names


def new_planes(
    batch: int, size: int, layers: int | None = None, version: int = FEATURE_VERSION
) -> np.ndarray:
    """Zeroed (batch, C, N, N) float32 array for ``encode`` (C = ``num_channels(layers,
    version)``, layers by default ``default_layers(size)``)."""
    if layers is None:
        layers = default_layers(size)
    return np.zeros((batch, num_channels(layers, version), size, size), dtype=np.float32)


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


# ---------------------------------------------------------------------------------------------
# Version-2 helpers: road threats, line cover, group span
# ---------------------------------------------------------------------------------------------


def _plus_table() -> np.ndarray:
    """PLUS[N, sq, c]: bitboard of ``sq`` and the squares at most ``c`` steps from it along its
    rank and file on a size-N board (every square a spread of at most c pieces from ``sq`` can
    touch, whatever stands in the way)."""
    plus = np.zeros((MAX_SIZE + 1, MAX_SIZE * MAX_SIZE, MAX_SIZE + 1), dtype=np.uint64)
    for n in range(1, MAX_SIZE + 1):
        for sq in range(n * n):
            rank, file = divmod(sq, n)
            for c in range(MAX_SIZE + 1):
                bits = 0
                for r in range(n):
                    for f in range(n):
                        if (r == rank and abs(f - file) <= c) or (f == file and abs(r - rank) <= c):
                            bits |= 1 << (r * n + f)
                plus[n, sq, c] = bits
    return plus


_PLUS = _plus_table()


@njit(cache=True)
def spread_road_origins(state: np.ndarray, buf: np.ndarray) -> np.uint64:
    """Bitboard (bit sq, uint64) of the player to move's stacks from which some legal spread
    leaves that player with a road (a road win for them: with the dragon clause the mover wins
    even when the spread also completes the opponent's road).

    Args:
        state: (STATE_LEN,) int64 position; restored exactly, so it must be writable. Its result
            is not read: a finished position is treated as if the game went on. Plies 0 and 1
            (the opening swap, no spreads) give 0.
        buf: int64 work array of length >= ``num_actions(N)``.

    The origins of the spreads :func:`takzero.game.threats.road_moves` lists for the mover (the one
    road-in-one test of the rules: every drop pattern of ``core.generate_moves``, tested on
    bitboards behind a bound that settles nearly every stack without looking at a pattern).
    """
    result = state[I_RESULT]
    state[I_RESULT] = 0
    n = road_moves(state, state[I_PLY] & 1, buf, bool(True))  # noqa: UP018 (a plain bool, see threats.road_moves)
    state[I_RESULT] = result
    origins = np.uint64(0)
    for j in range(n):
        m = buf[j]
        if move_kind(m) == SPREAD:
            origins |= np.uint64(1) << np.uint64(move_square(m))
    return origins


@njit(cache=True, inline="always")
def _copy_position(src: np.ndarray, dst: np.ndarray) -> None:
    """Copy the header and the on-board squares of ``src`` into ``dst`` (the rest of ``dst`` is
    not read by the rules functions for that board size)."""
    for i in range(HEADER_LEN):
        dst[i] = src[i]
    for sq in range(src[I_SIZE] * src[I_SIZE]):
        dst[OFF_HEIGHT + sq] = src[OFF_HEIGHT + sq]
        dst[OFF_TOP + sq] = src[OFF_TOP + sq]
        dst[OFF_LO + sq] = src[OFF_LO + sq]
        dst[OFF_HI + sq] = src[OFF_HI + sq]


@njit(cache=True, inline="always")
def _set_squares(bb: np.uint64, plane: np.ndarray, n: int, value: float) -> None:
    """plane[rank, file] = value on every square of the bitboard ``bb``."""
    one = np.uint64(1)
    while bb != np.uint64(0):
        sq = lowest_bit(bb)
        bb &= bb - one
        r = sq // n
        plane[r, sq - r * n] = value


@njit(cache=True, inline="always")
def _line_cover_plane(bb: np.uint64, n: int, plane: np.ndarray) -> None:
    """plane[r, f] = (1 if ``bb`` has a square in rank r) / 2 + (1 if one in file f) / 2."""
    row = (np.uint64(1) << np.uint64(n)) - np.uint64(1)
    ranks = np.uint64(0)
    files = np.uint64(0)
    for r in range(n):
        x = (bb >> np.uint64(r * n)) & row
        files |= x
        ranks |= np.uint64(x != np.uint64(0)) << np.uint64(r)
    for r in range(n):
        rv = 0.5 * np.float32((ranks >> np.uint64(r)) & np.uint64(1))
        for f in range(n):
            plane[r, f] = rv + 0.5 * np.float32((files >> np.uint64(f)) & np.uint64(1))


@njit(cache=True, inline="always")
def _group_span_plane(bb: np.uint64, n: int, plane: np.ndarray) -> None:
    """On each square of ``bb``: max(ranks, files) spanned by its orthogonally connected group in
    ``bb``, / n (a connected group covers a contiguous run of ranks and of files, so the number of
    lines it touches is its span)."""
    _, _, left, right = _edge_masks(n)
    not_left = ~left
    not_right = ~right
    one = np.uint64(1)
    rest = bb
    while rest != np.uint64(0):
        seed = rest & (~rest + one)
        group = _flood(seed, bb, n, not_left, not_right)
        rest &= ~group
        ranks, files = line_cover(group, n)
        span = max(ranks, popcount(np.int64(files)))
        _set_squares(group, plane, n, span / n)


@njit(cache=True, inline="always")
def _encode_v2_planes(
    s: np.ndarray, o: np.ndarray, base: int, scratch: np.ndarray, buf: np.ndarray
) -> None:
    """Write the version-2 rows of :data:`PLANES` (channels ``base + C_...``, base = 2L) of
    position ``s`` into ``o`` (C, N, N); ``scratch`` is a (STATE_LEN,) int64 work array, ``buf``
    an int64 move buffer of length >= ``num_actions(N)``."""
    n = s[I_SIZE]
    ply = s[I_PLY]
    mover = ply & 1
    place = base + C_PLACE_ROAD
    spread = base + C_SPREAD_ROAD
    o[place : place + 2] = 0.0
    o[spread : spread + 2] = 0.0
    white, black, _ = road_bitboards(s)
    own_bb = black if mover == 1 else white
    opp_bb = white if mover == 1 else black
    if ply >= 2:
        _copy_position(s, scratch)
        _set_squares(road_win_squares(scratch), o[place], n, 1.0)
        _set_squares(spread_road_origins(scratch, buf), o[spread], n, 1.0)
        scratch[I_PLY] = ply ^ 1  # the opponent to move (ply stays >= 2)
        _set_squares(road_win_squares(scratch), o[place + 1], n, 1.0)
        _set_squares(spread_road_origins(scratch, buf), o[spread + 1], n, 1.0)
    _line_cover_plane(own_bb, n, o[base + C_LINES])
    _line_cover_plane(opp_bb, n, o[base + C_LINES + 1])
    span = base + C_GROUP_SPAN
    o[span : span + 2] = 0.0
    _group_span_plane(own_bb, n, o[span])
    _group_span_plane(opp_bb, n, o[span + 1])
    w, b = flat_counts(s)
    hk = s[I_HALF_KOMI]
    diff = 2 * (w - b) - hk
    if mover == 1:
        diff = -diff
    o[base + C_FLAT_DIFF] = diff / (2.0 * n)


@njit(cache=True, nogil=True)
def _encode(
    states: np.ndarray,
    out: np.ndarray,
    layers: int,
    std_stones: np.ndarray,
    std_caps: np.ndarray,
    version: int,
) -> None:
    """Each row of :data:`PLANES` of ``version`` written at channel ``2 * layers + C_<ROW>``
    (``encode`` checks the arguments)."""
    base = 2 * layers
    scratch = np.zeros(STATE_LEN, dtype=np.int64)
    buf = np.empty(num_actions(MAX_SIZE), dtype=np.int64)
    for b in range(states.shape[0]):
        s = states[b]
        n = s[I_SIZE]
        mover = s[I_PLY] & 1
        opp = 1 - mover
        o = out[b]
        o[:base] = 0.0
        o[base + C_BURIED : base + C_BURIED + 2] = 0.0
        o[base + C_TOPS : base + C_TOPS + 6] = 0.0
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
                o[base + C_BURIED, r, f] = own / BURIED_SCALE
                o[base + C_BURIED + 1, r, f] = (total - own) / BURIED_SCALE
            t = s[OFF_TOP + sq]
            o[base + C_TOPS + 3 * ((lo & 1) ^ mover) + t - 1, r, f] = 1.0
        ss = std_stones[n]
        sc = std_caps[n]
        o[base + C_RESERVES] = s[I_STONES + mover] / ss
        o[base + C_RESERVES + 1] = s[I_CAPS + mover] / sc
        o[base + C_RESERVES + 2] = s[I_STONES + opp] / ss
        o[base + C_RESERVES + 3] = s[I_CAPS + opp] / sc
        hk = s[I_HALF_KOMI]
        if mover == 0:
            hk = -hk
        o[base + C_KOMI] = hk / KOMI_SCALE
        o[base + C_BOARD] = 1.0
        o[base + C_OPENING] = 1.0 if s[I_PLY] < 2 else 0.0
        if version >= 2:
            _encode_v2_planes(s, o, base, scratch, buf)


def encode(
    states: np.ndarray,
    out: np.ndarray,
    layers: int | None = None,
    version: int = FEATURE_VERSION,
) -> np.ndarray:
    """Encode a batch of positions into input planes (the channels: ``PLANES``).

    Args:
        states: (B, STATE_LEN) int64 positions, all of size N (may be finished positions); read
            only.
        out: (B, C, N, N) float32, C-contiguous; fully overwritten.
        layers: stack layers L; by default inferred from C (= ``num_channels(L, version)``). If
            given it must match.
        version: feature version of the planes (the model's ``ModelConfig.feature_version``);
            version 1 gives exactly the planes of the version-1 code.

    Returns:
        ``out``.

    Raises:
        ValueError: on wrong shapes/dtypes, mixed sizes, an unknown version or a C that does not
            match ``layers`` and ``version``.
    """
    version = check_version(version)
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
    inferred = layers_from_channels(out.shape[1], version)
    if layers is not None and layers != inferred:
        raise ValueError(f"out has {out.shape[1]} channels, which is L={inferred}, not {layers}")
    if states.shape[0] == 0:
        return out
    size = int(states[0, I_SIZE])
    if not (states[:, I_SIZE] == size).all() or out.shape[2] != size or out.shape[3] != size:
        raise ValueError("all positions must have the board size of out's last two axes")
    _encode(states, out, inferred, _STD_STONES, _STD_CAPS, version)
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
