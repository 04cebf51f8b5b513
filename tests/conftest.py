"""Shared pytest fixtures, and the default run without the slow tests.

Tests marked ``slow`` (whole training runs, the Ray cluster, kill -9, fuzzing, soaks, long perft)
are left out of a plain ``python -m pytest -q`` so that it stays within a few minutes; the end
of the run says how many and how to run them. They run when asked for: any ``-m`` expression
(``python -m pytest -q -m slow -n 0`` runs just them, in this process, as CI's ``.ci/run`` does
after the default run), ``TAKZERO_SLOW=1`` (everything), or a test named by its node id
(``path::name``).

The default run has two pytest-xdist workers (``addopts`` in pyproject.toml); each worker collects
and deselects on its own, so the count of slow tests left out travels to the controlling process
in ``workeroutput`` (xdist's channel for that) to be said once at the end.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

#: The command that runs the slow tests (said at the end of a default run).
SLOW_COMMAND = "python -m pytest -q -m slow -n 0"
_SLOW_LEFT_OUT = pytest.StashKey[int]()
_WORKER_KEY = "takzero_slow_left_out"


def slow_requested(config: pytest.Config) -> bool:
    """Whether this run keeps the ``slow`` tests: a ``-m`` expression given, ``TAKZERO_SLOW=1``,
    or a test named by node id on the command line."""
    return (bool(config.getoption("markexpr", default="")) or os.environ.get("TAKZERO_SLOW") == "1"
            or any("::" in str(a) for a in config.args))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests marked ``slow`` unless :func:`slow_requested`."""
    if slow_requested(config):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if not slow:
        return
    config.hook.pytest_deselected(items=slow)
    items[:] = [item for item in items if item.get_closest_marker("slow") is None]
    config.stash[_SLOW_LEFT_OUT] = len(slow)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In an xdist worker: hand the count of slow tests left out to the controlling process."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output[_WORKER_KEY] = session.config.stash.get(_SLOW_LEFT_OUT, 0)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """In the xdist controller: keep the count a worker reports (every worker collects all tests,
    so they report the same count)."""
    n = getattr(node, "workeroutput", {}).get(_WORKER_KEY, 0)
    node.config.stash[_SLOW_LEFT_OUT] = max(n, node.config.stash.get(_SLOW_LEFT_OUT, 0))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """One line at the end: how many slow tests were left out and the command that runs them."""
    n = config.stash.get(_SLOW_LEFT_OUT, 0)
    if n:
        terminalreporter.write_line(f"{n} slow tests left out (whole runs, Ray cluster, kill -9, fuzz); "
                                    f"run them with: {SLOW_COMMAND}")


@pytest.fixture
def one_torch_thread():
    """Batch-1 network calls: one torch thread (as the CLIs use) is much faster than several
    on a busy machine; the setting is restored after each test."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _tiny_tei_model(tmp_path: Path, size: int = 4) -> Path:
    """A tiny untrained network (8 channels, 1 block, trained-for komi 1), exported to
    TorchScript as ``tmp_path/model.pt``."""
    import torch

    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
    from takzero.pipeline.export import export_checkpoint

    torch.manual_seed(0)
    model = TakNet(ModelConfig(size=size, channels=8, blocks=1))
    ckpt = checkpoint_dict(model, generation=3, run_name="tiny", half_komi=2)
    out = tmp_path / "model.pt"
    export_checkpoint(ckpt, out, warn=lambda _m: None)
    return out


@pytest.fixture
def tiny_tei_model():
    """``make(tmp_path, size=4) -> Path``: a tiny exported model for the TEI engine tests."""
    return _tiny_tei_model


#: Module globals that a command line sets for its whole process (``takzero.play --backend`` and
#: ``takzero.playtak --backend`` call ``set_play_backend``; ``set_search_threads``). Tests call those
#: command lines in process, so every such global is restored after each test: one test's choice
#: must not become the next test's default (``tests/test_process_settings.py`` holds this list to
#: every ``global`` statement of the package).
PROCESS_SETTINGS: dict[str, tuple[str, ...]] = {
    "takzero.players.network": ("_backend_value", "_threads_chosen", "_threads_value"),
}


@pytest.fixture(autouse=True)
def _restore_process_settings():
    """Put back every :data:`PROCESS_SETTINGS` global after the test."""
    import importlib

    saved = []
    for module_name, names in PROCESS_SETTINGS.items():
        module = importlib.import_module(module_name)
        saved.append((module, {name: getattr(module, name) for name in names}))
    yield
    for module, values in saved:
        for name, value in values.items():
            setattr(module, name, value)


@pytest.fixture(autouse=True)
def _no_ray_left_running():
    """A test that starts Ray in this process shuts it down (a Ray left up changes what the next
    test of the worker sees: ``ray.init`` joins it, ``ray.is_initialized()`` is True). Fails the
    test that left it up, after shutting it down so the next test starts clean."""
    import sys

    ray = sys.modules.get("ray")
    before = ray is not None and ray.is_initialized()
    yield
    ray = sys.modules.get("ray")
    if ray is not None and not before and ray.is_initialized():
        ray.shutdown()
        pytest.fail("this test left Ray initialised in the test process (shut it down in a finally or a fixture)")
