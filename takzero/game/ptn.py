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

This module is the reader. The game record (:class:`PTNGame`, :class:`PTNError`,
:data:`RESULT_TOKENS`, :func:`start_from_tags`) lives in :mod:`takzero.game.ptn_game` and the
writer (:func:`write_ptn`, :func:`write_ptn_games`, :func:`write_ptn_file`, :func:`game_to_ptn`)
in :mod:`takzero.game.ptn_write`; all of them are importable from here too. Self-play and the
match runner save games with :meth:`PTNGame.from_game` and :func:`write_ptn`.
"""

from __future__ import annotations

import bisect
import os
import re

import numpy as np

from takzero.game import core
from takzero.game.moves import MoveError, parse_ptn, strip_marks
from takzero.game.position import Position
from takzero.game.ptn_game import (
    RESULT_TOKENS,
    PTNError,
    PTNGame,
    _play_checked,
    _start_from_tags,
    start_from_tags,
)
from takzero.game.ptn_write import game_to_ptn, write_ptn, write_ptn_file, write_ptn_games

_TAG_RE = re.compile(r'\[\s*([A-Za-z][A-Za-z0-9_]*)\s+"((?:[^"\\\n]|\\.)*)"\s*\]')
_NUMBER_RE = re.compile(r"(\d+)(\.+)")
_TOKEN_END = re.compile(r"[\s{]")
_MAX_MOVE_NUMBER = 100_000  # as in TPS; a game of more moves does not fit a Tak board


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


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
        # A loop, not recursion: ``1.1.1.…a1`` is one token of any length.
        while True:
            if token in RESULT_TOKENS:
                cur.result_token(token, line, col)
                return
            if token == "--":
                cur.skip(line, col, token)
                return
            m = _NUMBER_RE.match(token)
            if not m:
                cur.move(token, line, col)
                return
            digits = m.group(1)
            if len(digits) > len(str(_MAX_MOVE_NUMBER)) or int(digits) > _MAX_MOVE_NUMBER:
                shown = m.group(0) if len(m.group(0)) <= 20 else m.group(0)[:17] + "..."
                raise cur.error(f"move number {shown} is over {_MAX_MOVE_NUMBER}", line, col, shown)
            cur.number(m.group(0), int(digits), m.group(2), line, col)
            token = token[m.end():]
            col += m.end()
            if not token:
                return

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
