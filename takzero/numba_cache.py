"""A guard that keeps numba's on-disk cache of the compiled kernels from going stale.

numba's cache (``@njit(cache=True)``) keys each function on the source of its own file only
(numba 0.68: a sha256 of that file). A kernel that inlines or calls a compiled function of another
file keeps that function's old code: edit ``takzero/search/puct.py`` and the step kernels of
``takzero/search/steps.py``, which inline its selection rule, load the old rule from the cache.

:func:`guard` (run by ``takzero/__init__.py`` on import, before any kernel is loaded) hashes every
module of the package that uses numba (see :func:`compiled_sources`), and keeps that hash in a
stamp file beside each of their caches (``__pycache__`` of the module's folder, or its folder under
``NUMBA_CACHE_DIR`` when that is set, laid out as numba does). When the stamp differs from the
hash (a compiled module changed, or Python was upgraded) or is missing, the cache files of
all those modules (``<module>.*.nbi`` and ``*.nbc``) are removed before any kernel loads, so the
kernels compile afresh (minutes) and are cached again.

Several processes may start at once (Ray actors): the check-and-clear of a folder holds an
exclusive ``fcntl`` lock on a lock file in it, so one process clears and the others then find the
new stamp and keep the fresh files; the stamp is written to a temporary file and renamed; a cache
file that another process removed first is skipped. Cost on import when nothing changed: reading
and hashing the compiled modules (about 1 MB, a few milliseconds) and one stamp per folder.

Not covered: numba's fallback cache for a read-only checkout (a user-wide folder), and a process
still running the old code that compiles a new signature after the sources changed.
"""

from __future__ import annotations

import hashlib
import os
import sys
from contextlib import contextmanager
from pathlib import Path

__all__ = ["STAMP_NAME", "cache_dir", "compiled_sources", "guard", "sources_digest"]

#: Name of the stamp file (the hex sha256 of the compiled sources) in each cache folder.
STAMP_NAME = "takzero-numba-sources.sha256"
_LOCK_NAME = "takzero-numba-sources.lock"
_CACHE_SUFFIXES = (".nbi", ".nbc")


def compiled_sources(package_root: Path) -> list[Path]:
    """The ``.py`` files under ``package_root`` that import numba (sorted): the modules that
    hold compiled functions or numba extensions (``takzero.search.numba_ext``)."""
    out = []
    for path in sorted(package_root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        text = path.read_bytes()
        if b"from numba" in text or b"import numba" in text:
            out.append(path)
    return out


def sources_digest(files: list[Path], package_root: Path) -> str:
    """Hex sha256 of ``files`` (their paths relative to ``package_root`` and contents) and the
    Python version (numba's own index already drops entries of another numba version)."""
    h = hashlib.sha256()
    h.update(sys.version.encode())
    for path in files:
        h.update(path.relative_to(package_root).as_posix().encode() + b"\0")
        data = path.read_bytes()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def cache_dir(source: Path) -> Path:
    """The folder numba caches the functions of ``source`` in: ``<NUMBA_CACHE_DIR>/<folder
    name>_<sha1 of the folder's absolute path>`` when ``NUMBA_CACHE_DIR`` is set (numba's
    ``_CacheLocator.get_suitable_cache_subpath``), else ``__pycache__`` beside the file."""
    root = os.environ.get("NUMBA_CACHE_DIR")
    folder = os.path.dirname(os.path.abspath(source))
    if root:
        name = os.path.split(folder)[-1] + "_" + hashlib.sha1(folder.encode()).hexdigest()
        return Path(root) / name
    return Path(folder) / "__pycache__"


@contextmanager
def _locked(folder: Path):
    """Hold an exclusive lock on ``folder``'s lock file (no lock where ``fcntl`` is missing)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    fd = os.open(folder / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _read_stamp(folder: Path) -> str | None:
    try:
        return (folder / STAMP_NAME).read_text().strip()
    except OSError:
        return None


def _write_stamp(folder: Path, digest: str) -> None:
    """Write the stamp through a temporary file and a rename (readers see old or new)."""
    import tempfile  # only when a stamp is written (its import costs more than the check)

    fd, tmp = tempfile.mkstemp(dir=folder, prefix=STAMP_NAME, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(digest + "\n")
        os.replace(tmp, folder / STAMP_NAME)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _clear(folder: Path, stems: set[str]) -> int:
    """Remove the cache files of the modules ``stems`` in ``folder``; returns how many."""
    removed = 0
    for path in folder.iterdir():
        if path.suffix in _CACHE_SUFFIXES and path.name.split(".", 1)[0] in stems:
            try:
                path.unlink()
                removed += 1
            except FileNotFoundError:  # another process removed it first
                pass
    return removed


def guard(package_root: Path | None = None) -> int:
    """Remove numba's cached kernels of ``package_root`` (default: this package) when its
    compiled sources changed since they were cached (see the module docstring).

    Returns the number of cache files removed (0 when the stamps match). A cache folder that
    cannot be created or written (a read-only install) is skipped: the guard never raises
    ``OSError`` (a stale cache there is possible, see "Not covered")."""
    root = Path(package_root) if package_root is not None else Path(__file__).resolve().parent
    files = compiled_sources(root)
    if not files:
        return 0
    digest = sources_digest(files, root)
    stems: dict[Path, set[str]] = {}
    for path in files:
        stems.setdefault(cache_dir(path), set()).add(path.stem)
    removed = 0
    for folder, names in stems.items():
        if _read_stamp(folder) == digest:
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with _locked(folder):
                if _read_stamp(folder) == digest:  # another process cleared it meanwhile
                    continue
                removed += _clear(folder, names)
                _write_stamp(folder, digest)
        except OSError:
            continue
    return removed
