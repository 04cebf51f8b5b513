"""Helpers of the tests that run whole commands in processes of their own (slow tests: training
runs over Ray, killed or signalled): wait for a condition, kill a run's whole session."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path


def wait_for(predicate: Callable[[], object], timeout: float, poll: float = 0.2) -> bool:
    """Call ``predicate`` every ``poll`` seconds until it is true (returns True) or ``timeout``
    seconds have passed (returns False)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(poll)
    return False


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (a run started with ``start_new_session``: its
    driver, Ray's daemons and workers), and nothing else: other Ray instances on the machine
    are left alone (``ray stop`` would stop them all). Three passes, for processes started while
    the first pass killed."""
    for _ in range(3):
        victims = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:  # fields after the name: state, ppid, pgrp, session
                victims.append(int(d.name))
        if not victims:
            return
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)
