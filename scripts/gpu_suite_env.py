"""The machine scripts/gpu_suite.sh ran on, one JSON line: GPUs (torch's view, and nvidia-smi's
when it is installed), torch and its CUDA, CPUs, memory and the load average.

    python scripts/gpu_suite_env.py
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess

import torch

NVIDIA_FIELDS = ("name", "driver_version", "memory.total", "power.limit", "clocks.max.sm", "pcie.link.gen.max",
                 "pcie.link.width.max")


def nvidia_smi() -> list[dict[str, str]] | str:
    """One dict per GPU of ``nvidia-smi --query-gpu``, or why there is none."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "nvidia-smi not found"
    try:
        out = subprocess.run([exe, f"--query-gpu={','.join(NVIDIA_FIELDS)}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi failed: {type(e).__name__}: {e}"
    return [dict(zip(NVIDIA_FIELDS, (v.strip() for v in row.split(",")))) for row in out.splitlines() if row.strip()]  # noqa: B905


def main() -> None:
    line: dict[str, object] = {
        "bench": "environment", "platform": platform.platform(), "python": platform.python_version(),
        "torch": torch.__version__, "torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
        "cpu_count": os.cpu_count(), "loadavg_1min": round(os.getloadavg()[0], 2),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }
    if torch.cuda.is_available():
        line["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        line["bf16_supported"] = torch.cuda.is_bf16_supported()
    line["nvidia_smi"] = nvidia_smi()
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
