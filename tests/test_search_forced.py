"""Forced playouts and policy target pruning (KataGo, Wu 2019, section 3.2): the selection rule on
a hand-made root, the pruning formula against a brute-force search over visit counts, and both
switches in real searches."""

from __future__ import annotations

import math

import numpy as np
import pytest

from takzero.game import Position
from takzero.search import BatchedMCTS, HashEvaluator, SearchConfig
from takzero.search.config import pack_settings
from takzero.search.puct import puct_score
from takzero.search.readout import pruned_visits
from takzero.search.rules import exploration, select_root
from takzero.search.tree import UNKNOWN, new_games, new_trees

_TREES = new_trees(1, 2)
_CFG = pack_settings(SearchConfig())[0]


def _score(value_sum, visits, exploration_term, prior, first_play):
    """``puct_score`` of a child (today's formula reads neither the pools nor the settings)."""
    return puct_score(_TREES, _CFG, 0, 1, value_sum, visits, exploration_term, prior, first_play)


def _root(visits: list[int], values: list[float], priors: list[float]):
    """Pools of one game: node 0 the root, nodes 1..k its children (w from the root's view)."""
    k = len(visits)
    trees = new_trees(1, k + 1)
    trees.visits[0, 1:] = visits
    trees.visits[0, 0] = sum(visits) + 1
    trees.value_sum[0, 1:] = np.array(values, np.float32) * np.array(visits)
    trees.first_child[0, 0] = 1
    trees.num_children[0, 0] = k
    games = new_games(np.zeros(1, np.uint64), k, 1)
    games.mixed_prior[0] = priors
    return trees, games


def _select(cfg: SearchConfig, noise: bool, visits, values, priors) -> int:
    trees, games = _root(visits, values, priors)
    games.noise[0] = noise
    buf = np.zeros(len(visits), np.float64)
    settings = pack_settings(cfg)
    return int(select_root(trees, games, settings[0], 0, 0, buf, False))


@pytest.mark.parametrize(
    ("visits", "expect"),
    [
        # total 11: n_forced = sqrt(2 * P * 11) = 3.63, 2.57, 1.48 -> child 2 (1 < 2.57) first
        ([10, 1, 0], 2),
        # total 14: child 2 has 3 >= 2.65; child 3 has 1 < 1.67
        ([10, 3, 1], 3),
    ],
)
def test_forced_child_is_selected_first(visits, expect):
    priors = [0.6, 0.3, 0.1]
    values = [0.5, -0.9, -0.9]  # PUCT alone would go back to the strong first child
    cfg = SearchConfig(forced_playouts=True, forced_k=2.0, fpu_value=-1.0)
    assert _select(cfg, True, visits, values, priors) == expect
    off = SearchConfig(forced_playouts=False, fpu_value=-1.0)
    assert _select(off, True, visits, values, priors) == 1
    # forced playouts only in searches with root noise (self-play full searches)
    assert _select(cfg, False, visits, values, priors) == 1


@pytest.mark.parametrize(
    "visits",
    [
        [10, 4, 3],  # total 17: n_forced = 4.5, 3.2, 1.8: every child has its share
        [10, 3, 0],  # child 3 is below its 1.61 but unvisited: trying it is PUCT's choice
    ],
)
def test_no_forcing_once_visited_children_have_their_share(visits):
    priors = [0.6, 0.3, 0.1]
    values = [0.5, -0.9, -0.9]
    on = SearchConfig(forced_playouts=True, fpu_value=-1.0)
    off = SearchConfig(forced_playouts=False, fpu_value=-1.0)
    assert _select(on, True, visits, values, priors) == _select(off, True, visits, values, priors)


def _brute_force_pruned(n, w, prior, cs, k_forced):
    """Policy target pruning by trying every whole number of playouts to take away, scoring each
    count with ``puct_score`` (the child keeps its Q: value sum ``w * left / n``)."""
    total = n.sum()
    best = int(np.argmax(n))
    s_best = _score(w[best], n[best], cs, prior[best], 0.0)
    out = n.astype(np.float64).copy()
    for c in range(len(n)):
        if c == best or n[c] == 0:
            continue
        forced = math.sqrt(k_forced * prior[c] * total)
        keep = n[c]
        for taken in range(int(n[c])):  # keeping one visit or none both drop the child
            left = n[c] - taken
            if taken > forced:
                break
            if _score(w[c] * left / n[c], left, cs, prior[c], 0.0) <= s_best:
                keep = left
        out[c] = 0.0 if keep <= 1 else keep
    return out


def _searched(cfg: SearchConfig, seeds: int = 6, plies: int = 4):
    """Searched roots of a few random 4x4 positions: (mcts, game index) pairs."""
    rng = np.random.default_rng(3)
    mcts = BatchedMCTS(seeds, 4, cfg, seed=5)
    for g in range(seeds):
        pos = Position.start(4)
        for _ in range(plies):
            codes = pos.legal_move_codes()
            pos = pos.play(int(codes[rng.integers(len(codes))]))
        mcts.reset(g, pos.state)
    mcts.run(HashEvaluator(4, seed=1, sharpness=2.0))
    return mcts


def test_pruning_matches_brute_force():
    cfg = SearchConfig(simulations=120, forced_playouts=True, policy_target_pruning=True,
                       noise_weight=0.25, reuse_tree=False)
    mcts = _searched(cfg)
    trees, games, settings = mcts._trees, mcts._games, mcts._settings
    pruned_any = 0
    for g in range(mcts.num_games):
        f, k = int(trees.first_child[g, 0]), int(trees.num_children[g, 0])
        if (trees.status[g, f : f + k] != UNKNOWN).any():
            continue
        n = trees.visits[g, f : f + k].astype(np.float64)
        w = trees.value_sum[g, f : f + k].astype(np.float64)
        prior = games.mixed_prior[g, :k].astype(np.float64)
        cs = exploration(trees, settings[0], g, 0, np.float64(trees.visits[g, 0]))
        expect = _brute_force_pruned(n, w, prior, cs, cfg.forced_k)
        got = pruned_visits(trees, games, settings, mcts.config, g)
        np.testing.assert_array_equal(got, expect)
        best = int(np.argmax(n))
        assert got[best] == n[best]
        assert (got <= n).all()
        pruned_any += int((got < n).sum())
        # the policy target is the normalised pruned counts
        _, probs = mcts.policy_target(g)
        np.testing.assert_allclose(probs, got / got.sum(), rtol=1e-6)
    assert pruned_any > 0  # the searches did give forced visits to prune


def _deficits(mcts: BatchedMCTS) -> np.ndarray:
    """n_forced(c) - N(c) of every visited root child of every game, at the end of the search."""
    trees, games = mcts._trees, mcts._games
    out = []
    for g in range(mcts.num_games):
        f, k = int(trees.first_child[g, 0]), int(trees.num_children[g, 0])
        n = trees.visits[g, f : f + k].astype(np.float64)
        forced = np.sqrt(2.0 * games.mixed_prior[g, :k].astype(np.float64) * n.sum())
        out.append((forced - n)[n > 0])
    return np.concatenate(out)


def test_forced_playouts_top_up_visited_children():
    """With forced playouts every tried root child ends within one visit of its n_forced; plain
    PUCT leaves many far below, and spends more on the best child."""
    base = dict(simulations=120, noise_weight=0.25, reuse_tree=False)
    plain = _searched(SearchConfig(**base))
    forced = _searched(SearchConfig(**base, forced_playouts=True))
    assert (_deficits(forced) < 1.0).all()
    assert (_deficits(plain) >= 1.0).sum() > 5

    def best_share(m: BatchedMCTS) -> float:
        return float(np.mean([m.root_visits(g)[1].max() / m.root_visits(g)[1].sum() for g in range(6)]))

    assert best_share(forced) < best_share(plain)


def test_switches_are_validated_and_off_in_evaluation():
    with pytest.raises(ValueError, match="forced_k"):
        SearchConfig(forced_k=0.0)
    with pytest.raises(ValueError, match="gumbel"):
        SearchConfig(gumbel=True, forced_playouts=True)
    ev = SearchConfig(forced_playouts=True, policy_target_pruning=True).evaluation()
    assert not ev.forced_playouts and not ev.policy_target_pruning

