"""TensorBoard scalars of a run: one point per tag and step, the hyperparameters, and the
self-play statistics the workers report (summed counters, derived shares and rates).

Scalar names are listed in ``docs/design.md`` ("a TensorBoard scalar"); a new self-play scalar is
added where the worker reports it (``takzero.pipeline.selfplay``) and, if it is derived from the
summed counters, in :func:`selfplay_scalars`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np

from takzero.config import TrainConfig

#: Game results counted by the workers (``count/<name>``), shown as ``selfplay/share_<name>``.
RESULT_KINDS = ("road_white", "road_black", "flat_white", "flat_black", "draw", "resigned")


class ScalarLog:
    """TensorBoard scalars with one point per tag and step, strictly increasing.

    A value is held back until a later step of its tag arrives (a newer value of the same step
    replaces it: training can stall at one step while statistics keep coming), or until
    :meth:`flush` (before every checkpoint), which writes every held value and the event file.
    A value for a step at or below one already written for its tag (``floor``: the checkpoint
    step a resumed run starts from, whose points the first session wrote) moves to the next
    step, so it is neither lost nor a second point of that step.

    Args:
        writer: a ``torch.utils.tensorboard.SummaryWriter``.
        floor: steps up to this one are taken (a resumed run: its checkpoint step); -1 for none.
    """

    def __init__(self, writer: Any, floor: int = -1) -> None:
        self.writer = writer
        self.floor = floor
        self.written: dict[str, int] = {}
        self.pending: dict[str, tuple[float, int]] = {}

    def add(self, tag: str, value: float, step: int, exact: bool = False) -> None:
        """Hold ``value`` as the point of ``tag`` at trainer step ``step`` (or the next free one).
        ``exact``: ``floor`` does not apply, only this session's points of the tag (an
        evaluation owed from before the resume, whose generation was made at or below the
        checkpoint step: the earlier session wrote no point of its tags there or after it)."""
        lowest = self.written.get(tag, -1) if exact else max(self.floor, self.written.get(tag, -1))
        step = max(step, lowest + 1)
        held = self.pending.get(tag)
        if held is not None and held[1] < step:
            self._write(tag, *held)
        self.pending[tag] = (float(value), step)

    def _write(self, tag: str, value: float, step: int) -> None:
        self.writer.add_scalar(tag, value, step)
        self.written[tag] = step

    def last_step(self) -> int:
        """The highest step written for any tag (``floor`` when none): a checkpoint records it
        after :meth:`flush`, and the resumed run purges only the points after it and writes its
        own after it (a value moved past the checkpoint's trainer step is kept)."""
        return max(self.written.values(), default=self.floor)

    def flush(self) -> None:
        """Write every held value and flush the event file."""
        for tag, (value, step) in self.pending.items():
            self._write(tag, value, step)
        self.pending = {}
        self.writer.flush()


def summarise_worker_stats(stats: list[dict[str, float]]) -> dict[str, float]:
    """Combine worker reports: keys ``count/*`` are summed, every other key is averaged."""
    out: dict[str, float] = {}
    if not stats:
        return out
    keys = set().union(*stats)
    for k in keys:
        vals = [s[k] for s in stats if k in s]
        out[k] = float(sum(vals)) if k.startswith("count/") else float(np.mean(vals))
    return out


def selfplay_scalars(counters: dict[str, float], games: int, positions: int) -> dict[str, float]:
    """Scalars derived from the run's summed ``count/*`` counters: the share of each result kind,
    the false-resignation rate (of the games played out to check a resignation), White's win rate,
    and the run's game and position totals."""
    total = max(1.0, counters.get("count/games", 0.0))
    out = {f"selfplay/share_{k}": counters.get(f"count/{k}", 0.0) / total for k in RESULT_KINDS}
    checks = counters.get("count/resign_checks", 0.0)
    if checks:
        out["selfplay/false_resign_rate"] = counters.get("count/false_resign", 0.0) / checks
    wins_w = counters.get("count/road_white", 0.0) + counters.get("count/flat_white", 0.0)
    out["selfplay/white_win_rate"] = wins_w / total
    out["selfplay/games_total"] = float(games)
    out["selfplay/positions_total"] = float(positions)
    return out


def log_hparams(writer: Any, cfg: TrainConfig) -> None:
    """Write the whole config as TensorBoard hyperparameters (HPARAMS tab), keyed by dotted path."""
    from torch.utils.tensorboard.summary import hparams

    flat: dict[str, Any] = {}

    def walk(prefix: str, obj: Any) -> None:
        if dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                walk(f"{prefix}{f.name}.", getattr(obj, f.name))
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(f"{prefix}{k}.", v)
        else:
            v = obj if isinstance(obj, int | float | str | bool) else json.dumps(obj)
            flat[prefix[:-1]] = v

    walk("", cfg)
    exp, ssi, sei = hparams(flat, {"gating/promoted_generation": math.nan})
    writer.file_writer.add_summary(exp)
    writer.file_writer.add_summary(ssi)
    writer.file_writer.add_summary(sei)
