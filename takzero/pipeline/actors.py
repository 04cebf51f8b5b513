"""Ray actors of a training run: the coordinator (the promoted and latest weights as object-store
references with their generation numbers, stop and pause flags, the self-play streams handed out), the replay
actor (the replay buffer plus the statistics and sample games that arrive with the records), the
self-play actor around :class:`takzero.pipeline.selfplay.SelfPlayWorker` and its pool. The
evaluator actor is in ``takzero.pipeline.evaluator_actor``. The driver (``takzero.pipeline.run``)
creates them and places them (``takzero.pipeline.placement``); the classes are plain Python and
become actors with ``ray.remote``.

Weights travel once per generation: the driver puts a state dict into Ray's object store once
(:class:`PublishedWeights`) and hands out the reference; every worker on a node reads the same
copy from that node's object store.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from takzero.config import ReplayConfig, TrainConfig
from takzero.pipeline.replay import ReplayBuffer
from takzero.pipeline.supervision import replace_lost

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Coordinator: weights, stop flag and streams shared by the actors
# ---------------------------------------------------------------------------------------------


class Coordinator:
    """Holds the promoted and the latest weights (object-store references, see
    :class:`PublishedWeights`) with their generation numbers, the stop flag, and how
    the self-play random streams handed out (see :meth:`new_stream`)."""

    def __init__(self, first_stream: int = 0, carried: Any = None) -> None:
        self.next_stream = first_stream
        #: the games the last stop left in play (``selfplay.UnfinishedGames``), not yet taken
        #: by a worker (:meth:`take_carried`); None: none
        self.carried = carried
        self.weights: dict[str, tuple[int, list[Any]] | None] = {"promoted": None, "latest": None}
        self.stopped = False
        self.stream_workers: dict[int, int] = {}
        #: games of the running check heard from the evaluator, not yet taken by the driver
        self.eval_games: list[tuple[int, str, int, float, str]] = []
        #: the actor names of the run's inference servers (``selfplay.inference: server``)
        self.servers: list[str] = []

    def set_servers(self, names: list[str]) -> None:
        """The actor names of the run's inference servers (``InferenceServers``)."""
        self.servers = list(names)

    def server_names(self) -> list[str]:
        """The names :meth:`set_servers` gave ([] without servers)."""
        return list(self.servers)

    def publish(self, kind: str, generation: int, ref: list[Any]) -> None:
        """Publish ``[ObjectRef]`` of a state dict (wrapped in a list so that Ray passes the
        reference, not the resolved weights) as the ``kind`` ('promoted' or 'latest') weights."""
        self.weights[kind] = (generation, ref)

    def generation(self, kind: str) -> int:
        w = self.weights[kind]
        return -1 if w is None else w[0]

    def get_weights(self, kind: str, known: int) -> tuple[int, list[Any]] | None:
        """``(generation, [ObjectRef])`` of ``kind`` if its generation differs from ``known``,
        else None; the caller resolves the reference with ``ray.get``."""
        w = self.weights[kind]
        if w is None or w[0] == known:
            return None
        return w

    def new_stream(self, worker_id: int) -> int:
        """A self-play random stream (and game-id prefix) not used before in this run, for a
        start of self-play worker ``worker_id``: the run starts the count at ``launch << 16``
        (``launch``: how many times the run was started), and every actor start, Ray restarts
        and replacements included, takes the next one."""
        s = self.next_stream
        self.next_stream += 1
        self.stream_workers[s] = worker_id
        return s

    def take_carried(self, n: int) -> Any:
        """Up to ``n`` of the games the last stop left in play (``selfplay.UnfinishedGames``),
        each handed out once (a restarted worker gets none of those its first life took), for a
        worker to continue; None when none are left."""
        if self.carried is None or not self.carried.games or n <= 0:
            return None
        taken, self.carried = self.carried.split(n)
        return taken

    def carried_left(self) -> Any:
        """The carried games no worker took (more than the slots of this start's workers): the
        stop keeps them again. None when none are left."""
        return self.carried if self.carried is not None and self.carried.games else None

    def streams(self) -> dict[int, int]:
        """The worker id of every stream handed out in this launch (stream -> worker id)."""
        return dict(self.stream_workers)

    def exchange(
        self, kind: str, known: int
    ) -> tuple[bool, tuple[int, list[Any]] | None]:
        """A self-play worker's one call per second: (stop, the ``kind`` weights as
        ``(generation, [ObjectRef])`` when newer than ``known``, else None). One call instead of
        one per search step keeps Ray's task-event store small. (Back-pressure is the replay
        actor's: ``ReplayActor.submit`` refuses a step while the buffer is ``max_ahead`` ahead.)"""
        return self.stopped, self.get_weights(kind, known)

    def stop(self) -> None:
        self.stopped = True

    def eval_game(self, generation: int, key: str, index: int, score: float, ptn: str) -> None:
        """The evaluator finished one game of the check of ``generation`` (match ``key``, game
        ``index``, A's ``score``, its PTN; ``gating.GameCallback``)."""
        self.eval_games.append((generation, key, index, score, ptn))

    def take_eval_games(self) -> list[tuple[int, str, int, float, str]]:
        """The games :meth:`eval_game` heard since the last call (the driver keeps them)."""
        games, self.eval_games = self.eval_games, []
        return games


class PublishedWeights:
    """Driver side of the weights: one ``ray.put`` per state dict, the reference shared by every
    request (workers, evaluator). Keeps the references of the last ``keep`` state dicts (by object
    identity: the driver publishes each generation's state dict object once and reuses it)."""

    def __init__(self, keep: int = 4) -> None:
        self.keep = keep
        self._refs: OrderedDict[int, tuple[dict[str, torch.Tensor], Any]] = OrderedDict()
        self.puts = 0  # ray.put calls made (for tests and logs)

    def ref(self, state: dict[str, torch.Tensor]) -> Any:
        """The ObjectRef of ``state``, put into the object store on first use."""
        import ray

        key = id(state)
        hit = self._refs.get(key)
        if hit is not None and hit[0] is state:
            self._refs.move_to_end(key)
            return hit[1]
        ref = ray.put(state)
        self.puts += 1
        self._refs[key] = (state, ref)  # holding ``state`` keeps its id from being reused
        while len(self._refs) > self.keep:
            self._refs.popitem(last=False)
        return ref

    def publish(self, coordinator: Any, kind: str, generation: int, state: dict[str, torch.Tensor]) -> None:
        """Tell the coordinator that ``state`` (put once) is the ``kind`` weights of ``generation``."""
        coordinator.publish.remote(kind, generation, [self.ref(state)])


# ---------------------------------------------------------------------------------------------
# Replay actor: the buffer, and the statistics that come with its records
# ---------------------------------------------------------------------------------------------


class ReplayActor(ReplayBuffer):
    """The replay buffer as the run's Ray actor (pinned to the driver's node: it writes the
    ``replay/`` shards). Self-play workers hand in a finished step with :meth:`submit`: records,
    statistics and sample PTN in one call, so a worker lost between two calls can never leave
    counted positions that are not in the buffer (or the reverse); the driver takes the
    statistics and games with :meth:`drain` and writes them."""

    def __init__(
        self, cfg: ReplayConfig, size: int, shard_dir: str | Path | None = None, seed: int = 0,
        opponent_top_k: int = 0,
    ) -> None:
        super().__init__(cfg, size, shard_dir, seed, opponent_top_k)  # see ReplayBuffer
        self.inbox_stats: list[dict[str, float]] = []
        self.inbox_games: list[str] = []
        #: positions received per self-play stream (game id >> 32)
        self.sources: dict[tuple[int, int], int] = {}

    def submit(self, records: Any, stats: dict[str, float], ptn: list[str] | None = None,
               force: bool = False) -> bool:
        """Add ``records`` (may be None) with the step's ``stats`` and sample games. Returns False,
        keeping nothing, when the buffer refuses the records (backpressure: the worker retries
        the same call later); ``force``: never refused (a worker's last step at the stop)."""
        if records is not None and len(records):
            if not self.add(records, int(stats.get("count/games", 0)), force=force):
                return False
            ids = records.game_id
            streams, counts = np.unique(ids >> 32, return_counts=True)
            for stream, n in zip(streams.tolist(), counts.tolist(), strict=True):
                self.sources[stream] = self.sources.get(stream, 0) + n
        elif stats.get("count/games"):
            self.games_added += int(stats["count/games"])
        if stats:
            self.inbox_stats.append(stats)
        if ptn:
            self.inbox_games.extend(ptn)
        return True

    def drain(self) -> tuple[list[dict[str, float]], list[str]]:
        """The statistics and sample games received since the last call."""
        stats, games = self.inbox_stats, self.inbox_games
        self.inbox_stats, self.inbox_games = [], []
        return stats, games

    def load_with_stats(self, state: dict[str, Any] | None = None) -> tuple[int, dict[str, float], float]:
        """:meth:`load` and :meth:`stats` in one call (no step handed in between: the counters
        read are those of the shards and the checkpoint alone), with the load's seconds."""
        t0 = time.perf_counter()
        loaded = self.load(state)
        return loaded, self.stats(), time.perf_counter() - t0

    def drain_with_state(self) -> tuple[list[dict[str, float]], list[str], dict[str, Any]]:
        """:meth:`drain` and :meth:`state_dict` in one call (for a checkpoint: no step can be
        handed in between, so the counters and the buffer agree)."""
        stats, games = self.drain()
        return stats, games, self.state_dict()

    def positions_by_source(self) -> dict[tuple[int, int], int]:
        """Positions received per self-play stream (see :meth:`Coordinator.new_stream`)."""
        return dict(self.sources)


# ---------------------------------------------------------------------------------------------
# Actors
# ---------------------------------------------------------------------------------------------


#: Keys of a self-play worker's first statistics: wall-clock times (``time.time()``, seconds)
#: of its start-up, which the driver turns into the run's start-up timings (``Run._startup``):
#: actor created (process started, modules imported), worker built (search kernels, network,
#: backend), first step searched (the first new self-play positions).
STARTUP_KEYS = ("startup/actor_at", "startup/built_at", "startup/first_step_at")


class SelfPlayActor:
    """Ray actor around :class:`takzero.pipeline.selfplay.SelfPlayWorker`: plays until told to stop,
    refreshing weights when a new generation appears (one object-store read per generation),
    handing each step's finished games to the replay actor (waiting while the buffer says it is
    too far ahead of the trainer). It reads and writes no file.

    ``server``: ``(actor handle, name)`` of the inference server whose network this worker
    searches with (``selfplay.inference: server``,
    :class:`takzero.pipeline.inference_server.InferenceServers`): the worker then owns no
    network and reads no weights (the server loads each generation once); None: its own
    network, which takes each new generation's weights. The run passes the server's name only
    (``(None, name)``): the handle is looked up in :meth:`run`, since Ray keeps no actor handle
    of a restarted actor's constructor alive (ray-project/ray#53727, an error line at every
    start otherwise)."""

    def __init__(self, cfg: TrainConfig, worker_id: int, server: tuple[Any, str] | None = None) -> None:
        self.created_at = time.time()
        torch.set_num_threads(cfg.selfplay.threads)
        self.cfg = cfg
        self.worker_id = worker_id
        self.server = server
        self.kind = "latest" if cfg.selfplay.use_latest else "promoted"
        self.continued = 0  # carried games this worker took at its start

    def started(self) -> bool:
        """True: this actor's process exists (the pool asks at once after creating it, so the
        answer comes before ``run`` and only once Ray has found a CPU for the worker)."""
        return True

    def run(self, coordinator: Any, replay: Any) -> dict[str, Any]:
        """Play until the coordinator says stop. The worker is built here, with a random stream
        the coordinator hands out, so a restarted actor (whose task Ray retries) plays new games
        rather than the ones its first life played; it plays once the coordinator has weights
        for it (the driver may start the workers before it publishes them). Its first step's
        statistics carry the start-up times (:data:`STARTUP_KEYS`).

        Its first games are those the last stop left in play, as many as it has slots
        (``Coordinator.take_carried``; :meth:`SelfPlayWorker.continue_games`).

        At the stop, a step the buffer refused (backpressure) is handed in anyway
        (``ReplayActor.submit(force=True)``): finished games are never dropped. Then, for
        ``selfplay.stop_grace_seconds`` (> 0), it plays on without starting new games, handing in
        each game that finishes (forced: the trainer has stopped), and keeps the games still in
        play for the next start (``'carried'``, a ``selfplay.UnfinishedGames``). Returns what this
        process did: 'games' (finished), 'continued' (carried games it took at its start),
        'kept_games' and 'kept_positions' (handed in at the stop), 'stored_games' and
        'stored_positions' (games in play kept for the next start, and the positions they had
        recorded), 'unfinished_games' and 'unfinished_positions' (games in play dropped: grace 0),
        'carried'."""
        import ray

        from takzero.pipeline.selfplay import SelfPlayWorker

        stream = ray.get(coordinator.new_stream.remote(self.worker_id))
        remote = None
        if self.server is not None:
            from takzero.pipeline.inference_server import RemoteEvaluator

            handle = self.server[0] if self.server[0] is not None else ray.get_actor(self.server[1])
            remote = RemoteEvaluator(handle, self.cfg.board.size, name=self.server[1])
        self.worker = SelfPlayWorker.from_run(self.cfg, self.worker_id, stream=stream, evaluator=remote)
        carried = ray.get(coordinator.take_carried.remote(self.worker.num_games))
        self.continued = self.worker.continue_games(carried) if carried is not None else 0
        startup: dict[str, float] | None = {"startup/actor_at": self.created_at, "startup/built_at": time.time()}
        generation = -1
        pending = None  # a step refused by the buffer, retried before playing on
        last_check = 0.0
        while True:
            now = time.monotonic()
            if now - last_check > 1.0 or generation < 0:
                last_check = now
                stop, w = ray.get(coordinator.exchange.remote(self.kind, generation))
                if stop:
                    return self._stop(replay, pending, played=generation >= 0)
                if w is not None:
                    generation = w[0]
                    if remote is None:  # a server's workers never read the weights
                        self.worker.set_weights(ray.get(w[1][0]), generation)
                elif generation < 0:  # no weights published yet: never play unknown weights
                    time.sleep(0.05)
                    continue
            if pending is not None:
                if ray.get(replay.submit.remote(*pending)):
                    pending = None
                else:
                    time.sleep(0.2)
                    continue
            records, stats, ptn = self.worker.play_step()
            if "inflight/stream" in stats:  # whose games these are: a worker's new life replaces its old one's
                stats = {**stats, "inflight/worker": float(self.worker_id)}
            if startup:  # the first step: the start-up times go with its statistics
                stats, startup = {**stats, **startup, "startup/first_step_at": time.time()}, None
            if records is not None or stats or ptn:
                if not ray.get(replay.submit.remote(records, stats, ptn)):
                    pending = (records, stats, ptn)

    def _stop(self, replay: Any, pending: tuple[Any, dict[str, float], list[str]] | None,
              played: bool = True) -> dict[str, Any]:
        """Hand in the refused step (if any) whatever the buffer's backpressure; play out the
        grace period (``selfplay.stop_grace_seconds``; only once the worker has had weights:
        ``played``) and keep what is still in play; the report :meth:`run` returns."""
        import ray

        kept_games = kept_positions = 0
        if pending is not None:
            records, stats, ptn = pending
            ray.get(replay.submit.remote(records, stats, ptn, force=True))
            kept_games = int(stats.get("count/games", 0))
            kept_positions = 0 if records is None else len(records)
        grace = float(self.cfg.selfplay.stop_grace_seconds)
        end = time.monotonic() + grace
        while played and grace > 0 and self.worker.in_play() and time.monotonic() < end:
            records, stats, ptn = self.worker.play_step(new_games=False)
            stats = {**stats, "inflight/worker": float(self.worker_id)}
            ray.get(replay.submit.remote(records, stats, ptn, force=True))
            kept_games += int(stats.get("count/games", 0))
            kept_positions += 0 if records is None else len(records)
        left = self.worker.unfinished()
        keep = grace > 0
        return {
            "games": self.worker.games_finished,
            "continued": self.continued,
            "kept_games": kept_games,
            "kept_positions": kept_positions,
            "stored_games": left.games if keep else 0,
            "stored_positions": left.positions if keep else 0,
            "unfinished_games": 0 if keep else left.games,
            "unfinished_positions": 0 if keep else left.positions,
            "carried": left if keep and left.games else None,
        }


class SelfPlayPool:
    """The run's self-play workers and their ``run`` tasks (driver side).

    Ray restarts a worker whose process or node died (``max_restarts=-1``) and retries its task;
    :meth:`check` surfaces a worker that failed in our own code (the exception is raised), and
    replaces one that Ray gave up on (``ActorDiedError`` / ``ActorUnavailableError``) with a new
    actor of the same worker id. Its game in flight is lost; what it handed in before stays.

    ``servers``: the run's inference servers (``selfplay.inference: server``; worker ``i`` uses
    ``servers.for_worker(i)``), None for local networks.
    """

    def __init__(self, cfg: TrainConfig, options: dict[str, Any], coordinator: Any, replay: Any,
                 servers: Any = None) -> None:
        import ray

        self.cfg = cfg
        self.cls = ray.remote(SelfPlayActor).options(**options)
        self.coordinator = coordinator
        self.replay = replay
        self.servers = servers
        self.workers: list[Any] = []
        self.tasks: list[Any] = []
        self.started: list[Any] = []  # per worker: SelfPlayActor.started, ready once it runs
        self.replaced = 0
        self.carried: Any = None  # the games the workers keep for the next start (finish)
        for i in range(cfg.selfplay.workers):
            w = self._new_worker(i)
            self.workers.append(w)
            self.started.append(w.started.remote())  # before run: answered as its process starts
            self.tasks.append(w.run.remote(coordinator, replay))

    def _new_worker(self, i: int) -> Any:
        # the server by name (no actor handle in a restarted actor's constructor: SelfPlayActor)
        server = (None, self.servers.for_worker(i)[1]) if self.servers is not None else None
        return self.cls.remote(self.cfg, i, server)

    def check(self) -> list[int]:
        """Raise the error of a worker task that failed in takzero's code; replace a worker whose
        actor is gone for good (:func:`replace_lost`). Never waits. Returns the ids of the
        workers replaced (their games in flight are gone)."""

        def relaunch(i: int) -> Any:
            self.replaced += 1
            self.workers[i] = self._new_worker(i)
            self.started[i] = self.workers[i].started.remote()
            return self.workers[i].run.remote(self.coordinator, self.replay)

        return replace_lost(self.tasks, relaunch, "self-play worker")

    def started_workers(self) -> list[int]:
        """The ids of the workers whose process has started (:meth:`SelfPlayActor.started`
        answered; one that failed to start counts too, its task fails); a worker still waiting
        for a CPU (more workers than Ray has CPUs) is not among them. Never waits."""
        import ray

        if not self.started:
            return []
        done, _ = ray.wait(self.started, num_returns=len(self.started), timeout=0)
        answered = set(done)
        return [i for i, r in enumerate(self.started) if r in answered]

    def finish(self, timeout_s: float | None = None) -> dict[str, int]:
        """After the coordinator's stop: wait up to ``timeout_s`` (default: the grace period,
        ``selfplay.stop_grace_seconds``, plus 60 s) for the tasks of the started workers to
        return (one that waits for a node never comes; one that never started, still waiting
        for a CPU, has no game in play and is not waited for), then kill every worker. Returns
        the sums of what the returned tasks report (:meth:`SelfPlayActor.run`: 'games',
        'continued', 'kept_games', 'kept_positions', 'stored_games', 'stored_positions',
        'unfinished_games', 'unfinished_positions'; a started worker whose task failed or did
        not return counts nothing, and 'lost_workers' counts those; 'never_started' the workers
        that never ran); the games they keep for the next start are in :attr:`carried` (a
        ``selfplay.UnfinishedGames``)."""
        import ray

        from takzero.pipeline.selfplay import UnfinishedGames

        if timeout_s is None:
            timeout_s = float(self.cfg.selfplay.stop_grace_seconds) + 60.0
        started = self.started_workers()
        tasks = [self.tasks[i] for i in started]
        ready = ray.wait(tasks, num_returns=len(tasks), timeout=timeout_s)[0] if tasks else []
        totals = dict.fromkeys(("games", "continued", "kept_games", "kept_positions", "stored_games",
                                "stored_positions", "unfinished_games", "unfinished_positions"), 0)
        totals["lost_workers"] = len(tasks) - len(ready)
        totals["never_started"] = len(self.tasks) - len(tasks)
        carried = []
        for t in ready:
            try:
                report = ray.get(t)
            except Exception:  # noqa: BLE001 - a worker lost at the stop hands in nothing more
                totals["lost_workers"] += 1
                continue
            for k in totals:
                if k not in ("lost_workers", "never_started"):
                    totals[k] += int(report.get(k, 0))
            if report.get("carried") is not None:
                carried.append(report["carried"])
        self.carried = UnfinishedGames.concat(carried)
        for w in self.workers:
            ray.kill(w)
        return totals
