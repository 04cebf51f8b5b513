"""Batched MCTS over many games: :class:`BatchedMCTS`, :func:`search_position`.

One :class:`BatchedMCTS` holds a tree for each of G games (G up to a few thousand) in preallocated
numba arrays (layout: ``takzero.search.tree``). A search step is two compiled calls (``steps``):

1. :meth:`BatchedMCTS.select_leaves` descends every searching game's tree by PUCT (or the Gumbel
   root rule) and returns the leaves as one batch of positions ``(L, STATE_LEN) int64``; terminal
   and proven leaves are scored exactly and backed up on the spot, never sent to the evaluator;
2. the caller evaluates the batch (any object with ``evaluate(states) -> (priors (L, A) float32,
   values (L,) float32, wdl (L, 3))``, values from the side to move), and
   :meth:`BatchedMCTS.expand_backup` expands the leaves with the priors and backs the values up
   (negated at each ply).

Python runs once per batch, never per node. :meth:`BatchedMCTS.run` loops the two steps until
every game has spent its budget. Typical self-play use::

    mcts = BatchedMCTS(num_games=256, size=6, config=SearchConfig(simulations=800), seed=1)
    for g in range(256):
        mcts.reset(g, Position.start(6).state)
    while mcts.active_games().size:
        mcts.run(evaluator)                       # one search per active game
        for g in mcts.active_games():
            if mcts.is_full_search(g):            # playout cap: record only full searches
                actions, probs = mcts.policy_target(g)
            move = mcts.choose_move(g)            # temperature schedule from the config
            mcts.advance(g, move)                 # tree reuse; a finished game frees its tree

Determinism: every game has its own random stream (splitmix64, seeded from ``seed`` and the game
index, or from ``reset(..., seed=s)``), so a search gives the same result whatever the other games
of the batch, given an evaluator whose output for a position does not depend on the batch.

Node budget: each tree has ``config.node_budget`` node slots (one per child of an expanded node).
A leaf that does not fit is not expanded: it keeps its network value, and later visits back that
value up again without a network call (``overflow(g)`` counts these). ``advance`` compacts the kept
subtree to the front of the pool, so the garbage of earlier moves never accumulates.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from takzero.game.core import I_SIZE, STATE_LEN, generate_moves, num_actions
from takzero.search import readout
from takzero.search.config import SearchConfig, pack_settings
from takzero.search.evaluators import Evaluator
from takzero.search.pipelined import run_halves, run_two_workers
from takzero.search.rng import game_seed, stream_state
from takzero.search.steps import begin_kernel, expand_backup_kernel, prepare_kernel, select_kernel
from takzero.search.tree import (
    FLAG_NOEXPAND,
    UNKNOWN,
    Children,
    Leaves,
    Scratch,
    advance_kernel,
    clear_tree,
    new_children,
    new_games,
    new_leaves,
    new_scratch,
    new_trees,
    terminal_status,
)

__all__ = ["BatchedMCTS", "SearchResult", "SearchStats", "game_seed", "search_position"]


def _as_state(state) -> np.ndarray:
    st = getattr(state, "state", state)
    st = np.asarray(st)
    if st.shape != (STATE_LEN,) or st.dtype != np.int64:
        raise ValueError(f"state must be ({STATE_LEN},) int64, got {st.shape} {st.dtype}")
    return st


@dataclass
class SearchStats:
    """What :meth:`BatchedMCTS.run` did: steps (evaluator calls), leaves evaluated, seconds in the
    evaluator, seconds in all."""

    steps: int = 0
    leaves: int = 0
    eval_seconds: float = 0.0
    total_seconds: float = 0.0

    def add(self, other: SearchStats) -> None:
        """Add ``other``'s counts and times to these."""
        self.steps += other.steps
        self.leaves += other.leaves
        self.eval_seconds += other.eval_seconds
        self.total_seconds += other.total_seconds

    @property
    def overhead_share(self) -> float:
        """Share of the wall time spent outside the evaluator (the search overhead)."""
        if self.total_seconds <= 0:
            return 0.0
        return 1.0 - self.eval_seconds / self.total_seconds


class BatchedMCTS:
    """Trees of ``num_games`` games of board size ``size`` searched together.

    The object owns the arrays (``takzero.search.tree``) and drives the compiled step kernels
    (``takzero.search.steps``); the readout methods delegate to ``takzero.search.readout``.

    Args:
        num_games: G, the number of game slots.
        size: board size N (all positions must have it).
        config: search settings (default ``SearchConfig()``); copied, so later changes to the
            caller's object have no effect.
        seed: seeds the per-game random streams (noise, Gumbel draws, playout caps, sampling).

    Raises:
        ValueError: ``config.node_budget`` below ``num_actions(size) + 1`` (a root must fit).
    """

    def __init__(
        self, num_games: int, size: int, config: SearchConfig | None = None, seed: int = 0
    ) -> None:
        cfg = replace(config) if config is not None else SearchConfig()
        cfg.validate()
        #: A private copy of the settings, read when the object is built: treat as read-only.
        self.config = cfg
        self.num_games = g_count = int(num_games)
        self.size = int(size)
        self.num_actions = a = num_actions(self.size)
        if g_count < 1:
            raise ValueError("num_games must be >= 1")
        if cfg.node_budget < a + 1:
            raise ValueError(f"node_budget {cfg.node_budget} is below num_actions + 1 = {a + 1}")
        rng = np.array([game_seed(seed, g) for g in range(g_count)], dtype=np.uint64)
        self._trees = new_trees(g_count, cfg.node_budget)
        self._games = new_games(rng, a, cfg.max_simulations)
        self._leaves = new_leaves(g_count * cfg.leaves_per_step)
        self._leaves2: Leaves | None = None  # the second batch of a pipelined run (made at first use)
        self._pool: ThreadPoolExecutor | None = None  # its evaluation thread
        self._settings = pack_settings(cfg)
        #: packed settings by leaves per step (``begin_search(leaves=...)``)
        self._packed = {cfg.leaves_per_step: self._settings}
        self._float_buf = np.empty(a, dtype=np.float64)  # kernel scratch: root scores
        self._children = new_children(1, a)  # kernel scratch: a new node's child list
        #: the child lists of each worker's batch in a two-worker run (made at first use)
        self._prepared: tuple[Children, Children] | None = None
        self._scratch: Scratch | None = None
        self._pending = 0
        self._search_games = np.arange(g_count, dtype=np.int32)

    # -- game slots --------------------------------------------------------------------------

    def reset(self, g: int, state, seed: int | None = None) -> None:
        """Put position ``state`` ((STATE_LEN,) int64 or a ``Position``) in slot ``g`` with an
        empty tree. A finished position (or one at the ply limit) leaves the slot inactive.
        ``seed`` restarts the slot's random stream (for reproducing one game of a batch)."""
        self._check_idle()
        st = _as_state(state)
        if int(st[I_SIZE]) != self.size:
            raise ValueError(f"position of size {int(st[I_SIZE])} in a size-{self.size} search")
        games = self._games
        games.root_state[g] = st
        games.searching[g] = False
        games.overflow[g] = 0
        alive = terminal_status(games.root_state[g], self.config.max_plies) == UNKNOWN
        clear_tree(self._trees, g, alive)
        games.active[g] = alive
        if seed is not None:
            games.rng[g] = np.uint64(stream_state(seed))

    def free(self, g: int) -> None:
        """Drop slot ``g``'s tree and mark it inactive."""
        self._check_idle()
        self._games.active[g] = False
        self._games.searching[g] = False
        clear_tree(self._trees, g, False)

    def active_games(self) -> np.ndarray:
        """Indices (int64) of the slots holding an unfinished position."""
        return np.flatnonzero(self._games.active)

    def is_active(self, g: int) -> bool:
        return bool(self._games.active[g])

    def root_state(self, g: int) -> np.ndarray:
        """Copy of slot ``g``'s root position ((STATE_LEN,) int64)."""
        return self._games.root_state[g].copy()

    def tree_size(self, g: int) -> int:
        """Nodes in use in slot ``g``'s tree."""
        return int(self._trees.num_nodes[g])

    def overflow(self, g: int) -> int:
        """Leaves left unexpanded in slot ``g`` because its tree was full (since ``reset``)."""
        return int(self._games.overflow[g])

    def frozen_nodes(self, g: int) -> int:
        """Nodes of slot ``g``'s tree flagged ``FLAG_NOEXPAND``: leaves evaluated when the tree
        was full (or at ``MAX_DEPTH``), which no search expands, only backs up again without a
        network call. Tree reuse keeps them (``advance``); a caller that wants every visit to
        reach the network starts afresh instead (``takzero.players.network.NetworkSearch``)."""
        n = int(self._trees.num_nodes[g])
        return int(np.count_nonzero(self._trees.flags[g, :n] & FLAG_NOEXPAND))

    def is_full_search(self, g: int) -> bool:
        """True if the last search of ``g`` was a full one (always, without playout caps): its
        policy target is meant to be recorded."""
        return bool(self._games.full[g])

    def simulations_done(self, g: int) -> int:
        """Simulations completed in the current/last search of ``g``."""
        return int(self._games.done[g])

    # -- the search --------------------------------------------------------------------------

    def begin_search(
        self,
        games=None,
        add_noise: bool | None = None,
        simulations: int | None = None,
        leaves: int | None = None,
    ) -> np.ndarray:
        """Start a search for ``games`` (indices; default all active slots).

        Args:
            games: slot indices; inactive ones are skipped.
            add_noise: root noise (Dirichlet, or the Gumbel draw); default ``config.root_noise``.
                Cheap searches of the playout cap never get noise.
            simulations: budget for every game of this search; overrides the config and turns the
                playout cap off for this search.
            leaves: leaves per game per step of this search (virtual loss when > 1), in
                1..``config.leaves_per_step`` (the leaf buffer's size); None: the config's.

        Returns:
            (len(games),) bool: which searches are full (to be recorded as training targets).

        Raises:
            ValueError: an index out of range or given twice, ``simulations`` < 1, or ``leaves``
                out of range.
            RuntimeError: a search step is still pending.
        """
        self._check_idle()
        cfg = self.config
        k = cfg.leaves_per_step if leaves is None else int(leaves)
        if not 1 <= k <= cfg.leaves_per_step:
            raise ValueError(f"leaves must be in 1..{cfg.leaves_per_step} (the tree's leaves_per_step), got {leaves}")
        if k not in self._packed:
            self._packed[k] = pack_settings(replace(cfg, leaves_per_step=k))
        self._settings = self._packed[k]
        if games is None:
            games = np.flatnonzero(self._games.active)
        games = np.ascontiguousarray(np.asarray(games, dtype=np.int32).reshape(-1))
        if games.size and (games.min() < 0 or games.max() >= self.num_games):
            raise ValueError("game index out of range")
        if np.unique(games).size != games.size:
            # each game takes at most leaves_per_step rows of the leaf buffer per step
            raise ValueError(f"game indices repeat: {games.tolist()}")
        noise = cfg.root_noise if add_noise is None else bool(add_noise)
        if simulations is not None:
            full = cheap = int(simulations)
            cap = False
            if full < 1:
                raise ValueError("simulations must be >= 1")
        else:
            cap = cfg.playout_cap
            full = cfg.full_simulations if cap else cfg.simulations
            cheap = cfg.cheap_sims
        need = max(full, cheap)
        if need > self._games.considered_visits.shape[1]:
            schedule = np.zeros((self.num_games, need), dtype=np.int32)
            self._games = self._games._replace(considered_visits=schedule)
        begin_kernel(
            self._trees, self._games, self._settings, games, full, cheap, cfg.full_prob, cap, noise
        )
        self._search_games = games
        return self._games.full[games].copy()

    def select_leaves(self) -> tuple[np.ndarray, np.ndarray]:
        """One selection per searching game (``leaves_per_step`` with virtual loss).

        Returns:
            states: (L, STATE_LEN) int64 leaf positions, a view valid until the next call; do not
                modify it.
            games: (L,) int32 slot of each leaf.
            L == 0 means every game of the search is finished.

        Raises:
            RuntimeError: the previous leaves were not expanded yet.
        """
        if self._pending:
            raise RuntimeError("expand_backup must be called before selecting again")
        n = select_kernel(
            self._trees, self._games, self._leaves, self._settings, self._search_games,
            self._float_buf,
        )
        self._pending = n
        return self._leaves.states[:n], self._leaves.game[:n]

    def expand_backup(self, priors: np.ndarray, values: np.ndarray) -> None:
        """Expand the pending leaves and back up their values.

        Args:
            priors: (L, A) priors over the full action space, float32 preferred (renormalised over
                the legal moves here; NaN, inf and negative entries count as 0; an all-zero row is
                uniform). A read-only broadcast of one row (``np.broadcast_to``) is read without
                copying.
            values: (L,) values in [-1, 1] from the side to move at each leaf (NaN counts as 0).
        """
        n = self._pending
        priors = np.asarray(priors)
        if priors.shape != (n, self.num_actions):
            raise ValueError(f"priors must be ({n}, {self.num_actions}), got {priors.shape}")
        values = np.ascontiguousarray(np.asarray(values, dtype=np.float32).reshape(-1))
        if values.shape != (n,):
            raise ValueError(f"values must be ({n},), got {values.shape}")
        self._expand_from(self._leaves, n, priors, values)
        self._pending = 0

    def searching(self) -> bool:
        """True while some game of the current search still has budget or pending leaves."""
        return bool(self._games.searching[self._search_games].any())

    def run(
        self,
        evaluator: Evaluator,
        games=None,
        add_noise: bool | None = None,
        simulations: int | None = None,
        leaves: int | None = None,
        stop=None,
        deadline: float | None = None,
        pipelined: bool = False,
    ) -> SearchStats:
        """``begin_search`` then select / evaluate / expand until every game is done, ``stop``
        (a ``threading.Event``) is set or ``time.perf_counter()`` has passed ``deadline`` (both
        checked after every evaluator call; the tree stays consistent, every finished step is
        backed up). The one step loop of the package: ``takzero.search.driver.SearchDriver``
        runs it for every caller.

        ``evaluator.evaluate(states)`` must return ``(priors (L, A), values (L,), wdl)``.
        Returns timing figures (:class:`SearchStats`). What the evaluator raises is raised here,
        after the leaves of the failed call (and of any other call it had in flight) are taken
        back: the trees stay searchable and the object idle.

        ``pipelined``: two batches in flight, one evaluated on a second thread while the other
        is selected; faster where the evaluator and the kernels can run at once (two cores, or a
        GPU). With two games or more the games are searched in two halves
        (``pipelined.run_halves``): each game's search is the plain one, bit for bit, given an
        evaluator whose output does not depend on the batch. With one game its leaves are split
        (``pipelined.run_two_workers``: two workers select, evaluate and back up batches at
        once, each selected under the virtual loss of the other's leaves in flight, so only with
        more than one leaf per step, with one the plain loop runs; the trees differ from a plain
        run's and from run to run, since the order of the two workers' backups depends on
        timing).
        """
        t0 = time.perf_counter()
        stats = SearchStats()
        self.begin_search(games, add_noise=add_noise, simulations=simulations, leaves=leaves)
        if pipelined and self._search_games.size >= 2:
            run_halves(self, evaluator, stats, stop, deadline)
            stats.total_seconds = time.perf_counter() - t0
            return stats
        if pipelined and self._settings[0]["leaves_per_step"] > 1:  # needs virtual loss
            run_two_workers(self, evaluator, stats, stop, deadline)
            stats.total_seconds = time.perf_counter() - t0
            return stats
        while True:
            states, _ = self.select_leaves()
            if states.shape[0] == 0:
                self._pending = 0
                break
            t1 = time.perf_counter()
            try:
                priors, values, _ = evaluator.evaluate(states)
            except BaseException:
                self._abandon(self._leaves, self._pending)  # the tree stays searchable
                self._pending = 0
                raise
            t2 = time.perf_counter()
            stats.eval_seconds += t2 - t1
            stats.steps += 1
            stats.leaves += states.shape[0]
            self.expand_backup(priors, values)
            if (stop is not None and stop.is_set()) or (deadline is not None and t2 >= deadline):
                break
        stats.total_seconds = time.perf_counter() - t0
        return stats

    def _select_into(self, leaves: Leaves, games: np.ndarray | None = None) -> int:
        """One selection (``select_kernel``) of ``games`` (default: the search's) into the leaf
        buffer ``leaves``; returns its count."""
        games = self._search_games if games is None else games
        return int(select_kernel(
            self._trees, self._games, leaves, self._settings, games, self._float_buf
        ))

    def _expand_from(
        self, leaves: Leaves, n: int, priors: np.ndarray, values: np.ndarray,
        children: Children | None = None,
    ) -> None:
        """Expand and back up the ``n`` leaves of buffer ``leaves`` with ``priors`` (n, A) and
        ``values`` (n,) (checked by the caller; see :meth:`expand_backup`). ``children``: the
        leaves' child lists already made from ``priors`` (:meth:`_prepare`), else made here."""
        if n == 0:
            return
        flat, stride = self._flat_priors(priors)
        values = np.ascontiguousarray(np.asarray(values, dtype=np.float32).reshape(-1))
        if not values.flags.writeable:  # a read-only array is another numba type (_flat_priors)
            values = values.copy()
        expand_backup_kernel(
            self._trees, self._games, leaves, self._settings, n, flat, stride, values,
            children if children is not None else self._children, children is not None,
        )

    def _flat_priors(self, priors: np.ndarray) -> tuple[np.ndarray, int]:
        """(flat priors, stride) as the kernels take them: priors (n, A) flattened (stride A),
        or one row shared by all leaves (stride 0), float32, writeable."""
        priors = np.asarray(priors)
        if priors.strides[0] == 0:  # one row shared by all leaves (np.broadcast_to)
            flat = np.ascontiguousarray(priors[0], dtype=np.float32)
            stride = 0
        else:
            flat = np.ascontiguousarray(priors, dtype=np.float32).reshape(-1)
            stride = self.num_actions
        # a read-only array is another numba type: one writeable copy of a row or a batch
        # here spares a second compilation of the kernel
        if not flat.flags.writeable:
            flat = flat.copy()
        return flat, stride

    def _prepare(self, leaves: Leaves, n: int, priors: np.ndarray, children: Children) -> None:
        """The child lists of the ``n`` leaves of buffer ``leaves`` from ``priors`` (n, A) into
        ``children`` (``prepare_kernel``: reads no tree, so it needs no lock)."""
        if n == 0:
            return
        flat, stride = self._flat_priors(priors)
        prepare_kernel(leaves, self._settings, n, flat, stride, children)

    def _abandon(self, leaves: Leaves, n: int) -> None:
        """Take back the selection of the ``n`` leaves of buffer ``leaves`` whose network call
        failed: their virtual visits and in-flight counts, as ``expand_backup_kernel`` would
        before expanding them. The tree is then as if they had never been selected (terminal
        leaves met on the way stay backed up), so the next search of it runs (a root leaf left
        holding its virtual visit was never expanded again; a stuck one blocked its path)."""
        if n <= 0:
            return
        use_virtual = int(self._settings[0]["leaves_per_step"]) > 1
        vv, inflight = self._trees.virtual_visits, self._games.inflight
        for j in range(n):
            g = int(leaves.game[j])
            depth = int(leaves.depth[j])
            if use_virtual or depth == 0:
                vv[g, leaves.path[j, : depth + 1]] -= 1  # one path: no node twice
            if depth > 0:
                inflight[g] -= 1

    def advance(self, g: int, move) -> None:
        """Play ``move`` (code, ``Move`` or PTN string) at slot ``g``'s root. With
        ``config.reuse_tree`` the move's subtree becomes the new tree (fresh noise comes with the
        next search); a finished game frees its tree and becomes inactive.

        Raises ValueError for an illegal move or an inactive slot."""
        self._check_idle()
        if not self._games.active[g]:
            raise ValueError(f"game {g} is not active")
        code = self._move_code(move)
        legal = np.empty(self.num_actions, dtype=np.int64)
        nl = generate_moves(self._games.root_state[g], legal)
        if code not in set(legal[:nl].tolist()):
            raise ValueError(f"move {move!r} is not legal in game {g}")
        if self._scratch is None:
            self._scratch = new_scratch(self.config.node_budget)
        advance_kernel(
            self._trees, self._games, self._scratch, g, code, self.config.reuse_tree,
            self.config.max_plies,
        )

    # -- readouts at the root (``takzero.search.readout``) ------------------------------------

    def root_moves(self, g: int) -> np.ndarray:
        """(k,) int64 move codes of the root's children (``readout.root_moves``)."""
        return readout.root_moves(self._trees, g)

    def root_visits(self, g: int) -> tuple[np.ndarray, np.ndarray]:
        """(moves (k,) int64, visits (k,) int32) of the root's children."""
        return readout.root_visits(self._trees, g)

    def root_q(self, g: int) -> np.ndarray:
        """(k,) float32 Q of each root child, root mover's view (``readout.root_q``)."""
        return readout.root_q(self._trees, g)

    def root_priors(self, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(moves, network priors, priors the search used) of the root's children."""
        return readout.root_priors(self._trees, self._games, self.config, g)

    def root_proven(self, g: int) -> int | None:
        """Proven result for the side to move at the root: 1 win, 0 draw, -1 loss, None unknown."""
        return readout.root_proven(self._trees, g)

    def root_value(self, g: int) -> float:
        """Value of the root for its side to move (``readout.root_value``)."""
        return readout.root_value(self._trees, g)

    def principal_variation(
        self, g: int, first_move: int | None = None, limit: int = 32
    ) -> list[int]:
        """Move codes of the most visited line (``readout.principal_variation``)."""
        return readout.principal_variation(self._trees, g, first_move, limit)

    def policy_target(self, g: int) -> tuple[np.ndarray, np.ndarray]:
        """Training policy target (actions (k,) int64, probs (k,) float32) of the root
        (``readout.policy_target``: visit counts, or the Gumbel improved policy)."""
        return readout.policy_target(
            self._trees, self._games, self._settings, self.config, self.size, g
        )

    def policy_dense(self, g: int) -> np.ndarray:
        """The policy target as a dense (A,) float32 vector over action indices."""
        return readout.policy_dense(
            self._trees, self._games, self._settings, self.config, self.size, g
        )

    def choose_move(self, g: int, temperature: float | None = None, rng=None) -> int:
        """Move code to play at slot ``g``'s root after a search (``readout.choose_move``: a proven
        win, else visit counts with the temperature schedule, or the Gumbel winner)."""
        return readout.choose_move(
            self._trees, self._games, self._settings, self.config, g, temperature, rng
        )

    # -- helpers -----------------------------------------------------------------------------

    def _move_code(self, move) -> int:
        if isinstance(move, str):
            from takzero.game.moves import parse_ptn

            return parse_ptn(move, self.size)
        return int(getattr(move, "code", move))

    def _check_idle(self) -> None:
        if self._pending:
            raise RuntimeError("leaves are pending: call expand_backup first")


@dataclass
class SearchResult:
    """Result of :func:`search_position`: the chosen move code, the root's moves (k,) int64 and
    visits (k,) int32, the root value for the side to move, the policy target (actions (k,) int64,
    probs (k,) float32) and the proven result (1 / 0 / -1 for the side to move, or None)."""

    move: int
    moves: np.ndarray
    visits: np.ndarray
    value: float
    actions: np.ndarray
    probs: np.ndarray
    proven: int | None


def search_position(
    state,
    evaluator: Evaluator,
    simulations: int = 800,
    config: SearchConfig | None = None,
    seed: int = 0,
    add_noise: bool = False,
    temperature: float = 0.0,
) -> SearchResult:
    """Search one position (``(STATE_LEN,) int64`` or ``Position``) and pick a move.

    Defaults suit players and engines: no noise, argmax move. ``config`` defaults to
    ``SearchConfig().evaluation()``; ``simulations`` overrides its budget.

    Raises ValueError if the position is already over.
    """
    st = _as_state(state)
    cfg = config if config is not None else SearchConfig().evaluation()
    mcts = BatchedMCTS(1, int(st[I_SIZE]), cfg, seed=seed)
    mcts.reset(0, st)
    if not mcts.is_active(0):
        raise ValueError("the position is already over")
    mcts.run(evaluator, add_noise=add_noise, simulations=simulations)
    moves, visits = mcts.root_visits(0)
    actions, probs = mcts.policy_target(0)
    return SearchResult(
        move=mcts.choose_move(0, temperature=temperature),
        moves=moves,
        visits=visits,
        value=mcts.root_value(0),
        actions=actions,
        probs=probs,
        proven=mcts.root_proven(0),
    )
