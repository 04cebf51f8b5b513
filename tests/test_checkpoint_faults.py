"""Checkpoints that cannot mislead a resume: a truncated, bit-flipped, checksum-mismatched or
unverifiable newest checkpoint is detected, the previous good one is used, the run says so in
train.log and sets the bad file aside; a disk that fills during a checkpoint write stops the run
with one clear line and leaves the last good checkpoint, which resumes it."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import torch
from smoke_config import smoke_config

from takzero.pipeline import checkpoints as ck
from takzero.pipeline.checkpoints import (
    CheckpointWriteError,
    atomic_torch_save,
    list_checkpoints,
    load_checked,
    prune_checkpoints,
)

_cfg = smoke_config


def _run_state(cfg, step: int) -> dict:
    """A checkpoint as the run writes it (trainer, run counters, promoted weights)."""
    from takzero.pipeline.resume import RunCounters
    from takzero.pipeline.trainer import Trainer

    trainer = Trainer(cfg.train, cfg.model_config(), device="cpu", seed=step)
    trainer.step, trainer.generation = step, step // 10
    state = trainer.state_dict()
    state["run"] = {**RunCounters(games=step).to_checkpoint()}
    state["promoted"] = (0, {k: v.clone() for k, v in trainer.model.state_dict().items()})
    state["run_name"] = cfg.run_name
    return state


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _flip(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))


def _other_digest(p: Path) -> None:
    Path(str(p) + ".sha256").write_text("0" * 64 + "\n")


def _no_sidecar(p: Path) -> None:
    Path(str(p) + ".sha256").unlink()


def _empty(p: Path) -> None:
    p.write_bytes(b"")


class _Marker:
    """Unpickled, would create the file ``MARKER`` beside the checkpoint."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def _malicious(p: Path) -> None:
    """Replaced by a file whose pickle runs code, with a matching sidecar."""
    torch.save({"step": 20, "x": _Marker(p.parent / "MARKER")}, p)
    Path(str(p) + ".sha256").write_text(ck.file_sha256(p) + "\n")


DAMAGE = {
    "truncated": (_truncate, "checksum mismatch"),
    "bit-flipped": (_flip, "checksum mismatch"),
    "checksum-mismatch": (_other_digest, "checksum mismatch"),
    "no-sidecar": (_no_sidecar, "no ckpt_000000020.pt.sha256 checksum file"),
    "empty": (_empty, "checksum mismatch"),
    "malicious": (_malicious, "not a weights-only file"),
}


def _no_ray(monkeypatch) -> None:
    """The run's set-up and shutdown without Ray: start-up says a Ctrl-C came (nothing starts)."""
    from takzero.pipeline.run import Run

    monkeypatch.setattr(Run, "_start_actors", lambda self, state: False)


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_newest_checkpoint_is_skipped_and_the_run_log_says_so(
    tmp_path: Path, monkeypatch, damage: str
) -> None:
    from takzero.pipeline.run import Run

    cfg = _cfg(tmp_path)
    run_dir = tmp_path / "r"
    atomic_torch_save(_run_state(cfg, 10), run_dir / "ckpt_000000010.pt")
    atomic_torch_save(_run_state(cfg, 20), run_dir / "ckpt_000000020.pt")
    harm, reason = DAMAGE[damage]
    harm(run_dir / "ckpt_000000020.pt")
    _no_ray(monkeypatch)
    run = Run(cfg, command="python -m takzero.train run_name=r")
    run.run()
    log = (run_dir / "train.log").read_text()
    (line,) = [ln for ln in log.splitlines() if "checkpoint rejected" in ln]
    assert f"ckpt_000000020.pt: {reason}" in line
    assert "resuming from the older ckpt_000000010.pt" in line and "ckpt_000000020.pt.rejected" in line
    assert "resumed from ckpt_000000010.pt: step 10" in log
    assert not (run_dir / "MARKER").exists()
    # Set aside: never resumed, counted or pruned in place of the good one.
    assert [p.name for p in list_checkpoints(run_dir)] == ["ckpt_000000010.pt"]
    assert (run_dir / "ckpt_000000020.pt.rejected").exists()
    atomic_torch_save(_run_state(cfg, 15), run_dir / "ckpt_000000015.pt")
    prune_checkpoints(run_dir, keep=1)
    assert load_checked(run_dir / "ckpt_000000015.pt", require_checksum=True)["step"] == 15


def test_a_second_rejection_of_the_same_name_keeps_both_files(tmp_path: Path) -> None:
    p = tmp_path / "ckpt_000000020.pt"
    for n in range(2):
        atomic_torch_save({"n": n}, p)
        ck.set_aside(p)
    assert sorted(x.name for x in tmp_path.iterdir()) == [
        "ckpt_000000020.pt.rejected", "ckpt_000000020.pt.rejected.2",
        "ckpt_000000020.pt.sha256.rejected", "ckpt_000000020.pt.sha256.rejected.2",
    ]


# -- a full disk ----------------------------------------------------------------------------------


class _FullDisk:
    """A file that takes ``room`` bytes and then fails as a full disk does (ENOSPC)."""

    def __init__(self, f, room: int) -> None:
        self.f, self.room = f, room

    def write(self, data) -> int:
        data = bytes(data)
        if len(data) > self.room:
            self.f.write(data[: self.room])
            self.room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.f.close()


def _fill_disk(monkeypatch, room: int = 1000) -> None:
    real = os.fdopen
    monkeypatch.setattr(ck.os, "fdopen", lambda fd, mode="r", *a, **k: _FullDisk(real(fd, mode, *a, **k), room))


def test_a_full_disk_during_a_write_leaves_the_old_checkpoint(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "ckpt_000000010.pt"
    atomic_torch_save({"step": 1, "w": torch.ones(1000)}, path)
    _fill_disk(monkeypatch)
    with pytest.raises(CheckpointWriteError) as err:
        atomic_torch_save({"step": 2, "w": torch.zeros(1000)}, path)
    assert err.value.errno == errno.ENOSPC and isinstance(err.value, OSError)
    assert str(err.value) == f"{path}: not written (the disk is full); the files already on disk are unchanged"
    assert load_checked(path, require_checksum=True)["step"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt_000000010.pt", "ckpt_000000010.pt.sha256"]


@pytest.mark.parametrize("failing_write", [1, 2])
def test_a_full_disk_at_either_sidecar_write_leaves_a_verifiable_file(
    tmp_path: Path, monkeypatch, failing_write: int
) -> None:
    """The sidecar before the rename (the old file stays) or after it (the new file, whose
    digest the first sidecar already lists): either way what is on disk verifies."""
    path = tmp_path / "best.pt"
    atomic_torch_save({"step": 1}, path)
    real, calls = ck._write_sidecar, [0]

    def sidecar(*args) -> None:
        calls[0] += 1
        if calls[0] == failing_write:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(*args)

    monkeypatch.setattr(ck, "_write_sidecar", sidecar)
    with pytest.raises(CheckpointWriteError, match="the disk is full"):
        atomic_torch_save({"step": 2}, path)
    assert load_checked(path, require_checksum=True)["step"] == failing_write
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(ck.TMP_SUFFIXES)]


def test_a_full_disk_stops_the_run_with_one_line_and_the_last_checkpoint_resumes(
    tmp_path: Path, monkeypatch
) -> None:
    """A write of the running training fails (here best.pt at a promotion): the run stops, skips
    its final checkpoint, says in one line what failed, which checkpoint is the last good one
    and how to resume, and raises the error (the command line exits with status 1)."""
    from takzero.pipeline.resume import find_resume_checkpoint
    from takzero.pipeline.run import Run

    cfg = _cfg(tmp_path)
    run_dir = tmp_path / "r"
    atomic_torch_save(_run_state(cfg, 10), run_dir / "ckpt_000000010.pt")
    final = []

    def start(self, state) -> bool:
        trainer = self._make_trainer(state)
        self.promoted = (1, {k: v.clone() for k, v in trainer.model.state_dict().items()})
        return True

    def loop(self, trainer) -> None:
        _fill_disk(monkeypatch)
        self._save_best(*self.promoted)  # a promotion writes best.pt

    monkeypatch.setattr(Run, "_start_actors", start)
    monkeypatch.setattr(Run, "_loop", loop)
    monkeypatch.setattr(Run, "_checkpoint", lambda self, trainer: final.append(trainer.step))
    run = Run(cfg, command="python -m takzero.train run_name=r")
    with pytest.raises(CheckpointWriteError) as err:
        run.run()
    assert err.value.errno == errno.ENOSPC
    assert final == []  # no final checkpoint on a full disk
    log = (run_dir / "train.log").read_text().splitlines()
    (line,) = [ln for ln in log if "stopped: " in ln and "not written" in ln]
    assert f"{run_dir / 'best.pt'}: not written (the disk is full)" in line
    assert "the last good checkpoint is ckpt_000000010.pt" in line
    assert line.endswith("then resume with: python -m takzero.train run_name=r")
    assert any("run stopped: the disk is full" in ln for ln in log)
    assert not [p for p in run_dir.iterdir() if p.name.endswith(ck.TMP_SUFFIXES)]
    assert find_resume_checkpoint(cfg, run_dir).path.name == "ckpt_000000010.pt"


def test_a_full_disk_at_the_final_checkpoint_is_one_line_too(tmp_path: Path, monkeypatch) -> None:
    from takzero.pipeline.run import Run

    cfg = _cfg(tmp_path)
    run_dir = tmp_path / "r"
    atomic_torch_save(_run_state(cfg, 10), run_dir / "ckpt_000000010.pt")

    def start(self, state) -> bool:
        self._make_trainer(state)
        self.promoted = (1, {})
        return True

    def loop(self, trainer) -> None:
        self.stop_requested = True  # as a Ctrl-C does
        _fill_disk(monkeypatch)

    monkeypatch.setattr(Run, "_start_actors", start)
    monkeypatch.setattr(Run, "_loop", loop)
    monkeypatch.setattr(Run, "_checkpoint",
                        lambda self, trainer: atomic_torch_save({"step": 11}, run_dir / "ckpt_000000011.pt"))
    run = Run(cfg, command="x")
    with pytest.raises(CheckpointWriteError):
        run.run()
    log = (run_dir / "train.log").read_text()
    assert "ckpt_000000011.pt: not written (the disk is full)" in log
    assert "the last good checkpoint is ckpt_000000010.pt" in log
    assert [p.name for p in list_checkpoints(run_dir)] == ["ckpt_000000010.pt"]


def test_other_write_errors_are_not_taken_for_a_full_disk(tmp_path: Path, monkeypatch) -> None:
    """A permission error is a CheckpointWriteError with its own reason (the run stops the same
    way); an error that is no write error at all is raised as it is."""
    path = tmp_path / "ckpt_000000001.pt"

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(ck.tempfile, "mkstemp", denied)
    with pytest.raises(CheckpointWriteError, match=r"not written \(Permission denied\)") as err:
        atomic_torch_save({"step": 1}, path)
    assert err.value.errno == errno.EACCES
    with pytest.raises(TypeError, match="not a plain value"):
        atomic_torch_save({"step": object()}, path)


def test_a_full_disk_is_found_behind_rays_wrapper_and_exception_chains() -> None:
    """A replay shard written by the replay actor fails in another process: the driver sees a
    RayTaskError(OSError) whose own errno is None; the full disk is its ``cause``."""
    from ray.exceptions import RayTaskError

    from takzero.pipeline.run import write_failure

    full = OSError(errno.ENOSPC, "No space left on device")
    wrapped = RayTaskError("ReplayActor.drain_with_state", "traceback", full).as_instanceof_cause()
    assert wrapped.errno is None and write_failure(wrapped) is full
    try:
        try:
            raise full
        except OSError:
            raise RuntimeError("PytorchStreamWriter failed writing file") from None
    except RuntimeError as e:
        assert write_failure(e) is full  # found through __context__
    assert write_failure(OSError(errno.ENOENT, "No such file")) is None
    assert write_failure(ValueError("x")) is None
    denied = CheckpointWriteError(Path("ckpt_000000001.pt"), PermissionError(errno.EACCES, "denied"))
    assert write_failure(denied) is denied
