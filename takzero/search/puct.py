"""PUCT selection (AlphaZero) with first-play urgency (KataGo) and Dirichlet root noise.

The formulas (sources in ``takzero.search.config``), each written once here:

* ``exploration``: ``c(s) * sqrt(N(s))`` with the AlphaZero log schedule or a constant c_puct;
* ``puct_score``: ``Q(a) + c(s) * P(a) * sqrt(N(s)) / (1 + N(a))``, with ``Q`` the first-play
  value for an unvisited child; used at the root (``select_root``) and below it
  (``select_prefix``);
* ``first_play_value``: the Q of an unvisited child, ``Q(parent) - reduction * sqrt(prior mass of
  the visited children)``, or the fixed ``fpu_value``;
* ``draw_score``: a child proven drawn scores its exact value 0 plus the exploration term;
* ``mix_root_noise``: the root priors ``(1 - eps) * P + eps * Dir(alpha)``;
* ``forced_playouts``: KataGo's ``n_forced(c) = sqrt(k * P(c) * sum N)``, and at a noised root
  (``mcts.forced_playouts``) the first visited child below it is selected before PUCT
  (``select_root``);
* ``pruned_visit_count``: policy target pruning's least visit count a child can be cut back to
  (``takzero.search.readout.pruned_visits``), found by evaluating ``puct_score``, not by solving
  it backwards.

Two properties of ``puct_score`` that other code relies on (asserted on the function itself by
``tests/test_search_puct.py``, so a new formula that breaks them fails a test): an unvisited
child's score is non-decreasing in its prior (``select_prefix`` stops at the first unvisited
child), and at a fixed Q a visited child's score is non-increasing in its visit count
(``pruned_visit_count`` bisects on it).

A proven win is taken at once and a proven loss is never entered (MCTS-Solver). Hot-path helpers
take the 2-D pool arrays (``visits``, ``value_sum``, ``prior``, ... of ``takzero.search.tree``)
and index them with ``[g, i]``: taking row views or unpacking the named
tuples per call costs reference-count updates that dominate otherwise. Functions are numba
``@njit(cache=True)``, the selection helpers inlined into the step kernels
(``takzero.search.steps``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from takzero.search.numba_ext import prefetch
from takzero.search.rng import draw_dirichlet
from takzero.search.tree import DRAW, LOSS, UNKNOWN, WIN


@njit(cache=True, error_model="numpy", inline="always")
def exploration(cfg, parent_visits: float) -> float:
    """``c(s) * sqrt(N(s))`` of PUCT for a parent with ``parent_visits`` visits (float64; at least
    1 under the root): ``c(s) = c_init + log((1 + N(s) + c_base) / c_base)`` when ``c_base > 0``
    (the AlphaZero log schedule), else ``c_init``. ``cfg``: the packed settings record."""
    c_puct = cfg["c_init"]
    c_base = cfg["c_base"]
    if c_base > 0.0:
        c_puct += np.log((1.0 + parent_visits + c_base) / c_base)
    return c_puct * np.sqrt(max(parent_visits, 1.0))


@njit(cache=True, error_model="numpy", inline="always")
def puct_score(value_sum: float, visits: float, exploration_term: float, prior: float,
               first_play: float) -> float:  # fmt: skip
    """PUCT score ``Q + U`` of a child (float64 throughout).

    ``value_sum``: the child's value sum less its virtual loss, ``visits``: its visits plus
    virtual visits, ``exploration_term``: ``exploration`` of the parent, ``prior``: its prior,
    ``first_play``: ``first_play_value`` of the parent. Visited (``visits > 0``): ``value_sum /
    visits + exploration_term * prior / (1 + visits)``, written with one division; unvisited:
    ``first_play + exploration_term * prior``. Branch-free (the division is guarded, then one
    select), so the root's scan over all children vectorises."""
    den = visits * (1.0 + visits)
    visited = (value_sum * (1.0 + visits) + exploration_term * prior * visits) / (
        den if den > 0.0 else 1.0
    )
    return visited if visits > 0.0 else first_play + exploration_term * prior


@njit(cache=True, error_model="numpy", inline="always")
def first_play_value(fixed: float, parent_visits, parent_value_sum, reduction: float,
                     mass: float) -> float:  # fmt: skip
    """Q given to an unvisited child (first-play urgency, KataGo): ``fixed`` unless it is NaN
    (the ``fpu_value`` setting), else ``Q(parent) - reduction * sqrt(mass)``, with ``Q(parent) =
    -parent_value_sum / parent_visits`` (0 before its first visit) and ``mass`` the prior mass of
    the visited children."""
    if not np.isnan(fixed):
        return fixed
    parent_q = -parent_value_sum / parent_visits if parent_visits > 0 else 0.0
    return parent_q - reduction * np.sqrt(mass)


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
def pruned_visit_count(value_sum: float, visits: float, least: float, exploration_term: float,
                       prior: float, bar: float) -> float:  # fmt: skip
    """The least whole visit count ``N'`` in ``[least, visits]`` at which a child keeping its
    mean value ``Q = value_sum / visits`` scores ``puct_score(Q * N', N', exploration_term,
    prior, 0) <= bar``; ``visits`` when none does (float64 throughout; ``1 <= least <= visits``,
    whole numbers).

    Policy target pruning (KataGo, Wu 2019, section 3.2) takes visits back from a child while its
    PUCT score stays at most ``bar``, the score of the most visited child. Bisection over the
    visit count: it needs ``puct_score`` non-increasing in the visit count at a fixed Q (see the
    module docstring). The value sum at ``N'`` visits is ``value_sum * N' / visits``, which is
    ``value_sum`` exactly at ``N' = visits``."""
    if puct_score(value_sum, visits, exploration_term, prior, 0.0) > bar:
        return visits
    lo = least
    hi = visits  # puct_score at hi is <= bar; the answer lies in [lo, hi]
    while lo < hi:
        mid = np.floor(0.5 * (lo + hi))
        if puct_score(value_sum * mid / visits, mid, exploration_term, prior, 0.0) <= bar:
            hi = mid
        else:
            lo = mid + 1.0
    return hi


@njit(cache=True, error_model="numpy", inline="always")
def select_prefix(visits, value_sum, prior, move, status, virtual_visits, first_child,
                  num_children, cfg, g: int | np.integer, x: int, use_virtual: bool) -> int:  # fmt: skip
    """PUCT at a non-root node ``x`` of game ``g``: the child index to descend into, -1 if every
    child is a proven loss. Children are stored by decreasing prior and a non-root node always
    selects either a visited child or the first unvisited one, hence its visited children form a
    prefix: the scan stops at the first unvisited child. Same result as a full scan, ties to the
    lowest index. The property of the formula this needs: all unvisited children share the
    first-play value, and an unvisited child's ``puct_score`` is non-decreasing in its prior (for
    ``exploration_term >= 0``), so the first unvisited child scores at least as high as every
    later one (asserted on ``puct_score`` by ``tests/test_search_puct.py``). The pools are
    those of ``takzero.search.tree.Trees`` (2-D, indexed ``[g, node]``). ``use_virtual``:
    virtual visits may be pending; without them ``virtual_visits`` is all zero and not read."""
    f = first_child[g, x]
    nc = num_children[g, x]
    # the child taken next reads these at its own index (in the first cache line of the children
    # when the visited prefix is short): start the loads now, alongside the scan's own misses,
    # instead of one after the other
    prefetch(move, g, f)
    prefetch(num_children, g, f)
    prefetch(first_child, g, f)
    exploration_term = exploration(
        cfg, np.float64(visits[g, x] + (virtual_visits[g, x] if use_virtual else 0))
    )
    virtual_loss = cfg["virtual_loss"]
    best = -np.inf
    best_c = -1
    mass = 0.0
    unvisited = -1
    for c in range(f, f + nc):
        s = status[g, c]
        effective_visits = np.float64(visits[g, c] + (virtual_visits[g, c] if use_virtual else 0))
        if s == UNKNOWN and effective_visits == 0.0:
            unvisited = c
            break
        if s == LOSS:
            continue
        if s == WIN:
            return c
        child_prior = np.float64(prior[g, c])
        if effective_visits > 0.0:
            mass += child_prior
        if s == DRAW:
            score = draw_score(effective_visits, exploration_term, child_prior)
        else:
            child_sum = np.float64(value_sum[g, c]) - (
                virtual_loss * virtual_visits[g, c] if use_virtual else 0.0
            )
            score = puct_score(child_sum, effective_visits, exploration_term, child_prior, 0.0)
        if score > best:
            best = score
            best_c = c
    if unvisited >= 0:
        first_play = first_play_value(
            cfg["fpu_value"], visits[g, x], value_sum[g, x], cfg["fpu_reduction"], mass
        )
        unvisited_score = puct_score(
            0.0, 0.0, exploration_term, np.float64(prior[g, unvisited]), first_play
        )
        if unvisited_score > best or (unvisited_score == best and unvisited < best_c):
            return unvisited
    return best_c


@njit(cache=True, error_model="numpy", inline="always")
def select_root(visits, value_sum, status, virtual_visits, first_child, num_children, noise,
                mixed_prior, cfg, g: int | np.integer, score_buf: np.ndarray,
                use_virtual: bool) -> int:  # fmt: skip
    """PUCT at the root of game ``g``: a full scan (noise mixes the priors, so no prefix
    property); the child index, -1 if every child is a proven loss. The mixed priors
    ``mixed_prior`` ((G, A) float32, by child slot) are set once per search (``mix_root_noise``);
    ``noise`` ((G,) bool): the search has root noise; the first-play reduction is
    ``fpu_reduction_root``, 0 while noise is on. The scores are computed branch-free into
    ``score_buf`` (float64, length >= the children); proven children are then fixed up (a win is
    taken at once, a loss scores -inf, a draw ``draw_score``) and the first maximum is taken.
    Indices are cast to unsigned so that numba drops its negative-index handling, which keeps
    these loops several times faster. ``use_virtual``: virtual visits may be pending (more than
    one leaf per game per step).
    With ``forced_playouts`` on and root noise in this search, and no child proven, the first
    child that has been visited but has fewer visits (plus virtual visits) than
    ``forced_playouts(forced_k, P, sum N)`` is taken before the scores are computed (KataGo: only
    children that received playouts are forced; which moves get tried stays PUCT's choice)."""
    ug = np.uint64(g)
    f = first_child[ug, 0]
    nc = num_children[ug, 0]
    exploration_term = exploration(
        cfg, np.float64(visits[ug, 0] + (virtual_visits[ug, 0] if use_virtual else 0))
    )
    virtual_loss = cfg["virtual_loss"]
    proven = 0
    for i in range(nc):
        proven |= status[ug, np.uint64(f + i)]
    if cfg["forced_playouts"] and noise[ug] and proven == 0:
        total = 0.0
        for i in range(nc):
            c = np.uint64(f + i)
            total += np.float64(visits[ug, c] + (virtual_visits[ug, c] if use_virtual else 0))
        if total > 0.0:
            forced_k = cfg["forced_k"]
            for i in range(nc):
                c = np.uint64(f + i)
                effective_visits = np.float64(
                    visits[ug, c] + (virtual_visits[ug, c] if use_virtual else 0)
                )
                child_prior = np.float64(mixed_prior[ug, np.uint64(i)])
                if effective_visits > 0.0 and effective_visits < forced_playouts(
                    forced_k, child_prior, total
                ):
                    return f + i
    fpu_value = cfg["fpu_value"]
    reduction = 0.0 if noise[ug] and cfg["noise_weight"] > 0.0 else cfg["fpu_reduction_root"]
    mass = 0.0
    if np.isnan(fpu_value) and reduction != 0.0:  # prior mass of the visited children (in order)
        for i in range(nc):
            c = np.uint64(f + i)
            effective_visits = visits[ug, c] + (virtual_visits[ug, c] if use_virtual else 0)
            mass += np.float64(mixed_prior[ug, np.uint64(i)]) if effective_visits > 0 else 0.0
    first_play = first_play_value(fpu_value, visits[ug, 0], value_sum[ug, 0], reduction, mass)
    for i in range(nc):
        c = np.uint64(f + i)
        child_prior = np.float64(mixed_prior[ug, np.uint64(i)])
        if use_virtual:
            effective_visits = np.float64(visits[ug, c] + virtual_visits[ug, c])
            child_sum = np.float64(value_sum[ug, c]) - virtual_loss * virtual_visits[ug, c]
        else:
            effective_visits = np.float64(visits[ug, c])
            child_sum = np.float64(value_sum[ug, c])
        score_buf[i] = puct_score(
            child_sum, effective_visits, exploration_term, child_prior, first_play
        )
    if proven == 0:
        best = score_buf[0]
        best_i = 0
        for i in range(1, nc):
            if score_buf[i] > best:
                best = score_buf[i]
                best_i = i
        return f + best_i
    # proven children: a win is taken at once, a loss never, a draw scores its exact value 0
    for i in range(nc):
        c = np.uint64(f + i)
        s = status[ug, c]
        if s != UNKNOWN:
            if s == WIN:
                return f + i
            if s == LOSS:
                score_buf[i] = -np.inf
            else:
                effective_visits = np.float64(
                    visits[ug, c] + (virtual_visits[ug, c] if use_virtual else 0)
                )
                score_buf[i] = draw_score(
                    effective_visits, exploration_term, np.float64(mixed_prior[ug, np.uint64(i)])
                )
    best = -np.inf
    best_c = -1
    for i in range(nc):
        if score_buf[i] > best:
            best = score_buf[i]
            best_c = f + i
    return best_c


@njit(cache=True, error_model="numpy", inline="always")
def mix_root_noise(trees, games, cfg, g: int | np.integer, f: int, nc: int) -> None:
    """Set the PUCT root priors of game ``g`` for a new search (root children ``f .. f + nc``):
    ``mixed_prior = (1 - eps) * P + eps * eta`` with ``eta ~ Dir(alpha)`` drawn into
    ``dirichlet_noise`` when the search has noise (``eps = noise_weight`` > 0; ``alpha =
    dirichlet_alpha``, or ``dirichlet_alpha_scale / nc`` when that is 0), else ``mixed_prior =
    P``. ``trees``, ``games``: the pools (``takzero.search.tree``)."""
    eta = games.dirichlet_noise[g]
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
        games.mixed_prior[g, i] = keep * trees.prior[g, f + i] + mix * eta[i]
