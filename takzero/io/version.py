"""Which program is running: the package version and a digest of its own source files.

Two checkouts of the package at different commits, or one with uncommitted edits, give different
digests, whatever ``PYTHONPATH`` or the working directory made Python import. The TEI engine
announces it in its ``id name`` line, so a match between two engines says which code each side
ran (``python -m takzero.tei`` from a folder that holds a ``takzero`` package runs that folder's
code, since ``python -m`` puts the working directory before ``PYTHONPATH`` on ``sys.path``).
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import metadata
from pathlib import Path

#: The package folder (``takzero/``) whose ``.py`` files :func:`source_digest` reads.
PACKAGE_ROOT = Path(__file__).resolve().parent.parent

#: Hex digits of a digest kept in names.
SHORT = 8


def source_digest(package_root: Path = PACKAGE_ROOT) -> str:
    """Hex sha256 of the package's ``.py`` files: each file's path relative to ``package_root``
    and its bytes, in sorted path order (``__pycache__`` left out). About 2 MB read, a few ms.

    Raises OSError when a file cannot be read."""
    h = hashlib.sha256()
    for path in sorted(package_root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        h.update(path.relative_to(package_root).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


@cache
def program_version() -> str:
    """``'<version>+src.<digest>'``, e.g. ``'0.1.0+src.1a2b3c4d'``: the installed package version
    (``'0'`` when the package is not installed) and the first :data:`SHORT` hex digits of
    :func:`source_digest` of the code that is running. Computed once per process."""
    try:
        version = metadata.version("takzero")
    except metadata.PackageNotFoundError:
        version = "0"
    return f"{version}+src.{source_digest()[:SHORT]}"


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes (hex), read in 1 MiB chunks. Raises OSError."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


__all__ = ["PACKAGE_ROOT", "SHORT", "file_sha256", "program_version", "source_digest"]
