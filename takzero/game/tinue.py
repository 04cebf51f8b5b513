"""Tinuë prover: does the side to move have a forced road? (compiled depth-first proof-number search)

Terms: *tak* is a road threat (a player would complete a road with one more ply); *tinuë* is a
road threat that cannot be stopped (a forced road). A *road in one* for a player is a legal move of
theirs -- a flat or capstone placement, or a spread -- after which they have a road (under the
dragon clause the mover wins even when the move also completes the opponent's road).

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
  node; a move after which the attacker wins at once (found with the road-in-one test below, plus
  a full scan of the attacker's moves when one ply can end the game by flats) is settled on the
  spot, so a node's initial proof number is the number of defender moves that stop every
  immediate win ("the number of blocks"). A defender node without such a move is proved: tinuë.

So WIN is a proof that the attacker wins by force with tak on every move of his, ending with a
road (or a flat win the last move forces); NO_WIN proves that no such forced line exists (there may
still be a forced win by quiet moves, which this search does not look at); UNKNOWN means the node
or time budget ran out (or the depth limit was reached somewhere the answer depended on).

Repetitions (the graph-history-interaction problem, GHI; M. Kishimoto and M. Müller, "A solution
to the GHI problem for depth-first proof-number search", Information Sciences 2005): only spreads
can repeat a position. A child whose position is already on the current path (since its last
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

Budget: ``max_nodes`` counts node visits (one per call of the df-pn recursion, re-visits counted
again) and is never exceeded; ``max_seconds`` is checked between compiled chunks of at most about
20 ms of search (the first chunk is 256 nodes), so a search stops within a few tens of ms of it.

The proof depth reported with a WIN is the number of plies from the root to the end of the game
along the longest line of the proof found; it bounds the length of the forced win (a shorter one
may exist). The principal variation (PV) follows the proving moves for the attacker and, for the
defender, the reply whose proof is longest; it can stop short if table entries were replaced.

Public API: :func:`prove_tinue` (a :class:`TinueResult`), :func:`is_tak`,
:func:`road_in_one_moves`; compiled helpers :func:`road_moves` and :func:`wins_at_once` for other
compiled code. Used by ``python -m takzero.game tinue`` and ``annotate``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from takzero.game import core
from takzero.game.core import (
    CAP,
    FLAT,
    I_CAPS,
    I_HASH,
    I_PLY,
    I_RESULT,
    I_SIZE,
    I_STONES,
    OFF_HEIGHT,
    OFF_TOP,
    PATTERN_LIST,
    PATTERN_NUM,
    RESULT_NONE,
    _free_run,
    _road_on,
    _spread_bitboards,
    direction_step,
    generate_moves,
    lowest_bit,
    make_move,
    make_placement,
    result_winner,
    road_bitboard,
    road_win_squares,
    unmake_move,
)
from takzero.game.moves import format_ptn
from takzero.game.position import Position

WIN = "WIN"
NO_WIN = "NO_WIN"
UNKNOWN = "UNKNOWN"

INF = 1 << 40  # proof/disproof number infinity
CLEAN = 1 << 30  # taint of a disproof that does not depend on the path
CUT = -1  # taint of a disproof that rests on the depth limit (never clears)
EPS_NUM = 5  # 1 + epsilon = 5/4
EPS_DEN = 4
DEFAULT_MAX_DEPTH = 60
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
C_EXPAND = 9  # node expansions (move generation + classification)
C_LEN = 10


# ---------------------------------------------------------------------------------------------
# Road in one, tak, win at once
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def road_moves(state: np.ndarray, side: int, out: np.ndarray, list_all: bool) -> int:
    """Moves of ``side`` (0 white, 1 black) that complete a road for ``side`` at once, as if it
    were ``side``'s turn (whoever is to move): written to ``out`` (int64 move codes, length
    >= ``num_actions(N)``), their number returned; with ``list_all=False`` it stops at the first
    (returns 0 or 1). Nothing is found in a finished position or during the opening plies.

    Placements: :func:`~takzero.game.core.road_win_squares` (flat and capstone per square, as the
    reserve allows). Spreads: for each stack ``side`` controls and each direction, the squares the
    spread can reach plus its origin are added to ``side``'s road pieces; only when that union holds
    a road (a necessary condition, since a spread changes no other square) are the drop patterns
    played and tested one by one. ``state`` is restored.
    """
    if state[I_RESULT] != RESULT_NONE:
        return 0
    ply = state[I_PLY]
    flip = (ply & 1) != side
    if flip:
        state[I_PLY] = ply + 1
    if state[I_PLY] < 2:
        state[I_PLY] = ply
        return 0
    size = state[I_SIZE]
    nsq = size * size
    n = 0
    stones = state[I_STONES + side]
    caps = state[I_CAPS + side]
    if stones > 0 or caps > 0:
        win = road_win_squares(state)
        while win != np.uint64(0):
            sq = lowest_bit(win)
            win &= win - np.uint64(1)
            if stones > 0:
                out[n] = make_placement(sq, FLAT)
                n += 1
            if caps > 0:
                out[n] = make_placement(sq, CAP)
                n += 1
            if not list_all:
                state[I_PLY] = ply
                return 1
    bb = road_bitboard(state, side)
    own, stops, walls = _spread_bitboards(state, nsq, side)
    one = np.uint64(1)
    while own != np.uint64(0):
        sq = lowest_bit(own)
        own &= own - one
        carry = min(state[OFF_HEIGHT + sq], size)
        is_cap = state[OFF_TOP + sq] == CAP
        for direction in range(4):
            free, wall = _free_run(stops, walls, size, sq, direction)
            f = 1 if (is_cap and wall) else 0
            reach = free + f
            if reach == 0:
                continue
            step = direction_step(direction, size)
            cover = bb | (one << np.uint64(sq))
            s = sq
            for _ in range(reach):
                s += step
                cover |= one << np.uint64(s)
            if not _road_on(cover, size):
                continue
            base = sq | (direction << 8)
            for j in range(PATTERN_NUM[carry, free, f]):
                m = base | (PATTERN_LIST[carry, free, f, j] << 10)
                u = core.apply_move(state, m)
                road = _road_on(road_bitboard(state, side), size)
                unmake_move(state, m, u)
                if road:
                    out[n] = m
                    n += 1
                    if not list_all:
                        state[I_PLY] = ply
                        return 1
    state[I_PLY] = ply
    return n


@njit(cache=True)
def wins_at_once(state: np.ndarray, buf: np.ndarray) -> int:
    """A move with which the side to move wins at once (a road; or a flat win when the move ends
    the game: it empties the mover's reserve or fills the board), or -1. ``buf``: int64 scratch of
    length >= ``num_actions(N)``. Roads via :func:`road_moves`; the flat count only needs a full
    scan of the moves when one ply can end the game (the mover has one piece left, or fewer empty
    squares than the board size: a spread fills at most size - 1). ``state`` is restored."""
    if state[I_RESULT] != RESULT_NONE:
        return -1
    mover = state[I_PLY] & 1
    if road_moves(state, mover, buf, False) > 0:
        return buf[0]
    size = state[I_SIZE]
    empties = 0
    for sq in range(size * size):
        if state[OFF_HEIGHT + sq] == 0:
            empties += 1
    if state[I_STONES + mover] + state[I_CAPS + mover] > 1 and empties >= size:
        return -1
    n = generate_moves(state, buf)
    for j in range(n):
        m = buf[j]
        u = make_move(state, m)
        r = state[I_RESULT]
        unmake_move(state, m, u)
        if r != RESULT_NONE and result_winner(r) == mover:
            return m
    return -1


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


@njit(cache=True)
def _mid(state, depth, since, th_phi, th_delta, parent_inv, tt, ctr, path, buf, buf2):
    """One df-pn visit (Nagai's MID) of the node ``state`` at path index ``depth``: expand it,
    then search its most-proving child while the node's (phi, delta) stay under the thresholds.
    Returns (pn, dn, taint, proof depth) of the node; stores them in ``tt``. ``since``: path index
    of the first position after the last placement (repetitions can only go back that far);
    ``parent_inv``: the caller's invocation id (the context of a tainted disproof)."""
    if ctr[C_NODES] >= ctr[C_LIMIT]:
        ctr[C_ABORT] = 1
        return 1, 1, CLEAN, 0
    start_nodes = ctr[C_NODES]
    ctr[C_NODES] = start_nodes + 1
    ctr[C_EXPAND] += 1
    inv = ctr[C_INV] + 1
    ctr[C_INV] = inv
    gen = ctr[C_GEN]
    attacker = ctr[C_ATTACKER]
    key = state[I_HASH]
    is_or = (state[I_PLY] & 1) == attacker
    n = generate_moves(state, buf)
    cm = np.empty(n, dtype=np.int64)
    cpn = np.empty(n, dtype=np.int64)
    cdn = np.empty(n, dtype=np.int64)
    ctaint = np.empty(n, dtype=np.int64)
    cdep = np.empty(n, dtype=np.int64)
    ckey = np.empty(n, dtype=np.int64)
    k = 0
    maxdep = 0  # defender node: the longest line among the replies settled at expansion
    cut = depth + 1 > ctr[C_MAXDEPTH]
    for j in range(n):
        m = buf[j]
        u = make_move(state, m)
        r = state[I_RESULT]
        if r != RESULT_NONE:
            won = result_winner(r) == attacker
            unmake_move(state, m, u)
            if is_or and won:
                _tt_store(tt, key, gen, 0, INF, 1, m, 1, CLEAN, 0)
                return 0, INF, CLEAN, 1
            if not is_or:
                if not won:  # the defender ends the game without losing: refuted
                    _tt_store(tt, key, gen, INF, 0, 1, m, 0, CLEAN, 0)
                    return INF, 0, CLEAN, 0
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
            cm[k] = m
            ckey[k] = h
            cpn[k] = 1
            cdn[k] = 1
            ctaint[k] = CLEAN
            cdep[k] = 0
            loop = -1
            if (m >> 6) & 3 == 0:  # a spread: the position may repeat one on the path
                for i in range(since, depth + 1):
                    if path[i] == h:
                        loop = i
                        break
            if loop >= 0:
                ctr[C_CYCLES] += 1
                cpn[k] = INF
                cdn[k] = 0
                ctaint[k] = loop
            elif cut:
                ctr[C_CUTS] += 1
                cpn[k] = INF
                cdn[k] = 0
                ctaint[k] = CUT
            else:
                s = _tt_slot(tt, h, gen)
                if s >= 0 and _tt_usable(tt, s, inv):
                    cpn[k] = tt[s, T_PN]
                    cdn[k] = tt[s, T_DN]
                    ctaint[k] = tt[s, T_TAINT]
                    cdep[k] = tt[s, T_DEPTH]
            k += 1
        unmake_move(state, m, u)
    if k == 0:
        if is_or:  # no tak: disproved under the move restriction
            _tt_store(tt, key, gen, INF, 0, 1, -1, 0, CLEAN, 0)
            return INF, 0, CLEAN, 0
        _tt_store(tt, key, gen, 0, INF, 1, -1, maxdep, CLEAN, 0)  # every reply loses at once
        return 0, INF, CLEAN, maxdep

    phi = 0
    delta = 0
    while True:
        # phi = min over children of their delta, delta = sum of their phi
        # (OR node: phi = pn, delta = dn, a child's (phi, delta) = (dn, pn); AND node: swapped)
        best = -1
        phi = INF
        delta = 0
        delta2 = INF
        for i in range(k):
            if cpn[i] != 0 and cdn[i] != 0:
                s = _tt_slot(tt, ckey[i], gen)
                if s >= 0 and _tt_usable(tt, s, inv):
                    cpn[i] = tt[s, T_PN]
                    cdn[i] = tt[s, T_DN]
                    ctaint[i] = tt[s, T_TAINT]
                    cdep[i] = tt[s, T_DEPTH]
            if is_or:
                pc = cdn[i]
                dc = cpn[i]
            else:
                pc = cpn[i]
                dc = cdn[i]
            delta = _sat_add(delta, pc)
            if dc < phi:
                delta2 = phi
                phi = dc
                best = i
            elif dc < delta2:
                delta2 = dc
        if phi == 0 or delta == 0 or phi >= th_phi or delta >= th_delta:
            break
        pbest = cdn[best] if is_or else cpn[best]
        if th_delta >= INF:
            th_phi_c = INF
        else:
            th_phi_c = th_delta - delta + pbest
        if delta2 >= INF:
            th_delta_c = th_phi
        else:
            th_delta_c = min(th_phi, max(delta2 + 1, (delta2 * EPS_NUM + EPS_DEN - 1) // EPS_DEN))
        if is_or:
            th_pn_c = th_delta_c
            th_dn_c = th_phi_c
        else:
            th_pn_c = th_phi_c
            th_dn_c = th_delta_c
        m = cm[best]
        u = make_move(state, m)
        path[depth + 1] = state[I_HASH]
        since_c = since if (m >> 6) & 3 == 0 else depth + 1
        # the child's (phi, delta) thresholds in its own terms: an AND child's phi is its dn
        if is_or:
            rp, rd, rt, rdep = _mid(state, depth + 1, since_c, th_dn_c, th_pn_c, inv, tt, ctr, path, buf, buf2)
        else:
            rp, rd, rt, rdep = _mid(state, depth + 1, since_c, th_pn_c, th_dn_c, inv, tt, ctr, path, buf, buf2)
        unmake_move(state, m, u)
        if ctr[C_ABORT]:
            break
        cpn[best] = rp
        cdn[best] = rd
        ctaint[best] = rt
        cdep[best] = rdep

    work = ctr[C_NODES] - start_nodes
    if is_or:
        pn = phi
        dn = delta
    else:
        pn = delta
        dn = phi
    if pn == 0:
        dn = INF
        if is_or:  # the shortest proved child
            bi = -1
            for i in range(k):
                if cpn[i] == 0 and (bi < 0 or cdep[i] < cdep[bi]):
                    bi = i
            d = 1 + cdep[bi]
            _tt_store(tt, key, gen, 0, INF, work, cm[bi], d, CLEAN, 0)
            return 0, INF, CLEAN, d
        d = maxdep
        for i in range(k):
            d = max(d, 1 + cdep[i])
        _tt_store(tt, key, gen, 0, INF, work, -1, d, CLEAN, 0)
        return 0, INF, CLEAN, d
    if dn == 0:
        pn = INF
        mv = -1
        if is_or:  # every child disproved: the worst taint counts
            taint = CLEAN
            for i in range(k):
                taint = min(taint, ctaint[i])
        else:  # one refutation suffices: the cleanest
            taint = CUT - 1
            for i in range(k):
                if cdn[i] == 0 and ctaint[i] > taint:
                    taint = ctaint[i]
                    mv = cm[i]
        if taint >= depth:  # a loop back to this very node is a true repetition
            taint = CLEAN
        _tt_store(tt, key, gen, INF, 0, work, mv, 0, taint, parent_inv)
        return INF, 0, taint, 0
    _tt_store(tt, key, gen, pn, dn, work, -1, 0, CLEAN, 0)
    return pn, dn, CLEAN, 0


@njit(cache=True)
def _search_chunk(state, tt, ctr, path, buf, buf2):
    """One df-pn call from the root with infinite thresholds, stopping at ``ctr[C_LIMIT]`` nodes.
    Returns (pn, dn, taint, proof depth) of the root; ``state`` is restored."""
    ctr[C_ABORT] = 0
    path[0] = state[I_HASH]
    return _mid(state, 0, 0, INF, INF, 0, tt, ctr, path, buf, buf2)


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

    @property
    def nodes_per_second(self) -> float:
        """Node visits per second of wall time."""
        return self.nodes / self.seconds if self.seconds > 0 else 0.0


_TABLES: dict[int, list] = {}


def _tables(tt_bits: int) -> list:
    """The reusable table of this size and its generation counter (one per process)."""
    if tt_bits not in _TABLES:
        tt = np.zeros((1 << tt_bits, TT_FIELDS), dtype=np.int64)
        tt[:, T_GEN] = -1
        _TABLES[tt_bits] = [tt, 0]
    return _TABLES[tt_bits]


def _state_of(position: Position | np.ndarray) -> np.ndarray:
    if isinstance(position, Position):
        return position.state
    if isinstance(position, np.ndarray) and position.dtype == np.int64 and position.shape == (core.STATE_LEN,):
        return position
    raise TypeError(
        f"expected a Position or an int64 state array of shape ({core.STATE_LEN},), got {type(position).__name__}"
    )


def _side(state: np.ndarray, side: int | None, default: int) -> int:
    if side is None:
        return default
    if side not in (0, 1):
        raise ValueError(f"side must be 0 (white) or 1 (black), got {side!r}")
    return int(side)


def road_in_one_moves(position: Position | np.ndarray, side: int | None = None) -> np.ndarray:
    """Move codes (int64 array, placements first) with which ``side`` (0 white, 1 black; default the
    side to move) would complete a road for itself with one ply, as if it were ``side``'s turn.
    Empty during the opening plies and in a finished position. Raises TypeError/ValueError for a
    bad position or side. Method: :func:`road_moves`."""
    state = _state_of(position)
    side = _side(state, side, int(state[I_PLY]) & 1)
    buf = np.empty(core.num_actions(int(state[I_SIZE])) + 8, dtype=np.int64)
    n = road_moves(state, side, buf, True)
    return buf[:n].copy()


def is_tak(position: Position | np.ndarray, side: int | None = None) -> bool:
    """True if ``side`` threatens a road: it has a road in one (see :func:`road_in_one_moves`).
    ``side`` defaults to the player who made the last ply (the one *not* to move), so
    ``is_tak(pos)`` says whether the move that led to ``pos`` was tak. False in a finished position.
    Raises TypeError/ValueError for a bad position or side."""
    state = _state_of(position)
    side = _side(state, side, 1 - (int(state[I_PLY]) & 1))
    buf = np.empty(core.num_actions(int(state[I_SIZE])) + 8, dtype=np.int64)
    return road_moves(state, side, buf, False) > 0


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
    every ~20 ms of search); None for both searches until solved, which can take very long.
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
    node_cap = int(max_nodes) if max_nodes is not None else None
    chunk = 256
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
        pn, dn, taint, proof_depth = _search_chunk(state, tt, ctr, path, buf, buf2)
        now = time.perf_counter()
        if not ctr[C_ABORT]:
            break
        if node_cap is not None and ctr[C_NODES] >= node_cap:
            note = "nodes"
            break
        if max_seconds is not None and now - t0 >= max_seconds:
            note = "seconds"
            break
        rate = (int(ctr[C_NODES]) - c0) / max(now - t1, 1e-6)
        chunk = max(256, int(rate * 0.02))
        if max_seconds is not None:
            left = max_seconds - (now - t0)
            chunk = max(1, min(chunk, int(rate * left) + 1))
    seconds = time.perf_counter() - t0
    nodes = int(ctr[C_NODES])
    if pn == 0 and not ctr[C_ABORT]:
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
            attacker=att,
            move_code=first,
            pv_codes=codes,
            pv_complete=complete,
        )
    if dn == 0 and not ctr[C_ABORT]:
        if taint == CUT:
            return TinueResult(UNKNOWN, None, [], nodes, seconds, attacker=att, note="depth limit")
        return TinueResult(NO_WIN, None, [], nodes, seconds, attacker=att)
    return TinueResult(UNKNOWN, None, [], nodes, seconds, attacker=att, note=note or "nodes")


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
    "NO_WIN",
    "UNKNOWN",
    "WIN",
    "TinueResult",
    "format_ptn",
    "format_result",
    "is_tak",
    "prove_tinue",
    "road_in_one_moves",
    "road_moves",
    "wins_at_once",
]
