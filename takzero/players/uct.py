"""The UCT baseline: UCT (UCB1 applied to trees) with uniformly random rollouts, compiled with
numba over node/edge pool arrays, and :class:`UCTPlayer`, which owns its clock
(:meth:`UCTPlayer.think`: searches of growing size until the time is spent or a stop flag is set).

Deterministic for a given seed. Compiled code draws random numbers from numba's per-thread legacy
``np.random`` state, seeded at the start of every compiled call (numba compiles the legacy API;
hence the file-wide NPY002 waiver).
"""

# ruff: noqa: NPY002

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace

import numpy as np
from numba import njit

from takzero.game.core import (
    I_PLY,
    I_RESULT,
    I_SIZE,
    RESULT_NONE,
    flat_winner,
    generate_moves,
    make_move,
    num_actions,
    result_winner,
    unmake_move,
)
from takzero.game.position import Position
from takzero.game.tinue import DEFAULT_TINUE_NODES
from takzero.players.base import BasePlayer, PlayerMove, Progress, stop_flag
from takzero.players.tactics import answer_proven_win, avoid_tinue, check_tinue_nodes
from takzero.search.limit import Limit

#: Default UCB1 exploration constant c in Q + c * sqrt(ln N / n) with rewards in [0, 1].
#: UCB1's regret bound (Auer et al. 2002) uses c = sqrt(2), and Kocsis & Szepesvari's UCT keeps
#: that form; random-rollout programs usually play better with less exploration. Measured here on
#: 5x5 at 1000 simulations, rollout cap 30, 40 games (20 paired openings) per match: c = 0.7 beat
#: c = 1.41 by +89 Elo (95% interval -8..+202), c = 0.35 beat c = 0.7 by +70 (-8..+157), and
#: c = 0.35 against c = 0.2 was even (+17, -86..+124).
DEFAULT_EXPLORATION = 0.35
DEFAULT_SIMULATIONS = 1000
#: Rollout length cap in plies (then the flat count decides). On 5x5 at 1000 simulations a cap of
#: 30 beat a cap of 100 (13-1-6 in 20 games) while searching 2-3 times as many simulations per
#: second; 50 vs 30 was even (10-10).
DEFAULT_ROLLOUT_PLIES = 30
#: Default bound of a UCT search tree in nodes (one per simulation; 40 bytes each plus 32 bytes
#: per move of every expanded node): ``go nodes`` beyond it scores the new positions by rollouts
#: without storing them.
DEFAULT_TREE_NODES = 2_000_000


@njit(cache=True)
def _grow_int(a: np.ndarray, n: int) -> np.ndarray:
    out = np.empty(n, dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True)
def _grow_float(a: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True)
def _white_reward(result: int) -> float:
    """Reward in [0, 1] for white of a result code: 1 win, 0.5 draw, 0 loss."""
    w = result_winner(result)
    if w == 0:
        return 1.0
    if w == 1:
        return 0.0
    return 0.5


@njit(cache=True)
def rollout(state: np.ndarray, max_plies: int, buf: np.ndarray) -> int:
    """Play uniformly random moves in ``state`` (changed in place) until the game ends or
    ``max_plies`` plies are played; return the result code: the rules' result, or at the cap the
    flat count as if the game ended there (komi included; a tie is a draw)."""
    for _ in range(max_plies):
        if state[I_RESULT] != RESULT_NONE:
            break
        n = generate_moves(state, buf)
        make_move(state, buf[np.random.randint(n)])
    r = state[I_RESULT]
    if r != RESULT_NONE:
        return r
    return flat_winner(state)


@njit(cache=True)
def _better_edge(j: int, be: int, edge_visits: np.ndarray, edge_reward: np.ndarray) -> bool:
    """Edge ``j`` ranks above edge ``be``: more visits, then a better mean reward."""
    return edge_visits[j] > edge_visits[be] or (
        edge_visits[j] == edge_visits[be]
        and edge_reward[j] * edge_visits[be] > edge_reward[be] * edge_visits[j]
    )


@njit(cache=True, nogil=True)
def uct_search(
    root: np.ndarray,
    simulations: int,
    exploration: float,
    rollout_plies: int,
    seed: int,
    win_check: bool,
    stop: np.ndarray,
    tree_nodes: int,
    lines: int,
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]:
    """UCT (Kocsis & Szepesvari 2006, "Bandit based Monte-Carlo planning") from ``root`` (not
    over, not modified) with up to ``simulations`` simulations.

    Each simulation descends the tree choosing, at a node whose every move has been tried, the
    edge maximising UCB1 (Auer, Cesa-Bianchi & Fischer 2002, "Finite-time analysis of the
    multiarmed bandit problem")::

        Q(s, a) + exploration * sqrt(ln N(s) / N(s, a))

    with Q the mean reward in [0, 1] (win 1, draw 0.5, loss 0) of the player to move at s, N(s)
    the visits of s and N(s, a) those of the edge. A node tries each of its moves once first, in
    uniformly random order. The first new node of a simulation is added to the tree and scored by
    one :func:`rollout` (uniformly random moves, ``rollout_plies`` at most, flat count at the cap);
    a terminal node in the tree is scored by its exact result every time it is reached.

    ``win_check``: when a node is expanded, its moves are scanned for an immediate win of the side
    to move there; if there is one, the node is a proven win for that side and is scored as a
    terminal node from then on (the one-ply case of MCTS-Solver, Winands, Bjornsson & Saito 2008,
    "Monte-Carlo tree search solver"). At the root a winning move is played at once. Without it,
    1000 simulations rarely see the opponent's road-in-one on a 5x5 board (about 100 moves per
    node need about 100 visits each); with it two visits of a move are enough.

    ``stop``: (1,) uint8 array read before every simulation after the first: non-zero ends the
    search (another thread sets it; the function releases the GIL, ``nogil``), so a search is
    interrupted within one simulation. ``tree_nodes``: the most nodes the tree holds (>= 2); once
    full, a simulation that reaches a new position scores it by a rollout without adding it
    (memory stays bounded whatever ``simulations`` is). ``lines``: how many root moves to report
    (MultiPV, >= 1).

    Storage: node arrays (first edge, edge count, tried count, visits, result) and edge arrays
    (move, child, visits, reward sum, draws), no Python objects; edge arrays grow by doubling.

    Returns (k, moves (lines,), visits (lines,), rewards (lines,), draws (lines,) float64,
    pvs (lines, 64) int64, pv lengths (lines,), nodes in the tree, simulations run): the k <=
    ``lines`` most visited root moves, best first (ties: better mean reward), their visits, reward
    sums and draw counts (win 1, draw 0.5, loss 0; the mover's view) and most visited lines. A
    win in one at the root (``win_check``) returns k = 1, that move with 0 visits and 0
    simulations.
    """
    np.random.seed(seed)
    size = root[I_SIZE]
    nb = num_actions(size)
    buf = np.empty(nb, dtype=np.int64)
    max_nodes = min(simulations, max(tree_nodes, 2) - 2) + 2
    node_first = np.full(max_nodes, -1, dtype=np.int64)
    node_count = np.zeros(max_nodes, dtype=np.int64)
    node_tried = np.zeros(max_nodes, dtype=np.int64)
    node_visits = np.zeros(max_nodes, dtype=np.int64)
    node_result = np.zeros(max_nodes, dtype=np.int64)
    cap = 1024
    edge_move = np.empty(cap, dtype=np.int64)
    edge_child = np.empty(cap, dtype=np.int64)
    edge_visits = np.zeros(cap, dtype=np.int64)
    edge_reward = np.zeros(cap, dtype=np.float64)
    edge_draws = np.zeros(cap, dtype=np.float64)
    n_nodes = 1
    n_edges = 0
    node_result[0] = root[I_RESULT]
    root_ply = root[I_PLY]
    work = root.copy()
    path = np.empty(max_nodes + 1, dtype=np.int64)
    lines = max(lines, 1)
    out_moves = np.zeros(lines, dtype=np.int64)
    out_visits = np.zeros(lines, dtype=np.int64)
    out_reward = np.zeros(lines, dtype=np.float64)
    out_draws = np.zeros(lines, dtype=np.float64)
    out_pv = np.zeros((lines, 64), dtype=np.int64)
    out_pv_len = np.zeros(lines, dtype=np.int64)
    if win_check:
        mover = root_ply & 1
        n = generate_moves(work, buf)
        for j in range(n):
            u = make_move(work, buf[j])
            r = work[I_RESULT]
            unmake_move(work, buf[j], u)
            if r != RESULT_NONE and result_winner(r) == mover:
                out_moves[0] = buf[j]
                out_reward[0] = 1.0
                out_pv[0, 0] = buf[j]
                out_pv_len[0] = 1
                return 1, out_moves, out_visits, out_reward, out_draws, out_pv, out_pv_len, 1, 0

    done = 0
    for _ in range(simulations):
        if done > 0 and stop[0] != 0:
            break
        done += 1
        work[:] = root
        node = 0
        depth = 0
        result = RESULT_NONE
        while True:
            if node_result[node] != RESULT_NONE:
                result = node_result[node]
                break
            if node_first[node] < 0:
                n = generate_moves(work, buf)
                if n_edges + n > cap:
                    new_cap = cap * 2
                    while new_cap < n_edges + n:
                        new_cap *= 2
                    edge_move = _grow_int(edge_move, new_cap)
                    edge_child = _grow_int(edge_child, new_cap)
                    edge_visits = _grow_int(edge_visits, new_cap)
                    edge_reward = _grow_float(edge_reward, new_cap)
                    edge_draws = _grow_float(edge_draws, new_cap)
                    edge_visits[cap:] = 0
                    cap = new_cap
                for j in range(n):
                    edge_move[n_edges + j] = buf[j]
                    edge_child[n_edges + j] = -1
                    edge_visits[n_edges + j] = 0
                    edge_reward[n_edges + j] = 0.0
                    edge_draws[n_edges + j] = 0.0
                node_first[node] = n_edges
                node_count[node] = n
                n_edges += n
                if win_check and node != 0:
                    mover = work[I_PLY] & 1
                    for j in range(n):
                        u = make_move(work, buf[j])
                        r = work[I_RESULT]
                        unmake_move(work, buf[j], u)
                        if r != RESULT_NONE and result_winner(r) == mover:
                            node_result[node] = r
                            break
                    if node_result[node] != RESULT_NONE:
                        result = node_result[node]
                        break
            first = node_first[node]
            count = node_count[node]
            tried = node_tried[node]
            if tried < count:
                # Try an untried move, chosen uniformly: swap it to the end of the tried block.
                j = first + tried + np.random.randint(count - tried)
                t = first + tried
                mv = edge_move[j]
                edge_move[j] = edge_move[t]
                edge_move[t] = mv
                node_tried[node] = tried + 1
                e = t
            else:
                log_n = math.log(node_visits[node])
                best = -1.0
                e = first
                for j in range(first, first + count):
                    v = edge_visits[j]
                    ucb = edge_reward[j] / v + exploration * math.sqrt(log_n / v)
                    if ucb > best:
                        best = ucb
                        e = j
            path[depth] = e
            depth += 1
            make_move(work, edge_move[e])
            child = edge_child[e]
            if child < 0:
                if n_nodes < max_nodes:
                    child = n_nodes
                    n_nodes += 1
                    edge_child[e] = child
                    node_result[child] = work[I_RESULT]
                if work[I_RESULT] != RESULT_NONE:
                    result = work[I_RESULT]
                else:
                    result = rollout(work, rollout_plies, buf)
                break
            node = child
        # Back up: the edge at depth d was chosen by the player to move at root ply + d.
        rw = _white_reward(result)
        node_visits[0] += 1
        for d in range(depth):
            e = path[d]
            edge_visits[e] += 1
            if ((root_ply + d) & 1) == 0:
                edge_reward[e] += rw
            else:
                edge_reward[e] += 1.0 - rw
            if rw == 0.5:
                edge_draws[e] += 1.0
            if edge_child[e] >= 0:
                node_visits[edge_child[e]] += 1

    # The root moves, best first (most visits, then best mean reward), each with its line.
    first = node_first[0]
    tried = node_tried[0]
    k = 0
    while k < lines and k < tried:
        be = -1
        for j in range(first, first + tried):
            taken = False
            for i in range(k):
                if out_moves[i] == edge_move[j]:
                    taken = True
            if not taken and (be < 0 or _better_edge(j, be, edge_visits, edge_reward)):
                be = j
        if be < 0 or edge_visits[be] == 0:
            break
        out_moves[k] = edge_move[be]
        out_visits[k] = edge_visits[be]
        out_reward[k] = edge_reward[be]
        out_draws[k] = edge_draws[be]
        out_pv[k, 0] = edge_move[be]
        pv_len = 1
        node = edge_child[be]
        while pv_len < 64 and node >= 0 and node_first[node] >= 0 and node_tried[node] > 0:
            f = node_first[node]
            b = f
            for j in range(f, f + node_tried[node]):
                if _better_edge(j, b, edge_visits, edge_reward):
                    b = j
            if edge_visits[b] == 0:
                break
            out_pv[k, pv_len] = edge_move[b]
            pv_len += 1
            node = edge_child[b]
        out_pv_len[k] = pv_len
        k += 1
    return k, out_moves, out_visits, out_reward, out_draws, out_pv, out_pv_len, n_nodes, done


def _simulations(answer: PlayerMove) -> int:
    """The simulations a :meth:`UCTPlayer._search` answer ran (its ``info["simulations"]``)."""
    n = answer.info["simulations"]
    assert isinstance(n, int), n  # _search stores an int
    return n


class UCTPlayer(BasePlayer):
    """UCT with uniformly random rollouts (see :func:`uct_search` for the formula and sources).

    ``simulations``: simulations per move (>= 1; default 1000). ``exploration``: the UCB1
    constant c for rewards in [0, 1] (default 0.35, measured; sqrt(2) is UCB1's textbook value).
    ``rollout_plies``: a rollout stops after this many plies (>= 0) and is scored by the flat
    count (komi included), as if the game ended there. ``win_check``: proven wins in one at
    expansion (see :func:`uct_search`; off = plain UCT). ``tinue_nodes``: node budget of the tinuë
    checks around each search (:mod:`takzero.players.tactics`: a proven forced road is played at
    once, a move after which the opponent has one is replaced by another legal move without one;
    0: off). Raises ValueError for bad settings or a finished position. No tree reuse between
    moves (``observe`` does nothing).

    ``PlayerMove``: ``value`` = 2 * Q - 1 of the chosen move (Q its mean reward in [0, 1]),
    ``nodes`` = simulations (0 when ``win_check`` found a win in one at the root and played it
    without searching), ``pv`` = most-visited line, ``info`` = visits of the move, tree nodes.
    """

    name = "uct"

    def __init__(
        self,
        simulations: int = DEFAULT_SIMULATIONS,
        exploration: float = DEFAULT_EXPLORATION,
        rollout_plies: int = DEFAULT_ROLLOUT_PLIES,
        win_check: bool = True,
        tinue_nodes: int = DEFAULT_TINUE_NODES,
        seed: int = 0,
        name: str | None = None,
    ) -> None:
        if simulations < 1:
            raise ValueError(f"simulations must be >= 1, got {simulations}")
        if exploration < 0:
            raise ValueError(f"exploration must be >= 0, got {exploration}")
        if rollout_plies < 0:
            raise ValueError(f"rollout_plies must be >= 0, got {rollout_plies}")
        super().__init__(seed, name if name is not None else f"uct{simulations}")
        self.simulations = int(simulations)
        self.exploration = float(exploration)
        self.rollout_plies = int(rollout_plies)
        self.win_check = bool(win_check)
        self.tinue_nodes = check_tinue_nodes(tinue_nodes)
        self.tree_nodes: int = DEFAULT_TREE_NODES

    def choose(self, position: Position) -> PlayerMove:
        """One search of ``simulations`` simulations (with the tinuë checks). Raises ValueError on
        a finished position."""
        return self.think(position, Limit(nodes=self.simulations))

    def set_tree_nodes(self, nodes: int) -> None:
        """At most ``nodes`` (>= 2) nodes per search tree, one per simulation (see
        :func:`uct_search`). Raises ValueError below 2."""
        if nodes < 2:
            raise ValueError(f"tree_nodes must be >= 2, got {nodes}")
        self.tree_nodes = int(nodes)

    def _search(
        self, position: Position, simulations: int, flag: np.ndarray, multipv: int = 1
    ) -> PlayerMove:
        """One :func:`uct_search` (``flag``: its stop array); the answer of its best line, with
        ``lines`` when ``multipv`` > 1."""
        self._check_open(position)
        k, moves, visits, rewards, draws, pvs, pv_lens, tree, done = uct_search(
            position.state.copy(),
            simulations,
            self.exploration,
            self.rollout_plies,
            self._next_seed(),
            self.win_check,
            flag,
            self.tree_nodes,
            max(1, multipv),
        )
        answers = []
        for i in range(int(k)):
            n = int(visits[i])
            if n > 0:
                # The move's rollout results, smoothed with one virtual draw (add-one / Laplace
                # estimate) so a move seen once or twice does not report a certain win or loss;
                # value = win - loss = 2 * (reward + 0.5) / (n + 1) - 1.
                wins = float(rewards[i]) - 0.5 * float(draws[i])
                losses = max(0.0, n - wins - float(draws[i]))
                wdl = (wins / (n + 1), (float(draws[i]) + 1.0) / (n + 1), losses / (n + 1))
                score = (float(rewards[i]) + 0.5) / (n + 1)
            else:  # a win in one, played unsearched
                score, wdl = 1.0, (1.0, 0.0, 0.0)
            answers.append(
                PlayerMove(
                    int(moves[i]),
                    value=2.0 * score - 1.0,
                    wdl=wdl,
                    nodes=n,
                    pv=tuple(int(m) for m in pvs[i, : pv_lens[i]]),
                )
            )
        best = answers[0]
        return replace(
            best,
            nodes=int(done),  # 0: a win in one, played unsearched
            info={
                "visits": best.nodes,
                "tree_nodes": int(tree),
                "simulations": int(done),
                "win_in_one": int(done) == 0,
            },
            lines=tuple(answers) if multipv > 1 else (),
        )

    def think(
        self,
        position: Position,
        limit: Limit | None = None,
        on_progress: Progress | None = None,
        multipv: int = 1,
    ) -> PlayerMove:
        """An anytime search of ``position`` under ``limit`` (``nodes``, a time budget
        ``limit.move_seconds(side to move)``, ``stop``; the UCT tree is not kept between
        searches, so the clock is kept by restarting):

        * only a node limit: one search of ``nodes`` simulations (ended early when ``stop`` is
          set: the compiled search polls a stop flag every simulation, see :func:`stop_flag`);
        * a time limit, or no limit (until ``stop`` is set): searches of 64, 128, 256, ...
          simulations (each a fresh tree, capped by ``nodes`` and at the size that takes about a
          second) until the time is spent (the next one would not fit; the one running when the
          time runs out is cut there) or ``stop`` is set; the last search gives the move (a cut
          one only when it ran at least as many simulations as the one before). A win in one at
          the root (played unsearched) ends the search at once (without limits: once ``stop`` is
          set).

        Without ``nodes``, ``seconds`` and ``stop``: one search of ``simulations``.
        ``on_progress(answer, total)`` is called after each finished search. The answer's
        ``nodes`` is the total of simulations run for it. ``multipv`` > 1: the best root moves in
        ``lines``. With ``tinue_nodes`` > 0 a proven forced road is answered before any search
        (``nodes`` 0, ``info["mate"]``), and the searched move is checked with
        :func:`takzero.players.tactics.avoid_tinue` (the other legal moves in generation order as
        the alternatives). Raises ValueError on a finished position.
        """
        self._check_open(position)
        limit = limit if limit is not None else Limit()
        nodes, stop = limit.nodes, limit.stop
        seconds = limit.move_seconds(position.side_to_move)
        if nodes is None and seconds is None and stop is None:
            nodes = self.simulations
        win = answer_proven_win(position, self.tinue_nodes, nodes, seconds, stop, on_progress)
        if win is not None:
            return win
        pm = self._think(position, nodes, seconds, stop, on_progress, multipv)
        return avoid_tinue(position, pm, [pm.code], self.tinue_nodes, stop=stop)

    def _think(
        self,
        position: Position,
        nodes: int | None,
        seconds: float | None,
        stop: threading.Event | None,
        on_progress: Progress | None,
        multipv: int,
    ) -> PlayerMove:
        t0 = time.perf_counter()
        deadline = t0 + seconds if seconds is not None else None
        with stop_flag(stop, deadline) as flag:
            if seconds is None and nodes is not None:
                pm = self._search(position, int(nodes), flag, multipv)
                if on_progress is not None:
                    on_progress(pm, pm.nodes)
                return pm
            chunk = 64
            total = 0
            best: PlayerMove | None = None
            while True:
                n = chunk if nodes is None else min(chunk, nodes)
                c0 = time.perf_counter()
                pm = self._search(position, n, flag, multipv)
                took = time.perf_counter() - c0
                ran = _simulations(pm)
                total += ran
                cut = bool(flag[0])
                if best is None or not cut or ran >= _simulations(best):
                    best = pm
                best = replace(best, nodes=total)
                if on_progress is not None:
                    on_progress(best, total)
                if cut or (nodes is not None and n >= nodes):
                    return best
                if pm.info["win_in_one"]:  # more search changes nothing
                    if nodes is None and seconds is None and stop is not None:
                        stop.wait()  # no limits (go infinite): answer when told to stop
                    return best
                elapsed = time.perf_counter() - t0
                nxt = chunk * 2 if took < 1.0 else chunk
                if seconds is not None and elapsed + took * (nxt / n) * 1.1 > seconds:
                    return best
                chunk = nxt


__all__ = [
    "DEFAULT_EXPLORATION",
    "DEFAULT_ROLLOUT_PLIES",
    "DEFAULT_SIMULATIONS",
    "DEFAULT_TREE_NODES",
    "UCTPlayer",
    "rollout",
    "uct_search",
]
