"""The trainer's augmentation as one gather per batch (issue 55): ``make_batch`` gives exactly the
tensors of the per-record path it replaced (kept below as the reference) for the same records and
symmetries, on every board size and feature version, with every target; the gathers refuse bad
input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from takzero.game import core
from takzero.game.symmetry import NUM_SYMMETRIES, transform_squares, transform_state
from takzero.nn.actions import action_permutation, legal_actions, legal_mask, num_actions
from takzero.nn.features import (
    FEATURE_VERSIONS,
    default_layers,
    encode,
    num_channels,
    random_states,
)
from takzero.pipeline.replay import Records, dense_policy, pack_states, sparse_policy, unpack_states
from takzero.pipeline.targets import (
    transform_action_indices,
    transform_board_rows,
    transform_square_rows,
)
from takzero.pipeline.trainer import make_batch


def records_of(size: int, n: int, seed: int) -> Records:
    """``n`` records of random unfinished positions of ``size``: a policy over a few legal moves,
    random ownership (some rows valid) and an opponent policy (some rows empty)."""
    rng = np.random.default_rng(seed)
    states = random_states(size, n, seed=seed, min_plies=0, max_plies=8 * size)
    a = num_actions(size)
    moves, acts = np.empty(a, np.int64), np.empty(a, np.int64)
    dense = np.zeros((n, a), np.float32)
    opp = np.zeros((n, a), np.float32)
    for r in range(n):
        k = legal_actions(states[r], moves, acts)
        pick = rng.choice(acts[:k], size=min(k, 5), replace=False)
        dense[r, pick] = rng.random(len(pick)) + 0.1
        if r % 3:
            opp[r, rng.integers(0, a, size=4)] = rng.random(4) + 0.1
    idx, prob = sparse_policy(dense, 8)
    opp_idx, opp_prob = sparse_policy(opp, 4)
    opp_idx[opp_prob == 0] = -1
    return Records(
        board=pack_states(states, size), policy_index=idx, policy_prob=prob,
        value=rng.integers(-1, 2, n).astype(np.int8), flat_diff=rng.integers(-3, 4, n).astype(np.int8),
        game_id=np.arange(n, dtype=np.int64), generation=np.zeros(n, np.int32), ply=np.zeros(n, np.int16),
        ownership=rng.integers(-1, 2, (n, size * size)).astype(np.int8), own_valid=rng.random(n) < 0.7,
        opp_index=opp_idx, opp_prob=opp_prob,
    )


def reference_batch(records: Records, size: int, layers: int, version: int, ts: np.ndarray) -> dict:
    """The per-record path of make_batch before issue 55 (one transform_state call per record,
    dense policies moved symmetry by symmetry), as plain arrays."""
    states = unpack_states(records.board, size)
    a = num_actions(size)
    policy = dense_policy(records.policy_index, records.policy_prob, a)
    opp = dense_policy(records.opp_index, records.opp_prob, a)
    own = records.ownership.astype(np.float32)
    for r in np.nonzero(ts)[0]:
        states[r] = transform_state(states[r], int(ts[r]))
    for dense in (policy, opp):
        for t in range(1, NUM_SYMMETRIES):
            rows = np.nonzero(ts == t)[0]
            moved = np.zeros((rows.size, a), dense.dtype)
            moved[:, action_permutation(size, t)] = dense[rows]
            dense[rows] = moved
    for t in range(1, NUM_SYMMETRIES):
        rows = np.nonzero(ts == t)[0]
        own[rows] = transform_squares(own[rows], size, t)
    planes = np.zeros((len(records), num_channels(layers, version), size, size), np.float32)
    encode(states, planes, layers, version)
    mask = np.zeros((len(records), a), np.bool_)
    legal_mask(states, mask)
    return {"planes": planes, "mask": mask, "policy": policy, "opponent_policy": opp, "ownership": own}


@pytest.mark.parametrize("size", [3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("version", FEATURE_VERSIONS)
def test_make_batch_equals_the_per_record_path(size: int, version: int) -> None:
    recs = records_of(size, 48, seed=size)
    layers = default_layers(size)
    batch = make_batch(recs, size, layers, np.random.default_rng(7), feature_version=version)
    ts = np.random.default_rng(7).integers(0, NUM_SYMMETRIES, size=len(recs))  # the draw make_batch made
    assert set(ts.tolist()) == set(range(NUM_SYMMETRIES))  # every symmetry is exercised
    ref = reference_batch(recs, size, layers, version, ts)
    assert torch.equal(batch.planes, torch.from_numpy(ref["planes"]))
    assert torch.equal(batch.mask, torch.from_numpy(ref["mask"]))
    assert torch.equal(batch.policy, torch.from_numpy(ref["policy"]))
    assert torch.equal(batch.targets["opponent_policy"], torch.from_numpy(ref["opponent_policy"]))
    assert torch.equal(batch.targets["ownership"], torch.from_numpy(ref["ownership"]))
    assert torch.equal(batch.value, torch.from_numpy(recs.value.astype(np.float32)))


def test_without_augmentation_the_records_are_decoded_as_they_are() -> None:
    recs = records_of(6, 16, seed=1)
    batch = make_batch(recs, 6, default_layers(6), np.random.default_rng(0), augment=False)
    ref = reference_batch(recs, 6, default_layers(6), 2, np.zeros(16, np.int64))
    assert torch.equal(batch.planes, torch.from_numpy(ref["planes"]))
    assert torch.equal(batch.policy, torch.from_numpy(ref["policy"]))


@pytest.mark.parametrize("size", [3, 5, 6, 7, 8])
def test_board_gather_is_transform_state_hash_included(size: int) -> None:
    states = random_states(size, 8, seed=3, min_plies=2 * size, max_plies=6 * size)
    ts = np.arange(8) % NUM_SYMMETRIES
    moved = unpack_states(transform_board_rows(pack_states(states, size), size, ts), size)
    ref = np.stack([transform_state(unpack_states(pack_states(s, size), size)[0], int(t))
                    for s, t in zip(states, ts, strict=True)])
    assert np.array_equal(moved, ref)
    assert (moved[:, core.I_HASH] != 0).all()


def test_action_and_square_gathers_match_the_permutations() -> None:
    size = 5
    a = num_actions(size)
    index = np.array([[0, 7, a - 1, -1], [3, -1, -1, -1], [11, 12, 13, 14]], np.int32)
    for t in range(NUM_SYMMETRIES):
        ts = np.full(3, t)
        out = transform_action_indices(index, size, ts)
        perm = action_permutation(size, t)
        assert out.dtype == index.dtype
        assert np.array_equal(out, np.where(index >= 0, perm[np.maximum(index, 0)], -1))
        values = np.arange(3 * size * size, dtype=np.float32).reshape(3, size * size)
        expect = transform_squares(values, size, t)
        transform_square_rows(values, size, ts)
        assert np.array_equal(values, expect)


def test_bad_symmetries_and_shapes_are_refused() -> None:
    board = pack_states(random_states(4, 2, seed=0), 4)
    with pytest.raises(ValueError, match="symmetries must be"):
        transform_board_rows(board, 4, np.array([0, 8]))
    with pytest.raises(ValueError, match="symmetries must be"):
        transform_action_indices(np.zeros((2, 3), np.int32), 4, np.array([0]))
    with pytest.raises(ValueError, match=r"packed boards of size 5 are \(B, "):
        transform_board_rows(board, 5, np.zeros(2, np.int64))
