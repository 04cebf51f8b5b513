"""Python API of the rules: :class:`Position` (one position, TPS in and out) and :class:`Game`
(a history with the optional adjudications: ply limit and threefold repetition).

Both are thin wrappers over the compiled state array of ``takzero.game.core``; nothing here is in a
hot path. The TPS text is read in ``takzero.game.tps`` (``TPSError`` is re-exported here). See
``tak-rules.md`` for the rules and notations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from takzero.game import core
from takzero.game.core import (
    BLACK,
    CAP,
    EMPTY,
    FLAT,
    I_CAPS,
    I_HALF_KOMI,
    I_HASH,
    I_PLY,
    I_RESULT,
    I_SIZE,
    I_STONES,
    OFF_HEIGHT,
    OFF_TOP,
    SPREAD,
    STANDARD_RESERVES,
    WALL,
    WHITE,
)
from takzero.game.moves import FILES, Move, MoveError, parse_ptn, pattern_to_drops, square_name
from takzero.game.symmetry import transform_state
from takzero.game.tps import TPSError, parse_tps


class IllegalMoveError(MoveError):
    """A well-formed move that the rules forbid in this position; the message says which rule."""


@dataclass(frozen=True)
class Result:
    """Outcome of a position. ``code`` is a core.RESULT_* value; ``reason`` is 'road', 'flat',
    'draw' (flat tie), 'ply limit', 'repetition' or '' (game goes on)."""

    code: int
    reason: str = ""

    @property
    def over(self) -> bool:
        return self.code != core.RESULT_NONE

    @property
    def winner(self) -> int | None:
        """WHITE (0), BLACK (1), or None for a draw or an unfinished game."""
        w = core.result_winner(self.code)
        return w if w >= 0 else None

    @property
    def is_draw(self) -> bool:
        return self.code == core.RESULT_DRAW

    def __str__(self) -> str:
        return core.RESULT_STRINGS[self.code]


_RESULT_REASON = {0: "", 1: "road", 2: "road", 3: "flat", 4: "flat", 5: "draw"}


def komi_to_half_komi(komi: float) -> int:
    """Half-komi (integer) of a komi in points; raises ValueError unless komi is a multiple of 0.5."""
    if not isinstance(komi, int | float) or not -100 <= komi <= 100:
        raise ValueError(f"komi must be a number in -100..100, got {komi!r}")
    h = komi * 2
    if h != int(h):
        raise ValueError(f"komi must be a multiple of 0.5, got {komi}")
    return int(h)


def _resolve_half_komi(komi: float, half_komi: int | None) -> int:
    if half_komi is None:
        return komi_to_half_komi(komi)
    if int(half_komi) != half_komi or not -200 <= half_komi <= 200:
        raise ValueError(f"half_komi must be an integer in -200..200, got {half_komi!r}")
    return int(half_komi)


class Position:
    """One Tak position: board, reserves, side to move, ply, half-komi.

    ``state`` is the compiled state array (int64, ``core.STATE_LEN``); treat it as read-only unless
    you use :meth:`make`/:meth:`unmake`. :meth:`play` returns a new position.
    """

    __slots__ = ("state",)

    def __init__(self, state: np.ndarray) -> None:
        self.state = state

    # -- construction ------------------------------------------------------------------------

    @staticmethod
    def reserves_for(size: int, flats: int | None = None, caps: int | None = None) -> tuple[int, int]:
        """(stones, capstones) per player: the standard counts unless given. Raises ValueError."""
        if size not in STANDARD_RESERVES:
            raise ValueError(f"board size must be 3..8, got {size}")
        std_stones, std_caps = STANDARD_RESERVES[size]
        stones = std_stones if flats is None else flats
        capstones = std_caps if caps is None else caps
        if int(stones) != stones or int(capstones) != capstones:
            raise ValueError(f"piece counts must be whole numbers, got flats={stones} caps={capstones}")
        if not 1 <= stones <= 62 or not 0 <= capstones <= 2 * size:
            raise ValueError(
                f"flats must be 1..62 and caps 0..{2 * size} per player, got flats={stones} caps={capstones}"
            )
        return int(stones), int(capstones)

    @classmethod
    def start(
        cls,
        size: int,
        komi: float = 0.0,
        flats: int | None = None,
        caps: int | None = None,
        half_komi: int | None = None,
    ) -> Position:
        """The empty board of ``size`` (3..8); komi in points or ``half_komi`` (wins if given)."""
        stones, capstones = cls.reserves_for(size, flats, caps)
        hk = _resolve_half_komi(komi, half_komi)
        return cls(core.new_state(size, stones, capstones, hk))

    @classmethod
    def from_tps(
        cls,
        tps: str,
        komi: float = 0.0,
        flats: int | None = None,
        caps: int | None = None,
        half_komi: int | None = None,
    ) -> Position:
        """Read a TPS string (``x6/x6/x6/x6/x6/x6 1 1``). Reserves are the starting counts (standard
        unless ``flats``/``caps`` given) minus the pieces on the board. The result field is set if
        the position is already over (a road, a full board, an empty reserve).

        Raises TPSError naming the field, what is wrong and where (``line``/``column``), for any
        text (no recursion, no integer conversion of unbounded digit strings); ValueError for bad
        ``komi``/``flats``/``caps``/``half_komi`` arguments.
        """
        size, ply, cells = parse_tps(tps)
        stones, capstones = cls.reserves_for(size, flats, caps)
        hk = _resolve_half_komi(komi, half_komi)
        # Count before building: a stack taller than the reserves allow must never reach the
        # compiled state (core.new_state has checked that all the pieces fit one stack).
        state = core.new_state(size, stones, capstones, hk)
        state[I_PLY] = ply
        for colour, name in ((WHITE, "white"), (BLACK, "black")):
            digit = str(colour + 1)
            mine = [c for c in cells if digit in c.colours]
            capped = [c for c in mine if c.top == CAP and c.colours[-1] == digit]
            used_stones = sum(c.colours.count(digit) for c in mine) - len(capped)
            if used_stones > stones:
                raise TPSError(f"TPS has {used_stones} {name} stones, more than the {stones} allowed",
                               line=mine[0].line, column=mine[0].column)
            if len(capped) > capstones:
                raise TPSError(f"TPS has {len(capped)} {name} capstones, more than the {capstones} allowed",
                               line=capped[0].line, column=capped[0].column)
            state[I_STONES + colour] -= used_stones
            state[I_CAPS + colour] -= len(capped)
        for c in cells:
            for ch in c.colours:
                core._push(state, c.square, int(ch) - 1, 1)
            core._set_top(state, c.square, c.top)
        state[I_HASH] = core.hash_from_scratch(state)
        # A loaded position may already be over; the dragon clause needs a mover: the previous one.
        state[I_RESULT] = core.compute_result(state, (ply - 1) & 1)
        return cls(state)

    def copy(self) -> Position:
        return Position(self.state.copy())

    # -- properties --------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return int(self.state[I_SIZE])

    @property
    def ply(self) -> int:
        """Plies played since the start (0 = white's first ply)."""
        return int(self.state[I_PLY])

    @property
    def move_number(self) -> int:
        return self.ply // 2 + 1

    @property
    def side_to_move(self) -> int:
        """WHITE (0) or BLACK (1)."""
        return self.ply & 1

    @property
    def half_komi(self) -> int:
        return int(self.state[I_HALF_KOMI])

    @property
    def komi(self) -> float:
        return self.half_komi / 2

    @property
    def hash(self) -> int:
        """Zobrist hash (int64) of stacks, tops and side to move."""
        return int(self.state[I_HASH])

    def stones(self, colour: int) -> int:
        """Stones (flats/walls) left in ``colour``'s reserve."""
        return int(self.state[I_STONES + colour])

    def capstones(self, colour: int) -> int:
        return int(self.state[I_CAPS + colour])

    @property
    def result(self) -> Result:
        code = int(self.state[I_RESULT])
        return Result(code, _RESULT_REASON[code])

    @property
    def is_over(self) -> bool:
        return int(self.state[I_RESULT]) != core.RESULT_NONE

    def stack(self, sq: int) -> tuple[list[int], int]:
        """(colours bottom to top, top piece type) of square ``sq``."""
        h = int(self.state[OFF_HEIGHT + sq])
        colours = [core.piece_colour_at(self.state, sq, h - 1 - i) for i in range(h)]
        return colours, int(self.state[OFF_TOP + sq])

    def flat_counts(self) -> tuple[int, int]:
        """(white, black) stacks topped by a flat."""
        return core.flat_counts(self.state)

    # -- TPS ---------------------------------------------------------------------------------

    def to_tps(self) -> str:
        """TPS of the position, runs of empty squares merged into ``xN``."""
        size = self.size
        rows = []
        for rank in range(size - 1, -1, -1):
            cells: list[str] = []
            empty = 0
            for file in range(size):
                sq = rank * size + file
                colours, top = self.stack(sq)
                if not colours:
                    empty += 1
                    continue
                if empty:
                    cells.append("x" if empty == 1 else f"x{empty}")
                    empty = 0
                cells.append("".join(str(c + 1) for c in colours) + {FLAT: "", WALL: "S", CAP: "C"}[top])
            if empty:
                cells.append("x" if empty == 1 else f"x{empty}")
            rows.append(",".join(cells))
        return f"{'/'.join(rows)} {self.side_to_move + 1} {self.move_number}"

    # -- moves -------------------------------------------------------------------------------

    def legal_move_codes(self) -> np.ndarray:
        """Legal move codes (int64 array); empty when the game is over."""
        buf = np.empty(core.num_actions(self.size), dtype=np.int64)
        n = core.generate_moves(self.state, buf)
        return buf[:n].copy()

    def legal_moves(self) -> list[Move]:
        """Legal moves as :class:`Move` objects."""
        size = self.size
        return [Move(int(c), size) for c in self.legal_move_codes()]

    def _code(self, move: Move | str | int) -> int:
        if isinstance(move, Move):
            if move.size != self.size:
                raise MoveError(f"move for a {move.size}x{move.size} board on a {self.size}x{self.size} board")
            return move.code
        if isinstance(move, str):
            return parse_ptn(move, self.size)
        return int(move)

    def check_move(self, move: Move | str | int) -> int:
        """Move code of ``move`` if it is legal here; raises MoveError (bad PTN) or
        IllegalMoveError saying which rule the move breaks."""
        code = self._code(move)
        if code in set(self.legal_move_codes().tolist()):
            return code
        raise IllegalMoveError(self.explain_illegal(code))

    def explain_illegal(self, code: int) -> str:
        """Why move ``code`` is illegal here (a sentence naming the rule)."""
        size = self.size
        st = self.state
        text = Move(code, size).to_ptn()
        if self.is_over:
            return f"{text}: the game is over ({self.result})"
        sq = code & 63
        kind = (code >> 6) & 3
        mover = self.side_to_move
        name = square_name(sq, size)
        if sq >= size * size:
            return f"{text}: square off the board"
        if kind != SPREAD:
            if st[OFF_HEIGHT + sq] > 0:
                return f"{text}: {name} is not empty; placements go on empty squares"
            if self.ply < 2 and kind != FLAT:
                return f"{text}: on each player's first turn only a flat (of the opponent's colour) may be placed"
            if kind == CAP and st[I_CAPS + mover] == 0:
                return f"{text}: no capstone left in the reserve"
            if kind != CAP and st[I_STONES + mover] == 0:
                return f"{text}: no stones left in the reserve"
            return f"{text}: illegal placement"
        if self.ply < 2:
            return f"{text}: nothing may move on each player's first turn; place a flat of the opponent's colour"
        h = int(st[OFF_HEIGHT + sq])
        drops = pattern_to_drops((code >> 10) & 255)
        count = sum(drops)
        if h == 0:
            return f"{text}: {name} is empty; there is no stack to move"
        if core.top_colour(st, sq) != mover:
            return f"{text}: the stack on {name} is controlled by the opponent"
        if count > h:
            return f"{text}: carries {count} pieces but the stack on {name} has only {h}"
        if count > size:
            return f"{text}: carries {count} pieces, over the carry limit {size}"
        direction = (code >> 8) & 3
        if len(drops) > core.distance_to_edge(sq, direction, size):
            return f"{text}: the spread goes off the board"
        step = core.direction_step(direction, size)
        s = sq
        for i, d in enumerate(drops):
            s += step
            t = int(st[OFF_TOP + s])
            last = i == len(drops) - 1
            if t == CAP:
                return f"{text}: cannot drop onto the capstone on {square_name(s, size)}"
            if t == WALL:
                if not last:
                    return f"{text}: cannot pass over the wall on {square_name(s, size)}"
                if st[OFF_TOP + sq] != CAP:
                    return f"{text}: only a capstone can flatten the wall on {square_name(s, size)}"
                if d != 1:
                    return f"{text}: a capstone flattens the wall on {square_name(s, size)} only alone"
        return f"{text}: illegal move"

    def is_flattening(self, move: Move | str | int) -> bool:
        """True if the (legal) spread ``move`` ends with a capstone flattening a wall."""
        code = self._code(move)
        if (code >> 6) & 3 != SPREAD:
            return False
        drops = pattern_to_drops((code >> 10) & 255)
        step = core.direction_step((code >> 8) & 3, self.size)
        end = (code & 63) + len(drops) * step
        return int(self.state[OFF_TOP + end]) == WALL

    def ptn(self, move: Move | str | int) -> str:
        """PTN of a legal move here, with ``*`` where a capstone flattens a wall."""
        code = self._code(move)
        return Move(code, self.size).to_ptn(flatten=self.is_flattening(code))

    def play(self, move: Move | str | int) -> Position:
        """A new position after ``move`` (PTN string, Move or code). Raises MoveError or
        IllegalMoveError; ``self`` is unchanged."""
        code = self.check_move(move)
        out = self.copy()
        core.make_move(out.state, code)
        return out

    def make(self, code: int) -> int:
        """Play a legal move code in place (no check); returns the undo token for :meth:`unmake`."""
        return core.make_move(self.state, code)

    def unmake(self, code: int, undo: int) -> None:
        """Undo :meth:`make` exactly."""
        core.unmake_move(self.state, code, undo)

    def transform(self, t: int) -> Position:
        """The position under board symmetry ``t`` (0..7, see ``takzero.game.symmetry``)."""
        return Position(transform_state(self.state, t))

    # -- misc --------------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Position) and bool(np.array_equal(self.state, other.state))

    def __hash__(self) -> int:
        return self.hash

    def __repr__(self) -> str:
        return f"Position('{self.to_tps()}', half_komi={self.half_komi})"

    def __str__(self) -> str:
        return render(self)


def render(pos: Position) -> str:
    """A plain-text drawing of the board: each square shows its stack bottom to top (``w``/``b``
    flats, ``S`` wall or ``C`` capstone marks the top), ranks top to bottom, plus reserves."""
    size = pos.size
    cells = []
    for sq in range(size * size):
        colours, top = pos.stack(sq)
        if not colours:
            cells.append(".")
            continue
        s = "".join("wb"[c] for c in colours)
        if top == WALL:
            s += "S"
        elif top == CAP:
            s += "C"
        cells.append(s)
    width = max(3, max(len(c) for c in cells))
    lines = []
    for rank in range(size - 1, -1, -1):
        row = " ".join(cells[rank * size + f].rjust(width) for f in range(size))
        lines.append(f"{rank + 1} {row}")
    lines.append("  " + " ".join(FILES[f].rjust(width) for f in range(size)))
    side = "white" if pos.side_to_move == WHITE else "black"
    lines.append(
        f"ply {pos.ply} ({side} to move), komi {pos.komi:g}; reserves: white {pos.stones(WHITE)}+"
        f"{pos.capstones(WHITE)}C, black {pos.stones(BLACK)}+{pos.capstones(BLACK)}C"
    )
    if pos.is_over:
        lines.append(f"result {pos.result} ({pos.result.reason})")
    return "\n".join(lines)


class Game:
    """A game from a start position with its moves, and the optional adjudications that are not
    official rules (both off unless given): ``ply_limit`` (a draw once that many plies have been
    played in the game) and ``threefold`` (a draw when one position occurs a third time since the
    last placement, as Tiltak adjudicates; position identity = the Zobrist hash of full stacks and
    side to move).
    """

    def __init__(self, start: Position, ply_limit: int | None = None, threefold: bool = False) -> None:
        if ply_limit is not None and ply_limit < 1:
            raise ValueError(f"ply_limit must be >= 1, got {ply_limit}")
        self.start = start.copy()
        self.position = start.copy()
        self.ply_limit = ply_limit
        self.threefold = threefold
        self.moves: list[int] = []
        self._undos: list[int] = []
        self._since_placement: list[int] = [start.hash]
        self._adjudicated: Result | None = None

    @property
    def size(self) -> int:
        return self.position.size

    @property
    def result(self) -> Result:
        """The rules' result, or an adjudicated draw ('ply limit', 'repetition')."""
        if self.position.is_over:
            return self.position.result
        return self._adjudicated or Result(core.RESULT_NONE)

    def play(self, move: Move | str | int) -> int:
        """Play a move (checked); returns its code. Raises IllegalMoveError when the rules ended the
        game. An adjudicated draw does not block play (the caller stops the game; as in Tiltak, a
        placement after a repetition draw clears the repetition history)."""
        if self.position.is_over:
            raise IllegalMoveError(f"the game is over ({self.result}, {self.result.reason})")
        code = self.position.check_move(move)
        self._undos.append(self.position.make(code))
        self.moves.append(code)
        if (code >> 6) & 3 != SPREAD:
            self._since_placement = [self.position.hash]
        else:
            self._since_placement.append(self.position.hash)
        self._adjudicate()
        return code

    def undo(self) -> int:
        """Take back the last move; returns its code. Raises IndexError if there is none."""
        code = self.moves.pop()
        # Replay from the start: rebuilds the repetition window too (only on undo, so cheap enough).
        moves = list(self.moves)
        self.position = self.start.copy()
        self.moves, self._undos = [], []
        self._since_placement = [self.start.hash]
        self._adjudicated = None
        for m in moves:
            self.play(m)
        return code

    def _adjudicate(self) -> None:
        self._adjudicated = None
        if self.position.is_over:
            return
        if self.threefold and self._since_placement.count(self.position.hash) >= 3:
            self._adjudicated = Result(core.RESULT_DRAW, "repetition")
        elif self.ply_limit is not None and len(self.moves) >= self.ply_limit:
            self._adjudicated = Result(core.RESULT_DRAW, "ply limit")

    def ptn_moves(self) -> list[str]:
        """The moves in PTN (with ``*`` on flattening spreads)."""
        pos = self.start.copy()
        out = []
        for code in self.moves:
            out.append(pos.ptn(code))
            pos.make(code)
        return out


__all__ = [
    "EMPTY",
    "Game",
    "IllegalMoveError",
    "Position",
    "Result",
    "TPSError",
    "komi_to_half_komi",
    "render",
]
