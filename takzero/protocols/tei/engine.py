"""TEI (Tak Engine Interface) engine, the protocol state machine behind ``python -m takzero.tei
[--model model.pt]`` (the command line, :mod:`takzero.tei`, parses arguments and calls it).

Speaks the line protocol of ``tak-rules.md`` (UCI with ``tei`` in place of ``uci``) on
stdin/stdout, so match runners (``takzero.match``, racetrack), PTN Ninja and other GUIs can use
takzero.

Commands and answers:

* ``tei`` -> ``id name``, ``id author``, the TEI version 1 size lines, the options, ``teiok``.
  Size lines (``size 5 halfkomi -20 -19 ... 20``): one for the model's board size, one for the
  sizes the fallback plays (every other size of 3..8; none with ``Fallback none``), each with
  every half komi of the ``HalfKomi`` range (a model plays other komis than it was trained for,
  and says so with ``info string``). Options (each checked against the range it advertises; a
  value outside it, or not a number, is refused with ``info string`` and the old value is kept):

  - ``HalfKomi`` (spin -20..20): half points added to black's flat count; its default is the
    komi the model was trained for (its ``half_komi``: checkpoint or export metadata), else 0. Also
    settable in ``teinewgame`` (below). A komi other than the model's gives one ``info string``
    (once per komi and model). PTN Ninja reads this option's range as the komis the engine plays.
  - ``Nodes`` (spin 1..``MAX_NODES``, 10^8): simulations per move when ``go`` gives no limit.
  - ``MultiPV`` (spin 1..32): how many best moves ``info`` reports (one line each, ``multipv K``).
  - ``TreeNodes`` (spin 100000..:data:`MAX_TREE_NODES`, 10^8; a value whose tree could take
    more than the machine's memory at :data:`TREE_BYTES_PER_NODE` bytes a node is refused too):
    the node budget of one search tree, the memory bound UCI engines call
    ``Hash`` (counted in nodes, not megabytes: a network tree node is
    ``takzero.search.config.BYTES_PER_NODE`` bytes, a UCT node one simulation). A full network
    tree ends the search (``info string`` says so: later simulations would only back frozen
    leaves up again, overstating the nodes); a full UCT tree scores new positions by rollouts
    without storing them.
  - ``MoveOverhead`` (spin 0..5000, ms): kept back from every time budget for process and pipe
    latency.
  - ``Seed`` (spin 0..2147483647): the players' seed, applied at every ``teinewgame``.
  - ``Threads`` (spin 1..64): CPU threads of the search: with 2 or more, two search workers each
    select, evaluate and back up a batch of leaves, their network calls at once, each with
    ``Threads // 2`` onnxruntime (and torch) threads; with 1, one loop and the network on one
    thread; ``--threads`` sets it at start-up.
  - ``Backend`` (combo auto, int8, onnx, torch; a runtime the model cannot run in, e.g. a
    TorchScript file in onnx or int8, is refused and the old one kept): the network's runtime
    (``takzero.players.network.play_evaluator``): ``auto`` (``AUTO_PLAY_BACKEND``: int8 in
    onnxruntime on the CPU where the model allows, float32 onnxruntime where it cannot be
    quantized), ``int8`` (the network quantized to int8,
    ``takzero.nn.quantize``, calibrated on the positions the checkpoint carries or on games of its
    own policy; a second or so the first time), ``onnx`` (float32) or ``torch``; ``--backend``
    sets it at start-up.
  - ``Batch`` (spin 0..32): positions per network call of the network search (leaves selected
    with virtual loss); 0 (default) chooses by the limit
    (``takzero.players.network.auto_leaves``: 16, fewer when the limit allows under 1,600 nodes, so a search keeps 100 network calls); 1 is one
    simulation per network call.
  - ``Model`` (string): path of an exported model or checkpoint; setting it loads it (``<empty>``:
    no model; an empty value is refused, the model kept). A checkpoint is read weights-only: one whose pickle would run code is refused with
    an ``info string`` naming it, and the previous player stays (README, "Which model files are
    safe to take from a stranger": a TorchScript file holds code).
  - ``Fallback`` (string): the player for board sizes the model does not play, a player spec of
    ``takzero.players.registry`` such as ``uct:200`` (at most ``MAX_NODES`` = 10^8 simulations, as
    ``Nodes``), or ``none`` to refuse such sizes.

* ``isready`` -> ``readyok``, only once every compiled kernel the current player needs is built
  (the first ``isready`` and every ``teinewgame`` warm the player up with a tiny search, so no
  timed ``go`` pays for compiling) and the player's search tree is allocated (``prepare``: the
  network player's ``TreeNodes`` tree), so no timed ``go`` pays for that either; during a search
  it is answered at once.
* ``setoption name <Name> value <v>``.
* ``teinewgame <size>``, ``teinewgame size <size> halfkomi <k>`` (PTN Ninja's form) or
  ``teinewgame <size> halfkomi <k>``: a new game on that board.
* ``position startpos|tps <board> <side> <move> [moves m1 m2 ...]``.
* ``go [nodes N] [movetime MS] [wtime MS btime MS [winc MS binc MS]] [infinite]`` -> ``info``
  lines ``info depth D [multipv K] nodes N time MS nps X score cp C|mate M [wdl W D L] pv ...``
  (``wdl`` in permille, when the player knows it) during the search, then exactly one
  ``bestmove <ptn>`` (a legal move), or ``bestmove (none)`` on a finished position.
* ``stop``, ``quit``: end a running search within about a millisecond (UCT baseline: the compiled
  search polls a stop flag every simulation and runs without the GIL) or one network call
  (network MCTS); the search answers ``bestmove`` with what it found. They act as soon as they
  are read, even while commands before them wait for that search (``go nodes 100000000``,
  ``position ...``, ``quit``: the search is stopped, then the ``position`` is read), and they
  stop every ``go`` read before them: one still waiting (``go``, ``go``, ``stop``) starts
  stopped and answers at once with a legal move (each ``go`` still gets its ``bestmove``); the
  end of the input (a closed pipe or WebSocket connection) acts like ``quit``.

Behaviour worth knowing:

* The search runs on a worker thread (the player's own ``think``, which keeps its clock); the
  input is read on a reader thread and the commands run in order on the calling thread, so
  ``stop``, ``quit`` and ``isready`` act during a search. Other commands that arrive during a
  finite search wait for it to finish (so transcripts are deterministic), except that a
  ``stop``, a ``quit`` or the end of the input stops the running search at once and every
  ``go`` read before it (a ``stop`` piped right behind a ``go nodes N`` can so cut that search
  before N); during ``go infinite`` any command but ``isready`` stops the search first.
* Bounds: a command line is read up to :data:`MAX_LINE` characters (a longer one is skipped
  whole, said with ``info string``); at most :data:`MAX_QUEUED_LINES` lines and
  :data:`MAX_QUEUED_CHARS` characters wait while a search runs (more are dropped, said once per
  run of drops); an ``info string`` is cut at :data:`MAX_INFO`
  characters and quotes at most 40 characters of any token it echoes.
* Time: ``go wtime/btime [winc/binc]`` spends ``remaining / 20 + 3/4 inc``, at most half of what is
  left, minus ``MoveOverhead`` (:meth:`SearchLimits.budget_seconds`); ``movetime`` minus the
  overhead, counted from when the ``go`` is read (bringing the player's tree up to the position
  comes out of the budget). The players stop at that deadline themselves (checked every simulation); as a
  backstop a timer sets the stop flag at 1.25 times the budget (which also cuts the tinue checks
  after a search short), so on a clock a move never takes much more than 5/8 of the time left.
* Tree reuse: when a ``position`` command extends the previous one by some moves, the player is told
  those moves (``Player.observe``) and keeps its search tree; otherwise it starts a fresh tree.
  ``teinewgame`` resets the player with the seed, so a session replays exactly with the same
  commands (``go nodes``) with ``Threads 1``; with two threads or more the two search workers
  interleave by timing, so scores and lines vary a little from run to run.
* Board sizes a model does not play: the ``Fallback`` player plays them (said once per game with
  ``info string``). With ``Fallback none`` such a size is refused where it would enter: at
  ``teinewgame`` (the previous size stays), at ``position tps`` (the previous position stays),
  and ``setoption name Fallback value none`` is refused while such a game is on. So the engine
  always has a player for its position, and every ``go`` on an unfinished position gets a legal
  ``bestmove``; should a player fail anyway, the engine says why and plays the first legal move.
* Bad input never ends the engine: unknown commands, bad options, malformed or illegal moves, a size
  outside 3..8 get ``info string <what was wrong>`` and the engine carries on (an illegal
  ``position`` leaves the previous position in place). ``tests/test_tei_fuzz.py`` drives it with
  thousands of mutated command lines to keep it that way.
* Scores: ``score cp`` is ``round(111.7146 * tan(1.5620688 * v))`` of the value v in [-1, 1] for
  the side to move (the mapping Leela Chess Zero used for its value head), about +-100 at v = +-0.5.

Without ``--model`` the engine plays ``--player`` (a player spec, default ``uct:200``), which makes
it testable without a network.

The options are one table, :data:`OPTIONS`: one :class:`Option` row each (name, type, start
value, range, the engine attribute it sets and, where setting it does more, its setter), as
python-chess's ``engine.Option`` describes an engine's options; the ``option`` lines of ``tei``,
the checks of ``setoption`` and the engine's start values all read it, so a new option is one row.

The protocol state machine (:class:`TEIEngine`) reads command lines and prints lines through a
callable, so the same session runs over stdin (:mod:`takzero.tei`) and WebSocket
(:mod:`takzero.tei_websocket`). The text of the protocol lines (``setoption``, ``position``,
``teinewgame`` and ``go`` parsed; ``id``, ``option``, ``info`` and ``bestmove`` formatted) and the
time budget of a ``go`` are in :mod:`takzero.protocols.tei.lines`, shared with the match runner's
client (:mod:`takzero.protocols.tei.match`). What is not protocol lives below it: players and their
clocks in ``takzero.players`` (``BasePlayer.think``), player specs in ``takzero.players.registry``.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from takzero.game.core import STANDARD_RESERVES
from takzero.game.position import Position
from takzero.io.machine import machine_memory
from takzero.players.base import BasePlayer, PlayerMove
from takzero.players.network import PLAY_BACKENDS, BackendFallbackWarning
from takzero.players.registry import check_spec, make_player
from takzero.protocols.tei.lines import (
    MAX_NODES,
    MOVE_OVERHEAD_MS,
    TEIProtocolError,
    clip,
    format_bestmove,
    format_id,
    format_info,
    format_option,
    format_sizes,
    parse_go,
    parse_position,
    parse_setoption,
    parse_teinewgame,
)
from takzero.search.limit import Limit

__all__ = [
    "DEFAULT_PLAYER",
    "ENGINE_AUTHOR",
    "ENGINE_NAME",
    "MAX_INFO",
    "MAX_LINE",
    "MAX_QUEUED_CHARS",
    "MAX_QUEUED_LINES",
    "MAX_SEED",
    "MAX_THREADS",
    "MAX_TREE_NODES",
    "OPTIONS",
    "Option",
    "TEIEngine",
]

ENGINE_NAME = "takzero"
ENGINE_AUTHOR = "takzero developers"
DEFAULT_PLAYER = "uct:200"
DEFAULT_SIZE = 6
#: Default of the ``TreeNodes`` option (network: 4e6 * 28 bytes = 112 MB per tree, committed as
#: used; a 5x5 search at 10,000 simulations/s fills about 0.6M nodes a second).
DEFAULT_TREE_NODES = 4_000_000
#: Most ``TreeNodes`` (a network tree of 10^8 nodes is 2.8 GB; a UCT tree of as many, some 9 GB).
MAX_TREE_NODES = 100_000_000
#: Bytes per tree node that ``TreeNodes`` is checked with against the machine's memory: an upper
#: estimate of a node of either player's tree (network: ``BYTES_PER_NODE`` = 28; UCT: five int64
#: node arrays, its path and an edge of five 8-byte fields, 96).
TREE_BYTES_PER_NODE = 96
#: Most ``Seed`` (the players' seeds are 31-bit).
MAX_SEED = 2**31 - 1
#: Most ``Threads`` (CPU threads of the network).
MAX_THREADS = 64
#: Most ``Batch`` (positions per network call of a network search; 0: automatic).
MAX_LEAVES = 32
#: Simulations of each warm-up search (``isready``/``teinewgame``): enough to run every kernel.
WARM_NODES = 16
#: The longest command line read (characters; a ``position`` of a 10,000-ply game is about
#: 100,000): a longer line is skipped whole, with one ``info string``.
MAX_LINE = 1 << 18
#: Most command lines waiting while a search runs; more are dropped (one ``info string`` per
#: search). ``quit`` and the end of the input are never dropped.
MAX_QUEUED_LINES = 4096
#: Most characters of the command lines waiting while a search runs (as ``MAX_QUEUED_LINES``).
MAX_QUEUED_CHARS = 1 << 22
#: The longest ``info string`` text printed (characters); a longer one is cut, saying so.
MAX_INFO = 2000


#: The option types of UCI (and so of TEI), as python-chess's ``engine.Option.type`` names them.
OPTION_TYPES = ("spin", "check", "combo", "string", "button")


@dataclass(frozen=True)
class Option:
    """One TEI option, a row of :data:`OPTIONS` (the fields of python-chess's ``engine.Option``:
    name, type, default, min, max, var; plus where its value lives in the engine).

    Args:
        name: the name as announced and as ``setoption name`` gives it (matched case-insensitively).
        type: one of :data:`OPTION_TYPES`. ``spin``: an integer in ``min..max``; ``check``:
            ``true``/``false``; ``combo``: one of ``var``; ``string``: any text (the setter checks
            it); ``button``: no value (the setter is called with None).
        attr: the :class:`TEIEngine` attribute that holds the value (read for the ``option`` line
            and for the "keeping ..." of a refused value; written by ``setoption`` unless
            ``setter`` is given).
        default: the value a new engine starts with (None: the constructor sets ``attr`` from its
            arguments, as for ``Nodes``, ``Seed``, ``Threads``, ``Model`` and ``Fallback``).
        min, max: the range of a ``spin`` (announced and checked).
        var: the choices of a ``combo``.
        setter: ``setter(engine, value)`` instead of setting ``attr``, for options whose change does
            more (reconfigure the players, load a model, restart the tree).
        shown: how the current value is written in the ``option`` line (default ``str``).

    Raises ValueError (at construction) for an unknown type, a spin without a range or a combo
    without choices.
    """

    name: str
    type: str
    attr: str
    default: object = None
    min: int | None = None
    max: int | None = None
    var: tuple[str, ...] = ()
    setter: Callable[[TEIEngine, object], None] | None = field(default=None, compare=False)
    shown: Callable[[object], str] = field(default=str, compare=False)

    def __post_init__(self) -> None:
        if self.type not in OPTION_TYPES:
            raise ValueError(f"option {self.name}: type must be one of {OPTION_TYPES}, got {self.type!r}")
        if self.type == "spin" and (self.min is None or self.max is None):
            raise ValueError(f"option {self.name}: a spin needs min and max")
        if self.type == "combo" and not self.var:
            raise ValueError(f"option {self.name}: a combo needs its choices (var)")

    def parse(self, text: str) -> Any:
        """The value ``setoption ... value <text>`` sets: an int for a spin, a bool for a check,
        the choice for a combo, ``text`` unchanged for a string, None for a button. Raises
        ValueError, with the message to print, when ``text`` is not a value of the option."""
        shown = text if len(text) <= 40 else text[:37] + "..."
        if self.type == "spin":
            assert self.min is not None and self.max is not None
            try:
                value = int(text.strip())
            except ValueError:
                value = None
            if value is None or not self.min <= value <= self.max:
                raise ValueError(
                    f"setoption: {self.name} must be an integer in {self.min}..{self.max}, got '{shown}'"
                )
            return value
        if self.type == "check":
            word = text.strip().lower()
            if word not in ("true", "false"):
                raise ValueError(f"setoption: {self.name} must be true or false, got '{shown}'")
            return word == "true"
        if self.type == "combo":
            for choice in self.var:
                if choice.lower() == text.strip().lower():
                    return choice
            raise ValueError(f"setoption: {self.name} must be one of {', '.join(self.var)}, got '{shown}'")
        if self.type == "button":
            return None
        return text

    def value(self, engine: TEIEngine) -> Any:
        """The option's current value in ``engine``."""
        return getattr(engine, self.attr)

    def set(self, engine: TEIEngine, value: object) -> None:
        """Apply a parsed value to ``engine`` (its setter, else the attribute)."""
        if self.setter is not None:
            self.setter(engine, value)
        else:
            setattr(engine, self.attr, value)

    def text(self, engine: TEIEngine) -> str:
        """The current value as the ``option`` line writes it (``true``/``false`` for a check)."""
        value = self.value(engine)
        if self.type == "check":
            return "true" if value else "false"
        return self.shown(value)

    def line(self, engine: TEIEngine) -> str:
        """The ``option name ... type ...`` line announced after ``tei``."""
        if self.type == "button":
            return f"option name {self.name} type button"
        return format_option(self.name, self.type, self.text(engine), self.min, self.max, self.var)


def _reconfiguring(attr: str) -> Callable[[TEIEngine, object], None]:
    """A setter that sets ``attr`` and applies it to every player the engine holds."""

    def setter(engine: TEIEngine, value: object) -> None:
        setattr(engine, attr, value)
        engine._configure_all()

    return setter


#: The engine's options in the order ``tei`` announces them, by lower-case name. A new option is
#: one row (and, when it is more than a value the engine reads, its setter).
OPTIONS: dict[str, Option] = {
    o.name.lower(): o
    for o in (
        Option("HalfKomi", "spin", "half_komi", default=0, min=-20, max=20,
               setter=lambda e, v: e._set_half_komi(v)),
        Option("Nodes", "spin", "nodes_default", min=1, max=MAX_NODES),
        Option("MultiPV", "spin", "multipv", default=1, min=1, max=32),
        Option("TreeNodes", "spin", "tree_nodes", default=DEFAULT_TREE_NODES, min=100_000,
               max=MAX_TREE_NODES, setter=lambda e, v: e._set_tree_nodes(int(v))),
        Option("MoveOverhead", "spin", "move_overhead", default=MOVE_OVERHEAD_MS, min=0, max=5000),
        Option("Seed", "spin", "seed", min=0, max=MAX_SEED),
        Option("Threads", "spin", "threads", min=1, max=MAX_THREADS,
               setter=_reconfiguring("threads")),
        Option("Batch", "spin", "batch", default=0, min=0, max=MAX_LEAVES,
               setter=_reconfiguring("batch")),
        Option("Backend", "combo", "backend", default="auto", var=PLAY_BACKENDS,
               setter=lambda e, v: e._set_backend(str(v))),
        Option("Model", "string", "model_path", setter=lambda e, v: e._set_model(str(v)),
               shown=lambda v: str(v) if v else "<empty>"),
        Option("Fallback", "string", "fallback_spec",
               setter=lambda e, v: e._set_fallback(str(v).strip())),
    )
}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Player construction
# ---------------------------------------------------------------------------------------------


def load_network_player(path: str | Path, simulations: int, seed: int, device: str = "cpu"):
    """A :class:`takzero.players.NetworkPlayer` for an exported model (TorchScript/ONNX) or a
    checkpoint. Raises OSError/ValueError/RuntimeError when the file cannot be used."""
    from takzero.players import NetworkPlayer

    return NetworkPlayer.load(str(path), simulations=simulations, seed=seed, device=device)


def _player_nodes(player: Any) -> int | None:
    sims = getattr(player, "simulations", None)
    return int(sims) if sims is not None else None


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


# ---------------------------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------------------------


class TEIEngine:
    """The protocol state machine. ``out(line)`` receives every line the engine prints (without
    newline); :meth:`run` reads commands from a text stream until ``quit`` or end of input.

    Args:
        model: path of a model (exported file or checkpoint) or None for ``player``.
        player: baseline spec (``players.make_player``) played without a model.
        fallback: baseline for sizes the model cannot play (None: ``player``; ``"none"``: refuse).
        nodes: default simulations per move (``Nodes`` option); None: the player's own count.
        seed: seed given to the player at every ``teinewgame`` (0..2**31-1).
        device: torch device for the network ('cpu', 'cuda', 'auto').
        out: where lines go (default: stdout, flushed).
        model_loader: builds the network player from (path, nodes, seed, device) (tests may swap).
        threads: CPU threads of the network (``Threads`` option, 1..64).

    Raises (constructor only) whatever ``model_loader`` raises for a bad ``model``, ValueError for
    a bad player spec or seed.
    """

    def __init__(
        self,
        model: str | None = None,
        player: str = DEFAULT_PLAYER,
        fallback: str | None = None,
        nodes: int | None = None,
        seed: int = 0,
        device: str = "cpu",
        out: Callable[[str], None] | None = None,
        model_loader: Callable[..., Any] = load_network_player,
        threads: int = 1,
        backend: str = "auto",
    ) -> None:
        self._out = out or _stdout_line
        self._out_lock = threading.Lock()
        for option in OPTIONS.values():  # the start values of the table's rows
            if option.default is not None:
                setattr(self, option.attr, option.default)
        self.seed = OPTIONS["seed"].parse(str(seed))
        self.device = device
        self.model_loader = model_loader
        self.player_spec = player
        check_player_spec(player)  # validate early
        self.fallback_spec = fallback if fallback is not None else player
        if self.fallback_spec != "none":
            check_player_spec(self.fallback_spec)
        if nodes is not None and not 1 <= nodes <= MAX_NODES:
            raise ValueError(f"nodes must be in 1..{MAX_NODES}, got {nodes}")
        self.model_path: str | None = None
        self.network: Any = None
        self.half_komi: int
        self.multipv: int
        self.tree_nodes: int
        self.move_overhead: int
        self.batch: int
        self.threads = OPTIONS["threads"].parse(str(threads))
        self.backend: str = OPTIONS["backend"].parse(str(backend))
        self.size = DEFAULT_SIZE
        self._warmed: set[str] = set()
        self._notes: list[str] = []  # said as info strings at the next isready
        self.baseline: BasePlayer = make_player(player, seed=self.seed)
        self.nodes_default = nodes
        if model:
            self.network = self._load(model, nodes)
            self.model_path = str(model)
            self.size = int(self.network.model_size)
        if self.nodes_default is None:
            self.nodes_default = _player_nodes(self.network or self.baseline) or 200
        self.start = Position.start(self.size, half_komi=self.half_komi)
        self.moves: list[int] = []
        self.position = self.start.copy()
        self._player: Any = None
        self._player_spec: str | None = None  # the spec of a baseline in use (for warming)
        self._synced: tuple[Position, list[int]] | None = None
        self._worker: threading.Thread | None = None
        self._search_stop = threading.Event()
        self._search_lock = threading.Lock()  # the worker, its stop flag and its go's number
        self._search_go: int | None = None  # the number of the running search's go (reader's count)
        self._stopped_through = 0  # every go up to this number was followed by a stop/quit
        self._line_go: int | None = None  # the number of the go line being handled
        self._infinite = False
        self._quit = False
        if self.network is not None and getattr(self.network, "model_half_komi", None) is not None:
            self.half_komi = int(self.network.model_half_komi)  # the model's own komi by default
            self.start = Position.start(self.size, half_komi=self.half_komi)
            self.position = self.start.copy()
        self._komi_chosen = False  # set by setoption HalfKomi / teinewgame halfkomi
        self._komi_warned: set[tuple[str | None, int]] = set()  # (model, komi) said once
        self._select_player(announce=False)

    # -- output ----------------------------------------------------------------------------

    def send(self, line: str) -> None:
        """Print one line (thread-safe)."""
        with self._out_lock:
            self._out(line)

    def info(self, text: str) -> None:
        """Print ``info string <text>`` (cut at :data:`MAX_INFO` characters, saying so)."""
        if len(text) > MAX_INFO:
            text = f"{text[: MAX_INFO - 40]}... (cut, {len(text)} characters)"
        self.send(f"info string {text}")

    # -- players ---------------------------------------------------------------------------

    def _load(self, path: str, nodes: int | None) -> Any:
        """Load the network player and run a one-simulation search, so that compiling and
        loading happen before ``readyok``, not in the first timed ``go``."""
        sims = nodes if nodes is not None else 400
        net = self.model_loader(path, sims, self.seed, self.device)
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
                          f"keeping {self.backend}")  # fmt: skip
                return
        self.backend = value
        self._configure_all()

    def _configure(self, player: Any) -> None:
        """Apply the engine's tree budget, threads and batch to ``player`` (players without a
        tree or a network ignore them)."""
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

    # -- main loop -------------------------------------------------------------------------

    def run(self, stream: TextIO) -> None:
        """Read and handle commands from ``stream`` until ``quit`` or end of input (which acts
        like ``quit``: a running search is stopped and answered). ``stream`` needs only
        ``readline(size)``; it is read on a reader thread (:meth:`_read`), so that ``stop``,
        ``quit`` and the end of the input stop a search even while earlier commands wait for
        it; the commands run in order on the calling thread."""
        inbox = _Inbox()
        reader = threading.Thread(target=self._read, args=(stream, inbox), daemon=True,
                                  name="tei-input")  # fmt: skip
        reader.start()
        while not self._quit:
            item = inbox.get()
            if item is None:
                break
            self._line_go, line = item
            try:
                self.handle(line)
            finally:
                self._line_go = None
        self._finish_search(stop=True)

    def _read(self, stream: TextIO, inbox: _Inbox) -> None:
        """The reader thread: lines of at most :data:`MAX_LINE` characters into ``inbox`` (each
        ``go`` numbered), a ``stop``/``quit``/end of input stopping the running search and every
        ``go`` read before it (:meth:`_preempt`); ends after ``quit`` or at the end."""
        gos = 0
        try:
            while True:
                line = stream.readline(MAX_LINE + 1)
                if not line:
                    break
                if len(line) > MAX_LINE or (len(line) == MAX_LINE + 1 and not line.endswith("\n")):
                    skipped = len(line)
                    while line and not line.endswith("\n"):  # the rest of the line, in pieces
                        line = stream.readline(MAX_LINE + 1)
                        skipped += len(line)
                    self.info(f"a command line of {skipped} characters (over {MAX_LINE}) was skipped")
                    continue
                words = line.split(maxsplit=1)
                cmd = words[0] if words else ""
                if cmd == "go":
                    gos += 1
                elif cmd in ("stop", "quit"):
                    self._preempt(gos)
                if cmd == "quit":
                    inbox.put((gos, line), force=True)
                    return
                if not inbox.put((gos, line)):
                    if inbox.note_drop():
                        self.info(f"over {MAX_QUEUED_LINES} commands wait for the search: "
                                  f"'{clip(cmd)}' and later ones dropped")  # fmt: skip
        except (OSError, ValueError) as e:  # a broken or closed input ends it as its end does
            self.info(f"the input cannot be read ({clip(str(e), 200)}): ending")
        self._preempt(gos)
        inbox.put(None, force=True)

    def _preempt(self, go_number: int) -> None:
        """A ``stop``/``quit``/end of input read after ``go`` number ``go_number``: stop the
        running search if its ``go`` came before (whatever is queued between), and mark every
        ``go`` up to that number stopped, so that one still waiting starts stopped and answers
        at once (:meth:`_cmd_go`)."""
        with self._search_lock:
            self._stopped_through = max(self._stopped_through, go_number)
            if self._worker is not None and self._search_go is not None and self._search_go <= go_number:
                self._search_stop.set()

    def handle(self, line: str) -> None:
        """Handle one command line (never raises; problems become ``info string``)."""
        cmd = "?"
        try:
            line = "".join(ch if ch.isprintable() or ch.isspace() else "?" for ch in line)
            tokens = line.strip().split()
            if not tokens:
                return
            cmd = tokens[0]
            if self._searching():
                if cmd == "stop":
                    self._finish_search(stop=True)
                    return
                if cmd == "quit":
                    self._quit = True
                    self._finish_search(stop=True)
                    return
                if cmd == "isready":
                    self.send("readyok")
                    return
                if self._infinite:
                    self.info(f"'{cmd[:40]}' during go infinite: stopping the search first")
                    self._finish_search(stop=True)
                else:
                    self._finish_search()
            handler = getattr(self, f"_cmd_{cmd}", None) if cmd.isidentifier() else None
            if handler is None:
                self.info(f"unknown command '{cmd[:40]}'")
                return
            handler(tokens[1:])
        except Exception as e:  # noqa: BLE001 - the engine must survive anything
            self.info(f"could not handle '{cmd[:40]}': {e}")

    # -- commands --------------------------------------------------------------------------

    def _cmd_tei(self, args: list[str]) -> None:
        who = self.network if self.network is not None else self.baseline
        for line in format_id(f"{ENGINE_NAME} {who.name}", ENGINE_AUTHOR):
            self.send(line)
        for line in self._size_lines():  # before the options: PTN Ninja reads them first
            self.send(line)
        for option in OPTIONS.values():
            self.send(option.line(self))
        self.send("teiok")

    def _size_lines(self) -> list[str]:
        """TEI version 1: the model's size, then the sizes the fallback plays, each with every
        half komi of the ``HalfKomi`` range (module doc)."""
        komi = OPTIONS["halfkomi"]
        assert komi.min is not None and komi.max is not None
        komis = range(komi.min, komi.max + 1)
        model = [int(self.network.model_size)] if self.network is not None else []
        others = [n for n in STANDARD_RESERVES if n not in model and self._plays(n)]
        return [format_sizes(group, komis) for group in (model, others) if group]

    def _cmd_isready(self, args: list[str]) -> None:
        self._warm()
        for note in self._notes:
            self.info(note)
        self._notes.clear()
        self.send("readyok")

    def _cmd_stop(self, args: list[str]) -> None:
        return None  # no search running: nothing to stop

    def _cmd_quit(self, args: list[str]) -> None:
        self._quit = True

    def _cmd_setoption(self, args: list[str]) -> None:
        text = " ".join(args)
        try:
            name, value = parse_setoption(args)
        except TEIProtocolError as e:
            self.info(str(e))
            return
        option = OPTIONS.get(name.lower())
        if option is None:
            shown = text if len(text) <= 60 else text[:57] + "..."
            self.info(f"setoption: unknown option '{name[:40]}' ({shown})")
            return
        try:
            parsed = option.parse(value)
        except ValueError as e:
            self.info(f"{e}; keeping {option.text(self)}")
            return
        option.set(self, parsed)

    def _set_half_komi(self, hk: int, chosen: bool = True) -> None:
        self._komi_chosen = self._komi_chosen or chosen
        if hk == self.half_komi:
            self._check_model_komi()
            return
        self.half_komi = hk
        # The current game goes on under the new komi; the player starts a fresh tree.
        start = Position.from_tps(self.start.to_tps(), half_komi=hk)
        self._new_position(start, self.moves)
        if self._player is not None:
            self._player.reset(self.size, self.half_komi, None)
        self._synced = None
        self._check_model_komi()

    def _set_fallback(self, spec: str) -> None:
        if spec == "none":
            if not self._plays_with(spec, self.size):
                m = int(self.network.model_size)
                self.info(
                    f"setoption: Fallback none refused: the game is {self.size}x{self.size} and the "
                    f"model plays {m}x{m} only (start a {m}x{m} game first); keeping "
                    f"{self.fallback_spec}"
                )
                return
        else:
            try:
                check_player_spec(spec)
            except ValueError as e:
                self.info(f"setoption: Fallback: {clip(str(e), 300)}; keeping {clip(self.fallback_spec)}")
                return
        self.fallback_spec = spec
        self._select_player(announce=False)

    def _plays_with(self, fallback: str, size: int) -> bool:
        return self.network is None or int(self.network.model_size) == size or fallback != "none"

    def _set_tree_nodes(self, nodes: int) -> None:
        need, have = nodes * TREE_BYTES_PER_NODE, machine_memory()
        if need > have:
            gib = 2**30
            self.info(f"setoption: TreeNodes {nodes} would take up to {need / gib:.1f} GiB "
                      f"({TREE_BYTES_PER_NODE} bytes a node), more than this machine's "
                      f"{have / gib:.1f} GiB; keeping {self.tree_nodes}")  # fmt: skip
            return
        self.tree_nodes = nodes
        self._configure_all()

    def _set_model(self, value: str) -> None:
        path = value.strip()
        if not path:
            self.info(f"setoption: Model needs a path (or <empty> for no model), got none; "
                      f"keeping {clip(self.model_path or '<empty>', 200)}")  # fmt: skip
            return
        if path == "<empty>":
            self.network = None
            self.model_path = None
            self._select_player(announce=False)
            return
        try:
            net = self._load(path, self.nodes_default)
        except Exception as e:  # noqa: BLE001 - report and keep the old model
            self.info(f"setoption: cannot load model '{clip(path, 200)}': {clip(str(e), 400)}; "
                      "keeping the previous player")
            return
        self.network = net
        self.model_path = path
        own = getattr(net, "model_half_komi", None)
        if own is not None and not self._komi_chosen and int(own) != self.half_komi:
            self.half_komi = int(own)  # the new model's own komi, as nothing chose another
            self.start = Position.from_tps(self.start.to_tps(), half_komi=self.half_komi)
            self._new_position(self.start, self.moves)
        m = int(net.model_size)
        if m != self.size and self.fallback_spec == "none":
            self.info(
                f"the model plays {m}x{m} only and Fallback is none: starting a new {m}x{m} game"
            )
            self._new_game(m)
        else:
            self._select_player(announce=True)
        self._check_model_komi()

    def _check_model_komi(self) -> None:
        if self._player is None or self._player is not self.network:
            return
        hk = getattr(self.network, "model_half_komi", None)
        key = (self.model_path, self.half_komi)
        if hk is not None and hk != self.half_komi and key not in self._komi_warned:
            self._komi_warned.add(key)
            self.info(
                f"the model was trained for komi {hk / 2:g}; playing komi {self.half_komi / 2:g}"
            )

    def _cmd_teinewgame(self, args: list[str]) -> None:
        size_text, komi_text, problems = parse_teinewgame(args)
        for p in problems:
            self.info(p)
        size = self.size
        if size_text is None:
            self.info(f"teinewgame: no size given; playing {self.size}x{self.size}")
        else:
            try:
                wanted = int(size_text)
            except ValueError:
                wanted = -1
            if wanted not in STANDARD_RESERVES:
                self.info(
                    f"teinewgame: board size must be 3..8, got '{size_text[:40]}'; "
                    f"keeping {self.size}x{self.size}"
                )
            elif not self._plays(wanted):
                self.info(f"teinewgame: {self._refusal(wanted)}; keeping {self.size}x{self.size}")
            else:
                size = wanted
        if komi_text is not None:
            try:
                self.half_komi = OPTIONS["halfkomi"].parse(komi_text)
                self._komi_chosen = True
            except ValueError as e:
                self.info(f"teinewgame: {str(e).removeprefix('setoption: ')}; keeping {self.half_komi}")
        self._new_game(size)
        self._check_model_komi()
        self._warm()

    def _new_game(self, size: int) -> None:
        self.size = size
        self.start = Position.start(size, half_komi=self.half_komi)
        self.moves = []
        self.position = self.start.copy()
        self._select_player(announce=True)

    def _new_position(self, start: Position, moves: list[int]) -> None:
        size_changed = start.size != self.size
        self.size = start.size
        self.start = start
        self.moves = list(moves)
        pos = start.copy()
        for code in moves:
            pos.make(code)
        self.position = pos
        if size_changed:
            self._select_player(announce=True)

    def _cmd_position(self, args: list[str]) -> None:
        try:
            start, codes = parse_position(args, self.size, self.half_komi)
        except TEIProtocolError as e:  # the previous position stays
            self.info(str(e))
            return
        if not self._plays(start.size):
            self.info(f"position: {self._refusal(start.size)}; position not changed")
            return
        self._new_position(start, codes)

    def _cmd_go(self, args: list[str]) -> None:
        t_go = time.perf_counter()  # the budget counts from here: the sync below is in it
        limits, problems = parse_go(args)
        for p in problems:
            self.info(p)
        pos = self.position.copy()
        if pos.is_over:
            self.info(f"the game is over ({pos.result}, {pos.result.reason}); there is no move")
            self.send(format_bestmove(None))
            return
        player = self._player
        try:
            self._sync_player()
        except Exception as e:  # noqa: BLE001 - answer anyway, with a fresh player
            self.info(f"cannot continue the player's game ({e}); starting it afresh")
            self._select_player(announce=False)
            player = self._player
            try:
                self._sync_player()
            except Exception as e2:  # noqa: BLE001
                self.info(f"the player cannot play this position ({e2}); playing random moves")
                player = make_player("random", seed=self.seed)
        side = pos.side_to_move
        seconds = limits.budget_seconds(side, self.move_overhead)
        nodes = limits.nodes
        if nodes is None and seconds is None and not limits.infinite:
            nodes = self.nodes_default
        stop = threading.Event()
        self._infinite = limits.infinite
        worker = threading.Thread(
            target=self._search,
            args=(player, pos, nodes, seconds, stop, limits.infinite, t_go),
            daemon=True,
        )
        with self._search_lock:  # with _preempt's check: a stop read after this go stops it
            if self._line_go is not None and self._line_go <= self._stopped_through:
                stop.set()  # a stop or quit was read after this go: it answers at once
            self._search_stop = stop
            self._search_go = self._line_go
            self._worker = worker
        worker.start()

    # -- searching -------------------------------------------------------------------------

    def _searching(self) -> bool:
        return self._worker is not None

    def _finish_search(self, stop: bool = False) -> None:
        """Wait for the running search (setting its stop flag first if ``stop``)."""
        w = self._worker
        if w is None:
            return
        if stop:
            self._search_stop.set()
        w.join()
        with self._search_lock:
            self._worker = None
            self._search_go = None
        self._infinite = False

    def _report(self, pos: Position, pm: PlayerMove, seconds: float, total: int) -> None:
        """The ``info`` lines of an answer: one, or one per line of ``pm.lines`` with MultiPV."""
        if self.multipv > 1 and pm.lines:
            for k, line in enumerate(pm.lines[: self.multipv], start=1):
                self.send(format_info(pos, line, seconds, total, multipv=k))
        else:
            self.send(format_info(pos, pm, seconds, total))

    def _search(
        self,
        player: Any,
        pos: Position,
        nodes: int | None,
        seconds: float | None,
        stop: threading.Event,
        infinite: bool = False,
        t_go: float | None = None,
    ) -> None:
        """The worker thread: one search, its ``info`` lines and exactly one ``bestmove``. With
        ``infinite`` (``go infinite``) the ``bestmove`` waits for ``stop`` (or ``quit``) even when
        the player is done sooner (a player that does not search, a proven position), as UCI
        asks. ``t_go``: when the ``go`` was read (``time.perf_counter``); the time since comes
        out of ``seconds``."""
        t0 = time.perf_counter()
        if seconds is not None and t_go is not None:
            seconds = max(0.005, seconds - (t0 - t_go))
        reported: list[PlayerMove] = []
        move: str | None = None
        timer = None
        if seconds is not None:
            # Backstop: the players keep ``seconds`` themselves (checked every simulation); this
            # stops whatever runs past a quarter more (e.g. the tinue checks after a search).
            # Still safe on a clock: the budget is at most half of the time left.
            timer = threading.Timer(1.25 * seconds, stop.set)
            timer.daemon = True
            timer.start()

        def progress(pm: PlayerMove, total: int) -> None:
            reported[:] = [pm]
            self._report(pos, pm, time.perf_counter() - t0, total)

        try:
            # ``multipv`` only when asked for, so players whose ``think`` predates it still play.
            extra = {"multipv": self.multipv} if self.multipv > 1 else {}
            limit = Limit(nodes=nodes, seconds=seconds, stop=stop, infinite=infinite)
            pm = player.think(pos, limit, on_progress=progress, **extra)
            if not reported or reported[0] is not pm:
                self._report(pos, pm, time.perf_counter() - t0, pm.nodes)
            if pm.info.get("tree_full"):
                self.info(f"the search tree is full ({self.tree_nodes} nodes, TreeNodes): the "
                          "search stopped there; raise TreeNodes for longer searches")  # fmt: skip
            if int(pm.code) not in {int(c) for c in pos.legal_move_codes()}:
                raise ValueError(f"the player answered an illegal move code {pm.code}")
            move = pos.ptn(pm.code)
        except Exception as e:  # noqa: BLE001 - answer anyway: a legal move beats silence
            self.info(f"search failed ({e}); playing the first legal move")
        finally:
            if timer is not None:
                timer.cancel()
            if infinite:
                stop.wait()
            if move is None:
                move = pos.ptn(int(pos.legal_move_codes()[0]))
            self.send(format_bestmove(move))


class _Inbox:
    """The lines read ahead for :meth:`TEIEngine.run`: a queue of ``(go number, line)`` items,
    at most :data:`MAX_QUEUED_LINES` of them and :data:`MAX_QUEUED_CHARS` characters (``force``
    adds past it: ``quit``, the end), whose :meth:`get` waits; None is the end of the input."""

    def __init__(self) -> None:
        self._items: deque = deque()
        self._chars = 0
        self._ready = threading.Condition()
        self._dropping = False

    def put(self, item: tuple[int, str] | None, force: bool = False) -> bool:
        """Add ``item``; False (not added) when full and not ``force``."""
        size = len(item[1]) if item is not None else 0
        with self._ready:
            full = len(self._items) >= MAX_QUEUED_LINES or self._chars + size > MAX_QUEUED_CHARS
            if full and not force:
                return False
            self._dropping = False
            self._items.append(item)
            self._chars += size
            self._ready.notify()
            return True

    def note_drop(self) -> bool:
        """True for the first drop of a run of drops (said once)."""
        with self._ready:
            first = not self._dropping
            self._dropping = True
            return first

    def get(self) -> tuple[int, str] | None:
        """The next item, waiting for it."""
        with self._ready:
            while not self._items:
                self._ready.wait()
            item = self._items.popleft()
            if item is not None:
                self._chars -= len(item[1])
            return item


def _stdout_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
