"""The training-run step of scripts/gpu_suite.sh: ``python -m takzero.train`` for a few minutes
with nvidia-smi sampled beside it, then JSON lines on stdout:

* ``run_gpu``: one line per nvidia-smi sample (every ``--sample-s`` seconds: utilisation, memory,
  power, temperature, SM clock), and ``run_gpu_summary`` (mean and max utilisation, max memory);
  a ``run_gpu_summary`` with ``"skipped"`` when nvidia-smi is not installed;
* ``run``: the command, its exit status and wall seconds (the run's console output is in
  ``<out>/run_train.out``);
* ``run_summary``: the run's own end summary, read from its ``train.log`` (the lines between the
  last two ``====`` rules) with the counters parsed: steps, generation, games, positions,
  training minutes and positions per minute.

    python scripts/gpu_suite_run.py --out gpu_suite_out --minutes 5 -- +config=6x6_gpu \\
        checkpoint_root=gpu_suite_out/runs run_name=gpu_suite

The run gets ``train.max_minutes=<minutes>``; if it has not ended ``--grace-s`` seconds after
that it gets SIGINT (the run's own clean stop: final checkpoint and summary), and SIGKILL 90 s
later.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

SMI_FIELDS = ("timestamp", "index", "utilization.gpu", "utilization.memory", "memory.used", "memory.total",
              "power.draw", "temperature.gpu", "clocks.sm")
COUNTERS = re.compile(r"steps (\d+), generation (\d+), self-play games (\d+), positions (\d+), "
                      r"training time ([\d.]+) min")


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def override(overrides: list[str], key: str, default: str) -> str:
    """The value of ``key=...`` among the Hydra overrides (the last one), else ``default``."""
    found = [o.split("=", 1)[1] for o in overrides if o.lstrip("+").startswith(f"{key}=")]
    return found[-1] if found else default


def read_summary(log: Path) -> dict[str, object]:
    """The end summary of a run's train.log (see the module docstring)."""
    if not log.exists():
        return {"found": False, "reason": f"no {log}"}
    lines = log.read_text(errors="replace").splitlines()
    rules = [i for i, line in enumerate(lines) if line.rstrip().endswith("=" * 72)]
    if len(rules) < 2:
        return {"found": False, "reason": "no end summary in train.log", "log_tail": lines[-15:]}
    text = lines[rules[-2] + 1 : rules[-1]]
    out: dict[str, object] = {"found": True, "lines": text}
    for line in text:
        m = COUNTERS.search(line)
        if m:
            steps, gen, games, positions, minutes = m.groups()
            out.update(steps=int(steps), generation=int(gen), games=int(games), positions=int(positions),
                       training_minutes=float(minutes),
                       positions_per_minute=round(int(positions) / max(float(minutes), 1e-9), 1))
    return out


def smi_lines(path: Path) -> list[dict[str, object]]:
    rows = []
    for raw in path.read_text(errors="replace").splitlines() if path.exists() else []:
        values = [v.strip() for v in raw.split(",")]
        if len(values) != len(SMI_FIELDS):
            continue
        row: dict[str, object] = {}
        for key, value in zip(SMI_FIELDS, values, strict=True):
            try:
                row[key] = float(value) if key != "timestamp" else value
            except ValueError:
                row[key] = value
        rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for run_train.out and nvidia_smi.csv")
    ap.add_argument("--minutes", type=float, required=True, help="train.max_minutes of the run")
    ap.add_argument("--grace-s", type=float, default=150.0, help="seconds past the minutes before SIGINT")
    ap.add_argument("--sample-s", type=int, default=5, help="nvidia-smi sampling period")
    ap.add_argument("overrides", nargs="*", help="the run's Hydra overrides (after --)")
    args = ap.parse_args()
    if args.minutes <= 0 or args.grace_s < 0 or args.sample_s < 1:
        ap.error("--minutes must be > 0, --grace-s >= 0 and --sample-s >= 1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = override(args.overrides, "checkpoint_root", "checkpoints")
    name = override(args.overrides, "run_name", "")
    if not name:
        ap.error("give run_name=NAME among the overrides (the summary is read from its train.log)")
    cmd = [sys.executable, "-m", "takzero.train", *args.overrides, f"train.max_minutes={args.minutes:g}"]
    smi_path = out / "nvidia_smi.csv"
    smi = None
    exe = shutil.which("nvidia-smi")
    if exe:
        with open(smi_path, "w") as f:
            smi = subprocess.Popen([exe, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits",
                                    "-l", str(args.sample_s)], stdout=f, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    deadline = t0 + 60 * args.minutes + args.grace_s
    with open(out / "run_train.out", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        stop_sent = False

        def forward(signum: int, _frame: object) -> None:  # the suite's timeout: stop the run cleanly
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)

        signal.signal(signal.SIGTERM, forward)
        while proc.poll() is None:
            time.sleep(1.0)
            now = time.monotonic()
            if now > deadline and not stop_sent:
                proc.send_signal(signal.SIGINT)
                stop_sent, deadline = True, now + 90
            elif now > deadline:
                proc.kill()
        rc = proc.wait()
    wall = time.monotonic() - t0
    if smi is not None:
        smi.terminate()
        smi.wait(timeout=10)
        rows = smi_lines(smi_path)
        for row in rows:
            emit(bench="run_gpu", **row)
        util = [float(r["utilization.gpu"]) for r in rows if isinstance(r.get("utilization.gpu"), float)]
        mem = [float(r["memory.used"]) for r in rows if isinstance(r.get("memory.used"), float)]
        emit(bench="run_gpu_summary", samples=len(rows), sample_s=args.sample_s,
             mean_utilization_gpu=round(sum(util) / len(util), 1) if util else None,
             max_utilization_gpu=max(util) if util else None, max_memory_used_mib=max(mem) if mem else None)
    else:
        emit(bench="run_gpu_summary", skipped="nvidia-smi not found")
    emit(bench="run", command=" ".join(cmd), rc=rc, wall_s=round(wall, 1), stopped_by_suite=stop_sent)
    emit(bench="run_summary", run_dir=str(Path(root) / name), **read_summary(Path(root) / name / "train.log"))
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
