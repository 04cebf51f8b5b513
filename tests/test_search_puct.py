"""Properties of the PUCT score (``takzero.search.puct.puct_score``) that the search relies on,
asserted on the compiled function itself, so that a new formula that breaks one fails here rather
than silently changing the search:

* ``select_prefix`` stops its scan at the first unvisited child: that needs an unvisited child's
  score to be non-decreasing in its prior (children are stored by decreasing prior, all share the
  first-play value);
* ``pruned_visit_count`` (policy target pruning) bisects over the visit count: that needs a
  visited child's score, at a fixed Q, to be non-increasing in its visit count.

Also: ``pruned_visit_count`` against a scan over every visit count, and ``select_prefix`` against
a full scan of the children on random nodes.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from takzero.search.config import SearchConfig, pack_settings
from takzero.search.puct import pruned_visit_count, puct_score
from takzero.search.rules import exploration, select_prefix
from takzero.search.tree import UNKNOWN, new_games, new_trees

#: ``puct_score`` and ``pruned_visit_count`` take the pools and the settings (for a per-child bonus;
#: today's formula reads neither): one empty tree and the default settings.
_TREES = new_trees(1, 2)
_CFG = pack_settings(SearchConfig())[0]


def _score(value_sum, visits, exploration_term, prior, first_play):
    return puct_score(_TREES, _CFG, 0, 1, value_sum, visits, exploration_term, prior, first_play)

_unit = st.floats(0.0, 1.0, allow_nan=False)
_value = st.floats(-1.0, 1.0, allow_nan=False)
_cs = st.floats(0.0, 50.0, allow_nan=False)
_visits = st.integers(1, 100_000)


@settings(max_examples=300, deadline=None)
@given(cs=_cs, fpu=_value, pr_a=_unit, pr_b=_unit, num=_value)
def test_unvisited_score_grows_with_the_prior(cs, fpu, pr_a, pr_b, num):
    lo, hi = sorted((pr_a, pr_b))
    assert _score(0.0, 0.0, cs, hi, fpu) >= _score(0.0, 0.0, cs, lo, fpu)
    # and it reads nothing else of the child (select_prefix passes no value sum)
    assert _score(num, 0.0, cs, hi, fpu) == _score(0.0, 0.0, cs, hi, fpu)


@settings(max_examples=300, deadline=None)
@given(q=_value, visits=_visits, cs=_cs, pr=_unit)
def test_visited_score_falls_with_the_visit_count(q, visits, cs, pr):
    n0 = float(visits)
    n1 = n0 + 1.0
    s0 = _score(q * n0, n0, cs, pr, 0.0)
    s1 = _score(q * n1, n1, cs, pr, 0.0)
    # up to the rounding of the one division (a few ulps of the score)
    assert s1 <= s0 + 8 * np.finfo(np.float64).eps * max(1.0, abs(s0))


def test_visited_score_falls_on_a_grid():
    """The same property exactly (no rounding slack) where the exploration term dominates
    rounding: every visit count 1..2,000 for a grid of Q, priors and exploration terms."""
    counts = np.arange(1.0, 2001.0)
    for q in (-1.0, -0.3, 0.0, 0.45, 1.0):
        for pr in (0.01, 0.2, 1.0):
            for cs in (0.5, 2.5, 40.0):
                scores = np.array([_score(q * n, n, cs, pr, 0.0) for n in counts])
                assert (np.diff(scores) < 0).all(), (q, pr, cs)


@settings(max_examples=200, deadline=None)
@given(q=_value, visits=st.integers(1, 400), cs=st.floats(0.1, 20.0), pr=st.floats(0.01, 1.0),
       bar_offset=st.floats(-0.5, 3.0), data=st.data())
def test_pruned_visit_count_is_the_least_count_under_the_bar(q, visits, cs, pr, bar_offset, data):
    """Bisection against a scan of every count (where the exploration term's steps are far above
    rounding, so the score is strictly monotone)."""
    n = float(visits)
    w = q * n
    least = float(data.draw(st.integers(1, visits)))
    bar = q + bar_offset
    got = pruned_visit_count(_TREES, _CFG, 0, 1, w, n, least, cs, pr, bar)
    under = [m for m in np.arange(least, n + 1.0) if _score(w * m / n, m, cs, pr, 0.0) <= bar]
    assert got == (under[0] if under else n)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), k=st.integers(1, 12), seed=st.integers(0, 2**31))
def test_select_prefix_equals_a_full_scan(data, k, seed):
    """A node whose visited children form a prefix (the search's invariant): the prefix scan
    picks the child a scan of every child by ``puct_score`` picks (first maximum)."""
    rng = np.random.default_rng(seed)
    visited = data.draw(st.integers(0, k))
    priors = np.sort(rng.dirichlet(np.ones(k)))[::-1].astype(np.float32)
    trees = new_trees(1, k + 1)
    visits, value_sum, prior = trees.visits, trees.value_sum, trees.prior
    visits[0, 1 : 1 + visited] = rng.integers(1, 30, visited)
    value_sum[0, 1 : 1 + visited] = rng.uniform(-1, 1, visited) * visits[0, 1 : 1 + visited]
    visits[0, 0] = visits[0, 1:].sum() + 1
    value_sum[0, 0] = rng.uniform(-1, 1) * visits[0, 0]
    prior[0, 1:] = priors
    status = trees.status
    trees.first_child[0, 0] = 1
    trees.num_children[0, 0] = k
    cfg = pack_settings(SearchConfig())[0]
    games = new_games(np.zeros(1, np.uint64), k, 1)
    got = select_prefix(trees, games, cfg, 0, 0, np.zeros(k, np.float64), False)
    exploration_term = exploration(trees, cfg, 0, 0, np.float64(visits[0, 0]))
    mass = float(prior[0, 1 : 1 + visited].astype(np.float64).sum())
    first_play = -float(value_sum[0, 0]) / float(visits[0, 0]) - cfg["fpu_reduction"] * np.sqrt(mass)
    scores = [_score(float(value_sum[0, c]), float(visits[0, c]), exploration_term,
                     float(prior[0, c]), first_play) for c in range(1, k + 1)]
    assert status[0, 1:].max() == UNKNOWN
    assert got == 1 + int(np.argmax(scores))
