"""Checkpoint files of a run: atomic writes with a SHA-256 sidecar, verified loads, listing,
pruning and removal of the temp files of killed writes.

A file and its sidecar ``<name>.sha256`` change together as one unit, whatever moment a kill
strikes: the new file is written to a temp file and fsynced; the sidecar is replaced (atomically)
by one listing the new digest *and* the old one; the file is renamed into place; the sidecar is
replaced by one listing the new digest only. At every moment the file on disk, old or new, has its
digest in the sidecar, so a verified load never fails because of a kill and never accepts a
truncated or corrupt file. Files are named ``ckpt_<step, 9 digits>.pt``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

CKPT_RE = re.compile(r"^ckpt_(\d{9})\.pt$")


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes (hex), read in 1 MiB chunks. Raises OSError."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


def atomic_torch_save(obj: Any, path: Path) -> None:
    """``torch.save`` ``obj`` to ``path`` with its ``<path>.sha256`` sidecar, as one atomic unit
    (see the module docstring): temp file, fsync, sidecar with the new and old digests, rename,
    sidecar with the new digest. A kill leaves the old file or the new one, each verifiable, and
    at most a temp file (``*.tmp``, ``*.tmp.sha``) that :func:`remove_stale_temp_files` deletes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    side = Path(str(path) + ".sha256")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        digest = file_sha256(Path(tmp))
        old = file_sha256(path) if path.exists() else None
        both = [digest] + ([old] if old and old != digest else [])
        _write_sidecar(side, both, tmp)  # accepts the old file and the new one
        os.replace(tmp, path)
        _fsync_dir(path.parent)
        if len(both) > 1:
            _write_sidecar(side, [digest], tmp)
        _fsync_dir(path.parent)
    except BaseException:
        for p in (tmp, tmp + ".sha"):
            if os.path.exists(p):
                os.unlink(p)
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


def load_checked(path: Path, require_checksum: bool = False) -> dict[str, Any]:
    """Load a checkpoint written by :func:`atomic_torch_save`, verifying its SHA-256 sidecar.

    ``require_checksum``: a missing sidecar is an error (the run's own checkpoints: the sidecar is
    written before the checkpoint is renamed into place, so a checkpoint without one was damaged
    or not written by the run); otherwise a file without a sidecar is loaded unverified.
    Raises CheckpointError when the file is missing, its checksum does not match or is required
    and missing, or it cannot be read."""
    path = Path(path)
    side = Path(str(path) + ".sha256")
    if not path.exists():
        raise CheckpointError(f"{path}: no such checkpoint")
    if require_checksum and not side.exists():
        raise CheckpointError(f"{path}: no {side.name} checksum file, so it cannot be verified")
    if side.exists():
        want = _sidecar_digests(side)
        got = file_sha256(path)
        if got not in want:
            raise CheckpointError(f"{path}: checksum mismatch (corrupt or truncated file)")
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # torch raises several types on a damaged zip
        raise CheckpointError(f"{path}: cannot be read ({e})") from None


def list_checkpoints(folder: Path) -> list[Path]:
    """Checkpoint files ``ckpt_<step>.pt`` in ``folder``, oldest first."""
    if not folder.exists():
        return []
    return sorted(p for p in folder.iterdir() if CKPT_RE.match(p.name))


def load_latest(folder: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest readable checkpoint in ``folder`` whose checksum sidecar matches (corrupt or
    unverifiable ones are reported and skipped), or None when there is none."""
    for path in reversed(list_checkpoints(folder)):
        try:
            return path, load_checked(path, require_checksum=True)
        except CheckpointError as e:
            log.error("%s; trying an older checkpoint", e)
    return None


def prune_checkpoints(folder: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` checkpoints (and their sidecars)."""
    for path in list_checkpoints(folder)[:-keep]:
        path.unlink(missing_ok=True)
        Path(str(path) + ".sha256").unlink(missing_ok=True)
