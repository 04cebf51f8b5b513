"""What a training run tells its user, as figures of the run's state: the start-up lines, the
progress line's snapshot (with the evaluation field), the stop rule, the end summary (with why
the best generation may have no baseline scores) and the skipped-step line. The text of every
line is ``progress.py``'s; this part gathers what the lines say."""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

from takzero.io.version import program_version
from takzero.pipeline.gating import kept_count
from takzero.pipeline.lineage import Lineage
from takzero.pipeline.progress import RunReporter, Snapshot, StopRule, kept_line, summary_lines
from takzero.pipeline.reanalyse import reanalyse_text
from takzero.pipeline.run_state import RunState
from takzero.pipeline.schedule import Check
from takzero.pipeline.trainer import MAX_SKIPPED_IN_A_ROW, Trainer
from takzero.players.registry import spec_label

#: What a start-up costs, in minutes (Ray, the actors, the workers' first positions: 15 s on a
#: quiet machine, 100 s on a loaded core): a resume with less of ``train.max_minutes`` left
#: would spend it all on starting, so it does not start (``RunReporting._budget_spent``).
STARTUP_MINUTES = 1.0


def worker_cpu_line(workers: int, cpus: float, local: bool) -> str:
    """The start-up warning when ``selfplay.workers`` is more than the CPUs Ray has (each
    self-play worker takes one; nothing else of a run does): how many play and what becomes of
    the rest (on a local Ray they never start; on a cluster they start when a node with free
    CPUs joins); "" when every worker has its CPU. ``cpus``: Ray's (``ray.cluster_resources``)."""
    fit = int(cpus)
    if workers <= fit:
        return ""
    rest = workers - fit
    if local:
        then = (f"the other {rest} never start on this machine and play no games (lower selfplay.workers, "
                f"or raise ray.num_cpus to share the cores)")
    else:
        then = f"the other {rest} wait until nodes with free CPUs join the cluster (or lower selfplay.workers)"
    return f"warning: selfplay.workers={workers} but Ray has {fit} CPU(s), one per worker: {fit} worker(s) play, {then}"


def _stop_key(reason: str) -> str:
    """The config key a stop reason names (``reached train.total_steps=40``, ``train.max_minutes=30
    is nearly spent ...`` -> that key); ``train.total_steps`` when it names none."""
    m = re.search(r"\b(train\.total_steps|train\.max_minutes|max_games)=", reason)
    return m.group(1) if m else "train.total_steps"


class RunReporting(RunState):
    """The run's lines and figures: start-up, progress, summary."""

    def _stop_rule(self) -> StopRule:
        c = self.cfg
        return StopRule(c.train.total_steps, c.train.max_minutes, c.max_games)

    def _finished_already(self, state: dict[str, Any] | None) -> str | None:
        """The stop rule a resumed run has reached already (``reached train.total_steps=80``),
        from the checkpoint ``state`` and the run counters; None for a new run or one to go on."""
        if state is None:
            return None
        return self._stop_rule().reason(int(state.get("step", 0)), self.c.minutes, self.c.games)

    def _budget_spent(self, state: dict[str, Any] | None) -> str | None:
        """Why a resumed run does not start although no stop rule is reached: what is left of
        ``train.max_minutes`` (training minutes over all sessions, start-ups included) is less
        than a start-up costs (:data:`STARTUP_MINUTES`), e.g. ``'train.max_minutes=30 is
        nearly spent (29.8 min trained, 0.2 min left)'``. None for a new run (a short run is
        asked for, and starts), without ``train.max_minutes``, or with a minute or more left."""
        limit = self.cfg.train.max_minutes
        if state is None or limit <= 0 or limit - self.c.minutes >= STARTUP_MINUTES:
            return None
        left = limit - self.c.minutes
        return f"train.max_minutes={limit:g} is nearly spent ({self.c.minutes:.1f} min trained, {left:.1f} min left)"

    def _further_command(self, key: str, value: str) -> str:
        """The run's command with ``key`` set to ``value`` (any earlier value of it dropped)."""
        kept = [t for t in shlex.split(self.command) if not t.lstrip("+").startswith(f"{key}=")]
        return f"{shlex.join(kept)} {key}={value}"

    def _nothing_to_do_line(self, why: str, snap: Snapshot) -> str:
        """The one line of a resume that does not start (``why``: :meth:`_finished_already` or
        :meth:`_budget_spent`): what is spent, that nothing started, and a command that trains
        further (the spent limit raised by its own size again, minutes by at least 5)."""
        key = _stop_key(why)
        rule = self._stop_rule()
        if key == "train.max_minutes":
            more = f"{math.ceil(snap.minutes + max(rule.max_minutes, 5 * STARTUP_MINUTES)):d}"
        elif key == "max_games":
            more = str(snap.games + rule.max_games)
        else:
            more = str(snap.step + rule.total_steps)
        if why.startswith("reached "):
            head = f"run {self.cfg.run_name} is already finished ({why})"
        else:
            head = (f"run {self.cfg.run_name}: {why}, less than a start-up takes "
                    f"(about {STARTUP_MINUTES:g} min)")
        return f"{head}; nothing started. To train further, raise it, e.g.: {self._further_command(key, more)}"

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
        say(f"takzero run {cfg.run_name} ({'resumed' if resumed else 'new'}, start {self.launch + 1}, "
            f"code {program_version()})")  # which code each start ran: train.log keeps every start
        say(f"  run folder: {self.run_dir.resolve()}")
        say(f"  log file:   {self.run_dir / 'train.log'}   TensorBoard: tensorboard --logdir {self.run_dir / 'tb'}")
        say(f"  {self._stop_rule().describe()}; a checkpoint every {cfg.train.checkpoint_every} steps")
        say(f"  to resume after a crash or Ctrl-C: {self.command}")
        say(f"  {cfg.board.size}x{cfg.board.size}, {cfg.selfplay.workers} self-play worker(s) x "
            f"{cfg.selfplay.games_per_worker} games, {cfg.mcts.simulations} simulations, "
            f"batch {cfg.train.batch_size}, training starts at {cfg.replay.min_positions} positions")
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
                f"the next (gen {gen}) at step {nxt}")
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
                       best_gen: int, finished: bool, session: bool = True) -> None:
        reporter.end_bar()  # nothing is drawn after the summary
        reason = self.stop_reason or "stopped"
        cmd = self.command
        if finished:
            rule = self._stop_rule().reason(snap.step, snap.minutes, snap.games)
            if rule is not None and reason.startswith("interrupted"):
                # a signal, then the rule reached while stopping (the minutes of the stop grace
                # and the final checkpoint, the games finished in it): the rule names the key
                reason = f"{rule} while stopping after a {self.stop_signal or 'Ctrl-C'}"
            cmd = self._further_command(_stop_key(reason), "<more>")
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
                     if self.c.earlier else ""),
            reanalyse=reanalyse_text(self.reanalysed, self.cfg.replay.reanalyse_fraction),
            kept=kept_line(self.kept) if self.kept is not None else "",
        ):
            reporter.line(text)

    def _skipped_step(self, trainer: Trainer) -> None:
        """A training step was skipped (non-finite loss or gradient): say so, the first time
        and then at each power of two (the trainer stops the run at its bound,
        ``trainer.MAX_SKIPPED_IN_A_ROW`` in a row)."""
        n = trainer.skipped_steps
        if self.reporter is not None and n & (n - 1) == 0:
            self.reporter.line(f"training: step skipped ({trainer.last_skip}; {n} skipped so far, "
                               f"{trainer.skipped_in_a_row} in a row; the run stops after "
                               f"{MAX_SKIPPED_IN_A_ROW} in a row)")
