"""A training run's Ray actors and self-play pool: Ray started (its start-up warnings to
train.log only), the coordinator and the replay actor on the driver's node, the self-play pool
(and the inference servers, Reanalyse) anywhere, the replay reload awaited and the weights
published; the workers' reports drained (self-play statistics and counters, games in play,
start-up timings, sample games); the games in play at a stop kept in ``UNFINISHED_GAMES`` and
handed to the next start. The actors themselves are ``actors.py``'s, their supervision
``supervision.py``'s, their placement ``placement.py``'s."""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from typing import Any

from takzero.pipeline.actors import STARTUP_KEYS, Coordinator, ReplayActor, SelfPlayPool
from takzero.pipeline.checkpoints import set_aside
from takzero.pipeline.inference_server import InferenceServers
from takzero.pipeline.placement import (
    check_resources,
    cluster_gpus,
    driver_node_id,
    init_ray,
    on_node,
    selfplay_options,
)
from takzero.pipeline.progress import startup_line, startup_timings
from takzero.pipeline.reanalyse import ReanalyseWorker, reanalyse_counts
from takzero.pipeline.resume import STREAMS_PER_LAUNCH
from takzero.pipeline.run_evaluation import RunEvaluation
from takzero.pipeline.run_reporting import worker_cpu_line
from takzero.pipeline.run_state import cpu_state
from takzero.pipeline.scalars import selfplay_scalars, summarise_worker_stats
from takzero.pipeline.tb_games import log_sample_game

log = logging.getLogger("takzero.train")

#: The file in the run folder that keeps the self-play games in play at the last stop
#: (``selfplay.UnfinishedGames``), continued by the next start.
UNFINISHED_GAMES = "unfinished_games.npz"


class RunActors(RunEvaluation):
    """The run's Ray actors and self-play pool (start-up restores the trainer, ``best.pt`` and
    the owed checks: :class:`RunEvaluation` and the parts below it)."""

    def _start_actors(self, state: dict[str, Any] | None) -> bool:
        """Start Ray and the actors, make the trainer (:meth:`_make_trainer`, while the actors'
        processes start), reload the replay buffer, publish the weights. Returns False when a
        Ctrl-C arrived meanwhile (checked between the steps; each finishes first).

        The actors' processes start together, before the weights are published (a self-play
        worker waits for its first weights) and before the replay reload is awaited: the
        replay actor reloads its shards while the workers start their processes and load their
        kernels (their first records queue behind the reload in the replay actor), so neither
        the coordinator's start nor a resume's reload delays self-play. The evaluator starts
        later (:meth:`_evaluator_started`)."""
        import ray

        cfg = self.cfg
        assert self.reporter is not None
        stamp = self._stamp
        # Ray's start-up warnings (e.g. "Token authentication is enabled ...") go to train.log
        # only: its own console handlers are set aside while it starts.
        ray_log = logging.getLogger("ray")
        console = list(ray_log.handlers)
        to_log = self.reporter.log_handler("ray")
        for h in console:
            ray_log.removeHandler(h)
        ray_log.addHandler(to_log)
        stamp("ray_start")
        try:
            init_ray(cfg)
        finally:
            ray_log.removeHandler(to_log)
            for h in console:
                ray_log.addHandler(h)
            self._retake_signals()
        stamp("ray_ready")
        if self.stop_requested:
            return False
        check_resources("ray.selfplay_resources", cfg.ray.selfplay_resources or {})
        check_resources("ray.evaluator_resources", cfg.ray.evaluator_resources or {})
        local = not cfg.ray.address or cfg.ray.address == "local"
        cpus = float(ray.cluster_resources().get("CPU", 0.0))
        if too_many := worker_cpu_line(cfg.selfplay.workers, cpus, local):
            self.reporter.line(too_many)
        # Placement (takzero.pipeline.placement): what writes the run folder stays on this node.
        here = on_node(driver_node_id())
        self.coordinator = ray.remote(Coordinator).options(num_cpus=0, **here).remote(
            self.launch * STREAMS_PER_LAUNCH, self.carried)
        self.replay = ray.remote(ReplayActor).options(num_cpus=0, **here).remote(
            cfg.replay, cfg.board.size, self.run_dir / "replay", cfg.seed, cfg.replay_opponent_top_k()
        )
        rstate = state.get("replay") if state else None
        if rstate is not None:
            self.reanalysed = reanalyse_counts(rstate)
        reloading = self.replay.load_with_stats.remote(rstate)  # awaited once self-play starts

        # The actors' processes start together (the workers wait for their first weights).
        gpus = cluster_gpus() if cfg.device != "cpu" else 0
        share = cfg.ray.worker_gpu_share if gpus else 0.0
        if cfg.selfplay.inference == "server":  # the servers own the networks (and the GPUs)
            self.servers = InferenceServers(cfg, self.coordinator, gpus)
            share = 0.0
        options = selfplay_options(cfg.ray.selfplay_resources or {}, share)
        self.pool = SelfPlayPool(cfg, options, self.coordinator, self.replay, self.servers)
        stamp("pool_created")
        if self.carried is not None:  # the workers' now (the coordinator's until they take them)
            (self.run_dir / UNFINISHED_GAMES).unlink(missing_ok=True)

        trainer = self._make_trainer(state)
        # Weights: the promoted model (best.pt) drives self-play; the latest is the trainer's.
        # Weights go to the object store once per generation; actors share the reference.
        self.promoted = self._load_best(trainer, self.c.promoted_generation, state)
        self.weights.publish(self.coordinator, "promoted", *self.promoted)
        self.weights.publish(self.coordinator, "latest", trainer.generation, cpu_state(trainer))
        ray.get(self.coordinator.generation.remote("latest"))
        if self.stop_requested:  # (the replay actor, killed at shutdown, only reads)
            return False

        loaded, rstats, seconds = ray.get(reloading)  # the reload's counters, nothing handed in yet
        stamp("replay_reload_s", seconds)
        if rstate is not None:
            # Shards written after the checkpoint hold games that were played: they count.
            self.c.games += max(0, int(rstats["replay/games"]) - int(rstate.get("games_added", 0)))
            self.c.positions += max(0, int(rstats["replay/total_added"]) - int(rstate["total_added"]))
        elif loaded:
            self.c.games = int(rstats["replay/games"])
            self.c.positions = int(rstats["replay/total_added"])
        if loaded:
            self.reporter.line(f"replay: reloaded {loaded} positions from shards in {seconds:.1f} s")
        self.reporter.start = self._snapshot(trainer)
        self._restore_owed()
        self.reanalyser = ReanalyseWorker.start(cfg, options, self.coordinator, self.replay)
        if self.on_started is not None:
            self.on_started()
        return not self.stop_requested

    def _retake_signals(self) -> None:
        """Put the run's handler of SIGINT and SIGTERM back after Ray's start: ``ray.init``
        sets a SIGTERM handler of its own (``sys.exit``), and its core worker then installs a
        C-level one (a stack dump, then the process ends), so without this a ``kill PID``, a
        scheduler's SIGTERM or ``timeout`` would end the run with neither checkpoint nor
        summary. Nothing when the run has no handler (a run driven from another thread)."""
        if self.signal_handler is None or threading.current_thread() is not threading.main_thread():
            return
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, self.signal_handler)  # (sigaction again: over the C-level handler too)

    def _stamp(self, name: str, value: float | None = None) -> None:
        """Record a start-up stamp (``time.time()``, or ``value``) for the start-up timings."""
        if self.startup is not None:
            self.startup[name] = time.time() if value is None else value

    def _drain(self, step: int, drained: tuple[list[dict[str, float]], list[str]] | None = None) -> None:
        """Write the self-play statistics and sample games the replay actor received since the
        last call (the workers hand them in with their records)."""
        import ray

        assert self.scalars is not None
        add = self.scalars.add
        stats, games = drained if drained is not None else ray.get(self.replay.drain.remote())
        for s in stats:  # games and positions in flight: the latest report of each worker
            if "inflight/stream" in s:  # by worker: a worker's new life (a new stream) replaces its old one's
                worker = s.get("inflight/worker", s["inflight/stream"])
                known = self.inflight.get(worker)
                if known is None or s["inflight/stream"] >= known[0]:
                    self.inflight[worker] = (s["inflight/stream"], s["inflight/games"], s["inflight/positions"])
            if self.startup is not None and STARTUP_KEYS[-1] in s:  # the first worker's first step
                assert self.reporter is not None
                self.startup.update({k: s[k] for k in STARTUP_KEYS})
                timings = startup_timings(self.startup)
                self.reporter.line(f"start-up timings (s): {json.dumps(timings)}", console=False)
                self.reporter.line(startup_line(timings, self.resume_from is not None))
                self.startup = None
        stats = [{k: v for k, v in s.items() if not k.startswith(("inflight/", "startup/"))} for s in stats]
        if stats:
            summary = summarise_worker_stats(stats)
            self.c.games += int(summary.get("count/games", 0))
            self.c.positions += int(summary.get("count/positions", 0))
            for k, v in summary.items():
                if k.startswith("count/"):
                    self.c.counters[k] = self.c.counters.get(k, 0.0) + v
                else:
                    add(k, v, step)
            for k, v in selfplay_scalars(self.c.counters, self.c.games, self.c.positions).items():
                add(k, v, step)
        if games:
            path = self.run_dir / "games" / "selfplay.ptn"
            with open(path, "a") as f:
                for g in games:
                    f.write(g.rstrip() + "\n\n")
            log_sample_game(self.scalars.writer, "selfplay", games[-1], step, pictured=self.pictured)

    def _load_carried(self) -> Any:
        """The games the last stop left in play (``UNFINISHED_GAMES``, a
        ``selfplay.UnfinishedGames``), None when there are none. A file that cannot be read is
        set aside as ``<name>.rejected`` with a line (the run goes on without those games)."""
        from takzero.pipeline.selfplay import UnfinishedGames

        path = self.run_dir / UNFINISHED_GAMES
        if not path.exists():
            return None
        try:
            games = UnfinishedGames.load(path, self.cfg.board.size)
        except (OSError, ValueError) as e:
            try:
                kept = f"the file is now {set_aside(path).name}"
            except OSError as moved:
                kept = f"it could not be set aside ({moved.strerror or moved})"
            note = f"{path.name} cannot be read ({e}): the games in play at the last stop are not continued ({kept})"
            self.carried_notes.append(note)
            log.warning("%s", note)
            return None
        return games if games.games else None

    def _keep_carried(self) -> None:
        """After the workers' stop: write the games they left in play, and the carried ones no
        worker took, to ``UNFINISHED_GAMES`` for the next start (the counts of ``self.kept``
        follow: a failed write moves them to the dropped ones, with a line)."""
        import ray

        from takzero.pipeline.selfplay import UnfinishedGames

        assert self.pool is not None and self.kept is not None and self.reporter is not None
        parts = [self.pool.carried] if self.pool.carried is not None else []
        try:
            left = ray.get(self.coordinator.carried_left.remote(), timeout=30)
        except Exception:  # noqa: BLE001 - a lost coordinator: its games are gone with it
            left = None
        if left is not None:
            parts.append(left)
            self.kept["stored_games"] += left.games
            self.kept["stored_positions"] += left.positions
        games = UnfinishedGames.concat(parts)
        if not games.games:
            return
        path = self.run_dir / UNFINISHED_GAMES
        try:
            games.save(path)
        except OSError as e:
            self.kept["unfinished_games"] += self.kept["stored_games"]
            self.kept["unfinished_positions"] += self.kept["stored_positions"]
            self.kept["stored_games"] = self.kept["stored_positions"] = 0
            self.reporter.line(f"self-play: the {games.games} game(s) in play could not be kept "
                               f"({path}: {e.strerror or e}): dropped")
