"""Runs that cannot go wrong silently or be confused: non-finite training stops the run (a
bounded run of skipped steps, NaN weights at a checkpoint, a NaN train.init_from) and nothing
non-finite is promoted; dead self-play workers leave the progress line; the evaluators' model
copies are removed; a run folder whose checkpoints are gone is refused with the choices; a
checkpoint whose sidecar matches but whose content is not a checkpoint is set aside for the older
good one; an unwritable checkpoint_root is one line."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
import torch
from smoke_config import smoke_config

from takzero.pipeline.checkpoints import atomic_torch_save, list_checkpoints
from takzero.pipeline.progress import RunReporter, Snapshot, StopRule


def _run_state(cfg, step: int) -> dict:
    from takzero.pipeline.resume import RunCounters
    from takzero.pipeline.trainer import Trainer

    trainer = Trainer(cfg.train, cfg.model_config(), device="cpu", seed=step)
    trainer.step, trainer.generation = step, step // 10
    state = trainer.state_dict()
    state["run"] = RunCounters(games=step).to_checkpoint()
    state["promoted"] = (0, {k: v.clone() for k, v in trainer.model.state_dict().items()})
    return state


# -- non-finite training ---------------------------------------------------------------------------


def _records(cfg, n: int = 64):
    from takzero.pipeline.replay import Records
    from takzero.pipeline.selfplay import SelfPlayWorker

    worker = SelfPlayWorker.from_run(cfg, 0, device="cpu")
    parts = []
    for _ in range(400):
        recs, _, _ = worker.play_step()
        if recs is not None and len(recs):
            parts.append(recs)
            if sum(len(r) for r in parts) >= 8:
                return Records.concat(parts)
    raise AssertionError("no records")


def test_a_huge_learning_rate_stops_training_after_a_bounded_run_of_skipped_steps(one_torch_thread) -> None:
    from takzero.pipeline.trainer import MAX_SKIPPED_IN_A_ROW, NonFiniteError, Trainer

    cfg = smoke_config(None, **{"board.size": 3, "selfplay.games_per_worker": 8, "mcts.simulations": 4,
                                "selfplay.ply_limit": 12, "train.lr": 1e30, "train.warmup_steps": 0,
                                "train.grad_clip": 0})
    recs = _records(cfg)
    trainer = Trainer(cfg.train, cfg.model_config(), device="cpu")
    skipped = 0
    stops = rf"{MAX_SKIPPED_IN_A_ROW} training steps in a row skipped .*train.lr=1e\+30"
    with pytest.raises(NonFiniteError, match=stops):
        for _ in range(10 * MAX_SKIPPED_IN_A_ROW):
            metrics = trainer.train_step(recs)
            skipped += int(metrics.get("train/step_skipped", 0))
    assert skipped == MAX_SKIPPED_IN_A_ROW - 1 and trainer.step >= 1
    assert "non-finite" in trainer.last_skip
    with pytest.raises(NonFiniteError, match="not finite"):
        trainer.check_finite()  # (the weights themselves went bad after the first step)


def test_nan_weights_are_never_checkpointed_promoted_or_started_from(tmp_path: Path) -> None:
    from takzero.config import ConfigError
    from takzero.pipeline.run import NonFiniteError, Run
    from takzero.pipeline.trainer import Trainer
    from takzero.pipeline.warm_start import load_init_weights

    cfg = smoke_config(tmp_path)
    trainer = Trainer(cfg.train, cfg.model_config(), device="cpu")
    state = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    name = next(k for k, v in state.items() if v.is_floating_point())
    state[name][...] = float("nan")
    # train.init_from: a right-shaped file with NaN weights, refused at start-up naming the key
    bad = tmp_path / "nan.pt"
    atomic_torch_save({"model_config": cfg.model_config().to_dict(), "model_state": state}, bad)
    with pytest.raises(ConfigError, match=rf"^train.init_from: its weights are not finite \(NaN or inf in {name}"):
        load_init_weights(smoke_config(tmp_path, **{"train.init_from": str(bad)}))
    # promotion refuses them, best.pt is not written
    run = Run(cfg, command="x")
    with pytest.raises(NonFiniteError, match="generation 4 was to be promoted but its weights are not finite"):
        run._promote((4, state))
    assert not (run.run_dir / "best.pt").exists()
    # a new generation of NaN weights is never made nor checkpointed
    trainer.model.load_state_dict(state)
    run.promoted = (0, state)
    with pytest.raises(NonFiniteError, match="not finite"):
        run._new_generation(trainer)
    assert trainer.generation == 0 and not list_checkpoints(run.run_dir)


def test_a_non_finite_run_stops_with_one_line_and_no_final_checkpoint(tmp_path: Path, monkeypatch) -> None:
    from takzero.pipeline.run import NonFiniteError, Run

    cfg = smoke_config(tmp_path)
    atomic_torch_save(_run_state(cfg, 10), tmp_path / "r" / "ckpt_000000010.pt")
    final = []

    def start(self, state) -> bool:
        trainer = self._make_trainer(state)
        self.promoted = (1, {k: v.clone() for k, v in trainer.model.state_dict().items()})
        return True

    def loop(self, trainer) -> None:
        raise NonFiniteError("20 training steps in a row skipped (non-finite loss (nan) at step 12)")

    monkeypatch.setattr(Run, "_start_actors", start)
    monkeypatch.setattr(Run, "_loop", loop)
    monkeypatch.setattr(Run, "_checkpoint", lambda self, trainer: final.append(trainer.step))
    run = Run(cfg, command="python -m takzero.train run_name=r")
    with pytest.raises(NonFiniteError):
        run.run()
    assert final == []
    log = (tmp_path / "r" / "train.log").read_text()
    (line,) = [ln for ln in log.splitlines() if "stopped: 20 training steps" in ln]
    assert "the last good checkpoint is ckpt_000000010.pt" in line and "lower train.lr" in line
    assert "run stopped: training went non-finite" in log
    assert "Ctrl-C: stopping" not in log


def test_skipped_steps_are_said_in_the_run_log(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from takzero.pipeline.run import Run

    run = Run(smoke_config(tmp_path), command="x")
    console = io.StringIO()
    run.reporter = RunReporter(run.run_dir, StopRule(100), Snapshot(0, 0, 0, 0, 0.0), console=console, bar=False)
    for n in range(1, 6):
        run._skipped_step(SimpleNamespace(skipped_steps=n, skipped_in_a_row=n,
                                          last_skip="non-finite loss (inf) at step 3"))
    lines = [ln for ln in console.getvalue().splitlines() if ln.startswith("training: step skipped")]
    assert len(lines) == 3  # the 1st, 2nd and 4th
    assert "non-finite loss (inf) at step 3; 1 skipped so far" in lines[0]
    assert "the run stops after 20 in a row" in lines[0]
    run.reporter.close()


# -- dead workers, temp folders --------------------------------------------------------------------


def test_a_dead_workers_games_leave_the_progress_line(tmp_path: Path) -> None:
    """Two workers of 16 games; worker 1 dies and its new life (a new stream) reports: 32 in
    play, not 48; a worker the pool replaced is taken off at once."""
    from takzero.pipeline.run import Run
    from takzero.pipeline.scalars import ScalarLog

    run = Run(smoke_config(tmp_path), command="x")
    run.scalars = ScalarLog(type("W", (), {"add_scalar": lambda *a: None, "add_text": lambda *a: None,
                                           "flush": lambda self: None})())

    def report(worker: int, stream: int, games: int) -> dict:
        return {"inflight/stream": float(stream), "inflight/worker": float(worker),
                "inflight/games": float(games), "inflight/positions": 10.0 * games}

    run._drain(0, ([report(0, 100, 16), report(1, 101, 16)], []))
    assert run._snapshot(type("T", (), {"step": 0, "generation": 0})()).games_in_flight == 32
    run._drain(0, ([report(1, 102, 16)], []))  # worker 1's new life
    run._drain(0, ([report(1, 101, 16)], []))  # a late report of its old life changes nothing
    snap = run._snapshot(type("T", (), {"step": 0, "generation": 0})())
    assert snap.games_in_flight == 32 and snap.positions_in_flight == 320
    run.inflight.pop(1.0)  # what the loop does for a worker the pool replaced
    assert run._snapshot(type("T", (), {"step": 0, "generation": 0})()).games_in_flight == 16


def test_the_evaluators_model_copies_are_removed(tmp_path: Path, monkeypatch) -> None:
    import tempfile

    from takzero.pipeline.evaluator_actor import (
        MODELS_PREFIX,
        localize_model_specs,
        remove_stale_model_folders,
    )

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    owner = type("Owner", (), {"folder": None})()
    specs = localize_model_specs(["random", "model:/x/m.pt"], {"/x/m.pt": b"bytes"}, owner)
    assert owner.folder is not None and owner.folder.parent == tmp_path
    assert owner.folder.name.startswith(f"{MODELS_PREFIX}{os.getpid()}-") and specs[1].endswith("m.pt")
    dead = tmp_path / f"{MODELS_PREFIX}999999999-abc"
    dead.mkdir()
    assert remove_stale_model_folders(tmp_path) == [dead]  # a killed evaluator's: gone
    assert owner.folder.exists()  # a live process's: kept
    from takzero.pipeline.evaluator_actor import EvaluatorActor

    actor = EvaluatorActor.__new__(EvaluatorActor)
    actor.folder = owner.folder
    actor.close()
    assert not list(tmp_path.glob(f"{MODELS_PREFIX}*"))


# -- run folders that cannot be confused ------------------------------------------------------------


def test_a_run_folder_whose_checkpoints_are_gone_is_refused_with_the_choices(tmp_path: Path) -> None:
    from takzero.pipeline.resume import (
        CHECKPOINTED,
        find_resume_checkpoint,
        outputs_without_checkpoints,
    )
    from takzero.pipeline.run import RunDirError

    cfg = smoke_config(tmp_path)
    run_dir = tmp_path / "r"
    (run_dir / "replay").mkdir(parents=True)
    (run_dir / "replay" / "shard_000000001.npz").write_bytes(b"x")
    assert find_resume_checkpoint(cfg, run_dir) is None  # killed before its first checkpoint: resumed
    for evidence in (lambda: (run_dir / CHECKPOINTED).write_text("ckpt_000000200.pt\n"),
                     lambda: ((run_dir / "games").mkdir()
                              or (run_dir / "games" / "baseline_gen00001_vs_uct.ptn").write_text("x"))):
        evidence()
        atomic_torch_save({"generation": 3}, run_dir / "best.pt")
        with pytest.raises(RunDirError) as e:
            find_resume_checkpoint(cfg, run_dir)
        text = str(e.value)
        assert "\n" not in text and "has no checkpoint left" in text
        assert f"train.init_from={run_dir / 'best.pt'} with a new run_name" in text and "a new run_name" in text
        assert "best.pt" in outputs_without_checkpoints(run_dir) and "replay/" in outputs_without_checkpoints(run_dir)
        (run_dir / CHECKPOINTED).unlink(missing_ok=True)


def _as_list(p: Path) -> None:
    atomic_torch_save([1, 2, 3], p)


def _as_empty_dict(p: Path) -> None:
    atomic_torch_save({}, p)


def _string_step(p: Path) -> None:
    from takzero.pipeline.checkpoints import load_checked

    d = load_checked(p)
    d["step"] = "20"
    atomic_torch_save(d, p)


def _wrong_shape(p: Path) -> None:
    from takzero.pipeline.checkpoints import load_checked

    d = load_checked(p)
    k = next(iter(d["model_state"]))
    d["model_state"][k] = torch.zeros(3, 3)
    atomic_torch_save(d, p)


def _nan_weights(p: Path) -> None:
    from takzero.pipeline.checkpoints import load_checked

    d = load_checked(p)
    k = next(k for k, v in d["model_state"].items() if v.is_floating_point())
    d["model_state"][k] = d["model_state"][k] * float("nan")
    atomic_torch_save(d, p)


def _bad_counters(p: Path) -> None:
    from takzero.pipeline.checkpoints import load_checked

    d = load_checked(p)
    d["run"] = {"games": "many"}
    atomic_torch_save(d, p)


CONTENT = {
    "a list": (_as_list, "it holds a list, not a checkpoint dict"),
    "an empty dict": (_as_empty_dict, "no step, generation, model_state, optimizer, rng entries"),
    "a string step": (_string_step, "step is '20', not a count"),
    "a wrong shape": (_wrong_shape, "has shape [3, 3], the network's is"),
    "NaN weights": (_nan_weights, "model_state has non-finite weights"),
    "bad counters": (_bad_counters, "the run's counters do not read back"),
}


@pytest.mark.parametrize("content", list(CONTENT))
def test_a_checkpoint_with_a_matching_sidecar_but_wrong_content_is_set_aside(tmp_path: Path, content: str,
                                                                             monkeypatch) -> None:
    from takzero.pipeline.run import Run

    cfg = smoke_config(tmp_path)
    run_dir = tmp_path / "r"
    atomic_torch_save(_run_state(cfg, 10), run_dir / "ckpt_000000010.pt")
    atomic_torch_save(_run_state(cfg, 20), run_dir / "ckpt_000000020.pt")
    damage, reason = CONTENT[content]
    damage(run_dir / "ckpt_000000020.pt")
    monkeypatch.setattr(Run, "_start_actors", lambda self, state: self._make_trainer(state) is None)
    run = Run(cfg, command="x")
    run.run()  # no traceback: the older good checkpoint is resumed
    assert run.resume_from.path.name == "ckpt_000000010.pt" and run.trainer.step == 10
    log = (run_dir / "train.log").read_text()
    assert "checkpoint rejected: " in log and reason in log and "resuming from the older ckpt_000000010.pt" in log
    assert (run_dir / "ckpt_000000020.pt.rejected").exists()


def test_an_unwritable_checkpoint_root_is_one_line(tmp_path: Path) -> None:
    from takzero.pipeline.checkpoints import root_problem
    from takzero.pipeline.run import Run, RunDirError
    from takzero.train import precheck

    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert root_problem(tmp_path / "new" / "deeper") is None
    assert "is not a folder" in root_problem(a_file / "runs")
    assert "checkpoint_root is empty" in root_problem("")
    if os.geteuid() == 0:  # root writes into a mode-555 folder: a read-only file system instead
        read_only = Path("/proc/takzero-runs")
    else:
        read_only = tmp_path / "ro"
        read_only.mkdir()
        read_only.chmod(0o555)
    problem = root_problem(read_only)
    assert problem is not None and "cannot write in" in problem and "\n" not in problem
    assert any("cannot write in" in p for p in precheck([f"checkpoint_root={read_only}"]))
    with pytest.raises(RunDirError, match="cannot write in"):
        Run(smoke_config(read_only), command="x")
