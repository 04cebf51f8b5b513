"""Openings for matches: random openings (:func:`random_openings`, move sequences from a start
position) and openings files (:func:`load_openings`: PTN moves or a TPS per line, or PTN games),
each an :class:`Opening` (a start position and the moves played from it).

Matches use paired openings: each opening is played twice, once with each player as white, so
first-move advantage and opening luck cancel within a pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from takzero.game.moves import MoveError
from takzero.game.position import Position, TPSError
from takzero.game.ptn import PTNError, read_bounded, read_ptn


def random_openings(
    start: Position, count: int, plies: int = 2, seed: int = 0, max_tries: int = 50
) -> list[tuple[int, ...]]:
    """``count`` random openings of ``plies`` uniformly random legal moves from ``start``, distinct
    while possible (after ``max_tries * count`` draws duplicates are allowed), none ending the game.
    Deterministic for a seed. Raises ValueError for count < 0, plies < 0, or a finished start."""
    if count < 0 or plies < 0:
        raise ValueError(f"count and plies must be >= 0, got count={count} plies={plies}")
    if start.is_over:
        raise ValueError(f"the start position is already over ({start.result})")
    rng = np.random.default_rng(seed)
    out: list[tuple[int, ...]] = []
    seen: set[tuple[int, ...]] = set()
    tries = 0
    while len(out) < count:
        tries += 1
        pos = start.copy()
        seq: list[int] = []
        for _ in range(plies):
            codes = pos.legal_move_codes()
            if len(codes) == 0:
                break
            code = int(codes[int(rng.integers(len(codes)))])
            seq.append(code)
            pos.make(code)
        if pos.is_over or len(seq) < plies:
            if tries > max_tries * max(count, 1):
                raise ValueError(f"could not find {count} openings of {plies} plies that go on")
            continue
        key = tuple(seq)
        if key in seen and tries <= max_tries * max(count, 1):
            continue
        seen.add(key)
        out.append(key)
    return out


@dataclass
class Opening:
    """A start position and the opening moves (codes) played from it."""

    start: Position
    moves: tuple[int, ...]

    def describe(self) -> str:
        """The opening as text for an ``Opening`` PTN tag: its moves in PTN, preceded by the
        start's TPS and `` | `` when the start is not the empty board."""
        pos = self.start.copy()
        out = []
        for code in self.moves:
            out.append(pos.ptn(code))
            pos.make(code)
        text = " ".join(out)
        std = Position.start(self.start.size, half_komi=self.start.half_komi)
        if self.start != std:
            return f"{self.start.to_tps()}" + (f" | {text}" if text else "")
        return text


def _opening_from_line(line: str, size: int, half_komi: int, where: str) -> Opening:
    text = line.split("#", 1)[0].strip()
    tps_part, bar, rest = text.partition("|")
    fields = tps_part.split()
    if len(fields) >= 3 and "/" in fields[0]:
        tps = " ".join(fields[:3])
        try:
            start = Position.from_tps(tps, half_komi=half_komi)
        except (TPSError, ValueError) as e:
            raise ValueError(f"{where}: bad TPS: {e}") from None
        move_text = " ".join(fields[3:]) + (" " + rest if bar else "")
    else:
        start = Position.start(size, half_komi=half_komi)
        move_text = text.replace("|", " ")
    if start.size != size:
        raise ValueError(f"{where}: a {start.size}x{start.size} position in a {size}x{size} match")
    pos = start.copy()
    codes = []
    for tok in move_text.split():
        if tok.rstrip(".").isdigit() or tok == "--":
            continue
        try:
            code = pos.check_move(tok)
        except MoveError as e:
            raise ValueError(f"{where}: opening move '{tok}': {e}") from None
        pos.make(code)
        codes.append(code)
    if pos.is_over:
        raise ValueError(f"{where}: the opening ends the game ({pos.result})")
    return Opening(start, tuple(codes))


def load_openings(path: str | Path, size: int, half_komi: int) -> list[Opening]:
    """Openings from a file: one per line (PTN moves, or a TPS optionally followed by ``|`` and
    moves; ``#`` comments and blank lines skipped), or PTN games when the file has tag pairs.

    Raises OSError for an unreadable file, ValueError naming the line for a bad opening (wrong
    size, illegal move, an opening that ends the game), an empty file, or a file that is not a
    regular one of at most ``MAX_PTN_FILE_BYTES`` of UTF-8 (a FIFO, a device: refused unread,
    ``takzero.game.ptn.read_bounded``)."""
    try:
        text = read_bounded(path).decode("utf-8")
    except PTNError as e:
        raise ValueError(str(e)) from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte {e.start}); is this an openings file?") from None
    out: list[Opening] = []
    if text.lstrip().startswith("["):
        try:
            games = read_ptn(text, source=str(path), strict_numbers=False)
        except PTNError as e:
            raise ValueError(str(e)) from None
        for g in games:
            start = g.start
            start = Position.from_tps(start.to_tps(), half_komi=half_komi)
            if start.size != size:
                raise ValueError(
                    f"{path}: a {start.size}x{start.size} game in a {size}x{size} match"
                )
            op = Opening(start, tuple(g.moves))
            pos = start.copy()
            for code in op.moves:
                pos.make(code)
            if pos.is_over:
                raise ValueError(f"{path}: game at line {g.line}: the opening ends the game")
            out.append(op)
    else:
        for i, line in enumerate(text.splitlines(), 1):
            if not line.split("#", 1)[0].strip():
                continue
            out.append(_opening_from_line(line, size, half_komi, f"{path}:{i}"))
    if not out:
        raise ValueError(f"{path}: no openings")
    return out


__all__ = ["Opening", "load_openings", "random_openings"]
