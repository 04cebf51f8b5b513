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
``checkpointed``      the name of the newest checkpoint written (a folder with it and no
                      checkpoint lost them: refused, ``resume.outputs_without_checkpoints``)
``evaluation_games.json``  the finished games of the check running (and of the owed ones),
                      written as they arrive: a check cut by a stop plays only the rest
``unfinished_games.npz``  the self-play games in play at the last stop
                      (``selfplay.stop_grace_seconds`` > 0), continued by the next start
``hydra/``            Hydra's own output
====================  ========================================================================

Resume: running again with the same ``run_name`` (and ``resume=true``, the default) continues from
the newest readable checkpoint, exactly:

* TensorBoard: the writer purges the points after the checkpoint step (they are done again), keeps
  the checkpoint step's own points (every tag's pending value is written and the file flushed
  before each checkpoint), and writes each tag at most once per step (:class:`ScalarLog`); an
  evaluation's points go at the step where its generation was made, also for a check that a
  Ctrl-C or kill -9 cut and the resume runs again (``RunCounters.owed_checks``, in every
  checkpoint; the cut check runs first, with its seed and its finished games);
* random streams: the trainer's and the replay sampler's are restored from the checkpoint; each
  self-play actor start (a resume, or a Ray restart of a crashed actor) takes a new stream and
  game-id prefix (``Coordinator.new_stream``, counted from ``launches``), and each evaluation draws
  its openings from (seed, launch, generation), so no resumed run replays earlier games;
* games in play: at a stop the workers play on for ``selfplay.stop_grace_seconds`` without
  starting new games, hand in those that finish, and the run keeps the rest in
  ``unfinished_games.npz`` (``selfplay.UnfinishedGames``: moves and policy targets, no pickle);
  the next start hands them to its workers first (``Coordinator.take_carried``), each under a new
  game id of the new stream, and removes the file once its workers exist (a kill -9 after that
  loses them, as it loses any game in play); the summary's ``kept:`` line says what was handed
  in, kept and dropped;
* counters: the workers hand in each step's statistics with its records (``ReplayActor.submit``);
  every checkpoint drains them in the same replay-actor call that reads the buffer's state (the
  final one after the workers have stopped); positions and games in replay shards written after the
  checkpoint count too;
* ``best.pt`` only ever holds a gated model: every checkpoint carries the promoted weights, which
  rebuild ``best.pt`` if it is missing or damaged (a damaged one is kept as ``best.pt.rejected``);
* checkpoints are read weights-only and verified against their sidecars and their content
  (``resume.checkpoint_problem``); newer ones that fail (truncated, bit-flipped, checksum
  mismatch, no sidecar, not weights-only, not a checkpoint of this network) are renamed
  ``<name>.rejected`` and the run says so in ``train.log`` before it resumes from the older one;
* a write that fails because the disk is full (a checkpoint, ``best.pt``, a replay shard) stops
  the run without a final checkpoint, with one line naming the file, the last good checkpoint and
  the command that resumes it (:meth:`Run.run` then raises the error; the command line exits 1);
* temp files of writes that a kill interrupted are removed at start.
``train.max_minutes`` counts training time over all sessions of the run. A resume with nothing
to train (a stop rule reached, or less of ``train.max_minutes`` left than a start-up costs) starts
nothing: one line, the summary, no Ray (:meth:`Run._nothing_to_do`). Ctrl-C and SIGTERM stop the
run the same way (:meth:`Run._catch_interrupts`).

The run is one class, :class:`Run`, over one state (``run_state.RunState``), with a part per
concern: ``run_reporting`` (start-up lines, progress figures, summary), ``run_checkpoints``
(checkpoints, ``best.pt``, weight snapshots), ``run_evaluation`` (the evaluator and its checks)
and ``run_actors`` (Ray, the actors and the self-play pool); this module coordinates them: the
phases of a run, the training loop, each new generation, checkpoints, the stops and shutdown.
"""

from __future__ import annotations

import errno
import logging
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from takzero.config import TrainConfig
from takzero.pipeline.checkpoints import (
    CheckpointWriteError,
    list_checkpoints,
    remove_stale_temp_files,
)
from takzero.pipeline.progress import RunReporter, Snapshot, kernels_cached
from takzero.pipeline.resume import RunCounters, RunDirError, next_launch, set_aside_rejected
from takzero.pipeline.run_actors import UNFINISHED_GAMES, RunActors
from takzero.pipeline.run_evaluation import EVAL_WAIT_AT_END_S, EVALUATION_GAMES
from takzero.pipeline.run_state import cpu_state
from takzero.pipeline.scalars import ScalarLog, log_hparams
from takzero.pipeline.schedule import Check
from takzero.pipeline.trainer import NonFiniteError, Trainer
from takzero.pipeline.warm_start import load_init_weights, warm_start_lines

__all__ = ["Run", "RunDirError", "NonFiniteError", "StopNow", "run_training", "EVAL_WAIT_AT_END_S", "EVALUATION_GAMES"]

log = logging.getLogger("takzero.train")

#: errno values of a full disk: a write that fails with one stops the run (the last checkpoint
#: on disk is kept and resumes it)
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


#: how the run names the signals that stop it (the stop reason, the shutdown lines)
SIGNAL_NAMES: dict[int, str] = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


class StopNow(KeyboardInterrupt):
    """A second stop signal (Ctrl-C or SIGTERM) during a stop: the run ends at once, without
    the final checkpoint (the last one on disk is kept). ``signum``: that signal's number (the
    command line exits with 128 + it)."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum


def write_failure(e: BaseException) -> OSError | None:
    """The failed write behind ``e`` that stops a run: a :class:`CheckpointWriteError`, or an
    OSError of a full disk (``DISK_FULL``) that is ``e`` itself, the cause a Ray task error
    carries (``.cause``: a replay shard written by the replay actor), or an exception ``e`` was
    raised from or during. None when there is none (``e`` is another error)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [e]
    while todo:
        x = todo.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, CheckpointWriteError) or (isinstance(x, OSError) and x.errno in DISK_FULL):
            return x
        todo += [getattr(x, "cause", None), x.__cause__, x.__context__]
    return None


class Run(RunActors):
    """One training run in the driver process (see the module docstring).

    :meth:`run` goes through four phases: set-up without Ray (run folder checks, the checkpoint to
    resume, trainer, reporter, TensorBoard), start-up (Ray, actors, replay reload, weights), the
    training loop, and shutdown (workers stopped, final checkpoint, summary). Ctrl-C or SIGTERM
    at any moment of :meth:`run` stops at the next safe point (between the steps of set-up and
    start-up, or at the next loop iteration); a second one stops at once
    (:class:`StopNow`, a KeyboardInterrupt; the last checkpoint on disk is kept).
    """

    def run(self) -> Path:
        """Run or resume the training run; returns the run folder.

        Raises:
            RunDirError: the run folder cannot be resumed (nothing started).
            takzero.pipeline.placement.PlacementError: ``ray.*_resources`` the cluster lacks.
            StopNow: a second Ctrl-C or SIGTERM (a KeyboardInterrupt; the last checkpoint on
                disk is kept).
            NonFiniteError: training went non-finite (steps skipped in a row up to the bound,
                or NaN/inf weights at a checkpoint): the run stopped without a final
                checkpoint, so no non-finite network is written, published or promoted; the
                log names the last good checkpoint.
            OSError: a write failed because the disk is full (``CheckpointWriteError`` for a
                checkpoint), after the run stopped cleanly: the log says so and names the last
                good checkpoint, which resumes the run.
        """
        restore_signals = self._catch_interrupts()
        try:
            self._run()
        finally:
            restore_signals()
        if self.write_error is not None:
            raise self.write_error
        if self.training_error is not None:
            raise self.training_error
        log.debug("run ended: %s", self.run_dir)  # the summary above says how and why
        return self.run_dir

    def _run(self) -> None:
        from torch.utils.tensorboard import SummaryWriter

        cfg = self.cfg
        self._check_run_dir()
        # train.init_from: checked before anything starts (ConfigError); a resume ignores it
        init = load_init_weights(cfg) if cfg.train.init_from and self.resume_from is None else None
        if self.on_accepted is not None:
            self.on_accepted()
        if self.resume_from is not None:
            self.resume_notes = set_aside_rejected(self.resume_from)
            for note in self.resume_notes:
                log.warning("%s", note)
        for folder in (self.run_dir, self.run_dir / "replay", self.run_dir / "games"):
            for p in remove_stale_temp_files(folder):
                log.info("removed the temp file of an interrupted write: %s", p)
        state = self.resume_from[1] if self.resume_from else None
        self.c = RunCounters.from_checkpoint(state)
        self.schedule.skipped = self.c.skipped_checks  # one list: the checkpoint carries it
        self.saved_owed = list(self.c.owed_checks)
        if self._nothing_to_do(state):  # before Ray, and before this start is counted or written
            return
        self.carried = self._load_carried()
        self.launch = next_launch(self.run_dir)
        self._write_config()
        self.c.launch = self.launch

        # The trainer is made once the self-play workers' processes are starting
        # (:meth:`_make_trainer`: its optimiser alone imports torch._dynamo, seconds that
        # self-play does not wait for); until then the checkpoint's step and generation stand in.
        torch.set_num_threads(cfg.train.threads)
        self.init = init
        if state is not None:
            self.saved_step = (int(state["step"]), int(state["generation"]))
        if init is not None:  # generation 0 = these weights; optimiser, steps and replay fresh
            self.c.init_from = init.describe()
            self.c.earlier = init.lineage.to_dict()
            self.c.snapshot_minutes_at = init.lineage.minutes  # snapshots go on at the chain's next multiple
        reporter = self.reporter = RunReporter(self.run_dir, self._stop_rule(), self._snapshot(None))
        reporter.min_positions = cfg.replay.min_positions
        self._start_lines(reporter, state is not None)
        for note in self.resume_notes:
            reporter.line(note)
        for note in warm_start_lines(cfg, init, self.resume_from):
            reporter.line(note)
        if state is not None and self.resume_from is not None:
            reporter.line(f"resumed from {self.resume_from[0].name}: step {self.saved_step[0]}, "
                          f"generation {self.saved_step[1]}, games {self.c.games}, "
                          f"{self.c.minutes:.1f} min trained")
        if self.carried is not None:
            reporter.line(f"self-play: continuing the {self.carried.games} game(s) in play at the last stop "
                          f"({self.carried.positions:,} positions recorded so far; {UNFINISHED_GAMES})")
        for note in self.carried_notes:
            reporter.line(note)
        if not kernels_cached(Path(__file__).resolve().parent.parent):
            reporter.line("numba: compiling the search and rules kernels (cold cache: about a minute "
                          "before the first games; later starts reuse the cache)")

        # A resumed run drops the points written after its checkpoint (done again) and keeps the
        # checkpoint's own: up to the last step written before it was saved ("tb_step"; a value
        # drained at the final checkpoint can sit one step past the trainer's step).
        tb_step = int(state.get("tb_step", self.saved_step[0])) if state else -1
        writer = SummaryWriter(str(self.run_dir / "tb"), purge_step=tb_step + 1 if state else None,
                               flush_secs=30)
        self.scalars = ScalarLog(writer, floor=tb_step)
        if state is None:
            writer.add_text("config", "```\n" + OmegaConf.to_yaml(OmegaConf.structured(cfg)) + "\n```", 0)
            log_hparams(writer, cfg)

        try:
            if not self.stop_requested and self._start_actors(state):
                assert self.trainer is not None
                self.loop_started = True
                self._loop(self.trainer)
                self._last_evaluation(self.trainer)
        except NonFiniteError as e:
            self._training_failed(e)
        except Exception as e:  # noqa: BLE001 - a full disk shows through Ray's wrappers too
            failed = write_failure(e)
            if failed is None:
                raise
            self._write_failed(failed)
        finally:
            self._shutdown(self.trainer)

    def _nothing_to_do(self, state: dict[str, Any] | None) -> bool:
        """A resume with nothing to train: the run is finished (a stop rule reached), or what
        is left of ``train.max_minutes`` is less than a start-up takes
        (``run_reporting.STARTUP_MINUTES``). Then it says so in one line with the command that
        trains further, prints the summary and returns True, all within seconds: no Ray, no
        workers, and nothing in the run folder changes but ``train.log`` (the launch count, the
        config and the kept games stay as they are). False otherwise (nothing said)."""
        why = self._finished_already(state) or self._budget_spent(state)
        if why is None:
            return False
        assert state is not None
        start = Snapshot(step=int(state["step"]), generation=int(state["generation"]),
                         games=self.c.games, positions=self.c.positions,
                         minutes=self.c.minutes, gating=self.c.last_gating)
        reporter = RunReporter(self.run_dir, self._stop_rule(), start, bar=False)
        reporter.line(self._nothing_to_do_line(why, start))
        self.stop_reason = why
        self._print_summary(reporter, None, start, self.c.promoted_generation, finished=True, session=False)
        reporter.close()
        return True

    def _catch_interrupts(self) -> Callable[[], None]:
        """SIGINT (Ctrl-C) and SIGTERM (``kill PID``, ``timeout``, a cluster scheduler) set
        ``stop_requested`` (the run stops at the next safe point: the stop grace of the games in
        play, the final checkpoint, the summary, whose reason names the signal); a second one of
        either raises :class:`StopNow` (stopped at once, the last checkpoint on disk is kept).
        The handler is put back after Ray's start, which replaces SIGTERM's
        (``RunActors._retake_signals``). SIGHUP is left alone: a closed terminal hangs up the
        whole process group, Ray's own processes too, so no clean stop could follow (run a long
        job under ``nohup``, ``tmux`` or a scheduler). Returns the function that puts the old
        handlers back. A run driven from another thread than the main one is stopped with
        ``stop_requested``."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

        def _on_signal(signum: int, frame: Any) -> None:
            name = SIGNAL_NAMES.get(signum, f"signal {signum}")
            if self.stop_requested:
                signal.signal(signal.SIGINT, signal.default_int_handler)
                raise StopNow(signum, f"second {name}: stopped at once (the last checkpoint is kept)")
            self.stop_requested = True  # only flags here: printing could re-enter a print
            self.stop_signal = name
            # a stop rule reached before the signal (the run waits for its last evaluation) stays
            # the reason: the summary's command to train further raises the key it names
            self.stop_reason = self.stop_reason or f"interrupted ({name})"

        self.signal_handler = _on_signal
        for s in old:
            signal.signal(s, _on_signal)

        def restore() -> None:
            self.signal_handler = None
            for s, h in old.items():
                signal.signal(s, h)

        return restore

    def _loop(self, trainer: Trainer) -> None:
        """Train until a stop condition or Ctrl-C: sample, step, checkpoint and hand each new
        generation to the evaluator, apply its gating decision, log and show progress."""
        import ray

        cfg = self.cfg
        assert self.reporter is not None and self.scalars is not None and self.pool is not None
        reporter, scalars, replay = self.reporter, self.scalars, self.replay
        last_log = time.monotonic()
        steps_at_log = trainer.step
        while not self._done(trainer):
            recs = ray.get(replay.sample.remote(cfg.train.batch_size))
            if recs is None:  # waiting for self-play (statistics drain at the log tick)
                time.sleep(0.5)
            else:
                metrics = trainer.train_step(recs)
                if metrics.get("train/step_skipped"):
                    self._skipped_step(trainer)  # (the step count did not move)
                else:
                    if trainer.step % 10 == 0:
                        for k, v in metrics.items():
                            scalars.add(k, v, trainer.step)
                    if trainer.step % cfg.train.checkpoint_every == 0:
                        self._new_generation(trainer)
            self._poll_evaluation(trainer)
            now = time.monotonic()
            if now - last_log >= cfg.log_every_s:
                samples_per_s = (trainer.step - steps_at_log) * cfg.train.batch_size / (now - last_log)
                steps_at_log = trainer.step
                last_log = now
                self._drain(trainer.step)
                self._take_eval_games()
                rstats = ray.get(replay.stats.remote())
                for k, v in rstats.items():
                    scalars.add(k, v, trainer.step)
                self.reanalysed = {k: int(rstats.get(f"reanalyse/{k}", 0)) for k in ("issued", "applied", "dropped")}
                self.reanalysed["sampled"] = int(rstats.get("replay/total_sampled", 0))
                scalars.add("train/samples_per_s", samples_per_s, trainer.step)
                reporter.update(self._snapshot(trainer, int(rstats.get("replay/positions", 0))))
                for worker in self.pool.check():  # raises a worker's own error; replaces one gone for good
                    self.inflight.pop(float(worker), None)  # its games in play are gone with it
                if self.servers is not None:
                    self.servers.check()  # the same for the inference servers
                if self.reanalyser is not None:
                    self.reanalyser.check()

    def _new_generation(self, trainer: Trainer) -> None:
        """A checkpoint step: count a generation, write the checkpoint, publish the weights,
        promote them at once with gating off, record the checks the generation owes
        (:class:`~takzero.pipeline.schedule.EvaluationSchedule`) and start the newest owed one
        if the evaluator is free."""
        cfg = self.cfg
        assert self.promoted is not None
        trainer.check_finite()  # NonFiniteError: a NaN generation is never made
        trainer.generation += 1
        latest = (trainer.generation, cpu_state(trainer))
        check = self.schedule.owe(latest[0], trainer.step, latest[1])
        if check is not None:  # its openings' seed, kept with it: a rerun plays the same ones
            check.seed = self._eval_seed(latest[0])
        self._checkpoint(trainer)  # (it keeps the check just owed)
        self._weights_snapshot(*latest)
        self.weights.publish(self.coordinator, "latest", *latest)
        if cfg.evaluator.gating == "off":
            self.promoted = latest
            self._promote(latest)
            self.c.gating_decisions += 1
            self.c.last_gating = f"gen {latest[0]} promoted (gating off)"
        self._start_check()

    def _checkpoint(self, trainer: Trainer) -> None:
        """Drain the workers' statistics (from the replay actor), write every pending scalar and
        flush TensorBoard, then write ``ckpt_<step>.pt`` (trainer, replay counters and RNG, run
        counters, the promoted weights: :meth:`_write_checkpoint`), prune old checkpoints and
        forget the finished games of checks no checkpoint owes any more."""
        import ray

        assert self.scalars is not None and self.promoted is not None
        trainer.check_finite()  # NonFiniteError: never a checkpoint of NaN weights
        self._take_eval_games()  # the running check's games so far (kept beside the checkpoint)
        # One replay-actor call: the statistics drained and the buffer's state agree exactly.
        stats, games, rstate = ray.get(self.replay.drain_with_state.remote())
        self._drain(trainer.step, (stats, games))
        self._write_checkpoint(trainer, rstate)
        self._forget_eval_games()

    def _done(self, trainer: Trainer) -> bool:
        if self.stop_requested:
            return True
        reason = self._stop_rule().reason(trainer.step, self.minutes(), self.c.games)
        if reason is not None:
            self.stop_reason = reason
            return True
        return False

    def _training_failed(self, e: NonFiniteError) -> None:
        """Training went non-finite: stop the run without a final checkpoint (the weights are
        bad), saying in one line what happened, the last good checkpoint and what to change
        (:meth:`run` raises ``e`` once the run has shut down)."""
        self.training_error = e
        self.stop_requested = True
        self.stop_reason = "training went non-finite"
        last = self._last_good_checkpoint("no checkpoint was written")
        self._say_stop(f"stopped: {e}; no checkpoint of these weights is written and none is promoted; {last}; "
                       f"lower train.lr (or check train.init_from), then resume with: {self.command}")

    def _write_failed(self, e: OSError) -> None:
        """A write failed (the disk filled): stop the run without a final checkpoint and say, in
        one line for the log, what failed, which checkpoint is the last good one and how to go on
        (:meth:`run` raises ``e`` once the run has shut down)."""
        self.write_error = e
        self.stop_requested = True
        full = e.errno in DISK_FULL
        self.stop_reason = "the disk is full" if full else f"a write failed ({e})"
        last = self._last_good_checkpoint("no checkpoint was written yet")
        if isinstance(e, CheckpointWriteError):
            what = str(e)
        else:
            what = f"{e.filename}: {e.strerror or e}" if e.filename else f"a write failed ({e.strerror or e})"
        self._say_stop(f"stopped: {what}; {last}; free disk space on {self.run_dir}, then resume with: "
                       f"{self.command}")

    def _last_good_checkpoint(self, none: str) -> str:
        """'the last good checkpoint is NAME' of the run folder, or ``none`` when it has none."""
        kept = list_checkpoints(self.run_dir)
        return f"the last good checkpoint is {kept[-1].name}" if kept else none

    def _say_stop(self, line: str) -> None:
        """The one line of a failed stop, on the run's reporter (the log before set-up ends)."""
        if self.reporter is not None:
            self.reporter.line(line)
        else:  # pragma: no cover - the reporter exists once set-up is done
            log.error("%s", line)

    def _shutdown(self, trainer: Trainer | None) -> None:
        """Stop the workers, write the final checkpoint (if the loop ran), close TensorBoard,
        kill the actors and print the summary. Safe after a failed or interrupted start-up."""
        import ray

        assert self.reporter is not None and self.scalars is not None
        reporter = self.reporter
        by = self.stop_signal or "Ctrl-C"
        if self.stop_requested and self.write_error is None and self.training_error is None:
            reporter.line(f"{by}: stopping the workers, then a final checkpoint and the summary"
                          if self.loop_started else f"{by} during start-up: stopping")
        if not self.stop_reason:
            step = trainer.step if trainer is not None else self.saved_step[0]
            self.stop_reason = self._stop_rule().reason(step, self.minutes(), self.c.games) or "error"
        if self.loop_started and self.stop_requested:  # owed again after the resume
            # (left in the schedule: the final checkpoint keeps them, with their games so far)
            self.c.owed_checks = [c.to_list() for c in self.schedule.pending()]
        elif self.loop_started:  # what is still owed or running is not run: the summary says so
            self.schedule.abandon(f"the run ended ({self.stop_reason})")
        if self.coordinator is not None:
            ray.get(self.coordinator.stop.remote())
        if self.pool is not None:
            # Workers first: after they stopped nothing reaches the buffer, so the final
            # checkpoint (which drains the statistics first) and the buffer agree exactly.
            grace = self.cfg.selfplay.stop_grace_seconds
            if grace > 0 and self.stop_requested:
                reporter.line(f"self-play: up to {grace:g} s for the games in play (selfplay.stop_grace_seconds; "
                              f"a second {by} stops at once)")
            self.kept = self.pool.finish()
            self._keep_carried()
        if self.servers is not None:  # after the workers: none waits on a server any more
            self.servers.finish()
        if self.reanalyser is not None:
            self.reanalyser.finish()
        if self.loop_started and self.promoted is not None and self.write_error is None \
                and self.training_error is None and trainer is not None:
            try:
                self._checkpoint(trainer)
            except Exception as e:  # noqa: BLE001 - best effort at shutdown
                failed = write_failure(e)  # a full disk at the final checkpoint: the last is kept
                if failed is None:
                    log.exception("final checkpoint failed")
                else:
                    self._write_failed(failed)
        if self.loop_started and self.stop_requested:
            # Only what a checkpoint on disk owes runs after the resume (none was written at a
            # full disk or non-finite training): the rest is said as not run, never promised.
            on_disk = {int(x[0]) for x in self.saved_owed}
            for x in self.c.owed_checks:
                if int(x[0]) not in on_disk:
                    self.c.skipped_checks.append(f"{Check.from_list(x).describe()}: the run stopped "
                                                 f"({self.stop_reason}) and no checkpoint keeps it")
            self.c.owed_checks = [x for x in self.c.owed_checks if int(x[0]) in on_disk]
        self.scalars.flush()
        self.scalars.writer.close()
        if self.evaluator is not None:  # its private copies of model: files (it has two threads)
            try:
                ray.get(self.evaluator.close.remote(), timeout=10)
            except Exception:  # noqa: BLE001 - a lost evaluator: a later one removes its folder
                log.warning("the evaluator did not remove its model copies (a later run's will)")
        for actor in (self.evaluator, self.replay, self.coordinator):
            if actor is not None:
                ray.kill(actor)
        self.inflight = {}
        if self.loop_started:
            assert trainer is not None
            rule = self._stop_rule().reason(trainer.step, self.minutes(), self.c.games)
            finished = rule is not None
            if finished and self.write_error is not None and not self.stop_reason.startswith(str(rule)):
                self.stop_reason = f"{rule}, but {self.stop_reason}: the final checkpoint was not written"
            assert self.promoted is not None
            self._print_summary(reporter, trainer, self._snapshot(trainer), self.promoted[0], finished)
        elif self.stop_requested and self.write_error is None and self.training_error is None:
            reporter.line(f"run stopped during start-up ({by}): nothing trained this session; "
                          f"the run folder is {self.run_dir}")
            reporter.line(f"  to start it again: {self.command}")
        reporter.close()


def run_training(cfg: TrainConfig, command: str | None = None,
                 on_accepted: Callable[[], None] | None = None) -> Path:
    """Run (or resume) training with a validated config; returns the run folder. ``command``:
    the command line that resumes it (printed at start-up and in the summary; default: built
    from ``sys.argv``). ``on_accepted``: called once the run folder is accepted (no RunDirError),
    before the run writes anything into it. Raises what :meth:`Run.run` raises (RunDirError,
    PlacementError, KeyboardInterrupt, the OSError of a full disk after a clean stop)."""
    return Run(cfg, command, on_accepted).run()
