"""The compiled depth-first proof-number search (df-pn) behind :mod:`takzero.game.tinue`: the
verdict constants, the transposition table, node expansion under the tak move restriction, the
resumable search loop and the principal variation. The method, its sources (Nagai 2002; the
1 + epsilon trick of Pawlewicz and Lew 2006; Allis et al. 1994), the move restriction, the
handling of repetitions (GHI), the table's replacement scheme and the budget are described in
:mod:`takzero.game.tinue`, whose :func:`~takzero.game.tinue.prove_tinue` is the public entry.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from takzero.game.core import (
    I_HASH,
    I_PLY,
    I_RESULT,
    RESULT_NONE,
    generate_moves,
    make_move,
    result_winner,
    unmake_move,
)
from takzero.game.threats import road_moves, wins_at_once

WIN = "WIN"
NO_WIN = "NO_WIN"
UNKNOWN = "UNKNOWN"

INF = 1 << 40  # proof/disproof number infinity
CLEAN = 1 << 30  # taint of a disproof that does not depend on the path
CUT = -1  # taint of a disproof that rests on the depth limit (never clears)
EPS_NUM = 5  # 1 + epsilon = 5/4
EPS_DEN = 4
DEFAULT_MAX_DEPTH = 60
#: Node budget of the prover at a player's root (``SearchConfig.tinue_nodes``,
#: ``takzero.players.tactics``): two calls per move cost about 12 ms on 5x5 and 60 ms on 6x6
#: mid-game positions on this project's CPU (``scripts/bench_tactics.py --root-cost``).
DEFAULT_TINUE_NODES = 1000
#: Largest budgets a caller may ask for (about a day of search at the speeds measured here).
MAX_NODES = 10**9
MAX_SECONDS = 86_400.0
DEFAULT_TT_BITS = 18

# transposition table fields (tt[slot, field], int64)
T_KEY = 0
T_PN = 1
T_DN = 2
T_WORK = 3
T_MOVE = 4
T_DEPTH = 5
T_TAINT = 6
T_CTX = 7
T_GEN = 8
TT_FIELDS = 9

# counters and settings shared by the compiled search (ctr[field], int64)
C_NODES = 0  # node visits so far in this search
C_LIMIT = 1  # stop (abort) when C_NODES reaches this
C_ABORT = 2  # 1 once a search was cut by C_LIMIT
C_INV = 3  # invocation counter (ids of df-pn calls, for tainted disproofs)
C_GEN = 4  # generation of this search in the table
C_MAXDEPTH = 5  # path depth limit (plies)
C_ATTACKER = 6  # 0 white, 1 black
C_CYCLES = 7  # children found on the current path (repetitions)
C_CUTS = 8  # children cut by the depth limit
C_DEPTH = 9  # path index where a stopped search resumes
C_LEN = 10


# ---------------------------------------------------------------------------------------------
# Transposition table
# ---------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _tt_slot(tt: np.ndarray, key: int, gen: int) -> int:
    """Slot of ``key`` in this generation, or -1."""
    i = key & (tt.shape[0] - 2)  # bucket of two: slots i and i + 1
    if tt[i, T_KEY] == key and tt[i, T_GEN] == gen:
        return i
    if tt[i + 1, T_KEY] == key and tt[i + 1, T_GEN] == gen:
        return i + 1
    return -1


@njit(cache=True, inline="always")
def _tt_usable(tt: np.ndarray, slot: int, reader: int) -> bool:
    """False for a tainted disproof stored by another invocation than ``reader`` (see GHI)."""
    if tt[slot, T_DN] == 0 and tt[slot, T_TAINT] != CLEAN:
        return tt[slot, T_CTX] == reader
    return True


@njit(cache=True, inline="always")  # inlined: its call sites' literal arguments compile no copies
def _tt_store(tt, key, gen, pn, dn, work, move, depth, taint, ctx) -> None:
    """Write an entry (see the module docstring for the replacement scheme)."""
    i = key & (tt.shape[0] - 2)
    slot = -1
    for s in range(i, i + 2):
        if tt[s, T_KEY] == key and tt[s, T_GEN] == gen:
            slot = s
            break
    if slot < 0:
        if tt[i, T_GEN] != gen:
            slot = i
        elif tt[i + 1, T_GEN] != gen:
            slot = i + 1
        elif tt[i, T_WORK] < tt[i + 1, T_WORK]:
            slot = i
        else:
            slot = i + 1
    tt[slot, T_KEY] = key
    tt[slot, T_PN] = pn
    tt[slot, T_DN] = dn
    tt[slot, T_WORK] = work
    tt[slot, T_MOVE] = move
    tt[slot, T_DEPTH] = depth
    tt[slot, T_TAINT] = taint
    tt[slot, T_CTX] = ctx
    tt[slot, T_GEN] = gen


# ---------------------------------------------------------------------------------------------
# df-pn
# ---------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _sat_add(a: int, b: int) -> int:
    s = a + b
    return INF if s > INF else s


# frame fields (fr[depth, field], int64): one df-pn visit on the explicit stack
F_SINCE = 0  # path index of the first position after the last placement
F_THPHI = 1  # thresholds of this visit, in the node's own (phi, delta) terms
F_THDELTA = 2
F_PINV = 3  # invocation id of the parent's visit (context of a tainted disproof)
F_INV = 4  # this visit's invocation id
F_START = 5  # node count when the visit began (work)
F_OFF = 6  # first pool row of the children
F_K = 7  # number of children in the pool
F_MAXDEP = 8  # defender node: longest line among replies settled at expansion
F_OR = 9  # 1 attacker node, 0 defender node
F_BEST = 10  # child being searched (pool row offset from F_OFF)
F_UNDO = 11  # undo token of the move into that child
F_PHI = 12  # last (phi, delta) of the node
F_DELTA = 13
F_LEN = 14

# children pool columns (pool[row, column], int64)
P_MOVE = 0
P_KEY = 1
P_PN = 2
P_DN = 3
P_TAINT = 4
P_DEP = 5
P_LEN = 6


@njit(cache=True)
def _expand(state, d, tt, ctr, path, buf, buf2, pool, fr):
    """Expand the node at path index ``d`` (the position in ``state``): classify its moves (see the
    module docstring), put the children that stay open into ``pool`` from row ``fr[d, F_OFF]``.
    Returns (settled, pn, dn, proof depth): settled = 1 when the node was decided at once (values
    stored in ``tt``), 2 when the pool is too small (the search must stop and grow it), else 0."""
    gen = ctr[C_GEN]
    attacker = ctr[C_ATTACKER]
    key = state[I_HASH]
    is_or = (state[I_PLY] & 1) == attacker
    inv = fr[d, F_INV]
    since = fr[d, F_SINCE]
    off = fr[d, F_OFF]
    n = generate_moves(state, buf)
    if off + n > pool.shape[0]:
        return 2, 1, 1, 0
    k = 0
    maxdep = 0
    cut = d + 1 > ctr[C_MAXDEPTH]
    for j in range(n):
        m = buf[j]
        u = make_move(state, m)
        r = state[I_RESULT]
        if r != RESULT_NONE:
            won = result_winner(r) == attacker
            unmake_move(state, m, u)
            if is_or and won:
                _tt_store(tt, key, gen, 0, INF, 1, m, 1, CLEAN, 0)
                return 1, 0, INF, 1
            if not is_or:
                if not won:  # the defender ends the game without losing: refuted
                    _tt_store(tt, key, gen, INF, 0, 1, m, 0, CLEAN, 0)
                    return 1, INF, 0, 0
                maxdep = max(maxdep, 1)
            continue
        if is_or:
            keep = road_moves(state, attacker, buf2, bool(False)) > 0  # noqa: UP018 (a plain bool, see threats.road_moves)
        else:
            keep = wins_at_once(state, buf2) < 0
            if not keep:
                maxdep = max(maxdep, 2)
        if keep:
            h = state[I_HASH]
            row = off + k
            pool[row, P_MOVE] = m
            pool[row, P_KEY] = h
            pool[row, P_PN] = 1
            pool[row, P_DN] = 1
            pool[row, P_TAINT] = CLEAN
            pool[row, P_DEP] = 0
            loop = -1
            if (m >> 6) & 3 == 0:  # a spread: the position may repeat one on the path
                for i in range(since, d + 1):
                    if path[i] == h:
                        loop = i
                        break
            if loop >= 0:
                ctr[C_CYCLES] += 1
                pool[row, P_PN] = INF
                pool[row, P_DN] = 0
                pool[row, P_TAINT] = loop
            elif cut:
                ctr[C_CUTS] += 1
                pool[row, P_PN] = INF
                pool[row, P_DN] = 0
                pool[row, P_TAINT] = CUT
            else:
                s = _tt_slot(tt, h, gen)
                if s >= 0 and _tt_usable(tt, s, inv):
                    pool[row, P_PN] = tt[s, T_PN]
                    pool[row, P_DN] = tt[s, T_DN]
                    pool[row, P_TAINT] = tt[s, T_TAINT]
                    pool[row, P_DEP] = tt[s, T_DEPTH]
            k += 1
        unmake_move(state, m, u)
    fr[d, F_K] = k
    fr[d, F_MAXDEP] = maxdep
    fr[d, F_OR] = 1 if is_or else 0
    if k == 0:
        if is_or:  # no tak: disproved under the move restriction
            _tt_store(tt, key, gen, INF, 0, 1, -1, 0, CLEAN, 0)
            return 1, INF, 0, 0
        _tt_store(tt, key, gen, 0, INF, 1, -1, maxdep, CLEAN, 0)  # every reply loses at once
        return 1, 0, INF, maxdep
    return 0, 1, 1, 0


@njit(cache=True)
def _finish(state, d, tt, ctr, pool, fr):
    """Store the node at path index ``d`` in ``tt`` from its last (phi, delta) and return its
    (pn, dn, taint, proof depth): the proving move and depth of a proof, the taint of a
    disproof (see the module docstring)."""
    gen = ctr[C_GEN]
    key = state[I_HASH]
    is_or = fr[d, F_OR] == 1
    off = fr[d, F_OFF]
    k = fr[d, F_K]
    work = ctr[C_NODES] - fr[d, F_START]
    if is_or:
        pn = fr[d, F_PHI]
        dn = fr[d, F_DELTA]
    else:
        pn = fr[d, F_DELTA]
        dn = fr[d, F_PHI]
    if pn == 0:
        if is_or:  # the shortest proved child
            bi = -1
            for i in range(off, off + k):
                if pool[i, P_PN] == 0 and (bi < 0 or pool[i, P_DEP] < pool[bi, P_DEP]):
                    bi = i
            dep = 1 + pool[bi, P_DEP]
            _tt_store(tt, key, gen, 0, INF, work, pool[bi, P_MOVE], dep, CLEAN, 0)
            return 0, INF, CLEAN, dep
        dep = fr[d, F_MAXDEP]
        for i in range(off, off + k):
            dep = max(dep, 1 + pool[i, P_DEP])
        _tt_store(tt, key, gen, 0, INF, work, -1, dep, CLEAN, 0)
        return 0, INF, CLEAN, dep
    if dn == 0:
        mv = -1
        if is_or:  # every child disproved: the worst taint counts
            taint = CLEAN
            for i in range(off, off + k):
                taint = min(taint, pool[i, P_TAINT])
        else:  # one refutation suffices: the cleanest
            taint = CUT - 1
            for i in range(off, off + k):
                if pool[i, P_DN] == 0 and pool[i, P_TAINT] > taint:
                    taint = pool[i, P_TAINT]
                    mv = pool[i, P_MOVE]
        if taint >= d:  # a loop back to this very node is a true repetition
            taint = CLEAN
        _tt_store(tt, key, gen, INF, 0, work, mv, 0, taint, fr[d, F_PINV])
        return INF, 0, taint, 0
    _tt_store(tt, key, gen, pn, dn, work, -1, 0, CLEAN, 0)
    return pn, dn, CLEAN, 0


@njit(cache=True, inline="always")
def _back_to_parent(state, d, pool, fr, rp, rd, rt, rdep) -> int:
    """Leave the node at path index ``d`` for its parent: unmake the move into it and store its
    (pn, dn, taint, proof depth) in the parent's child row. Returns the parent's index d - 1."""
    d -= 1
    unmake_move(state, pool[fr[d, F_OFF] + fr[d, F_BEST], P_MOVE], fr[d, F_UNDO])
    row = fr[d, F_OFF] + fr[d, F_BEST]
    pool[row, P_PN] = rp
    pool[row, P_DN] = rd
    pool[row, P_TAINT] = rt
    pool[row, P_DEP] = rdep
    return d


@njit(cache=True)
def _search_chunk(state, tt, ctr, path, buf, buf2, pool, fr, resume):
    """df-pn (Nagai's MID, with an explicit stack instead of recursion) from the root with
    infinite thresholds. Each visit of a node expands it, then searches its most-proving child
    while the node's (phi, delta) stay under its thresholds.

    Runs until the root is decided (returns its (pn, dn, taint, proof depth), ``state`` back at
    the root) or until a node visit would make ``ctr[C_NODES]`` pass ``ctr[C_LIMIT]``: then
    ``ctr[C_ABORT] = 1`` and the search stops where it is -- ``state``, ``path``, ``pool`` and the
    frames ``fr`` hold the open visits -- and a call with ``resume=True`` (and a higher limit)
    goes on from there. ``ctr[C_ABORT] = 2``: the children pool ``pool`` is full; resume with a
    larger copy of it."""
    ctr[C_ABORT] = 0
    gen = ctr[C_GEN]
    if resume:
        d = ctr[C_DEPTH]
    else:
        path[0] = state[I_HASH]
        fr[0, F_SINCE] = 0
        fr[0, F_THPHI] = INF
        fr[0, F_THDELTA] = INF
        fr[0, F_PINV] = 0
        fr[0, F_OFF] = 0
        d = 0
    enter = True
    rp = 1
    rd = 1
    rt = CLEAN
    rdep = 0
    while True:
        if enter:
            # a new visit of the node at path index d
            if ctr[C_NODES] >= ctr[C_LIMIT]:
                ctr[C_ABORT] = 1
                ctr[C_DEPTH] = d
                return 1, 1, CLEAN, 0
            ctr[C_NODES] += 1
            inv = ctr[C_INV] + 1
            ctr[C_INV] = inv
            fr[d, F_INV] = inv
            fr[d, F_START] = ctr[C_NODES] - 1
            settled, rp, rd, rdep = _expand(state, d, tt, ctr, path, buf, buf2, pool, fr)
            rt = CLEAN
            if settled == 2:  # the pool is full: this visit starts again after it grows
                ctr[C_NODES] -= 1
                ctr[C_ABORT] = 2
                ctr[C_DEPTH] = d
                return 1, 1, CLEAN, 0
            if settled == 1:  # decided at once: back to the parent
                if d == 0:
                    return rp, rd, rt, rdep
                d = _back_to_parent(state, d, pool, fr, rp, rd, rt, rdep)
            enter = False
        # the loop of the visit at path index d: phi = min of the children's delta, delta = sum of
        # their phi (attacker node: phi = pn, delta = dn, a child's (phi, delta) = (dn, pn);
        # defender node: the other way round)
        is_or = fr[d, F_OR] == 1
        off = fr[d, F_OFF]
        k = fr[d, F_K]
        inv = fr[d, F_INV]
        best = -1
        phi = INF
        delta = 0
        delta2 = INF
        for i in range(off, off + k):
            if pool[i, P_PN] != 0 and pool[i, P_DN] != 0:
                s = _tt_slot(tt, pool[i, P_KEY], gen)
                if s >= 0 and _tt_usable(tt, s, inv):
                    pool[i, P_PN] = tt[s, T_PN]
                    pool[i, P_DN] = tt[s, T_DN]
                    pool[i, P_TAINT] = tt[s, T_TAINT]
                    pool[i, P_DEP] = tt[s, T_DEPTH]
            if is_or:
                pc = pool[i, P_DN]
                dc = pool[i, P_PN]
            else:
                pc = pool[i, P_PN]
                dc = pool[i, P_DN]
            delta = _sat_add(delta, pc)
            if dc < phi:
                delta2 = phi
                phi = dc
                best = i
            elif dc < delta2:
                delta2 = dc
        fr[d, F_PHI] = phi
        fr[d, F_DELTA] = delta
        th_phi = fr[d, F_THPHI]
        th_delta = fr[d, F_THDELTA]
        if phi == 0 or delta == 0 or phi >= th_phi or delta >= th_delta:
            rp, rd, rt, rdep = _finish(state, d, tt, ctr, pool, fr)
            if d == 0:
                return rp, rd, rt, rdep
            d = _back_to_parent(state, d, pool, fr, rp, rd, rt, rdep)
            continue
        # thresholds of the most-proving child, in its own (phi, delta) terms
        pbest = pool[best, P_DN] if is_or else pool[best, P_PN]
        th_phi_c = INF if th_delta >= INF else th_delta - delta + pbest
        if delta2 >= INF:
            th_delta_c = th_phi
        else:
            th_delta_c = min(th_phi, max(delta2 + 1, (delta2 * EPS_NUM + EPS_DEN - 1) // EPS_DEN))
        m = pool[best, P_MOVE]
        fr[d, F_BEST] = best - off
        fr[d, F_UNDO] = make_move(state, m)
        path[d + 1] = state[I_HASH]
        fr[d + 1, F_SINCE] = fr[d, F_SINCE] if (m >> 6) & 3 == 0 else d + 1
        fr[d + 1, F_THPHI] = th_phi_c
        fr[d + 1, F_THDELTA] = th_delta_c
        fr[d + 1, F_PINV] = inv
        fr[d + 1, F_OFF] = off + k
        d += 1
        enter = True


@njit(cache=True)
def _principal_variation(state, tt, ctr, buf, buf2, out) -> int:
    """Write the PV of a proved root into ``out`` (move codes); returns its length. Attacker:
    a move that wins at once, else the table's proving move; defender: the reply whose proof is
    the longest (a reply after which the attacker wins at once counts 1 ply). Stops at the end of
    the game, at a missing table entry or at ``len(out)``. ``state`` is restored."""
    gen = ctr[C_GEN]
    attacker = ctr[C_ATTACKER]
    undos = np.empty(out.shape[0], dtype=np.int64)
    n = 0
    while n < out.shape[0] and state[I_RESULT] == RESULT_NONE:
        if (state[I_PLY] & 1) == attacker:
            m = wins_at_once(state, buf2)
            if m < 0:
                s = _tt_slot(tt, state[I_HASH], gen)
                if s < 0 or tt[s, T_PN] != 0 or tt[s, T_MOVE] < 0:
                    break
                m = tt[s, T_MOVE]
        else:
            cnt = generate_moves(state, buf)
            m = -1
            best = -2
            for j in range(cnt):
                c = buf[j]
                u = make_move(state, c)
                if state[I_RESULT] != RESULT_NONE:
                    score = 0 if result_winner(state[I_RESULT]) == attacker else 1 << 20
                elif wins_at_once(state, buf2) >= 0:
                    score = 1
                else:
                    s = _tt_slot(tt, state[I_HASH], gen)
                    score = 1 + tt[s, T_DEPTH] if (s >= 0 and tt[s, T_PN] == 0) else -1
                unmake_move(state, c, u)
                if score > best:
                    best = score
                    m = c
            if m < 0 or best < 0:
                break
        undos[n] = make_move(state, m)
        out[n] = m
        n += 1
    for i in range(n - 1, -1, -1):
        unmake_move(state, out[i], undos[i])
    return n
