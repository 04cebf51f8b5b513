"""Replay buffer: compact position records, a growing window, a reuse cap, backpressure and
atomic on-disk shards.

A record is one searched position of a self-play game. Its fields (dtype, shape, meaning, and
the value a shard written before the field existed loads with) are declared once, in
:data:`RECORD_FIELDS`: board (the compact position, :func:`pack_states`), the policy target
(``policy_index``/``policy_prob``, the K largest), the outcome (``value``, ``flat_diff``), where
it came from (``game_id``, ``generation``, ``ply``), the ownership target, the opponent-policy
target, Reanalyse's ``search_value`` and the game's ``end_ply``. Each row names its producer: the
field's array from a finished game's typed record (``takzero.pipeline.game_record.GameRecord``,
:meth:`Records.from_game`), which is all self-play hands over.

Shards written before the ownership and opponent-policy fields existed load with ownership
invalid and no opponent-policy target; shards without ``search_value`` load as never reanalysed,
shards without ``end_ply`` with the game's end unknown (their value targets are not discounted).
The packed board holds everything a search needs to rebuild the position (stacks, reserves, ply,
hence the side to move, and the half-komi), so Reanalyse needs no other field.

Reanalyse (MuZero Reanalyse, Schrittwieser et al. 2021, "Online and Offline Reinforcement
Learning by Planning with a Learned Model"; the worker is ``takzero.pipeline.reanalyse``): the
buffer hands out batches of positions drawn uniformly without replacement from the window
(:meth:`ReplayBuffer.reanalyse_take`, its own random stream) and takes back their new targets
(:meth:`ReplayBuffer.reanalyse_apply`), which replace the policy target and ``search_value`` of
the same records in place: a refresh never adds a record and never changes ``total_added``, the
window or the reuse cap, so no position is counted twice. A record that left the window (or the
buffer) while it was searched is dropped, never written elsewhere. Rate: positions handed out
<= ``reanalyse_fraction`` x the samples the trainer drew (``total_sampled``), and a batch of n is
handed out only while at least n remain in that budget, so a worker that keeps up stays within
n of it. The value target of a sampled record is blended with ``search_value`` when the batch is
made (``takzero.pipeline.targets.blend_value``). Refreshes live in memory:
the shards keep the self-play targets, so a resumed run's reloaded records start unrefreshed
(the counters and the random stream continue from the checkpoint).

The buffer is a plain class so it can be tested without Ray; ``train.py`` wraps it as a Ray actor.

Window (KataGo, Wu 2019, "Accelerating Self-Play Learning in Go", section 5.1): with N positions
added so far, the newest ``W(N) = c * (1 + beta * ((N / c) ** alpha - 1) / alpha)`` positions are
sampled (W = N while N < c), capped at ``window_max``; ``fixed_window`` > 0 uses that size instead.

Reuse cap: the trainer may draw at most ``samples_per_position`` samples per position added (after
``min_positions``); :meth:`ReplayBuffer.sample` returns ``None`` when it is ahead, and
:meth:`ReplayBuffer.add` tells workers to wait when they are more than ``max_ahead`` positions ahead
of what the trainer has consumed, so memory stays bounded when workers outpace the trainer.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from takzero.game import core
from takzero.game.core import OFF_HEIGHT, OFF_HI, OFF_LO, OFF_TOP
from takzero.game.ownership import ownership
from takzero.pipeline.game_record import NO_PROOF, GameRecord

if TYPE_CHECKING:
    from takzero.config import ReplayConfig

log = logging.getLogger(__name__)

SHARD_RE = re.compile(r"^shard_(\d{8})\.npz$")


def _shard_number(path: Path) -> int:
    """The number in a shard's name (``shard_00000012.npz`` -> 12); the name matches SHARD_RE."""
    m = SHARD_RE.match(path.name)
    assert m is not None, path
    return int(m.group(1))


def board_record_len(size: int) -> int:
    """Bytes of one packed position on a board of ``size``."""
    nsq = size * size
    words = 2 if size >= 7 else 1  # 62 colour bits hold every stack up to 6x6 (62 pieces)
    return 16 + 2 * nsq + 8 * words * nsq


def _size_of_record(record_len: int) -> int:
    """The board size whose packed positions are ``record_len`` bytes long."""
    for size in range(3, 9):
        if board_record_len(size) == record_len:
            return size
    raise ValueError(f"no board size packs into {record_len} bytes")


def pack_states(states: np.ndarray, size: int) -> np.ndarray:
    """Pack states (B, STATE_LEN) int64 into (B, board_record_len(size)) uint8.

    Layout: header int16 x 8 (size, ply, white/black stones, white/black caps, half-komi, 0), then
    heights uint8 (N*N), top types uint8 (N*N), low colour words int64 (N*N), high colour words
    int64 (N*N, sizes 7 and 8 only).
    """
    states = np.atleast_2d(states)
    b = states.shape[0]
    nsq = size * size
    out = np.zeros((b, board_record_len(size)), dtype=np.uint8)
    header = np.zeros((b, 8), dtype=np.int16)
    header[:, :7] = states[:, :7]
    out[:, :16] = header.view(np.uint8)
    out[:, 16 : 16 + nsq] = states[:, OFF_HEIGHT : OFF_HEIGHT + nsq]
    out[:, 16 + nsq : 16 + 2 * nsq] = states[:, OFF_TOP : OFF_TOP + nsq]
    pos = 16 + 2 * nsq
    out[:, pos : pos + 8 * nsq] = np.ascontiguousarray(states[:, OFF_LO : OFF_LO + nsq]).view(np.uint8)
    if size >= 7:
        pos += 8 * nsq
        out[:, pos : pos + 8 * nsq] = np.ascontiguousarray(states[:, OFF_HI : OFF_HI + nsq]).view(
            np.uint8
        )
    return out


def _packed_fields(records: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """The fields of packed positions (B, board_record_len(size)) uint8 (:func:`pack_states`'s
    layout): header (B, 8) int16, heights (B, N*N) uint8, top types (B, N*N) uint8, and the colour
    words (B, N*N) int64, low then (sizes 7 and 8) high."""
    nsq = size * size
    header = np.ascontiguousarray(records[:, :16]).view(np.int16)
    heights = records[:, 16 : 16 + nsq]
    tops = records[:, 16 + nsq : 16 + 2 * nsq]
    pos = 16 + 2 * nsq
    words = [np.ascontiguousarray(records[:, pos : pos + 8 * nsq]).view(np.int64)]
    if size >= 7:
        words.append(np.ascontiguousarray(records[:, pos + 8 * nsq : pos + 16 * nsq]).view(np.int64))
    return header, heights, tops, words


def unpack_states(records: np.ndarray, size: int) -> np.ndarray:
    """Inverse of :func:`pack_states`: (B, R) uint8 -> (B, STATE_LEN) int64 with hashes
    recomputed and the result field 0 (records are never finished positions)."""
    records = np.atleast_2d(records)
    b = records.shape[0]
    nsq = size * size
    states = np.zeros((b, core.STATE_LEN), dtype=np.int64)
    header, heights, tops, words = _packed_fields(records, size)
    states[:, :7] = header[:, :7]
    states[:, OFF_HEIGHT : OFF_HEIGHT + nsq] = heights
    states[:, OFF_TOP : OFF_TOP + nsq] = tops
    states[:, OFF_LO : OFF_LO + nsq] = words[0]
    if size >= 7:
        states[:, OFF_HI : OFF_HI + nsq] = words[1]
    for i in range(b):
        states[i, core.I_HASH] = core.hash_from_scratch(states[i])
    return states


@dataclass(frozen=True)
class RecordField:
    """One field of a replay record, declared once: :data:`RECORD_FIELDS` is the schema that
    :class:`Records` (its empty batch, the filling of old shards, concatenation, slicing, the
    shard files and their checks) is derived from.

    Attributes:
        name: the field (and the ``Records`` attribute, and the shard's npz key).
        dtype: numpy scalar type of the stored array.
        width: ``""`` for one value per record, else what the row's length follows: ``"board"``
            (``board_record_len(size)``), ``"top_k"`` (``replay.top_k``), ``"squares"`` (N*N) or
            ``"opponent_top_k"`` (the opponent-policy width; 0 where a run does not train it).
        fill: the field's value in records and shards written before it existed (``None``: the
            field is required; a shard without it is refused).
        meaning: one line for the docs.
        group: fields added together: a shard that holds only some of a group gets them all
            filled (a partial write).
        low, high: the values a loaded shard's field may hold (inclusive; ``None``: no bound),
            a number or the name of a bound of the run's board (:data:`VALUE_BOUNDS`:
            ``"last_action"`` is A - 1, ``"squares"`` N*N, ``"-squares"`` -N*N); a float field
            must also be finite unless ``nan`` (NaN allowed: never set).
        nan: NaN is a valid value of the field (``search_value``: never reanalysed).
        rule: a check of the whole row beyond the bounds: ``"board"`` (the packed position is
            one the compiled rules can take, :func:`board_problem`) or ``"distribution"``
            (probabilities whose row sums to at most 1).
        produce: its producer (:data:`Produce`): the field's array, one row per recorded
            position, from a finished game's :class:`~takzero.pipeline.game_record.GameRecord`
            (:meth:`Records.from_game`); fields made together name one producer that returns a
            dict of them; None: self-play leaves the field at its fill (``search_value``, written
            by Reanalyse).
    """

    name: str
    dtype: type
    width: str
    fill: float | None
    meaning: str
    group: str = ""
    low: float | str | None = None
    high: float | str | None = None
    nan: bool = False
    rule: str = ""
    produce: Produce | None = None


@dataclass(frozen=True)
class Widths:
    """The row widths a run's records have (:class:`RecordField` ``width``): ``top_k``
    (``replay.top_k``) and ``opponent_top_k`` (0: no opponent-policy target)."""

    top_k: int
    opponent_top_k: int = 0


#: ``produce(game, widths)`` -> the field's (n, ...) array of the game's n recorded positions
#: (any dtype its field's holds: :class:`Records` casts), or a dict of the fields it makes.
Produce = Callable[[GameRecord, Widths], "np.ndarray | dict[str, np.ndarray]"]


def _board(game: GameRecord, w: Widths) -> np.ndarray:
    return pack_states(game.states, game.size)


def _policy(game: GameRecord, w: Widths) -> dict[str, np.ndarray]:
    idx, prob = sparse_targets(*game.policies(), w.top_k)
    return {"policy_index": idx, "policy_prob": prob}


def _value(game: GameRecord, w: Widths) -> np.ndarray:
    """The outcome for the mover (0: no winner); a proof beats the outcome
    (``selfplay.proven_value_targets``)."""
    outcome = np.zeros(len(game), np.int8) if game.winner < 0 else np.where(game.movers == game.winner, 1, -1)
    return np.where(game.proven != NO_PROOF, game.proven, outcome).astype(np.int8)


def _flat_diff(game: GameRecord, w: Widths) -> np.ndarray:
    white, black = core.flat_counts(game.final_state)
    return np.where(game.movers == 0, white - black, black - white).astype(np.int8)


def _ownership(game: GameRecord, w: Widths) -> dict[str, np.ndarray]:
    white_owner = ownership(game.final_state, 0)
    own = np.where(game.movers[:, None] == 0, white_owner[None], -white_owner[None]).astype(np.int8)
    return {"ownership": own, "own_valid": np.full(len(game), game.reason != "resign", np.bool_)}


def _opponent_policy(game: GameRecord, w: Widths) -> dict[str, np.ndarray]:
    """The next recorded position's policy target where that position is the very next ply."""
    n, k = len(game), w.opponent_top_k
    opp_idx = np.full((n, k), -1, np.int32)
    opp_prob = np.zeros((n, k), np.float16)
    if k > 0 and n > 1:
        plies = game.plies.astype(np.int64)
        rows = np.flatnonzero(plies[1:] == plies[:-1] + 1)  # the next ply was recorded
        if rows.size:
            opp_idx[rows], opp_prob[rows] = sparse_targets(*game.policies(rows + 1), k)
    return {"opp_index": opp_idx, "opp_prob": opp_prob}


def _per_game(value: Callable[[GameRecord], int]) -> Produce:
    """A producer of one value of the game's for each of its recorded positions."""
    return lambda game, w: np.full(len(game), value(game))


#: The replay record, field by field (see :class:`RecordField`). A new field: a row here (with
#: its producer from the game record, beside it), the attribute in :class:`Records`, and its reader
#: (a target of ``takzero.pipeline.targets``).
RECORD_FIELDS: tuple[RecordField, ...] = (
    RecordField("board", np.uint8, "board", None, "compact position (see pack_states)", rule="board",
                produce=_board),
    RecordField("policy_index", np.int32, "top_k", None, "action indices of the policy target (-1 = unused)",
                low=-1, high="last_action", produce=_policy),
    RecordField("policy_prob", np.float16, "top_k", None, "their probabilities (the K largest, renormalised)",
                low=0, high=1, rule="distribution", produce=_policy),
    RecordField("value", np.int8, "", None, "final outcome from the mover's view: +1, 0, -1", low=-1, high=1,
                produce=_value),
    RecordField("flat_diff", np.int8, "", None, "final flat count difference, mover's view",
                low="-squares", high="squares", produce=_flat_diff),
    RecordField("game_id", np.int64, "", None, "(stream << 32) | game counter (see selfplay.game_id)",
                produce=_per_game(lambda g: g.game_id)),
    RecordField("generation", np.int32, "", None, "model generation that played the move", low=0,
                produce=_per_game(lambda g: g.generation)),
    RecordField("ply", np.int16, "", None, "ply of the position", low=0, produce=lambda g, w: g.plies),
    RecordField("ownership", np.int8, "squares", 0, "final owner of each square's top piece, mover's "
                "view (+1 mover, -1 opponent, 0 empty; game.ownership)", "ownership", low=-1, high=1,
                produce=_ownership),
    RecordField("own_valid", np.bool_, "", False, "the game ended on the board (False: resigned)",
                "ownership", produce=_ownership),
    RecordField("opp_index", np.int32, "opponent_top_k", -1, "opponent-policy target: the next "
                "recorded position's policy target (all -1 / 0: none)", "opponent", low=-1, high="last_action",
                produce=_opponent_policy),
    RecordField("opp_prob", np.float16, "opponent_top_k", 0, "its probabilities", "opponent",
                low=0, high=1, rule="distribution", produce=_opponent_policy),
    RecordField("search_value", np.float16, "", np.nan, "root value of the last Reanalyse search, "
                "mover's view (NaN: never reanalysed)", low=-1, high=1, nan=True),
    RecordField("end_ply", np.int16, "", -1, "ply of the game's final position (the road, flat win, "
                "draw or resignation; -1: unknown)", low=-1,
                produce=_per_game(lambda g: int(g.final_state[core.I_PLY]))),
)  # fmt: skip


#: Bounds of :class:`RecordField` named after the run's board: (size) -> the bound.
VALUE_BOUNDS: dict[str, Any] = {
    "last_action": lambda size: core.num_actions(size) - 1,
    "squares": lambda size: size * size,
    "-squares": lambda size: -size * size,
}

#: The most pieces a position may hold in all, board and reserves: the rules core's two colour
#: words of a stack (``core.new_state``'s bound; ``core.Z_PIECE`` has MAX_HEIGHT = 128 rows).
MAX_PIECES = 2 * core.WORD_BITS
#: The largest half-komi the game takes (``game.position``: half_komi in -200..200).
MAX_HALF_KOMI = 200
#: How far over 1 a row of float16 probabilities may sum (rounding of the renormalised top K).
PROB_SUM_SLACK = 1e-2
_POWERS_OF_TWO = np.left_shift(np.int64(1), np.arange(core.WORD_BITS + 1, dtype=np.int64))  # 2 ** 0..62


def _first_row(bad: np.ndarray) -> int | None:
    """The first row of ``bad`` (B,) or (B, W) bool with a True in it, None when there is none."""
    if not bad.any():
        return None
    return int(np.argmax(bad.reshape(len(bad), -1).any(axis=1)))


def _first_problem(checks: list[tuple[np.ndarray, Any]]) -> tuple[int, str] | None:
    """The first row that fails any of ``checks`` ((bad rows (B,) or (B, W) bool, row -> what is
    wrong)) as (row, what), the earlier check's words where two fail on that row; None: none."""
    found: tuple[int, str] | None = None
    for bad, what in checks:
        i = _first_row(bad)
        if i is not None and (found is None or i < found[0]):
            found = (i, what(i))
    return found


def board_problem(board: np.ndarray, size: int) -> tuple[int, str] | None:
    """The first packed position of ``board`` ((B, board_record_len(size)) uint8, :func:`pack_states`)
    that the compiled rules cannot safely take as a position of a ``size`` board, as (row, what
    is wrong), or None when every row is one. Vectorised numpy (no compiled call sees a row before
    it passes): the header's size is ``size``, its ply >= 0, its four reserves >= 0, its half-komi
    within +-MAX_HALF_KOMI; each square's top type EMPTY..CAP, EMPTY exactly on the empty squares;
    a stack's height within the packed colour words (62 pieces a word) and no colour bit above it;
    the pieces on the board and in the reserves at most MAX_PIECES in all (so no move sequence can
    build a stack beyond the rules core's tables)."""
    assert board.ndim == 2 and board.shape[1] == board_record_len(size), board.shape
    header, heights, tops, words = _packed_fields(board, size)
    reserves = header[:, core.I_STONES : core.I_CAPS + 2]
    pieces = heights.sum(axis=1, dtype=np.int64) + reserves.sum(axis=1, dtype=np.int64)
    checks: list[tuple[np.ndarray, Any]] = [
        (header[:, core.I_SIZE] != size, lambda i: f"board size {header[i, core.I_SIZE]}, this run's is {size}"),
        (header[:, core.I_PLY] < 0, lambda i: f"ply {header[i, core.I_PLY]} is negative"),
        (reserves < 0, lambda i: f"a negative reserve {reserves[i].tolist()} (stones, stones, caps, caps)"),
        (np.abs(header[:, core.I_HALF_KOMI].astype(np.int32)) > MAX_HALF_KOMI,
         lambda i: f"half-komi {header[i, core.I_HALF_KOMI]} outside -{MAX_HALF_KOMI}..{MAX_HALF_KOMI}"),
        (tops > core.CAP, lambda i: f"a top piece type {int(tops[i].max())} (0..{core.CAP})"),
        ((heights == 0) != (tops == core.EMPTY), lambda i: "an empty square with a top piece, or a stack without one"),
        (heights > core.WORD_BITS * len(words),
         lambda i: f"a stack of {int(heights[i].max())} pieces, more than the packed colour words hold"),
        (pieces > MAX_PIECES,
         lambda i: f"{pieces[i]} pieces on the board and in the reserves, more than {MAX_PIECES}"),
    ]  # fmt: skip
    for w, word in enumerate(words):
        # a word holds the colours of its stack's pieces w * 62 .. w * 62 + 61 from the top, so it
        # is below 2 ** (the pieces it holds): no colour bit above the stack, none beyond 62 bits
        held = np.minimum(np.maximum(heights.astype(np.int16) - w * core.WORD_BITS, 0), core.WORD_BITS)
        stray = (word < 0) | (word >= _POWERS_OF_TWO[held])
        checks.append((stray, lambda i: "colour bits above a stack's height"))
    return _first_problem(checks)


def _value_problem(a: np.ndarray, f: RecordField, size: int) -> tuple[int, str] | None:
    """The first record of field ``f``'s array ``a`` outside what ``f`` allows (its bounds, NaN,
    its ``rule``), as (row, what is wrong), or None."""
    if f.rule == "board":
        return board_problem(a, size)
    v = a.astype(np.float32) if a.dtype == np.float16 else a  # float16 arithmetic is slow
    checks: list[tuple[np.ndarray, Any]] = []
    if v.dtype.kind == "f":
        bad = np.isinf(v) if f.nan else ~np.isfinite(v)
        kind = "finite or NaN" if f.nan else "finite"
        checks.append((bad, lambda i: f"a value {v[i][bad[i]].flat[0]} that is not {kind}"))
    bounds = [(b if not isinstance(b, str) else VALUE_BOUNDS[b](size)) for b in (f.low, f.high)]
    low, high = bounds
    if low is not None or high is not None:
        out = np.zeros(v.shape, np.bool_)
        if low is not None:
            out |= v < low
        if high is not None:
            out |= v > high
        shown = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
        checks.append((out, lambda i: f"a value {v[i][out[i]].flat[0]} outside {shown}"))
    if f.rule == "distribution" and v.ndim == 2 and v.shape[1]:
        sums = v.astype(np.float64).sum(axis=1)
        over = sums > 1 + PROB_SUM_SLACK
        checks.append((over, lambda i: f"probabilities summing to {sums[i]:.4g} (over 1)"))
    return _first_problem(checks)


def _as_field_dtype(a: np.ndarray, f: RecordField) -> np.ndarray:
    """``a`` as ``f``'s dtype; raises ValueError when an integer or boolean field's values change
    in the cast (a fraction, NaN, or a value its dtype cannot hold)."""
    if a.dtype == f.dtype:
        return a
    with np.errstate(invalid="ignore", over="ignore"):
        cast: np.ndarray = a.astype(f.dtype)
    if np.dtype(f.dtype).kind != "f" and not np.array_equal(cast, a):
        want = np.dtype(f.dtype)
        raise ValueError(f"replay field {f.name!r}: values of dtype {a.dtype} that {want} does not hold")
    return cast


def _row_width(width: str, size: int, top_k: int, opponent_top_k: int) -> int:
    """The row length of a field of ``width`` kind (see :class:`RecordField`)."""
    return {"board": board_record_len(size), "top_k": top_k, "squares": size * size,
            "opponent_top_k": opponent_top_k}[width]  # fmt: skip


class _FieldNames:
    """``Records.FIELDS``: the names of the class's ``TABLE``, in order (a subclass with more
    rows gets its own)."""

    def __get__(self, obj: object, cls: type) -> tuple[str, ...]:
        return tuple(f.name for f in cls.TABLE)  # type: ignore[attr-defined]


@dataclass
class Records:
    """A batch of records as arrays, one attribute per row of :data:`RECORD_FIELDS` (``TABLE``).
    A field left None is filled with its ``fill`` value (records made before it existed)."""

    board: np.ndarray
    policy_index: np.ndarray
    policy_prob: np.ndarray
    value: np.ndarray
    flat_diff: np.ndarray
    game_id: np.ndarray
    generation: np.ndarray
    ply: np.ndarray
    ownership: np.ndarray | None = None
    own_valid: np.ndarray | None = None
    opp_index: np.ndarray | None = None  # None: no opponent-policy target (width 0)
    opp_prob: np.ndarray | None = None
    search_value: np.ndarray | None = None
    end_ply: np.ndarray | None = None

    TABLE = RECORD_FIELDS
    FIELDS = _FieldNames()

    def __post_init__(self) -> None:
        n = len(self.value)
        groups = {f.group for f in self.TABLE if f.group and getattr(self, f.name) is None}
        for f in self.TABLE:
            if getattr(self, f.name) is None or f.group in groups:
                if f.fill is None:
                    raise ValueError(f"replay field {f.name!r} is required")
                shape: tuple[int, ...] = (n,)
                if f.width:
                    try:
                        size = _size_of_record(self.board.shape[1])
                    except ValueError as e:
                        raise ValueError(f"replay field 'board': {e}") from None
                    shape = (n, _row_width(f.width, size, self.policy_index.shape[1], 0))
                setattr(self, f.name, np.full(shape, f.fill, f.dtype))

    def __len__(self) -> int:
        return int(self.value.shape[0])

    @classmethod
    def empty(cls, size: int, top_k: int, opponent_top_k: int = 0) -> Records:
        """No records, with the row widths of ``size``, ``top_k`` and ``opponent_top_k``."""
        return cls(**{
            f.name: np.zeros((0,) if not f.width else (0, _row_width(f.width, size, top_k, opponent_top_k)),
                             f.dtype)
            for f in cls.TABLE
        })  # fmt: skip

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], opponent_top_k: int) -> Records:
        """Records from a mapping of field arrays (e.g. a shard's npz). A field the mapping lacks
        gets its ``fill`` (shards from before it existed; a group present only in part is filled
        whole); the opponent-policy width is set to ``opponent_top_k`` (``with_opponent_width``).

        Raises KeyError if a required field is missing, ValueError if a field is not numeric, has
        the wrong number of dimensions or not one row per record (the first message names the
        field); ValueError too when a field's values change in the cast to its dtype (a
        fraction in an integer field, an integer its dtype cannot hold). The values are checked
        against the table's bounds by :meth:`check_values`, not here."""
        n = None
        cast: dict[str, np.ndarray] = {}
        for f in cls.TABLE:
            if f.name not in arrays:
                if f.fill is None:
                    raise KeyError(f"replay field {f.name!r} is missing")
                continue
            a = np.asarray(arrays[f.name])
            if a.dtype.kind not in "biuf":
                raise ValueError(f"replay field {f.name!r}: dtype {a.dtype} is not numeric")
            ndim = 2 if f.width else 1
            if a.ndim != ndim:
                raise ValueError(f"replay field {f.name!r}: {a.ndim} dimensions, expected {ndim}")
            if n is None:
                n = a.shape[0]
            elif a.shape[0] != n:
                raise ValueError(f"replay field {f.name!r}: {a.shape[0]} rows, expected {n} (one per record)")
            cast[f.name] = _as_field_dtype(a, f)
        fields: dict[str, Any] = {f.name: cast.get(f.name) for f in cls.TABLE}  # None: its fill
        recs = cls(**fields)
        return recs.with_opponent_width(opponent_top_k)

    @classmethod
    def from_game(cls, game: GameRecord, widths: Widths) -> Records:
        """The records of a finished game's recorded positions: each field made by its row's
        producer (:class:`RecordField` ``produce``; a producer named by several rows is called
        once, a field without one gets its fill) and cast to its dtype, rows of ``widths``."""
        made: dict[str, Any] = {}
        for f in cls.TABLE:
            if f.name in made or f.produce is None:
                continue
            out = f.produce(game, widths)
            made.update(out if isinstance(out, dict) else {f.name: out})
        fields = {f.name: None if made.get(f.name) is None else np.asarray(made[f.name]).astype(f.dtype, copy=False)
                  for f in cls.TABLE}  # fmt: skip
        return cls(**fields)

    def check_values(self, size: int) -> None:
        """Raise ValueError naming the first field, and its first record, whose values the
        field's row of the table does not allow on a ``size`` board (:class:`RecordField`: its
        ``low`` / ``high``, NaN, its ``rule``; the board is :func:`board_problem`): what a shard
        read from disk must pass before any of it reaches the compiled rules or a training batch.
        The rows' widths are checked apart (``ReplayBuffer._check_widths``)."""
        for f in self.TABLE:
            problem = _value_problem(getattr(self, f.name), f, size)
            if problem is not None:
                row, what = problem
                raise ValueError(f"replay field {f.name!r}: record {row}: {what}")

    def with_opponent_width(self, k: int) -> Records:
        """These records with ``k`` opponent-policy slots (extra slots dropped, missing ones
        padded with the fields' fill, -1 / 0); ``self`` when the width is already ``k``."""
        out = self
        for f in self.TABLE:
            if f.width != "opponent_top_k":
                continue
            a = getattr(self, f.name)
            have = a.shape[1]
            if have == k:
                continue
            if out is self:
                out = self.take(slice(None))
            pad = np.full((len(self), max(0, k - have)), f.fill, f.dtype)
            setattr(out, f.name, a[:, :k] if have > k else np.concatenate([a, pad], axis=1))
        return out

    @classmethod
    def concat(cls, parts: list[Records]) -> Records:
        return cls(**{f: np.concatenate([getattr(p, f) for p in parts]) for f in cls.FIELDS})

    def take(self, idx: np.ndarray | slice) -> Records:
        return type(self)(**{f: getattr(self, f)[idx] for f in self.FIELDS})

    def nbytes_per_position(self) -> float:
        n = max(len(self), 1)
        return sum(getattr(self, f).nbytes for f in self.FIELDS) / n

    def widths(self) -> dict[str, int]:
        """Row length of each field with rows (``RecordField.width`` not empty)."""
        return {f.name: getattr(self, f.name).shape[1] for f in self.TABLE if f.width}


def sparse_policy(dense: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``top_k`` largest entries of policy rows (B, A) as (indices int32 (B, K) with -1 for
    unused slots, probabilities float16 (B, K) renormalised to sum 1)."""
    dense = np.atleast_2d(dense)
    b, a = dense.shape
    k = min(top_k, a)
    idx = np.argpartition(-dense, k - 1, axis=1)[:, :k]
    p = np.take_along_axis(dense, idx, axis=1)
    keep = p > 0
    total = np.where(keep, p, 0).sum(axis=1, keepdims=True)
    total[total == 0] = 1
    probs = np.where(keep, p / total, 0)
    out_i = np.full((b, top_k), -1, np.int32)
    out_p = np.zeros((b, top_k), np.float16)
    out_i[:, :k] = np.where(keep, idx, -1)
    out_p[:, :k] = probs
    return out_i, out_p


def sparse_targets(
    actions: list[np.ndarray], probs: list[np.ndarray], top_k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Search policy targets (per position: action indices (k,) and probabilities (k,)) as
    records' sparse rows: the ``top_k`` most probable actions of each (ties: first listed),
    renormalised (uniform if all are 0). Returns (indices int32 (B, top_k) with -1 for unused
    slots, probabilities float16 (B, top_k))."""
    n = len(actions)
    idx = np.full((n, top_k), -1, np.int32)
    prob = np.zeros((n, top_k), np.float16)
    for i, (a, p) in enumerate(zip(actions, probs, strict=True)):
        order = np.argsort(-p, kind="stable")[:top_k]
        pp = p[order].astype(np.float64)
        pp = pp / pp.sum() if pp.sum() > 0 else np.full(len(order), 1.0 / len(order))
        idx[i, : len(order)] = a[order]
        prob[i, : len(order)] = pp
    return idx, prob


def dense_policy(index: np.ndarray, prob: np.ndarray, num_actions: int) -> np.ndarray:
    """Inverse of :func:`sparse_policy`: (B, K) -> (B, A) float32."""
    b = index.shape[0]
    out = np.zeros((b, num_actions), np.float32)
    rows = np.repeat(np.arange(b), index.shape[1])
    flat_i = index.reshape(-1)
    ok = flat_i >= 0
    np.add.at(out, (rows[ok], flat_i[ok]), prob.reshape(-1)[ok].astype(np.float32))
    return out


@dataclass
class ReanalyseJob:
    """Positions handed to the Reanalyse worker (:meth:`ReplayBuffer.reanalyse_take`), n rows.

    Attributes:
        position: (n,) int64 index of each record among all positions ever added (0 = the first).
        game_id, ply: (n,) int64 / int16 of each record (checked again when the refresh lands).
        board: (n, R) uint8 packed positions (:func:`unpack_states`).
        seeds: (n,) int64 seed of each search's random stream (root noise), from the buffer's
            reanalyse stream, so that a refresh is reproducible and the stream is checkpointed.
    """

    position: np.ndarray
    game_id: np.ndarray
    ply: np.ndarray
    board: np.ndarray
    seeds: np.ndarray

    def __len__(self) -> int:
        return int(self.position.shape[0])


@dataclass
class ReanalyseRefresh:
    """The new targets of a :class:`ReanalyseJob` (n rows, in its order).

    Attributes:
        position, game_id, ply: as in the job.
        policy_index, policy_prob: (n, K) int32 / float16 sparse policy targets of the searches.
        value: (n,) float32 root value of each search, mover's view.
        valid: (n,) bool: searched (False: the position could not be searched, e.g. over).
    """

    position: np.ndarray
    game_id: np.ndarray
    ply: np.ndarray
    policy_index: np.ndarray
    policy_prob: np.ndarray
    value: np.ndarray
    valid: np.ndarray


def atomic_save_npz(path: Path, **arrays: np.ndarray | np.generic) -> None:
    """Write arrays (or numpy scalars) as an .npz through a temporary file in the same folder
    and rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub lets **kwds fill allow_pickle
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class ReplayBuffer:
    """Replay buffer of self-play records (see the module docstring).

    Args:
        cfg: the ``replay`` config section (:class:`takzero.config.ReplayConfig`: the one
            place of its keys' meanings, defaults and checks), read as ``self.cfg``.
        size: board size of the records (``board.size``).
        shard_dir: folder for on-disk shards (None: memory only).
        seed: sampling RNG seed.
        opponent_top_k: opponent-policy entries kept per record (0: none; the width of the
            records the buffer holds, shards of another width are padded or cut to it; a run
            passes :meth:`takzero.config.TrainConfig.replay_opponent_top_k`).

    Reanalyse reads ``cfg.reanalyse_fraction`` (positions handed out per sample drawn by the
    trainer, 0: none; see the module docstring). The buffer makes no target: the value target's
    discount and blend (``value_discount``, ``value_discount_floor``, ``reanalyse_value_weight``)
    are applied by the trainer's batch (``takzero.pipeline.targets``).
    """

    def __init__(
        self,
        cfg: ReplayConfig,
        size: int,
        shard_dir: str | Path | None = None,
        seed: int = 0,
        opponent_top_k: int = 0,
    ) -> None:
        self.cfg = cfg
        self.size = size
        self.shard_dir = Path(shard_dir) if shard_dir else None
        self.rng = np.random.default_rng(seed)
        self.opponent_top_k = opponent_top_k
        self.data = Records.empty(size, cfg.top_k, opponent_top_k)
        self.pending: list[Records] = []
        self.total_added = 0  # positions ever added (drives the window and the reuse cap)
        self.total_sampled = 0
        self.last_sample_age = 0.0  # positions added since the sampled ones, mean of the last batch
        self.games_added = 0
        self.next_shard = 0
        self.shard_sizes: list[tuple[Path, int]] = []  # shards on disk, oldest first
        self.reanalyse_rng = np.random.default_rng([seed, 0x5EA])  # its own stream
        self.reanalyse_issued = 0  # positions handed out (reanalyse_take)
        self.reanalyse_applied = 0  # refreshes written into records
        self.reanalyse_dropped = 0  # refreshes of records gone from the window (or unsearched)

    # -- window and budget -------------------------------------------------------------------

    def window(self) -> int:
        """Number of newest positions sampled from now."""
        n = self.total_added
        r = self.cfg
        if r.fixed_window > 0:
            return min(n, r.fixed_window)
        c = r.window_c
        if n <= c:
            w = n
        else:
            a = r.window_alpha
            w = int(c * (1 + r.window_beta * ((n / c) ** a - 1) / a))
        return min(w, r.window_max, n)

    def sample_budget(self) -> int:
        """Samples the trainer may still draw under the reuse cap."""
        if self.total_added < self.cfg.min_positions:
            return 0
        return int(self.total_added * self.cfg.samples_per_position) - self.total_sampled

    def ahead(self) -> int:
        """Positions added that the trainer has not yet consumed (at its reuse rate)."""
        return int(self.total_added - self.total_sampled / self.cfg.samples_per_position)

    # -- add / sample ------------------------------------------------------------------------

    def add(self, records: Records, games: int = 0, force: bool = False) -> bool:
        """Add a batch of records (one or more finished games). Returns False, adding nothing, when
        the workers are more than ``max_ahead`` positions ahead of the trainer: the caller waits
        and retries (backpressure); ``force``: added anyway (the last games at a run's stop)."""
        if (not force and len(records) and self.ahead() > self.cfg.max_ahead
                and self.total_added >= self.cfg.min_positions):  # fmt: skip
            return False
        if len(records) == 0:
            return True
        records = records.with_opponent_width(self.opponent_top_k)
        self.data = Records.concat([self.data, records])
        if len(self.data) > self.cfg.window_max:
            self.data = self.data.take(slice(len(self.data) - self.cfg.window_max, None))
        self.total_added += len(records)
        self.games_added += games
        if self.shard_dir is not None:
            self.pending.append(records)
            if sum(len(p) for p in self.pending) >= self.cfg.shard_positions:
                self.flush()
        return True

    def sample(self, batch_size: int) -> Records | None:
        """``batch_size`` records drawn uniformly from the window, as stored (their targets are
        made by the trainer's batch, ``pipeline.targets``), or None when there is too little data
        or the reuse cap is reached."""
        if self.sample_budget() < batch_size or len(self.data) == 0:
            return None
        w = min(self.window(), len(self.data))
        idx = len(self.data) - w + self.rng.integers(0, w, size=batch_size)
        self.total_sampled += batch_size
        self.last_sample_age = float(np.mean(len(self.data) - idx))
        return self.data.take(idx)

    def newest_states(self, n: int) -> np.ndarray:
        """The newest ``n`` positions of the buffer (fewer when it holds fewer) as (k, STATE_LEN)
        int64 states: the calibration positions of a model file's int8 copy
        (``takzero.nn.quantize.CALIBRATION_KEY``)."""
        k = min(int(n), len(self.data))
        if k <= 0:
            return np.zeros((0, core.STATE_LEN), np.int64)
        return unpack_states(self.data.board[len(self.data) - k :], self.size)

    # -- Reanalyse -----------------------------------------------------------------------------

    def _first_index(self) -> int:
        """Index (among all positions ever added) of ``data``'s first record."""
        return self.total_added - len(self.data)

    def reanalyse_budget(self) -> int:
        """Positions that may still be handed out: ``floor(reanalyse_fraction * total_sampled)``
        less those handed out so far."""
        return int(self.cfg.reanalyse_fraction * self.total_sampled) - self.reanalyse_issued

    def reanalyse_take(self, n: int) -> ReanalyseJob | None:
        """``n`` distinct positions drawn uniformly from the window for Reanalyse, or None while
        the budget (:meth:`reanalyse_budget`) holds fewer than ``n`` or the window fewer than
        ``n`` positions. Counts them as handed out. Raises ValueError for n < 1."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        w = min(self.window(), len(self.data))
        if self.reanalyse_budget() < n or w < n:
            return None
        rows = len(self.data) - w + self.reanalyse_rng.choice(w, size=n, replace=False)
        seeds = self.reanalyse_rng.integers(0, 1 << 62, size=n, dtype=np.int64)
        self.reanalyse_issued += n
        d = self.data
        return ReanalyseJob(
            position=(self._first_index() + rows).astype(np.int64),
            game_id=d.game_id[rows].copy(),
            ply=d.ply[rows].copy(),
            board=d.board[rows].copy(),
            seeds=seeds,
        )

    def reanalyse_apply(self, refresh: ReanalyseRefresh) -> tuple[int, int]:
        """Write the new targets into the same records (policy target and ``search_value``),
        in place; rows whose record left the window meanwhile, or that were not searched, are
        dropped. Nothing is added and no position count changes. Returns (applied, dropped)."""
        d = self.data
        assert d.search_value is not None  # filled by Records.__post_init__
        w = min(self.window(), len(d))
        rows = np.asarray(refresh.position, np.int64) - self._first_index()
        inside = (rows >= len(d) - w) & (rows < len(d))
        safe = np.where(inside, rows, 0)
        ok = inside & np.asarray(refresh.valid, bool)
        if len(d):
            ok &= (d.game_id[safe] == refresh.game_id) & (d.ply[safe] == refresh.ply)
        else:
            ok[:] = False
        r = rows[ok]
        k = min(d.policy_index.shape[1], refresh.policy_index.shape[1])
        d.policy_index[r] = -1
        d.policy_prob[r] = 0
        d.policy_index[r, :k] = refresh.policy_index[ok, :k]
        d.policy_prob[r, :k] = refresh.policy_prob[ok, :k]
        d.search_value[r] = refresh.value[ok]
        applied = int(ok.sum())
        self.reanalyse_applied += applied
        self.reanalyse_dropped += len(rows) - applied
        return applied, len(rows) - applied

    def reanalyse_counters(self) -> dict[str, int]:
        """Positions handed out, refreshes applied and dropped (in flight: the rest)."""
        return {"issued": self.reanalyse_issued, "applied": self.reanalyse_applied,
                "dropped": self.reanalyse_dropped}  # fmt: skip

    def stats(self) -> dict[str, float]:
        """Numbers for logging: sizes, window, mean age of the last sampled batch (in positions added
        since), bytes/position; with Reanalyse on, its counters (``reanalyse/issued``,
        ``reanalyse/applied``, ``reanalyse/dropped``) and ``reanalyse/per_sample`` (positions
        handed out per sample the trainer drew, at most ``reanalyse_fraction``)."""
        w = min(self.window(), len(self.data))
        extra: dict[str, float] = {}
        if self.cfg.reanalyse_fraction > 0:
            extra = {f"reanalyse/{k}": float(v) for k, v in self.reanalyse_counters().items()}
            extra["reanalyse/per_sample"] = self.reanalyse_issued / max(self.total_sampled, 1)
        return {
            "replay/positions": float(len(self.data)),
            "replay/window": float(w),
            "replay/total_added": float(self.total_added),
            "replay/total_sampled": float(self.total_sampled),
            "replay/games": float(self.games_added),
            "replay/sample_age": self.last_sample_age,
            "replay/bytes_per_position": self.data.nbytes_per_position(),
            **extra,
        }

    # -- disk --------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write pending records as a shard (temp file + rename), with the counters
        ``total_added`` and ``games_added`` after it (so a run killed before its first checkpoint
        reloads them), then prune the shards the window no longer needs (:meth:`prune`)."""
        if self.shard_dir is None or not self.pending:
            return
        recs = Records.concat(self.pending)
        path = self.shard_dir / f"shard_{self.next_shard:08d}.npz"
        atomic_save_npz(
            path,
            total_added=np.int64(self.total_added),
            games_added=np.int64(self.games_added),
            **{f: getattr(recs, f) for f in Records.FIELDS},
        )
        self.shard_sizes.append((path, len(recs)))
        self.next_shard += 1
        self.pending = []
        self.prune()

    def prune(self) -> list[Path]:
        """Delete the oldest shards while the newer ones still hold ``window_max`` positions: a
        reload (:meth:`load`, from any checkpoint) reads only the newest ``window_max`` positions,
        so disk use stays bounded by about ``window_max + shard_positions`` positions. Returns
        the paths deleted."""
        removed = []
        held = sum(n for _, n in self.shard_sizes)
        while len(self.shard_sizes) > 1 and held - self.shard_sizes[0][1] >= self.cfg.window_max:
            path, n = self.shard_sizes.pop(0)
            path.unlink(missing_ok=True)
            held -= n
            removed.append(path)
        return removed

    def state_dict(self) -> dict[str, int | Mapping[str, Any]]:
        """Counters and RNGs saved in the trainer's checkpoint (the records live in the shards),
        Reanalyse's counters and stream under ``"reanalyse"``."""
        self.flush()
        return {
            "total_added": self.total_added,
            "total_sampled": self.total_sampled,
            "games_added": self.games_added,
            "next_shard": self.next_shard,
            "rng": self.rng.bit_generator.state,
            "reanalyse": {**self.reanalyse_counters(), "rng": self.reanalyse_rng.bit_generator.state},
        }

    def _check_widths(self, recs: Records) -> None:
        """Raise ValueError when loaded records do not fit this buffer: rows of another board
        size or ``replay.top_k`` (the opponent-policy width is adjusted, never refused)."""
        have = recs.widths()
        for f in recs.TABLE:
            if not f.width or f.width == "opponent_top_k":
                continue
            want = _row_width(f.width, self.size, self.cfg.top_k, self.opponent_top_k)
            if have[f.name] != want:
                raise ValueError(f"replay field {f.name!r}: rows of {have[f.name]}, this run's are {want} "
                                 f"(board.size {self.size}, replay.top_k {self.cfg.top_k})")  # fmt: skip

    def load(self, state: dict | None = None) -> int:
        """Reload records from the shards (newest first, up to ``window_max``) and counters from
        ``state`` (a checkpoint's :meth:`state_dict`) or, where newer, from the shards: shards
        written after the checkpoint hold games that were really played, so their positions and
        games count (the counters never go back). A corrupt or truncated shard is reported and
        skipped. Returns the positions held after the reload."""
        if state is not None:
            self.total_sampled = int(state["total_sampled"])
            self.rng.bit_generator.state = state["rng"]
            self.total_added = int(state["total_added"])
            self.games_added = int(state["games_added"])
            ra = state.get("reanalyse")  # None: a checkpoint from before Reanalyse existed
            if ra is not None:
                self.reanalyse_issued = int(ra["issued"])
                self.reanalyse_applied = int(ra["applied"])
                self.reanalyse_dropped = int(ra["dropped"])
                self.reanalyse_rng.bit_generator.state = ra["rng"]
        if self.shard_dir is None or not self.shard_dir.exists():
            return 0
        shards = sorted(p for p in self.shard_dir.iterdir() if SHARD_RE.match(p.name))
        parts: list[Records] = []
        count = 0
        on_disk = 0
        sizes: list[tuple[Path, int]] = []
        for path in reversed(shards):
            try:
                with np.load(path) as z:
                    n = len(z["value"])
                    if "total_added" in z.files:
                        self.total_added = max(self.total_added, int(z["total_added"]))
                        self.games_added = max(self.games_added, int(z["games_added"]))
                    recs = None
                    if count < self.cfg.window_max:
                        recs = Records.from_arrays({f: z[f] for f in z.files}, self.opponent_top_k)
                        self._check_widths(recs)
                        recs.check_values(self.size)
            except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as e:
                log.warning("replay shard %s is corrupt or truncated, skipped: %s", path, e)
                continue
            sizes.append((path, n))
            on_disk += n
            if recs is not None:
                parts.append(recs)
                count += len(recs)
        self.shard_sizes = list(reversed(sizes))
        if parts:
            self.data = Records.concat(list(reversed(parts)))
            if len(self.data) > self.cfg.window_max:
                self.data = self.data.take(slice(len(self.data) - self.cfg.window_max, None))
        last = max((_shard_number(p) for p in shards), default=-1)
        self.next_shard = last + 1
        self.total_added = max(self.total_added, on_disk)
        self.prune()
        return len(self.data)
