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
take the 2-D pool arrays and index them with ``[g, i]``: taking row views or unpacking the named
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
def exploration(cfg, nx: float) -> float:
    """``c(s) * sqrt(N(s))`` of PUCT for a parent with ``nx`` visits (float64; at least 1 under
    the root): ``c(s) = c_init + log((1 + N(s) + c_base) / c_base)`` when ``c_base > 0`` (the
    AlphaZero log schedule), else ``c_init``. ``cfg``: the packed settings record."""
    cp = cfg["c_init"]
    cb = cfg["c_base"]
    if cb > 0.0:
        cp += np.log((1.0 + nx + cb) / cb)
    return cp * np.sqrt(max(nx, 1.0))


@njit(cache=True, error_model="numpy", inline="always")
def puct_score(num: float, nn: float, cs: float, pr: float, fpu: float) -> float:
    """PUCT score ``Q + U`` of a child (float64 throughout).

    ``num``: the child's value sum less its virtual loss, ``nn``: its visits plus virtual visits,
    ``cs``: ``exploration`` of the parent, ``pr``: its prior, ``fpu``: ``first_play_value`` of the
    parent. Visited (``nn > 0``): ``num / nn + cs * pr / (1 + nn)``, written with one division;
    unvisited: ``fpu + cs * pr``. Branch-free (the division is guarded, then one select), so the
    root's scan over all children vectorises."""
    den = nn * (1.0 + nn)
    visited = (num * (1.0 + nn) + cs * pr * nn) / (den if den > 0.0 else 1.0)
    return visited if nn > 0.0 else fpu + cs * pr


@njit(cache=True, error_model="numpy", inline="always")
def first_play_value(fixed: float, n_self, w_self, reduction: float, mass: float) -> float:
    """Q given to an unvisited child (first-play urgency, KataGo): ``fixed`` unless it is NaN
    (the ``fpu_value`` setting), else ``Q(parent) - reduction * sqrt(mass)``, with ``Q(parent) =
    -w_self / n_self`` (0 before its first visit) and ``mass`` the prior mass of the visited
    children."""
    if not np.isnan(fixed):
        return fixed
    pq = -w_self / n_self if n_self > 0 else 0.0
    return pq - reduction * np.sqrt(mass)


@njit(cache=True, error_model="numpy", inline="always")
def draw_score(nn: float, cs: float, pr: float) -> float:
    """Score of a child proven drawn: its exact value 0 plus the exploration term
    ``cs * pr / (1 + nn)`` (``nn``: visits plus virtual visits)."""
    return cs * pr / (1.0 + nn)


@njit(cache=True, error_model="numpy", inline="always")
def forced_playouts(k: float, prior: float, total: float) -> float:
    """KataGo's forced playouts of a root child (Wu 2019, section 3.2): ``sqrt(k * P(c) * sum_b
    N(b))`` with ``prior`` = P(c) (the noised root prior), ``total`` the visits of all the root's
    children, ``k`` the ``forced_k`` setting (KataGo: 2). Float64 visits."""
    return np.sqrt(k * prior * total)


@njit(cache=True, error_model="numpy")
def pruned_visit_count(value_sum: float, visits: float, least: float, cs: float, pr: float,
                       bar: float) -> float:  # fmt: skip
    """The least whole visit count ``N'`` in ``[least, visits]`` at which a child keeping its
    mean value ``Q = value_sum / visits`` scores ``puct_score(Q * N', N', cs, pr, 0) <= bar``;
    ``visits`` when none does (float64 throughout; ``1 <= least <= visits``, whole numbers).

    Policy target pruning (KataGo, Wu 2019, section 3.2) takes visits back from a child while its
    PUCT score stays at most ``bar``, the score of the most visited child. Bisection over the
    visit count: it needs ``puct_score`` non-increasing in the visit count at a fixed Q (see the
    module docstring). The value sum at ``N'`` visits is ``value_sum * N' / visits``, which is
    ``value_sum`` exactly at ``N' = visits``."""
    if puct_score(value_sum, visits, cs, pr, 0.0) > bar:
        return visits
    lo = least
    hi = visits  # puct_score at hi is <= bar; the answer lies in [lo, hi]
    while lo < hi:
        mid = np.floor(0.5 * (lo + hi))
        if puct_score(value_sum * mid / visits, mid, cs, pr, 0.0) <= bar:
            hi = mid
        else:
            lo = mid + 1.0
    return hi


@njit(cache=True, error_model="numpy", inline="always")
def select_prefix(n, w, p, mv, status, vl, first, nch, cfg, g: int, x: int, use_vl: bool) -> int:
    """PUCT at a non-root node ``x`` of game ``g``: the child index to descend into, -1 if every
    child is a proven loss. Children are stored by decreasing prior and a non-root node always
    selects either a visited child or the first unvisited one, hence its visited children form a
    prefix: the scan stops at the first unvisited child. Same result as a full scan, ties to the
    lowest index. The property of the formula this needs: all unvisited children share the
    first-play value, and an unvisited child's ``puct_score`` is non-decreasing in its prior (for
    ``cs >= 0``), so the first unvisited child scores at least as high as every later one
    (asserted on ``puct_score`` by ``tests/test_search_puct.py``).
    ``use_vl``: virtual visits may be pending; without them ``vl`` is all zero and not read."""
    f = first[g, x]
    nc = nch[g, x]
    # the child taken next reads these at its own index (in the first cache line of the children
    # when the visited prefix is short): start the loads now, alongside the scan's own misses,
    # instead of one after the other
    prefetch(mv, g, f)
    prefetch(nch, g, f)
    prefetch(first, g, f)
    cs = exploration(cfg, np.float64(n[g, x] + (vl[g, x] if use_vl else 0)))
    vlv = cfg["virtual_loss"]
    best = -np.inf
    best_c = -1
    mass = 0.0
    cand = -1
    for c in range(f, f + nc):
        s = status[g, c]
        nn = np.float64(n[g, c] + (vl[g, c] if use_vl else 0))
        if s == UNKNOWN and nn == 0.0:
            cand = c
            break
        if s == LOSS:
            continue
        if s == WIN:
            return c
        pr = np.float64(p[g, c])
        if nn > 0.0:
            mass += pr
        if s == DRAW:
            sc = draw_score(nn, cs, pr)
        else:
            num = np.float64(w[g, c]) - (vlv * vl[g, c] if use_vl else 0.0)
            sc = puct_score(num, nn, cs, pr, 0.0)
        if sc > best:
            best = sc
            best_c = c
    if cand >= 0:
        fv = first_play_value(cfg["fpu_value"], n[g, x], w[g, x], cfg["fpu_reduction"], mass)
        su = puct_score(0.0, 0.0, cs, np.float64(p[g, cand]), fv)
        if su > best or (su == best and cand < best_c):
            return cand
    return best_c


@njit(cache=True, error_model="numpy", inline="always")
def select_root(n, w, status, vl, first, nch, noise, mixp, cfg, g: int, buf: np.ndarray,
                use_vl: bool) -> int:  # fmt: skip
    """PUCT at the root of game ``g``: a full scan (noise mixes the priors, so no prefix
    property); the child index, -1 if every child is a proven loss. The mixed priors ``mixp`` are
    set once per search (``mix_root_noise``); the first-play reduction is ``fpu_reduction_root``,
    0 while noise is on. The scores are computed branch-free into ``buf`` (float64, length >= the
    children); proven children are then fixed up (a win is taken at once, a loss scores -inf, a
    draw ``draw_score``) and the first maximum is taken. Indices are cast to unsigned so that
    numba drops its negative-index handling, which keeps these loops several times faster.
    ``use_vl``: virtual visits may be pending (more than one leaf per game per step).
    With ``forced_playouts`` on and root noise in this search, and no child proven, the first
    child that has been visited but has fewer visits (plus virtual visits) than
    ``forced_playouts(forced_k, P, sum N)`` is taken before the scores are computed (KataGo: only
    children that received playouts are forced; which moves get tried stays PUCT's choice)."""
    ug = np.uint64(g)
    f = first[ug, 0]
    nc = nch[ug, 0]
    cs = exploration(cfg, np.float64(n[ug, 0] + (vl[ug, 0] if use_vl else 0)))
    vlv = cfg["virtual_loss"]
    proven = 0
    for i in range(nc):
        proven |= status[ug, np.uint64(f + i)]
    if cfg["forced_playouts"] and noise[ug] and proven == 0:
        total = 0.0
        for i in range(nc):
            c = np.uint64(f + i)
            total += np.float64(n[ug, c] + (vl[ug, c] if use_vl else 0))
        if total > 0.0:
            kf = cfg["forced_k"]
            for i in range(nc):
                c = np.uint64(f + i)
                nv = np.float64(n[ug, c] + (vl[ug, c] if use_vl else 0))
                if nv > 0.0 and nv < forced_playouts(kf, np.float64(mixp[ug, np.uint64(i)]), total):
                    return f + i
    fixed = cfg["fpu_value"]
    red = 0.0 if noise[ug] and cfg["noise_weight"] > 0.0 else cfg["fpu_reduction_root"]
    mass = 0.0
    if np.isnan(fixed) and red != 0.0:  # the prior mass of the visited children (a sequential sum)
        for i in range(nc):
            c = np.uint64(f + i)
            nv = n[ug, c] + (vl[ug, c] if use_vl else 0)
            mass += np.float64(mixp[ug, np.uint64(i)]) if nv > 0 else 0.0
    fv = first_play_value(fixed, n[ug, 0], w[ug, 0], red, mass)
    for i in range(nc):
        c = np.uint64(f + i)
        pr = np.float64(mixp[ug, np.uint64(i)])
        if use_vl:
            nn = np.float64(n[ug, c] + vl[ug, c])
            num = np.float64(w[ug, c]) - vlv * vl[ug, c]
        else:
            nn = np.float64(n[ug, c])
            num = np.float64(w[ug, c])
        buf[i] = puct_score(num, nn, cs, pr, fv)
    if proven == 0:
        best = buf[0]
        bi = 0
        for i in range(1, nc):
            if buf[i] > best:
                best = buf[i]
                bi = i
        return f + bi
    # proven children: a win is taken at once, a loss never, a draw scores its exact value 0
    for i in range(nc):
        c = np.uint64(f + i)
        s = status[ug, c]
        if s != UNKNOWN:
            if s == WIN:
                return f + i
            if s == LOSS:
                buf[i] = -np.inf
            else:
                nn = np.float64(n[ug, c] + (vl[ug, c] if use_vl else 0))
                buf[i] = draw_score(nn, cs, np.float64(mixp[ug, np.uint64(i)]))
    best = -np.inf
    best_c = -1
    for i in range(nc):
        if buf[i] > best:
            best = buf[i]
            best_c = f + i
    return best_c


@njit(cache=True, error_model="numpy", inline="always")
def mix_root_noise(T, GM, cfg, g: int, f: int, nc: int) -> None:
    """Set the PUCT root priors of game ``g`` for a new search (root children ``f .. f + nc``):
    ``mixp = (1 - eps) * P + eps * eta`` with ``eta ~ Dir(alpha)`` drawn into ``extra`` when the
    search has noise (``eps = noise_weight`` > 0; ``alpha = dirichlet_alpha``, or
    ``dirichlet_alpha_scale / nc`` when that is 0), else ``mixp = P``."""
    ext = GM.extra[g]
    eps = cfg["noise_weight"]
    noisy = GM.noise[g] and eps > 0.0
    if noisy:
        alpha = cfg["dirichlet_alpha"]
        if alpha <= 0.0:
            alpha = cfg["dirichlet_alpha_scale"] / nc
        draw_dirichlet(GM.rng, g, ext, nc, alpha)
    keep = 1.0 - eps if noisy else 1.0
    mix = eps if noisy else 0.0
    for i in range(nc):
        GM.mixp[g, i] = keep * T.p[g, f + i] + mix * ext[i]
