"""Self-play speed of a short training run with one busy loop beside it, at each
``ray.worker_niceness`` given (issue 30 item 6: Ray's default 15 let anything else on the
machine starve self-play; the project's default is 0). Prints one JSON line per run and a last
line with the ratio of each niceness to the first.

    python scripts/bench_niceness.py                          # 15 then 0, 150 s each, 5x5_cpu
    python scripts/bench_niceness.py --niceness 15 0 15 0 --seconds 120

Each run: a busy loop (``python -c 'while True: pass'``, niceness 0, its own session, as another
program in another terminal) is started, then ``python -m takzero.train +config=CONFIG
train.max_minutes=... ray.worker_niceness=N`` in a temporary folder; self-play positions/s is
read from the run's progress lines in ``train.log`` (the cumulative positions over the last half
of the run, so start-up and compilation are left out). The busy loop is stopped after each run.
Run it on an otherwise quiet machine; the kernels should be compiled (run any training once).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_LINE = re.compile(r"^(\S+ \S+) .*positions (\d+) done")


def positions_per_second(log_text: str) -> tuple[float, int]:
    """Self-play positions/s over the second half of the progress lines of ``log_text`` (a
    train.log), and the number of lines read. Returns (0.0, n) with fewer than 4 lines."""
    import datetime as dt

    points: list[tuple[float, int]] = []
    for line in log_text.splitlines():
        m = _LINE.match(line)
        if m:
            t = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
            points.append((t, int(m.group(2))))
    if len(points) < 4:
        return 0.0, len(points)
    (t0, p0), (t1, p1) = points[len(points) // 2], points[-1]
    return ((p1 - p0) / (t1 - t0) if t1 > t0 else 0.0), len(points)


def one_run(config: str, niceness: int, seconds: float, root: Path, index: int) -> dict:
    """One training run of ``seconds`` beside a busy loop; returns its JSON record."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        name = f"nice{niceness}_{index}"
        cmd = [sys.executable, "-m", "takzero.train", f"+config={config}",
               f"train.max_minutes={seconds / 60:.3f}", f"ray.worker_niceness={niceness}",
               f"checkpoint_root={root}", f"run_name={name}", "evaluator.baseline_every=0",
               "evaluator.tactics_every=0"]
        t = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
        wall = time.time() - t
    finally:
        os.killpg(busy.pid, signal.SIGKILL)
        busy.wait()
    log = (root / name / "train.log").read_text() if (root / name / "train.log").exists() else ""
    rate, lines = positions_per_second(log)
    return {"bench": "niceness", "config": config, "worker_niceness": niceness, "seconds": seconds,
            "positions_per_s": round(rate, 1), "progress_lines": lines, "wall_s": round(wall, 1),
            "rc": proc.returncode}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="5x5_cpu")
    ap.add_argument("--niceness", type=int, nargs="+", default=[15, 0])
    ap.add_argument("--seconds", type=float, default=150.0, help="training wall time of each run")
    args = ap.parse_args()
    rates: dict[int, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_niceness_") as tmp:
        for i, n in enumerate(args.niceness):
            rec = one_run(args.config, n, args.seconds, Path(tmp), i)
            print(json.dumps(rec), flush=True)
            rates.setdefault(n, []).append(rec["positions_per_s"])
    first = args.niceness[0]
    base = sum(rates[first]) / len(rates[first])
    print(json.dumps({"bench": "niceness_summary", "busy_loops": 1,
                      "mean_positions_per_s": {str(k): round(sum(v) / len(v), 1) for k, v in rates.items()},
                      "ratio_to_first": {str(k): round(sum(v) / len(v) / base, 2) if base else None
                                         for k, v in rates.items()}}))


if __name__ == "__main__":
    main()
