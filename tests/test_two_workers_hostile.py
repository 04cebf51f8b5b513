"""Hostile checks of the network player's search with one and two workers (``Threads`` 1/2):
what the TEI engine and the match runner do to it (tree reuse after a full tree, a network call that fails)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from takzero.game.position import Position
from takzero.players.network import NetworkPlayer
from takzero.search import BatchedMCTS, SearchConfig
from takzero.search.evaluators import HashEvaluator
from takzero.search.limit import Limit
from takzero.search.tree import FLAG_NOEXPAND

MID_GAME = "x4,1/x,2,2,x2/x3,2,x/x,1,x3/2,1C,x3 1 5"


def _player(threads: int, tree_nodes: int) -> NetworkPlayer:
    ev = HashEvaluator(5, seed=1)
    ev.metadata = {"size": 5}  # what NetworkPlayer reads of an evaluator it is handed
    player = NetworkPlayer.load(ev, simulations=64, seed=0)
    player.set_threads(threads)
    player.set_tree_nodes(tree_nodes)
    player.set_leaves(8)
    return player


def _frozen(player: NetworkPlayer) -> int:
    mcts = player._search.mcts
    n = mcts.tree_size(0)
    return int(np.count_nonzero(mcts._trees.flags[0, :n] & FLAG_NOEXPAND))


def _expanded_child(player: NetworkPlayer) -> int:
    """The most visited root move whose child has children (so that its subtree is kept)."""
    t = player._search.mcts._trees
    f, k = int(t.first_child[0, 0]), int(t.num_children[0, 0])
    kids = [i for i in range(f, f + k) if t.num_children[0, i] > 0]
    return int(t.move[0, max(kids, key=lambda i: t.visits[0, i])])


@pytest.mark.parametrize("threads", [1, 2])
def test_a_search_after_a_full_tree_starts_without_frozen_leaves(threads: int) -> None:
    """A search that filled the tree leaves frozen leaves (evaluated, no room for their
    children: FLAG_NOEXPAND). Kept by tree reuse in a subtree well under the budget, they were
    never expanded again: every visit to them was a backup without a network call, counted as
    a node (TEI, Threads 2, TreeNodes 100000: 14,071 nodes at 38,386 nps in 367 ms with depth 1
    and no 'tree full' line). The next search starts on a tree without frozen leaves."""
    player = _player(threads, tree_nodes=20_000)
    pos = Position.from_tps(MID_GAME)
    player.reset(5, pos.half_komi)
    first = player.think(pos, Limit(nodes=5000))
    assert first.info.get("tree_full")
    assert _frozen(player) > 0  # the premise: the full tree has frozen leaves
    for _ in range(2):  # two plies along expanded children: a kept subtree well under the budget
        move = _expanded_child(player)
        player.observe(pos, move)
        pos = pos.play(move)
    mcts = player._search.mcts
    assert 0 < mcts.tree_size(0) < 0.5 * player.tree_nodes

    frozen_at_start: list[int] = []
    begin = mcts.begin_search

    def spy(*args, **kwargs):
        frozen_at_start.append(_frozen(player))
        return begin(*args, **kwargs)

    mcts.begin_search = spy  # type: ignore[method-assign]
    player.think(pos, Limit(nodes=64), on_progress=lambda *_: None)
    assert frozen_at_start and frozen_at_start[0] == 0
    assert not np.abs(mcts._trees.virtual_visits).any() and not mcts._games.inflight.any()


class _FailsOnce(HashEvaluator):
    """HashEvaluator whose ``fail_at``-th call (1-based, counted under a lock: two workers call
    at once) raises MemoryError, as a network call can; the others answer."""

    def __init__(self, fail_at: int) -> None:
        super().__init__(5, seed=1)
        self.metadata = {"size": 5}
        self.fail_at = fail_at
        self.calls = 0
        self._lock = threading.Lock()

    def evaluate(self, states):
        with self._lock:
            self.calls += 1
            n = self.calls
        time.sleep(0.002)  # a network call's latency: the other worker's batch is in flight
        if n == self.fail_at:
            raise MemoryError("network call failed")
        return super().evaluate(states)


def _clean(mcts: BatchedMCTS) -> bool:
    return not np.abs(mcts._trees.virtual_visits).any() and not mcts._games.inflight.any()


@pytest.mark.parametrize("fail_at", [1, 2, 5])
@pytest.mark.parametrize(("games", "k", "pipelined"), [(1, 1, False), (1, 8, False), (1, 8, True), (3, 4, True)])
def test_a_failed_network_call_leaves_a_tree_that_searches_on(
    games: int, k: int, pipelined: bool, fail_at: int
) -> None:
    """A network call that raises (plain loop, two workers of one game, games in two halves)
    is raised from ``run``, and the leaves it held are taken back: no virtual visit, nothing in
    flight, no step pending, so the next search of the same trees runs and spends its budget.
    Before, the plain loop left its step pending (every later ``run``, ``reset`` or ``advance``
    of the object raised 'leaves are pending'), and the pipelined ones left virtual visits
    (a failed root call left the root unexpandable: 'game 0 has no expanded root')."""
    cfg = SearchConfig(simulations=200, leaves_per_step=k, root_noise=False)
    mcts = BatchedMCTS(games, 5, cfg, seed=0)
    pos = Position.from_tps(MID_GAME)
    for g in range(games):
        mcts.reset(g, pos.state)
    ev = _FailsOnce(fail_at)
    with pytest.raises(MemoryError):
        mcts.run(ev, simulations=400, pipelined=pipelined)
    assert _clean(mcts)
    before = [int(mcts.root_visits(g)[1].sum()) if mcts.tree_size(g) > 1 else 0 for g in range(games)]
    mcts.run(ev, simulations=300, pipelined=pipelined)
    assert _clean(mcts)
    for g in range(games):
        assert mcts.simulations_done(g) == 300
        assert int(mcts.root_visits(g)[1].sum()) == before[g] + 300
    mcts.advance(0, mcts.choose_move(0, temperature=0.0))  # the object is idle
    mcts.reset(0, pos.state)


@pytest.mark.parametrize("threads", [1, 2])
def test_the_player_plays_on_after_a_failed_network_call(threads: int) -> None:
    """The TEI engine answers a failed search with the first legal move and asks the same
    player again: its next search of the same position must run (before: 'leaves are pending'
    for ever with one thread, 'no expanded root' with two)."""
    ev = _FailsOnce(1)
    player = NetworkPlayer.load(ev, simulations=64, seed=0)
    player.set_threads(threads)
    player.set_leaves(8)
    pos = Position.from_tps(MID_GAME)
    player.reset(5, pos.half_komi)
    with pytest.raises(MemoryError):
        player.think(pos, Limit(nodes=200))
    move = player.think(pos, Limit(nodes=200))
    assert move.nodes == 200 and int(move.code) in set(pos.legal_move_codes().tolist())
    assert _clean(player._search.mcts)


@pytest.mark.parametrize(("games", "k", "pipelined"), [(1, 8, False), (1, 8, True), (3, 4, True), (4, 1, True)])
@pytest.mark.parametrize("how", ["deadline", "stop"])
def test_a_search_stopped_before_it_starts_still_makes_one_network_call(
    games: int, k: int, pipelined: bool, how: str
) -> None:
    """``run`` promises one network call however early a stop or deadline comes (a player must
    answer a move: ``go movetime 1`` on a busy machine, a ``stop`` right behind ``go``, a clock
    that the tinuë check used up). The plain loop checks after its call; the two workers and the
    two halves checked before selecting and made none, leaving a fresh root unexpanded (the
    player then failed: 'game 0 has no expanded root')."""
    cfg = SearchConfig(simulations=200, leaves_per_step=k, root_noise=False)
    mcts = BatchedMCTS(games, 5, cfg, seed=0)
    pos = Position.from_tps(MID_GAME)
    for g in range(games):
        mcts.reset(g, pos.state)
    stop = threading.Event()
    stop.set()
    kwargs = {"deadline": time.perf_counter() - 1.0} if how == "deadline" else {"stop": stop}
    mcts.run(HashEvaluator(5, seed=1), simulations=10_000, pipelined=pipelined, **kwargs)
    assert _clean(mcts)
    for g in range(games):
        assert mcts.tree_size(g) > 1  # the root expanded
        assert mcts.choose_move(g, temperature=0.0) in set(pos.legal_move_codes().tolist())


@pytest.mark.parametrize("threads", [1, 2])
def test_the_player_answers_a_search_stopped_before_it_starts(threads: int) -> None:
    ev = HashEvaluator(5, seed=1)
    ev.metadata = {"size": 5}
    player = NetworkPlayer.load(ev, simulations=64, seed=0)
    player.set_threads(threads)
    pos = Position.from_tps(MID_GAME)
    player.reset(5, pos.half_komi)
    stop = threading.Event()
    stop.set()
    move = player.think(pos, Limit(nodes=10_000, stop=stop))
    assert int(move.code) in set(pos.legal_move_codes().tolist())
    assert _clean(player._search.mcts)


class _BadAnswerOnce(HashEvaluator):
    """Answers its ``bad_at``-th call with priors that cannot be expanded (None): the failure
    comes in the backup, under the workers' lock, not in the network call."""

    def __init__(self, bad_at: int) -> None:
        super().__init__(5, seed=1)
        self.bad_at = bad_at
        self.calls = 0
        self._lock = threading.Lock()

    def evaluate(self, states):
        with self._lock:
            self.calls += 1
            n = self.calls
        time.sleep(0.002)
        priors, values, wdl = super().evaluate(states)
        return (None if n == self.bad_at else priors), values, wdl


@pytest.mark.timeout(60, method="thread")  # a hang: the waiting worker blocks the main thread
@pytest.mark.parametrize("bad_at", [1, 2, 3, 6])
def test_a_failed_backup_in_either_worker_ends_the_search(bad_at: int) -> None:
    """An error while a worker backs up its batch (here: priors that are not an array) is raised
    from ``run``. Before, the other worker, waiting for that batch's backup to open leaves
    (or for its virtual visits to clear), waited for ever."""
    cfg = SearchConfig(simulations=200, leaves_per_step=8, root_noise=False)
    for _ in range(5):  # the waiting worker is a matter of timing: several tries
        mcts = BatchedMCTS(1, 5, cfg, seed=0)
        mcts.reset(0, Position.from_tps(MID_GAME).state)
        with pytest.raises((TypeError, ValueError, IndexError, AttributeError)):
            mcts.run(_BadAnswerOnce(bad_at), simulations=2000, pipelined=True)
