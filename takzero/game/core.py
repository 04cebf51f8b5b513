"""Compiled Tak rules core: one position is one flat ``int64`` numpy array.

Everything here is a numba ``@njit`` function over that array, so the search, the feature encoder and
perft can run without Python objects in their inner loops. ``NUMBA_DISABLE_JIT=1`` turns all of it
into plain Python for debugging.

State layout (``state.shape == (STATE_LEN,)``, ``dtype == np.int64``; a batch is ``(G, STATE_LEN)``)::

    state[I_SIZE]            board size N (3..8)
    state[I_PLY]             ply number (0 = white's first ply); side to move = ply & 1 (0 white)
    state[I_STONES + c]      stones (flats/walls) left in colour c's reserve (c: 0 white, 1 black)
    state[I_CAPS + c]        capstones left in colour c's reserve
    state[I_HALF_KOMI]       komi in half points added to black's flat count (may be negative)
    state[I_HASH]            Zobrist hash of stacks, top types and side to move (see ``hash_from_scratch``)
    state[I_RESULT]          RESULT_* code of the position (0 while the game goes on)
    state[OFF_HEIGHT + sq]   stack height on square sq (0 = empty)
    state[OFF_TOP + sq]      type of the top piece: EMPTY, FLAT, WALL or CAP
    state[OFF_LO + sq]       colours of the stack's pieces, top piece at bit 0 (1 = black), 62 bits
    state[OFF_HI + sq]       continuation of the colour bits for pieces 62.. from the top

Squares: ``sq = rank * N + file`` with rank 0 = rank 1 and file 0 = file a (a1 = 0, b1 = 1, ...).

Move encoding (one ``int64``)::

    bits 0-5    square (placement square, or the origin of a spread)
    bits 6-7    kind: 0 spread, 1 flat, 2 wall, 3 capstone (placements)
    bits 8-9    direction of a spread: 0 '+' (up), 1 '-' (down), 2 '>' (right), 3 '<' (left)
    bits 10-17  drop pattern of a spread (see below)

The drop pattern writes each drop ``d`` as a ``1`` followed by ``d - 1`` zeros, the first drop at the
most significant end. Its bit length is the count of carried pieces, its popcount the number of
squares passed. ``3c3>12`` -> drops (1, 2) -> ``0b110``; ``c3>`` -> ``0b1``; ``5d3-41`` -> ``0b10001``.
For size N the valid patterns are 1 .. 2**N - 2 (2**N - 1 would need N squares of travel), which is
where the action space's ``4 * (2**N - 2)`` spread channels come from.

Rules follow ``tak-rules.md`` (the official rules as implemented by Tiltak and playtak).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros
from numba.extending import overload

MAX_SIZE = 8
MAX_SQ = MAX_SIZE * MAX_SIZE
MAX_HEIGHT = 128  # two colour words of 62 bits hold 124 pieces; 8x8 has 104 in all
WORD_BITS = 62
WORD_MASK = (1 << WORD_BITS) - 1

I_SIZE = 0
I_PLY = 1
I_STONES = 2  # +0 white, +1 black
I_CAPS = 4  # +0 white, +1 black
I_HALF_KOMI = 6
I_HASH = 7
I_RESULT = 8
HEADER_LEN = 16
OFF_HEIGHT = HEADER_LEN
OFF_TOP = OFF_HEIGHT + MAX_SQ
OFF_LO = OFF_TOP + MAX_SQ
OFF_HI = OFF_LO + MAX_SQ
STATE_LEN = OFF_HI + MAX_SQ

WHITE = 0
BLACK = 1

EMPTY = 0
FLAT = 1
WALL = 2
CAP = 3

SPREAD = 0  # move kind; placements use the piece type (FLAT, WALL, CAP) as their kind

DIR_UP = 0  # '+', towards higher ranks
DIR_DOWN = 1  # '-'
DIR_RIGHT = 2  # '>', towards later files
DIR_LEFT = 3  # '<'
DIR_CHARS = "+-><"

RESULT_NONE = 0
RESULT_ROAD_WHITE = 1
RESULT_ROAD_BLACK = 2
RESULT_FLAT_WHITE = 3
RESULT_FLAT_BLACK = 4
RESULT_DRAW = 5
RESULT_STRINGS = ("", "R-0", "0-R", "F-0", "0-F", "1/2-1/2")

#: Standard reserves per size: (stones, capstones) for each player.
STANDARD_RESERVES = {3: (10, 0), 4: (15, 0), 5: (21, 1), 6: (30, 1), 7: (40, 2), 8: (50, 2)}


def _zobrist_tables() -> tuple[np.ndarray, np.ndarray, np.int64]:
    rng = np.random.Generator(np.random.PCG64(0x7A4B2E0))
    piece = rng.integers(-(2**63), 2**63 - 1, size=(MAX_SQ, MAX_HEIGHT, 2), dtype=np.int64)
    top = rng.integers(-(2**63), 2**63 - 1, size=(MAX_SQ, 4), dtype=np.int64)
    top[:, EMPTY] = 0
    top[:, FLAT] = 0
    side = rng.integers(-(2**63), 2**63 - 1, dtype=np.int64)
    return piece, top, np.int64(side)


Z_PIECE, Z_TOP, Z_SIDE = _zobrist_tables()


def _pattern_tables() -> tuple[np.ndarray, np.ndarray]:
    """COUNT[c, d]: patterns with at most c pieces and at most d drops; FLATTEN[c, d]: patterns with
    at most c pieces, exactly d + 1 drops and a last drop of one piece (a lone capstone)."""
    count = np.zeros((MAX_SIZE + 1, MAX_SIZE + 1), dtype=np.int64)
    flatten = np.zeros((MAX_SIZE + 1, MAX_SIZE + 1), dtype=np.int64)
    for c in range(MAX_SIZE + 1):
        for d in range(MAX_SIZE + 1):
            for p in range(1, 1 << c):
                pc = bin(p).count("1")
                if pc <= d:
                    count[c, d] += 1
                if pc == d + 1 and p & 1:
                    flatten[c, d] += 1
    return count, flatten


PATTERN_COUNT, PATTERN_FLATTEN = _pattern_tables()


def _pattern_lists() -> tuple[np.ndarray, np.ndarray]:
    """LIST[c, d, f, :NUM[c, d, f]]: the legal drop patterns, ascending, for a carry of at most c
    pieces, d free squares, and f = 1 when a lone capstone may flatten the wall just beyond."""
    lists = np.zeros((MAX_SIZE + 1, MAX_SIZE + 1, 2, 256), dtype=np.int64)
    num = np.zeros((MAX_SIZE + 1, MAX_SIZE + 1, 2), dtype=np.int64)
    for c in range(MAX_SIZE + 1):
        for d in range(MAX_SIZE + 1):
            for f in range(2):
                for p in range(1, 1 << c):
                    pc = bin(p).count("1")
                    if pc <= d or (f and pc == d + 1 and p & 1):
                        lists[c, d, f, num[c, d, f]] = p
                        num[c, d, f] += 1
    return lists, num


PATTERN_LIST, PATTERN_NUM = _pattern_lists()


def _ray_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RAYS[N, direction, sq]: bitboard of the squares beyond ``sq`` in ``direction`` up to the
    edge of a size-N board, RAY_LEN[N, direction, sq] their number; LINE[N, sq]: rank * 8 + file
    of ``sq`` (spread distances)."""
    rays = np.zeros((MAX_SIZE + 1, 4, MAX_SQ), dtype=np.uint64)
    ray_len = np.zeros((MAX_SIZE + 1, 4, MAX_SQ), dtype=np.int64)
    line = np.zeros((MAX_SIZE + 1, MAX_SQ), dtype=np.int64)
    for n in range(1, MAX_SIZE + 1):
        for sq in range(n * n):
            rank, file = divmod(sq, n)
            line[n, sq] = rank * 8 + file
            for direction, (dr, df) in enumerate(((1, 0), (-1, 0), (0, 1), (0, -1))):
                r, f = rank + dr, file + df
                bits = 0
                while 0 <= r < n and 0 <= f < n:
                    bits |= 1 << (r * n + f)
                    ray_len[n, direction, sq] += 1
                    r, f = r + dr, f + df
                rays[n, direction, sq] = bits
    return rays, ray_len, line


RAYS, RAY_LEN, LINE = _ray_tables()


@njit(cache=True)
def num_actions(size: int) -> int:
    """Number of distinct move codes a size-N board can have, which is also the size A of the
    action space (``takzero.nn.actions``): per square 3 placements and 4 directions x
    (2**N - 2) drop patterns, ``(3 + 4 * (2**N - 2)) * N * N`` (3,075 on 5x5, 9,036 on 6x6).
    Compiled, and callable from Python (returns an int); the one place this count is written."""
    return (3 + 4 * ((1 << size) - 2)) * size * size


# ---------------------------------------------------------------------------------------------
# Move encoding helpers
# ---------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def make_placement(sq: int, piece: int) -> int:
    """Move code of placing ``piece`` (FLAT, WALL, CAP) on square ``sq``."""
    return sq | (piece << 6)


@njit(cache=True, inline="always")
def make_spread(sq: int, direction: int, pattern: int) -> int:
    """Move code of a spread from ``sq`` in ``direction`` with drop ``pattern``."""
    return sq | (direction << 8) | (pattern << 10)


@njit(cache=True, inline="always")
def move_square(move: int) -> int:
    return move & 63


@njit(cache=True, inline="always")
def move_kind(move: int) -> int:
    return (move >> 6) & 3


@njit(cache=True, inline="always")
def bit_length(x: int | np.integer) -> int:
    n = 0
    while x:
        n += 1
        x >>= 1
    return n


@njit(cache=True, inline="always")
def popcount(x: int | np.integer) -> int:
    n = 0
    while x:
        x &= x - 1
        n += 1
    return n


def lowest_bit(x) -> int:
    """Index of the lowest set bit of the nonzero uint64 ``x`` (one ``tzcnt`` when compiled)."""
    x = int(x)
    return (x & -x).bit_length() - 1


@overload(lowest_bit, inline="always")
def _lowest_bit_impl(x):
    def impl(x):
        return np.int64(trailing_zeros(np.uint64(x)))

    return impl


def highest_bit(x) -> int:
    """Index of the highest set bit of the nonzero uint64 ``x`` (one ``lzcnt`` when compiled)."""
    return int(x).bit_length() - 1


@overload(highest_bit, inline="always")
def _highest_bit_impl(x):
    def impl(x):
        return 63 - np.int64(leading_zeros(np.uint64(x)))

    return impl


@njit(cache=True, inline="always")
def direction_step(direction: int | np.integer, size: int) -> int:
    if direction == DIR_UP:
        return size
    if direction == DIR_DOWN:
        return -size
    if direction == DIR_RIGHT:
        return 1
    return -1


@njit(cache=True, inline="always")
def distance_to_edge(sq: int, direction: int, size: int) -> int:
    rank = sq // size
    file = sq - rank * size
    if direction == DIR_UP:
        return size - 1 - rank
    if direction == DIR_DOWN:
        return rank
    if direction == DIR_RIGHT:
        return size - 1 - file
    return file


# ---------------------------------------------------------------------------------------------
# Stack primitives
# ---------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def top_colour(state: np.ndarray, sq: int) -> int:
    """Colour of the top piece of square ``sq`` (meaningless on an empty square)."""
    return state[OFF_LO + sq] & 1


@njit(cache=True, inline="always")
def piece_colour_at(state: np.ndarray, sq: int, depth: int) -> int:
    """Colour of the piece ``depth`` places below the top (0 = top)."""
    if depth < WORD_BITS:
        return (state[OFF_LO + sq] >> depth) & 1
    return (state[OFF_HI + sq] >> (depth - WORD_BITS)) & 1


@njit(cache=True)
def _push(state: np.ndarray, sq: int | np.integer, chunk: int, d: int) -> None:
    """Put ``d`` pieces on ``sq``; ``chunk`` bit 0 is the new top, bit d-1 lands first."""
    h = state[OFF_HEIGHT + sq]
    hsh = state[I_HASH]
    for i in range(d):
        hsh ^= Z_PIECE[sq, h + d - 1 - i, (chunk >> i) & 1]
    state[I_HASH] = hsh
    lo = state[OFF_LO + sq]
    hi = state[OFF_HI + sq]
    hi = ((hi << d) | (lo >> (WORD_BITS - d))) & WORD_MASK
    lo = ((lo << d) & WORD_MASK) | chunk
    state[OFF_LO + sq] = lo
    state[OFF_HI + sq] = hi
    state[OFF_HEIGHT + sq] = h + d


@njit(cache=True)
def _pop(state: np.ndarray, sq: int | np.integer, d: int) -> int:
    """Take the top ``d`` pieces off ``sq``; returns them with bit 0 = the old top."""
    h = state[OFF_HEIGHT + sq]
    lo = state[OFF_LO + sq]
    hi = state[OFF_HI + sq]
    mask = (1 << d) - 1
    chunk = lo & mask
    lo = (lo >> d) | ((hi & mask) << (WORD_BITS - d))
    hi = hi >> d
    state[OFF_LO + sq] = lo
    state[OFF_HI + sq] = hi
    state[OFF_HEIGHT + sq] = h - d
    hsh = state[I_HASH]
    for i in range(d):
        hsh ^= Z_PIECE[sq, h - 1 - i, (chunk >> i) & 1]
    state[I_HASH] = hsh
    return chunk  # type: ignore[return-value]  # numpy's stubs: an np.integer index may read an array


@njit(cache=True, inline="always")
def _set_top(state: np.ndarray, sq: int | np.integer, piece: int | np.integer) -> None:
    old = state[OFF_TOP + sq]
    state[I_HASH] ^= Z_TOP[sq, old] ^ Z_TOP[sq, piece]
    state[OFF_TOP + sq] = piece


# ---------------------------------------------------------------------------------------------
# Construction and hashing
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def hash_from_scratch(state: np.ndarray) -> np.int64:
    """Zobrist hash of the position: every piece (square, height, colour), every wall/capstone top
    and the side to move. ``state[I_HASH]`` must always equal this."""
    size = state[I_SIZE]
    h = np.int64(0)
    for sq in range(size * size):
        height = state[OFF_HEIGHT + sq]
        for depth in range(height):
            h ^= Z_PIECE[sq, height - 1 - depth, piece_colour_at(state, sq, depth)]
        h ^= Z_TOP[sq, state[OFF_TOP + sq]]
    if state[I_PLY] & 1:
        h ^= Z_SIDE
    return h


def new_state(size: int, stones: int, caps: int, half_komi: int = 0) -> np.ndarray:
    """Empty board of ``size`` with ``stones``/``caps`` in each reserve, white to move at ply 0.

    Raises ValueError for a size outside 3..8 or negative piece counts.
    """
    if not 3 <= size <= MAX_SIZE:
        raise ValueError(f"board size must be 3..8, got {size}")
    if stones < 0 or caps < 0:
        raise ValueError(f"piece counts must be >= 0, got stones={stones} caps={caps}")
    if 2 * (stones + caps) > WORD_BITS * 2:
        raise ValueError(f"at most 124 pieces in all fit a stack, got {2 * (stones + caps)}")
    state = np.zeros(STATE_LEN, dtype=np.int64)
    state[I_SIZE] = size
    state[I_STONES] = state[I_STONES + 1] = stones
    state[I_CAPS] = state[I_CAPS + 1] = caps
    state[I_HALF_KOMI] = half_komi
    state[I_HASH] = hash_from_scratch(state)
    return state


# ---------------------------------------------------------------------------------------------
# Roads and results
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def road_bitboard(state: np.ndarray, colour: int) -> np.uint64:
    """Bitboard (bit sq) of squares topped by ``colour``'s flat or capstone."""
    white, black, _ = road_bitboards(state)
    return black if colour == BLACK else white


@njit(cache=True)
def road_bitboards(state: np.ndarray) -> tuple[np.uint64, np.uint64, np.uint64]:
    """(white, black) ``road_bitboard``s and the empty squares, in one pass without a branch per
    square."""
    white = np.uint64(0)
    black = np.uint64(0)
    empty = np.uint64(0)
    one = np.uint64(1)
    for sq in range(state[I_SIZE] * state[I_SIZE]):
        at = np.uint64(sq)
        road = np.uint64(state[OFF_TOP + sq] & 1)  # FLAT (1) and CAP (3) are the odd types
        colour = np.uint64(state[OFF_LO + sq] & 1)
        black |= (road & colour) << at
        white |= (road & (colour ^ one)) << at
        empty |= np.uint64(state[OFF_HEIGHT + sq] == 0) << at
    return white, black, empty


@njit(cache=True, inline="always")
def line_cover(bb: np.uint64, size: int) -> tuple[int, np.uint64]:
    """(number of ranks holding a piece of ``bb``, mask of the files holding one (bit = file)):
    a road crosses every rank or every file, so these rule roads out without a flood fill."""
    row = (np.uint64(1) << np.uint64(size)) - np.uint64(1)
    files = np.uint64(0)
    ranks = 0
    for r in range(size):
        x = (bb >> np.uint64(r * size)) & row
        files |= x
        ranks += x != np.uint64(0)
    return ranks, files


@njit(cache=True)
def _edge_masks(size: int) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    bottom = np.uint64(0)
    top = np.uint64(0)
    left = np.uint64(0)
    right = np.uint64(0)
    for i in range(size):
        bottom |= np.uint64(1) << np.uint64(i)
        top |= np.uint64(1) << np.uint64((size - 1) * size + i)
        left |= np.uint64(1) << np.uint64(i * size)
        right |= np.uint64(1) << np.uint64(i * size + size - 1)
    return bottom, top, left, right


@njit(cache=True, inline="always")
def _neighbours(x: np.uint64, size: int, not_left: np.uint64, not_right: np.uint64) -> np.uint64:
    """Squares orthogonally next to a square of ``x`` (bitboard of a size-N board; ``not_left`` /
    ``not_right``: complements of the left and right edges, so a shift does not wrap to the next
    rank). Bits above the board may be set: callers mask them."""
    n = np.uint64(size)
    one = np.uint64(1)
    return (x << n) | (x >> n) | ((x << one) & not_left) | ((x >> one) & not_right)


@njit(cache=True)
def _flood(seed: np.uint64, bb: np.uint64, size: int, not_left: np.uint64, not_right: np.uint64) -> np.uint64:
    """The squares of ``bb`` connected to ``seed & bb`` (orthogonal steps within ``bb``)."""
    front = seed & bb
    while True:
        grow = (front | _neighbours(front, size, not_left, not_right)) & bb
        if grow == front:
            return front
        front = grow


@njit(cache=True)
def has_road(state: np.ndarray, colour: int) -> bool:
    """True if ``colour`` has a road: orthogonally connected flats/capstones joining opposite edges."""
    return _road_on(road_bitboard(state, colour), state[I_SIZE])


@njit(cache=True)
def _road_on(bb: np.uint64, size: int) -> bool:
    """True if the road pieces ``bb`` (a ``road_bitboard``) of a size-N board form a road."""
    # A road crosses every rank (bottom to top) or every file (left to right): test that first,
    # which settles most positions without a flood fill.
    ranks, files = line_cover(bb, size)
    all_ranks = ranks == size
    all_files = files == (np.uint64(1) << np.uint64(size)) - np.uint64(1)
    if not (all_ranks or all_files):
        return False
    bottom, top, left, right = _edge_masks(size)
    if all_ranks:
        if _flood(bottom, bb, size, ~left, ~right) & top:
            return True
    if all_files:
        if _flood(left, bb, size, ~left, ~right) & right:
            return True
    return False


@njit(cache=True)
def road_win_squares(state: np.ndarray) -> np.uint64:
    """Bitboard (bit sq, uint64) of the empty squares where a flat or capstone of the player to
    move completes a road for that player (``state``: (STATE_LEN,) int64, a position that goes on;
    only the board is read, not the reserves: the caller checks that the piece is available).

    A square wins iff it touches (or lies on) both edges' connected groups of the mover's road
    pieces, for one of the two pairs of opposite edges. A road crosses every rank (or every file),
    so an axis along which the mover's road pieces cover fewer than size - 1 lines cannot be
    completed by one placement and is skipped (most positions: no flood fill at all). Used by the
    search's road check (``takzero.search.steps``); tests compare it with playing every placement.
    """
    size = state[I_SIZE]
    nsq = size * size
    white, black, empty = road_bitboards(state)
    if empty == 0:
        return empty
    bb = black if state[I_PLY] & 1 else white
    ranks, files = line_cover(bb, size)
    vertical = ranks >= size - 1
    horizontal = popcount(np.int64(files)) >= size - 1
    if not (vertical or horizontal):
        return np.uint64(0)
    board = np.uint64(0xFFFFFFFFFFFFFFFF)
    if nsq < 64:
        board = (np.uint64(1) << np.uint64(nsq)) - np.uint64(1)
    bottom, top, left, right = _edge_masks(size)
    not_left = ~left
    not_right = ~right
    win = np.uint64(0)
    if vertical:
        a = _flood(bottom, bb, size, not_left, not_right)
        b = _flood(top, bb, size, not_left, not_right)
        win |= ((_neighbours(a, size, not_left, not_right) & board) | bottom) & (
            (_neighbours(b, size, not_left, not_right) & board) | top
        )
    if horizontal:
        a = _flood(left, bb, size, not_left, not_right)
        b = _flood(right, bb, size, not_left, not_right)
        win |= ((_neighbours(a, size, not_left, not_right) & board) | left) & (
            (_neighbours(b, size, not_left, not_right) & board) | right
        )
    return win & empty


@njit(cache=True)
def flat_counts(state: np.ndarray) -> tuple[int, int]:
    """(white, black) number of stacks topped by that colour's flat."""
    size = state[I_SIZE]
    w = 0
    b = 0
    for sq in range(size * size):
        if state[OFF_TOP + sq] == FLAT:
            if state[OFF_LO + sq] & 1:
                b += 1
            else:
                w += 1
    return w, b


@njit(cache=True)
def compute_result(state: np.ndarray, mover: int) -> int:
    """Result of the position just reached by a ply of ``mover`` (0 white, 1 black).

    Order as in the rules: roads (both roads -> the mover wins, the dragon clause), then the flat
    count when the board is full or either reserve is empty, komi added to black's count.
    """
    size = state[I_SIZE]
    white, black, _ = road_bitboards(state)
    wr = _road_on(white, size)
    br = _road_on(black, size)
    if wr and br:
        return RESULT_ROAD_WHITE if mover == WHITE else RESULT_ROAD_BLACK
    if wr:
        return RESULT_ROAD_WHITE
    if br:
        return RESULT_ROAD_BLACK
    return flat_result(state)


@njit(cache=True)
def flat_result(state: np.ndarray) -> int:
    """RESULT_FLAT_* or RESULT_DRAW if the board is full or a reserve is empty, else RESULT_NONE."""
    size = state[I_SIZE]
    full = True
    for sq in range(size * size):
        if state[OFF_HEIGHT + sq] == 0:
            full = False
            break
    out = (state[I_STONES] + state[I_CAPS] == 0) or (state[I_STONES + 1] + state[I_CAPS + 1] == 0)
    if not (full or out):
        return RESULT_NONE
    return flat_winner(state)


@njit(cache=True)
def flat_winner(state: np.ndarray) -> int:
    """RESULT_FLAT_WHITE, RESULT_FLAT_BLACK or RESULT_DRAW by the flat count with komi, as if the
    game ended now: ``sign(2 * (white - black) - half_komi)``."""
    w, b = flat_counts(state)
    score = 2 * (w - b) - state[I_HALF_KOMI]
    if score > 0:
        return RESULT_FLAT_WHITE
    if score < 0:
        return RESULT_FLAT_BLACK
    return RESULT_DRAW


@njit(cache=True)
def result_winner(result: int) -> int:
    """0 white, 1 black, -1 draw, -2 game not over."""
    if result == RESULT_ROAD_WHITE or result == RESULT_FLAT_WHITE:
        return 0
    if result == RESULT_ROAD_BLACK or result == RESULT_FLAT_BLACK:
        return 1
    if result == RESULT_DRAW:
        return -1
    return -2


# ---------------------------------------------------------------------------------------------
# Move generation
# ---------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _spread_bitboards(state: np.ndarray, nsq: int, mover: int):
    """(the mover's stacks, walls and capstones (which stop a spread), walls) as bitboards, built
    without a branch per square."""
    own = np.uint64(0)
    stops = np.uint64(0)
    walls = np.uint64(0)
    for sq in range(nsq):
        bit = np.uint64(sq)
        mine = (state[OFF_HEIGHT + sq] != 0) & ((state[OFF_LO + sq] & 1) == mover)
        own |= np.uint64(mine) << bit
        top = state[OFF_TOP + sq]
        stops |= np.uint64(top >> 1) << bit  # WALL (2) and CAP (3)
        walls |= np.uint64(top == WALL) << bit
    return own, stops, walls


@njit(cache=True, inline="always")
def _free_run(stops: np.uint64, walls: np.uint64, size: int, sq: int, direction: int):
    """(number of squares a spread from ``sq`` can drop on before an edge, wall or capstone;
    whether a wall is what stops it). The nearest stop on the ray is its lowest set bit going up
    or right, its highest going down or left."""
    ray = RAYS[size, direction, sq]
    hit = stops & ray
    if direction == DIR_UP or direction == DIR_RIGHT:
        stop = lowest_bit(hit) & 63
    else:
        stop = highest_bit(hit) & 63
    d = LINE[size, stop] - LINE[size, sq]
    if direction == DIR_UP or direction == DIR_DOWN:
        d = d >> 3
    blocked = hit != np.uint64(0)
    free = abs(d) - 1 if blocked else RAY_LEN[size, direction, sq]
    wall = blocked and (walls >> np.uint64(stop)) & np.uint64(1) != np.uint64(0)
    return free, wall


@njit(cache=True)
def generate_moves(state: np.ndarray, out: np.ndarray) -> int:
    """Write every legal move code of ``state`` into ``out`` (int64, length >= num_actions(N));
    returns how many. A finished position (state[I_RESULT] != 0) has no moves. Entries of ``out``
    past the returned count may be overwritten (scratch).

    Order: placements (square ascending; flat, wall, capstone), then spreads (square, direction,
    pattern ascending).
    """
    if state[I_RESULT] != RESULT_NONE:
        return 0
    size = state[I_SIZE]
    nsq = size * size
    ply = state[I_PLY]
    mover = ply & 1
    n = 0
    if ply < 2:
        if state[I_STONES + 1 - mover] == 0:  # the opponent's flat comes from their reserve
            return 0
        for sq in range(nsq):
            if state[OFF_HEIGHT + sq] == 0:
                out[n] = make_placement(sq, FLAT)
                n += 1
        return n
    # placements: the kinds available (flat and wall while stones are left, capstone while caps
    # are), written for every square and kept on the empty ones (no branch per square; the spare
    # writes land past the moves and are overwritten or ignored)
    k0 = FLAT
    k1 = WALL
    per = 0
    if state[I_STONES + mover] > 0:
        per = 2
        if state[I_CAPS + mover] > 0:
            per = 3
    elif state[I_CAPS + mover] > 0:
        k0 = CAP
        per = 1
    for sq in range(nsq):
        out[n] = make_placement(sq, k0)
        out[n + 1] = make_placement(sq, k1)
        out[n + 2] = make_placement(sq, CAP)
        if state[OFF_HEIGHT + sq] == 0:
            n += per
    # spreads: the mover's stacks visited lowest square first (the order of a square loop,
    # without its mispredicted tests)
    own, stops, walls = _spread_bitboards(state, nsq, mover)
    while own != np.uint64(0):
        sq = lowest_bit(own)
        own &= own - np.uint64(1)
        carry = min(state[OFF_HEIGHT + sq], size)
        is_cap = state[OFF_TOP + sq] == CAP
        for direction in range(4):
            free, wall = _free_run(stops, walls, size, sq, direction)
            f = 1 if (is_cap and wall) else 0
            base = sq | (direction << 8)
            cnt = PATTERN_NUM[carry, free, f]
            for j in range(cnt):
                out[n + j] = base | (PATTERN_LIST[carry, free, f, j] << 10)
            n += cnt
    return n


@njit(cache=True)
def count_moves(state: np.ndarray) -> int:
    """Number of legal moves, without listing them (for bulk counting at perft's last ply)."""
    if state[I_RESULT] != RESULT_NONE:
        return 0
    size = state[I_SIZE]
    nsq = size * size
    ply = state[I_PLY]
    mover = ply & 1
    empties = 0
    for sq in range(nsq):
        if state[OFF_HEIGHT + sq] == 0:
            empties += 1
    if ply < 2:
        return empties if state[I_STONES + 1 - mover] > 0 else 0
    per_empty = 0
    if state[I_STONES + mover] > 0:
        per_empty += 2
    if state[I_CAPS + mover] > 0:
        per_empty += 1
    n = empties * per_empty
    own, stops, walls = _spread_bitboards(state, nsq, mover)
    while own != np.uint64(0):
        sq = lowest_bit(own)
        own &= own - np.uint64(1)
        carry = min(state[OFF_HEIGHT + sq], size)
        is_cap = state[OFF_TOP + sq] == CAP
        for direction in range(4):
            free, wall = _free_run(stops, walls, size, sq, direction)
            n += PATTERN_COUNT[carry, free]
            if is_cap and wall:
                n += PATTERN_FLATTEN[carry, free]
    return n


# ---------------------------------------------------------------------------------------------
# Make / unmake
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def make_move(state: np.ndarray, move: int | np.integer) -> int:
    """Play a legal ``move`` in place and set state[I_RESULT]. Returns the undo token for
    ``unmake_move`` (1 if a capstone flattened a wall, else 0). No legality check: callers pass
    moves from ``generate_moves`` (the Python API checks user input first)."""
    flattened = apply_move(state, move)
    set_result(state, move)
    return flattened


@njit(cache=True)
def set_result(state: np.ndarray, move: int | np.integer) -> None:
    """Set state[I_RESULT] for the position just reached by ``move`` (what ``make_move`` does after
    ``apply_move``): a wall placement can only end the game by the flat count, any other move also
    by a road."""
    if (move >> 6) & 3 == WALL:
        state[I_RESULT] = flat_result(state)
    else:
        state[I_RESULT] = compute_result(state, (state[I_PLY] - 1) & 1)


@njit(cache=True)
def apply_move(state: np.ndarray, move: int | np.integer) -> int:
    """``make_move`` without the result: plays ``move`` and leaves state[I_RESULT] as it was (the
    road and flat-count tests are the costly part of a ply). For callers that know the new position
    goes on, such as the search descending into an expanded node; else call ``set_result``."""
    size = state[I_SIZE]
    ply = state[I_PLY]
    mover = ply & 1
    sq = move & 63
    kind = (move >> 6) & 3
    flattened = 0
    if kind != SPREAD:
        colour = mover
        if ply < 2:
            colour = 1 - mover
        if kind == CAP:
            state[I_CAPS + colour] -= 1
        else:
            state[I_STONES + colour] -= 1
        _push(state, sq, colour, 1)
        _set_top(state, sq, kind)
    else:
        direction = (move >> 8) & 3
        pattern = (move >> 10) & 255
        k = bit_length(pattern)
        step = direction_step(direction, size)
        moving_top = state[OFF_TOP + sq]
        _set_top(state, sq, EMPTY)
        carried = _pop(state, sq, k)
        if state[OFF_HEIGHT + sq] > 0:
            _set_top(state, sq, FLAT)
        r = k
        s = sq
        i = k - 1  # bit index (from the top of the pattern) being read
        while r > 0:
            s += step
            # drop size d: this 1 bit and the zeros after it
            d = 1
            i -= 1
            while i >= 0 and ((pattern >> i) & 1) == 0:
                d += 1
                i -= 1
            chunk = carried >> (r - d)
            carried &= (1 << (r - d)) - 1
            r -= d
            if r == 0:
                if state[OFF_TOP + s] == WALL:
                    flattened = 1
                _set_top(state, s, EMPTY)
                _push(state, s, chunk, d)
                _set_top(state, s, moving_top)  # type: ignore[arg-type]  # as in _pop
            else:
                _set_top(state, s, EMPTY)
                _push(state, s, chunk, d)
                _set_top(state, s, FLAT)
    state[I_PLY] = ply + 1
    state[I_HASH] ^= Z_SIDE
    return flattened


@njit(cache=True)
def unmake_move(state: np.ndarray, move: int | np.integer, undo: int | np.integer) -> None:
    """Exactly undo ``make_move(state, move)`` that returned ``undo``."""
    size = state[I_SIZE]
    ply = state[I_PLY] - 1
    state[I_PLY] = ply
    state[I_HASH] ^= Z_SIDE
    state[I_RESULT] = RESULT_NONE
    mover = ply & 1
    sq = move & 63
    kind = (move >> 6) & 3
    if kind != SPREAD:
        colour = mover
        if ply < 2:
            colour = 1 - mover
        _set_top(state, sq, EMPTY)
        _pop(state, sq, 1)
        if kind == CAP:
            state[I_CAPS + colour] += 1
        else:
            state[I_STONES + colour] += 1
        return
    direction = (move >> 8) & 3
    pattern = (move >> 10) & 255
    k = bit_length(pattern)
    step = direction_step(direction, size)
    # Squares passed, from the last back to the first; drop sizes from the low end of the pattern.
    nd = popcount(pattern)
    s = sq + nd * step
    carried = 0
    r = 0
    i = 0
    moving_top = state[OFF_TOP + s]
    last = True
    while r < k:
        d = 1
        while ((pattern >> i) & 1) == 0:
            d += 1
            i += 1
        i += 1
        _set_top(state, s, EMPTY)
        chunk = _pop(state, s, d)
        carried |= chunk << r
        r += d
        if state[OFF_HEIGHT + s] > 0:
            if last and undo:
                _set_top(state, s, WALL)
            else:
                _set_top(state, s, FLAT)
        last = False
        s -= step
    _set_top(state, sq, EMPTY)
    _push(state, sq, carried, k)
    _set_top(state, sq, moving_top)


# ---------------------------------------------------------------------------------------------
# Win in one
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def winning_move(state: np.ndarray, buf: np.ndarray) -> int:
    """The first move (in generation order) with which the side to move in ``state``
    ((STATE_LEN,) int64) wins at once -- a road, or a flat win that ends the game -- or -1.
    ``buf``: int64 scratch of length >= num_actions(N). ``state`` is restored. Plays every legal
    move (make / read the result / unmake); ``takzero.game.threats.wins_at_once`` answers the
    same question faster where it can and falls back on this scan."""
    mover = state[I_PLY] & 1
    n = generate_moves(state, buf)
    for j in range(n):
        m = buf[j]
        u = make_move(state, m)
        r = state[I_RESULT]
        unmake_move(state, m, u)
        if r != RESULT_NONE and result_winner(r) == mover:
            return m
    return -1


@njit(cache=True)
def has_winning_move(state: np.ndarray, buf: np.ndarray) -> bool:
    """True if the side to move in ``state`` has a move that wins at once (:func:`winning_move`).
    ``buf``: int64 scratch of length >= num_actions(N). ``state`` is restored."""
    return winning_move(state, buf) >= 0


# ---------------------------------------------------------------------------------------------
# Perft and playouts
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _perft(state: np.ndarray, depth: int, buffers: np.ndarray) -> int:
    if state[I_RESULT] != RESULT_NONE:
        return 0
    if depth == 1:
        return count_moves(state)
    moves = buffers[depth]
    n = generate_moves(state, moves)
    total = 0
    for j in range(n):
        m = moves[j]
        undo = make_move(state, m)
        total += _perft(state, depth - 1, buffers)
        unmake_move(state, m, undo)
    return total


@njit(cache=True)
def perft(state: np.ndarray, depth: int) -> int:
    """Number of move sequences of length ``depth`` (a finished position counts 0 at depth >= 1,
    1 at depth 0). Counts the last ply in bulk with ``count_moves``. ``state`` is restored."""
    if depth == 0:
        return 1
    size = state[I_SIZE]
    buffers = np.empty((depth + 1, num_actions(size)), dtype=np.int64)
    return _perft(state, depth, buffers)


@njit(cache=True)
def random_playouts(state: np.ndarray, games: int, max_plies: int, seed: int) -> tuple[int, int]:
    """Play ``games`` uniformly random games from ``state`` (restored after each) up to ``max_plies``
    plies each. Returns (plies played in all, games that ended by the rules)."""
    np.random.seed(seed)  # noqa: NPY002 (numba supports the legacy global generator)
    size = state[I_SIZE]
    moves = np.empty(num_actions(size), dtype=np.int64)
    played = np.empty(max_plies, dtype=np.int64)
    undos = np.empty(max_plies, dtype=np.int64)
    total = 0
    finished = 0
    for _ in range(games):
        depth = 0
        while depth < max_plies:
            n = generate_moves(state, moves)
            if n == 0:
                break
            m = moves[np.random.randint(n)]  # noqa: NPY002
            undos[depth] = make_move(state, m)
            played[depth] = m
            depth += 1
        if state[I_RESULT] != RESULT_NONE:
            finished += 1
        total += depth
        for j in range(depth - 1, -1, -1):
            unmake_move(state, played[j], undos[j])
    return total, finished
