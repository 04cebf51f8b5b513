"""The evaluator and Reanalyse through the inference server (``evaluator.inference``,
``replay.reanalyse_inference``; takzero/pipeline/inference_server.py): the keys and their rule
(auto follows ``selfplay.inference``), networks pinned on the server by generation beside the
self-play one, the gating and baseline matches and Reanalyse's refreshed targets through the
server equal to those of the local networks (same weights, same seeds: the pinned networks run
torch float32 on a CPU server, as the local ones), a restarted or replaced server, and a smoke
run with self-play, gating and Reanalyse all through the server."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from smoke_config import smoke_config

from takzero.config import ConfigError, load_config
from takzero.game.core import num_actions
from takzero.nn.features import random_states
from takzero.nn.inference import Evaluator
from takzero.nn.model import TakNet
from takzero.pipeline.inference_server import (
    PINNED_MAX,
    InferenceServer,
    unpack_priors,
    uses_server,
)


def _cfg(selfplay: str = "server", **sections):
    raw = {
        "board": {"size": 4, "komi": 0.0}, "model": {"channels": 8, "blocks": 1},
        "mcts": {"simulations": 8}, "device": "cpu",
        "selfplay": {"games_per_worker": 4, "ply_limit": 40, "backend": "torch", "inference": selfplay},
        "evaluator": {"games": 4, "baseline_games": 2, "baselines": ["random"], "simulations": 8,
                      "tactics_every": 0},
        "replay": {"top_k": 64, "reanalyse_fraction": 0.5, "reanalyse_batch": 16},
    }
    for name, values in sections.items():
        raw[name] = {**raw.get(name, {}), **values}
    return load_config(raw)


def _weights(cfg, seed: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return TakNet(cfg.model_config()).state_dict()


def _local(cfg, weights) -> Evaluator:
    net = TakNet(cfg.model_config())
    net.load_state_dict(weights)
    return Evaluator(net, device="cpu")


def test_the_keys_follow_selfplay_inference_unless_set_and_server_needs_the_server() -> None:
    assert uses_server(_cfg("server"), "evaluator") and uses_server(_cfg("server"), "reanalyse")
    assert not uses_server(_cfg("local"), "evaluator") and not uses_server(_cfg("local"), "reanalyse")
    assert not uses_server(_cfg("server", evaluator={"inference": "local"}), "evaluator")
    assert not uses_server(_cfg("server", replay={"reanalyse_inference": "local"}), "reanalyse")
    assert uses_server(_cfg("server", evaluator={"inference": "server"}), "evaluator")
    with pytest.raises(ValueError, match="role"):
        uses_server(_cfg(), "trainer")
    for section, key in (("evaluator", "inference"), ("replay", "reanalyse_inference")):
        with pytest.raises(ConfigError, match=f"{section}.{key}.*selfplay.inference=server"):
            _cfg("local", **{section: {key: "server"}})
        with pytest.raises(ConfigError, match=f"{section}.{key}.*auto, local or server"):
            _cfg("server", **{section: {key: "gpu"}})


@pytest.mark.timeout(120)
def test_pinned_networks_answer_as_their_own_weights_beside_the_selfplay_one() -> None:
    """In process: each pinned generation answers as a local evaluator of its weights; one not
    pinned answers None; a second pin of a generation loads nothing; the least recently used
    pin goes past PINNED_MAX; unpin drops one; the self-play network is not touched."""
    cfg = _cfg()
    server = InferenceServer(cfg, clients=1)
    states = random_states(4, 12, seed=3)
    weights = {g: _weights(cfg, g) for g in (3, 5)}
    assert server.evaluate_pinned(states, 3) is None
    assert server.pin(3, weights[3]) and server.pin(5, weights[5]) and not server.pin(3, weights[3])
    for g in (3, 5):
        packed, values, wdl, gen = server.evaluate_pinned(states, g)
        want = _local(cfg, weights[g]).evaluate(states)
        np.testing.assert_array_equal(unpack_priors(states, packed, num_actions(4)), want[0])
        np.testing.assert_array_equal(values, want[1])
        np.testing.assert_array_equal(wdl, want[2])
        assert gen == g
    assert server.pins == [3, 5] and server.pinned() == [3, 5] and server.generation == -1
    assert server.evaluate_pinned(states, 3) is not None  # 3 used last: 5 is the oldest now
    for g in range(10, 10 + PINNED_MAX - 1):
        server.pin(g, weights[5])
    assert 5 not in server.pinned() and 3 in server.pinned() and len(server.pinned()) == PINNED_MAX
    assert server.evaluate_pinned(states, 5) is None
    assert server.unpin(3) and not server.unpin(3) and server.evaluate_pinned(states, 3) is None
    assert server.info()["pins"][:2] == [3, 5]
    server.batcher.close()
    for g in server.pinned():
        server.unpin(g)


# -- over Ray ---------------------------------------------------------------------------------


@pytest.fixture
def ray_session():
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def _without_seconds(matches: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if k != "seconds"} for m in matches]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gating_and_reanalyse_through_the_server_equal_the_local_path(ray_session) -> None:
    """The evaluator actor with ``selfplay.inference: server`` plays, through the run's server
    (candidate and incumbent pinned there by generation), the very games of a local
    GatingEvaluator with the same weights and seed; a Reanalyse search through a pinned network
    refreshes the targets of a local one. A server killed (Ray restarts it) loses its pins: the
    client pins again and gets the same answer; one gone for good is replaced by
    ``InferenceServers.check`` under its name."""
    ray = ray_session
    from test_reanalyse import _buffer, _records

    from takzero.pipeline.actors import Coordinator
    from takzero.pipeline.evaluator_actor import EvaluatorActor
    from takzero.pipeline.gating import GatingEvaluator
    from takzero.pipeline.inference_server import InferenceServers, RemoteEvaluator, server_for
    from takzero.pipeline.reanalyse import Reanalyser

    cfg = _cfg()
    w1, w2 = _weights(cfg, 1), _weights(cfg, 2)
    local = GatingEvaluator(cfg).evaluate((2, w2), (1, w1), play_baselines=True, seed=7)

    coordinator = ray.remote(Coordinator).remote()
    servers = InferenceServers(cfg, coordinator)
    ray.get(coordinator.publish.remote("promoted", 1, [ray.put(w1)]))
    actor = ray.remote(EvaluatorActor).remote(cfg, {}, coordinator)
    remote = ray.get(actor.evaluate.remote(2, ray.put(w2), 1, ray.put(w1), True, seed=7), timeout=600)
    assert remote["ptn"] == local["ptn"] and remote["decision"] == local["decision"]
    assert _without_seconds(remote["matches"]) == _without_seconds(local["matches"])
    assert remote["scalars"]["gating/score_vs_incumbent"] == local["scalars"]["gating/score_vs_incumbent"]
    info = servers.info()[0]
    assert info is not None and info["pins"] == [2, 1]  # candidate, incumbent: each pinned once
    assert sum(info["pinned_batches"].values()) > 0

    # Reanalyse: a pinned network's refresh is the local network's
    buf = _buffer()
    buf.add(_records(30, seed=4), games=30)
    for _ in range(2):
        buf.sample(32)
    job = buf.reanalyse_take(16)
    assert job is not None
    server = server_for(cfg, coordinator, "reanalyse")
    assert server is not None
    pinned = RemoteEvaluator(server[0], 4, name=server[1], pin=(9, w2))
    a = Reanalyser(cfg, _local(cfg, w2)).refresh(job)
    b = Reanalyser(cfg, pinned).refresh(job)
    for field in ("policy_index", "policy_prob", "value", "valid"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert pinned.pins == 1 and pinned.generation == 9

    # a killed server comes back without its pins: the client pins again
    states = random_states(4, 6, seed=8)
    before = pinned.evaluate(states)
    pid = info["pid"]
    ray.kill(servers.servers[0], no_restart=False)
    # The kill is asynchronous: a call made before it lands reaches the old process. The wait is
    # generous (it was 30 s): on a loaded machine a new actor process takes long to import torch.
    end = time.monotonic() + 300
    while (servers.info()[0] or {}).get("pid") in (None, pid) and time.monotonic() < end:
        time.sleep(0.1)
    after = pinned.evaluate(states)
    assert pinned.pins == 2 and (servers.info()[0] or {}).get("pid") != pid
    for x, y in zip(before, after, strict=True):
        np.testing.assert_array_equal(x, y)
    # one gone for good: replaced under its name, found again by the client
    ray.kill(servers.servers[0], no_restart=True)
    end = time.monotonic() + 300  # (it was 20 s)
    while not servers.check() and time.monotonic() < end:
        ray.wait([servers.tasks[0]], timeout=0.2)
    assert servers.replaced == 1
    again = pinned.evaluate(states)
    np.testing.assert_array_equal(again[1], before[1])
    assert pinned.pins == 3
    ray.get(coordinator.stop.remote())
    servers.finish()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_smoke_run_with_selfplay_gating_and_reanalyse_through_the_server(tmp_path, monkeypatch) -> None:
    """``python -m takzero.train +config=smoke`` with ``selfplay.inference=server`` and
    Reanalyse on (the evaluator and Reanalyse follow: ``auto``) finishes: its evaluations
    report their matches, Reanalyse refreshed targets, and the server pinned the evaluator's
    generations (its self-play network served the workers and, with ``selfplay.use_latest``,
    Reanalyse)."""
    import ray

    from takzero.pipeline import inference_server
    from takzero.pipeline.run import run_training

    finished: list = []
    real_finish = inference_server.InferenceServers.finish

    def finish(self, timeout_s: float = 10.0):
        out = real_finish(self, timeout_s)
        finished.extend(out)
        return out

    monkeypatch.setattr(inference_server.InferenceServers, "finish", finish)
    cfg = smoke_config(tmp_path, "srv", **{
        "selfplay.inference": "server", "selfplay.use_latest": True, "replay.reanalyse_fraction": 0.5,
        "replay.reanalyse_batch": 16, "ray.num_cpus": 2, "evaluator.baseline_every": 1,
    })
    assert uses_server(cfg, "evaluator") and uses_server(cfg, "reanalyse")
    try:
        run_dir = run_training(cfg, command="python -m takzero.train +config=smoke")
    finally:
        ray.shutdown()
    log = (run_dir / "train.log").read_text()
    assert "evaluation: gen" in log, log[-3000:]
    assert "targets refreshed" in log, log[-3000:]
    refreshed = int(log.split("reanalyse: ")[-1].split(" targets refreshed")[0])
    assert refreshed > 0
    assert finished and finished[0]["pins"] and finished[0]["batches"] > 0, finished
