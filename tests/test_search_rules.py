"""The search's rule table (``takzero.search.rules.RULES``) and node table
(``takzero.search.tree.NODE_FIELDS``): each dispatch runs its rows' functions, the settings choose
the rows they name, and the two walks of docs/design.md's "Where to change what" hold:

* a new node statistic and an exploration rule that reads it (a toy variance-scaled c_puct over
  a sum of squared values): 8 edits in 4 files;
* a per-child bonus in the PUCT score from existing statistics (a toy bonus for wall
  placements): 4 edits in 3 files.

Each walk is applied as text edits to a copy of the package (each edit one anchor, found once)
and a small search runs on the copy in a subprocess with ``NUMBA_DISABLE_JIT=1`` (plain Python:
no compilation), checking that the statistic is kept as the tree changes and that the rule and the
bonus change the search as they should.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from takzero.search.config import SearchConfig, pack_settings
from takzero.search.rules import (
    RULE_KINDS,
    RULES,
    backup,
    exploration,
    first_play_value,
    rule_codes,
    select_interior,
    select_root,
)
from takzero.search.tree import NODE_FIELDS, Trees, new_games, new_trees

ROOT = Path(__file__).resolve().parents[1]


def _settings(config: SearchConfig, **codes: int) -> np.ndarray:
    out = pack_settings(config)
    for name, code in codes.items():
        out[0][name] = code
    return out


def _root(visits, values, priors, budget_extra: int = 0):
    """Pools of one game: node 0 the root (expanded), nodes 1..k its children."""
    k = len(visits)
    trees = new_trees(1, k + 1 + budget_extra)
    trees.visits[0, 1 : k + 1] = visits
    trees.visits[0, 0] = sum(visits) + 1
    trees.value_sum[0, 1 : k + 1] = np.array(values, np.float32) * np.array(visits)
    trees.value_sum[0, 0] = -0.1 * trees.visits[0, 0]
    trees.prior[0, 1 : k + 1] = priors
    trees.first_child[0, 0] = 1
    trees.num_children[0, 0] = k
    trees.num_nodes[0] = k + 1
    games = new_games(np.array([7], np.uint64), k, 4)
    games.mixed_prior[0] = priors
    games.noise[0] = True
    games.gumbel_logits[0] = np.log(np.array(priors, np.float32))
    games.considered_visits[0] = [0, 0, 1, 1]
    return trees, games


def test_each_dispatch_runs_its_rows_function():
    """For every row, the kind's dispatch with the row's code gives what the row's function gives
    (the dispatch is written by hand next to the table: a row without its branch fails here)."""
    config = SearchConfig(fpu_value=-0.5, c_base=100.0)
    visits, values, priors = [6, 3, 0, 1], [0.2, -0.4, 0.0, 0.1], [0.4, 0.3, 0.2, 0.1]
    for row in RULES:
        name = f"{row.kind}_rule"
        cfg = _settings(config, **{name: row.code})[0]
        trees, games = _root(visits, values, priors)
        if row.kind == "exploration":
            assert exploration(trees, cfg, 0, 0, 17.0) == row.function(trees, cfg, 0, 0, 17.0)
        elif row.kind == "first_play":
            got = first_play_value(trees, cfg, 0, 0, 0.3, 0.5)
            assert got == row.function(trees, cfg, 0, 0, 0.3, 0.5), row.name
        elif row.kind in ("root", "interior"):
            dispatch = select_root if row.kind == "root" else select_interior
            buf = np.zeros(8, np.float64)
            got = dispatch(trees, games, cfg, 0, 0, buf, False)
            assert got == row.function(trees, games, cfg, 0, 0, buf, False), row.name
        else:
            assert row.kind == "backup"
            path = np.array([[0, 2]], np.int32)
            expect, _ = _root(visits, values, priors)
            backup(trees, cfg, path, 0, 0, 1, 0.25)
            row.function(expect, cfg, path, 0, 0, 1, 0.25)
            for a, b in zip(trees, expect, strict=True):
                np.testing.assert_array_equal(a, b)
            assert trees.visits[0, 2] == visits[1] + 1


def test_the_settings_choose_the_rows():
    names = {r.kind: {} for r in RULES}
    for r in RULES:
        names[r.kind][r.code] = r.name

    def chosen(config):
        return {k: names[k][c] for k, c in ((n[: -len("_rule")], c) for n, c in rule_codes(config).items())}

    assert chosen(SearchConfig()) == {
        "root": "puct", "interior": "puct", "first_play": "reduction", "exploration": "log",
        "backup": "mean",
    }
    assert chosen(SearchConfig(gumbel=True))["root"] == "gumbel"
    assert chosen(SearchConfig(forced_playouts=True))["root"] == "forced"
    assert chosen(SearchConfig(fpu_value=-1.0))["first_play"] == "fixed"
    assert chosen(SearchConfig(c_base=0.0))["exploration"] == "constant"
    assert set(RULE_KINDS) == {r.kind for r in RULES}
    packed = pack_settings(SearchConfig(gumbel=True, c_base=0.0))[0]
    assert names["root"][int(packed["root_rule"])] == "gumbel"
    assert names["exploration"][int(packed["exploration_rule"])] == "constant"


def test_the_node_table_is_the_tree():
    """``Trees`` has one (G, B) array per row of ``NODE_FIELDS`` (its dtype) and ``num_nodes``."""
    trees = new_trees(3, 11)
    assert set(Trees._fields) == {f.name for f in NODE_FIELDS} | {"num_nodes"}
    for f in NODE_FIELDS:
        a = getattr(trees, f.name)
        assert a.shape == (3, 11) and a.dtype == np.dtype(f.dtype), f.name
    assert trees.num_nodes.shape == (3,)


# -- the walks ---------------------------------------------------------------------------------

#: A new node statistic (sum of squared backed-up values) and an exploration rule reading it
#: (c(s) scaled by 1 + c_variance * the node's value standard deviation): (site, file, anchor, new
#: text). A site is one edit a researcher makes; the setting's field and its line in the class
#: docstring count as one, as in the search-setting walk of docs/design.md.
STATISTIC_WALK = [
    ("node table row", "takzero/search/tree.py",
     '    NodeField("flags", np.int8, "stat",',
     '    NodeField("value_sq", np.float32, "stat", "toy: sum of squared backed-up values"),\n'
     '    NodeField("flags", np.int8, "stat",'),
    ("its update in the backup rule", "takzero/search/tree.py",
     "        value_sum[g, x] += v\n",
     "        value_sum[g, x] += v\n        trees.value_sq[g, x] += v * v\n"),
    ("the rule", "takzero/search/rules.py",
     "# ---------------------------------------------------------------------------------------------\n"
     "# The table\n",
     '@njit(cache=True, error_model="numpy", inline="always")\n'
     "def exploration_variance(trees, cfg, g, x, parent_visits):\n"
     "    n = max(np.float64(trees.visits[g, x]), 1.0)\n"
     "    mean = trees.value_sum[g, x] / n\n"
     "    spread = np.sqrt(max(trees.value_sq[g, x] / n - mean * mean, 0.0))\n"
     '    c_puct = cfg["c_init"] * (1.0 + cfg["c_variance"] * spread)\n'
     "    return c_puct * np.sqrt(max(parent_visits, 1.0))\n\n\n"
     "# ---------------------------------------------------------------------------------------------\n"
     "# The table\n"),
    ("its row", "takzero/search/rules.py",
     '    Rule("exploration", "constant",',
     '    Rule("exploration", "variance", 2, exploration_variance, lambda c: c.c_variance > 0, "toy"),\n'
     '    Rule("exploration", "constant",'),
    ("its branch in the dispatch", "takzero/search/rules.py",
     '    if cfg["exploration_rule"] == 1:\n',
     '    if cfg["exploration_rule"] == 2:\n'
     "        return exploration_variance(trees, cfg, g, x, parent_visits)\n"
     '    if cfg["exploration_rule"] == 1:\n'),
    ("the setting's field", "takzero/search/config.py",
     "        c_base: base of the AlphaZero log schedule; 0 turns the schedule off.\n",
     "        c_base: base of the AlphaZero log schedule; 0 turns the schedule off.\n"
     "        c_variance: toy: the variance exploration rule's weight (0 = off).\n"),
    ("the setting's field", "takzero/search/config.py",
     "    c_base: float = 19652.0\n",
     "    c_base: float = 19652.0\n    c_variance: float = 0.0\n"),
    ("its check", "takzero/search/config.py",
     '            (self.c_base >= 0, "c_base must be >= 0 (0 = constant c_puct)"),\n',
     '            (self.c_base >= 0, "c_base must be >= 0 (0 = constant c_puct)"),\n'
     '            (self.c_variance >= 0, "c_variance must be >= 0"),\n'),
    ("its default in train.yaml", "configs/train.yaml",
     "  c_base: 19652.0\n",
     "  c_base: 19652.0\n  c_variance: 0.0\n"),
]

#: A per-child bonus in the PUCT score from the existing node arrays: toy_wall_bonus for a child
#: whose move places a wall.
BONUS_WALK = [
    ("the bonus in puct_score", "takzero/search/puct.py",
     "    return visited if visits > 0.0 else first_play + exploration_term * prior\n",
     "    bonus = cfg[\"toy_wall_bonus\"] * (((trees.move[g, c] >> 6) & 3) == 2)\n"
     "    return (visited if visits > 0.0 else first_play + exploration_term * prior) + bonus\n"),
    ("the setting's field", "takzero/search/config.py",
     "        c_base: base of the AlphaZero log schedule; 0 turns the schedule off.\n",
     "        c_base: base of the AlphaZero log schedule; 0 turns the schedule off.\n"
     "        toy_wall_bonus: toy: a PUCT bonus for wall placements.\n"),
    ("the setting's field", "takzero/search/config.py",
     "    c_base: float = 19652.0\n",
     "    c_base: float = 19652.0\n    toy_wall_bonus: float = 0.0\n"),
    ("its check", "takzero/search/config.py",
     '            (self.c_base >= 0, "c_base must be >= 0 (0 = constant c_puct)"),\n',
     '            (self.c_base >= 0, "c_base must be >= 0 (0 = constant c_puct)"),\n'
     '            (self.toy_wall_bonus >= 0, "toy_wall_bonus must be >= 0"),\n'),
    ("its default in train.yaml", "configs/train.yaml",
     "  c_base: 19652.0\n",
     "  c_base: 19652.0\n  toy_wall_bonus: 0.0\n"),
]

#: 5x5, ply 11, white to move (a mid-game position of scripts/dump_search_trees.py).
TPS = "1,2C,12121,x,1C/x,1,x,12,x/x2,1,2,x/2,x4/2,x4 1 11"

STATISTIC_CHECK = f"""
import numpy as np, yaml
import takzero
from takzero.game import Position
from takzero.search import BatchedMCTS, HashEvaluator, SearchConfig
from takzero.search.config import pack_settings
from takzero.search.rules import RULES
assert takzero.__file__.startswith({{root!r}}), takzero.__file__
assert yaml.safe_load(open("configs/train.yaml"))["mcts"]["c_variance"] == SearchConfig().c_variance
code = int(pack_settings(SearchConfig(c_variance=2.0))[0]["exploration_rule"])
assert [r.name for r in RULES if r.kind == "exploration" and r.code == code] == ["variance"]
state = Position.from_tps({TPS!r}).state
visits = {{}}
for c_variance in (0.0, 3.0):
    m = BatchedMCTS(2, 5, SearchConfig(simulations=48, c_variance=c_variance, root_noise=False), seed=3)
    for g in range(2):
        m.reset(g, state)
    m.run(HashEvaluator(5, seed=1))
    t = m._trees
    n = t.num_nodes[0]
    seen = t.visits[0, :n] > 0
    q = t.value_sum[0, :n][seen] / t.visits[0, :n][seen]
    sq = t.value_sq[0, :n][seen]
    assert (sq <= t.visits[0, :n][seen] + 1e-3).all() and (sq >= q * q * t.visits[0, :n][seen] - 1e-3).all()
    assert sq.max() > 0 and (t.value_sq[0, n:] == 0).all()
    visits[c_variance] = m.root_visits(0)[1]
    # tree reuse keeps the chosen child's statistic; the new tree is the child's subtree
    move = m.choose_move(0, temperature=0.0)
    f, k = t.first_child[0, 0], t.num_children[0, 0]
    child = f + int(np.flatnonzero(t.move[0, f:f + k] == move)[0])
    kept = float(t.value_sq[0, child])
    m.advance(0, move)
    assert float(t.value_sq[0, 0]) == kept and (t.value_sq[0, t.num_nodes[0]:] == 0).all()
    m.reset(1, state)
    assert (t.value_sq[1] == 0).all()
assert not np.array_equal(visits[0.0], visits[3.0]), visits
print("ok", visits[0.0].tolist(), visits[3.0].tolist())
"""

BONUS_CHECK = f"""
import numpy as np, yaml
import takzero
from takzero.game import Position
from takzero.search import BatchedMCTS, HashEvaluator, SearchConfig
assert takzero.__file__.startswith({{root!r}}), takzero.__file__
assert yaml.safe_load(open("configs/train.yaml"))["mcts"]["toy_wall_bonus"] == 0.0
state = Position.from_tps({TPS!r}).state
share = {{}}
for bonus in (0.0, 2.0):
    m = BatchedMCTS(1, 5, SearchConfig(simulations=48, toy_wall_bonus=bonus, root_noise=False), seed=3)
    m.reset(0, state)
    m.run(HashEvaluator(5, seed=1))
    moves, visits = m.root_visits(0)
    wall = ((moves >> 6) & 3) == 2
    share[bonus] = visits[wall].sum() / visits.sum()
assert share[0.0] < 0.5 and share[2.0] > 0.9, share
print("ok", share)
"""


def _sites(walk) -> tuple[int, int]:
    """(edit sites, files) of a walk."""
    return len({site for site, _, _, _ in walk}), len({rel for _, rel, _, _ in walk})


def _walk(tmp_path: Path, edits: list[tuple[str, str, str, str]], check: str) -> str:
    """Copy the package and configs/train.yaml under ``tmp_path``, apply ``edits`` (each anchor
    must occur once), run ``check`` there in plain Python (NUMBA_DISABLE_JIT=1); its output."""
    shutil.copytree(ROOT / "takzero", tmp_path / "takzero",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    (tmp_path / "configs").mkdir()
    shutil.copy(ROOT / "configs" / "train.yaml", tmp_path / "configs" / "train.yaml")
    for _, rel, anchor, new in edits:
        path = tmp_path / rel
        text = path.read_text()
        assert text.count(anchor) == 1, f"{rel}: the anchor {anchor!r} is not there once"
        path.write_text(text.replace(anchor, new))
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", PYTHONPATH=str(tmp_path))
    env.pop("NUMBA_CACHE_DIR", None)
    code = textwrap.dedent(check).replace("{root!r}", repr(str(tmp_path)))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_walk_a_node_statistic_and_an_exploration_rule(tmp_path):
    """8 edits in 4 files: the NODE_FIELDS row, its update in the backup rule, the rule, its row
    and its branch in the dispatch, the setting (field, check) and its train.yaml line."""
    assert _sites(STATISTIC_WALK) == (8, 4)
    assert _walk(tmp_path, STATISTIC_WALK, STATISTIC_CHECK).startswith("ok")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_walk_a_puct_bonus(tmp_path):
    """4 edits in 3 files: the bonus in ``puct_score`` (which takes the pools and the settings),
    the setting (field, check) and its train.yaml line."""
    assert _sites(BONUS_WALK) == (4, 3)
    assert _walk(tmp_path, BONUS_WALK, BONUS_CHECK).startswith("ok")


def test_unowned_tuple_views_write_the_arrays():
    """The kernels rebind their pools to ``unowned_tuple(pools)`` and write through them, inlined
    helpers included: every write lands in the caller's arrays (the kind of lost write behind
    the first compiled search's hang, numba's dead-code elimination, is tested in
    ``tests/test_search_writes.py``)."""
    from collections import namedtuple

    from numba import njit

    from takzero.search.numba_ext import unowned_tuple

    pools_t = namedtuple("pools_t", ["a", "b", "n"])

    @njit(inline="always")
    def add_inline(t, g):
        t.a[g, 0] += 1
        t.n[g] += 1

    @njit
    def add_call(t, g):
        t.b[g, 0] += 1.5

    @njit
    def kernel(t, g):
        t = unowned_tuple(t)
        b = t.b
        b[g, 1] += 1.0
        add_inline(t, g)
        add_call(t, g)
        return t.a[g, 0]

    t = pools_t(np.zeros((2, 3), np.int32), np.zeros((2, 3), np.float32), np.zeros(2, np.int32))
    for k in (1, 2):
        assert kernel(t, 1) == k
        assert t.a[1].tolist() == [k, 0, 0] and t.n.tolist() == [0, k]
        assert t.b[1].tolist() == [1.5 * k, 1.0 * k, 0.0]
    assert (t.a[0] == 0).all() and (t.b[0] == 0).all()
