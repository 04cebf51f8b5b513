"""Which evaluations a run owes, and which it runs next (no Ray here: the run's driver asks).

Every new generation owes checks: ``gating`` (unless ``evaluator.gating=off``), ``baselines``
(every ``evaluator.baseline_every`` generations) and ``tactics`` (the tactics curve, every
``evaluator.tactics_every`` generations). An owed check is never dropped because the
evaluator is busy: when it is free, :meth:`EvaluationSchedule.next` hands out the newest owed
generation, with the baseline and tactics checks of any older owed generation carried into it
(the curves get their point, one generation later); what was not run is recorded with the reason
(:attr:`EvaluationSchedule.skipped`): an older generation's gating superseded by a newer one, a
baseline check measured at a later generation, or the run ending first (:meth:`abandon`). A run
stopped by Ctrl-C keeps its running and owed checks instead (:meth:`take_pending`) and owes them
again after the resume (:meth:`restore`). Each check keeps the trainer step of its generation,
where its TensorBoard points go.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["KINDS", "Check", "EvaluationSchedule", "owed_kinds"]

#: The kinds of check, in the order a check lists them.
KINDS = ("gating", "baselines", "tactics")


def owed_kinds(generation: int, gating: bool, baseline_every: int, tactics_every: int = 0) -> tuple[str, ...]:
    """The checks a new ``generation`` owes: ``gating`` when gating is on, ``baselines`` when
    ``baseline_every`` > 0 divides it, ``tactics`` when ``tactics_every`` > 0 divides it (0:
    never)."""
    kinds = ["gating"] if gating else []
    if baseline_every > 0 and generation % baseline_every == 0:
        kinds.append("baselines")
    if tactics_every > 0 and generation % tactics_every == 0:
        kinds.append("tactics")
    return tuple(kinds)


@dataclass
class Check:
    """One evaluation: of ``generation`` (made at trainer step ``step``, with ``weights``), the
    ``kinds`` it plays ('gating', 'baselines', 'tactics'); ``carried``: older generations whose
    baseline check it stands for."""

    generation: int
    step: int
    kinds: tuple[str, ...]
    weights: Any = None
    carried: list[int] = field(default_factory=list)

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
    """

    def __init__(self, gating: bool, baseline_every: int, skipped: list[str] | None = None,
                 tactics_every: int = 0) -> None:  # fmt: skip
        if baseline_every < 0:
            raise ValueError(f"evaluator.baseline_every must be >= 0, got {baseline_every}")
        if tactics_every < 0:
            raise ValueError(f"evaluator.tactics_every must be >= 0, got {tactics_every}")
        self.gating = gating
        self.baseline_every = baseline_every
        self.tactics_every = tactics_every
        self.owed: dict[int, Check] = {}
        self.running: Check | None = None
        self.skipped: list[str] = list(skipped or [])

    def owe(self, generation: int, step: int, weights: Any = None) -> Check | None:
        """Record what a new ``generation`` (made at ``step``) owes; None when it owes nothing.
        Raises ValueError for a generation not newer than every owed one."""
        if self.owed and generation <= max(self.owed):
            raise ValueError(f"generation {generation} is not newer than the owed {max(self.owed)}")
        kinds = owed_kinds(generation, self.gating, self.baseline_every, self.tactics_every)
        if not kinds:
            return None
        check = Check(generation, step, kinds, weights)
        self.owed[generation] = check
        return check

    def next(self) -> Check | None:
        """The check to start now that the evaluator is free: the newest owed generation, with
        the baseline checks of older owed ones carried into it; the older ones are recorded as
        skipped. None when the evaluator is busy or nothing is owed. The caller starts it and
        calls :meth:`finished` when its result (or its loss) arrives."""
        if self.running is not None or not self.owed:
            return None
        newest = max(self.owed)
        check = self.owed.pop(newest)
        older = [self.owed[g] for g in sorted(self.owed)]
        self.owed = {}
        carried = []
        tactics_carried = []
        for old in older:
            if "gating" in old.kinds:
                self.skipped.append(f"gen {old.generation} gating: gen {newest} was owed too when the "
                                    "evaluator was free, and gated instead")  # fmt: skip
            if old.baselines:
                carried.append(old.generation)
            if old.tactics:
                tactics_carried.append(old.generation)
        if tactics_carried:
            if not check.tactics:
                check.kinds = (*check.kinds, "tactics")
            gens = ", ".join(str(g) for g in tactics_carried)
            self.skipped.append(f"gen {gens} tactics: measured at gen {newest} instead (owed too when "
                                "the evaluator was free)")  # fmt: skip
        if carried:
            if not check.baselines:
                check.kinds = (*check.kinds, "baselines")
            check.carried = carried
            gens = ", ".join(str(g) for g in carried)
            self.skipped.append(f"gen {gens} baselines: measured at gen {newest} instead (owed too when "
                                "the evaluator was free)")  # fmt: skip
        check.kinds = tuple(k for k in KINDS if k in check.kinds)  # one order: describe()
        self.running = check
        return check

    def finished(self, lost: str | None = None) -> Check | None:
        """The running check is over (``lost``: why it brought no result, recorded as skipped);
        returns it."""
        check, self.running = self.running, None
        if check is not None and lost:
            self.skipped.append(f"{check.describe()}: {lost}")
        return check

    def take_pending(self) -> list[Check]:
        """The running check and the owed ones (by generation), taken out of the schedule
        without a skip reason: a run stopped by Ctrl-C keeps them in its checkpoint and owes
        them again after the resume (:meth:`restore`)."""
        checks = ([self.running] if self.running is not None else []) + [self.owed[g] for g in sorted(self.owed)]
        self.running, self.owed = None, {}
        return sorted(checks, key=lambda c: c.generation)

    def restore(self, check: Check) -> None:
        """Owe ``check`` again (one kept by :meth:`take_pending` in an earlier session). Raises
        ValueError for a generation not newer than every owed one."""
        if self.owed and check.generation <= max(self.owed):
            raise ValueError(f"generation {check.generation} is not newer than the owed {max(self.owed)}")
        self.owed[check.generation] = check

    def abandon(self, reason: str) -> None:
        """The run stops: the running check and every owed one are recorded as skipped for
        ``reason``."""
        if self.running is not None:
            self.skipped.append(f"{self.running.describe()}: {reason} while it ran")
            self.running = None
        for g in sorted(self.owed):
            self.skipped.append(f"{self.owed[g].describe()}: {reason} before the evaluator was free")
        self.owed = {}
