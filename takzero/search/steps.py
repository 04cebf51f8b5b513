"""The search step kernels (numba ``@njit``, ``cache=True``): ``begin_kernel`` starts a search,
``select_kernel`` descends the trees to one batch of leaves, ``expand_backup_kernel`` expands the
leaves with the evaluator's priors and backs their values up.

``takzero.search.mcts.BatchedMCTS`` owns the arrays (layout: ``takzero.search.tree``) and calls
each kernel once per batch. The selection rules are ``takzero.search.puct`` (below the root, and at
a PUCT root) and ``takzero.search.gumbel`` (a Gumbel root); the settings come packed
(``takzero.search.config.pack_settings``) and are read as ``cfg["name"]``.

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
little under half, ``generate_moves`` of the leaf ~15%, the rest expansion and backup. The
selection and expansion helpers are inlined into these kernels (``inline="always"``), so keeping
them in their own modules costs nothing at run time.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from takzero.game.core import (
    CAP,
    FLAT,
    HEADER_LEN,
    I_PLY,
    I_SIZE,
    OFF_HEIGHT,
    OFF_HI,
    OFF_LO,
    OFF_TOP,
    apply_move,
    generate_moves,
    make_move,
    road_win_squares,
    unmake_move,
)
from takzero.nn.actions import move_to_action
from takzero.search.gumbel import init_gumbel_root, select_gumbel_root
from takzero.search.numba_ext import prefetch, prefetch_write, unowned, unowned_row
from takzero.search.puct import mix_root_noise, select_prefix, select_root
from takzero.search.rng import rand_uniform
from takzero.search.tree import (
    FLAG_NOEXPAND,
    FLAG_TERMINAL,
    LOSS,
    MAX_DEPTH,
    UNKNOWN,
    WIN,
    backup,
    compute_status,
    propagate,
    status_value,
    terminal_status,
)


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


# ---------------------------------------------------------------------------------------------
# Expansion and root preparation
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy", inline="always")
def _expand(n, w, p, mv, first, nch, status, flags, count, overflow, cfg, g: int, x: int,
            state: np.ndarray, priors: np.ndarray, offset: int, moves: np.ndarray,
            pbuf: np.ndarray) -> None:  # fmt: skip
    """Create the children of node ``x`` (position ``state``) with priors gathered from
    ``priors[offset + action]`` and renormalised over the legal moves (non-finite or negative
    entries count as 0; an all-zero row becomes uniform). Children are stored by decreasing prior
    (stable), which keeps the visited children of a non-root node a prefix (``select_prefix``).
    If the tree has no room, flag FLAG_NOEXPAND instead. With the road check on, winning
    placements (``road_win_squares``) are marked and ``x`` is proven at once. ``moves`` (int32)
    and ``pbuf`` (float64) are scratch arrays of length >= A."""
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
    if cfg["road_check"] and state[I_PLY] >= 2:
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
def _init_root(T, GM, cfg, g: int) -> None:
    """Prepare an expanded root for a new search: per-search visits, root terminal check, the
    root's value estimate (v_raw), then the Gumbel draw and schedule (``init_gumbel_root``) or the
    Dirichlet draw and mixed priors (``mix_root_noise``)."""
    nc = T.nch[g, 0]
    if nc == 0:
        return
    f = T.first[g, 0]
    n0 = T.n[g, 0]
    GM.raw[g] = -T.w[g, 0] / n0 if n0 > 0 else 0.0
    for i in range(nc):
        GM.sv[g, i] = 0
    if cfg["root_terminal_check"]:
        st = GM.root[g]
        max_plies = cfg["max_plies"]
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
    if cfg["gumbel"]:
        init_gumbel_root(T, GM, cfg, g, f, nc)
    else:
        mix_root_noise(T, GM, cfg, g, f, nc)


# ---------------------------------------------------------------------------------------------
# Start of a search
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def begin_kernel(T, GM, settings: np.ndarray, games: np.ndarray, full_sims: int, cheap_sims: int,
                 full_prob: float, playout_cap: bool, add_noise: bool) -> None:  # fmt: skip
    """Start a search for each game in ``games`` (int32): budget (playout cap draw), noise flag,
    root preparation for already expanded roots. Inactive games are skipped."""
    cfg = settings[0]
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
            _init_root(T, GM, cfg, g)


# ---------------------------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy", inline="always")
def _count_root_visit(sv, path, slot: int, g: int, f0: int, gumbel: bool) -> None:
    """Count a simulation for the root child it went through (``sv``: Gumbel's Sequential
    Halving; PUCT does not use it)."""
    if gumbel:
        sv[g, path[slot, 1] - f0] += 1


@njit(cache=True, error_model="numpy", inline="always")
def _descend(n, w, p, mv, first, nch, status, flags, vl, root, noise, extra, mixp, sv, raw, seq,
             states, path, cfg, g: int, slot: int, qbuf: np.ndarray) -> tuple[int, int]:  # fmt: skip
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
    gumbel = cfg["gumbel"]
    max_plies = cfg["max_plies"]
    f0 = first[g, 0]
    use_vl = cfg["leaves_per_step"] > 1
    while True:
        if depth > 0:
            c = select_prefix(n, w, p, mv, status, vl, first, nch, cfg, g, x, use_vl)
        elif gumbel:
            c = select_gumbel_root(n, w, p, status, first, nch, raw, extra, sv, seq, cfg, g, qbuf)
        else:
            c = select_root(n, w, status, vl, first, nch, noise, mixp, cfg, g, qbuf, use_vl)
        if c < 0:
            propagate(nch, first, status, path, slot, g, depth)
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
                propagate(nch, first, status, path, slot, g, depth - 1)
        if s != UNKNOWN:
            _count_root_visit(sv, path, slot, g, f0, gumbel)
            backup(n, w, path, slot, g, depth, status_value(s))
            return 1, depth
        if nch[g, c] > 0:
            if depth < MAX_DEPTH - 1:
                x = c
                continue
            _count_root_visit(sv, path, slot, g, f0, gumbel)
            backup(n, w, path, slot, g, depth, w[g, c] / n[g, c])
            return 1, depth
        if use_vl and vl[g, c] > 0:
            return 2, depth
        if n[g, c] > 0:
            # evaluated but not expandable (tree full, or at MAX_DEPTH): back up its mean again
            _count_root_visit(sv, path, slot, g, f0, gumbel)
            backup(n, w, path, slot, g, depth, w[g, c] / n[g, c])
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
def select_kernel(T, GM, LV, settings: np.ndarray, games: np.ndarray, qbuf: np.ndarray) -> int:
    """Pick up to ``leaves_per_step`` leaves per searching game of ``games`` (int32, in order) and
    write them to ``LV``; terminal and proven leaves are backed up here at once (a game keeps
    descending until it finds a leaf to evaluate or its budget is spent). A game that produced
    nothing and has nothing pending is finished (``searching`` cleared). Returns the leaf count.
    ``qbuf``: float64 scratch of length >= A."""
    cfg = settings[0]
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
    k = cfg["leaves_per_step"]
    gumbel = cfg["gumbel"]
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
                seq, states, path, cfg, g, L, qbuf,
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


# ---------------------------------------------------------------------------------------------
# Expansion and backup
# ---------------------------------------------------------------------------------------------


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
def expand_backup_kernel(T, GM, LV, settings: np.ndarray, num: int, priors: np.ndarray,
                         stride: int, values: np.ndarray, moves: np.ndarray,
                         pbuf: np.ndarray) -> None:  # fmt: skip
    """Expand the ``num`` pending leaves with the priors of leaf ``j`` at ``priors[j * stride:]``
    (``priors`` flat float32; stride A for a (num, A) array, 0 for one row shared by all) and back
    up ``values`` (num,) (view of the side to move at each leaf; NaN counts as 0, clipped to
    [-1, 1]). A leaf proven by the road check backs up its exact value instead. Root leaves
    (depth 0) then get their root preparation and do not count as simulations. ``moves`` (int32)
    and ``pbuf`` (float64): scratch of length >= A."""
    cfg = settings[0]
    n, w, p, mv = unowned(T.n), unowned(T.w), unowned(T.p), unowned(T.mv)
    first, nch, status = unowned(T.first), unowned(T.nch), unowned(T.status)
    flags, vl = unowned(T.flags), unowned(T.vl)
    count, overflow = unowned(T.count), unowned(GM.overflow)
    done, inflight = unowned(GM.done), unowned(GM.inflight)
    states, path = unowned(LV.states), unowned(LV.path)
    lgame, ldepth = unowned(LV.game), unowned(LV.depth)
    prior_u, moves_u, pbuf_u = unowned(priors), unowned(moves), unowned(pbuf)
    use_vl = cfg["leaves_per_step"] > 1
    for j in range(num):
        g = np.int64(lgame[j])
        depth = np.int64(ldepth[j])
        x = np.int64(path[j, depth])
        if j + 2 < num:
            _prefetch_leaf_path(states, path, j + 2)
        if j + 1 < num:
            _prefetch_leaf(
                n, w, p, mv, first, nch, status, flags, count, path, lgame, ldepth, j + 1
            )
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
                n, w, p, mv, first, nch, status, flags, count, overflow, cfg, g, x,
                unowned_row(states, j), prior_u, j * stride, moves_u, pbuf_u,
            )  # fmt: skip
        vb = -v
        s = status[g, x]
        if s != UNKNOWN:
            vb = status_value(s)
            if depth > 0:
                propagate(nch, first, status, path, j, g, depth - 1)
        backup(n, w, path, j, g, depth, vb)
        if depth == 0:
            _init_root(T, GM, cfg, g)
        else:
            done[g] += 1
            inflight[g] -= 1
