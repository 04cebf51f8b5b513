"""PTN (Portable Tak Notation) game files: read one or many games, replay them, write them back.

A PTN file holds games one after another; each game is tag pairs (``[Key "Value"]``, one per line)
followed by move text::

    [Size "6"]
    [Komi "2"]

    1. a1 f6 {a comment}
    2. d4 c4' 3. 3c3>12* ...
    R-0

What the reader accepts (see ``tak-rules.md``):

* tags in any order; unknown tags are kept in order and written back. ``Size``, ``Komi`` (points,
  a multiple of 0.5), ``Flats``, ``Caps`` and ``TPS`` (the start position) set up the start; a
  missing ``Komi`` means 0, a missing ``Size`` is taken from ``TPS``;
* move numbers ``1.`` (optional: unnumbered move lists are fine; ``1.a1`` without a space too);
  ``N. -- move`` when the game starts from a black-to-move TPS;
* comments ``{...}`` anywhere between tokens (also spanning lines), kept with the ply they precede;
* moves in PTN (``a1``, ``Fa1``, ``Sa1``, ``Ca1``, ``c3>``, ``1c4>1``, ``5d3-41*``) with the marks
  ``'`` ``"`` ``!`` ``?`` after them (kept, and written back);
* result tokens ``R-0 0-R F-0 0-F 1-0 0-1 1/2-1/2 0-0 *`` on the last move line or on their own;
* any whitespace (double spaces, CRLF, no final newline).

Move numbers are checked: by default a number that does not match the ply count (``25.`` where
move 35 is due) is a :class:`PTNError`; with ``strict_numbers=False`` the reader reads the moves in
order, records each jump once in :attr:`PTNGame.warnings` and counts on from the number written.
A line that starts with white's ply but has no number, in a game whose other lines are numbered,
is also noted in ``warnings`` (it is not an error: unnumbered move lists are fine). Every error is a
:class:`PTNError` naming the source, line, column, token and the reason; an illegal move's reason is
the rule it breaks (from :meth:`takzero.game.position.Position.explain_illegal`).

Self-play and the match runner save games with :meth:`PTNGame.from_game` and :func:`write_ptn`.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from takzero.game import core
from takzero.game.core import STANDARD_RESERVES
from takzero.game.moves import Move, MoveError, format_ptn, parse_ptn, strip_marks
from takzero.game.position import Game, Position, TPSError, komi_to_half_komi

#: Result tokens a move text may end with.
RESULT_TOKENS = ("R-0", "0-R", "F-0", "0-F", "1-0", "0-1", "1/2-1/2", "0-0", "*")

_TAG_RE = re.compile(r'\[\s*([A-Za-z][A-Za-z0-9_]*)\s+"((?:[^"\\\n]|\\.)*)"\s*\]')
_NUMBER_RE = re.compile(r"(\d+)(\.+)")
_TOKEN_END = re.compile(r"[\s{]")
_SETUP_TAGS = ("Size", "Komi", "Flats", "Caps", "TPS")


class PTNError(ValueError):
    """A PTN text that cannot be read or replayed.

    Attributes: ``reason`` (what is wrong), ``line`` and ``column`` (1-based, ``None`` if unknown),
    ``token`` (the offending text, ``None`` if none) and ``source`` (file name or ``"<string>"``).
    ``str(error)`` is ``source:line:column: token '...': reason``.
    """

    def __init__(
        self,
        reason: str,
        *,
        line: int | None = None,
        column: int | None = None,
        token: str | None = None,
        source: str | None = None,
    ) -> None:
        self.reason = reason
        self.line = line
        self.column = column
        self.token = token
        self.source = source
        super().__init__(self._describe())

    def _describe(self) -> str:
        parts = []
        where = self.source or ""
        if self.line is not None:
            where += f":{self.line}" if where else f"line {self.line}"
            if self.column is not None:
                where += f":{self.column}" if self.source else f", column {self.column}"
        if where:
            parts.append(where)
        if self.token is not None:
            parts.append(f"token {self.token!r}")
        parts.append(self.reason)
        return ": ".join(parts)


# ---------------------------------------------------------------------------------------------
# Start position from tags
# ---------------------------------------------------------------------------------------------


def _int_tag(tags: Mapping[str, str], key: str) -> int | None:
    value = tags.get(key, "").strip()
    if not value:
        return None
    if not value.isdigit():
        raise ValueError(f"{key} tag must be a non-negative integer, got {value!r}")
    return int(value)


def start_from_tags(tags: Mapping[str, str]) -> Position:
    """The start position described by the tags ``Size``, ``Komi``, ``Flats``, ``Caps`` and ``TPS``.

    Missing ``Komi`` means 0; ``Flats``/``Caps`` default to the standard reserves; without ``TPS``
    the start is the empty board. Raises PTNError (no location) when the tags are missing or bad:
    no size at all, a size outside 3..8, a komi that is not a multiple of 0.5, a bad TPS, or a
    ``Size`` that contradicts the ``TPS``.
    """
    return _start_from_tags(tags, {})


def _start_from_tags(tags: Mapping[str, str], locs: Mapping[str, tuple[int, int]]) -> Position:
    def fail(key: str, reason: str) -> PTNError:
        line, col = locs.get(key, (None, None))
        token = f'[{key} "{tags[key]}"]' if key in tags else None
        return PTNError(reason, line=line, column=col, token=token)

    size: int | None = None
    try:
        size = _int_tag(tags, "Size")
    except ValueError as e:
        raise fail("Size", str(e)) from None
    if size is not None and size not in STANDARD_RESERVES:
        raise fail("Size", f"board size must be 3..8, got {size}")
    komi_text = tags.get("Komi", "").strip()
    try:
        komi = float(komi_text) if komi_text else 0.0
        komi_to_half_komi(komi)
    except ValueError:
        raise fail("Komi", f"Komi must be a number of points, a multiple of 0.5; got {komi_text!r}") from None
    try:
        flats = _int_tag(tags, "Flats")
    except ValueError as e:
        raise fail("Flats", str(e)) from None
    try:
        caps = _int_tag(tags, "Caps")
    except ValueError as e:
        raise fail("Caps", str(e)) from None
    tps = tags.get("TPS", "").strip()
    if tps:
        try:
            pos = Position.from_tps(tps, komi=komi, flats=flats, caps=caps)
        except TPSError as e:
            raise fail("TPS", f"bad TPS: {e}") from None
        except ValueError as e:
            raise fail("TPS", str(e)) from None
        if size is not None and pos.size != size:
            raise fail("Size", f"Size {size} does not match the {pos.size}x{pos.size} TPS board")
        return pos
    if size is None:
        raise PTNError("no Size tag (and no TPS tag): the board size is unknown")
    try:
        return Position.start(size, komi=komi, flats=flats, caps=caps)
    except ValueError as e:
        raise fail("Flats" if "Flats" in tags else "Size", str(e)) from None


# ---------------------------------------------------------------------------------------------
# The game record
# ---------------------------------------------------------------------------------------------


@dataclass
class PTNGame:
    """One game of a PTN file.

    * ``tags``: tag pairs in file order (``dict`` keeps the order); ``Size``/``Komi``/``Flats``/
      ``Caps``/``TPS`` define :attr:`start`, the others are kept as they are.
    * ``moves``: move codes (``takzero.game.core`` encoding) from the start position.
    * ``result``: the result token of the move text (one of :data:`RESULT_TOKENS`, ``""`` if none);
      the ``Result`` tag, if any, is in ``tags``.
    * ``comments``: ``comments[i]`` lists the comments (without braces) written before ply ``i``
      of the move text; ``comments[len(moves)]`` holds those after the last move.
    * ``marks``: ``marks[i]`` the annotation marks (``'``, ``"``, ``!``, ``?``) after move ``i``.
    * ``locations``: ``(line, column, token)`` of each move in the source (empty for a game built
      in code); ``warnings``: what a lenient read tolerated; ``line``: the line the game starts on;
      ``source``: the file name. These four do not take part in ``==``.
    """

    tags: dict[str, str] = field(default_factory=dict)
    moves: list[int] = field(default_factory=list)
    result: str = ""
    comments: dict[int, list[str]] = field(default_factory=dict)
    marks: dict[int, str] = field(default_factory=dict)
    locations: list[tuple[int, int, str]] = field(default_factory=list, compare=False)
    warnings: list[str] = field(default_factory=list, compare=False)
    line: int | None = field(default=None, compare=False)
    source: str | None = field(default=None, compare=False)

    # -- derived -----------------------------------------------------------------------------

    @property
    def start(self) -> Position:
        """The start position from the tags (a new object each time); raises PTNError."""
        return start_from_tags(self.tags)

    @property
    def size(self) -> int:
        """Board size (from ``Size`` or ``TPS``); raises PTNError."""
        return self.start.size

    @property
    def result_tag(self) -> str | None:
        """The ``Result`` tag, or None if the game has none."""
        return self.tags.get("Result")

    def move_error(self, index: int, reason: str) -> PTNError:
        """A PTNError about move ``index`` at its source location (if known)."""
        if index < len(self.locations):
            line, col, token = self.locations[index]
            return PTNError(reason, line=line, column=col, token=token, source=self.source)
        return PTNError(f"move {index + 1}: {reason}", line=self.line, source=self.source)

    def replay(self, ply_limit: int | None = None, threefold: bool = False) -> Game:
        """Play every move from :attr:`start` into a :class:`~takzero.game.position.Game` (with
        the optional adjudications ``ply_limit`` / ``threefold``). Raises PTNError at the first
        illegal move, naming its line and column and the rule it breaks."""
        try:
            game = Game(self.start, ply_limit=ply_limit, threefold=threefold)
        except PTNError as e:
            raise PTNError(e.reason, line=self.line, token=e.token, source=self.source) from None
        for i, code in enumerate(self.moves):
            try:
                game.play(code)
            except MoveError as e:
                raise self.move_error(i, str(e)) from None
        return game

    def final_position(self) -> Position:
        """The position after the last move under the rules alone (no adjudication; faster than
        :meth:`replay`). Raises PTNError like :meth:`replay`."""
        return self._walk(None)

    def ptn_moves(self) -> list[str]:
        """The moves as PTN strings, shortest form, ``*`` on flattening spreads, no marks.
        Raises PTNError if a move is illegal."""
        out: list[str] = []
        self._walk(out)
        return out

    def _walk(self, texts: list[str] | None) -> Position:
        try:
            pos = self.start
        except PTNError as e:
            raise PTNError(e.reason, line=self.line, token=e.token, source=self.source) from None
        buf = np.empty(core.num_actions(pos.size), dtype=np.int64)
        for i, code in enumerate(self.moves):
            if texts is not None and pos.is_flattening(code):
                text = Move(code, pos.size).to_ptn(flatten=True)
            elif texts is not None:
                text = format_ptn(code, pos.size)
            _play_checked(pos, code, buf, lambda reason, i=i: self.move_error(i, reason))
            if texts is not None:
                texts.append(text)
        return pos

    # -- construction from a played game -------------------------------------------------------

    @classmethod
    def from_game(
        cls,
        game: Game,
        tags: Mapping[str, str] | None = None,
        result: str | None = None,
        comments: Mapping[int, list[str]] | None = None,
    ) -> PTNGame:
        """A PTN record of a played :class:`~takzero.game.position.Game`.

        Tags written: ``Size``, ``Komi``, ``Flats``/``Caps`` (only if not the standard reserves),
        ``TPS`` (only if the game does not start from the empty board), then ``tags`` (e.g.
        ``Player1``, ``Date``), then ``Result``. ``result`` overrides the result (e.g. ``"1-0"``
        for a resignation); by default it is the game's result when it is over and no result
        otherwise. An adjudicated draw (ply limit, repetition) gets the result ``1/2-1/2`` and a
        trailing comment naming the adjudication.

        Raises ValueError if ``tags`` tries to set one of the setup tags or ``Result``, if
        ``result`` is not a result token, or if the start position cannot be described by tags
        (e.g. different reserves for the two players).
        """
        start = game.start
        size = start.size
        out_tags: dict[str, str] = {"Size": str(size), "Komi": f"{start.komi:g}"}
        totals = []
        for colour in (core.WHITE, core.BLACK):
            stones = start.stones(colour)
            caps = start.capstones(colour)
            for sq in range(size * size):
                colours, top = start.stack(sq)
                for depth, c in enumerate(reversed(colours)):
                    if c == colour:
                        if depth == 0 and top == core.CAP:
                            caps += 1
                        else:
                            stones += 1
            totals.append((stones, caps))
        if totals[0] != totals[1]:
            raise ValueError(f"the players' piece counts differ {totals}; PTN tags cannot say that")
        stones, caps = totals[0]
        if (stones, caps) != STANDARD_RESERVES[size]:
            out_tags["Flats"] = str(stones)
            out_tags["Caps"] = str(caps)
        empty = Position.start(size, half_komi=start.half_komi, flats=stones, caps=caps)
        if not np.array_equal(empty.state, start.state):
            out_tags["TPS"] = start.to_tps()
        for key, value in (tags or {}).items():
            if key in _SETUP_TAGS or key == "Result":
                raise ValueError(f"tag {key} is set from the game; pass result= for the result")
            out_tags[key] = value
        rebuilt = start_from_tags(out_tags)
        if not np.array_equal(rebuilt.state, start.state):
            raise ValueError("the start position cannot be described by PTN tags")
        res = game.result
        out_comments = {k: list(v) for k, v in (comments or {}).items()}
        if result is None:
            result = str(res) if res.over else ""
            if res.over and res.reason in ("ply limit", "repetition"):
                out_comments.setdefault(len(game.moves), []).append(f"adjudicated draw: {res.reason}")
        elif result not in RESULT_TOKENS and result != "":
            raise ValueError(f"result must be one of {RESULT_TOKENS} or '', got {result!r}")
        if result:
            out_tags["Result"] = result
        return cls(tags=out_tags, moves=list(game.moves), result=result, comments=out_comments)


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _play_if_legal(state: np.ndarray, code: int, buf: np.ndarray) -> bool:
    """Make move ``code`` in place if it is legal (one compiled call); False if it is not."""
    n = core.generate_moves(state, buf)
    for j in range(n):
        if buf[j] == code:
            core.make_move(state, code)
            return True
    return False


def _play_checked(pos: Position, code: int, buf: np.ndarray, error: Callable[[str], PTNError]) -> None:
    """Play ``code`` in ``pos`` in place; raise ``error(reason)`` if it is illegal."""
    if not _play_if_legal(pos.state, code, buf):
        raise error(pos.explain_illegal(code))


class _Builder:
    """Collects one game while the text is scanned."""

    def __init__(self, line: int, reader: _Reader) -> None:
        self.reader = reader
        self.game = PTNGame(line=line, source=reader.source)
        self.tag_locs: dict[str, tuple[int, int]] = {}
        self.has_text = False  # move text started (number, move, '--' or result seen)
        self.pos: Position | None = None
        self.buf: np.ndarray | None = None
        self.skipped = False
        self.start_ply = 0
        self.numbered = False  # a move number has been seen
        self.number_offset = 0  # lenient reading: written numbers minus counted ones
        self.last_line = 0  # line of the last move-text token

    # -- helpers -----------------------------------------------------------------------------

    def error(self, reason: str, line: int, col: int, token: str | None) -> PTNError:
        return PTNError(reason, line=line, column=col, token=token, source=self.reader.source)

    def ensure_start(self, line: int, col: int, token: str | None) -> Position:
        if self.pos is None:
            try:
                self.pos = _start_from_tags(self.game.tags, self.tag_locs)
            except PTNError as e:
                if e.line is None:  # no location: blame the first move token
                    raise self.error(e.reason, line, col, token) from None
                raise PTNError(
                    e.reason, line=e.line, column=e.column, token=e.token, source=self.reader.source
                ) from None
            self.buf = np.empty(core.num_actions(self.pos.size), dtype=np.int64)
        return self.pos

    @property
    def ply(self) -> int:
        """Ply number of the next move."""
        return self.start_ply + len(self.game.moves)

    # -- tokens --------------------------------------------------------------------------------

    def tag(self, key: str, value: str, line: int, col: int, text: str) -> None:
        if key in self.game.tags:
            raise self.error(f"duplicate tag {key}", line, col, text)
        self.game.tags[key] = value
        self.tag_locs[key] = (line, col)

    def comment(self, text: str) -> None:
        self.game.comments.setdefault(len(self.game.moves), []).append(text)

    def number(self, token: str, number: int, dots: str, line: int, col: int) -> None:
        self._start_text(line, col, token)
        self.numbered = True
        ply = self.ply
        expected = ply // 2 + 1 + self.number_offset
        first = not self.game.moves and not self.skipped
        if ply % 2 == 1 and not (first or dots == "..."):
            self._numbering(f"move number {number} after white's ply of move {expected}; "
                            "a number starts a move (before white's ply)", line, col, token)
        elif number != expected:
            self._numbering(f"move number {number} where {expected} was expected", line, col, token)
            # Lenient: count on from the number written, so one jump is reported once.
            self.number_offset += number - expected
        self.last_line = line

    def _numbering(self, reason: str, line: int, col: int, token: str) -> None:
        if self.reader.strict_numbers:
            raise self.error(reason, line, col, token)
        self.game.warnings.append(f"line {line}, column {col}: {reason}")

    def skip(self, line: int, col: int, token: str) -> None:
        self._start_text(line, col, token)
        if self.game.moves or self.skipped or self.ply % 2 == 0:
            raise self.error(
                "'--' (no ply) may only stand for white's ply of the first move of a game "
                "that starts with black to move", line, col, token)
        self.skipped = True
        self.last_line = line

    def result_token(self, token: str, line: int, col: int) -> None:
        self._start_text(line, col, token)
        if self.game.result:
            raise self.error(f"second result token (the first was {self.game.result})", line, col, token)
        self.game.result = token
        self.last_line = line

    def move(self, token: str, line: int, col: int) -> None:
        pos = self._start_text(line, col, token)
        if self.game.result:
            raise self.error(f"move after the result token {self.game.result}", line, col, token)
        if self.numbered and line != self.last_line and self.ply % 2 == 0:
            self.game.warnings.append(f"line {line}, column {col}: move line without a move number")
        self.last_line = line
        key = (token, pos.size)
        code = self.reader.parsed.get(key)
        if code is None:
            try:
                code = parse_ptn(token, pos.size)
            except MoveError as e:
                raise self.error(str(e), line, col, token) from None
            self.reader.parsed[key] = code
        if self.reader.check:
            assert self.buf is not None
            _play_checked(pos, code, self.buf, lambda reason: self.error(reason, line, col, token))
        index = len(self.game.moves)
        marks = token[len(strip_marks(token)):]
        if marks:
            self.game.marks[index] = marks
        self.game.moves.append(code)
        self.game.locations.append((line, col, token))

    def _start_text(self, line: int, col: int, token: str) -> Position:
        pos = self.ensure_start(line, col, token)
        if not self.has_text:
            self.has_text = True
            self.start_ply = pos.ply
        return pos


class _Reader:
    def __init__(self, text: str, check: bool, strict_numbers: bool, source: str) -> None:
        self.text = text[1:] if text.startswith("\ufeff") else text
        self.check = check
        self.strict_numbers = strict_numbers
        self.source = source
        self.line_starts = [0] + [m.end() for m in re.finditer(r"\n", self.text)]
        self.parsed: dict[tuple[str, int], int] = {}  # move token and size -> code

    def where(self, offset: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.line_starts, offset) - 1
        return i + 1, offset - self.line_starts[i] + 1

    def error(self, reason: str, offset: int, token: str | None) -> PTNError:
        line, col = self.where(offset)
        return PTNError(reason, line=line, column=col, token=token, source=self.source)

    def read(self) -> list[PTNGame]:
        text = self.text
        games: list[PTNGame] = []
        cur: _Builder | None = None
        i = 0
        n = len(text)
        while i < n:
            ch = text[i]
            if ch.isspace():
                i += 1
                continue
            line, col = self.where(i)
            if ch == "{":
                end = text.find("}", i + 1)
                if end < 0:
                    raise self.error("comment '{' is never closed with '}'", i, "{")
                if cur is None:
                    cur = _Builder(line, self)
                cur.comment(text[i + 1 : end])
                i = end + 1
                continue
            if ch == "}":
                raise self.error("'}' without an opening '{'", i, "}")
            if ch == "[":
                m = _TAG_RE.match(text, i)
                eol = text.find("\n", i)
                eol = n if eol < 0 else eol
                if not m or m.end() > eol:
                    raise self.error('malformed tag pair; expected [Key "Value"] on one line', i,
                                     text[i:eol].rstrip())
                if cur is not None and cur.has_text:
                    games.append(self._finish(cur))
                    cur = None
                if cur is None:
                    cur = _Builder(line, self)
                value = re.sub(r"\\(.)", r"\1", m.group(2))
                cur.tag(m.group(1), value, line, col, m.group(0))
                i = m.end()
                continue
            m_end = _TOKEN_END.search(text, i)
            end = n if m_end is None else m_end.start()
            token = text[i:end]
            if cur is None:
                cur = _Builder(line, self)
            self._token(cur, token, line, col)
            i = end
        if cur is not None and (cur.has_text or cur.game.tags):
            games.append(self._finish(cur))
        elif cur is not None and games:  # trailing comments after the last game
            for text_ in cur.game.comments.get(0, []):
                last = games[-1]
                last.comments.setdefault(len(last.moves), []).append(text_)
        return games

    def _token(self, cur: _Builder, token: str, line: int, col: int) -> None:
        if token in RESULT_TOKENS:
            cur.result_token(token, line, col)
            return
        if token == "--":
            cur.skip(line, col, token)
            return
        m = _NUMBER_RE.match(token)
        if m:
            cur.number(m.group(0), int(m.group(1)), m.group(2), line, col)
            rest = token[m.end():]
            if rest:
                self._token(cur, rest, line, col + m.end())
            return
        cur.move(token, line, col)

    def _finish(self, cur: _Builder) -> PTNGame:
        if cur.pos is None:  # tags only: still check that they describe a start position
            cur.ensure_start(cur.game.line or 1, 1, None)
        return cur.game


def read_ptn(
    text: str, *, check: bool = True, strict_numbers: bool = True, source: str = "<string>"
) -> list[PTNGame]:
    """Read every game of a PTN text (see the module docstring for what is accepted).

    ``check``: replay the moves while reading and reject illegal ones (with the rule they break).
    With ``check=False`` only the syntax, the tags and the move numbers are checked; call
    :meth:`PTNGame.replay` later (e.g. after fixing a tag). ``strict_numbers``: a move number that
    does not match the ply count is an error; when False it is recorded in ``warnings``.
    ``source`` names the text in error messages.

    Returns the games in file order (an empty list for a text without games). Raises PTNError
    naming the line, column, token and reason.
    """
    return _Reader(text, check, strict_numbers, source).read()


def read_ptn_file(
    path: str | os.PathLike[str], *, check: bool = True, strict_numbers: bool = True
) -> list[PTNGame]:
    """Read a PTN file (UTF-8) with :func:`read_ptn`; error messages name the file.

    Raises OSError for an unreadable file and PTNError for bad content, including bytes that are
    not UTF-8 (the error gives the line and column of the first such byte).
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise PTNError(
            f"not UTF-8 text (byte 0x{data[e.start]:02x}); is this a PTN file?",
            line=line,
            column=column,
            source=os.fspath(path),
        ) from None
    return read_ptn(text, check=check, strict_numbers=strict_numbers, source=os.fspath(path))


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def _escape(value: str) -> str:
    if "\n" in value:
        raise ValueError(f"a tag value cannot contain a newline: {value!r}")
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _comment(text: str) -> str:
    if "}" in text:
        raise ValueError(f"a PTN comment cannot contain '}}': {text!r}")
    return "{" + text + "}"


def write_ptn(game: PTNGame) -> str:
    """PTN text of one game: the tags in order, a blank line, then one line per move number
    (``N. white black``; ``N. -- black`` when the start is black to move), shortest move forms with
    ``*`` on spreads where a capstone flattens a wall, the stored marks and comments, and the
    result token (if any) at the end of the last line. Ends with a newline.

    Raises PTNError if the tags are bad or a move is illegal (the game is replayed to find the
    flattening spreads), ValueError if a tag value holds a newline, a comment holds ``}`` or a
    comment key is outside ``0..len(moves)``.
    """
    moves = game.ptn_moves()
    bad = [k for k in game.comments if not 0 <= k <= len(moves)]
    if bad:
        raise ValueError(f"comments at plies {bad}: the game has {len(moves)} moves")
    lines = [f'[{key} "{_escape(value)}"]' for key, value in game.tags.items()]
    body: list[str] = []
    if game.comments.get(0):
        body.append(" ".join(_comment(c) for c in game.comments[0]))
    ply0 = game.start.ply
    cur: list[str] | None = None
    for i, text in enumerate(moves):
        ply = ply0 + i
        if i > 0 and game.comments.get(i):
            assert cur is not None
            cur.extend(_comment(c) for c in game.comments[i])
        text += game.marks.get(i, "")
        if ply % 2 == 0:
            if cur:
                body.append(" ".join(cur))
            cur = [f"{ply // 2 + 1}.", text]
        elif cur is None:
            cur = [f"{ply // 2 + 1}.", "--", text]
        else:
            cur.append(text)
    if cur is None:
        cur = []
    if moves and game.comments.get(len(moves)):
        cur.extend(_comment(c) for c in game.comments[len(moves)])
    if game.result:
        cur.append(game.result)
    if cur:
        body.append(" ".join(cur))
    if lines and body:
        return "\n".join(lines) + "\n\n" + "\n".join(body) + "\n"
    return "\n".join(lines or body) + "\n"


def write_ptn_games(games: Iterable[PTNGame]) -> str:
    """PTN text of several games, separated by blank lines (see :func:`write_ptn`)."""
    return "\n".join(write_ptn(g) for g in games)


def write_ptn_file(path: str | os.PathLike[str], games: PTNGame | Iterable[PTNGame]) -> None:
    """Write one game or several to ``path`` (UTF-8), replacing the file."""
    text = write_ptn(games) if isinstance(games, PTNGame) else write_ptn_games(games)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def game_to_ptn(game: Game, **kwargs) -> str:
    """PTN text of a played :class:`~takzero.game.position.Game`; ``kwargs`` go to
    :meth:`PTNGame.from_game` (``tags``, ``result``, ``comments``)."""
    return write_ptn(PTNGame.from_game(game, **kwargs))


__all__ = [
    "RESULT_TOKENS",
    "PTNError",
    "PTNGame",
    "game_to_ptn",
    "read_ptn",
    "read_ptn_file",
    "start_from_tags",
    "write_ptn",
    "write_ptn_file",
    "write_ptn_games",
]
