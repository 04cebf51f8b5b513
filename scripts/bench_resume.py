"""How long a resumed run takes to play again: from the ``python -m takzero.train ... run_name=X``
command to the first new self-play positions, phase by phase.

    python scripts/bench_resume.py --root /tmp/bench [--name resume] [--resumes 2] [-- OVERRIDES]

Makes the run once if ``ROOT/NAME`` has no checkpoint (``+config=smoke train.total_steps=20``
and the overrides: a checkpoint, replay shards and a best.pt to resume from), then resumes it
``--resumes`` times (``train.total_steps`` raised so that it goes on): each resume is stopped with
SIGINT as soon as its ``train.log`` has the ``start-up timings`` line (written when the first
self-play worker has searched its first step; ``progress.startup_timings``), and its leftover
processes are killed (only those of its own session). One JSON line per resume: seconds per
phase (``launch``: the command until the run object exists: Python, imports, Hydra; ``setup``,
``ray``, ``to_pool``, ``actors``, ``worker_build``, ``first_step`` as in
``progress.STARTUP_PHASES``; ``replay_reload``: the replay actor's reload, which may overlap the
others), ``total`` (launch to the first positions) and ``stop_s`` (SIGINT to exit); then one
summary line with the mean of each. Run it on a warm numba cache (the first run of a new
checkout compiles for minutes: the creation step does that).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from soak import session_processes

ROOT = Path(__file__).resolve().parent.parent
TIMINGS = re.compile(r"start-up timings \(s\): (\{.*\})")


def _kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL what is left of ``proc``'s session (Ray's processes of that run only)."""
    for q in session_processes(proc.pid):
        try:
            os.kill(q, signal.SIGKILL)
        except ProcessLookupError:
            pass


def create(cmd: list[str], timeout_s: float) -> dict[str, object]:
    """Run ``cmd`` (the short run to resume) to its end; its seconds and exit status."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=180)
    finally:
        _kill_session(proc)
    return {"created": " ".join(cmd[1:]), "seconds": round(time.monotonic() - t0, 1), "status": proc.returncode}


def resume_once(cmd: list[str], log: Path, timeout_s: float) -> dict[str, object]:
    """Start ``cmd``, wait for the start-up timings in the new part of ``log``, stop it; the
    timings with the launch phase and the stop's seconds (or an 'error')."""
    offset = log.stat().st_size if log.exists() else 0
    launched = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found: dict[str, float] | None = None
    try:
        while proc.poll() is None and time.time() - launched < timeout_s:
            time.sleep(0.25)
            if log.exists():
                with open(log, errors="replace") as f:
                    f.seek(offset)
                    m = TIMINGS.search(f.read())
                if m:
                    found = json.loads(m.group(1))
                    break
        stopped = time.monotonic()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                pass
        stop_s = round(time.monotonic() - stopped, 1)
    finally:
        _kill_session(proc)
    if found is None:
        return {"error": f"no start-up timings within {timeout_s:.0f} s (exit status {proc.returncode}); see {log}"}
    launch = found.pop("run_created_at") - launched
    out: dict[str, object] = {"launch": round(launch, 2), **found}
    out["total"] = round(launch + float(found.get("total", 0.0)), 2)
    out["stop_s"] = stop_s
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", type=Path, required=True, help="checkpoint_root of the benchmark run")
    p.add_argument("--name", default="resume", help="run_name (made when it has no checkpoint)")
    p.add_argument("--resumes", type=int, default=2, help="resumes to time")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for one resume's timings")
    p.add_argument("overrides", nargs="*", help="overrides for takzero.train (after --)")
    args = p.parse_args(argv)
    base = [sys.executable, "-m", "takzero.train", "+config=smoke", f"checkpoint_root={args.root}",
            f"run_name={args.name}", *args.overrides]
    run_dir = args.root / args.name
    if not list(run_dir.glob("ckpt_*.pt")):
        print(json.dumps(create([*base, "train.total_steps=20"], timeout_s=900)), flush=True)
    rows = []
    for i in range(args.resumes):
        row = resume_once([*base, "train.total_steps=100000000"], run_dir / "train.log", args.timeout)
        rows.append(row)
        print(json.dumps({"resume": i + 1, **row}), flush=True)
    good = [r for r in rows if "error" not in r]
    keys = [k for k in (good[0] if good else {}) if isinstance(good[0][k], float | int)]
    mean = {k: round(sum(float(r[k]) for r in good) / len(good), 2) for k in keys if all(k in r for r in good)}
    print(json.dumps({"summary": "mean seconds over the resumes", "resumes": len(good), **mean}), flush=True)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
