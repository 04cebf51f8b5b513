"""Gumbel root (Danihelka et al. 2022): the Sequential Halving schedule, the improved policy."""

from __future__ import annotations

import numpy as np
import pytest

from takzero.game import Position
from takzero.game.core import I_HASH, generate_moves, make_move, num_actions
from takzero.nn.actions import move_to_action
from takzero.search import BatchedMCTS, HashEvaluator, SearchConfig
from takzero.search.gumbel import considered_sequence


@pytest.mark.parametrize(
    ("m", "sims", "expected"),
    [
        (8, 24, [0] * 8 + [1] * 4 + [2] * 4 + [3, 3, 4, 4, 5, 5, 6, 6]),
        (8, 2, [0, 0]),
        (8, 13, [0] * 8 + [1] * 4 + [2]),
        (7, 24, [0] * 7 + [1, 1, 1, 2, 2, 2] + [3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8]),
        (1, 5, [0, 1, 2, 3, 4]),
        (16, 16, [0] * 16),
    ],
)
def test_considered_sequence(m, sims, expected):
    """The visit schedule of mctx's ``get_sequence_of_considered_visits``."""
    out = np.zeros(sims, dtype=np.int32)
    considered_sequence(m, sims, out)
    assert out.tolist() == expected


class _Oracle:
    """Uniform priors; the true value of each child of the root (looked up by hash), 0 elsewhere."""

    def __init__(self, size: int, child_values: dict[int, float]):
        self.a = num_actions(size)
        self.values = child_values

    def evaluate(self, states):
        b = states.shape[0]
        v = np.array([self.values.get(int(s[I_HASH]), 0.0) for s in states], dtype=np.float32)
        p = np.full((b, self.a), 1.0 / self.a, dtype=np.float32)
        return p, v, np.zeros((b, 3), dtype=np.float32)


def _oracle_setup(seed: int):
    root = Position.start(4).state  # 16 legal moves: all of them are considered with m = 16
    buf = np.empty(num_actions(4), dtype=np.int64)
    moves = buf[: generate_moves(root, buf)].copy()
    rng = np.random.default_rng(seed)
    best = int(rng.integers(len(moves)))
    values = {}
    for i, m in enumerate(moves):
        st = root.copy()
        make_move(st, int(m))
        # value for the child's side to move (the opponent): the best move leaves it at -0.9
        values[int(st[I_HASH])] = -0.9 if i == best else float(rng.uniform(-0.3, 0.8))
    return root, moves, int(moves[best]), values


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("noise", [False, True])
def test_improved_policy_finds_best_move_in_16_sims(seed, noise):
    root, moves, best, values = _oracle_setup(seed)
    cfg = SearchConfig(gumbel=True, gumbel_m=16, simulations=16)
    mcts = BatchedMCTS(1, 4, cfg, seed=seed)
    mcts.reset(0, root)
    mcts.run(_Oracle(4, values), add_noise=noise)
    actions, probs = mcts.policy_target(0)
    assert probs.sum() == pytest.approx(1.0, abs=1e-5)
    best_action = move_to_action(best, 4)
    assert probs[actions == best_action][0] > 0.5
    assert actions[np.argmax(probs)] == best_action
    assert mcts.choose_move(0) == best
    assert mcts.root_visits(0)[1].sum() == 16


@pytest.mark.parametrize("sims", [1, 2, 5, 16, 50])
def test_gumbel_small_budgets(sims):
    """More legal moves (5x5 start) than m, tiny budgets: legal moves, sane targets."""
    cfg = SearchConfig(gumbel=True, gumbel_m=8, simulations=sims)
    mcts = BatchedMCTS(3, 5, cfg, seed=1)
    for g in range(3):
        mcts.reset(g, Position.from_tps("x5/x5/x,1,2,x2/x5/x5 1 2").state)
    mcts.run(HashEvaluator(5, seed=2))
    for g in range(3):
        moves, visits = mcts.root_visits(g)
        assert visits.sum() == sims
        # Sequential Halving never visits more than m actions
        assert (visits > 0).sum() <= 8
        _, probs = mcts.policy_target(g)
        assert probs.sum() == pytest.approx(1.0, abs=1e-5) and (probs > 0).all()
        move = mcts.choose_move(g)
        assert move in set(moves.tolist())
        assert visits[moves.tolist().index(move)] == visits.max()
