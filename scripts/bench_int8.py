"""The int8 copy of a network against its float32 self: what quantization costs and what it
buys. JSON lines on stdout.

    python scripts/bench_int8.py                               # the shipped 5x5 and 6x6 networks
    python scripts/bench_int8.py --models M.pt --positions 2000 --seconds 2

One line per model (``takzero.nn.backends.quantize``, calibrated as a player calibrates it: the
positions the file carries, else games of its own policy from seed 0):

* ``quantize_seconds``: the quantization, calibration included (one core);
* ``top1_agreement``: the share of held-out positions (games of the float32 network's policy
  from seed 7, ``--positions``) where the int8 and float32 priors have the same largest move;
  ``value_mae`` and ``value_p99``: the mean and 99th percentile of |v_int8 - v_fp32| (v = W - L);
* ``fp32_pps`` / ``int8_pps`` and ``speedup``: positions/s of onnxruntime on one thread at batch
  ``--batch``, the two taking turns ``--rounds`` times for ``--seconds`` each (the machine's
  load falls on both alike), medians; ``loadavg_1min`` when it ended.

Strength at equal nodes is ``scripts/search_ab.py MODEL --a-backend int8 --b-backend onnx``.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rate(ev, states: np.ndarray, seconds: float) -> float:
    """Positions/s of ``ev.evaluate(states)`` over ``seconds`` (after one warm-up call)."""
    ev.evaluate(states)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        ev.evaluate(states)
        n += len(states)
    return n / (time.perf_counter() - t0)


def bench(model: str, positions: int, batch: int, seconds: float, rounds: int) -> dict:
    import torch

    from takzero.nn.backends import quantize, with_backend
    from takzero.nn.inference import Evaluator
    from takzero.nn.quantize import policy_games_states

    torch.set_num_threads(1)
    source = Evaluator.load(model, device="cpu")
    fp32 = with_backend(source, "onnx", threads=1)
    int8, seconds_q = quantize(source, threads=1)
    held_out = policy_games_states(fp32, positions=positions, seed=7)
    pf, vf, _ = fp32.evaluate(held_out)
    pq, vq, _ = int8.evaluate(held_out)
    diff = np.abs(vq - vf)
    x = held_out[:batch]
    speeds: dict[str, list[float]] = {"fp32": [], "int8": []}
    for _ in range(rounds):
        speeds["fp32"].append(rate(fp32, x, seconds))
        speeds["int8"].append(rate(int8, x, seconds))
    f, q = statistics.median(speeds["fp32"]), statistics.median(speeds["int8"])
    return {
        "model": model, "size": source.size, "calibration_positions": int8.metadata["calibration_positions"],
        "quantize_seconds": round(seconds_q, 2), "held_out_positions": len(held_out),
        "top1_agreement": round(float((pf.argmax(1) == pq.argmax(1)).mean()), 4),
        "value_mae": round(float(diff.mean()), 4), "value_p99": round(float(np.percentile(diff, 99)), 4),
        "batch": batch, "fp32_pps": round(f), "int8_pps": round(q), "speedup": round(q / f, 2),
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = [str(ROOT / "checkpoints" / "pretrained" / f"{n}x{n}.pt") for n in (5, 6)]
    p.add_argument("--models", nargs="+", default=default)
    p.add_argument("--positions", type=int, default=1500, help="held-out positions (>= batch)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seconds", type=float, default=1.5, help="seconds per speed round")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    if args.positions < args.batch or args.batch < 1 or args.rounds < 1 or args.seconds <= 0:
        p.error("need --positions >= --batch >= 1, --rounds >= 1 and --seconds > 0")
    for model in args.models:
        print(json.dumps(bench(model, args.positions, args.batch, args.seconds, args.rounds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
