"""Reanalyse: targets refreshed from a given network (equal to a direct search of the position),
no position counted twice (refreshes replace targets; records that left the window are dropped),
the fraction respected over a run of trainer samples, counters and random stream kept by a
resume, the value blend, and the Ray actor refreshing a replay actor's records."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from smoke_config import smoke_config

from takzero.config import ReplayConfig
from takzero.game import Position, core
from takzero.pipeline.checkpoints import atomic_torch_save, load_checked
from takzero.pipeline.reanalyse import (
    Reanalyser,
    reanalyse_counts,
    reanalyse_simulations,
    reanalyse_text,
)
from takzero.pipeline.replay import (
    ReanalyseRefresh,
    Records,
    ReplayBuffer,
    pack_states,
    sparse_targets,
    unpack_states,
)
from takzero.pipeline.targets import TARGETS, TargetSettings, blend_value
from takzero.search import BatchedMCTS
from takzero.search.driver import SearchDriver
from takzero.search.evaluators import HashEvaluator
from takzero.search.limit import Limit

SIZE = 4


def _cfg(**overrides):
    return smoke_config(None, "reanalyse",
                        **{"replay.reanalyse_fraction": 0.5, "replay.reanalyse_batch": 16, **overrides})

def _records(n_games: int, seed: int, first_game: int = 0) -> Records:
    """Records of random games (every position of each, as self-play stores them) with a
    placeholder policy target (one action, probability 1) and value +-1."""
    rng = np.random.default_rng(seed)
    states, gids, plies, values = [], [], [], []
    for g in range(n_games):
        p = Position.start(SIZE, komi=0)
        for _ in range(int(rng.integers(4, 30))):
            moves = p.legal_move_codes()
            if p.is_over or len(moves) == 0:
                break
            states.append(p.state.copy())
            gids.append(first_game + g)
            plies.append(p.ply)
            values.append(1 if rng.random() < 0.5 else -1)
            core.make_move(p.state, int(rng.choice(moves)))
    n = len(states)
    idx = np.full((n, 64), -1, np.int32)
    idx[:, 0] = 0
    prob = np.zeros((n, 64), np.float16)
    prob[:, 0] = 1
    return Records(
        board=pack_states(np.stack(states), SIZE), policy_index=idx, policy_prob=prob,
        value=np.array(values, np.int8), flat_diff=np.zeros(n, np.int8),
        game_id=np.array(gids, np.int64), generation=np.zeros(n, np.int32), ply=np.array(plies, np.int16),
    )


def _buffer(fraction: float = 0.5, shard_dir: Path | None = None, **kw) -> ReplayBuffer:
    rcfg = ReplayConfig(**{"top_k": 64, "min_positions": 10, "samples_per_position": 100.0,
                           "reanalyse_fraction": fraction, **kw})
    return ReplayBuffer(rcfg, SIZE, shard_dir=shard_dir, seed=3)


def _fake_refresh(job) -> ReanalyseRefresh:
    """A refresh of ``job`` with a recognisable target (action 7, value 0.25)."""
    n = len(job)
    idx = np.full((n, 64), -1, np.int32)
    idx[:, 0] = 7
    prob = np.zeros((n, 64), np.float16)
    prob[:, 0] = 1
    return ReanalyseRefresh(job.position, job.game_id, job.ply, idx, prob,
                            np.full(n, 0.25, np.float32), np.ones(n, bool))


def test_refreshed_targets_equal_a_direct_search_with_that_network() -> None:
    """A fixed network (a deterministic evaluator): every refreshed record's policy target and
    search value are those of a search of that position alone, with that network, the self-play
    settings and the seed handed out; the records not handed out keep their targets."""
    cfg = _cfg()
    buf = _buffer()
    buf.add(_records(40, seed=1), games=40)
    before = buf.data.take(np.arange(len(buf.data)))  # a copy
    for _ in range(2):
        assert buf.sample(32) is not None  # 64 samples drawn: a budget of 32 positions
    job = buf.reanalyse_take(16)
    assert job is not None and len(set(job.position.tolist())) == 16
    net = HashEvaluator(SIZE, seed=11)
    refresh = Reanalyser(cfg, net).refresh(job)
    assert buf.reanalyse_apply(refresh) == (16, 0)
    sims = reanalyse_simulations(cfg)
    rows = job.position - (buf.total_added - len(buf.data))
    changed = 0
    for i, row in enumerate(rows):
        mcts = BatchedMCTS(1, SIZE, cfg.selfplay_search_config(), seed=0)
        mcts.reset(0, unpack_states(job.board[i : i + 1], SIZE)[0], seed=int(job.seeds[i]))
        driver = SearchDriver(mcts, net)
        driver.run([0], Limit(nodes=sims))
        out = driver.outcome(0, policy=True, choose=False)
        idx, prob = sparse_targets([out.policy_actions], [out.policy_probs], 64)
        np.testing.assert_array_equal(buf.data.policy_index[row], idx[0])
        np.testing.assert_array_equal(buf.data.policy_prob[row], prob[0])
        assert buf.data.search_value[row] == np.float16(out.value)
        changed += int(not np.array_equal(before.policy_index[row], idx[0]))
    assert changed >= 12  # the placeholder targets were replaced
    others = np.setdiff1d(np.arange(len(buf.data)), rows)
    np.testing.assert_array_equal(buf.data.policy_index[others], before.policy_index[others])
    assert np.isnan(buf.data.search_value[others].astype(np.float32)).all()


def test_value_target_blend() -> None:
    """z' = (1 - w) z + w v on reanalysed records, z elsewhere; w = 0 leaves the outcome."""
    z = np.array([1, -1, 0, 1], np.int8)
    v = np.array([0.5, np.nan, -0.5, np.nan], np.float16)
    np.testing.assert_allclose(blend_value(z, v, 0.25), [0.875, -1.0, -0.125, 1.0])
    np.testing.assert_array_equal(blend_value(z, v, 0.0), z.astype(np.float32))
    buf = _buffer(reanalyse_value_weight=0.5, fixed_window=10_000)
    buf.add(_records(30, seed=2), games=30)
    buf.sample(64)
    job = buf.reanalyse_take(16)
    buf.reanalyse_apply(_fake_refresh(job))
    rows = job.position - (buf.total_added - len(buf.data))
    z = buf.data.value.astype(np.float32)
    s = buf.sample(len(buf.data))  # enough draws to hit refreshed and plain records
    # the target the trainer's batch makes of the sampled records (pipeline.targets)
    value = TARGETS["value"].produce(s, SIZE, np.zeros(len(s), np.int64), TargetSettings.from_replay(buf.cfg))[0]
    hit = np.isin(np.arange(len(buf.data)), rows)
    got = {(int(g), int(p)): float(val) for g, p, val in zip(s.game_id, s.ply, value, strict=True)}
    for r in range(len(buf.data)):
        key = (int(buf.data.game_id[r]), int(buf.data.ply[r]))
        if key in got:
            want = 0.5 * z[r] + 0.5 * 0.25 if hit[r] else z[r]
            assert got[key] == pytest.approx(want)


def test_no_position_counted_twice() -> None:
    """Refreshes replace the targets of existing records: the record count, total_added, the
    games, the window and the identities of the records never change; positions of one batch
    are distinct; a record that left the window while it was searched is dropped."""
    buf = _buffer(fraction=4.0, fixed_window=200)
    buf.add(_records(40, seed=4), games=40)
    buf.sample(64)
    ident = (buf.data.game_id.copy(), buf.data.ply.copy(), buf.data.board.copy())
    counts = (len(buf.data), buf.total_added, buf.games_added, buf.window(), buf.sample_budget())
    for _ in range(8):
        job = buf.reanalyse_take(16)
        assert job is not None and len(np.unique(job.position)) == 16
        buf.reanalyse_apply(_fake_refresh(job))
    assert (len(buf.data), buf.total_added, buf.games_added, buf.window(), buf.sample_budget()) == counts
    for a, b in zip(ident, (buf.data.game_id, buf.data.ply, buf.data.board), strict=True):
        np.testing.assert_array_equal(a, b)
    assert buf.reanalyse_counters() == {"issued": 128, "applied": 128, "dropped": 0}
    # The window moves on while a batch is searched: its records that left it are dropped.
    job = buf.reanalyse_take(16)
    more = _records(10, seed=5, first_game=1000)
    buf.add(more, games=10)
    gone = int((job.position < buf.total_added - buf.window()).sum())
    assert 0 < gone < 16  # some of the batch left the window, some did not
    applied, dropped = buf.reanalyse_apply(_fake_refresh(job))
    assert (applied, dropped) == (16 - gone, gone)
    assert buf.total_added == counts[1] + len(more)
    rows = job.position - (buf.total_added - len(buf.data))
    kept = rows[job.position >= buf.total_added - buf.window()]
    assert (buf.data.policy_index[kept, 0] == 7).all()


@pytest.mark.parametrize(("fraction", "batch"), [(0.25, 16), (0.5, 32), (2.0, 8)])
def test_fraction_respected(fraction: float, batch: int) -> None:
    """Over N trainer samples the positions handed out stay at most fraction * N at every moment
    and end within one batch of it, with a worker that keeps up."""
    buf = _buffer(fraction=fraction)
    buf.add(_records(60, seed=6), games=60)
    n = 0
    for _ in range(50):
        assert buf.sample(48) is not None
        n += 48
        while (job := buf.reanalyse_take(batch)) is not None:
            buf.reanalyse_apply(_fake_refresh(job))
            assert buf.reanalyse_issued <= fraction * n
    issued = buf.reanalyse_counters()["issued"]
    assert fraction * n - batch < issued <= fraction * n
    assert buf.stats()["reanalyse/per_sample"] == pytest.approx(issued / n)
    assert _buffer(fraction=0.0).stats().keys().isdisjoint({"reanalyse/issued"})  # off: no scalars


def test_resume_keeps_counters_and_stream(tmp_path: Path) -> None:
    """The counters and the random stream go into the replay state of a checkpoint (written
    and read back weights-only); a buffer reloaded from it continues both: its next batch is the
    one the first buffer would have handed out."""
    shards = tmp_path / "replay"
    buf = _buffer(shard_dir=shards, shard_positions=50)
    buf.add(_records(40, seed=7), games=40)
    buf.sample(64)
    buf.sample(64)
    for _ in range(3):
        buf.reanalyse_apply(_fake_refresh(buf.reanalyse_take(16)))
    atomic_torch_save({"replay": buf.state_dict()}, tmp_path / "ckpt.pt")
    state = load_checked(tmp_path / "ckpt.pt", require_checksum=True)["replay"]
    again = _buffer(shard_dir=shards, shard_positions=50)
    again.load(state)
    assert again.reanalyse_counters() == buf.reanalyse_counters() == {"issued": 48, "applied": 48, "dropped": 0}
    assert reanalyse_counts(state) == {"issued": 48, "applied": 48, "dropped": 0, "sampled": 128}
    assert "48 targets refreshed" in reanalyse_text(reanalyse_counts(state), 0.5)
    a, b = buf.reanalyse_take(16), again.reanalyse_take(16)
    np.testing.assert_array_equal(a.position, b.position)
    np.testing.assert_array_equal(a.seeds, b.seeds)
    old = _buffer(shard_dir=shards, shard_positions=50)
    old.load({k: v for k, v in state.items() if k != "reanalyse"})  # a checkpoint from before
    assert old.reanalyse_counters() == {"issued": 0, "applied": 0, "dropped": 0}


@pytest.mark.slow  # a Ray instance with the actors
def test_reanalyse_actor_refreshes_the_replay_actor() -> None:
    """The Ray actor with the latest weights from the coordinator refreshes records of the
    replay actor at the configured rate and stops when told (num_cpus=2, no dashboard)."""
    import ray
    import torch

    from takzero.nn.model import TakNet
    from takzero.pipeline.actors import Coordinator, ReplayActor
    from takzero.pipeline.reanalyse import ReanalyseWorker

    cfg = _cfg(**{"replay.reanalyse_batch": 8, "mcts.simulations": 4, "device": "cpu"})
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        coordinator = ray.remote(Coordinator).remote()
        rcfg = ReplayConfig(top_k=64, min_positions=10, samples_per_position=100.0, reanalyse_fraction=0.5)
        replay = ray.remote(ReplayActor).remote(rcfg, SIZE)
        ray.get(replay.add.remote(_records(30, seed=8), 30))
        torch.manual_seed(0)
        state = TakNet(cfg.model_config()).state_dict()
        ray.get(coordinator.publish.remote("latest", 1, [ray.put(state)]))
        worker = ReanalyseWorker.start(cfg, {"num_cpus": 1}, coordinator, replay)
        assert worker is not None
        for _ in range(4):
            ray.get(replay.sample.remote(32))  # 128 samples: a budget of 64 positions
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            stats = ray.get(replay.stats.remote())
            if stats["reanalyse/applied"] >= 64:
                break
            worker.check()
            time.sleep(0.5)
        assert stats["reanalyse/applied"] == 64 and stats["reanalyse/issued"] == 64
        assert stats["replay/total_added"] == stats["replay/positions"]  # nothing added
        ray.get(coordinator.stop.remote())
        assert ray.get(worker.task, timeout=120) == 64
        worker.finish()
    finally:
        ray.shutdown()


def test_progress_field_and_summary_line(tmp_path: Path) -> None:
    """With Reanalyse on the progress line shows the refreshes so far (the first field a narrow
    bar drops) and the summary its line; off, neither."""
    import io

    from takzero.pipeline.progress import RunReporter, Snapshot, StopRule, fit_fields, summary_lines

    rep = RunReporter(tmp_path, StopRule(1000), Snapshot(0, 0, 0, 0, 0.0), bar=False, console=io.StringIO())
    on = Snapshot(10, 1, 5, 300, 1.0, reanalysed=1234)
    assert rep.progress_text(on).endswith("| reanalysed 1234")
    assert "reanalysed" not in rep.progress_text(Snapshot(10, 1, 5, 300, 1.0))
    fields = rep.progress_fields(on)  # (the rates in them move with the clock: fitted once)
    full = len(fit_fields(fields, list(rep.SHORTEN_ORDER), 10_000))
    assert "reanalysed" in fit_fields(fields, list(rep.SHORTEN_ORDER), full)
    assert "reanalysed" not in fit_fields(fields, list(rep.SHORTEN_ORDER), full - 1)
    text = reanalyse_text({"issued": 640, "applied": 600, "dropped": 8, "sampled": 1280}, 0.5)
    args = {"reason": "done", "run_dir": tmp_path, "snap": on, "best_generation": 1, "best_scores": {},
            "resume_cmd": "x", "finished": True}
    assert f"  {text}" in summary_lines(**args, reanalyse=text)
    assert text.startswith("reanalyse: 600 targets refreshed, 8 dropped") and "0.500 per trainer sample" in text
    assert not any("reanalyse" in line for line in summary_lines(**args))
    assert reanalyse_text({"issued": 0, "applied": 0, "dropped": 0, "sampled": 0}, 0.0) == ""
