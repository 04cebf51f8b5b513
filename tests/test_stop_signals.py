"""SIGTERM is a stop as Ctrl-C is (a new user's finding after issue 58's Ctrl-C item): SIGTERM
(``kill PID``, ``timeout``, a cluster scheduler) takes Ctrl-C's path: the run stops at the next
safe point with its stop grace, final checkpoint and summary, whose reason names the signal; a
second signal of either kind stops at once (``StopNow``, exit 128 + its number); the handler is
put back after Ray's start, which replaces SIGTERM's (``ray.init``'s ``sys.exit``, then its core
worker's C-level stack dump). The slow test sends a real SIGTERM to a small run and resumes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from smoke_config import smoke_config

from takzero.pipeline.checkpoints import list_checkpoints, load_checked
from takzero.pipeline.run import Run, StopNow
from tests.processes import kill_session, wait_for

ROOT = Path(__file__).resolve().parent.parent


# -- the handler ------------------------------------------------------------------------------


@pytest.fixture
def run_handlers(tmp_path: Path):
    """A run with its signal handlers installed (put back after the test)."""
    run = Run(smoke_config(tmp_path), command="python -m takzero.train run_name=r")
    restore = run._catch_interrupts()
    try:
        yield run
    finally:
        restore()


@pytest.mark.timeout(60)
def test_sigterm_is_a_stop_named_as_such_and_a_second_one_stops_at_once(run_handlers: Run) -> None:
    run = run_handlers
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)  # (the handler runs at the next bytecode)
    assert run.stop_requested and run.stop_reason == "interrupted (SIGTERM)" and run.stop_signal == "SIGTERM"
    with pytest.raises(StopNow) as caught:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    assert caught.value.signum == signal.SIGTERM and "second SIGTERM" in str(caught.value)


@pytest.mark.timeout(60)
def test_ctrl_c_is_named_as_such_and_a_sigterm_after_it_stops_at_once(run_handlers: Run) -> None:
    run = run_handlers
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)
    assert run.stop_requested and run.stop_reason == "interrupted (Ctrl-C)"
    with pytest.raises(StopNow) as caught:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    assert caught.value.signum == signal.SIGTERM


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize(
    "rule", ["reached train.max_minutes=60", "reached train.total_steps=40", "reached max_games=9"]
)
def test_a_signal_after_a_stop_rule_keeps_the_rule_as_the_reason(run_handlers: Run, signum: int, rule: str) -> None:
    """Ctrl-C while a finished run waits for its last evaluation (found 2026-12-07: the summary then
    said "interrupted" and offered ``train.total_steps=<more>`` for a run that had spent its
    ``train.max_minutes``): the rule stays the reason, so the command to train further raises its key."""
    from takzero.pipeline.run_reporting import _stop_key

    run = run_handlers
    run.stop_reason = rule
    os.kill(os.getpid(), signum)
    time.sleep(0.05)
    assert run.stop_requested and run.stop_reason == rule
    assert _stop_key(run.stop_reason) == rule.split()[1].split("=")[0]


def test_the_handler_is_taken_back_after_ray_replaced_it(run_handlers: Run) -> None:
    """What ``ray.init`` does to SIGTERM (a handler that exits) is undone once Ray is up."""
    run = run_handlers
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))  # as ray.init does
    run._retake_signals()
    assert signal.getsignal(signal.SIGTERM) is run.signal_handler is signal.getsignal(signal.SIGINT)
    assert callable(run.signal_handler)


def test_the_old_handlers_are_put_back_after_the_run(tmp_path: Path) -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    run = Run(smoke_config(tmp_path), command="x")
    restore = run._catch_interrupts()
    assert signal.getsignal(signal.SIGTERM) is run.signal_handler
    restore()
    assert {s: signal.getsignal(s) for s in before} == before and run.signal_handler is None


# -- over Ray: a real SIGTERM, then the resume --------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_sigterm_stops_a_run_as_ctrl_c_does_and_the_resume_continues(tmp_path: Path) -> None:
    """``kill PID`` of a smoke run's driver (Ray's processes are left alone, as they are by
    ``kill`` and ``timeout``) once it has written a checkpoint: no Ray stack dump, exit 0, the
    stop grace, a final checkpoint and the summary with the reason SIGTERM; the same command with
    a few more steps resumes from that checkpoint and finishes."""
    run = tmp_path / "t"
    args = [sys.executable, "-m", "takzero.train", "+config=smoke", "run_name=t", f"checkpoint_root={tmp_path}",
            "train.checkpoint_every=10", "evaluator.baseline_every=0", "evaluator.gating=off", "ray.num_cpus=2",
            "log_every_s=1"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([*args, "train.total_steps=100000"], cwd=ROOT, env=env, start_new_session=True,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: len(list_checkpoints(run)) >= 1 or proc.poll() is not None, 900), "no checkpoint"
        assert proc.poll() is None, "the run exited before the SIGTERM"
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=300)
    finally:
        kill_session(proc.pid)
    assert proc.returncode == 0, out[-3000:]
    assert "SIGTERM received" not in out and "Traceback" not in out, out[-3000:]
    assert "SIGTERM: stopping the workers, then a final checkpoint and the summary" in out, out[-3000:]
    assert "a second SIGTERM stops at once" in out
    assert "run stopped: interrupted (SIGTERM)" in out and "kept: " in out, out[-3000:]
    final = load_checked(list_checkpoints(run)[-1], require_checksum=True)
    assert final["run"]["launch"] == 0 and final["step"] >= 10
    step = int(final["step"])

    more = subprocess.run([*args, f"train.total_steps={step + 10}"], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=900, start_new_session=True)
    assert more.returncode == 0, (more.stdout + more.stderr)[-3000:]
    assert f"resumed from ckpt_{step:09d}.pt: step {step}" in more.stdout, more.stdout[-3000:]
    assert f"run finished: reached train.total_steps={step + 10}" in more.stdout
    assert load_checked(list_checkpoints(run)[-1])["step"] == step + 10


@pytest.mark.parametrize(
    ("overrides", "snap_at", "key"),
    [({"train.max_minutes": 60}, {"minutes": 60.4}, "train.max_minutes"),
     ({"max_games": 9}, {"games": 11}, "max_games")],
)
def test_a_rule_reached_while_stopping_after_a_signal_names_its_key(
    tmp_path: Path, overrides: dict, snap_at: dict, key: str
) -> None:
    """The other order of 34806e8's case: Ctrl-C first, then the rule reached during the stop
    (the stop grace and the final checkpoint count as training minutes; the games finished in
    the grace count). The summary said "run finished: interrupted (Ctrl-C)" and offered
    ``train.total_steps=<more>``, which the resume refuses (already finished by the rule); now it
    names the rule and raises its key. A signal with no rule reached stays "interrupted" with the
    plain command to continue."""
    import io

    from takzero.pipeline.progress import RunReporter, Snapshot, StopRule

    run = Run(smoke_config(tmp_path, **overrides), command="python -m takzero.train run_name=r")
    console = io.StringIO()
    run.reporter = RunReporter(run.run_dir, StopRule(1000), Snapshot(0, 0, 0, 0, 0.0), console=console, bar=False)
    run.stop_reason, run.stop_signal = "interrupted (Ctrl-C)", "Ctrl-C"
    reached = Snapshot(**{"step": 5, "generation": 1, "games": 3, "positions": 40, "minutes": 1.0, **snap_at})
    run._print_summary(run.reporter, None, reached, 1, finished=True, session=False)
    text = console.getvalue()
    assert f"run finished: reached {key}=" in text and "while stopping after a Ctrl-C" in text
    assert f"to train further: python -m takzero.train run_name=r {key}=<more>" in text
    console.truncate(0)
    console.seek(0)
    early = Snapshot(step=5, generation=1, games=3, positions=40, minutes=1.0)
    run._print_summary(run.reporter, None, early, 1, finished=False, session=False)
    text = console.getvalue()
    assert "run stopped: interrupted (Ctrl-C)" in text
    assert "to continue: python -m takzero.train run_name=r\n" in text
    run.reporter.close()
