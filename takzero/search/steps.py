"""The search step kernels (numba ``@njit``, ``cache=True``): ``begin_kernel`` starts a search,
``select_kernel`` descends the trees to one batch of leaves, ``expand_backup_kernel`` expands the
leaves with the evaluator's priors and backs their values up.

``takzero.search.mcts.BatchedMCTS`` owns the arrays (layout: ``takzero.search.tree``) and calls
each kernel once per batch. Each kernel takes the pools whole (``trees``, ``games``, ``leaves``)
and passes them on as one object each, with their memory owners cleared once per call
(``numba_ext.unowned_tuple``). The selection, first-play, exploration and backup rules are those
the settings choose in ``takzero.search.rules``; the settings come packed
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

Writes in inlined functions: numba's dead-code elimination, run after inlining, drops a write
``a[i] = v`` when ``a`` is not read after it and numba cannot see that ``a`` is a view of an
argument. ``numba_ext`` registers the unowned views as such, which covers ``first_child =
trees.first_child`` in a rule inlined into a kernel; numba's alias analysis still loses the
connection through a tuple of four names or more (``a, b, c, d = trees.a, ...``) and through a
field read in a later branch (``games.overflow[g] += 1`` under an ``if``). So an inlined function
binds every array it writes at its top, one name to a line (or in twos and threes), and writes
through that name. ``tests/test_search_writes.py`` compiles the kernels afresh and fails on any
write of ``takzero/search`` that numba removes.
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
from takzero.search.numba_ext import prefetch, prefetch_write, unowned, unowned_row, unowned_tuple
from takzero.search.rng import rand_uniform
from takzero.search.rules import backup, prepare_root, select_interior, select_root
from takzero.search.tree import (
    FLAG_NOEXPAND,
    FLAG_TERMINAL,
    LOSS,
    MAX_DEPTH,
    UNKNOWN,
    WIN,
    compute_status,
    propagate,
    status_value,
    terminal_status,
)


@njit(cache=True, error_model="numpy", inline="always")
def _copy_state(src: np.ndarray, i: int | np.integer, dst: np.ndarray, j: int | np.integer) -> None:
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
def _child_list(state: np.ndarray, net_priors: np.ndarray, offset: int, move_buf: np.ndarray,
                prior_buf: np.ndarray, moves_out: np.ndarray, priors_out: np.ndarray) -> int:
    """The children of position ``state``: its legal moves into ``moves_out`` (int64) with priors
    gathered from the network's ``net_priors[offset + action]`` (flat float32) and renormalised
    over the legal moves into ``priors_out`` (float64; non-finite or negative entries count as 0;
    an all-zero row becomes uniform), by decreasing prior (stable). Returns their count (0: no
    legal move). ``move_buf`` (int64) and ``prior_buf`` (float64): scratch of length >= A."""
    nm = generate_moves(state, move_buf)
    if nm == 0:
        return 0
    size = state[I_SIZE]
    total = 0.0
    ordered = True
    prev = np.inf
    for i in range(nm):
        m = move_buf[i]
        child_prior: float = np.float64(net_priors[np.uint64(offset + move_to_action(m, size))])
        if not (child_prior > 0.0 and child_prior < np.inf):
            child_prior = 0.0
        prior_buf[i] = child_prior
        total += child_prior
        if child_prior > prev:
            ordered = False
        prev = child_prior
    if not (total > 0.0 and total < np.inf):
        u = 1.0 / nm
        for i in range(nm):
            priors_out[i] = u
            moves_out[i] = move_buf[i]
    elif ordered:
        inv = 1.0 / total
        for i in range(nm):
            priors_out[i] = prior_buf[i] * inv
            moves_out[i] = move_buf[i]
    else:
        inv = 1.0 / total
        for i in range(nm):
            prior_buf[i] = prior_buf[i] * inv
        order = np.argsort(-prior_buf[:nm], kind="mergesort")
        for j in range(nm):
            src = order[j]
            priors_out[j] = prior_buf[src]
            moves_out[j] = move_buf[src]
    return nm


@njit(cache=True, error_model="numpy", inline="always")
def _road_wins(cfg, state: np.ndarray) -> np.uint64:
    """The road-win squares of ``state``'s mover (``road_win_squares``) when the road check is on
    and a road can exist (ply >= 2), else 0."""
    if cfg["road_check"] and state[I_PLY] >= 2:
        return road_win_squares(state)
    return np.uint64(0)


@njit(cache=True, error_model="numpy", inline="always")
def _store_children(trees, games, g: int | np.integer, x: int | np.integer, nm: int | np.integer,
                    moves_in: np.ndarray, priors_in: np.ndarray, win: np.uint64) -> None:
    """Create the ``nm`` children of node ``x`` of game ``g`` from a child list (``_child_list``:
    ``moves_in``, ``priors_in``); ``nm`` 0 (no legal move) or a tree with no room flags
    FLAG_NOEXPAND instead (counted in ``games.overflow``). Children are stored by decreasing
    prior, which keeps the visited children of a non-root node a prefix (``select_prefix``). With
    road-win squares ``win`` (``_road_wins``), the winning placements are marked and ``x`` is
    proven at once. ``trees``, ``games``: the pools (``takzero.search.tree``)."""
    # every array this inlined function writes is bound here, at its top, one name to a line (see
    # "Writes in inlined functions" in the module docstring)
    prior = trees.prior
    move = trees.move
    status = trees.status
    flags = trees.flags
    num_nodes = trees.num_nodes
    first_child = trees.first_child
    num_children = trees.num_children
    overflow = games.overflow
    if nm == 0:
        flags[g, x] |= FLAG_NOEXPAND
        return
    f = num_nodes[g]
    if f + nm > prior.shape[1]:
        flags[g, x] |= FLAG_NOEXPAND
        overflow[g] += 1
        return
    num_nodes[g] = f + nm
    ug = np.uint64(g)
    for i in range(nm):
        prior[ug, np.uint64(f + i)] = priors_in[i]
        move[ug, np.uint64(f + i)] = moves_in[i]
    # new slots already have zero statistics (the free-slot invariant, see ``clear_tree``), and
    # first_child is only read when num_children > 0
    first_child[g, x] = f
    num_children[g, x] = nm
    if win != 0:
        for c in range(f, f + nm):
            m = move[g, c]
            kind = (m >> 6) & 3
            if (kind == FLAT or kind == CAP) and (win >> np.uint64(m & 63)) & np.uint64(1):
                status[g, c] = WIN
                flags[g, c] = FLAG_TERMINAL
        status[g, x] = LOSS


@njit(cache=True, error_model="numpy")
def _init_root(trees, games, cfg, g: int | np.integer) -> None:
    """Prepare an expanded root for a new search: per-search visits, root terminal check, the
    root's value estimate (v_raw), then the root rule's preparation (``rules.prepare_root``: the
    Gumbel draw and schedule, or the Dirichlet draw and mixed priors)."""
    nc = trees.num_children[g, 0]
    if nc == 0:
        return
    f = trees.first_child[g, 0]
    root_visits = trees.visits[g, 0]
    games.raw_value[g] = -trees.value_sum[g, 0] / root_visits if root_visits > 0 else 0.0
    for i in range(nc):
        games.search_visits[g, i] = 0
    if cfg["root_terminal_check"]:
        state = games.root_state[g]
        max_plies = cfg["max_plies"]
        changed = False
        for i in range(nc):
            c = f + i
            if trees.status[g, c] != UNKNOWN or trees.flags[g, c] != 0 or trees.visits[g, c] != 0:
                continue
            if trees.num_children[g, c] != 0:
                continue
            m = np.int64(trees.move[g, c])  # int64, as every caller: one compiled make_move
            undo = make_move(state, m)
            end_status = terminal_status(state, max_plies)
            unmake_move(state, m, undo)
            if end_status != UNKNOWN:
                trees.status[g, c] = end_status
                trees.flags[g, c] = FLAG_TERMINAL
                changed = True
        if changed:
            trees.status[g, 0] = compute_status(trees, g, 0)
    prepare_root(trees, games, cfg, g, f, nc)


# ---------------------------------------------------------------------------------------------
# Start of a search
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def begin_kernel(trees, games, settings: np.ndarray, game_ids: np.ndarray, full_sims: int,
                 cheap_sims: int, full_prob: float, playout_cap: bool,
                 add_noise: bool) -> None:
    """Start a search for each game in ``game_ids`` (int32): budget (playout cap draw), noise
    flag, root preparation for already expanded roots. Inactive games are skipped. ``trees``,
    ``games``: the pools (``takzero.search.tree``)."""
    cfg = settings[0]
    for gi in range(game_ids.shape[0]):
        g = np.int64(game_ids[gi])
        if not games.active[g]:
            games.searching[g] = False
            continue
        full = True
        if playout_cap:
            full = rand_uniform(games.rng, g) < full_prob
        games.full[g] = full
        games.target[g] = full_sims if full else cheap_sims
        games.done[g] = 0
        games.inflight[g] = 0
        games.noise[g] = add_noise and full
        games.searching[g] = True
        if trees.num_children[g, 0] > 0:
            _init_root(trees, games, cfg, g)


# ---------------------------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy", inline="always")
def _count_root_visit(games, path, slot: int | np.integer, g: int | np.integer, root_first: int,
                      gumbel: bool) -> None:
    """Count a simulation for the root child it went through (``games.search_visits``: Gumbel's
    Sequential Halving; the other root rules do not use it)."""
    search_visits = games.search_visits
    if gumbel:
        search_visits[g, path[slot, 1] - root_first] += 1


@njit(cache=True, error_model="numpy", inline="always")
def _descend(trees, games, leaves, cfg, g: int | np.integer, slot: int | np.integer,
             score_buf: np.ndarray) -> tuple[int, int]:
    """One selection from the root of game ``g`` into leaf slot ``slot`` of ``leaves``. Returns
    (code, depth): code 0 if a leaf was recorded for evaluation (virtual visits added along its
    path), 1 if a value was backed up at once (terminal, proven, full tree), 2 if nothing could be
    done (a pending leaf was hit, or no child can be selected). With one leaf per game per step no
    virtual visit is pending during a descent, so ``virtual_visits`` is neither read nor written.
    The root and interior rules are those of ``cfg`` (``takzero.search.rules``)."""
    visits, value_sum, first_child, num_children = (
        trees.visits, trees.value_sum, trees.first_child, trees.num_children
    )
    status, flags, virtual_visits = trees.status, trees.flags, trees.virtual_visits
    states, path = leaves.states, leaves.path
    _copy_state(games.root_state, g, states, slot)
    state = unowned_row(states, slot)
    path[slot, 0] = 0
    x = 0
    depth = 0
    gumbel = cfg["root_rule"] == 2  # Sequential Halving counts the root children's visits
    max_plies = cfg["max_plies"]
    root_first = first_child[g, 0]
    use_virtual = cfg["leaves_per_step"] > 1
    while True:
        if depth > 0:
            c = select_interior(trees, games, cfg, g, x, score_buf, use_virtual)
        else:
            c = select_root(trees, games, cfg, g, x, score_buf, use_virtual)
        if c < 0:
            propagate(trees, path, slot, g, depth)
            return 2, depth
        if num_children[g, c] > 0:
            # the next selection scans c's children: start loading them while the move is played
            next_first = first_child[g, c]
            prefetch(status, g, next_first)
            prefetch(visits, g, next_first)
            prefetch(trees.prior, g, next_first)
            prefetch(value_sum, g, next_first)
            # an expanded node's position goes on (a finished one has no moves), so its result
            # stays RESULT_NONE, as the root's: skip the road and flat-count tests
            apply_move(state, np.int64(trees.move[g, c]))
        else:
            make_move(state, np.int64(trees.move[g, c]))
        depth += 1
        path[slot, depth] = c
        s = status[g, c]
        # a flagged node (terminal, or not expandable) is proven or has visits, so flags[g, c] need
        # not be read here
        if (
            s == UNKNOWN and num_children[g, c] == 0 and visits[g, c] == 0
            and (not use_virtual or virtual_visits[g, c] == 0)
        ):
            end_status = terminal_status(state, max_plies)
            if end_status != UNKNOWN:
                status[g, c] = end_status
                flags[g, c] = FLAG_TERMINAL
                s = end_status
                propagate(trees, path, slot, g, depth - 1)
        if s != UNKNOWN:
            _count_root_visit(games, path, slot, g, root_first, gumbel)
            backup(trees, cfg, path, slot, g, depth, status_value(s))
            return 1, depth
        if num_children[g, c] > 0:
            if depth < MAX_DEPTH - 1:
                x = c
                continue
            _count_root_visit(games, path, slot, g, root_first, gumbel)
            backup(trees, cfg, path, slot, g, depth, value_sum[g, c] / visits[g, c])
            return 1, depth
        if use_virtual and virtual_visits[g, c] > 0:
            return 2, depth
        if visits[g, c] > 0:
            # evaluated but not expandable (tree full, or at MAX_DEPTH): back up its mean again
            _count_root_visit(games, path, slot, g, root_first, gumbel)
            backup(trees, cfg, path, slot, g, depth, value_sum[g, c] / visits[g, c])
            return 1, depth
        if use_virtual:
            for i in range(depth + 1):
                virtual_visits[g, path[slot, i]] += 1
        _count_root_visit(games, path, slot, g, root_first, gumbel)
        return 0, depth


@njit(cache=True, error_model="numpy", inline="always")
def _prefetch_position(states, i: int | np.integer) -> None:
    """Prefetch the first line of the header and of each square field of position ``states[i]``
    (the hardware prefetcher follows the rest)."""
    for off in (0, OFF_HEIGHT, OFF_TOP, OFF_LO, OFF_HI):
        prefetch(states, i, off)


@njit(cache=True, error_model="numpy", inline="always")
def _prefetch_root_node(trees, g: int | np.integer) -> None:
    """Prefetch the fields of game ``g``'s root node that a descent reads first."""
    prefetch(trees.first_child, g, 0)
    prefetch(trees.num_children, g, 0)
    prefetch(trees.visits, g, 0)
    prefetch(trees.value_sum, g, 0)
    prefetch(trees.status, g, 0)


@njit(cache=True, error_model="numpy", inline="always")
def _prefetch_root_children(trees, games, g: int | np.integer, gumbel: bool) -> None:
    """Prefetch what the root scan of game ``g`` reads (its root node must be cached: see
    ``_prefetch_root_node``): the children's statistics, the mixed priors and the root position's
    header and square fields."""
    f = trees.first_child[g, 0]
    nc = trees.num_children[g, 0]
    for i in range(0, nc, 16):  # 4-byte fields: 16 per cache line
        prefetch(trees.visits, g, f + i)
        prefetch(trees.value_sum, g, f + i)
    for i in range(0, nc, 64):
        prefetch(trees.status, g, f + i)
    if not gumbel:
        for i in range(0, nc, 16):
            prefetch(games.mixed_prior, g, i)
    _prefetch_position(games.root_state, g)


@njit(cache=True, error_model="numpy", nogil=True)
def select_kernel(trees, games, leaves, settings: np.ndarray, game_ids: np.ndarray,
                  score_buf: np.ndarray) -> int:
    """Pick up to ``leaves_per_step`` leaves per searching game of ``game_ids`` (int32, in
    order) and write them to ``leaves`` (``takzero.search.tree.Leaves``); terminal and proven leaves
    are backed up here at once (a game keeps
    descending until it finds a leaf to evaluate or its budget is spent). A game that produced
    nothing and has nothing pending is finished (``searching`` cleared). Returns the leaf count.
    ``score_buf``: float64 scratch of length >= A."""
    cfg = settings[0]
    trees, games, leaves = unowned_tuple(trees), unowned_tuple(games), unowned_tuple(leaves)
    num_children, status, flags = trees.num_children, trees.status, trees.flags
    virtual_visits = trees.virtual_visits
    searching, done, inflight, target = games.searching, games.done, games.inflight, games.target
    states, path, leaf_game, leaf_depth = leaves.states, leaves.path, leaves.game, leaves.depth
    per_game = cfg["leaves_per_step"]
    gumbel = cfg["root_rule"] == 2  # the Gumbel root reads no mixed priors
    num_leaves = 0
    ng = game_ids.shape[0]
    for gi in range(ng):
        g = np.int64(game_ids[gi])
        # the games are independent: load the next games' root data while this one is searched
        # (the root node of the game after next, the root's children and position of the next)
        if gi + 2 < ng:
            _prefetch_root_node(trees, np.int64(game_ids[gi + 2]))
        if gi + 1 < ng:
            g1 = np.int64(game_ids[gi + 1])
            if searching[g1]:
                _prefetch_root_children(trees, games, g1, gumbel)
        if not searching[g]:
            continue
        got = 0
        misses = 0
        while got < per_game:
            if status[g, 0] != UNKNOWN:
                break
            if num_children[g, 0] == 0:
                if virtual_visits[g, 0] > 0 or flags[g, 0] != 0:
                    break
                _copy_state(games.root_state, g, states, num_leaves)
                path[num_leaves, 0] = 0
                leaf_depth[num_leaves] = 0
                leaf_game[num_leaves] = g
                virtual_visits[g, 0] += 1
                num_leaves += 1
                got += 1
                break
            if done[g] + inflight[g] >= target[g]:
                break
            code, depth = _descend(trees, games, leaves, cfg, g, num_leaves, score_buf)
            if code == 0:
                leaf_game[num_leaves] = g
                leaf_depth[num_leaves] = depth
                num_leaves += 1
                got += 1
                inflight[g] += 1
            elif code == 1:
                done[g] += 1
            else:
                misses += 1
                if got > 0 or misses > 2:
                    break
        if got == 0 and inflight[g] == 0 and virtual_visits[g, 0] == 0:
            # (a root leaf in flight, in the other batch of a pipelined run, keeps it searching)
            searching[g] = False
    return num_leaves


# ---------------------------------------------------------------------------------------------
# Expansion and backup
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy", inline="always")
def _prefetch_leaf(trees, leaves, j: int) -> None:
    """Prefetch what expanding and backing up leaf ``j`` touches in the tree (its path must be
    cached: see ``_prefetch_leaf_path``): the leaf node, the pool slots its children will take
    (priors and moves, about 80 of them) and the statistics along its path."""
    path = leaves.path
    g = np.int64(leaves.game[j])
    depth = np.int64(leaves.depth[j])
    x = np.int64(path[j, depth])
    prefetch_write(trees.first_child, g, x)
    prefetch_write(trees.num_children, g, x)
    prefetch(trees.status, g, x)
    prefetch(trees.flags, g, x)
    f = np.int64(trees.num_nodes[g])
    for i in range(0, 80, 16):
        prefetch_write(trees.prior, g, f + i)
        prefetch_write(trees.move, g, f + i)
    for i in range(depth):
        x = np.int64(path[j, i])
        prefetch(trees.visits, g, x)
        prefetch(trees.value_sum, g, x)


@njit(cache=True, error_model="numpy", inline="always")
def _prefetch_leaf_path(leaves, j: int) -> None:
    """Prefetch leaf ``j``'s path (node indices) and position."""
    prefetch(leaves.path, j, 0)
    _prefetch_position(leaves.states, j)


@njit(cache=True, error_model="numpy", nogil=True)
def expand_backup_kernel(trees, games, leaves, settings: np.ndarray, num_leaves: int,
                         net_priors: np.ndarray, stride: int, values: np.ndarray,
                         children, prepared: bool) -> None:
    """Expand the ``num_leaves`` pending leaves with the network priors of leaf ``j`` at
    ``net_priors[j * stride:]`` (flat float32; stride A for a (num_leaves, A) array, 0 for one
    row shared by all) and back up ``values`` (num_leaves,) (view of the side to move at each
    leaf; NaN counts as 0, clipped to [-1, 1]). A leaf proven by the road check backs up its exact
    value instead. Root leaves
    (depth 0) then get their root preparation and do not count as simulations.

    ``children`` (``takzero.search.tree.Children``): with ``prepared``, the child lists of the
    leaves made by ``prepare_kernel`` from the same priors (row ``j``: leaf ``j``), and
    ``net_priors`` is not read; else each leaf's list is made here, in row 0 (one row is enough).
    Either way the trees are the same."""
    cfg = settings[0]
    trees, games, leaves = unowned_tuple(trees), unowned_tuple(games), unowned_tuple(leaves)
    children = unowned_tuple(children)
    num_children, status, flags = trees.num_children, trees.status, trees.flags
    virtual_visits = trees.virtual_visits
    done, inflight = games.done, games.inflight
    states, path = leaves.states, leaves.path
    leaf_game, leaf_depth = leaves.game, leaves.depth
    net_priors_view = unowned(net_priors)
    use_virtual = cfg["leaves_per_step"] > 1
    for j in range(num_leaves):
        g = np.int64(leaf_game[j])
        depth = np.int64(leaf_depth[j])
        x = np.int64(path[j, depth])
        if j + 2 < num_leaves:
            _prefetch_leaf_path(leaves, j + 2)
        if j + 1 < num_leaves:
            _prefetch_leaf(trees, leaves, j + 1)
        if use_virtual or depth == 0:  # one leaf per game: only a root leaf holds a virtual visit
            for i in range(depth + 1):
                virtual_visits[g, path[j, i]] -= 1
        value: float = np.float64(values[j])
        if not (value == value):
            value = 0.0
        value = min(1.0, max(-1.0, value))
        if depth >= MAX_DEPTH - 1:
            flags[g, x] |= FLAG_NOEXPAND
        elif num_children[g, x] == 0:
            if prepared:
                row = j
                nm = children.count[j]
                win = children.wins[j]
            else:
                row = 0
                state = unowned_row(states, j)
                nm = _child_list(
                    state, net_priors_view, j * stride, children.move_buf, children.prior_buf,
                    unowned_row(children.moves, 0), unowned_row(children.priors, 0),
                )
                win = _road_wins(cfg, state) if nm > 0 else np.uint64(0)
            _store_children(
                trees, games, g, x, nm, unowned_row(children.moves, row),
                unowned_row(children.priors, row), win,
            )
        backed = -value  # the leaf's value for the player who moved into it
        s = status[g, x]
        if s != UNKNOWN:
            backed = status_value(s)
            if depth > 0:
                propagate(trees, path, j, g, depth - 1)
        backup(trees, cfg, path, j, g, depth, backed)
        if depth == 0:
            _init_root(trees, games, cfg, g)
        else:
            done[g] += 1
            inflight[g] -= 1


@njit(cache=True, error_model="numpy", nogil=True)
def prepare_kernel(leaves, settings: np.ndarray, num_leaves: int, net_priors: np.ndarray,
                   stride: int, children) -> None:
    """The child lists of the first ``num_leaves`` leaves of ``leaves`` into ``children``
    (``takzero.search.tree.Children``, row ``j`` for leaf ``j``) from the network priors of leaf
    ``j`` at ``net_priors[j * stride:]`` (as ``expand_backup_kernel``), for an
    ``expand_backup_kernel(..., prepared=True)`` of the same leaves. Reads no tree: a two-worker
    search runs it outside the lock the trees are written under."""
    cfg = settings[0]
    leaves, children = unowned_tuple(leaves), unowned_tuple(children)
    states = leaves.states
    net_priors_view = unowned(net_priors)
    child_count, child_wins = children.count, children.wins
    for j in range(num_leaves):
        state = unowned_row(states, j)
        nm = _child_list(
            state, net_priors_view, j * stride, children.move_buf, children.prior_buf,
            unowned_row(children.moves, j), unowned_row(children.priors, j),
        )
        child_count[j] = nm
        child_wins[j] = _road_wins(cfg, state) if nm > 0 else np.uint64(0)
