"""The run's log: Ray's start-up warnings (e.g. its four-line "Token authentication is enabled")
go to train.log only, not to the console, and Ray's own console handler is back once Ray is up;
takzero's own warnings go to train.log as well as to the console. No Ray is started: ``init_ray``
is replaced by one that warns as Ray does."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from smoke_config import smoke_config

from takzero.pipeline.progress import RunReporter, Snapshot, StopRule


def test_rays_start_up_warnings_reach_train_log_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capfd: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    import ray  # noqa: F401 - Ray's import installs its console handler on the "ray" logger

    import takzero.pipeline.run as run_module

    run = run_module.Run(smoke_config(tmp_path), command="python -m takzero.train run_name=r")
    run.run_dir.mkdir(parents=True, exist_ok=True)
    console = io.StringIO()
    run.reporter = RunReporter(run.run_dir, StopRule(10), Snapshot(0, 0, 0, 0, 0.0), console=console, bar=False)
    ray_handlers = list(logging.getLogger("ray").handlers)
    assert ray_handlers, "Ray installs a console handler of its own"

    def init_ray(cfg: object) -> None:
        logging.getLogger("ray._private.authentication.authentication_token_setup").warning(
            "Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out.")
        run.stop_requested = True  # _start_actors returns right after Ray's start

    monkeypatch.setattr(run_module, "init_ray", init_ray)
    capfd.readouterr()
    assert run._start_actors(state=None) is False
    run.reporter.close()
    err = capfd.readouterr().err
    assert "Token authentication" not in err and "Token authentication" not in console.getvalue()
    log = (run.run_dir / "train.log").read_text()
    assert "ray: Token authentication is enabled for this Ray cluster" in log
    assert logging.getLogger("ray").handlers == ray_handlers  # Ray's later warnings: on the console again


def test_takzeros_warnings_go_to_train_log_too(tmp_path: Path) -> None:
    rep = RunReporter(tmp_path, StopRule(10), Snapshot(0, 0, 0, 0, 0.0), console=io.StringIO(), bar=False)
    logging.getLogger("takzero.pipeline.actors").warning("self-play worker %d lost (%s); starting a new one",
                                                         1, "RayActorError")  # fmt: skip
    rep.close()
    logging.getLogger("takzero.pipeline.actors").warning("after the run: not in its log")
    log = (tmp_path / "train.log").read_text()
    assert "warning: self-play worker 1 lost (RayActorError); starting a new one" in log
    assert "after the run" not in log
