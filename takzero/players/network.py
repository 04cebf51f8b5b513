"""The network player: MCTS (``takzero.search``) guided by a policy/value network, for matches,
the play CLI, the playtak bot and the TEI engine.

:class:`~takzero.players.network_search.NetworkSearch` (its own module, re-exported here) is the
one search path of a network in play: G game slots of a ``BatchedMCTS`` driven by
``takzero.search.driver.SearchDriver``, with the tinuë checks of :mod:`takzero.players.tactics`
around each search. :class:`NetworkPlayer` thinks with one slot
(:meth:`NetworkSearch.think`: anytime, under a :class:`~takzero.search.driver.Limit`, with
``leaves`` positions per network call) and hands a batched match a many-slot one
(:meth:`NetworkPlayer.batched`: every game where it is to move searched together, one network
call per step).

Speed (scripts/bench_play.py): the player runs its network in onnxruntime where it is installed
and the network is a checkpoint or an ONNX file (``backend='auto'``; torch for TorchScript files
and GPUs), and selects :data:`DEFAULT_LEAVES` leaves per network call with virtual loss, so one
search sends batches instead of single positions.

torch and the search are imported when a network player is built, so that importing
``takzero.players`` for a baseline stays quick.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

from takzero.game.position import Position
from takzero.players.base import BasePlayer, PlayerMove, Progress, is_integer
from takzero.players.network_search import (  # re-exported: the network player's search
    DEFAULT_LEAVES,
    DEFAULT_NETWORK_SIMULATIONS,
    MAX_LEAVES,
    NETWORK_CHUNK,
    NetworkSearch,
    auto_leaves,
)
from takzero.players.tactics import check_flat_endgame_nodes, check_tinue_nodes
from takzero.search.limit import Limit

#: The players' move choice after a PUCT search (``SearchConfig.select_q_fraction``): the move
#: of highest Q among those with at least this share of the most visits. Measured on the 6x6
#: networks (docs/results.md, "The move a player plays"): +5 to +7 of the 105 6x6 tactics at 200
#: simulations, and level or better in games against the most visited move.
DEFAULT_SELECT_Q_FRACTION = 0.1
#: CPU threads of the network in play (:func:`set_search_threads`, ``NetworkPlayer.threads``):
#: one unless told otherwise (``--threads``, TEI ``Threads``); torch with its default count on
#: small batches mostly adds synchronisation (on 2 busy cores one evaluation took 54 ms with
#: torch's default thread count against 1.9 ms with one thread).
DEFAULT_SEARCH_THREADS = 1
#: Node budget of the network player's tree (``TreeNodes``; 28 bytes a node, committed by the
#: OS only when used): at 10,000 simulations/s a 6x6 search fills about 1M nodes a second.
DEFAULT_TREE_NODES = 4_000_000
#: Network runtimes of :meth:`NetworkPlayer.load` (:func:`play_evaluator`).
PLAY_BACKENDS = ("auto", "int8", "onnx", "torch")
#: What ``auto`` runs on the CPU when onnxruntime is installed.
AUTO_PLAY_BACKEND = "int8"


_threads_chosen = False  # set_search_threads was called in this process
_threads_value = DEFAULT_SEARCH_THREADS  # the count it chose (0: torch's default)


def set_search_threads(threads: int | None = DEFAULT_SEARCH_THREADS) -> None:
    """Set torch's CPU thread count for network searches of batch 1: the one place where the
    library, ``takzero.play`` and the TEI engine choose it. ``threads`` >= 1 sets it; 0 or None
    leaves torch's setting. The setting is per process (``torch.set_num_threads``); once a
    command line has called this, :meth:`NetworkPlayer.load` keeps its choice instead of
    applying :data:`DEFAULT_SEARCH_THREADS`. Raises ValueError for a negative count."""
    global _threads_chosen, _threads_value
    if threads is not None and threads < 0:
        raise ValueError(f"threads must be >= 0 (0: torch's default), got {threads}")
    _threads_chosen = True
    _threads_value = int(threads or 0)
    if not threads:
        return
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(int(threads))


_backend_value: str = "auto"  # set_play_backend's choice: what NetworkPlayer.load uses by default


def set_play_backend(backend: str) -> None:
    """The network runtime of every :meth:`NetworkPlayer.load` in this process that names none
    (``model:PATH`` players of the registry included): one of :data:`PLAY_BACKENDS`; the
    ``--backend`` of ``takzero.play`` and ``takzero.playtak``. Raises ValueError for another."""
    global _backend_value
    if backend not in PLAY_BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(PLAY_BACKENDS)}, got {backend!r}")
    _backend_value = backend


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


class BackendFallbackWarning(UserWarning):
    """The ``auto`` backend could not quantize a network and plays it in float32 instead."""


class KomiMismatchWarning(UserWarning):
    """A network trained for one komi plays a position with another."""


def player_search(**fields: object):
    """The network players' search (a ``takzero.search.SearchConfig``, its ``evaluation()``
    copy: no noise, argmax moves): :data:`DEFAULT_NETWORK_SIMULATIONS` simulations, the move of
    highest Q among those with :data:`DEFAULT_SELECT_Q_FRACTION` of the most visits, the other
    fields at ``SearchConfig``'s defaults; ``fields`` override any of them (e.g.
    ``simulations=800, tinue_nodes=0``). Raises ValueError for a name that is no field or a
    value ``SearchConfig`` refuses."""
    from takzero.search import SearchConfig

    base: dict[str, object] = {"simulations": DEFAULT_NETWORK_SIMULATIONS,
                               "select_q_fraction": DEFAULT_SELECT_Q_FRACTION}
    try:
        return SearchConfig(**{**base, **fields}).evaluation()  # type: ignore[arg-type]
    except TypeError as e:
        raise ValueError(f"player_search: {e}") from None


class NetworkPlayer(BasePlayer):
    """A network with MCTS (:class:`NetworkSearch`, one game slot) for evaluation, play and the
    TEI engine: no Dirichlet noise, no playout cap; the move of highest Q among those with at
    least :data:`DEFAULT_SELECT_Q_FRACTION` of the most visits (``config.select_q_fraction``; 0:
    the most visited move; ties: more visits, then higher prior); a proven win is taken at once.

    Args:
        evaluator: evaluates positions like ``takzero.nn.inference.Evaluator``:
            ``evaluate(states (B, STATE_LEN) int64) -> (priors (B, A) float32, values (B,),
            wdl (B, 3))`` from the side to move's view, with ``size`` (the board size it plays)
            and optionally ``metadata`` (``half_komi``, ``run_name``, ``generation``).
        simulations: simulations per move for :meth:`choose` (>= 1); None: ``config.simulations``.
        seconds: time budget per move for :meth:`choose` (None: none); with both, whichever
            runs out first ends the search.
        config: the search (``takzero.search.SearchConfig``; default :func:`player_search`:
            :data:`DEFAULT_NETWORK_SIMULATIONS` simulations, the move choice of
            :data:`DEFAULT_SELECT_Q_FRACTION`; its ``evaluation()`` copy is used); noise is
            always off here. Its ``simulations``, ``reuse_tree`` (keep the subtree of the moves
            played, ``observe``, for the next search) and ``tinue_nodes`` (node budget of the
            tinuë checks around each search, :mod:`takzero.players.tactics`: a proven forced
            road is played at once, a move after which the opponent has one is avoided; 0: off)
            and ``flat_endgame_nodes`` (node budget of the exact flat-endgame checks where the
            flat count can end the game within a few plies: a proved win is played at once, a
            searched move proved worse than the root's proved result is replaced; 0: off)
            are the player's; its ``node_budget`` is that of the trees of a batched match
            (:meth:`batched`).
        reuse_tree, tinue_nodes, flat_endgame_nodes: the config's field of that name,
            overridden (None: the config's).
        leaves: positions per network call of a search (virtual loss when > 1), 1..
            :data:`MAX_LEAVES`; None: :func:`auto_leaves` (:data:`DEFAULT_LEAVES`, fewer for
            short node limits). 1 searches exactly as one simulation per network call.
        tree_nodes: node budget of the player's own tree (None: :data:`DEFAULT_TREE_NODES`).
        cache_size: slots of a network-output cache in front of the network
            (``takzero.search.driver.CachedEvaluator``, kept for the moves of a game and
            cleared by :meth:`reset`); 0: none (the default: scripts/bench_play.py measured no
            gain, see docs/design.md).
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
        simulations: int | None = None,
        seconds: float | None = None,
        config=None,
        reuse_tree: bool | None = None,
        tinue_nodes: int | None = None,
        seed: int = 0,
        name: str | None = None,
        leaves: int | None = None,
        tree_nodes: int | None = None,
        cache_size: int = 0,
        flat_endgame_nodes: int | None = None,
    ) -> None:
        base = (config if config is not None else player_search()).evaluation()
        if simulations is None:
            simulations = base.simulations
        if not is_integer(simulations) or simulations < 1:
            raise ValueError(f"simulations must be an integer >= 1, got {simulations!r}")
        if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"seconds must be a finite number > 0, got {seconds!r}")
        if not is_integer(cache_size) or cache_size < 0:
            raise ValueError(f"cache_size must be an integer >= 0, got {cache_size!r}")
        meta = dict(getattr(evaluator, "metadata", None) or {})
        if name is None:
            run, gen = meta.get("run_name"), meta.get("generation")
            name = f"{run}-g{gen}" if run and gen is not None else "network"
        super().__init__(seed, name)
        self._evaluator = evaluator
        self.metadata = meta
        meta_size: int = meta.get("size", 0)
        self.model_size = int(getattr(evaluator, "size", meta_size))
        self.model_half_komi: int | None = (
            int(meta["half_komi"]) if meta.get("half_komi") is not None else None
        )
        self.simulations = int(simulations)
        self.seconds = seconds
        self.reuse_tree = bool(base.reuse_tree if reuse_tree is None else reuse_tree)
        self.leaves: int | None = None
        self.set_leaves(leaves)
        if tinue_nodes is not None:
            base = replace(base, tinue_nodes=check_tinue_nodes(tinue_nodes))
        if flat_endgame_nodes is not None:
            base = replace(base, flat_endgame_nodes=check_flat_endgame_nodes(flat_endgame_nodes))
        self.config = replace(base, root_noise=False, reuse_tree=self.reuse_tree,
                              simulations=self.simulations)
        self.tinue_nodes = self.config.tinue_nodes
        self.flat_endgame_nodes = self.config.flat_endgame_nodes
        self._tree_nodes = DEFAULT_TREE_NODES
        if tree_nodes is not None:
            self.set_tree_nodes(tree_nodes)
        self._search: NetworkSearch | None = None
        self._komi_warned: set[int] = set()  # komis already warned about (KomiMismatchWarning)
        self.cache_size = int(cache_size)
        self._cache = None  # the CachedEvaluator of the current runtime, if any
        self._source_evaluator = evaluator  # what set_threads rebuilds the runtime from
        #: the network runtime asked for (``load``'s ``backend``) and its CPU threads
        self.backend = "torch"
        self.threads = 1
        #: two batches in flight (``SearchDriver.pipelined``): None = with two threads or more,
        #: where two workers each select, evaluate and back up a batch, the two network calls
        #: running at once
        self.pipeline: bool | None = None

    @classmethod
    def load(
        cls,
        source,
        simulations: int | None = None,
        device: str = "cpu",
        threads: int | None = None,
        backend: str | None = None,
        **kwargs,
    ) -> NetworkPlayer:
        """A player for ``source``: an exported file (TorchScript ``.pt`` or ``.onnx``), a
        training checkpoint (path or loaded dict ``{'model_config', 'model_state', ...}``) or an
        evaluator (used as it is).

        ``backend``: the network's runtime (:func:`play_evaluator`): ``auto`` (onnxruntime when
        it is installed, the device is the CPU and the network can be exported, else torch),
        ``int8``, ``onnx`` or ``torch``; None: the process's choice (:func:`set_play_backend`,
        ``auto`` unless a command line chose). ``threads``: CPU threads of the network (onnxruntime intra-op
        threads, and torch's via :func:`set_search_threads`; 0 leaves torch's setting; None:
        the process's choice (:func:`set_search_threads`) if it made one, else one). ``kwargs``
        go to the constructor (the search as ``config=``, a ``SearchConfig``; ``simulations``
        None: the config's).
        Raises OSError / ValueError / RuntimeError for a file that cannot be used, ValueError
        for an unknown backend, ImportError for ``onnx`` without onnxruntime."""
        backend = _backend_value if backend is None else backend
        if backend not in PLAY_BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(PLAY_BACKENDS)}, got {backend!r}")
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
        player = cls(ev, simulations=simulations, **kwargs)
        player.use_backend(backend, threads or _threads_value or 1)
        return player

    @property
    def evaluator(self):
        """The network's evaluator in the runtime asked for (built at the first use after
        :meth:`use_backend` or :meth:`set_threads`; settable)."""
        if self._evaluator is None:
            net_threads = self.threads // 2 if self.pipelined else self.threads  # per worker
            self._evaluator = play_evaluator(self._source_evaluator, self.backend, max(1, net_threads))
            self._cache = None
        return self._evaluator

    @evaluator.setter
    def evaluator(self, ev) -> None:
        self._evaluator = ev

    def _search_evaluator(self):
        """The evaluator of the player's own searches: :attr:`evaluator`, behind the cache when
        ``cache_size`` > 0."""
        ev = self.evaluator
        if not self.cache_size:
            return ev
        if self._cache is None or self._cache.evaluator is not ev:
            from takzero.search.driver import CachedEvaluator

            self._cache = CachedEvaluator(ev, self.cache_size)
        return self._cache

    # -- Player interface ---------------------------------------------------------------------

    def reset(self, size: int, half_komi: int, seed: int | None = None) -> None:
        """A new game (drops the tree); a :class:`KomiMismatchWarning` when ``half_komi`` is not
        the network's. Raises ValueError for a size the network does not play."""
        if int(size) != self.model_size:
            raise ValueError(
                f"this network plays {self.model_size}x{self.model_size}, not {size}x{size}"
            )
        super().reset(size, half_komi, seed)
        if self._search is not None:
            self._search.forget()
        if self._cache is not None:
            self._cache.clear()
        _warn_komi_mismatch(self.name, self.model_half_komi, int(half_komi), self._komi_warned)

    def choose(self, position: Position) -> PlayerMove:
        """Search with ``simulations`` (and ``seconds`` if set) and return the move."""
        return self.think(position, Limit(nodes=self.simulations, seconds=self.seconds))

    def observe(self, position: Position, move: int) -> None:
        """Tree reuse: if the tree's root is ``position``, the subtree of ``move`` becomes the
        tree; otherwise the next search starts a fresh tree."""
        if self._search is None:
            return
        if not self.reuse_tree:
            self._search.forget()
            return
        self._search.observe(0, position, move)

    @property
    def tree_nodes(self) -> int:  # type: ignore[override]
        """The node budget of the player's search tree."""
        return self._tree_nodes

    def set_tree_nodes(self, nodes: int) -> None:
        """Search trees of ``nodes`` nodes from the next search on (the tree is dropped).
        Raises ValueError below ``num_actions(size) + 1`` (a root must fit)."""
        from takzero.game.core import num_actions

        need = num_actions(self.model_size) + 1 if self.model_size else 2
        if not is_integer(nodes):
            raise ValueError(f"tree_nodes must be an integer, got {nodes!r}")
        if nodes < need:
            raise ValueError(f"the tree needs at least {need} nodes on {self.model_size}x{self.model_size}, "
                             f"got {nodes}")
        if int(nodes) != self._tree_nodes:
            self._search = None  # the same budget keeps the tree already allocated
        self._tree_nodes = int(nodes)

    def prepare(self) -> None:
        """Allocate the search tree (:attr:`tree_nodes` nodes) and build the network's runtime
        now rather than in the next search, so that a timed search does not pay for them (the
        TEI engine calls it at ``isready`` and ``teinewgame``). The tree's memory is committed
        by the OS as the searches fill it."""
        self._one()

    def set_threads(self, threads: int) -> None:
        """Run the network on ``threads`` CPU threads from the next search on: onnxruntime's
        intra-op threads (a new session of the same weights, built here) and torch's
        (:func:`set_search_threads`). Raises ValueError for threads < 1."""
        if not is_integer(threads) or threads < 1:
            raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
        if threads == self.threads:
            return
        set_search_threads(threads)
        self.threads = int(threads)
        if self.backend != "torch":
            self._evaluator = None
            _ = self.evaluator  # the new onnxruntime session now, not inside the next timed search

    def use_backend(self, backend: str, threads: int = 1, check: bool = False) -> None:
        """Run the network in ``backend`` (:data:`PLAY_BACKENDS`, :func:`play_evaluator`) on
        ``threads`` CPU threads from the next search on (``torch``: the weights as loaded).
        The runtime is built at the next search (or ``evaluator`` read), so a player loaded and
        then moved to another backend exports its network once. Raises ValueError for an
        unknown backend; ``play_evaluator``'s errors come at that first use unless ``check``.
        """
        if backend not in PLAY_BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(PLAY_BACKENDS)}, got {backend!r}")
        self.backend = backend
        self.threads = max(1, int(threads))
        self._evaluator = None
        if check:
            _ = self.evaluator

    def set_leaves(self, leaves: int | None) -> None:
        """Positions per network call from the next search on (None: automatic). Raises
        ValueError outside 1..:data:`MAX_LEAVES`."""
        if leaves is not None and not (is_integer(leaves) and 1 <= leaves <= MAX_LEAVES):
            raise ValueError(f"leaves must be an integer in 1..{MAX_LEAVES}, got {leaves!r}")
        self.leaves = leaves

    def set_search(self, **fields: object) -> None:
        """Set fields of the player's :class:`~takzero.search.SearchConfig` (``config``) from the
        next search on, generically (the TEI options that name a search field,
        ``takzero.protocols.tei.options.Option.search``); a change drops the tree. Raises
        ValueError for a name that is no field or a value ``SearchConfig`` refuses, changing
        nothing."""
        try:
            config = replace(self.config, **fields)
        except TypeError as e:
            raise ValueError(f"set_search: {e}") from None
        if config != self.config:
            self.config = config
            self.simulations = int(config.simulations)
            self.reuse_tree = bool(config.reuse_tree)
            self.tinue_nodes = config.tinue_nodes
            self.flat_endgame_nodes = config.flat_endgame_nodes
            self._search = None

    # -- batched matches ----------------------------------------------------------------------

    @property
    def batchable(self) -> bool:
        """True without a time limit: a batched match searches all its games at once
        (:meth:`batched`); a timed player is asked game by game."""
        return self.seconds is None

    def batched(self, num_games: int, seed: int = 0, sampling_plies: int = 0) -> NetworkSearch:
        """A search of ``num_games`` games at once with this player's network, settings and
        simulations (one network call per step for every game where it is to move), for
        ``takzero.matches.games.play_games``. Raises ValueError for a timed player."""
        if not self.batchable:
            raise ValueError(f"{self.name} has a time limit: it is asked one game at a time")
        return NetworkSearch(
            self.evaluator, self.config, num_games, self.model_size, seed=seed,
            simulations=self.simulations, tinue_nodes=self.tinue_nodes,
            sampling_plies=sampling_plies, name=self.name, flat_endgame_nodes=self.flat_endgame_nodes,
        )

    # -- searching ----------------------------------------------------------------------------

    @property
    def pipelined(self) -> bool:
        """Whether searches keep two batches in flight (``pipeline``, by default with two threads
        or more: two network calls at once, each with ``threads // 2`` threads)."""
        return self.threads >= 2 if self.pipeline is None else bool(self.pipeline)

    def set_pipeline(self, pipeline: bool | None) -> None:
        """Two batches in flight on (True), off (False) or with two threads or more (None), from
        the next search on."""
        self.pipeline = pipeline
        self._evaluator = None

    def _one(self) -> NetworkSearch:
        if self._search is None:
            cfg = replace(self.config, node_budget=self._tree_nodes, leaves_per_step=MAX_LEAVES)
            self._search = NetworkSearch(
                self._search_evaluator(), cfg, 1, self.model_size, seed=self._next_seed(),
                simulations=self.simulations, tinue_nodes=self.tinue_nodes, name=self.name,
                flat_endgame_nodes=self.flat_endgame_nodes,
            )
        elif self._search.evaluator is not self._search_evaluator():
            self._search.evaluator = self._search_evaluator()  # new threads or backend
        self._search.driver.pipelined = self.pipelined
        return self._search

    def think(
        self,
        position: Position,
        limit: Limit | None = None,
        on_progress: Progress | None = None,
        multipv: int = 1,
    ) -> PlayerMove:
        """An anytime search of ``position`` under ``limit`` (:class:`~takzero.search.driver.Limit`:
        nodes, seconds or a clock, a stop flag; None or no limit at all: ``simulations``).
        The stop flag and the clock are checked after every network call, so a search ends
        within one call of either. ``limit.infinite`` (or only a stop flag) runs until ``stop`` is set.
        ``multipv`` > 1: the best root moves in ``lines``. At least one network call runs.

        A proven root (a forced win, loss or draw found by the search) ends the search early
        (without limits: once ``stop`` is set). With ``tinue_nodes`` > 0 the tinuë prover runs
        first: a proven forced road is answered without searching (``nodes`` 0, ``info["mate"]``);
        after the search, a move after which the opponent has a proven forced road is replaced
        by the most visited move without one (:func:`takzero.players.tactics.avoid_tinue`);
        with ``flat_endgame_nodes`` > 0 the flat-endgame checks likewise
        (:func:`~takzero.players.tactics.flat_endgame_win`,
        :func:`~takzero.players.tactics.avoid_flat_loss`; ``info["flat_endgame"]``).
        ``on_progress(answer, simulations)`` is called after the chunks that reach 64, 128, 256,
        ... simulations and after the last one. Returns the :class:`PlayerMove`. Raises
        ValueError (finished position, another board size).
        """
        self._check_open(position)
        if position.size != self.model_size:
            raise ValueError(
                f"this network plays {self.model_size}x{self.model_size}, "
                f"not {position.size}x{position.size}"
            )
        limit = limit if limit is not None else Limit()
        if limit.unlimited and not limit.infinite:
            limit = limit.with_nodes(self.simulations)
        search = self._one()
        if not self.reuse_tree:
            search.forget()
        return search.think(0, position, limit, on_progress, multipv, leaves=self.leaves)


def play_evaluator(ev, backend: str = "auto", threads: int = 1):
    """The evaluator a player searches with, on ``threads`` CPU threads:

    * ``torch``: ``ev`` itself (an ``.onnx`` file's evaluator stays in onnxruntime);
    * ``onnx``: onnxruntime in float32 (``takzero.nn.backends.with_backend``);
    * ``int8``: onnxruntime with the network quantized to int8 (``takzero.nn.quantize``),
      calibrated on the positions its checkpoint carries, else on games of its own policy;
    * ``auto``: :data:`AUTO_PLAY_BACKEND` where it can run (onnxruntime installed, the network
      on the CPU, a checkpoint or an ONNX file), else ``ev`` itself (a GPU, a TorchScript export);
      with ``int8`` there, an int8 file runs as it is and a network that cannot be quantized
      plays in float32 onnxruntime, with a warning naming why.

    onnxruntime measured 1.4-2.2x faster than torch on one CPU thread at every batch size
    (scripts/bench_selfplay_backend.py, scripts/bench_play.py). Raises ValueError for an unknown
    backend, or ``onnx``/``int8`` with a TorchScript model; ``QuantizeError`` (a ValueError) for a
    network that cannot be quantized; ImportError without onnxruntime."""
    import importlib.util

    from takzero.nn.backends import with_backend
    from takzero.nn.interface import PolicyValueNet

    if backend not in PLAY_BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(PLAY_BACKENDS)}, got {backend!r}")
    if backend == "torch":
        return ev
    onnx_session = getattr(ev, "_session", None) is not None
    if backend == "auto":
        cpu = getattr(getattr(ev, "device", None), "type", "cpu") == "cpu"
        if not (cpu and (onnx_session or isinstance(getattr(ev, "model", None), PolicyValueNet))):
            return ev
        if importlib.util.find_spec("onnxruntime") is None:
            return ev
        if AUTO_PLAY_BACKEND == "int8" and getattr(ev, "metadata", {}).get("precision") == "int8":
            return with_backend(ev, "onnx", threads=max(1, int(threads)))  # an int8 file as it is
        if AUTO_PLAY_BACKEND == "int8":
            from takzero.nn.quantize import QuantizeError

            try:
                return with_backend(ev, "int8", threads=max(1, int(threads)))
            except QuantizeError as e:  # e.g. an ONNX file that is int8 already: run it as it is
                warnings.warn(f"auto backend: int8 refused ({e}); playing in float32 onnxruntime",
                              BackendFallbackWarning, stacklevel=2)
                return with_backend(ev, "onnx", threads=max(1, int(threads)))
        backend = AUTO_PLAY_BACKEND
    return with_backend(ev, backend, threads=max(1, int(threads)))


__all__ = [
    "DEFAULT_LEAVES",
    "DEFAULT_NETWORK_SIMULATIONS",
    "DEFAULT_SEARCH_THREADS",
    "DEFAULT_SELECT_Q_FRACTION",
    "DEFAULT_TREE_NODES",
    "MAX_LEAVES",
    "NETWORK_CHUNK",
    "PLAY_BACKENDS",
    "AUTO_PLAY_BACKEND",
    "BackendFallbackWarning",
    "KomiMismatchWarning",
    "NetworkPlayer",
    "NetworkSearch",
    "auto_leaves",
    "play_evaluator",
    "player_search",
    "set_play_backend",
    "set_search_threads",
]
