"""Which evaluations a run owes, and which it runs next (no Ray here: the run's driver asks).

Every new generation owes checks: ``gating`` (unless ``evaluator.gating=off``), ``baselines``
(every ``evaluator.baseline_every`` generations, and at ``evaluator.early_baseline_generation``:
a cheap first point of the Elo curve, of ``evaluator.early_baseline_games`` games per baseline)
and ``tactics`` (the tactics curve, every ``evaluator.tactics_every`` generations). An owed check is
never dropped because the
evaluator is busy: when it is free, :meth:`EvaluationSchedule.next` hands out the newest owed
generation, with the baseline and tactics checks of any older owed generation carried into it
(the curves get their point, one generation later); what was not run is recorded with the reason
(:attr:`EvaluationSchedule.skipped`): an older generation's gating superseded by a newer one, a
baseline check measured at a later generation, or the run ending first (:meth:`abandon`). A run
stopped by Ctrl-C keeps its running and owed checks instead (:meth:`take_pending`; every
checkpoint keeps them too, :meth:`pending`, so a kill -9 loses none) and owes them again after the
resume (:meth:`restore_all`; :meth:`Check.to_list` and :meth:`Check.from_list` are its form in the
checkpoint): the cut check (the one that was running) and the newest owed one, with the older
owed ones carried into it as :meth:`next` would, run first, before any newer generation's, and
are never superseded; so every check the resume says will run does run (or the summary lists it).
Each check keeps the trainer step of its generation, where its
TensorBoard points go, and the game count of its baseline matches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from takzero.nn.quoting import short_repr

__all__ = ["KINDS", "Check", "EvaluationSchedule", "owed_kinds"]

#: The kinds of check, in the order a check lists them.
KINDS = ("gating", "baselines", "tactics")


def owed_kinds(generation: int, gating: bool, baseline_every: int, tactics_every: int = 0,
               early_baseline_generation: int = 0) -> tuple[str, ...]:
    """The checks a new ``generation`` owes: ``gating`` when gating is on, ``baselines`` when
    ``baseline_every`` > 0 divides it or it is ``early_baseline_generation`` (> 0), ``tactics``
    when ``tactics_every`` > 0 divides it (0: never)."""
    kinds = ["gating"] if gating else []
    if (baseline_every > 0 and generation % baseline_every == 0) or generation == early_baseline_generation > 0:
        kinds.append("baselines")
    if tactics_every > 0 and generation % tactics_every == 0:
        kinds.append("tactics")
    return tuple(kinds)


@dataclass
class Check:
    """One evaluation: of ``generation`` (made at trainer step ``step``, with ``weights``), the
    ``kinds`` it plays ('gating', 'baselines', 'tactics'); ``carried``: older generations whose
    baseline check it stands for; ``baseline_games``: games per baseline match (0: the
    configured ``evaluator.baseline_games``; the early check's ``evaluator.early_baseline_games``);
    ``seed``: its openings' seed (None: not drawn yet; the run draws it when the check is owed,
    so a check run again after a stop plays the same openings); ``kept``: the games an earlier,
    cut run of it finished (``gating.KeptGames``; not in :meth:`to_list`: the run keeps them in
    its own file)."""

    generation: int
    step: int
    kinds: tuple[str, ...]
    weights: Any = None
    carried: list[int] = field(default_factory=list)
    baseline_games: int = 0
    seed: int | None = None
    kept: dict[str, Any] = field(default_factory=dict)
    #: it was running (handed out by :meth:`EvaluationSchedule.next`): after a resume it runs
    #: first, before newer owed ones, so that it completes with its kept games
    started: bool = False

    def to_list(self) -> list[Any]:
        """The check as the checkpoint keeps it (``RunCounters.owed_checks``, plain types):
        ``[generation, step, [kinds], baseline_games, seed, started]``; the weights come from
        the generation's checkpoint."""
        return [self.generation, self.step, list(self.kinds), self.baseline_games, self.seed, self.started]

    @classmethod
    def from_list(cls, entry: list[Any]) -> Check:
        """The check of a :meth:`to_list` entry (one of a checkpoint written before the game
        count was kept, ``[generation, step, [kinds]]``, plays the configured count; one written
        before the seed was kept draws a new one). Raises ValueError for an entry of another
        shape."""
        if not isinstance(entry, (list, tuple)) or len(entry) not in (3, 4, 5, 6) \
                or not isinstance(entry[2], (list, tuple)):
            raise ValueError("an owed check is [generation, step, [kinds], baseline_games, seed], got "
                             f"{short_repr(entry, 200)}")
        games = int(entry[3]) if len(entry) >= 4 else 0
        seed = int(entry[4]) if len(entry) >= 5 and entry[4] is not None else None
        started = bool(entry[5]) if len(entry) == 6 else False
        kinds = tuple(k if isinstance(k, str) else short_repr(k) for k in entry[2])
        return cls(int(entry[0]), int(entry[1]), kinds, baseline_games=games, seed=seed, started=started)

    @property
    def baselines(self) -> bool:
        return "baselines" in self.kinds

    @property
    def tactics(self) -> bool:
        return "tactics" in self.kinds

    def describe(self) -> str:
        return f"gen {self.generation} {' and '.join(self.kinds)}"


class EvaluationSchedule:
    """The owed checks of a run and the one running (see the module docstring).

    Args:
        gating: whether each generation owes a gating check (``evaluator.gating`` != off).
        baseline_every: ``evaluator.baseline_every`` (0: no baseline checks).
        skipped: the skip reasons of earlier sessions (carried in the checkpoint).
        tactics_every: ``evaluator.tactics_every`` (0: no tactics curve; also for a board size
            the tactics set has no positions of).
        early_generation: ``evaluator.early_baseline_generation`` (0: no early check).
        early_games: ``evaluator.early_baseline_games``: games per baseline of the early check
            (when that generation owes no regular baseline check too).

    Raises ValueError for a negative rate or early generation, or an odd or too small game count.
    """

    def __init__(self, gating: bool, baseline_every: int, skipped: list[str] | None = None,
                 tactics_every: int = 0, early_generation: int = 0, early_games: int = 2) -> None:
        if baseline_every < 0:
            raise ValueError(f"evaluator.baseline_every must be >= 0, got {baseline_every}")
        if tactics_every < 0:
            raise ValueError(f"evaluator.tactics_every must be >= 0, got {tactics_every}")
        if early_generation < 0:
            raise ValueError(f"evaluator.early_baseline_generation must be >= 0, got {early_generation}")
        if early_games < 2 or early_games % 2:
            raise ValueError(f"evaluator.early_baseline_games must be an even number >= 2, got {early_games}")
        self.gating = gating
        self.baseline_every = baseline_every
        self.tactics_every = tactics_every
        self.early_generation = early_generation
        self.early_games = early_games
        self.owed: dict[int, Check] = {}
        self.running: Check | None = None
        #: the checks the last session left (:meth:`restore_all`), by generation: :meth:`next`
        #: hands them out first, and never lets a newer generation stand for them
        self.resumed: list[Check] = []
        self.skipped: list[str] = list(skipped or [])

    def owe(self, generation: int, step: int, weights: Any = None) -> Check | None:
        """Record what a new ``generation`` (made at ``step``) owes; None when it owes nothing.
        Raises ValueError for a generation not newer than every owed one."""
        if self.owed and generation <= max(self.owed):
            raise ValueError(f"generation {generation} is not newer than the owed {max(self.owed)}")
        kinds = owed_kinds(generation, self.gating, self.baseline_every, self.tactics_every, self.early_generation)
        if not kinds:
            return None
        regular = self.baseline_every > 0 and generation % self.baseline_every == 0
        early = "baselines" in kinds and not regular  # only the early check: its own game count
        check = Check(generation, step, kinds, weights, baseline_games=self.early_games if early else 0)
        self.owed[generation] = check
        return check

    def next(self) -> Check | None:
        """The check to start now that the evaluator is free: the newest owed generation, with
        the baseline checks of older owed ones carried into it (a check that owed none of its
        own plays the game count of the newest carried one); the older ones are recorded as
        skipped. None when the evaluator is busy or nothing is owed. The caller starts it and
        calls :meth:`finished` when its result (or its loss) arrives."""
        if self.running is not None:
            return None
        if self.resumed:  # left by the last session: they complete first (a cut one with its games)
            self.running = self.resumed.pop(0)
            self.running.started = True
            return self.running
        if not self.owed:
            return None
        check = self._merge_owed()
        check.started = True
        self.running = check
        return check

    def _merge_owed(self) -> Check:
        """Take the owed checks out as one: the newest, with the baseline and tactics checks of
        the older ones carried into it (their gating recorded as skipped)."""
        newest = max(self.owed)
        check = self.owed.pop(newest)
        older = [self.owed[g] for g in sorted(self.owed)]
        self.owed = {}
        carried = []
        tactics_carried = []
        for old in older:
            if "gating" in old.kinds:
                self.skipped.append(f"gen {old.generation} gating: gen {newest} was owed too when the "
                                    "evaluator was free, and gated instead")
            if old.baselines:
                carried.append(old.generation)
                if not check.baselines:
                    check.baseline_games = old.baseline_games  # the newest carried one's count
            if old.tactics:
                tactics_carried.append(old.generation)
        if tactics_carried:
            if not check.tactics:
                check.kinds = (*check.kinds, "tactics")
            gens = ", ".join(str(g) for g in tactics_carried)
            self.skipped.append(f"gen {gens} tactics: measured at gen {newest} instead (owed too when "
                                "the evaluator was free)")
        if carried:
            if not check.baselines:
                check.kinds = (*check.kinds, "baselines")
            check.carried = carried
            gens = ", ".join(str(g) for g in carried)
            self.skipped.append(f"gen {gens} baselines: measured at gen {newest} instead (owed too when "
                                "the evaluator was free)")
        check.kinds = tuple(k for k in KINDS if k in check.kinds)  # one order: describe()
        return check

    def finished(self, lost: str | None = None) -> Check | None:
        """The running check is over (``lost``: why it brought no result, recorded as skipped);
        returns it."""
        check, self.running = self.running, None
        if check is not None and lost:
            self.skipped.append(f"{check.describe()}: {lost}")
        return check

    def pending(self) -> list[Check]:
        """The running check and the owed ones, by generation, left in the schedule: what a
        checkpoint keeps (``RunCounters.owed_checks``), so that a kill -9 loses no check."""
        checks = ([self.running] if self.running is not None else []) + self.resumed + list(self.owed.values())
        return sorted(checks, key=lambda c: c.generation)

    def take_pending(self) -> list[Check]:
        """The running check and the owed ones (by generation), taken out of the schedule
        without a skip reason: a run stopped by Ctrl-C keeps them in its checkpoint and owes
        them again after the resume (:meth:`restore`)."""
        checks = self.pending()
        self.running, self.resumed, self.owed = None, [], {}
        return checks

    def restore(self, check: Check) -> None:
        """Owe ``check`` again (one kept by :meth:`take_pending` in an earlier session; one that
        was running, ``check.started``, runs first). Raises ValueError for a generation not newer
        than every owed one."""
        if check.started:
            self.resumed = sorted([*self.resumed, check], key=lambda c: c.generation)
            return
        if self.owed and check.generation <= max(self.owed):
            raise ValueError(f"generation {check.generation} is not newer than the owed {max(self.owed)}")
        self.owed[check.generation] = check

    def restore_all(self, checks: list[Check]) -> list[Check]:
        """Owe again the checks an earlier session left (its checkpoint's, :meth:`pending`):
        those that had started (cut while they ran) as they are, the others as one, the newest
        with the older ones' baseline and tactics checks carried into it (their gating recorded
        as skipped, as :meth:`next` does). All of them run first, by generation, before any
        check of a newer generation, and none is superseded. Returns them in the order they
        run."""
        cut = [c for c in checks if c.started]
        owed, self.owed = self.owed, {}
        for c in sorted((c for c in checks if not c.started), key=lambda c: c.generation):
            self.owed[c.generation] = c
        merged = [self._merge_owed()] if self.owed else []
        self.owed = owed
        for c in merged:  # (a checkpoint keeps it as one that runs first, and keeps its weights)
            c.started = True
        self.resumed = sorted([*self.resumed, *cut, *merged], key=lambda c: c.generation)
        return list(self.resumed)

    def abandon(self, reason: str) -> None:
        """The run stops: the running check and every owed one are recorded as skipped for
        ``reason``."""
        for check in self.resumed:
            self.skipped.append(f"{check.describe()}: {reason} before the evaluator was free")
        self.resumed = []
        if self.running is not None:
            self.skipped.append(f"{self.running.describe()}: {reason} while it ran")
            self.running = None
        for g in sorted(self.owed):
            self.skipped.append(f"{self.owed[g].describe()}: {reason} before the evaluator was free")
        self.owed = {}
