"""The search's rules: one table (``RULES``) of the selection, first-play, exploration and backup
rules the compiled search can run, each kind with one signature, and the dispatch of each kind,
written once below the table.

A rule is a numba function (``@njit(cache=True, inline="always")``); the search's settings choose
one rule of each kind, packed as an integer code (``cfg["root_rule"]``, ``cfg["interior_rule"]``,
``cfg["first_play_rule"]``, ``cfg["exploration_rule"]``, ``cfg["backup_rule"]``: the row's
``code``) by ``takzero.search.config.pack_settings`` from the first row of the kind whose
``chosen(config)`` holds. The dispatch is an ``if`` on that code, not a function passed in: numba
caches functions that take functions badly, and an inlined ``if`` on a setting costs nothing
measurable. The kinds and their signatures (``trees``, ``games``: the pools of
``takzero.search.tree``, ``cfg``: the packed settings record, ``g``: the game, ``x``: the node)::

    root, interior  (trees, games, cfg, g, x, score_buf, use_virtual) -> child index (-1: every
                    child is a proven loss); ``score_buf`` float64 scratch of length >= A,
                    ``use_virtual``: virtual visits may be pending (several leaves per step)
    first_play      (trees, cfg, g, x, reduction, mass) -> the Q of an unvisited child of x
    exploration     (trees, cfg, g, x, parent_visits) -> the exploration term c(s) sqrt(N(s))
    backup          (trees, cfg, path, slot, g, depth, v) -> None: value v up the leaf's path

The PUCT score of a child is ``takzero.search.puct.puct_score(trees, cfg, g, c, ...)``, one
function used by every PUCT rule and by policy target pruning: a per-child bonus goes there. A new
rule: its function, its row in ``RULES`` (with the setting that chooses it, checked in
``SearchConfig``), its branch in the kind's dispatch; ``tests/test_search_rules.py`` checks that
each dispatch runs each row's function. Where to change what: docs/design.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from takzero.search.gumbel import init_gumbel_root, select_gumbel_root
from takzero.search.numba_ext import prefetch
from takzero.search.puct import (
    draw_score,
    exploration_constant,
    exploration_log,
    first_play_fixed,
    first_play_reduction,
    forced_playouts,
    mix_root_noise,
    puct_score,
)
from takzero.search.tree import DRAW, LOSS, UNKNOWN, WIN, backup_mean

if TYPE_CHECKING:
    from takzero.search.config import SearchConfig

# ---------------------------------------------------------------------------------------------
# Selection rules (the PUCT ones; the Gumbel root is takzero.search.gumbel.select_gumbel_root)
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy", inline="always")
def select_prefix(trees, games, cfg, g: int | np.integer, x: int | np.integer, score_buf: np.ndarray,
                  use_virtual: bool) -> int:
    """The interior rule "puct": PUCT at a non-root node ``x`` of game ``g``; the child index to
    descend into, -1 if every child is a proven loss. Children are stored by decreasing prior and
    a non-root node always selects either a visited child or the first unvisited one, hence its
    visited children form a prefix: the scan stops at the first unvisited child. Same result as a
    full scan, ties to the lowest index. The property of the formula this needs: all unvisited
    children share the first-play value, and an unvisited child's ``puct_score`` is
    non-decreasing in its prior (for ``exploration_term >= 0``), so the first unvisited child
    scores at least as high as every later one (asserted on ``puct_score`` by
    ``tests/test_search_puct.py``). ``score_buf`` is not used. ``use_virtual``: virtual visits may
    be pending; without them ``virtual_visits`` is all zero and not read."""
    visits, value_sum, prior, status = trees.visits, trees.value_sum, trees.prior, trees.status
    virtual_visits = trees.virtual_visits
    f = trees.first_child[g, x]
    nc = trees.num_children[g, x]
    # the child taken next reads these at its own index (in the first cache line of the children
    # when the visited prefix is short): start the loads now, alongside the scan's own misses,
    # instead of one after the other
    prefetch(trees.move, g, f)
    prefetch(trees.num_children, g, f)
    prefetch(trees.first_child, g, f)
    exploration_term = exploration(
        trees, cfg, g, x, np.float64(visits[g, x] + (virtual_visits[g, x] if use_virtual else 0))
    )
    virtual_loss = cfg["virtual_loss"]
    best = -np.inf
    best_c = -1
    mass = 0.0
    unvisited = -1
    for c in range(f, f + nc):
        s = status[g, c]
        effective_visits = np.float64(visits[g, c] + (virtual_visits[g, c] if use_virtual else 0))
        if s == UNKNOWN and effective_visits == 0.0:
            unvisited = c
            break
        if s == LOSS:
            continue
        if s == WIN:
            return c
        child_prior = np.float64(prior[g, c])
        if effective_visits > 0.0:
            mass += child_prior
        if s == DRAW:
            score = draw_score(effective_visits, exploration_term, child_prior)
        else:
            child_sum = np.float64(value_sum[g, c]) - (
                virtual_loss * virtual_visits[g, c] if use_virtual else 0.0
            )
            score = puct_score(
                trees, cfg, g, c, child_sum, effective_visits, exploration_term, child_prior, 0.0
            )
        if score > best:
            best = score
            best_c = c
    if unvisited >= 0:
        first_play = first_play_value(trees, cfg, g, x, cfg["fpu_reduction"], mass)
        unvisited_score = puct_score(
            trees, cfg, g, unvisited, 0.0, 0.0, exploration_term,
            np.float64(prior[g, unvisited]), first_play,
        )
        if unvisited_score > best or (unvisited_score == best and unvisited < best_c):
            return unvisited
    return best_c


@njit(cache=True, error_model="numpy", inline="always")
def select_puct_root(trees, games, cfg, g: int | np.integer, x: int | np.integer, score_buf: np.ndarray,
                     use_virtual: bool) -> int:
    """The root rule "puct": PUCT at the root (``x`` = 0) of game ``g``: a full scan (noise
    mixes the priors, so no prefix property); the child index, -1 if every child is a proven
    loss. The mixed priors ``games.mixed_prior`` ((G, A) float32, by child slot) are set once per
    search (``mix_root_noise``); the first-play reduction is ``fpu_reduction_root``, 0 while
    noise is on. The scores are computed branch-free into ``score_buf`` (float64, length >= the
    children); proven children are then fixed up (a win is taken at once, a loss scores -inf, a
    draw ``draw_score``) and the first maximum is taken. Indices are cast to unsigned so that
    numba drops its negative-index handling, which keeps these loops several times faster."""
    visits, value_sum, status = trees.visits, trees.value_sum, trees.status
    virtual_visits, mixed_prior = trees.virtual_visits, games.mixed_prior
    ug = np.uint64(g)
    f = trees.first_child[ug, 0]
    nc = trees.num_children[ug, 0]
    exploration_term = exploration(
        trees, cfg, ug, 0, np.float64(visits[ug, 0] + (virtual_visits[ug, 0] if use_virtual else 0))
    )
    virtual_loss = cfg["virtual_loss"]
    proven = 0
    for i in range(nc):
        proven |= status[ug, np.uint64(f + i)]
    reduction = 0.0 if games.noise[ug] and cfg["noise_weight"] > 0.0 else cfg["fpu_reduction_root"]
    mass = 0.0
    if reduction != 0.0:  # prior mass of the visited children (in order)
        for i in range(nc):
            c = np.uint64(f + i)
            effective_visits = visits[ug, c] + (virtual_visits[ug, c] if use_virtual else 0)
            mass += np.float64(mixed_prior[ug, np.uint64(i)]) if effective_visits > 0 else 0.0
    first_play = first_play_value(trees, cfg, ug, 0, reduction, mass)
    for i in range(nc):
        c = np.uint64(f + i)
        child_prior = np.float64(mixed_prior[ug, np.uint64(i)])
        if use_virtual:
            effective_visits = np.float64(visits[ug, c] + virtual_visits[ug, c])
            child_sum = np.float64(value_sum[ug, c]) - virtual_loss * virtual_visits[ug, c]
        else:
            effective_visits = np.float64(visits[ug, c])
            child_sum = np.float64(value_sum[ug, c])
        score_buf[i] = puct_score(
            trees, cfg, ug, c, child_sum, effective_visits, exploration_term, child_prior,
            first_play,
        )
    if proven == 0:
        best = score_buf[0]
        best_i = 0
        for i in range(1, nc):
            if score_buf[i] > best:
                best = score_buf[i]
                best_i = i
        return f + best_i
    # proven children: a win is taken at once, a loss never, a draw scores its exact value 0
    for i in range(nc):
        c = np.uint64(f + i)
        s = status[ug, c]
        if s != UNKNOWN:
            if s == WIN:
                return f + i
            if s == LOSS:
                score_buf[i] = -np.inf
            else:
                effective_visits = np.float64(
                    visits[ug, c] + (virtual_visits[ug, c] if use_virtual else 0)
                )
                score_buf[i] = draw_score(
                    effective_visits, exploration_term, np.float64(mixed_prior[ug, np.uint64(i)])
                )
    best = -np.inf
    best_c = -1
    for i in range(nc):
        if score_buf[i] > best:
            best = score_buf[i]
            best_c = f + i
    return best_c


@njit(cache=True, error_model="numpy", inline="always")
def select_forced_root(trees, games, cfg, g: int | np.integer, x: int | np.integer,
                       score_buf: np.ndarray, use_virtual: bool) -> int:
    """The root rule "forced" (KataGo's forced playouts, ``forced_playouts``): in a search with
    root noise and no child proven, the first child that has been visited but has fewer visits
    (plus virtual visits) than ``forced_playouts(forced_k, P, sum N)`` (P: the noised prior) is
    taken; otherwise the root rule "puct" (KataGo: only children that received playouts are
    forced; which moves get tried stays PUCT's choice)."""
    visits, virtual_visits = trees.visits, trees.virtual_visits
    ug = np.uint64(g)
    f = trees.first_child[ug, 0]
    nc = trees.num_children[ug, 0]
    proven = 0
    for i in range(nc):
        proven |= trees.status[ug, np.uint64(f + i)]
    if games.noise[ug] and proven == 0:
        total = 0.0
        for i in range(nc):
            c = np.uint64(f + i)
            total += np.float64(visits[ug, c] + (virtual_visits[ug, c] if use_virtual else 0))
        if total > 0.0:
            forced_k = cfg["forced_k"]
            for i in range(nc):
                c = np.uint64(f + i)
                effective_visits = np.float64(
                    visits[ug, c] + (virtual_visits[ug, c] if use_virtual else 0)
                )
                child_prior = np.float64(games.mixed_prior[ug, np.uint64(i)])
                if effective_visits > 0.0 and effective_visits < forced_playouts(
                    forced_k, child_prior, total
                ):
                    return f + i
    return select_puct_root(trees, games, cfg, g, x, score_buf, use_virtual)


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------

#: The kinds of rule, in the order of their packed settings (``<kind>_rule``).
RULE_KINDS = ("root", "interior", "first_play", "exploration", "backup")


def _always(config: SearchConfig) -> bool:
    return True


@dataclass(frozen=True)
class Rule:
    """One row of ``RULES``: ``kind`` (one of ``RULE_KINDS``), ``name``, ``code`` (its packed
    value, unique within the kind; the dispatch below branches on it), ``function`` (the numba
    rule, of the kind's signature), ``chosen`` (does a ``SearchConfig`` choose it? The first row of
    the kind that holds is packed) and ``description``."""

    kind: str
    name: str
    code: int
    function: Any
    chosen: Callable[[SearchConfig], bool]
    description: str


RULES: tuple[Rule, ...] = (
    Rule("root", "gumbel", 2, select_gumbel_root, lambda c: c.gumbel,
         "Gumbel-top-k and Sequential Halving (takzero.search.gumbel)"),
    Rule("root", "forced", 1, select_forced_root, lambda c: c.forced_playouts,
         "KataGo's forced playouts in searches with root noise, then PUCT"),
    Rule("root", "puct", 0, select_puct_root, _always, "PUCT over the (noised) root priors"),
    Rule("interior", "puct", 0, select_prefix, _always, "PUCT over the visited prefix"),
    Rule("first_play", "fixed", 1, first_play_fixed, lambda c: c.fpu_value is not None,
         "the fpu_value setting"),
    Rule("first_play", "reduction", 0, first_play_reduction, _always,
         "Q(parent) - reduction * sqrt(visited prior mass) (KataGo)"),
    Rule("exploration", "constant", 1, exploration_constant, lambda c: c.c_base == 0,
         "c_init * sqrt(N)"),
    Rule("exploration", "log", 0, exploration_log, _always,
         "(c_init + log((1 + N + c_base) / c_base)) * sqrt(N) (AlphaZero)"),
    Rule("backup", "mean", 0, backup_mean, _always, "visits + 1, value sum + v, negated per ply"),
)


def rule_codes(config: SearchConfig) -> dict[str, int]:
    """The code of the rule of each kind that ``config`` chooses (the first row that holds), by
    the packed setting's name (``"<kind>_rule"``).

    Raises:
        ValueError: no row of a kind is chosen.
    """
    codes: dict[str, int] = {}
    for kind in RULE_KINDS:
        row = next((r for r in RULES if r.kind == kind and r.chosen(config)), None)
        if row is None:
            raise ValueError(f"no {kind} rule is chosen by this SearchConfig")
        codes[f"{kind}_rule"] = row.code
    return codes


def _check_table() -> None:
    for kind in RULE_KINDS:
        codes = [r.code for r in RULES if r.kind == kind]
        if not codes or len(set(codes)) != len(codes):
            raise ValueError(f"RULES: the {kind} rules need distinct codes")
    if any(r.kind not in RULE_KINDS for r in RULES):
        raise ValueError(f"RULES: a kind is not one of {RULE_KINDS}")


_check_table()

# ---------------------------------------------------------------------------------------------
# The dispatch: one `if` per row on the packed code (the codes of RULES above)
# ---------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy", inline="always")
def select_root(trees, games, cfg, g: int | np.integer, x: int | np.integer, score_buf: np.ndarray,
                use_virtual: bool) -> int:
    """The chosen root rule (``cfg["root_rule"]``)."""
    rule = cfg["root_rule"]
    if rule == 2:
        return select_gumbel_root(trees, games, cfg, g, x, score_buf, use_virtual)
    if rule == 1:
        return select_forced_root(trees, games, cfg, g, x, score_buf, use_virtual)
    return select_puct_root(trees, games, cfg, g, x, score_buf, use_virtual)


@njit(cache=True, error_model="numpy", inline="always")
def prepare_root(trees, games, cfg, g: int | np.integer, f: int, nc: int) -> None:
    """The chosen root rule's preparation of a new search (root children ``f .. f + nc``): the
    Gumbel draw and schedule (``init_gumbel_root``) for "gumbel", else the Dirichlet draw and the
    mixed priors (``mix_root_noise``)."""
    if cfg["root_rule"] == 2:
        init_gumbel_root(trees, games, cfg, g, f, nc)
    else:
        mix_root_noise(trees, games, cfg, g, f, nc)


@njit(cache=True, error_model="numpy", inline="always")
def select_interior(trees, games, cfg, g: int | np.integer, x: int | np.integer,
                    score_buf: np.ndarray, use_virtual: bool) -> int:
    """The chosen interior rule (``cfg["interior_rule"]``)."""
    return select_prefix(trees, games, cfg, g, x, score_buf, use_virtual)


@njit(cache=True, error_model="numpy", inline="always")
def first_play_value(trees, cfg, g: int | np.integer, x: int | np.integer, reduction: float,
                     mass: float) -> float:
    """The chosen first-play rule (``cfg["first_play_rule"]``)."""
    if cfg["first_play_rule"] == 1:
        return first_play_fixed(trees, cfg, g, x, reduction, mass)
    return first_play_reduction(trees, cfg, g, x, reduction, mass)


@njit(cache=True, error_model="numpy", inline="always")
def exploration(trees, cfg, g: int | np.integer, x: int | np.integer, parent_visits: float) -> float:
    """The chosen exploration rule (``cfg["exploration_rule"]``)."""
    if cfg["exploration_rule"] == 1:
        return exploration_constant(trees, cfg, g, x, parent_visits)
    return exploration_log(trees, cfg, g, x, parent_visits)


@njit(cache=True, error_model="numpy", inline="always")
def backup(trees, cfg, path, slot: int | np.integer, g: int | np.integer, depth: int | np.integer,
           v: float) -> None:
    """The chosen backup rule (``cfg["backup_rule"]``)."""
    backup_mean(trees, cfg, path, slot, g, depth, v)
