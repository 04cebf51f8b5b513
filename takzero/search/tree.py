"""The search trees: node pools and their layout, proof statuses, backup and tree upkeep.

Compiled functions are numba ``@njit(cache=True)``; ``NUMBA_DISABLE_JIT=1`` runs them as plain
Python. ``takzero.search.mcts.BatchedMCTS`` owns the arrays (made by the ``new_*`` functions
below) and calls the kernels once per batch; nothing runs per node in Python.

Trees (``Trees``; structure of arrays, one row per game, ``B = node_budget`` columns; node 0 is
the root; the names are those of DeepMind's ``mctx`` where it has one)::

    visits          (G, B) int32    visit count N (completed backups)
    value_sum       (G, B) float32  sum of backed-up values, from the view of the player who made
                                    the move INTO the node (so Q(child) = value_sum / visits is the
                                    parent mover's view)
    prior           (G, B) float32  prior P of the move into the node (normalised over the
                                    parent's moves)
    move            (G, B) int32    core move code of the move into the node (unused at the root)
    first_child     (G, B) int32    index of the first child; children of a node are contiguous
    num_children    (G, B) int32    number of children (0 = not expanded)
    status          (G, B) int8     proof status for the player who moved into the node:
                                    UNKNOWN, WIN, DRAW, LOSS (exact game-theoretic value under the
                                    rules + ply limit)
    flags           (G, B) int8     FLAG_TERMINAL (game over or ply limit), FLAG_NOEXPAND (tree
                                    was full)
    virtual_visits  (G, B) int16    in-flight visits (pending leaves below; virtual loss)
    num_nodes       (G,)   int32    nodes in use

Per game (``Games``): root positions ``root_state (G, STATE_LEN) int64``, flags ``active`` (holds
a live position), ``searching`` (in the current search), simulation budgets ``target`` / ``done``
/ ``inflight`` (G,) int32, the search's ``noise`` (root noise on) and ``full`` (a full search of
the playout cap) (G,) bool, the per-game random stream ``rng`` (uint64, ``takzero.search.rng``),
and root arrays indexed by child slot: ``dirichlet_noise (G, A) float32`` (PUCT: the Dirichlet
draw eta of this search), ``mixed_prior (G, A) float32`` (PUCT: the root priors mixed with that
noise, set once per search), ``gumbel_logits (G, A) float32`` (Gumbel: the Gumbel draw plus the
log prior, ``g + log P``) and ``search_visits (G, A) int32`` (Gumbel: visits of this search, for
Sequential Halving); ``raw_value (G,) float32`` (the root's value estimate before this search,
for v_mix), ``considered_visits (G, S) int32`` (the Gumbel considered-visit schedule) and
``overflow (G,) int32`` (leaves left unexpanded because the tree was full).

Leaves of one step (``Leaves``): ``states (L, STATE_LEN) int64`` (handed to the evaluator),
``game (L,) int32``, ``depth (L,) int32``, ``path (L, MAX_DEPTH) int32`` (node indices, root first).

Settings: the kernels read the search settings from a (1,) structured array made by
``takzero.search.config.pack_settings`` (one field per ``SearchConfig`` field).

Proofs (MCTS-Solver, Winands et al. 2008): a child that wins for the mover makes the node a win for
the mover; a node whose children are all proven takes the best of them (``compute_status``).
Selection never enters a proven-lost child and backs up the exact value of a proven or terminal
node without a network call.

Invariants the kernels rely on:

* children are stored by decreasing prior, so the visited children of a non-root node form a prefix
  (``takzero.search.puct.select_prefix`` stops at the first unvisited one; the root is always
  scanned in full);
* every slot at or past ``num_nodes[g]`` has zero statistics (``clear_tree``, ``advance_kernel``), so
  an expansion writes only priors and moves;
* ``virtual_visits`` is zero everywhere between steps, and with one leaf per game per step (the
  default) it
  stays zero during a descent too, so it is then neither read nor written;
* a flagged node (FLAG_TERMINAL or FLAG_NOEXPAND) is proven or has visits.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from takzero.game.core import I_PLY, I_RESULT, STATE_LEN, make_move, result_winner

#: Longest selection path (plies below the root) kept per leaf; deeper leaves are not expanded.
MAX_DEPTH = 256

# Proof status, from the view of the player who made the move into the node.
UNKNOWN = 0
WIN = 1
DRAW = 2
LOSS = 3

FLAG_TERMINAL = 1
FLAG_NOEXPAND = 2

Trees = namedtuple(
    "Trees",
    [
        "visits", "value_sum", "prior", "move", "first_child", "num_children", "status", "flags",
        "virtual_visits", "num_nodes",
    ],
)  # fmt: skip
Games = namedtuple(
    "Games",
    [
        "root_state", "active", "searching", "target", "done", "inflight", "noise", "full", "rng",
        "dirichlet_noise", "mixed_prior", "gumbel_logits", "search_visits", "raw_value",
        "considered_visits", "overflow",
    ],
)  # fmt: skip
Leaves = namedtuple("Leaves", ["states", "game", "depth", "path"])
#: The children of a batch of leaves, made from the network's priors before they go into a tree
#: (``steps.prepare_kernel``), so that a two-worker search (``BatchedMCTS.run(pipelined=True)``)
#: does the move generation, the prior gathering and the sort of a leaf outside the lock that
#: the trees are written under: ``moves`` (L, A) int64 and ``priors`` (L, A) float64, leaf ``j``'s
#: children by decreasing prior in its first ``count[j]`` entries ((L,) int64; 0: no legal move);
#: ``wins`` (L,) uint64, the road-win squares of the leaf's mover (0 when the road check is off);
#: ``move_buf`` (A,) int64 and ``prior_buf`` (A,) float64, scratch of the kernel.
Children = namedtuple("Children", ["moves", "priors", "count", "wins", "move_buf", "prior_buf"])
#: One tree's worth of scratch columns for the compaction in ``advance_kernel`` (``source``: the
#: old index of each copied node).
Scratch = namedtuple(
    "Scratch",
    [
        "visits", "value_sum", "prior", "move", "first_child", "num_children", "status", "flags",
        "source",
    ],
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Allocation
# ---------------------------------------------------------------------------------------------


def new_trees(games: int, budget: int) -> Trees:
    """Zeroed node pools of ``games`` trees of ``budget`` nodes (dtypes: see the module
    docstring; memory is committed by the OS only when touched)."""
    shape = (games, budget)
    return Trees(
        visits=np.zeros(shape, dtype=np.int32),
        value_sum=np.zeros(shape, dtype=np.float32),
        prior=np.zeros(shape, dtype=np.float32),
        move=np.zeros(shape, dtype=np.int32),
        first_child=np.zeros(shape, dtype=np.int32),
        num_children=np.zeros(shape, dtype=np.int32),
        status=np.zeros(shape, dtype=np.int8),
        flags=np.zeros(shape, dtype=np.int8),
        virtual_visits=np.zeros(shape, dtype=np.int16),
        num_nodes=np.zeros(games, dtype=np.int32),
    )


def new_games(rng: np.ndarray, actions: int, schedule: int) -> Games:
    """Per-game arrays for ``len(rng)`` games: random streams ``rng`` ((G,) uint64, kept), root
    arrays of ``actions`` child slots, a Gumbel schedule of ``schedule`` simulations."""
    g = rng.shape[0]
    return Games(
        root_state=np.zeros((g, STATE_LEN), dtype=np.int64),
        active=np.zeros(g, dtype=np.bool_),
        searching=np.zeros(g, dtype=np.bool_),
        target=np.zeros(g, dtype=np.int32),
        done=np.zeros(g, dtype=np.int32),
        inflight=np.zeros(g, dtype=np.int32),
        noise=np.zeros(g, dtype=np.bool_),
        full=np.ones(g, dtype=np.bool_),
        rng=rng,
        dirichlet_noise=np.zeros((g, actions), dtype=np.float32),
        mixed_prior=np.zeros((g, actions), dtype=np.float32),
        gumbel_logits=np.zeros((g, actions), dtype=np.float32),
        search_visits=np.zeros((g, actions), dtype=np.int32),
        raw_value=np.zeros(g, dtype=np.float32),
        considered_visits=np.zeros((g, max(1, schedule)), dtype=np.int32),
        overflow=np.zeros(g, dtype=np.int32),
    )


def new_leaves(rows: int) -> Leaves:
    """Leaf buffers of ``rows`` leaves (games x leaves per step)."""
    return Leaves(
        states=np.zeros((rows, STATE_LEN), dtype=np.int64),
        game=np.zeros(rows, dtype=np.int32),
        depth=np.zeros(rows, dtype=np.int32),
        path=np.zeros((rows, MAX_DEPTH), dtype=np.int32),
    )


def new_children(rows: int, actions: int) -> Children:
    """Child lists of ``rows`` leaves of positions with ``actions`` actions (``Children``)."""
    return Children(
        moves=np.zeros((rows, actions), dtype=np.int64),
        priors=np.zeros((rows, actions), dtype=np.float64),
        count=np.zeros(rows, dtype=np.int64),
        wins=np.zeros(rows, dtype=np.uint64),
        move_buf=np.zeros(actions, dtype=np.int64),
        prior_buf=np.zeros(actions, dtype=np.float64),
    )


def new_scratch(budget: int) -> Scratch:
    """Scratch columns of one tree of ``budget`` nodes for ``advance_kernel``."""
    return Scratch(
        visits=np.zeros(budget, dtype=np.int32),
        value_sum=np.zeros(budget, dtype=np.float32),
        prior=np.zeros(budget, dtype=np.float32),
        move=np.zeros(budget, dtype=np.int32),
        first_child=np.zeros(budget, dtype=np.int32),
        num_children=np.zeros(budget, dtype=np.int32),
        status=np.zeros(budget, dtype=np.int8),
        flags=np.zeros(budget, dtype=np.int8),
        source=np.zeros(budget, dtype=np.int32),
    )


# ---------------------------------------------------------------------------------------------
# Statuses, backup and proofs
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy", inline="always")
def status_value(s: int) -> float:
    """Exact value of a proof status for the player who moved into the node (WIN 1, LOSS -1,
    DRAW and UNKNOWN 0)."""
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
        winner = result_winner(res)
        mover = (state[I_PLY] - 1) & 1
        if winner == -1:
            return DRAW
        if winner == mover:
            return WIN
        return LOSS
    if max_plies > 0 and state[I_PLY] >= max_plies:
        return DRAW
    return UNKNOWN


@njit(cache=True, error_model="numpy", inline="always")
def compute_status(num_children: np.ndarray, first_child: np.ndarray, status: np.ndarray, g: int | np.integer,
                   x: int | np.integer) -> int:  # fmt: skip
    """Proof status of node ``x`` of game ``g`` from its children (its own if not expanded): LOSS
    if a child is a WIN (for the player moving from ``x``), else UNKNOWN while a child is, else
    DRAW if a child is, else WIN (every child lost)."""
    nc = num_children[g, x]
    if nc == 0:
        return status[g, x]
    f = first_child[g, x]
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
def propagate(num_children, first_child, status, path, slot: int | np.integer, g: int | np.integer, d: int | np.integer) -> None:
    """Recompute proof statuses from ``path[slot, d]`` up to the root, stopping at the first node
    whose status does not change."""
    for i in range(d, -1, -1):
        x = np.int64(path[slot, i])
        s = compute_status(num_children, first_child, status, g, x)
        if s == status[g, x]:
            return
        status[g, x] = s


@njit(cache=True, error_model="numpy", inline="always")
def backup(visits, value_sum, path, slot: int | np.integer, g: int | np.integer, depth: int | np.integer, v: float) -> None:
    """Add one visit and value ``v`` (view of the player who moved into ``path[slot, depth]``) to
    ``visits`` and ``value_sum`` of every node of the path, negating at each ply."""
    for i in range(depth, -1, -1):
        x = path[slot, i]
        visits[g, x] += 1
        value_sum[g, x] += v
        v = -v


# ---------------------------------------------------------------------------------------------
# Tree upkeep
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def _zero_slots(trees, g: int, lo: int, hi: int) -> None:
    """Zero the statistics of node slots [lo, hi) of game ``g`` (see the free-slot invariant)."""
    hi = min(hi, trees.visits.shape[1])
    for i in range(lo, hi):
        trees.visits[g, i] = 0
    for i in range(lo, hi):
        trees.value_sum[g, i] = 0.0
    for i in range(lo, hi):
        trees.num_children[g, i] = 0
    for i in range(lo, hi):
        trees.status[g, i] = UNKNOWN
    for i in range(lo, hi):
        trees.flags[g, i] = 0
    for i in range(lo, hi):
        trees.virtual_visits[g, i] = 0


@njit(cache=True, error_model="numpy")
def clear_tree(trees, g: int, keep_root: bool = True) -> None:
    """Make game ``g``'s tree a single unexpanded root (or empty: ``keep_root=False``). Zeroes the
    used slots, keeping the free-slot invariant: every slot at or past ``num_nodes`` has zero
    statistics (visits, value_sum, num_children, status, flags, virtual_visits), so an expansion
    only writes priors and moves."""
    _zero_slots(trees, g, 0, max(trees.num_nodes[g], 1))
    trees.prior[g, 0] = 1.0
    trees.move[g, 0] = 0
    trees.first_child[g, 0] = 0
    trees.num_nodes[g] = 1 if keep_root else 0


@njit(cache=True, error_model="numpy")
def advance_kernel(trees, games, scratch, g: int, move: int, reuse: bool, max_plies: int) -> int:
    """Play ``move`` (legal, checked by the caller) at game ``g``'s root. With ``reuse`` and an
    expanded child for the move, that child's subtree becomes the tree (compacted to the front of
    the pool, breadth first, through the columns ``scratch``); otherwise the tree is cleared. A finished
    game (or the ply limit) deactivates the game. Returns the number of nodes kept."""
    f = trees.first_child[g, 0]
    nc = trees.num_children[g, 0]
    c = -1
    for i in range(nc):
        if trees.move[g, f + i] == move:
            c = f + i
            break
    state = games.root_state[g]
    make_move(state, move)
    games.searching[g] = False
    if terminal_status(state, max_plies) != UNKNOWN:
        games.active[g] = False
        clear_tree(trees, g, bool(False))  # noqa: UP018 (a plain bool, see threats.road_moves)
        return 0
    if c < 0 or not reuse or trees.num_children[g, c] == 0:
        clear_tree(trees, g, bool(True))  # noqa: UP018 (a plain bool, see threats.road_moves)
        return 1
    # breadth-first copy of the subtree of c into the scratch columns
    scratch.source[0] = c
    scratch.first_child[0] = 0
    head = 0
    tail = 1
    while head < tail:
        o = scratch.source[head]
        scratch.visits[head] = trees.visits[g, o]
        scratch.value_sum[head] = trees.value_sum[g, o]
        scratch.prior[head] = trees.prior[g, o]
        scratch.move[head] = trees.move[g, o]
        scratch.status[head] = trees.status[g, o]
        scratch.flags[head] = trees.flags[g, o]
        k = trees.num_children[g, o]
        scratch.num_children[head] = k
        if k > 0:
            fo = trees.first_child[g, o]
            scratch.first_child[head] = tail
            for j in range(k):
                scratch.source[tail + j] = fo + j
            tail += k
        else:
            scratch.first_child[head] = 0
        head += 1
    old_count = trees.num_nodes[g]
    for i in range(tail):
        trees.visits[g, i] = scratch.visits[i]
        trees.value_sum[g, i] = scratch.value_sum[i]
        trees.prior[g, i] = scratch.prior[i]
        trees.move[g, i] = scratch.move[i]
        trees.first_child[g, i] = scratch.first_child[i]
        trees.num_children[g, i] = scratch.num_children[i]
        trees.status[g, i] = scratch.status[i]
        trees.flags[g, i] = scratch.flags[i]
        trees.virtual_visits[g, i] = 0
    _zero_slots(trees, g, tail, old_count)
    trees.num_nodes[g] = tail
    return tail
