"""Players: one interface for the arena, the play CLI and the TEI engine, and the fixed baselines.

The interface (:class:`Player`) is deliberately small:

* ``name`` -- a label for logs, PTN tags and match tables;
* ``reset(size, half_komi, seed=None)`` -- a new game starts on a ``size`` board with that komi (in
  half points); a ``seed`` (when given) restarts the player's random stream, so a game played from
  the same seeds is the same game;
* ``choose(position) -> PlayerMove`` -- the move to play in ``position`` (a legal move code plus
  optional evaluation: value, win/draw/loss, nodes searched, principal variation). The player must
  not change ``position`` (the arena hands it a copy anyway);
* ``observe(position, move)`` -- called by the arena after every ply of the game (both players'
  plies, opening plies included) with the position before the move and the move code, so a search
  player can keep its tree between moves. Players that need nothing do nothing.

A network player (added elsewhere, over ``takzero.search``) fits the same interface: it returns the
searched move with the root value (``value`` in -1..1 for the side to move, optionally ``wdl``), the
number of simulations (``nodes``) and the PV.

Baselines here, all deterministic for a given seed:

* :class:`RandomPlayer` -- a uniformly random legal move;
* :class:`GreedyPlayer` -- one-ply tactics (win now, else avoid giving the opponent a win in one,
  else maximise the flat difference), compiled with numba;
* :class:`UCTPlayer` -- UCT (UCB1 applied to trees) with uniformly random rollouts, compiled with
  numba over node/edge pool arrays.

Values everywhere are from the point of view of the player to move: win +1, draw 0, loss -1.

Compiled code draws random numbers from numba's per-thread legacy ``np.random`` state, seeded at the
start of every compiled call (numba compiles the legacy API; hence the file-wide NPY002 waiver).
"""

# ruff: noqa: NPY002

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from numba import njit

from takzero.game.core import (
    I_PLY,
    I_RESULT,
    I_SIZE,
    RESULT_DRAW,
    RESULT_NONE,
    RESULT_ROAD_BLACK,
    RESULT_ROAD_WHITE,
    flat_counts,
    flat_winner,
    generate_moves,
    make_move,
    num_actions,
    result_winner,
    unmake_move,
)
from takzero.game.position import Position

# ---------------------------------------------------------------------------------------------
# Interface
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlayerMove:
    """A player's answer: the move and what the player knows about the position.

    ``code``: the move code (``takzero.game.core`` encoding), legal in the position asked about.
    ``value``: expected outcome for the side to move, -1 (loss) .. +1 (win); None if unknown.
    ``wdl``: (win, draw, loss) probabilities for the side to move; None if unknown.
    ``nodes``: simulations / positions searched for this move (0 if none).
    ``pv``: principal variation, move codes starting with ``code`` (may be empty).
    ``info``: anything else worth logging (e.g. ``{"kind": "win"}`` for the greedy player).
    """

    code: int
    value: float | None = None
    wdl: tuple[float, float, float] | None = None
    nodes: int = 0
    pv: tuple[int, ...] = ()
    info: Mapping[str, object] = field(default_factory=dict)


@runtime_checkable
class Player(Protocol):
    """What the arena, the play CLI and the TEI engine need from a player (see the module doc)."""

    name: str

    def reset(self, size: int, half_komi: int, seed: int | None = None) -> None:
        """A new game on a ``size`` board with ``half_komi``; ``seed`` restarts the randomness."""
        ...

    def choose(self, position: Position) -> PlayerMove:
        """The move to play in ``position`` (not over); must not modify ``position``."""
        ...

    def observe(self, position: Position, move: int) -> None:
        """``move`` was played in ``position`` (by either side); for tree reuse. May do nothing."""
        ...


def as_player_move(answer: PlayerMove | int) -> PlayerMove:
    """Wrap a bare move code (what a minimal player may return) as a :class:`PlayerMove`."""
    if isinstance(answer, PlayerMove):
        return answer
    return PlayerMove(int(answer))


class BasePlayer:
    """Shared plumbing: a name, a seeded ``numpy`` Generator, no-op :meth:`observe`.

    ``seed`` (int) seeds the player's random stream; :meth:`reset` with a seed restarts it. Each
    compiled search draws its own 31-bit seed from this stream, so a player is deterministic for a
    given seed and sequence of positions.
    """

    name = "base"

    def __init__(self, seed: int = 0, name: str | None = None) -> None:
        if name is not None:
            self.name = name
        self._rng = np.random.default_rng(seed)
        self.size = 0
        self.half_komi = 0

    def reset(self, size: int, half_komi: int, seed: int | None = None) -> None:
        self.size = int(size)
        self.half_komi = int(half_komi)
        if seed is not None:
            self._rng = np.random.default_rng(seed)

    def observe(self, position: Position, move: int) -> None:  # noqa: B027 - optional hook
        return None

    def choose(self, position: Position) -> PlayerMove:
        raise NotImplementedError

    def _next_seed(self) -> int:
        return int(self._rng.integers(0, 2**31 - 1))

    @staticmethod
    def _check_open(position: Position) -> None:
        if position.is_over:
            raise ValueError(f"the game is over ({position.result}); there is no move to choose")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


# ---------------------------------------------------------------------------------------------
# Random
# ---------------------------------------------------------------------------------------------


class RandomPlayer(BasePlayer):
    """A uniformly random legal move. Raises ValueError if the game is over."""

    name = "random"

    def choose(self, position: Position) -> PlayerMove:
        self._check_open(position)
        codes = position.legal_move_codes()
        return PlayerMove(int(codes[int(self._rng.integers(len(codes)))]))


# ---------------------------------------------------------------------------------------------
# Greedy
# ---------------------------------------------------------------------------------------------

GREEDY_WIN = 0  # an immediate win (road, or a flat win when the game ends on the flat count)
GREEDY_SAFE = 1  # best flat difference among moves that leave the opponent no win in one
GREEDY_LOST = 2  # every move loses at once or lets the opponent win in one: best flat difference
GREEDY_KINDS = ("win", "safe", "lost")


@njit(cache=True)
def _buffer_len(size: int) -> int:
    return num_actions(size)


@njit(cache=True)
def side_can_win_now(state: np.ndarray, buf: np.ndarray) -> bool:
    """True if the side to move in ``state`` has a move that wins at once (a road, or a flat win
    that ends the game). ``buf``: int64 scratch of length >= num_actions(N). ``state`` is
    restored."""
    mover = state[I_PLY] & 1
    n = generate_moves(state, buf)
    for j in range(n):
        m = buf[j]
        u = make_move(state, m)
        r = state[I_RESULT]
        unmake_move(state, m, u)
        if r != RESULT_NONE and result_winner(r) == mover:
            return True
    return False


@njit(cache=True)
def greedy_move(state: np.ndarray, seed: int) -> tuple[int, int, int]:
    """The greedy player's move in ``state`` (not over; restored on return).

    1. A move that wins at once, roads before flat wins (random among equals).
    2. Else among the "safe" moves -- not an immediate loss, and after which the opponent has no
       move that wins at once (so a one-move road threat is blocked when it can be) -- the one
       with the largest flat difference (own flat-topped stacks minus the opponent's) after the
       move, ties broken uniformly at random.
    3. If no move is safe, the largest flat difference among all moves.

    Returns (move code, kind: GREEDY_WIN / GREEDY_SAFE / GREEDY_LOST, flat difference after the
    move). Candidates are checked for safety in order of decreasing flat difference, so the
    opponent replies are only scanned for the best-scoring group (cost: one reply scan per
    candidate checked, each scan = make/unmake of every opponent move).
    """
    np.random.seed(seed)
    size = state[I_SIZE]
    mover = state[I_PLY] & 1
    nb = _buffer_len(size)
    moves = np.empty(nb, dtype=np.int64)
    replies = np.empty(nb, dtype=np.int64)
    n = generate_moves(state, moves)
    scores = np.empty(n, dtype=np.int64)
    results = np.empty(n, dtype=np.int64)
    road_wins = 0
    flat_wins = 0
    pick_road = -1
    pick_flat = -1
    for j in range(n):
        m = moves[j]
        u = make_move(state, m)
        r = state[I_RESULT]
        w, b = flat_counts(state)
        unmake_move(state, m, u)
        results[j] = r
        scores[j] = w - b if mover == 0 else b - w
        if r != RESULT_NONE and result_winner(r) == mover:
            if r == RESULT_ROAD_WHITE or r == RESULT_ROAD_BLACK:
                road_wins += 1
                if np.random.randint(road_wins) == 0:  # reservoir sampling: uniform among wins
                    pick_road = j
            else:
                flat_wins += 1
                if np.random.randint(flat_wins) == 0:
                    pick_flat = j
    if pick_road >= 0:
        return moves[pick_road], GREEDY_WIN, scores[pick_road]
    if pick_flat >= 0:
        return moves[pick_flat], GREEDY_WIN, scores[pick_flat]
    order = np.argsort(-scores, kind="mergesort")
    i = 0
    while i < n:
        group_score = scores[order[i]]
        k = i
        found = 0
        pick = -1
        while k < n and scores[order[k]] == group_score:
            j = order[k]
            k += 1
            r = results[j]
            if r != RESULT_NONE:
                if result_winner(r) != mover and r != RESULT_DRAW:
                    continue  # an immediate loss (suicide)
                safe = True  # a draw ends the game: the opponent cannot win after it
            else:
                m = moves[j]
                u = make_move(state, m)
                safe = not side_can_win_now(state, replies)
                unmake_move(state, m, u)
            if safe:
                found += 1
                if np.random.randint(found) == 0:
                    pick = j
        if pick >= 0:
            return moves[pick], GREEDY_SAFE, scores[pick]
        i = k
    # Nothing is safe: the best flat difference, random among the best.
    best = scores[order[0]]
    count = 0
    while count < n and scores[order[count]] == best:
        count += 1
    j = order[np.random.randint(count)]
    return moves[j], GREEDY_LOST, scores[j]


class GreedyPlayer(BasePlayer):
    """One-ply tactics (see :func:`greedy_move`): win at once if possible, else a move that leaves
    the opponent no win in one with the best flat difference, random among equals.

    ``PlayerMove.info["kind"]`` is "win", "safe" or "lost"; ``value`` is +1 for "win", -1 for
    "lost", None otherwise. Raises ValueError if the game is over.
    """

    name = "greedy"

    def choose(self, position: Position) -> PlayerMove:
        self._check_open(position)
        code, kind, diff = greedy_move(position.state.copy(), self._next_seed())
        value = 1.0 if kind == GREEDY_WIN else (-1.0 if kind == GREEDY_LOST else None)
        return PlayerMove(
            int(code),
            value=value,
            nodes=0,
            info={"kind": GREEDY_KINDS[kind], "flat_diff": int(diff)},
        )


# ---------------------------------------------------------------------------------------------
# UCT with random rollouts
# ---------------------------------------------------------------------------------------------

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
def uct_search(
    root: np.ndarray,
    simulations: int,
    exploration: float,
    rollout_plies: int,
    seed: int,
    win_check: bool = True,
) -> tuple[int, float, int, np.ndarray, int, int]:
    """UCT (Kocsis & Szepesvari 2006, "Bandit based Monte-Carlo planning") from ``root`` (not
    over, not modified) with ``simulations`` simulations.

    Each simulation descends the tree choosing, at a node whose every move has been tried, the
    edge maximising UCB1 (Auer, Cesa-Bianchi & Fischer 2002, "Finite-time analysis of the
    multiarmed bandit problem")::

        Q(s, a) + exploration * sqrt(ln N(s) / N(s, a))

    with Q the mean reward in [0, 1] (win 1, draw 0.5, loss 0) of the player to move at s, N(s)
    the visits of s and N(s, a) those of the edge. A node tries each of its moves once first, in
    uniformly random order. The first new node of a simulation is added to the tree and scored by
    one :func:`rollout` (uniformly random moves, ``rollout_plies`` at most, flat count at the cap);
    a terminal node in the tree is scored by its exact result every time it is reached.

    ``win_check`` (default on): when a node is expanded, its moves are scanned for an immediate win
    of the side to move there; if there is one, the node is a proven win for that side and is
    scored as a terminal node from then on (the one-ply case of MCTS-Solver, Winands, Bjornsson &
    Saito 2008, "Monte-Carlo tree search solver"). At the root a winning move is played at once.
    Without it, 1000 simulations rarely see the opponent's road-in-one on a 5x5 board (about 100
    moves per node need about 100 visits each); with it two visits of a move are enough.

    Storage: node arrays (first edge, edge count, tried count, visits, result) and edge arrays
    (move, child, visits, reward sum), no Python objects; edge arrays grow by doubling.

    Returns (best move = most visited root edge, its mean reward in [0, 1], its visits, PV array
    (most visited edges from the root), PV length, nodes in the tree).
    """
    np.random.seed(seed)
    size = root[I_SIZE]
    nb = _buffer_len(size)
    buf = np.empty(nb, dtype=np.int64)
    max_nodes = simulations + 2
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
    n_nodes = 1
    n_edges = 0
    node_result[0] = root[I_RESULT]
    root_ply = root[I_PLY]
    work = root.copy()
    path = np.empty(max_nodes, dtype=np.int64)
    pv = np.empty(64, dtype=np.int64)
    if win_check:
        mover = root_ply & 1
        n = generate_moves(work, buf)
        for j in range(n):
            u = make_move(work, buf[j])
            r = work[I_RESULT]
            unmake_move(work, buf[j], u)
            if r != RESULT_NONE and result_winner(r) == mover:
                pv[0] = buf[j]
                return buf[j], 1.0, 0, pv, 1, 1

    for _ in range(simulations):
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
                    edge_visits[cap:] = 0
                    cap = new_cap
                for j in range(n):
                    edge_move[n_edges + j] = buf[j]
                    edge_child[n_edges + j] = -1
                    edge_visits[n_edges + j] = 0
                    edge_reward[n_edges + j] = 0.0
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
            node_visits[edge_child[e]] += 1

    # Best root move: most visits, then best mean reward.
    pv_len = 0
    node = 0
    best_edge = -1
    while pv_len < 64 and node_first[node] >= 0 and node_tried[node] > 0:
        first = node_first[node]
        be = first
        for j in range(first, first + node_tried[node]):
            if edge_visits[j] > edge_visits[be] or (
                edge_visits[j] == edge_visits[be]
                and edge_reward[j] * edge_visits[be] > edge_reward[be] * edge_visits[j]
            ):
                be = j
        if edge_visits[be] == 0:
            break
        if pv_len == 0:
            best_edge = be
        pv[pv_len] = edge_move[be]
        pv_len += 1
        node = edge_child[be]
    q = edge_reward[best_edge] / edge_visits[best_edge]
    return edge_move[best_edge], q, edge_visits[best_edge], pv, pv_len, n_nodes


class UCTPlayer(BasePlayer):
    """UCT with uniformly random rollouts (see :func:`uct_search` for the formula and sources).

    ``simulations``: simulations per move (>= 1; default 1000). ``exploration``: the UCB1
    constant c for rewards in [0, 1] (default 0.35, measured; sqrt(2) is UCB1's textbook value).
    ``rollout_plies``: a rollout stops after this many plies (>= 0) and is scored by the flat
    count (komi included), as if the game ended there. ``win_check``: proven wins in one at
    expansion (see :func:`uct_search`; off = plain UCT). Raises ValueError for bad settings or a
    finished position. No tree reuse between moves (``observe`` does nothing).

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

    def choose(self, position: Position) -> PlayerMove:
        self._check_open(position)
        code, q, visits, pv, pv_len, nodes = uct_search(
            position.state.copy(),
            self.simulations,
            self.exploration,
            self.rollout_plies,
            self._next_seed(),
            self.win_check,
        )
        # The chosen child's mean reward, smoothed with one virtual draw (add-one / Laplace
        # estimate) so a child seen once or twice does not report a certain win or loss.
        score = (float(q) * visits + 0.5) / (visits + 1) if visits > 0 else float(q)
        return PlayerMove(
            int(code),
            value=2.0 * score - 1.0,
            nodes=self.simulations if visits > 0 else 0,  # 0: a win in one, played unsearched
            pv=tuple(int(m) for m in pv[:pv_len]),
            info={"visits": int(visits), "tree_nodes": int(nodes)},
        )


# ---------------------------------------------------------------------------------------------
# Construction by name
# ---------------------------------------------------------------------------------------------


def make_player(spec: str, seed: int = 0) -> BasePlayer:
    """A baseline from a short spec: ``random``, ``greedy``, ``uct`` or ``uct:<simulations>``
    (e.g. ``uct:200``). Raises ValueError for an unknown spec."""
    kind, colon, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "random" and not colon:
        return RandomPlayer(seed)
    if kind == "greedy" and not colon:
        return GreedyPlayer(seed)
    if kind == "uct":
        if not colon:
            return UCTPlayer(seed=seed)
        if arg.isdigit():  # "uct:" (nothing after the colon) is an error, not the default
            return UCTPlayer(simulations=int(arg), seed=seed)
    raise ValueError(f"unknown player '{spec}'; expected random, greedy, uct or uct:<simulations>")


__all__ = [
    "DEFAULT_EXPLORATION",
    "DEFAULT_ROLLOUT_PLIES",
    "DEFAULT_SIMULATIONS",
    "BasePlayer",
    "GreedyPlayer",
    "Player",
    "PlayerMove",
    "RandomPlayer",
    "UCTPlayer",
    "as_player_move",
    "greedy_move",
    "make_player",
    "rollout",
    "side_can_win_now",
    "uct_search",
]


# ---------------------------------------------------------------------------------------------
# Network player: MCTS (takzero.search) guided by a policy/value network
# ---------------------------------------------------------------------------------------------

#: Simulations per move of :class:`NetworkPlayer` unless told otherwise.
DEFAULT_NETWORK_SIMULATIONS = 400
#: Simulations per chunk of :meth:`NetworkPlayer.think`: the stop flag and the clock are checked
#: between chunks (a chunk costs that many network calls of batch 1).
NETWORK_CHUNK = 32


class NetworkPlayer(BasePlayer):
    """A network with MCTS (``takzero.search.BatchedMCTS``, one game slot) for evaluation, play and
    the TEI engine: no Dirichlet noise, no playout cap, the most visited move (ties: higher Q,
    then higher prior; a proven win is taken at once).

    Args:
        evaluator: evaluates positions like ``takzero.nn.inference.Evaluator``:
            ``evaluate(states (B, STATE_LEN) int64) -> (priors (B, A) float32, values (B,),
            wdl (B, 3))`` from the side to move's view, with ``size`` (the board size it plays)
            and optionally ``metadata`` (``half_komi``, ``run_name``, ``generation``).
        simulations: simulations per move for :meth:`choose` (>= 1).
        seconds: time budget per move for :meth:`choose` (None: none); with both, whichever
            runs out first ends the search.
        config: search settings (``takzero.search.SearchConfig``; default its
            ``evaluation()`` copy); noise is always off here.
        reuse_tree: keep the subtree of the moves played (``observe``) for the next search.
        seed, name: as :class:`BasePlayer` (the name defaults to ``<run_name>-g<generation>``
            from the metadata, else ``network``).

    :class:`PlayerMove`: ``value`` = root value in [-1, 1] (exact when proven), ``wdl`` = the
    search value spread around the network's draw probability at the root (``d`` = that draw
    probability capped at ``1 - |v|``, ``w = (1 - d + v) / 2``, ``l = (1 - d - v) / 2``; exact
    when proven), ``nodes`` = simulations of this search, ``pv`` = most visited line,
    ``info`` = root visits of the move, tree nodes, proven result, seconds.

    Raises ValueError for bad settings, a finished position, or a position of another board size
    than the network's.
    """

    name = "network"

    def __init__(
        self,
        evaluator,
        simulations: int = DEFAULT_NETWORK_SIMULATIONS,
        seconds: float | None = None,
        config=None,
        reuse_tree: bool = True,
        seed: int = 0,
        name: str | None = None,
    ) -> None:
        from dataclasses import replace

        from takzero.search import SearchConfig

        if simulations < 1:
            raise ValueError(f"simulations must be >= 1, got {simulations}")
        if seconds is not None and seconds <= 0:
            raise ValueError(f"seconds must be > 0, got {seconds}")
        meta = dict(getattr(evaluator, "metadata", None) or {})
        if name is None:
            run, gen = meta.get("run_name"), meta.get("generation")
            name = f"{run}-g{gen}" if run and gen is not None else "network"
        super().__init__(seed, name)
        self.evaluator = evaluator
        self.metadata = meta
        self.model_size = int(getattr(evaluator, "size", meta.get("size", 0)))
        self.model_half_komi: int | None = (
            int(meta["half_komi"]) if meta.get("half_komi") is not None else None
        )
        self.simulations = int(simulations)
        self.seconds = seconds
        self.reuse_tree = bool(reuse_tree)
        base = (config or SearchConfig()).evaluation()
        self.config = replace(base, root_noise=False, reuse_tree=self.reuse_tree)
        self._mcts = None
        self._valid = False  # the tree's root is the position the player was last told about
        self._draw_cache: dict[int, float] = {}

    @classmethod
    def load(
        cls,
        source,
        simulations: int = DEFAULT_NETWORK_SIMULATIONS,
        device: str = "cpu",
        **kwargs,
    ) -> NetworkPlayer:
        """A player for ``source``: an exported file (TorchScript ``.pt`` or ``.onnx``), a
        training checkpoint (path or loaded dict ``{'model_config', 'model_state', ...}``) or an
        evaluator. ``kwargs`` go to the constructor. Raises OSError / ValueError / RuntimeError
        for a file that cannot be used."""
        if hasattr(source, "evaluate"):
            return cls(source, simulations=simulations, **kwargs)
        from takzero.nn.inference import Evaluator

        if isinstance(source, dict):
            ev = Evaluator.from_checkpoint(source, device=device)
        else:
            ev = Evaluator.load(source, device=device)
        return cls(ev, simulations=simulations, **kwargs)

    # -- Player interface ---------------------------------------------------------------------

    def reset(self, size: int, half_komi: int, seed: int | None = None) -> None:
        """A new game (drops the tree). Raises ValueError for a size the network does not play."""
        if int(size) != self.model_size:
            raise ValueError(
                f"this network plays {self.model_size}x{self.model_size}, not {size}x{size}"
            )
        super().reset(size, half_komi, seed)
        self._valid = False
        self._draw_cache.clear()

    def choose(self, position: Position) -> PlayerMove:
        """Search with ``simulations`` (and ``seconds`` if set) and return the move."""
        return self.think(position, nodes=self.simulations, seconds=self.seconds)

    def observe(self, position: Position, move: int) -> None:
        """Tree reuse: if the tree's root is ``position``, the subtree of ``move`` becomes the
        tree; otherwise the next search starts a fresh tree."""
        mcts = self._mcts
        if not (self.reuse_tree and self._valid and mcts is not None and mcts.is_active(0)):
            self._valid = False
            return
        if not np.array_equal(mcts.root_state(0), position.state):
            self._valid = False
            return
        try:
            mcts.advance(0, int(move))
        except ValueError:
            self._valid = False
            return
        self._valid = mcts.is_active(0)

    # -- searching ----------------------------------------------------------------------------

    def _tree_for(self, position: Position):
        from takzero.search import BatchedMCTS

        if self._mcts is None:
            self._mcts = BatchedMCTS(1, self.model_size, self.config, seed=self._next_seed())
        mcts = self._mcts
        if not (self._valid and np.array_equal(mcts.root_state(0), position.state)):
            mcts.reset(0, position.state)
        self._valid = mcts.is_active(0)
        return mcts

    def _draw_probability(self, position: Position) -> float:
        key = position.hash
        if key not in self._draw_cache:
            if len(self._draw_cache) > 4096:
                self._draw_cache.clear()
            _, _, wdl = self.evaluator.evaluate(position.state[None].copy())
            self._draw_cache[key] = float(np.asarray(wdl)[0, 1])
        return self._draw_cache[key]

    def _pv(self, mcts, first_move: int, limit: int = 32) -> tuple[int, ...]:
        """Most visited line from the root, starting with the chosen move."""
        return tuple(mcts.principal_variation(0, first_move, limit)) or (int(first_move),)

    def _answer(self, mcts, position: Position, done: int, seconds: float) -> PlayerMove:
        move = int(mcts.choose_move(0, temperature=0.0))
        moves, visits = mcts.root_visits(0)
        value = float(mcts.root_value(0))
        proven = mcts.root_proven(0)
        if proven is not None:
            wdl = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))[1 - int(proven)]
        else:
            v = max(-1.0, min(1.0, value))
            d = min(max(self._draw_probability(position), 0.0), 1.0 - abs(v))
            wdl = ((1.0 - d + v) / 2.0, d, (1.0 - d - v) / 2.0)
        hit = np.flatnonzero(moves == move)
        return PlayerMove(
            move,
            value=value,
            wdl=wdl,
            nodes=int(done),
            pv=self._pv(mcts, move),
            info={
                "visits": int(visits[hit[0]]) if hit.size else 0,
                "tree_nodes": mcts.tree_size(0),
                "proven": proven,
                "seconds": seconds,
            },
        )

    def think(
        self,
        position: Position,
        nodes: int | None = None,
        seconds: float | None = None,
        stop=None,
        on_progress=None,
    ) -> PlayerMove:
        """An anytime search of ``position``: runs chunks of :data:`NETWORK_CHUNK` simulations
        until ``nodes`` simulations are done, the next chunk would overrun ``seconds``, or
        ``stop`` (a ``threading.Event``) is set. Without ``nodes`` and ``seconds`` it runs until
        ``stop`` is set (or ``simulations`` when there is no ``stop``). At least one chunk runs.

        A proven root (a forced win, loss or draw found by the search) ends the search early
        (without limits: once ``stop`` is set). ``on_progress(answer, simulations)`` is called
        after the chunks that reach 64, 128, 256, ... simulations (a deterministic schedule) and
        after the last one. Returns the
        :class:`PlayerMove`. Raises ValueError (finished position, another board size).
        """
        self._check_open(position)
        if position.size != self.model_size:
            raise ValueError(
                f"this network plays {self.model_size}x{self.model_size}, "
                f"not {position.size}x{position.size}"
            )
        if nodes is None and seconds is None and stop is None:
            nodes = self.simulations
        import time

        mcts = self._tree_for(position)
        t0 = time.perf_counter()
        done = 0
        next_report = 64
        answer = None
        while True:
            chunk = NETWORK_CHUNK if nodes is None else min(NETWORK_CHUNK, nodes - done)
            mcts.run(self.evaluator, add_noise=False, simulations=chunk)
            done += chunk
            elapsed = time.perf_counter() - t0
            finished = (
                (nodes is not None and done >= nodes)
                or (stop is not None and stop.is_set())
                or (seconds is not None and elapsed * (done + chunk) / done > seconds)
            )
            if not finished and mcts.root_proven(0) is not None:
                # Solved: more search changes nothing. Without limits, wait for the stop flag.
                if nodes is None and seconds is None and stop is not None:
                    stop.wait()
                finished = True
            if on_progress is not None and (finished or done >= next_report):
                while next_report <= done:
                    next_report *= 2
                answer = self._answer(mcts, position, done, elapsed)
                on_progress(answer, done)
            if finished:
                break
        if answer is None or answer.nodes != done:
            answer = self._answer(mcts, position, done, time.perf_counter() - t0)
        return answer


__all__ += ["DEFAULT_NETWORK_SIMULATIONS", "NETWORK_CHUNK", "NetworkPlayer"]
