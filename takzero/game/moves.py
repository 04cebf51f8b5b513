"""Moves as PTN and playtak server notation, over the compiled move codes of ``core``.

A move is an ``int`` code inside compiled code (see ``takzero.game.core``); :class:`Move` wraps one
for the Python API. Parsing checks what can be checked without a position (syntax, square on the
board, carry limit, drops summing to the count, travel within the board); whether the move is legal
in a position is :meth:`takzero.game.position.Position.check_move`'s job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from takzero.game.core import (
    CAP,
    DIR_CHARS,
    DIR_DOWN,
    DIR_LEFT,
    DIR_RIGHT,
    DIR_UP,
    FLAT,
    SPREAD,
    WALL,
    bit_length,
    direction_step,
    distance_to_edge,
    make_placement,
    make_spread,
)

FILES = "abcdefgh"
_PLACEMENT_RE = re.compile(r"^([FSC]?)([a-h])([1-8])$")
_SPREAD_RE = re.compile(r"^([1-8]?)([a-h])([1-8])([-+<>])([1-8]*)(\*?)$")
_MARKS = "'\"!?"


class MoveError(ValueError):
    """A move string that cannot be read, or a move that cannot be played (the message says why)."""


def square_index(name: str, size: int) -> int:
    """Square index (rank * size + file) of a name like ``c3``. Raises MoveError if off the board."""
    if len(name) != 2 or name[0] not in FILES or not name[1].isdigit():
        raise MoveError(f"'{name}' is not a square name")
    file = FILES.index(name[0])
    rank = int(name[1]) - 1
    if not (0 <= file < size and 0 <= rank < size):
        raise MoveError(f"square {name} is off the {size}x{size} board")
    return rank * size + file


def square_name(sq: int, size: int) -> str:
    """Name (``a1``..``h8``) of square index ``sq`` on a board of ``size``."""
    return FILES[sq % size] + str(sq // size + 1)


def drops_to_pattern(drops: list[int] | tuple[int, ...]) -> int:
    """Encode a list of drop counts (first square first) as a drop pattern (see ``core``)."""
    p = 0
    for d in drops:
        p = (p << d) | (1 << (d - 1))
    return p


def pattern_to_drops(pattern: int) -> list[int]:
    """Decode a drop pattern into the list of drop counts, first square first."""
    drops: list[int] = []
    k = bit_length(pattern)
    d = 0
    for i in range(k - 1, -1, -1):
        if (pattern >> i) & 1 and d:
            drops.append(d)
            d = 0
        d += 1
    drops.append(d)
    return drops


def strip_marks(text: str) -> str:
    """Remove trailing annotation marks (``'``, ``"``, ``!``, ``?``) from a PTN move token."""
    return text.rstrip(_MARKS)


def parse_ptn(text: str, size: int) -> int:
    """Move code of a PTN move (``a1``, ``Fa1``, ``Sa1``, ``Ca1``, ``c3>``, ``3c3>111``, ``5d3-41*``).

    Marks ``'`` ``"`` ``!`` ``?`` after the move are accepted and ignored; ``*`` is optional.
    Raises MoveError naming what is wrong (syntax, square off the board, count over the carry
    limit, drops that do not sum to the count, a spread leaving the board).
    """
    token = strip_marks(text.strip())
    m = _PLACEMENT_RE.match(token)
    if m:
        piece = {"": FLAT, "F": FLAT, "S": WALL, "C": CAP}[m.group(1)]
        return make_placement(square_index(m.group(2) + m.group(3), size), piece)
    m = _SPREAD_RE.match(token)
    if not m:
        raise MoveError(f"'{text}' is not a PTN move")
    count = int(m.group(1)) if m.group(1) else 1
    sq = square_index(m.group(2) + m.group(3), size)
    direction = DIR_CHARS.index(m.group(4))
    drops = [int(c) for c in m.group(5)] if m.group(5) else [count]
    if count > size:
        raise MoveError(f"'{text}': carries {count} pieces, over the carry limit {size}")
    if 0 in drops:
        raise MoveError(f"'{text}': every square passed needs at least one piece")
    if sum(drops) != count:
        raise MoveError(f"'{text}': drops {m.group(5)} sum to {sum(drops)}, not the count {count}")
    if len(drops) > distance_to_edge(sq, direction, size):
        raise MoveError(f"'{text}': the spread goes off the board")
    return make_spread(sq, direction, drops_to_pattern(drops))


def format_ptn(code: int, size: int, flatten: bool = False) -> str:
    """Shortest PTN of a move code (``a1``, ``Sa1``, ``Ca1``, ``c3>``, ``3c3>12``); ``flatten``
    appends ``*`` (the position decides whether a spread flattens a wall)."""
    sq = code & 63
    kind = (code >> 6) & 3
    name = square_name(sq, size)
    if kind != SPREAD:
        return {FLAT: "", WALL: "S", CAP: "C"}[kind] + name
    direction = (code >> 8) & 3
    drops = pattern_to_drops((code >> 10) & 255)
    count = sum(drops)
    text = (str(count) if count > 1 else "") + name + DIR_CHARS[direction]
    if len(drops) > 1:
        text += "".join(map(str, drops))
    return text + ("*" if flatten else "")


def parse_playtak(text: str, size: int) -> int:
    """Move code of a playtak server move: ``P A1``, ``P A1 W``, ``P A1 C``, ``M A2 A4 2 1``.

    ``M FROM TO D1 D2 ...``: the stack on FROM moves towards TO dropping D1 pieces on the first
    square passed, D2 on the next, ...; TO is the square of the last drop, so there are exactly as
    many drops as squares from FROM to TO (``M A2 A4 2 1`` is PTN ``3a2+21``). This is the
    server's rule (USTakAssociation/playtak-api, ``server/src/main/java/tak/Game.java``,
    ``moveMove``: "length of vals should be one less than no. of squares involved") and what it
    sends; :func:`format_playtak` writes the same.

    Raises MoveError for anything else (a move not in a straight line, a TO square that is not
    the last drop, bad drop counts).
    """
    parts = text.split()
    if not parts:
        raise MoveError("empty playtak move")
    if parts[0] == "P" and len(parts) in (2, 3):
        piece = FLAT
        if len(parts) == 3:
            if parts[2] not in ("W", "C"):
                raise MoveError(f"'{text}': piece must be W or C")
            piece = WALL if parts[2] == "W" else CAP
        return make_placement(square_index(parts[1].lower(), size), piece)
    if parts[0] == "M" and len(parts) >= 4:
        a = square_index(parts[1].lower(), size)
        b = square_index(parts[2].lower(), size)
        try:
            drops = [int(x) for x in parts[3:]]
        except ValueError:
            raise MoveError(f"'{text}': drops must be numbers") from None
        fa, ra, fb, rb = a % size, a // size, b % size, b // size
        if fa == fb and rb > ra:
            direction = DIR_UP
        elif fa == fb and rb < ra:
            direction = DIR_DOWN
        elif ra == rb and fb > fa:
            direction = DIR_RIGHT
        elif ra == rb and fb < fa:
            direction = DIR_LEFT
        else:
            raise MoveError(f"'{text}': from and to are not on one line")
        if abs(fb - fa) + abs(rb - ra) != len(drops):
            last = a + len(drops) * direction_step(direction, size)
            where = (
                f"end on {square_name(last, size).upper()}"
                if 0 <= len(drops) <= distance_to_edge(a, direction, size)
                else "leave the board"
            )
            raise MoveError(
                f"'{text}': {len(drops)} drops {where}, not {parts[2].upper()} "
                "(the second square is the last one dropped on)"
            )
        if min(drops) < 1 or sum(drops) > size:
            raise MoveError(f"'{text}': bad drop counts")
        return make_spread(a, direction, drops_to_pattern(drops))
    raise MoveError(f"'{text}' is not a playtak move")


def format_playtak(code: int, size: int) -> str:
    """Playtak server notation of a move code (``P A1 W``, ``M A2 A4 2 1``: the second square is
    the last one dropped on; see :func:`parse_playtak`)."""
    sq = code & 63
    kind = (code >> 6) & 3
    name = square_name(sq, size).upper()
    if kind != SPREAD:
        return "P " + name + {FLAT: "", WALL: " W", CAP: " C"}[kind]
    direction = (code >> 8) & 3
    drops = pattern_to_drops((code >> 10) & 255)
    end = sq + len(drops) * direction_step(direction, size)
    return f"M {name} {square_name(end, size).upper()} " + " ".join(map(str, drops))


@dataclass(frozen=True)
class Move:
    """One move on a board of ``size``; ``code`` is the compiled move code (see ``core``)."""

    code: int
    size: int

    @classmethod
    def from_ptn(cls, text: str, size: int) -> Move:
        """Parse PTN; raises MoveError."""
        return cls(parse_ptn(text, size), size)

    @classmethod
    def from_playtak(cls, text: str, size: int) -> Move:
        """Parse playtak server notation; raises MoveError."""
        return cls(parse_playtak(text, size), size)

    @property
    def is_placement(self) -> bool:
        return (self.code >> 6) & 3 != SPREAD

    @property
    def square(self) -> int:
        return self.code & 63

    @property
    def piece(self) -> int:
        """FLAT, WALL or CAP for a placement; SPREAD (0) for a spread."""
        return (self.code >> 6) & 3

    @property
    def direction(self) -> int:
        return (self.code >> 8) & 3

    @property
    def drops(self) -> list[int]:
        """Pieces dropped on each square passed (empty for a placement)."""
        return [] if self.is_placement else pattern_to_drops((self.code >> 10) & 255)

    @property
    def count(self) -> int:
        """Pieces carried (0 for a placement)."""
        return sum(self.drops)

    def to_ptn(self, flatten: bool = False) -> str:
        return format_ptn(self.code, self.size, flatten)

    def to_playtak(self) -> str:
        return format_playtak(self.code, self.size)

    def __str__(self) -> str:
        return self.to_ptn()
