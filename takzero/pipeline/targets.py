"""The batch targets of the auxiliary heads: one producer per target, from replay records.

A producer (a row of :data:`TARGETS`, :class:`TargetProducer`) turns the raw data a record stores
(``takzero.pipeline.replay.Records``) into one training tensor per sample, under the board
symmetry that sample's planes were drawn under (``make_batch`` draws one of the 8 per sample), and
a (B,) bool mask of the samples that have a target. ``make_batch`` puts them in
``Batch.targets`` as ``name`` -> tensor and ``heads.valid_key(name)`` -> mask, the dict the heads'
losses read (``takzero.nn.heads.HeadContext``). A head names its target by ``Head.target``.

Rows:

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
data yet, the replay field (``pipeline/replay.py``: ``Records``, the shards) and where self-play
fills it (``pipeline/selfplay.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch

from takzero.game.symmetry import NUM_SYMMETRIES, transform_squares
from takzero.nn.actions import action_permutation, num_actions
from takzero.nn.heads import valid_key
from takzero.pipeline.replay import Records, dense_policy

__all__ = [
    "TARGETS",
    "TargetProducer",
    "make_targets",
    "transform_action_rows",
    "transform_square_rows",
]

#: ``produce(records, size, symmetries)`` with symmetries (B,) int64 in 0..7 (one per sample) ->
#: (target (B, ...) array, valid (B,) bool array), or None when the records hold no such data.
Produce = Callable[[Records, int, np.ndarray], tuple[np.ndarray, np.ndarray] | None]


@dataclass(frozen=True)
class TargetProducer:
    """One row of :data:`TARGETS`.

    Attributes:
        name: the target's name (``Head.target`` of the heads that train on it; the key in
            ``Batch.targets``).
        produce: see :data:`Produce`; arrays of B rows, in the symmetry of each sample.
        description: one line for docs.
    """

    name: str
    produce: Produce
    description: str


def transform_action_rows(dense: np.ndarray, size: int, symmetries: np.ndarray) -> None:
    """Move (B, A) per-action values in place, row ``r`` under symmetry ``symmetries[r]``
    (``out[perm] = row`` with ``perm = actions.action_permutation(size, t)``; t = 0 is the
    identity and is left alone)."""
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
    (``game.symmetry.transform_squares``)."""
    for t in range(1, NUM_SYMMETRIES):
        rows = np.nonzero(symmetries == t)[0]
        if rows.size:
            values[rows] = transform_squares(values[rows], size, t)


def _ownership(records: Records, size: int, symmetries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    own = records.ownership.astype(np.float32)
    transform_square_rows(own, size, symmetries)
    return own, records.own_valid.astype(np.bool_)


def _opponent_policy(records: Records, size: int, symmetries: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    if records.opp_index.shape[1] == 0:
        return None
    opp = dense_policy(records.opp_index, records.opp_prob, num_actions(size))
    transform_action_rows(opp, size, symmetries)
    return opp, (records.opp_index >= 0).any(axis=1)


TARGETS: dict[str, TargetProducer] = {
    row.name: row
    for row in (
        TargetProducer("ownership", _ownership, "final owner of each square's top piece, mover's view"),
        TargetProducer("opponent_policy", _opponent_policy, "the next recorded position's policy target"),
    )
}


def make_targets(
    records: Records, size: int, symmetries: np.ndarray, names: Iterable[str] | None = None
) -> dict[str, torch.Tensor]:
    """The targets ``names`` (None: every row of :data:`TARGETS`) of ``records``: ``name`` ->
    tensor and ``heads.valid_key(name)`` -> (B,) bool tensor, for each producer that finds its
    data in the records (an absent one is left out; the loss that needs it then says so).

    Raises ValueError naming a target that is not a row of :data:`TARGETS`.
    """
    wanted = list(TARGETS) if names is None else list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in TARGETS]
    if unknown:
        raise ValueError(f"unknown batch target {unknown[0]!r}; the targets are {list(TARGETS)}")
    out: dict[str, torch.Tensor] = {}
    for name in wanted:
        made = TARGETS[name].produce(records, size, symmetries)
        if made is not None:
            out[name] = torch.from_numpy(made[0])
            out[valid_key(name)] = torch.from_numpy(np.asarray(made[1], np.bool_))
    return out
