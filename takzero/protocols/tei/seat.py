"""The players of a TEI session and the one in its seat: the network (a model), the baseline (the
player without a model) and the ``Fallback`` for board sizes the model does not play; which of
them plays the current game, each configured with the options' values (``TreeNodes``,
``Threads``, ``Batch``, ``Backend``), warmed up before ``readyok`` (so no timed ``go`` pays for
compiling or allocating), and kept in step with the game's moves (tree reuse) or reset.

:class:`PlayerSeat` is the part of :class:`takzero.protocols.tei.engine.TEIEngine` that does this
(the engine is one); it works on the session's attributes, listed in its body, and says what
went wrong with the session's ``info``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from takzero.game.position import Position
from takzero.io.version import SHORT, file_sha256
from takzero.players.base import BasePlayer
from takzero.players.network import BackendFallbackWarning
from takzero.players.registry import check_spec, make_player
from takzero.protocols.tei.lines import MAX_NODES, clip
from takzero.protocols.tei.options import search_settings
from takzero.search.config import SearchConfig
from takzero.search.limit import Limit

__all__ = [
    "DEFAULT_PLAYER",
    "WARM_NODES",
    "PlayerSeat",
    "check_player_spec",
    "load_network_player",
    "network_file_digest",
    "warm_positions",
]

DEFAULT_PLAYER = "uct:200"
#: Simulations of each warm-up search (``isready``/``teinewgame``): enough to run every kernel.
WARM_NODES = 16


def load_network_player(path: str | Path, search: SearchConfig, seed: int, device: str = "cpu"):
    """A :class:`takzero.players.NetworkPlayer` searching with ``search`` for an exported model
    (TorchScript/ONNX) or a checkpoint. Raises OSError/ValueError/RuntimeError when the file
    cannot be used."""
    from takzero.players import NetworkPlayer

    return NetworkPlayer.load(str(path), config=search, seed=seed, device=device)


def network_file_digest(path: str | Path | None) -> str | None:
    """The first :data:`~takzero.io.version.SHORT` hex digits of the sha256 of a network file, read
    when the engine loads it (the engine's ``id name`` names the network it loaded, not what the
    path holds later: ``best.pt`` is rewritten at each promotion); None for no path or a file
    that cannot be read."""
    if path is None:
        return None
    try:
        return file_sha256(path)[:SHORT]
    except OSError:
        return None


def check_player_spec(spec: str) -> None:
    """:func:`takzero.players.registry.check_spec` and a bound on the simulation count a ``uct:N``
    or ``model:PATH:N`` spec gives: at most :data:`MAX_NODES`, as ``Nodes`` and ``go nodes``
    (``uct:10000000000000000000`` overflowed the search's int64 counts). Raises ValueError."""
    kind = check_spec(spec)
    count = spec.rpartition(":")[2] if ":" in spec else ""
    if kind in ("uct", "model") and count.isascii() and count.isdigit() and int(count) > MAX_NODES:
        raise ValueError(f"at most {MAX_NODES} simulations a move, got '{clip(count)}' in '{clip(spec)}'")


def warm_positions(size: int) -> list[Position]:
    """Positions a warm-up searches: the empty board and one a few plies in (placements and a
    spread, so move generation, rollouts and the provers all run)."""
    start = Position.start(size)
    pos = start.copy()
    for _ in range(6):
        if pos.is_over:
            break
        codes = pos.legal_move_codes()
        pos = pos.play(int(codes[len(codes) // 2]))
    return [start, pos]


class PlayerSeat:
    """The players of a :class:`takzero.protocols.tei.engine.TEIEngine` and the one that plays
    (module doc). A part of the engine: the attributes below are the session's (set by its
    constructor and its options), ``_player`` the player in the seat, ``_player_spec`` its spec
    when it is a baseline (for warming), ``_synced`` the start and moves it has been told."""

    # the session's state that choosing, configuring and warming a player read
    size: int
    half_komi: int
    seed: int
    device: str
    search: SearchConfig
    tree_nodes: int
    threads: int
    batch: int
    backend: str
    player_spec: str
    fallback_spec: str
    network: Any
    baseline: BasePlayer
    model_loader: Callable[..., Any]
    start: Position
    moves: list[int]
    info: Callable[[str], None]
    _player: Any
    _player_spec: str | None
    _synced: tuple[Position, list[int]] | None
    _warmed: set[str]
    _notes: list[str]

    def _load(self, path: str, nodes: int | None) -> Any:
        """Load the network player and run a one-simulation search, so that compiling and
        loading happen before ``readyok``, not in the first timed ``go``."""
        search = self.search if nodes is None else replace(self.search, simulations=int(nodes))
        net = self.model_loader(path, search, self.seed, self.device)
        with warnings.catch_warnings(record=True) as caught:  # said at the next isready
            warnings.simplefilter("always", BackendFallbackWarning)
            self._configure(net)
            warm = getattr(net, "think", None)
            if warm is not None:
                for pos in warm_positions(int(net.model_size)):
                    warm(pos, Limit(nodes=1))
        self._keep_notes(caught)
        return net

    def _keep_notes(self, caught: list[warnings.WarningMessage]) -> None:
        """Keep the backend fallbacks among ``caught`` for the next ``isready`` (an
        ``info string`` each: a GUI shows no stderr); other warnings go on as warnings."""
        for w in caught:
            if issubclass(w.category, BackendFallbackWarning):
                self._notes.append(str(w.message))
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)

    def _set_backend(self, value: str) -> None:
        """``setoption Backend``: the network is rebuilt in the new runtime at once, so a model
        that cannot run there (a TorchScript file in onnx or int8) is refused here, the old
        runtime kept, instead of failing every later search."""
        net = self.network
        old = getattr(net, "backend", None)
        if net is not None and old != value and hasattr(net, "use_backend"):
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", BackendFallbackWarning)
                    net.use_backend(value, self.threads, check=True)
                self._keep_notes(caught)
            except (ValueError, ImportError) as e:
                net.use_backend(old, self.threads)
                self.info(f"setoption: Backend {value} cannot run this model ({clip(str(e), 300)}); "
                          f"keeping {self.backend}")
                return
        self.backend = value
        self._configure_all()

    def _configure(self, player: Any) -> None:
        """Apply the engine's tree budget, threads, batch and the search fields of the options
        with ``search`` (``options.search_settings``) to ``player`` (players without a tree, a
        network or a ``SearchConfig`` ignore them)."""
        setter = getattr(player, "set_tree_nodes", None)
        if setter is not None:
            setter(self.tree_nodes)
        set_threads = getattr(player, "set_threads", None)
        if set_threads is not None:
            set_threads(self.threads)
        set_leaves = getattr(player, "set_leaves", None)
        if set_leaves is not None:
            set_leaves(self.batch or None)
        use_backend = getattr(player, "use_backend", None)
        if use_backend is not None and getattr(player, "backend", None) != self.backend:
            use_backend(self.backend, self.threads)
        set_search = getattr(player, "set_search", None)  # the options naming search fields
        settings = search_settings(self)
        if set_search is not None and settings:
            set_search(**settings)

    def _configure_all(self) -> None:
        """Apply the tree budget, threads and batch to every player the engine holds."""
        for player in (self._player, self.network, self.baseline):
            if player is not None:
                self._configure(player)

    def _plays(self, size: int) -> bool:
        """Whether the engine has a player for ``size`` boards."""
        return self._plays_with(self.fallback_spec, size)

    def _refusal(self, size: int) -> str:
        m = int(self.network.model_size)
        return (
            f"the model plays {m}x{m} only and Fallback is none: {size}x{size} refused "
            f"(set Fallback to a player spec such as uct:200 to play it)"
        )

    def _select_player(self, announce: bool = True) -> None:
        """Pick the player for ``self.size``: the network if it plays this size, else the
        fallback; reset it for a new game with the seed. A player that cannot be built or reset
        is replaced by the random player (said with ``info string``), so there is always one."""
        spec: str | None = None
        try:
            if self.network is None:
                player, spec = self.baseline, self.player_spec
            elif int(self.network.model_size) == self.size:
                player = self.network
            else:
                spec = self.fallback_spec if self.fallback_spec != "none" else DEFAULT_PLAYER
                player = make_player(spec, seed=self.seed)
                if announce:
                    m = int(self.network.model_size)
                    self.info(
                        f"the model plays {m}x{m} only; playing {self.size}x{self.size} "
                        f"with the baseline {spec}"
                    )
            self._configure(player)
            player.reset(self.size, self.half_komi, self.seed)
        except Exception as e:  # noqa: BLE001 - a player is needed whatever happened
            self.info(f"cannot use the player for {self.size}x{self.size} ({e}); playing random moves")
            spec = "random"
            player = make_player(spec, seed=self.seed)
            player.reset(self.size, self.half_komi, self.seed)
        self._player = player
        self._player_spec = spec
        self._synced = None

    def _warm(self) -> None:
        """Build the compiled kernels of the current player before ``readyok``: a tiny search on
        a throw-away player of the same spec (so the real player's random stream is untouched).
        Once per spec and size per process; network players are warmed when loaded."""
        self._prepare()
        spec = self._player_spec
        key = f"{spec}@{self.size}"
        if spec is None or key in self._warmed:
            return
        self._warmed.add(key)
        try:
            player = make_player(spec, seed=0)
            self._configure(player)
            player.reset(self.size, self.half_komi, 0)
            for pos in warm_positions(self.size):
                player.think(pos, Limit(nodes=WARM_NODES))
        except Exception as e:  # noqa: BLE001 - warming is an optimisation; say and go on
            self.info(f"warming up {spec} failed ({e}); the first search may be slow")

    def _prepare(self) -> None:
        """Let the current player allocate what its next search needs (the network player's
        search tree, :meth:`takzero.players.network.NetworkPlayer.prepare`), so that the first
        timed ``go`` of a session or of a new game does not pay for it."""
        prepare = getattr(self._player, "prepare", None)
        if prepare is None:
            return
        try:
            prepare()
        except MemoryError as e:  # the tree does not fit: every search would fail the same way
            self.info(f"error: out of memory allocating the search tree ({clip(str(e) or 'MemoryError', 200)}; "
                      f"TreeNodes {self.tree_nodes}): lower TreeNodes")
        except Exception as e:  # noqa: BLE001 - an optimisation; the search allocates it anyway
            self.info(f"preparing the player failed ({e}); the first search may be slow")

    def _sync_player(self) -> None:
        """Tell the player the moves since its last position (tree reuse), or reset its tree."""
        p = self._player
        if self._synced is not None:
            start, moves = self._synced
            if start == self.start and self.moves[: len(moves)] == moves:
                new = self.moves[len(moves) :]
                pos = self.start.copy()
                for code in moves:
                    pos.make(code)
                for code in new:
                    p.observe(pos.copy(), code)
                    pos.make(code)
                self._synced = (self.start.copy(), list(self.moves))
                return
        p.reset(self.size, self.half_komi, None)
        pos = self.start.copy()
        for code in self.moves:
            p.observe(pos.copy(), code)
            pos.make(code)
        self._synced = (self.start.copy(), list(self.moves))

    def _plays_with(self, fallback: str, size: int) -> bool:
        return self.network is None or int(self.network.model_size) == size or fallback != "none"
