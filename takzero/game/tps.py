"""Reading TPS text (Tak Positional System, ``x6/x6/x6/x6/x6/x6 1 1``): the syntax check and
the stacks, sizes and ply it names, each problem a :class:`TPSError` with its line and column.

Only the text is read here; :meth:`takzero.game.position.Position.from_tps` counts the pieces
against the reserves and builds the position (``Position.to_tps`` writes it back).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from takzero.game.core import CAP, FLAT, STANDARD_RESERVES, WALL

__all__ = ["TPSCell", "TPSError", "parse_tps"]


class TPSError(ValueError):
    """A TPS string that cannot be read; the message names the field and what is wrong.

    Attributes: ``reason`` (what is wrong, also ``str(error)``), ``line`` and ``column`` (1-based
    place in the TPS text where the problem starts; ``line`` is 1 unless the text has line
    breaks; both ``None`` when the problem is not in the text, e.g. not a string). The PTN reader
    turns them into the file's line and column of a ``TPS`` tag.
    """

    def __init__(self, reason: str, *, line: int | None = None, column: int | None = None) -> None:
        self.reason = reason
        self.line = line
        self.column = column
        super().__init__(reason)


_TPS_STACK_RE = re.compile(r"^([12]+)([SC]?)$")


@dataclass(frozen=True)
class TPSCell:
    """One stack of a TPS board: its square, colours bottom to top (``"1"``/``"2"``), top piece
    and where it is written (1-based line and column)."""

    square: int
    colours: str
    top: int
    line: int
    column: int


_TPS_MAX_MOVE_NUMBER = 100_000


def parse_tps(tps: object) -> tuple[int, int, list[TPSCell]]:
    """(size, ply, stacks) of a TPS text, checked for syntax only (reserves are checked by the
    caller). Every problem is a TPSError with its line and column; digit strings are checked by
    length before conversion, so no text makes ``int`` fail."""
    if not isinstance(tps, str):
        raise TPSError(f"TPS must be a string, got {type(tps).__name__}")
    line_starts = [0] + [m.end() for m in re.finditer("\n", tps)]

    def where(offset: int) -> tuple[int, int]:
        i = bisect.bisect_right(line_starts, offset) - 1
        return i + 1, offset - line_starts[i] + 1

    def fail(reason: str, offset: int) -> TPSError:
        line, column = where(offset)
        return TPSError(reason, line=line, column=column)

    fields = [(m.start(), m.group()) for m in re.finditer(r"\S+", tps)]
    if len(fields) != 3:
        offset = fields[3][0] if len(fields) > 3 else len(tps.rstrip())
        shown = tps if len(tps) <= 80 else tps[:77] + "..."
        raise fail(f"TPS needs 3 fields (board, side, move number), got {len(fields)}: '{shown}'", offset)
    (board_at, board), (side_at, side_text), (number_at, number_text) = fields
    rows = board.split("/")
    size = len(rows)
    if size not in STANDARD_RESERVES:
        raise fail(f"TPS board has {size} rows; sizes 3..8 are supported", board_at)
    if side_text not in ("1", "2"):
        raise fail(f"TPS side to move must be 1 or 2, got '{_shorten(side_text)}'", side_at)
    if not _is_number(number_text, 1, _TPS_MAX_MOVE_NUMBER):
        raise fail(f"TPS move number must be an integer in 1..{_TPS_MAX_MOVE_NUMBER}, "
                   f"got '{_shorten(number_text)}'", number_at)
    side = int(side_text) - 1
    ply = 2 * (int(number_text) - 1) + side
    cells: list[TPSCell] = []
    row_at = board_at
    for row_i, row in enumerate(rows):
        rank = size - 1 - row_i
        file = 0
        cell_at = row_at
        for cell in row.split(","):
            if cell.startswith("x"):
                k = cell[1:]
                if k and not _is_number(k, 1, 99):
                    raise fail(f"TPS row {row_i + 1}: bad empty-run '{_shorten(cell)}'", cell_at)
                file += int(k) if k else 1
            else:
                m = _TPS_STACK_RE.match(cell)
                if not m:
                    raise fail(f"TPS row {row_i + 1}: bad square '{_shorten(cell)}'", cell_at)
                if file >= size:
                    raise fail(f"TPS row {row_i + 1} has more than {size} squares", cell_at)
                top = {"": FLAT, "S": WALL, "C": CAP}[m.group(2)]
                line, column = where(cell_at)
                cells.append(TPSCell(rank * size + file, m.group(1), top, line, column))
                file += 1
            if file > size:
                raise fail(f"TPS row {row_i + 1} has {file} squares, expected {size}", cell_at)
            cell_at += len(cell) + 1
        if file != size:
            raise fail(f"TPS row {row_i + 1} has {file} squares, expected {size}", row_at)
        row_at += len(row) + 1
    return size, ply, cells


def _is_number(text: str, low: int, high: int) -> bool:
    """Whether ``text`` is an ASCII decimal integer in low..high (checked by length first, so a
    digit string of any length is safe)."""
    return (text.isascii() and text.isdigit() and len(text) <= len(str(high)) + 1
            and low <= int(text) <= high)


def _shorten(text: str, limit: int = 40) -> str:
    """``text`` cut to ``limit`` characters for an error message."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
