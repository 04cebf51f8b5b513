"""The self-play-through-Ray steps of scripts/gpu_suite.sh: ``--workers`` self-play actors as a
run starts them (coordinator, replay actor, ``SelfPlayPool``; no trainer), with local
inference (each worker its own network, ``ray.worker_gpu_share`` of a GPU each when there are
GPUs) and with ``selfplay.inference=server`` (``InferenceServers``: one server per GPU, one on
CPU), one after the other in fresh Ray instances, the same config and random weights. JSON
lines on stdout:

* ``selfplay_ray``, one per mode: positions/s (positions of the games finished in the window)
  and moves/s (moves searched: steadier in a short window) summed over the workers, measured
  over ``--seconds`` after every worker handed in its first step (start-up, compiles and the
  first weights excluded); with the server its batches (mean and largest batch, calls);
* ``selfplay_ray_ratio``: server over local, moves/s and positions/s.

    python scripts/gpu_suite_selfplay.py --config 6x6_gpu --workers 8 --seconds 15 -- device=cuda
    python scripts/gpu_suite_selfplay.py --config 6x6_gpu --workers 2 --seconds 8 -- device=cpu \\
        model.channels=16 model.blocks=1 selfplay.games_per_worker=16 mcts.simulations=16

Ray gets ``max(--workers, CPUs)`` CPUs (a worker asks for one), no dashboard, and is shut
down after each mode.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def measure(cfg: Any, mode: str, workers: int, seconds: float, warmup_s: float) -> dict[str, Any]:
    """One mode ('local' or 'server') in a fresh Ray instance: the ``selfplay_ray`` line's fields."""
    import dataclasses

    import ray
    import torch

    from takzero.config import ReplayConfig
    from takzero.nn.model import TakNet
    from takzero.pipeline.actors import Coordinator, ReplayActor, SelfPlayPool
    from takzero.pipeline.inference_server import InferenceServers
    from takzero.pipeline.placement import selfplay_options

    cfg = dataclasses.replace(cfg, selfplay=dataclasses.replace(cfg.selfplay, inference=mode, workers=workers))
    gpus = torch.cuda.device_count() if cfg.device != "cpu" else 0
    ray.init(address="local", num_cpus=max(workers, os.cpu_count() or 1), num_gpus=gpus,
             include_dashboard=False, log_to_driver=False)
    try:
        coordinator = ray.remote(Coordinator).remote()
        rcfg = ReplayConfig(top_k=cfg.replay.top_k, window_max=cfg.replay.window_max, min_positions=1,
                            max_ahead=10**9)
        replay = ray.remote(ReplayActor).remote(rcfg, cfg.board.size)
        servers = InferenceServers(cfg, coordinator, gpus) if mode == "server" else None
        share = cfg.ray.worker_gpu_share if gpus and servers is None else 0.0
        pool = SelfPlayPool(cfg, selfplay_options({}, share), coordinator, replay, servers)
        torch.manual_seed(0)
        ref = [ray.put(TakNet(cfg.model_config()).state_dict())]
        for kind in ("promoted", "latest"):
            ray.get(coordinator.publish.remote(kind, 0, ref))
        t_start = time.monotonic()
        started = 0  # workers whose first step came in (its statistics carry the start-up times)
        while started < workers and time.monotonic() - t_start < warmup_s:
            stats, _ = ray.get(replay.drain.remote())
            started += sum("startup/first_step_at" in s for s in stats)
            time.sleep(0.2)
        warmup = time.monotonic() - t_start
        info0 = servers.info() if servers is not None else []
        ray.get(replay.drain.remote())
        t0 = time.monotonic()
        time.sleep(seconds)
        stats, _ = ray.get(replay.drain.remote())
        dt = time.monotonic() - t0
        out: dict[str, Any] = {
            "bench": "selfplay_ray", "inference": mode, "workers": workers, "device": cfg.device,
            "gpus": gpus, "model": f"{cfg.model.blocks}x{cfg.model.channels}",
            "games_per_worker": cfg.selfplay.games_per_worker, "simulations": cfg.mcts.simulations,
            "workers_started": started, "warmup_s": round(warmup, 1), "seconds": round(dt, 1),
            "positions_per_s": round(sum(s.get("count/positions", 0) for s in stats) / dt, 1),
            "moves_per_s": round(sum(s.get("count/moves", 0) for s in stats) / dt, 1),
            "games": int(sum(s.get("count/games", 0) for s in stats)),
        }
        if servers is not None:
            after = servers.info()
            pairs = list(zip(after, info0, strict=True))
            calls = sum((a or {}).get("batches", 0) - (b or {}).get("batches", 0) for a, b in pairs)
            served = sum((a or {}).get("positions", 0) - (b or {}).get("positions", 0) for a, b in pairs)
            out.update(servers=len(after), server_calls=calls, server_mean_batch=round(served / max(calls, 1), 1),
                       server_largest_batch=max((a or {}).get("largest_batch", 0) for a in after),
                       server_backend=(after[0] or {}).get("backend"))
        out["loadavg_1min"] = round(os.getloadavg()[0], 2)
        ray.get(coordinator.stop.remote())
        pool.finish(timeout_s=30)
        if servers is not None:
            servers.finish()
        return out
    finally:
        ray.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="6x6_gpu", help="named config under configs/config/")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=15.0, help="the measured window of each mode")
    ap.add_argument("--warmup-s", type=float, default=120.0, help="at most this long for every worker's first step")
    ap.add_argument("--modes", nargs="+", default=["local", "server"], choices=["local", "server"])
    ap.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = ap.parse_args()
    if args.workers < 1 or args.seconds <= 0 or args.warmup_s <= 0:
        ap.error("--workers, --seconds and --warmup-s must be > 0")

    from takzero.config import compose_preset

    cfg = compose_preset(args.config, args.overrides, run_name="bench")
    rows = {}
    for mode in args.modes:
        rows[mode] = measure(cfg, mode, args.workers, args.seconds, args.warmup_s)
        emit(**rows[mode])
    if {"local", "server"} <= rows.keys():
        ratio = {k: round(rows["server"][k] / rows["local"][k], 3) if rows["local"][k] else None
                 for k in ("moves_per_s", "positions_per_s")}
        emit(bench="selfplay_ray_ratio", workers=args.workers, server_over_local=ratio)


if __name__ == "__main__":
    main()
