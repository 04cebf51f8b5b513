"""Replay buffer: compact position records, a growing window, a reuse cap, backpressure and
atomic on-disk shards.
A record is one searched position of a self-play game (``takzero.pipeline.records``: its fields,
declared once in ``RECORD_FIELDS``, and ``Records``, a batch of them; the packed positions and
sparse policies are ``takzero.pipeline.packing``'s). The buffer only stores and samples records:
the training targets are made from them by the trainer's batch (``takzero.pipeline.targets``).
The names of those modules are importable from here too.


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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from takzero.game import core
from takzero.pipeline.packing import (
    MAX_HALF_KOMI,
    MAX_PIECES,
    board_problem,
    board_record_len,
    dense_policy,
    pack_states,
    sparse_policy,
    sparse_targets,
    unpack_states,
)
from takzero.pipeline.records import (
    PROB_SUM_SLACK,
    RECORD_FIELDS,
    VALUE_BOUNDS,
    RecordField,
    Records,
    Widths,
    row_width,
)

if TYPE_CHECKING:
    from takzero.config import ReplayConfig

__all__ = [
    "MAX_HALF_KOMI",
    "MAX_PIECES",
    "PROB_SUM_SLACK",
    "RECORD_FIELDS",
    "SHARD_RE",
    "VALUE_BOUNDS",
    "ReanalyseJob",
    "ReanalyseRefresh",
    "RecordField",
    "Records",
    "ReplayBuffer",
    "Widths",
    "atomic_save_npz",
    "board_problem",
    "board_record_len",
    "dense_policy",
    "pack_states",
    "sparse_policy",
    "sparse_targets",
    "unpack_states",
]

log = logging.getLogger(__name__)

SHARD_RE = re.compile(r"^shard_(\d{8})\.npz$")


def _shard_number(path: Path) -> int:
    """The number in a shard's name (``shard_00000012.npz`` -> 12); the name matches SHARD_RE."""
    m = SHARD_RE.match(path.name)
    assert m is not None, path
    return int(m.group(1))


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
                and self.total_added >= self.cfg.min_positions):
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
                "dropped": self.reanalyse_dropped}

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
            want = row_width(f.width, self.size, self.cfg.top_k, self.opponent_top_k)
            if have[f.name] != want:
                raise ValueError(f"replay field {f.name!r}: rows of {have[f.name]}, this run's are {want} "
                                 f"(board.size {self.size}, replay.top_k {self.cfg.top_k})")

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
