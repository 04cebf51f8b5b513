"""One training run in the driver process (``python -m takzero.train`` calls :func:`run_training`).

Builds the Ray actor graph of ``design.md``: a coordinator (weights of the promoted and latest
generations, stop flag), the replay actor (buffer, shards, self-play statistics), N self-play
workers and one evaluator; the trainer runs in the driver. The coordinator and the replay actor are
pinned to the driver's node, self-play and the evaluator go anywhere
(``takzero.pipeline.placement``, ``docs/cluster.md``), so only the driver's node writes the run
folder. Everything lands in ``checkpoints/<run_name>/``:

====================  ========================================================================
``config.yaml``       the resolved, validated config
``ckpt_*.pt``         checkpoints (weights, optimiser, step, generation, RNG, replay counters)
``best.pt``           the promoted model (``takzero.export`` and the play CLI read it)
``replay/``           replay shards (reloaded on resume)
``games/``            PTN of sample self-play games and of evaluation games
``tb/``               TensorBoard logs (``tensorboard --logdir checkpoints``; sample games with
                      PTN Ninja links and final-position pictures: ``pipeline/tb_games.py``)
``train.log``         every line the run printed (start-up, progress, summary), time-stamped
``launches``          how many times the run was started (the self-play random streams of each
                      start differ)
``hydra/``            Hydra's own output
====================  ========================================================================

Resume: running again with the same ``run_name`` (and ``resume=true``, the default) continues from
the newest readable checkpoint, exactly:

* TensorBoard: the writer purges the points after the checkpoint step (they are done again), keeps
  the checkpoint step's own points (every tag's pending value is written and the file flushed
  before each checkpoint), and writes each tag at most once per step (:class:`ScalarLog`);
* random streams: the trainer's and the replay sampler's are restored from the checkpoint; each
  self-play actor start (a resume, or a Ray restart of a crashed actor) takes a new stream and
  game-id prefix (``Coordinator.new_stream``, counted from ``launches``), and each evaluation draws
  its openings from (seed, launch, generation), so no resumed run replays earlier games;
* counters: the workers hand in each step's statistics with its records (``ReplayActor.submit``);
  every checkpoint drains them in the same replay-actor call that reads the buffer's state (the
  final one after the workers have stopped); positions and games in replay shards written after the checkpoint count too;
* ``best.pt`` only ever holds a gated model: every checkpoint carries the promoted weights, which
  rebuild ``best.pt`` if it is missing or damaged;
* temp files of writes that a kill interrupted are removed at start.
``train.max_minutes`` counts training time over all sessions of the run.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from takzero.config import TrainConfig
from takzero.pipeline.actors import (
    Coordinator,
    EvaluatorActor,
    PublishedWeights,
    ReplayActor,
    SelfPlayPool,
    model_spec_files,
)
from takzero.pipeline.checkpoints import (
    CheckpointError,
    atomic_torch_save,
    list_checkpoints,
    load_checked,
    load_latest,
    prune_checkpoints,
    remove_stale_temp_files,
)
from takzero.pipeline.placement import (
    check_resources,
    cluster_gpus,
    driver_node_id,
    evaluator_options,
    on_node,
    selfplay_options,
)
from takzero.pipeline.progress import (
    RunReporter,
    Snapshot,
    StopRule,
    kernels_cached,
    resume_command,
    summary_lines,
)
from takzero.pipeline.tb_games import evaluation_tag, log_sample_game
from takzero.pipeline.trainer import Trainer

log = logging.getLogger("takzero.train")


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def _init_ray(cfg: TrainConfig) -> None:
    import ray

    if ray.is_initialized():
        return
    extra = dict(cfg.ray.runtime_env or {})
    env_vars = {"PYTHONWARNINGS": "ignore::DeprecationWarning", **extra.pop("env_vars", {})}
    runtime_env = {**extra, "env_vars": env_vars}
    # Task events (for Ray's dashboard and state API, which a run does not use) are kept in the
    # GCS for every remote call: off, so the GCS does not grow with the calls of a long run.
    system_config = {"task_events_report_interval_ms": 0, "enable_timeline": False}
    if cfg.ray.address and cfg.ray.address != "local":
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
            _system_config=system_config,
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


#: Seconds the end of a run waits for a pending evaluation (its actor may wait for a lost node).
EVAL_WAIT_AT_END_S = 600.0


class RunDirError(RuntimeError):
    """The run folder holds checkpoints that this run would not resume from (nothing started)."""


STREAMS_PER_LAUNCH = 1 << 16  # self-play actor starts per launch of a run (Coordinator.new_stream)


class ScalarLog:
    """TensorBoard scalars with one point per tag and step, strictly increasing.

    A value is held back until a later step of its tag arrives (a newer value of the same step
    replaces it: training can stall at one step while statistics keep coming), or until
    :meth:`flush` (before every checkpoint), which writes every held value and the event file.
    A value for a step at or below one already written for its tag (``floor``: the checkpoint
    step a resumed run starts from, whose points the first session wrote) moves to the next
    step, so it is neither lost nor a second point of that step.

    Args:
        writer: a ``torch.utils.tensorboard.SummaryWriter``.
        floor: steps up to this one are taken (a resumed run: its checkpoint step); -1 for none.
    """

    def __init__(self, writer: Any, floor: int = -1) -> None:
        self.writer = writer
        self.floor = floor
        self.written: dict[str, int] = {}
        self.pending: dict[str, tuple[float, int]] = {}

    def add(self, tag: str, value: float, step: int) -> None:
        step = max(step, max(self.floor, self.written.get(tag, -1)) + 1)
        held = self.pending.get(tag)
        if held is not None and held[1] < step:
            self._write(tag, *held)
        self.pending[tag] = (float(value), step)

    def _write(self, tag: str, value: float, step: int) -> None:
        self.writer.add_scalar(tag, value, step)
        self.written[tag] = step

    def flush(self) -> None:
        for tag, (value, step) in self.pending.items():
            self._write(tag, value, step)
        self.pending = {}
        self.writer.flush()


def next_launch(run_dir: Path) -> int:
    """Count this start of the run in ``run_dir/launches`` (atomically) and return its number:
    0 for the first start, 1 for the first resume, ... (kills included: the count is written
    before anything else starts)."""
    path = run_dir / "launches"
    try:
        n = int(path.read_text().strip())
    except (OSError, ValueError):
        n = 0
    tmp = path.with_name("launches.tmp")
    tmp.write_text(f"{n + 1}\n")
    os.replace(tmp, path)
    return n


def _stop_key(reason: str) -> str:
    """The config key a stop reason names (``reached train.total_steps=40`` -> that key)."""
    if reason.startswith("reached "):
        return reason.split()[1].split("=")[0]
    return "train.total_steps"


class Run:
    """One training run in the driver process (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, command: str | None = None) -> None:
        self.cfg = cfg
        self.run_dir = Path(cfg.checkpoint_root) / cfg.run_name
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "games").mkdir(exist_ok=True)
        self.command = command or resume_command(sys.argv[1:], cfg.run_name)
        self.started = time.monotonic()
        self.minutes_before = 0.0  # training minutes of earlier sessions (from the checkpoint)
        self.stop_requested = False
        self.stop_reason = ""
        self.games = 0
        self.positions = 0
        self.counters: dict[str, float] = {}
        self.last_gating = "none yet"
        self.pictured: dict[str, int] = {}  # TensorBoard: generation of the last sample picture
        self.gating_decisions = 0
        self.best_scores: dict[str, float] = {}  # score/vs_* of the promoted generation
        self.pending_scores: dict[int, dict[str, float]] = {}  # generation -> score/vs_*
        self.inflight: dict[float, tuple[float, float]] = {}  # stream -> (games, positions)
        self.resume_from: tuple[Path, dict[str, Any]] | None = None
        self.launch = 0
        self.reporter: RunReporter | None = None
        self.scalars: ScalarLog | None = None
        #: called once the actors are created (tests use it to act on a running run)
        self.on_started: Callable[[], None] | None = None
        self.pool: SelfPlayPool | None = None
        self.replay: Any = None

    def minutes(self) -> float:
        """Training minutes over all sessions of the run."""
        return self.minutes_before + (time.monotonic() - self.started) / 60

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

    def _stop_rule(self) -> StopRule:
        c = self.cfg
        return StopRule(c.train.total_steps, c.train.max_minutes, c.max_games)

    def _snapshot(self, trainer: Trainer, replay_positions: int = 0) -> Snapshot:
        games_playing = int(sum(g for g, _ in self.inflight.values()))
        positions_playing = int(sum(p for _, p in self.inflight.values()))
        return Snapshot(
            step=trainer.step,
            generation=trainer.generation,
            games=self.games,
            positions=self.positions,
            minutes=self.minutes(),
            games_in_flight=games_playing,
            positions_in_flight=positions_playing,
            replay_positions=replay_positions,
            gating=self.last_gating,
        )

    def _start_lines(self, reporter: RunReporter, resumed: bool) -> None:
        cfg = self.cfg
        say = reporter.line
        say(f"takzero run {cfg.run_name} ({'resumed' if resumed else 'new'}, start {self.launch + 1})")
        say(f"  run folder: {self.run_dir.resolve()}")
        say(f"  log file:   {self.run_dir / 'train.log'}   TensorBoard: tensorboard --logdir {self.run_dir / 'tb'}")
        say(f"  {self._stop_rule().describe()}; a checkpoint every {cfg.train.checkpoint_every} steps")
        say(f"  to resume after a crash or Ctrl-C: {self.command}")
        say(f"  {cfg.board.size}x{cfg.board.size}, {cfg.selfplay.workers} self-play worker(s) x "
            f"{cfg.selfplay.games_per_worker} games, {cfg.mcts.simulations} simulations, "
            f"batch {cfg.train.batch_size}, training starts at {cfg.replay.min_positions} positions")  # fmt: skip

    def _finished_already(self, state: dict[str, Any] | None) -> str | None:
        if state is None:
            return None
        extra = state.get("run", {})
        return self._stop_rule().reason(
            int(state.get("step", 0)), float(extra.get("minutes", 0.0)), int(extra.get("games", 0))
        )

    def _print_summary(self, reporter: RunReporter, trainer: Trainer | None, snap: Snapshot,
                       best_gen: int, finished: bool, session: bool = True) -> None:  # fmt: skip
        reason = self.stop_reason or "stopped"
        cmd = self.command
        if finished:
            key = _stop_key(reason)
            kept = [t for t in shlex.split(self.command) if not t.lstrip("+").startswith(f"{key}=")]
            cmd = f"{shlex.join(kept)} {key}=<more>"
        for text in summary_lines(
            reason=reason,
            run_dir=self.run_dir,
            snap=snap,
            best_generation=best_gen,
            best_scores=self.best_scores,
            resume_cmd=cmd,
            finished=finished,
            session_seconds=reporter.session_seconds() if session else None,
        ):
            reporter.line(text)

    def run(self) -> Path:
        import ray
        from torch.utils.tensorboard import SummaryWriter

        cfg = self.cfg
        self._check_run_dir()
        for folder in (self.run_dir, self.run_dir / "replay", self.run_dir / "games"):
            for p in remove_stale_temp_files(folder):
                log.info("removed the temp file of an interrupted write: %s", p)
        self.launch = next_launch(self.run_dir)
        self._write_config()
        state = self.resume_from[1] if self.resume_from else None
        extra = (state or {}).get("run", {})
        self.games = int(extra.get("games", 0))
        self.positions = int(extra.get("positions", 0))
        self.counters = dict(extra.get("counters", {}))
        self.gating_decisions = int(extra.get("gating_decisions", 0))
        self.minutes_before = float(extra.get("minutes", 0.0))
        self.last_gating = str(extra.get("last_gating", "none yet"))
        self.best_scores = dict(extra.get("best_scores", {}))
        promoted_gen = int(extra.get("promoted_generation", 0))

        done = self._finished_already(state)
        if done is not None:
            start = Snapshot(step=int(state["step"]), generation=int(state["generation"]),
                             games=self.games, positions=self.positions,
                             minutes=self.minutes_before, gating=self.last_gating)  # fmt: skip
            reporter = RunReporter(self.run_dir, self._stop_rule(), start, bar=False)
            reporter.line(f"run {cfg.run_name} is already finished ({done}); nothing to do")
            self.stop_reason = done
            self._print_summary(reporter, None, start, promoted_gen, finished=True, session=False)
            reporter.close()
            return self.run_dir

        trainer = Trainer(
            cfg.model_config(),
            cfg.train,
            cfg.loss_weights(),
            device=cfg.device,
            seed=cfg.seed,
        )
        torch.set_num_threads(cfg.train.threads)
        self._restore(trainer)
        start = self._snapshot(trainer)
        reporter = self.reporter = RunReporter(self.run_dir, self._stop_rule(), start)
        reporter.min_positions = cfg.replay.min_positions
        self._start_lines(reporter, state is not None)
        if state is not None:
            reporter.line(f"resumed from {self.resume_from[0].name}: step {trainer.step}, "
                          f"generation {trainer.generation}, games {self.games}, "
                          f"{self.minutes_before:.1f} min trained")  # fmt: skip
        package_root = Path(__file__).resolve().parent.parent
        if not kernels_cached(package_root):
            reporter.line("numba: compiling the search and rules kernels (cold cache: about a minute "
                          "before the first games; later starts reuse the cache)")  # fmt: skip

        # A resumed run drops the points after its checkpoint step (done again) and keeps the
        # checkpoint step's own (purge_step = step + 1).
        writer = SummaryWriter(str(self.run_dir / "tb"), purge_step=trainer.step + 1 if state else None,
                               flush_secs=30)  # fmt: skip
        scalars = self.scalars = ScalarLog(writer, floor=trainer.step if state else -1)
        if state is None:
            writer.add_text("config", "```\n" + OmegaConf.to_yaml(OmegaConf.structured(cfg)) + "\n```", 0)
            _log_hparams(writer, cfg)

        _init_ray(cfg)
        check_resources("ray.selfplay_resources", cfg.ray.selfplay_resources or {})
        check_resources("ray.evaluator_resources", cfg.ray.evaluator_resources or {})
        # Placement (takzero.pipeline.placement): what writes the run folder stays on this node.
        here = on_node(driver_node_id())
        coordinator = ray.remote(Coordinator).options(num_cpus=0, **here).remote(self.launch * STREAMS_PER_LAUNCH)
        replay = ray.remote(ReplayActor).options(num_cpus=0, **here).remote(**cfg.replay_kwargs(self.run_dir))
        rstate = state.get("replay") if state else None
        loaded = ray.get(replay.load.remote(rstate))
        rstats = ray.get(replay.stats.remote())
        if rstate is not None:
            # Shards written after the checkpoint hold games that were played: they count.
            self.games += max(0, int(rstats["replay/games"]) - int(rstate.get("games_added", 0)))
            self.positions += max(0, int(rstats["replay/total_added"]) - int(rstate["total_added"]))
        elif loaded:
            self.games = int(rstats["replay/games"])
            self.positions = int(rstats["replay/total_added"])
        if loaded:
            reporter.line(f"replay: reloaded {loaded} positions from shards")
        reporter.start = self._snapshot(trainer)

        # Weights: the promoted model (best.pt) drives self-play; the latest is the trainer's.
        # Weights go to the object store once per generation; actors share the reference.
        self.weights = PublishedWeights()
        promoted = self._load_best(trainer, promoted_gen, state)
        self.weights.publish(coordinator, "promoted", *promoted)
        self.weights.publish(coordinator, "latest", trainer.generation, _cpu_state(trainer))
        ray.get(coordinator.generation.remote("latest"))

        gpus = cluster_gpus() if cfg.device != "cpu" else 0
        share = cfg.ray.worker_gpu_share if gpus else 0.0
        pool = SelfPlayPool(cfg, selfplay_options(cfg.ray.selfplay_resources or {}, share), coordinator, replay)
        evaluator = (
            ray.remote(EvaluatorActor)
            .options(**evaluator_options(cfg.ray.evaluator_resources or {}))
            .remote(cfg, model_spec_files(cfg.evaluator.baselines))
        )
        eval_task = None
        first_games_said = False
        eval_candidate: tuple[int, dict[str, torch.Tensor]] | None = None
        self.pool, self.replay = pool, replay
        if self.on_started is not None:
            self.on_started()

        previous_handler = signal.getsignal(signal.SIGINT)

        def _on_sigint(signum: int, frame: Any) -> None:
            if self.stop_requested:
                return
            self.stop_requested = True  # only flags here: printing could re-enter a print
            self.stop_reason = "interrupted (Ctrl-C or SIGTERM)"

        in_main_thread = threading.current_thread() is threading.main_thread()
        if in_main_thread:  # a run driven from another thread is stopped with stop_requested
            signal.signal(signal.SIGINT, _on_sigint)
            signal.signal(signal.SIGTERM, _on_sigint)
        last_log = time.monotonic()
        steps_at_log = trainer.step
        samples_per_s = 0.0
        try:
            while not self._done(trainer):
                recs = ray.get(replay.sample.remote(cfg.train.batch_size))
                if recs is None:  # waiting for self-play (statistics drain at the log tick)
                    time.sleep(0.5)
                else:
                    metrics = trainer.train_step(recs)
                    if trainer.step % 10 == 0:
                        for k, v in metrics.items():
                            scalars.add(k, v, trainer.step)
                    if trainer.step % cfg.train.checkpoint_every == 0:
                        trainer.generation += 1
                        self._checkpoint(trainer, replay, promoted)
                        latest = (trainer.generation, _cpu_state(trainer))
                        self.weights.publish(coordinator, "latest", *latest)
                        if cfg.evaluator.gating == "off":
                            promoted = latest
                            self._promote(promoted, coordinator)
                            self.gating_decisions += 1
                            self.last_gating = f"gen {latest[0]} promoted (gating off)"
                        if eval_task is None:
                            every = cfg.evaluator.baseline_every
                            baselines = every > 0 and trainer.generation % every == 0
                            eval_candidate = latest
                            eval_task = evaluator.evaluate.remote(
                                latest[0], self.weights.ref(latest[1]),
                                promoted[0], self.weights.ref(promoted[1]), baselines,
                                seed=self._eval_seed(latest[0]),
                            )  # fmt: skip
                if eval_task is not None:
                    ready, _ = ray.wait([eval_task], timeout=0)
                    if ready:
                        result = self._eval_result(eval_task, eval_candidate)
                        eval_task = None
                        if result is not None:
                            promoted = self._gating(result, promoted, coordinator, trainer)
                now = time.monotonic()
                if now - last_log >= cfg.log_every_s:
                    samples_per_s = (trainer.step - steps_at_log) * cfg.train.batch_size / (now - last_log)
                    steps_at_log = trainer.step
                    last_log = now
                    self._drain(replay, trainer.step)
                    rstats = ray.get(replay.stats.remote())
                    for k, v in rstats.items():
                        scalars.add(k, v, trainer.step)
                    scalars.add("train/samples_per_s", samples_per_s, trainer.step)
                    if not first_games_said and self.inflight:
                        first_games_said = True
                        reporter.line(f"self-play: under way after {reporter.session_seconds():.0f} s "
                                      "(kernels ready, first searches done)")  # fmt: skip
                    reporter.update(self._snapshot(trainer, int(rstats.get("replay/positions", 0))))
                    pool.check()  # raises a worker's own error; replaces a worker gone for good
            # At the normal end, let a pending evaluation finish so the run ends with a gating
            # decision; after Ctrl-C, stop at once (the checkpoint below keeps the work).
            if eval_task is not None and not self.stop_requested:
                reporter.line("waiting for the last evaluation to finish (Ctrl-C skips it; the "
                              "final checkpoint follows)")  # fmt: skip
                end = time.monotonic() + EVAL_WAIT_AT_END_S
                while not self.stop_requested and time.monotonic() < end and not ray.wait([eval_task], timeout=1.0)[0]:
                    pass
                if not self.stop_requested:
                    result = self._eval_result(eval_task, eval_candidate)
                    if result is not None:
                        promoted = self._gating(result, promoted, coordinator, trainer)
                eval_task = None
        finally:
            if in_main_thread:
                signal.signal(signal.SIGINT, previous_handler)
            if self.stop_requested:
                reporter.line("Ctrl-C: stopping the workers, then a final checkpoint and the summary")
            if not self.stop_reason:
                self.stop_reason = self._stop_rule().reason(trainer.step, self.minutes(), self.games) or "error"
            ray.get(coordinator.stop.remote())
            # Workers first: after they stopped nothing reaches the buffer, so the final
            # checkpoint (which drains the statistics first) and the buffer agree exactly.
            pool.finish()
            try:
                self._checkpoint(trainer, replay, promoted)
            except Exception:  # pragma: no cover - best effort at shutdown
                log.exception("final checkpoint failed")
            scalars.flush()
            writer.close()
            ray.kill(evaluator)
            ray.kill(replay)
            ray.kill(coordinator)
            self.inflight = {}
            finished = self._stop_rule().reason(trainer.step, self.minutes(), self.games) is not None
            self._print_summary(reporter, trainer, self._snapshot(trainer), promoted[0], finished)
            reporter.close()
        log.info("run finished: %s", self.run_dir)
        return self.run_dir

    def _eval_seed(self, generation: int) -> int:
        """Seed of one evaluation's openings and sampling: new for every (launch, generation)."""
        s = np.random.SeedSequence([self.cfg.seed, self.launch, generation]).generate_state(1)
        return int(s[0])

    def _done(self, trainer: Trainer) -> bool:
        if self.stop_requested:
            return True
        reason = self._stop_rule().reason(trainer.step, self.minutes(), self.games)
        if reason is not None:
            self.stop_reason = reason
            return True
        return False

    # -- pieces of the loop ------------------------------------------------------------------

    def _load_best(
        self, trainer: Trainer, generation: int, state: dict[str, Any] | None
    ) -> tuple[int, dict[str, torch.Tensor]]:
        """The promoted model: ``best.pt`` when it verifies (it may be newer than the checkpoint:
        a promotion after it); else the promoted weights the checkpoint carries, or a kept
        checkpoint of the promoted generation; for a new run, the initial weights (generation
        0). Never the trainer's ungated weights of a resumed run: raises RunDirError if no gated
        copy is left."""
        best = self.run_dir / "best.pt"
        if best.exists():
            try:
                d = load_checked(best, require_checksum=True)
                return int(d.get("generation", generation)), d["model_state"]
            except CheckpointError as e:
                log.error("best.pt unreadable (%s); restoring it from the checkpoints", e)
        if state is None:
            found: tuple[int, dict[str, torch.Tensor]] | None = (trainer.generation, _cpu_state(trainer))
        else:
            found = None
            saved = state.get("promoted")
            if saved is not None and int(saved[0]) == generation:
                found = (int(saved[0]), saved[1])
            else:
                for path in reversed(list_checkpoints(self.run_dir)):
                    try:
                        d = load_checked(path, require_checksum=True)
                    except CheckpointError:
                        continue
                    if int(d.get("generation", -1)) == generation:
                        found = (generation, d["model_state"])
                        break
        if found is None:
            raise RunDirError(
                f"best.pt in {self.run_dir} is missing or damaged and no checkpoint holds the "
                f"promoted generation {generation}; not promoting ungated weights: restore best.pt "
                "or start a new run_name"
            )
        self._save_best(*found)
        return found

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
        self.weights.publish(coordinator, "promoted", *promoted)

    def _checkpoint(
        self,
        trainer: Trainer,
        replay: Any,
        promoted: tuple[int, dict[str, torch.Tensor]],
    ) -> None:
        """Drain the workers' statistics (from the replay actor), write every pending scalar and flush TensorBoard, then
        write ``ckpt_<step>.pt`` (trainer, replay counters and RNG, run counters, the promoted
        weights) and prune old checkpoints."""
        import ray

        # One replay-actor call: the statistics drained and the buffer's state agree exactly.
        stats, games, rstate = ray.get(replay.drain_with_state.remote())
        self._drain(replay, trainer.step, (stats, games))
        assert self.scalars is not None
        self.scalars.flush()
        state = trainer.state_dict()
        state["replay"] = rstate
        state["run"] = {
            "games": self.games,
            "positions": self.positions,
            "counters": self.counters,
            "gating_decisions": self.gating_decisions,
            "promoted_generation": promoted[0],
            "minutes": self.minutes(),
            "last_gating": self.last_gating,
            "best_scores": self.best_scores,
            "launch": self.launch,
        }
        state["promoted"] = (promoted[0], promoted[1])
        state["run_name"] = self.cfg.run_name
        atomic_torch_save(state, self.run_dir / f"ckpt_{trainer.step:09d}.pt")
        prune_checkpoints(self.run_dir, self.cfg.train.keep_checkpoints)

    def _gating(
        self,
        result: dict[str, Any],
        promoted: tuple[int, dict[str, torch.Tensor]],
        coordinator: Any,
        trainer: Trainer,
    ) -> tuple[int, dict[str, torch.Tensor]]:
        assert self.scalars is not None
        step = trainer.step
        for k, v in result.get("scalars", {}).items():
            self.scalars.add(k, v, step)
        for name, text in result.get("ptn", {}).items():
            path = self.run_dir / "games" / name
            path.write_text(text)
            log_sample_game(self.scalars.writer, evaluation_tag(name), text, step)
        cand_gen = result["candidate_generation"]
        scores = {k.removeprefix("score/vs_"): v for k, v in result.get("scalars", {}).items()
                  if k.startswith("score/vs_")}  # fmt: skip
        if result.get("decision") is not None and self.cfg.evaluator.gating != "off":
            self.gating_decisions += 1
            if result["decision"] == "promote":
                promoted = (cand_gen, result["candidate_weights"])
                self._promote(promoted, coordinator)
                self.best_scores = scores
            self.last_gating = f"gen {cand_gen} {result['decision']} ({result.get('summary', '')})"
            self.scalars.writer.add_text("gating", self.last_gating, step)
            self.scalars.add("gating/promoted_generation", promoted[0], step)
            assert self.reporter is not None
            self.reporter.line(f"gating: {self.last_gating}")
        elif promoted[0] == cand_gen and scores:
            self.best_scores = scores
        return promoted

    def _eval_result(
        self, task: Any, candidate: tuple[int, dict[str, torch.Tensor]] | None
    ) -> dict[str, Any] | None:
        """The evaluation's result with the candidate's weights (kept here, not sent back), or
        None when the evaluator was lost with its node or process (Ray restarts it; the next
        generation is evaluated) or has not answered."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        try:
            result = ray.get(task, timeout=0)
        except (RayActorError, GetTimeoutError) as e:
            log.warning("evaluation dropped: the evaluator was lost or did not answer (%s)", type(e).__name__)
            return None
        if candidate is not None:
            result["candidate_weights"] = candidate[1]
        return result

    def _drain(self, replay: Any, step: int, drained: tuple[list[dict[str, float]], list[str]] | None = None) -> None:
        """Write the self-play statistics and sample games the replay actor received since the
        last call (the workers hand them in with their records)."""
        import ray

        assert self.scalars is not None
        add = self.scalars.add
        stats, games = drained if drained is not None else ray.get(replay.drain.remote())
        for s in stats:  # games and positions in flight: the latest report of each worker
            if "inflight/stream" in s:
                self.inflight[s["inflight/stream"]] = (s["inflight/games"], s["inflight/positions"])
        stats = [{k: v for k, v in s.items() if not k.startswith("inflight/")} for s in stats]
        if stats:
            summary = _summarise(stats)
            self.games += int(summary.get("count/games", 0))
            self.positions += int(summary.get("count/positions", 0))
            for k, v in summary.items():
                if k.startswith("count/"):
                    self.counters[k] = self.counters.get(k, 0.0) + v
                else:
                    add(k, v, step)
            total = max(1.0, self.counters.get("count/games", 0.0))
            for k in ("road_white", "road_black", "flat_white", "flat_black", "draw", "resigned"):
                add(f"selfplay/share_{k}", self.counters.get(f"count/{k}", 0.0) / total, step)
            checks = self.counters.get("count/resign_checks", 0.0)
            if checks:
                false = self.counters.get("count/false_resign", 0.0)
                add("selfplay/false_resign_rate", false / checks, step)
            wins_w = self.counters.get("count/road_white", 0) + self.counters.get("count/flat_white", 0)
            add("selfplay/white_win_rate", wins_w / total, step)
            add("selfplay/games_total", self.games, step)
            add("selfplay/positions_total", self.positions, step)
        if games:
            path = self.run_dir / "games" / "selfplay.ptn"
            with open(path, "a") as f:
                for g in games:
                    f.write(g.rstrip() + "\n\n")
            log_sample_game(self.scalars.writer, "selfplay", games[-1], step, pictured=self.pictured)


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


def run_training(cfg: TrainConfig, command: str | None = None) -> Path:
    """Run (or resume) training with a validated config; returns the run folder. ``command``:
    the command line that resumes it (printed at start-up and in the summary; default: built
    from ``sys.argv``)."""
    return Run(cfg, command).run()
