"""Soak test of a training run: does anything grow once the replay window is full?

    python scripts/soak.py --minutes 30 [--every 30] [-- +config=smoke replay.window_max=3000 ...]

Starts ``python -m takzero.train`` (default: the smoke config with a 3,000-position window and no
step limit) in its own session under a temporary ``checkpoint_root``, and every ``--every``
seconds prints one JSON line: resident memory (MB) of the driver, of the Ray workers (every
``ray::`` process of the run summed), of Ray's GCS server, and the run folder's size on disk,
with the replay positions read from the run's ``train.log``. After ``--minutes`` of soak *once the
window is full* it stops the run (SIGINT, then its whole session) and prints a summary line with
the growth of each in MB/min: the least-squares slope over the samples taken while the window was
full. Only the processes of the run's own session are measured or killed.
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

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ARGS = ["+config=smoke", "replay.window_max=3000", "train.total_steps=100000000",
                "log_every_s=5", "evaluator.baseline_every=5"]


def session_processes(sid: int) -> dict[int, str]:
    """pid -> command line of every process in session ``sid`` (Linux /proc)."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) != sid:
                continue
            out[int(d.name)] = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
    return out


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def disk_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def replay_positions(log: Path) -> int:
    """The replay size of the newest progress line of ``train.log`` (0 when none yet)."""
    if not log.exists():
        return 0
    found = re.findall(r"\| replay (\d+) \|", log.read_text()[-20_000:])
    return int(found[-1]) if found else 0


def slope(ts: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over ts (per unit of ts); 0 with fewer than two points."""
    if len(ts) < 2:
        return 0.0
    return float(np.polyfit(np.array(ts), np.array(ys), 1)[0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="soak minutes after the window is full")
    p.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    p.add_argument("--window", type=int, default=3000, help="replay.window_max of the run")
    p.add_argument("--max-wait", type=float, default=20.0, help="minutes to wait for a full window")
    p.add_argument("train_args", nargs="*", help="overrides for takzero.train (after --)")
    args = p.parse_args(argv)
    train_args = args.train_args or [a.replace("3000", str(args.window)) for a in DEFAULT_ARGS]
    root = Path(tempfile.mkdtemp(prefix="takzero-soak-"))
    cmd = [sys.executable, "-m", "takzero.train", *train_args, f"checkpoint_root={root}", "run_name=soak"]
    run_dir = root / "soak"
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    full_since: float | None = None
    samples: dict[str, list[float]] = {"t": [], "driver": [], "workers": [], "gcs": [], "disk": []}
    try:
        while proc.poll() is None:
            time.sleep(args.every)
            now = time.monotonic()
            procs = session_processes(proc.pid)
            driver = rss_mb(proc.pid)
            workers = sum(rss_mb(q) for q, c in procs.items() if c.startswith("ray::"))
            gcs = sum(rss_mb(q) for q, c in procs.items() if "gcs_server" in c)
            disk = disk_mb(run_dir) if run_dir.exists() else 0.0
            held = replay_positions(run_dir / "train.log")
            if full_since is None and held >= args.window:
                full_since = now
            row = {"t_min": round((now - t0) / 60, 2), "window_full": full_since is not None,
                   "replay_positions": held, "driver_mb": round(driver, 1),
                   "workers_mb": round(workers, 1), "gcs_mb": round(gcs, 1),
                   "disk_mb": round(disk, 1)}
            print(json.dumps(row), flush=True)
            if full_since is not None:
                samples["t"].append((now - full_since) / 60)
                for k in ("driver", "workers", "gcs", "disk"):
                    samples[k].append(row[f"{k}_mb"])
                if now - full_since >= 60 * args.minutes:
                    break
            elif now - t0 > 60 * args.max_wait:
                print(json.dumps({"error": "the replay window never filled"}), flush=True)
                break
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                pass
        for q in session_processes(proc.pid):
            try:
                os.kill(q, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if proc.returncode not in (None, 0) and not samples["t"]:
        print(json.dumps({"error": f"the run exited with status {proc.returncode}; see "
                                   f"{run_dir / 'train.log'}"}), flush=True)
    summary = {"summary": "growth after the window was full", "command": " ".join(cmd),
               "soak_minutes": round(samples["t"][-1], 2) if samples["t"] else 0.0,
               "samples": len(samples["t"])}
    for k in ("driver", "workers", "gcs", "disk"):
        summary[f"{k}_mb_per_min"] = round(slope(samples["t"], samples[k]), 3)
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
