"""The numba cache guard (``takzero.numba_cache``): a kernel that inlines a compiled function of
another file gets the new code after that file is edited, in a fresh process, where numba's cache
alone keeps the old one; the guard's folder layout matches numba's; several processes starting at
once leave a working cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import takzero
from takzero import numba_cache

CHECKOUT = Path(takzero.__file__).resolve().parent.parent

INNER = """\
from numba import njit


@njit(cache=True, inline="always")
def step(x):
    return x + {k}
"""
OUTER = """\
from numba import njit

from tinypkg.inner import step


@njit(cache=True)
def kernel(x):
    return step(x) * 10
"""
GUARDED_INIT = """\
from pathlib import Path

from takzero.numba_cache import guard

guard(Path(__file__).parent)
"""


def _package(tmp_path: Path, guarded: bool) -> Path:
    pkg = tmp_path / "tinypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(GUARDED_INIT if guarded else "")
    (pkg / "inner.py").write_text(INNER.format(k=1))
    (pkg / "outer.py").write_text(OUTER)
    return pkg


def _run(tmp_path: Path, env_extra: dict[str, str] | None = None) -> int:
    """kernel(1) in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(CHECKOUT)])
    env.update(env_extra or {})
    out = subprocess.run(
        [sys.executable, "-c", "from tinypkg.outer import kernel; print(kernel(1))"],
        env=env, capture_output=True, text=True, timeout=300, check=True,
    )
    return int(out.stdout.split()[-1])


def _edit_inner(pkg: Path, k: int) -> None:
    (pkg / "inner.py").write_text(INNER.format(k=k))


@pytest.mark.slow  # recompiles kernels in fresh processes
@pytest.mark.parametrize("cache_env", [False, True], ids=["pycache", "NUMBA_CACHE_DIR"])
def test_guard_recompiles_a_kernel_whose_inlined_function_changed(tmp_path, cache_env):
    pkg = _package(tmp_path, guarded=True)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "nbcache")} if cache_env else {}
    assert _run(tmp_path, env) == 20
    cached = numba_cache.cache_dir(pkg / "outer.py") if not cache_env else None
    if cached is not None:
        assert any(p.name.startswith("outer.") for p in cached.glob("*.nbi"))
    assert _run(tmp_path, env) == 20  # from the cache
    _edit_inner(pkg, 2)
    assert _run(tmp_path, env) == 30
    assert _run(tmp_path, env) == 30  # the new code was cached again, and stays


def test_numba_alone_keeps_the_stale_kernel(tmp_path):
    """The motivating fact: without the guard, the edited inner function is not seen."""
    pkg = _package(tmp_path, guarded=False)
    assert _run(tmp_path) == 20
    _edit_inner(pkg, 2)
    assert _run(tmp_path) == 20  # stale: numba keyed outer.py's kernel on outer.py alone


def test_cache_dir_matches_numba_layout(tmp_path, monkeypatch):
    from numba.core.caching import _CacheLocator

    src = tmp_path / "a" / "m.py"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "c"))
    expect = tmp_path / "c" / _CacheLocator.get_suitable_cache_subpath(str(src))
    assert numba_cache.cache_dir(src) == expect
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    assert numba_cache.cache_dir(src) == tmp_path / "a" / "__pycache__"


def test_guard_clears_only_on_change_and_only_compiled_modules(tmp_path):
    pkg = _package(tmp_path, guarded=False)
    (pkg / "plain.py").write_text("X = 1\n")
    cache = pkg / "__pycache__"
    cache.mkdir()
    for name in ("outer.kernel-7.py311.nbi", "outer.kernel-7.py311.1.nbc", "inner.step-4.py311.nbi",
                 "plain.cpython-311.pyc", "other.f-1.py311.nbi"):
        (cache / name).write_bytes(b"x")
    assert numba_cache.guard(pkg) == 3  # no stamp yet: the compiled modules' files go
    left = sorted(p.name for p in cache.iterdir() if not p.name.startswith("takzero-"))
    assert left == ["other.f-1.py311.nbi", "plain.cpython-311.pyc"]
    (cache / "outer.kernel-7.py311.nbi").write_bytes(b"x")
    assert numba_cache.guard(pkg) == 0  # stamp matches
    (pkg / "plain.py").write_text("X = 2\n")  # not compiled: no effect
    assert numba_cache.guard(pkg) == 0
    _edit_inner(pkg, 3)
    assert numba_cache.guard(pkg) == 1


@pytest.mark.slow  # compiles in several processes at once
def test_processes_starting_at_once(tmp_path):
    """Four fresh processes after an edit: all get the new code, and the cache they leave is
    used (a later run compiles nothing: no new index file is written)."""
    pkg = _package(tmp_path, guarded=True)
    assert _run(tmp_path) == 20
    _edit_inner(pkg, 5)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(CHECKOUT)])
    code = "from tinypkg.outer import kernel; print(kernel(1))"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(4)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4
    assert [int(o.split()[-1]) for o in outs] == [60] * 4
    index = pkg / "__pycache__"
    before = {p.name: p.stat().st_mtime_ns for p in index.glob("*.nbi")}
    assert _run(tmp_path) == 60
    after = {p.name: p.stat().st_mtime_ns for p in index.glob("*.nbi")}
    assert after == before
    assert (index / numba_cache.STAMP_NAME).is_file()
