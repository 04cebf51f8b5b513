"""Replay buffer: compact records, window, reuse cap, backpressure, shards and corrupt shards."""

from __future__ import annotations

import numpy as np
import pytest

from takzero.config import ReplayConfig
from takzero.game import Position, core
from takzero.pipeline.replay import (
    Records,
    ReplayBuffer,
    board_record_len,
    dense_policy,
    pack_states,
    sparse_policy,
    unpack_states,
)
from takzero.pipeline.targets import TARGETS, TargetSettings, discount_value


def _random_states(size: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = []
    pos = Position.start(size)
    for _ in range(n):
        p = pos.copy()
        for _ in range(int(rng.integers(0, 40))):
            moves = p.legal_move_codes()
            if len(moves) == 0:
                break
            core.make_move(p.state, int(rng.choice(moves)))
        if p.is_over:
            continue
        out.append(p.state)
    return np.stack(out)


@pytest.mark.parametrize("size", [3, 5, 6, 8])
def test_pack_unpack_round_trip(size: int) -> None:
    states = _random_states(size, 30, seed=size)
    packed = pack_states(states, size)
    assert packed.shape == (len(states), board_record_len(size))
    back = unpack_states(packed, size)
    assert np.array_equal(back, states)


def test_tall_stack_round_trip_8x8() -> None:
    tps = "x8/x8/x8/x8/x8/x8/x8/" + "1" * 40 + "2" * 30 + "1C,x7 2 40"
    pos = Position.from_tps(tps, flats=60)
    back = unpack_states(pack_states(pos.state[None], 8), 8)[0]
    assert np.array_equal(back, pos.state)


def test_sparse_policy_keeps_top_k_and_renormalises() -> None:
    dense = np.zeros((2, 10), np.float32)
    dense[0, [1, 3, 5]] = [0.5, 0.3, 0.2]
    dense[1, :] = 0.1
    idx, prob = sparse_policy(dense, top_k=2)
    assert set(idx[0].tolist()) == {1, 3}
    assert np.isclose(prob[0].astype(np.float32).sum(), 1.0, atol=1e-3)
    back = dense_policy(idx, prob, 10)
    assert back[0, 1] == pytest.approx(0.625, abs=1e-3)
    assert back[0, 5] == 0
    assert np.allclose(back.sum(1), 1.0, atol=1e-3)


def _records(size: int, n: int, start: int = 0) -> Records:
    states = np.repeat(Position.start(size).state[None], n, axis=0)
    idx = np.full((n, 4), -1, np.int32)
    idx[:, 0] = 0
    prob = np.zeros((n, 4), np.float16)
    prob[:, 0] = 1
    return Records(
        board=pack_states(states, size),
        policy_index=idx,
        policy_prob=prob,
        value=np.ones(n, np.int8),
        flat_diff=np.zeros(n, np.int8),
        game_id=np.arange(start, start + n, dtype=np.int64),
        generation=np.zeros(n, np.int32),
        ply=np.zeros(n, np.int16),
    )


def test_window_grows_like_katago() -> None:
    buf = ReplayBuffer(ReplayConfig(top_k=4, window_c=100, window_max=10_000, min_positions=1), 3)
    buf.add(_records(3, 50))
    assert buf.window() == 50
    buf.add(_records(3, 1550))
    w = buf.window()
    # c * (1 + beta * ((N/c)^alpha - 1) / alpha) with N = 1600, c = 100
    expect = int(100 * (1 + 0.4 * ((16) ** 0.75 - 1) / 0.75))
    assert w == expect
    assert w < 1600


def test_reuse_cap_and_backpressure() -> None:
    buf = ReplayBuffer(ReplayConfig(top_k=4, min_positions=10, samples_per_position=2.0, max_ahead=20), 3)
    assert buf.sample(4) is None  # too little data
    assert buf.add(_records(3, 10))
    # 10 positions * 2 samples each = 20 samples allowed
    assert buf.sample(8) is not None
    assert buf.sample(8) is not None
    assert buf.sample(8) is None
    # The trainer has consumed 16 / 2 = 8 positions; ahead = 2; keep adding until it refuses.
    accepted = 0
    while buf.add(_records(3, 5)):
        accepted += 1
        assert accepted < 100, "backpressure never engaged"
    assert buf.ahead() > 20
    before = buf.total_added
    assert not buf.add(_records(3, 5))
    assert buf.total_added == before  # a refused add stores nothing
    # Once the trainer catches up, adding is allowed again.
    while buf.sample(8) is not None:
        pass
    assert buf.add(_records(3, 5))


def test_newest_states_are_the_last_positions_added_as_states() -> None:
    """The calibration positions of a model file's int8 copy: the newest records, unpacked."""
    buf = ReplayBuffer(ReplayConfig(top_k=4, min_positions=1), 3)
    assert buf.newest_states(8).shape == (0, core.STATE_LEN)
    first, second = _records(3, 10), _records(3, 6)
    buf.add(first)
    buf.add(second)
    got = buf.newest_states(8)
    assert got.shape == (8, core.STATE_LEN) and got.dtype == np.int64
    want = np.concatenate([unpack_states(first.board[-2:], 3), unpack_states(second.board, 3)])
    np.testing.assert_array_equal(got, want)
    assert len(buf.newest_states(100)) == 16


def test_a_forced_add_is_never_refused() -> None:
    """A worker's last step at a run's stop (``force``) is added past the backpressure."""
    buf = ReplayBuffer(ReplayConfig(top_k=4, min_positions=10, samples_per_position=2.0, max_ahead=20), 3)
    while buf.add(_records(3, 5)):
        assert buf.total_added < 1000, "backpressure never engaged"
    before = buf.total_added
    assert not buf.add(_records(3, 5))
    assert buf.add(_records(3, 5), games=1, force=True)
    assert buf.total_added == before + 5 and buf.games_added == 1


def test_shards_reload_and_skip_corrupt(tmp_path) -> None:
    rcfg = ReplayConfig(top_k=4, shard_positions=10, min_positions=1)
    buf = ReplayBuffer(rcfg, 3, shard_dir=tmp_path)
    for i in range(5):
        buf.add(_records(3, 10, start=10 * i))
    state = buf.state_dict()
    shards = sorted(tmp_path.glob("shard_*.npz"))
    assert len(shards) == 5
    # Truncate one shard: it must be reported and skipped, not loaded.
    data = shards[2].read_bytes()
    shards[2].write_bytes(data[: len(data) // 2])
    fresh = ReplayBuffer(rcfg, 3, shard_dir=tmp_path)
    loaded = fresh.load(state)
    assert loaded == 40
    assert fresh.total_added == 50
    assert 20 not in set(fresh.data.game_id.tolist())
    assert fresh.next_shard == 5
    assert not list(tmp_path.glob("*.tmp"))


def test_discount_value_prefers_the_shorter_win() -> None:
    z = np.array([1, 1, -1, 0, 1, 1], np.int8)
    ply = np.array([10, 16, 10, 10, 10, 12], np.int16)
    end = np.array([13, 17, 13, 13, -1, 11], np.int16)  # -1: end unknown; 11 < 12: inconsistent
    out = discount_value(z, ply, end, 0.9)
    assert out.dtype == np.float32
    assert out == pytest.approx([0.9**3, 0.9, -(0.9**3), 0.0, 1.0, 1.0])
    assert out[1] > out[0] > 0 > out[2]  # the win 1 ply away beats the win 3 away; a loss is put off
    assert np.array_equal(discount_value(z, ply, end, 1.0), z.astype(np.float32))


def test_discount_floor_discounts_only_the_last_plies() -> None:
    z = np.array([1, 1, 1, -1, 0, 1], np.int8)
    ply = np.array([10, 10, 0, 0, 0, 5], np.int16)
    end = np.array([11, 13, 60, 60, 60, -1], np.int16)
    out = discount_value(z, ply, end, 0.9, floor=0.7)
    # 0.9 ** 1 and 0.9 ** 3 are above the floor; 0.9 ** 60 is not: a distant win keeps 0.7
    assert out == pytest.approx([0.9, 0.9**3, 0.7, -0.7, 0.0, 1.0])
    assert out[0] > out[1] > out[2] > out[4] > out[3]  # still: nearer win first, a distant win above a draw
    # the floor changes nothing where the plain discount stays above it
    assert np.array_equal(discount_value(z[:2], ply[:2], end[:2], 0.9, floor=0.5),
                          discount_value(z[:2], ply[:2], end[:2], 0.9))
    # floor 1: no discount at all
    assert discount_value(z, ply, end, 0.9, floor=1.0) == pytest.approx(z.astype(np.float32))


def _value(recs: Records, rcfg: ReplayConfig) -> np.ndarray:
    """The value targets the trainer's batch makes of sampled records under ``rcfg``."""
    return TARGETS["value"].produce(recs, 3, np.zeros(len(recs), np.int64), TargetSettings.from_replay(rcfg))[0]


def _game_records(size: int, n: int, end_ply: int | None, game: int = 0) -> Records:
    """``n`` records of one game won by the movers at plies 0..n-1 (``end_ply`` None: unknown)."""
    recs = _records(size, n)
    recs.game_id[:] = game
    recs.ply = np.arange(n, dtype=np.int16)
    if end_ply is not None:
        recs.end_ply = np.full(n, end_ply, np.int16)
    return recs


def test_sampled_value_targets_are_discounted_by_plies_to_the_end(tmp_path) -> None:
    rcfg = ReplayConfig(top_k=4, min_positions=1, samples_per_position=100.0, value_discount=0.95)
    buf = ReplayBuffer(rcfg, 3)
    buf.add(_game_records(3, 20, end_ply=25))
    batch = buf.sample(200)
    assert batch is not None
    value = _value(batch, rcfg)
    assert value == pytest.approx(0.95 ** (25 - batch.ply.astype(np.float64)))
    assert len(set(value.tolist())) > 5  # many distances, many targets
    # with a floor: the factor never falls below it
    fcfg = ReplayConfig(top_k=4, min_positions=1, samples_per_position=100.0, value_discount=0.95,
                        value_discount_floor=0.6)
    floored = ReplayBuffer(fcfg, 3)
    floored.add(_game_records(3, 20, end_ply=25))
    batch = floored.sample(200)
    value = _value(batch, fcfg)
    assert value == pytest.approx(np.maximum(0.95 ** (25 - batch.ply.astype(np.float64)), 0.6))
    assert (value == np.float32(0.6)).any() and (value > 0.6).any()
    # value_discount = 1 (the default): the outcome as it was recorded
    pcfg = ReplayConfig(top_k=4, min_positions=1, samples_per_position=100.0)
    plain = ReplayBuffer(pcfg, 3)
    plain.add(_game_records(3, 20, end_ply=25))
    assert set(_value(plain.sample(50), pcfg).tolist()) == {1}


def test_end_ply_survives_shards_and_old_shards_load_undiscounted(tmp_path) -> None:
    rcfg = ReplayConfig(top_k=4, shard_positions=10, min_positions=1, samples_per_position=100.0,
                        value_discount=0.9)
    buf = ReplayBuffer(rcfg, 3, shard_dir=tmp_path)
    buf.add(_game_records(3, 10, end_ply=12, game=1))
    state = buf.state_dict()
    fresh = ReplayBuffer(rcfg, 3, shard_dir=tmp_path)
    assert fresh.load(state) == 10
    assert fresh.data.end_ply.tolist() == [12] * 10
    # A shard written before end_ply existed: the field is missing, so the end is unknown.
    shard = next(tmp_path.glob("shard_*.npz"))
    with np.load(shard) as z:
        arrays = {k: z[k] for k in z.files if k != "end_ply"}
    with open(shard, "wb") as f:
        np.savez(f, **arrays)
    old = ReplayBuffer(rcfg, 3, shard_dir=tmp_path)
    assert old.load(state) == 10
    assert old.data.end_ply.tolist() == [-1] * 10
    assert set(_value(old.sample(30), rcfg).tolist()) == {1.0}


@pytest.mark.parametrize(
    "field, bad",
    [
        ("end_ply", np.full(7, 12, np.int16)),  # too few rows
        ("end_ply", np.full(13, 12, np.int16)),  # too many rows: would shift every later record
        ("end_ply", np.full((10, 1), 12, np.int16)),  # a column, not a row per record
        ("end_ply", np.array(12, np.int16)),  # 0-d
        ("end_ply", np.array(["12"] * 10)),  # not a number
        ("search_value", np.zeros(3, np.float16)),
        ("value", np.ones(4, np.int8)),
        ("policy_index", np.zeros((10, 5), np.int32)),  # another replay.top_k
        ("board", np.zeros((10, 3), np.uint8)),  # another board size
    ],
)
def test_a_shard_with_inconsistent_fields_is_skipped_naming_the_field(tmp_path, caplog, field, bad) -> None:
    rcfg = ReplayConfig(top_k=4, shard_positions=10, min_positions=1, samples_per_position=100.0,
                        value_discount=0.9)
    buf = ReplayBuffer(rcfg, 3, shard_dir=tmp_path)
    buf.add(_game_records(3, 10, end_ply=12, game=0))
    buf.add(_game_records(3, 10, end_ply=15, game=1))
    good, bad_shard = sorted(tmp_path.glob("shard_*.npz"))
    with np.load(bad_shard) as z:
        arrays = {k: z[k] for k in z.files}
    arrays[field] = bad
    with open(bad_shard, "wb") as f:
        np.savez(f, **arrays)
    fresh = ReplayBuffer(rcfg, 3, shard_dir=tmp_path)
    with caplog.at_level("WARNING"):
        assert fresh.load(buf.state_dict()) == 10  # the good shard only
    assert any(bad_shard.name in r.getMessage() and repr(field) in r.getMessage() for r in caplog.records)
    batch = fresh.sample(32)
    assert batch.value.shape == (32,) and set(batch.game_id.tolist()) == {0}
    assert _value(batch, rcfg) == pytest.approx(0.9 ** (12 - batch.ply.astype(np.float64)))
    assert fresh.add(_game_records(3, 5, end_ply=9, game=2))  # the buffer is still usable
