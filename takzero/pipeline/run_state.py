"""What every part of a training run shares: :class:`RunState`, the state of one run in the
driver process (its config and folder, its counters over all starts, the Ray actors once made,
the promoted weights, the evaluation schedule), which the run's parts read and write, and the
type of a promoted model.

:class:`takzero.pipeline.run.Run` is this state with one part per concern over it, each a
class of its own module that names the parts it uses as its bases:

====================  ========================================================================
``run_reporting``     what the run tells its user: start-up lines, the progress line's figures,
                      the summary (the text itself is ``progress.py``'s)
``run_checkpoints``   the trainer restored, checkpoints written, ``best.pt``, weight snapshots
``run_evaluation``    the evaluator actor, the checks it runs and their results (gating, Elo,
                      tactics), the checks owed across a stop
``run_actors``        Ray, the actors and the self-play pool: start-up, the workers' reports,
                      the games in play carried across a stop
``run``               the coordinator: the phases of a run, the training loop, new generations,
                      checkpoints, the failed stops and shutdown
====================  ========================================================================
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from takzero.config import TrainConfig
from takzero.pipeline.actors import PublishedWeights, SelfPlayPool
from takzero.pipeline.checkpoints import root_problem
from takzero.pipeline.gating import tactics_plan
from takzero.pipeline.inference_server import InferenceServers
from takzero.pipeline.lineage import Lineage
from takzero.pipeline.progress import RunReporter, process_started, resume_command
from takzero.pipeline.reanalyse import ReanalyseWorker
from takzero.pipeline.resume import ResumePoint, RunCounters, RunDirError
from takzero.pipeline.scalars import ScalarLog
from takzero.pipeline.schedule import EvaluationSchedule
from takzero.pipeline.trainer import NonFiniteError, Trainer

Promoted = tuple[int, dict[str, torch.Tensor]]  # (generation, CPU state dict) of a model


def cpu_state(trainer: Trainer) -> dict[str, torch.Tensor]:
    """A CPU copy of the trainer's weights (detached tensors, by parameter name)."""
    return {k: v.detach().to("cpu").clone() for k, v in trainer.model.state_dict().items()}


class RunState:
    """The state of one training run in the driver process, shared by its parts (see the
    module docstring); :meth:`__init__` makes the run folder (RunDirError when it cannot)."""

    def __init__(self, cfg: TrainConfig, command: str | None = None,
                 on_accepted: Callable[[], None] | None = None) -> None:
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
                              or f"{self.run_dir}: cannot be made ({e.strerror or e})") from None
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
        #: what asked for the stop: "Ctrl-C" (SIGINT) or "SIGTERM" ("" before any signal)
        self.stop_signal = ""
        #: the run's handler of SIGINT and SIGTERM (``Run._catch_interrupts``), put back after
        #: Ray's start (``ray.init`` installs its own for SIGTERM); None: not installed
        self.signal_handler: Callable[[int, Any], None] | None = None
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
        ev = cfg.evaluator
        self.schedule = EvaluationSchedule(ev.gating != "off", ev.baseline_every, skipped=self.c.skipped_checks,
                                           tactics_every=self.tactics_every,
                                           early_generation=ev.early_baseline_generation,
                                           early_games=ev.early_baseline_games)
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
                                                      steps, self.cfg.run_name)
