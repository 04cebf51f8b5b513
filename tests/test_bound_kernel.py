"""BoundKernel (takzero.search.bound_kernel): a compiled kernel called through the entry point
of the version that fits its arguments gives what the dispatcher gives, for every kind of
argument the dispatcher tells apart, and the search's step kernels take that path."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from takzero.game.position import Position
from takzero.search import BatchedMCTS, SearchConfig
from takzero.search.bound_kernel import KNOWN_OBJECTS, BoundKernel
from takzero.search.evaluators import HashEvaluator


@njit(cache=False)
def _weighted_sum(a, w):
    total = 0.0
    for i in range(a.shape[0]):
        total += a[i] * w
    return total


@njit(cache=False)
def _first_row_sum(a):
    total = 0.0
    for j in range(a.shape[1]):
        total += a[0, j]
    return total


Pair = namedtuple("Pair", ["x", "y"])


@njit(cache=False)
def _pair_sum(p, k):
    return p.x[k] + p.y[k]


def test_each_dtype_gets_its_own_compiled_version() -> None:
    """An int64 array read as int32 (or float) would give another sum: each dtype, taken in
    turns, gives the exact sum, as through the dispatcher."""
    kernel = BoundKernel(_weighted_sum)
    arrays = [np.arange(7, dtype=dt) for dt in (np.int64, np.int32, np.float32, np.float64, np.int8, np.uint16)]
    for _ in range(3):
        for a in arrays:
            for w in (2, 2.5, np.int32(3), np.float32(0.5), True):
                assert kernel(a, w) == _weighted_sum(a, w)
    # first calls through the dispatcher, then each (dtype, weight type) from its entry point
    assert kernel.slow_calls == len(arrays) * 5


def test_layout_and_flags_are_told_apart() -> None:
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    views = [base, np.asfortranarray(base), base[:, ::2], base[::2]]
    readonly = base.copy()
    readonly.flags.writeable = False
    views.append(readonly)
    kernel = BoundKernel(_first_row_sum)
    for _ in range(2):
        for v in views:
            assert kernel(v) == _first_row_sum(v) == v[0].sum()
    assert kernel.slow_calls <= len(views)


def test_namedtuples_are_typed_per_object_and_never_confused() -> None:
    """Tuples of other field types, new tuple objects (more than the table keeps), and the
    same object again all give the dispatcher's result."""
    kernel = BoundKernel(_pair_sum)
    made = []
    for i in range(3 * KNOWN_OBJECTS):
        dt = (np.int32, np.int64, np.float64)[i % 3]
        p = Pair(np.arange(5, dtype=dt) * (i + 1), np.arange(5, dtype=np.int64))
        made.append(p)
        assert kernel(p, 4) == _pair_sum(p, 4) == 4 * (i + 1) + 4
    for p in made[-3:]:
        assert kernel(p, 2) == _pair_sum(p, 2)


def test_what_it_cannot_type_goes_through_the_dispatcher() -> None:
    kernel = BoundKernel(_weighted_sum)
    with pytest.raises(TypingError):  # a list has no shape: numba's own error, as before
        kernel([1, 2, 3], 2)
    assert kernel(np.arange(3.0), 2) == 6.0


def test_a_plain_function_is_called_as_it_is() -> None:
    kernel = BoundKernel(lambda a, b: a + b)
    assert kernel(2, 3) == 5 and kernel.slow_calls == 0


@pytest.mark.parametrize("pipelined", [False, True])
def test_the_search_steps_take_the_entry_points(pipelined: bool) -> None:
    """A 2,000-simulation search makes about 125 calls of each step kernel; all but the first
    few (one per new argument object or kind) skip numba's typing, and the search is the
    dispatcher's bit for bit (scripts/dump_search_trees.py checks the trees in full)."""
    cfg = SearchConfig(simulations=200, leaves_per_step=16, root_noise=False)
    pos = Position.from_tps("x4,1/x,2,2,x2/x3,2,x/x,1,x3/2,1C,x3 1 5")
    runs = []
    for bound in (True, False):
        mcts = BatchedMCTS(1, 5, cfg, seed=0)
        mcts.reset(0, pos.state)
        if not bound:
            mcts._select_kernel = mcts._select_kernel.dispatcher
            mcts._expand_kernel = mcts._expand_kernel.dispatcher
        stats = mcts.run(HashEvaluator(5, seed=2), simulations=2000, pipelined=pipelined)
        runs.append(mcts.root_visits(0))
        if bound:
            assert stats.steps >= 100
            assert mcts._select_kernel.slow_calls <= 3 and mcts._expand_kernel.slow_calls <= 4
    if not pipelined:  # two workers interleave by timing: only the plain loop is reproducible
        np.testing.assert_array_equal(runs[0][0], runs[1][0])
        np.testing.assert_array_equal(runs[0][1], runs[1][1])
