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

What it reads is bounded, so that no file makes it read or hold more than a bounded amount
(each bound a named constant below, each breach one PTNError naming the file): a file of at most
:data:`MAX_PTN_FILE_BYTES` (8 MiB) that is a regular file (a FIFO, a pipe, a device or a folder is
refused unread), a line of at most
:data:`MAX_PTN_LINE_CHARS` characters, a tag pair of at most :data:`MAX_PTN_TAG_CHARS`, a game of
at most :data:`MAX_PTN_PLIES` plies, a token of at most 100 characters.

Move numbers are checked: by default a number that does not match the ply count (``25.`` where
move 35 is due) is a :class:`PTNError`; with ``strict_numbers=False`` the reader reads the moves in
order, records each jump once in :attr:`PTNGame.warnings` and counts on from the number written.
A line that starts with white's ply but has no number, in a game whose other lines are numbered,
is also noted in ``warnings`` (it is not an error: unnumbered move lists are fine). Every error is a
:class:`PTNError` naming the source, line, column, token and the reason; an illegal move's reason is
the rule it breaks (from :meth:`takzero.game.position.Position.explain_illegal`).

This module is the reader. The game record (:class:`PTNGame`, :class:`PTNError`,
:data:`RESULT_TOKENS`, :func:`start_from_tags`) lives in :mod:`takzero.game.ptn_game` and the
writer (:func:`write_ptn`, :func:`write_ptn_games`, :func:`game_to_ptn`) in
:mod:`takzero.game.ptn_write`; all of them are importable from here too (a PTN file is written by
:func:`takzero.io.files.write_ptn_file`). Self-play and the
match runner save games with :meth:`PTNGame.from_game` and :func:`write_ptn`.
"""

from __future__ import annotations

import bisect
import os
import re
import stat
from dataclasses import dataclass

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
    result_tag_agrees,
    start_from_tags,
)
from takzero.game.ptn_write import game_to_ptn, write_ptn, write_ptn_games

_TAG_RE = re.compile(r'\[\s*([A-Za-z][A-Za-z0-9_]*)\s+"((?:[^"\\\n]|\\.)*)"\s*\]')
_NUMBER_RE = re.compile(r"(\d+)(\.+)")
_TOKEN_END = re.compile(r"[\s{]")
_NON_SPACE = re.compile(r"\S")
_MAX_MOVE_NUMBER = 100_000  # as in TPS; a game of more moves does not fit a Tak board

# Bounds of what the reader takes in, so that no file (a hostile one, /dev/urandom, a FIFO)
# makes it read or hold more than a bounded amount; each is one PTNError naming the file.
#: The most bytes of a PTN file :func:`read_ptn_file` and :func:`read_ptn_file_each` read (8 MiB:
#: some 20,000 self-play games; the reader holds some 100 bytes per byte of the smallest games
#: in memory). A bigger file is refused; a larger ``max_bytes`` argument raises the bound.
MAX_PTN_FILE_BYTES = 8 * 2**20
#: The longest line (characters) of a PTN text: a whole game of 10,000 moves on one line fits.
MAX_PTN_LINE_CHARS = 2**20
#: The longest tag pair ``[Key "Value"]`` (characters): a TPS of the tallest stacks fits.
MAX_PTN_TAG_CHARS = 4096
#: The most plies of one game (every numbered move up to the move-number bound).
MAX_PTN_PLIES = 2 * _MAX_MOVE_NUMBER


def _shown(text: str, limit: int = 40) -> str:
    """``text`` cut to ``limit`` characters (``...`` marking the cut), for a message."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
        self.game.tag_locations[key] = (line, col)

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
        if len(self.game.moves) >= MAX_PTN_PLIES:
            raise self.error(f"more than {MAX_PTN_PLIES} plies in one game (the reader's bound)",
                             line, col, _shown(token))
        key = (token, pos.size)
        code = self.reader.parsed.get(key)
        if code is None:
            try:
                code = parse_ptn(token, pos.size)
            except MoveError as e:
                raise self.error(str(e), line, col, _shown(token, 60)) from None
            if len(self.reader.parsed) < 100_000:  # a cache: bounded
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
        self._check_lines()
        self.parsed: dict[tuple[str, int], int] = {}  # move token and size -> code
        self.cur: _Builder | None = None  # the game being read

    def _check_lines(self) -> None:
        """PTNError at the first line longer than :data:`MAX_PTN_LINE_CHARS`."""
        ends = [*self.line_starts[1:], len(self.text) + 1]
        for k, (start, end) in enumerate(zip(self.line_starts, ends, strict=True)):
            if end - start - 1 > MAX_PTN_LINE_CHARS:
                raise PTNError(
                    f"a line of {end - start - 1} characters, over the reader's bound of "
                    f"{MAX_PTN_LINE_CHARS} (MAX_PTN_LINE_CHARS); is this a PTN file?",
                    line=k + 1, column=1, source=self.source,
                )

    def where(self, offset: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.line_starts, offset) - 1
        return i + 1, offset - self.line_starts[i] + 1

    def error(self, reason: str, offset: int, token: str | None) -> PTNError:
        line, col = self.where(offset)
        return PTNError(reason, line=line, column=col, token=token, source=self.source)

    def read(self) -> list[PTNGame]:
        """Every game; the first problem raises PTNError."""
        out = self.read_each(recover=False)
        return [g for g in out if isinstance(g, PTNGame)]

    def read_each(self, recover: bool) -> list[PTNGame | RejectedGame]:
        """Every game in file order; with ``recover``, a game with a problem becomes a
        :class:`RejectedGame` and reading goes on with the next game (see :func:`read_ptn_each`)."""
        games: list[PTNGame | RejectedGame] = []
        self.cur = None
        i = 0
        n = len(self.text)
        while i < n:
            try:
                i = self._step(i, games)
            except PTNError as e:
                if not recover:
                    raise
                cur = self.cur
                in_text = cur is not None and cur.has_text
                game_line = cur.game.line if cur is not None and cur.game.line else (e.line or 1)
                games.append(RejectedGame(line=game_line, error=e))
                i = self._next_game(e, in_text)
                self.cur = None
        cur = self.cur
        try:
            if cur is not None and (cur.has_text or cur.game.tags):
                games.append(self._finish(cur))
            elif cur is not None and games and isinstance(games[-1], PTNGame):
                last = games[-1]  # trailing comments after the last game
                for text_ in cur.game.comments.get(0, []):
                    last.comments.setdefault(len(last.moves), []).append(text_)
        except PTNError as e:
            if not recover:
                raise
            last_line = cur.game.line if cur is not None else None
            games.append(RejectedGame(line=last_line or e.line or 1, error=e))
        return games

    def _next_game(self, e: PTNError, in_text: bool) -> int:
        """Where reading goes on after a rejected game: the next line that starts with a tag
        (``[``) and begins a new game: after the error line when the error is in the move text;
        when it is among the tags, after the game's move text (the first tag line that follows a
        line that is neither a tag nor blank). A ``[`` at the start of a line inside a comment
        is taken for a tag, as a game's start; the reader then reports that game."""
        line_index = (e.line or 1)  # 0-based index of the line after the error line
        seen_text = in_text
        for k in range(line_index, len(self.line_starts)):
            start = self.line_starts[k]
            end = self.line_starts[k + 1] if k + 1 < len(self.line_starts) else len(self.text)
            stripped = self.text[start:end].strip()
            if stripped.startswith("["):
                if seen_text:
                    return start
            elif stripped:
                seen_text = True
        return len(self.text)

    def _step(self, i: int, games: list[PTNGame | RejectedGame]) -> int:
        """Read what starts at offset ``i`` (blank, comment, tag or token) into the game being
        built (``self.cur``, started here when None); returns the next offset."""
        text = self.text
        cur = self.cur
        n = len(text)
        ch = text[i]
        if ch.isspace():
            m_next = _NON_SPACE.search(text, i + 1)
            return n if m_next is None else m_next.start()
        line, col = self.where(i)
        if ch == "{":
            end = text.find("}", i + 1)
            if end < 0:
                raise self.error("comment '{' is never closed with '}'", i, "{")
            if cur is None:
                cur = self.cur = _Builder(line, self)
            cur.comment(text[i + 1 : end])
            return end + 1
        if ch == "}":
            raise self.error("'}' without an opening '{'", i, "}")
        if ch == "[":
            if cur is not None and cur.has_text:  # a tag after move text starts the next game
                games.append(self._finish(cur))
                cur = self.cur = None
            if cur is None:
                cur = self.cur = _Builder(line, self)
            eol = text.find("\n", i, i + MAX_PTN_TAG_CHARS + 2)
            if eol < 0:
                eol = min(n, i + MAX_PTN_TAG_CHARS + 2)
            m = _TAG_RE.match(text, i, eol)  # the regex keeps a frame per character: bounded
            if not m and eol - i > MAX_PTN_TAG_CHARS:
                raise self.error(f"a tag line of over {MAX_PTN_TAG_CHARS} characters "
                                 "(the reader's bound, MAX_PTN_TAG_CHARS)", i, _shown(text[i:eol]))
            if not m:
                raise self.error('malformed tag pair; expected [Key "Value"] on one line', i,
                                 _shown(text[i:eol].rstrip(), 60))
            value = re.sub(r"\\(.)", r"\1", m.group(2))
            cur.tag(m.group(1), value, line, col, m.group(0))
            return m.end()
        m_end = _TOKEN_END.search(text, i)
        end = n if m_end is None else m_end.start()
        token = text[i:end]
        if len(token) > 100:  # no move, number or result is this long
            raise self.error(f"a token of {len(token)} characters; not a move, move number or "
                             "result", i, _shown(token))
        if cur is None:
            cur = self.cur = _Builder(line, self)
        self._token(cur, token, line, col)
        return end

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
        if self.check and cur.pos is not None:  # cur.pos is the final position: compare the tag
            cur.game.check_result_tag(cur.pos)
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
    naming the line, column, token and reason, also for a text over the reader's bounds (a line
    over :data:`MAX_PTN_LINE_CHARS`, a tag over :data:`MAX_PTN_TAG_CHARS` characters, a game of
    more than :data:`MAX_PTN_PLIES` plies, a token of more than 100 characters).
    """
    return _Reader(text, check, strict_numbers, source).read()


@dataclass
class RejectedGame:
    """A game of a file that could not be read (:func:`read_ptn_each`): ``line``, the line the
    game starts on, and ``error``, the PTNError with the line, column, token and reason."""

    line: int
    error: PTNError


def read_ptn_each(
    text: str, *, check: bool = True, strict_numbers: bool = True, source: str = "<string>"
) -> list[PTNGame | RejectedGame]:
    """Read a PTN text game by game: like :func:`read_ptn`, but a game with a problem (bad
    syntax, a bad tag, a wrong move number, with ``check`` an illegal move) is returned as a
    :class:`RejectedGame` in its place, and reading goes on with the next game (the next line
    starting with ``[`` after the rejected game's move text). Raises PTNError only for a text
    over the reader's bounds (a line over :data:`MAX_PTN_LINE_CHARS`); a game over its own (a tag
    over :data:`MAX_PTN_TAG_CHARS`, more than :data:`MAX_PTN_PLIES` plies) is a RejectedGame.
    """
    return _Reader(text, check, strict_numbers, source).read_each(recover=True)


def _file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words ('a folder', 'a FIFO or pipe', ...)."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO or pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


def read_bounded(path: str | os.PathLike[str], max_bytes: int = MAX_PTN_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them. Anything that is
    not a regular file (a FIFO, which would wait for a writer for ever; a pipe such as a piped
    ``/dev/stdin``; a device such as ``/dev/zero`` or ``/dev/urandom``; a folder; a socket) is
    refused from its ``stat`` before it is opened (and again from the opened file's ``fstat``,
    opened without blocking, should it have been swapped meanwhile); a regular file larger than
    ``max_bytes`` is refused from its size, before anything is read (or when it grows past the
    bound while being read). Save the output of a pipe to a file to read it.

    Raises PTNError (one line naming the file and what it is, or its size and the bound),
    OSError for a file that cannot be looked at or read (no such file, permissions)."""
    source = os.fspath(path)

    def check(st: os.stat_result) -> None:
        if not stat.S_ISREG(st.st_mode):
            raise PTNError(
                f"not a regular file ({_file_kind(st.st_mode)}): only a regular file of at most "
                f"{max_bytes:,} bytes is read (MAX_PTN_FILE_BYTES); nothing read", source=source)
        if st.st_size > max_bytes:
            raise PTNError(
                f"{st.st_size:,} bytes, over the reader's bound of {max_bytes:,} bytes for one file "
                "(MAX_PTN_FILE_BYTES): split it into smaller files", source=source)

    check(os.stat(path))  # follows links: /dev/stdin redirected from a file is that file
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as f:
        check(os.fstat(fd))
        os.set_blocking(fd, True)
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise PTNError(
            f"more than {max_bytes:,} bytes (it grew while read), over the reader's bound for one "
            "file (MAX_PTN_FILE_BYTES); read no further", source=source)
    return data


def _decode(data: bytes, path: str | os.PathLike[str]) -> str:
    """``data`` as UTF-8 text; PTNError with the line and column of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise PTNError(
            f"not UTF-8 text (byte 0x{data[e.start]:02x}); is this a PTN file?",
            line=line,
            column=column,
            source=os.fspath(path),
        ) from None


def read_ptn_file(
    path: str | os.PathLike[str], *, check: bool = True, strict_numbers: bool = True,
    max_bytes: int = MAX_PTN_FILE_BYTES,
) -> list[PTNGame]:
    """Read a PTN file (UTF-8) with :func:`read_ptn`; error messages name the file.

    Raises OSError for an unreadable file and PTNError for bad content, including bytes that are
    not UTF-8 (the error gives the line and column of the first such byte), and for a file over
    the reader's bounds: more than ``max_bytes`` (default :data:`MAX_PTN_FILE_BYTES`), or not a
    regular file (a FIFO, a pipe, a device such as ``/dev/zero``, a folder:
    :func:`read_bounded`), a line over
    :data:`MAX_PTN_LINE_CHARS`, a tag over :data:`MAX_PTN_TAG_CHARS` characters.
    """
    data = read_bounded(path, max_bytes)
    return read_ptn(_decode(data, path), check=check, strict_numbers=strict_numbers, source=os.fspath(path))


def read_ptn_file_each(
    path: str | os.PathLike[str], *, check: bool = True, strict_numbers: bool = True,
    max_bytes: int = MAX_PTN_FILE_BYTES,
) -> list[PTNGame | RejectedGame]:
    """Read a PTN file (UTF-8) game by game with :func:`read_ptn_each`; error messages name the
    file. Raises OSError for an unreadable file and PTNError for bytes that are not UTF-8 or a
    file over the reader's bounds (as :func:`read_ptn_file`: ``max_bytes``, a line, a tag)."""
    data = read_bounded(path, max_bytes)
    return read_ptn_each(_decode(data, path), check=check, strict_numbers=strict_numbers, source=os.fspath(path))


__all__ = [
    "MAX_PTN_FILE_BYTES",
    "MAX_PTN_LINE_CHARS",
    "MAX_PTN_PLIES",
    "MAX_PTN_TAG_CHARS",
    "RESULT_TOKENS",
    "PTNError",
    "PTNGame",
    "RejectedGame",
    "game_to_ptn",
    "read_bounded",
    "read_ptn",
    "read_ptn_each",
    "read_ptn_file",
    "read_ptn_file_each",
    "result_tag_agrees",
    "start_from_tags",
    "write_ptn",
    "write_ptn_games",
]
