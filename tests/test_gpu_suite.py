"""scripts/gpu_suite.sh (issue 55): every step is wired (the script parses, the dry run lists each
step with a command whose script exists, whose options the script knows and whose overrides pass
the config checks), one step's failure does not cost the others, and the run step reads the run's
own summary."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from takzero.config import compose_preset

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "scripts" / "gpu_suite.sh"
STEPS = ["environment", "check_gpu", "network_6x6", "network_6x64", "network_10x128", "selfplay_8",
         "selfplay_16", "selfplay_8_plain", "selfplay_ray_8", "selfplay_ray_16", "make_batch", "trainer",
         "run"]


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _dry_run(*args: str) -> list[dict]:
    proc = subprocess.run(["bash", str(SUITE), "--dry-run", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHON": sys.executable})
    assert proc.returncode == 0, proc.stderr
    return _json_lines(proc.stdout)


def test_the_script_parses() -> None:
    proc = subprocess.run(["bash", "-n", str(SUITE)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.timeout(300)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_every_step_is_wired(device: str) -> None:
    steps = _dry_run("--device", device, "--out", "/tmp/gpu_suite_wired")
    assert [s["step"] for s in steps] == STEPS
    helps: dict[str, str] = {}
    for step in steps:
        assert step["timeout_s"] > 0
        words = shlex.split(step["command"])
        script = ROOT / words[1]
        assert words[0] == sys.executable and script.exists(), step
        if script.name not in helps:
            helps[script.name] = subprocess.run([sys.executable, str(script), "--help"], cwd=ROOT,
                                                capture_output=True, text=True, timeout=120).stdout
        for flag in (w for w in words[2:] if w.startswith("--") and w != "--"):
            assert re.search(rf"{re.escape(flag)}\b", helps[script.name]), (step["step"], flag)
        config = next((w.split("=", 1)[1] for w in words if w.startswith("+config=")), None)
        config = config or (words[words.index("--config") + 1] if "--config" in words else None)
        overrides = [w for w in words[2:] if "=" in w and not w.startswith(("-", "+config="))]
        # device=cuda is refused on a machine without CUDA: the rest is checked with device=auto
        overrides = ["device=auto" if w.startswith("device=cuda") else w for w in overrides]
        if config:
            compose_preset(config, overrides, run_name="wired")  # the overrides pass the config checks
    run = shlex.split(steps[-1]["command"])
    assert "+config=6x6_gpu" in run and any(w.startswith("run_name=gpu_suite-") for w in run)
    assert ("device=cpu" in run) == (device == "cpu")


def test_bad_arguments_are_refused() -> None:
    for args in (["--device", "tpu"], ["--only", "nope"], ["--run-minutes", "x"], ["--frobnicate"]):
        proc = subprocess.run(["bash", str(SUITE), "--dry-run", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=30)
        assert proc.returncode == 2 and "gpu_suite.sh:" in proc.stderr, args


@pytest.mark.slow  # three steps of the suite in subprocesses
@pytest.mark.timeout(600)
def test_one_step_timing_out_does_not_cost_the_others(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "GPU_SUITE_TIMEOUT_NETWORK_10X128": "2"}
    proc = subprocess.run(
        ["bash", str(SUITE), "--device", "cpu", "--out", str(tmp_path),
         "--only", "environment,network_10x128,make_batch"],
        cwd=ROOT, capture_output=True, text=True, timeout=550, env=env,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    suite = {line["step"]: line for line in _json_lines((tmp_path / "suite.jsonl").read_text())}
    assert list(suite) == ["environment", "network_10x128", "make_batch", "suite"]
    assert suite["network_10x128"]["timed_out"] is True and suite["network_10x128"]["rc"] == 124
    assert suite["make_batch"]["rc"] == 0 and suite["make_batch"]["lines"] >= 3
    assert suite["suite"]["failed"] == ["network_10x128"]
    every = _json_lines((tmp_path / "all.jsonl").read_text())
    made = [x for x in every if x["step"] == "make_batch" and x.get("bench") == "make_batch"]
    assert made and all(x["identical"] and x["samples_per_s"] > 0 for x in made)
    assert any(x["step"] == "environment" and x.get("bench") == "environment" for x in every)


def _run_module():
    spec = importlib.util.spec_from_file_location("gpu_suite_run", ROOT / "scripts" / "gpu_suite_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_run_summary_is_read_from_train_log(tmp_path: Path) -> None:
    run = _run_module()
    log = tmp_path / "train.log"
    rule = "=" * 72
    log.write_text("\n".join([
        "2026-12-07 05:00:00 start", f"2026-12-07 05:05:00 {rule}",
        "2026-12-07 05:05:00 run finished: train.max_minutes=5 reached",
        "2026-12-07 05:05:00   steps 420, generation 3, self-play games 812, positions 61000, training time 5.0 min",
        f"2026-12-07 05:05:00 {rule}", "",
    ]))
    out = run.read_summary(log)
    assert out["found"] and out["steps"] == 420 and out["generation"] == 3 and out["games"] == 812
    assert out["positions"] == 61000 and out["positions_per_minute"] == 12200.0
    assert "run finished" in out["lines"][0]
    assert run.read_summary(tmp_path / "missing.log")["found"] is False
    log.write_text("no summary\n")
    assert run.read_summary(log)["found"] is False
    assert run.override(["+config=6x6_gpu", "run_name=a", "run_name=b"], "run_name", "") == "b"
