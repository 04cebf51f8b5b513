"""What a step kernel's call costs beyond its work: numba's dispatcher against
``takzero.search.bound_kernel.BoundKernel``. JSON lines on stdout.

    python scripts/bench_dispatch.py               # 20,000 empty calls, 5 rounds of searches
    python scripts/bench_dispatch.py --calls 5000 --rounds 3

Lines:

* ``{"kind": "call", "kernel": ..., "via": "dispatcher" | "bound", "us": ...}``: microseconds per
  call of ``select_kernel`` with no game to search and ``expand_backup_kernel`` with no leaf
  (the call's overhead alone: typing and unboxing the trees, games, leaves and settings).
* ``{"kind": "search", "via": ..., "nodes_per_s": ..., "round": r}``: a 20,000-simulation search of
  a 5x5 mid-game position at 16 leaves a step with the ``UniformEvaluator`` (no network: the
  search's own speed, where the call overhead weighs most), the two ways taking turns round by
  round (side by side, so the machine's load falls on both alike).
* ``{"kind": "summary", ...}``: the medians and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from takzero.game.position import Position  # noqa: E402
from takzero.search import BatchedMCTS, SearchConfig  # noqa: E402
from takzero.search.evaluators import UniformEvaluator  # noqa: E402
from takzero.search.steps import expand_backup_kernel, select_kernel  # noqa: E402

MID_GAME = "x4,1/x,2,2,x2/x3,2,x/x,1,x3/2,1C,x3 1 5"


def _mcts(via: str, leaves: int = 16) -> BatchedMCTS:
    cfg = SearchConfig(simulations=200, leaves_per_step=leaves, root_noise=False, node_budget=60_000)
    mcts = BatchedMCTS(1, 5, cfg, seed=0)
    mcts.reset(0, Position.from_tps(MID_GAME).state)
    if via == "dispatcher":  # the calls as they were: through numba's dispatcher
        mcts._select_kernel = select_kernel
        mcts._expand_kernel = expand_backup_kernel
    return mcts


def _call_us(via: str, calls: int) -> dict[str, float]:
    mcts = _mcts(via)
    mcts.run(UniformEvaluator(5), simulations=64)
    empty = np.zeros(0, dtype=np.int32)
    flat = np.zeros(mcts.num_actions, np.float32)
    values = np.zeros(1, np.float32)
    out = {}
    t = time.perf_counter()
    for _ in range(calls):
        mcts._select_kernel(mcts._trees, mcts._games, mcts._leaves, mcts._settings, empty, mcts._float_buf)
    out["select_kernel"] = (time.perf_counter() - t) / calls * 1e6
    t = time.perf_counter()
    for _ in range(calls):
        mcts._expand_kernel(mcts._trees, mcts._games, mcts._leaves, mcts._settings, 0, flat, 0, values,
                            mcts._move_buf, mcts._float_buf)  # fmt: skip
    out["expand_backup_kernel"] = (time.perf_counter() - t) / calls * 1e6
    return out


def _search_nps(via: str, simulations: int) -> float:
    mcts = _mcts(via)
    t = time.perf_counter()
    mcts.run(UniformEvaluator(5), simulations=simulations)
    return mcts.simulations_done(0) / (time.perf_counter() - t)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20_000, help="empty calls per kernel and way")
    p.add_argument("--rounds", type=int, default=5, help="searches per way, taking turns")
    p.add_argument("--simulations", type=int, default=20_000)
    args = p.parse_args(argv)
    ways = ("dispatcher", "bound")
    _search_nps("bound", 256)  # compile outside the timing
    _search_nps("dispatcher", 256)
    us: dict[str, dict[str, list[float]]] = {w: {} for w in ways}
    nps: dict[str, list[float]] = {w: [] for w in ways}
    for r in range(args.rounds):
        for via in ways if r % 2 == 0 else ways[::-1]:
            for kernel, v in _call_us(via, args.calls // args.rounds).items():
                us[via].setdefault(kernel, []).append(v)
            nps[via].append(_search_nps(via, args.simulations))
            print(json.dumps({"kind": "search", "via": via, "round": r, "nodes_per_s": round(nps[via][-1])}), flush=True)
    for via in ways:
        for kernel, v in us[via].items():
            print(json.dumps({"kind": "call", "kernel": kernel, "via": via, "us": round(statistics.median(v), 2)}))
    med = {w: statistics.median(nps[w]) for w in ways}
    print(json.dumps({"kind": "summary", "nodes_per_s": {w: round(v) for w, v in med.items()},
                      "ratio_bound_over_dispatcher": round(med["bound"] / med["dispatcher"], 3)}))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
