"""A training run's checkpoints and model files: the run folder's config, the checkpoint to
resume and the trainer restored from it (or from ``train.init_from``), ``ckpt_<step>.pt``
written and pruned, ``best.pt`` (only ever a gated model: loaded, rebuilt from a checkpoint's
promoted weights, rewritten at each promotion), and the weight snapshots of
``train.snapshot_minutes``. The file-level rules (atomic writes, sidecars, verified loads,
pruning) are ``checkpoints.py``'s; what resume needs without Ray is ``resume.py``'s."""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from takzero.io.files import atomic_write_text
from takzero.nn.quantize import CALIBRATION_KEY, CALIBRATION_POSITIONS
from takzero.pipeline.checkpoints import (
    CheckpointError,
    atomic_torch_save,
    load_checked,
    prune_checkpoints,
    set_aside,
)
from takzero.pipeline.reanalyse import reanalyse_counts
from takzero.pipeline.resume import CHECKPOINTED, find_resume_checkpoint, recover_promoted
from takzero.pipeline.run_state import Promoted, RunState, cpu_state
from takzero.pipeline.targets import TargetSettings
from takzero.pipeline.trainer import NonFiniteError, Trainer, non_finite

log = logging.getLogger("takzero.train")


class RunCheckpoints(RunState):
    """The run's checkpoints, ``best.pt`` and weight snapshots."""

    def _write_config(self) -> None:
        path = self.run_dir / "config.yaml"
        tmp = path.with_suffix(".yaml.tmp")
        tmp.write_text(OmegaConf.to_yaml(OmegaConf.structured(self.cfg)))
        os.replace(tmp, path)

    def _check_run_dir(self) -> None:
        """Find the checkpoint to resume (``takzero.pipeline.resume.find_resume_checkpoint``);
        raises RunDirError before Ray starts."""
        self.resume_from = find_resume_checkpoint(self.cfg, self.run_dir)

    def _restore(self, trainer: Trainer) -> dict[str, Any] | None:
        """Load the checkpoint found by :meth:`_check_run_dir` into ``trainer`` (None: a new run)."""
        found = self.resume_from
        if found is None:
            return None
        trainer.load_state_dict(found.state)  # (the one `resumed from` line is the reporter's)
        return found.state

    def _make_trainer(self, state: dict[str, Any] | None) -> Trainer:
        """The trainer, restored from the checkpoint ``state`` (None: a new run, with
        ``train.init_from``'s weights when given); also ``self.trainer``."""
        cfg = self.cfg
        trainer = Trainer(cfg.train, cfg.model_config(), cfg.loss_weights(), device=cfg.device, seed=cfg.seed,
                          settings=TargetSettings.from_replay(cfg.replay))
        torch.set_num_threads(cfg.train.threads)  # (as at the start: the trainer's own count)
        self._restore(trainer)
        if self.init is not None:  # generation 0 = these weights; optimiser, steps and replay fresh
            trainer.model.load_state_dict(self.init.model_state)
        self.trainer = trainer
        return trainer

    def _load_best(self, trainer: Trainer, generation: int, state: dict[str, Any] | None) -> Promoted:
        """The promoted model: ``best.pt`` when it verifies (it may be newer than the checkpoint:
        a promotion after it); else, for a resumed run, the gated copy of ``generation`` that
        :func:`takzero.pipeline.resume.recover_promoted` finds; for a new run, the initial
        weights (generation 0; with ``train.init_from`` always those, replacing any best.pt).
        Rewrites ``best.pt`` when it was missing or damaged.

        Raises:
            RunDirError: a resumed run with no gated copy left (never promotes ungated weights).
        """
        best = self.run_dir / "best.pt"
        # (a new run from train.init_from: a best.pt left by an earlier start that wrote no
        # checkpoint holds that start's generation 0, not these weights: replaced below)
        if best.exists() and not (state is None and self.c.init_from):
            try:
                d = load_checked(best, require_checksum=True)
                return int(d.get("generation", generation)), d["model_state"]
            except CheckpointError as e:
                try:
                    kept = f"the rejected file is now {set_aside(best).name}"
                except OSError as moved:
                    kept = f"it could not be set aside ({moved.strerror or moved})"
                line = f"best.pt rejected: {e}; restoring it from the checkpoints ({kept})"
                if self.reporter is not None:
                    self.reporter.line(line)
                log.error("%s", line)
        if state is None:
            found: Promoted = (trainer.generation, cpu_state(trainer))
        else:
            found = recover_promoted(self.run_dir, generation, state)
        self._save_best(*found)
        return found

    def _model_file(self, generation: int, state: dict[str, torch.Tensor]) -> dict[str, Any]:
        """A model file's contents (``best.pt``, a weight snapshot): the weights, what builds
        their network, and the training behind them (``"lineage"``, as of now)."""
        out = {
            "model_config": self.cfg.model_config().to_dict(),
            "model_state": state,
            "generation": generation,
            "run_name": self.cfg.run_name,
            "half_komi": self.cfg.half_komi(),
            "lineage": self.lineage().to_dict(),
        }
        calibration = self._calibration_states()
        if calibration is not None:  # the int8 copy of this file is the same on every machine
            out[CALIBRATION_KEY] = calibration
        return out

    def _calibration_states(self) -> torch.Tensor | None:
        """The replay buffer's newest :data:`CALIBRATION_POSITIONS` positions ((K, STATE_LEN)
        int64), the int8 calibration a model file carries; None before there are 64 of them or
        while the replay actor is not up."""
        if self.replay is None:
            return None
        import ray

        try:
            states = ray.get(self.replay.newest_states.remote(CALIBRATION_POSITIONS), timeout=60)
        except Exception:  # noqa: BLE001 - a model file without them is still a model file
            return None
        # np.array: a writable copy (ray.get gives read-only arrays)
        return torch.from_numpy(np.array(states)) if len(states) >= 64 else None

    def _save_best(self, generation: int, state: dict[str, torch.Tensor]) -> None:
        atomic_torch_save(self._model_file(generation, state), self.run_dir / "best.pt")

    def _weights_snapshot(self, generation: int, state: dict[str, torch.Tensor]) -> Path | None:
        """With ``train.snapshot_minutes`` = m > 0: once the chain's training minutes (the
        lineage's) pass the next multiple of m, keep this generation's weights as
        ``snapshots/snapshot_<minutes>min_gen<generation>.pt`` (a model file, ``model:PATH``
        plays it; never pruned), for a strength curve per CPU-hour
        (``scripts/strength_curve.py``). Written after the generation's checkpoint (so its
        counters are drained): a kill between the two writes the next generation's snapshot
        again after the resume, never none. Returns the file written, None when none was due."""
        every = self.cfg.train.snapshot_minutes
        if every <= 0:
            return None
        d = self._model_file(generation, state)
        minutes = float(d["lineage"]["minutes"])
        if math.floor(minutes / every) <= math.floor(self.c.snapshot_minutes_at / every):
            return None
        path = self.run_dir / "snapshots" / f"snapshot_{minutes:07.1f}min_gen{generation:04d}.pt"
        path.parent.mkdir(exist_ok=True)
        atomic_torch_save(d, path)
        self.c.snapshot_minutes_at = minutes
        if self.reporter is not None:
            known = d["lineage"].get("known", True)  # (an earlier file's training unknown: a lower bound)
            self.reporter.line(f"weight snapshot at {'' if known else 'at least '}{minutes:.1f} min of training "
                               f"(lineage): {path}")
        return path

    def _promote(self, promoted: Promoted) -> None:
        """Write ``best.pt`` and publish the promoted weights. Raises NonFiniteError for weights
        with NaN or inf (never promoted)."""
        bad = non_finite(promoted[1])
        if bad:
            raise NonFiniteError(f"generation {promoted[0]} was to be promoted but its weights are not finite "
                                 f"({', '.join(bad[:3])})")
        self._save_best(*promoted)
        self.weights.publish(self.coordinator, "promoted", *promoted)

    def _write_checkpoint(self, trainer: Trainer, rstate: dict[str, Any]) -> None:
        """Flush TensorBoard, write ``ckpt_<step>.pt`` (the trainer, the replay actor's state
        ``rstate`` (drained with the workers' statistics), the run counters and the promoted
        weights) and its ``checkpointed`` name, and prune old checkpoints, sparing the weights of
        the checks that will run."""
        assert self.scalars is not None and self.promoted is not None
        self.scalars.flush()
        state = trainer.state_dict()
        state["tb_step"] = max(self.scalars.last_step(), trainer.step)
        state["replay"] = rstate
        self.reanalysed = reanalyse_counts(rstate)
        self.c.promoted_generation = self.promoted[0]
        if self.loop_started and not self.stop_requested:
            # every check still owed or running: a kill -9 before the next one loses none
            self.c.owed_checks = [c.to_list() for c in self.schedule.pending()]
        state["run"] = {**self.c.to_checkpoint(), "minutes": self.minutes()}
        state["promoted"] = self.promoted
        state["run_name"] = self.cfg.run_name
        name = f"ckpt_{trainer.step:09d}.pt"
        atomic_torch_save(state, self.run_dir / name)
        self.saved_owed = list(self.c.owed_checks)
        atomic_write_text(self.run_dir / CHECKPOINTED, name + "\n")
        # the weights of the checks that will run (the one running or cut, and the newest owed:
        # older owed ones are carried into it) stay on disk until they have run
        needed = self.schedule.pending()
        protect = {f"ckpt_{c.step:09d}.pt" for c in needed if c.started}
        protect |= {f"ckpt_{c.step:09d}.pt" for c in needed[-1:]}
        prune_checkpoints(self.run_dir, self.cfg.train.keep_checkpoints, protect)
