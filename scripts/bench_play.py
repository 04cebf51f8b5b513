"""Speed of the network player in play: nodes/s at a fixed movetime, beside the network's own
batch curve. JSON lines on stdout.

    python scripts/bench_play.py                      # 5x5 and 6x6 shipped networks, 0.1 s and 1 s
    python scripts/bench_play.py --sizes 5 --movetimes 1 --positions 5
    python scripts/bench_play.py --tei-only           # just the TEI engine's go movetime figure

Lines:

* ``{"kind": "network", ...}``: positions/s of ``Evaluator.evaluate`` on the bench positions by
  backend (torch, onnx, int8: ``takzero.nn.quantize``), threads (1, 2) and batch size (1, 16,
  64): what the network alone does.
* ``{"kind": "player", ...}``: :class:`takzero.players.NetworkPlayer` thinking
  ``Limit(seconds=movetime)`` on each of the bench positions (a fresh game each, tinuë checks on,
  as the engine plays): ``nps`` per position and their median, the mean batch of its network
  calls, the cache hit rate when the cache is on, and ``ratio``: the median nodes/s over the
  network's positions/s at batch 64 with the same backend and threads. Settings: ``torch k=1``
  (the engine before the search front end: torch, one simulation per network call), onnx at
  k = 1, onnx at the default k (``takzero.players.network.DEFAULT_LEAVES``), with the
  network-output cache, and on two threads; int8 at the default k on one and two threads.
* ``{"kind": "tei", ...}``: the TEI engine itself (``takzero.protocols.tei.engine.TEIEngine`` in process, default
  options but ``Threads`` (1, 2) and ``Backend`` (onnx, int8)), ``go movetime MS`` on each
  position, nodes/s from its last ``info`` line (the figure a GUI shows), median; with
  ``Threads 2`` the engine keeps two batches in flight (one thread searches, one runs the
  network).

The configurations take turns position by position (old and new side by side, so the machine's
load falls on all alike). Bench positions: 10 mid-game positions per size (plies 8-26) of
human and bot games in tests/data/games (playtak_takai_bot_5x5.ptn,
playtak_skoolin_6x6_part1.ptn), fixed below as TPS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from takzero.game.position import Position  # noqa: E402

BENCH_TPS = {
    5: [
        "2,2,x2,1/2,1,x3/2,x2,1,x/x,1,x3/x5 1 5",
        "1,1,12,x,1C/x3,1,2/x5/2,x4/2,x4 1 6",
        "1,x4/x,2,x3/x,2,x3/x,2,1,x2/21,21,2,x2 1 7",
        "x,1,x2,2/1,2,x3/x,1,2,x2/1,12,x3/1,12,x3 1 8",
        "2S,1,1,1,1/1,2S,1,x2/x2,2S,x2/x3,1,x/2,2,2,12,x 1 9",
        "2,2,x3/222221S,2,x2,1/x,2,x2,1/x5/x5 1 10",
        "x3,1,x/x3,12,2/1,1,2C,2,1/x2,1,21,2/x3,21,2 1 11",
        "2,2,221S,x2/2,2,2,21S,x/x2,2,2,x/x5/21S,1,1,1,1 1 12",
        "x,1,1,x2/x,2,1,2S,x/x2,12C,1,2/x,2,x,22121,x/x,1,1,x,2 1 13",
        "1S,x,21C,x2/x,2,221S,2,x/1,2221S,x,2,x/1,2,x,2,x/1,2,x,2,x 1 14",
    ],
    6: [
        "x5,1/2,x2,1,1,1/x3,2,x,2/x6/x6/2,x5 1 5",
        "2,x4,1/x6/x,2,1,1,1,x/x2,2,2,1,x/x4,2,x/x6 1 6",
        "x4,1,1/x,2,x2,1,x/x2,2,1,1,x/x2,1,2,2,x/x2,2,x3/x5,2 1 7",
        "x2,2,2,x2/x2,2,1,1,x/x,1,1,2,1,x/x2,2,2,1,x/x6/2,x4,1 1 8",
        "2,x5/x,2,2S,x3/1,2,1,1,1,x/2,1,1,2,x2/1,2,2,x3/1,x5 1 9",
        "x6/x6/2,1,1,1,1,2C/2,2,2,2,1,21/x4,2,1/2,x4,1 1 10",
        "x,2,x4/12,2,1,x3/21,1,1,x3/2,x,12,x3/x,2,1,x3/x,2,1,x2,1 1 11",
        "2,x2,2,x,1/x3,2,x,121/x3,21,1,12S/x2,2,2,1,x/x3,2,x,1/x5,1 1 12",
        "2,x4,1/x2,1,2,1C,1/x,2,2,1,21,12S/x2,2,12C,2,1/x4,2,1/x5,1 1 13",
        "x6/x2,1,1,2,x/2,112C,2,1C,1,2/1,1,12,12,1,1/x,2S,1,x3/2,x5 1 14",
    ],
}


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def network_curve(model: str, positions: list[Position], threads: list[int], batches: list[int],
                  seconds: float) -> dict[tuple[str, int, int], float]:
    """positions/s of the network by (backend, threads, batch); prints one line each."""
    import torch

    from takzero.nn.backends import with_backend
    from takzero.nn.inference import Evaluator

    base = Evaluator.load(model, device="cpu")
    states = np.stack([p.state for p in positions])
    out = {}
    for t in threads:
        torch.set_num_threads(t)
        for backend in ("torch", "onnx", "int8"):
            ev = base if backend == "torch" else with_backend(base, backend, threads=t)
            for b in batches:
                batch = states[np.arange(b) % len(states)].copy()
                ev.evaluate(batch)
                n = 0
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < seconds:
                    ev.evaluate(batch)
                    n += b
                pps = n / (time.perf_counter() - t0)
                out[(backend, t, b)] = pps
                emit({"kind": "network", "model": model, "backend": backend, "threads": t,
                      "batch": b, "positions_per_s": round(pps)})
    torch.set_num_threads(1)
    return out


def player_configs(default_k: int) -> list[dict]:
    return [
        {"name": "torch k=1 (before)", "backend": "torch", "threads": 1, "leaves": 1, "cache": 0},
        {"name": "onnx k=1", "backend": "onnx", "threads": 1, "leaves": 1, "cache": 0},
        {"name": f"onnx k={default_k}", "backend": "onnx", "threads": 1, "leaves": None, "cache": 0},
        {"name": f"onnx k={default_k} cache", "backend": "onnx", "threads": 1, "leaves": None,
         "cache": 1 << 15},
        {"name": f"onnx k={default_k} 2 threads", "backend": "onnx", "threads": 2, "leaves": None,
         "cache": 0},
        {"name": f"int8 k={default_k}", "backend": "int8", "threads": 1, "leaves": None, "cache": 0},
        {"name": f"int8 k={default_k} 2 threads", "backend": "int8", "threads": 2, "leaves": None,
         "cache": 0},
    ]


def bench_players(model: str, size: int, positions: list[Position], movetime: float,
                  curve: dict, configs: list[dict]) -> None:
    from takzero.players.network import NetworkPlayer
    from takzero.search.limit import Limit

    players = []
    for c in configs:
        p = NetworkPlayer.load(model, threads=c["threads"], backend=c["backend"], leaves=c["leaves"],
                               cache_size=c["cache"], seed=0)
        p.reset(size, positions[0].half_komi)
        p.think(positions[0], Limit(nodes=64))  # warm: the runtime, the kernels
        players.append(p)
    results = [{"nps": [], "batch": [], "hits": []} for _ in configs]
    for pos in positions:
        for c, p, r in zip(configs, players, results, strict=True):
            p.set_threads(c["threads"])
            p.reset(size, pos.half_komi)
            t0 = time.perf_counter()
            pm = p.think(pos, Limit(seconds=movetime))
            took = time.perf_counter() - t0
            r["nps"].append(pm.nodes / took)
            st = p._search.last_stats if p._search is not None else None
            if st is not None and st.steps:
                r["batch"].append(st.leaves / st.steps)
            if p._cache is not None:
                r["hits"].append(p._cache.hit_rate)
    for c, r in zip(configs, results, strict=True):
        med = statistics.median(r["nps"])
        pps = curve.get((c["backend"], c["threads"], 64))
        emit({
            "kind": "player", "size": size, "config": c["name"], "movetime_s": movetime,
            "backend": c["backend"], "threads": c["threads"], "leaves": c["leaves"] or "auto",
            "cache": bool(c["cache"]), "nps_median": round(med),
            "nps": [round(x) for x in r["nps"]],
            "mean_batch": round(statistics.mean(r["batch"]), 2) if r["batch"] else None,
            "cache_hit_rate": round(statistics.mean(r["hits"]), 4) if r["hits"] else None,
            "network_batch64_pps": round(pps) if pps else None,
            "ratio": round(med / pps, 3) if pps else None,
        })


def bench_tei(model: str, size: int, positions: list[Position], movetime_ms: int,
              threads: list[int], backends: tuple[str, ...] = ("onnx", "int8")) -> None:
    from takzero.protocols.tei.engine import TEIEngine

    engines = {}
    keys = [(t, b) for b in backends for t in threads]
    for t, b in keys:
        lines: list[str] = []
        got = threading.Event()

        def out(line: str, lines=lines, got=got) -> None:
            lines.append(line)
            if line.startswith("bestmove"):
                got.set()

        eng = TEIEngine(model=model, out=out, threads=t, backend=b)
        engines[(t, b)] = (eng, lines, got)
    rates: dict[tuple[int, str], list[float]] = {k: [] for k in keys}
    for pos in positions:
        for k in keys:
            eng, lines, got = engines[k]
            lines.clear()
            got.clear()
            for cmd in (f"teinewgame {size}", f"position tps {pos.to_tps()}", f"go movetime {movetime_ms}"):
                eng.handle(cmd)
            got.wait(60)
            eng._finish_search()
            info = [ln for ln in lines if ln.startswith("info depth")][-1].split()
            rates[k].append(float(info[info.index("nps") + 1]))
    for t, b in keys:
        r = rates[(t, b)]
        emit({"kind": "tei", "size": size, "model": model, "movetime_ms": movetime_ms, "threads": t,
              "backend": b, "nps_median": round(statistics.median(r)), "nps": [round(x) for x in r],
              "loadavg_1min": round(os.getloadavg()[0], 2)})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[5, 6])
    p.add_argument("--movetimes", type=float, nargs="+", default=[0.1, 1.0], help="seconds")
    p.add_argument("--positions", type=int, default=10, help="bench positions per size (1..10)")
    p.add_argument("--tei-only", action="store_true", help="only the TEI engine's go movetime 1000")
    p.add_argument("--curve-seconds", type=float, default=1.0, help="seconds per batch-curve point")
    args = p.parse_args(argv)
    import torch

    from takzero.players.network import DEFAULT_LEAVES, set_search_threads

    set_search_threads(1)
    for size in args.sizes:
        model = str(ROOT / "checkpoints" / "pretrained" / f"{size}x{size}.pt")
        positions = [Position.from_tps(t) for t in BENCH_TPS[size][: args.positions]]
        if not args.tei_only:
            curve = network_curve(model, positions, [1, 2], [1, 16, 64], args.curve_seconds)
            for mt in args.movetimes:
                bench_players(model, size, positions, mt, curve, player_configs(DEFAULT_LEAVES))
        bench_tei(model, size, positions, 1000, [1, 2])
        torch.set_num_threads(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
