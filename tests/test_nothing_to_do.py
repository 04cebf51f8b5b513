"""A resume with nothing to train -- a stop rule reached, or less of ``train.max_minutes`` left
than a start-up costs (``run_reporting.STARTUP_MINUTES``) -- says so in one line with a command
that trains further and prints the summary, without starting Ray or counting a launch (a new
user's findings: a finished run took 42 s to say so, a resume with 0.2 min left started Ray and
its workers to stop at once). ``Run.run`` runs with Ray's start replaced by a stub that records
the call and an ``init_ray`` that fails the test."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from smoke_config import smoke_config

from takzero.pipeline.checkpoints import atomic_torch_save
from takzero.pipeline.run import Run

# -- a resume with nothing to train -----------------------------------------------------------


def _checkpoint(cfg, step: int, minutes: float, games: int = 0) -> None:
    from takzero.pipeline.resume import RunCounters
    from takzero.pipeline.trainer import Trainer

    trainer = Trainer(cfg.train, cfg.model_config(), device="cpu", seed=step)
    trainer.step, trainer.generation = step, 1
    state = trainer.state_dict()
    state["run"] = {**RunCounters(games=games, positions=10 * games).to_checkpoint(), "minutes": minutes, "launch": 2}
    state["promoted"] = (1, {k: v.clone() for k, v in trainer.model.state_dict().items()})
    run_dir = Path(cfg.checkpoint_root) / cfg.run_name
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_torch_save(state, run_dir / f"ckpt_{step:09d}.pt")
    (run_dir / "launches").write_text("3\n")
    (run_dir / "config.yaml").write_text("# the run's config as it was\n")


def _run_without_ray(cfg, monkeypatch) -> tuple[Run, list[Any]]:
    """``Run.run`` with Ray's start replaced: a stub that records the call and stops (as a
    Ctrl-C during start-up does), and an ``init_ray`` that fails the test."""
    import takzero.pipeline.run_actors as run_actors

    started: list[Any] = []

    def start_actors(self: Run, state: dict[str, Any] | None) -> bool:
        started.append(state)
        return False

    def no_ray(cfg: Any) -> None:
        raise AssertionError("Ray was started")

    monkeypatch.setattr(Run, "_start_actors", start_actors)
    monkeypatch.setattr(run_actors, "init_ray", no_ray)
    run = Run(cfg, command=f"python -m takzero.train +config=smoke checkpoint_root={cfg.checkpoint_root} "
                           f"run_name={cfg.run_name} train.max_minutes={cfg.train.max_minutes:g}")
    run.run()
    return run, started


@pytest.mark.parametrize(
    ("overrides", "step", "minutes", "games", "said", "further"),
    [
        ({"train.total_steps": 40}, 40, 3.0, 5, "is already finished (reached train.total_steps=40)",
         "train.total_steps=80"),
        ({"train.max_minutes": 30.0}, 20, 30.4, 5, "is already finished (reached train.max_minutes=30)",
         "train.max_minutes=61"),
        ({"max_games": 50}, 20, 3.0, 60, "is already finished (reached max_games=50)", "max_games=110"),
        ({"train.max_minutes": 30.0}, 20, 29.8, 5,
         "train.max_minutes=30 is nearly spent (29.8 min trained, 0.2 min left), less than a start-up takes",
         "train.max_minutes=60"),
        ({"train.max_minutes": 0.5}, 20, 0.3, 5, "train.max_minutes=0.5 is nearly spent", "train.max_minutes=6"),
    ],
)
def test_a_resume_with_nothing_to_train_says_so_without_starting(tmp_path: Path, monkeypatch, overrides, step,
                                                                 minutes, games, said, further) -> None:
    """One line (what is spent, nothing started, a command with the limit raised), then the
    summary; no Ray, no trainer, and the run folder as it was: the launch count, the config
    and the games kept at the last stop (train.log aside)."""
    import ray

    cfg = smoke_config(tmp_path, **{"train.total_steps": 100_000, **overrides})
    _checkpoint(cfg, step, minutes, games)
    run_dir = tmp_path / "r"
    (run_dir / "unfinished_games.npz").write_bytes(b"kept as it was")
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    ray_before = ray.is_initialized()  # another test of this worker process may have left it up
    run, started = _run_without_ray(cfg, monkeypatch)
    assert started == [] and ray.is_initialized() == ray_before and run.trainer is None
    log = (run_dir / "train.log").read_text()
    (line,) = [ln for ln in log.splitlines() if "nothing started" in ln]
    assert said in line, line
    assert line.rstrip().endswith(further) and "To train further, raise it" in line, line
    assert line.split("e.g.: ")[1].count(further.split("=")[0] + "=") == 1, line  # the old value dropped
    assert re.search(r"run finished: ", log) and "to train further: " in log and "best model:" in log
    after = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file() and p.name != "train.log"}
    assert after == {k: v for k, v in before.items() if k != "train.log"}


def test_a_resume_with_a_minute_or_more_left_starts(tmp_path: Path, monkeypatch) -> None:
    cfg = smoke_config(tmp_path, **{"train.total_steps": 100_000, "train.max_minutes": 30.0})
    _checkpoint(cfg, 20, 28.9, 5)
    run, started = _run_without_ray(cfg, monkeypatch)
    assert len(started) == 1
    assert (tmp_path / "r" / "launches").read_text().strip() == "4"  # this start counted


def test_a_new_run_with_a_short_budget_starts(tmp_path: Path, monkeypatch) -> None:
    """A short ``train.max_minutes`` on a new run is asked for: it starts."""
    cfg = smoke_config(tmp_path, **{"train.max_minutes": 0.5})
    run, started = _run_without_ray(cfg, monkeypatch)
    assert started == [None]
