"""Checkpoint files of a run: atomic writes with a SHA-256 sidecar, verified loads, listing,
pruning and removal of the temp files of killed writes.

A file and its sidecar ``<name>.sha256`` change together as one unit, whatever moment a kill
strikes: the new file is written to a temp file and fsynced; the sidecar is replaced (atomically)
by one listing the new digest *and* the old one; the file is renamed into place; the sidecar is
replaced by one listing the new digest only. At every moment the file on disk, old or new, has its
digest in the sidecar, so a verified load never fails because of a kill and never accepts a
truncated or corrupt file. Files are named ``ckpt_<step, 9 digits>.pt``.

Files are read weights-only (:mod:`takzero.nn.safe_load`): a checkpoint whose pickle would run
code is refused like a corrupt one. A write that fails (a full disk) raises
:class:`CheckpointWriteError` and leaves the files on disk as they were. A checkpoint that fails
its check on resume is renamed ``<name>.rejected`` (:func:`set_aside`) once an older one is taken.
"""

from __future__ import annotations

import errno
import hashlib
import io
import logging
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from takzero.io.version import file_sha256
from takzero.nn.safe_load import UnsafeFileError, load_weights_only, to_plain

log = logging.getLogger(__name__)

CKPT_RE = re.compile(r"^ckpt_(\d{9})\.pt$")


TMP_SUFFIXES = (".tmp", ".tmp.sha")


def _write_sidecar(side: Path, digests: list[str], tmp_base: str) -> None:
    side_tmp = Path(tmp_base + ".sha")
    with open(side_tmp, "w") as f:
        f.write("".join(d + "\n" for d in digests))
        f.flush()
        os.fsync(f.fileno())
    os.replace(side_tmp, side)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _sidecar_digests(side: Path) -> list[str]:
    if not side.exists():
        return []
    return [line.strip() for line in side.read_text().splitlines() if line.strip()]


class CheckpointWriteError(OSError):
    """A checkpoint that could not be written (a full disk, a quota, an I/O error): the files
    already on disk are left as they were and verify. ``errno`` is the one of the cause."""

    def __init__(self, path: Path, cause: OSError) -> None:
        if cause.errno == errno.ENOSPC:
            why = "the disk is full"
        elif cause.errno == errno.EDQUOT:
            why = "the disk quota is exceeded"
        else:
            why = cause.strerror or str(cause)
        super().__init__(f"{path}: not written ({why}); the files already on disk are unchanged")
        self.errno = cause.errno
        self.path = Path(path)


def atomic_torch_save(obj: Any, path: Path) -> None:
    """``torch.save`` ``obj`` to ``path`` with its ``<path>.sha256`` sidecar, as one atomic unit
    (see the module docstring): temp file, fsync, sidecar with the new and old digests, rename,
    sidecar with the new digest. A kill leaves the old file or the new one, each verifiable, and
    at most a temp file (``*.tmp``, ``*.tmp.sha``) that :func:`remove_stale_temp_files` deletes.

    ``obj`` goes through :func:`takzero.nn.safe_load.to_plain` first (numpy scalars become
    numbers), so the file always loads weights-only. It is serialised in memory and then written
    with plain file writes, so a full disk shows as the OSError it is.

    Raises:
        CheckpointWriteError: the write failed (e.g. the disk filled): the temp files are removed
            and the file on disk before the call, with its sidecar, still verifies.
        TypeError: ``obj`` holds something that is not a tensor or plain value.
    """
    buf = io.BytesIO()
    torch.save(to_plain(obj), buf)
    atomic_save_bytes(buf.getbuffer(), path)


def atomic_save_bytes(data: bytes | memoryview, path: Path) -> None:
    """Write ``data`` (the bytes of a ``torch.save``) to ``path`` with its SHA-256 sidecar, as
    one atomic unit: the write of :func:`atomic_torch_save`.

    Raises:
        CheckpointWriteError: the write failed (e.g. the disk filled): the temp files are removed
            and the file on disk before the call, with its sidecar, still verifies.
    """
    path = Path(path)
    digest = hashlib.sha256(data).hexdigest()
    side = Path(str(path) + ".sha256")
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        old = file_sha256(path) if path.exists() else None
        both = [digest] + ([old] if old and old != digest else [])
        _write_sidecar(side, both, tmp)  # accepts the old file and the new one
        os.replace(tmp, path)
        _fsync_dir(path.parent)
        if len(both) > 1:
            _write_sidecar(side, [digest], tmp)
        _fsync_dir(path.parent)
    except BaseException as e:
        for p in (tmp, f"{tmp}.sha") if tmp is not None else ():
            try:
                if os.path.exists(p):
                    os.unlink(p)
            except OSError:  # pragma: no cover - nothing more to do for a temp file
                pass
        if isinstance(e, OSError) and not isinstance(e, CheckpointWriteError):
            raise CheckpointWriteError(path, e) from e
        raise


def remove_stale_temp_files(folder: Path) -> list[Path]:
    """Delete the temp files (``*.tmp``, ``*.tmp.sha``) that killed atomic writes left in
    ``folder`` (not recursive); returns the paths removed. Call it only when no write into
    ``folder`` is in progress (at the start of a run)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    for p in folder.iterdir():
        if p.is_file() and p.name.endswith(TMP_SUFFIXES):
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


class CheckpointError(RuntimeError):
    """A checkpoint file that is missing, truncated or does not match its checksum."""


def check_sidecar(path: Path, require_checksum: bool = False) -> None:
    """Check ``path`` against its ``<path>.sha256`` sidecar (any digest listed there matches).
    Without a sidecar: an error if ``require_checksum``, else nothing is checked.

    Raises CheckpointError (naming the file) when it is missing, its checksum does not match
    (a truncated or bit-flipped file), or the required sidecar is missing."""
    path = Path(path)
    side = Path(str(path) + ".sha256")
    if not path.exists():
        raise CheckpointError(f"{path}: no such checkpoint")
    if require_checksum and not side.exists():
        raise CheckpointError(f"{path}: no {side.name} checksum file, so it cannot be verified")
    if side.exists() and file_sha256(path) not in _sidecar_digests(side):
        raise CheckpointError(f"{path}: checksum mismatch (corrupt or truncated file)")


def load_checked(path: Path, require_checksum: bool = False) -> dict[str, Any]:
    """Load a checkpoint written by :func:`atomic_torch_save`, verifying its SHA-256 sidecar.

    ``require_checksum``: a missing sidecar is an error (the run's own checkpoints: the sidecar is
    written before the checkpoint is renamed into place, so a checkpoint without one was damaged
    or not written by the run); otherwise a file without a sidecar is loaded unverified.
    The file is read weights-only (:func:`takzero.nn.safe_load.load_weights_only`): a
    checkpoint whose pickle would run code is refused like a corrupt one, never unpickled.
    Raises CheckpointError when the file is missing, its checksum does not match or is required
    and missing, it cannot be read, or it is not weights-only."""
    path = Path(path)
    check_sidecar(path, require_checksum)
    try:
        return load_weights_only(path)
    except UnsafeFileError as e:
        raise CheckpointError(str(e)) from None
    except (ValueError, OSError) as e:  # unreadable: not a torch file, truncated, corrupt
        raise CheckpointError(str(e) if str(path) in str(e) else f"{path}: cannot be read ({e})") from None


def list_checkpoints(folder: Path) -> list[Path]:
    """Checkpoint files ``ckpt_<step>.pt`` in ``folder``, oldest first."""
    if not folder.exists():
        return []
    return sorted(p for p in folder.iterdir() if CKPT_RE.match(p.name))


def latest_verified(
    folder: Path, content_problem: Callable[[Any], str | None] | None = None,
) -> tuple[tuple[Path, dict[str, Any]] | None, list[tuple[Path, str]]]:
    """The newest checkpoint in ``folder`` that verifies (its sidecar matches, it reads
    weights-only, and ``content_problem(contents)``, when given, finds nothing wrong with what
    it holds: a checksum only says the file is the one written, not that it is a checkpoint),
    and the newer ones that did not, newest first, each with the one-line reason (truncated,
    bit-flipped, checksum mismatch, no sidecar, not weights-only, the content's problem). The
    first item is None when none verifies (then every checkpoint is in the list)."""
    rejected: list[tuple[Path, str]] = []
    for path in reversed(list_checkpoints(folder)):
        try:
            state = load_checked(path, require_checksum=True)
        except CheckpointError as e:
            rejected.append((path, str(e)))
            continue
        problem = content_problem(state) if content_problem is not None else None
        if problem is None:
            return (path, state), rejected
        rejected.append((path, f"{path}: not a usable checkpoint ({problem})"))
    return None, rejected


def load_latest(folder: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest readable checkpoint in ``folder`` whose checksum sidecar matches (corrupt or
    unverifiable ones are reported and skipped), or None when there is none."""
    found, rejected = latest_verified(folder)
    for _path, reason in rejected:
        log.error("%s; trying an older checkpoint", reason)
    return found


REJECTED_SUFFIX = ".rejected"


def set_aside(path: Path) -> Path:
    """Rename a checkpoint that failed its check (and its sidecar) to ``<name>.rejected``
    (``.rejected.2``, ... when taken), so that it is never resumed, counted or pruned in place of
    a good checkpoint, and is kept for a look. Returns the new path of the file.
    Raises OSError when the rename fails."""
    path = Path(path)
    n, target = 1, path.with_name(path.name + REJECTED_SUFFIX)
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}{REJECTED_SUFFIX}.{n}")
    side = Path(str(path) + ".sha256")
    if path.exists():
        os.replace(path, target)
    if side.exists():
        os.replace(side, target.with_name(target.name.replace(path.name, path.name + ".sha256", 1)))
    return target


def root_problem(root: str | Path) -> str | None:
    """Why runs cannot be written under ``checkpoint_root`` = ``root``, in one line, or None:
    an empty value, a path that is a file (or lies under one), or a folder (``root`` or, when it
    does not exist yet, the nearest existing folder above it, where it would be made) that this
    user cannot write into."""
    if not str(root).strip():
        return "checkpoint_root is empty: name the folder the runs go in (default: checkpoints)"
    path = Path(root).expanduser().absolute()
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        where = "is" if probe == path else f"lies under {probe}, which is"
        return f"checkpoint_root: {root} {where} not a folder"
    try:  # a real write: a read-only file system or mode stops root too, os.access would not
        os.rmdir(tempfile.mkdtemp(dir=probe, prefix=".takzero-write-test-"))
    except OSError as e:
        made = "" if probe == path else " (where it would be made)"
        return (f"checkpoint_root: {root}: cannot write in {probe}{made}: {e.strerror or e}; "
                "choose a folder you can write to")
    return None


def prune_checkpoints(folder: Path, keep: int, protect: set[str] | frozenset[str] = frozenset()) -> None:
    """Delete all but the newest ``keep`` checkpoints (and their sidecars), sparing the names in
    ``protect`` (a run's checkpoints whose weights an owed check still needs)."""
    for path in list_checkpoints(folder)[:-keep]:
        if path.name in protect:
            continue
        path.unlink(missing_ok=True)
        Path(str(path) + ".sha256").unlink(missing_ok=True)
