"""Atomic file writes: the new file is written beside the target under a temporary name and
renamed over it (``os.replace``), so a failed or interrupted write never destroys an older file
and a reader never sees half a file. Only a regular file (or a new name) is replaced: a target
that exists as anything else (a device such as ``/dev/full``, a FIFO, a socket, a folder) is
refused with :class:`NotARegularFileError` before anything is written, since a rename would put a
plain file in its place.

One helper for every user-facing output of the package and its scripts (PTN files, pictures,
plots, JSON). It lives in the ``io`` room (no torch, above ``game`` only) so every room above may
use it; ``takzero.pipeline.checkpoints.atomic_torch_save`` is the checkpoint counterpart (with a
sidecar). :func:`write_ptn_file` writes PTN games this way.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from takzero.game.ptn_game import PTNGame
from takzero.game.ptn_write import write_ptn, write_ptn_games


def _temp_path(path: Path) -> Path:
    """A fresh hidden name beside ``path`` (same folder, so the rename is atomic)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


class NotARegularFileError(OSError):
    """An output path that exists and is not a regular file (a device, FIFO, socket or folder):
    the atomic writers refuse to replace it. An OSError, so every writer's ``except OSError``
    reports it in one line."""


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def check_replaceable(path: str | os.PathLike[str]) -> None:
    """Refuse an output ``path`` that exists and is not a regular file (symbolic links followed:
    a link to a device counts as the device). A missing path, or one that cannot be looked at,
    passes (the write itself then fails with the system's reason).

    Raises NotARegularFileError (an OSError), one line: ``'<path> is a FIFO, not a regular file:
    not replaced; choose a file name'``."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise NotARegularFileError(f"{os.fspath(path)} is {kind}, not a regular file: not replaced; choose a file name")


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; when the ``with`` block ends without an
    exception the file is closed and renamed over ``path``, otherwise it is deleted and ``path``
    is left as it was.

    ``mode`` is ``"w"`` (text, ``encoding``) or ``"wb"`` (bytes). The file gets the usual mode
    of :func:`open` (0666 less the umask). Raises ValueError for another mode;
    NotARegularFileError (an OSError) before anything is written when ``path`` exists and is not
    a regular file (a device, FIFO, socket or folder; checked again before the rename); OSError
    when the folder cannot be written or the disk is full."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open: mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    check_replaceable(path)
    tmp = _temp_path(path)
    x_mode = "x" if mode == "w" else "xb"
    try:
        with open(tmp, x_mode, encoding=encoding if mode == "w" else None) as f:
            yield f
        check_replaceable(path)  # made meanwhile
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``text`` atomically (see :func:`atomic_open`). Raises OSError."""
    with atomic_open(path, "w", encoding=encoding) as f:
        f.write(text)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (see :func:`atomic_open`). Raises OSError."""
    with atomic_open(path, "wb", encoding=None) as f:
        f.write(data)


def check_writable_folder(folder: str | os.PathLike[str]) -> Path:
    """Create ``folder`` (and its parents) if missing and check that files can be written in it,
    without touching any file already there. Returns it as a Path.

    Raises NotADirectoryError when it (or a parent) is a file, OSError when it cannot be created
    or written."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} is a file, not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    probe = _temp_path(folder / "write-check")
    with open(probe, "x"):
        pass
    probe.unlink()
    return folder


def free_names(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The files a new run writes, never an earlier run's: ``paths`` themselves when none of them
    exists (a folder or a link counts), else every one numbered with the first ``n`` (2, 3, ...)
    for which no ``<stem>_<n><suffix>`` of them exists (``games.ptn`` -> ``games_2.ptn``, as an
    export without ``-o`` writes ``model_2.pt``), so one run's files keep one number. Nothing is
    created: two runs started at once in one folder may pick the same number."""
    files = [Path(p) for p in paths]

    def numbered(n: int) -> list[Path]:
        return files if n == 1 else [f.with_name(f"{f.stem}_{n}{f.suffix}") for f in files]

    n = 1
    while any(os.path.lexists(f) for f in numbered(n)):
        n += 1
    return numbered(n)


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether paths ``a`` and ``b`` name one file: the same path once resolved (symbolic links,
    ``..``), or one file by two names (a hard link). False when either cannot be looked at."""
    a, b = Path(a), Path(b)
    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and a.samefile(b)
    except (OSError, RuntimeError):  # a loop of links, a path that cannot be looked at
        return False


def check_not_input(
    output: str | os.PathLike[str], *inputs: str | os.PathLike[str] | None, option: str = "-o"
) -> None:
    """Refuse an ``output`` path that is one of the command's ``inputs`` (None ones skipped):
    a command never writes over what it reads, even atomically (an annotated game over its
    record, a picture over the PTN it draws). Every command-line module that writes a file
    checks it before it reads anything, so this also refuses, up front, an ``output`` that exists
    and is not a regular file (:func:`check_replaceable`; the writers refuse it again).

    Raises ValueError (one line): ``'<output> is the input file <input>: a command never writes
    over its input; choose another -o'``, or ``'<output> is a FIFO, not a regular file: ...'``."""
    try:
        check_replaceable(output)
    except NotARegularFileError as e:
        raise ValueError(str(e)) from None
    for source in inputs:
        if source is not None and same_file(output, source):
            raise ValueError(f"{output} is the input file {source}: a command never writes over its "
                             f"input; choose another {option}")


__all__ = [
    "NotARegularFileError",
    "atomic_open",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_not_input",
    "check_replaceable",
    "check_writable_folder",
    "free_names",
    "same_file",
    "write_ptn_file",
]


def write_ptn_file(path: str | os.PathLike[str], games: PTNGame | Iterable[PTNGame]) -> None:
    """Write one game or several to ``path`` (UTF-8 PTN, :mod:`takzero.game.ptn_write`),
    replacing the file atomically (a failed write leaves the older file whole; see
    :func:`atomic_write_text`). Raises OSError when the file cannot be written, ValueError for a
    record that cannot be written as PTN."""
    text = write_ptn(games) if isinstance(games, PTNGame) else write_ptn_games(games)
    atomic_write_text(path, text)


def exit_now(status: int) -> None:
    """End the process with ``status`` once stdout and stderr are flushed, without the
    interpreter's teardown (the command lines ``takzero.tei`` and ``takzero.playtak`` end so).
    The teardown of torch, onnxruntime and numba took 3-12 s on a loaded machine (a GUI waiting
    for an engine to end after ``quit`` saw it still running), and a thread still inside
    onnxruntime then aborts the process (status 134, "terminate called without an active
    exception": the thread is ended by ``pthread_exit`` when it takes the GIL back, and the
    unwinding meets a ``noexcept`` C++ frame). Never returns."""
    import sys

    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)
