"""Checkpoint files of a run: atomic writes with a SHA-256 sidecar, verified loads, listing and
pruning.

A checkpoint is written to a temp file in the same folder, fsynced, its checksum written to
``<name>.sha256``, then renamed into place, so a truncated or corrupt checkpoint is detected on
load and an older one used instead. Files are named ``ckpt_<step, 9 digits>.pt``.
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


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_torch_save(obj: Any, path: Path) -> None:
    """``torch.save`` to a temp file in the same folder, fsync, write ``<path>.sha256``, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        digest = _sha256(Path(tmp))
        side_tmp = Path(tmp + ".sha")
        side_tmp.write_text(digest + "\n")
        os.replace(side_tmp, str(path) + ".sha256")
        os.replace(tmp, path)
    except BaseException:
        for p in (tmp, tmp + ".sha"):
            if os.path.exists(p):
                os.unlink(p)
        raise


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
        want = side.read_text().strip()
        got = _sha256(path)
        if want != got:
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
