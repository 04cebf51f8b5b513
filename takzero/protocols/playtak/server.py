"""A small in-process playtak server for tests and offline soak runs of the playtak bot.

It speaks the server's text protocol as the playtak server does (USTakAssociation/playtak-api,
``server/src/main/java/tak/``; the lines are listed in :mod:`takzero.protocols.playtak.lines`),
with the behaviour a bot meets:

* ``Welcome!`` and ``Login or Register`` on connect; ``Client``, ``Protocol`` (0..3), ``Login
  Guest [TOKEN]`` (a token logs in as the same guest again), ``Login NAME PASSWORD`` (accounts
  given to the constructor), ``PING`` (answered ``OK``, also before a login), ``quit``;
* seeks in the server's V1/V2/V3 forms, ``Seek new``/``Seek remove`` to every listener in the
  layout of its protocol version, ``Accept N`` (the colour of an ``A`` seek is drawn from the
  server's seeded generator); ``Seek`` and ``Accept`` during a game are refused (``NOK``);
* ``Game Start`` in the layout of each player's protocol version; moves parsed with the server's
  patterns and its rule for a spread (the second square is the last one dropped on; as many
  drop counts as squares moved), checked against the rules (``takzero.game``); a refused move
  gets ``NOK`` and ``Error:...``;
* the clock starts after the first ply, the increment is added after each ply, and a flag fall
  ends the game ``1-0``/``0-1``; the server's 50-ply rule (no placement or flattening in 50
  plies) draws; ``Game#N Resign``;
* a dropped connection leaves the game running; a login as the same player within
  ``reconnect_seconds`` rejoins it; after that the game is abandoned and the other side wins.
  A second login of a logged-in player disconnects the first connection, as the server does.

The order of the lines, as the server's code sends them (file and method of each step):

* **Guest login** (``Client.run``, the ``loginGuestPattern`` branch): ``Player.login`` first,
  which calls ``Game.playerRejoin`` when the player has a game: ``Game Start`` in the layout
  ``playerRejoin`` builds itself, the protocol 0/1 one whatever the client's version (``Game
  Start N SIZE WHITE vs BLACK COLOUR TIME KOMI FLATS CAPS TRIGGER AMOUNT``), every ply
  (``Game.sendMoveListTo``), the clock (``Game.updateTime``: ``Timems`` from protocol 1, else
  ``Time``), ``Message Your game is resumed``, and ``Message NAME has reconnected.`` to the
  opponent; only then ``Welcome NAME!``; then the open seeks (``Seek.registerListener`` ->
  ``Seek.sendListTo``: ``Seek new ...``), the running games (``Game.registerGameListListener``
  -> ``Game.sendGameListTo``: ``GameList Add ...``), ``Online N`` to everyone logged in
  (``Client.sendAllOnline``, N the number of connections) and ``OnlinePlayers [...]``
  (``Client.onlinePlayerMessageHandler``).
* **Account login** (``Client.run``, the ``loginPattern`` branch): ``Welcome NAME!`` first (and
  ``Is Mod`` for moderators, never here), then ``Player.login`` -> ``Game.playerRejoin`` (the
  same lines), then the seeks, the games, ``Online`` and ``OnlinePlayers`` as for a guest. So
  a resumed game comes before ``Welcome`` for a guest and after it for an account.
  ``rejoin_order="welcome_first"`` sends ``Welcome`` first for guests too (the order this test
  server used before: the bot must read both); ``rejoin_layout="protocol"`` sends the rejoin's
  ``Game Start`` in the client's protocol layout instead (as a newer build of the server did in
  the trace of issue 34).
* **Seek** (``Client.run``, the ``seekV3Pattern``/``V2``/``V1`` branches, only when the player
  has no game: else the line falls through to ``sendNOK``): ``Seek.newSeek`` -> ``Seek.addSeek``
  removes the player's old seek (``Seek remove``) and sends ``Seek new`` to every listener
  (``Seek.updateListeners``); no ``OK``.
* **Accept** (``Client.run``, ``acceptSeekPattern``): both players' seeks removed
  (``Client.removeSeeks``: ``Seek remove``), ``GameList Add`` to every listener
  (``Game.addGame`` -> ``Game.updateGameListListeners``), then ``Game Start`` to the accepting
  player and then to the seeker (``Client.createGameStartString``).
* **A ply** (``Game.placeMove``/``Game.moveMove``): the clock to both players
  (``Game.updateTimeTurnChange`` -> ``Game.sendTimeToAll``), the ply to the opponent
  (``Game.sendMove``), ``Game#N Over RESULT`` to both if it ended the game
  (``Game.whenGameEnd``), ``GameList Remove`` (``Game.removeGame``, from ``Client.run``) and
  last ``OK`` to the mover.
* **Clock** (``Game.updateOutOfTime``, a timer at the mover's time left): the clocks to both
  (``sendTimeToAll``), ``Game#N Over 0-1``/``1-0`` (``whenGameEnd``), ``GameList Remove``
  (``Game.timeCleanup``).
* **Resign** (``Client.run``, ``resignPattern`` -> ``Game.resign`` -> ``whenGameEnd``):
  ``Over`` to both, ``GameList Remove``; no ``OK``.
* **Disconnection** (``Client.clientQuit``): ``Message NAME has disconnected. They have T
  seconds to reconnect`` to the opponent (``Game.playerDisconnected``), the player's seek
  removed (``Seek remove``), ``Online N`` to everyone logged in.
* **Abandonment** (``Game.checkPlayerQuit``, a timer ``reconnectionTime`` + 1 s after the
  disconnection): ``Game#N Abandoned. NAME quit`` to the winner only and no ``Over``
  (``whenGameEnd`` with ``abandoned``), then ``GameList Remove``.

Test hooks: :meth:`PlaytakServer.drop` (close a player's connection abruptly),
:attr:`PlaytakServer.hold_logins` (while set, logins are cut off),
:meth:`PlaytakServer.send_raw` (any line to a player), :attr:`PlaytakServer.finished` (one
:class:`FinishedGame` per game over, with the reason: road, flat, draw, time, resign, abandoned,
stale), :attr:`PlaytakServer.refused` (every command answered ``NOK``),
:attr:`PlaytakServer.pings` (``PING`` lines per player) and :attr:`PlaytakServer.sent` (with
``record=True``: every line sent to each player, in order).
"""

from __future__ import annotations

import random
import re
import socket
import socketserver
import threading
import time

from takzero.game.core import SPREAD, STANDARD_RESERVES, WHITE
from takzero.game.moves import MoveError
from takzero.game.position import Position
from takzero.protocols.playtak.server_records import (
    ACCEPT,
    CLIENT,
    LOGIN,
    LOGIN_GUEST,
    MOVE,
    PLACE,
    PROTOCOL,
    RESIGN,
    SEEK_V1,
    SEEK_V2,
    SEEK_V3,
    STALE_PLIES,
    Conn,
    FinishedGame,
    Game,
    Player,
    Seek,
    spread_ptn,
)


class PlaytakServer:
    """The server (see the module doc) on ``host`` and a free port (``address`` after start).

    ``accounts``: {name: password} of registered players; ``reconnect_seconds``: how long a
    dropped player may take to come back before the game is abandoned; ``seed``: the colour
    draws of ``A`` seeks; ``rejoin_order``: ``"real"`` (a guest's resumed game before
    ``Welcome``, an account's after it) or ``"welcome_first"`` (``Welcome`` first for both);
    ``rejoin_layout``: the rejoin's ``Game Start`` in ``"game"`` (``Game.playerRejoin``'s own,
    protocol 0/1 layout) or ``"protocol"`` (the client's protocol layout); ``record``: keep
    every line sent in :attr:`sent`. Use as a context manager, or :meth:`start` and
    :meth:`close`. Raises ValueError for an unknown ``rejoin_order`` or ``rejoin_layout``.
    """

    def __init__(
        self,
        accounts: dict[str, str] | None = None,
        reconnect_seconds: float = 60.0,
        seed: int = 0,
        host: str = "127.0.0.1",
        *,
        rejoin_order: str = "real",
        rejoin_layout: str = "game",
        record: bool = False,
    ) -> None:
        if rejoin_order not in ("real", "welcome_first"):
            raise ValueError(f"rejoin_order must be 'real' or 'welcome_first', got {rejoin_order!r}")
        if rejoin_layout not in ("game", "protocol"):
            raise ValueError(f"rejoin_layout must be 'game' or 'protocol', got {rejoin_layout!r}")
        self.rejoin_order = rejoin_order
        self.rejoin_layout = rejoin_layout
        #: With ``record``: {player name: every line sent to them, in order} ("" before a login).
        self.sent: dict[str, list[str]] | None = {} if record else None
        self.reconnect_seconds = float(reconnect_seconds)
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._players: dict[str, Player] = {
            n: Player(n, password=p) for n, p in (accounts or {}).items()
        }
        self._guests: dict[str, Player] = {}
        self._conns: set[Conn] = set()
        self._seeks: dict[int, Seek] = {}
        self._games: dict[int, Game] = {}
        self._next_seek = 0
        self._next_game = 0
        self._next_guest = 0
        self.finished: list[FinishedGame] = []
        self.refused: list[tuple[str, str, str]] = []
        self.pings: dict[str, int] = {}
        #: While set, a login closes the connection (a server that cannot be reached for now).
        self.hold_logins = threading.Event()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                server._serve(self.request)

        class TCPServer(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._tcp = TCPServer((host, 0), Handler)
        bound_host, bound_port = self._tcp.server_address[:2]
        assert isinstance(bound_host, str), bound_host  # an AF_INET server's address
        self.address: tuple[str, int] = (bound_host, bound_port)
        self._threads: list[threading.Thread] = []

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> PlaytakServer:
        for target in (self._tcp.serve_forever, self._watch_clocks):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def close(self) -> None:
        self._stop.set()
        self._tcp.shutdown()
        self._tcp.server_close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            c.kill()
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> PlaytakServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- test hooks ----------------------------------------------------------------------------

    def drop(self, name: str) -> bool:
        """Close ``name``'s connection abruptly (no ``quit``); False if not connected."""
        with self._lock:
            p = self._players.get(name)
            conn = p.conn if p else None
        if conn is None:
            return False
        conn.kill()
        return True

    def send_raw(self, name: str, line: str) -> bool:
        """Send ``line`` as it is to ``name``; False if not connected."""
        with self._lock:
            p = self._players.get(name)
            conn = p.conn if p else None
        if conn is None:
            return False
        conn.send(line)
        return True

    def game_of(self, name: str) -> tuple[int, int] | None:
        """(game number, plies played) of ``name``'s running game, or None."""
        with self._lock:
            p = self._players.get(name)
            if p is None or p.game is None:
                return None
            return p.game.number, len(p.game.moves)

    def logged_in(self) -> list[str]:
        """Names of the players with a connection."""
        with self._lock:
            return sorted(p.name for p in self._players.values() if p.conn is not None)

    def wait_finished(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` games are over; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.finished) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    # -- connections ---------------------------------------------------------------------------

    def _serve(self, sock: socket.socket) -> None:
        conn = Conn(sock, self.sent)
        with self._lock:
            self._conns.add(conn)
        conn.send("Welcome!")
        conn.send("Login or Register")
        quit_sent = False
        try:
            with sock.makefile("r", encoding="utf-8", errors="replace", newline="\n") as f:
                for raw in f:
                    line = raw.rstrip("\r\n")
                    if line == "quit":
                        quit_sent = True
                        break
                    with self._lock:
                        self._command(conn, line)
        except OSError:
            pass
        finally:
            with self._lock:
                self._disconnected(conn, quit_sent)
            conn.kill()
            try:
                sock.close()
            except OSError:
                pass

    def _nok(self, conn: Conn, line: str, why: str) -> None:
        name = conn.player.name if conn.player else ""
        self.refused.append((name, line, why))
        conn.send("NOK")
        if why:
            conn.send("Error:" + why)

    def _command(self, conn: Conn, line: str) -> None:
        if line == "PING":
            if conn.player is not None:
                self.pings[conn.player.name] = self.pings.get(conn.player.name, 0) + 1
            conn.send("OK")
            return
        p = conn.player
        if p is None:
            if m := CLIENT.match(line):
                conn.send("OK")
            elif m := PROTOCOL.match(line):
                conn.protocol = int(m.group(1))
                conn.send("OK")
            elif line.startswith("Login ") and self.hold_logins.is_set():
                conn.kill()
            elif m := LOGIN_GUEST.match(line):
                self._login(conn, self._guest(m.group(1)))
            elif m := LOGIN.match(line):
                q = self._players.get(m.group(1))
                if q is None or q.password is None or q.password != m.group(2):
                    conn.send("Authentication failure")
                else:
                    self._login(conn, q)
            else:
                self._nok(conn, line, "")
            return
        g = p.game
        if g is None and (m := SEEK_V3.match(line) or SEEK_V2.match(line) or SEEK_V1.match(line)):
            self._seek(conn, m)
        elif g is None and (m := ACCEPT.match(line)):
            self._accept(conn, int(m.group(1)), line)
        elif g is not None and (m := PLACE.match(line)) and int(m.group(1)) == g.number:
            piece = "C" if m.group(4) else ("S" if m.group(5) else "")
            self._play(conn, g, line, piece + m.group(2).lower() + m.group(3), line[line.index("P"):])
        elif g is not None and (m := MOVE.match(line)) and int(m.group(1)) == g.number:
            self._spread(conn, g, line, m)
        elif g is not None and (m := RESIGN.match(line)) and int(m.group(1)) == g.number:
            loser = g.colour_of(p)
            self._end(g, "0-1" if loser == WHITE else "1-0", "resign")
        else:
            self._nok(conn, line, "")

    def _guest(self, token: str) -> Player:
        if token and token in self._guests:
            return self._guests[token]
        self._next_guest += 1
        p = Player(f"Guest{self._next_guest}")
        self._players[p.name] = p
        if token:
            self._guests[token] = p
        return p

    def _login(self, conn: Conn, p: Player) -> None:
        """Log ``conn`` in as ``p`` in the server's order (module doc: guest and account login)."""
        if p.conn is not None and p.conn is not conn:
            old = p.conn
            old.send("Message You've logged in from another window. Disconnecting")
            old.player = None
            old.kill()
        p.conn = conn
        conn.player = p
        welcome_first = p.password is not None or self.rejoin_order == "welcome_first"
        if welcome_first:
            conn.send(f"Welcome {p.name}!")
        if p.game is not None:
            self._rejoin(conn, p, p.game)
        if not welcome_first:
            conn.send(f"Welcome {p.name}!")
        for s in self._seeks.values():
            conn.send(s.line("new", conn.protocol))
        for h in self._games.values():
            conn.send(f"GameList Add {self._game_list_form(h)}")
        self._send_online()

    def _rejoin(self, conn: Conn, p: Player, g: Game) -> None:
        """``Game.playerRejoin``: the game, its plies, the clock, then the notes."""
        if self.rejoin_layout == "protocol":
            conn.send(g.start_line(p, conn.protocol))
        else:
            s = g.seek
            colour = "white" if p is g.white else "black"
            conn.send(f"Game Start {g.number} {s.size} {g.white.name} vs {g.black.name} {colour} "
                      f"{s.time_s} {s.half_komi} {s.flats} {s.caps} 0 0")
        for mv in g.moves:
            conn.send(f"Game#{g.number} {mv}")
        conn.send(g.clock_line(conn.protocol))
        conn.send("Message Your game is resumed")
        self._tell(g.other(p), f"Message {p.name} has reconnected.")

    def _send_online(self) -> None:
        """``Online N`` (N: the connections) and ``OnlinePlayers [...]`` to everyone logged in."""
        names = ", ".join(f'"{c.player.name}"' for c in self._conns if c.player is not None)
        for c in list(self._conns):
            if c.player is not None:
                c.send(f"Online {len(self._conns)}")
                c.send(f"OnlinePlayers [{names}]")

    @staticmethod
    def _game_list_form(g: Game) -> str:
        s = g.seek
        return (f"{g.number} {g.white.name} {g.black.name} {s.size} {s.time_s} {s.increment_s} "
                f"{s.half_komi} {s.flats} {s.caps} {s.unrated} 0 0 0")

    def _game_list(self, kind: str, g: Game) -> None:
        for c in list(self._conns):
            if c.player is not None:
                c.send(f"GameList {kind} {self._game_list_form(g)}")

    def _disconnected(self, conn: Conn, quit_sent: bool) -> None:
        self._conns.discard(conn)
        p = conn.player
        conn.player = None
        if p is None or p.conn is not conn:
            return
        p.conn = None
        p.logged_out_at = time.monotonic()
        g = p.game
        if g is not None:
            self._tell(g.other(p), f"Message {p.name} has disconnected. They have "
                                   f"{self.reconnect_seconds:g} seconds to reconnect")
            timer = threading.Timer(self.reconnect_seconds, self._check_abandon, args=(g, p))
            timer.daemon = True
            timer.start()
        if p.seek is not None:
            self._remove_seek(p.seek)
        self._send_online()

    def _check_abandon(self, g: Game, p: Player) -> None:
        with self._lock:
            if p.conn is None and p.game is g and g.number in self._games:
                winner = g.other(p)
                self._tell(winner, f"Game#{g.number} Abandoned. {p.name} quit")
                self._end(g, "1-0" if winner is g.white else "0-1", "abandoned", announce=False)

    @staticmethod
    def _tell(p: Player, line: str) -> None:
        if p.conn is not None:
            p.conn.send(line)

    # -- seeks -------------------------------------------------------------------------------

    def _seek(self, conn: Conn, m: re.Match) -> None:
        p = conn.player
        assert p is not None
        g = m.groups()
        if p.seek is not None:
            self._remove_seek(p.seek)
        size = int(g[0])
        if size == 0:
            return
        if size not in STANDARD_RESERVES:
            size = 5
        if m.re is SEEK_V1:
            flats, caps = STANDARD_RESERVES[size]  # the server's V1 table: the standard counts
            colour, komi, unrated, opponent = (g[3] or " A").strip(), 0, 0, ""
        else:
            colour, komi, flats, caps, unrated = g[3], int(g[4]), int(g[5]), int(g[6]), int(g[7])
            opponent = g[-1]
        self._next_seek += 1
        s = Seek(self._next_seek, p, size, int(g[1]), int(g[2]), colour, min(komi, 8),
                  max(min(flats, 80), 10), min(caps, 5), unrated, opponent)
        p.seek = s
        self._seeks[s.number] = s
        self._broadcast_seek(s, "new")

    def _remove_seek(self, s: Seek) -> None:
        if self._seeks.pop(s.number, None) is not None:
            self._broadcast_seek(s, "remove")
        if s.owner.seek is s:
            s.owner.seek = None

    def _broadcast_seek(self, s: Seek, kind: str) -> None:
        for c in list(self._conns):
            if c.player is not None:
                c.send(s.line(kind, c.protocol))

    def _accept(self, conn: Conn, number: int, line: str) -> None:
        p = conn.player
        assert p is not None
        s = self._seeks.get(number)
        if (
            s is None
            or s.owner is p
            or s.owner.game is not None
            or s.owner.conn is None
            or (s.opponent and s.opponent.lower() != p.name.lower())
        ):
            self._nok(conn, line, "")
            return
        seeker = s.owner
        if s.colour == "A":
            seeker_white = self._rng.random() < 0.5
        else:
            seeker_white = s.colour == "W"
        white, black = (seeker, p) if seeker_white else (p, seeker)
        for q in (p, seeker):
            if q.seek is not None:
                self._remove_seek(q.seek)
        try:
            pos = Position.start(s.size, flats=s.flats, caps=s.caps, half_komi=s.half_komi)
        except ValueError as e:
            self._nok(conn, line, str(e))
            return
        self._next_game += 1
        g = Game(self._next_game, white, black, s, pos)
        g.clocks = [float(s.time_s), float(s.time_s)]
        self._games[g.number] = g
        self._game_list("Add", g)
        white.game = black.game = g
        for q in (p, seeker):  # the accepting player first (Client.run)
            if q.conn is not None:
                q.conn.send(g.start_line(q, q.conn.protocol))

    # -- play --------------------------------------------------------------------------------

    def _spread(self, conn: Conn, g: Game, line: str, m: re.Match) -> None:
        ptn, why = spread_ptn(m, g.seek.size)
        if why:
            self._nok(conn, line, why)
            return
        self._play(conn, g, line, ptn, line[line.index("M"):])

    def _play(self, conn: Conn, g: Game, line: str, ptn: str, record: str) -> None:
        p = conn.player
        assert p is not None
        mover = g.colour_of(p)
        if g.position.side_to_move != mover:
            self._nok(conn, line, "Not your turn")
            return
        try:
            code = g.position.check_move(ptn)
        except MoveError as e:
            self._nok(conn, line, str(e))
            return
        now = time.monotonic()
        if g.moves:
            g.clocks[mover] -= now - g.last_update
            if g.clocks[mover] <= 0:
                self._flag(g, mover)
                self._nok(conn, line, "")
                return
        g.clocks[mover] += g.seek.increment_s
        g.last_update = now
        placement_or_flatten = ((code >> 6) & 3) != SPREAD or g.position.is_flattening(code)
        g.position = g.position.play(code)
        g.moves.append(record.strip())
        g.plies_since_reset = 0 if placement_or_flatten else g.plies_since_reset + 1
        for q in (g.white, g.black):
            if q.conn is not None:
                q.conn.send(g.clock_line(q.conn.protocol))
        self._tell(g.other(p), f"Game#{g.number} {record.strip()}")
        if g.position.is_over:
            result = g.position.result
            self._end(g, str(result), result.reason)
        elif g.plies_since_reset >= STALE_PLIES:
            self._end(g, "1/2-1/2", "stale")
        conn.send("OK")

    def _flag(self, g: Game, loser: int) -> None:
        g.clocks[loser] = 0.0
        g.last_update = time.monotonic()
        for q in (g.white, g.black):
            if q.conn is not None:
                q.conn.send(g.clock_line(q.conn.protocol))
        self._end(g, "0-1" if loser == WHITE else "1-0", "time")

    def _watch_clocks(self) -> None:
        while not self._stop.wait(0.01):
            with self._lock:
                now = time.monotonic()
                for g in list(self._games.values()):
                    if g.moves and g.remaining(now)[g.position.side_to_move] <= 0:
                        self._flag(g, g.position.side_to_move)

    def _end(self, g: Game, result: str, reason: str, announce: bool = True) -> None:
        if self._games.pop(g.number, None) is None:
            return
        clocks = g.remaining(time.monotonic())
        if announce:
            for q in (g.white, g.black):
                self._tell(q, f"Game#{g.number} Over {result}")
        for q in (g.white, g.black):
            q.game = None
        self._game_list("Remove", g)
        s = g.seek
        self.finished.append(FinishedGame(
            g.number, g.white.name, g.black.name, s.size, s.half_komi, s.flats, s.caps,
            result, reason, list(g.moves), (max(0.0, clocks[0]), max(0.0, clocks[1])),
        ))
        self._changed.notify_all()


__all__ = ["FinishedGame", "PlaytakServer"]
