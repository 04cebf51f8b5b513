"""Self-play inference backend benchmark: onnxruntime against PyTorch on one CPU thread per worker.

For the default nets of ``configs/config/5x5_cpu.yaml`` (5x5, 32 channels x 4 blocks) and
``configs/config/6x6.yaml`` (6x6, 64 x 6), feature version 2, times ``Evaluator.evaluate`` (what a
self-play worker calls each search step: encode + legal mask + network + masked softmax) on random
mid-game positions at the batch sizes self-play uses (the unfinished games of one worker: up to
``selfplay.games_per_worker``, 128 and 64 in those configs), with PyTorch limited to one thread
(``torch.set_num_threads(1)``) and onnxruntime to one intra-op thread (``onnx_evaluator``). The two
backends are timed in alternation (ABAB...) so that load from other processes hits both alike;
the weights are random (the cost does not depend on them).

One JSON line per model and batch::

    {"bench": "selfplay_backend", "model": "5x5_cpu", "size", "channels", "blocks", "batch",
     "torch_positions_per_s", "onnx_positions_per_s", "onnx_speedup", "max_abs_prior_diff",
     "threads": 1, "loadavg_1min"}

and one per model with the cost of a new generation under the onnx backend (the in-memory ONNX
export and session start, ``export_s``). ``onnx_speedup`` > 1 means onnxruntime is faster: set
``selfplay.backend: onnx`` (or ``auto``, which times both when a worker starts).

    python scripts/bench_selfplay_backend.py
    python scripts/bench_selfplay_backend.py --batches 64 128 --rounds 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from takzero.nn.backends import onnx_evaluator  # noqa: E402
from takzero.nn.features import random_states  # noqa: E402
from takzero.nn.inference import Evaluator  # noqa: E402
from takzero.nn.model import ModelConfig, TakNet  # noqa: E402

MODELS = {"5x5_cpu": (5, 32, 4), "6x6": (6, 64, 6)}


def _time(ev: Evaluator, states: np.ndarray) -> float:
    t0 = time.perf_counter()
    ev.evaluate(states)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 16, 64, 128])
    ap.add_argument("--rounds", type=int, default=10, help="timed calls per backend and batch")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    for name in args.models:
        size, channels, blocks = MODELS[name]
        torch.manual_seed(0)
        model = TakNet(ModelConfig(size=size, channels=channels, blocks=blocks)).eval()
        t0 = time.perf_counter()
        onnx = onnx_evaluator(model, threads=1)
        export_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        onnx_evaluator(model, threads=1)
        print(json.dumps({"bench": "selfplay_backend_export", "model": name,
                          "first_export_s": round(export_s, 3),
                          "export_s": round(time.perf_counter() - t0, 3),
                          "loadavg_1min": round(os.getloadavg()[0], 2)}), flush=True)
        pt = Evaluator(model, device="cpu")
        for batch in args.batches:
            states = random_states(size, batch, seed=batch, min_plies=3 * size, max_plies=8 * size)
            diff = float(np.abs(pt.evaluate(states)[0] - onnx.evaluate(states)[0]).max())
            for ev in (pt, onnx, pt, onnx):  # warm-up
                ev.evaluate(states)
            t_pt, t_ox = [], []
            for _ in range(args.rounds):
                t_pt.append(_time(pt, states))
                t_ox.append(_time(onnx, states))
            a, b = statistics.median(t_pt), statistics.median(t_ox)
            line = {
                "bench": "selfplay_backend", "model": name, "size": size,
                "channels": channels, "blocks": blocks, "batch": batch,
                "torch_positions_per_s": round(batch / a, 1),
                "onnx_positions_per_s": round(batch / b, 1),
                "onnx_speedup": round(a / b, 3),
                "max_abs_prior_diff": diff,
                "threads": 1, "loadavg_1min": round(os.getloadavg()[0], 2),
            }
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
