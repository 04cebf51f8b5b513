"""Two batches in flight (``BatchedMCTS.run(pipelined=True)``): the budget is spent exactly, no
virtual visit is left behind (after a finished search, a stop and a deadline), the searches still
find what a plain search finds, and a plain search is unchanged by the pipelined one's code."""

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
from takzero.search.tree import new_children

MID_GAME = "x4,1/x,2,2,x2/x3,2,x/x,1,x3/2,1C,x3 1 5"


class SlowEvaluator(HashEvaluator):
    """HashEvaluator that also sleeps (a network call's latency) and counts concurrent calls."""

    def __init__(self, size: int, delay: float = 0.0, stop_after: int | None = None,
                 stop: threading.Event | None = None) -> None:
        super().__init__(size, seed=3)
        self.delay = delay
        self.calls = 0
        self.busy = 0
        self.max_busy = 0
        self.stop_after, self.stop = stop_after, stop
        self.threads: set[str] = set()
        self._lock = threading.Lock()  # two workers call at once: counts under a lock
        self.last_call = threading.local()  # this thread's call number (1, 2, ...)

    def evaluate(self, states):
        with self._lock:
            self.busy += 1
            self.max_busy = max(self.max_busy, self.busy)
            self.threads.add(threading.current_thread().name)
        try:
            if self.delay:
                time.sleep(self.delay)
            with self._lock:
                self.calls += 1
                self.last_call.n = self.calls
            if self.stop_after is not None and self.last_call.n >= self.stop_after and self.stop is not None:
                self.stop.set()
            return super().evaluate(states)
        finally:
            with self._lock:
                self.busy -= 1


def _mcts(games: int = 3, k: int = 8, seed: int = 0) -> BatchedMCTS:
    cfg = SearchConfig(simulations=200, leaves_per_step=k, root_noise=False)
    mcts = BatchedMCTS(games, 5, cfg, seed=seed)
    pos = Position.from_tps(MID_GAME)
    for g in range(games):
        mcts.reset(g, pos.state)
    return mcts


def _no_virtual_visits(mcts: BatchedMCTS) -> bool:
    return int(np.abs(mcts._trees.virtual_visits).sum()) == 0 and int(mcts._games.inflight.sum()) == 0


@pytest.mark.parametrize(("games", "k"), [(1, 1), (1, 2), (1, 8), (3, 1), (3, 8)])
def test_a_pipelined_search_spends_the_budget_and_leaves_the_tree_clean(games: int, k: int) -> None:
    mcts = _mcts(games=games, k=k)
    ev = SlowEvaluator(5)
    stats = mcts.run(ev, simulations=300, pipelined=True)
    for g in range(games):
        _, visits = mcts.root_visits(g)
        assert visits.sum() == mcts.simulations_done(g) == 300
    assert _no_virtual_visits(mcts)
    assert stats.steps == ev.calls and stats.leaves > 0
    # games in two halves: every call on the evaluation thread, one at a time (the evaluator
    # need not be thread-safe); one game's leaves under virtual loss: two workers, this thread
    # and the evaluation thread, at most two calls at once; one game with one leaf per step has
    # no virtual loss to keep two batches apart: the plain loop, on this thread
    main = threading.current_thread().name
    if games > 1:
        assert all(t.startswith("takzero-eval") for t in ev.threads) and ev.max_busy == 1
    elif k > 1:
        assert all(t.startswith("takzero-eval") or t == main for t in ev.threads)
        assert ev.max_busy <= 2
    else:
        assert ev.threads == {main} and ev.max_busy == 1
    # a second search from the same trees (tree reuse) works as well
    mcts.run(ev, simulations=100, pipelined=True)
    assert _no_virtual_visits(mcts)


def test_one_game_pipelined_runs_two_network_calls_at_once() -> None:
    """One game, several leaves a step: both workers evaluate, and their calls overlap (what makes
    two threads search about twice the nodes of one where the network is most of the time)."""
    mcts = _mcts(games=1, k=8)
    ev = SlowEvaluator(5, delay=0.01)
    stats = mcts.run(ev, simulations=400, pipelined=True)
    assert mcts.simulations_done(0) == 400 and _no_virtual_visits(mcts)
    assert ev.max_busy == 2
    assert threading.current_thread().name in ev.threads
    assert any(t.startswith("takzero-eval") for t in ev.threads)
    assert stats.steps == ev.calls


def test_an_evaluator_error_in_either_worker_is_raised_and_the_other_batch_backed_up() -> None:
    """A network call that fails in one worker is raised from ``run``; the other worker backs up
    its batch in flight first, the failed batch's selection is taken back (no virtual visit
    left, tests/test_two_workers_hostile.py searches such a tree on), and the search object is
    idle afterwards."""

    class Failing(SlowEvaluator):
        def evaluate(self, states):
            out = super().evaluate(states)
            if self.last_call.n == 6:  # this call's number: self.calls may be 7 already
                raise RuntimeError("network failed")
            return out

    mcts = _mcts(games=1, k=8)
    ev = Failing(5, delay=0.005)
    with pytest.raises(RuntimeError, match="network failed"):
        mcts.run(ev, simulations=10_000, pipelined=True)
    # the failing call (6th), the other worker's in flight, and at most one more that it selected
    # while the failing worker waited for the lock to record its failure
    assert ev.busy == 0 and ev.calls <= 8
    assert _no_virtual_visits(mcts)


def test_a_pipelined_search_agrees_with_a_plain_one() -> None:
    """The two workers interleave by timing, so one search's root visits are a sample: the
    agreement is judged over eight evaluators (seeds) at once, never on one. Measured on one
    loaded core, 100 searches (4 seeds x 25): the correlation of root visits at least 0.889 (median
    0.970) per search, the plain search's best move in the pipelined one's top five in all 100.
    A pipelined search that lost or double-counted backups, or kept virtual visits, correlates
    far lower and misses the best move."""
    correlations, found = [], 0
    for seed in range(3, 11):
        plain, piped = _mcts(games=1), _mcts(games=1)
        ev = HashEvaluator(5, seed=seed)
        plain.run(ev, simulations=2000)
        piped.run(ev, simulations=2000, pipelined=True)
        moves_a, visits_a = plain.root_visits(0)
        moves_b, visits_b = piped.root_visits(0)
        np.testing.assert_array_equal(moves_a, moves_b)
        assert visits_b.sum() == 2000 and _no_virtual_visits(piped)
        correlations.append(np.corrcoef(visits_a, visits_b)[0, 1])
        found += moves_a[np.argmax(visits_a)] in moves_b[np.argsort(-visits_b)[:5]]
        # ... but not the same tree: the second batch is selected before the first is backed up
        assert not np.array_equal(visits_a, visits_b)
    assert np.mean(correlations) > 0.9, correlations
    assert found >= 7, found


@pytest.mark.parametrize("games", [1, 3])
def test_a_stop_or_deadline_ends_a_pipelined_search_with_a_consistent_tree(games: int) -> None:
    stop = threading.Event()
    mcts = _mcts(games=games)
    ev = SlowEvaluator(5, stop_after=5, stop=stop)
    mcts.run(ev, simulations=100_000, stop=stop, pipelined=True)
    assert ev.calls <= 7  # the call that set the flag, and at most one already selected
    assert _no_virtual_visits(mcts)
    mcts2 = _mcts(games=games)
    slow = SlowEvaluator(5, delay=0.02)
    t0 = time.perf_counter()
    mcts2.run(slow, simulations=100_000, deadline=t0 + 0.2, pipelined=True)
    assert _no_virtual_visits(mcts2)
    assert slow.calls < 100_000 // 8


def test_the_player_pipelines_with_two_threads_and_not_with_one() -> None:
    ev = HashEvaluator(5, seed=1)
    ev.metadata = {"size": 5}  # what NetworkPlayer reads of an evaluator it is handed
    player = NetworkPlayer.load(ev, simulations=64, seed=0)
    assert player.threads == 1 and not player.pipelined
    player.threads = 2
    assert player.pipelined
    player.set_pipeline(False)
    assert not player.pipelined
    player.set_pipeline(True)
    pos = Position.from_tps(MID_GAME)
    player.reset(5, pos.half_komi)
    move = player.think(pos, Limit(nodes=256))
    assert move.nodes >= 256
    assert player._search is not None and player._search.driver.pipelined
    assert _no_virtual_visits(player._search.mcts)


def _tree_arrays(mcts: BatchedMCTS) -> dict[str, np.ndarray]:
    return {**{f"t.{k}": v for k, v in mcts._trees._asdict().items()},
            **{f"g.{k}": v for k, v in mcts._games._asdict().items()}}


@pytest.mark.parametrize(("games", "k", "gumbel"), [(2, 1, False), (5, 1, True), (4, 4, False)])
def test_a_pipelined_search_of_many_games_is_the_plain_search_bit_for_bit(games: int, k: int, gumbel: bool) -> None:
    """With two games or more the games go in two halves: every tree, statistic and random
    stream equals the plain loop's, search after search (tree reuse included)."""
    cfg = SearchConfig(simulations=150, leaves_per_step=k, root_noise=True, gumbel=gumbel)
    runs = []
    for pipelined in (False, True):
        mcts = BatchedMCTS(games, 5, cfg, seed=11)
        pos = Position.from_tps(MID_GAME)
        for g in range(games):
            mcts.reset(g, pos.state)
        ev = SlowEvaluator(5)
        moves = []
        for _ in range(3):
            mcts.run(ev, pipelined=pipelined)
            for g in mcts.active_games():
                move = mcts.choose_move(g)
                moves.append(move)
                mcts.advance(g, move)
        runs.append((mcts, moves, ev))
    (plain, moves_a, ev_a), (piped, moves_b, ev_b) = runs
    assert moves_a == moves_b
    a, b = _tree_arrays(plain), _tree_arrays(piped)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert "MainThread" not in ev_b.threads and ev_b.max_busy == 1
    assert ev_b.calls > ev_a.calls  # two half batches where the plain loop makes one


def test_selfplay_with_pipeline_plays_the_same_games() -> None:
    """``selfplay.pipeline``: the worker's games in two halves give the records of the plain
    worker, record for record, with an evaluator whose output does not depend on the batch."""
    from takzero.config import load_config
    from takzero.pipeline.selfplay import SelfPlayWorker

    out = []
    for pipeline in (False, True):
        cfg = load_config({
            "board": {"size": 4, "komi": 0.0}, "model": {"channels": 8, "blocks": 1},
            "mcts": {"simulations": 8}, "device": "cpu",
            "selfplay": {"games_per_worker": 6, "backend": "torch", "pipeline": pipeline},
        })
        worker = SelfPlayWorker.from_run(cfg, worker_id=0, device="cpu")
        assert worker.driver.pipelined is pipeline
        worker.driver.evaluator = HashEvaluator(4, seed=5)
        parts = []
        for _ in range(60):
            recs, _, _ = worker.play_step()
            if recs is not None:
                parts.append(recs)
        out.append(parts)
    plain, piped = out
    assert len(plain) == len(piped) > 0
    for a, b in zip(plain, piped, strict=True):
        for name in ("board", "policy_index", "policy_prob", "value", "game_id", "ply"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


class _OddPriors(HashEvaluator):
    """HashEvaluator whose priors take every form ``expand_backup`` must renormalise: some rows all
    zero (uniform), some with NaN, inf and negative entries, some already in move order."""

    def evaluate(self, states):
        priors, values, wdl = super().evaluate(states)
        priors = priors.copy()
        for i in range(len(priors)):
            kind = i % 4
            if kind == 1:
                priors[i] = 0.0
            elif kind == 2:
                priors[i, :3] = (np.nan, np.inf, -1.0)
            elif kind == 3:
                priors[i] = 1.0  # equal priors: the moves' own order is kept
        return priors, values, wdl


# black to move against white's road threat (a5..d5, e5 empty): every reply but the block leaves a
# position whose children hold a road win; and an open mid-game position
ROAD_WIN = "1,1,1,1,x/x,2,2,x2/x5/x2,2,x2/x5 2 6"


@pytest.mark.parametrize("tps", [MID_GAME, ROAD_WIN])
@pytest.mark.parametrize("road_check", [True, False])
def test_child_lists_made_outside_the_lock_build_the_same_tree(tps: str, road_check: bool) -> None:
    """What a two-worker search does per batch (``prepare_kernel`` outside the lock, then
    ``expand_backup_kernel(prepared=True)``) builds, step for step, the tree the plain expansion
    (the child lists made inside the kernel) builds from the same leaves and priors: the same
    moves, priors (float32 bits), statuses, flags, visits and values, with road wins marked."""
    cfg = SearchConfig(simulations=300, leaves_per_step=8, root_noise=False, road_check=road_check)
    pos = Position.from_tps(tps)
    plain, split = BatchedMCTS(2, 5, cfg, seed=1), BatchedMCTS(2, 5, cfg, seed=1)
    ev = _OddPriors(5, seed=4)
    kids = new_children(plain._leaves.states.shape[0], plain.num_actions)
    for mcts in (plain, split):
        for g in range(2):
            mcts.reset(g, pos.state)
        mcts.begin_search(np.arange(2), simulations=300, add_noise=False)
    steps = 0
    while True:
        states, _ = plain.select_leaves()
        states2, _ = split.select_leaves()
        assert np.array_equal(states, states2)
        if states.shape[0] == 0:  # every game's search is finished
            break
        priors, values, _ = ev.evaluate(states)
        plain.expand_backup(priors, values)
        n = split._pending
        split._prepare(split._leaves, n, priors, kids)
        split._expand_from(split._leaves, n, priors, values, kids)
        split._pending = 0
        steps += 1
        for name in plain._trees._fields:
            assert np.array_equal(getattr(plain._trees, name), getattr(split._trees, name)), name
    assert steps > 10
    if road_check and tps == ROAD_WIN:  # road wins were marked below the root
        assert (plain._trees.status == 1).any()  # WIN
