"""Root noise statistics and robustness: degenerate priors/values, full trees, ply limit,
virtual loss."""

from __future__ import annotations

import numpy as np
import pytest

from takzero.game import Position
from takzero.game.core import generate_moves, num_actions
from takzero.search import BatchedMCTS, HashEvaluator, SearchConfig, UniformEvaluator
from takzero.search.tree import UNKNOWN

MID_4X4 = "x,2,x2/x,1,x,2/1,x2,1/x,2,x2 1 4"


def _legal(state: np.ndarray) -> set[int]:
    buf = np.empty(num_actions(int(state[0])), dtype=np.int64)
    return set(buf[: generate_moves(state.copy(), buf)].tolist())


def _searched(cfg: SearchConfig, tps: str = MID_4X4, sims: int = 32, seed: int = 0):
    mcts = BatchedMCTS(1, 4, cfg, seed=seed)
    mcts.reset(0, Position.from_tps(tps).state)
    mcts.run(HashEvaluator(4, seed=1), simulations=sims)
    return mcts


def test_dirichlet_noise_statistics():
    cfg = SearchConfig(noise_weight=0.25, dirichlet_alpha_scale=10.0)
    mcts = _searched(cfg)
    moves, priors, _ = mcts.root_priors(0)
    n = len(moves)
    assert set(moves.tolist()) == _legal(mcts.root_state(0))  # support = legal set
    draws = 3000
    mixed = np.empty((draws, n))
    for i in range(draws):
        mcts.begin_search([0], add_noise=True, simulations=1)
        mixed[i] = mcts.root_priors(0)[2]
    assert np.all(mixed > 0)
    np.testing.assert_allclose(mixed.sum(axis=1), 1.0, atol=1e-5)
    expected = 0.75 * priors + 0.25 / n
    np.testing.assert_allclose(mixed.mean(axis=0), expected, atol=0.004)
    # Dir(alpha) with alpha = 10 / n: Var(eta_i) = (1/n)(1 - 1/n) / (10 + 1)
    eta = (mixed - 0.75 * priors) / 0.25
    var = eta.var(axis=0).mean()
    assert var == pytest.approx((1 / n) * (1 - 1 / n) / 11.0, rel=0.15)


def test_fixed_alpha_and_no_noise_in_evaluation():
    mcts = _searched(SearchConfig(dirichlet_alpha=0.3))
    _, priors, mixed = mcts.root_priors(0)
    assert not np.allclose(priors, mixed)
    mcts = _searched(SearchConfig().evaluation())
    _, priors, mixed = mcts.root_priors(0)
    np.testing.assert_array_equal(priors, mixed)


class _Degenerate:
    def __init__(self, size: int, kind: str):
        self.a = num_actions(size)
        self.kind = kind

    def evaluate(self, states):
        b = states.shape[0]
        p = np.zeros((b, self.a), dtype=np.float32)
        v = np.zeros(b, dtype=np.float32)
        if self.kind == "nan":
            p[:] = np.nan
            v[:] = np.nan
        elif self.kind == "inf":
            p[:, ::3] = np.inf
            v[:] = np.inf
        elif self.kind == "negative":
            p[:] = -1.0
            v[:] = -5.0
        elif self.kind == "tiny":
            p[:] = 1e-45
            v[:] = 1e-45
        return p, v, np.zeros((b, 3), dtype=np.float32)


@pytest.mark.parametrize("kind", ["zero", "nan", "inf", "negative", "tiny"])
@pytest.mark.parametrize("gumbel", [False, True])
def test_degenerate_evaluator_outputs(kind, gumbel):
    cfg = SearchConfig(gumbel=gumbel)
    mcts = BatchedMCTS(2, 4, cfg, seed=5)
    for g in range(2):
        mcts.reset(g, Position.from_tps(MID_4X4).state)
    mcts.run(_Degenerate(4, kind), simulations=40)
    for g in range(2):
        moves, visits = mcts.root_visits(g)
        assert visits.sum() > 0
        assert np.isfinite(mcts.root_value(g))
        assert -1.0 <= mcts.root_value(g) <= 1.0
        assert np.all(np.isfinite(mcts._trees.value_sum[g, : mcts.tree_size(g)]))
        _, probs = mcts.policy_target(g)
        assert np.all(np.isfinite(probs)) and probs.sum() == pytest.approx(1.0, abs=1e-5)
        for temperature in (0.0, 1.0):
            assert mcts.choose_move(g, temperature) in _legal(mcts.root_state(g))


def test_full_tree_degrades_gracefully():
    a = num_actions(4)
    cfg = SearchConfig(node_budget=a + 60).evaluation()
    mcts = _searched(cfg, sims=300)
    assert mcts.overflow(0) > 0
    assert mcts.tree_size(0) <= a + 60
    assert mcts.simulations_done(0) == 300
    assert mcts.root_visits(0)[1].sum() == 300
    assert mcts.choose_move(0) in _legal(mcts.root_state(0))


def test_ply_limit_scores_draws():
    pos = Position.from_tps(MID_4X4)
    cfg = SearchConfig(max_plies=pos.ply + 1).evaluation()
    mcts = _searched(cfg, sims=50)
    assert mcts.root_proven(0) == 0  # every move reaches the limit: a proven draw
    assert mcts.root_value(0) == 0.0
    assert mcts.choose_move(0) in _legal(mcts.root_state(0))
    # at the limit already: the slot is inactive
    cfg = SearchConfig(max_plies=pos.ply)
    mcts = BatchedMCTS(1, 4, cfg)
    mcts.reset(0, pos.state)
    assert not mcts.is_active(0)


def _check_tree(mcts: BatchedMCTS, g: int, exact: bool) -> None:
    """Visits add up: an expanded node has at least 1 (its own evaluation) + the sum of its
    children's visits; exactly that when nothing in the tree is proven (``exact``)."""
    t = mcts._trees
    for x in range(mcts.tree_size(g)):
        k = t.num_children[g, x]
        assert t.virtual_visits[g, x] == 0
        if k == 0:
            continue
        f = t.first_child[g, x]
        child_sum = int(t.visits[g, f : f + k].sum())
        if exact:
            assert t.visits[g, x] == 1 + child_sum
        else:
            assert t.visits[g, x] >= 1 + child_sum


@pytest.mark.parametrize("leaves", [1, 4])
def test_visit_accounting(leaves):
    cfg = SearchConfig(leaves_per_step=leaves, simulations=120)
    mcts = BatchedMCTS(3, 4, cfg, seed=2)
    start = Position.start(4).state
    for g in range(3):
        mcts.reset(g, start)
    ev = HashEvaluator(4, seed=4)
    mcts.begin_search()
    steps = 0
    while True:
        states, games = mcts.select_leaves()
        if not len(states):
            break
        assert len(states) <= 3 * leaves
        if leaves == 1:
            assert len(set(games.tolist())) == len(games)
        steps += 1
        p, v, _ = ev.evaluate(states)
        mcts.expand_backup(p, v)
    for g in range(3):
        assert mcts.simulations_done(g) == 120
        # no terminal positions this close to the start: root = own eval + 120 simulations
        assert int(mcts._trees.visits[g, 0]) == 121
        assert mcts.root_visits(g)[1].sum() == 120
        assert not (mcts._trees.status[g, : mcts.tree_size(g)] != UNKNOWN).any()
        _check_tree(mcts, g, exact=True)
    if leaves > 1:
        assert steps < 121


def test_api_misuse_raises():
    mcts = BatchedMCTS(1, 4, SearchConfig())
    mcts.reset(0, Position.start(4).state)
    mcts.begin_search()
    states, _ = mcts.select_leaves()
    with pytest.raises(RuntimeError):
        mcts.select_leaves()
    with pytest.raises(ValueError):
        mcts.expand_backup(np.zeros((len(states), 3), np.float32), np.zeros(len(states)))
    with pytest.raises(ValueError):
        BatchedMCTS(1, 4, SearchConfig(node_budget=100))
    with pytest.raises(ValueError):
        SearchConfig(noise_weight=2.0)
    with pytest.raises(ValueError):
        BatchedMCTS(1, 5).reset(0, Position.start(4).state)


def test_repeated_game_indices_rejected():
    # a game listed twice would take more rows of the leaf buffer than it has
    mcts = BatchedMCTS(2, 4, SearchConfig(simulations=30, root_noise=False))
    for g in range(2):
        mcts.reset(g, Position.start(4).state)
    with pytest.raises(ValueError, match="repeat"):
        mcts.begin_search(games=[0, 0, 1])
    mcts.run(HashEvaluator(4), games=[0, 1])  # the search still works afterwards
    assert mcts.simulations_done(0) == mcts.simulations_done(1) == 30


def test_uniform_evaluator_masked_matches_unmasked():
    visits = []
    for masked in (False, True):
        mcts = BatchedMCTS(1, 4, SearchConfig().evaluation())
        mcts.reset(0, Position.from_tps(MID_4X4).state)
        mcts.run(UniformEvaluator(4, masked=masked), simulations=30)
        visits.append(mcts.root_visits(0)[1])
    np.testing.assert_array_equal(visits[0], visits[1])
