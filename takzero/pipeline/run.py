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
  final one after the workers have stopped); positions and games in replay shards written after the checkpoint count too;
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
``train.max_minutes`` counts training time over all sessions of the run.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import re
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
from takzero.io.files import atomic_write_text
from takzero.nn.quantize import CALIBRATION_KEY, CALIBRATION_POSITIONS
from takzero.pipeline.actors import (
    STARTUP_KEYS,
    Coordinator,
    EvaluatorActor,
    PublishedWeights,
    ReplayActor,
    SelfPlayPool,
    model_spec_files,
)
from takzero.pipeline.checkpoints import (
    CheckpointError,
    CheckpointWriteError,
    atomic_torch_save,
    list_checkpoints,
    load_checked,
    prune_checkpoints,
    remove_stale_temp_files,
    root_problem,
    set_aside,
)
from takzero.pipeline.gating import kept_count, match_key, tactics_plan
from takzero.pipeline.inference_server import InferenceServers
from takzero.pipeline.lineage import Lineage
from takzero.pipeline.placement import (
    check_resources,
    cluster_gpus,
    driver_node_id,
    evaluator_options,
    init_ray,
    on_node,
    selfplay_options,
)
from takzero.pipeline.progress import (
    RunReporter,
    Snapshot,
    StopRule,
    evaluation_line,
    kept_line,
    kernels_cached,
    process_started,
    resume_command,
    startup_line,
    startup_timings,
    strength_text,
    summary_lines,
    tactics_line,
)
from takzero.pipeline.reanalyse import ReanalyseWorker, reanalyse_counts, reanalyse_text
from takzero.pipeline.resume import (
    CHECKPOINTED,
    STREAMS_PER_LAUNCH,
    ResumePoint,
    RunCounters,
    RunDirError,
    find_resume_checkpoint,
    next_launch,
    recover_promoted,
    set_aside_rejected,
)
from takzero.pipeline.scalars import (
    ScalarLog,
    log_hparams,
    selfplay_scalars,
    summarise_worker_stats,
)
from takzero.pipeline.schedule import Check, EvaluationSchedule
from takzero.pipeline.tb_games import evaluation_tag, log_sample_game
from takzero.pipeline.trainer import MAX_SKIPPED_IN_A_ROW, NonFiniteError, Trainer, non_finite
from takzero.pipeline.warm_start import load_init_weights, warm_start_lines
from takzero.players.registry import spec_label

__all__ = ["Run", "RunDirError", "NonFiniteError", "run_training", "EVAL_WAIT_AT_END_S", "EVALUATION_GAMES"]

log = logging.getLogger("takzero.train")

#: Seconds the end of a run waits for a pending evaluation (its actor may wait for a lost node).
EVAL_WAIT_AT_END_S = 600.0

#: Seconds after the self-play workers were created when the evaluator actor starts even if no
#: worker has searched its first step yet (it starts as soon as one has).
EVALUATOR_START_S = 60.0

Promoted = tuple[int, dict[str, torch.Tensor]]  # (generation, CPU state dict) of a model

#: The file in the run folder that keeps the finished games of the checks still owed (``gating.
#: KeptGames`` by generation, with the check's step and seed), written as they arrive: a check
#: cut by Ctrl-C or kill -9 plays only the rest after the resume.
EVALUATION_GAMES = "evaluation_games.json"

#: The file in the run folder that keeps the self-play games in play at the last stop
#: (``selfplay.UnfinishedGames``), continued by the next start.
UNFINISHED_GAMES = "unfinished_games.npz"

#: errno values of a full disk: a write that fails with one stops the run (the last checkpoint
#: on disk is kept and resumes it)
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


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


def _stop_key(reason: str) -> str:
    """The config key a stop reason names (``reached train.total_steps=40`` -> that key)."""
    if reason.startswith("reached "):
        return reason.split()[1].split("=")[0]
    return "train.total_steps"


class Run:
    """One training run in the driver process (see the module docstring).

    :meth:`run` goes through four phases: set-up without Ray (run folder checks, the checkpoint to
    resume, trainer, reporter, TensorBoard), start-up (Ray, actors, replay reload, weights), the
    training loop, and shutdown (workers stopped, final checkpoint, summary). Ctrl-C or SIGTERM
    at any moment of :meth:`run` stops at the next safe point (between the steps of set-up and
    start-up, or at the next loop iteration); a second Ctrl-C stops at once
    (KeyboardInterrupt; the last checkpoint on disk is kept).
    """

    def __init__(self, cfg: TrainConfig, command: str | None = None,
                 on_accepted: Callable[[], None] | None = None) -> None:  # fmt: skip
        self.cfg = cfg
        #: called once the run folder is accepted (a new run, or a resume that fits), before
        #: anything in it is written (the command line keeps Hydra's files until then)
        self.on_accepted = on_accepted
        self.run_dir = Path(cfg.checkpoint_root) / cfg.run_name
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / "games").mkdir(exist_ok=True)
        except OSError as e:  # a read-only or unmakeable checkpoint_root: one line
            raise RunDirError(root_problem(cfg.checkpoint_root)
                              or f"{self.run_dir}: cannot be made ({e.strerror or e})") from None  # fmt: skip
        self.command = command or resume_command(sys.argv[1:], cfg.run_name)
        self.started = time.monotonic()
        #: wall-clock stamps of this start-up (``progress.startup_timings``), said once in
        #: train.log when the first self-play positions are in; None once said
        self.startup: dict[str, float] | None = {"run_created": time.time()}
        started = process_started()
        if started is not None:  # the command's own start: Python, imports and Hydra before this
            self.startup["process_started"] = started
        #: what the workers' stop kept and dropped (``SelfPlayPool.finish``), for the summary
        self.kept: dict[str, int] | None = None
        #: the games the last stop left in play (``UNFINISHED_GAMES``), handed to the workers
        self.carried: Any = None
        self.stop_requested = False
        self.stop_reason = ""
        self.c = RunCounters()  # the run's counters over all starts (saved in every checkpoint)
        self.pictured: dict[str, int] = {}  # TensorBoard: generation of the last sample picture
        #: games and positions in play, by self-play worker: (stream, games, positions) of its
        #: latest report (a worker's new life, a new stream, replaces its old one's)
        self.inflight: dict[float, tuple[float, float, float]] = {}
        #: the training run went non-finite (:class:`NonFiniteError`): stopped without a final
        #: checkpoint; :meth:`run` raises it at the end
        self.training_error: NonFiniteError | None = None
        #: finished games of the owed checks, by generation (``EVALUATION_GAMES``)
        self.eval_games: dict[int, dict[str, Any]] = {}
        #: the owed checks of the newest checkpoint on disk (``RunCounters.owed_checks``): what a
        #: resume will run, whatever this session does after it
        self.saved_owed: list[list[Any]] = []
        self.resume_from: ResumePoint | None = None
        #: lines for the run's log about checkpoints rejected at start-up (said once it is open)
        self.resume_notes: list[str] = []
        #: lines for the run's log about an unfinished-games file set aside (said once it is open)
        self.carried_notes: list[str] = []
        #: the failed write (a full disk) that stopped the run; :meth:`run` raises it at the end
        self.write_error: OSError | None = None
        self.launch = 0
        self.trainer: Trainer | None = None  # set once made (the lineage of best.pt needs its step)
        #: (step, generation) of the checkpoint resumed ((0, 0) for a new run): the figures
        #: before the trainer is made (:meth:`_make_trainer`)
        self.saved_step: tuple[int, int] = (0, 0)
        self.init: Any = None  # train.init_from's weights (warm_start.InitWeights), None without
        self.reporter: RunReporter | None = None
        self.scalars: ScalarLog | None = None
        #: called once the actors are created (tests use it to act on a running run)
        self.on_started: Callable[[], None] | None = None
        # Ray side (None until start-up creates them)
        self.coordinator: Any = None
        self.replay: Any = None
        self.evaluator: Any = None
        #: ``[ObjectRef]`` of the ``model:PATH`` baselines' bytes, handed with each evaluate
        self.eval_files: list[Any] = []
        self.pool: SelfPlayPool | None = None
        self.servers: InferenceServers | None = None  # selfplay.inference: server
        self.reanalyser: ReanalyseWorker | None = None  # replay.reanalyse_fraction > 0
        #: Reanalyse's counters as last read from the replay actor (``reanalyse.reanalyse_counts``)
        self.reanalysed: dict[str, int] = {"issued": 0, "applied": 0, "dropped": 0, "sampled": 0}
        self.weights = PublishedWeights()
        self.promoted: Promoted | None = None
        self.eval_task: Any = None  # the running check's Ray task (its Check: schedule.running)
        self.tactics_every, self.tactics_line = tactics_plan(cfg)  # 0: no tactics of this size
        e = cfg.evaluator
        self.schedule = EvaluationSchedule(e.gating != "off", e.baseline_every, skipped=self.c.skipped_checks,
                                           tactics_every=self.tactics_every, early_generation=e.early_baseline_generation,
                                           early_games=e.early_baseline_games)  # fmt: skip
        self.schedule.skipped = self.c.skipped_checks  # one list: the checkpoint carries it
        self.loop_started = False

    def minutes(self) -> float:
        """Training minutes over all sessions of the run."""
        return self.c.minutes + (time.monotonic() - self.started) / 60

    def lineage(self) -> Lineage:
        """The training behind the trainer's current weights: the warm-start chain's earlier
        runs (``RunCounters.earlier``) plus this run's minutes, positions, games and steps."""
        steps = self.trainer.step if self.trainer is not None else 0
        return Lineage.from_dict(self.c.earlier).plus(self.minutes(), self.c.positions, self.c.games,
                                                      steps, self.cfg.run_name)  # fmt: skip

    # -- set-up (no Ray) ---------------------------------------------------------------------

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

    def _stop_rule(self) -> StopRule:
        c = self.cfg
        return StopRule(c.train.total_steps, c.train.max_minutes, c.max_games)

    def _snapshot(self, trainer: Trainer | None, replay_positions: int = 0) -> Snapshot:
        """The progress line's figures (before the trainer is made: the checkpoint's step and
        generation)."""
        step, generation = (trainer.step, trainer.generation) if trainer is not None else self.saved_step
        return Snapshot(
            step=step,
            generation=generation,
            games=self.c.games,
            positions=self.c.positions,
            minutes=self.minutes(),
            games_in_flight=int(sum(g for _, g, _ in self.inflight.values())),
            positions_in_flight=int(sum(p for _, _, p in self.inflight.values())),
            replay_positions=replay_positions,
            reanalysed=self.reanalysed["applied"] if self.cfg.replay.reanalyse_fraction > 0 else -1,
            gating=self.c.last_gating,
            strength=self.c.last_strength,
            evaluation=self._evaluation_text(),
        )

    def _check_games(self, check: Check) -> int:
        """How many games ``check`` plays: its gating match and its baseline matches."""
        e = self.cfg.evaluator
        n = 2 * (e.games // 2) if "gating" in check.kinds else 0
        if check.baselines:
            n += len(e.baselines) * 2 * ((check.baseline_games or e.baseline_games) // 2)
        return n

    def _evaluation_text(self) -> str:
        """The progress line's evaluation field: ``'eval gen 1: 6/8 games'`` while a check runs
        (``+ tactics`` when it draws the tactics point too), ``'eval gen 1: waiting for the
        evaluator'`` while one is owed and none runs, with ``(+2 owed)`` for more; "" when none
        is owed."""
        running = self.schedule.running
        owed = sorted([c.generation for c in self.schedule.resumed] + list(self.schedule.owed))
        if running is not None:
            total = self._check_games(running)
            games = f": {min(kept_count(running.kept), total)}/{total} games" if total else ""
            text = f"eval gen {running.generation}{games}" + (" + tactics" if running.tactics else "")
            return text + (f" ({len(owed)} more owed)" if owed else "")
        if owed:
            first = self.schedule.resumed[0].generation if self.schedule.resumed else owed[-1]  # (the next to run)
            more = f" (+{len(owed) - 1} owed)" if len(owed) > 1 else ""
            return f"eval gen {first}: waiting for the evaluator{more}"
        return ""

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
        if self.tactics_line:
            say(f"  {self.tactics_line}")
        say(f"  {self._generation_plan(self.trainer.step if self.trainer is not None else self.saved_step[0])}")

    def _generation_plan(self, step: int) -> str:
        """The start-up line that says when generations come and what each is checked against:
        ``'generations: one at each checkpoint (every 200 steps), the next (gen 1) at step 200;
        baselines (uct) at gen 1 (4 games each) and every 4 generations, gating every
        generation'``."""
        cfg, e = self.cfg, self.cfg.evaluator
        every = cfg.train.checkpoint_every
        nxt = (step // every + 1) * every
        gen = (self.trainer.generation if self.trainer is not None else self.saved_step[1]) + 1
        text = (f"generations: one at each checkpoint (every {every} steps, train.checkpoint_every), "
                f"the next (gen {gen}) at step {nxt}")  # fmt: skip
        checks = []
        if e.baselines and (e.baseline_every > 0 or e.early_baseline_generation > 0):
            names = ", ".join(spec_label(b) for b in e.baselines)
            when = []
            if e.early_baseline_generation > 0:
                when.append(f"at gen {e.early_baseline_generation} ({e.early_baseline_games} games each)")
            if e.baseline_every > 0:
                when.append(f"every {e.baseline_every} generation(s) ({e.baseline_games} games each)")
            checks.append(f"Elo against the baselines ({names}) {' and '.join(when)}")
        if e.gating != "off":
            checks.append(f"gating ({e.games} games against the promoted generation) every generation")
        return text + ("; " + ", ".join(checks) if checks else "; no evaluations")

    def _finished_already(self, state: dict[str, Any] | None) -> str | None:
        if state is None:
            return None
        return self._stop_rule().reason(int(state.get("step", 0)), self.c.minutes, self.c.games)

    def _strongest(self) -> str:
        """The label of the strongest baseline: the last of ``evaluator.baselines`` (listed
        weakest first), "" without baselines."""
        baselines = self.cfg.evaluator.baselines
        return spec_label(baselines[-1]) if baselines else ""

    def _not_measured(self, best_gen: int) -> str:
        """Why the best generation has no baseline scores of its own (for the summary)."""
        every = self.cfg.evaluator.baseline_every
        early = self.cfg.evaluator.early_baseline_generation
        if not self.cfg.evaluator.baselines or (every == 0 and early == 0):
            return "no baseline checks: evaluator.baseline_every=0 or no evaluator.baselines"
        if best_gen == 0:
            return "the initial weights are not measured"
        for text in reversed(self.c.skipped_checks):  # 'gen 4, 6 baselines: ...' (schedule.py)
            m = re.match(r"gen ([\d, ]+) (?:gating and )?baselines(?: and tactics)?: ", text)
            if m and str(best_gen) in m.group(1).split(", "):
                return f"its check was not run: {text}"
        if best_gen != early and (every == 0 or best_gen % every):
            return f"evaluator.baseline_every={every}: generation {best_gen} owed no check"
        return "its check had not landed when the run stopped"

    def _print_summary(self, reporter: RunReporter, trainer: Trainer | None, snap: Snapshot,
                       best_gen: int, finished: bool, session: bool = True) -> None:  # fmt: skip
        reporter.end_bar()  # nothing is drawn after the summary
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
            best_scores=self.c.best_scores,
            resume_cmd=cmd,
            finished=finished,
            # the snapshot's training minutes less those restored at the start: on a first
            # session both figures are equal
            session_seconds=60 * (snap.minutes - self.c.minutes) if session else None,
            best_results=self.c.best_results,
            not_measured="" if self.c.best_results_generation == best_gen else self._not_measured(best_gen),
            strength_points=self.c.strength_points,
            strength_label=self._strongest(),
            skipped=self.c.skipped_checks,
            owed_again=[Check.from_list(x).describe() for x in self.c.owed_checks],
            init_from=self.c.init_from,
            lineage=(Lineage.from_dict(self.c.earlier).plus(snap.minutes, snap.positions, snap.games, snap.step,
                                                            self.cfg.run_name).describe()
                     if self.c.earlier else ""),  # fmt: skip
            reanalyse=reanalyse_text(self.reanalysed, self.cfg.replay.reanalyse_fraction),
            kept=kept_line(self.kept) if self.kept is not None else "",
        ):
            reporter.line(text)

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> Path:
        """Run or resume the training run; returns the run folder.

        Raises:
            RunDirError: the run folder cannot be resumed (nothing started).
            takzero.pipeline.placement.PlacementError: ``ray.*_resources`` the cluster lacks.
            KeyboardInterrupt: a second Ctrl-C (the last checkpoint on disk is kept).
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
        self.carried = self._load_carried()
        self.launch = next_launch(self.run_dir)
        self._write_config()
        state = self.resume_from[1] if self.resume_from else None
        self.c = RunCounters.from_checkpoint(state)
        self.schedule.skipped = self.c.skipped_checks  # one list: the checkpoint carries it
        self.saved_owed = list(self.c.owed_checks)

        done = self._finished_already(state)
        if done is not None:
            assert state is not None
            start = Snapshot(step=int(state["step"]), generation=int(state["generation"]),
                             games=self.c.games, positions=self.c.positions,
                             minutes=self.c.minutes, gating=self.c.last_gating)  # fmt: skip
            reporter = RunReporter(self.run_dir, self._stop_rule(), start, bar=False)
            reporter.line(f"run {cfg.run_name} is already finished ({done}); nothing to do")
            self.stop_reason = done
            self._print_summary(reporter, None, start, self.c.promoted_generation, finished=True, session=False)
            reporter.close()
            return
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
        if state is not None:
            reporter.line(f"resumed from {self.resume_from[0].name}: step {self.saved_step[0]}, "
                          f"generation {self.saved_step[1]}, games {self.c.games}, "
                          f"{self.c.minutes:.1f} min trained")  # fmt: skip
        if self.carried is not None:
            reporter.line(f"self-play: continuing the {self.carried.games} game(s) in play at the last stop "
                          f"({self.carried.positions:,} positions recorded so far; {UNFINISHED_GAMES})")  # fmt: skip
        for note in self.carried_notes:
            reporter.line(note)
        if not kernels_cached(Path(__file__).resolve().parent.parent):
            reporter.line("numba: compiling the search and rules kernels (cold cache: about a minute "
                          "before the first games; later starts reuse the cache)")  # fmt: skip

        # A resumed run drops the points written after its checkpoint (done again) and keeps the
        # checkpoint's own: up to the last step written before it was saved ("tb_step"; a value
        # drained at the final checkpoint can sit one step past the trainer's step).
        tb_step = int(state.get("tb_step", self.saved_step[0])) if state else -1
        writer = SummaryWriter(str(self.run_dir / "tb"), purge_step=tb_step + 1 if state else None,
                               flush_secs=30)  # fmt: skip
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

    def _make_trainer(self, state: dict[str, Any] | None) -> Trainer:
        """The trainer, restored from the checkpoint ``state`` (None: a new run, with
        ``train.init_from``'s weights when given); also ``self.trainer``."""
        cfg = self.cfg
        trainer = Trainer(cfg.train, cfg.model_config(), cfg.loss_weights(), device=cfg.device, seed=cfg.seed)
        torch.set_num_threads(cfg.train.threads)  # (as at the start: the trainer's own count)
        self._restore(trainer)
        if self.init is not None:  # generation 0 = these weights; optimiser, steps and replay fresh
            trainer.model.load_state_dict(self.init.model_state)
        self.trainer = trainer
        return trainer

    def _training_failed(self, e: NonFiniteError) -> None:
        """Training went non-finite: stop the run without a final checkpoint (the weights are
        bad), saying in one line what happened, the last good checkpoint and what to change
        (:meth:`run` raises ``e`` once the run has shut down)."""
        self.training_error = e
        self.stop_requested = True
        self.stop_reason = "training went non-finite"
        kept = list_checkpoints(self.run_dir)
        last = (f"the last good checkpoint is {kept[-1].name}" if kept
                else "no checkpoint was written")  # fmt: skip
        line = (f"stopped: {e}; no checkpoint of these weights is written and none is promoted; {last}; "
                f"lower train.lr (or check train.init_from), then resume with: {self.command}")  # fmt: skip
        if self.reporter is not None:
            self.reporter.line(line)
        else:  # pragma: no cover - the reporter exists once set-up is done
            log.error("%s", line)

    def _write_failed(self, e: OSError) -> None:
        """A write failed (the disk filled): stop the run without a final checkpoint and say, in
        one line for the log, what failed, which checkpoint is the last good one and how to go on
        (:meth:`run` raises ``e`` once the run has shut down)."""
        self.write_error = e
        self.stop_requested = True
        full = e.errno in DISK_FULL
        self.stop_reason = "the disk is full" if full else f"a write failed ({e})"
        kept = list_checkpoints(self.run_dir)
        last = (f"the last good checkpoint is {kept[-1].name}" if kept
                else "no checkpoint was written yet")  # fmt: skip
        if isinstance(e, CheckpointWriteError):
            what = str(e)
        else:
            what = f"{e.filename}: {e.strerror or e}" if e.filename else f"a write failed ({e.strerror or e})"
        line = (f"stopped: {what}; {last}; free disk space on {self.run_dir}, then resume with: "
                f"{self.command}")  # fmt: skip
        if self.reporter is not None:
            self.reporter.line(line)
        else:  # pragma: no cover - the reporter exists once set-up is done
            log.error("%s", line)

    def _catch_interrupts(self) -> Callable[[], None]:
        """SIGINT/SIGTERM set ``stop_requested`` (the run stops at the next safe point); a second
        SIGINT raises KeyboardInterrupt. Returns the function that puts the old handlers back.
        A run driven from another thread than the main one is stopped with ``stop_requested``."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

        def _on_signal(signum: int, frame: Any) -> None:
            if self.stop_requested:
                if signum == signal.SIGINT:
                    signal.signal(signal.SIGINT, signal.default_int_handler)
                    raise KeyboardInterrupt("second Ctrl-C: stopped at once (the last checkpoint is kept)")
                return
            self.stop_requested = True  # only flags here: printing could re-enter a print
            self.stop_reason = "interrupted (Ctrl-C or SIGTERM)"

        for s in old:
            signal.signal(s, _on_signal)

        def restore() -> None:
            for s, h in old.items():
                signal.signal(s, h)

        return restore

    def _start_actors(self, state: dict[str, Any] | None) -> bool:
        """Start Ray and the actors, make the trainer (:meth:`_make_trainer`, while the actors'
        processes start), reload the replay buffer, publish the weights. Returns False when a
        Ctrl-C arrived meanwhile (checked between the steps; each finishes first).

        The actors' processes start together, before the weights are published (a self-play
        worker waits for its first weights) and before the replay reload is awaited: the
        replay actor reloads its shards while the workers start their processes and load their
        kernels (their first records queue behind the reload in the replay actor), so neither
        the coordinator's start nor a resume's reload delays self-play. The evaluator starts
        later (:meth:`_evaluator_started`)."""
        import ray

        cfg = self.cfg
        assert self.reporter is not None
        stamp = self._stamp
        # Ray's start-up warnings (e.g. "Token authentication is enabled ...") go to train.log
        # only: its own console handlers are set aside while it starts.
        ray_log = logging.getLogger("ray")
        console = list(ray_log.handlers)
        to_log = self.reporter.log_handler("ray")
        for h in console:
            ray_log.removeHandler(h)
        ray_log.addHandler(to_log)
        stamp("ray_start")
        try:
            init_ray(cfg)
        finally:
            ray_log.removeHandler(to_log)
            for h in console:
                ray_log.addHandler(h)
        stamp("ray_ready")
        if self.stop_requested:
            return False
        check_resources("ray.selfplay_resources", cfg.ray.selfplay_resources or {})
        check_resources("ray.evaluator_resources", cfg.ray.evaluator_resources or {})
        # Placement (takzero.pipeline.placement): what writes the run folder stays on this node.
        here = on_node(driver_node_id())
        self.coordinator = ray.remote(Coordinator).options(num_cpus=0, **here).remote(
            self.launch * STREAMS_PER_LAUNCH, self.carried)
        self.replay = ray.remote(ReplayActor).options(num_cpus=0, **here).remote(
            cfg.replay, cfg.board.size, self.run_dir / "replay", cfg.seed, cfg.replay_opponent_top_k()
        )
        rstate = state.get("replay") if state else None
        if rstate is not None:
            self.reanalysed = reanalyse_counts(rstate)
        reloading = self.replay.load_with_stats.remote(rstate)  # awaited once self-play starts

        # The actors' processes start together (the workers wait for their first weights).
        gpus = cluster_gpus() if cfg.device != "cpu" else 0
        share = cfg.ray.worker_gpu_share if gpus else 0.0
        if cfg.selfplay.inference == "server":  # the servers own the networks (and the GPUs)
            self.servers = InferenceServers(cfg, self.coordinator, gpus)
            share = 0.0
        options = selfplay_options(cfg.ray.selfplay_resources or {}, share)
        self.pool = SelfPlayPool(cfg, options, self.coordinator, self.replay, self.servers)
        stamp("pool_created")
        if self.carried is not None:  # the workers' now (the coordinator's until they take them)
            (self.run_dir / UNFINISHED_GAMES).unlink(missing_ok=True)

        trainer = self._make_trainer(state)
        # Weights: the promoted model (best.pt) drives self-play; the latest is the trainer's.
        # Weights go to the object store once per generation; actors share the reference.
        self.promoted = self._load_best(trainer, self.c.promoted_generation, state)
        self.weights.publish(self.coordinator, "promoted", *self.promoted)
        self.weights.publish(self.coordinator, "latest", trainer.generation, _cpu_state(trainer))
        ray.get(self.coordinator.generation.remote("latest"))
        if self.stop_requested:  # (the replay actor, killed at shutdown, only reads)
            return False

        loaded, rstats, seconds = ray.get(reloading)  # the reload's counters, nothing handed in yet
        stamp("replay_reload_s", seconds)
        if rstate is not None:
            # Shards written after the checkpoint hold games that were played: they count.
            self.c.games += max(0, int(rstats["replay/games"]) - int(rstate.get("games_added", 0)))
            self.c.positions += max(0, int(rstats["replay/total_added"]) - int(rstate["total_added"]))
        elif loaded:
            self.c.games = int(rstats["replay/games"])
            self.c.positions = int(rstats["replay/total_added"])
        if loaded:
            self.reporter.line(f"replay: reloaded {loaded} positions from shards in {seconds:.1f} s")
        self.reporter.start = self._snapshot(trainer)
        self._restore_owed()
        self.reanalyser = ReanalyseWorker.start(cfg, options, self.coordinator, self.replay)
        if self.on_started is not None:
            self.on_started()
        return not self.stop_requested

    def _stamp(self, name: str, value: float | None = None) -> None:
        """Record a start-up stamp (``time.time()``, or ``value``) for the start-up timings."""
        if self.startup is not None:
            self.startup[name] = time.time() if value is None else value

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

    def _skipped_step(self, trainer: Trainer) -> None:
        """A training step was skipped (non-finite loss or gradient): say so, the first time
        and then at each power of two (the trainer stops the run at its bound,
        ``trainer.MAX_SKIPPED_IN_A_ROW`` in a row)."""
        n = trainer.skipped_steps
        if self.reporter is not None and n & (n - 1) == 0:
            self.reporter.line(f"training: step skipped ({trainer.last_skip}; {n} skipped so far, "
                               f"{trainer.skipped_in_a_row} in a row; the run stops after "
                               f"{MAX_SKIPPED_IN_A_ROW} in a row)")  # fmt: skip

    def _new_generation(self, trainer: Trainer) -> None:
        """A checkpoint step: count a generation, write the checkpoint, publish the weights,
        promote them at once with gating off, record the checks the generation owes
        (:class:`~takzero.pipeline.schedule.EvaluationSchedule`) and start the newest owed one
        if the evaluator is free."""
        cfg = self.cfg
        assert self.promoted is not None
        trainer.check_finite()  # NonFiniteError: a NaN generation is never made
        trainer.generation += 1
        latest = (trainer.generation, _cpu_state(trainer))
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

    def _restore_owed(self) -> None:
        """Owe again the checks the last session left running or owed (``RunCounters.
        owed_checks``: a Ctrl-C's final checkpoint, or any checkpoint before a kill -9), each
        with the weights of its generation's checkpoint ``ckpt_<step>.pt``, its seed and the
        games it had finished (``EVALUATION_GAMES``). A check with finished games was running
        when the stop cut it (also one that a checkpoint written before it started owes as not
        started). They run first, before any newer generation's, and none is superseded
        (``EvaluationSchedule.restore_all``: the cut ones as they are, the others as one, the
        older carried into the newest); each gets one line saying so, and each that will not run
        is recorded as skipped with its reason (the summary lists it). An older owed check that a
        newer restored one will carry needs no weights; any other whose checkpoint is gone or
        unreadable is recorded as skipped."""
        self.eval_games = self._load_eval_games()
        promoted = self.promoted[0] if self.promoted is not None else -1
        restored: list[Check] = []
        with_weights = False  # a newer check is restored with its weights
        skipped_before = len(self.c.skipped_checks)
        for entry in sorted(self.c.owed_checks, key=lambda e: -int(e[0])):
            check = Check.from_list(entry)  # with its game count: an early check stays cheap
            if check.seed is None:  # owed by a checkpoint written before seeds were kept
                check.seed = self._eval_seed(check.generation)
            saved = self.eval_games.get(check.generation, {})
            if saved.get("step") == check.step and saved.get("seed") == check.seed:
                check.kept = saved.get("matches", {})
                check.started = check.started or kept_count(check.kept) > 0  # it ran when cut
            if "gating" in check.kinds and promoted >= check.generation:
                # best.pt, newer than the checkpoint, holds a promotion of it or of a later one
                check.kinds = tuple(k for k in check.kinds if k != "gating")
                self.c.skipped_checks.append(f"gen {check.generation} gating: already decided before the stop "
                                             f"(generation {promoted} promoted)")  # fmt: skip
                if not check.kinds:
                    continue
            path = self.run_dir / f"ckpt_{check.step:09d}.pt"
            try:
                d = load_checked(path, require_checksum=True)
                if int(d.get("generation", -1)) != check.generation:
                    raise CheckpointError(f"{path.name} holds generation {d.get('generation')}")
                check.weights = d["model_state"]
            except (CheckpointError, OSError) as e:
                if not (with_weights and not check.started):  # (else carried into the newer one)
                    self.c.skipped_checks.append(f"{check.describe()}: cut by the last stop, and its weights are "
                                                 f"gone ({e}; train.keep_checkpoints)")  # fmt: skip
                    continue
            with_weights = with_weights or (check.weights is not None and not check.started)
            restored.append(check)
        assert self.reporter is not None
        for check in self.schedule.restore_all(restored):
            n = kept_count(check.kept)
            if n:
                how = f"(cut by the last stop) runs again, keeping the {n} game(s) it had finished"
            else:
                how = "(owed at the last stop) runs"
            carried = f" (with the baselines of gen {', '.join(map(str, check.carried))})" if check.carried else ""
            self.reporter.line(f"evaluation: {check.describe()}{carried} {how}, before any newer generation's")
        for text in self.c.skipped_checks[skipped_before:]:
            self.reporter.line(f"evaluation not run: {text}")
        self.c.owed_checks = []

    def _load_carried(self) -> Any:
        """The games the last stop left in play (``UNFINISHED_GAMES``, a
        ``selfplay.UnfinishedGames``), None when there are none. A file that cannot be read is
        set aside as ``<name>.rejected`` with a line (the run goes on without those games)."""
        from takzero.pipeline.selfplay import UnfinishedGames

        path = self.run_dir / UNFINISHED_GAMES
        if not path.exists():
            return None
        try:
            games = UnfinishedGames.load(path, self.cfg.board.size)
        except (OSError, ValueError) as e:
            try:
                kept = f"the file is now {set_aside(path).name}"
            except OSError as moved:
                kept = f"it could not be set aside ({moved.strerror or moved})"
            note = f"{path.name} cannot be read ({e}): the games in play at the last stop are not continued ({kept})"
            self.carried_notes.append(note)
            log.warning("%s", note)
            return None
        return games if games.games else None

    def _keep_carried(self) -> None:
        """After the workers' stop: write the games they left in play, and the carried ones no
        worker took, to ``UNFINISHED_GAMES`` for the next start (the counts of ``self.kept``
        follow: a failed write moves them to the dropped ones, with a line)."""
        import ray

        from takzero.pipeline.selfplay import UnfinishedGames

        assert self.pool is not None and self.kept is not None and self.reporter is not None
        parts = [self.pool.carried] if self.pool.carried is not None else []
        try:
            left = ray.get(self.coordinator.carried_left.remote(), timeout=30)
        except Exception:  # noqa: BLE001 - a lost coordinator: its games are gone with it
            left = None
        if left is not None:
            parts.append(left)
            self.kept["stored_games"] += left.games
            self.kept["stored_positions"] += left.positions
        games = UnfinishedGames.concat(parts)
        if not games.games:
            return
        path = self.run_dir / UNFINISHED_GAMES
        try:
            games.save(path)
        except OSError as e:
            self.kept["unfinished_games"] += self.kept["stored_games"]
            self.kept["unfinished_positions"] += self.kept["stored_positions"]
            self.kept["stored_games"] = self.kept["stored_positions"] = 0
            self.reporter.line(f"self-play: the {games.games} game(s) in play could not be kept "
                               f"({path}: {e.strerror or e}): dropped")  # fmt: skip

    def _load_eval_games(self) -> dict[int, dict[str, Any]]:
        """The finished games of owed checks kept in ``EVALUATION_GAMES`` ({} when there is no
        such file or it cannot be read: the checks are then played whole)."""
        path = self.run_dir / EVALUATION_GAMES
        try:
            data = json.loads(path.read_text())
            return {int(g): v for g, v in data.items() if isinstance(v, dict)}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, AttributeError) as e:
            log.warning("%s cannot be read (%s): the owed checks are played whole", path, e)
            return {}

    def _save_eval_games(self) -> None:
        atomic_write_text(self.run_dir / EVALUATION_GAMES,
                          json.dumps({str(g): v for g, v in sorted(self.eval_games.items())}))  # fmt: skip

    def _take_eval_games(self) -> None:
        """Take the games the evaluator finished since the last call (``Coordinator.
        take_eval_games``) into the running check's ``kept`` and ``EVALUATION_GAMES`` (written
        at once): a check cut by Ctrl-C or kill -9 plays only the rest after the resume."""
        import ray

        check = self.schedule.running
        if self.coordinator is None:
            return
        games = ray.get(self.coordinator.take_eval_games.remote())
        if not games or check is None:
            return
        for generation, key, index, score, ptn in games:
            if generation != check.generation:
                continue
            match = check.kept.setdefault(key, {"games": self._match_games(check, key), "done": {}})
            match["done"][str(index)] = [score, ptn]
        self.eval_games[check.generation] = {"step": check.step, "seed": check.seed, "matches": check.kept}
        self._save_eval_games()

    def _match_games(self, check: Check, key: str) -> int:
        """The game count of the match ``key`` (``gating.match_key``) of ``check``."""
        e = self.cfg.evaluator
        if key.startswith("gating"):
            return 2 * (e.games // 2)
        return 2 * ((check.baseline_games or e.baseline_games) // 2)

    def _evaluator_started(self, now: bool = False) -> bool:
        """Whether the evaluator actor exists; it is created once self-play is under way (the
        first worker's first step drained: its process would take CPU from the workers'
        start) or ``EVALUATOR_START_S`` after the workers were created, or at once with ``now``
        (the run's end: the owed checks are not left for want of an evaluator)."""
        if self.evaluator is None and self.pool is not None:
            waited = time.time() - (self.startup or {}).get("pool_created", 0.0)
            if now or self.startup is None or waited > EVALUATOR_START_S:
                import ray

                files = model_spec_files(self.cfg.evaluator.baselines)
                # The coordinator and the files go with each evaluate, not to the constructor:
                # Ray keeps no handle or object-store argument of a restarted actor's
                # constructor (ray-project/ray#53727) and prints an error line saying so.
                self.eval_files = [ray.put(files)] if files else []
                self.evaluator = (
                    ray.remote(EvaluatorActor)  # two threads: close() runs beside an evaluation
                    .options(max_concurrency=2, **evaluator_options(self.cfg.ray.evaluator_resources or {}))
                    .remote(self.cfg)
                )
        return self.evaluator is not None

    def _start_check(self, now: bool = False) -> None:
        """Start the next check (:meth:`EvaluationSchedule.next`) if the evaluator is free (``now``:
        create the evaluator at once if it is not there yet, :meth:`_evaluator_started`)."""
        if self.eval_task is not None or not self._evaluator_started(now and self.schedule.pending() != []):
            return
        check = self.schedule.next()
        if check is None:
            return
        assert self.promoted is not None
        if check.seed is None:
            check.seed = self._eval_seed(check.generation)
        gating_key = match_key("gating", f"gen {self.promoted[0]}")
        kept = {k: v for k, v in check.kept.items() if not k.startswith("gating") or k == gating_key}
        check.kept = kept  # (games against another incumbent are not this gating match's)
        self.eval_task = self.evaluator.evaluate.remote(
            check.generation, self.weights.ref(check.weights),
            self.promoted[0], self.weights.ref(self.promoted[1]), check.baselines,
            seed=check.seed, tactics=check.tactics,
            baseline_games=check.baseline_games, kept=kept, progress=self.coordinator, model_files=self.eval_files,
        )  # fmt: skip

    def _poll_evaluation(self, trainer: Trainer, timeout: float = 0.0) -> bool:
        """Apply the running check's result if it is ready within ``timeout`` seconds, then
        start the newest owed one; True when no check is running or owed any more."""
        import ray

        self._start_check()
        if self.eval_task is None:
            return True
        if not ray.wait([self.eval_task], timeout=timeout)[0]:
            return False
        check = self.schedule.running
        self._take_eval_games()  # its last games too: a kill before the next checkpoint replays none
        result = self._eval_result(self.eval_task, check)
        self.eval_task = None
        if result is None:
            self.schedule.finished(lost="the evaluator was lost or did not answer")
        else:
            self.schedule.finished()
            self._gating(result, trainer, check)
        self._start_check()
        return self.eval_task is None

    def _last_evaluation(self, trainer: Trainer) -> None:
        """At the normal end, let the running check and the newest owed one finish (at most
        EVAL_WAIT_AT_END_S in all) so the run ends with a gating decision and the last
        generation's strength; after Ctrl-C, stop at once (the final checkpoint keeps the work;
        the summary names the checks not run)."""
        self._start_check(now=not self.stop_requested)  # (an evaluator not made yet is made now)
        if self.eval_task is None or self.stop_requested:
            return
        assert self.reporter is not None
        self.reporter.line("waiting for the last evaluation to finish (Ctrl-C skips it; the "
                           "final checkpoint follows)")  # fmt: skip
        end = time.monotonic() + EVAL_WAIT_AT_END_S
        while not self.stop_requested and time.monotonic() < end:
            if self._poll_evaluation(trainer, timeout=1.0):
                break

    def _shutdown(self, trainer: Trainer | None) -> None:
        """Stop the workers, write the final checkpoint (if the loop ran), close TensorBoard,
        kill the actors and print the summary. Safe after a failed or interrupted start-up."""
        import ray

        assert self.reporter is not None and self.scalars is not None
        reporter = self.reporter
        if self.stop_requested and self.write_error is None and self.training_error is None:
            reporter.line("Ctrl-C: stopping the workers, then a final checkpoint and the summary"
                          if self.loop_started else "Ctrl-C during start-up: stopping")  # fmt: skip
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
                              "a second Ctrl-C stops at once)")  # fmt: skip
            self.kept = self.pool.finish()
            self._keep_carried()
        if self.servers is not None:  # after the workers: none waits on a server any more
            self.servers.finish()
        if self.reanalyser is not None:
            self.reanalyser.finish()
        if self.loop_started and self.promoted is not None and self.write_error is None \
                and self.training_error is None and trainer is not None:  # fmt: skip
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
                                                 f"({self.stop_reason}) and no checkpoint keeps it")  # fmt: skip
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
            reporter.line(f"run stopped during start-up (Ctrl-C): nothing trained this session; "
                          f"the run folder is {self.run_dir}")  # fmt: skip
            reporter.line(f"  to start it again: {self.command}")
        reporter.close()

    def _eval_seed(self, generation: int) -> int:
        """Seed of one evaluation's openings and sampling: new for every (launch, generation);
        drawn when the check is owed and kept with it (``Check.seed``), so a check cut by a stop
        plays the same openings when it runs again."""
        s = np.random.SeedSequence([self.cfg.seed, self.launch, generation]).generate_state(1)
        return int(s[0])

    def _done(self, trainer: Trainer) -> bool:
        if self.stop_requested:
            return True
        reason = self._stop_rule().reason(trainer.step, self.minutes(), self.c.games)
        if reason is not None:
            self.stop_reason = reason
            return True
        return False

    # -- pieces of the loop ------------------------------------------------------------------

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
            found: Promoted = (trainer.generation, _cpu_state(trainer))
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
        return torch.from_numpy(np.array(states)) if len(states) >= 64 else None  # a writable copy (ray.get gives read-only arrays)

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
                               f"(lineage): {path}")  # fmt: skip
        return path

    def _promote(self, promoted: Promoted) -> None:
        """Write ``best.pt`` and publish the promoted weights. Raises NonFiniteError for weights
        with NaN or inf (never promoted)."""
        bad = non_finite(promoted[1])
        if bad:
            raise NonFiniteError(f"generation {promoted[0]} was to be promoted but its weights are not finite "
                                 f"({', '.join(bad[:3])})")  # fmt: skip
        self._save_best(*promoted)
        self.weights.publish(self.coordinator, "promoted", *promoted)

    def _checkpoint(self, trainer: Trainer) -> None:
        """Drain the workers' statistics (from the replay actor), write every pending scalar and
        flush TensorBoard, then write ``ckpt_<step>.pt`` (trainer, replay counters and RNG, run
        counters, the promoted weights) and prune old checkpoints."""
        import ray

        assert self.scalars is not None and self.promoted is not None
        trainer.check_finite()  # NonFiniteError: never a checkpoint of NaN weights
        self._take_eval_games()  # the running check's games so far (kept beside the checkpoint)
        # One replay-actor call: the statistics drained and the buffer's state agree exactly.
        stats, games, rstate = ray.get(self.replay.drain_with_state.remote())
        self._drain(trainer.step, (stats, games))
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
        owed = {int(c[0]) for c in self.c.owed_checks}
        if set(self.eval_games) - owed:  # the games of checks no checkpoint owes any more
            self.eval_games = {g: v for g, v in self.eval_games.items() if g in owed}
            self._save_eval_games()

    def _gating(self, result: dict[str, Any], trainer: Trainer, check: Check | None = None) -> None:
        """Log an evaluation's scores and games at the step of the generation it measured
        (``check.step``; the trainer's step without a check), print one line per match
        (:func:`~takzero.pipeline.progress.evaluation_line`), keep the latest Elo against the
        strongest baseline for the progress line, and apply the gating decision to ``promoted``."""
        assert self.scalars is not None and self.reporter is not None and self.promoted is not None
        step = check.step if check is not None else trainer.step
        for k, v in result.get("scalars", {}).items():
            self.scalars.add(k, v, step, exact=True)
        for name, text in result.get("ptn", {}).items():
            path = self.run_dir / "games" / name
            atomic_write_text(path, text)
            log_sample_game(self.scalars.writer, evaluation_tag(name), text, step)
        cand_gen = result["candidate_generation"]
        gating_on = result.get("decision") is not None and self.cfg.evaluator.gating != "off"
        records = result.get("matches", [])
        for rec in records:
            decision = result["decision"] if rec["kind"] == "gating" and gating_on else None
            self.reporter.line(evaluation_line(cand_gen, rec, decision))
            if rec.get("error"):  # a tei: engine that failed: the check is not lost silently
                self.c.skipped_checks.append(f"gen {cand_gen} baseline {rec['opponent']}: failed ({rec['error']})")
        if result.get("tactics"):
            self.reporter.line(tactics_line(cand_gen, result["tactics"]))
        baselines = {r["opponent"]: r for r in records if r["kind"] == "baseline" and not r.get("error")}
        strongest = baselines.get(self._strongest())
        if strongest is not None:
            self.c.last_strength = strength_text(cand_gen, strongest)
            point = [cand_gen, strongest["elo"], strongest["elo_lower"], strongest["elo_upper"]]
            self.c.strength_points = [*self.c.strength_points, point][-3:]
        scores = {k.removeprefix("score/vs_"): v for k, v in result.get("scalars", {}).items()
                  if k.startswith("score/vs_")}  # fmt: skip
        lines = {k: evaluation_line(cand_gen, r) for k, r in baselines.items()}
        if gating_on:
            self.c.gating_decisions += 1
            if result["decision"] == "promote":
                self.promoted = (cand_gen, result["candidate_weights"])
                self._promote(self.promoted)
                self.c.best_scores = scores  # the promoted generation's own (none: unmeasured)
                if scores:  # else the summary keeps the last measured ones and says why
                    self.c.best_results, self.c.best_results_generation = lines, cand_gen
            self.c.last_gating = f"gen {cand_gen} {result['decision']} ({result.get('summary', '')})"
            self.scalars.writer.add_text("gating", self.c.last_gating, step)
            self.scalars.add("gating/promoted_generation", self.promoted[0], step, exact=True)
            self.reporter.line(f"gating: {self.c.last_gating}")
        elif (self.promoted[0] == cand_gen or self.cfg.evaluator.gating == "off") and scores:
            # (gating off: every generation is promoted; these stay the last measured ones)
            if self.promoted[0] == cand_gen:
                self.c.best_scores = scores
            self.c.best_results, self.c.best_results_generation = lines, cand_gen

    def _eval_result(self, task: Any, check: Check | None) -> dict[str, Any] | None:
        """The evaluation's result with the candidate's weights (kept here in ``check``, not
        sent back), or None when the evaluator was lost with its node or process (Ray restarts
        it; the newest owed check runs next) or has not answered."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        try:
            result = ray.get(task, timeout=0)
        except (RayActorError, GetTimeoutError) as e:
            log.warning("evaluation dropped: the evaluator was lost or did not answer (%s)", type(e).__name__)
            return None
        if check is not None:
            result["candidate_weights"] = check.weights
        return result

    def _drain(self, step: int, drained: tuple[list[dict[str, float]], list[str]] | None = None) -> None:
        """Write the self-play statistics and sample games the replay actor received since the
        last call (the workers hand them in with their records)."""
        import ray

        assert self.scalars is not None
        add = self.scalars.add
        stats, games = drained if drained is not None else ray.get(self.replay.drain.remote())
        for s in stats:  # games and positions in flight: the latest report of each worker
            if "inflight/stream" in s:  # by worker: a worker's new life (a new stream) replaces its old one's
                worker = s.get("inflight/worker", s["inflight/stream"])
                known = self.inflight.get(worker)
                if known is None or s["inflight/stream"] >= known[0]:
                    self.inflight[worker] = (s["inflight/stream"], s["inflight/games"], s["inflight/positions"])
            if self.startup is not None and STARTUP_KEYS[-1] in s:  # the first worker's first step
                assert self.reporter is not None
                self.startup.update({k: s[k] for k in STARTUP_KEYS})
                timings = startup_timings(self.startup)
                self.reporter.line(f"start-up timings (s): {json.dumps(timings)}", console=False)
                self.reporter.line(startup_line(timings, self.resume_from is not None))
                self.startup = None
        stats = [{k: v for k, v in s.items() if not k.startswith(("inflight/", "startup/"))} for s in stats]
        if stats:
            summary = summarise_worker_stats(stats)
            self.c.games += int(summary.get("count/games", 0))
            self.c.positions += int(summary.get("count/positions", 0))
            for k, v in summary.items():
                if k.startswith("count/"):
                    self.c.counters[k] = self.c.counters.get(k, 0.0) + v
                else:
                    add(k, v, step)
            for k, v in selfplay_scalars(self.c.counters, self.c.games, self.c.positions).items():
                add(k, v, step)
        if games:
            path = self.run_dir / "games" / "selfplay.ptn"
            with open(path, "a") as f:
                for g in games:
                    f.write(g.rstrip() + "\n\n")
            log_sample_game(self.scalars.writer, "selfplay", games[-1], step, pictured=self.pictured)


def _cpu_state(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu").clone() for k, v in trainer.model.state_dict().items()}


def run_training(cfg: TrainConfig, command: str | None = None,
                 on_accepted: Callable[[], None] | None = None) -> Path:  # fmt: skip
    """Run (or resume) training with a validated config; returns the run folder. ``command``:
    the command line that resumes it (printed at start-up and in the summary; default: built
    from ``sys.argv``). ``on_accepted``: called once the run folder is accepted (no RunDirError),
    before the run writes anything into it. Raises what :meth:`Run.run` raises (RunDirError,
    PlacementError, KeyboardInterrupt, the OSError of a full disk after a clean stop)."""
    return Run(cfg, command, on_accepted).run()
