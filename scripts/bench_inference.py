"""Network inference benchmark: positions per second by batch size, JSON lines on stdout.

Measures, for the default 6x6 model (``ModelConfig()``: 64 channels, 6 blocks, global pooling) on
random mid-game positions:

* ``encode``: feature encoding alone (``features.encode``), positions/s;
* ``legal_mask``: legal-mask building alone;
* ``network``: the model's forward pass (eval mode, ``torch.inference_mode``), float32 on CPU,
  float32 and bf16 autocast on CUDA when present;
* ``evaluator``: ``Evaluator.evaluate`` end to end (encode + mask + network + masked softmax);
  ``evaluator_bf16`` on CUDA: the same with ``bf16=True``;
* ``encode_share``: encode time / network time per batch (target: < 5% at batch 256);
* ``train_step``: forward + backward + SGD step of the default model, samples/s (trainability).
* ``feature_cost`` (``--features``, alone): encoding cost per position of feature versions 1 and 2
  against the CPU network time per position of the default models of configs/config/5x5_cpu.yaml
  and 6x6.yaml (built for version 2), on random mid-game positions (plies 3N..12N), batches 64 and
  256: ``{"bench", "model", "size", "batch", "version", "channels", "encode_us_per_position",
  "network_us_per_position", "share", "threads", "loadavg_1min"}``, share = encode / network.

Each line: ``{"bench", "batch", "positions_per_s", "device", "ms_per_batch", "threads",
"loadavg_1min", "model"}`` (model: ``<blocks>x<channels>``, and the config it came from with
``--config``) (the load average tells whether other processes shared the CPU). Times are
medians over repeats of at least ``--min-time`` seconds in all.

    python scripts/bench_inference.py                  # CPU, and CUDA when available
    python scripts/bench_inference.py --batches 1 256 --device cpu --threads 2
    python scripts/bench_inference.py --features --threads 2      # feature versions 1 and 2
    python scripts/bench_inference.py --softmax --threads 1       # masked softmax: torch vs compiled
    python scripts/bench_inference.py --config 6x6 --device cuda --batches 64 256 1024 4096
    python scripts/bench_inference.py --blocks 10 --channels 128 --device cuda --no-train --no-evaluator

``--config NAME`` takes the network of ``+config=NAME`` (the shipped 6x6 network's shape with
``--config 6x6``); ``--blocks``/``--channels`` set the trunk of the default model instead (the
default: ``ModelConfig(size=--size)``, 6 blocks of 64 channels). On CUDA the network is timed in
float32 and under bf16 autocast (``network_bf16``); ``--no-bf16`` leaves the bf16 rows out.

* ``masked_softmax`` (``--softmax``, alone): the masked softmax over the action space on the real
  legal masks of random mid-game positions, torch (``model.masked_softmax``, what the CPU
  evaluator used before) against the compiled loop (``outputs.masked_softmax_np``), timed
  alternately in one run: ``{"bench", "size", "actions", "batch", "torch_ms", "compiled_ms",
  "speedup", "max_abs_diff", "threads", "loadavg_1min"}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from takzero.nn.actions import legal_mask, num_actions  # noqa: E402
from takzero.nn.features import FEATURE_VERSIONS, encode, new_planes, random_states  # noqa: E402
from takzero.nn.inference import Evaluator  # noqa: E402
from takzero.nn.model import ModelConfig, TakNet, masked_softmax, total_loss  # noqa: E402
from takzero.nn.outputs import masked_softmax_np  # noqa: E402


def timeit(fn: Callable[[], object], min_time: float, sync: Callable[[], None]) -> float:
    """Median seconds per call of ``fn`` (after two warm-up calls)."""
    for _ in range(2):
        fn()
    sync()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < min_time and len(times) < 200):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


#: ``<blocks>x<channels>`` of the model being timed (and its config), added to every line
MODEL_LABEL: dict[str, object] = {}


def emit(bench: str, batch: int, seconds: float, device: str, **extra: object) -> None:
    line = {
        "bench": bench,
        "batch": batch,
        "positions_per_s": round(batch / seconds, 1),
        "device": device,
        "ms_per_batch": round(1000 * seconds, 4),
        "threads": torch.get_num_threads(),
        "loadavg_1min": round(os.getloadavg()[0], 2),
        **MODEL_LABEL,
        **extra,
    }
    print(json.dumps(line), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64, 256, 1024])
    parser.add_argument("--device", default="all", help="cpu, cuda, or all (CPU + CUDA if any)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--min-time", type=float, default=1.0, help="seconds per measurement")
    parser.add_argument("--size", type=int, default=6)
    parser.add_argument("--no-train", action="store_true", help="skip the train_step figure")
    parser.add_argument("--features", action="store_true", help="only the feature_cost lines")
    parser.add_argument("--softmax", action="store_true", help="only the masked_softmax lines")
    parser.add_argument("--config", default=None, help="time the network of +config=NAME (its board size too)")
    parser.add_argument("--blocks", type=int, default=None, help="trunk blocks of the default model")
    parser.add_argument("--channels", type=int, default=None, help="trunk channels of the default model")
    parser.add_argument("--no-evaluator", action="store_true", help="skip the evaluator lines")
    parser.add_argument("--no-bf16", action="store_true", help="skip the bf16 rows on CUDA")
    args = parser.parse_args(argv)
    if min(args.batches) < 1 or args.min_time <= 0 or args.threads < 0:
        parser.error("--batches must be >= 1, --min-time > 0 and --threads >= 0")
    if args.config and (args.blocks is not None or args.channels is not None):
        parser.error("--config takes its network from the config: leave out --blocks/--channels")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.features:
        bench_features(args.min_time)
        return
    if args.softmax:
        bench_softmax(args.min_time, tuple(args.batches))
        return
    if args.config:
        cfg = config_model(args.config)
        MODEL_LABEL["config"] = args.config
    else:
        shape = {k: v for k, v in (("blocks", args.blocks), ("channels", args.channels)) if v is not None}
        cfg = ModelConfig(size=args.size, **shape)
    MODEL_LABEL["model"] = f"{cfg.blocks}x{cfg.channels}"
    size = cfg.size
    states_all = random_states(size, max(args.batches), seed=0, min_plies=4, max_plies=60)

    devices = ["cpu"] if args.device in ("cpu", "all") else []
    if args.device == "cuda" or (args.device == "all" and torch.cuda.is_available()):
        devices.append("cuda")

    # encoding and masks (CPU, numba)
    encode_s: dict[int, float] = {}
    for b in args.batches:
        states = states_all[:b]
        planes = new_planes(b, size, cfg.layers)
        mask = np.zeros((b, num_actions(size)), bool)
        encode_s[b] = timeit(lambda s=states, p=planes: encode(s, p), args.min_time / 4, _no_sync)
        emit("encode", b, encode_s[b], "cpu")
        t = timeit(lambda s=states, m=mask: legal_mask(s, m), args.min_time / 4, _no_sync)
        emit("legal_mask", b, t, "cpu")

    for dev in devices:
        bench_device(dev, cfg, states_all, args, encode_s)


def bench_device(
    dev: str, cfg: ModelConfig, states_all: np.ndarray, args: argparse.Namespace, encode_s: dict
) -> None:
    """Network, evaluator and train-step figures on one device."""
    size = cfg.size
    device = torch.device(dev)
    model = TakNet(cfg).to(device).eval()
    sync = torch.cuda.synchronize if dev == "cuda" else _no_sync
    modes = [("network", False)] + ([("network_bf16", True)] if dev == "cuda" and not args.no_bf16 else [])
    for name, bf16 in modes:
        for b in args.batches:
            planes = new_planes(b, size, cfg.layers)
            encode(states_all[:b], planes)
            x = torch.from_numpy(planes).to(device)
            t = timeit(partial(_forward, model, x, dev, bf16), args.min_time, sync)
            emit(name, b, t, dev)
            if name == "network" and b in encode_s:
                share = encode_s[b] / t
                line = {"bench": "encode_share", "batch": b, "share": round(share, 5)}
                line.update({"device": dev, "ok": share < 0.05})
                print(json.dumps(line), flush=True)
    for bf16 in (False, True) if dev == "cuda" and not args.no_bf16 else (False,):
        if args.no_evaluator:
            break
        ev = Evaluator(model, device=dev, bf16=bf16)
        for b in args.batches:
            t = timeit(partial(ev.evaluate, states_all[:b]), args.min_time, _no_sync)
            emit("evaluator_bf16" if bf16 else "evaluator", b, t, dev)
    b = 256
    if args.no_train or len(states_all) < b:
        return
    train_model = TakNet(cfg).to(device).train()
    opt = torch.optim.SGD(train_model.parameters(), lr=0.01, momentum=0.9)
    planes = new_planes(b, size, cfg.layers)
    encode(states_all[:b], planes)
    mask_np = np.zeros((b, num_actions(size)), bool)
    legal_mask(states_all[:b], mask_np)
    x = torch.from_numpy(planes).to(device)
    mask = torch.from_numpy(mask_np).to(device)
    target = mask.float() / mask.float().sum(dim=1, keepdim=True).clamp(min=1)
    value = torch.zeros(b, device=device)

    def step() -> None:
        loss, _ = total_loss(train_model(x), mask, target, value)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    emit("train_step", b, timeit(step, args.min_time, sync), dev)


#: Configs whose model the encoding cost is compared with (configs/config/<name>.yaml).
FEATURE_MODELS = ("5x5_cpu", "6x6")


def config_model(name: str) -> ModelConfig:
    """The ``ModelConfig`` of ``+config=<name>`` (composed as the training command does)."""
    from takzero.config import compose_preset

    return compose_preset(name).model_config()


def bench_features(min_time: float, batches: tuple[int, ...] = (64, 256)) -> None:
    """``feature_cost`` lines: encode time per position of each feature version next to the CPU
    network time per position of each default model (see the module docstring)."""
    for name in FEATURE_MODELS:
        cfg = config_model(name)
        size = cfg.size
        model = TakNet(cfg).eval()
        states_all = random_states(size, max(batches), seed=1, min_plies=3 * size,
                                   max_plies=12 * size)
        for b in batches:
            states = states_all[:b]
            planes = new_planes(b, size, cfg.layers, cfg.feature_version)
            encode(states, planes, cfg.layers, cfg.feature_version)
            x = torch.from_numpy(planes)
            net = timeit(partial(_forward, model, x, "cpu", False), min_time, _no_sync) / b
            for version in FEATURE_VERSIONS:
                out = new_planes(b, size, cfg.layers, version)
                enc = timeit(partial(encode, states, out, cfg.layers, version), min_time / 2,
                             _no_sync) / b
                line = {
                    "bench": "feature_cost", "model": name, "size": size, "batch": b,
                    "version": version, "channels": out.shape[1],
                    "encode_us_per_position": round(1e6 * enc, 3),
                    "network_us_per_position": round(1e6 * net, 2),
                    "share": round(enc / net, 5), "threads": torch.get_num_threads(),
                    "loadavg_1min": round(os.getloadavg()[0], 2),
                }
                print(json.dumps(line), flush=True)


def bench_softmax(min_time: float, batches: tuple[int, ...]) -> None:
    """``masked_softmax`` lines for sizes 5 and 6 (see the module docstring): the two versions are
    timed in alternation, three rounds each, and the medians compared."""
    rng = np.random.default_rng(0)
    for size in (5, 6):
        a = num_actions(size)
        states_all = random_states(size, max(batches), seed=2, min_plies=2 * size, max_plies=10 * size)
        for b in batches:
            mask = np.zeros((b, a), bool)
            legal_mask(states_all[:b], mask)
            logits = rng.normal(size=(b, a)).astype(np.float32)
            lt, mt = torch.from_numpy(logits), torch.from_numpy(mask)
            ref = masked_softmax(lt, mt).numpy()
            diff = float(np.abs(ref - masked_softmax_np(logits, mask)).max())
            t_torch: list[float] = []
            t_comp: list[float] = []
            for _ in range(3):
                t_torch.append(timeit(partial(masked_softmax, lt, mt), min_time / 3, _no_sync))
                t_comp.append(timeit(partial(masked_softmax_np, logits, mask), min_time / 3, _no_sync))
            tt, tc = statistics.median(t_torch), statistics.median(t_comp)
            line = {
                "bench": "masked_softmax", "size": size, "actions": a, "batch": b,
                "torch_ms": round(1e3 * tt, 3), "compiled_ms": round(1e3 * tc, 3),
                "speedup": round(tt / tc, 2), "max_abs_diff": diff, "threads": torch.get_num_threads(),
                "loadavg_1min": round(os.getloadavg()[0], 2),
            }
            print(json.dumps(line), flush=True)


def _no_sync() -> None:
    return None


def _forward(model: torch.nn.Module, x: torch.Tensor, dev: str, bf16: bool) -> None:
    with torch.inference_mode():
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=bf16):
            model(x)


if __name__ == "__main__":
    main()
