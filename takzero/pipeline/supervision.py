"""Supervision of the run's long-running Ray actor tasks (self-play workers, inference servers,
Reanalyse): one check for all of them, below the modules that own the actors."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def replace_lost(tasks: list[Any], relaunch: Callable[[int], Any], what: str) -> list[int]:
    """The one check of the run's long-running actor tasks (self-play workers, inference
    servers, Reanalyse): for each finished task of ``tasks``, raise its error when it failed in
    takzero's code; when its actor is gone for good (``RayActorError``: Ray gave up restarting
    it, ``ActorDiedError`` and ``ActorUnavailableError`` included) log a warning naming ``what``
    and the index and put ``relaunch(index)`` (a new actor's task) in its place. Never waits.
    Returns the indices replaced."""
    import ray
    from ray.exceptions import RayActorError

    replaced = []
    for i, t in enumerate(tasks):
        if not ray.wait([t], timeout=0)[0]:
            continue
        try:
            ray.get(t)
        except RayActorError as e:
            log.warning("%s %d lost (%s); starting a new one", what, i, type(e).__name__)
            tasks[i] = relaunch(i)
            replaced.append(i)
    return replaced


__all__ = ["replace_lost"]
