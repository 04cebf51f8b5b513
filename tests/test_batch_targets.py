"""Every target is a row of ``pipeline.targets.TARGETS`` made in ``make_batch`` (issue 57): the
replay buffer samples records as stored, and the batches the trainer sees are the ones of the
path they replaced (the value target discounted and blended in ``ReplayBuffer.sample``, kept
below as the reference) for the same seed, on records with discounts, floors, draws, unknown
ends, reanalysed values and games of odd lengths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from takzero.config import ReplayConfig
from takzero.game.symmetry import NUM_SYMMETRIES
from takzero.nn.actions import legal_mask, num_actions
from takzero.nn.features import default_layers, encode, num_channels
from takzero.pipeline.replay import Records, ReplayBuffer, dense_policy, unpack_states
from takzero.pipeline.targets import (
    MAIN_TARGETS,
    TARGETS,
    TargetSettings,
    make_targets,
    transform_action_indices,
    transform_board_rows,
)
from takzero.pipeline.trainer import make_batch
from tests.test_batch_augmentation import records_of

SIZE = 5


# -- the old path, copied from main before the change (ReplayBuffer.sample and make_batch) -------


def _old_discount_value(outcome, ply, end_ply, gamma, floor=0.0):
    z = outcome.astype(np.float32)
    if gamma >= 1.0:
        return z
    plies = end_ply.astype(np.int64) - ply.astype(np.int64)
    known = (end_ply >= 0) & (plies >= 0)
    factor = np.maximum(np.power(np.float64(gamma), np.where(known, plies, 0)), floor)
    return (z * factor).astype(np.float32)


def _old_blend_value(outcome, search_value, weight):
    z = outcome.astype(np.float32)
    if weight <= 0:
        return z
    v = search_value.astype(np.float32)
    return np.where(np.isnan(v), z, (1.0 - weight) * z + weight * v).astype(np.float32)


def _old_sample(buf: ReplayBuffer, batch_size: int) -> Records:
    w = min(buf.window(), len(buf.data))
    idx = len(buf.data) - w + buf.rng.integers(0, w, size=batch_size)
    buf.total_sampled += batch_size
    out = buf.data.take(idx)
    if buf.cfg.value_discount < 1.0:
        out.value = _old_discount_value(out.value, out.ply, out.end_ply, buf.cfg.value_discount,
                                        buf.cfg.value_discount_floor)
    if buf.cfg.reanalyse_value_weight > 0:
        out.value = _old_blend_value(out.value, out.search_value, buf.cfg.reanalyse_value_weight)
    return out


def _old_make_batch(records: Records, size: int, layers: int, rng: np.random.Generator) -> dict:
    ts = rng.integers(0, NUM_SYMMETRIES, size=len(records))
    board = transform_board_rows(records.board, size, ts)
    policy_index = transform_action_indices(records.policy_index, size, ts)
    states = unpack_states(board, size)
    policy = dense_policy(policy_index, records.policy_prob, num_actions(size))
    planes = np.zeros((len(records), num_channels(layers), size, size), np.float32)
    encode(states, planes, layers)
    mask = np.zeros((len(records), num_actions(size)), np.bool_)
    legal_mask(states, mask)
    return {
        "planes": planes, "mask": mask, "policy": policy,
        "value": records.value.astype(np.float32), "flat_diff": records.flat_diff.astype(np.float32),
        # the auxiliary targets took the settings-free producers of before
        "targets": {k: v.numpy() for k, v in make_targets(records, size, ts).items()},
    }


# -- records with every case of the value target ------------------------------------------------


def _games(n: int, seed: int) -> Records:
    """``n`` records cut into games of odd and even lengths: wins, losses and draws from the
    mover's view, ends known and unknown (-1, old shards), some records reanalysed."""
    recs = records_of(SIZE, n, seed)
    rng = np.random.default_rng(seed + 100)
    lengths, total = [], 0
    while total < n:
        lengths.append(min(int(rng.choice([1, 3, 4, 7, 9, 12])), n - total))
        total += lengths[-1]
    game = np.repeat(np.arange(len(lengths)), lengths)
    start = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    ply = np.arange(n) - start[game] + rng.integers(0, 30, len(lengths))[game]
    end = np.array([ply[game == g].max() + int(rng.integers(0, 3)) for g in range(len(lengths))])
    outcome = rng.integers(-1, 2, len(lengths))  # -1, 0 (draw), +1 for the first mover
    recs.game_id = game.astype(np.int64)
    recs.ply = ply.astype(np.int16)
    recs.end_ply = np.where(rng.random(len(lengths)) < 0.2, -1, end)[game].astype(np.int16)
    recs.value = (outcome[game] * np.where(ply % 2 == 0, 1, -1)).astype(np.int8)
    recs.flat_diff = rng.integers(-5, 6, n).astype(np.int8)
    sv = rng.uniform(-1, 1, n).astype(np.float16)
    sv[rng.random(n) < 0.5] = np.nan
    recs.search_value = sv
    return recs


SETTINGS = [
    {},
    {"value_discount": 0.9},
    {"value_discount": 0.95, "value_discount_floor": 0.6},
    {"value_discount": 0.5, "value_discount_floor": 1.0},
    {"reanalyse_value_weight": 0.3},
    {"value_discount": 0.9, "value_discount_floor": 0.2, "reanalyse_value_weight": 0.5},
    {"value_discount": 0.97, "reanalyse_value_weight": 1.0},
]


@pytest.mark.parametrize("keys", SETTINGS)
def test_batches_equal_the_old_path_for_the_same_seed(keys: dict) -> None:
    rcfg = ReplayConfig(top_k=8, min_positions=1, samples_per_position=100.0, **keys)
    recs = _games(61, seed=7)
    k = recs.opp_index.shape[1]  # the opponent-policy target too
    old_buf = ReplayBuffer(rcfg, SIZE, seed=3, opponent_top_k=k)
    new_buf = ReplayBuffer(rcfg, SIZE, seed=3, opponent_top_k=k)
    old_buf.add(recs)
    new_buf.add(recs)
    layers = default_layers(SIZE)
    old_rng, new_rng = np.random.default_rng(11), np.random.default_rng(11)
    settings = TargetSettings.from_replay(rcfg)
    decided = 0
    for _ in range(3):
        want = _old_make_batch(_old_sample(old_buf, 48), SIZE, layers, old_rng)
        got = make_batch(new_buf.sample(48), SIZE, layers, new_rng, settings=settings)
        for k in ("planes", "mask", "policy", "value", "flat_diff"):
            t = getattr(got, k)
            assert t.dtype == torch.from_numpy(want[k]).dtype, k
            np.testing.assert_array_equal(t.numpy(), want[k], err_msg=k)
        assert set(got.targets) == set(want["targets"])
        for k, v in want["targets"].items():
            np.testing.assert_array_equal(got.targets[k].numpy(), v, err_msg=k)
        decided += int((np.abs(want["value"]) % 1 > 0).sum())
    assert new_buf.total_sampled == old_buf.total_sampled
    if keys and keys.get("value_discount_floor") != 1.0:  # the case moved some targets off the outcome
        assert decided > 0


def test_the_buffer_samples_records_as_stored() -> None:
    """No target arithmetic in the buffer: a sampled record is its stored row, the value the
    int8 outcome, whatever the discount and blend (they are the batch's)."""
    rcfg = ReplayConfig(top_k=8, min_positions=1, samples_per_position=100.0, value_discount=0.9,
                        value_discount_floor=0.3, reanalyse_value_weight=0.5)
    recs = _games(40, seed=2)
    buf = ReplayBuffer(rcfg, SIZE, seed=1, opponent_top_k=recs.opp_index.shape[1])
    buf.add(recs)
    rng = np.random.default_rng(1)
    out = buf.sample(32)
    idx = len(buf.data) - min(buf.window(), len(buf.data)) + rng.integers(0, min(buf.window(), len(buf.data)), 32)
    for name in Records.FIELDS:
        a, b = getattr(out, name), getattr(recs, name)[idx]
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_the_main_targets_are_rows() -> None:
    assert MAIN_TARGETS == ("policy", "value", "flat_diff")
    assert {TARGETS[n].batch_field for n in MAIN_TARGETS} == {"policy", "value", "flat_diff"}
    recs = _games(20, seed=5)
    batch = make_batch(recs, SIZE, default_layers(SIZE), np.random.default_rng(0), targets=None)
    assert not set(MAIN_TARGETS) & set(batch.targets)  # the main ones fill Batch's own fields
    # the value row is symmetry-invariant and follows its settings
    s = TargetSettings(value_discount=0.9, value_discount_floor=0.5, reanalyse_value_weight=0.25)
    ts = np.arange(20) % NUM_SYMMETRIES
    v0, ok = TARGETS["value"].produce(recs, SIZE, np.zeros(20, np.int64), s)
    v1, _ = TARGETS["value"].produce(recs, SIZE, ts, s)
    np.testing.assert_array_equal(v0, v1)
    assert v0.dtype == np.float32 and ok.all()
    want = _old_blend_value(_old_discount_value(recs.value, recs.ply, recs.end_ply, 0.9, 0.5), recs.search_value, 0.25)
    np.testing.assert_array_equal(v0, want)


def test_target_settings_are_the_replay_keys_with_their_defaults_and_ranges() -> None:
    """TargetSettings' fields are ``replay`` keys by name, with the schema's defaults, and a value
    the run's config refuses is refused here too, naming the key (a negative gamma flipped the
    sign of the value targets of odd distances, NaN turned the discount off, a weight of 3
    extrapolated: all silently)."""
    import dataclasses

    from takzero.config import ConfigError

    replay = {f.name: f.default for f in dataclasses.fields(ReplayConfig)}
    for f in dataclasses.fields(TargetSettings):
        assert f.name in replay and f.default == replay[f.name], f.name
    custom = ReplayConfig(value_discount=0.9, value_discount_floor=0.25, reanalyse_value_weight=0.5)
    assert TargetSettings.from_replay(custom) == TargetSettings(0.9, 0.25, 0.5)
    bad = {"value_discount": (-0.5, 0.0, 0.4, 1.5, float("nan"), float("inf"), True),
           "value_discount_floor": (-2.0, 1.5, float("nan")),
           "reanalyse_value_weight": (-0.1, 3.0, float("nan"))}
    for key, values in bad.items():
        for value in values:
            with pytest.raises(ConfigError, match=rf"^replay\.{key}: .*\(got {value!r}\)$"):
                TargetSettings(**{key: value})
            with pytest.raises(ConfigError, match=rf"^replay\.{key}: "):
                ReplayConfig(**{key: value})
