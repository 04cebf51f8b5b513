"""Reanalyse (MuZero Reanalyse; Schrittwieser et al. 2021, "Online and Offline Reinforcement
Learning by Planning with a Learned Model"): a worker re-searches positions sampled from the replay
buffer with the latest network and refreshes their stored policy target (and ``search_value``, the
root value that ``replay.reanalyse_value_weight`` blends into the value target) in place.

On with ``replay.reanalyse_fraction`` > 0 (default 0: no worker, nothing changes). The rate is
kept by the replay buffer (``ReplayBuffer.reanalyse_take``): positions handed out for Reanalyse
<= ``reanalyse_fraction`` x the samples the trainer drew, over the whole run, and within one
``replay.reanalyse_batch`` of it while the worker keeps up (a slower worker refreshes less; the
``reanalyse/per_sample`` scalar shows how much). E.g. 0.5 = one position refreshed per two
positions trained on.

Each batch of ``replay.reanalyse_batch`` positions is one search of a
:class:`~takzero.search.BatchedMCTS` of that many slots through
:class:`~takzero.search.driver.SearchDriver` (one network call per search step for all of them,
as in self-play), with the self-play search settings (``TrainConfig.selfplay_search_config``:
root noise as in self-play) and the budget of a full search (``mcts.full_sims`` with the playout
cap, else ``mcts.simulations``; the playout cap does not apply: every reanalysed target is a
training target). Each position's search takes its random stream from the seed the buffer drew
for it (the buffer's reanalyse stream is saved in every checkpoint), so the refreshed target is
the one a search of that position alone, with that seed and network, gives. The policy target is
read as in self-play (``BatchedMCTS.policy_target``, sparsified by ``replay.sparse_targets``).

Python here works per batch and per position (reset, read-out), never per node.

The Ray side (:class:`ReanalyseActor`, started by the run; :class:`ReanalyseWorker` holds it)
takes the latest weights from the coordinator once a second, like a self-play actor; it takes no
Ray CPU slot (like the evaluator), so it never waits for one, and shares the cores with
self-play; it goes where self-play may go (``ray.selfplay_resources``). Its counters (positions
handed out, refreshes applied, refreshes dropped because the record left the window meanwhile)
and its random stream live in the replay buffer and its checkpoint entry, so they continue after
a resume; batches in flight when a run stops count as handed out and are never applied.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import torch

from takzero.config import TrainConfig
from takzero.pipeline.replay import ReanalyseJob, ReanalyseRefresh, sparse_targets, unpack_states
from takzero.search import BatchedMCTS
from takzero.search.driver import SearchDriver
from takzero.search.limit import Limit

log = logging.getLogger(__name__)

__all__ = ["Reanalyser", "ReanalyseActor", "ReanalyseWorker", "reanalyse_simulations"]


def reanalyse_simulations(cfg: TrainConfig) -> int:
    """Simulations of one Reanalyse search: a full self-play search (``mcts.full_sims`` with the
    playout cap on, else ``mcts.simulations``)."""
    sc = cfg.selfplay_search_config()
    return int(sc.full_simulations if sc.playout_cap else sc.simulations)


class Reanalyser:
    """Searches :class:`~takzero.pipeline.replay.ReanalyseJob` batches with an evaluator (no Ray).

    Args:
        cfg: the run's config (board size, ``mcts.*``, ``replay.top_k``, ``replay.reanalyse_batch``).
        evaluator: ``evaluate(states (L, STATE_LEN) int64) -> (priors (L, A), values (L,), wdl)``;
            replaced by :meth:`set_evaluator` (new weights).

    Attributes:
        searched: positions searched so far by this object.
    """

    def __init__(self, cfg: TrainConfig, evaluator: Any) -> None:
        self.size = cfg.board.size
        self.top_k = cfg.replay.top_k
        self.batch = cfg.replay.reanalyse_batch
        self.simulations = reanalyse_simulations(cfg)
        self.mcts = BatchedMCTS(self.batch, self.size, cfg.selfplay_search_config(), seed=0)
        self.driver = SearchDriver(self.mcts, evaluator)
        self.searched = 0

    def set_evaluator(self, evaluator: Any) -> None:
        """Search with ``evaluator`` from the next batch on."""
        self.driver.evaluator = evaluator

    def refresh(self, job: ReanalyseJob) -> ReanalyseRefresh:
        """Search every position of ``job`` (at most ``replay.reanalyse_batch``) in one batched
        search and return their new targets (policy target (n, top_k), root value (n,), valid:
        False for a position the search cannot play on, e.g. one at the ply limit).

        Raises ValueError for a job larger than the batch."""
        n = len(job)
        if n > self.batch:
            raise ValueError(f"a job of {n} positions for a batch of {self.batch}")
        mcts = self.mcts
        states = unpack_states(job.board, self.size)
        for i in range(n):
            mcts.reset(i, states[i], seed=int(job.seeds[i]))
        for i in range(n, self.batch):
            mcts.free(i)
        active = mcts.active_games()
        if active.size:
            self.driver.run(active, Limit(nodes=self.simulations))
        actions: list[np.ndarray] = []
        probs: list[np.ndarray] = []
        value = np.zeros(n, np.float32)
        valid = np.zeros(n, np.bool_)
        valid[active] = True
        for g in active:
            out = self.driver.outcome(int(g), policy=True, choose=False)
            assert out.policy_actions is not None and out.policy_probs is not None  # policy=True
            actions.append(out.policy_actions)
            probs.append(out.policy_probs)
            value[g] = out.value
        index = np.full((n, self.top_k), -1, np.int32)
        prob = np.zeros((n, self.top_k), np.float16)
        if active.size:
            index[active], prob[active] = sparse_targets(actions, probs, self.top_k)
        self.searched += int(active.size)
        return ReanalyseRefresh(
            position=job.position, game_id=job.game_id, ply=job.ply,
            policy_index=index, policy_prob=prob, value=value, valid=valid,
        )


class ReanalyseActor:
    """Ray actor around :class:`Reanalyser`: takes a batch from the replay actor whenever the
    budget allows, searches it with the latest weights, hands the refresh back; stops when the
    coordinator says so. It reads and writes no file."""

    def __init__(self, cfg: TrainConfig) -> None:
        torch.set_num_threads(cfg.selfplay.threads)
        self.cfg = cfg

    def run(self, coordinator: Any, replay: Any) -> int:
        """Reanalyse until the coordinator says stop; returns the positions this process searched.
        Its network: its own, or with ``replay.reanalyse_inference`` resolving to server
        (``inference_server.uses_server``) the run's first inference server's: the self-play
        network there when that is the latest (``selfplay.use_latest``: its batches join the
        workers'), else each latest generation pinned there by number (the one before unpinned)."""
        import ray

        from takzero.pipeline.inference_server import RemoteEvaluator, server_for

        server = server_for(self.cfg, coordinator, "reanalyse")
        evaluator: Any = None
        if server is None:
            from takzero.nn.inference import Evaluator
            from takzero.nn.model import TakNet

            evaluator = Evaluator(TakNet(self.cfg.model_config()), device=self.cfg.device)
        elif self.cfg.selfplay.use_latest:  # the server's own network is the latest: share its batches
            evaluator = RemoteEvaluator(server[0], self.cfg.board.size, name=server[1])
        # (pinned: the worker is built with its first network)
        worker = None if evaluator is None else Reanalyser(self.cfg, evaluator)
        generation = -1
        last_check = 0.0
        while True:
            now = time.monotonic()
            if now - last_check > 1.0 or generation < 0:
                last_check = now
                stop, w = ray.get(coordinator.exchange.remote("latest", generation))
                if stop:
                    return 0 if worker is None else worker.searched
                if w is not None:
                    generation = w[0]
                    if server is None:
                        evaluator.load_state_dict(ray.get(w[1][0]))
                    elif not self.cfg.selfplay.use_latest:  # the latest generation, pinned by number
                        if evaluator is not None:
                            evaluator.release()
                        evaluator = RemoteEvaluator(server[0], self.cfg.board.size, name=server[1],
                                                    pin=(generation, w[1][0]))
                        if worker is None:
                            worker = Reanalyser(self.cfg, evaluator)
                        else:
                            worker.set_evaluator(evaluator)
            if generation < 0 or worker is None:
                time.sleep(0.2)
                continue
            job = ray.get(replay.reanalyse_take.remote(worker.batch))
            if job is None:  # the budget (or the window) is not there yet
                time.sleep(0.2)
                continue
            ray.get(replay.reanalyse_apply.remote(worker.refresh(job)))


class ReanalyseWorker:
    """Driver side of the Reanalyse actor: started with the run's other actors when
    ``replay.reanalyse_fraction`` > 0 (:meth:`start` returns None otherwise). Ray restarts an
    actor whose process died and retries its task; one that Ray gave up on is replaced
    (:meth:`check`), as a self-play worker is."""

    def __init__(self, cfg: TrainConfig, options: dict[str, Any], coordinator: Any, replay: Any) -> None:
        import ray

        self.cfg = cfg
        # Any: Ray's stubs type the methods of its actor handles as plain functions (no .remote)
        self.cls: Any = ray.remote(ReanalyseActor).options(**{**options, "num_cpus": 0})
        self.coordinator = coordinator
        self.replay = replay
        self.replaced = 0
        self._launch()

    def _launch(self) -> None:
        self.actor = self.cls.remote(self.cfg)
        self.task = self.actor.run.remote(self.coordinator, self.replay)

    @classmethod
    def start(cls, cfg: TrainConfig, options: dict[str, Any], coordinator: Any, replay: Any) -> ReanalyseWorker | None:
        """Start the actor with self-play's placement ``options`` (its CPU slot dropped: see the
        module docstring), or None with Reanalyse off."""
        if cfg.replay.reanalyse_fraction <= 0:
            return None
        return cls(cfg, options, coordinator, replay)

    def check(self) -> None:
        """Raise the error of a task that failed in takzero's code; replace an actor that is gone
        for good. Never waits."""
        from takzero.pipeline.supervision import replace_lost

        def relaunch(_: int) -> Any:
            self.replaced += 1
            self._launch()
            return self.task

        tasks = [self.task]
        replace_lost(tasks, relaunch, "reanalyse worker")
        self.task = tasks[0]

    def finish(self, timeout_s: float = 60.0) -> None:
        """After the coordinator's stop: wait up to ``timeout_s`` for the task, then kill the actor."""
        import ray

        ray.wait([self.task], timeout=timeout_s)
        ray.kill(self.actor)


def reanalyse_counts(replay_state: dict[str, Any]) -> dict[str, int]:
    """Reanalyse's counters from a replay buffer's ``state_dict`` (a checkpoint's ``"replay"``
    entry): ``issued``, ``applied``, ``dropped`` and the trainer's ``sampled``; zeros for a
    checkpoint from before Reanalyse."""
    ra = replay_state.get("reanalyse") or {}
    return {"issued": int(ra.get("issued", 0)), "applied": int(ra.get("applied", 0)),
            "dropped": int(ra.get("dropped", 0)), "sampled": int(replay_state.get("total_sampled", 0))}


def reanalyse_text(counts: dict[str, int], fraction: float) -> str:
    """The summary's Reanalyse line: ``'reanalyse: 5120 targets refreshed, 64 dropped (left the
    window), 5248 positions handed out = 0.499 per trainer sample (replay.reanalyse_fraction=0.5)'``;
    "" with Reanalyse off."""
    if fraction <= 0:
        return ""
    per = counts["issued"] / max(counts["sampled"], 1)
    return (f"reanalyse: {counts['applied']} targets refreshed, {counts['dropped']} dropped (left "
            f"the window), {counts['issued']} positions handed out = {per:.3f} per trainer sample "
            f"(replay.reanalyse_fraction={fraction:g})")
