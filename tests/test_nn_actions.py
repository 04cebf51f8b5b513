"""Action space: move <-> index bijection, legal masks, symmetry permutations and equivariance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from takzero.game import core, symmetry
from takzero.game.core import STATE_LEN
from takzero.nn import actions as A
from takzero.nn import features as F

SIZES = [3, 4, 5, 6, 7, 8]


def states_for(size: int, count: int, seed: int) -> np.ndarray:
    """Random positions of a size: openings, middle games and long games with tall stacks."""
    return np.concatenate(
        [
            F.random_states(size, 2, seed=seed, min_plies=0, max_plies=1),
            F.random_states(size, count - 2, seed=seed + 1, min_plies=3, max_plies=12 * size),
        ]
    )


def moves_of(state: np.ndarray) -> np.ndarray:
    buf = np.empty(core.num_actions(int(state[core.I_SIZE])), np.int64)
    n = core.generate_moves(state, buf)
    return buf[:n].copy()


def test_action_space_sizes() -> None:
    assert A.action_channels(6) == 251 and A.num_actions(6) == 9036
    assert A.action_channels(5) == 123 and A.num_actions(5) == 3075
    for n in SIZES:
        assert A.num_actions(n) == core.num_actions(n)


@pytest.mark.parametrize("size", SIZES)
def test_index_to_move_is_a_bijection(size: int) -> None:
    a = A.num_actions(size)
    moves = np.array([A.action_to_move(i, size) for i in range(a)], np.int64)
    assert len(np.unique(moves)) == a
    back = np.array([A.move_to_action(m, size) for m in moves], np.int64)
    assert np.array_equal(back, np.arange(a))
    # every decoded move is well formed for the size
    assert (moves & 63).max() == size * size - 1
    spreads = moves[((moves >> 6) & 3) == 0]
    assert ((spreads >> 10) & 255).min() == 1
    assert ((spreads >> 10) & 255).max() == (1 << size) - 2


def test_known_indices() -> None:
    n = 6
    # flat on a1, capstone on f6, spread "a1+" (pattern 1) and "6f6<" (pattern 0b100000 = 32)
    assert A.move_to_action(core.make_placement(0, core.FLAT), n) == 0
    assert A.move_to_action(core.make_placement(35, core.CAP), n) == 2 * 36 + 35
    assert A.move_to_action(core.make_spread(0, core.DIR_UP, 1), n) == 3 * 36
    assert (
        A.move_to_action(core.make_spread(35, core.DIR_LEFT, 32), n) == (3 + 3 * 62 + 31) * 36 + 35
    )


@pytest.mark.parametrize("size", SIZES)
def test_legal_moves_map_uniquely_and_back(size: int) -> None:
    states = states_for(size, 24, seed=size)
    mask = np.zeros((len(states), A.num_actions(size)), bool)
    A.legal_mask(states, mask)
    moves_buf = np.empty(A.num_actions(size), np.int64)
    acts_buf = np.empty(A.num_actions(size), np.int64)
    for g, state in enumerate(states):
        moves = moves_of(state)
        assert len(moves) > 0
        idx = np.array([A.move_to_action(m, size) for m in moves])
        assert len(np.unique(idx)) == len(moves)
        assert ((idx >= 0) & (idx < A.num_actions(size))).all()
        assert all(A.action_to_move(i, size) == m for i, m in zip(idx, moves, strict=True))
        assert np.array_equal(np.flatnonzero(mask[g]), np.sort(idx))
        n = A.legal_actions(state, moves_buf, acts_buf)
        assert n == len(moves)
        assert np.array_equal(moves_buf[:n], moves) and np.array_equal(acts_buf[:n], idx)


def test_legal_mask_edge_cases() -> None:
    states = F.random_states(5, 3, seed=1, min_plies=4, max_plies=20)
    mask = np.ones((3, A.num_actions(5)), bool)
    # a finished position has no legal move: its row is cleared
    states[1, core.I_RESULT] = core.RESULT_DRAW
    A.legal_mask(states, mask)
    assert not mask[1].any() and mask[0].any() and mask[2].any()
    with pytest.raises(ValueError):
        A.legal_mask(states, np.zeros((3, A.num_actions(6)), bool))
    with pytest.raises(ValueError):
        A.legal_mask(states, np.zeros((3, A.num_actions(5)), np.uint8))
    mixed = np.concatenate([states, F.random_states(6, 1, seed=1)])
    with pytest.raises(ValueError):
        A.legal_mask(mixed, np.zeros((4, A.num_actions(5)), bool))
    assert A.legal_mask(np.empty((0, STATE_LEN), np.int64), np.zeros((0, 5), bool)).shape == (0, 5)


# ---------------------------------------------------------------------------------------------
# Symmetries
# ---------------------------------------------------------------------------------------------


def test_transform_convention_by_hand() -> None:
    n = 6
    a1, f1, a6 = 0, 5, 30
    up = core.make_spread(a1, core.DIR_UP, 1)
    # one quarter turn counter-clockwise: a1 -> f1, '+' -> '<'
    assert A.transform_square(a1, n, 1) == f1
    assert A.transform_move(up, n, 1) == core.make_spread(f1, core.DIR_LEFT, 1)
    # mirror of the files: a1 -> f1, '>' -> '<', '+' kept
    assert A.transform_square(a1, n, 4) == f1
    right = core.make_spread(a1, core.DIR_RIGHT, 3)
    assert A.transform_move(right, n, 4) == core.make_spread(f1, core.DIR_LEFT, 3)
    assert A.transform_move(up, n, 4) == core.make_spread(f1, core.DIR_UP, 1)
    # mirror then one turn: a1 -> f1 -> f6
    assert A.transform_square(a1, n, 5) == 35
    assert A.transform_square(a6, n, 3) == 35  # three turns ccw = one turn clockwise
    wall = core.make_placement(7, core.WALL)
    assert A.transform_move(wall, n, 2) == core.make_placement(35 - 7, core.WALL)


def _reference_square(sq: int, size: int, t: int) -> int:
    """Independent definition: centre the board, mirror x if t & 4, rotate by 90 degrees
    counter-clockwise (x, y) -> (-y, x) t & 3 times, un-centre."""
    c = (size - 1) / 2
    x, y = sq % size - c, sq // size - c
    if t & 4:
        x = -x
    for _ in range(t & 3):
        x, y = -y, x
    return int(round(y + c)) * size + int(round(x + c))


_VECTORS = {0: (0, 1), 1: (0, -1), 2: (1, 0), 3: (-1, 0)}


def _reference_direction(d: int, t: int) -> int:
    x, y = _VECTORS[d]
    if t & 4:
        x = -x
    for _ in range(t & 3):
        x, y = -y, x
    return next(k for k, v in _VECTORS.items() if v == (x, y))


@pytest.mark.parametrize("size", SIZES)
def test_compiled_transforms_match_the_geometric_definition(size: int) -> None:
    moves = [A.action_to_move(i, size) for i in range(0, A.num_actions(size), 7)]
    state = states_for(size, 3, seed=3)[2]
    for t in range(8):
        assert [A.transform_square(s, size, t) for s in range(size * size)] == [
            _reference_square(s, size, t) for s in range(size * size)
        ]
        assert np.array_equal(
            symmetry.direction_permutation(t), [_reference_direction(d, t) for d in range(4)]
        )
        for m in moves:
            sq = _reference_square(m & 63, size, t)
            if (m >> 6) & 3:
                expect = (m & ~63) | sq
            else:
                d = _reference_direction((m >> 8) & 3, t)
                expect = (m & (255 << 10)) | (d << 8) | sq
            assert A.transform_move(m, size, t) == expect
        out = np.empty_like(state)
        A.transform_state_into(state, t, out)
        perm = [_reference_square(s, size, t) for s in range(size * size)]
        for off in (core.OFF_HEIGHT, core.OFF_TOP, core.OFF_LO, core.OFF_HI):
            assert np.array_equal(out[off + np.array(perm)], state[off : off + size * size])
        assert out[core.I_HASH] == core.hash_from_scratch(out)


@pytest.mark.parametrize("size", [3, 5, 6, 8])
def test_permutations_form_the_group(size: int) -> None:
    a = A.num_actions(size)
    perms = [A.action_permutation(size, t) for t in range(8)]
    for t, p in enumerate(perms):
        assert np.array_equal(np.sort(p), np.arange(a)), t
        inv = perms[A.inverse_transform(t)]
        assert np.array_equal(inv[p], np.arange(a)), t
        # perm agrees with the move transform on every action
        if size <= 5:
            expect = [A.move_to_action(A.transform_move(A.action_to_move(i, size), size, t), size)
                      for i in range(a)]
            assert np.array_equal(p, expect)
    assert np.array_equal(perms[0], np.arange(a))
    # rotation by one, applied twice, is rotation by two; eight distinct transforms
    assert np.array_equal(perms[1][perms[1]], perms[2])
    assert len({p.tobytes() for p in perms}) == 8
    with pytest.raises(ValueError):
        A.action_permutation(size, 8)


@pytest.mark.parametrize("size", SIZES)
def test_equivariance_of_features_masks_and_moves(size: int) -> None:
    states = states_for(size, 10, seed=100 + size)
    b = len(states)
    a = A.num_actions(size)
    planes = F.new_planes(b, size)
    F.encode(states, planes)
    mask = np.zeros((b, a), bool)
    A.legal_mask(states, mask)
    rng = np.random.default_rng(size)
    for t in range(8):
        moved = np.stack([A.transform_state(s, t) for s in states])
        planes_t = F.new_planes(b, size)
        F.encode(moved, planes_t)
        assert np.array_equal(planes_t, A.transform_planes(planes, t)), t
        mask_t = np.zeros((b, a), bool)
        A.legal_mask(moved, mask_t)
        assert np.array_equal(mask_t, A.transform_policy(mask, size, t)), t
        perm = A.action_permutation(size, t)
        for g in range(b):
            moves = moves_of(states[g])
            for m in rng.choice(moves, size=min(6, len(moves)), replace=False):
                mt = A.transform_move(m, size, t)
                assert mask_t[g, A.move_to_action(mt, size)]
                assert perm[A.move_to_action(m, size)] == A.move_to_action(mt, size)
                # the rules engine agrees: playing the moved move on the moved position
                after = states[g].copy()
                core.make_move(after, m)
                after_t = moved[g].copy()
                core.make_move(after_t, mt)
                assert np.array_equal(after_t, A.transform_state(after, t))


def test_transform_policy_and_planes_numpy_torch() -> None:
    size = 5
    rng = np.random.default_rng(0)
    policy = rng.random((3, A.num_actions(size))).astype(np.float32)
    planes = rng.random((3, 4, size, size)).astype(np.float32)
    for t in range(8):
        perm = A.action_permutation(size, t)
        q = A.transform_policy(policy, size, t)
        assert np.array_equal(q[:, perm], policy)
        qt = A.transform_policy(torch.from_numpy(policy), size, t)
        assert isinstance(qt, torch.Tensor) and np.array_equal(qt.numpy(), q)
        pt = A.transform_planes(torch.from_numpy(planes), t)
        assert np.array_equal(pt.numpy(), A.transform_planes(planes, t))
        # round trip through the inverse
        back = A.transform_planes(A.transform_planes(planes, t), A.inverse_transform(t))
        assert np.array_equal(back, planes)
    # one quarter turn moves the value at a1 (row 0, col 0) to e1 (row 0, col 4)
    one = np.zeros((size, size), np.float32)
    one[0, 0] = 1
    assert A.transform_planes(one, 1)[0, size - 1] == 1
    with pytest.raises(TypeError):
        A.transform_policy([0.0] * A.num_actions(size), size, 1)
