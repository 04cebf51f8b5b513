"""Cheaper interruptions, without Ray: at the stop a self-play worker hands in the finished games
the buffer had refused (backpressure), and says what it kept and dropped; the summary has one
`kept:` line; restoring the trainer logs no second `resumed from` line (the reporter's own is
checked in test_checkpoint_faults); the start-up timings phase by phase."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from smoke_config import smoke_config

from takzero.pipeline.progress import Snapshot, kept_line, startup_timings, summary_lines

_cfg = smoke_config


class _Remote:
    """A method called as ``actor.method.remote(...)`` that answers at once (``ray.get`` is
    the identity in these tests)."""

    def __init__(self, fn: Any) -> None:
        self.remote = fn


class FakeCoordinator:
    """Hands out ``weights`` as generation 3 (after a few calls without any: the driver may
    start the workers before it publishes them); says stop once the replay has refused a step
    with records in it."""

    def __init__(self, replay: FakeReplay, weights: dict[str, Any]) -> None:
        self.replay = replay
        self.calls = 0
        self.weights = weights
        self.new_stream = _Remote(lambda worker_id: 7)
        self.take_carried = _Remote(lambda n: None)  # no games left in play by an earlier stop
        self.exchange = _Remote(self._exchange)

    def _exchange(self, kind: str, known: int) -> tuple[bool, tuple[int, list[Any]] | None]:
        self.calls += 1
        published = self.calls > 3
        return self.replay.refused > 0, ((3, [self.weights]) if published and known != 3 else None)


class FakeReplay:
    """Refuses every step with records unless forced (a buffer far ahead of the trainer)."""

    def __init__(self) -> None:
        self.refused = 0
        self.kept: list[tuple[Any, dict[str, float], bool]] = []
        self.submit = _Remote(self._submit)

    def _submit(self, records: Any, stats: dict[str, float], ptn: list[str] | None = None,
                force: bool = False) -> bool:
        if records is not None and not force:
            self.refused += 1
            return False
        self.kept.append((records, stats, force))
        return True


def test_the_stop_hands_in_the_refused_games_and_says_what_it_kept(
    tmp_path: Path, monkeypatch, one_torch_thread
) -> None:
    import ray

    from takzero.pipeline.actors import STARTUP_KEYS, SelfPlayActor

    monkeypatch.setattr(ray, "get", lambda x, timeout=None: x)
    cfg = _cfg(tmp_path, **{"board.size": 3, "selfplay.games_per_worker": 8, "mcts.simulations": 4,
                            "selfplay.ply_limit": 12, "selfplay.stop_grace_seconds": 0})
    from takzero.nn.model import TakNet

    replay = FakeReplay()
    coordinator = FakeCoordinator(replay, TakNet(cfg.model_config()).state_dict())
    report = SelfPlayActor(cfg, 0).run(coordinator, replay)
    assert coordinator.calls > 3  # it waited for the weights
    forced = [(r, s) for r, s, f in replay.kept if f]
    assert len(forced) == 1, "the refused step was not handed in at the stop"
    records, stats = forced[0]
    assert report["kept_games"] == int(stats["count/games"]) >= 1
    assert report["kept_positions"] == len(records) > 0
    assert report["unfinished_games"] == 8 and report["unfinished_positions"] >= 0
    assert report["games"] >= report["kept_games"]
    first = (replay.kept[0][1] if replay.kept and not replay.kept[0][2] else forced[0][1])
    assert first["selfplay/generation"] == 3  # no step played before the weights came
    assert all(k in first for k in STARTUP_KEYS)  # the first step carries the start-up times
    assert first["startup/actor_at"] <= first["startup/built_at"] <= first["startup/first_step_at"]


def test_the_summary_has_one_kept_line(tmp_path: Path) -> None:
    kept = {"games": 40, "kept_games": 3, "kept_positions": 240, "unfinished_games": 61,
            "unfinished_positions": 4810}
    assert kept_line(kept) == ("kept: 3 games, 240 positions handed in at the stop; 61 unfinished "
                               "games (4,810 positions) dropped")
    lines = summary_lines(reason="interrupted", run_dir=tmp_path, snap=Snapshot(10, 1, 40, 3000, 1.0),
                          best_generation=1, best_scores={}, resume_cmd="r", finished=False,
                          kept=kept_line(kept))
    assert sum(ln.strip().startswith("kept: ") for ln in lines) == 1
    assert not any("kept:" in ln for ln in summary_lines(
        reason="x", run_dir=tmp_path, snap=Snapshot(10, 1, 40, 3000, 1.0), best_generation=1,
        best_scores={}, resume_cmd="r", finished=False))


def test_startup_timings_phase_by_phase() -> None:
    stamps = {"run_created": 100.0, "ray_start": 101.5, "ray_ready": 104.0, "pool_created": 104.5,
              "replay_reload_s": 3.25, "startup/actor_at": 108.0, "startup/built_at": 110.0,
              "startup/first_step_at": 111.0}
    assert startup_timings(stamps) == {"setup": 1.5, "ray": 2.5, "to_pool": 0.5, "actors": 3.5,
                                       "worker_build": 2.0, "first_step": 1.0, "total": 11.0,
                                       "replay_reload": 3.25, "run_created_at": 100.0}
    assert startup_timings({"run_created": 1.0}) == {"run_created_at": 1.0}


def test_a_resume_logs_no_second_resumed_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The resumed-from line is the reporter's alone (console and train.log): restoring the
    trainer logs nothing that Hydra would print a second time."""
    from types import SimpleNamespace

    from takzero.pipeline.run import Run
    from takzero.pipeline.trainer import Trainer

    cfg = _cfg(tmp_path)
    trainer = Trainer(cfg.train, cfg.model_config(), cfg.loss_weights(), device="cpu", seed=0)
    state = trainer.state_dict()
    run = Run(cfg, command="python -m takzero.train run_name=r")
    run.resume_from = SimpleNamespace(path=tmp_path / "ckpt_000000020.pt", state=state)
    with caplog.at_level(logging.DEBUG):
        assert run._restore(trainer) is state
    assert not [r for r in caplog.records if "resumed from" in r.getMessage()]
