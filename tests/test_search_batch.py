"""Batched search: G games == G single searches, determinism, tree reuse, playout caps,
temperature, whole games."""

from __future__ import annotations

import numpy as np
import pytest

from takzero.game import Position
from takzero.game.core import I_RESULT, generate_moves, make_move, num_actions
from takzero.search import (
    BatchedMCTS,
    HashEvaluator,
    SearchConfig,
    UniformEvaluator,
    search_position,
)


def _random_positions(count: int, size: int, plies: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    buf = np.empty(num_actions(size), dtype=np.int64)
    out = []
    while len(out) < count:
        st = Position.start(size).state
        for _ in range(plies):
            n = generate_moves(st, buf)
            if n == 0:
                break
            make_move(st, int(buf[rng.integers(n)]))
        if st[I_RESULT] == 0:
            out.append(st)
    return out


CONFIGS = {
    "puct": SearchConfig(simulations=60),
    "gumbel": SearchConfig(simulations=24, gumbel=True, gumbel_m=8),
    "cap": SearchConfig(playout_cap=True, full_prob=0.5, full_sims=50, cheap_sims=10),
    "vl": SearchConfig(simulations=60, leaves_per_step=3),
}


def _snapshot(mcts: BatchedMCTS, g: int):
    moves, visits = mcts.root_visits(g)
    actions, probs = mcts.policy_target(g)
    return (
        moves.tolist(),
        visits.tolist(),
        actions.tolist(),
        probs.tolist(),
        mcts.root_value(g),
        mcts.is_full_search(g),
        mcts.choose_move(g, temperature=1.0),
    )


@pytest.mark.parametrize("name", list(CONFIGS))
def test_batch_equals_single_searches(name):
    cfg = CONFIGS[name]
    positions = _random_positions(5, 4, 7, seed=11)
    ev = HashEvaluator(4, seed=3)
    batch = BatchedMCTS(len(positions), 4, cfg, seed=99)
    for g, st in enumerate(positions):
        batch.reset(g, st, seed=1000 + g)
    batch.run(ev)
    for g, st in enumerate(positions):
        single = BatchedMCTS(1, 4, cfg, seed=12345)
        single.reset(0, st, seed=1000 + g)
        single.run(ev)
        assert _snapshot(batch, g) == _snapshot(single, 0)


def test_same_seed_same_result_and_different_seed_differs():
    positions = _random_positions(4, 4, 6, seed=2)
    ev = HashEvaluator(4, seed=1)

    def play(seed):
        mcts = BatchedMCTS(4, 4, SearchConfig(simulations=40), seed=seed)
        for g, st in enumerate(positions):
            mcts.reset(g, st)
        mcts.run(ev)
        return [_snapshot(mcts, g) for g in range(4)]

    assert play(7) == play(7)
    assert play(7) != play(8)


def _subtree_size(t, g: int, x: int) -> int:
    total = 1
    stack = [x]
    while stack:
        y = stack.pop()
        k = int(t.num_children[g, y])
        f = int(t.first_child[g, y])
        total += k
        stack.extend(range(f, f + k))
    return total


@pytest.mark.parametrize("gumbel", [False, True])
def test_tree_reuse(gumbel):
    cfg = SearchConfig(simulations=80, gumbel=gumbel, gumbel_m=8)
    mcts = BatchedMCTS(1, 4, cfg, seed=4)
    st = _random_positions(1, 4, 4, seed=5)[0]
    mcts.reset(0, st)
    ev = HashEvaluator(4, seed=6)
    mcts.run(ev)
    move = mcts.choose_move(0)
    moves, visits = mcts.root_visits(0)
    i = moves.tolist().index(move)
    t = mcts._trees
    child = int(t.first_child[0, 0]) + i
    kept = _subtree_size(t, 0, child)
    child_n, child_w = int(t.visits[0, child]), float(t.value_sum[0, child])
    mcts.advance(0, move)
    assert mcts.tree_size(0) == kept
    assert int(t.visits[0, 0]) == child_n and float(t.value_sum[0, 0]) == child_w
    expected = st.copy()
    make_move(expected, move)
    np.testing.assert_array_equal(mcts.root_state(0), expected)
    # the search goes on from the kept statistics; every node of the compacted tree is reachable
    mcts.run(ev)
    assert mcts.simulations_done(0) == 80
    assert _subtree_size(t, 0, 0) == mcts.tree_size(0)
    assert int(t.visits[0, 0]) == child_n + 80 + (0 if child_n else 1)
    assert mcts.choose_move(0) in set(mcts.root_moves(0).tolist())


def test_no_reuse_and_unsearched_moves():
    cfg = SearchConfig(simulations=30, reuse_tree=False)
    mcts = BatchedMCTS(1, 4, cfg)
    mcts.reset(0, Position.start(4).state)
    mcts.run(UniformEvaluator(4))
    mcts.advance(0, mcts.choose_move(0))
    assert mcts.tree_size(0) == 1
    # advancing an unsearched root (no children) is fine too: the tree stays a bare root
    legal = mcts.root_state(0)
    buf = np.empty(num_actions(4), dtype=np.int64)
    move = int(buf[: generate_moves(legal, buf)][0])
    mcts.advance(0, move)
    assert mcts.tree_size(0) == 1 and mcts.is_active(0)
    mcts.free(0)
    assert not mcts.is_active(0) and mcts.tree_size(0) == 0


def test_illegal_advance_raises():
    mcts = BatchedMCTS(1, 4, SearchConfig(simulations=10))
    mcts.reset(0, Position.start(4).state)
    with pytest.raises(ValueError):
        mcts.advance(0, "Sa1")  # no walls on the first ply


def test_playout_cap_randomization():
    cfg = SearchConfig(playout_cap=True, full_prob=0.3, full_sims=12, cheap_sims=3)
    mcts = BatchedMCTS(50, 4, cfg, seed=8)
    for g in range(50):
        mcts.reset(g, Position.start(4).state)
    fulls = []
    ev = UniformEvaluator(4)
    for _ in range(8):
        mcts.run(ev)
        for g in range(50):
            full = mcts.is_full_search(g)
            fulls.append(full)
            assert mcts.simulations_done(g) == (12 if full else 3)
            assert bool(mcts._games.noise[g]) == full
    assert np.mean(fulls) == pytest.approx(0.3, abs=0.06)


def test_temperature_sampling():
    mcts = BatchedMCTS(1, 4, SearchConfig(simulations=200))
    mcts.reset(0, Position.start(4).state)
    mcts.run(HashEvaluator(4, seed=9))
    moves, visits = mcts.root_visits(0)
    rng = np.random.default_rng(0)
    picks = [mcts.choose_move(0, temperature=1.0, rng=rng) for _ in range(3000)]
    freq = np.array([picks.count(int(m)) for m in moves]) / 3000
    np.testing.assert_allclose(freq, visits / visits.sum(), atol=0.03)
    assert mcts.choose_move(0, temperature=0.0) == int(moves[np.argmax(visits)])
    # the schedule: tau = 1 below temperature_plies, then argmax
    cfg = SearchConfig(temperature=1.0, temperature_plies=4, temperature_final=0.0)
    assert cfg.temperature_at(3) == 1.0 and cfg.temperature_at(4) == 0.0


@pytest.mark.parametrize("gumbel", [False, True])
def test_whole_games_finish_and_free(gumbel):
    cfg = SearchConfig(simulations=16, gumbel=gumbel, max_plies=40, node_budget=5000)
    games = 6
    mcts = BatchedMCTS(games, 3, cfg, seed=21)
    for g in range(games):
        mcts.reset(g, Position.start(3).state)
    ev = HashEvaluator(3, seed=2)
    plies = 0
    while mcts.active_games().size:
        mcts.run(ev)
        for g in mcts.active_games():
            mcts.policy_target(g)
            mcts.advance(g, mcts.choose_move(g))
        plies += 1
        assert plies <= 40
    for g in range(games):
        assert mcts.tree_size(g) == 0
        st = mcts.root_state(g)
        assert st[I_RESULT] != 0 or st[1] >= 40


def test_search_position_helper():
    r = search_position(Position.start(4), UniformEvaluator(4), simulations=20)
    assert r.visits.sum() == 20
    assert r.move in set(r.moves.tolist())
    assert r.proven is None
    assert r.probs.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError):
        search_position(Position.from_tps("1,1,1/x3/x3 2 2"), UniformEvaluator(3))


def _assert_free_slots_zero(mcts: BatchedMCTS, g: int) -> None:
    t = mcts._trees
    c = mcts.tree_size(g)
    for name in ("visits", "value_sum", "num_children", "status", "flags", "virtual_visits"):
        assert not getattr(t, name)[g, c:].any(), name


def test_free_slot_invariant_and_compaction():
    """Slots past the tree's end stay zero through searches, reuse, reset and free; the compacted
    tree is consistent (children inside the tree, the kept statistics unchanged)."""
    cfg = SearchConfig(simulations=60, node_budget=20_000)
    mcts = BatchedMCTS(3, 4, cfg, seed=1)
    positions = _random_positions(3, 4, 5, seed=9)
    ev = HashEvaluator(4, seed=2)
    for g, st in enumerate(positions):
        mcts.reset(g, st)
    for _ in range(4):
        mcts.run(ev)
        for g in mcts.active_games():
            _assert_free_slots_zero(mcts, g)
            t = mcts._trees
            size = mcts.tree_size(g)
            nch, first = t.num_children[g, :size], t.first_child[g, :size]
            assert np.all(first[nch > 0] + nch[nch > 0] <= size)
            mcts.advance(g, mcts.choose_move(g))
            _assert_free_slots_zero(mcts, g)
    mcts.reset(0, positions[0])
    _assert_free_slots_zero(mcts, 0)
    mcts.free(1)
    _assert_free_slots_zero(mcts, 1)


def test_principal_variation_is_a_legal_most_visited_line() -> None:
    mcts = BatchedMCTS(1, 4, SearchConfig(simulations=200, root_noise=False), seed=4)
    pos = Position.start(4).play("a1").play("d4")
    mcts.reset(0, pos.state)
    mcts.run(HashEvaluator(4, seed=5))
    best = mcts.choose_move(0, temperature=0.0)
    pv = mcts.principal_variation(0)
    assert len(pv) >= 2
    moves, visits = mcts.root_visits(0)
    assert pv[0] == int(moves[np.argmax(visits)])
    state = pos.state.copy()
    buf = np.empty(num_actions(4), np.int64)
    for code in pv:
        n = generate_moves(state, buf)
        assert code in set(buf[:n].tolist())
        make_move(state, code)
    forced = mcts.principal_variation(0, first_move=int(moves[-1]))
    assert forced[0] == int(moves[-1])
    assert mcts.principal_variation(0, limit=1) == [pv[0]]
    assert best in set(moves.tolist())


def test_pack_settings_holds_every_numeric_field():
    """The kernels' settings record has every number/bool field of SearchConfig under its name,
    with its value (None: NaN for floats, -1 for ints), and the code of each chosen rule."""
    from dataclasses import fields

    from takzero.search.config import SETTINGS_DTYPE, pack_settings

    cfg = SearchConfig(c_init=1.5, gumbel=True, gumbel_m=7, fpu_value=None, full_sims=None,
                       max_plies=90, virtual_loss=0.25, road_check=False)
    from takzero.search.rules import RULE_KINDS, RULES

    rec = pack_settings(cfg)[0]
    rule_fields = {f"{kind}_rule" for kind in RULE_KINDS}
    assert set(SETTINGS_DTYPE.names) == {f.name for f in fields(SearchConfig)} | rule_fields
    gumbel_code = next(r.code for r in RULES if r.kind == "root" and r.name == "gumbel")
    assert rec["root_rule"] == gumbel_code  # the rules are packed by their codes
    for name in set(SETTINGS_DTYPE.names) - rule_fields:
        value = getattr(cfg, name)
        if value is None:
            assert np.isnan(rec[name]) if isinstance(rec[name], np.floating) else rec[name] == -1
        else:
            assert rec[name] == value, name
    assert rec["gumbel_m"].dtype == np.int64 and rec["road_check"].dtype == np.bool_
    assert np.isnan(pack_settings(SearchConfig())[0]["fpu_value"])
    assert pack_settings(SearchConfig(fpu_value=-1.0))[0]["fpu_value"] == -1.0


def _q_choice(moves: np.ndarray, visits: np.ndarray, q: np.ndarray, prior: np.ndarray, f: float) -> int:
    """The rule of ``SearchConfig.select_q_fraction`` written out: the highest Q among the
    children with at least f times the most visits; ties: more visits, then higher prior."""
    ok = [i for i in range(len(moves)) if visits[i] >= f * visits.max()]
    best = max(ok, key=lambda i: (-np.inf if np.isnan(q[i]) else q[i], visits[i], prior[i]))
    return int(moves[best])


def test_select_q_fraction_plays_the_best_q_of_the_well_visited_moves() -> None:
    """f = 0 plays the most visited move; f > 0 the best Q among the children with at least f
    times the most visits (the same tree searched once per f); f = 1 keeps the most visited."""
    differed = 0
    for seed in range(6):
        pos = Position.start(4).play("a1").play("d4")
        picks = {}
        for f in (0.0, 0.05, 0.2, 1.0):
            mcts = BatchedMCTS(1, 4, SearchConfig(simulations=150, root_noise=False, select_q_fraction=f), seed=4)
            mcts.reset(0, pos.state)
            mcts.run(HashEvaluator(4, seed=seed))
            moves, visits = mcts.root_visits(0)
            q = mcts.root_q(0).astype(np.float64)
            prior_moves, prior, _ = mcts.root_priors(0)
            assert np.array_equal(prior_moves, moves)
            picks[f] = mcts.choose_move(0, temperature=0.0)
            if f == 0.0 or f == 1.0:
                top = np.flatnonzero(visits == visits.max())
                if top.size == 1:
                    assert picks[f] == int(moves[top[0]])
            else:
                assert picks[f] == _q_choice(moves, visits, q, prior, f)
        differed += picks[0.05] != picks[0.0]
    assert differed > 0  # the rule changes some choices on these trees
    with pytest.raises(ValueError, match="select_q_fraction must be in"):
        SearchConfig(select_q_fraction=1.5)
    with pytest.raises(ValueError, match="select_q_fraction must be in"):
        SearchConfig(select_q_fraction=-0.1)
