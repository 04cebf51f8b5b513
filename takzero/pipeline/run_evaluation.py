"""A training run's evaluation loop: the evaluator actor (made once self-play is under way), the
checks each generation owes (``schedule.py`` says which and when) started when it is free,
their results applied (the gating decision, the Elo against the baselines, the tactics point,
their lines and TensorBoard points at the generation's step), the finished games of the check
running kept in ``EVALUATION_GAMES`` as they arrive, and the checks a stop cut or left owed
run again after the resume. The match play itself is ``gating.py``'s."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import numpy as np

from takzero.io.files import atomic_write_text
from takzero.pipeline.checkpoints import CheckpointError, load_checked
from takzero.pipeline.evaluator_actor import EvaluatorActor, model_spec_files
from takzero.pipeline.gating import kept_count, match_key
from takzero.pipeline.placement import evaluator_options
from takzero.pipeline.progress import evaluation_line, strength_text, tactics_line
from takzero.pipeline.run_checkpoints import RunCheckpoints
from takzero.pipeline.run_reporting import RunReporting
from takzero.pipeline.schedule import Check
from takzero.pipeline.tb_games import evaluation_tag, log_sample_game
from takzero.pipeline.trainer import Trainer

log = logging.getLogger("takzero.train")

#: Seconds the end of a run waits for a pending evaluation (its actor may wait for a lost node).
EVAL_WAIT_AT_END_S = 600.0

#: Seconds after the self-play workers were created when the evaluator actor starts even if no
#: worker has searched its first step yet (it starts as soon as one has).
EVALUATOR_START_S = 60.0

#: The file in the run folder that keeps the finished games of the checks still owed (``gating.
#: KeptGames`` by generation, with the check's step and seed), written as they arrive: a check
#: cut by Ctrl-C or kill -9 plays only the rest after the resume.
EVALUATION_GAMES = "evaluation_games.json"


class RunEvaluation(RunCheckpoints, RunReporting):
    """The run's evaluator and its checks (a promotion writes ``best.pt``: :class:`RunCheckpoints`)."""

    def _eval_seed(self, generation: int) -> int:
        """Seed of one evaluation's openings and sampling: new for every (launch, generation);
        drawn when the check is owed and kept with it (``Check.seed``), so a check cut by a stop
        plays the same openings when it runs again."""
        s = np.random.SeedSequence([self.cfg.seed, self.launch, generation]).generate_state(1)
        return int(s[0])

    def _match_games(self, check: Check, key: str) -> int:
        """The game count of the match ``key`` (``gating.match_key``) of ``check``."""
        e = self.cfg.evaluator
        if key.startswith("gating"):
            return 2 * (e.games // 2)
        return 2 * ((check.baseline_games or e.baseline_games) // 2)

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
                                             f"(generation {promoted} promoted)")
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
                                                 f"gone ({e}; train.keep_checkpoints)")
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
                          json.dumps({str(g): v for g, v in sorted(self.eval_games.items())}))

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

    def _forget_eval_games(self) -> None:
        """Drop the finished games of checks that no checkpoint owes any more (after a
        checkpoint: ``RunCounters.owed_checks``) from ``EVALUATION_GAMES``."""
        owed = {int(c[0]) for c in self.c.owed_checks}
        if set(self.eval_games) - owed:  # the games of checks no checkpoint owes any more
            self.eval_games = {g: v for g, v in self.eval_games.items() if g in owed}
            self._save_eval_games()

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
        )

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
                           "final checkpoint follows)")
        end = time.monotonic() + EVAL_WAIT_AT_END_S
        while not self.stop_requested and time.monotonic() < end:
            if self._poll_evaluation(trainer, timeout=1.0):
                break

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
                  if k.startswith("score/vs_")}
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
