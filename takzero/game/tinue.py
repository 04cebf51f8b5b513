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
Sciences 2005 -- this is a simpler, conservative scheme): only spreads can repeat a position. A
child whose position is already on the current path (since its last
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
from typing import Any

import numpy as np

from takzero.game import core
from takzero.game.core import (
    I_PLY,
    I_SIZE,
)
from takzero.game.dfpn import (
    C_ABORT,
    C_ATTACKER,
    C_CUTS,
    C_CYCLES,
    C_GEN,
    C_LEN,
    C_LIMIT,
    C_MAXDEPTH,
    C_NODES,
    CLEAN,
    CUT,
    DEFAULT_MAX_DEPTH,
    DEFAULT_TINUE_NODES,
    DEFAULT_TT_BITS,
    F_LEN,
    MAX_NODES,
    MAX_SECONDS,
    NO_WIN,
    P_LEN,
    T_GEN,
    TT_FIELDS,
    UNKNOWN,
    WIN,
    _principal_variation,
    _search_chunk,
)
from takzero.game.position import Position
from takzero.game.threats import _side, is_tak, road_in_one_moves, road_moves, wins_at_once

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
    if max_nodes is not None and not (
        isinstance(max_nodes, int | np.integer) and not isinstance(max_nodes, bool)
        and 1 <= max_nodes <= MAX_NODES
    ):
        raise ValueError(f"max_nodes must be an integer in 1..{MAX_NODES}, got {max_nodes!r}")
    if max_seconds is not None and not (
        isinstance(max_seconds, int | float) and not isinstance(max_seconds, bool)
        and 0 < max_seconds <= MAX_SECONDS
    ):
        raise ValueError(f"max_seconds must be a number in (0, {MAX_SECONDS:g}], got {max_seconds!r}")
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
    stats: dict[str, Any] = {"attacker": att, "repetitions": int(ctr[C_CYCLES]), "depth_cuts": int(ctr[C_CUTS])}
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
    "MAX_NODES",
    "MAX_SECONDS",
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
