"""More self-play workers than Ray has CPUs (a local run, ``selfplay.workers=5`` on 2 cores):
the start-up says how many play and what becomes of the rest, and at a stop the pool waits only
for the workers that started: one still waiting for a CPU has no game in play, so it is neither
waited for (the old stop waited the grace + 60 s for it) nor reported as lost."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

from takzero.pipeline.actors import SelfPlayActor, SelfPlayPool
from takzero.pipeline.progress import kept_line
from takzero.pipeline.run_reporting import worker_cpu_line


class _Ref:
    """A stand-in object ref: ``value`` is what ``ray.get`` gives; ``done`` whether it is ready."""

    def __init__(self, value: Any = True, done: bool = True) -> None:
        self.value = value
        self.done = done


class _FakeRay:
    """The three calls ``SelfPlayPool.finish`` makes; records every wait."""

    def __init__(self) -> None:
        self.waits: list[tuple[list[_Ref], float | None]] = []
        self.killed: list[Any] = []

    def wait(self, refs: list[_Ref], num_returns: int = 1, timeout: float | None = None) -> tuple[list, list]:
        self.waits.append((list(refs), timeout))
        return [r for r in refs if r.done], [r for r in refs if not r.done]

    def get(self, ref: _Ref) -> Any:
        if isinstance(ref.value, Exception):
            raise ref.value
        return ref.value

    def kill(self, actor: Any) -> None:
        self.killed.append(actor)


def _report(games: int) -> dict[str, Any]:
    return {"games": games, "kept_games": 1, "kept_positions": 10, "carried": None}


def _pool(started: list[bool], answered: list[bool | Exception]) -> SelfPlayPool:
    """A pool of len(started) workers: worker i started (its process exists) or waits for a CPU;
    a started one's task answered the stop (True), never returns (False) or failed."""
    pool = object.__new__(SelfPlayPool)
    pool.cfg = SimpleNamespace(selfplay=SimpleNamespace(stop_grace_seconds=9))  # type: ignore[assignment]
    pool.workers = [f"worker {i}" for i in range(len(started))]
    pool.started = [_Ref(True, done=s) for s in started]
    pool.tasks = []
    for s, a in zip(started, answered, strict=True):
        if not s:
            pool.tasks.append(_Ref(None, done=False))  # its run task waits behind its creation
        elif isinstance(a, Exception):
            pool.tasks.append(_Ref(a, done=True))
        else:
            pool.tasks.append(_Ref(_report(2), done=bool(a)))
    pool.replaced = 0
    pool.carried = None
    return pool


def _waits_for_what_never_comes(ray: _FakeRay) -> list[float | None]:
    """The timeouts of waits that include a ref never ready: each would last its whole timeout."""
    return [t for refs, t in ray.waits if (t is None or t > 0) and any(not r.done for r in refs)]


def test_a_stop_does_not_wait_for_workers_that_never_started(monkeypatch) -> None:
    ray = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", ray)
    pool = _pool([True, True, False, False, False], [True, True, False, False, False])
    totals = pool.finish()
    assert _waits_for_what_never_comes(ray) == []  # the old stop waited 9 + 60 s here
    assert totals["lost_workers"] == 0 and totals["never_started"] == 3
    assert totals["games"] == 4 and totals["kept_games"] == 2
    assert ray.killed == pool.workers  # every worker is still killed, the waiting ones too
    assert "did not answer" not in kept_line(totals)  # no games claimed lost that never existed


@pytest.mark.parametrize("answered, lost", [([True, False], 1), ([True, RuntimeError("died")], 1), ([True, True], 0)])
def test_a_started_worker_that_does_not_answer_is_still_waited_for_and_counted_lost(
    monkeypatch, answered, lost
) -> None:
    ray = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", ray)
    pool = _pool([True, True, False], [*answered, False])
    totals = pool.finish(timeout_s=5.0)
    assert totals["lost_workers"] == lost and totals["never_started"] == 1
    assert [t for refs, t in ray.waits if refs and refs[0] in pool.tasks] == [5.0]  # the started ones' wait
    assert all(pool.tasks[2] not in refs for refs, _ in ray.waits)
    if lost:
        assert "1 worker(s) did not answer the stop" in kept_line(totals)


def test_no_worker_started_waits_for_nothing(monkeypatch) -> None:
    ray = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", ray)
    totals = _pool([False, False], [False, False]).finish()
    assert _waits_for_what_never_comes(ray) == []
    assert totals["lost_workers"] == 0 and totals["never_started"] == 2 and totals["games"] == 0


def test_the_worker_answers_started_as_its_process_runs() -> None:
    assert SelfPlayActor.started(object.__new__(SelfPlayActor)) is True


def test_start_up_warns_when_workers_outnumber_rays_cpus() -> None:
    line = worker_cpu_line(5, 2.0, local=True)
    assert line.startswith("warning: selfplay.workers=5 but Ray has 2 CPU(s)")
    assert "2 worker(s) play" in line and "the other 3 never start" in line and "ray.num_cpus" in line
    assert "\n" not in line
    cluster = worker_cpu_line(5, 2.0, local=False)
    assert "the other 3 wait until nodes with free CPUs join" in cluster
    assert worker_cpu_line(2, 2.0, local=True) == "" and worker_cpu_line(4, 16.0, local=False) == ""
    assert worker_cpu_line(3, 2.5, local=True).startswith("warning: selfplay.workers=3 but Ray has 2 CPU(s)")
