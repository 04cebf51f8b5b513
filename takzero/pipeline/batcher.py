"""One network call for the requests of many threads: :class:`Batcher` (plain Python, no Ray),
the batching under the run's inference server (``pipeline/inference_server.py``).

Callers on any thread hand in ``(L, STATE_LEN)`` int64 positions and wait for their answer; one
thread gathers the waiting requests into one batch and calls the evaluator once, then hands each
caller its own rows. The latency bound: a batch is run as soon as it holds ``max_batch``
positions, or ``callers`` requests (one from each client, when their number is known: nobody
else is coming), or its first request has waited ``max_wait_s``; a request is never split, and
one larger than ``max_batch`` is run alone. Given an evaluator whose output for a position does
not depend on the batch, every caller gets exactly what a call of its own would have returned.
:class:`BatcherClient` is an in-process evaluator over a batcher (tests and benchmarks).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from takzero.game.core import STATE_LEN, num_actions

__all__ = ["Batcher", "BatcherClient"]


@dataclass
class _Request:
    states: np.ndarray
    future: Future
    arrived: float  # time.monotonic()


class Batcher:
    """One batch for the requests of many threads (see the module docstring).

    Args:
        evaluate: ``evaluate(states (B, STATE_LEN) int64) -> tuple of arrays`` whose leading
            axis is B (e.g. ``Evaluator.evaluate``: priors, values, wdl); called on the
            batcher's own thread only, one batch at a time.
        max_batch: positions per call at most (a larger request is run alone).
        max_wait_s: how long the first request of a batch waits for others (0: run what is
            waiting at once).
        name: the thread's name.
        callers: the clients that may send (None: unknown); a batch holding this many requests
            is run without waiting longer (a lone client never waits).

    Raises ValueError for ``max_batch`` < 1 or a negative or non-finite ``max_wait_s``.
    """

    def __init__(
        self,
        evaluate: Callable[[np.ndarray], tuple[np.ndarray, ...]],
        max_batch: int,
        max_wait_s: float,
        name: str = "takzero-batcher",
        callers: int | None = None,
    ) -> None:
        if int(max_batch) < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if not (math.isfinite(max_wait_s) and max_wait_s >= 0):
            raise ValueError(f"max_wait_s must be >= 0 and finite, got {max_wait_s}")
        self._evaluate = evaluate
        self.max_batch = int(max_batch)
        self.max_wait_s = float(max_wait_s)
        self.callers = None if callers is None else max(1, int(callers))
        self._queue: deque[_Request] = deque()
        self._queued = 0  # positions waiting
        self._cv = threading.Condition()
        self._closed = False
        #: network calls made, requests answered, positions evaluated, the largest batch
        self.batches = 0
        self.requests = 0
        self.positions = 0
        self.largest = 0
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, states: np.ndarray) -> Future:
        """Queue ``states`` ((L, STATE_LEN) int64, L >= 0; one position may be (STATE_LEN,));
        the future's result is the evaluator's output for these rows (a tuple of arrays with
        leading axis L), or its exception. Raises ValueError for another shape or dtype and
        RuntimeError after :meth:`close`."""
        states = np.asarray(states)
        if states.ndim == 1:
            states = states[None]
        if states.ndim != 2 or states.shape[1] != STATE_LEN or states.dtype != np.int64:
            raise ValueError(f"states must be (L, {STATE_LEN}) int64, got {states.shape} {states.dtype}")
        future: Future = Future()
        with self._cv:
            if self._closed:
                raise RuntimeError("the batcher is closed")
            self._queue.append(_Request(states, future, time.monotonic()))
            self._queued += len(states)
            self._cv.notify()
        return future

    def evaluate(self, states: np.ndarray) -> tuple[np.ndarray, ...]:
        """:meth:`submit` and wait for the answer (the evaluator's exception is raised here)."""
        return self.submit(states).result()

    def close(self, timeout: float | None = 10.0) -> None:
        """Answer what is queued, then end the thread (waits up to ``timeout`` seconds)."""
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._thread.join(timeout)

    @property
    def mean_batch(self) -> float:
        """Positions per network call so far (0 before any)."""
        return self.positions / self.batches if self.batches else 0.0

    def _take(self) -> list[_Request] | None:
        """The next batch (None once closed and empty): waits for a first request, then up to
        ``max_wait_s`` after its arrival for ``max_batch`` positions or ``callers`` requests."""
        with self._cv:
            while not self._queue and not self._closed:
                self._cv.wait()
            if not self._queue:
                return None
            deadline = self._queue[0].arrived + self.max_wait_s
            while not self._closed and self._queued < self.max_batch and (
                self.callers is None or len(self._queue) < self.callers
            ):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cv.wait(left)
            first = self._queue.popleft()
            batch, n = [first], len(first.states)
            while self._queue and n + len(self._queue[0].states) <= self.max_batch:
                r = self._queue.popleft()
                batch.append(r)
                n += len(r.states)
            self._queued -= n
            return batch

    def _loop(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            self._run(batch)

    def _run(self, batch: list[_Request]) -> None:
        """One evaluator call for ``batch``; each request's future gets its rows (or the error)."""
        states = batch[0].states if len(batch) == 1 else np.concatenate([r.states for r in batch])
        try:
            out = self._evaluate(states)
        except Exception as e:  # noqa: BLE001 - every caller of the batch hears of it
            for r in batch:
                r.future.set_exception(e)
            return
        self.batches += 1
        self.requests += len(batch)
        self.positions += len(states)
        self.largest = max(self.largest, len(states))
        lo = 0
        for r in batch:
            hi = lo + len(r.states)
            r.future.set_result(tuple(a[lo:hi] for a in out))
            lo = hi


class BatcherClient:
    """An in-process evaluator over a :class:`Batcher` (the ``Evaluator`` interface, for tests
    and benchmarks without Ray): ``evaluate`` waits for its rows of a shared batch."""

    def __init__(self, batcher: Batcher, size: int) -> None:
        self.batcher = batcher
        self.size = int(size)
        self.num_actions = num_actions(self.size)
        self.generation = 0

    def evaluate(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(priors, values, wdl) of ``states`` (see ``Evaluator.evaluate``)."""
        out = self.batcher.evaluate(states)
        return out[0], out[1], out[2]
