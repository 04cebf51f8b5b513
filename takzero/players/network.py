"""The network player: MCTS (``takzero.search``) guided by a policy/value network, for matches,
the play CLI and the TEI engine. It keeps its own clock (:meth:`NetworkPlayer.think`: chunks of
simulations until the node or time limit, or a stop flag).

torch and the search are imported when a network player is built, so that importing
``takzero.players`` for a baseline stays quick.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import replace

import numpy as np

from takzero.game.position import Position
from takzero.players.base import BasePlayer, PlayerMove, Progress
from takzero.players.tactics import (
    answer_proven_win,
    avoid_tinue,
    check_tinue_nodes,
    ranked_by_visits,
)

#: Simulations per move of :class:`NetworkPlayer` unless told otherwise.
DEFAULT_NETWORK_SIMULATIONS = 400
#: torch CPU threads for a batch-1 search (:func:`set_search_threads`): more threads only add
#: synchronisation to evaluations of one position (on 2 busy cores one evaluation took 54 ms with
#: torch's default thread count against 1.9 ms with one thread).
DEFAULT_SEARCH_THREADS = 1
#: Simulations per chunk of :meth:`NetworkPlayer.think`: the stop flag and the clock are checked
#: between chunks (a chunk costs that many network calls of batch 1).
NETWORK_CHUNK = 32


_threads_chosen = False  # set_search_threads was called in this process


def set_search_threads(threads: int | None = DEFAULT_SEARCH_THREADS) -> None:
    """Set torch's CPU thread count for network searches of batch 1: the one place where the
    library, ``takzero.play`` and the TEI engine choose it. ``threads`` >= 1 sets it; 0 or None
    leaves torch's setting. The setting is per process (``torch.set_num_threads``); once a
    command line has called this, :meth:`NetworkPlayer.load` keeps its choice instead of
    applying :data:`DEFAULT_SEARCH_THREADS`. Raises ValueError for a negative count."""
    global _threads_chosen
    if threads is not None and threads < 0:
        raise ValueError(f"threads must be >= 0 (0: torch's default), got {threads}")
    _threads_chosen = True
    if not threads:
        return
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(int(threads))


def _default_search_threads() -> None:
    """:data:`DEFAULT_SEARCH_THREADS` unless the process chose with :func:`set_search_threads`."""
    if not _threads_chosen:
        set_search_threads(DEFAULT_SEARCH_THREADS)


def _warn_komi_mismatch(player_name: str, model_half_komi: int | None, half_komi: int,
                        warned: set[int]) -> None:
    """Warn (``warnings.warn``, once per player and komi) that a network trained for one komi
    plays another: its value head judges flat counts with the wrong komi."""
    if model_half_komi is None or model_half_komi == half_komi or half_komi in warned:
        return
    warned.add(half_komi)
    warnings.warn(
        f"{player_name} was trained for komi {model_half_komi / 2:g} and plays a game with komi "
        f"{half_komi / 2:g}; its values may be off near the end of the game",
        KomiMismatchWarning,
        stacklevel=3,
    )


class KomiMismatchWarning(UserWarning):
    """A network trained for one komi plays a position with another."""


class NetworkPlayer(BasePlayer):
    """A network with MCTS (``takzero.search.BatchedMCTS``, one game slot) for evaluation, play and
    the TEI engine: no Dirichlet noise, no playout cap, the most visited move (ties: higher Q,
    then higher prior; a proven win is taken at once).

    Args:
        evaluator: evaluates positions like ``takzero.nn.inference.Evaluator``:
            ``evaluate(states (B, STATE_LEN) int64) -> (priors (B, A) float32, values (B,),
            wdl (B, 3))`` from the side to move's view, with ``size`` (the board size it plays)
            and optionally ``metadata`` (``half_komi``, ``run_name``, ``generation``).
        simulations: simulations per move for :meth:`choose` (>= 1).
        seconds: time budget per move for :meth:`choose` (None: none); with both, whichever
            runs out first ends the search.
        config: search settings (``takzero.search.SearchConfig``; default its
            ``evaluation()`` copy); noise is always off here.
        reuse_tree: keep the subtree of the moves played (``observe``) for the next search.
        tinue_nodes: node budget of the tinuë checks around each search
            (:mod:`takzero.players.tactics`: a proven forced road is played at once, a move
            after which the opponent has one is avoided); None: ``config.tinue_nodes``; 0: off.
        seed, name: as :class:`BasePlayer` (the name defaults to ``<run_name>-g<generation>``
            from the metadata, else ``network``).

    :class:`PlayerMove`: ``value`` = root value in [-1, 1] (exact when proven), ``wdl`` = the
    search value spread around the network's draw probability at the root (``d`` = that draw
    probability capped at ``1 - |v|``, ``w = (1 - d + v) / 2``, ``l = (1 - d - v) / 2``; exact
    when proven), ``nodes`` = simulations of this search, ``pv`` = most visited line,
    ``info`` = root visits of the move, tree nodes, proven result, seconds.

    A game (:meth:`reset`, which every game loop, ``play`` and the TEI engine call) with another
    komi than the one the network was trained for (its ``half_komi`` metadata) gives a
    :class:`KomiMismatchWarning` (``warnings.warn``, once per komi), as the TEI engine says it
    with ``info string``.

    Raises ValueError for bad settings, a finished position, or a position of another board size
    than the network's.
    """

    name = "network"

    def __init__(
        self,
        evaluator,
        simulations: int = DEFAULT_NETWORK_SIMULATIONS,
        seconds: float | None = None,
        config=None,
        reuse_tree: bool = True,
        tinue_nodes: int | None = None,
        seed: int = 0,
        name: str | None = None,
    ) -> None:
        from takzero.search import SearchConfig

        if simulations < 1:
            raise ValueError(f"simulations must be >= 1, got {simulations}")
        if seconds is not None and seconds <= 0:
            raise ValueError(f"seconds must be > 0, got {seconds}")
        meta = dict(getattr(evaluator, "metadata", None) or {})
        if name is None:
            run, gen = meta.get("run_name"), meta.get("generation")
            name = f"{run}-g{gen}" if run and gen is not None else "network"
        super().__init__(seed, name)
        self.evaluator = evaluator
        self.metadata = meta
        self.model_size = int(getattr(evaluator, "size", meta.get("size", 0)))
        self.model_half_komi: int | None = (
            int(meta["half_komi"]) if meta.get("half_komi") is not None else None
        )
        self.simulations = int(simulations)
        self.seconds = seconds
        self.reuse_tree = bool(reuse_tree)
        base = (config or SearchConfig()).evaluation()
        if tinue_nodes is not None:
            base = replace(base, tinue_nodes=check_tinue_nodes(tinue_nodes))
        self.config = replace(base, root_noise=False, reuse_tree=self.reuse_tree)
        self.tinue_nodes = self.config.tinue_nodes
        self._mcts = None
        self._valid = False  # the tree's root is the position the player was last told about
        self._draw_cache: dict[int, float] = {}
        self._komi_warned: set[int] = set()  # komis already warned about (KomiMismatchWarning)

    @classmethod
    def load(
        cls,
        source,
        simulations: int = DEFAULT_NETWORK_SIMULATIONS,
        device: str = "cpu",
        threads: int | None = None,
        **kwargs,
    ) -> NetworkPlayer:
        """A player for ``source``: an exported file (TorchScript ``.pt`` or ``.onnx``), a
        training checkpoint (path or loaded dict ``{'model_config', 'model_state', ...}``) or an
        evaluator. ``threads``: torch CPU threads for its batch-1 searches
        (:func:`set_search_threads`; 0 leaves torch's setting; None: the process's choice if it
        made one, else :data:`DEFAULT_SEARCH_THREADS`, one).
        ``kwargs`` go to the constructor. Raises OSError / ValueError / RuntimeError for a file
        that cannot be used."""
        if threads is None:
            _default_search_threads()
        else:
            set_search_threads(threads)
        if hasattr(source, "evaluate"):
            return cls(source, simulations=simulations, **kwargs)
        from takzero.nn.inference import Evaluator

        if isinstance(source, dict):
            ev = Evaluator.from_checkpoint(source, device=device)
        else:
            ev = Evaluator.load(source, device=device)
        return cls(ev, simulations=simulations, **kwargs)

    # -- Player interface ---------------------------------------------------------------------

    def reset(self, size: int, half_komi: int, seed: int | None = None) -> None:
        """A new game (drops the tree); a :class:`KomiMismatchWarning` when ``half_komi`` is not
        the network's. Raises ValueError for a size the network does not play."""
        if int(size) != self.model_size:
            raise ValueError(
                f"this network plays {self.model_size}x{self.model_size}, not {size}x{size}"
            )
        super().reset(size, half_komi, seed)
        self._valid = False
        self._draw_cache.clear()
        _warn_komi_mismatch(self.name, self.model_half_komi, int(half_komi), self._komi_warned)

    def choose(self, position: Position) -> PlayerMove:
        """Search with ``simulations`` (and ``seconds`` if set) and return the move."""
        return self.think(position, nodes=self.simulations, seconds=self.seconds)

    def observe(self, position: Position, move: int) -> None:
        """Tree reuse: if the tree's root is ``position``, the subtree of ``move`` becomes the
        tree; otherwise the next search starts a fresh tree."""
        mcts = self._mcts
        if not (self.reuse_tree and self._valid and mcts is not None and mcts.is_active(0)):
            self._valid = False
            return
        if not np.array_equal(mcts.root_state(0), position.state):
            self._valid = False
            return
        try:
            mcts.advance(0, int(move))
        except ValueError:
            self._valid = False
            return
        self._valid = mcts.is_active(0)

    @property
    def tree_nodes(self) -> int:  # type: ignore[override]
        """The node budget of the search tree (``SearchConfig.node_budget``)."""
        return int(self.config.node_budget)

    def set_tree_nodes(self, nodes: int) -> None:
        """Search trees of ``nodes`` nodes from the next search on (the tree is dropped).
        Raises ValueError below ``num_actions(size) + 1`` (a root must fit)."""
        from takzero.game.core import num_actions

        need = num_actions(self.model_size) + 1
        if nodes < need:
            raise ValueError(f"the tree needs at least {need} nodes on {self.model_size}x{self.model_size}, got {nodes}")
        self.config = replace(self.config, node_budget=int(nodes))
        self._mcts = None
        self._valid = False

    # -- searching ----------------------------------------------------------------------------

    def _tree_for(self, position: Position):
        from takzero.search import BatchedMCTS

        if self._mcts is None:
            self._mcts = BatchedMCTS(1, self.model_size, self.config, seed=self._next_seed())
        mcts = self._mcts
        if not (self._valid and np.array_equal(mcts.root_state(0), position.state)):
            mcts.reset(0, position.state)
        self._valid = mcts.is_active(0)
        return mcts

    def _draw_probability(self, position: Position) -> float:
        key = position.hash
        if key not in self._draw_cache:
            if len(self._draw_cache) > 4096:
                self._draw_cache.clear()
            _, _, wdl = self.evaluator.evaluate(position.state[None].copy())
            self._draw_cache[key] = float(np.asarray(wdl)[0, 1])
        return self._draw_cache[key]

    def _pv(self, mcts, first_move: int, limit: int = 32) -> tuple[int, ...]:
        """Most visited line from the root, starting with the chosen move."""
        return tuple(mcts.principal_variation(0, first_move, limit)) or (int(first_move),)

    def _wdl(self, position: Position, value: float) -> tuple[float, float, float]:
        """The value spread around the network's draw probability at ``position`` (see the
        class docstring); exact (one-hot) at +-1."""
        v = max(-1.0, min(1.0, value))
        d = min(max(self._draw_probability(position), 0.0), 1.0 - abs(v))
        return ((1.0 - d + v) / 2.0, d, (1.0 - d - v) / 2.0)

    def _lines(
        self, mcts, position: Position, move: int, answer_value: float, multipv: int
    ) -> tuple[PlayerMove, ...]:
        """The ``multipv`` best root moves (``move`` first, then by visits) as answers: root Q
        as value, root visits as nodes, most visited line as PV. Empty for ``multipv`` <= 1."""
        if multipv <= 1:
            return ()
        moves, visits = mcts.root_visits(0)
        q = mcts.root_q(0)
        out = []
        for code in ranked_by_visits(move, moves, visits)[:multipv]:
            i = int(np.flatnonzero(moves == code)[0])
            if int(visits[i]) == 0 and code != move:
                break
            v = float(q[i]) if np.isfinite(q[i]) else answer_value
            out.append(
                PlayerMove(
                    int(code),
                    value=v,
                    wdl=self._wdl(position, v),
                    nodes=int(visits[i]),
                    pv=self._pv(mcts, int(code)),
                )
            )
        return tuple(out)

    def _answer(
        self, mcts, position: Position, done: int, seconds: float, multipv: int = 1
    ) -> PlayerMove:
        move = int(mcts.choose_move(0, temperature=0.0))
        moves, visits = mcts.root_visits(0)
        value = float(mcts.root_value(0))
        proven = mcts.root_proven(0)
        if proven is not None:
            wdl = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))[1 - int(proven)]
        else:
            wdl = self._wdl(position, value)
        hit = np.flatnonzero(moves == move)
        return PlayerMove(
            move,
            value=value,
            wdl=wdl,
            nodes=int(done),
            pv=self._pv(mcts, move),
            info={
                "visits": int(visits[hit[0]]) if hit.size else 0,
                "tree_nodes": mcts.tree_size(0),
                "proven": proven,
                "seconds": seconds,
            },
            lines=self._lines(mcts, position, move, value, multipv),
        )

    def _run_chunk(
        self, mcts, simulations: int, stop: threading.Event | None, deadline: float | None
    ) -> int:
        """Run one search of ``simulations`` simulations on the tree, one network call per step,
        ending it early when ``stop`` is set or ``time.perf_counter()`` passes ``deadline``
        (checked after every step; the tree stays consistent, every finished step is backed
        up). Returns the simulations run."""
        mcts.begin_search(add_noise=False, simulations=simulations)
        while True:
            states, _ = mcts.select_leaves()
            if states.shape[0] == 0:
                break
            priors, values, _ = self.evaluator.evaluate(states)
            mcts.expand_backup(priors, values)
            if (stop is not None and stop.is_set()) or (
                deadline is not None and time.perf_counter() >= deadline
            ):
                break
        return mcts.simulations_done(0)

    def think(
        self,
        position: Position,
        nodes: int | None = None,
        seconds: float | None = None,
        stop: threading.Event | None = None,
        on_progress: Progress | None = None,
        multipv: int = 1,
    ) -> PlayerMove:
        """An anytime search of ``position``: runs chunks of :data:`NETWORK_CHUNK` simulations
        until ``nodes`` simulations are done, the next chunk would overrun ``seconds``, or
        ``stop`` (a ``threading.Event``) is set. ``stop`` and the end of ``seconds`` are also
        checked after every simulation (one network call), so a search ends within one
        simulation of either. ``multipv`` > 1: the best root moves in ``lines``. Without ``nodes`` and ``seconds`` it runs until
        ``stop`` is set (or ``simulations`` when there is no ``stop``). At least one chunk runs.

        A proven root (a forced win, loss or draw found by the search) ends the search early
        (without limits: once ``stop`` is set). With ``tinue_nodes`` > 0 the tinuë prover runs
        first: a proven forced road is answered without searching (``nodes`` 0, ``info["mate"]``);
        after the search, a move after which the opponent has a proven forced road is replaced
        by the most visited move without one (:func:`takzero.players.tactics.avoid_tinue`). ``on_progress(answer, simulations)`` is called
        after the chunks that reach 64, 128, 256, ... simulations (a deterministic schedule) and
        after the last one. Returns the
        :class:`PlayerMove`. Raises ValueError (finished position, another board size).
        """
        self._check_open(position)
        if position.size != self.model_size:
            raise ValueError(
                f"this network plays {self.model_size}x{self.model_size}, "
                f"not {position.size}x{position.size}"
            )
        if nodes is None and seconds is None and stop is None:
            nodes = self.simulations
        win = answer_proven_win(position, self.tinue_nodes, nodes, seconds, stop, on_progress)
        if win is not None:
            return win
        mcts = self._tree_for(position)
        t0 = time.perf_counter()
        deadline = t0 + seconds if seconds is not None else None
        done = 0
        next_report = 64
        answer = None
        while True:
            chunk = NETWORK_CHUNK if nodes is None else min(NETWORK_CHUNK, nodes - done)
            ran = self._run_chunk(mcts, chunk, stop, deadline)
            done += ran
            elapsed = time.perf_counter() - t0
            finished = (
                (nodes is not None and done >= nodes)
                or (stop is not None and stop.is_set())
                or (seconds is not None and elapsed * (done + chunk) / max(done, 1) > seconds)
            )
            if not finished and mcts.root_proven(0) is not None:
                # Solved: more search changes nothing. Without limits, wait for the stop flag.
                if nodes is None and seconds is None and stop is not None:
                    stop.wait()
                finished = True
            if on_progress is not None and (finished or done >= next_report):
                while next_report <= done:
                    next_report *= 2
                answer = self._answer(mcts, position, done, elapsed, multipv)
                on_progress(answer, done)
            if finished:
                break
        if answer is None or answer.nodes != done:
            answer = self._answer(mcts, position, done, time.perf_counter() - t0, multipv)
        ranked = ranked_by_visits(answer.code, *mcts.root_visits(0))
        return avoid_tinue(
            position,
            answer,
            ranked,
            self.tinue_nodes,
            pv_of=lambda m: self._pv(mcts, m),
            stop=stop,
        )


__all__ = [
    "DEFAULT_NETWORK_SIMULATIONS",
    "DEFAULT_SEARCH_THREADS",
    "NETWORK_CHUNK",
    "KomiMismatchWarning",
    "NetworkPlayer",
    "set_search_threads",
]
