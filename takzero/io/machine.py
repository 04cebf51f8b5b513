"""What the machine offers: its memory (the physical memory, or the container's limit)."""

from __future__ import annotations

import os
from pathlib import Path


def machine_memory() -> int:
    """Bytes of memory of this machine: the physical memory (``os.sysconf``), or the container's
    limit (cgroup v2 ``memory.max``, v1 ``memory.limit_in_bytes``) when it is lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text()[:40].strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = int(text)
    return int(total)


__all__ = ["machine_memory"]
