"""Old against new in one run: a benchmark script of two checkouts, alternated, and the ratio
new/old of each rate it prints (the machine is noisy; two runs minutes apart are not comparable,
alternating rounds are). Prints the JSON lines of every round (with ``checkout``) and one
``compare`` line per rate: the median of each side and the ratio of the medians.

    python scripts/bench_compare.py --old /work/old --rounds 3 -- scripts/bench_mcts.py --skip-net --searches 3
    python scripts/bench_compare.py --old /work/old --rounds 3 -- scripts/bench_perft.py --quick

``--new`` defaults to this checkout. Each round runs the script once from each checkout (its own
folder as the working directory and first on PYTHONPATH, so it imports that checkout's code;
the order old/new flips each round). Rates are the numeric fields whose name ends in ``_per_s``
or ``_per_s_median``; lines are matched by their ``bench``, ``phase``, ``position`` and ``size``
fields. Each checkout must have compiled its kernels once (``--warmup`` runs the script once from
each before the rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_KEYS = ("bench", "phase", "position", "size", "depth")


def run_script(checkout: Path, script: list[str]) -> list[dict]:
    """The JSON lines ``python SCRIPT ARGS`` prints when run from ``checkout``. Raises
    RuntimeError with its stderr when it fails."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    proc = subprocess.run([sys.executable, *script], cwd=checkout, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{script} in {checkout} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    out = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def rates(records: list[dict]) -> dict[str, list[float]]:
    """``{"bench/phase/...:field": [values]}`` of every rate in ``records``."""
    found: dict[str, list[float]] = {}
    for rec in records:
        key = "/".join(str(rec[k]) for k in _KEYS if k in rec)
        for name, value in rec.items():
            if (name.endswith("_per_s") or name.endswith("_per_s_median")) and isinstance(value, (int, float)):
                found.setdefault(f"{key}:{name}", []).append(float(value))
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="the old checkout (a git worktree)")
    ap.add_argument("--new", default=str(ROOT), help="the new checkout (default: this one)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", action="store_true",
                    help="run the script once from each checkout first, not counted (compiles the kernels)")
    ap.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT ARGS, relative to each checkout")
    args = ap.parse_args()
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        ap.error("give the benchmark after --, e.g. -- scripts/bench_perft.py --quick")
    sides = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    got: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    if args.warmup:
        for side in ("old", "new"):
            run_script(sides[side], script)
    for r in range(args.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for side in order:
            records = run_script(sides[side], script)
            for rec in records:
                print(json.dumps({"checkout": side, "round": r, **rec}), flush=True)
            for key, values in rates(records).items():
                got[side].setdefault(key, []).extend(values)
    for key in sorted(set(got["old"]) & set(got["new"])):
        old, new = statistics.median(got["old"][key]), statistics.median(got["new"][key])
        print(json.dumps({"bench": "compare", "rate": key, "old_median": old, "new_median": new,
                          "ratio_new_old": round(new / old, 3) if old else None,
                          "old": got["old"][key], "new": got["new"][key]}), flush=True)


if __name__ == "__main__":
    main()
