"""Ray actors of a training run: the coordinator (weights of the promoted and latest generations,
stop and pause flags, self-play statistics), the self-play actor around
:class:`takzero.pipeline.selfplay.SelfPlayWorker`, and the evaluator actor around
:class:`takzero.pipeline.gating.GatingEvaluator`. The driver (``takzero.pipeline.run``) creates
them; the classes are plain Python and become actors with ``ray.remote``.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from takzero.config import TrainConfig

# ---------------------------------------------------------------------------------------------
# Coordinator: weights, stop flag and statistics shared by the actors
# ---------------------------------------------------------------------------------------------


class Coordinator:
    """Holds the promoted and the latest weights with their generation numbers, the stop flag,
    and the self-play statistics reported by the workers (drained by the driver)."""

    def __init__(self, first_stream: int = 0) -> None:
        self.next_stream = first_stream
        self.weights: dict[str, tuple[int, dict[str, torch.Tensor]] | None] = {
            "promoted": None,
            "latest": None,
        }
        self.stopped = False
        self.paused = False
        self.stats: list[dict[str, float]] = []
        self.games: list[str] = []

    def publish(self, kind: str, generation: int, state_dict: dict[str, torch.Tensor]) -> None:
        self.weights[kind] = (generation, state_dict)

    def generation(self, kind: str) -> int:
        w = self.weights[kind]
        return -1 if w is None else w[0]

    def get_weights(self, kind: str, known: int) -> tuple[int, dict[str, torch.Tensor]] | None:
        """The weights of ``kind`` if their generation differs from ``known``, else None."""
        w = self.weights[kind]
        if w is None or w[0] == known:
            return None
        return w

    def new_stream(self) -> int:
        """A self-play random stream (and game-id prefix) not used before in this run: the run
        starts the count at ``launch << 16`` (``launch``: how many times the run was started),
        and every actor start, restarts included, takes the next one."""
        s = self.next_stream
        self.next_stream += 1
        return s

    def stop(self) -> None:
        self.stopped = True

    def should_stop(self) -> bool:
        return self.stopped

    def set_paused(self, paused: bool) -> None:
        self.paused = paused

    def is_paused(self) -> bool:
        return self.paused

    def report(self, stats: dict[str, float], ptn: list[str] | None = None) -> None:
        self.stats.append(stats)
        if ptn:
            self.games.extend(ptn)

    def exchange(
        self, kind: str, known: int, stats: list[dict[str, float]], ptn: list[str]
    ) -> tuple[bool, bool, tuple[int, dict[str, torch.Tensor]] | None]:
        """A self-play worker's one call per second: hand in its statistics and sample games
        since the last call; get back (stop, paused, new weights of ``kind`` or None). One call
        instead of four per search step keeps Ray's task-event store small."""
        self.stats.extend(stats)
        self.games.extend(ptn)
        return self.stopped, self.paused, self.get_weights(kind, known)

    def drain(self) -> tuple[list[dict[str, float]], list[str]]:
        stats, games = self.stats, self.games
        self.stats, self.games = [], []
        return stats, games


# ---------------------------------------------------------------------------------------------
# Actors
# ---------------------------------------------------------------------------------------------


class SelfPlayActor:
    """Ray actor around :class:`takzero.pipeline.selfplay.SelfPlayWorker`: plays until told to stop,
    refreshing weights when a new generation appears, pushing finished games to the replay buffer
    (waiting while the buffer says it is too far ahead of the trainer)."""

    def __init__(self, cfg: TrainConfig, worker_id: int) -> None:
        torch.set_num_threads(cfg.selfplay.threads)
        self.cfg = cfg
        self.worker_id = worker_id
        self.kind = "latest" if cfg.selfplay.use_latest else "promoted"

    def run(self, coordinator: Any, replay: Any) -> int:
        """Play until the coordinator says stop; returns the games finished. The worker is built
        here, with a random stream the coordinator hands out, so a restarted actor (whose task
        Ray retries) plays new games rather than the ones its first life played."""
        import ray

        from takzero.pipeline.selfplay import SelfPlayWorker

        stream = ray.get(coordinator.new_stream.remote())
        self.worker = SelfPlayWorker(self.cfg, self.worker_id, stream=stream)
        generation = -1
        pending = None  # records refused by the buffer, retried before playing on
        reports: list[dict[str, float]] = []  # statistics not yet handed to the coordinator
        samples: list[str] = []
        last_check = 0.0
        paused = False
        while True:
            now = time.monotonic()
            if now - last_check > 1.0:
                last_check = now
                stop, paused, w = ray.get(
                    coordinator.exchange.remote(self.kind, generation, reports, samples)
                )
                reports, samples = [], []
                if stop:  # every game added to the buffer has been reported
                    return self.worker.games_finished
                if w is not None:
                    generation = w[0]
                    self.worker.set_weights(w[1], generation)
            if pending is not None:
                if ray.get(replay.add.remote(pending[0], pending[1])):
                    pending = None
                else:
                    time.sleep(0.2)
                    continue
            if paused:
                time.sleep(0.2)
                continue
            records, stats, ptn = self.worker.play_step()
            if stats:
                reports.append(stats)
                samples.extend(ptn)
            if records is not None and len(records):
                games = int(stats.get("count/games", 0))
                if not ray.get(replay.add.remote(records, games)):
                    pending = (records, games)


def remote_selfplay_actor(num_gpus: float = 0.0) -> Any:
    """The Ray actor class of a self-play worker: one CPU (and ``num_gpus``), restarted by Ray
    when its process dies, with its ``run`` task retried on the new process."""
    import ray

    return ray.remote(num_cpus=1, num_gpus=num_gpus, max_restarts=-1, max_task_retries=-1)(
        SelfPlayActor
    )


class EvaluatorActor:
    """Ray actor that plays a candidate generation against the incumbent (gating) and against the
    fixed baselines (Elo on a fixed scale). Its games never enter the replay buffer."""

    def __init__(self, cfg: TrainConfig) -> None:
        from takzero.pipeline.gating import GatingEvaluator

        torch.set_num_threads(1)
        self.evaluator = GatingEvaluator(cfg)

    def evaluate(
        self,
        candidate: tuple[int, dict[str, torch.Tensor]],
        incumbent: tuple[int, dict[str, torch.Tensor]],
        play_baselines: bool,
        seed: int | None = None,
    ) -> dict[str, Any]:
        return self.evaluator.evaluate(candidate, incumbent, play_baselines, seed)
