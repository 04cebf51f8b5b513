"""The PUCT formulas (AlphaZero) with first-play urgency (KataGo) and Dirichlet root noise; the
selection rules that use them, the table of rules and their dispatch are in
``takzero.search.rules``.

The formulas (sources in ``takzero.search.config``), each written once here:

* ``exploration_log`` / ``exploration_constant`` (exploration rules): ``c(s) * sqrt(N(s))``
  with the AlphaZero log schedule or a constant c_puct;
* ``puct_score``: ``Q(a) + c(s) * P(a) * sqrt(N(s)) / (1 + N(a))``, with ``Q`` the first-play
  value for an unvisited child; used at the root and below it, and by policy target pruning. It
  takes the pools and the settings, so a per-child bonus from the node arrays goes here;
* ``first_play_reduction`` / ``first_play_fixed`` (first-play rules): the Q of an unvisited
  child, ``Q(parent) - reduction * sqrt(prior mass of the visited children)``, or the fixed
  ``fpu_value``;
* ``draw_score``: a child proven drawn scores its exact value 0 plus the exploration term;
* ``mix_root_noise``: the root priors ``(1 - eps) * P + eps * Dir(alpha)``;
* ``forced_playouts``: KataGo's ``n_forced(c) = sqrt(k * P(c) * sum N)`` (the root rule
  "forced");
* ``pruned_visit_count``: policy target pruning's least visit count a child can be cut back to
  (``takzero.search.readout.pruned_visits``), found by evaluating ``puct_score``, not by solving
  it backwards.

Two properties of ``puct_score`` that other code relies on (asserted on the function itself by
``tests/test_search_puct.py``, so a new formula that breaks them fails a test): an unvisited
child's score is non-decreasing in its prior (``rules.select_prefix`` stops at the first unvisited
child), and at a fixed Q a visited child's score is non-increasing in its visit count
(``pruned_visit_count`` bisects on it).

The rules take the pools whole (``trees``: ``takzero.search.tree.Trees``, ``games``: ``Games``)
and index the 2-D arrays with ``[g, i]``; the step kernels hand them over with their memory
owners cleared (``numba_ext.unowned_tuple``), so passing them costs no reference counting.
Functions are numba ``@njit(cache=True)``, inlined into the step kernels
(``takzero.search.steps``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from takzero.search.rng import draw_dirichlet


@njit(cache=True, error_model="numpy", inline="always")
def exploration_log(trees, cfg, g: int | np.integer, x: int | np.integer, parent_visits: float) -> float:
    """The exploration rule "log" (``takzero.search.rules``): ``c(s) * sqrt(N(s))`` of PUCT for
    node ``x`` of game ``g`` with ``parent_visits`` visits (float64, its virtual visits included;
    at least 1 under the root), ``c(s) = c_init + log((1 + N(s) + c_base) / c_base)`` (the
    AlphaZero log schedule, ``c_base > 0``). ``cfg``: the packed settings record."""
    c_puct = cfg["c_init"]
    c_base = cfg["c_base"]
    c_puct += np.log((1.0 + parent_visits + c_base) / c_base)
    return c_puct * np.sqrt(max(parent_visits, 1.0))


@njit(cache=True, error_model="numpy", inline="always")
def exploration_constant(trees, cfg, g: int | np.integer, x: int | np.integer,
                         parent_visits: float) -> float:
    """The exploration rule "constant": ``c_init * sqrt(N(s))`` (``c_base == 0``); arguments as
    ``exploration_log``."""
    return cfg["c_init"] * np.sqrt(max(parent_visits, 1.0))


@njit(cache=True, error_model="numpy", inline="always")
def puct_score(trees, cfg, g: int | np.integer, c: int | np.integer, value_sum: float, visits: float,
               exploration_term: float, prior: float, first_play: float) -> float:
    """PUCT score ``Q + U`` of child ``c`` of game ``g`` (float64 throughout); ``trees``: the pools
    (``takzero.search.tree.Trees``), ``cfg``: the packed settings record (a per-child bonus reads
    both; the formula below reads neither).

    ``value_sum``: the child's value sum less its virtual loss, ``visits``: its visits plus
    virtual visits (or the hypothetical counts of ``pruned_visit_count``), ``exploration_term``:
    the exploration rule of the parent, ``prior``: its prior (noised at a PUCT root),
    ``first_play``: the first-play rule of the parent. Visited (``visits > 0``): ``value_sum /
    visits + exploration_term * prior / (1 + visits)``, written with one division; unvisited:
    ``first_play + exploration_term * prior``. Branch-free (the division is guarded, then one
    select), so the root's scan over all children vectorises."""
    den = visits * (1.0 + visits)
    visited = (value_sum * (1.0 + visits) + exploration_term * prior * visits) / (
        den if den > 0.0 else 1.0
    )
    return visited if visits > 0.0 else first_play + exploration_term * prior


@njit(cache=True, error_model="numpy", inline="always")
def first_play_reduction(trees, cfg, g: int | np.integer, x: int | np.integer, reduction: float,
                         mass: float) -> float:
    """The first-play rule "reduction" (KataGo): the Q given to an unvisited child of node ``x``
    of game ``g``, ``Q(x) - reduction * sqrt(mass)``, with ``Q(x) = -value_sum / visits`` of
    ``x`` (0 before its first visit) and ``mass`` the prior mass of the visited children."""
    parent_visits = trees.visits[g, x]
    parent_q = -trees.value_sum[g, x] / parent_visits if parent_visits > 0 else 0.0
    return parent_q - reduction * np.sqrt(mass)


@njit(cache=True, error_model="numpy", inline="always")
def first_play_fixed(trees, cfg, g: int | np.integer, x: int | np.integer, reduction: float,
                     mass: float) -> float:
    """The first-play rule "fixed": the ``fpu_value`` setting; arguments as
    ``first_play_reduction``."""
    return cfg["fpu_value"]


@njit(cache=True, error_model="numpy", inline="always")
def draw_score(visits: float, exploration_term: float, prior: float) -> float:
    """Score of a child proven drawn: its exact value 0 plus the exploration term
    ``exploration_term * prior / (1 + visits)`` (``visits``: visits plus virtual visits)."""
    return exploration_term * prior / (1.0 + visits)


@njit(cache=True, error_model="numpy", inline="always")
def forced_playouts(k: float, prior: float, total: float) -> float:
    """KataGo's forced playouts of a root child (Wu 2019, section 3.2): ``sqrt(k * P(c) * sum_b
    N(b))`` with ``prior`` = P(c) (the noised root prior), ``total`` the visits of all the root's
    children, ``k`` the ``forced_k`` setting (KataGo: 2). Float64 visits."""
    return np.sqrt(k * prior * total)


@njit(cache=True, error_model="numpy")
def pruned_visit_count(trees, cfg, g: int | np.integer, c: int | np.integer, value_sum: float,
                       visits: float, least: float, exploration_term: float, prior: float,
                       bar: float) -> float:
    """The least whole visit count ``N'`` in ``[least, visits]`` at which child ``c`` of game
    ``g``, keeping its mean value ``Q = value_sum / visits``, scores ``puct_score(trees, cfg, g,
    c, Q * N', N', exploration_term, prior, 0) <= bar``; ``visits`` when none does (float64
    throughout; ``1 <= least <= visits``, whole numbers).

    Policy target pruning (KataGo, Wu 2019, section 3.2) takes visits back from a child while its
    PUCT score stays at most ``bar``, the score of the most visited child. Bisection over the
    visit count: it needs ``puct_score`` non-increasing in the visit count at a fixed Q (see the
    module docstring). The value sum at ``N'`` visits is ``value_sum * N' / visits``, which is
    ``value_sum`` exactly at ``N' = visits``."""
    if puct_score(trees, cfg, g, c, value_sum, visits, exploration_term, prior, 0.0) > bar:
        return visits
    lo = least
    hi = visits  # puct_score at hi is <= bar; the answer lies in [lo, hi]
    while lo < hi:
        mid = np.floor(0.5 * (lo + hi))
        score = puct_score(trees, cfg, g, c, value_sum * mid / visits, mid, exploration_term, prior, 0.0)
        if score <= bar:
            hi = mid
        else:
            lo = mid + 1.0
    return hi


@njit(cache=True, error_model="numpy", inline="always")
def mix_root_noise(trees, games, cfg, g: int | np.integer, f: int, nc: int) -> None:
    """Set the PUCT root priors of game ``g`` for a new search (root children ``f .. f + nc``):
    ``mixed_prior = (1 - eps) * P + eps * eta`` with ``eta ~ Dir(alpha)`` drawn into
    ``dirichlet_noise`` when the search has noise (``eps = noise_weight`` > 0; ``alpha =
    dirichlet_alpha``, or ``dirichlet_alpha_scale / nc`` when that is 0), else ``mixed_prior =
    P``. ``trees``, ``games``: the pools (``takzero.search.tree``)."""
    eta = games.dirichlet_noise[g]
    mixed_prior = games.mixed_prior  # written arrays bound at the top (steps.py docstring)
    eps = cfg["noise_weight"]
    noisy = games.noise[g] and eps > 0.0
    if noisy:
        alpha = cfg["dirichlet_alpha"]
        if alpha <= 0.0:
            alpha = cfg["dirichlet_alpha_scale"] / nc
        draw_dirichlet(games.rng, g, eta, nc, alpha)
    keep = 1.0 - eps if noisy else 1.0
    mix = eps if noisy else 0.0
    for i in range(nc):
        mixed_prior[g, i] = keep * trees.prior[g, f + i] + mix * eta[i]
