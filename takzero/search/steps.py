"""Compiled kernels of the batched MCTS (numba ``@njit``, ``cache=True``).

The Python class ``takzero.search.mcts.BatchedMCTS`` owns the arrays and calls these kernels once
per batch; nothing here runs per node in Python. ``NUMBA_DISABLE_JIT=1`` runs the same code as
plain Python.

Trees (structure of arrays, one row per game, ``B = node_budget`` columns; node 0 is the root)::

    n       (G, B) int32    visits (completed backups)
    w       (G, B) float32  sum of backed-up values, from the view of the player who made the
                            move INTO the node (so Q(child) = w / n is the parent mover's view)
    p       (G, B) float32  prior of the move into the node (normalised over the parent's moves)
    mv      (G, B) int32    core move code of the move into the node (unused at the root)
    first   (G, B) int32    index of the first child; children of a node are contiguous
    nch     (G, B) int32    number of children (0 = not expanded)
    status  (G, B) int8     proof status for the player who moved into the node: UNKNOWN, WIN,
                            DRAW, LOSS (exact game-theoretic value under the rules + ply limit)
    flags   (G, B) int8     FLAG_TERMINAL (game over or ply limit), FLAG_NOEXPAND (tree was full)
    vl      (G, B) int16    in-flight visits (pending leaves below; virtual loss)
    count   (G,)   int32    nodes in use

Per game (``Games``): root states ``root (G, STATE_LEN) int64``, flags ``active`` (holds a live
position), ``searching`` (in the current search), budgets ``target``/``done``/``inflight``, the
search's ``noise`` and ``full`` (playout cap) flags, the per-game random stream ``rng`` (uint64,
splitmix64), root arrays indexed by child slot ``extra (G, A) float32`` (Dirichlet noise, or Gumbel
+ log prior in Gumbel mode), ``mixp (G, A) float32`` (PUCT: the root priors mixed with the noise,
set once per search) and ``sv (G, A) int32`` (Gumbel: visits of this search, for Sequential
Halving), ``raw (G,) float32`` (the root's value estimate before this search, for v_mix),
``seq (G, S) int32`` (the Gumbel considered-visit schedule) and ``overflow (G,) int32`` (leaves
left unexpanded because the tree was full).

Leaves of one step (``Leaves``): ``states (L, STATE_LEN) int64`` (handed to the evaluator),
``game (L,) int32``, ``depth (L,) int32``, ``path (L, MAX_DEPTH) int32`` (node indices, root first).

Proofs (MCTS-Solver, Winands et al. 2008): a child that wins for the mover makes the node a win for
the mover; a node whose children are all proven takes the best of them. Selection never enters a
proven-lost child and backs up the exact value of a proven or terminal node without a network call.

Invariants the kernels rely on:

* children are stored by decreasing prior, so the visited children of a non-root node form a prefix
  (``_select_prefix`` stops at the first unvisited one; the root is always scanned in full);
* every slot at or past ``count[g]`` has zero statistics (``clear_tree``, ``advance_kernel``), so
  an expansion writes only priors and moves;
* ``vl`` is zero everywhere between steps, and with one leaf per game per step (the default) it
  stays zero during a descent too, so it is then neither read nor written;
* a flagged node (FLAG_TERMINAL or FLAG_NOEXPAND) is proven or has visits.

Speed notes: the step kernels work on views without a memory owner (``unowned``: no atomic
reference counting on each call into the rules), helpers index the 2-D pools with ``[g, i]``
rather than taking row views, the long loops cast indices to unsigned (no negative-index
handling), the descent plays moves into expanded nodes without the result test (``apply_move``).
Most of the time is memory latency on the node pools (about 0.5 GB for G = 256 trees of 66k
nodes), so the kernels prefetch: the games are independent, so while one game descends the next
games' root data is loaded, and while one leaf is expanded the next leaves' positions, paths, new
child slots and path statistics; within a descent, a chosen child's children are loaded while its
move is played. On 6x6 mid-game positions (78 legal moves) this is about 4.5 us per simulation on
one core with G = 256: the descent (root scan, ~2 levels below it, the leaf's ``make_move``) a
little under half, ``generate_moves`` of the leaf ~15%, the rest expansion and backup.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from llvmlite import ir
from numba import carray, njit, types
from numba.extending import intrinsic, overload

from takzero.game.core import (
    CAP,
    FLAT,
    HEADER_LEN,
    I_PLY,
    I_RESULT,
    I_SIZE,
    OFF_HEIGHT,
    OFF_HI,
    OFF_LO,
    OFF_TOP,
    _edge_masks,
    _flood,
    apply_move,
    generate_moves,
    line_cover,
    make_move,
    popcount,
    result_winner,
    road_bitboards,
    unmake_move,
)
from takzero.nn.actions import move_to_action

#: Longest selection path (plies below the root) kept per leaf; deeper leaves are not expanded.
MAX_DEPTH = 256

# Proof status, from the view of the player who made the move into the node.
UNKNOWN = 0
WIN = 1
DRAW = 2
LOSS = 3

FLAG_TERMINAL = 1
FLAG_NOEXPAND = 2

# Float parameters (``fp``, float64 array).
FP_C_INIT = 0
FP_C_BASE = 1
FP_FPU_RED = 2
FP_FPU_ROOT_RED = 3
FP_FPU_VALUE = 4  # NaN: use the reduction rule
FP_NOISE_WEIGHT = 5
FP_ALPHA = 6
FP_ALPHA_SCALE = 7
FP_G_CVISIT = 8
FP_G_CSCALE = 9
FP_VL = 10
FP_LEN = 11

# Integer parameters (``ip``, int64 array).
IP_GUMBEL = 0
IP_GUMBEL_M = 1
IP_LEAVES = 2
IP_MAX_PLIES = 3
IP_ROAD_CHECK = 4
IP_ROOT_CHECK = 5
IP_LEN = 6

Trees = namedtuple("Trees", ["n", "w", "p", "mv", "first", "nch", "status", "flags", "vl", "count"])
Games = namedtuple(
    "Games",
    [
        "root", "active", "searching", "target", "done", "inflight", "noise", "full", "rng",
        "extra", "mixp", "sv", "raw", "seq", "overflow",
    ],
)  # fmt: skip
Leaves = namedtuple("Leaves", ["states", "game", "depth", "path"])
#: One tree's worth of scratch columns for the compaction in ``advance_kernel``.
Scratch = namedtuple("Scratch", ["n", "w", "p", "mv", "first", "nch", "status", "flags", "old"])

_INV_2_53 = 1.0 / 9007199254740992.0


# ---------------------------------------------------------------------------------------------
# Unowned views. Every array that numba passes to a non-inlined function (make_move,
# generate_moves, ...) gets an atomic reference-count increment and decrement; on the hot path
# that costs as much as the rules themselves. The step kernels therefore work on views without a
# memory owner (``carray`` over the same buffer), for which those updates are no-ops. The owning
# arrays stay alive in the Python object for the whole call.
# ---------------------------------------------------------------------------------------------


@intrinsic
def _pointer_like(typingctx, addr, arr):
    """Cast the integer ``addr`` to a pointer to ``arr``'s dtype."""
    if not isinstance(addr, types.Integer) or not isinstance(arr, types.Array):
        return None
    ptr_t = types.CPointer(arr.dtype)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(ptr_t))

    return ptr_t(addr, arr), codegen


def unowned(a):
    """A view of the C-contiguous array ``a`` with no memory owner (see above); ``a`` itself in
    plain Python (``NUMBA_DISABLE_JIT=1``)."""
    return a


def _make_prefetch_intrinsic(write: int):
    @intrinsic
    def _prefetch_addr(typingctx, addr):
        """Software prefetch (``llvm.prefetch``, high locality) of the cache line at ``addr``."""
        if not isinstance(addr, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            ptr_t = ir.IntType(8).as_pointer()
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [ptr_t, i32, i32, i32])
            fn = builder.module.declare_intrinsic("llvm.prefetch", [ptr_t], fnty)
            builder.call(fn, [builder.inttoptr(args[0], ptr_t), i32(write), i32(3), i32(1)])
            return context.get_dummy_value()

        return types.none(addr), codegen

    return _prefetch_addr


_prefetch_read = _make_prefetch_intrinsic(0)
_prefetch_write = _make_prefetch_intrinsic(1)


def prefetch(a, i, j):
    """Ask the CPU to start loading the cache line of ``a[i, j]`` (2-D array) without waiting for
    it; no effect on results (nothing in plain Python)."""


def prefetch_write(a, i, j):
    """``prefetch`` for a line that is about to be written."""


@overload(prefetch, inline="always")
def _prefetch_impl(a, i, j):
    def impl(a, i, j):
        _prefetch_read(a.ctypes.data + i * a.strides[0] + j * a.strides[1])

    return impl


@overload(prefetch_write, inline="always")
def _prefetch_write_impl(a, i, j):
    def impl(a, i, j):
        _prefetch_write(a.ctypes.data + i * a.strides[0] + j * a.strides[1])

    return impl


def unowned_row(a, i):
    """Row ``i`` of the C-contiguous 2-D array ``a`` as a view with no memory owner."""
    return a[i]


@overload(unowned, inline="always")
def _unowned_impl(a):
    def impl(a):
        return carray(_pointer_like(a.ctypes.data, a), a.shape)

    return impl


@overload(unowned_row, inline="always")
def _unowned_row_impl(a, i):
    def impl(a, i):
        return carray(_pointer_like(a.ctypes.data + i * a.strides[0], a), (a.shape[1],))

    return impl


# ---------------------------------------------------------------------------------------------
# Random numbers: one splitmix64 stream per game (Steele et al. 2014), so that a game's search
# does not depend on the other games of the batch.
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def splitmix64(x: np.uint64) -> np.uint64:
    """The splitmix64 output function of the state ``x`` (uint64)."""
    z = x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, error_model="numpy")
def next_u64(rng: np.ndarray, g: int) -> np.uint64:
    """Advance game ``g``'s stream (``rng`` (G,) uint64) and return 64 random bits."""
    s = rng[g] + np.uint64(0x9E3779B97F4A7C15)
    rng[g] = s
    return splitmix64(s)


@njit(cache=True, error_model="numpy")
def rand_uniform(rng: np.ndarray, g: int) -> float:
    """Uniform float64 in the open interval (0, 1) from game ``g``'s stream."""
    return (np.float64(next_u64(rng, g) >> np.uint64(11)) + 0.5) * _INV_2_53


@njit(cache=True, error_model="numpy")
def _rand_normal(rng: np.ndarray, g: int) -> float:
    u1 = rand_uniform(rng, g)
    u2 = rand_uniform(rng, g)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


@njit(cache=True, error_model="numpy")
def _log_gamma(rng: np.ndarray, g: int, alpha: float) -> float:
    """log of a Gamma(alpha, 1) sample: Marsaglia & Tsang (2000); for alpha < 1 the boost
    Gamma(a) = Gamma(a + 1) * U**(1/a), kept in log space so tiny alphas do not underflow."""
    a = alpha
    boost = 0.0
    if a < 1.0:
        boost = np.log(rand_uniform(rng, g)) / a
        a += 1.0
    d = a - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    while True:
        x = _rand_normal(rng, g)
        v = 1.0 + c * x
        if v <= 0.0:
            continue
        v = v * v * v
        u = rand_uniform(rng, g)
        if np.log(u) < 0.5 * x * x + d - d * v + d * np.log(v):
            return np.log(d * v) + boost


@njit(cache=True, error_model="numpy")
def _draw_dirichlet(rng: np.ndarray, g: int, out: np.ndarray, k: int, alpha: float) -> None:
    """Write a Dir(alpha, ..., alpha) sample of length ``k`` into ``out[:k]``."""
    mx = -np.inf
    for i in range(k):
        lg = _log_gamma(rng, g, alpha)
        out[i] = lg
        if lg > mx:
            mx = lg
    s = 0.0
    for i in range(k):
        e = np.exp(np.float64(out[i]) - mx)
        out[i] = e
        s += e
    for i in range(k):
        out[i] = out[i] / s


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy", inline="always")
def status_value(s: int) -> float:
    """Exact value of a proof status for the player who moved into the node."""
    if s == WIN:
        return 1.0
    if s == LOSS:
        return -1.0
    return 0.0


@njit(cache=True, error_model="numpy", inline="always")
def terminal_status(state: np.ndarray, max_plies: int) -> int:
    """Proof status of ``state`` for the player who just moved: WIN/LOSS/DRAW if the game is over
    (or the ply limit ``max_plies`` > 0 is reached: DRAW), else UNKNOWN."""
    res = state[I_RESULT]
    if res != 0:
        w = result_winner(res)
        mover = (state[I_PLY] - 1) & 1
        if w == -1:
            return DRAW
        if w == mover:
            return WIN
        return LOSS
    if max_plies > 0 and state[I_PLY] >= max_plies:
        return DRAW
    return UNKNOWN


@njit(cache=True, error_model="numpy", inline="always")
def compute_status(nch: np.ndarray, first: np.ndarray, status: np.ndarray, g: int, x: int) -> int:
    """Proof status of node ``x`` of game ``g`` from its children (its own if not expanded)."""
    nc = nch[g, x]
    if nc == 0:
        return status[g, x]
    f = first[g, x]
    all_proven = True
    any_draw = False
    for c in range(f, f + nc):
        s = status[g, c]
        if s == WIN:
            return LOSS
        if s == UNKNOWN:
            all_proven = False
        elif s == DRAW:
            any_draw = True
    if not all_proven:
        return UNKNOWN
    if any_draw:
        return DRAW
    return WIN


@njit(cache=True, error_model="numpy", inline="always")
def _propagate(nch, first, status, path, slot: int, g: int, d: int) -> None:
    """Recompute proof statuses from ``path[slot, d]`` up to the root, stopping at the first node
    whose status does not change."""
    for i in range(d, -1, -1):
        x = np.int64(path[slot, i])
        s = compute_status(nch, first, status, g, x)
        if s == status[g, x]:
            return
        status[g, x] = s


@njit(cache=True, error_model="numpy", inline="always")
def _copy_state(src: np.ndarray, i: int, dst: np.ndarray, j: int) -> None:
    """``dst[j] = src[i]`` for positions of one board size: the header and the first N*N entries
    of each square field. The entries past N*N are zero in every position of size N, so rows that
    only ever hold positions of this size stay equal in full (element loops: numba's slice
    assignment is several times slower)."""
    ui = np.uint64(i)
    uj = np.uint64(j)
    size = src[ui, I_SIZE]
    nsq = np.uint64(size * size)
    for k in range(np.uint64(HEADER_LEN)):
        dst[uj, k] = src[ui, k]
    for off in (OFF_HEIGHT, OFF_TOP, OFF_LO, OFF_HI):
        base = np.uint64(off)
        for k in range(base, base + nsq):
            dst[uj, k] = src[ui, k]


@njit(cache=True, error_model="numpy", inline="always")
def _backup(n, w, path, slot: int, g: int, depth: int, v: float) -> None:
    """Add one visit and value ``v`` (view of the player who moved into ``path[slot, depth]``) to
    every node of the path, negating at each ply."""
    for i in range(depth, -1, -1):
        x = path[slot, i]
        n[g, x] += 1
        w[g, x] += v
        v = -v


@njit(cache=True, error_model="numpy")
def _nbrs(x: np.uint64, size: int, not_left: np.uint64, not_right: np.uint64, board: np.uint64):
    n = np.uint64(size)
    one = np.uint64(1)
    return ((x << n) | (x >> n) | ((x << one) & not_left) | ((x >> one) & not_right)) & board


@njit(cache=True, error_model="numpy")
def road_win_squares(state: np.ndarray) -> np.uint64:
    """Bitboard (bit sq) of the empty squares where a flat or capstone of the player to move
    completes a road. A square wins iff it touches (or lies on) both edges' connected groups of
    the mover's road pieces, for one of the two pairs of opposite edges. A road crosses every rank
    (or every file), so an axis along which the mover's road pieces cover fewer than size - 1 lines
    cannot be completed by one placement and is skipped (most positions: no flood fill at all)."""
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
        win |= (_nbrs(a, size, not_left, not_right, board) | bottom) & (
            _nbrs(b, size, not_left, not_right, board) | top
        )
    if horizontal:
        a = _flood(left, bb, size, not_left, not_right)
        b = _flood(right, bb, size, not_left, not_right)
        win |= (_nbrs(a, size, not_left, not_right, board) | left) & (
            _nbrs(b, size, not_left, not_right, board) | right
        )
    return win & empty


# ---------------------------------------------------------------------------------------------
# Gumbel root (Danihelka et al. 2022)
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def considered_sequence(m: int, sims: int, out: np.ndarray) -> None:
    """Sequential Halving as a visit schedule (``mctx``'s ``get_sequence_of_considered_visits``):
    ``out[k]`` is the visit count that the action chosen at root simulation ``k`` must have, for
    ``m`` considered actions and ``sims`` simulations. Writes ``out[:sims]``."""
    if m <= 1:
        for k in range(sims):
            out[k] = k
        return
    log2max = 0
    while (1 << log2max) < m:
        log2max += 1
    visits = np.zeros(m, dtype=np.int64)
    num = m
    k = 0
    while k < sims:
        extra = max(1, int(sims / (log2max * num)))
        for _ in range(extra):
            for i in range(num):
                if k < sims:
                    out[k] = visits[i]
                    k += 1
            for i in range(num):
                visits[i] += 1
        num = max(2, num // 2)


@njit(cache=True, error_model="numpy")
def _sigma_q(n, w, p, status, first, nch, raw, fp, g: int, out: np.ndarray) -> None:
    ug = np.uint64(g)
    f = first[ug, 0]
    nc = nch[ug, 0]
    sum_n = 0.0
    sum_p = 0.0
    wq = 0.0
    maxn = 0
    for i in range(nc):
        c = np.uint64(f + i)
        nn = n[ug, c]
        if nn > 0:
            sum_n += nn
            sum_p += p[ug, c]
            wq += p[ug, c] * (w[ug, c] / nn)
            if nn > maxn:
                maxn = nn
    vmix = np.float64(raw[ug])
    if sum_n > 0 and sum_p > 0:
        vmix = (vmix + sum_n * wq / sum_p) / (1.0 + sum_n)
    qmin = np.inf
    qmax = -np.inf
    for i in range(nc):
        c = np.uint64(f + i)
        s = status[ug, c]
        if s != UNKNOWN:
            q = status_value(s)
        elif n[ug, c] > 0:
            q = w[ug, c] / n[ug, c]
        else:
            q = vmix
        out[i] = q
        if q < qmin:
            qmin = q
        if q > qmax:
            qmax = q
    scale = (fp[FP_G_CVISIT] + maxn) * fp[FP_G_CSCALE]
    span = max(qmax - qmin, 1e-8)
    for i in range(nc):
        out[i] = scale * (out[i] - qmin) / span


@njit(cache=True, error_model="numpy")
def root_sigma_q(T, GM, fp: np.ndarray, g: int, out: np.ndarray) -> None:
    """``out[i] = sigma(completed Q)`` of root child slot ``i`` of game ``g`` (mover's view).

    completed Q: the child's Q if visited (its exact value if proven), else v_mix (eq. 33):
    ``v_mix = (v_raw + sum_b N(b) * sum_{b visited} P(b) q(b) / sum_{b visited} P(b)) /
    (1 + sum_b N(b))``; min-max normalised to [0, 1] over the legal moves (``mctx``), then
    ``sigma(q) = (c_visit + max_b N(b)) * c_scale * q``.
    """
    _sigma_q(T.n, T.w, T.p, T.status, T.first, T.nch, GM.raw, fp, g, out)


@njit(cache=True, error_model="numpy")
def _select_gumbel_root(n, w, p, status, first, nch, raw, extra, sv, seq, fp, g: int,
                        qbuf: np.ndarray) -> int:  # fmt: skip
    """Root action of the next simulation: among the non-lost children whose search visits equal
    the schedule's considered visit, the one maximising gumbel + log P + sigma(q)."""
    f = first[g, 0]
    nc = nch[g, 0]
    sim = 0
    for i in range(nc):
        sim += sv[g, i]
    considered = seq[g, min(sim, seq.shape[1] - 1)]
    _sigma_q(n, w, p, status, first, nch, raw, fp, g, qbuf)
    best = -np.inf
    best_c = -1
    fb = -np.inf
    fb_c = -1
    for i in range(nc):
        c = f + i
        s = status[g, c]
        if s == LOSS:
            continue
        if s == WIN:
            return c
        sc = extra[g, i] + qbuf[i]
        if sv[g, i] == considered and sc > best:
            best = sc
            best_c = c
        if sc > fb:
            fb = sc
            fb_c = c
    if best_c >= 0:
        return best_c
    return fb_c


# ---------------------------------------------------------------------------------------------
# PUCT selection
#
# Hot-path helpers take the 2-D pool arrays and index them with [g, i]: taking row views or
# unpacking the named tuples per call costs reference-count updates that dominate otherwise.
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy", inline="always")
def _cs(fp: np.ndarray, nx: float) -> float:
    """c(s) * sqrt(N(s)) of PUCT with the AlphaZero log schedule (c_base > 0) or a constant."""
    cp = fp[FP_C_INIT]
    cb = fp[FP_C_BASE]
    if cb > 0.0:
        cp += np.log((1.0 + nx + cb) / cb)
    return cp * np.sqrt(max(nx, 1.0))


@njit(cache=True, error_model="numpy", inline="always")
def _q_plus_u(num: float, nn: float, cs: float, pr: float) -> float:
    """PUCT score of a visited child: Q + U = num / nn + cs * pr / (1 + nn), written with a single
    division (``num``: value sum less virtual loss, ``nn``: visits plus virtual visits > 0)."""
    return (num * (1.0 + nn) + cs * pr * nn) / (nn * (1.0 + nn))


@njit(cache=True, error_model="numpy", inline="always")
def _select_prefix(n, w, p, mv, status, vl, first, nch, fp, g: int, x: int, use_vl: bool) -> int:
    """PUCT at a non-root node. Children are stored by decreasing prior and a non-root node always
    selects either a visited child or the first unvisited one (all unvisited children share the
    FPU value, so the first has the largest U), hence its visited children form a prefix: the scan
    stops at the first unvisited child. Same result as a full scan, ties to the lowest index.
    ``use_vl``: virtual visits may be pending; without them ``vl`` is all zero and not read."""
    f = first[g, x]
    nc = nch[g, x]
    # the child taken next reads these at its own index (in the first cache line of the children
    # when the visited prefix is short): start the loads now, alongside the scan's own misses,
    # instead of one after the other
    prefetch(mv, g, f)
    prefetch(nch, g, f)
    prefetch(first, g, f)
    cs = _cs(fp, np.float64(n[g, x] + (vl[g, x] if use_vl else 0)))
    vlv = fp[FP_VL]
    best = -np.inf
    best_c = -1
    mass = 0.0
    cand = -1
    for c in range(f, f + nc):
        s = status[g, c]
        nn = np.float64(n[g, c] + (vl[g, c] if use_vl else 0))
        if s == UNKNOWN and nn == 0.0:
            cand = c
            break
        if s == LOSS:
            continue
        if s == WIN:
            return c
        pr = np.float64(p[g, c])
        if nn > 0.0:
            mass += pr
        if s == DRAW:
            sc = cs * pr / (1.0 + nn)
        else:
            sc = _q_plus_u(np.float64(w[g, c]) - (vlv * vl[g, c] if use_vl else 0.0), nn, cs, pr)
        if sc > best:
            best = sc
            best_c = c
    if cand >= 0:
        fv = fp[FP_FPU_VALUE]
        if np.isnan(fv):
            n_self = n[g, x]
            pq = -w[g, x] / n_self if n_self > 0 else 0.0
            fv = pq - fp[FP_FPU_RED] * np.sqrt(mass)
        su = fv + cs * np.float64(p[g, cand])
        if su > best or (su == best and cand < best_c):
            return cand
    return best_c


@njit(cache=True, error_model="numpy", inline="always")
def _select_root(n, w, status, vl, first, nch, noise, mixp, fp, g: int, buf: np.ndarray,
                 use_vl: bool) -> int:  # fmt: skip
    """PUCT at the root: a full scan (noise mixes the priors, so no prefix property); -1 if every
    child is a proven loss. The mixed priors ``mixp`` are set once per search (``_init_root``).
    The scores are computed branch-free into ``buf``; proven children are then fixed up (a win is
    taken at once, a loss scores -inf, a draw its exact value 0 plus U) and the first maximum is
    taken. Indices are cast to unsigned so that
    numba drops its negative-index handling, which keeps these loops several times faster.
    ``use_vl``: virtual visits may be pending (more than one leaf per game per step)."""
    ug = np.uint64(g)
    f = first[ug, 0]
    nc = nch[ug, 0]
    cs = _cs(fp, np.float64(n[ug, 0] + (vl[ug, 0] if use_vl else 0)))
    vlv = fp[FP_VL]
    proven = 0
    for i in range(nc):
        proven |= status[ug, np.uint64(f + i)]
    fv = fp[FP_FPU_VALUE]
    if np.isnan(fv):
        red = 0.0 if noise[ug] and fp[FP_NOISE_WEIGHT] > 0.0 else fp[FP_FPU_ROOT_RED]
        n_self = n[ug, 0]
        fv = -w[ug, 0] / n_self if n_self > 0 else 0.0
        if red != 0.0:  # the prior mass of the visited children (a sequential sum)
            mass = 0.0
            for i in range(nc):
                c = np.uint64(f + i)
                nv = n[ug, c] + (vl[ug, c] if use_vl else 0)
                mass += np.float64(mixp[ug, np.uint64(i)]) if nv > 0 else 0.0
            fv -= red * np.sqrt(mass)
    for i in range(nc):
        c = np.uint64(f + i)
        pr = np.float64(mixp[ug, np.uint64(i)])
        if use_vl:
            nn = np.float64(n[ug, c] + vl[ug, c])
            num = np.float64(w[ug, c]) - vlv * vl[ug, c]
        else:
            nn = np.float64(n[ug, c])
            num = np.float64(w[ug, c])
        # _q_plus_u written branch-free (the loop vectorises): the denominator is guarded for
        # unvisited children, whose score is the FPU one
        den = nn * (1.0 + nn)
        visited = (num * (1.0 + nn) + cs * pr * nn) / (den if den > 0.0 else 1.0)
        buf[i] = visited if nn > 0.0 else fv + cs * pr
    if proven == 0:
        best = buf[0]
        bi = 0
        for i in range(1, nc):
            if buf[i] > best:
                best = buf[i]
                bi = i
        return f + bi
    # proven children: a win is taken at once, a loss never, a draw scores its exact value 0
    for i in range(nc):
        c = np.uint64(f + i)
        s = status[ug, c]
        if s != UNKNOWN:
            if s == WIN:
                return f + i
            if s == LOSS:
                buf[i] = -np.inf
            else:
                nn = np.float64(n[ug, c] + (vl[ug, c] if use_vl else 0))
                buf[i] = cs * np.float64(mixp[ug, np.uint64(i)]) / (1.0 + nn)
    best = -np.inf
    best_c = -1
    for i in range(nc):
        if buf[i] > best:
            best = buf[i]
            best_c = f + i
    return best_c


# ---------------------------------------------------------------------------------------------
# Expansion and root preparation
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy", inline="always")
def _expand(n, w, p, mv, first, nch, status, flags, count, overflow, ip: np.ndarray, g: int,
            x: int, state: np.ndarray, priors: np.ndarray, offset: int, moves: np.ndarray,
            pbuf: np.ndarray) -> None:  # fmt: skip
    """Create the children of node ``x`` (position ``state``) with priors gathered from
    ``priors[offset + action]`` and renormalised over the legal moves (non-finite or negative
    entries count as 0; an all-zero row becomes uniform). Children are stored by decreasing prior
    (stable), which keeps the visited children of a non-root node a prefix (``_select_prefix``).
    If the tree has no room, flag FLAG_NOEXPAND instead. With the road check on, winning
    placements are marked and ``x`` is proven at once. ``moves`` (int32) and ``pbuf`` (float64)
    are scratch arrays of length >= A."""
    nm = generate_moves(state, moves)
    if nm == 0:
        flags[g, x] |= FLAG_NOEXPAND
        return
    f = count[g]
    if f + nm > n.shape[1]:
        flags[g, x] |= FLAG_NOEXPAND
        overflow[g] += 1
        return
    count[g] = f + nm
    size = state[I_SIZE]
    total = 0.0
    ordered = True
    prev = np.inf
    for i in range(nm):
        m = moves[i]
        pr = np.float64(priors[np.uint64(offset + move_to_action(m, size))])
        if not (pr > 0.0 and pr < np.inf):
            pr = 0.0
        pbuf[i] = pr
        total += pr
        if pr > prev:
            ordered = False
        prev = pr
    ug = np.uint64(g)
    if not (total > 0.0 and total < np.inf):
        u = 1.0 / nm
        for i in range(nm):
            p[ug, np.uint64(f + i)] = u
            mv[ug, np.uint64(f + i)] = moves[i]
    elif ordered:
        inv = 1.0 / total
        for i in range(nm):
            p[ug, np.uint64(f + i)] = pbuf[i] * inv
            mv[ug, np.uint64(f + i)] = moves[i]
    else:
        inv = 1.0 / total
        for i in range(nm):
            pbuf[i] = pbuf[i] * inv
        order = np.argsort(-pbuf[:nm], kind="mergesort")
        for j in range(nm):
            i = np.uint64(order[j])
            p[ug, np.uint64(f + j)] = pbuf[i]
            mv[ug, np.uint64(f + j)] = moves[i]
    # new slots already have zero statistics (the free-slot invariant, see ``clear_tree``), and
    # first[] is only read when nch > 0
    first[g, x] = f
    nch[g, x] = nm
    if ip[IP_ROAD_CHECK] != 0 and state[I_PLY] >= 2:
        win = road_win_squares(state)
        if win != 0:
            for c in range(f, f + nm):
                m = mv[g, c]
                kind = (m >> 6) & 3
                if (kind == FLAT or kind == CAP) and (win >> np.uint64(m & 63)) & np.uint64(1):
                    status[g, c] = WIN
                    flags[g, c] = FLAG_TERMINAL
            status[g, x] = LOSS


@njit(cache=True, error_model="numpy")
def _init_root(T, GM, fp: np.ndarray, ip: np.ndarray, g: int) -> None:
    """Prepare an expanded root for a new search: per-search visits, root terminal check, the
    root's value estimate (v_raw), the Gumbel draw and schedule or the Dirichlet draw."""
    nc = T.nch[g, 0]
    if nc == 0:
        return
    f = T.first[g, 0]
    n0 = T.n[g, 0]
    GM.raw[g] = -T.w[g, 0] / n0 if n0 > 0 else 0.0
    for i in range(nc):
        GM.sv[g, i] = 0
    if ip[IP_ROOT_CHECK] != 0:
        st = GM.root[g]
        max_plies = ip[IP_MAX_PLIES]
        changed = False
        for i in range(nc):
            c = f + i
            if T.status[g, c] != UNKNOWN or T.flags[g, c] != 0 or T.n[g, c] != 0:
                continue
            if T.nch[g, c] != 0:
                continue
            m = T.mv[g, c]
            undo = make_move(st, m)
            ts = terminal_status(st, max_plies)
            unmake_move(st, m, undo)
            if ts != UNKNOWN:
                T.status[g, c] = ts
                T.flags[g, c] = FLAG_TERMINAL
                changed = True
        if changed:
            T.status[g, 0] = compute_status(T.nch, T.first, T.status, g, 0)
    ext = GM.extra[g]
    if ip[IP_GUMBEL] != 0:
        m = min(ip[IP_GUMBEL_M], nc)
        considered_sequence(m, GM.target[g], GM.seq[g])
        for i in range(nc):
            gz = 0.0
            if GM.noise[g]:
                gz = -np.log(-np.log(rand_uniform(GM.rng, g)))
            ext[i] = gz + np.log(max(np.float64(T.p[g, f + i]), 1e-30))
    else:
        eps = fp[FP_NOISE_WEIGHT]
        noisy = GM.noise[g] and eps > 0.0
        if noisy:
            alpha = fp[FP_ALPHA]
            if alpha <= 0.0:
                alpha = fp[FP_ALPHA_SCALE] / nc
            _draw_dirichlet(GM.rng, g, ext, nc, alpha)
        keep = 1.0 - eps if noisy else 1.0
        mix = eps if noisy else 0.0
        for i in range(nc):
            GM.mixp[g, i] = keep * T.p[g, f + i] + mix * ext[i]


# ---------------------------------------------------------------------------------------------
# The search step kernels
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def begin_kernel(T, GM, fp: np.ndarray, ip: np.ndarray, games: np.ndarray, full_sims: int,
                 cheap_sims: int, full_prob: float, playout_cap: bool, add_noise: bool) -> None:  # fmt: skip
    """Start a search for each game in ``games`` (int32): budget (playout cap draw), noise flag,
    root preparation for already expanded roots. Inactive games are skipped."""
    for gi in range(games.shape[0]):
        g = np.int64(games[gi])
        if not GM.active[g]:
            GM.searching[g] = False
            continue
        full = True
        if playout_cap:
            full = rand_uniform(GM.rng, g) < full_prob
        GM.full[g] = full
        GM.target[g] = full_sims if full else cheap_sims
        GM.done[g] = 0
        GM.inflight[g] = 0
        GM.noise[g] = add_noise and full
        GM.searching[g] = True
        if T.nch[g, 0] > 0:
            _init_root(T, GM, fp, ip, g)


@njit(cache=True, error_model="numpy", inline="always")
def _count_root_visit(sv, path, slot: int, g: int, f0: int, gumbel: bool) -> None:
    """Count a simulation for the root child it went through (``sv``: Gumbel's Sequential
    Halving; PUCT does not use it)."""
    if gumbel:
        sv[g, path[slot, 1] - f0] += 1


@njit(cache=True, error_model="numpy", inline="always")
def _descend(n, w, p, mv, first, nch, status, flags, vl, root, noise, extra, mixp, sv, raw, seq,
             states, path, fp: np.ndarray, ip: np.ndarray, g: int, slot: int,
             qbuf: np.ndarray) -> tuple[int, int]:  # fmt: skip
    """One selection from the root of game ``g`` into leaf slot ``slot``. Returns (code, depth):
    code 0 if a leaf was recorded for evaluation (virtual visits added along its path), 1 if a
    value was backed up at once (terminal, proven, full tree), 2 if nothing could be done (a
    pending leaf was hit, or no child can be selected). With one leaf per game per step no virtual
    visit is pending during a descent, so ``vl`` is neither read nor written."""
    _copy_state(root, g, states, slot)
    st = unowned_row(states, slot)
    path[slot, 0] = 0
    x = 0
    depth = 0
    gumbel = ip[IP_GUMBEL] != 0
    max_plies = ip[IP_MAX_PLIES]
    f0 = first[g, 0]
    use_vl = ip[IP_LEAVES] > 1
    while True:
        if depth > 0:
            c = _select_prefix(n, w, p, mv, status, vl, first, nch, fp, g, x, use_vl)
        elif gumbel:
            c = _select_gumbel_root(n, w, p, status, first, nch, raw, extra, sv, seq, fp, g, qbuf)
        else:
            c = _select_root(n, w, status, vl, first, nch, noise, mixp, fp, g, qbuf, use_vl)
        if c < 0:
            _propagate(nch, first, status, path, slot, g, depth)
            return 2, depth
        if nch[g, c] > 0:
            # the next selection scans c's children: start loading them while the move is played
            fc = first[g, c]
            prefetch(status, g, fc)
            prefetch(n, g, fc)
            prefetch(p, g, fc)
            prefetch(w, g, fc)
            # an expanded node's position goes on (a finished one has no moves), so its result
            # stays RESULT_NONE, as the root's: skip the road and flat-count tests
            apply_move(st, mv[g, c])
        else:
            make_move(st, mv[g, c])
        depth += 1
        path[slot, depth] = c
        s = status[g, c]
        # a flagged node (terminal, or not expandable) is proven or has visits, so flags[g, c] need
        # not be read here
        if s == UNKNOWN and nch[g, c] == 0 and n[g, c] == 0 and (not use_vl or vl[g, c] == 0):
            ts = terminal_status(st, max_plies)
            if ts != UNKNOWN:
                status[g, c] = ts
                flags[g, c] = FLAG_TERMINAL
                s = ts
                _propagate(nch, first, status, path, slot, g, depth - 1)
        if s != UNKNOWN:
            _count_root_visit(sv, path, slot, g, f0, gumbel)
            _backup(n, w, path, slot, g, depth, status_value(s))
            return 1, depth
        if nch[g, c] > 0:
            if depth < MAX_DEPTH - 1:
                x = c
                continue
            _count_root_visit(sv, path, slot, g, f0, gumbel)
            _backup(n, w, path, slot, g, depth, w[g, c] / n[g, c])
            return 1, depth
        if use_vl and vl[g, c] > 0:
            return 2, depth
        if n[g, c] > 0:
            # evaluated but not expandable (tree full, or at MAX_DEPTH): back up its mean again
            _count_root_visit(sv, path, slot, g, f0, gumbel)
            _backup(n, w, path, slot, g, depth, w[g, c] / n[g, c])
            return 1, depth
        if use_vl:
            for i in range(depth + 1):
                vl[g, path[slot, i]] += 1
        _count_root_visit(sv, path, slot, g, f0, gumbel)
        return 0, depth


@njit(cache=True, error_model="numpy", inline="always")
def _prefetch_position(states, i: int) -> None:
    """Prefetch the first line of the header and of each square field of position ``states[i]``
    (the hardware prefetcher follows the rest)."""
    for off in (0, OFF_HEIGHT, OFF_TOP, OFF_LO, OFF_HI):
        prefetch(states, i, off)


@njit(cache=True, error_model="numpy", inline="always")
def _prefetch_root_node(n, w, first, nch, status, g: int) -> None:
    """Prefetch the fields of game ``g``'s root node that a descent reads first."""
    prefetch(first, g, 0)
    prefetch(nch, g, 0)
    prefetch(n, g, 0)
    prefetch(w, g, 0)
    prefetch(status, g, 0)


@njit(cache=True, error_model="numpy", inline="always")
def _prefetch_root_children(n, w, first, nch, status, mixp, root, g: int, gumbel: bool) -> None:
    """Prefetch what the root scan of game ``g`` reads (its root node must be cached: see
    ``_prefetch_root_node``): the children's statistics, the mixed priors and the root position's
    header and square fields."""
    f = first[g, 0]
    nc = nch[g, 0]
    for i in range(0, nc, 16):  # 4-byte fields: 16 per cache line
        prefetch(n, g, f + i)
        prefetch(w, g, f + i)
    for i in range(0, nc, 64):
        prefetch(status, g, f + i)
    if not gumbel:
        for i in range(0, nc, 16):
            prefetch(mixp, g, i)
    _prefetch_position(root, g)


@njit(cache=True, error_model="numpy")
def select_kernel(T, GM, LV, fp: np.ndarray, ip: np.ndarray, games: np.ndarray,
                  qbuf: np.ndarray) -> int:  # fmt: skip
    """Pick up to ``leaves_per_step`` leaves per searching game of ``games`` (int32, in order) and
    write them to ``LV``; terminal and proven leaves are backed up here at once (a game keeps
    descending until it finds a leaf to evaluate or its budget is spent). A game that produced
    nothing and has nothing pending is finished (``searching`` cleared). Returns the leaf count."""
    n, w, p, mv = unowned(T.n), unowned(T.w), unowned(T.p), unowned(T.mv)
    first, nch, status = unowned(T.first), unowned(T.nch), unowned(T.status)
    flags, vl = unowned(T.flags), unowned(T.vl)
    root, noise, extra = unowned(GM.root), unowned(GM.noise), unowned(GM.extra)
    mixp = unowned(GM.mixp)
    sv, raw, seq = unowned(GM.sv), unowned(GM.raw), unowned(GM.seq)
    searching, done = unowned(GM.searching), unowned(GM.done)
    inflight, target = unowned(GM.inflight), unowned(GM.target)
    states, path = unowned(LV.states), unowned(LV.path)
    lgame, ldepth = unowned(LV.game), unowned(LV.depth)
    k = ip[IP_LEAVES]
    gumbel = ip[IP_GUMBEL] != 0
    L = 0
    ng = games.shape[0]
    for gi in range(ng):
        g = np.int64(games[gi])
        # the games are independent: load the next games' root data while this one is searched
        # (the root node of the game after next, the root's children and position of the next)
        if gi + 2 < ng:
            _prefetch_root_node(n, w, first, nch, status, np.int64(games[gi + 2]))
        if gi + 1 < ng:
            g1 = np.int64(games[gi + 1])
            if searching[g1]:
                _prefetch_root_children(n, w, first, nch, status, mixp, root, g1, gumbel)
        if not searching[g]:
            continue
        got = 0
        misses = 0
        while got < k:
            if status[g, 0] != UNKNOWN:
                break
            if nch[g, 0] == 0:
                if vl[g, 0] > 0 or flags[g, 0] != 0:
                    break
                _copy_state(root, g, states, L)
                path[L, 0] = 0
                ldepth[L] = 0
                lgame[L] = g
                vl[g, 0] += 1
                L += 1
                got += 1
                break
            if done[g] + inflight[g] >= target[g]:
                break
            r, depth = _descend(
                n, w, p, mv, first, nch, status, flags, vl, root, noise, extra, mixp, sv, raw,
                seq, states, path, fp, ip, g, L, qbuf,
            )  # fmt: skip
            if r == 0:
                lgame[L] = g
                ldepth[L] = depth
                L += 1
                got += 1
                inflight[g] += 1
            elif r == 1:
                done[g] += 1
            else:
                misses += 1
                if got > 0 or misses > 2:
                    break
        if got == 0 and inflight[g] == 0:
            searching[g] = False
    return L


@njit(cache=True, error_model="numpy", inline="always")
def _prefetch_leaf(n, w, p, mv, first, nch, status, flags, count, path, lgame, ldepth,
                   j: int) -> None:  # fmt: skip
    """Prefetch what expanding and backing up leaf ``j`` touches in the tree (its path must be
    cached: see ``_prefetch_leaf_path``): the leaf node, the pool slots its children will take
    (priors and moves, about 80 of them) and the statistics along its path."""
    g = np.int64(lgame[j])
    depth = np.int64(ldepth[j])
    x = np.int64(path[j, depth])
    prefetch_write(first, g, x)
    prefetch_write(nch, g, x)
    prefetch(status, g, x)
    prefetch(flags, g, x)
    f = np.int64(count[g])
    for i in range(0, 80, 16):
        prefetch_write(p, g, f + i)
        prefetch_write(mv, g, f + i)
    for i in range(depth):
        x = np.int64(path[j, i])
        prefetch(n, g, x)
        prefetch(w, g, x)


@njit(cache=True, error_model="numpy", inline="always")
def _prefetch_leaf_path(states, path, j: int) -> None:
    """Prefetch leaf ``j``'s path (node indices) and position."""
    prefetch(path, j, 0)
    _prefetch_position(states, j)


@njit(cache=True, error_model="numpy")
def expand_backup_kernel(T, GM, LV, fp: np.ndarray, ip: np.ndarray, num: int, priors: np.ndarray,
                         stride: int, values: np.ndarray, moves: np.ndarray,
                         pbuf: np.ndarray) -> None:  # fmt: skip
    """Expand the ``num`` pending leaves with the priors of leaf ``j`` at ``priors[j * stride:]``
    (``priors`` flat float32; stride A for a (num, A) array, 0 for one row shared by all) and back
    up ``values`` (num,) (view of the side to move at each leaf; NaN counts as 0, clipped to
    [-1, 1]). A leaf proven by the road check backs up its exact value instead. Root leaves
    (depth 0) then get their root preparation and do not count as simulations."""
    n, w, p, mv = unowned(T.n), unowned(T.w), unowned(T.p), unowned(T.mv)
    first, nch, status = unowned(T.first), unowned(T.nch), unowned(T.status)
    flags, vl = unowned(T.flags), unowned(T.vl)
    count, overflow = unowned(T.count), unowned(GM.overflow)
    done, inflight = unowned(GM.done), unowned(GM.inflight)
    states, path = unowned(LV.states), unowned(LV.path)
    lgame, ldepth = unowned(LV.game), unowned(LV.depth)
    prior_u, moves_u, pbuf_u = unowned(priors), unowned(moves), unowned(pbuf)
    use_vl = ip[IP_LEAVES] > 1
    for j in range(num):
        g = np.int64(lgame[j])
        depth = np.int64(ldepth[j])
        x = np.int64(path[j, depth])
        if j + 2 < num:
            _prefetch_leaf_path(states, path, j + 2)
        if j + 1 < num:
            _prefetch_leaf(n, w, p, mv, first, nch, status, flags, count, path, lgame, ldepth, j + 1)
        if use_vl or depth == 0:  # one leaf per game: only a root leaf holds a virtual visit
            for i in range(depth + 1):
                vl[g, path[j, i]] -= 1
        v = np.float64(values[j])
        if not (v == v):
            v = 0.0
        v = min(1.0, max(-1.0, v))
        if depth >= MAX_DEPTH - 1:
            flags[g, x] |= FLAG_NOEXPAND
        elif nch[g, x] == 0:
            _expand(
                n, w, p, mv, first, nch, status, flags, count, overflow, ip, g, x,
                unowned_row(states, j), prior_u, j * stride, moves_u, pbuf_u,
            )  # fmt: skip
        vb = -v
        s = status[g, x]
        if s != UNKNOWN:
            vb = status_value(s)
            if depth > 0:
                _propagate(nch, first, status, path, j, g, depth - 1)
        _backup(n, w, path, j, g, depth, vb)
        if depth == 0:
            _init_root(T, GM, fp, ip, g)
        else:
            done[g] += 1
            inflight[g] -= 1


# ---------------------------------------------------------------------------------------------
# Tree maintenance
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def _zero_slots(T, g: int, lo: int, hi: int) -> None:
    """Zero the statistics of node slots [lo, hi) of game ``g`` (see the free-slot invariant)."""
    hi = min(hi, T.n.shape[1])
    for i in range(lo, hi):
        T.n[g, i] = 0
    for i in range(lo, hi):
        T.w[g, i] = 0.0
    for i in range(lo, hi):
        T.nch[g, i] = 0
    for i in range(lo, hi):
        T.status[g, i] = UNKNOWN
    for i in range(lo, hi):
        T.flags[g, i] = 0
    for i in range(lo, hi):
        T.vl[g, i] = 0


@njit(cache=True, error_model="numpy")
def clear_tree(T, g: int, keep_root: bool = True) -> None:
    """Make game ``g``'s tree a single unexpanded root (or empty: ``keep_root=False``). Zeroes the
    used slots, keeping the free-slot invariant: every slot at or past ``count`` has zero
    statistics (n, w, nch, status, flags, vl), so an expansion only writes priors and moves."""
    _zero_slots(T, g, 0, max(T.count[g], 1))
    T.p[g, 0] = 1.0
    T.mv[g, 0] = 0
    T.first[g, 0] = 0
    T.count[g] = 1 if keep_root else 0


@njit(cache=True, error_model="numpy")
def advance_kernel(T, GM, S, g: int, move: int, reuse: bool, max_plies: int) -> int:
    """Play ``move`` (legal, checked by the caller) at game ``g``'s root. With ``reuse`` and an
    expanded child for the move, that child's subtree becomes the tree (compacted to the front of
    the pool, breadth first, through the scratch ``S``); otherwise the tree is cleared. A finished
    game (or the ply limit) deactivates the game. Returns the number of nodes kept."""
    f = T.first[g, 0]
    nc = T.nch[g, 0]
    c = -1
    for i in range(nc):
        if T.mv[g, f + i] == move:
            c = f + i
            break
    st = GM.root[g]
    make_move(st, move)
    GM.searching[g] = False
    if terminal_status(st, max_plies) != UNKNOWN:
        GM.active[g] = False
        clear_tree(T, g, False)
        return 0
    if c < 0 or not reuse or T.nch[g, c] == 0:
        clear_tree(T, g)
        return 1
    # breadth-first copy of the subtree of c into the scratch columns
    S.old[0] = c
    S.first[0] = 0
    head = 0
    tail = 1
    while head < tail:
        o = S.old[head]
        S.n[head] = T.n[g, o]
        S.w[head] = T.w[g, o]
        S.p[head] = T.p[g, o]
        S.mv[head] = T.mv[g, o]
        S.status[head] = T.status[g, o]
        S.flags[head] = T.flags[g, o]
        k = T.nch[g, o]
        S.nch[head] = k
        if k > 0:
            fo = T.first[g, o]
            S.first[head] = tail
            for j in range(k):
                S.old[tail + j] = fo + j
            tail += k
        else:
            S.first[head] = 0
        head += 1
    old_count = T.count[g]
    for i in range(tail):
        T.n[g, i] = S.n[i]
        T.w[g, i] = S.w[i]
        T.p[g, i] = S.p[i]
        T.mv[g, i] = S.mv[i]
        T.first[g, i] = S.first[i]
        T.nch[g, i] = S.nch[i]
        T.status[g, i] = S.status[i]
        T.flags[g, i] = S.flags[i]
        T.vl[g, i] = 0
    _zero_slots(T, g, tail, old_count)
    T.count[g] = tail
    return tail
