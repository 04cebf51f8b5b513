"""The search's step loops with two batches in flight (``BatchedMCTS.run(pipelined=True)``).

While one batch of leaves is evaluated on a second thread, the next is selected, so the network
and the compiled kernels run at once (two cores, or a GPU):

* :func:`run_halves` (two games or more): the search's games in two halves, each game's search
  the plain one bit for bit;
* :func:`run_two_workers` (one game, more than one leaf per step): two workers over one tree,
  each selecting under the virtual loss of the other's leaves in flight.

They drive a :class:`~takzero.search.mcts.BatchedMCTS` through its step primitives
(``_select_into``, ``_prepare``, ``_expand_from``, ``_abandon``) and its leaf buffers; the plain
loop is ``BatchedMCTS.run`` itself.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from typing import TYPE_CHECKING

import numpy as np

from takzero.search.evaluators import Evaluator
from takzero.search.tree import Leaves, new_children, new_leaves

if TYPE_CHECKING:
    from takzero.search.mcts import BatchedMCTS, SearchStats

__all__ = ["run_halves", "run_two_workers"]


def _stopped(stop, deadline: float | None) -> bool:
    """Whether a pipelined run must end: ``stop`` (a ``threading.Event``) set or ``deadline``
    (``time.perf_counter()`` seconds) passed."""
    return (stop is not None and stop.is_set()) or (deadline is not None and time.perf_counter() >= deadline)


def _pipeline_parts(mcts: BatchedMCTS, evaluator: Evaluator, stats: SearchStats):
    """The two leaf buffers, the evaluation thread, and a ``submit(buffer, n)`` that
    evaluates the first ``n`` leaves of ``buffer`` there (timed, counted in ``stats``)."""
    if mcts._leaves2 is None:
        mcts._leaves2 = new_leaves(mcts._leaves.states.shape[0])
    if mcts._pool is None:
        mcts._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="takzero-eval")
    pool = mcts._pool

    def timed_eval(states: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        t = time.perf_counter()
        priors, values, _ = evaluator.evaluate(states)
        return priors, values, time.perf_counter() - t

    def submit(leaves: Leaves, n: int) -> Future:
        stats.steps += 1
        stats.leaves += n
        return pool.submit(timed_eval, leaves.states[:n])

    return (mcts._leaves, mcts._leaves2), submit


def run_halves(
    mcts: BatchedMCTS, evaluator: Evaluator, stats: SearchStats, stop, deadline: float | None
) -> None:
    """The step loop with the search's games in two halves: while one half's leaves are
    evaluated on the pool's thread, the other half's are selected here; then the first
    half's are expanded and backed up. The halves share no tree, so each game sees the same
    select / evaluate / expand sequence as in the plain loop (the same search, given an
    evaluator whose output does not depend on the batch). A stop or a passed deadline ends
    it once the batch in flight is backed up (each half makes one call however early it
    comes, as the plain loop's first call). A failed network call is raised once the
    other half's call has ended; the selections of both halves are taken back
    (:meth:`BatchedMCTS._abandon`)."""
    bufs, submit = _pipeline_parts(mcts, evaluator, stats)
    games = mcts._search_games
    parts = (games[: games.size // 2].copy(), games[games.size // 2 :].copy())
    pending: list[tuple[Future, int] | None] = [None, None]
    held = [0, 0]  # leaves selected and not backed up yet, per half
    done = [False, False]
    tried = [False, False]  # each half selects once, however early a stop comes

    def finish(h: int) -> None:
        item = pending[h]
        if item is not None:
            pending[h] = None
            priors, values, took = item[0].result()
            stats.eval_seconds += took
            mcts._expand_from(bufs[h], item[1], priors, values)
            held[h] = 0

    try:
        h = 0
        while True:
            n = 0
            if not done[h] and (not tried[h] or not _stopped(stop, deadline)):
                n = mcts._select_into(bufs[h], parts[h])
                held[h] = n
            tried[h] = True
            if n == 0:
                done[h] = True
            finish(1 - h)  # the other half's batch, evaluated meanwhile
            if n:
                pending[h] = (submit(bufs[h], n), n)
            if (_stopped(stop, deadline) and tried[1 - h]) or (done[0] and done[1]):
                finish(h)
                return
            h = 1 - h
    except BaseException:
        for k in (0, 1):
            item = pending[k]
            if item is not None:
                futures_wait([item[0]])  # its buffer is free only once its call has ended
            mcts._abandon(bufs[k], held[k])
        raise


def run_two_workers(
    mcts: BatchedMCTS, evaluator: Evaluator, stats: SearchStats, stop, deadline: float | None
) -> None:
    """The step loop of one game with two batches in flight, evaluated at once: two workers
    (this thread and the pool's) each select a batch, evaluate it and expand / back it up,
    over and over. Selection and expansion (the compiled kernels, which share the trees and
    scratch buffers) take turns under one lock; the network calls run beside each other
    (onnxruntime and torch release the GIL), so on two cores both run the network. A batch
    is selected under the virtual visits of the other's leaves in flight, so it descends
    elsewhere. A worker that finds no leaf while the other's batch is in flight waits for
    that batch's backup (it may open new leaves), and ends when none is in flight. A stop
    or a passed deadline ends each worker once its batch in flight is backed up (at most one
    network call more than a plain run), so the trees stay consistent; as in the plain
    loop, one batch is selected and evaluated however early the stop comes (a fresh root
    gets expanded, so there is a move to answer). The evaluator must
    allow two calls at once (``takzero.nn.inference.Evaluator`` and ``CachedEvaluator``
    do).

    Raises what the evaluator raises (the other worker first backs up its batch; the failed
    batch's selection is taken back, :meth:`BatchedMCTS._abandon`, so the tree can be searched on)."""
    bufs, _ = _pipeline_parts(mcts, evaluator, stats)
    if mcts._prepared is None:
        rows = bufs[0].states.shape[0]
        mcts._prepared = (new_children(rows, mcts.num_actions), new_children(rows, mcts.num_actions))
    kids = mcts._prepared
    turn = threading.Condition()
    in_flight = [0, 0]
    selected = [0]  # batches selected: the first one is, however early a stop comes
    failed: list[BaseException] = []

    def steps(w: int) -> None:
        while True:
            with turn:
                while True:
                    if failed or (selected[0] and _stopped(stop, deadline)):
                        return
                    n = mcts._select_into(bufs[w])
                    if n:
                        selected[0] += 1
                        break
                    if not in_flight[1 - w]:  # nothing can open new leaves: done
                        return
                    turn.wait()
                in_flight[w] = n
                stats.steps += 1
                stats.leaves += n
            t = time.perf_counter()
            try:
                priors, values, _ = evaluator.evaluate(bufs[w].states[:n])
            except BaseException as e:
                with turn:  # one step: the other selects no more once this is seen
                    failed.append(e)
                    mcts._abandon(bufs[w], n)
                    in_flight[w] = 0
                    turn.notify_all()
                raise
            took = time.perf_counter() - t
            # the leaves' move generation, priors and sort, outside the lock
            mcts._prepare(bufs[w], n, priors, kids[w])
            with turn:
                stats.eval_seconds += took
                mcts._expand_from(bufs[w], n, priors, values, kids[w])
                in_flight[w] = 0
                turn.notify_all()

    def work(w: int) -> None:
        try:
            steps(w)
        except BaseException as e:  # whatever failed (network call, backup): both end
            with turn:
                if not any(f is e for f in failed):
                    failed.append(e)
                turn.notify_all()  # the other may wait for this worker's batch
            raise

    pool = mcts._pool
    assert pool is not None  # made by _pipeline_parts
    other = pool.submit(work, 1)
    try:
        work(0)
    finally:
        try:
            other.result()
        except BaseException:
            if not failed:
                raise
    if failed:
        raise failed[0]
