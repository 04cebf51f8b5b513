"""Pipeline throughput for a named config: self-play positions/s of one worker, trainer samples/s,
bytes per stored position. Prints JSON lines.

    python scripts/bench_pipeline.py                      # 6x6 defaults (+config=6x6)
    python scripts/bench_pipeline.py --config 5x5 --seconds 60 mcts.simulations=64

Self-play runs in this process (one worker, ``selfplay.games_per_worker`` games at once, torch on
one thread, as a Ray worker would); the trainer then trains on the positions it produced.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="6x6", help="named config under configs/config/")
    ap.add_argument("--seconds", type=float, default=60.0, help="self-play time to measure")
    ap.add_argument("--train-steps", type=int, default=20)
    ap.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = ap.parse_args()

    from takzero.config import compose_preset
    from takzero.nn.model import LossWeights
    from takzero.pipeline.replay import Records
    from takzero.pipeline.selfplay import SelfPlayWorker
    from takzero.pipeline.trainer import Trainer

    cfg = compose_preset(args.config, args.overrides, run_name="bench")
    torch.set_num_threads(cfg.selfplay.threads)
    machine = {
        "bench": "machine",
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
        "load_avg_1min": os.getloadavg()[0],
    }
    print(json.dumps(machine), flush=True)

    worker = SelfPlayWorker.from_run(cfg, 0)
    worker.play_step()  # compile and warm up (not timed)
    recorded_before = sum(len(s.states) for s in worker.slots)
    parts: list[Records] = []
    moves = games = positions = 0
    sims_rate: list[float] = []
    batch: list[float] = []
    net_share: list[float] = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        recs, stats, _ = worker.play_step()
        moves += int(stats["count/moves"])
        games += int(stats["count/games"])
        sims_rate.append(stats["selfplay/simulations_per_s"])
        batch.append(stats["selfplay/mean_batch_size"])
        net_share.append(stats["selfplay/network_share"])
        if recs is not None:
            parts.append(recs)
            positions += len(recs)
    dt = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "bench": "selfplay",
                "config": args.config,
                "size": cfg.board.size,
                "games_at_once": cfg.selfplay.games_per_worker,
                "simulations": worker.search_config.simulations,
                "model": f"{cfg.model.blocks}x{cfg.model.channels}",
                "seconds": round(dt, 2),
                "moves_searched": moves,
                "moves_per_s": round(moves / dt, 2),
                "games_finished": games,
                "positions_of_finished_games": positions,
                "positions_per_s": round(
                    (positions + sum(len(s.states) for s in worker.slots) - recorded_before) / dt, 2
                ),
                "simulations_per_s": round(float(np.mean(sims_rate)), 1),
                "mean_batch_size": round(float(np.mean(batch)), 1),
                "network_share": round(float(np.mean(net_share)), 3),
            }
        ),
        flush=True,
    )
    # Positions of games still running count too (value target 0 here: throughput only).
    for slot in worker.slots:
        if slot.states:
            parts.append(worker._records(slot, None))
    recs = Records.concat(parts)
    print(
        json.dumps(
            {
                "bench": "replay",
                "positions": len(recs),
                "bytes_per_position": round(recs.nbytes_per_position(), 1),
                "board_bytes": int(recs.board.shape[1]),
                "policy_top_k": int(recs.policy_index.shape[1]),
            }
        ),
        flush=True,
    )
    torch.set_num_threads(cfg.train.threads)
    trainer = Trainer(cfg.train, cfg.model_config(), LossWeights(), device=cfg.device)
    rng = np.random.default_rng(0)
    bs = cfg.train.batch_size
    trainer.train_step(recs.take(rng.integers(0, len(recs), bs)))  # warm-up
    t0 = time.perf_counter()
    for _ in range(args.train_steps):
        trainer.train_step(recs.take(rng.integers(0, len(recs), bs)))
    dt = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "bench": "trainer",
                "batch_size": bs,
                "steps": args.train_steps,
                "samples_per_s": round(args.train_steps * bs / dt, 1),
                "device": str(trainer.device),
                "threads": cfg.train.threads,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
