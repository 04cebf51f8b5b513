"""The replay record: one searched position of a self-play game, its fields declared once.

Its fields (dtype, shape, meaning, and
the value a shard written before the field existed loads with) are declared once, in
:data:`RECORD_FIELDS`: board (the compact position, :func:`pack_states`), the policy target
(``policy_index``/``policy_prob``, the K largest), the outcome (``value``, ``flat_diff``), where
it came from (``game_id``, ``generation``, ``ply``), the ownership target, the opponent-policy
target, Reanalyse's ``search_value`` and the game's ``end_ply``. Each row names its producer: the
field's array from a finished game's typed record (``takzero.pipeline.game_record.GameRecord``,
:meth:`Records.from_game`), which is all self-play hands over. :class:`Records` is a batch of
records, one array per field,
as the replay buffer (``takzero.pipeline.replay``) holds them, its shards store them and the
trainer's batch (``takzero.pipeline.targets``) reads them.

Shards written before the ownership and opponent-policy fields existed load with ownership
invalid and no opponent-policy target; shards without ``search_value`` load as never reanalysed,
shards without ``end_ply`` with the game's end unknown (their value targets are not discounted).
The packed board holds everything a search needs to rebuild the position (stacks, reserves, ply,
hence the side to move, and the half-komi), so Reanalyse needs no other field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from takzero.game import core
from takzero.game.ownership import ownership
from takzero.pipeline.game_record import NO_PROOF, GameRecord
from takzero.pipeline.packing import (
    board_problem,
    board_record_len,
    first_problem,
    pack_states,
    size_of_record,
    sparse_targets,
)

__all__ = ["PROB_SUM_SLACK", "RECORD_FIELDS", "VALUE_BOUNDS", "Produce", "RecordField", "Records", "Widths"]


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
)


#: Bounds of :class:`RecordField` named after the run's board: (size) -> the bound.
VALUE_BOUNDS: dict[str, Any] = {
    "last_action": lambda size: core.num_actions(size) - 1,
    "squares": lambda size: size * size,
    "-squares": lambda size: -size * size,
}

#: How far over 1 a row of float16 probabilities may sum (rounding of the renormalised top K).
PROB_SUM_SLACK = 1e-2


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
    return first_problem(checks)


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


def row_width(width: str, size: int, top_k: int, opponent_top_k: int) -> int:
    """The row length of a field of ``width`` kind (see :class:`RecordField`)."""
    return {"board": board_record_len(size), "top_k": top_k, "squares": size * size,
            "opponent_top_k": opponent_top_k}[width]


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
                        size = size_of_record(self.board.shape[1])
                    except ValueError as e:
                        raise ValueError(f"replay field 'board': {e}") from None
                    shape = (n, row_width(f.width, size, self.policy_index.shape[1], 0))
                setattr(self, f.name, np.full(shape, f.fill, f.dtype))

    def __len__(self) -> int:
        return int(self.value.shape[0])

    @classmethod
    def empty(cls, size: int, top_k: int, opponent_top_k: int = 0) -> Records:
        """No records, with the row widths of ``size``, ``top_k`` and ``opponent_top_k``."""
        return cls(**{
            f.name: np.zeros((0,) if not f.width else (0, row_width(f.width, size, top_k, opponent_top_k)),
                             f.dtype)
            for f in cls.TABLE
        })

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
        fields: dict[str, Any] = {
            f.name: None if made.get(f.name) is None else np.asarray(made[f.name]).astype(f.dtype, copy=False)
            for f in cls.TABLE
        }
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


