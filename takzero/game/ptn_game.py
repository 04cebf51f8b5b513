"""The PTN game record: :class:`PTNGame` (tags, moves, result, comments, marks; replay and the
moves as PTN text; :meth:`PTNGame.from_game` for a played game), :class:`PTNError`,
:data:`RESULT_TOKENS` and the start position of a game's tags (:func:`start_from_tags`).

The format (tags ``Size``, ``Komi``, ``Flats``, ``Caps``, ``TPS``; PTN moves and result tokens)
is the one of ``tak-rules.md``; the reader that builds these records from text is
:mod:`takzero.game.ptn`, the writer :mod:`takzero.game.ptn_write`. Every name here is also
importable from :mod:`takzero.game.ptn`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from takzero.game import core
from takzero.game.core import STANDARD_RESERVES
from takzero.game.moves import Move, MoveError, format_ptn
from takzero.game.position import Game, Position, Result, TPSError, komi_to_half_komi

#: Result tokens a move text may end with.
RESULT_TOKENS = ("R-0", "0-R", "F-0", "0-F", "1-0", "0-1", "1/2-1/2", "0-0", "*")

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
        if self.token is not None:  # shown cut to 60 characters: a message stays one short line
            token = self.token if len(self.token) <= 60 else self.token[:57] + "..."
            parts.append(f"token {token!r}")
        parts.append(self.reason)
        return ": ".join(parts)


# ---------------------------------------------------------------------------------------------
# Start position from tags
# ---------------------------------------------------------------------------------------------


def _int_tag(tags: Mapping[str, str], key: str) -> int | None:
    """The tag ``key`` as a non-negative integer (None if absent or empty); ValueError otherwise.
    Checked by length before conversion, so no digit string makes ``int`` fail."""
    value = tags.get(key, "").strip()
    if not value:
        return None
    if not (value.isascii() and value.isdigit()) or len(value) > 6:
        shown = value if len(value) <= 20 else value[:17] + "..."
        raise ValueError(f"{key} tag must be a small non-negative integer, got {shown!r}")
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
    def fail(key: str, reason: str, offset: int | None = None) -> PTNError:
        """A PTNError about tag ``key``; ``offset`` (0-based, into the tag's value) moves the
        column from the tag's ``[`` to that character when the tag's place is known."""
        line, col = locs.get(key, (None, None))
        value = tags.get(key)
        token = None
        if value is not None:
            token = f'[{key} "{value if len(value) <= 60 else value[:57] + "..."}"]'
        if offset is not None and line is not None and col is not None and value is not None:
            col += len(f'[{key} "') + offset
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
        shown = komi_text if len(komi_text) <= 20 else komi_text[:17] + "..."
        raise fail("Komi", f"Komi must be a number of points, a multiple of 0.5; got {shown!r}") from None
    flats = caps = None
    for key in ("Flats", "Caps"):
        try:
            value = _int_tag(tags, key)
        except ValueError as e:
            raise fail(key, str(e)) from None
        if key == "Flats":
            flats = value
        else:
            caps = value
    tps = tags.get("TPS", "").strip()
    board_size = size
    if tps:
        try:
            board_size = len(tps.split()[0].split("/"))
        except IndexError:
            board_size = None
    if board_size in STANDARD_RESERVES:
        # The reserves are checked against the size here, so a problem names its own tag.
        if flats is not None and not 1 <= flats <= 62:
            raise fail("Flats", f"Flats must be 1..62 stones per player, got {flats}")
        if caps is not None and not 0 <= caps <= 2 * board_size:
            raise fail("Caps", f"Caps must be 0..{2 * board_size} capstones per player on "
                               f"{board_size}x{board_size}, got {caps}")
    if tps:
        try:
            pos = Position.from_tps(tps, komi=komi, flats=flats, caps=caps)
        except TPSError as e:
            # Columns of the TPS text, moved past the tag's leading blanks into the file's.
            lead = len(tags["TPS"]) - len(tags["TPS"].lstrip())
            offset = None if e.column is None or (e.line or 1) != 1 else lead + e.column - 1
            raise fail("TPS", f"bad TPS: {e.reason}", offset) from None
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
# Result tags compared by meaning
# ---------------------------------------------------------------------------------------------

#: Tags that say nothing checkable about the result (no result, unfinished, aborted/unknown).
_UNCHECKED_TAGS = ("", "*", "0-0")

#: Komi values (points) tried when a flat result only fits another komi (playtak's range).
KOMI_CANDIDATES = tuple(k / 2 for k in range(1, 9))


def result_tag_agrees(tag: str | None, result: Result) -> bool | None:
    """Whether a ``Result`` tag agrees with the result reached on the board, by meaning.

    * no tag, ``""``, ``*``, ``0-0``: None (nothing to check);
    * ``R-0`` ``0-R`` ``F-0`` ``0-F``: the board must show that result (same winner, same kind,
      road or flats); a record that stops before it disagrees;
    * ``1-0`` ``0-1`` (chess style): when the game is over on the board its winner must be that
      side (a road or a flat win both agree); when it is not over the game was decided off the
      board (resignation, time) and there is nothing to check (None);
    * ``1/2-1/2``: over on the board it must be a draw; not over, an agreed draw (None);
    * any other text: False (not a result).

    ``result`` is the result of the final position (``Position.result``). This is the rule of
    ``result_tag_agrees`` in tests/data/games/INDEX.json.
    """
    tag = (tag or "").strip()
    if tag in _UNCHECKED_TAGS:
        return None
    if tag not in RESULT_TOKENS:
        return False
    if tag in ("1-0", "0-1", "1/2-1/2"):
        if not result.over:
            return None
        if tag == "1/2-1/2":
            return result.winner is None
        return result.winner == (core.WHITE if tag == "1-0" else core.BLACK)
    return result.over and str(result) == tag


def _komi_values_matching_tag(tag: str, final: Position, tags: Mapping[str, str]) -> list[float]:
    """Komi values of :data:`KOMI_CANDIDATES` with which ``tag`` agrees with ``final`` (the same
    board and reserves; only a flat count can change with komi)."""
    flats = _int_tag(tags, "Flats")
    caps = _int_tag(tags, "Caps")
    out = []
    for komi in KOMI_CANDIDATES:
        pos = Position.from_tps(final.to_tps(), komi=komi, flats=flats, caps=caps)
        if result_tag_agrees(tag, pos.result):
            out.append(komi)
    return out


def _komi_range(values: list[float]) -> str:
    if len(values) == 1:
        return f"komi {values[0]:g}"
    step = KOMI_CANDIDATES[1] - KOMI_CANDIDATES[0]
    if all(b - a == step for a, b in zip(values, values[1:], strict=False)):
        return f"komi {values[0]:g} to {values[-1]:g}"
    return "komi " + ", ".join(f"{v:g}" for v in values)


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
      in code); ``warnings``: what a lenient read tolerated and a ``Result`` tag that disagrees
      with the moves (:meth:`check_result_tag`); ``line``: the line the game starts on;
      ``source``: the file name; ``tag_locations``: ``(line, column)`` of each tag. These five do
      not take part in ``==``.
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
    tag_locations: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False)

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

    def _start_error(self, e: PTNError) -> PTNError:
        """``e`` (a problem with the start tags) placed at the first line of this game."""
        return PTNError(e.reason, line=self.line, column=1 if self.line is not None else None,
                        token=e.token, source=self.source)

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
            raise self._start_error(e) from None
        for i, code in enumerate(self.moves):
            try:
                game.play(code)
            except MoveError as e:
                raise self.move_error(i, str(e)) from None
        return game

    def check_result_tag(self, final: Position | None = None) -> str | None:
        """Compare the ``Result`` tag with the result the moves reach (:func:`result_tag_agrees`:
        by meaning, so ``1-0`` agrees with a white road or flat win, and a resignation or a loss
        on time is no disagreement). On a disagreement, return its description (saying, when the
        game has no ``Komi`` tag and another komi would make the tag right, which komi) and append
        it to :attr:`warnings` once, prefixed with the tag's ``line L, column C:`` when known;
        otherwise return None.

        ``final``: the final position if already known (else replayed; raises PTNError like
        :meth:`final_position`).
        """
        tag = self.result_tag
        if tag is None:
            return None
        if final is None:
            final = self.final_position()
        if result_tag_agrees(tag, final.result) is not False:
            return None
        board = str(final.result) if final.is_over else "the game is not over"
        if final.is_over and final.result.reason:
            board += f" ({final.result.reason})"
        text = f"Result tag {tag} disagrees with the moves: {board}"
        if not self.tags.get("Komi", "").strip() and final.is_over:
            komis = _komi_values_matching_tag(tag, final, self.tags)
            if komis:
                text += f"; no Komi tag (komi 0 assumed), the tag fits {_komi_range(komis)}"
        warning = text
        if "Result" in self.tag_locations:
            line, col = self.tag_locations["Result"]
            warning = f"line {line}, column {col}: {text}"
        if warning not in self.warnings:
            self.warnings.append(warning)
        return text

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
            raise self._start_error(e) from None
        buf = np.empty(core.num_actions(pos.size), dtype=np.int64)
        for i, code in enumerate(self.moves):
            if texts is not None and pos.is_flattening(code):
                text = Move(code, pos.size).to_ptn(flatten=True)
            elif texts is not None:
                text = format_ptn(code, pos.size)
            _play_checked(pos, code, buf, functools.partial(self.move_error, i))
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
# Checked moves (the record's replay and the reader)
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


__all__ = ["KOMI_CANDIDATES", "RESULT_TOKENS", "PTNError", "PTNGame", "result_tag_agrees", "start_from_tags"]
