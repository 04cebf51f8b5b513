"""The search trees: node pools and their layout, proof statuses, the backup rule and tree upkeep.

Compiled functions are numba ``@njit(cache=True)``; ``NUMBA_DISABLE_JIT=1`` runs them as plain
Python. ``takzero.search.mcts.BatchedMCTS`` owns the arrays (made by the ``new_*`` functions
below) and calls the kernels once per batch; nothing runs per node in Python.

Trees (``Trees``; structure of arrays, one row per game, ``B = node_budget`` columns; node 0 is
the root; the names are those of DeepMind's ``mctx`` where it has one): one row of ``NODE_FIELDS``
per (G, B) node array, and ``num_nodes (G,) int32`` (nodes in use). The table (name, dtype, group,
meaning) is the one place a node array is declared: ``Trees``, ``new_trees``, ``BYTES_PER_NODE``,
clearing (``clear_tree``) and tree reuse (``advance_kernel``) follow from its rows. The groups::

    structure   first_child, num_children: the tree's shape (expansion and reuse set them)
    edge        prior, move: written when the parent is expanded; kept on reuse
    stat        visits, value_sum, status, flags: zero in every free slot (the expansion writes
                none of them); kept on reuse. A new node statistic is a row here, its update
                in the backup rule (``backup_mean``, or wherever it is gathered) and its reader
                (a rule of ``takzero.search.rules``)
    transient   virtual_visits: zero in free slots and between steps; zeroed on reuse

Every node array is at most 32 bits a value (reuse copies each array through a float64 column).

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
``takzero.search.config.pack_settings`` (one field per ``SearchConfig`` field, and the code of
each chosen rule of ``takzero.search.rules``).

Proofs (MCTS-Solver, Winands et al. 2008): a child that wins for the mover makes the node a win for
the mover; a node whose children are all proven takes the best of them (``compute_status``).
Selection never enters a proven-lost child and backs up the exact value of a proven or terminal
node without a network call.

Invariants the kernels rely on:

* children are stored by decreasing prior, so the visited children of a non-root node form a prefix
  (``takzero.search.rules.select_prefix`` stops at the first unvisited one; the root is always
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
from typing import TYPE_CHECKING

import numpy as np
from numba import literal_unroll, njit

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

#: The node arrays of ``Trees``: (name, dtype, group, meaning), each (G, B). Groups (see the
#: module docstring): "structure", "edge", "stat", "transient".
NodeField = namedtuple("NodeField", ["name", "dtype", "group", "meaning"])
NODE_FIELDS = (
    NodeField("first_child", np.int32, "structure", "index of the first child; children of a node are contiguous"),
    NodeField("num_children", np.int32, "structure", "number of children (0 = not expanded)"),
    NodeField("prior", np.float32, "edge", "prior P of the move into the node (normalised over the parent's moves)"),
    NodeField("move", np.int32, "edge", "core move code of the move into the node (unused at the root)"),
    NodeField("visits", np.int32, "stat", "visit count N (completed backups)"),
    NodeField("value_sum", np.float32, "stat",
              "sum of backed-up values, from the view of the player who made the move INTO the node "
              "(Q(child) = value_sum / visits is the parent mover's view)"),
    NodeField("status", np.int8, "stat",
              "proof status for the player who moved into the node: UNKNOWN, WIN, DRAW, LOSS "
              "(exact game-theoretic value under the rules + ply limit)"),
    NodeField("flags", np.int8, "stat", "FLAG_TERMINAL (game over or ply limit), FLAG_NOEXPAND (tree was full)"),
    NodeField("virtual_visits", np.int16, "transient", "in-flight visits (pending leaves below; virtual loss)"),
)

_GROUPS = ("structure", "edge", "stat", "transient")
if any(f.group not in _GROUPS for f in NODE_FIELDS):
    raise ValueError(f"NODE_FIELDS: a group is not one of {_GROUPS}")
_ORDERED = sorted(NODE_FIELDS, key=lambda f: _GROUPS.index(f.group))
#: ``Trees``' node arrays in group order, then ``num_nodes``; the kernels take a group as the
#: static slice ``trees[_LO[group]:_HI[group]]`` (a tuple of arrays, walked with ``literal_unroll``).
if TYPE_CHECKING:

    class Trees(tuple):  # the type checker's view: the fields come from NODE_FIELDS
        def __new__(cls, **arrays: np.ndarray) -> Trees: ...
        def __getattr__(self, name: str) -> np.ndarray: ...
        def _asdict(self) -> dict[str, np.ndarray]: ...
        def _replace(self, **arrays: np.ndarray) -> Trees: ...

else:
    Trees = namedtuple("Trees", [f.name for f in _ORDERED] + ["num_nodes"])
_LO = {grp: next((i for i, f in enumerate(_ORDERED) if _GROUPS.index(f.group) >= k), len(_ORDERED))
       for k, grp in enumerate(_GROUPS)}
_HI = {grp: _LO[_GROUPS[k + 1]] if k + 1 < len(_GROUPS) else len(_ORDERED) for k, grp in enumerate(_GROUPS)}
_EDGE_LO = _LO["edge"]
_STAT_LO, _STAT_HI = _LO["stat"], _HI["stat"]
_TRANSIENT_LO, _TRANSIENT_HI = _LO["transient"], _HI["transient"]
if [f.name for f in _ORDERED[:2]] != ["first_child", "num_children"]:
    raise ValueError("NODE_FIELDS: the structure group is first_child and num_children")
#: Bytes of one node over all its arrays (the memory estimates use it).
BYTES_PER_NODE = sum(np.dtype(f.dtype).itemsize for f in NODE_FIELDS)

Games = namedtuple(
    "Games",
    [
        "root_state", "active", "searching", "target", "done", "inflight", "noise", "full", "rng",
        "dirichlet_noise", "mixed_prior", "gumbel_logits", "search_visits", "raw_value",
        "considered_visits", "overflow",
    ],
)
Leaves = namedtuple("Leaves", ["states", "game", "depth", "path"])
#: The children of a batch of leaves, made from the network's priors before they go into a tree
#: (``steps.prepare_kernel``), so that a two-worker search (``BatchedMCTS.run(pipelined=True)``)
#: does the move generation, the prior gathering and the sort of a leaf outside the lock that
#: the trees are written under: ``moves`` (L, A) int64 and ``priors`` (L, A) float64, leaf ``j``'s
#: children by decreasing prior in its first ``count[j]`` entries ((L,) int64; 0: no legal move);
#: ``wins`` (L,) uint64, the road-win squares of the leaf's mover (0 when the road check is off);
#: ``move_buf`` (A,) int64 and ``prior_buf`` (A,) float64, scratch of the kernel.
Children = namedtuple("Children", ["moves", "priors", "count", "wins", "move_buf", "prior_buf"])
#: One tree's worth of scratch columns for the compaction in ``advance_kernel``: ``source`` (the old
#: index of each copied node), the new ``first_child`` / ``num_children``, and ``column`` (float64:
#: each node array passes through it in turn).
Scratch = namedtuple("Scratch", ["source", "first_child", "num_children", "column"])


# ---------------------------------------------------------------------------------------------
# Allocation
# ---------------------------------------------------------------------------------------------


def new_trees(games: int, budget: int) -> Trees:
    """Zeroed node pools of ``games`` trees of ``budget`` nodes (one (games, budget) array per row
    of ``NODE_FIELDS``, of its dtype, and ``num_nodes`` (games,) int32; memory is committed by the
    OS only when touched)."""
    shape = (games, budget)
    arrays = {f.name: np.zeros(shape, dtype=f.dtype) for f in NODE_FIELDS}
    return Trees(**arrays, num_nodes=np.zeros(games, dtype=np.int32))


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
        source=np.zeros(budget, dtype=np.int32),
        first_child=np.zeros(budget, dtype=np.int32),
        num_children=np.zeros(budget, dtype=np.int32),
        column=np.zeros(budget, dtype=np.float64),
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
def compute_status(trees, g: int | np.integer, x: int | np.integer) -> int:
    """Proof status of node ``x`` of game ``g`` from its children (its own if not expanded): LOSS
    if a child is a WIN (for the player moving from ``x``), else UNKNOWN while a child is, else
    DRAW if a child is, else WIN (every child lost)."""
    status = trees.status
    nc = trees.num_children[g, x]
    if nc == 0:
        return status[g, x]
    f = trees.first_child[g, x]
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
def propagate(trees, path, slot: int | np.integer, g: int | np.integer, d: int | np.integer) -> None:
    """Recompute proof statuses from ``path[slot, d]`` up to the root, stopping at the first node
    whose status does not change."""
    status = trees.status  # written arrays bound at the top (steps.py docstring)
    for i in range(d, -1, -1):
        x = np.int64(path[slot, i])
        s = compute_status(trees, g, x)
        if s == status[g, x]:
            return
        status[g, x] = s


@njit(cache=True, error_model="numpy", inline="always")
def backup_mean(trees, cfg, path, slot: int | np.integer, g: int | np.integer, depth: int | np.integer,
                v: float) -> None:
    """The backup rule "mean" (``takzero.search.rules``): add one visit and value ``v`` (view of
    the player who moved into ``path[slot, depth]``) to ``visits`` and ``value_sum`` of every
    node of the path, negating at each ply. A node statistic of the "stat" group is gathered
    here."""
    visits, value_sum = trees.visits, trees.value_sum  # bound at the top (steps.py docstring)
    for i in range(depth, -1, -1):
        x = path[slot, i]
        visits[g, x] += 1
        value_sum[g, x] += v
        v = -v


# ---------------------------------------------------------------------------------------------
# Tree upkeep
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def _zero_columns(arrays, g: int, lo: int, hi: int) -> None:
    """Zero columns [lo, hi) of row ``g`` of every (G, B) array of the tuple ``arrays``."""
    for arr in literal_unroll(arrays):
        for i in range(lo, hi):
            arr[g, i] = 0


@njit(cache=True, error_model="numpy")
def _zero_slots(trees, g: int, lo: int, hi: int) -> None:
    """Zero the statistics of node slots [lo, hi) of game ``g`` (see the free-slot invariant):
    ``num_children`` and the "stat" and "transient" arrays of ``NODE_FIELDS``."""
    hi = min(hi, trees.visits.shape[1])
    for i in range(lo, hi):
        trees.num_children[g, i] = 0
    _zero_columns(trees[_STAT_LO:_STAT_HI], g, lo, hi)
    _zero_columns(trees[_TRANSIENT_LO:_TRANSIENT_HI], g, lo, hi)


@njit(cache=True, error_model="numpy")
def clear_tree(trees, g: int, keep_root: bool = True) -> None:
    """Make game ``g``'s tree a single unexpanded root (or empty: ``keep_root=False``). Zeroes the
    used slots, keeping the free-slot invariant: every slot at or past ``num_nodes`` has zero
    statistics (``num_children`` and the "stat" and "transient" arrays), so an expansion only
    writes priors and moves."""
    _zero_slots(trees, g, 0, max(trees.num_nodes[g], 1))
    trees.prior[g, 0] = 1.0
    trees.move[g, 0] = 0
    trees.first_child[g, 0] = 0
    trees.num_nodes[g] = 1 if keep_root else 0


@njit(cache=True, error_model="numpy")
def _gather_columns(arrays, g: int, source: np.ndarray, column: np.ndarray, count: int) -> None:
    """``arr[g, i] = arr[g, source[i]]`` for i < ``count`` and every (G, B) array of the tuple
    ``arrays``, through the float64 ``column`` (exact for values of 32 bits or fewer)."""
    for arr in literal_unroll(arrays):
        for i in range(count):
            column[i] = arr[g, source[i]]
        for i in range(count):
            arr[g, i] = column[i]


@njit(cache=True, error_model="numpy")
def advance_kernel(trees, games, scratch, g: int, move: int, reuse: bool, max_plies: int) -> int:
    """Play ``move`` (legal, checked by the caller) at game ``g``'s root. With ``reuse`` and an
    expanded child for the move, that child's subtree becomes the tree (compacted to the front of
    the pool, breadth first: the "edge" and "stat" arrays are gathered through ``scratch``, the
    "transient" ones zeroed); otherwise the tree is cleared. A finished game (or the ply limit)
    deactivates the game. Returns the number of nodes kept."""
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
    # breadth-first order of the subtree of c: the old index and the new shape of each node
    source = scratch.source
    source[0] = c
    head = 0
    tail = 1
    while head < tail:
        o = source[head]
        k = trees.num_children[g, o]
        scratch.num_children[head] = k
        if k > 0:
            fo = trees.first_child[g, o]
            scratch.first_child[head] = tail
            for j in range(k):
                source[tail + j] = fo + j
            tail += k
        else:
            scratch.first_child[head] = 0
        head += 1
    old_count = trees.num_nodes[g]
    _gather_columns(trees[_EDGE_LO:_STAT_HI], g, source, scratch.column, tail)
    for i in range(tail):
        trees.first_child[g, i] = scratch.first_child[i]
        trees.num_children[g, i] = scratch.num_children[i]
    _zero_columns(trees[_TRANSIENT_LO:_TRANSIENT_HI], g, 0, tail)
    _zero_slots(trees, g, tail, old_count)
    trees.num_nodes[g] = tail
    return tail
