"""The Gumbel root (Danihelka et al. 2022, "Policy improvement by planning with Gumbel"):
Gumbel-top-k sampling without replacement, Sequential Halving as a visit schedule, ``sigma(q)``
of the completed Q values. Interior nodes keep PUCT (``takzero.search.puct``).

Compiled with numba (``@njit(cache=True)``). The formulas and their sources are listed in
``takzero.search.config``; the schedule is the one of DeepMind's ``mctx``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from takzero.search.rng import rand_gumbel
from takzero.search.tree import LOSS, UNKNOWN, WIN, status_value


@njit(cache=True, error_model="numpy")
def considered_sequence(m: int, sims: int | np.integer, out: np.ndarray) -> None:
    """Sequential Halving as a visit schedule (``mctx``'s ``get_sequence_of_considered_visits``):
    ``out[k]`` is the visit count that the action chosen at root simulation ``k`` must have, for
    ``m`` considered actions and ``sims`` simulations. Writes ``out[:sims]`` (int array)."""
    if m <= 1:
        for k in range(sims):
            out[k] = k
        return
    log2max = 0
    while (1 << log2max) < m:
        log2max += 1
    visits = np.zeros(m, dtype=np.int64)
    num_considered = m
    k = 0
    while k < sims:
        rounds = max(1, int(sims / (log2max * num_considered)))
        for _ in range(rounds):
            for i in range(num_considered):
                if k < sims:
                    out[k] = visits[i]
                    k += 1
            for i in range(num_considered):
                visits[i] += 1
        num_considered = max(2, num_considered // 2)


@njit(cache=True, error_model="numpy")
def sigma_q(trees, games, cfg, g: int | np.integer, out: np.ndarray) -> None:
    """``out[i] = sigma(completed Q)`` of root child slot ``i`` of game ``g`` (mover's view;
    ``out`` float64 of length >= the children; ``cfg``: the packed settings record; ``trees``,
    ``games``: the pools of ``takzero.search.tree``, of which ``games.raw_value`` is the root's
    value before the search).

    completed Q: the child's Q if visited (its exact value if proven), else v_mix (eq. 33):
    ``v_mix = (v_raw + sum_b N(b) * sum_{b visited} P(b) q(b) / sum_{b visited} P(b)) /
    (1 + sum_b N(b))``; min-max normalised to [0, 1] over the legal moves (``mctx``), then
    ``sigma(q) = (gumbel_c_visit + max_b N(b)) * gumbel_c_scale * q``.
    """
    visits, value_sum, prior, status = trees.visits, trees.value_sum, trees.prior, trees.status
    ug = np.uint64(g)
    f = trees.first_child[ug, 0]
    nc = trees.num_children[ug, 0]
    sum_visits = 0.0
    sum_prior = 0.0
    prior_q = 0.0  # sum of P(b) q(b) over the visited children
    max_visits = 0
    for i in range(nc):
        c = np.uint64(f + i)
        child_visits = visits[ug, c]
        if child_visits > 0:
            sum_visits += child_visits
            sum_prior += prior[ug, c]
            prior_q += prior[ug, c] * (value_sum[ug, c] / child_visits)
            if child_visits > max_visits:
                max_visits = child_visits
    v_mix = np.float64(games.raw_value[ug])
    if sum_visits > 0 and sum_prior > 0:
        v_mix = (v_mix + sum_visits * prior_q / sum_prior) / (1.0 + sum_visits)
    qmin = np.inf
    qmax = -np.inf
    for i in range(nc):
        c = np.uint64(f + i)
        s = status[ug, c]
        if s != UNKNOWN:
            q = status_value(s)
        elif visits[ug, c] > 0:
            q = value_sum[ug, c] / visits[ug, c]
        else:
            q = v_mix
        out[i] = q
        if q < qmin:
            qmin = q
        if q > qmax:
            qmax = q
    scale = (cfg["gumbel_c_visit"] + max_visits) * cfg["gumbel_c_scale"]
    span = max(qmax - qmin, 1e-8)
    for i in range(nc):
        out[i] = scale * (out[i] - qmin) / span


@njit(cache=True, error_model="numpy")
def root_sigma_q(trees, games, settings: np.ndarray, g: int, out: np.ndarray) -> None:
    """``sigma_q`` of game ``g``'s root from the pools ``trees`` / ``games`` and the packed
    ``settings`` ((1,) array of ``takzero.search.config.SETTINGS_DTYPE``), for Python callers."""
    sigma_q(trees, games, settings[0], g, out)


@njit(cache=True, error_model="numpy")
def select_gumbel_root(trees, games, cfg, g: int | np.integer, x: int | np.integer,
                       score_buf: np.ndarray, use_virtual: bool) -> int:
    """The root rule "gumbel" (``takzero.search.rules``; ``x`` is the root, 0, and virtual visits
    are not read): among the non-lost children whose search visits equal the schedule's
    considered visit, the one maximising gumbel + log P + sigma(q) (a proven win at once; any
    non-lost child when none has the scheduled count); -1 if all are lost. ``gumbel_logits``,
    ``search_visits`` (G, A) and ``considered_visits`` (G, S) of ``games``: see
    ``takzero.search.tree.Games``; ``score_buf``: float64 scratch of length >= the children."""
    status = trees.status
    gumbel_logits, search_visits = games.gumbel_logits, games.search_visits
    considered_visits = games.considered_visits
    f = trees.first_child[g, 0]
    nc = trees.num_children[g, 0]
    sims = 0
    for i in range(nc):
        sims += search_visits[g, i]
    considered = considered_visits[g, min(sims, considered_visits.shape[1] - 1)]
    sigma_q(trees, games, cfg, g, score_buf)
    best = -np.inf
    best_c = -1
    fallback = -np.inf
    fallback_c = -1
    for i in range(nc):
        c = f + i
        s = status[g, c]
        if s == LOSS:
            continue
        if s == WIN:
            return c
        score = gumbel_logits[g, i] + score_buf[i]
        if search_visits[g, i] == considered and score > best:
            best = score
            best_c = c
        if score > fallback:
            fallback = score
            fallback_c = c
    if best_c >= 0:
        return best_c
    return fallback_c


@njit(cache=True, error_model="numpy", inline="always")
def init_gumbel_root(trees, games, cfg, g: int | np.integer, f: int, nc: int) -> None:
    """Prepare the Gumbel root of game ``g`` for a new search (root children ``f .. f + nc``):
    the Sequential Halving schedule of ``min(gumbel_m, nc)`` actions into ``considered_visits``
    and, per child, ``gumbel_logits = g + log P`` (the Gumbel draw g only when the search has
    noise, else 0)."""
    logits = games.gumbel_logits[g]
    m = min(cfg["gumbel_m"], nc)
    considered_sequence(m, np.int64(games.target[g]), games.considered_visits[g])
    for i in range(nc):
        gumbel = 0.0
        if games.noise[g]:
            gumbel = rand_gumbel(games.rng, g)
        logits[i] = gumbel + np.log(max(np.float64(trees.prior[g, f + i]), 1e-30))
