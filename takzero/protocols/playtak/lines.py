"""The text of each playtak server line a bot sends or reads: one formatter or parser per line.

Source: the playtak server, USTakAssociation/playtak-api (``server/README.md`` for the documented
commands; ``server/src/main/java/tak/Client.java``, ``Game.java`` and ``Seek.java`` for the exact
formats, which the README does not always match). Lines are plain text, one per ``\\n``; squares
are a capital file letter and a rank digit (``A1``); komi is in half points (0..8).

Client to server (what :mod:`takzero.protocols.playtak.bot` sends):

=====================================================  ==========================================
``Client NAME``                                        the client's name (``[A-Za-z-.0-9]{1,60}``)
``Protocol 2``                                         time updates in milliseconds (``Timems``,
                                                       version >= 1) and the ``Game Start`` layout
                                                       with the increment (version >= 2)
``Login Guest TOKEN``                                  a guest; the same 20-letter TOKEN within 4
                                                       hours logs in as the same guest (rejoin)
``Login NAME PASSWORD``                                a registered account
``Seek SIZE TIME INC W|B|A KOMI FLATS CAPS UNRATED     post a seek (the server's "V3" form; TIME and
0 0 0 OPPONENT``                                       INC in seconds; an empty OPPONENT lets
                                                       anyone accept; the trailing space matters)
``Accept N``                                           accept seek N
``Game#N P A1 [W|C]``, ``Game#N M A2 A4 2 1``          a placement / a spread (the second square is
                                                       the last one dropped on: see
                                                       :func:`takzero.game.moves.parse_playtak`)
``Game#N Resign``                                      resign game N
``PING``                                               keep-alive; the README recommends one every
                                                       30 s, and the server drops a client silent
                                                       for 60 s
``quit``                                               leave
=====================================================  ==========================================

Server to client (what the bot reads; anything else is logged and ignored):

==================================================================  ===========================
``Welcome NAME!``                                                   logged in as NAME
``Authentication failure``                                          wrong name or password
``Game Start N WHITE vs BLACK COLOUR SIZE TIME INC KOMI FLATS CAPS  a game starts (protocol
UNRATED TOURNAMENT TRIGGER AMOUNT BOT``                             >= 2); or rejoined, then
                                                                    followed by every ply so far
``Game Start N SIZE WHITE vs BLACK COLOUR TIME KOMI FLATS CAPS       the same, protocol 0/1 (no
TRIGGER AMOUNT``                                                    increment); a rejoin's in
                                                                    any protocol
                                                                    (``Game.playerRejoin``)
``Game#N P ...`` / ``Game#N M ...``                                 the opponent's ply (after a
                                                                    rejoin: every ply)
``Game#N Timems W B`` / ``Game#N Time W B``                         clocks in ms / whole
                                                                    seconds; sent before the
                                                                    ply it follows, and after
                                                                    the plies of a rejoin
``Game#N Over R-0|0-R|F-0|0-F|1/2-1/2|1-0|0-1|0-0``                 game over (``1-0``/``0-1``:
                                                                    time or resignation)
``Game#N Abandoned. NAME quit``                                     NAME left and did not come
                                                                    back in time: the other wins
                                                                    (sent to the winner only, in
                                                                    place of ``Over``)
``Seek new N NAME SIZE TIME INC W|B|A KOMI FLATS CAPS UNRATED       an open seek (protocol 2/3
TOURNAMENT TRIGGER AMOUNT OPPONENT BOT`` / ``Seek remove ...``      layout; 0/1 stop after
                                                                    OPPONENT, where an empty
                                                                    one is ``0`` from version 2)
``OK`` / ``NOK`` / ``Error:TEXT`` / ``Message TEXT`` / ``Online N``  acknowledgements and notes
                                                                    (``OK`` also answers
                                                                    ``PING``, before a login
                                                                    too)
==================================================================  ===========================
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from takzero.game.core import BLACK, STANDARD_RESERVES, WHITE
from takzero.game.moves import format_playtak

PROTOCOL_VERSION = 2
#: The keep-alive interval the server's README recommends (seconds).
PING_INTERVAL = 30.0
#: Results of ``Game#N Over``; the server's ``gameStateString``.
RESULTS = ("R-0", "0-R", "F-0", "0-F", "1/2-1/2", "1-0", "0-1", "0-0")
#: The server's limits on a seek (``Seek.java``): komi 0..8 half points, 10..80 flats, 0..5 caps.
MAX_HALF_KOMI = 8
FLATS_RANGE = (10, 80)
MAX_CAPS = 5

_CLIENT_NAME_RE = re.compile(r"^[A-Za-z\-.0-9]{1,60}$")
_USER_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]{3,15}$")
_PASSWORD_RE = re.compile(r"^[^\s]{6,50}$")
_GAME_RE = re.compile(r"^Game#(\d+) (.*)$")


class ProtocolError(ValueError):
    """A server line that does not have the documented form (the message says what is wrong)."""


# ---------------------------------------------------------------------------------------------
# Client to server
# ---------------------------------------------------------------------------------------------


def format_client(name: str) -> str:
    """``Client NAME``; raises ValueError for a name the server's pattern refuses."""
    if not _CLIENT_NAME_RE.match(name):
        raise ValueError(f"client name must be 1-60 of A-Z a-z 0-9 - . , got {name!r}")
    return f"Client {name}"


def format_protocol(version: int = PROTOCOL_VERSION) -> str:
    """``Protocol N``."""
    return f"Protocol {int(version)}"


def format_login_guest(token: str | None = None) -> str:
    """``Login Guest [TOKEN]``; TOKEN: 20 lower-case letters (raises ValueError otherwise)."""
    if token is None:
        return "Login Guest"
    if not re.fullmatch(r"[a-z]{20}", token):
        raise ValueError(f"a guest token is 20 lower-case letters, got {token!r}")
    return f"Login Guest {token}"


def format_login(user: str, password: str) -> str:
    """``Login NAME PASSWORD``; raises ValueError for a name or password the server refuses."""
    if not _USER_RE.match(user):
        raise ValueError(f"a playtak user name is a letter then 3-15 of A-Z a-z 0-9 _, got {user!r}")
    if not _PASSWORD_RE.match(password):
        raise ValueError("a playtak password is 6-50 characters without spaces")
    return f"Login {user} {password}"


@dataclass(frozen=True)
class SeekSpec:
    """A seek to post: board ``size``, ``time_s`` seconds per player, ``increment_s`` per move,
    ``colour`` of the seeker (``W``, ``B`` or ``A`` for either), ``half_komi`` (0..8), ``flats``
    and ``caps`` per player (None: the standard counts of the size), ``unrated``, and the
    ``opponent`` allowed to accept (empty: anyone). Raises ValueError for what the server would
    clamp or refuse."""

    size: int
    time_s: int
    increment_s: int = 0
    colour: str = "A"
    half_komi: int = 0
    flats: int | None = None
    caps: int | None = None
    unrated: bool = False
    opponent: str = ""

    def __post_init__(self) -> None:
        if self.size not in STANDARD_RESERVES:
            raise ValueError(f"board size must be 3..8, got {self.size}")
        if self.time_s < 1 or self.increment_s < 0:
            raise ValueError(f"time must be >= 1 s and increment >= 0 s, got {self.time_s} {self.increment_s}")
        if self.colour not in ("W", "B", "A"):
            raise ValueError(f"seek colour must be W, B or A, got {self.colour!r}")
        if not 0 <= self.half_komi <= MAX_HALF_KOMI:
            raise ValueError(f"komi must be 0..4 (half-komi 0..8) on playtak, got half-komi {self.half_komi}")
        if not FLATS_RANGE[0] <= self.stones <= FLATS_RANGE[1]:
            raise ValueError(f"flats must be {FLATS_RANGE[0]}..{FLATS_RANGE[1]} on playtak, got {self.stones}")
        if not 0 <= self.capstones <= MAX_CAPS:
            raise ValueError(f"caps must be 0..{MAX_CAPS} on playtak, got {self.capstones}")
        if self.opponent and not _USER_RE.match(self.opponent) and not self.opponent.startswith("Guest"):
            raise ValueError(f"bad opponent name {self.opponent!r}")

    @property
    def stones(self) -> int:
        return STANDARD_RESERVES[self.size][0] if self.flats is None else int(self.flats)

    @property
    def capstones(self) -> int:
        return STANDARD_RESERVES[self.size][1] if self.caps is None else int(self.caps)

    def command(self) -> str:
        """The ``Seek`` line (the server's V3 form; the trailing space before an empty opponent is
        needed: without it the server reads the line as its V2 form, with opponent ``0``)."""
        return (
            f"Seek {self.size} {self.time_s} {self.increment_s} {self.colour} {self.half_komi} "
            f"{self.stones} {self.capstones} {int(self.unrated)} 0 0 0 {self.opponent}"
        )


def format_accept(seek_number: int) -> str:
    """``Accept N``."""
    return f"Accept {int(seek_number)}"


def format_move(game_number: int, code: int, size: int) -> str:
    """``Game#N P A1`` / ``Game#N M A2 A4 2 1`` for a move code on a ``size`` board."""
    return f"Game#{int(game_number)} {format_playtak(code, size)}"


def format_resign(game_number: int) -> str:
    """``Game#N Resign``."""
    return f"Game#{int(game_number)} Resign"


PING = "PING"
QUIT = "quit"


# ---------------------------------------------------------------------------------------------
# Server to client
# ---------------------------------------------------------------------------------------------


def _int(text: str, what: str, line: str) -> int:
    if not (text.isascii() and text.lstrip("-").isdigit()):
        raise ProtocolError(f"{what} must be a whole number, got {text!r} in {line!r}")
    return int(text)


def parse_welcome(line: str) -> str:
    """The name in ``Welcome NAME!``; raises ProtocolError."""
    m = re.fullmatch(r"Welcome (\S+)!", line.strip())
    if not m:
        raise ProtocolError(f"not a login welcome: {line!r}")
    return m.group(1)


@dataclass(frozen=True)
class GameStart:
    """A ``Game Start`` line: game ``number``, player names, our ``colour`` (WHITE 0 / BLACK 1),
    ``size``, ``time_s`` per player, ``increment_s`` (None: protocol 0/1 lines do not carry it),
    ``half_komi``, ``flats`` and ``caps`` per player."""

    number: int
    white: str
    black: str
    colour: int
    size: int
    time_s: int
    increment_s: int | None
    half_komi: int
    flats: int
    caps: int


def parse_game_start(line: str) -> GameStart:
    """Read ``Game Start ...`` in either layout (see the module doc; the protocol >= 2 layout has
    ``vs`` as the fifth word, the older one as the sixth). Raises ProtocolError."""
    w = line.split()
    if w[:2] != ["Game", "Start"] or len(w) < 8:
        raise ProtocolError(f"not a game start: {line!r}")
    if w[4] == "vs" and len(w) >= 13:  # Game Start N WHITE vs BLACK COLOUR SIZE TIME INC KOMI FLATS CAPS
        number, white, black, colour = w[2], w[3], w[5], w[6]
        size, time_s, inc, komi, flats, caps = w[7:13]
        increment: int | None = _int(inc, "increment", line)
    elif w[5] == "vs" and len(w) >= 12:  # Game Start N SIZE WHITE vs BLACK COLOUR TIME KOMI FLATS CAPS
        number, size, white, black, colour = w[2], w[3], w[4], w[6], w[7]
        time_s, komi, flats, caps = w[8:12]
        increment = None
    else:
        raise ProtocolError(f"game start with an unknown layout: {line!r}")
    if colour not in ("white", "black"):
        raise ProtocolError(f"colour must be white or black, got {colour!r} in {line!r}")
    start = GameStart(
        number=_int(number, "game number", line),
        white=white,
        black=black,
        colour=WHITE if colour == "white" else BLACK,
        size=_int(size, "board size", line),
        time_s=_int(time_s, "time", line),
        increment_s=increment,
        half_komi=_int(komi, "komi", line),
        flats=_int(flats, "flats", line),
        caps=_int(caps, "caps", line),
    )
    if start.size not in STANDARD_RESERVES:
        raise ProtocolError(f"board size {start.size} is not 3..8 in {line!r}")
    return start


def parse_game_line(line: str) -> tuple[int, str]:
    """``Game#N REST`` -> (N, REST); raises ProtocolError."""
    m = _GAME_RE.match(line.strip())
    if not m:
        raise ProtocolError(f"not a game line: {line!r}")
    return int(m.group(1)), m.group(2).strip()


def parse_clock(rest: str) -> tuple[float, float]:
    """The clocks of ``Timems W B`` (milliseconds) or ``Time W B`` (seconds), as (white, black)
    in seconds; ``rest`` is the text after ``Game#N``. Raises ProtocolError."""
    w = rest.split()
    if len(w) != 3 or w[0] not in ("Time", "Timems"):
        raise ProtocolError(f"not a clock update: {rest!r}")
    white, black = (_int(x, "clock", rest) for x in w[1:])
    scale = 1000.0 if w[0] == "Timems" else 1.0
    return white / scale, black / scale


def parse_over(rest: str) -> str:
    """The result of ``Over RESULT`` (one of :data:`RESULTS`); raises ProtocolError."""
    w = rest.split()
    if len(w) != 2 or w[0] != "Over" or w[1] not in RESULTS:
        raise ProtocolError(f"not a game result: {rest!r}")
    return w[1]


def result_winner(result: str) -> int | None:
    """WHITE, BLACK, or None (a draw or ``0-0``) for a result of :data:`RESULTS`."""
    if result in ("R-0", "F-0", "1-0"):
        return WHITE
    if result in ("0-R", "0-F", "0-1"):
        return BLACK
    return None


@dataclass(frozen=True)
class SeekOffer:
    """A ``Seek new``/``Seek remove`` line: seek ``number`` by ``name``, ``size``, ``time_s``,
    ``increment_s``, the seeker's ``colour`` (W/B/A), ``half_komi``, ``flats``, ``caps`` and the
    ``opponent`` it is reserved for (empty: anyone)."""

    number: int
    name: str
    size: int
    time_s: int
    increment_s: int
    colour: str
    half_komi: int
    flats: int
    caps: int
    opponent: str

    def open_to(self, name: str) -> bool:
        """Whether ``name`` may accept this seek."""
        return self.opponent in ("", "0") or self.opponent.lower() == name.lower()


def parse_seek(line: str) -> tuple[str, SeekOffer]:
    """``Seek new ...`` / ``Seek remove ...`` -> ('new' or 'remove', the offer). Reads the
    protocol 0/1 layout (ends with the opponent, possibly empty) and the 2/3 layout (opponent
    ``0`` when open, then the bot flag). Raises ProtocolError."""
    w = line.split()
    if len(w) < 15 or w[0] != "Seek" or w[1] not in ("new", "remove"):
        raise ProtocolError(f"not a seek line: {line!r}")
    if w[7] not in ("W", "B", "A"):
        raise ProtocolError(f"seek colour must be W, B or A in {line!r}")
    offer = SeekOffer(
        number=_int(w[2], "seek number", line),
        name=w[3],
        size=_int(w[4], "board size", line),
        time_s=_int(w[5], "time", line),
        increment_s=_int(w[6], "increment", line),
        colour=w[7],
        half_komi=_int(w[8], "komi", line),
        flats=_int(w[9], "flats", line),
        caps=_int(w[10], "caps", line),
        opponent=w[15] if len(w) > 15 else "",
    )
    return w[1], offer


__all__ = [
    "FLATS_RANGE",
    "MAX_CAPS",
    "MAX_HALF_KOMI",
    "PING",
    "PING_INTERVAL",
    "PROTOCOL_VERSION",
    "QUIT",
    "RESULTS",
    "GameStart",
    "ProtocolError",
    "SeekOffer",
    "SeekSpec",
    "format_accept",
    "format_client",
    "format_login",
    "format_login_guest",
    "format_move",
    "format_protocol",
    "format_resign",
    "parse_clock",
    "parse_game_line",
    "parse_game_start",
    "parse_over",
    "parse_seek",
    "parse_welcome",
    "result_winner",
]
