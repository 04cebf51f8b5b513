"""Lineage: the training that made a network, summed over a chain of warm starts.

A long run on a machine that keeps no run folder between sessions goes on as a chain of runs,
each started from the last one's weights (``train.init_from``). Its strength per CPU-hour needs
the whole chain's compute, not one link's, so every model file a run writes (``best.pt`` and the
weight snapshots of ``train.snapshot_minutes``) carries a ``"lineage"`` entry: the training
minutes, self-play positions and games and trainer steps of every run in the chain up to that
file, and the chain's run names, oldest first. A run started from such a file carries its
lineage as the counters *before* it (``RunCounters.earlier``) and adds its own.

Files without the entry (shipped networks of earlier code, a checkpoint of a run with no warm
start) count what they say: a checkpoint ``ckpt_*.pt`` carries its run's own counters
(``"run"``, ``"step"``); a bare model file says nothing, so its training is *unknown*
(``Lineage.known`` False, kept as ``"known": false`` in :meth:`Lineage.to_dict`): it is never
said as 0.0 min, and a chain that starts from such a file says its counters as lower bounds
("at least ...").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from takzero.nn.quoting import short_repr, shown

__all__ = ["MAX_COUNT", "MAX_MINUTES", "Lineage"]

#: bounds of a credible lineage (about 1,900 years; 10^15 positions): beyond them a file is corrupt
MAX_MINUTES = 1e9
MAX_COUNT = 10**15


@dataclass(frozen=True)
class Lineage:
    """The training behind a network, over every run of its warm-start chain.

    Attributes:
        minutes: training wall time, minutes (each run's ``train.max_minutes`` clock).
        positions: self-play positions made.
        games: self-play games finished.
        steps: trainer steps (optimiser updates).
        runs: the run names of the chain, oldest first ("" where a file named none).
        known: False when the training of some link of the chain is unknown (a model file
            without a lineage entry): the counters are then lower bounds.
    """

    minutes: float = 0.0
    positions: int = 0
    games: int = 0
    steps: int = 0
    runs: tuple[str, ...] = ()
    known: bool = True

    def plus(self, minutes: float, positions: int, games: int, steps: int, run_name: str) -> Lineage:
        """This lineage with one more run's own counters added (``run_name`` appended unless it
        is already the last name: a run's own files all extend the same earlier lineage)."""
        runs = self.runs if self.runs and self.runs[-1] == run_name else (*self.runs, run_name)
        return Lineage(self.minutes + float(minutes), self.positions + int(positions),
                       self.games + int(games), self.steps + int(steps), runs, self.known)

    def to_dict(self) -> dict[str, Any]:
        """Plain types for a model file or checkpoint (``"lineage"`` / ``RunCounters.earlier``);
        ``"known": False`` only for a lineage with an unknown link (files of a known one are as
        before)."""
        d: dict[str, Any] = {"minutes": self.minutes, "positions": self.positions, "games": self.games,
                             "steps": self.steps, "runs": list(self.runs)}
        if not self.known:
            d["known"] = False
        return d

    @classmethod
    def from_dict(cls, d: Any) -> Lineage:
        """Read :meth:`to_dict`'s form (None or {}: no earlier training).

        Raises:
            ValueError: ``d`` is not a dict; minutes not a number in [0, MAX_MINUTES]; a count
                not a whole number in [0, MAX_COUNT] (bools and strings refused); ``runs`` not a
                list of strings; ``known`` not a bool.
        """
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise ValueError(f"lineage: must be a dict of counts, got {type(d).__name__} {short_repr(d)}")
        minutes = d.get("minutes", 0.0)
        if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not 0 <= minutes <= MAX_MINUTES:
            raise ValueError(f"lineage: counts must be finite and >= 0 (minutes at most {MAX_MINUTES:g}), "
                             f"got minutes {short_repr(minutes)}")
        counts = []
        for key in ("positions", "games", "steps"):
            x = d.get(key, 0)
            whole = isinstance(x, int) or (isinstance(x, float) and math.isfinite(x) and x.is_integer())
            if isinstance(x, bool) or not whole or not 0 <= x <= MAX_COUNT:
                raise ValueError(f"lineage: counts must be finite and >= 0 whole numbers (at most "
                                 f"{MAX_COUNT:.0e}), got {key} {short_repr(x)}")
            counts.append(int(x))
        runs = d.get("runs", [])
        if not isinstance(runs, list | tuple) or not all(isinstance(r, str) for r in runs):
            raise ValueError(f"lineage: runs must be a list of run names, got {short_repr(runs, 80)}")
        known = d.get("known", True)
        if not isinstance(known, bool):
            raise ValueError(f"lineage: known must be true or false, got {short_repr(known)}")
        return cls(float(minutes), counts[0], counts[1], counts[2], tuple(runs), known)

    @classmethod
    def of_file(cls, d: dict[str, Any]) -> Lineage:
        """The lineage of a loaded model or checkpoint file ``d``: its ``"lineage"`` entry; else,
        for a checkpoint, its run's counters (``"run"``: minutes, positions, games; ``"step"``)
        on top of the run's own earlier lineage (``"run"`` ``"earlier"``); else unknown (a bare
        model file: zero counters that are only a lower bound, ``known`` False, its ``run_name``
        if it gives one).

        Raises:
            ValueError: the entry, or the checkpoint's counters, are malformed (:meth:`from_dict`'s
                rules; ``"run"`` must be a dict).
        """
        if d.get("lineage") is not None:
            return cls.from_dict(d["lineage"])
        name = d.get("run_name", "")
        name = name if isinstance(name, str) else short_repr(name)
        run = d.get("run")
        if run is None:
            return cls(runs=(name,) if name else (), known=False)
        if not isinstance(run, dict):
            raise ValueError(f"lineage: a checkpoint's run counters must be a dict, got {type(run).__name__}")
        earlier = cls.from_dict(run.get("earlier") or None)
        own = cls.from_dict({"minutes": run.get("minutes", 0.0), "positions": run.get("positions", 0),
                             "games": run.get("games", 0), "steps": d.get("step", 0)})
        return earlier.plus(own.minutes, own.positions, own.games, own.steps, name)

    def describe(self) -> str:
        """One line: ``'95.3 min, 412,000 positions, 9,800 steps over 2 runs (a, b)'``; with an
        unknown link ``'at least 12.0 min, ... (the training of an earlier file is unknown)'``,
        and with nothing known ``'unknown (the file carries no lineage) ...'``, never a false
        0.0 min. Run names are shown cut and escaped (:func:`~takzero.nn.quoting.shown`), four at
        most."""
        names = ", ".join(shown(r, 40) or "?" for r in self.runs[:4])  # a file's names: cut, escaped
        if len(self.runs) > 4:
            names += f", ... ({len(self.runs) - 4:,} more)"
        over = f" over {len(self.runs)} run{'s' if len(self.runs) != 1 else ''} ({names})" if self.runs else ""
        counts = (f"{self.minutes:.1f} min, {self.positions:,} positions, {self.games:,} games, "
                  f"{self.steps:,} steps")
        if self.known:
            return counts + over
        if not (self.minutes or self.positions or self.games or self.steps):
            return "unknown (the file carries no lineage: no training time, positions or steps)" + (
                f" ({'run ' + names})" if self.runs else "")
        return f"at least {counts}{over} (the training of an earlier file is unknown: it carries no lineage)"
