"""GPU self-check: every CUDA path of takzero in one go, in a few minutes. Prints JSON lines, one
per check, with ``"pass": true/false`` (``null``: not applicable here, with the reason) and its
figures (positions/s, samples/s); the last line sums up. Exit status 1 if a check failed.

    python scripts/check_gpu.py                  # on a GPU machine (about 2-4 minutes)
    python scripts/check_gpu.py --device cpu --quick   # the same checks on CPU, small (CI)

Checks: ``device_auto`` (device=auto puts the trainer and a self-play worker on CUDA, both in
bf16: ``selfplay.bf16``, ``train.amp``),
``pinned_buffers`` (the evaluator's input buffers are pinned on CUDA), ``inference_fp32`` and
``inference_bf16`` (bf16 autocast: agrees with fp32, positions/s), ``torchscript`` (an exported
TorchScript file run on the device), ``onnx`` (an exported ONNX file run by onnxruntime with the
CUDA provider when it has one), ``train_steps`` (a few optimiser steps with bf16 autocast,
samples/s; bf16 on CUDA only), ``selfplay_shared_gpu`` (two Ray self-play workers sharing one GPU,
``ray.worker_gpu_share=0.5``, positions/s).

Without CUDA (and without ``--device cpu``) it prints one line saying so and exits 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def load_cfg(name: str, overrides: list[str]) -> Any:
    from takzero.config import compose_preset

    return compose_preset(name, overrides, run_name="check_gpu")


def sample_states(cfg: Any, n: int, seed: int = 0) -> np.ndarray:
    """``n`` positions (STATE_LEN int64) from random games on the config's board."""
    from takzero.game.position import Game, Position

    rng = np.random.default_rng(seed)
    start = Position.start(cfg.board.size, komi=cfg.board.komi)
    out = []
    while len(out) < n:
        game = Game(start, ply_limit=60)
        while not game.result.over and len(out) < n:
            out.append(game.position.state.copy())
            codes = game.position.legal_move_codes()
            game.play(int(codes[rng.integers(len(codes))]))
    return np.stack(out)


def rate(fn: Callable[[], Any], items: int, seconds: float) -> float:
    """Items per second of ``fn`` (each call handles ``items``), timed for about ``seconds``."""
    fn()  # warm-up (kernels, autotuning, buffers)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    calls, t0 = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if dt >= seconds:
            return calls * items / dt


class Checks:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.device = args.device
        self.cuda = self.device.startswith("cuda")
        self.results: list[bool | None] = []
        overrides = ["model.channels=16", "model.blocks=1"] if args.quick else []
        self.cfg = load_cfg(args.config, [f"device={self.device}", *overrides, *args.overrides])
        self.batch = 64 if args.quick else args.batch
        self.states = sample_states(self.cfg, self.batch)
        self.seconds = 0.5 if args.quick else args.seconds

    def run(self, name: str, fn: Callable[[], dict[str, Any]]) -> None:
        t0 = time.perf_counter()
        try:
            out = fn()
        except Exception as e:  # noqa: BLE001 - a failed check is reported, the others still run
            out = {"pass": False, "error": f"{type(e).__name__}: {e}",
                   "trace": traceback.format_exc(limit=3)}
        self.results.append(out.get("pass"))
        emit(check=name, **out, seconds=round(time.perf_counter() - t0, 2))

    def model(self) -> Any:
        from takzero.nn.model import TakNet

        torch.manual_seed(0)
        return TakNet(self.cfg.model_config())

    # -- the checks --------------------------------------------------------------------------

    def device_auto(self) -> dict[str, Any]:
        from takzero.nn.inference import resolve_device
        from takzero.pipeline.selfplay import SelfPlayWorker
        from takzero.pipeline.targets import TargetSettings
        from takzero.pipeline.trainer import Trainer

        want = "cuda" if torch.cuda.is_available() else "cpu"
        auto = resolve_device("auto").type
        trainer = Trainer(self.cfg.train, self.cfg.model_config(), self.cfg.loss_weights(), device="auto",
                          settings=TargetSettings.from_replay(self.cfg.replay))
        worker = SelfPlayWorker.from_run(load_cfg(self.args.config, ["device=auto", "selfplay.games_per_worker=2",
                                                                     "model.channels=16", "model.blocks=1"]))
        got = {"resolve": auto, "trainer": trainer.device.type, "selfplay": worker.evaluator.device.type}
        # bf16 where the device is CUDA (selfplay.bf16, train.amp: both on by default), fp32 on CPU
        bf16 = {"selfplay_bf16": worker.evaluator.bf16, "trainer_bf16": trainer.autocast_bf16}
        expect_bf16 = {"selfplay_bf16": want == "cuda", "trainer_bf16": want == "cuda" and self.cfg.train.amp}
        return {"pass": set(got.values()) == {want} and bf16 == expect_bf16,
                "expected": want, **got, **bf16}

    def pinned_buffers(self) -> dict[str, Any]:
        from takzero.nn.inference import Evaluator

        ev = Evaluator(self.model(), device=self.device)
        planes, mask = ev.buffers(self.batch)
        pinned = [torch.from_numpy(planes).is_pinned(), torch.from_numpy(mask).is_pinned()]
        ev.evaluate(self.states)  # evaluation through the pinned buffers
        return {"pass": all(pinned) == self.cuda and len(set(pinned)) == 1, "pinned": pinned[0]}

    def inference(self, bf16: bool) -> dict[str, Any]:
        from takzero.nn.inference import Evaluator

        model = self.model()
        ref = Evaluator(model, device="cpu").evaluate(self.states)
        ev = Evaluator(self.model(), device=self.device, bf16=bf16)
        priors, values, _ = ev.evaluate(self.states)
        tol = (0.05 if bf16 else 1e-2) if self.cuda else 1e-3  # TF32 convolutions on CUDA
        err_p = float(np.abs(priors - ref[0]).max())
        err_v = float(np.abs(values - ref[1]).max())
        pos_s = rate(lambda: ev.evaluate(self.states), len(self.states), self.seconds)
        return {"pass": err_p < tol and err_v < tol, "bf16": ev.bf16, "batch": len(self.states),
                "max_prior_error": err_p, "max_value_error": err_v, "positions_per_s": round(pos_s)}

    def torchscript(self) -> dict[str, Any]:
        from takzero.nn.inference import Evaluator
        from takzero.nn.model_export import export_torchscript

        model = self.model()
        ref = Evaluator(model, device="cpu").evaluate(self.states)
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "model.pt"
            export_torchscript(self.model(), path)
            ev = Evaluator.from_torchscript(path, device=self.device)
            priors, values, _ = ev.evaluate(self.states)
            pos_s = rate(lambda: ev.evaluate(self.states), len(self.states), self.seconds)
        err = max(float(np.abs(priors - ref[0]).max()), float(np.abs(values - ref[1]).max()))
        tol = 1e-2 if self.cuda else 1e-3
        return {"pass": err < tol and ev.device.type == self.device.split(":")[0],
                "device": str(ev.device), "max_error": err, "positions_per_s": round(pos_s)}

    def onnx(self) -> dict[str, Any]:
        try:
            import onnxruntime as ort
        except ImportError:
            return {"pass": None, "reason": "onnxruntime not installed (pip install takzero[onnx])"}
        from takzero.nn.inference import Evaluator
        from takzero.nn.model_export import export_onnx

        available = ort.get_available_providers()
        provider = "CUDAExecutionProvider" if self.cuda else "CPUExecutionProvider"
        model = self.model()
        ref = Evaluator(model, device="cpu").evaluate(self.states)
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "model.onnx"
            export_onnx(self.model(), path)
            if provider not in available:
                ev = Evaluator.from_onnx(path)
                priors, values, _ = ev.evaluate(self.states)
                err = max(float(np.abs(priors - ref[0]).max()), float(np.abs(values - ref[1]).max()))
                return {"pass": None, "reason": f"onnxruntime has no {provider} (install "
                        "onnxruntime-gpu for ONNX on CUDA); checked on CPU", "max_error_cpu": err,
                        "providers": available}
            ev = Evaluator.from_onnx(path, providers=[provider])
            used = ev._session.get_providers()[0]
            priors, values, _ = ev.evaluate(self.states)
            pos_s = rate(lambda: ev.evaluate(self.states), len(self.states), self.seconds)
        err = max(float(np.abs(priors - ref[0]).max()), float(np.abs(values - ref[1]).max()))
        return {"pass": err < 1e-2 and used == provider, "provider": used, "max_error": err,
                "positions_per_s": round(pos_s)}

    def train_steps(self) -> dict[str, Any]:
        from takzero.pipeline.selfplay import SelfPlayWorker
        from takzero.pipeline.targets import TargetSettings
        from takzero.pipeline.trainer import Trainer

        cfg = self.cfg
        worker = SelfPlayWorker.from_run(load_cfg(self.args.config, ["device=cpu", "selfplay.games_per_worker=16",
                                                                     "mcts.simulations=4", *self._small()]))
        parts = []
        while sum(len(p) for p in parts) < cfg.train.batch_size:
            recs, _, _ = worker.play_step()
            if recs is not None:
                parts.append(recs)
        from takzero.pipeline.replay import Records

        recs = Records.concat(parts)
        rng = np.random.default_rng(0)
        batch = recs.take(rng.integers(0, len(recs), cfg.train.batch_size))
        trainer = Trainer(cfg.train, cfg.model_config(), cfg.loss_weights(), device=self.device,
                          settings=TargetSettings.from_replay(cfg.replay))
        steps = 3 if self.args.quick else 20
        metrics = trainer.train_step(batch)  # warm-up
        t0 = time.perf_counter()
        for _ in range(steps):
            metrics = trainer.train_step(batch)
        if self.cuda:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        finite = all(np.isfinite(v) for v in metrics.values())
        amp = trainer.autocast_bf16
        return {"pass": finite and trainer.step == steps + 1 and amp == (self.cuda and cfg.train.amp),
                "device": str(trainer.device),
                "amp_bf16": amp,
                "batch": cfg.train.batch_size, "samples_per_s": round(steps * cfg.train.batch_size / dt),
                "loss": float(metrics.get("loss/total", float("nan")))}

    def _small(self) -> list[str]:
        return ["model.channels=16", "model.blocks=1"] if self.args.quick else []

    def selfplay_shared_gpu(self) -> dict[str, Any]:
        import ray

        from takzero.pipeline.actors import Coordinator, PublishedWeights, ReplayActor, SelfPlayPool
        from takzero.pipeline.placement import selfplay_options

        share = 0.5 if self.cuda else 0.0
        cfg = load_cfg(self.args.config, [f"device={self.device}", "selfplay.workers=2",
                                          f"ray.worker_gpu_share={share}", *self._small(), *self.args.overrides])
        ray.init(address="local", num_cpus=2, num_gpus=1 if self.cuda else 0, include_dashboard=False,
                 log_to_driver=False)
        try:
            coordinator = ray.remote(Coordinator).remote()
            never_train = dataclasses.replace(cfg.replay, max_ahead=10**9, min_positions=10**9)
            replay = ray.remote(ReplayActor).remote(never_train, cfg.board.size)
            weights = PublishedWeights()
            from takzero.nn.model import TakNet

            state = TakNet(cfg.model_config()).state_dict()
            weights.publish(coordinator, "promoted", 0, state)
            weights.publish(coordinator, "latest", 0, state)  # a worker plays once its kind is published
            gpu = ray.get(ray.remote(num_gpus=share)(_gpu_view).remote())
            pool = SelfPlayPool(cfg, selfplay_options({}, share), coordinator, replay)
            burst = 10.0 if self.args.quick else self.args.selfplay_seconds
            # Positions counted from the first one handed in (start-up and compile excluded).
            end = time.monotonic() + 600
            while not ray.get(replay.positions_by_source.remote()) and time.monotonic() < end:
                time.sleep(0.5)
            p0, t0 = ray.get(replay.positions_by_source.remote()), time.perf_counter()
            time.sleep(burst)
            p1, dt = ray.get(replay.positions_by_source.remote()), time.perf_counter() - t0
            streams = ray.get(coordinator.streams.remote())  # stream -> worker id
            ray.get(coordinator.stop.remote())
            pool.finish(timeout_s=120)
            per_worker = {
                str(w): round(sum(p1.get(st, 0) - p0.get(st, 0) for st, sw in streams.items() if sw == w) / dt, 1)
                for w in (0, 1)
            }
        finally:
            ray.shutdown()
        ok = all(v > 0 for v in per_worker.values()) and gpu["cuda"] == self.cuda
        return {"pass": ok, "worker_gpu_share": share, "gpu_seen_by_worker": gpu, "positions_per_s": per_worker,
                "positions_per_s_total": round(sum(per_worker.values()), 1), "burst_s": round(dt, 1)}


def _gpu_view() -> dict[str, Any]:
    """What a Ray task with the self-play GPU share sees."""
    import ray

    return {"cuda": torch.cuda.is_available(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (the same checks on CPU)")
    ap.add_argument("--config", default="6x6", help="named config under configs/config/ (default 6x6)")
    ap.add_argument("--quick", action="store_true", help="tiny model and bursts (CI on CPU)")
    ap.add_argument("--batch", type=int, default=512, help="inference batch (default 512)")
    ap.add_argument("--seconds", type=float, default=3.0, help="timing per inference check")
    ap.add_argument("--selfplay-seconds", type=float, default=30.0, help="self-play burst length")
    ap.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = ap.parse_args(argv)
    env = {"check": "environment", "platform": platform.platform(), "python": platform.python_version(),
           "torch": torch.__version__, "cuda_available": torch.cuda.is_available(),
           "torch_cuda": torch.version.cuda, "device": args.device}
    if torch.cuda.is_available():
        env["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    emit(**env)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        emit(check="summary", cuda=False, passed=0, failed=0,
             note="no CUDA device on this machine: nothing to check (run with --device cpu for the CPU path)")
        return 0
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    checks = Checks(args)
    checks.run("device_auto", checks.device_auto)
    checks.run("pinned_buffers", checks.pinned_buffers)
    checks.run("inference_fp32", lambda: checks.inference(bf16=False))
    checks.run("inference_bf16", lambda: checks.inference(bf16=True))
    checks.run("torchscript", checks.torchscript)
    checks.run("onnx", checks.onnx)
    checks.run("train_steps", checks.train_steps)
    checks.run("selfplay_shared_gpu", checks.selfplay_shared_gpu)
    failed = sum(r is False for r in checks.results)
    emit(check="summary", device=args.device, passed=sum(r is True for r in checks.results),
         failed=failed, not_applicable=sum(r is None for r in checks.results))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
