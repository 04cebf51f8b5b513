"""Tinuë prover: does the side to move have a forced road? (compiled depth-first proof-number search)

Terms: *tinuë* is a road threat (*tak*) that cannot be stopped (a forced road). Tak, road in one
and win at once are defined and tested in :mod:`takzero.game.threats` (:func:`road_moves`,
:func:`wins_at_once`), which this module uses for its move restriction and re-exports.

Method
------
Depth-first proof-number search, df-pn (A. Nagai, "Df-pn algorithm for searching AND/OR trees and
its applications", PhD thesis, University of Tokyo, 2002), with the 1 + epsilon threshold trick of
J. Pawlewicz and L. Lew ("Improving depth-first PN-search: 1 + epsilon trick", Computers and Games
2006; epsilon = 1/4), over a transposition table keyed by the position's Zobrist hash
(``state[I_HASH]``: stacks, tops, side to move). Proof-number search itself: L. V. Allis,
M. van der Meulen, H. J. van den Herik, "Proof-number search", Artificial Intelligence 66 (1994).
The attacker is the side to move at the root (or the side given). Attacker (OR) nodes and defender
(AND) nodes carry a proof number (pn: how many leaves must still be proved to show the attacker
wins) and a disproof number (dn: leaves to disprove).

Move restriction (what makes this a tinuë search rather than a full game search):

* attacker nodes: a move that wins at once (a road, or a flat win that ends the game: the board
  fills or a reserve empties with the attacker ahead on flats with komi) proves the node; otherwise
  only moves that make tak are searched -- after the move the attacker would have a road in one if
  it were his move again (:func:`is_tak`). A node with no such move is disproved.
* defender nodes: every legal move. A defender move that ends the game in his favour or in a draw
  (his road, a road for both sides made by him, a flat win or flat draw at the end) disproves the
  node; a move after which the attacker wins at once (:func:`wins_at_once`: the road-in-one test,
  plus a full scan of the attacker's moves when one ply can end the game by flats) is settled on
  the spot, so a node's initial proof number is the number of defender moves that stop every
  immediate win ("the number of blocks"). A defender node without such a move is proved: tinuë.

So WIN is a proof that the attacker wins by force with tak on every move of his, ending with a
road (or a flat win the last move forces); NO_WIN proves that no such forced line exists (there may
still be a forced win by quiet moves, which this search does not look at); UNKNOWN means the node
or time budget ran out (or the depth limit was reached somewhere the answer depended on).

Repetitions (the graph-history-interaction problem, GHI; the general solution is M. Kishimoto and
M. Müller, "A solution to the GHI problem for depth-first proof-number search", Information
Sciences 2005 -- this is a simpler, conservative scheme): only spreads can repeat a position. A child whose position is already on the current path (since its last
placement) counts as disproved: a line that comes back to an earlier position does not force a
road. Such a disproof depends on the path, so it is *tainted* with the depth of the path position
it returned to; a node's disproof takes the taints of the disproofs it rests on, and the taint
clears at the node the loop returned to. A tainted disproof is stored in the table together with
the invocation that searched its parent, and is only believed when that same invocation reads it;
anywhere else it is ignored and the node searched again. Proofs never rest on a repetition (a
repetition is never a proof), so a WIN never depends on the path. Paths deeper than ``max_depth``
plies (60 by default) are cut: the cut counts as a disproof tainted for good, and a root disproof
resting on one is reported as UNKNOWN, not NO_WIN.

Transposition table: ``2**tt_bits`` entries (``tt_bits = 18`` by default: 262,144 entries of
9 int64, 18.9 MB) in buckets of two; a new entry goes to its bucket's slot holding the same
position, else a slot of an earlier search (a generation number tells them apart, so the table is
never cleared), else the slot whose subtree took fewer nodes to search ("smallest work first",
D. M. Breuker, J. W. H. M. Uiterwijk, H. J. van den Herik, "Replacement schemes for transposition
tables", ICCA Journal 17(4), 1994). Each entry: hash, pn, dn, work (nodes), best move (the proving
move of an attacker node, the refutation of a defender node), proof depth (plies), taint,
invocation, generation.

Budget: ``max_nodes`` counts node visits (one per visit of a node by df-pn -- an expansion of
its moves --, re-visits counted again) and is never exceeded; ``max_seconds`` is checked between
compiled chunks of about 5 ms of search (the first chunk is 4 node visits, later ones are sized by
the rate seen and the time left). The search stops at the end of a chunk and resumes from its own
stack in the next one (no restart from the root), so the chunks cost nothing but the check; a
search ends within one node visit (a few ms on a 6x6 middle game) of its time budget.

The proof depth reported with a WIN is the number of plies from the root to the end of the game
along the longest line of the proof found; it bounds the length of the forced win (a shorter one
may exist). The principal variation (PV) follows the proving moves for the attacker and, for the
defender, the reply whose proof is longest; it can stop short if table entries were replaced.

Public API: :func:`prove_tinue` (a :class:`TinueResult`), :func:`format_result`; re-exported
from :mod:`takzero.game.threats`: :func:`is_tak`, :func:`road_in_one_moves`, :func:`road_moves`,
:func:`wins_at_once`. Used by ``python -m takzero.game tinue`` and ``annotate``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from takzero.game import core
from takzero.game.core import (
    I_HASH,
    I_PLY,
    I_RESULT,
    I_SIZE,
    RESULT_NONE,
    generate_moves,
    make_move,
    result_winner,
    unmake_move,
)
from takzero.game.position import Position
from takzero.game.threats import _side, is_tak, road_in_one_moves, road_moves, wins_at_once

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


@njit(cache=True)
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
            keep = road_moves(state, attacker, buf2, False) > 0
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
                d -= 1
                unmake_move(state, pool[fr[d, F_OFF] + fr[d, F_BEST], P_MOVE], fr[d, F_UNDO])
                row = fr[d, F_OFF] + fr[d, F_BEST]
                pool[row, P_PN] = rp
                pool[row, P_DN] = rd
                pool[row, P_TAINT] = rt
                pool[row, P_DEP] = rdep
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
            d -= 1
            unmake_move(state, pool[fr[d, F_OFF] + fr[d, F_BEST], P_MOVE], fr[d, F_UNDO])
            row = fr[d, F_OFF] + fr[d, F_BEST]
            pool[row, P_PN] = rp
            pool[row, P_DN] = rd
            pool[row, P_TAINT] = rt
            pool[row, P_DEP] = rdep
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


# ---------------------------------------------------------------------------------------------
# Python API
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TinueResult:
    """Answer of :func:`prove_tinue`.

    * ``verdict``: ``WIN`` (the attacker has a forced win by tak moves, proved), ``NO_WIN`` (proved
      that no such forced win exists) or ``UNKNOWN`` (budget or depth limit).
    * ``move``: PTN of the attacker's winning first move (``None`` unless WIN with the attacker to
      move at the root); ``move_code``: its move code.
    * ``pv``: principal variation in PTN from the root to the end of the game (WIN only; may stop
      short if table entries were replaced, see ``pv_complete``); ``pv_codes``: its move codes.
    * ``depth``: plies of the longest line of the proof (WIN only), an upper bound on the length of
      the forced win.
    * ``nodes``: node visits; ``seconds``: wall time; ``attacker``: 0 white, 1 black; ``note``: why
      the answer is UNKNOWN ('nodes', 'seconds', 'depth limit') or ''.
    * ``repetitions``: children found on the current path (counted as disproofs, see GHI in the
      module docstring); ``depth_cuts``: children cut by ``max_depth``.
    """

    verdict: str
    move: str | None
    pv: list[str]
    nodes: int
    seconds: float
    depth: int | None = None
    attacker: int = 0
    move_code: int | None = None
    pv_codes: list[int] = field(default_factory=list)
    pv_complete: bool = False
    note: str = ""
    repetitions: int = 0
    depth_cuts: int = 0

    @property
    def nodes_per_second(self) -> float:
        """Node visits per second of wall time."""
        return self.nodes / self.seconds if self.seconds > 0 else 0.0


_TABLES: dict[int, list] = {}


def _pool(rows: int) -> np.ndarray:
    return np.zeros((rows, P_LEN), dtype=np.int64)


def _tables(tt_bits: int) -> list:
    """The reusable table of this size and its generation counter (one per process)."""
    if tt_bits not in _TABLES:
        tt = np.zeros((1 << tt_bits, TT_FIELDS), dtype=np.int64)
        tt[:, T_GEN] = -1
        _TABLES[tt_bits] = [tt, 0]
    return _TABLES[tt_bits]


def prove_tinue(
    position: Position,
    max_nodes: int | None = None,
    max_seconds: float | None = None,
    attacker: int | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
    tt_bits: int = DEFAULT_TT_BITS,
) -> TinueResult:
    """Prove or disprove a forced road for ``attacker`` (0 white, 1 black; default the side to
    move) from ``position`` by df-pn under the tak move restriction (see the module docstring).

    When the attacker is not to move, the root is a defender node: WIN then means the move that led
    here was tinuë (every reply loses by force); ``move`` is None and the PV starts with the
    defender's reply.

    Budget: ``max_nodes`` (node visits, never exceeded) and/or ``max_seconds`` (wall time, checked
    about every 5 ms of search); None for both searches until solved, which can take very long.
    ``max_depth``: path depth limit in plies (1..200). ``tt_bits``: log2 of the table's entries
    (10..26). The table is reused between calls (not thread-safe).

    Raises TypeError for a position that is not a :class:`Position`; ValueError for a finished
    position, a bad budget, side, depth or table size.
    """
    if not isinstance(position, Position):
        raise TypeError(f"position must be a Position, got {type(position).__name__}")
    if position.is_over:
        raise ValueError(f"the game is over ({position.result}); nothing to prove")
    if max_nodes is not None and (isinstance(max_nodes, bool) or int(max_nodes) != max_nodes or max_nodes < 1):
        raise ValueError(f"max_nodes must be a positive integer, got {max_nodes!r}")
    if max_seconds is not None and not (isinstance(max_seconds, int | float) and max_seconds > 0):
        raise ValueError(f"max_seconds must be a positive number, got {max_seconds!r}")
    if not (isinstance(max_depth, int) and 1 <= max_depth <= 200):
        raise ValueError(f"max_depth must be an integer in 1..200, got {max_depth!r}")
    if not (isinstance(tt_bits, int) and 10 <= tt_bits <= 26):
        raise ValueError(f"tt_bits must be an integer in 10..26, got {tt_bits!r}")
    state = position.state.copy()
    att = _side(state, attacker, int(state[I_PLY]) & 1)
    size = int(state[I_SIZE])
    tables = _tables(tt_bits)
    tables[1] += 1
    tt = tables[0]
    ctr = np.zeros(C_LEN, dtype=np.int64)
    ctr[C_GEN] = tables[1]
    ctr[C_MAXDEPTH] = max_depth
    ctr[C_ATTACKER] = att
    path = np.zeros(max_depth + 2, dtype=np.int64)
    nbuf = core.num_actions(size) + 8
    buf = np.empty(nbuf, dtype=np.int64)
    buf2 = np.empty(nbuf, dtype=np.int64)
    pool = _pool(1 << 15)
    frames = np.zeros((max_depth + 2, F_LEN), dtype=np.int64)
    node_cap = int(max_nodes) if max_nodes is not None else None
    # a call with no node to spend compiles or loads the JIT code outside the timed search
    _search_chunk(state, tt, ctr, path, buf, buf2, pool, frames, False)
    resume = False
    chunk = 4
    t0 = time.perf_counter()
    pn = dn = 1
    taint = CLEAN
    proof_depth = 0
    note = ""
    while True:
        limit = int(ctr[C_NODES]) + chunk
        if node_cap is not None:
            limit = min(limit, node_cap)
        ctr[C_LIMIT] = limit
        c0 = int(ctr[C_NODES])
        t1 = time.perf_counter()
        pn, dn, taint, proof_depth = _search_chunk(state, tt, ctr, path, buf, buf2, pool, frames, resume)
        now = time.perf_counter()
        resume = True
        if not ctr[C_ABORT]:
            break
        if ctr[C_ABORT] == 2:  # the children pool was full: grow it and go on
            bigger = _pool(2 * pool.shape[0])
            bigger[: pool.shape[0]] = pool
            pool = bigger
            continue
        if node_cap is not None and ctr[C_NODES] >= node_cap:
            note = "nodes"
            break
        if max_seconds is not None and now - t0 >= max_seconds:
            note = "seconds"
            break
        # next chunk: about 5 ms of search at the rate seen, never past the time left
        rate = (int(ctr[C_NODES]) - c0) / max(now - t1, 1e-6)
        chunk = max(1, min(4 * chunk, int(rate * 0.005)))
        if max_seconds is not None:
            chunk = max(1, min(chunk, int(rate * (max_seconds - (now - t0)))))
    seconds = time.perf_counter() - t0
    nodes = int(ctr[C_NODES])
    stats = {"attacker": att, "repetitions": int(ctr[C_CYCLES]), "depth_cuts": int(ctr[C_CUTS])}
    if ctr[C_ABORT]:
        return TinueResult(UNKNOWN, None, [], nodes, seconds, note=note or "nodes", **stats)
    if pn == 0:
        out = np.empty(2 * max_depth + 2, dtype=np.int64)
        npv = _principal_variation(state, tt, ctr, buf, buf2, out)
        codes = [int(c) for c in out[:npv]]
        texts = []
        walk = Position(state.copy())
        for c in codes:
            texts.append(walk.ptn(c))
            walk.make(c)
        complete = walk.is_over and walk.result.winner == att
        first = codes[0] if codes and (int(state[I_PLY]) & 1) == att else None
        return TinueResult(
            WIN,
            texts[0] if first is not None else None,
            texts,
            nodes,
            seconds,
            depth=int(proof_depth),
            move_code=first,
            pv_codes=codes,
            pv_complete=complete,
            **stats,
        )
    if dn == 0:
        if taint == CUT:
            return TinueResult(UNKNOWN, None, [], nodes, seconds, note="depth limit", **stats)
        return TinueResult(NO_WIN, None, [], nodes, seconds, **stats)
    return TinueResult(UNKNOWN, None, [], nodes, seconds, note=note or "nodes", **stats)


def format_result(result: TinueResult) -> str:
    """Text of a result as the command line prints it (verdict, move, PV, depth, nodes, nodes/s)."""
    lines = [f"verdict {result.verdict}" + (f" ({result.note})" if result.note else "")]
    if result.verdict == WIN:
        lines.append(f"move {result.move if result.move is not None else '-'}")
        lines.append("pv " + " ".join(result.pv) + ("" if result.pv_complete else " ..."))
        lines.append(f"depth {result.depth} plies")
    lines.append(
        f"nodes {result.nodes} time {result.seconds:.3f} s nodes/s {result.nodes_per_second:,.0f}"
    )
    return "\n".join(lines)


__all__ = [
    "DEFAULT_TINUE_NODES",
    "NO_WIN",
    "UNKNOWN",
    "WIN",
    "TinueResult",
    "format_result",
    "is_tak",
    "prove_tinue",
    "road_in_one_moves",
    "road_moves",
    "wins_at_once",
]
