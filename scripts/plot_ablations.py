"""Curves of several ablation runs on one figure, over minutes of training, from their TensorBoard
logs (the curves beside the rows of docs/ablations.md).

    python scripts/plot_ablations.py RUN_DIR [RUN_DIR ...] --out docs/ablations_2026-12-01.png

Each RUN_DIR is a run folder (holding ``tb/``), labelled by its folder name. Four panels, one line
per run: self-play positions made (``selfplay/positions_total``: the compute a variant turned into
training data), the value loss and the policy loss (``loss/value``, ``loss/policy``; smoothed as
TensorBoard does), and the in-run evaluator's Elo against UCT (``elo/vs_uct``, clipped to
+-800). Losses of runs with different targets (soft policy, heads) are comparable only roughly:
the rows' Elo against the fixed reference is the measure, the curves show how each got there.
The time axis is :class:`plot_run.TrainingClock` (pauses longer than ``--max-gap`` seconds
removed). Writes one PNG atomically (default ``plots/ablations.png``, git-ignored; never the
repository's ``docs/`` unless asked) and prints one JSON line per run with its last values (the
values themselves: the Elo before clipping, null when infinite or NaN).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plot_run import ELO_CLIP, TrainingClock, event_files, load_scalars, plt, save_figure, smooth  # noqa: E402

#: (tag, panel title, smoothed, clipped to +-ELO_CLIP)
PANELS = (
    ("selfplay/positions_total", "self-play positions", False, False),
    ("loss/value", "value loss (smoothed)", True, False),
    ("loss/policy", "policy loss (smoothed)", True, False),
    ("elo/vs_uct", f"in-run Elo vs UCT (clipped to +-{ELO_CLIP:.0f})", False, True),
)


def plot_runs(runs: dict[str, dict], max_gap_s: float, path: Path) -> dict[str, dict[str, float]]:
    """Draw :data:`PANELS` for ``runs`` (label -> scalars of :func:`plot_run.load_scalars`) into
    ``path`` (its folder made when missing); returns label -> {tag: last value} (a tag a run never
    logged is left out). Raises LookupError, before making anything, when no run has any of the
    panels' tags; OSError when the file cannot be written."""
    if not any(tag in s for s in runs.values() for tag, *_ in PANELS):
        raise LookupError("none of the runs logged " + ", ".join(tag for tag, *_ in PANELS))
    clocks = {label: TrainingClock(np.concatenate([w for w, _, _ in s.values()]), max_gap_s)
              for label, s in runs.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
    last: dict[str, dict[str, float]] = {label: {} for label in runs}
    handles = {}
    for ax, (tag, title, smoothed, clipped) in zip(axes.flat, PANELS, strict=True):
        for k, (label, scalars) in enumerate(runs.items()):
            if tag not in scalars:
                continue
            wall, _, value = scalars[tag]
            y = smooth(value) if smoothed else value
            shown = np.clip(y, -ELO_CLIP, ELO_CLIP) if clipped else y
            (line,) = ax.plot(clocks[label](wall), shown, color=f"C{k % 10}", marker="o" if clipped else None, ms=3)
            handles.setdefault(label, line)
            last[label][tag] = float(y[-1])  # the value itself, not the clipped one
        ax.set_title(title)
        ax.grid(alpha=0.3)
    # One legend for the figure: a run that lacks a panel's tag is still named.
    fig.legend(list(handles.values()), list(handles), loc="upper center", ncol=min(len(handles), 6), fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel("training time (minutes)")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    save_figure(fig, path)
    return last


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dirs", nargs="+", help="run folders (each with tb/)")
    p.add_argument("--out", default="plots/ablations.png", help="PNG file to write (default %(default)s)")
    p.add_argument("--max-gap", type=float, default=120.0,
                   help="seconds without a logged event counted as a pause between sessions (default 120)")
    args = p.parse_args(argv)
    if not args.max_gap > 0:
        p.error(f"--max-gap must be > 0 seconds, got {args.max_gap}")
    out = Path(args.out)
    if out.is_dir() or out.suffix.lower() != ".png":
        p.error(f"--out must be a .png file, got {out}")
    runs: dict[str, dict] = {}
    for d in map(Path, args.run_dirs):
        tb = d / "tb"
        if not tb.is_dir() or not event_files(tb):
            p.error(f"no TensorBoard event files in {tb} (give run folders)")
        label = d.resolve().name  # '.' or 'run/' are named after the folder itself
        if label in runs:
            p.error(f"two runs are named {label}: the labels must differ")
        try:
            runs[label] = load_scalars(tb)
        except Exception as e:  # noqa: BLE001 - TensorBoard's reader raises many types for a damaged file
            p.error(f"cannot read the event files in {tb}: {e}")
        if not runs[label]:
            p.error(f"no scalars in the event files in {tb} (empty or unreadable)")
    try:
        last = plot_runs(runs, args.max_gap, out)  # checks the tags before it makes any folder
    except LookupError as e:
        p.error(str(e.args[0]))
    except OSError as e:
        p.error(f"cannot write {out}: {e.strerror or e}")
    for label, values in last.items():
        fields = {k.replace("/", "_"): (v if np.isfinite(v) else None) for k, v in values.items()}
        print(json.dumps({"file": str(out), "run": label, **fields}))  # non-finite as null: strict JSON
    return 0


if __name__ == "__main__":
    sys.exit(main())
