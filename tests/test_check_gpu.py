"""scripts/check_gpu.py: without CUDA it says so and exits 0; its checks run on CPU (--device cpu
--quick) and each passes or says why it does not apply."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check_gpu.py"


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.slow  # the whole check_gpu script in a subprocess
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the GPU path runs instead")
def test_without_cuda_it_says_so_and_exits_0() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = _lines(proc.stdout)
    assert lines[0]["check"] == "environment" and lines[0]["cuda_available"] is False
    assert lines[-1]["check"] == "summary" and lines[-1]["cuda"] is False
    assert "no CUDA device" in lines[-1]["note"]


@pytest.mark.slow
def test_cpu_path_runs_every_check() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--quick", "--config", "smoke"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    lines = _lines(proc.stdout)
    by_name = {line["check"]: line for line in lines}
    expected = {"device_auto", "pinned_buffers", "inference_fp32", "inference_bf16", "torchscript",
                "onnx", "train_steps", "selfplay_shared_gpu"}
    assert expected <= set(by_name), (set(by_name), proc.stderr[-2000:])
    failed = {k: v for k, v in by_name.items() if v.get("pass") is False}
    assert not failed, failed
    assert proc.returncode == 0
    assert by_name["pinned_buffers"]["pinned"] is False  # pinned only on CUDA
    assert by_name["inference_fp32"]["positions_per_s"] > 0
    assert by_name["train_steps"]["samples_per_s"] > 0
    assert all(v > 0 for v in by_name["selfplay_shared_gpu"]["positions_per_s"].values())
    assert by_name["summary"]["failed"] == 0 and by_name["summary"]["passed"] >= 7
