"""The search front end: :class:`Limit` (what ends a search) and :class:`SearchDriver` (one
search of 1..G games of a :class:`~takzero.search.mcts.BatchedMCTS` under a limit, returning one
:class:`SearchOutcome` per game).

Every caller searches through it: self-play (``takzero.pipeline.selfplay``: all games of a worker,
the config's budgets and root noise), the batched side of a match and the network player
(``takzero.players.network``: the TEI engine, ``takzero.play``, the playtak bot, evaluations).
The driver owns the step loop (select leaves, evaluate them in one network call, expand and back
up), the clock (a deadline checked after every network call), the stop flag and the readouts of a
finished search (move, policy target, root value, proof, principal variation); what to do with
them (record a training position, avoid a tinuë, report to a GUI) is the caller's.

A search with a time limit or a stop flag runs in chunks of simulations (:attr:`SearchDriver.chunk`,
doubling) because a search's budget is fixed when it begins (``BatchedMCTS.begin_search``); a
chunk is cut after any network call once the deadline has passed or the stop flag is set (the
tree stays consistent: every finished step is backed up), so a search overruns its time by at
most one network call. Without time and stop
the search is one ``begin_search`` with the node budget, exactly ``BatchedMCTS.run``.

Leaf batching: ``leaves`` (per search) is the number of leaves each game selects per network
call, with virtual loss when > 1 (``SearchConfig.leaves_per_step``; at most the value the tree was
built with). One game at ``leaves`` 16 sends batches of up to 16 positions, where one leaf per call
leaves a batched network (onnxruntime: ~4,000 positions/s at batch 64 against ~2,000 at batch 1 on
one core, scripts/bench_inference.py) mostly idle.

The network-output cache (:class:`CachedEvaluator`, optional) remembers the priors and value of
positions by Zobrist hash (``state[I_HASH]``, with the ply and komi mixed in), so a position
reached again by another move order (Tak transposes often) is not sent to the network again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from takzero.game.core import I_HALF_KOMI, I_HASH, I_PLY
from takzero.search.evaluators import Evaluator
from takzero.search.limit import Limit
from takzero.search.mcts import BatchedMCTS, SearchStats

__all__ = ["DEFAULT_CHUNK", "CachedEvaluator", "Limit", "SearchDriver", "SearchOutcome"]

#: Simulations of the first chunk of a search under a time limit or a stop flag (per game), at
#: least this many and at least four network calls of ``leaves`` leaves; each later chunk is as
#: large as all before it (so chunks end at 64, 128, 256, ... simulations), up to
#: :data:`MAX_CHUNK`.
DEFAULT_CHUNK = 32
MAX_CHUNK = 4096


@dataclass(frozen=True)
class SearchOutcome:
    """What one game's search found (:meth:`SearchDriver.outcome`).

    Attributes:
        game: the game slot.
        move: the move code to play (``BatchedMCTS.choose_move``: a proven win, else the visit
            counts with the temperature asked for, or the Gumbel winner).
        value: root value in [-1, 1] for the side to move (exact when proven).
        proven: 1 / 0 / -1 when the search proved a win / draw / loss for the side to move, else
            None.
        pv: the most visited line, starting with ``move``.
        nodes: simulations of this search (``BatchedMCTS.simulations_done``).
        depth: length of ``pv`` (plies).
        seconds: wall time of the search (shared by all its games).
        full: a full search of the playout cap (its policy target is a training target).
        policy_actions, policy_probs: the policy target ((k,) int64 actions, (k,) float32
            probabilities; ``BatchedMCTS.policy_target``) when asked for, else None.
    """

    game: int
    move: int
    value: float
    proven: int | None
    pv: tuple[int, ...]
    nodes: int
    depth: int
    seconds: float
    full: bool = True
    policy_actions: np.ndarray | None = None
    policy_probs: np.ndarray | None = None


class CachedEvaluator:
    """An evaluator with a bounded cache of its outputs keyed by position in front of
    ``evaluator`` (direct-mapped: ``capacity`` slots, a new entry replaces the one in its slot),
    looked up and filled with numpy over whole batches (no Python per position).

    The key is the Zobrist hash (``state[I_HASH]``: stacks, top piece types, side to move) mixed
    with the ply and the half-komi, the inputs of the network that the hash leaves out (the
    reserves follow from the stacks: Tak never removes a piece). Priors are kept in float16
    (about 3 decimal digits: the search renormalises them anyway), values in float32.

    Args:
        evaluator: the network (``evaluate(states) -> (priors (B, A), values (B,), wdl (B, 3))``,
            with ``num_actions`` or ``size``); its other attributes (``size``, ``metadata``) are
            passed through.
        capacity: slots, rounded up to a power of two (>= 16).

    Memory: ``capacity * (2 * A + 25)`` bytes (5x5: A = 1,575, 16,384 slots: 52 MB).

    Raises ValueError for a capacity < 1.
    """

    def __init__(self, evaluator: Evaluator, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        cap = 16
        while cap < capacity:
            cap *= 2
        self.evaluator = evaluator
        self.capacity = cap
        from takzero.game.core import num_actions

        self.num_actions = int(getattr(evaluator, "num_actions", 0) or num_actions(int(cast(Any, evaluator).size)))
        self._keys = np.zeros(cap, dtype=np.int64)
        self._used = np.zeros(cap, dtype=bool)
        self._priors = np.zeros((cap, self.num_actions), dtype=np.float16)
        self._values = np.zeros(cap, dtype=np.float32)
        self._wdl = np.zeros((cap, 3), dtype=np.float32)
        self.hits = 0
        self.lookups = 0
        self._lock = threading.Lock()

    @staticmethod
    def keys(states: np.ndarray) -> np.ndarray:
        """(B,) int64 keys of (B, STATE_LEN) int64 positions."""
        h = states[:, I_HASH].astype(np.uint64)
        mix = states[:, I_PLY].astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        mix ^= states[:, I_HALF_KOMI].astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F)
        return (h ^ mix).view(np.int64)

    @property
    def hit_rate(self) -> float:
        """Share of lookups answered from the cache (0 before any)."""
        return self.hits / self.lookups if self.lookups else 0.0

    def __getattr__(self, name: str):
        return getattr(self.evaluator, name)

    def evaluate(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(priors (B, A) float32, values (B,) float32, wdl (B, 3) float32) of ``states``
        (B, STATE_LEN) int64: the cached rows, and one ``evaluator.evaluate`` call for the
        others, which are then cached. Two threads may call it at once (the pipelined
        search of one game does)."""
        states = np.asarray(states)
        if states.ndim == 1:
            states = states[None]
        b = states.shape[0]
        keys = self.keys(states)
        slots = (keys.view(np.uint64) & np.uint64(self.capacity - 1)).astype(np.int64)
        priors = np.empty((b, self.num_actions), dtype=np.float32)
        values = np.empty(b, dtype=np.float32)
        wdl = np.empty((b, 3), dtype=np.float32)
        with self._lock:  # lookups and fills whole; the network call outside, two may run at once
            hit = self._used[slots] & (self._keys[slots] == keys)
            self.lookups += b
            h = np.flatnonzero(hit)
            self.hits += h.size
            priors[h] = self._priors[slots[h]]
            values[h] = self._values[slots[h]]
            wdl[h] = self._wdl[slots[h]]
        if h.size == b:
            return priors, values, wdl
        miss = np.flatnonzero(~hit)
        p_miss, v_miss, w_miss = self.evaluator.evaluate(np.ascontiguousarray(states[miss]))
        priors[miss] = p_miss
        values[miss] = v_miss
        wdl[miss] = w_miss
        ms = slots[miss]
        with self._lock:
            self._keys[ms] = keys[miss]
            self._used[ms] = True
            self._priors[ms] = p_miss
            self._values[ms] = v_miss
            self._wdl[ms] = w_miss
        return priors, values, wdl

    def clear(self) -> None:
        """Forget every entry (new network weights)."""
        with self._lock:
            self._used[:] = False


class SearchDriver:
    """Runs searches of a :class:`BatchedMCTS` with an evaluator (see the module docstring).

    Args:
        mcts: the trees (any number of game slots).
        evaluator: ``evaluate(states (L, STATE_LEN) int64) -> (priors (L, A), values (L,), wdl)``
            (``takzero.nn.inference.Evaluator``, a :class:`CachedEvaluator` or a test
            evaluator); may be replaced between searches (new weights).
        chunk: simulations per chunk of a timed search (see the module docstring).

    Raises ValueError for a chunk < 1.
    """

    def __init__(self, mcts: BatchedMCTS, evaluator: Evaluator, chunk: int = DEFAULT_CHUNK) -> None:
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        self.mcts = mcts
        self.evaluator = evaluator
        self.chunk = int(chunk)
        #: the largest chunk (chunks double up to it; each costs one ``begin_search``)
        self.max_chunk = max(self.chunk, MAX_CHUNK)
        self.last_seconds = 0.0
        self._nodes: dict[int, int] = {}  # simulations of the last chunked search, per game
        #: two batches in flight (``BatchedMCTS.run(pipelined=True)``): the network on a second
        #: thread while the next batch is selected; players turn it on with two threads or more
        self.pipelined = False

    def run(
        self,
        games: Sequence[int] | np.ndarray | None = None,
        limit: Limit | None = None,
        add_noise: bool | None = None,
        leaves: int | None = None,
        side: int = 0,
        on_chunk: Callable[[int, float], bool | None] | None = None,
        chunked: bool = False,
    ) -> SearchStats:
        """Search ``games`` (default: every active slot) until ``limit`` ends it.

        Args:
            games: slot indices.
            limit: ``nodes`` is the budget of every game (None: the config's budgets, playout cap
                included); a time budget (``limit.move_seconds(side)``) and ``stop`` end it
                early (chunked, see the module docstring). None: the config's budgets.
            add_noise: root noise (default ``config.root_noise``).
            leaves: leaves per game per network call (1..``config.leaves_per_step``; None: the
                config's).
            side: the side to move, for a clock limit (0 white, 1 black).
            on_chunk: called after each chunk of a chunked search with (simulations done in the
                first game, seconds); a True return ends the search.
            chunked: search in chunks even without a time limit or stop flag (for ``on_chunk``
                reports during a node-limited search).

        Returns the step statistics (:class:`~takzero.search.mcts.SearchStats`). A proven root
        of a one-game search ends it early.

        Raises ValueError for bad slots or ``leaves``; RuntimeError when a step is pending.
        """
        limit = limit or Limit()
        mcts = self.mcts
        t0 = time.perf_counter()
        seconds = limit.move_seconds(side)
        if games is None:
            games = mcts.active_games()
        games = np.asarray(games, dtype=np.int64).reshape(-1)
        self._nodes = {}
        if seconds is None and limit.stop is None and not chunked:
            stats = mcts.run(self.evaluator, games, add_noise, limit.nodes, leaves, pipelined=self.pipelined)
            self.last_seconds = stats.total_seconds
            return stats
        totals = dict.fromkeys(games.tolist(), 0)
        stats = SearchStats()
        deadline = t0 + seconds if seconds is not None else None
        k = leaves or mcts.config.leaves_per_step
        chunk = max(self.chunk, 4 * k)
        first = int(games[0]) if games.size else 0
        done = 0
        while True:
            n = chunk if limit.nodes is None else min(chunk, limit.nodes - done)
            stats.add(mcts.run(self.evaluator, games, add_noise, n, leaves, limit.stop, deadline,
                               pipelined=self.pipelined))
            for g in totals:
                totals[g] += mcts.simulations_done(g)
            done = totals.get(first, 0)
            elapsed = time.perf_counter() - t0
            finished = (
                (limit.nodes is not None and done >= limit.nodes)
                or limit.stopped()
                or (deadline is not None and t0 + elapsed >= deadline)
            )
            if not finished and games.size == 1 and mcts.root_proven(first) is not None:
                finished = True
            if on_chunk is not None and on_chunk(done, elapsed):
                finished = True
            if finished or not mcts.is_active(first):
                break
            chunk = min(max(chunk, done), self.max_chunk)  # chunks end at chunk * 2**i nodes
        self._nodes = totals
        stats.total_seconds = self.last_seconds = time.perf_counter() - t0
        return stats

    def nodes(self, g: int) -> int:
        """Simulations of slot ``g`` in the last :meth:`run` (all its chunks)."""
        return self._nodes.get(int(g), self.mcts.simulations_done(g))

    def outcome(
        self, g: int, temperature: float | None = None, rng=None, policy: bool = False,
        pv_limit: int = 32, choose: bool = True,
    ) -> SearchOutcome:
        """The readouts of slot ``g`` after :meth:`run`: the move (``temperature`` None: the
        config's schedule; 0: the most visited; a sampled move draws from ``rng``, else from
        the slot's own stream), root value, proof, PV (starting with the move, at most
        ``pv_limit`` plies), simulations, and with ``policy`` the policy target. ``choose``
        False leaves the move (-1) and the PV (empty) out, so that a caller that may not play
        (self-play's resignation) does not draw from the slot's random stream."""
        mcts = self.mcts
        move = int(mcts.choose_move(g, temperature=temperature, rng=rng)) if choose else -1
        pv = (tuple(mcts.principal_variation(g, move, pv_limit)) or (move,)) if choose else ()
        actions = probs = None
        if policy:
            actions, probs = mcts.policy_target(g)
        return SearchOutcome(
            game=int(g),
            move=move,
            value=float(mcts.root_value(g)),
            proven=mcts.root_proven(g),
            pv=pv,
            nodes=self.nodes(g),
            depth=len(pv),
            seconds=self.last_seconds,
            full=mcts.is_full_search(g),
            policy_actions=actions,
            policy_probs=probs,
        )
