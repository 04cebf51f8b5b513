"""The playtak bot: a player (any :class:`~takzero.players.base.BasePlayer`) on a playtak server.

The lines it sends and reads, with their source (the playtak server's README and Java source,
USTakAssociation/playtak-api), are listed in :mod:`takzero.protocols.playtak.lines`. What the
bot does with them:

* **Login**: ``Client``, ``Protocol 2`` (clocks in milliseconds, the increment in ``Game
  Start``), then ``Login Guest TOKEN`` (a fresh random token per bot, so that a reconnection logs
  in as the same guest) or ``Login NAME PASSWORD``. ``Authentication failure`` raises
  :class:`LoginError`.
* **Finding games**: posts its seek and/or accepts open seeks (:mod:`.lobby`).
* **Playing** (:mod:`.games`): every ``Game Start`` (a new game, a rejoined one, or one the bot
  did not know) starts from the empty board and applies the plies that follow; the game is in
  sync when its clock update arrives (after a rejoin the server sends every ply and then the clocks; a new game
  has no plies and, for white, no clock until the first move, so a short quiet wait ends it).
  Then, on its turn, the bot searches in a worker thread and sends the move; the opponent's
  plies, ``Over`` (the result), ``Abandoned`` (the opponent left: a win) and ``Undo`` are
  followed. A game whose settings the player cannot play, or whose plies cannot be replayed, is
  resigned (``Game#N Resign``) as soon as its lines are read.
* **Clock and search**: a soft and a hard time per move, the player in its own thread
  (:mod:`.thinking`).
* **Keep-alive and reconnection** (:mod:`.connection`): a silent or broken connection is
  replaced by a new login. The real server sends a game still on as part of the login
  (``Player.login`` -> ``Game.playerRejoin``): *before* ``Welcome`` for a guest, *after* it for
  an account (:mod:`takzero.protocols.playtak.server` cites the code). So the login is over only
  at the ``OK`` that answers the ``PING`` sent right after the ``Login`` line (the server reads
  a connection's lines in turn, so that ``OK`` comes after every line of the login; at most
  ``LOGIN_SETTLE_S`` after ``Welcome``). Then: our game sent again is resumed (a move that was
  sent but not received is sent again; moves go only to the connection that sent the game); a
  game the bot did not know (a restarted program on the same account) is adopted; a game of
  ours that did not come back ended while the bot was away and is counted as a loss
  (``abandoned``; taken back should it still come). The bot seeks or accepts only after the
  login is over and only with no game on, so never while a game goes on.
* **Bad lines**: a server line that cannot be read, or that contradicts the game (an illegal
  ply), is logged and ignored; the counts are in :class:`BotStats`.

:func:`run_bot` is the whole loop; :class:`PlaytakBot` holds its state: this module has its event
loop, login and reconnection, finding games and the clock of its moves; following a game from
the server's lines is :class:`~takzero.protocols.playtak.games.GameSync`, a part of it.
"""

from __future__ import annotations

import queue
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable

from takzero.game.moves import MoveError, format_playtak
from takzero.game.position import Position
from takzero.players.base import BasePlayer, PlayerMove
from takzero.players.baselines import GreedyPlayer
from takzero.protocols.playtak.connection import Connection, LoginError, new_guest_token
from takzero.protocols.playtak.games import BotGame, BotStats, GameSync
from takzero.protocols.playtak.lines import (
    PING,
    PING_INTERVAL,
    QUIT,
    ProtocolError,
    SeekOffer,
    SeekSpec,
    format_accept,
    format_client,
    format_login,
    format_login_guest,
    format_move,
    format_protocol,
    parse_game_line,
    parse_game_start,
    parse_seek,
    parse_welcome,
)
from takzero.protocols.playtak.lobby import Lobby
from takzero.protocols.playtak.thinking import MoveSearch, move_budget

CLIENT_NAME = "takzero-bot"
DEFAULT_SERVER = ("playtak.com", 10000)
#: Seconds of the time left that the bot never plans to use (network latency, both ways).
DEFAULT_RESERVE_S = 1.0
#: Longest wait after ``Welcome`` for the answer to the login's ``PING`` (the end of the login).
LOGIN_SETTLE_S = 10.0
#: Longest wait at the end for the search thread to end after its stop flag is set (seconds).
SHUTDOWN_WAIT_S = 30.0
#: Lines the bot has no use for (logged in verbose mode only).
_QUIET = {
    "Welcome!", "Login", "OK", "Online", "OnlinePlayers", "GameList", "Shout", "ShoutRoom",
    "Joined", "Left", "Tell", "Told", "Observe", "Is", "CmdReply", "sudoReply", "Accept",
    "Rematch", "Registered", "Registration",
}
_WAITING = 0  # the token of a move waiting for the last search to end (searches count from 1)


class PlaytakBot(GameSync):
    """The bot's state and loop (see the module doc); :meth:`run` plays until ``games`` games are
    over (None: until :meth:`stop`) and returns the :class:`BotStats`.

    ``player``: who chooses the moves (reset at each game start, told every ply, asked with
    ``think`` under the clock). ``server``: (host, port). ``user``/``password``: a registered
    account (None: a guest). ``seek``: the seek to post; ``accept``: accept open seeks (""
    any seeker, a name: only that player's; None: never). ``nodes``: a cap on the simulations
    of a move (None: the clock alone decides). ``reserve_s``: the time the bot never
    plans to use. ``log``: one line per event (default: stderr with a time stamp); ``verbose``
    also logs every line sent (``<``) and read (``>``), the password masked.
    """

    def __init__(
        self,
        player: BasePlayer,
        server: tuple[str, int] = DEFAULT_SERVER,
        *,
        user: str | None = None,
        password: str | None = None,
        seek: SeekSpec | None = None,
        accept: str | None = None,
        games: int | None = None,
        nodes: int | None = None,
        reserve_s: float = DEFAULT_RESERVE_S,
        ping_interval: float = PING_INTERVAL,
        reconnect_timeout: float = 300.0,
        client_name: str = CLIENT_NAME,
        seed: int = 0,
        log: Callable[[str], None] | None = None,
        verbose: bool = False,
    ) -> None:
        if (user is None) != (password is None):
            raise ValueError("give both a user name and a password, or neither (a guest)")
        self._login_line = (format_login(user, password) if user and password is not None
                            else format_login_guest(new_guest_token()))
        self._client_line = format_client(client_name)
        if games is not None and games < 1:
            raise ValueError(f"games must be >= 1, got {games}")
        self.player = player
        self.server = server
        self.seek = seek
        self.accept = accept
        self.games = games
        self.nodes = nodes
        self.reserve_s = float(reserve_s)
        self.ping_interval = float(ping_interval)
        self.reconnect_timeout = float(reconnect_timeout)
        self.seed = seed
        self.verbose = verbose
        self._log = log or _stderr_log
        self.stats = BotStats()
        self._fallback = GreedyPlayer(seed)
        self._events: queue.Queue = queue.Queue()
        self._stopping = threading.Event()
        self._conn: Connection | None = None
        self._cid = 0
        self._connecting = False
        self._logged_in = False  # Welcome read on this connection
        self._login_done = False  # and the answer to the login's PING: the server said everything
        self._welcome_at = 0.0
        self._lost: tuple[int, BotGame] | None = None  # the last game that did not come back
        self._name = ""
        self._last_heard = 0.0
        self._game: BotGame | None = None
        self._lobby = Lobby(accept, lambda: getattr(self.player, "model_size", None))
        self._asked = False
        self._search = MoveSearch(player, self._events, nodes)
        self._warm: set[tuple[int, int, int, int]] = set()
        self._games_started = 0

    # -- public --------------------------------------------------------------------------------

    def run(self) -> BotStats:
        """Warm up, connect, play; returns the stats. Raises LoginError (refused login),
        ConnectionError (no connection at start, or none again within ``reconnect_timeout``),
        ValueError (the player cannot play the seek's size)."""
        if self.seek is not None:
            s = self.seek
            self._warm_up(s.size, s.stones, s.capstones, s.half_komi)
        self._connect()
        pinger = threading.Thread(target=self._ping_loop, daemon=True, name="playtak-ping")
        pinger.start()
        try:
            while not self._finished():
                try:
                    event = self._events.get(timeout=0.02)
                except queue.Empty:
                    event = None
                if event is not None:
                    self._handle(event)
                self._check_timers()
        finally:
            self._shutdown()
        return self.stats

    def stop(self) -> None:
        """Ask :meth:`run` to end (from any thread); a game in progress is left (and abandoned)."""
        self._stopping.set()

    @property
    def name(self) -> str:
        """The name the server gave the bot ('' before the login)."""
        return self._name

    def drop_connection(self) -> None:
        """Break the connection as a network fault would (for tests); the bot reconnects."""
        conn = self._conn
        if conn is not None:
            conn.close()

    # -- connection ----------------------------------------------------------------------------

    def _say(self, msg: str) -> None:
        self._log(msg)

    def _send(self, line: str) -> bool:
        conn = self._conn
        if self.verbose:
            shown = line
            if line.startswith("Login "):  # neither a password nor a guest token goes to the log
                shown = "Login Guest ***" if line.startswith("Login Guest") else "Login *** ***"
            self._say("< " + shown)
        if conn is None or not conn.send(line):
            self._say(f"could not send {line.split()[0]!r}: not connected")
            return False
        return True

    def _connect(self) -> None:
        """Open a connection and log in; raises LoginError, ConnectionError, OSError."""
        host, port = self.server
        sock = socket.create_connection((host, port), timeout=10)
        self._cid += 1
        self._conn = Connection(sock, self._cid, self._events)
        self._logged_in = self._login_done = False
        self._asked = False
        self._lobby.clear()
        self._last_heard = time.monotonic()
        self._connecting = True
        try:
            # The PING after the login is answered after every line of the login (the server
            # reads a connection's lines in turn): its OK ends the login (see _on_login_done).
            for line in (self._client_line, format_protocol(), self._login_line, PING):
                self._send(line)
            deadline = time.monotonic() + 30
            while not self._login_done:
                now = time.monotonic()
                if self._logged_in and now > self._welcome_at + LOGIN_SETTLE_S:
                    self._say(f"no answer to the login's PING in {LOGIN_SETTLE_S:g} s")
                    self._on_login_done()
                    break
                left = deadline - now
                if left <= 0:
                    raise ConnectionError("no answer to the login within 30 s")
                try:
                    self._handle(self._events.get(timeout=min(left, 0.1)))
                except queue.Empty:
                    pass
        except BaseException:
            self._conn.close()
            raise
        finally:
            self._connecting = False

    def _reconnect(self, why: str) -> None:
        self.stats.reconnects += 1
        self._say(f"connection lost ({why}); reconnecting")
        if self._conn is not None:
            self._conn.close()
        self._logged_in = self._login_done = False
        delay, give_up = 0.2, time.monotonic() + self.reconnect_timeout
        while not self._stopping.is_set():
            try:
                self._connect()
                self._say(f"reconnected as {self._name}")
                return
            except LoginError:
                raise
            except (OSError, ConnectionError) as e:
                if time.monotonic() + delay > give_up:
                    raise ConnectionError(
                        f"no connection to {self.server[0]}:{self.server[1]} again within "
                        f"{self.reconnect_timeout:g} s: {e}"
                    ) from None
                self._say(f"reconnection failed ({e}); next try in {delay:.1f} s")
                time.sleep(delay)
                delay = min(2 * delay, 10.0)

    def _ping_loop(self) -> None:
        while not self._stopping.wait(self.ping_interval):
            conn = self._conn
            if conn is not None and self._logged_in:
                conn.send(PING)

    def _shutdown(self) -> None:
        self._stopping.set()
        self._cancel_search()
        if self._conn is not None:
            self._send(QUIT)
            self._conn.close()
        # A search thread still inside the network when the interpreter ends aborts the process
        # (status 134, "terminate called without an active exception"); its stop flag is set,
        # so it ends within a network call or a prover check: wait for it.
        if not self._search.join(SHUTDOWN_WAIT_S):
            self._say(f"the search did not end within {SHUTDOWN_WAIT_S:g} s of its stop")

    def _finished(self) -> bool:
        if self._stopping.is_set():
            return True
        return self.games is not None and self.stats.games >= self.games and self._game is None

    # -- events --------------------------------------------------------------------------------

    def _handle(self, event: tuple) -> None:
        kind = event[0]
        if kind == "line":
            if event[1] == self._cid:
                self._last_heard = time.monotonic()
                self._on_line(event[2])
        elif kind == "closed":
            if event[1] == self._cid and not self._stopping.is_set():
                if self._connecting:
                    raise ConnectionError(f"connection closed during the login ({event[2]})")
                self._reconnect(event[2])
        elif kind == "progress":
            g = self._game
            if g is not None and g.token == event[1]:
                g.best = event[2]
        elif kind == "answer":
            self._on_answer(event[1], event[2])

    def _on_line(self, line: str) -> None:
        if self.verbose:
            self._say("> " + line)
        text = line.strip()
        if not text:
            return
        try:
            self._dispatch(text)
        except LoginError:
            raise
        except (ProtocolError, MoveError, ValueError) as e:
            self.stats.ignored += 1
            self._say(f"ignored server line {text[:200]!r}: {e}")
        except Exception as e:  # noqa: BLE001 - a bot must outlive a bad line; logged in full
            self.stats.internal_errors += 1
            self._say(f"error handling server line {text[:200]!r}: {type(e).__name__}: {e}\n"
                      + traceback.format_exc())

    def _dispatch(self, line: str) -> None:
        head = line.split(maxsplit=1)[0]
        if line.startswith("Game Start"):
            self._on_game_start(parse_game_start(line))
        elif line.startswith("Game#"):
            self._on_game_line(*parse_game_line(line))
        elif head == "Welcome" and line != "Welcome!":
            self._on_welcome(parse_welcome(line))
        elif line == "Authentication failure":
            raise LoginError(f"the server refused the login of {self._login_line.split()[1]}")
        elif head == "Seek" and line[5:9] in ("new ", "remo"):
            kind, offer = parse_seek(line)
            self._on_seek(kind, offer)
        elif head == "NOK" or head.startswith("Error"):
            self._on_error(line)
        elif head == "Message":
            self._say("server: " + line[8:])
            g = self._game
            if g is not None and g.cid == self._cid and g.syncing and "resumed" in line:
                self._end_sync()
        elif line == "OK" and self._logged_in and not self._login_done:
            self._on_login_done()
        elif head in _QUIET:
            pass
        else:
            raise ProtocolError("unknown server line")

    def _on_welcome(self, name: str) -> None:
        """``Welcome NAME!``: logged in. A game of ours may have come before it (a guest) or
        come after it (an account); the login ends at the answer to its PING."""
        self._name = name
        self._logged_in = True
        self._welcome_at = time.monotonic()
        self._say(f"logged in as {name}")

    def _on_login_done(self) -> None:
        """The server has sent every line of the login (``Game.playerRejoin``'s among them):
        a game of ours that it did not send again is over; with no game the bot seeks."""
        self._login_done = True
        g = self._game
        if g is not None and g.cid != self._cid:
            self._game_not_resumed()
        elif g is None:
            self._ask_for_game()

    def _on_error(self, line: str) -> None:
        if self._connecting:  # e.g. an older server that does not know "Protocol"
            self._say(f"server: {line}")
            return
        self.stats.server_errors += 1
        self._say(f"server error: {line}")
        if line == "NOK" and self._lobby.accepting is not None and self._game is None:
            self._lobby.refused()
            self._try_accept()

    # -- finding games -------------------------------------------------------------------------

    def _games_left(self) -> bool:
        return self.games is None or self._games_started < self.games

    def _ask_for_game(self) -> None:
        if self._asked or self._game is not None or not self._login_done or not self._games_left():
            return
        if self.seek is not None:
            self._send(self.seek.command())
            self._say(f"seeking: {self.seek.command().strip()}")
            self._asked = True
        if self.accept is not None:
            self._try_accept()

    def _on_seek(self, kind: str, offer: SeekOffer) -> None:
        self._lobby.on_seek(kind, offer, self._name)
        if kind != "remove":
            self._try_accept()

    def _try_accept(self) -> None:
        if self.accept is None or self._lobby.accepting is not None or self._game is not None:
            return
        if not self._login_done or not self._games_left():
            return
        offer = self._lobby.next_offer(self._name)
        if offer is None:
            return
        self._warm_up(offer.size, offer.flats, offer.caps, offer.half_komi)
        self._lobby.accepting = offer.number
        self._say(f"accepting seek {offer.number} of {offer.name}: {offer.size}x{offer.size}, "
                  f"{offer.time_s}+{offer.increment_s} s")
        self._send(format_accept(offer.number))

    def _warm_up(self, size: int, flats: int, caps: int, half_komi: int) -> None:
        """One tiny search (and a fallback move) so that the compiled kernels are built before
        any clock runs. Raises ValueError if the player cannot play these settings."""
        key = (size, flats, caps, half_komi)
        if key in self._warm:
            return
        t0 = time.perf_counter()
        pos = Position.start(size, flats=flats, caps=caps, half_komi=half_komi)
        self._search.warm_up(pos, half_komi, self.seed)
        self._fallback.reset(size, half_komi)
        self._fallback.choose(pos)
        self._warm.add(key)
        self._say(f"ready for {size}x{size} ({time.perf_counter() - t0:.1f} s to warm up)")

    # -- thinking ------------------------------------------------------------------------------

    def _our_clock(self, g: BotGame) -> float:
        left = g.clocks[g.start.colour]
        if g.codes and g.our_turn:  # the server's clock starts with the first ply
            left -= time.monotonic() - g.clock_at
        return left

    def _maybe_think(self) -> None:
        g = self._game
        if g is None or g.syncing or not g.our_turn or g.token is not None or g.resigned:
            return
        if g.pending is not None:
            ply, key, code = g.pending
            if ply == len(g.codes) and key == g.position.hash:
                self._say(f"game {g.number}: sending the move again")
                self._send_move(g, code)
                return
            g.pending = None
        self._start_search(g)

    def _start_search(self, g: BotGame) -> None:
        """Search for our move, or, while the last (stopped) search still ends its chunk, wait
        for it (its answer starts this one) until the hard deadline of this move."""
        soft, hard = move_budget(self._our_clock(g), g.increment_s, self.reserve_s)
        if hard <= 0:
            self._deadline_move(g, "no time left")
            return
        if self._search.busy():
            if g.token != _WAITING:
                g.token, g.best, g.deadline = _WAITING, None, time.monotonic() + hard
            return
        g.token = self._search.start(g.position.copy(), soft)
        g.best, g.deadline = None, time.monotonic() + hard

    def _on_answer(self, token: int, answer: PlayerMove | Exception) -> None:
        g = self._game
        if g is None or g.token != token:  # a search that was cancelled or overtaken by the deadline
            if g is not None and g.token == _WAITING:
                self._search.join(1.0)  # it has posted its answer: it is ending
                self._start_search(g)
            return
        if isinstance(answer, Exception):
            self._deadline_move(g, f"the search failed: {type(answer).__name__}: {answer}")
            return
        try:
            g.position.check_move(answer.code)
        except MoveError as e:
            self._deadline_move(g, f"the search answered an illegal move: {e}")
            return
        self._send_move(g, answer.code)

    def _deadline_move(self, g: BotGame, why: str) -> None:
        self._search.cancel()
        code = None
        if g.best is not None:
            try:
                code = g.position.check_move(g.best.code)
            except MoveError:
                code = None
        if code is None:
            code = self._fallback.choose(g.position).code
        self.stats.deadline_moves += 1
        self._say(f"game {g.number}: {why}; playing {format_playtak(code, g.start.size)}")
        self._send_move(g, code)

    def _send_move(self, g: BotGame, code: int) -> None:
        left = self._our_clock(g)
        if self.stats.min_clock_s is None or left < self.stats.min_clock_s:
            self.stats.min_clock_s = left
        g.token = None
        g.best = None
        g.pending = (len(g.codes), g.position.hash, code)
        if g.cid == self._cid:  # else sent again once the server has sent the game again
            self._send(format_move(g.number, code, g.start.size))
        self._apply(g, code)

    def _cancel_search(self) -> None:
        self._search.cancel()
        if self._game is not None:
            self._game.token = None

    def _check_timers(self) -> None:
        now = time.monotonic()
        conn = self._conn
        if conn is not None and self._logged_in and now - self._last_heard > 3 * self.ping_interval + 5:
            self._say(f"nothing from the server for {now - self._last_heard:.0f} s")
            conn.close()  # the reader reports it closed: reconnection
            self._last_heard = now
        g = self._game
        if g is None:
            return
        if g.syncing and not g.expect_clock and not g.codes and now > g.settle_at:
            self._end_sync()
        elif g.token is not None and now >= g.deadline:
            self._deadline_move(g, "the hard deadline passed")


def _stderr_log(msg: str) -> None:
    sys.stderr.write(time.strftime("%H:%M:%S ") + msg + "\n")
    sys.stderr.flush()


def run_bot(player: BasePlayer, server: tuple[str, int] = DEFAULT_SERVER, **options: object) -> BotStats:
    """Build a :class:`PlaytakBot` (keyword options as its constructor's) and run it."""
    return PlaytakBot(player, server, **options).run()  # type: ignore[arg-type]


__all__ = [
    "CLIENT_NAME",
    "DEFAULT_RESERVE_S",
    "DEFAULT_SERVER",
    "BotStats",
    "LoginError",
    "PlaytakBot",
    "move_budget",
    "new_guest_token",
    "run_bot",
]
