"""The inference server of self-play (``selfplay.inference: server``): one Ray actor per device
owns the self-play network and evaluates the leaf batches of many self-play workers as one
network call, as KataGo's and Leela Chess Zero's servers batch the requests of their search
threads.

Pieces, from the bottom:

* :class:`~takzero.pipeline.batcher.Batcher` (``pipeline/batcher.py``, plain Python, no Ray):
  the requests of many threads gathered into one network call, under a latency bound; every
  caller gets exactly what a call of its own would have returned.
* :class:`InferenceServer`: the actor (a threaded Ray actor: each ``evaluate`` call waits on
  its own thread while the batcher's thread runs the network). It builds its network as a
  self-play worker does (``Evaluator`` on ``device``, bf16 autocast on CUDA with
  ``selfplay.bf16``; on CPU the runtime of ``selfplay.backend``: torch, onnx, int8 calibrated on
  the newest positions it served, or auto). Its :meth:`InferenceServer.run` task asks the
  coordinator once a poll (0.5 s) for newer weights and loads a new generation once
  (``Coordinator.exchange``, the call the workers make), so the weights reach the server, not
  every worker; a restarted server takes the current weights the same way.
* :class:`RemoteEvaluator`: what a self-play worker searches with instead of a network (the
  ``Evaluator`` interface: ``evaluate(states) -> (priors (L, A) float32, values (L,) float32,
  wdl (L, 3) float32)``, ``size``, ``num_actions``, ``metadata``), plus ``generation``: the
  generation of the weights that gave its last answer (the worker records it with its
  positions). The priors travel packed (:func:`pack_priors`: the legal moves' entries only,
  about 1% of a 6x6 row of 9,036 actions), so an answer stays small enough for Ray to send
  inline rather than through the object store. A call to a server that died is retried (Ray retries
  it on the restarted actor,
  ``max_task_retries=-1``; one dead for good is looked up again by its name, which its
  replacement takes) for up to ``retry_s`` seconds.
* :class:`InferenceServers` (driver side): the run's servers, one per GPU of the cluster (one in
  all without GPUs), worker ``i`` served by server ``i % n``; replaces a server Ray gave up on
  and stops them at the end.

A worker whose evaluator is remote always searches its games in two halves
(``BatchedMCTS.run(pipelined=True)``, as ``selfplay.pipeline``): one half is selected and
expanded while the other half's batch is at the server. The games are the same as with a local
network of the same weights, given a network whose output does not depend on the batch
(``tests/test_inference_server.py``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from takzero.config import TrainConfig
from takzero.game.core import STATE_LEN, num_actions
from takzero.pipeline.batcher import Batcher

log = logging.getLogger(__name__)

#: Seconds between the server's questions to the coordinator for newer weights.
WEIGHTS_POLL_S = 0.5

#: Positions of the int8 calibration ring of a server (its newest served positions).
RING = 512

#: Pinned networks a server keeps at most (the evaluator's candidate, incumbent and ladder rungs,
#: Reanalyse's latest generation); the least recently used one goes first (a client whose
#: network went re-pins it: :meth:`RemoteEvaluator.evaluate`).
PINNED_MAX = 6

#: Roles of a run that may search through the server besides self-play.
ROLES = ("evaluator", "reanalyse")


def uses_server(cfg: TrainConfig, role: str) -> bool:
    """Whether ``role`` ('evaluator': the gating and baseline matches and the tactics curve;
    'reanalyse') searches through the run's inference server: its key (``evaluator.inference``,
    ``replay.reanalyse_inference``) is ``server``, or ``auto`` with ``selfplay.inference: server``.
    Raises ValueError for another role."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got '{role}'")
    key = cfg.evaluator.inference if role == "evaluator" else cfg.replay.reanalyse_inference
    return key == "server" or (key == "auto" and cfg.selfplay.inference == "server")


def pack_priors(states: np.ndarray, priors: np.ndarray) -> np.ndarray:
    """The entries of ``priors`` (L, A) at the legal moves of ``states`` (L, STATE_LEN) int64,
    row by row in action order: (K,) float32, K the legal moves of all rows."""
    from takzero.nn.actions import legal_mask

    mask = legal_mask(states, np.zeros(priors.shape, np.bool_))
    return np.ascontiguousarray(priors[mask], dtype=np.float32)


def unpack_priors(states: np.ndarray, packed: np.ndarray, actions: int) -> np.ndarray:
    """(L, ``actions``) float32 priors from :func:`pack_priors`'s ``packed``: the legal moves'
    entries put back, 0 elsewhere (where a network's priors are 0 anyway, and which the search
    never reads). Raises ValueError when ``packed`` does not fit the legal moves of ``states``."""
    from takzero.nn.actions import legal_mask

    mask = legal_mask(states, np.zeros((len(states), actions), np.bool_))
    if int(mask.sum()) != len(packed):
        raise ValueError(f"{len(packed)} packed priors for {int(mask.sum())} legal moves")
    dense = np.zeros((len(states), actions), np.float32)
    dense[mask] = packed
    return dense


class InferenceServer:
    """The network of many self-play workers (see the module docstring); a Ray actor with
    ``ray.remote(InferenceServer).options(**server_options(...))``.

    Args:
        cfg: the run's config (``model``, ``device``, ``selfplay``: ``bf16``, ``backend``,
            ``threads``, ``use_latest``, ``server_max_batch``, ``server_max_wait_ms``).
        index: the server's number.
        clients: workers it serves (its CPU threads: ``clients * selfplay.threads``, at most the
            machine's cores).
        device: the network's device (default ``cfg.device``).
        evaluator: for tests: serve this evaluator (``evaluate(states)``) instead of a network;
            weights are then only counted.
    """

    def __init__(self, cfg: TrainConfig, index: int = 0, clients: int = 1, device: str | None = None,
                 evaluator: Any = None) -> None:
        import torch

        self.started_at = time.time()
        sp = cfg.selfplay
        self.cfg = cfg
        self.index = index
        self.kind = "latest" if sp.use_latest else "promoted"
        self.threads = max(1, min(os.cpu_count() or 1, clients * sp.threads))
        torch.set_num_threads(self.threads)
        self.generation = -1
        #: the generations loaded, in order (one entry per generation: the test of "once")
        self.loads: list[int] = []
        self._ready = threading.Event()
        self._lock = threading.Lock()  # the network: a batch or a weights swap, not both
        self._recent = np.zeros((RING, STATE_LEN), np.int64)  # newest served positions (int8)
        self._recent_count = 0
        self.quantize_seconds = 0.0
        self._torch: Any = None
        self._device = device or cfg.device
        #: pinned networks by generation (least recently used first), and the pins made, in order
        self._pinned: OrderedDict[int, Batcher] = OrderedDict()
        self._pin_lock = threading.Lock()
        self.pins: list[int] = []
        self._given = evaluator
        if evaluator is not None:
            self.backend = "given"
            self.evaluator = evaluator
            self._metadata: dict[str, Any] = {"size": cfg.board.size}
        else:
            from takzero.nn.backends import choose_backend
            from takzero.nn.inference import Evaluator
            from takzero.nn.model import TakNet

            self._torch = Evaluator(TakNet(cfg.model_config()), device=self._device, bf16=sp.bf16)
            self._metadata = dict(self._torch.metadata)
            backend = sp.backend
            if self._torch.device.type != "cpu" or backend == "torch":
                backend = "torch"
            elif backend == "auto":
                batch = max(1, min(sp.server_max_batch, clients * max(1, sp.games_per_worker // 2)))
                backend = choose_backend(self._torch.model, batch, self.threads)
            self.backend = backend
            self.evaluator = self._torch
            self._rebuild()
        self.batcher = Batcher(self._run_batch, sp.server_max_batch, sp.server_max_wait_ms / 1000.0,
                               name=f"takzero-inference-{index}", callers=clients)

    # -- the network --------------------------------------------------------------------------

    def _rebuild(self) -> None:
        """``self.evaluator`` for the current weights in the server's runtime (under the lock
        or before the batcher starts)."""
        from takzero.nn.backends import onnx_evaluator, quantize

        if self.backend == "onnx":
            self.evaluator = onnx_evaluator(self._torch.model, threads=self.threads)
        elif self.backend == "int8":
            n = min(self._recent_count, RING)
            states = self._recent[:n].copy() if n >= 64 else None  # None: its own policy's games
            self.evaluator, self.quantize_seconds = quantize(self._torch, states, threads=self.threads,
                                                             seed=self.index)
        else:
            self.evaluator = self._torch

    def load(self, state_dict: dict[str, Any] | None, generation: int) -> None:
        """Take the weights of ``generation`` (between two batches); the first ones open the
        server (``evaluate`` waits for them)."""
        with self._lock:
            if self._torch is not None and state_dict is not None:
                self._torch.load_state_dict(state_dict)
                self._rebuild()
            self.generation = int(generation)
            self.loads.append(int(generation))
        self._ready.set()

    def _run_batch(self, states: np.ndarray) -> tuple[np.ndarray, ...]:
        """The batcher's call: (priors, values, wdl, the generation per row)."""
        with self._lock:
            priors, values, wdl = self.evaluator.evaluate(states)
            generation = self.generation
        n = len(states)
        if self.backend == "int8" and n:  # the newest positions: the next generation's calibration
            k = min(n, RING)
            at = (self._recent_count + np.arange(k)) % RING
            self._recent[at] = states[-k:]
            self._recent_count += k
        return priors, values, wdl, np.full(n, generation, np.int64)

    # -- pinned networks (the evaluator's, Reanalyse's) -----------------------------------------

    def pin(self, generation: int, state_dict: dict[str, Any] | None) -> bool:
        """Keep a network of ``generation``'s weights ``state_dict`` (a Ray caller passes the
        ObjectRef itself: Ray resolves it here) beside the self-play one, for
        :meth:`evaluate_pinned`; its runtime is torch (bf16 autocast on CUDA with
        ``selfplay.bf16``, float32 on the CPU: the local evaluator's numbers there), its batches
        its own. At most :data:`PINNED_MAX` are kept (least recently used out). Returns False
        when ``generation`` was pinned already (nothing loaded)."""
        generation = int(generation)
        with self._pin_lock:
            if generation in self._pinned:
                self._pinned.move_to_end(generation)
                return False
        if self._given is not None:  # tests: the given evaluator serves every generation
            run = self._given.evaluate
        else:
            from takzero.nn.inference import Evaluator
            from takzero.nn.model import TakNet

            model = TakNet(self.cfg.model_config())
            model.load_state_dict(state_dict or {})
            run = Evaluator(model, device=self._device, bf16=self.cfg.selfplay.bf16).evaluate
        sp = self.cfg.selfplay
        batcher = Batcher(run, sp.server_max_batch, sp.server_max_wait_ms / 1000.0,
                          name=f"takzero-inference-{self.index}-gen{generation}", callers=1)
        gone: list[Batcher] = []
        with self._pin_lock:
            old = self._pinned.pop(generation, None)
            if old is not None:
                gone.append(old)  # pinned meanwhile by another caller: the newer copy serves
            self._pinned[generation] = batcher
            self.pins.append(generation)
            while len(self._pinned) > PINNED_MAX:
                gone.append(self._pinned.popitem(last=False)[1])
        for b in gone:
            b.close()
        return True

    def unpin(self, generation: int) -> bool:
        """Drop the pinned network of ``generation`` (a request in flight is answered first);
        False when it was not pinned."""
        with self._pin_lock:
            batcher = self._pinned.pop(int(generation), None)
        if batcher is None:
            return False
        batcher.close()
        return True

    def pinned(self) -> list[int]:
        """The generations pinned now, least recently used first."""
        with self._pin_lock:
            return list(self._pinned)

    def evaluate_pinned(self, states: np.ndarray, generation: int
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
        """:meth:`evaluate` with the pinned network of ``generation``; None when that is not
        pinned (never, since a restart, or dropped): the caller pins it and asks again."""
        with self._pin_lock:
            batcher = self._pinned.get(int(generation))
            if batcher is not None:
                self._pinned.move_to_end(int(generation))
        if batcher is None:
            return None
        try:
            priors, values, wdl = batcher.evaluate(states)[:3]
        except RuntimeError as e:  # dropped between the lookup and the call
            if "closed" not in str(e):
                raise
            return None
        states = np.asarray(states).reshape(len(values), STATE_LEN)
        return pack_priors(states, priors), values, wdl, int(generation)

    # -- Ray methods --------------------------------------------------------------------------

    def evaluate(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """(packed priors (K,) float32 (:func:`pack_priors`), values (L,) float32, wdl (L, 3)
        float32, generation) of ``states`` (L, STATE_LEN) int64, evaluated in a batch with other
        callers' positions; waits for the first weights. Raises ValueError for bad states."""
        while not self._ready.wait(1.0):
            pass
        priors, values, wdl, gens = self.batcher.evaluate(states)
        states = np.asarray(states).reshape(len(values), STATE_LEN)
        return pack_priors(states, priors), values, wdl, int(gens[0]) if len(gens) else self.generation

    def run(self, coordinator: Any, poll_s: float = WEIGHTS_POLL_S) -> dict[str, Any]:
        """Load each new generation of the ``selfplay.use_latest`` kind from the coordinator
        (one object-store read each) until it says stop; returns :meth:`info`. Ray retries this
        task on a restarted server, which so takes the current weights again."""
        import ray

        while True:
            stop, w = ray.get(coordinator.exchange.remote(self.kind, self.generation))
            if w is not None:
                self.load(ray.get(w[1][0]), w[0])
            if stop:
                return self.info()
            time.sleep(poll_s)

    def metadata(self) -> dict[str, Any]:
        """The network's metadata (``Evaluator.metadata``)."""
        return dict(self._metadata)

    def info(self) -> dict[str, Any]:
        """What the server did: its process id, start time, generation and the generations it
        loaded, its runtime, threads, the batcher's counts, and the pinned networks: 'pins'
        (each pin made, in order), 'pinned' (those kept now) and their batches."""
        b = self.batcher
        return {
            "pid": os.getpid(), "index": self.index, "started_at": self.started_at,
            "generation": self.generation, "loads": list(self.loads), "backend": self.backend,
            "device": str(self._torch.device) if self._torch is not None else "cpu",
            "threads": self.threads, "batches": b.batches, "requests": b.requests,
            "positions": b.positions, "largest_batch": b.largest, "mean_batch": b.mean_batch,
            "quantize_seconds": self.quantize_seconds, "pins": list(self.pins), "pinned": self.pinned(),
            "pinned_batches": {g: b.batches for g, b in list(self._pinned.items())},
        }


class RemoteEvaluator:
    """An evaluator whose network is an :class:`InferenceServer` (see the module docstring):
    the self-play network, or with ``pin`` a network of given weights pinned on the server.

    Args:
        server: the server's Ray actor handle.
        size: the board size.
        name: the server's actor name, looked up again when the actor is gone for good.
        retry_s: how long a call keeps retrying a server that is down before it raises.
        pin: ``(generation, weights)``: search with these weights (a state dict, or the
            ObjectRef of one) rather than the self-play network; they are pinned on the server
            at the first call (:meth:`InferenceServer.pin`) and again whenever the server lost
            them (a restart, or :data:`PINNED_MAX` newer pins); :meth:`release` unpins them.
    """

    def __init__(self, server: Any, size: int, name: str | None = None, retry_s: float = 600.0,
                 pin: tuple[int, Any] | None = None) -> None:
        self.server = server
        self.name = name
        self.size = int(size)
        self.num_actions = num_actions(self.size)
        self.retry_s = float(retry_s)
        self.pin = None if pin is None else (int(pin[0]), pin[1])
        #: the generation of the weights of the last answer (-1 before any)
        self.generation = -1
        #: calls answered, calls repeated because the server was down, pins made
        self.calls = 0
        self.retries = 0
        self.pins = 0
        self._metadata: dict[str, Any] | None = None
        self._ref: Any = None  # the pinned weights in the object store (put once)

    @property
    def metadata(self) -> dict[str, Any]:
        """The server network's metadata (asked once)."""
        if self._metadata is None:
            self._metadata = self._call(lambda s: s.metadata.remote())
        return self._metadata

    def evaluate(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(priors (L, A) float32, values (L,) float32, wdl (L, 3) float32) of ``states``
        (L, STATE_LEN) int64 (values and wdl may be read-only). Raises ray.exceptions.RayActorError when the
        server stays down for ``retry_s`` seconds, the server's ValueError for bad states, and
        RuntimeError when pinned weights do not stay on the server (pinned again 3 times)."""
        states = np.ascontiguousarray(states)
        if states.ndim == 1:
            states = states[None]
        if self.pin is None:
            packed, values, wdl, generation = self._call(lambda s: s.evaluate.remote(states))
        else:
            generation = self.pin[0]
            for _ in range(4):
                out = self._call(lambda s: s.evaluate_pinned.remote(states, generation))
                if out is not None:
                    break
                self._pin_weights()
            else:
                raise RuntimeError(f"the inference server did not keep the pinned generation {generation}")
            packed, values, wdl, generation = out
        self.generation = int(generation)
        self.calls += 1
        return unpack_priors(states, packed, self.num_actions), values, wdl

    def _pin_weights(self) -> None:
        import ray

        assert self.pin is not None
        generation, weights = self.pin
        if self._ref is None:
            self._ref = weights if isinstance(weights, ray.ObjectRef) else ray.put(weights)
        ref = self._ref
        self._call(lambda s: s.pin.remote(generation, ref))  # Ray hands the server the weights
        self.pins += 1

    def release(self) -> None:
        """Unpin this evaluator's weights on the server (nothing for the self-play network; a
        server that is down is not waited for)."""
        if self.pin is None or self.pins == 0:
            return
        self.server.unpin.remote(self.pin[0])

    def _call(self, send: Callable[[Any], Any]) -> Any:
        import ray
        from ray.exceptions import RayActorError

        give_up: float | None = None
        while True:
            try:
                return ray.get(send(self.server))
            except RayActorError:
                now = time.monotonic()
                give_up = give_up if give_up is not None else now + self.retry_s
                if now > give_up:
                    raise
                self.retries += 1
                time.sleep(0.5)
                if self.name is not None:
                    try:
                        self.server = ray.get_actor(self.name)
                    except ValueError:  # not (yet) replaced
                        pass


def server_for(cfg: TrainConfig, coordinator: Any, role: str) -> tuple[Any, str] | None:
    """(actor handle, name) of the inference server that ``role`` (:data:`ROLES`) searches
    through (:func:`uses_server`), found by the names the run's :class:`InferenceServers` gave
    the coordinator (``Coordinator.server_names``): the evaluator the last server, Reanalyse the
    first; None when the role searches locally. Raises RuntimeError when it should use a server
    but the run has none."""
    import ray

    if not uses_server(cfg, role):
        return None
    names = ray.get(coordinator.server_names.remote())
    if not names:
        raise RuntimeError(f"{role} searches through the inference server, but the run started none")
    name = names[-1] if role == "evaluator" else names[0]
    return ray.get_actor(name), name


def server_count(cfg: TrainConfig, gpus: float) -> int:
    """Inference servers of a run: one per GPU of the cluster when the network runs on GPUs
    (``device`` not ``cpu``), else one; never more than ``selfplay.workers``."""
    n = int(gpus) if cfg.device != "cpu" and gpus >= 1 else 1
    return max(1, min(n, cfg.selfplay.workers))


def server_options(cfg: TrainConfig, name: str, clients: int, gpu: bool) -> dict[str, Any]:
    """Ray actor options of an inference server: named ``name`` (workers look it up again after
    a replacement), threads for each client's two requests in flight, its weights task and the
    evaluator's and Reanalyse's calls, one
    GPU when ``gpu``, no CPU reserved (its network takes the CPU time the workers' own networks
    would have taken), the ``ray.selfplay_resources``; restarted without limit, with its calls
    retried on the new process."""
    opts: dict[str, Any] = {
        "name": name,
        "num_cpus": 0,
        "num_gpus": 1 if gpu else 0,
        "max_restarts": -1,
        "max_task_retries": -1,
        "max_concurrency": 2 * max(1, clients) + 8,  # + the evaluator's, Reanalyse's and pins
    }
    resources = cfg.ray.selfplay_resources or {}
    if resources:
        opts["resources"] = dict(resources)
    return opts


class InferenceServers:
    """The run's inference servers (driver side; see the module docstring).

    Args:
        cfg: the run's config.
        coordinator: the coordinator actor (the servers' weights).
        gpus: GPUs of the cluster (``placement.cluster_gpus``).
        evaluator: for tests, served instead of a network (:class:`InferenceServer`).
    """

    def __init__(self, cfg: TrainConfig, coordinator: Any, gpus: float = 0.0, evaluator: Any = None) -> None:
        import ray

        self.cfg = cfg
        self.coordinator = coordinator
        self.evaluator = evaluator
        n = server_count(cfg, gpus)
        self.gpu = cfg.device != "cpu" and gpus >= 1
        token = uuid.uuid4().hex[:8]
        self.names = [f"takzero-inference-{token}-{i}" for i in range(n)]
        self.clients = [len(range(i, cfg.selfplay.workers, n)) for i in range(n)]
        # Any: Ray's stubs type the methods of its actor handles as plain functions (no .remote)
        self.cls: Any = ray.remote(InferenceServer)
        self.servers: list[Any] = []
        self.tasks: list[Any] = []
        self.replaced = 0
        for i in range(n):
            server, task = self._start(i)
            self.servers.append(server)
            self.tasks.append(task)
        coordinator.set_servers.remote(self.names)  # the evaluator and Reanalyse find them there

    def _start(self, i: int) -> tuple[Any, Any]:
        opts = server_options(self.cfg, self.names[i], self.clients[i], self.gpu)
        server = self.cls.options(**opts).remote(self.cfg, i, self.clients[i], evaluator=self.evaluator)
        return server, server.run.remote(self.coordinator)

    def for_worker(self, worker_id: int) -> tuple[Any, str]:
        """(actor handle, name) of the server of self-play worker ``worker_id``."""
        i = worker_id % len(self.servers)
        return self.servers[i], self.names[i]

    def check(self) -> list[int]:
        """Raise the error of a server task that failed in takzero's code; replace a server
        whose actor is gone for good (``supervision.replace_lost``; under the same name, so its
        workers find it). Never waits. Returns the indices replaced."""
        from takzero.pipeline.supervision import replace_lost

        def relaunch(i: int) -> Any:
            self.replaced += 1
            self.servers[i], task = self._start(i)
            return task

        return replace_lost(self.tasks, relaunch, "inference server")

    def info(self, timeout: float = 10.0) -> list[dict[str, Any] | None]:
        """Each server's :meth:`InferenceServer.info` (None for one that did not answer)."""
        import ray

        out: list[dict[str, Any] | None] = []
        for s in self.servers:
            try:
                out.append(ray.get(s.info.remote(), timeout=timeout))
            except Exception:  # noqa: BLE001 - a lost server has nothing to say
                out.append(None)
        return out

    def finish(self, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """After the coordinator's stop and the workers' end: the servers' final
        :meth:`InferenceServer.info` (those that answer within ``timeout_s``), then kill them."""
        import ray

        ready, _ = ray.wait(self.tasks, num_returns=len(self.tasks), timeout=timeout_s)
        out = []
        for t in ready:
            try:
                out.append(ray.get(t))
            except Exception:  # noqa: BLE001 - a server lost at the stop
                continue
        for s in self.servers:
            ray.kill(s)
        return out


__all__ = [
    "InferenceServer",
    "InferenceServers",
    "RemoteEvaluator",
    "unpack_priors",
    "pack_priors",
    "server_count",
    "server_for",
    "uses_server",
    "PINNED_MAX",
    "server_options",
]
