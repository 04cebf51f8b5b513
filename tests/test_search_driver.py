"""The search front end (issue 29): ``Limit``, ``SearchDriver``, ``CachedEvaluator``, leaf
batching in the network player, batchable players, and the TEI ``Threads``/``Batch`` options."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from takzero.game import Position
from takzero.players import NetworkPlayer, RandomPlayer
from takzero.players.network import DEFAULT_LEAVES, MAX_LEAVES, auto_leaves, play_evaluator
from takzero.protocols.tei.lines import SearchLimits
from takzero.search import BatchedMCTS, HashEvaluator, SearchConfig
from takzero.search.driver import CachedEvaluator, SearchDriver
from takzero.search.limit import MIN_MOVE_SECONDS, Limit

MID_5 = "2,2,x2,1/2,1,x3/2,x2,1,x/x,1,x3/x5 1 5"


# -- Limit ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{"nodes": 0}, {"nodes": -3}, {"seconds": -1.0}, {"seconds": float("nan")},
     {"white_clock": float("inf")}, {"white_inc": -0.5}, {"overhead": float("nan")}],
)
def test_limit_rejects_bad_values(kwargs) -> None:
    with pytest.raises(ValueError, match="Limit"):
        Limit(**kwargs)


def test_limit_clock_rule_is_the_tei_engines() -> None:
    """One rule: the TEI ``go`` limits give the same budget as the Limit they convert to, and
    the rule is remaining/20 + 3/4 inc, at most half the clock, less the overhead, >= 5 ms."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        wt, bt = (int(x) for x in rng.integers(0, 300_000, 2))
        wi, bi = (int(x) for x in rng.integers(0, 5_000, 2))
        mt = int(rng.integers(1, 10_000)) if rng.random() < 0.5 else None
        ov = int(rng.integers(0, 200))
        go = SearchLimits(movetime=mt, wtime=wt, btime=bt, winc=wi, binc=bi)
        for side in (0, 1):
            rem, inc = (wt, wi) if side == 0 else (bt, bi)
            want = [min(rem / 20 + 0.75 * inc, rem / 2) - ov]
            if mt is not None:
                want.append(mt - ov)
            expect = max(MIN_MOVE_SECONDS * 1000, min(want)) / 1000
            assert go.budget_seconds(side, ov) == pytest.approx(expect)
            assert go.to_limit(ov).move_seconds(side) == pytest.approx(expect)
    assert Limit(nodes=5).move_seconds(0) is None
    assert Limit(seconds=2.0, infinite=True).move_seconds(1) is None
    assert Limit().unlimited and not Limit(stop=threading.Event()).unlimited


# -- SearchDriver ---------------------------------------------------------------------------


def _mcts(leaves: int = 1, games: int = 2, seed: int = 3) -> BatchedMCTS:
    cfg = SearchConfig(simulations=40, leaves_per_step=leaves).evaluation()
    mcts = BatchedMCTS(games, 5, cfg, seed=seed)
    for g in range(games):
        mcts.reset(g, Position.from_tps(MID_5).state)
    return mcts


def _visits(mcts: BatchedMCTS, g: int) -> list[int]:
    return mcts.root_visits(g)[1].tolist()


def test_driver_run_is_the_mcts_run_and_k1_is_exactly_one_leaf_per_call() -> None:
    ev = HashEvaluator(5, seed=1)
    a, b = _mcts(), _mcts()
    a.run(ev, simulations=40)
    SearchDriver(b, ev).run(limit=Limit(nodes=40))
    assert [_visits(a, g) for g in (0, 1)] == [_visits(b, g) for g in (0, 1)]
    # a tree built for up to 32 leaves per call searches exactly as a one-leaf tree at k = 1
    c = _mcts(leaves=32)
    stats = SearchDriver(c, ev).run(limit=Limit(nodes=40), leaves=1)
    assert [_visits(a, g) for g in (0, 1)] == [_visits(c, g) for g in (0, 1)]
    assert stats.leaves == stats.steps * 2  # one leaf per game per call
    with pytest.raises(ValueError, match="leaves must be in 1..32"):
        SearchDriver(c, ev).run(limit=Limit(nodes=8), leaves=33)
    with pytest.raises(ValueError, match="leaves must be in 1..1"):
        SearchDriver(_mcts(), ev).run(limit=Limit(nodes=8), leaves=2)


def test_driver_chunks_count_every_node_and_stop_on_time_and_flag() -> None:
    ev = HashEvaluator(5, seed=1)
    d = SearchDriver(_mcts(leaves=8, games=1), ev, chunk=16)
    chunks: list[int] = []
    d.run([0], Limit(nodes=300), leaves=8, chunked=True, on_chunk=lambda n, s: chunks.append(n))
    assert d.nodes(0) == d.outcome(0).nodes == 300 and chunks[-1] == 300
    assert chunks == sorted(chunks) and len(chunks) > 3  # chunks of max(16, 4 * 8) = 32
    t0 = time.perf_counter()
    d.run([0], Limit(seconds=0.2), leaves=8)
    took = time.perf_counter() - t0
    assert 0.05 < took < 1.5 and d.nodes(0) > 0
    stop = threading.Event()
    stop.set()
    fresh = SearchDriver(_mcts(leaves=8, games=1), ev, chunk=16)
    fresh.run([0], Limit(nodes=16), leaves=8)  # a fixed tree (the timed search above is not)
    st = fresh.run([0], Limit(stop=stop), leaves=8)
    assert st.steps == 1 and 1 <= st.leaves <= 8  # one network call, then the flag ends it
    out = d.outcome(0, policy=True)
    assert out.pv[0] == out.move and out.depth == len(out.pv)
    assert out.policy_actions is not None and out.policy_probs.sum() == pytest.approx(1.0, abs=1e-5)
    assert d.outcome(0, choose=False).move == -1


# -- CachedEvaluator ------------------------------------------------------------------------


def test_cached_evaluator_answers_as_the_network_and_counts_hits() -> None:
    ev = HashEvaluator(5, seed=4)
    assert CachedEvaluator(ev, 100).capacity == 128  # a power of two
    cache = CachedEvaluator(ev, 1 << 16)  # direct-mapped: room enough that these 21 never collide
    assert cache.size == 5  # attributes pass through
    pos = Position.from_tps(MID_5)
    states = np.stack([pos.state] + [pos.play(int(c)).state for c in pos.legal_move_codes()[:20]])
    p0, v0, w0 = ev.evaluate(states)
    p1, v1, w1 = cache.evaluate(states)
    assert cache.hits == 0 and cache.lookups == len(states)
    p2, v2, w2 = cache.evaluate(states[::-1].copy())
    assert cache.hits == len(states)
    for p, v, w in ((p1, v1, w1), (p2[::-1], v2[::-1], w2[::-1])):
        np.testing.assert_allclose(p, p0, atol=1e-3)  # float16 priors
        np.testing.assert_array_equal(v, v0)
        np.testing.assert_array_equal(w, w0)
    # the same stacks at another ply or komi are other network inputs: not a hit
    other = states.copy()
    other[:, 1] += 2
    cache.evaluate(other)
    assert cache.hits == len(states)
    cache.clear()
    cache.evaluate(states)
    assert cache.hits == len(states) and cache.hit_rate == pytest.approx(len(states) / (4 * len(states)))
    with pytest.raises(ValueError, match="capacity"):
        CachedEvaluator(ev, 0)


def test_a_cached_player_searches_as_the_uncached_one() -> None:
    pos = Position.from_tps(MID_5)
    moves = []
    for cache in (0, 4096):
        p = NetworkPlayer(HashEvaluator(5, seed=2), leaves=4, cache_size=cache, tinue_nodes=0)
        p.reset(5, 0)
        moves.append(p.think(pos, Limit(nodes=200)).code)
    assert moves[0] == moves[1]


# -- the network player ---------------------------------------------------------------------


def test_auto_leaves_follows_the_node_limit() -> None:
    assert auto_leaves(None) == DEFAULT_LEAVES
    assert auto_leaves(400) == 4 and auto_leaves(1600) == 16 and auto_leaves(150) == 1
    assert auto_leaves(10**6, most=8) == 8 and auto_leaves(1) == 1


def test_the_player_batches_leaves_and_k1_is_one_per_call() -> None:
    pos = Position.from_tps(MID_5)
    for leaves, lo, hi in ((1, 1.0, 1.0), (16, 8.0, 16.0)):
        p = NetworkPlayer(HashEvaluator(5, seed=2), leaves=leaves, tinue_nodes=0)
        p.reset(5, 0)
        pm = p.think(pos, Limit(nodes=2000))
        st = p._search.last_stats
        assert pm.nodes == 2000 and lo <= st.leaves / st.steps <= hi
    with pytest.raises(ValueError, match=f"1..{MAX_LEAVES}"):
        NetworkPlayer(HashEvaluator(5), leaves=MAX_LEAVES + 1)
    with pytest.raises(ValueError, match="cache_size"):
        NetworkPlayer(HashEvaluator(5), cache_size=-1)
    for bad in ({"leaves": 2.5}, {"leaves": True}, {"simulations": 2.5}, {"seconds": float("nan")},
                {"seconds": float("inf")}, {"tree_nodes": 10}, {"tree_nodes": -1}):
        with pytest.raises(ValueError):
            NetworkPlayer(HashEvaluator(5), **bad)
    with pytest.raises(ValueError, match="integer"):
        Limit(nodes=2.5)
    with pytest.raises(ValueError, match="integer"):
        Limit(nodes="3")
    assert Limit(nodes=np.int64(3)).nodes == 3


def test_a_full_tree_ends_a_timed_search_and_says_so() -> None:
    from takzero.game.core import num_actions

    p = NetworkPlayer(HashEvaluator(5, seed=2), tinue_nodes=0, tree_nodes=num_actions(5) * 20)
    p.reset(5, 0)
    pm = p.think(Position.from_tps(MID_5), Limit(nodes=100_000, seconds=20.0))
    assert pm.info.get("tree_full") is True and pm.nodes < 100_000
    # the full tree is not reused: the next search of the same position starts afresh and grows
    again = p.think(Position.from_tps(MID_5), Limit(nodes=200, seconds=20.0))
    assert again.nodes == 200 and "tree_full" not in again.info
    assert p._search.mcts.overflow(0) == 0  # a fresh tree (overflow counts since the slot's reset)
    small = NetworkPlayer(HashEvaluator(5, seed=2), tinue_nodes=0)
    small.reset(5, 0)
    assert "tree_full" not in small.think(Position.from_tps(MID_5), Limit(nodes=300, seconds=20.0)).info


def test_no_caller_outside_players_asks_for_the_network_players_class() -> None:
    root = Path(__file__).resolve().parent.parent / "takzero"
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.parent.name != "players" and "isinstance(" in path.read_text()
        and any("isinstance(" in line and "NetworkPlayer" in line for line in path.read_text().splitlines())
    ]
    assert offenders == []
    assert NetworkPlayer(HashEvaluator(5)).batchable and not RandomPlayer().batchable


def _checkpoint(tmp_path: Path) -> Path:
    import torch

    from takzero.nn.model import ModelConfig, TakNet

    torch.manual_seed(0)
    net = TakNet(ModelConfig(size=4, channels=8, blocks=1))
    path = tmp_path / "tiny.pt"
    torch.save({"model_config": net.config.to_dict(), "model_state": net.state_dict(), "half_komi": 2}, path)
    return path


def test_backend_onnx_runs_a_checkpoint_in_onnxruntime_and_threads_make_new_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``onnx``: float32 onnxruntime, a new session per thread count (two workers: ``threads //
    2`` each); ``auto`` (the default) quantizes a checkpoint to int8; TorchScript stays as is."""
    pytest.importorskip("onnxruntime")
    import takzero.nn.backends as backends

    seen: list[int] = []
    real = backends.onnx_evaluator
    monkeypatch.setattr(backends, "onnx_evaluator", lambda m, threads=1: seen.append(threads) or real(m, threads))
    path = _checkpoint(tmp_path)
    p = NetworkPlayer.load(str(path), simulations=8, threads=1, backend="onnx")
    assert seen == []  # built at the first search
    p.reset(4, 2)
    p.think(Position.start(4), Limit(nodes=8))
    assert seen == [1] and p.evaluator._session is not None
    assert p.model_half_komi == 2 and p.evaluator.metadata["half_komi"] == 2  # metadata kept
    p.set_pipeline(False)  # all threads to the network
    p.set_threads(2)
    p.think(Position.start(4), Limit(nodes=8))
    assert seen == [1, 2]
    p.set_pipeline(None)  # two threads: two workers, one network thread each
    p.think(Position.start(4), Limit(nodes=8))
    assert seen == [1, 2, 1] and p._search.driver.pipelined
    auto = NetworkPlayer.load(str(path), simulations=8)
    auto.reset(4, 2)
    auto.think(Position.start(4), Limit(nodes=8))
    assert auto.backend == "auto" and auto.evaluator.metadata["precision"] == "int8"
    torch_player = NetworkPlayer.load(str(path), simulations=8, backend="torch")
    assert getattr(torch_player.evaluator, "_session", None) is None
    with pytest.raises(ValueError, match="backend"):
        NetworkPlayer.load(str(path), backend="tpu")
    with pytest.raises(ValueError, match="threads"):
        p.set_threads(0)
    from takzero.nn.inference import Evaluator
    from takzero.nn.model_export import export_torchscript

    ts = tmp_path / "tiny.ts"
    export_torchscript(Evaluator.load(str(path)).model, ts)
    ev = Evaluator.load(str(ts))
    assert play_evaluator(ev, "auto") is ev  # a TorchScript export has no network to export


def test_tei_threads_and_batch_options_reach_the_network_player(tmp_path: Path) -> None:
    from takzero.protocols.tei.engine import TEIEngine

    lines: list[str] = []
    eng = TEIEngine(model=str(_checkpoint(tmp_path)), out=lines.append, threads=1)
    eng.handle("tei")
    assert "option name Threads type spin default 1 min 1 max 64" in lines
    assert "option name Batch type spin default 0 min 0 max 32" in lines
    eng.handle("setoption name Batch value 8")
    eng.handle("setoption name Threads value 2")
    assert eng.network.leaves == 8 and eng.network.threads == 2
    eng.handle("setoption name Batch value 0")
    assert eng.network.leaves is None
    eng.handle("setoption name Batch value 33")
    assert any("Batch must be an integer in 0..32" in ln for ln in lines) and eng.batch == 0
    eng.handle("setoption name Threads value 0")
    assert any("Threads must be an integer in 1..64" in ln for ln in lines) and eng.threads == 2
    from takzero.tei import _parse_args

    assert _parse_args(["--threads", "2"]).threads == 2
    with pytest.raises(SystemExit):
        _parse_args(["--threads", "65"])


def test_a_batched_side_with_k_leaves_plays_as_a_one_game_player_with_k() -> None:
    """bench_leaves.py's premise: a game of a batched side with leaves_per_step K searches as the
    one-game player with ``leaves=K`` at the same nodes (the other games do not matter)."""
    from takzero.matches.games import NetSide

    pos = Position.from_tps(MID_5)
    cfg = replace(SearchConfig(simulations=120).evaluation(), tinue_nodes=0)
    side = NetSide("k8", HashEvaluator(5, seed=9), replace(cfg, leaves_per_step=8), 120)
    batch = side.batched(3, seed=0)
    for g in range(3):
        batch.reset(g, pos)
    got = batch.choose_many([0, 1, 2], [pos] * 3, [10] * 3)
    visits = [_visits(batch.mcts, g) for g in range(3)]
    assert visits[0] == visits[1] == visits[2]
    p = NetworkPlayer(HashEvaluator(5, seed=9), config=cfg, leaves=8, tinue_nodes=0, simulations=120)
    p.reset(5, 0)
    pm = p.think(pos, Limit(nodes=120))
    assert pm.code == got[0].code
