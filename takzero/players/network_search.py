"""The one search path of a network in play: :class:`NetworkSearch`, G game slots of a
``BatchedMCTS`` driven by ``takzero.search.driver.SearchDriver``, with the tinuë checks of
:mod:`takzero.players.tactics` around each search; the network player searches one slot
(``takzero.players.network.NetworkPlayer.think``) and a batched match many
(:meth:`NetworkSearch.choose_many`). :func:`auto_leaves` chooses the leaves per network call.

torch and the search are imported when a search is built, so that importing ``takzero.players``
for a baseline stays quick.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from takzero.game.position import Position
from takzero.players.base import PlayerMove, Progress
from takzero.players.tactics import (
    answer_proven_win,
    avoid_flat_loss,
    avoid_tinue,
    check_flat_endgame_nodes,
    flat_endgame_root,
    flat_endgame_win,
    proven_win,
    ranked_by_visits,
)
from takzero.search.driver import DEFAULT_CHUNK
from takzero.search.limit import MIN_MOVE_SECONDS, Limit

#: The share of a timed move's budget (``Limit`` seconds or clock) that each flat-endgame check
#: may take (:meth:`NetworkSearch.think`): the root's, and as much kept from the search for the
#: check of its move; the search gets the rest.
FLAT_ENDGAME_TIME_SHARE = 0.25

if TYPE_CHECKING:
    from takzero.search.mcts import SearchStats

__all__ = [
    "DEFAULT_LEAVES",
    "DEFAULT_NETWORK_SIMULATIONS",
    "FIRST_GUESS_NPS",
    "FLAT_ENDGAME_TIME_SHARE",
    "MAX_LEAVES",
    "MIN_CALLS_PER_SEARCH",
    "NETWORK_CHUNK",
    "REUSE_FULL_SHARE",
    "NetworkSearch",
    "auto_leaves",
]

#: Simulations per move of :class:`~takzero.players.network.NetworkPlayer` and of a batched
#: search unless told otherwise.
DEFAULT_NETWORK_SIMULATIONS = 400
#: Simulations of the first chunk of a search that reports progress (at least four network calls
#: of ``leaves``; the chunks then double): the progress reports come between chunks; the stop
#: flag and the clock are checked after every network call (``takzero.search.driver``).
NETWORK_CHUNK = DEFAULT_CHUNK
#: Leaves per network call of a one-game search (virtual loss): where the batch curve of the
#: shipped networks in onnxruntime has flattened (scripts/bench_play.py, docs/design.md).
DEFAULT_LEAVES = 16
#: The most leaves per network call a player's tree is built for.
MAX_LEAVES = 32
#: A search keeps at least this many network calls (:func:`auto_leaves`), so that virtual loss
#: does not flatten a short search. Measured at equal nodes (400 a move, 5x5 shipped network,
#: 200 paired games, scripts/bench_leaves.py): 16 leaves a call (25 calls) against 1 scored
#: 51-29-120, Elo -125 [-161, -91]; 4 leaves (100 calls) 84-13-103, Elo -33 [-64, -5].
MIN_CALLS_PER_SEARCH = 100
#: A kept tree fuller than this share of its node budget is not reused: the next search starts a
#: fresh tree (a full tree ends a search, so reusing it would end the next one at once).
REUSE_FULL_SHARE = 0.9
#: Simulations/s :meth:`NetworkSearch.think` assumes for its first timed search (to choose the
#: leaves per call from the time budget; later searches use the speed of the one before).
FIRST_GUESS_NPS = 2000


def auto_leaves(nodes: int | None, most: int = DEFAULT_LEAVES) -> int:
    """Leaves per network call for a one-game search of about ``nodes`` simulations (the node
    limit, or what the time budget allows at the last search's speed; None: no limit):
    ``most`` (:data:`DEFAULT_LEAVES`), fewer when that would leave fewer than
    :data:`MIN_CALLS_PER_SEARCH` network calls (``nodes // MIN_CALLS_PER_SEARCH``, at least 1)."""
    if nodes is None:
        return int(most)
    return max(1, min(int(most), int(nodes) // MIN_CALLS_PER_SEARCH))


class NetworkSearch:
    """Searches of one network over ``num_games`` game slots, with the root tinuë checks: the one
    search path of the network player (one slot, :meth:`think`) and of the network side of a
    batched match (many slots, :meth:`choose_many`). Implements the batched-search protocol of
    ``takzero.players.base`` (``reset`` / ``observe`` / ``choose_many``).

    Args:
        evaluator: as :class:`NetworkPlayer`.
        config: search settings (noise off is the caller's business), with ``leaves_per_step``
            the most leaves per network call any search may use.
        num_games: slots G.
        size: board size.
        seed: seeds the slots' random streams.
        simulations: simulations per move of :meth:`choose_many` (>= 1).
        tinue_nodes: prover budget of the tinuë checks (0: off).
        flat_endgame_nodes: node budget of the flat-endgame checks
            (:func:`takzero.players.tactics.flat_endgame_root`, :func:`avoid_flat_loss`; 0: off).
        sampling_plies: :meth:`choose_many` samples the first plies after the opening from the
            visit counts with temperature 1 (games differ); later moves take the most visited.
        name: for :class:`PlayerMove` consumers.
    """

    def __init__(self, evaluator, config, num_games: int, size: int, seed: int = 0,
                 simulations: int = DEFAULT_NETWORK_SIMULATIONS, tinue_nodes: int = 0,
                 sampling_plies: int = 0, name: str = "network", flat_endgame_nodes: int = 0) -> None:
        from takzero.search import BatchedMCTS
        from takzero.search.driver import SearchDriver

        if simulations < 1:
            raise ValueError(f"simulations must be >= 1, got {simulations}")
        self.name = name
        self.size = int(size)
        self.config = config
        self.simulations = int(simulations)
        self.tinue_nodes = int(tinue_nodes)
        self.flat_endgame_nodes = check_flat_endgame_nodes(flat_endgame_nodes)
        self.sampling_plies = int(sampling_plies)
        self.mcts = BatchedMCTS(num_games, self.size, config, seed=seed)
        self.driver = SearchDriver(self.mcts, evaluator, chunk=NETWORK_CHUNK)
        self._valid = np.zeros(num_games, dtype=bool)  # slot's root is the position last told
        self._draw_cache: dict[int, float] = {}
        #: step statistics of the last search (network calls, leaves, seconds)
        self.last_stats: SearchStats | None = None
        self._nps: float | None = None  # simulations/s of the last timed-enough search

    @property
    def evaluator(self):
        return self.driver.evaluator

    @evaluator.setter
    def evaluator(self, ev) -> None:
        self.driver.evaluator = ev
        self._draw_cache.clear()

    # -- slots ------------------------------------------------------------------------------

    def reset(self, g: int, position: Position) -> None:
        """Slot ``g`` holds ``position`` with a fresh tree."""
        self.mcts.reset(g, position.state)
        self._valid[g] = self.mcts.is_active(g)

    def root_is(self, g: int, position: Position) -> bool:
        """True if slot ``g``'s tree is rooted at ``position``."""
        return bool(self._valid[g]) and np.array_equal(self.mcts.root_state(g), position.state)

    def observe(self, g: int, position: Position, move: int) -> None:
        """``move`` was played in ``position`` in game ``g``: with tree reuse its subtree becomes
        the tree; a slot whose root is not ``position`` starts afresh at its next search."""
        mcts = self.mcts
        if not (self._valid[g] and mcts.is_active(g) and self.root_is(g, position)):
            self._valid[g] = False
            return
        try:
            mcts.advance(g, int(move))
        except ValueError:
            self._valid[g] = False
            return
        self._valid[g] = mcts.is_active(g)

    def forget(self) -> None:
        """Every slot starts afresh at its next search (a new game)."""
        self._valid[:] = False
        self._draw_cache.clear()

    def _root(self, g: int, position: Position) -> None:
        """Slot ``g`` rooted at ``position``: the kept tree when it is, unless that tree is
        nearly full (a search on it could not grow: it would stop at once, see :meth:`think`)
        or holds leaves frozen when a tree was full (``BatchedMCTS.frozen_nodes``: never
        expanded, each visit a backup without a network call, so a search on them counts
        nodes it does not search and no new overflow ends it), else a fresh one."""
        mcts = self.mcts
        if (
            not self.root_is(g, position)
            or mcts.tree_size(g) > REUSE_FULL_SHARE * self.config.node_budget
            or (mcts.overflow(g) > 0 and mcts.frozen_nodes(g) > 0)  # scanned only after a fill
        ):
            self.reset(g, position)

    # -- readouts ---------------------------------------------------------------------------

    def _draw_probability(self, position: Position) -> float:
        key = position.hash
        if key not in self._draw_cache:
            if len(self._draw_cache) > 4096:
                self._draw_cache.clear()
            _, _, wdl = self.evaluator.evaluate(position.state[None].copy())
            self._draw_cache[key] = float(np.asarray(wdl)[0, 1]) if wdl is not None else 0.0
        return self._draw_cache[key]

    def wdl(self, position: Position, value: float) -> tuple[float, float, float]:
        """The value spread around the network's draw probability at ``position`` (see
        :class:`NetworkPlayer`); exact (one-hot) at +-1."""
        v = max(-1.0, min(1.0, value))
        d = min(max(self._draw_probability(position), 0.0), 1.0 - abs(v))
        return ((1.0 - d + v) / 2.0, d, (1.0 - d - v) / 2.0)

    def pv(self, g: int, first_move: int, limit: int = 32) -> tuple[int, ...]:
        """Most visited line from slot ``g``'s root, starting with ``first_move``."""
        return tuple(self.mcts.principal_variation(g, first_move, limit)) or (int(first_move),)

    def _lines(self, g: int, position: Position, move: int, answer_value: float,
               multipv: int) -> tuple[PlayerMove, ...]:
        """The ``multipv`` best root moves (``move`` first, then by visits) as answers: root Q
        as value, root visits as nodes, most visited line as PV. Empty for ``multipv`` <= 1."""
        if multipv <= 1:
            return ()
        moves, visits = self.mcts.root_visits(g)
        q = self.mcts.root_q(g)
        out = []
        for code in ranked_by_visits(move, moves, visits)[:multipv]:
            i = int(np.flatnonzero(moves == code)[0])
            if int(visits[i]) == 0 and code != move:
                break
            v = float(q[i]) if np.isfinite(q[i]) else answer_value
            out.append(PlayerMove(int(code), value=v, wdl=self.wdl(position, v),
                                  nodes=int(visits[i]), pv=self.pv(g, int(code))))
        return tuple(out)

    def answer(self, g: int, position: Position, done: int, seconds: float,
               multipv: int = 1) -> PlayerMove:
        """Slot ``g``'s answer so far: the most visited move (a proven win first), root value and
        WDL, ``done`` as nodes, the PV, ``info`` (root visits of the move, tree nodes, proof,
        seconds) and with ``multipv`` > 1 the best lines."""
        out = self.driver.outcome(g, temperature=0.0)
        moves, visits = self.mcts.root_visits(g)
        if out.proven is not None:
            wdl = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))[1 - int(out.proven)]
        else:
            wdl = self.wdl(position, out.value)
        hit = np.flatnonzero(moves == out.move)
        return PlayerMove(
            out.move,
            value=out.value,
            wdl=wdl,
            nodes=int(done),
            pv=out.pv,
            info={
                "visits": int(visits[hit[0]]) if hit.size else 0,
                "tree_nodes": self.mcts.tree_size(g),
                "proven": out.proven,
                "seconds": seconds,
            },
            lines=self._lines(g, position, out.move, out.value, multipv),
        )

    # -- searching --------------------------------------------------------------------------

    def think(self, g: int, position: Position, limit: Limit, on_progress: Progress | None = None,
              multipv: int = 1, leaves: int | None = None) -> PlayerMove:
        """An anytime search of ``position`` in slot ``g`` (the tree is kept when its root is
        ``position``): see :meth:`NetworkPlayer.think`. ``leaves``: per network call (None:
        :func:`auto_leaves` of the node limit, at most ``config.leaves_per_step``)."""
        t0 = time.perf_counter()
        nodes = limit.nodes
        seconds = limit.move_seconds(position.side_to_move)
        stop = limit.stop
        if nodes is None and seconds is None and stop is None:
            nodes = self.simulations
        win = answer_proven_win(position, self.tinue_nodes, nodes, seconds, stop, on_progress)
        if win is not None:
            return win
        # a timed move's flat-endgame checks come out of its budget: the root's at most
        # FLAT_ENDGAME_TIME_SHARE of it, as much kept back from the search for its move's
        deadline = root_deadline = None
        if seconds is not None:
            deadline = t0 + seconds
            root_deadline = min(deadline, time.perf_counter() + FLAT_ENDGAME_TIME_SHARE * seconds)
        flat = None
        if not (stop is not None and stop.is_set()):
            flat = flat_endgame_root(position, self.flat_endgame_nodes, deadline=root_deadline)
        win = flat_endgame_win(flat)
        if win is not None:
            if on_progress is not None:
                on_progress(win, 0)
            if nodes is None and seconds is None and stop is not None:
                stop.wait()  # no limits (go infinite): answer when told to stop
            return win
        self._root(g, position)
        if seconds is not None:  # the checks so far and clearing the tree come out of the budget
            kept = FLAT_ENDGAME_TIME_SHARE * seconds if flat is not None and flat.upper > -1 else 0.0
            seconds = max(MIN_MOVE_SECONDS, seconds - (time.perf_counter() - t0) - kept)
        if leaves is None:
            expect = nodes
            if seconds is not None:  # the nodes the clock allows, at the last search's speed
                by_time = int(seconds * (self._nps or FIRST_GUESS_NPS))
                expect = by_time if expect is None else min(expect, by_time)
            leaves = auto_leaves(expect, min(DEFAULT_LEAVES, self.config.leaves_per_step))
        reported: list[PlayerMove] = []
        next_report = [64]

        overflow0 = self.mcts.overflow(g)

        def on_chunk(done: int, elapsed: float) -> bool:
            if on_progress is not None and done >= next_report[0]:
                while next_report[0] <= done:
                    next_report[0] *= 2
                reported[:] = [self.answer(g, position, done, elapsed, multipv)]
                on_progress(reported[0], done)
            # a full tree: later "simulations" would only back frozen leaves up again
            return self.mcts.overflow(g) > overflow0

        run_limit = Limit(nodes=nodes, seconds=seconds, stop=stop)
        # chunks only where progress is reported (or a clock or stop flag needs them): a plain
        # node-limited search is one search of its budget, as in a batched match
        self.last_stats = self.driver.run([g], run_limit, add_noise=False, leaves=leaves,
                                          on_chunk=on_chunk, chunked=on_progress is not None)
        done = self.driver.nodes(g)
        if self.last_stats.total_seconds > 0.05 and done > 0:
            self._nps = done / self.last_stats.total_seconds
        if self.mcts.root_proven(g) is not None and nodes is None and seconds is None and stop is not None:
            stop.wait()  # solved: more search changes nothing; without limits, wait for stop
        if reported and reported[0].nodes == done:
            answer = reported[0]
        else:
            answer = self.answer(g, position, done, self.driver.last_seconds, multipv)
            if on_progress is not None:
                on_progress(answer, done)
        if self.mcts.overflow(g) > overflow0:
            answer = replace(answer, info={**dict(answer.info), "tree_full": True})
        ranked = ranked_by_visits(answer.code, *self.mcts.root_visits(g))
        answer = avoid_tinue(position, answer, ranked, self.tinue_nodes,
                             pv_of=lambda m: self.pv(g, m), stop=stop)
        return avoid_flat_loss(position, answer, ranked, flat, self.flat_endgame_nodes,
                               pv_of=lambda m: self.pv(g, m), stop=stop, deadline=deadline)

    def choose_many(self, games: Sequence[int], positions: Sequence[Position],
                    plies: Sequence[int], rng: np.random.Generator | None = None,
                    ) -> dict[int, PlayerMove]:
        """One batched search of ``simulations`` over the games ``games`` (slots, with their
        ``positions``; ``plies``: plies since each game's opening) and the move of each (sampled
        with temperature 1 during the first ``sampling_plies`` plies, drawing from ``rng``), with
        the root value, the simulations and the PV. With ``tinue_nodes`` > 0 the tinuë checks as
        :meth:`think` makes them: a proven forced road is played without searching, and a
        searched move after which the opponent has one is replaced by the most visited move
        without one; with ``flat_endgame_nodes`` > 0 the flat-endgame checks likewise (a proved
        win played without searching, a searched move proved worse replaced)."""
        out: dict[int, PlayerMove] = {}
        flats = {}
        for g, pos in zip(games, positions, strict=True):
            self._root(g, pos)
            win = proven_win(pos, self.tinue_nodes)
            if win is None:
                flats[g] = flat_endgame_root(pos, self.flat_endgame_nodes)
                win = flat_endgame_win(flats[g])
            if win is not None:
                out[g] = win
        searched = [g for g in games if g not in out]
        if searched:
            self.driver.run(searched, Limit(nodes=self.simulations), add_noise=False)
        by_game = dict(zip(games, zip(positions, plies, strict=True), strict=True))
        for g in searched:
            pos, ply = by_game[g]
            temperature = 1.0 if ply < self.sampling_plies else 0.0
            result = self.driver.outcome(g, temperature=temperature, rng=rng)
            answer = PlayerMove(result.move, value=result.value, nodes=self.simulations,
                                pv=result.pv)
            ranked = ranked_by_visits(result.move, *self.mcts.root_visits(g))
            answer = avoid_tinue(pos, answer, ranked, self.tinue_nodes, pv_of=partial(self.pv, g))
            out[g] = avoid_flat_loss(pos, answer, ranked, flats.get(g), self.flat_endgame_nodes,
                                     pv_of=partial(self.pv, g))
        return out
