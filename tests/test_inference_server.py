"""The inference server (``selfplay.inference: server``, takzero/pipeline/inference_server.py):
the batcher answers every caller its own rows of one shared batch within the latency bound; a
worker searching through it plays the games of a worker with its own network (the same records,
given an evaluator whose output does not depend on the batch); over Ray, a new generation's
weights reach the server once, the workers read none, and a killed server is restarted while the
workers go on."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from takzero.config import ConfigError, load_config
from takzero.game.core import num_actions
from takzero.nn.features import random_states
from takzero.pipeline.batcher import Batcher, BatcherClient
from takzero.pipeline.inference_server import InferenceServer, pack_priors, unpack_priors
from takzero.search.evaluators import HashEvaluator
from tests.processes import wait_for

RECORD_FIELDS = ("board", "policy_index", "policy_prob", "value", "flat_diff", "game_id", "generation",
                 "ply", "ownership", "end_ply", "own_valid")


class Recording:
    """An evaluator that records its batch sizes; ``gate`` (when set) holds its first call until
    released."""

    def __init__(self, inner, gate: threading.Event | None = None) -> None:
        self.inner = inner
        self.sizes: list[int] = []
        self.gate = gate
        self.entered = threading.Event()

    def evaluate(self, states):
        self.entered.set()
        if self.gate is not None and len(self.sizes) == 0:
            assert self.gate.wait(30)
        self.sizes.append(len(states))
        return self.inner.evaluate(states)


def _states(n: int, seed: int) -> np.ndarray:
    return random_states(4, n, seed=seed, min_plies=2, max_plies=12)


@pytest.mark.timeout(60)
def test_the_batcher_answers_each_caller_its_rows_of_one_batch() -> None:
    """Six threads at once: one evaluator call (the batch is full when the last one arrives, the
    long wait never ends it), and each caller gets exactly what its own call would return."""
    ev = HashEvaluator(4, seed=3)
    rec = Recording(ev)
    sizes = [1, 5, 3, 8, 2, 4]
    batcher = Batcher(rec.evaluate, max_batch=sum(sizes), max_wait_s=600.0)
    inputs = [_states(n, seed=i) for i, n in enumerate(sizes)]
    answers: list = [None] * len(sizes)

    def call(i: int) -> None:
        answers[i] = BatcherClient(batcher, 4).evaluate(inputs[i])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(sizes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    batcher.close()
    assert rec.sizes == [sum(sizes)]
    assert (batcher.batches, batcher.requests, batcher.positions, batcher.largest) == (1, 6, 23, 23)
    for states, got in zip(inputs, answers, strict=True):
        want = ev.evaluate(states)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.timeout(60)
def test_the_batcher_keeps_to_max_batch_and_runs_a_large_request_alone() -> None:
    """While the network is busy requests queue; then they go in arrival order, as many whole
    requests as fit in max_batch, and one larger than max_batch alone (never split)."""
    gate = threading.Event()
    rec = Recording(HashEvaluator(4), gate)
    batcher = Batcher(rec.evaluate, max_batch=6, max_wait_s=0.0)
    first = batcher.submit(_states(1, 0))
    assert rec.entered.wait(30)  # the first batch holds the network
    futures = [batcher.submit(_states(n, 10 + i)) for i, n in enumerate([3, 3, 3, 10, 2])]
    gate.set()
    first.result(30)
    outs = [f.result(30) for f in futures]
    batcher.close()
    assert rec.sizes == [1, 6, 3, 10, 2]
    assert [len(o[0]) for o in outs] == [3, 3, 3, 10, 2]


@pytest.mark.timeout(60)
def test_the_latency_bound_runs_a_lone_request() -> None:
    """A request that no other joins is run once it has waited max_wait_s (not held until the
    batch is full); so is a request of one position with no wait at all."""
    for wait in (0.05, 0.0):
        batcher = Batcher(HashEvaluator(4).evaluate, max_batch=10_000, max_wait_s=wait)
        priors, values, wdl = batcher.submit(_states(3, 1)).result(30)
        batcher.close()
        assert priors.shape[0] == values.shape[0] == wdl.shape[0] == 3
        assert batcher.batches == 1


@pytest.mark.timeout(60)
def test_a_batch_with_a_request_of_every_caller_waits_no_longer() -> None:
    """With the callers known, the batch runs once each has a request in it, long before the
    (here endless) wait; a lone caller never waits."""
    rec = Recording(HashEvaluator(4))
    batcher = Batcher(rec.evaluate, max_batch=10_000, max_wait_s=600.0, callers=2)
    a, b = batcher.submit(_states(2, 0)), batcher.submit(_states(3, 1))
    assert len(a.result(30)[0]) == 2 and len(b.result(30)[0]) == 3
    batcher.close()
    assert rec.sizes == [5]
    lone = Batcher(HashEvaluator(4).evaluate, max_batch=10_000, max_wait_s=600.0, callers=1)
    assert len(lone.submit(_states(1, 2)).result(30)[0]) == 1
    lone.close()


@pytest.mark.timeout(60)
def test_an_evaluator_error_reaches_every_caller_of_its_batch_and_the_batcher_goes_on() -> None:
    calls = {"n": 0}
    ev = HashEvaluator(4)

    def flaky(states):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("network failed")
        return ev.evaluate(states)

    gate = threading.Event()
    holder = Recording(type("E", (), {"evaluate": staticmethod(flaky)})(), gate)
    batcher = Batcher(holder.evaluate, max_batch=100, max_wait_s=0.0)
    a = batcher.submit(_states(2, 0))
    assert holder.entered.wait(30)
    gate.set()
    with pytest.raises(RuntimeError, match="network failed"):
        a.result(30)
    b = batcher.submit(_states(2, 1))
    assert len(b.result(30)[0]) == 2
    batcher.close()


def test_priors_travel_packed_and_come_back_exactly() -> None:
    """Only the legal moves' priors travel (the answer of a 6x6 batch shrinks ~100 times); put
    back they are the evaluator's priors bit for bit, and a packing that does not fit the
    positions is refused."""
    for size in (4, 6):
        states = random_states(size, 12, seed=size, min_plies=2, max_plies=30)
        priors = HashEvaluator(size, seed=1).evaluate(states)[0]
        packed = pack_priors(states, priors)
        assert packed.nbytes * 20 < priors.nbytes
        np.testing.assert_array_equal(unpack_priors(states, packed, num_actions(size)), priors)
        with pytest.raises(ValueError, match="legal moves"):
            unpack_priors(states, packed[:-1], num_actions(size))


def test_bad_input_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        Batcher(HashEvaluator(4).evaluate, max_batch=0, max_wait_s=0.0)
    with pytest.raises(ValueError, match="max_wait_s"):
        Batcher(HashEvaluator(4).evaluate, max_batch=1, max_wait_s=float("nan"))
    batcher = Batcher(HashEvaluator(4).evaluate, max_batch=8, max_wait_s=0.0)
    with pytest.raises(ValueError, match="int64"):
        batcher.submit(np.zeros((2, 3), np.int64))
    with pytest.raises(ValueError, match="int64"):
        batcher.submit(_states(2, 0).astype(np.int32))
    batcher.close()
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit(_states(1, 0))
    for key, value in (("inference", "gpu"), ("server_max_batch", 0), ("server_max_wait_ms", -1.0),
                       ("server_max_wait_ms", float("inf"))):
        with pytest.raises(ConfigError, match=f"selfplay.{key}"):
            load_config({"selfplay": {key: value, "backend": "torch"}})


def _cfg(**selfplay):
    return load_config({
        "board": {"size": 4, "komi": 0.0}, "model": {"channels": 8, "blocks": 1},
        "mcts": {"simulations": 8}, "device": "cpu",
        "selfplay": {"games_per_worker": 6, "backend": "torch", **selfplay},
    })


def _play(worker, steps: int):
    parts, stats = [], []
    for _ in range(steps):
        recs, st, _ = worker.play_step()
        stats.append(st)
        if recs is not None:
            parts.append(recs)
    return parts, stats


def _same_records(a, b) -> None:
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        for name in RECORD_FIELDS:
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)


@pytest.mark.timeout(300)
def test_workers_sharing_a_batcher_play_the_games_of_workers_with_their_own_network() -> None:
    """Two workers on two threads search through one batcher (their leaves mixed in shared
    batches, two halves of each worker's games in flight): each plays, record for record, the
    games of a worker with its own evaluator, plain and pipelined alike; counters and statistics
    are the same in kind. The remote worker has no network and refuses weights."""
    from takzero.pipeline.selfplay import SelfPlayWorker

    local = []
    for wid in (0, 1):
        worker = SelfPlayWorker.from_run(_cfg(), worker_id=wid, device="cpu")
        worker.driver.evaluator = HashEvaluator(4, seed=5)
        local.append(_play(worker, 50))

    rec = Recording(HashEvaluator(4, seed=5))
    batcher = Batcher(rec.evaluate, max_batch=64, max_wait_s=0.002)
    remote: list = [None, None]
    workers = [SelfPlayWorker.from_run(_cfg(inference="server"), worker_id=wid, device="cpu",
                                       evaluator=BatcherClient(batcher, 4)) for wid in (0, 1)]

    def play(wid: int) -> None:
        remote[wid] = _play(workers[wid], 50)

    threads = [threading.Thread(target=play, args=(w,)) for w in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    batcher.close()
    for wid in (0, 1):
        _same_records(local[wid][0], remote[wid][0])
        for s_local, s_remote in zip(local[wid][1], remote[wid][1], strict=True):
            assert s_local.keys() == s_remote.keys()
            for k in s_local:
                if k.startswith("count/"):
                    assert s_local[k] == s_remote[k], k
    assert workers[0].driver.pipelined and workers[0].remote and workers[0]._torch_evaluator is None
    assert batcher.requests > batcher.batches  # the two workers' halves shared batches
    with pytest.raises(RuntimeError, match="inference server"):
        workers[0].set_weights({}, 1)


@pytest.mark.timeout(120)
def test_the_server_runs_the_network_of_the_weights_it_loaded_once_each() -> None:
    """In-process (no Ray): the server's answers are those of an evaluator with the weights it
    loaded, stamped with their generation; each load is counted once."""
    import torch

    from takzero.nn.inference import Evaluator
    from takzero.nn.model import TakNet

    cfg = _cfg()
    server = InferenceServer(cfg, clients=2)
    assert server.backend == "torch" and server.metadata()["size"] == 4
    states = _states(9, 4)
    for generation in (0, 1):
        torch.manual_seed(generation)
        net = TakNet(cfg.model_config())
        server.load(net.state_dict(), generation)
        packed, values, wdl, gen = server.evaluate(states)
        priors = unpack_priors(states, packed, num_actions(4))
        want = Evaluator(net, device="cpu").evaluate(states)
        np.testing.assert_allclose(priors, want[0], atol=1e-6)
        np.testing.assert_allclose(values, want[1], atol=1e-6)
        assert gen == generation
    info = server.info()
    assert info["loads"] == [0, 1] and info["generation"] == 1 and info["batches"] == 2
    server.batcher.close()


@pytest.mark.timeout(60)
def test_the_server_waits_for_its_first_weights() -> None:
    server = InferenceServer(_cfg(), evaluator=HashEvaluator(4))
    out: list = []
    t = threading.Thread(target=lambda: out.append(server.evaluate(_states(2, 0))))
    t.start()
    time.sleep(0.3)
    assert not out  # no weights, no answer
    server.load(None, 7)
    t.join(30)
    assert out and out[0][3] == 7
    server.batcher.close()


# -- over Ray ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_worker_through_the_ray_server_plays_the_local_games(ray_session) -> None:
    """The RemoteEvaluator over a Ray server actor (serving a batch-independent evaluator): the
    worker plays the records of a worker with its own evaluator, with the server's generation."""
    ray = ray_session
    from takzero.pipeline.actors import Coordinator
    from takzero.pipeline.inference_server import InferenceServers, RemoteEvaluator
    from takzero.pipeline.selfplay import SelfPlayWorker

    cfg = _cfg(inference="server")
    coordinator = ray.remote(Coordinator).remote()
    servers = InferenceServers(cfg, coordinator, evaluator=HashEvaluator(4, seed=5))
    ray.get(coordinator.publish.remote("promoted", 3, [ray.put({})]))
    handle, name = servers.for_worker(0)
    remote = SelfPlayWorker.from_run(cfg, worker_id=0, device="cpu",
                                     evaluator=RemoteEvaluator(handle, 4, name=name))
    local = SelfPlayWorker.from_run(_cfg(), worker_id=0, device="cpu")
    local.driver.evaluator = HashEvaluator(4, seed=5)
    a, _ = _play(local, 40)
    b, _ = _play(remote, 40)
    local_gen = a[0].generation.copy()
    for x in a:
        x.generation[:] = 3  # the local worker took no weights (generation 0); the server's are 3
    _same_records(a, b)
    assert (local_gen == 0).all()
    ray.get(coordinator.stop.remote())
    info = servers.finish()
    assert info and info[0]["loads"] == [3]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_server_workers_take_each_generation_once_and_survive_a_killed_server(ray_session) -> None:
    """Two self-play actors on one server (a real network): they play and hand in games as
    local workers do (the same statistics), each new generation is loaded by the server once
    (the workers read no weights), and a server killed mid-run is restarted by Ray (it takes the
    current weights again, once) while the workers go on handing in games."""
    ray = ray_session
    from takzero.config import ReplayConfig
    from takzero.nn.model import TakNet
    from takzero.pipeline.actors import Coordinator, ReplayActor, SelfPlayPool
    from takzero.pipeline.inference_server import InferenceServers
    from takzero.pipeline.placement import selfplay_options

    cfg = load_config({
        "board": {"size": 4, "komi": 0.0}, "model": {"channels": 8, "blocks": 1},
        "mcts": {"simulations": 4}, "device": "cpu",
        "selfplay": {"workers": 2, "games_per_worker": 4, "ply_limit": 24, "backend": "torch",
                     "inference": "server"},
    })
    coordinator = ray.remote(Coordinator).remote()
    replay = ray.remote(ReplayActor).remote(ReplayConfig(top_k=64, min_positions=10, max_ahead=10**6), 4)
    servers = InferenceServers(cfg, coordinator)
    assert len(servers.servers) == 1 and servers.clients == [2]
    pool = SelfPlayPool(cfg, selfplay_options({}, 0.0), coordinator, replay, servers)
    net = TakNet(cfg.model_config())
    ray.get(coordinator.publish.remote("promoted", 0, [ray.put(net.state_dict())]))
    stats: list[dict] = []

    def drained_generation(g: int) -> bool:
        stats.extend(ray.get(replay.drain.remote())[0])
        return any(s.get("selfplay/generation") == g and s.get("count/games", 0) > 0 for s in stats)

    assert wait_for(lambda: drained_generation(0), 300)
    ray.get(coordinator.publish.remote("promoted", 1, [ray.put(TakNet(cfg.model_config()).state_dict())]))
    assert wait_for(lambda: drained_generation(1), 300)
    info = servers.info()[0]
    assert info is not None and info["loads"] == [0, 1] and info["batches"] > 0
    step_keys = {k for s in stats if "count/moves" in s for k in s}
    assert {"count/games", "count/positions", "selfplay/generation", "selfplay/mean_batch_size",
            "inflight/stream"} <= step_keys

    ray.kill(servers.servers[0], no_restart=False)  # the process dies; Ray restarts it
    assert wait_for(lambda: (servers.info(timeout=5)[0] or {}).get("pid") not in (None, info["pid"]), 300)
    before = ray.get(replay.stats.remote())["replay/total_added"]
    assert wait_for(lambda: ray.get(replay.stats.remote())["replay/total_added"] > before, 300)
    after = servers.info()[0]
    assert after is not None and after["loads"] == [1]  # the current weights, once
    assert pool.check() == [] and servers.check() == []  # nobody gave up: no replacement
    ray.get(coordinator.stop.remote())
    totals = pool.finish()
    assert totals["games"] > 0
    assert servers.finish()[0]["loads"] == [1]
