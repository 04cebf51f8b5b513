"""One training run in the driver process (``python -m takzero.train`` calls :func:`run_training`).

Builds the Ray actor graph of ``design.md``: a coordinator (weights of the promoted and latest
generations, stop flag, self-play statistics), the replay buffer, N self-play workers and one
evaluator; the trainer runs in the driver. Everything lands in ``checkpoints/<run_name>/``:

====================  ========================================================================
``config.yaml``       the resolved, validated config
``ckpt_*.pt``         checkpoints (weights, optimiser, step, generation, RNG, replay counters)
``best.pt``           the promoted model (``takzero.export`` and the play CLI read it)
``replay/``           replay shards (reloaded on resume)
``games/``            PTN of sample self-play games and of evaluation games
``tb/``               TensorBoard logs (``tensorboard --logdir checkpoints``)
``hydra/``            Hydra's own output
====================  ========================================================================

Resume: running again with the same ``run_name`` (and ``resume=true``, the default) continues from
the newest readable checkpoint: steps, generations, replay and TensorBoard steps go on.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from takzero.config import TrainConfig
from takzero.pipeline.actors import Coordinator, EvaluatorActor, remote_selfplay_actor
from takzero.pipeline.checkpoints import (
    atomic_torch_save,
    list_checkpoints,
    load_checked,
    load_latest,
    prune_checkpoints,
)
from takzero.pipeline.replay import ReplayBuffer
from takzero.pipeline.trainer import Trainer

log = logging.getLogger("takzero.train")


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def _init_ray(cfg: TrainConfig) -> None:
    import ray

    if ray.is_initialized():
        return
    runtime_env = {"env_vars": {"PYTHONWARNINGS": "ignore::DeprecationWarning"}}
    if cfg.ray.address:
        ray.init(address=cfg.ray.address, runtime_env=runtime_env, log_to_driver=True)
    else:
        # address="local": always a new local instance, never a cluster that `ray start` left
        # running on this machine (ray.init() without an address would join the latest one).
        ray.init(
            address="local",
            num_cpus=cfg.ray.num_cpus,
            num_gpus=cfg.ray.num_gpus,
            include_dashboard=False,
            runtime_env=runtime_env,
            log_to_driver=True,
        )


def _summarise(stats: list[dict[str, float]]) -> dict[str, float]:
    """Sum counters (keys ending in a count) and average rates over a list of worker reports."""
    out: dict[str, float] = {}
    if not stats:
        return out
    keys = set().union(*stats)
    for k in keys:
        vals = [s[k] for s in stats if k in s]
        if k.startswith("count/"):
            out[k] = float(sum(vals))
        else:
            out[k] = float(np.mean(vals))
    return out


class RunDirError(RuntimeError):
    """The run folder holds checkpoints that this run would not resume from (nothing started)."""


class Run:
    """One training run in the driver process (see the module docstring)."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.run_dir = Path(cfg.checkpoint_root) / cfg.run_name
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "games").mkdir(exist_ok=True)
        self.started = time.monotonic()
        self.stop_requested = False
        self.games = 0
        self.positions = 0
        self.counters: dict[str, float] = {}
        self.last_gating = "none yet"
        self.gating_decisions = 0
        self.resume_from: tuple[Path, dict[str, Any]] | None = None

    # -- set-up ------------------------------------------------------------------------------

    def _write_config(self) -> None:
        path = self.run_dir / "config.yaml"
        tmp = path.with_suffix(".yaml.tmp")
        tmp.write_text(OmegaConf.to_yaml(OmegaConf.structured(self.cfg)))
        os.replace(tmp, path)

    def _check_run_dir(self) -> None:
        """Refuse to start over in a run folder that has checkpoints the run will not use
        (``resume=false``, or none of them verifies): the new run's checkpoints would sort before
        the old ones and be pruned at once. Raises RunDirError, before Ray starts."""
        existing = list_checkpoints(self.run_dir)
        if not existing:
            return
        if not self.cfg.resume:
            raise RunDirError(
                f"{self.run_dir} already has checkpoints ({existing[-1].name}) and resume=false: "
                "choose a new run_name (or move the old checkpoints away)"
            )
        self.resume_from = load_latest(self.run_dir)
        if self.resume_from is None:
            raise RunDirError(
                f"none of the {len(existing)} checkpoints in {self.run_dir} could be verified "
                "(see the errors above); not starting over on top of them: restore their "
                ".sha256 files, move them away, or choose a new run_name"
            )
        saved = self.resume_from[1].get("model_config")
        if saved is not None:
            want = self.cfg.model_config().to_dict()
            diff = {k: (saved.get(k), v) for k, v in want.items() if saved.get(k, v) != v}
            if diff:
                keys = ", ".join(
                    f"model.{'size' if k == 'size' else k}: checkpoint {a!r}, config {b!r}"
                    for k, (a, b) in sorted(diff.items())
                ).replace("model.size", "board.size")
                raise RunDirError(
                    f"{self.resume_from[0]} was trained with another network than this config "
                    f"builds ({keys}); set those keys to the checkpoint's values to resume, or "
                    "choose a new run_name"
                )

    def _restore(self, trainer: Trainer) -> dict[str, Any] | None:
        """Load the checkpoint found by :meth:`_check_run_dir` into ``trainer`` (None: a new run)."""
        found = self.resume_from
        if found is None:
            return None
        path, state = found
        trainer.load_state_dict(state)
        log.info("resumed from %s (step %d, generation %d)", path, trainer.step, trainer.generation)
        return state

    # -- main loop ---------------------------------------------------------------------------

    def run(self) -> Path:
        import ray
        from torch.utils.tensorboard import SummaryWriter

        cfg = self.cfg
        self._check_run_dir()
        self._write_config()
        _init_ray(cfg)
        trainer = Trainer(
            cfg.model_config(),
            cfg.train,
            cfg.loss_weights(),
            device=cfg.device,
            seed=cfg.seed,
        )
        torch.set_num_threads(cfg.train.threads)
        state = self._restore(trainer)
        extra = (state or {}).get("run", {})
        self.games = int(extra.get("games", 0))
        self.positions = int(extra.get("positions", 0))
        self.counters = dict(extra.get("counters", {}))
        self.gating_decisions = int(extra.get("gating_decisions", 0))
        promoted_gen = int(extra.get("promoted_generation", 0))

        writer = SummaryWriter(str(self.run_dir / "tb"), purge_step=trainer.step if state else None)
        if state is None:
            writer.add_text("config", "```\n" + OmegaConf.to_yaml(OmegaConf.structured(cfg)) + "\n```", 0)
            _log_hparams(writer, cfg)

        coordinator = ray.remote(Coordinator).options(num_cpus=0).remote()
        replay = ray.remote(ReplayBuffer).options(num_cpus=0).remote(**cfg.replay_kwargs(self.run_dir))
        loaded = ray.get(replay.load.remote(state.get("replay") if state else None))
        if loaded:
            log.info("replay: reloaded %d positions from shards", loaded)

        # Weights: the promoted model (best.pt) drives self-play; the latest is the trainer's.
        promoted = self._load_best(trainer, promoted_gen)
        ray.get(coordinator.publish.remote("promoted", promoted[0], promoted[1]))
        ray.get(coordinator.publish.remote("latest", trainer.generation, _cpu_state(trainer)))

        gpus = torch.cuda.device_count() if cfg.device != "cpu" else 0
        share = cfg.ray.worker_gpu_share if gpus else 0.0
        actor_cls = remote_selfplay_actor(share)
        workers = [actor_cls.remote(cfg, i) for i in range(cfg.selfplay.workers)]
        worker_tasks = [w.run.remote(coordinator, replay) for w in workers]
        evaluator = ray.remote(num_cpus=0, max_restarts=1)(EvaluatorActor).remote(cfg)
        eval_task = None

        previous_handler = signal.getsignal(signal.SIGINT)

        def _on_sigint(signum: int, frame: Any) -> None:
            self.stop_requested = True
            log.warning("Ctrl-C: finishing the current step, writing a final checkpoint")

        signal.signal(signal.SIGINT, _on_sigint)
        signal.signal(signal.SIGTERM, _on_sigint)
        last_log = time.monotonic()
        steps_at_log = trainer.step
        samples_per_s = 0.0
        try:
            while not self._done(trainer):
                recs = ray.get(replay.sample.remote(cfg.train.batch_size))
                if recs is None:
                    self._drain(coordinator, writer, trainer.step)
                    time.sleep(0.2)
                else:
                    metrics = trainer.train_step(recs)
                    if trainer.step % 10 == 0:
                        for k, v in metrics.items():
                            writer.add_scalar(k, v, trainer.step)
                    if trainer.step % cfg.train.checkpoint_every == 0:
                        trainer.generation += 1
                        self._checkpoint(trainer, replay, promoted[0])
                        latest = (trainer.generation, _cpu_state(trainer))
                        coordinator.publish.remote("latest", *latest)
                        if cfg.evaluator.gating == "off":
                            promoted = latest
                            self._promote(promoted, coordinator)
                            self.gating_decisions += 1
                            self.last_gating = f"gen {latest[0]} promoted (gating off)"
                        if eval_task is None:
                            every = cfg.evaluator.baseline_every
                            baselines = every > 0 and trainer.generation % every == 0
                            eval_task = evaluator.evaluate.remote(latest, promoted, baselines)
                if eval_task is not None:
                    ready, _ = ray.wait([eval_task], timeout=0)
                    if ready:
                        result = ray.get(eval_task)
                        eval_task = None
                        promoted = self._gating(result, promoted, coordinator, writer, trainer)
                now = time.monotonic()
                if now - last_log >= cfg.log_every_s:
                    samples_per_s = (trainer.step - steps_at_log) * cfg.train.batch_size / (now - last_log)
                    steps_at_log = trainer.step
                    last_log = now
                    self._drain(coordinator, writer, trainer.step)
                    rstats = ray.get(replay.stats.remote())
                    for k, v in rstats.items():
                        writer.add_scalar(k, v, trainer.step)
                    writer.add_scalar("train/samples_per_s", samples_per_s, trainer.step)
                    self._progress(trainer, rstats, samples_per_s)
                    for t in worker_tasks:
                        ready, _ = ray.wait([t], timeout=0)
                        if ready:
                            ray.get(t)  # surfaces a worker that failed for good
            # At the normal end, let a pending evaluation finish so the run ends with a gating
            # decision; after Ctrl-C, stop at once (the checkpoint below keeps the work).
            if eval_task is not None and not self.stop_requested:
                result = ray.get(eval_task)
                eval_task = None
                promoted = self._gating(result, promoted, coordinator, writer, trainer)
        finally:
            signal.signal(signal.SIGINT, previous_handler)
            ray.get(coordinator.stop.remote())
            try:
                self._checkpoint(trainer, replay, promoted[0])
            except Exception:  # pragma: no cover - best effort at shutdown
                log.exception("final checkpoint failed")
            self._drain(coordinator, writer, trainer.step)
            writer.flush()
            writer.close()
            try:
                ray.get(worker_tasks, timeout=60)
            except Exception:  # noqa: BLE001 - workers are being torn down
                pass
            for w in workers:
                ray.kill(w)
            ray.kill(evaluator)
            ray.kill(replay)
            ray.kill(coordinator)
        log.info("run finished: %s", self.run_dir)
        return self.run_dir

    def _done(self, trainer: Trainer) -> bool:
        cfg = self.cfg
        if self.stop_requested:
            return True
        if trainer.step >= cfg.train.total_steps:
            return True
        if cfg.train.max_minutes > 0 and time.monotonic() - self.started > 60 * cfg.train.max_minutes:
            return True
        return cfg.max_games > 0 and self.games >= cfg.max_games

    # -- pieces of the loop ------------------------------------------------------------------

    def _load_best(self, trainer: Trainer, generation: int) -> tuple[int, dict[str, torch.Tensor]]:
        best = self.run_dir / "best.pt"
        if best.exists():
            try:
                d = load_checked(best, require_checksum=True)
                return int(d.get("generation", generation)), d["model_state"]
            except Exception as e:  # noqa: BLE001 - reported, then the trainer's weights are used
                log.error("best.pt unreadable (%s); using the trainer's weights", e)
        state = _cpu_state(trainer)
        self._save_best(trainer.generation, state)
        return trainer.generation, state

    def _save_best(self, generation: int, state: dict[str, torch.Tensor]) -> None:
        d = {
            "model_config": self.cfg.model_config().to_dict(),
            "model_state": state,
            "generation": generation,
            "run_name": self.cfg.run_name,
            "half_komi": self.cfg.half_komi(),
        }
        atomic_torch_save(d, self.run_dir / "best.pt")

    def _promote(self, promoted: tuple[int, dict[str, torch.Tensor]], coordinator: Any) -> None:
        self._save_best(*promoted)
        coordinator.publish.remote("promoted", *promoted)

    def _checkpoint(self, trainer: Trainer, replay: Any, promoted_gen: int) -> None:
        import ray

        state = trainer.state_dict()
        state["replay"] = ray.get(replay.state_dict.remote())
        state["run"] = {
            "games": self.games,
            "positions": self.positions,
            "counters": self.counters,
            "gating_decisions": self.gating_decisions,
            "promoted_generation": promoted_gen,
        }
        state["run_name"] = self.cfg.run_name
        atomic_torch_save(state, self.run_dir / f"ckpt_{trainer.step:09d}.pt")
        prune_checkpoints(self.run_dir, self.cfg.train.keep_checkpoints)

    def _gating(
        self,
        result: dict[str, Any],
        promoted: tuple[int, dict[str, torch.Tensor]],
        coordinator: Any,
        writer: Any,
        trainer: Trainer,
    ) -> tuple[int, dict[str, torch.Tensor]]:
        step = trainer.step
        for k, v in result.get("scalars", {}).items():
            writer.add_scalar(k, v, step)
        for name, text in result.get("ptn", {}).items():
            path = self.run_dir / "games" / name
            path.write_text(text)
        if result.get("decision") is not None and self.cfg.evaluator.gating != "off":
            self.gating_decisions += 1
            cand_gen = result["candidate_generation"]
            if result["decision"] == "promote":
                promoted = (cand_gen, result["candidate_weights"])
                self._promote(promoted, coordinator)
            self.last_gating = f"gen {cand_gen} {result['decision']} ({result.get('summary', '')})"
            writer.add_text("gating", self.last_gating, step)
            writer.add_scalar("gating/promoted_generation", promoted[0], step)
            log.info("gating: %s", self.last_gating)
        return promoted

    def _drain(self, coordinator: Any, writer: Any, step: int) -> None:
        import ray

        stats, games = ray.get(coordinator.drain.remote())
        if stats:
            summary = _summarise(stats)
            self.games += int(summary.get("count/games", 0))
            self.positions += int(summary.get("count/positions", 0))
            for k, v in summary.items():
                if k.startswith("count/"):
                    self.counters[k] = self.counters.get(k, 0.0) + v
                else:
                    writer.add_scalar(k, v, step)
            total = max(1.0, self.counters.get("count/games", 0.0))
            for k in ("road_white", "road_black", "flat_white", "flat_black", "draw", "resigned"):
                writer.add_scalar(f"selfplay/share_{k}", self.counters.get(f"count/{k}", 0.0) / total, step)
            checks = self.counters.get("count/resign_checks", 0.0)
            if checks:
                false = self.counters.get("count/false_resign", 0.0)
                writer.add_scalar("selfplay/false_resign_rate", false / checks, step)
            wins_w = self.counters.get("count/road_white", 0) + self.counters.get("count/flat_white", 0)
            writer.add_scalar("selfplay/white_win_rate", wins_w / total, step)
            writer.add_scalar("selfplay/games_total", self.games, step)
        if games:
            path = self.run_dir / "games" / "selfplay.ptn"
            with open(path, "a") as f:
                for g in games:
                    f.write(g.rstrip() + "\n\n")
            writer.add_text("selfplay/sample_game", "```\n" + games[-1] + "\n```", step)

    def _progress(self, trainer: Trainer, rstats: dict[str, float], samples_per_s: float) -> None:
        elapsed = time.monotonic() - self.started
        pos_rate = self.positions / max(elapsed, 1e-9)
        line = (
            f"[{elapsed / 60:6.1f} min] step {trainer.step}/{self.cfg.train.total_steps} "
            f"gen {trainer.generation} | games {self.games} positions {self.positions} "
            f"({pos_rate:.1f}/s) | train {samples_per_s:.0f} samples/s | "
            f"replay {int(rstats.get('replay/positions', 0))} | gating: {self.last_gating}"
        )
        print(line, flush=True)


def _cpu_state(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu").clone() for k, v in trainer.model.state_dict().items()}


def _log_hparams(writer: Any, cfg: TrainConfig) -> None:
    from torch.utils.tensorboard.summary import hparams

    flat: dict[str, Any] = {}

    def walk(prefix: str, obj: Any) -> None:
        if dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                walk(f"{prefix}{f.name}.", getattr(obj, f.name))
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(f"{prefix}{k}.", v)
        else:
            v = obj if isinstance(obj, int | float | str | bool) else json.dumps(obj)
            flat[prefix[:-1]] = v

    walk("", cfg)
    exp, ssi, sei = hparams(flat, {"gating/promoted_generation": math.nan})
    writer.file_writer.add_summary(exp)
    writer.file_writer.add_summary(ssi)
    writer.file_writer.add_summary(sei)


def run_training(cfg: TrainConfig) -> Path:
    """Run (or resume) training with a validated config; returns the run folder."""
    return Run(cfg).run()
