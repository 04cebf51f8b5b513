"""Every training target of a batch: one producer per target, from replay records.

A producer (a row of :data:`TARGETS`, :class:`TargetProducer`) turns the raw data a record stores
(``takzero.pipeline.replay.Records``) into one training array per sample, under the board
symmetry that sample's planes were drawn under (``make_batch`` draws one of the 8 per sample) and
the run's :class:`TargetSettings` (the value target's discount and blend), and a (B,) bool mask of
the samples that have a target. The replay buffer stores and samples records only; every target
arithmetic is here, computed when the trainer's batch is made.

The main targets (rows with ``batch_field``) fill ``Batch.policy``, ``Batch.value`` and
``Batch.flat_diff``; the others go in ``Batch.targets`` as ``name`` -> tensor and
``heads.valid_key(name)`` -> mask, the dict the heads' losses read
(``takzero.nn.heads.HeadContext``). A head names its target by ``Head.target``.

Rows:

* ``policy``: (B, A) float32, the search's policy target (``records.policy_index`` /
  ``policy_prob``, the K largest), its actions moved with the board.
* ``value``: (B,) float32, the outcome from the mover's view (``records.value``), discounted by
  the plies to the game's end (:func:`discount_value`: ``replay.value_discount``,
  ``replay.value_discount_floor``, ``records.end_ply``) and then blended with the last
  Reanalyse search value (:func:`blend_value`: ``replay.reanalyse_value_weight``,
  ``records.search_value``). Invariant under the symmetries.
* ``flat_diff``: (B,) float32, the final flat difference from the mover's view.

* ``ownership``: (B, N*N) float32 in {-1, 0, +1}, the final owner of each square's top piece from
  the mover's view (``records.ownership``, ``game.ownership``), its squares moved with the board
  (``game.symmetry.transform_squares``); valid where the game ended on the board
  (``records.own_valid``: False for a resigned game).
* ``opponent_policy``: (B, A) float32, the next recorded position's policy target
  (``records.opp_index``/``opp_prob``, stored only when a head trains on it:
  ``TrainConfig.replay_opponent_top_k``), its actions moved with the board
  (``nn.actions.action_permutation``); valid where there is a next recorded position. Absent
  (the producer gives None) when the records store no opponent policy.

A new target: its producer function here and its row, and, if the records do not hold its raw
data yet, the replay field (``pipeline/records.py``: a row of ``RECORD_FIELDS`` with its producer
from self-play's game record, and the attribute of ``Records``).

The symmetry gathers of a batch live here too: each sample's symmetry is applied to the packed
boards (:func:`transform_board_rows`), to sparse action indices (:func:`transform_action_indices`)
and to per-square rows (:func:`transform_square_rows`) as one numpy gather per batch, through
index tables cached per board size (8 rows, one per symmetry), not a loop over the records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

import numpy as np
import torch

from takzero.config.sections import ReplayConfig, check_value_target
from takzero.game.symmetry import NUM_SYMMETRIES, square_permutation
from takzero.nn.actions import action_permutation, num_actions
from takzero.nn.heads import valid_key
from takzero.pipeline.packing import board_record_len, dense_policy
from takzero.pipeline.records import Records

__all__ = [
    "MAIN_TARGETS",
    "TARGETS",
    "TargetProducer",
    "TargetSettings",
    "blend_value",
    "discount_value",
    "make_targets",
    "transform_action_indices",
    "transform_action_rows",
    "transform_board_rows",
    "transform_square_rows",
]


#: ``replay.*`` defaults (the schema's), the defaults of :class:`TargetSettings`' fields.
_REPLAY_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(ReplayConfig)}


@dataclass(frozen=True)
class TargetSettings:
    """The run's settings of the targets (all from the ``replay`` section, read when the batch is
    made, never when the records are stored or sampled). Each field is the ``replay`` key of its
    name, with that key's default and range (:class:`takzero.config.ReplayConfig`,
    ``takzero.config.sections.check_value_target``: declared there once).

    Attributes:
        value_discount: gamma of :func:`discount_value` (``replay.value_discount``, [0.5, 1]; 1: none).
        value_discount_floor: its floor (``replay.value_discount_floor``, [0, 1]).
        reanalyse_value_weight: w of :func:`blend_value` (``replay.reanalyse_value_weight``,
            [0, 1]; 0: the outcome alone).

    Raises ConfigError (a ValueError) naming the ``replay`` key of a value out of its range.
    """

    value_discount: float = _REPLAY_DEFAULTS["value_discount"]
    value_discount_floor: float = _REPLAY_DEFAULTS["value_discount_floor"]
    reanalyse_value_weight: float = _REPLAY_DEFAULTS["reanalyse_value_weight"]

    def __post_init__(self) -> None:
        check_value_target(self.value_discount, self.value_discount_floor, self.reanalyse_value_weight)

    @classmethod
    def from_replay(cls, cfg: ReplayConfig) -> TargetSettings:
        """The settings of a run's ``replay`` section (:class:`takzero.config.ReplayConfig`), field
        by name."""
        return cls(**{f.name: getattr(cfg, f.name) for f in fields(cls)})


#: ``produce(records, size, symmetries, settings)`` with symmetries (B,) int64 in 0..7 (one per
#: sample) and the run's :class:`TargetSettings` -> (target (B, ...) array, valid (B,) bool
#: array), or None when the records hold no such data.
Produce = Callable[[Records, int, np.ndarray, TargetSettings], tuple[np.ndarray, np.ndarray] | None]


@dataclass(frozen=True)
class TargetProducer:
    """One row of :data:`TARGETS`.

    Attributes:
        name: the target's name (``Head.target`` of the heads that train on it; the key in
            ``Batch.targets``).
        produce: see :data:`Produce`; arrays of B rows, in the symmetry of each sample.
        description: one line for docs.
        batch_field: the ``Batch`` attribute a main target fills (``policy``, ``value``,
            ``flat_diff``; always made, its mask all True); ``""``: an auxiliary target, made
            when a weighted head names it and put in ``Batch.targets``.
    """

    name: str
    produce: Produce
    description: str
    batch_field: str = ""


@cache
def _action_table(size: int) -> np.ndarray:
    """(8, A) int64, row ``t`` = ``actions.action_permutation(size, t)`` (read-only)."""
    table = np.stack([action_permutation(size, t) for t in range(NUM_SYMMETRIES)])
    table.setflags(write=False)
    return table


@cache
def _square_gather(size: int) -> np.ndarray:
    """(8, N*N) int64, row ``t`` = the inverse of ``square_permutation(size, t)``: the source
    square of each square of the transformed board (read-only)."""
    table = np.empty((NUM_SYMMETRIES, size * size), np.int64)
    for t in range(NUM_SYMMETRIES):
        table[t, square_permutation(size, t)] = np.arange(size * size)
    table.setflags(write=False)
    return table


@cache
def _board_gather(size: int) -> np.ndarray:
    """(8, R) int64, R = ``replay.board_record_len(size)``: row ``t`` gives, for each byte of a
    packed board (``replay.pack_states``) under symmetry ``t``, the byte of the untransformed
    board it comes from. The layout: a 16-byte header (kept), then per-square fields of 1
    (heights), 1 (top kinds), 8 (low colour words) and, for sizes 7 and 8, 8 bytes (high colour
    words), each field's squares moved with the board (read-only)."""
    nsq = size * size
    widths = [1, 1, 8] + ([8] if size >= 7 else [])
    record_len = board_record_len(size)
    if 16 + nsq * sum(widths) != record_len:  # the layout of pack_states changed: update this
        raise RuntimeError(f"packed board layout of size {size}: {record_len} bytes, expected "
                             f"{16 + nsq * sum(widths)}")
    table = np.empty((NUM_SYMMETRIES, record_len), np.int64)
    src_sq = _square_gather(size)
    for t in range(NUM_SYMMETRIES):
        parts = [np.arange(16)]
        pos = 16
        for w in widths:
            parts.append((pos + src_sq[t][:, None] * w + np.arange(w)[None, :]).reshape(-1))
            pos += nsq * w
        table[t] = np.concatenate(parts)
    table.setflags(write=False)
    return table


def _check_symmetries(symmetries: np.ndarray, rows: int) -> np.ndarray:
    ts = np.asarray(symmetries)
    if ts.shape != (rows,) or (rows and (ts.min() < 0 or ts.max() >= NUM_SYMMETRIES)):
        raise ValueError(f"symmetries must be ({rows},) integers in 0..{NUM_SYMMETRIES - 1}, "
                         f"got shape {ts.shape}")
    return ts.astype(np.int64, copy=False)


def transform_board_rows(board: np.ndarray, size: int, symmetries: np.ndarray) -> np.ndarray:
    """Packed boards (B, R) uint8 (``replay.pack_states`` of size ``size``), row ``r`` moved
    under symmetry ``symmetries[r]`` (B,) in 0..7, in one gather; a new (B, R) uint8 array.
    ``unpack_states`` of the result equals ``game.symmetry.transform_state`` of each unpacked
    row, hash included (unpack recomputes it).

    Raises ValueError when ``board`` is not (B, board_record_len(size)) or a symmetry is out
    of range."""
    table = _board_gather(size)
    if board.ndim != 2 or board.shape[1] != table.shape[1]:
        raise ValueError(f"packed boards of size {size} are (B, {table.shape[1]}), got {board.shape}")
    ts = _check_symmetries(symmetries, board.shape[0])
    return np.take_along_axis(board, table[ts], axis=1)


def transform_action_indices(index: np.ndarray, size: int, symmetries: np.ndarray) -> np.ndarray:
    """Sparse action indices (B, K) (``replay.sparse_policy``'s, -1 = empty slot), row ``r``
    mapped under symmetry ``symmetries[r]``: ``perm[a]`` with ``perm =
    actions.action_permutation(size, t)``; empty slots stay -1. One gather; a new array of
    ``index``'s dtype. ``dense_policy`` of the result equals ``transform_action_rows`` of the
    dense policy (the permutation is a bijection, so every action receives the same entries in
    the same order).

    Raises ValueError for a symmetry out of range."""
    ts = _check_symmetries(symmetries, index.shape[0])
    if index.shape[1] == 0:
        return index.copy()
    moved = _action_table(size)[ts[:, None], np.maximum(index, 0)]
    return np.where(index >= 0, moved, index).astype(index.dtype, copy=False)


def transform_action_rows(dense: np.ndarray, size: int, symmetries: np.ndarray) -> None:
    """Move (B, A) per-action values in place, row ``r`` under symmetry ``symmetries[r]``
    (``out[perm] = row`` with ``perm = actions.action_permutation(size, t)``; t = 0 is the
    identity and is left alone). For sparse policies :func:`transform_action_indices` is the
    cheaper way (the batch uses it)."""
    n_actions = dense.shape[1]
    for t in range(1, NUM_SYMMETRIES):
        rows = np.nonzero(symmetries == t)[0]
        if rows.size == 0:
            continue
        moved = np.zeros((rows.size, n_actions), dense.dtype)
        moved[:, action_permutation(size, t)] = dense[rows]
        dense[rows] = moved


def transform_square_rows(values: np.ndarray, size: int, symmetries: np.ndarray) -> None:
    """Move (B, N*N) per-square values in place, row ``r`` under symmetry ``symmetries[r]``
    (``game.symmetry.transform_squares``), in one gather.

    Raises ValueError for a symmetry out of range."""
    ts = _check_symmetries(symmetries, values.shape[0])
    values[:] = np.take_along_axis(values, _square_gather(size)[ts], axis=1)


def discount_value(
    outcome: np.ndarray, ply: np.ndarray, end_ply: np.ndarray, gamma: float, floor: float = 0.0
) -> np.ndarray:
    """Value targets discounted by the plies to the game's end:
    ``z * max(gamma ** (end_ply - ply), floor)`` (``replay.value_discount``,
    ``replay.value_discount_floor``), so a win in 3 plies is worth more than a win in 9 and a loss
    is put off; with a floor f > 0 only the last plies are discounted and a distant decisive result
    keeps f * z, so the value still tells a distant win from a draw. ``outcome`` (B,) values z from
    the mover's view, ``ply`` / ``end_ply`` (B,) int16 (the record's ply and its game's final ply,
    plies); a record whose end is unknown (``end_ply`` < 0) keeps z. ``gamma`` in (0, 1]; 1
    returns z. ``floor`` in [0, 1]. (B,) float32.

    (A per-ply discount of the outcome, as the discounted returns of RL, Sutton and Barto 2018,
    ch. 3; Leela Chess Zero gets the same preference from a separate moves-left head.)"""
    z = outcome.astype(np.float32)
    if gamma >= 1.0:
        return z
    plies = end_ply.astype(np.int64) - ply.astype(np.int64)
    known = (end_ply >= 0) & (plies >= 0)
    factor = np.maximum(np.power(np.float64(gamma), np.where(known, plies, 0)), floor)  # unknown: 1
    return (z * factor).astype(np.float32)


def blend_value(outcome: np.ndarray, search_value: np.ndarray, weight: float) -> np.ndarray:
    """Value targets of records: ``z' = (1 - w) z + w v`` where the record was reanalysed
    (``v`` = ``search_value`` not NaN), else ``z``; ``z`` the game outcome (or proven value),
    ``w`` = ``replay.reanalyse_value_weight``, both from the mover's view. (B,) float32.
    (The target mixes the outcome with a search value as MuZero Reanalyse's n-step targets mix
    a bootstrap value in; Schrittwieser et al. 2021.)"""
    z = outcome.astype(np.float32)
    if weight <= 0:
        return z
    v = search_value.astype(np.float32)
    return np.where(np.isnan(v), z, (1.0 - weight) * z + weight * v).astype(np.float32)


def _all(records: Records) -> np.ndarray:
    return np.ones(len(records), np.bool_)


def _policy(
    records: Records, size: int, symmetries: np.ndarray, settings: TargetSettings
) -> tuple[np.ndarray, np.ndarray]:
    index = transform_action_indices(records.policy_index, size, symmetries)
    return dense_policy(index, records.policy_prob, num_actions(size)), _all(records)


def _value(
    records: Records, size: int, symmetries: np.ndarray, settings: TargetSettings
) -> tuple[np.ndarray, np.ndarray]:
    assert records.end_ply is not None and records.search_value is not None  # filled by Records
    z = records.value.astype(np.float32)
    if settings.value_discount < 1.0:
        z = discount_value(z, records.ply, records.end_ply, settings.value_discount, settings.value_discount_floor)
    if settings.reanalyse_value_weight > 0:
        z = blend_value(z, records.search_value, settings.reanalyse_value_weight)
    return z, _all(records)


def _flat_diff(
    records: Records, size: int, symmetries: np.ndarray, settings: TargetSettings
) -> tuple[np.ndarray, np.ndarray]:
    return records.flat_diff.astype(np.float32), _all(records)


def _ownership(
    records: Records, size: int, symmetries: np.ndarray, settings: TargetSettings
) -> tuple[np.ndarray, np.ndarray]:
    assert records.ownership is not None and records.own_valid is not None  # filled by Records
    own = records.ownership.astype(np.float32)
    transform_square_rows(own, size, symmetries)
    return own, records.own_valid.astype(np.bool_)


def _opponent_policy(records: Records, size: int, symmetries: np.ndarray,
                     settings: TargetSettings) -> tuple[np.ndarray, np.ndarray] | None:
    assert records.opp_index is not None and records.opp_prob is not None  # filled by Records
    if records.opp_index.shape[1] == 0:
        return None
    opp = dense_policy(transform_action_indices(records.opp_index, size, symmetries), records.opp_prob,
                       num_actions(size))
    return opp, np.any(records.opp_index >= 0, axis=1)


TARGETS: dict[str, TargetProducer] = {
    row.name: row
    for row in (
        TargetProducer("policy", _policy, "the search's policy target", "policy"),
        TargetProducer("value", _value, "the outcome, discounted to the game's end and blended with "
                       "Reanalyse's search value", "value"),
        TargetProducer("flat_diff", _flat_diff, "final flat count difference, mover's view", "flat_diff"),
        TargetProducer("ownership", _ownership, "final owner of each square's top piece, mover's view"),
        TargetProducer("opponent_policy", _opponent_policy, "the next recorded position's policy target"),
    )
}

#: The rows that fill ``Batch``'s own fields (``TargetProducer.batch_field``).
MAIN_TARGETS = tuple(name for name, row in TARGETS.items() if row.batch_field)


def make_targets(
    records: Records,
    size: int,
    symmetries: np.ndarray,
    names: Iterable[str] | None = None,
    settings: TargetSettings | None = None,
) -> dict[str, torch.Tensor]:
    """The auxiliary targets ``names`` (None: every row of :data:`TARGETS` without a
    ``batch_field``) of ``records`` under ``settings`` (None: ``TargetSettings()``): ``name`` ->
    tensor and ``heads.valid_key(name)`` -> (B,) bool tensor, for each producer that finds its
    data in the records (an absent one is left out; the loss that needs it then says so).

    Raises ValueError naming a target that is not a row of :data:`TARGETS`.
    """
    wanted = [n for n in TARGETS if n not in MAIN_TARGETS] if names is None else list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in TARGETS]
    if unknown:
        raise ValueError(f"unknown batch target {unknown[0]!r}; the targets are {list(TARGETS)}")
    settings = settings or TargetSettings()
    out: dict[str, torch.Tensor] = {}
    for name in wanted:
        made = TARGETS[name].produce(records, size, symmetries, settings)
        if made is not None:
            out[name] = torch.from_numpy(made[0])
            out[valid_key(name)] = torch.from_numpy(np.asarray(made[1], np.bool_))
    return out
