"""Rules-engine speed: perft and random playouts, single-threaded, one JSON object per line.

    python scripts/bench_perft.py [--quick]

Lines: ``machine`` (platform, CPU count, Python, numpy and numba versions), then ``perft`` for the
6x6 start at depth 5 (1,253,506,520 leaves) and the 5x5 start at depth 5 (187,855,252), each with
seconds and leaves/s, then ``playouts`` (uniformly random 6x6 games via ``core.random_playouts``:
plies/s and games/s). The JIT is warmed up (compiled or loaded from its cache) before any timing.
``--quick`` uses depth 4 for a smoke run. Exits 1 if a perft count is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numba
import numpy as np

from takzero.game import core
from takzero.game.perft import perft
from takzero.game.position import Position

EXPECTED = {(6, 5): 1_253_506_520, (5, 5): 187_855_252, (6, 4): 13_586_048, (5, 4): 2_999_784}


def machine_info() -> dict:
    """Where the numbers come from."""
    return {
        "bench": "machine",
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "threads": 1,
        "load_avg_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def bench_perft(size: int, depth: int) -> dict:
    """Time ``perft`` of the empty ``size`` board to ``depth``."""
    pos = Position.start(size)
    t0 = time.perf_counter()
    leaves = perft(pos, depth)
    dt = time.perf_counter() - t0
    expected = EXPECTED.get((size, depth))
    return {
        "bench": "perft",
        "position": f"start {size}x{size}",
        "depth": depth,
        "leaves": leaves,
        "expected": expected,
        "ok": expected is None or leaves == expected,
        "seconds": round(dt, 3),
        "leaves_per_s": round(leaves / dt),
    }


def bench_playouts(size: int, games: int, max_plies: int, seed: int = 1) -> dict:
    """Time ``games`` uniformly random games from the empty ``size`` board."""
    state = Position.start(size).state.copy()
    t0 = time.perf_counter()
    plies, finished = core.random_playouts(state, games, max_plies, seed)
    dt = time.perf_counter() - t0
    return {
        "bench": "playouts",
        "position": f"start {size}x{size}",
        "games": games,
        "max_plies": max_plies,
        "finished_by_rules": int(finished),
        "plies": int(plies),
        "seconds": round(dt, 3),
        "plies_per_s": round(plies / dt),
        "games_per_s": round(games / dt, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and print JSON lines; returns 1 if a perft count is wrong."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="depth 4 and fewer playouts")
    args = parser.parse_args(argv)
    depth = 4 if args.quick else 5

    # Warm-up: compile or load every compiled function used below (not timed).
    perft(Position.start(6), 3)
    core.random_playouts(Position.start(6).state.copy(), 2, 50, 0)

    print(json.dumps(machine_info()), flush=True)
    ok = True
    for size in (6, 5):
        line = bench_perft(size, depth)
        ok &= line["ok"]
        print(json.dumps(line), flush=True)
    games = 1_000 if args.quick else 5_000
    print(json.dumps(bench_playouts(6, games, 400)), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
