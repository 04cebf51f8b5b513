"""The default test run leaves out the tests marked ``slow`` (tests/conftest.py): the hooks called
directly on made-up items, a config as pytest builds it for each way of asking for them, and the
line at the end of the run."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]


class FakeItem:
    def __init__(self, name: str, slow: bool) -> None:
        self.name = name
        self.slow = slow

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "slow" and self.slow else None


def _config(markexpr: str = "", args: tuple[str, ...] = ()) -> SimpleNamespace:
    deselected: list[FakeItem] = []
    return SimpleNamespace(
        getoption=lambda name, default=None: markexpr if name == "markexpr" else default,
        args=list(args),
        hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)),
        stash=pytest.Stash(),
        deselected=deselected,
    )


def _collect(config: SimpleNamespace) -> list[str]:
    items = [FakeItem("fast_a", False), FakeItem("whole_run", True), FakeItem("fast_b", False)]
    conftest.pytest_collection_modifyitems(config, items)
    return [i.name for i in items]


def test_a_slow_test_is_left_out_by_default_and_the_end_says_how_to_run_it(monkeypatch) -> None:
    monkeypatch.delenv("TAKZERO_SLOW", raising=False)
    config = _config(args=("tests",))
    assert _collect(config) == ["fast_a", "fast_b"]
    assert [i.name for i in config.deselected] == ["whole_run"]  # reported as deselected
    written: list[str] = []
    conftest.pytest_terminal_summary(SimpleNamespace(write_line=written.append), 0, config)
    assert len(written) == 1 and written[0].startswith("1 slow tests left out")
    assert written[0].endswith("run them with: python -m pytest -q -m slow -n 0")


@pytest.mark.parametrize(("markexpr", "args", "env"), [
    ("slow", (), None),  # python -m pytest -q -m slow -n 0 (the slow set, in CI)
    ("not slow", (), None),  # any -m expression decides on its own
    ("", (), "1"),  # TAKZERO_SLOW=1: everything
    ("", ("tests/test_train.py::test_smoke_run_kill_and_resume",), None),  # named by node id
])
def test_a_slow_test_is_kept_when_asked_for(monkeypatch, markexpr: str, args: tuple[str, ...], env: str | None) -> None:
    if env is None:
        monkeypatch.delenv("TAKZERO_SLOW", raising=False)
    else:
        monkeypatch.setenv("TAKZERO_SLOW", env)
    config = _config(markexpr, args)
    assert _collect(config) == ["fast_a", "whole_run", "fast_b"]
    assert config.deselected == []
    written: list[str] = []
    conftest.pytest_terminal_summary(SimpleNamespace(write_line=written.append), 0, config)
    assert written == []


def test_the_marker_is_declared_and_ci_runs_the_slow_set() -> None:
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert any(m.startswith("slow:") for m in ini["markers"])
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [ln.strip() for ln in ci if ln.strip().startswith("python -m pytest")]
    assert commands == ["python -m pytest -q", conftest.SLOW_COMMAND]


def test_the_count_travels_from_the_xdist_workers_to_the_end_line(monkeypatch) -> None:
    """With two xdist workers each collects and deselects on its own; each hands its count over in
    workeroutput, the controller keeps it and says it once."""
    monkeypatch.delenv("TAKZERO_SLOW", raising=False)
    controller = _config(args=("tests",))
    for _ in range(2):  # two workers, each with all the tests
        worker = _config(args=("tests",))
        worker.workeroutput = {}
        _collect(worker)
        conftest.pytest_sessionfinish(SimpleNamespace(config=worker))
        conftest.pytest_testnodedown(SimpleNamespace(config=controller, workeroutput=worker.workeroutput), None)
    written: list[str] = []
    conftest.pytest_terminal_summary(SimpleNamespace(write_line=written.append), 0, controller)
    assert written == ["1 slow tests left out (whole runs, Ray cluster, kill -9, fuzz); "
                       "run them with: python -m pytest -q -m slow -n 0"]
    quiet = _config(args=("tests",))  # a worker that crashed before its report: nothing is said
    conftest.pytest_testnodedown(SimpleNamespace(config=quiet, workeroutput={}), "crashed")
    conftest.pytest_terminal_summary(SimpleNamespace(write_line=written.append), 0, quiet)
    assert len(written) == 1
