"""The records of the in-process playtak server (:mod:`takzero.protocols.playtak.server`) and
the lines they make: the server's command patterns (``Client.java``), seeks (their ``Seek new`` /
``Seek remove`` lines), players, games (``Game Start``, the clock lines, the clocks left), a
connection (a locked writer), the game record :class:`FinishedGame`, and the server's rule that
turns a spread line into PTN (:func:`spread_ptn`). Nothing here takes the server's lock: the server
calls them under it.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from dataclasses import dataclass, field

from takzero.game.core import (
    BLACK,
    DIR_CHARS,
    DIR_DOWN,
    DIR_LEFT,
    DIR_RIGHT,
    DIR_UP,
    WHITE,
)
from takzero.game.position import Position

# The server's patterns (Client.java), matched from the start of the line like Java's find().
LOGIN_GUEST = re.compile(r"^Login Guest ?(([a-z]{20})?)")
LOGIN = re.compile(r"^Login ([a-zA-Z][a-zA-Z0-9_]{3,15}) ([^\n\r\s]{6,50})")
CLIENT = re.compile(r"^Client ([A-Za-z\-.0-9]{1,60})")
PROTOCOL = re.compile(r"^Protocol ([0-9]{1,8})")
PLACE = re.compile(r"^Game#(\d+) P ([A-Z])(\d)( C)?( W)?")
MOVE = re.compile(r"^Game#(\d+) M ([A-Z])(\d) ([A-Z])(\d)(( \d)+)")
RESIGN = re.compile(r"^Game#(\d+) Resign")
SEEK_V3 = re.compile(
    r"^Seek (\d) (\d+) (\d+) ([WBA]) (\d+) (\d+) (\d+) (0|1) (0|1) (\d+) (\d+) ([A-Za-z0-9_]*)"
)
SEEK_V2 = re.compile(r"^Seek (\d) (\d+) (\d+) ([WBA]) (\d+) (\d+) (\d+) (0|1) (0|1) ([A-Za-z0-9_]*)")
SEEK_V1 = re.compile(r"^Seek (\d) (\d+) (\d+)( [WB])?")
ACCEPT = re.compile(r"^Accept (\d+)")
STALE_PLIES = 50


@dataclass
class FinishedGame:
    """A game the server ended: ``result`` as sent in ``Over`` (``1-0`` ... ``0-0``), ``reason``
    (road, flat, draw, time, resign, abandoned, stale), the plies in server notation, the clocks
    left (seconds) and the settings."""

    number: int
    white: str
    black: str
    size: int
    half_komi: int
    flats: int
    caps: int
    result: str
    reason: str
    moves: list[str]
    clocks: tuple[float, float]


@dataclass
class Seek:
    number: int
    owner: Player
    size: int
    time_s: int
    increment_s: int
    colour: str
    half_komi: int
    flats: int
    caps: int
    unrated: int
    opponent: str

    def line(self, kind: str, version: int) -> str:
        fields = [self.number, self.owner.name, self.size, self.time_s, self.increment_s,
                  self.colour, self.half_komi, self.flats, self.caps, self.unrated, 0, 0, 0]
        text = " ".join(map(str, fields))
        if version <= 1:
            return f"Seek {kind} {text} {self.opponent}"
        return f"Seek {kind} {text} {self.opponent or '0'} 0"


@dataclass
class Player:
    name: str
    password: str | None = None  # None: a guest
    conn: Conn | None = None
    game: Game | None = None
    seek: Seek | None = None
    logged_out_at: float = 0.0


@dataclass
class Game:
    number: int
    white: Player
    black: Player
    seek: Seek
    position: Position
    moves: list[str] = field(default_factory=list)
    clocks: list[float] = field(default_factory=lambda: [0.0, 0.0])
    last_update: float = 0.0
    plies_since_reset: int = 0

    def other(self, p: Player) -> Player:
        return self.black if p is self.white else self.white

    def colour_of(self, p: Player) -> int:
        return WHITE if p is self.white else BLACK

    def start_line(self, p: Player, version: int) -> str:
        """The ``Game Start`` line for player ``p`` in the layout of protocol ``version``."""
        s = self.seek
        colour = "white" if p is self.white else "black"
        if version < 2:
            return (f"Game Start {self.number} {s.size} {self.white.name} vs {self.black.name} "
                    f"{colour} {s.time_s} {s.half_komi} {s.flats} {s.caps} 0 0")
        return (f"Game Start {self.number} {self.white.name} vs {self.black.name} {colour} "
                f"{s.size} {s.time_s} {s.increment_s} {s.half_komi} {s.flats} {s.caps} "
                f"{s.unrated} 0 0 0 0")

    def remaining(self, now: float) -> list[float]:
        """The clocks [white, black] in seconds at ``now`` (``time.monotonic()``); the mover's
        runs from the first ply on (it may be negative: a flag fall not handled yet)."""
        clocks = list(self.clocks)
        if self.moves:
            clocks[self.position.side_to_move] -= now - self.last_update
        return clocks

    def clock_line(self, version: int) -> str:
        """The clocks now: ``Timems`` (milliseconds) from protocol 1, else ``Time`` (seconds)."""
        w, b = (max(0.0, c) for c in self.remaining(time.monotonic()))
        if version >= 1:
            return f"Game#{self.number} Timems {int(w * 1000)} {int(b * 1000)}"
        return f"Game#{self.number} Time {int(w)} {int(b)}"


class Conn:
    """One client connection: a locked writer; ``player`` once logged in."""

    def __init__(self, sock: socket.socket, sent: dict[str, list[str]] | None = None) -> None:
        self.sock = sock
        self.protocol = 0
        self.player: Player | None = None
        self._lock = threading.Lock()
        self._sent = sent
        self.closed = False

    def send(self, line: str) -> None:
        with self._lock:
            if self.closed:
                return
            if self._sent is not None:
                self._sent.setdefault(self.player.name if self.player else "", []).append(line)
            try:
                self.sock.sendall((line + "\n").encode())
            except OSError:
                self.closed = True

    def kill(self) -> None:
        with self._lock:
            self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def spread_ptn(m: re.Match, size: int) -> tuple[str, str]:
    """A ``Game#N M`` line matched by ``MOVE`` as PTN by the server's rule for a spread (the
    second square is the last one dropped on; as many drop counts as squares moved): ``(ptn,
    "")``, or ``("", why)`` with the server's ``NOK`` reason when the line is refused."""
    f1, r1, f2, r2 = m.group(2), int(m.group(3)), m.group(4), int(m.group(5))
    drops = [int(x) for x in m.group(6).split()]
    if f1 != f2 and r1 != r2:
        return "", "Move should be in straight line"
    if f1 == f2 and r1 == r2:
        return "", "Invalid move."
    if not all(0 <= ord(f) - 65 < size and 1 <= r <= size for f, r in ((f1, r1), (f2, r2))):
        return "", "Out of bounds"
    if f1 == f2:
        direction, distance = (DIR_UP if r2 > r1 else DIR_DOWN), abs(r2 - r1)
    else:
        direction, distance = (DIR_RIGHT if f2 > f1 else DIR_LEFT), abs(ord(f2) - ord(f1))
    if len(drops) != distance:  # the server: "length of vals should be one less than no. of squares"
        return "", "Invalid move."
    if min(drops) < 1:
        return "", "Should place atleast one tile in rest of the squares"
    return f"{sum(drops)}{f1.lower()}{r1}{DIR_CHARS[direction]}{''.join(map(str, drops))}", ""


__all__ = [
    "ACCEPT", "CLIENT", "LOGIN", "LOGIN_GUEST", "MOVE", "PLACE", "PROTOCOL", "RESIGN",
    "SEEK_V1", "SEEK_V2", "SEEK_V3", "STALE_PLIES", "Conn", "FinishedGame", "Game", "Player",
    "Seek", "spread_ptn",
]
