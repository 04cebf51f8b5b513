"""Pipeline throughput for a named config: self-play positions/s of one worker, trainer samples/s,
bytes per stored position. Prints JSON lines.

    python scripts/bench_pipeline.py                      # 6x6 defaults (+config=6x6)
    python scripts/bench_pipeline.py --config 5x5 --seconds 60 mcts.simulations=64

Self-play runs in this process (one worker, ``selfplay.games_per_worker`` games at once, torch on
one thread, as a Ray worker would); the trainer then trains on the positions it produced.

More rows (issue 55; each alone or with the others, scripts/gpu_suite.sh runs them on a GPU):

    python scripts/bench_pipeline.py --make-batch-only --batches 256 1024   # augmentation, before/after
    python scripts/bench_pipeline.py --workers 8 device=cuda                # 8 worker processes at once
    python scripts/bench_pipeline.py --train-batches 256 512 1024 2048 device=cuda

* ``make_batch``: ``trainer.make_batch`` samples/s on random positions of the config's board
  (the main tensors, no auxiliary targets), against the per-record path it replaced (one
  ``transform_state`` per record, the dense policy moved symmetry by symmetry), with the check
  that both give the same tensors (timed in alternation, three rounds, medians):
  ``{"bench", "size", "batch", "samples_per_s",
  "per_record_samples_per_s", "speedup", "identical", "loadavg_1min"}``.
* ``--workers N`` (N > 1): N self-play workers in N processes (spawned), each as above for
  ``--seconds`` (counted from its first move), local inference (each its own network on the
  config's device); one ``selfplay_workers`` line: the total positions/s and each worker's.
* ``--alternate torch onnx int8``: one worker per self-play backend in this process, taking
  turns (``--rounds`` each) for ``--seconds`` in all; one ``selfplay_alternate`` line with
  positions/s, moves/s and network share per backend and the ratios to the first (the side by
  side measure of issue 54: ``python scripts/bench_pipeline.py --alternate torch onnx int8
  --seconds 180``).
* ``--train-batches``: one ``trainer`` line per batch size (bf16 autocast on CUDA when
  ``train.amp``), on the self-play positions.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import time
from typing import Any

import numpy as np
import torch


def synthetic_records(size: int, n: int, seed: int = 0) -> Any:
    """``n`` records of random unfinished positions (a policy over up to 8 legal moves each)."""
    from takzero.nn.actions import legal_actions, num_actions
    from takzero.nn.features import random_states
    from takzero.pipeline.replay import Records, pack_states, sparse_policy

    rng = np.random.default_rng(seed)
    states = random_states(size, n, seed=seed, min_plies=2 * size, max_plies=10 * size)
    a = num_actions(size)
    moves, acts = np.empty(a, np.int64), np.empty(a, np.int64)
    dense = np.zeros((n, a), np.float32)
    for r in range(n):
        k = legal_actions(states[r], moves, acts)
        pick = rng.choice(acts[:k], size=min(k, 8), replace=False)
        dense[r, pick] = rng.random(len(pick)) + 0.1
    idx, prob = sparse_policy(dense, 64)
    return Records(board=pack_states(states, size), policy_index=idx, policy_prob=prob,
                   value=np.zeros(n, np.int8), flat_diff=np.zeros(n, np.int8), game_id=np.arange(n),
                   generation=np.zeros(n, np.int32), ply=np.zeros(n, np.int16))


def make_batch_per_record(records: Any, size: int, layers: int, version: int, rng: np.random.Generator) -> Any:
    """The augmentation of ``trainer.make_batch`` before issue 55 (main tensors only): one
    ``transform_state`` call per record, the dense policy moved symmetry by symmetry."""
    from takzero.game.symmetry import NUM_SYMMETRIES, transform_state
    from takzero.nn.actions import legal_mask, num_actions
    from takzero.nn.features import encode, num_channels
    from takzero.pipeline.replay import dense_policy, unpack_states
    from takzero.pipeline.targets import transform_action_rows

    states = unpack_states(records.board, size)
    policy = dense_policy(records.policy_index, records.policy_prob, num_actions(size))
    ts = rng.integers(0, NUM_SYMMETRIES, size=len(records))
    for r in np.nonzero(ts)[0]:
        states[r] = transform_state(states[r], int(ts[r]))
    transform_action_rows(policy, size, ts)
    planes = np.zeros((len(records), num_channels(layers, version), size, size), np.float32)
    encode(states, planes, layers, version)
    mask = np.zeros((len(records), num_actions(size)), np.bool_)
    legal_mask(states, mask)
    return planes, mask, policy


def bench_make_batch(cfg: Any, batches: list[int], seconds: float) -> None:
    """``make_batch`` lines (see the module docstring)."""
    from takzero.pipeline.trainer import make_batch

    mc = cfg.model_config()
    size = cfg.board.size
    recs = synthetic_records(size, max(batches), seed=1)

    def new(part: Any) -> Any:
        return make_batch(part, size, mc.layers, np.random.default_rng(0), feature_version=mc.feature_version,
                          targets=())

    def old(part: Any) -> Any:
        return make_batch_per_record(part, size, mc.layers, mc.feature_version, np.random.default_rng(0))

    for b in batches:
        part = recs.take(np.arange(b))
        got, ref = new(part), old(part)
        mine = (got.planes.numpy(), got.mask.numpy(), got.policy.numpy())
        same = all(np.array_equal(x, y) for x, y in zip(mine, ref, strict=True))
        # the two timed in alternation, three rounds each, medians compared (a loaded machine)
        per_round: dict[str, list[float]] = {"new": [], "old": []}
        for _ in range(3):
            for name, fn in (("new", new), ("old", old)):
                calls, t0 = 0, time.perf_counter()
                while calls < 2 or time.perf_counter() - t0 < seconds / 3:
                    fn(part)
                    calls += 1
                per_round[name].append(calls * b / (time.perf_counter() - t0))
        rates = {name: float(np.median(r)) for name, r in per_round.items()}
        print(json.dumps({"bench": "make_batch", "size": size, "batch": b, "samples_per_s": round(rates["new"], 1),
                          "per_record_samples_per_s": round(rates["old"], 1),
                          "speedup": round(rates["new"] / rates["old"], 2), "identical": same,
                          "loadavg_1min": round(os.getloadavg()[0], 2)}), flush=True)


def _worker_positions(config: str, overrides: list[str], worker_id: int, seconds: float) -> dict[str, float]:
    """One self-play worker in its own process: positions recorded per second over ``seconds``
    after its first move (compile and start-up excluded)."""
    from takzero.config import compose_preset
    from takzero.pipeline.selfplay import SelfPlayWorker

    cfg = compose_preset(config, overrides, run_name="bench")
    torch.set_num_threads(cfg.selfplay.threads)
    worker = SelfPlayWorker.from_run(cfg, worker_id)
    worker.play_step()
    before = sum(len(s.states) for s in worker.slots)
    positions, moves, t0 = 0, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        recs, stats, _ = worker.play_step()
        moves += int(stats["count/moves"])
        positions += 0 if recs is None else len(recs)
    dt = time.perf_counter() - t0
    positions += sum(len(s.states) for s in worker.slots) - before
    return {"positions_per_s": positions / dt, "moves_per_s": moves / dt, "device": str(worker.evaluator.device)}


def bench_workers(args: argparse.Namespace, cfg: Any) -> None:
    """The ``selfplay_workers`` line: ``args.workers`` workers in spawned processes at once."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.workers) as pool:
        jobs = [pool.apply_async(_worker_positions, (args.config, args.overrides, w, args.seconds))
                for w in range(args.workers)]
        out = [j.get() for j in jobs]
    print(json.dumps({"bench": "selfplay_workers", "config": args.config, "workers": args.workers,
                      "inference": "local", "pipeline": cfg.selfplay.pipeline, "device": out[0]["device"],
                      "games_per_worker": cfg.selfplay.games_per_worker, "simulations": cfg.mcts.simulations,
                      "model": f"{cfg.model.blocks}x{cfg.model.channels}", "seconds": args.seconds,
                      "positions_per_s": round(sum(o["positions_per_s"] for o in out), 1),
                      "per_worker_positions_per_s": [round(o["positions_per_s"], 1) for o in out],
                      "moves_per_s": round(sum(o["moves_per_s"] for o in out), 1),
                      "loadavg_1min": round(os.getloadavg()[0], 2)}), flush=True)


def bench_alternate(args: argparse.Namespace) -> None:
    """The ``selfplay_alternate`` line: one worker per self-play backend (``selfplay.backend=B``
    for each B of ``--alternate``), in this process, taking turns for ``--seconds`` in all
    (``--rounds`` turns each), so that other load on the machine hits them alike; per backend
    moves/s and positions/s (recorded positions, of finished games and of games still in play)
    and each one's ratio to the first backend's."""
    from takzero.config import compose_preset
    from takzero.pipeline.selfplay import SelfPlayWorker

    workers = {}
    for backend in args.alternate:
        cfg = compose_preset(args.config, [*args.overrides, f"selfplay.backend={backend}"], run_name="bench")
        torch.set_num_threads(cfg.selfplay.threads)
        worker = SelfPlayWorker.from_run(cfg, 0)
        worker.play_step()  # compile, export or quantize and warm up (not timed)
        workers[backend] = worker
    turn = args.seconds / (args.rounds * len(workers))
    done = {b: {"moves": 0, "positions": 0, "seconds": 0.0, "share": []} for b in workers}
    for _ in range(args.rounds):
        for backend, worker in workers.items():
            before = sum(len(s.states) for s in worker.slots)
            t0 = time.perf_counter()
            positions = 0
            while time.perf_counter() - t0 < turn:
                recs, stats, _ = worker.play_step()
                done[backend]["moves"] += int(stats["count/moves"])
                done[backend]["share"].append(stats["selfplay/network_share"])
                positions += 0 if recs is None else len(recs)
            done[backend]["seconds"] += time.perf_counter() - t0
            done[backend]["positions"] += positions + sum(len(s.states) for s in worker.slots) - before
    first = args.alternate[0]
    rate = {b: d["positions"] / d["seconds"] for b, d in done.items()}
    print(json.dumps({
        "bench": "selfplay_alternate", "config": args.config, "overrides": args.overrides,
        "rounds": args.rounds, "seconds_each": {b: round(d["seconds"], 1) for b, d in done.items()},
        "moves_per_s": {b: round(d["moves"] / d["seconds"], 1) for b, d in done.items()},
        "positions_per_s": {b: round(r, 1) for b, r in rate.items()},
        "network_share": {b: round(float(np.mean(d["share"])), 3) for b, d in done.items()},
        f"ratio_to_{first}": {b: round(r / rate[first], 2) for b, r in rate.items()},
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="6x6", help="named config under configs/config/")
    ap.add_argument("--seconds", type=float, default=60.0, help="self-play time to measure")
    ap.add_argument("--train-steps", type=int, default=20)
    ap.add_argument("--workers", type=int, default=1, help="> 1: that many worker processes at once (no trainer)")
    ap.add_argument("--train-batches", type=int, nargs="+", default=None,
                    help="trainer batch sizes to time (default: train.batch_size)")
    ap.add_argument("--make-batch-only", action="store_true", help="only the make_batch lines")
    ap.add_argument("--batches", type=int, nargs="+", default=[256, 1024], help="make_batch batch sizes")
    ap.add_argument("--alternate", nargs="+", choices=("torch", "onnx", "int8"), default=None,
                    help="one self-play worker per backend, taking turns (see bench_alternate)")
    ap.add_argument("--rounds", type=int, default=6, help="turns of each backend with --alternate")
    ap.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = ap.parse_args()
    for name in ("seconds", "train_steps", "workers", "batches", "train_batches", "rounds"):
        value = getattr(args, name)
        if value is not None and min(np.atleast_1d(value)) <= 0:
            ap.error(f"--{name.replace('_', '-')} must be > 0")

    from takzero.config import compose_preset
    from takzero.nn.model import LossWeights
    from takzero.pipeline.replay import Records
    from takzero.pipeline.selfplay import SelfPlayWorker
    from takzero.pipeline.targets import TargetSettings
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
    if args.make_batch_only:
        bench_make_batch(cfg, args.batches, min(args.seconds, 5.0))
        return
    if args.workers > 1:
        bench_workers(args, cfg)
        return
    if args.alternate:
        bench_alternate(args)
        return

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
    trainer = Trainer(cfg.train, cfg.model_config(), LossWeights(), device=cfg.device,
                      settings=TargetSettings.from_replay(cfg.replay))  # the run's value target
    rng = np.random.default_rng(0)
    for bs in args.train_batches or [cfg.train.batch_size]:
        trainer.train_step(recs.take(rng.integers(0, len(recs), bs)))  # warm-up
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.train_steps):
            trainer.train_step(recs.take(rng.integers(0, len(recs), bs)))
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        print(
            json.dumps(
                {
                    "bench": "trainer",
                    "batch_size": bs,
                    "steps": args.train_steps,
                    "samples_per_s": round(args.train_steps * bs / dt, 1),
                    "device": str(trainer.device),
                    "bf16_autocast": trainer.autocast_bf16,
                    "threads": cfg.train.threads,
                }
            ),
            flush=True,
        )

if __name__ == "__main__":
    main()
