"""Plot a training run from its TensorBoard logs: Elo against the baselines and the losses over
training time.

    python scripts/plot_run.py RUN_DIR [--out DIR] [--prefix 5x5_cpu]

RUN_DIR is a run folder (``checkpoints/<run_name>``, holding ``tb/``) or the ``tb/`` folder itself.
Writes ``<prefix>_elo.png`` (Elo and score against each baseline, from the evaluator's
``elo/vs_*`` and ``score/vs_*`` scalars) and ``<prefix>_loss.png`` (``loss/*`` scalars, raw and
smoothed) into ``--out`` (default: ``plots/`` inside the run folder, never the repository's
tracked ``docs/``: pass ``--out docs`` to update the figures there), and prints one JSON line per
file with the last values plotted. The time
axis is minutes of training: wall-clock time since the run's first logged event, less every
pause longer than ``--max-gap`` seconds between two logged events (a run stopped and resumed
later; the run logs every ``log_every_s``, 10 s by default), from 0 to the run's last event (a
series of one point sits at its time). Elo is clipped to
[-800, 800] for plotting: a 100% or 0% score has an infinite point estimate.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from takzero.io.files import atomic_open  # noqa: E402

ELO_CLIP = 800.0


def event_files(tb_dir: Path) -> list[Path]:
    """The TensorBoard event files in ``tb_dir``: regular files named ``events.out.tfevents.*``
    (a folder so named is not one), in name order (their names start with the creation time)."""
    return sorted(f for f in tb_dir.glob("events.out.tfevents.*") if f.is_file())


def load_scalars(tb_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every scalar tag of the event files in ``tb_dir`` (:func:`event_files`): tag ->
    (wall_time s, step, value), ordered by wall time."""
    events_by_tag: dict[str, list] = {}
    for path in event_files(tb_dir):
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            events_by_tag.setdefault(tag, []).extend(acc.Scalars(tag))
    out = {}
    for tag, events in events_by_tag.items():
        events.sort(key=lambda e: e.wall_time)
        out[tag] = (
            np.array([e.wall_time for e in events], dtype=np.float64),
            np.array([e.step for e in events], dtype=np.int64),
            np.array([e.value for e in events], dtype=np.float64),
        )
    return out


def save_figure(fig, path: Path) -> None:
    """Write ``fig`` as PNG to ``path`` atomically (temp file and rename: a failed write leaves an
    older file whole) and close it. Raises OSError."""
    try:
        with atomic_open(path, "wb") as f:
            fig.savefig(f, format="png", dpi=110)
    finally:
        plt.close(fig)


def smooth(values: np.ndarray, weight: float = 0.9) -> np.ndarray:
    """TensorBoard's exponential moving average with debiasing; a non-finite value (a NaN or inf
    loss) is kept as it is at its point and left out of the average, as TensorBoard does."""
    out = np.empty_like(values)
    last, norm = 0.0, 0.0
    for i, v in enumerate(values):
        if not np.isfinite(v):
            out[i] = v
            continue
        last = weight * last + (1 - weight) * v
        norm = weight * norm + (1 - weight)
        out[i] = last / norm
    return out


class TrainingClock:
    """Maps event wall times (seconds since the epoch) to minutes of training: the time since the
    first event, less each gap longer than ``max_gap_s`` between consecutive events of any tag
    (the time between a stopped session's last event and the next session's first one).

    ``walls``: every event's wall time (float64, any order)."""

    def __init__(self, walls: np.ndarray, max_gap_s: float) -> None:
        t = np.unique(np.asarray(walls, dtype=np.float64))
        if not len(t):
            raise ValueError("no events")
        gaps = np.diff(t)
        paused = np.where(gaps > max_gap_s, gaps, 0.0)
        self._times = t
        self._paused_before = np.concatenate([[0.0], np.cumsum(paused)])  # seconds paused before t[i]

    @property
    def total_minutes(self) -> float:
        """Training minutes at the last event of the run."""
        return float(self(np.array([self._times[-1]]))[0])

    def __call__(self, wall: np.ndarray) -> np.ndarray:
        """Training minutes of each wall time in ``wall`` (float64 array)."""
        i = np.clip(np.searchsorted(self._times, wall, side="right") - 1, 0, len(self._times) - 1)
        return (np.asarray(wall, dtype=np.float64) - self._times[0] - self._paused_before[i]) / 60


def set_time_axis(ax, clock: TrainingClock) -> None:
    """The x axis of a figure: training minutes from 0 to the run's last event (at least one
    minute), whatever the series hold, so that a series of one point (the first evaluation) sits
    at its time in the run rather than in the middle of an axis of a few hundredths of a minute
    around it."""
    ax.set_xlim(0.0, max(1.0, clock.total_minutes) * 1.02)
    ax.ticklabel_format(axis="x", useOffset=False)
    ax.set_xlabel("training time (minutes)")


def plot_elo(scalars: dict, clock: TrainingClock, path: Path, title: str) -> dict[str, float]:
    """Elo (top) and score (bottom) against each baseline over minutes of training."""
    names = sorted(t.removeprefix("elo/vs_") for t in scalars if t.startswith("elo/vs_"))
    if not names:
        raise LookupError("no elo/vs_* scalars in the logs: the evaluator has not played the baselines yet")
    fig, (ax_elo, ax_score) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    last: dict[str, float] = {}
    for name in names:
        wall, _, elo = scalars[f"elo/vs_{name}"]
        minutes = clock(wall)
        ax_elo.plot(minutes, np.clip(elo, -ELO_CLIP, ELO_CLIP), marker="o", ms=3, label=f"vs {name}")
        if f"score/vs_{name}" in scalars:
            wall_s, _, score = scalars[f"score/vs_{name}"]
            ax_score.plot(clock(wall_s), 100 * score, marker="o", ms=3, label=f"vs {name}")
            last[f"score_vs_{name}"] = float(score[-1])
        last[f"elo_vs_{name}"] = float(elo[-1])
    ax_elo.axhline(0, color="grey", lw=0.8)
    ax_elo.set_ylabel(f"Elo over baseline (clipped to +-{ELO_CLIP:.0f})")
    ax_elo.set_title(title)
    ax_elo.legend()
    ax_elo.grid(alpha=0.3)
    ax_score.axhline(50, color="grey", lw=0.8)
    ax_score.set_ylabel("score (%)")
    ax_score.set_ylim(-2, 102)
    set_time_axis(ax_score, clock)
    ax_score.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)
    return last


def plot_losses(scalars: dict, clock: TrainingClock, path: Path, title: str) -> dict[str, float]:
    """Each ``loss/*`` scalar over minutes of training: raw (faint) and smoothed."""
    tags = [t for t in ("loss/total", "loss/policy", "loss/value", "loss/aux") if t in scalars]
    if not tags:
        raise LookupError("no loss/* scalars in the logs: the trainer has not logged a step yet")
    fig, axes = plt.subplots(len(tags), 1, figsize=(8, 2.2 * len(tags) + 0.6), sharex=True)
    axes = np.atleast_1d(axes)
    last: dict[str, float] = {}
    for ax, tag in zip(axes, tags, strict=True):
        wall, _, value = scalars[tag]
        minutes = clock(wall)
        line = ax.plot(minutes, value, alpha=0.25)[0]
        ax.plot(minutes, smooth(value), color=line.get_color())
        ax.set_ylabel(tag.removeprefix("loss/"))
        ax.grid(alpha=0.3)
        last[tag.replace("/", "_")] = float(smooth(value)[-1])
    axes[0].set_title(title)
    set_time_axis(axes[-1], clock)
    fig.tight_layout()
    save_figure(fig, path)
    return last


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", help="run folder (with tb/) or the tb/ folder")
    p.add_argument("--out", help="folder for the PNG files (default: RUN_DIR/plots)")
    p.add_argument("--prefix", help="file name prefix (default: the run folder's name)")
    p.add_argument("--max-gap", type=float, default=120.0,
                   help="seconds without a logged event counted as a pause between sessions (default 120)")
    args = p.parse_args(argv)
    run_dir = Path(args.run_dir)
    if not run_dir.exists():
        p.error(f"run folder not found: {run_dir}")
    if not run_dir.is_dir():
        p.error(f"not a folder: {run_dir} (give the run folder or its tb/ folder)")
    tb_dir = run_dir / "tb" if (run_dir / "tb").is_dir() else run_dir
    if not event_files(tb_dir):
        p.error(f"no TensorBoard event files in {tb_dir}")
    name = run_dir.name if tb_dir != run_dir else run_dir.parent.name
    prefix = args.prefix or name
    scalars = load_scalars(tb_dir)
    if not scalars:
        p.error(f"no scalars in {tb_dir}")
    if not args.max_gap > 0:
        p.error(f"--max-gap must be > 0 seconds, got {args.max_gap}")
    clock = TrainingClock(np.concatenate([w for w, _, _ in scalars.values()]), args.max_gap)
    if "/" in prefix or "\\" in prefix:
        p.error(f"--prefix must be a plain file name prefix, got {prefix!r}")
    run_root = run_dir if tb_dir != run_dir else run_dir.parent
    out = Path(args.out) if args.out else run_root / "plots"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        p.error(f"cannot use --out {out}: {e}")
    written = 0
    for kind, fn in (("elo", plot_elo), ("loss", plot_losses)):
        path = out / f"{prefix}_{kind}.png"
        title = f"{name}: {'Elo vs baselines' if kind == 'elo' else 'losses'}"
        try:
            last = fn(scalars, clock, path, title)
        except LookupError as e:  # the other figure can still be drawn
            print(f"skipped {path.name}: {e.args[0]}", file=sys.stderr)
            continue
        except OSError as e:
            p.error(f"cannot write {path}: {e}")
        written += 1
        last = {k: (v if np.isfinite(v) else None) for k, v in last.items()}  # strict JSON
        print(json.dumps({"file": str(path), **last}))
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
