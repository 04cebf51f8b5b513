"""What ends a search: :class:`Limit` (nodes, time, clocks, stop flag), in the manner of
python-chess's ``chess.engine.Limit``, with the one rule that turns a clock into a move's time
budget (:meth:`Limit.move_seconds`)."""

from __future__ import annotations

import math
import numbers
import threading
from dataclasses import dataclass, field, replace

__all__ = ["MIN_MOVE_SECONDS", "Limit"]

#: The shortest time budget :meth:`Limit.move_seconds` gives (seconds).
MIN_MOVE_SECONDS = 0.005


@dataclass(frozen=True)
class Limit:
    """What ends a search, in the manner of python-chess's ``chess.engine.Limit``: whichever of
    ``nodes``, ``seconds`` or the clock runs out first, or ``stop`` being set.

    Attributes:
        nodes: simulations of this search (None: no node limit).
        seconds: thinking time for this move in seconds (a ``movetime``; None: none).
        white_clock, black_clock: seconds left on each side's clock (None: no clock).
        white_inc, black_inc: increment per move in seconds.
        overhead: seconds kept back from every time budget for latency (the engine's
            ``MoveOverhead``).
        stop: a ``threading.Event``: the search ends within one network call once it is set.
        infinite: no limit but ``stop`` (TEI ``go infinite``): the answer waits for ``stop``.

    With no limit at all (no nodes, no time, no stop) a player searches its default budget.

    Raises ValueError for nodes that are not an integer >= 1, a negative or non-finite time, or a
    negative increment.
    """

    nodes: int | None = None
    seconds: float | None = None
    white_clock: float | None = None
    black_clock: float | None = None
    white_inc: float = 0.0
    black_inc: float = 0.0
    overhead: float = 0.0
    stop: threading.Event | None = field(default=None, compare=False)
    infinite: bool = False

    def __post_init__(self) -> None:
        if self.nodes is not None and (
            isinstance(self.nodes, bool) or not isinstance(self.nodes, numbers.Integral) or self.nodes < 1
        ):
            raise ValueError(f"Limit.nodes must be an integer >= 1, got {self.nodes!r}")
        for name in ("seconds", "white_clock", "black_clock"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise ValueError(f"Limit.{name} must be a finite number >= 0, got {v!r}")
        for name in ("white_inc", "black_inc", "overhead"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"Limit.{name} must be a finite number >= 0, got {v!r}")

    @property
    def timed(self) -> bool:
        """True if a time budget (``seconds`` or a clock) applies."""
        return not self.infinite and (
            self.seconds is not None or self.white_clock is not None or self.black_clock is not None
        )

    @property
    def unlimited(self) -> bool:
        """True if nothing but the player's default budget would end the search: no nodes, no
        time, no stop flag."""
        return self.nodes is None and not self.timed and self.stop is None

    def move_seconds(self, side: int) -> float | None:
        """Seconds to think for ``side`` (0 white, 1 black) to move, or None for no time limit.

        ``seconds`` minus ``overhead``; with a clock, ``remaining / 20 + inc * 3/4`` capped at half
        the remaining time, minus the overhead; the smaller of the two when both are given; at
        least :data:`MIN_MOVE_SECONDS`. The cap keeps a clock from running out whatever the
        increment: each move spends at most half of what is left (plus the overhead), so the
        remaining time shrinks geometrically instead of reaching zero, and with an increment the
        clock settles where a move's budget equals the increment. (The rule of the TEI engine
        since its first version; ``takzero.protocols.tei.lines.SearchLimits`` and the playtak
        bot use it through this method.)"""
        if self.infinite:
            return None
        budgets = []
        if self.seconds is not None:
            budgets.append(self.seconds - self.overhead)
        remaining = self.white_clock if side == 0 else self.black_clock
        if remaining is not None:
            inc = self.white_inc if side == 0 else self.black_inc
            budgets.append(min(remaining / 20 + 0.75 * inc, remaining / 2) - self.overhead)
        if not budgets:
            return None
        return max(MIN_MOVE_SECONDS, min(budgets))

    def stopped(self) -> bool:
        """True once ``stop`` is set."""
        return self.stop is not None and self.stop.is_set()

    def with_nodes(self, nodes: int | None) -> Limit:
        """A copy with ``nodes`` replaced."""
        return replace(self, nodes=nodes)
