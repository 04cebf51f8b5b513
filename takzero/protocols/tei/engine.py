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
  and says so with ``info string``). The options and their checks:
  :mod:`takzero.protocols.tei.options` (one table, :data:`~takzero.protocols.tei.options.OPTIONS`).

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
  stopped and answers at once with a legal move, unsearched (each ``go`` still gets its
  ``bestmove``). A ``go`` read while an earlier ``go`` searches or waits stops it the same way,
  so a flood of queued ``go`` lines costs one search. The end of the input acts like ``quit``:
  what was read before them is still handled, without any search or warm-up, and the engine
  ends. A closed WebSocket connection (or an output that cannot be written) drops everything
  still queued, unanswered.

Behaviour worth knowing:

* The search runs on a worker thread (the player's own ``think``, which keeps its clock); the
  input is read on a reader thread and the commands run in order on the calling thread, so
  ``stop``, ``quit`` and ``isready`` act during a search. Other commands that arrive during a
  finite search wait for it to finish (so transcripts are deterministic), except that a
  ``stop``, a ``quit`` or the end of the input stops the running search at once and every
  ``go`` read before it (a ``stop`` piped right behind a ``go nodes N`` can so cut that search
  before N); during ``go infinite`` any command but ``isready`` stops the search first.
* Bounds: a command line is read up to :data:`~takzero.protocols.tei.reader.MAX_LINE` characters
  (a longer one is skipped whole, said with ``info string``); at most
  :data:`~takzero.protocols.tei.reader.MAX_QUEUED_LINES` lines and
  :data:`~takzero.protocols.tei.reader.MAX_QUEUED_CHARS` characters wait while a search runs (more
  are dropped, said once per
  run of drops; ``isready``, ``stop`` and ``quit`` are never dropped: a waiting search or
  position command is dropped in their place); an ``info string`` is cut at :data:`MAX_INFO`
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

The session (:class:`TEIEngine`, this module: the state machine of the command lines, ``tei``,
``isready``, ``setoption``, ``teinewgame``, ``position``, ``go``, ``stop``, ``quit``, one handler
each, over the game, the options' values and the players) reads command lines and prints lines
through a callable, so the same session runs over stdin (:mod:`takzero.tei`) and WebSocket
(:mod:`takzero.tei_websocket`). Beside it, one concern a module: the option table
(:mod:`takzero.protocols.tei.options`), each ``go`` as one object from its search to its
``bestmove`` (:mod:`takzero.protocols.tei.go`), the reader thread with its bounded inbox
(:mod:`takzero.protocols.tei.reader`), the players with the one in the seat: chosen, configured,
warmed up, kept in step with the game (:mod:`takzero.protocols.tei.seat`), and ``setoption`` with
the setters of the options that do more than set an attribute (``HalfKomi``, ``Fallback``,
``TreeNodes``, ``Model``: :mod:`takzero.protocols.tei.setoptions`). The text of the
protocol lines (``setoption``, ``position``, ``teinewgame`` and ``go`` parsed; ``id``, ``option``,
``info`` and ``bestmove`` formatted) and the time budget of a ``go`` are in
:mod:`takzero.protocols.tei.lines`, shared with the match runner's
client (:mod:`takzero.protocols.tei.client`). What is not protocol lives below it: players and their
clocks in ``takzero.players`` (``BasePlayer.think``), player specs in ``takzero.players.registry``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from takzero.game.core import STANDARD_RESERVES
from takzero.game.position import Position
from takzero.io.version import program_version
from takzero.players.base import BasePlayer
from takzero.players.network import player_search
from takzero.players.registry import make_player, model_spec_path
from takzero.protocols.tei.go import GoCommand
from takzero.protocols.tei.lines import (
    MAX_NODES,
    TEIProtocolError,
    format_bestmove,
    format_id,
    format_sizes,
    parse_go,
    parse_position,
    parse_teinewgame,
)
from takzero.protocols.tei.options import OPTIONS, TREE_BYTES_PER_NODE, MemoryBudget
from takzero.protocols.tei.reader import Inbox, read_commands
from takzero.protocols.tei.seat import (
    DEFAULT_PLAYER,
    check_player_spec,
    load_network_player,
    network_file_digest,
)
from takzero.protocols.tei.setoptions import OptionSetters
from takzero.search.config import SearchConfig

__all__ = [
    "DEFAULT_PLAYER",
    "ENGINE_AUTHOR",
    "ENGINE_NAME",
    "MAX_INFO",
    "TEIEngine",
]

ENGINE_NAME = "takzero"
ENGINE_AUTHOR = "takzero developers"
DEFAULT_SIZE = 6
#: The longest ``info string`` text printed (characters); a longer one is cut, saying so.
MAX_INFO = 2000


# ---------------------------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------------------------


class TEIEngine(OptionSetters):
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
        search: the network player's search (a ``SearchConfig``; None:
            ``takzero.players.network.player_search()``); ``nodes`` and the options that name a
            search field (``options.Option.search``) override its fields.
        model_loader: builds the network player from (path, search, seed, device) (tests may swap).
        threads: CPU threads of the network (``Threads`` option, 1..64).
        backend: the network's runtime (``Backend`` option).
        memory: the memory budget the search trees are held against, shared by the engines of one
            process (the WebSocket server's connections); None: this engine's own, the machine's.

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
        memory: MemoryBudget | None = None,
        search: SearchConfig | None = None,
    ) -> None:
        self._out = out or _stdout_line
        self._out_lock = threading.Lock()
        self._gone = False  # the peer cannot be written to any more
        for option in OPTIONS.values():  # the start values of the table's rows
            if option.default is not None:
                setattr(self, option.attr, option.default)
        self.seed = OPTIONS["seed"].parse(str(seed))
        self.device = device
        self.search = search if search is not None else player_search()
        self.model_loader = model_loader
        self.player_spec = player
        check_player_spec(player)  # validate early
        self.fallback_spec = fallback if fallback is not None else player
        if self.fallback_spec != "none":
            check_player_spec(self.fallback_spec)
        if nodes is not None and not 1 <= nodes <= MAX_NODES:
            raise ValueError(f"nodes must be in 1..{MAX_NODES}, got {nodes}")
        self.model_path: str | None = None
        self.model_digest: str | None = None  # network_file_digest of model_path, read at its load
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
        self.baseline_digest = network_file_digest(model_spec_path(player))  # a model:PATH baseline's file
        self.baseline: BasePlayer = make_player(player, seed=self.seed)
        self.nodes_default = nodes
        if model:
            digest = network_file_digest(model)
            self.network = self._load(model, nodes)
            self.model_path = str(model)
            self.model_digest = digest
            self.size = int(self.network.model_size)
        if self.nodes_default is None:
            self.nodes_default = _player_nodes(self.network or self.baseline) or 200
        self.start = Position.start(self.size, half_komi=self.half_komi)
        self.moves: list[int] = []
        self.position = self.start.copy()
        self._player: Any = None
        self._player_spec: str | None = None  # the spec of a baseline in use (for warming)
        self._synced: tuple[Position, list[int]] | None = None
        self._go: GoCommand | None = None  # the go in flight
        self._search_lock = threading.Lock()  # the go in flight and _stopped_through
        self._stopped_through = 0  # every go up to this number was followed by a stop/quit
        self._line_go: int | None = None  # the number of the go line being handled
        self._inbox: Inbox | None = None  # the commands read ahead (run)
        self._memory = memory if memory is not None else MemoryBudget()
        self._quit = False
        if self.network is not None and getattr(self.network, "model_half_komi", None) is not None:
            self.half_komi = int(self.network.model_half_komi)  # the model's own komi by default
            self.start = Position.start(self.size, half_komi=self.half_komi)
            self.position = self.start.copy()
        self._komi_chosen = False  # set by setoption HalfKomi / teinewgame halfkomi
        self._komi_warned: set[tuple[str | None, int]] = set()  # (model, komi) said once
        self._memory.hold(self, self.tree_nodes * TREE_BYTES_PER_NODE, force=True)
        self._select_player(announce=False)

    # -- output ----------------------------------------------------------------------------

    def send(self, line: str) -> None:
        """Print one line (thread-safe)."""
        with self._out_lock:
            if self._gone:
                return
            try:
                self._out(line)
            except (OSError, ValueError):  # a broken pipe, a closed stdout: the peer is gone
                self._gone = True
        if self._gone:
            self._hang_up()

    def _hang_up(self) -> None:
        """The peer is gone: every search stops and nothing queued is handled or answered."""
        if self._inbox is not None:
            self._inbox.close(drop=True)
        self._preempt(sys.maxsize)

    def info(self, text: str) -> None:
        """Print ``info string <text>`` (cut at :data:`MAX_INFO` characters, saying so)."""
        if len(text) > MAX_INFO:
            text = f"{text[: MAX_INFO - 40]}... (cut, {len(text)} characters)"
        self.send(f"info string {text}")

    # -- main loop -------------------------------------------------------------------------

    def run(self, stream: TextIO) -> None:
        """Read and handle commands from ``stream`` until ``quit`` or end of input (which acts
        like ``quit``: a running search is stopped and answered). ``stream`` needs only
        ``readline(size)``; it is read on a reader thread
        (:func:`takzero.protocols.tei.reader.read_commands`), so that ``stop``,
        ``quit`` and the end of the input stop a search even while earlier commands wait for
        it; the commands run in order on the calling thread."""
        inbox = self._inbox = Inbox()
        self._memory.hold(self, self.tree_nodes * TREE_BYTES_PER_NODE, force=True)
        reader = threading.Thread(target=read_commands, args=(stream, inbox, self.info, self._preempt),
                                  daemon=True, name="tei-input")
        reader.start()
        try:
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
        finally:
            self._memory.release(self)  # the tree budget goes back to the other connections

    def _ending(self) -> bool:
        """True once ``quit`` or the end of the input was read: what is still queued is handled
        without searching or warming up."""
        return self._inbox is not None and self._inbox.closing

    def _preempt(self, go_number: int) -> None:
        """A ``stop``/``quit``/end of input read after ``go`` number ``go_number``: stop the
        running search if its ``go`` came before (whatever is queued between), and mark every
        ``go`` up to that number stopped, so that one still waiting starts stopped and answers
        at once (:meth:`_cmd_go`)."""
        with self._search_lock:
            self._stopped_through = max(self._stopped_through, go_number)
            go = self._go
            if go is not None and go.number is not None and go.number <= go_number:
                go.stop()

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
                if self._go is not None and self._go.infinite:
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
        for line in format_id(self.id_name(), ENGINE_AUTHOR):
            self.send(line)
        for line in self._size_lines():  # before the options: PTN Ninja reads them first
            self.send(line)
        for option in OPTIONS.values():
            self.send(option.line(self))
        self.send("teiok")

    def id_name(self) -> str:
        """The ``id name`` the engine announces: ``takzero <version>+src.<digest> <player>``
        (:func:`takzero.io.version.program_version`: the code that runs), and for a network
        (``--model``, or a ``model:PATH`` player) ``model <sha256[:8]> <backend>`` of its file as
        it was loaded (:func:`~takzero.protocols.tei.seat.network_file_digest`; the file may be
        rewritten or removed since), e.g. ``takzero 0.1.0+src.1a2b3c4d network model 5e7f0a1b
        auto``: two engines that announce the same name run the same code and network on the
        same backend."""
        who = self.network if self.network is not None else self.baseline
        name = f"{ENGINE_NAME} {program_version()} {who.name}"
        digest = self.model_digest if self.network is not None else self.baseline_digest
        if digest is not None:
            name += f" model {digest} {self.backend}"
        return name

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
        if not self._ending():  # no warm-up for an engine about to end
            self._warm()
        for note in self._notes:
            self.info(note)
        self._notes.clear()
        self.send("readyok")

    def _cmd_stop(self, args: list[str]) -> None:
        return None  # no search running: nothing to stop

    def _cmd_quit(self, args: list[str]) -> None:
        self._quit = True

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
        if not self._ending():
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
        if self._line_go is not None and self._line_go <= self._stopped_through:
            # Preempted while queued (a stop, a quit, a later go or the end of the input was read
            # after it): answered at once, unsearched, so queued gos cost no search each.
            self.send(format_bestmove(pos.ptn(int(pos.legal_move_codes()[0]))))
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
        go = GoCommand(
            player, pos, limits, number=self._line_go, t_go=t_go,
            move_overhead=self.move_overhead, nodes_default=self.nodes_default,
            multipv=self.multipv, tree_nodes=self.tree_nodes, send=self.send, info=self.info,
        )
        with self._search_lock:  # with _preempt's check: a stop read after this go stops it
            if go.number is not None and go.number <= self._stopped_through:
                go.stop()  # a stop or quit was read after this go: it answers at once
            self._go = go
        go.start()

    # -- the go in flight ------------------------------------------------------------------

    def _searching(self) -> bool:
        return self._go is not None

    def _finish_search(self, stop: bool = False) -> None:
        """Wait for the running search (setting its stop flag first if ``stop``)."""
        go = self._go
        if go is None:
            return
        if stop:
            go.stop()
        go.wait()
        with self._search_lock:
            self._go = None


def _player_nodes(player: Any) -> int | None:
    sims = getattr(player, "simulations", None)
    return int(sims) if sims is not None else None


def _stdout_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
