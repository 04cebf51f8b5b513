"""The type checker CI runs (``mypy`` in ``.ci/run``, its folders in pyproject.toml's ``[tool.mypy]
files``) keeps every room that passed: a room cannot silently drop out of the list, every module
of the package is checked (the whole package passes since 2026-12-07), and the list passes (when
mypy is installed) on the tree as it is."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent

#: The folders the type checker covers, each listed in pyproject.toml or under a folder listed
#: there (``takzero``: the whole package, the command-line modules included); never take one out.
CHECKED_ROOMS = {
    "takzero", "takzero/game", "takzero/search", "takzero/io", "takzero/nn", "takzero/players",
    "takzero/matches", "takzero/protocols", "takzero/pipeline",
}


def _mypy_config() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["mypy"]


def _checked_folders() -> set[str]:
    return {str(p).rstrip("/") for p in _mypy_config()["files"]}


def _covered(path: str, folders: set[str]) -> bool:
    """Whether ``path`` (relative to the repository, with ``/``) is one of ``folders`` or under one."""
    return any(path == f or path.startswith(f + "/") for f in folders)


def test_mypy_config_lists_the_rooms() -> None:
    files = _checked_folders()
    missing = sorted(room for room in CHECKED_ROOMS if not _covered(room, files))
    assert not missing, f"rooms dropped from [tool.mypy] files: {missing}"
    for room in files:
        assert (ROOT / room).is_dir(), f"[tool.mypy] files names {room}, which is not a folder"


def test_every_module_of_the_package_is_checked() -> None:
    files = _checked_folders()
    modules = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "takzero").rglob("*.py"))
    assert modules, "no module found under takzero/"
    unchecked = [m for m in modules if not _covered(m, files)]
    assert not unchecked, f"modules outside [tool.mypy] files: {unchecked[:10]}"


def test_ci_runs_mypy_after_ruff() -> None:
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "mypy" in lines, ".ci/run does not run `mypy` (reading its rooms from pyproject.toml)"
    ruff = next(i for i, ln in enumerate(lines) if ln.startswith("ruff check"))
    assert lines.index("mypy") > ruff


def test_dev_extra_installs_mypy() -> None:
    with open(ROOT / "pyproject.toml", "rb") as f:
        dev = tomllib.load(f)["project"]["optional-dependencies"]["dev"]
    assert any(req.split(">")[0].split("=")[0].strip() == "mypy" for req in dev)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_mypy_passes_on_the_rooms() -> None:
    # about 20 s of CPU without mypy's cache (.mypy_cache), 3 s with it
    proc = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=590
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
