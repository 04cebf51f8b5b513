"""The run's log: Ray's start-up warnings (e.g. its four-line "Token authentication is enabled")
go to train.log only, not to the console, and Ray's own console handler is back once Ray is up;
takzero's own warnings go to train.log as well as to the console. No Ray is started: ``init_ray``
is replaced by one that warns as Ray does. The slow test runs real smoke runs and reads their
console for the error-level lines of Ray's C++ core (``[... E pid tid] core_worker.cc: ...``)."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from smoke_config import smoke_config

from takzero.pipeline.progress import RunReporter, Snapshot, StopRule

ROOT = Path(__file__).resolve().parents[1]

#: a line of Ray's C++ logging (glog form): ``[2026-12-07 11:06:52,839 E 19121 19121] core_worker.cc:...``
RAY_CORE_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [EWF] \d+ \d+\]", re.M)


def test_rays_start_up_warnings_reach_train_log_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capfd: pytest.CaptureFixture[str]) -> None:
    import ray  # noqa: F401 - Ray's import installs its console handler on the "ray" logger

    import takzero.pipeline.run as run_module
    import takzero.pipeline.run_actors as run_actors

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

    monkeypatch.setattr(run_actors, "init_ray", init_ray)
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
                                                         1, "RayActorError")
    rep.close()
    logging.getLogger("takzero.pipeline.actors").warning("after the run: not in its log")
    log = (tmp_path / "train.log").read_text()
    assert "warning: self-play worker 1 lost (RayActorError); starting a new one" in log
    assert "after the run" not in log


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("inference", ["local", "server"])
def test_a_smoke_runs_console_has_no_ray_core_error_line(tmp_path: Path, inference: str) -> None:
    """A whole smoke run (its evaluator plays a gating check and a ``model:`` baseline, whose
    file travels as bytes; with ``selfplay.inference=server`` the workers search through the
    server): no error-level line of Ray's C++ core on the console. Ray printed one at every
    start ("Actor with class name: 'EvaluatorActor' ... has constructor arguments in the object
    store and max_restarts > 0", ray-project/ray#53727): an actor that Ray restarts was created
    with an actor handle (the coordinator, the inference server) or a large argument."""
    from takzero.nn.model import TakNet
    from takzero.pipeline.checkpoints import atomic_torch_save

    cfg = smoke_config(tmp_path)
    baseline = tmp_path / "m.pt"
    net = TakNet(cfg.model_config())
    atomic_torch_save({"model_config": cfg.model_config().to_dict(), "model_state": net.state_dict(),
                       "generation": 0, "run_name": "m", "half_komi": cfg.half_komi()}, baseline)
    args = [sys.executable, "-m", "takzero.train", "+config=smoke", f"run_name={inference}",
            f"checkpoint_root={tmp_path}", "train.total_steps=20", "train.checkpoint_every=20",
            f"selfplay.inference={inference}", "evaluator.baseline_every=1", "evaluator.baseline_games=2",
            f"evaluator.baselines=[random,'model:{baseline}:2']", "log_every_s=1"]
    done = subprocess.run(args, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True,
                          text=True, timeout=1100, start_new_session=True)
    assert done.returncode == 0, done.stderr[-3000:]
    console = done.stdout + done.stderr
    assert "evaluation: gen 1 vs m" in done.stdout, done.stdout[-3000:]  # the evaluator ran, with the file
    assert "gating: gen 1" in done.stdout, done.stdout[-3000:]
    assert not RAY_CORE_LINE.search(console), RAY_CORE_LINE.findall(console) + [console[-3000:]]
    assert "core_worker" not in console and "53727" not in console, console[-3000:]
