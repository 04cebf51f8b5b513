"""Every write of the compiled search lands in the trees.

The step kernels pass the pools (``Trees``, ``Games``, ``Leaves``) whole into rules inlined with
``inline="always"``. numba removes as dead code a write ``a[i] = v`` to an array it does not know
to be an argument's view, when ``a`` is not read after it: a write at the end of an inlined rule
through a field of the pools was dropped without a word (the roots never expanded and the search
looped for ever; an overflowing leaf lost its flag and a road-win parent its proof). Two tests:

* a search adds up (node counts, visits, proofs, flags, Sequential Halving's counts) in every
  rule set, under a timeout, which a lost write breaks;
* the kind itself: the search's kernels are compiled afresh with numba's dead-code elimination
  watched, and no write (``SetItem``) of ``takzero/search`` may be removed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from takzero.search import BatchedMCTS, HashEvaluator, SearchConfig
from takzero.search.tree import FLAG_NOEXPAND, LOSS, UNKNOWN, WIN
from tests.test_search_batch import _random_positions

ROOT = Path(__file__).resolve().parents[1]

CONFIGS = {
    "puct": SearchConfig(simulations=60, root_noise=True),
    "gumbel": SearchConfig(simulations=40, gumbel=True, gumbel_m=8, root_noise=True),
    "forced": SearchConfig(simulations=60, forced_playouts=True, root_noise=True),
    "leaves": SearchConfig(simulations=60, leaves_per_step=4),
    "fixed_fpu_constant_c": SearchConfig(simulations=60, fpu_value=-0.5, c_base=0),
}


def _check_tree(mcts: BatchedMCTS, g: int, gumbel: bool) -> None:
    trees = mcts._trees
    n = int(trees.num_nodes[g])
    nc = trees.num_children[g, :n]
    fc = trees.first_child[g, :n]
    visits = trees.visits[g]
    status = trees.status[g]
    # every node but the root is the child of one expanded node
    assert n == 1 + int(nc.sum()), (n, int(nc.sum()))
    done = mcts.simulations_done(g)
    assert visits[0] == done + 1  # the root's own evaluation, then one visit a simulation
    for x in np.flatnonzero(nc):
        kids = slice(int(fc[x]), int(fc[x] + nc[x]))
        below = int(visits[kids].sum())
        # an unproven expanded node passes every visit after its first on to a child
        if status[x] == UNKNOWN:
            assert visits[x] == below + 1, (x, int(visits[x]), below)
        else:
            assert visits[x] >= below
        # a child that wins for the mover proves the node lost (the road check, propagate)
        if (status[kids] == WIN).any():
            assert status[x] == LOSS, x
    assert np.all(np.abs(trees.value_sum[g, :n]) <= visits[:n] + 1e-3)
    assert np.all(trees.virtual_visits[g, :n] == 0)
    if gumbel and status[0] == UNKNOWN:
        assert int(mcts._games.search_visits[g, : nc[0]].sum()) == done


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_search_adds_up(name):
    """Searches of 4x4 middle games: node counts, visits and proofs agree with one another (a
    lost expansion hung this search; the timeout catches it)."""
    cfg = CONFIGS[name]
    positions = _random_positions(6, 4, 12, seed=3)
    mcts = BatchedMCTS(len(positions), 4, cfg, seed=5)
    for g, st in enumerate(positions):
        mcts.reset(g, st)
    mcts.run(HashEvaluator(4, seed=1))
    road_wins = 0
    for g in range(len(positions)):
        assert mcts.simulations_done(g) == cfg.simulations or mcts._trees.status[g, 0] != UNKNOWN
        _check_tree(mcts, g, cfg.gumbel)
        road_wins += int((mcts._trees.status[g, : mcts.tree_size(g)] == WIN).sum())
    assert road_wins > 0  # the road check's writes were exercised


@pytest.mark.timeout(600)
def test_a_full_tree_flags_its_leaves():
    """A tree too small for its search: the leaves it cannot expand are flagged and counted (the
    flag and the count are single writes at the end of an inlined branch)."""
    cfg = SearchConfig(simulations=200, node_budget=1000)
    mcts = BatchedMCTS(2, 4, cfg, seed=2)
    for g, st in enumerate(_random_positions(2, 4, 6, seed=8)):
        mcts.reset(g, st)
    mcts.run(HashEvaluator(4, seed=2))
    for g in range(2):
        assert mcts.overflow(g) > 0
        assert mcts.frozen_nodes(g) > 0
        n = mcts.tree_size(g)
        flagged = mcts._trees.flags[g, :n] & FLAG_NOEXPAND != 0
        assert np.all(mcts._trees.num_children[g, :n][flagged] == 0)


DEAD_WRITES = textwrap.dedent(
    """
    import sys
    import numba.core.ir_utils as ir_utils
    from numba.core import ir

    removed = []
    original = ir_utils.remove_dead_block

    def watched(block, *args, **kwargs):
        writes = [s for s in block.body if isinstance(s, (ir.SetItem, ir.StaticSetItem))]
        out = original(block, *args, **kwargs)
        kept = set(map(id, block.body))
        for s in writes:
            if id(s) not in kept and "takzero/search/" in s.loc.filename.replace("\\\\", "/"):
                removed.append(f"{s.loc.filename.split('takzero/')[-1]}:{s.loc.line} {s}")
        return out

    ir_utils.remove_dead_block = watched

    import importlib
    import pkgutil
    import numpy as np
    from numba import njit
    from numba.core.registry import CPUDispatcher
    import takzero.search
    from takzero.game import Position
    from takzero.search import BatchedMCTS, HashEvaluator, SearchConfig

    # compile (or load) every kernel a search uses, in each rule set, with tree reuse; a bounded
    # number of steps (a search that lost its expansions never ends)
    evaluator = HashEvaluator(4, seed=1)
    for cfg in (SearchConfig(simulations=30, root_noise=True),
                SearchConfig(simulations=30, gumbel=True, gumbel_m=4, root_noise=True),
                SearchConfig(simulations=30, leaves_per_step=3, forced_playouts=True)):
        mcts = BatchedMCTS(2, 4, cfg, seed=1)
        for g in range(2):
            mcts.reset(g, Position.start(4).state)
        mcts.begin_search()
        for _ in range(40):
            states, _ = mcts.select_leaves()
            if len(states) == 0:
                break
            priors, values, _ = evaluator.evaluate(states)
            mcts.expand_backup(priors, values)
        if mcts.tree_size(0) > 1:  # (not so when the expansions are lost)
            mcts.policy_target(0)
            mcts.choose_move(0, temperature=1.0)
            mcts.advance(0, int(mcts.choose_move(0)))
    # then compile each of them afresh (the cache bypassed), watching the dead-code elimination
    compiled = 0
    for info in pkgutil.iter_modules(takzero.search.__path__):
        module = importlib.import_module(f"takzero.search.{info.name}")
        for name, d in sorted(vars(module).items()):
            if not isinstance(d, CPUDispatcher) or d.__module__ != module.__name__:
                continue
            if d.targetoptions.get("inline") == "always" or not d.signatures:
                continue
            options = {k: v for k, v in d.targetoptions.items() if k not in ("cache", "nopython")}
            fresh = njit(**options)(d.py_func)
            for sig in d.signatures:
                fresh.compile(sig)
                compiled += 1
    print("compiled", compiled)
    print("\\n".join(removed) if removed else "no write removed")
    """
)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_no_write_of_the_search_is_dead_code():
    """The kind behind the lost writes: every compiled function of ``takzero.search`` that a
    search runs, compiled afresh (its inlined rules with it), keeps every write of the search's
    files (numba's dead-code elimination removed writes through the pools' fields)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", DEAD_WRITES], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1700)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "no write removed" in out.stdout, out.stdout[-4000:]
    compiled = int(out.stdout.split("compiled ")[1].split()[0])
    assert compiled >= 5, out.stdout
