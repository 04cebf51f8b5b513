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
def considered_sequence(m: int, sims: int, out: np.ndarray) -> None:
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
    num = m
    k = 0
    while k < sims:
        extra = max(1, int(sims / (log2max * num)))
        for _ in range(extra):
            for i in range(num):
                if k < sims:
                    out[k] = visits[i]
                    k += 1
            for i in range(num):
                visits[i] += 1
        num = max(2, num // 2)


@njit(cache=True, error_model="numpy")
def sigma_q(n, w, p, status, first, nch, raw, cfg, g: int, out: np.ndarray) -> None:
    """``out[i] = sigma(completed Q)`` of root child slot ``i`` of game ``g`` (mover's view;
    ``out`` float64 of length >= the children; ``cfg``: the packed settings record).

    completed Q: the child's Q if visited (its exact value if proven), else v_mix (eq. 33):
    ``v_mix = (v_raw + sum_b N(b) * sum_{b visited} P(b) q(b) / sum_{b visited} P(b)) /
    (1 + sum_b N(b))``; min-max normalised to [0, 1] over the legal moves (``mctx``), then
    ``sigma(q) = (gumbel_c_visit + max_b N(b)) * gumbel_c_scale * q``.
    """
    ug = np.uint64(g)
    f = first[ug, 0]
    nc = nch[ug, 0]
    sum_n = 0.0
    sum_p = 0.0
    wq = 0.0
    maxn = 0
    for i in range(nc):
        c = np.uint64(f + i)
        nn = n[ug, c]
        if nn > 0:
            sum_n += nn
            sum_p += p[ug, c]
            wq += p[ug, c] * (w[ug, c] / nn)
            if nn > maxn:
                maxn = nn
    vmix = np.float64(raw[ug])
    if sum_n > 0 and sum_p > 0:
        vmix = (vmix + sum_n * wq / sum_p) / (1.0 + sum_n)
    qmin = np.inf
    qmax = -np.inf
    for i in range(nc):
        c = np.uint64(f + i)
        s = status[ug, c]
        if s != UNKNOWN:
            q = status_value(s)
        elif n[ug, c] > 0:
            q = w[ug, c] / n[ug, c]
        else:
            q = vmix
        out[i] = q
        if q < qmin:
            qmin = q
        if q > qmax:
            qmax = q
    scale = (cfg["gumbel_c_visit"] + maxn) * cfg["gumbel_c_scale"]
    span = max(qmax - qmin, 1e-8)
    for i in range(nc):
        out[i] = scale * (out[i] - qmin) / span


@njit(cache=True, error_model="numpy")
def root_sigma_q(T, GM, settings: np.ndarray, g: int, out: np.ndarray) -> None:
    """``sigma_q`` of game ``g``'s root from the pools ``T`` / ``GM`` and the packed ``settings``
    ((1,) array of ``takzero.search.config.SETTINGS_DTYPE``), for Python callers."""
    sigma_q(T.n, T.w, T.p, T.status, T.first, T.nch, GM.raw, settings[0], g, out)


@njit(cache=True, error_model="numpy")
def select_gumbel_root(n, w, p, status, first, nch, raw, extra, sv, seq, cfg, g: int,
                       qbuf: np.ndarray) -> int:  # fmt: skip
    """Root action of the next simulation: among the non-lost children whose search visits equal
    the schedule's considered visit, the one maximising gumbel + log P + sigma(q) (a proven win at
    once; any non-lost child when none has the scheduled count); -1 if all are lost."""
    f = first[g, 0]
    nc = nch[g, 0]
    sim = 0
    for i in range(nc):
        sim += sv[g, i]
    considered = seq[g, min(sim, seq.shape[1] - 1)]
    sigma_q(n, w, p, status, first, nch, raw, cfg, g, qbuf)
    best = -np.inf
    best_c = -1
    fb = -np.inf
    fb_c = -1
    for i in range(nc):
        c = f + i
        s = status[g, c]
        if s == LOSS:
            continue
        if s == WIN:
            return c
        sc = extra[g, i] + qbuf[i]
        if sv[g, i] == considered and sc > best:
            best = sc
            best_c = c
        if sc > fb:
            fb = sc
            fb_c = c
    if best_c >= 0:
        return best_c
    return fb_c


@njit(cache=True, error_model="numpy", inline="always")
def init_gumbel_root(T, GM, cfg, g: int, f: int, nc: int) -> None:
    """Prepare the Gumbel root of game ``g`` for a new search (root children ``f .. f + nc``):
    the Sequential Halving schedule of ``min(gumbel_m, nc)`` actions into ``seq`` and, per child,
    ``extra = gumbel + log P`` (the Gumbel draw only when the search has noise)."""
    ext = GM.extra[g]
    m = min(cfg["gumbel_m"], nc)
    considered_sequence(m, GM.target[g], GM.seq[g])
    for i in range(nc):
        gz = 0.0
        if GM.noise[g]:
            gz = rand_gumbel(GM.rng, g)
        ext[i] = gz + np.log(max(np.float64(T.p[g, f + i]), 1e-30))
