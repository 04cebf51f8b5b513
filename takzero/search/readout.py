"""Readouts of a searched root: visit counts, Q values, priors, proofs, policy targets, the move
to play and the principal variation. Plain numpy functions over the pools of
``takzero.search.tree`` (``trees``: ``Trees``, ``games``: ``Games``, ``settings``: the packed settings,
``config``: the ``SearchConfig``), for game ``g``; ``BatchedMCTS`` delegates its readout methods
here. Values are from the view of the side to move at the root; move codes are core codes
(int64), action indices those of ``takzero.nn.actions``.
"""

from __future__ import annotations

import numpy as np

from takzero.game.core import I_PLY, num_actions
from takzero.nn.actions import move_to_action
from takzero.search.config import SearchConfig
from takzero.search.gumbel import root_sigma_q
from takzero.search.puct import forced_playouts, pruned_visit_count, puct_score
from takzero.search.rng import rand_uniform
from takzero.search.rules import exploration
from takzero.search.tree import DRAW, LOSS, UNKNOWN, WIN, Games, Trees

__all__ = [
    "choose_move",
    "policy_dense",
    "policy_target",
    "principal_variation",
    "pruned_visits",
    "root_moves",
    "root_priors",
    "root_proven",
    "root_q",
    "root_value",
    "root_visits",
    "sigma_q",
    "target_probs",
]


def _children(trees: Trees, g: int) -> slice:
    """Pool slots of the root's children."""
    f = int(trees.first_child[g, 0])
    return slice(f, f + int(trees.num_children[g, 0]))


def root_moves(trees: Trees, g: int) -> np.ndarray:
    """(k,) int64 move codes of the root's children (the legal moves once the root is expanded;
    empty before)."""
    return trees.move[g, _children(trees, g)].astype(np.int64)


def root_visits(trees: Trees, g: int) -> tuple[np.ndarray, np.ndarray]:
    """(moves (k,) int64, visits (k,) int32) of the root's children."""
    sl = _children(trees, g)
    return trees.move[g, sl].astype(np.int64), trees.visits[g, sl].copy()


def root_q(trees: Trees, g: int) -> np.ndarray:
    """(k,) float32 mean value of each root child from the root mover's view (NaN if unvisited;
    the exact value if proven)."""
    sl = _children(trees, g)
    visits = trees.visits[g, sl].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(visits > 0, trees.value_sum[g, sl] / visits, np.nan)
    status = trees.status[g, sl]
    q = np.where(status == WIN, 1.0, np.where(status == LOSS, -1.0, np.where(status == DRAW, 0.0, q)))
    return q.astype(np.float32)


def root_priors(
    trees: Trees, games: Games, config: SearchConfig, g: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(moves (k,) int64, priors (k,) float32, mixed (k,) float32): the network priors of the
    root's children and the priors the search used (with Dirichlet noise when it is on:
    ``(1 - noise_weight) * P + noise_weight * eta``, in float32)."""
    sl = _children(trees, g)
    prior = trees.prior[g, sl].copy()
    k = prior.shape[0]
    mixed = prior
    eps = config.noise_weight
    if games.noise[g] and not config.gumbel and eps > 0 and k:
        mixed = ((1.0 - eps) * prior + eps * games.dirichlet_noise[g, :k]).astype(np.float32)
    return trees.move[g, sl].astype(np.int64), prior, mixed


def root_proven(trees: Trees, g: int) -> int | None:
    """Proven result for the side to move at the root: 1 win, 0 draw, -1 loss, None unknown."""
    s = int(trees.status[g, 0])
    return {UNKNOWN: None, WIN: -1, LOSS: 1, DRAW: 0}[s]


def root_value(trees: Trees, g: int) -> float:
    """Value of the root for its side to move: the exact value if proven, else the mean of the
    backed-up values (in [-1, 1]); 0 before any evaluation."""
    proven = root_proven(trees, g)
    if proven is not None:
        return float(proven)
    visits = int(trees.visits[g, 0])
    return float(-trees.value_sum[g, 0] / visits) if visits else 0.0


def sigma_q(trees: Trees, games: Games, settings: np.ndarray, g: int) -> np.ndarray:
    """(k,) float64 ``sigma(completed Q)`` of the root's children (``gumbel.sigma_q``)."""
    k = int(trees.num_children[g, 0])
    out = np.empty(max(k, 1), dtype=np.float64)
    if k:
        root_sigma_q(trees, games, settings, g, out)
    return out[:k]


def pruned_visits(trees: Trees, games: Games, settings: np.ndarray, config: SearchConfig,
                  g: int) -> np.ndarray:
    """(k,) float64 visit counts of the root's children after policy target pruning (KataGo, Wu
    2019, section 3.2; formula in ``takzero.search.config``): c* = the most visited child (first
    on ties) keeps its visits; every other visited child c keeps the least ``N'`` with
    ``N(c) - n_forced(c) <= N' <= N(c)`` at which its PUCT score with ``N'`` visits and the same
    Q is at most PUCT(c*) (``puct.pruned_visit_count``, which evaluates ``puct.puct_score``; the
    exploration term is the exploration rule of the root (``rules.exploration``), P the priors the search used: noised
    when the search had noise), and is dropped when ``N' <= 1``. Children proven
    won, lost or drawn keep their visits (``target_probs`` handles them)."""
    sl = _children(trees, g)
    visits = trees.visits[g, sl].astype(np.float64)
    k = visits.shape[0]
    if k == 0 or visits.sum() <= 0:
        return visits
    cfg = settings[0]
    value_sum = trees.value_sum[g, sl].astype(np.float64)
    prior = games.mixed_prior[g, :k].astype(np.float64)
    total = visits.sum()
    exploration_term = exploration(trees, cfg, g, 0, np.float64(trees.visits[g, 0]))
    best = int(np.argmax(visits))
    bar = puct_score(
        trees, cfg, g, sl.start + best, value_sum[best], visits[best], exploration_term,
        prior[best], 0.0,
    )
    out = visits.copy()
    for c in range(k):
        if c == best or visits[c] <= 0 or trees.status[g, sl.start + c] != UNKNOWN:
            continue
        # whole playouts are taken away: at most floor(n_forced) of them; keeping 1 or none
        # both drop the child, so the search starts at 1
        forced = forced_playouts(config.forced_k, prior[c], total)
        least = max(1.0, np.ceil(visits[c] - forced))
        kept = pruned_visit_count(
            trees, cfg, g, sl.start + c, value_sum[c], visits[c], least, exploration_term,
            prior[c], bar,
        )
        out[c] = 0.0 if kept <= 1.0 else kept
    return out


def target_probs(trees: Trees, games: Games, settings: np.ndarray, config: SearchConfig,
                 g: int) -> np.ndarray:
    """Policy target over the root's child slots ((k,) float64, sums to 1): uniform over the
    proven wins if any; else, children proven lost excluded (unless all are), the Gumbel improved
    policy ``softmax(log P + sigma(completed Q))`` or the visit counts (PUCT; the priors if no
    child has a visit); with ``config.policy_target_pruning`` the counts are ``pruned_visits``.

    Raises:
        ValueError: the root is not expanded.
    """
    sl = _children(trees, g)
    status = trees.status[g, sl]
    k = status.shape[0]
    if k == 0:
        raise ValueError(f"game {g} has no expanded root (run a search first)")
    win = status == WIN
    if win.any():
        return win / win.sum()
    keep = status != LOSS
    if not keep.any():
        keep = np.ones(k, dtype=bool)
    if config.gumbel:
        logits = np.log(np.maximum(trees.prior[g, sl].astype(np.float64), 1e-30))
        z = np.where(keep, logits + sigma_q(trees, games, settings, g), -np.inf)
        z = np.exp(z - z.max())
        return z / z.sum()
    if config.policy_target_pruning:
        visits = pruned_visits(trees, games, settings, config, g)
    else:
        visits = trees.visits[g, sl]
    weights = np.where(keep, visits, 0).astype(np.float64)
    if weights.sum() <= 0:
        weights = np.where(keep, trees.prior[g, sl], 0).astype(np.float64) + keep * 1e-12
    return weights / weights.sum()


def policy_target(trees: Trees, games: Games, settings: np.ndarray, config: SearchConfig, size: int,
                  g: int) -> tuple[np.ndarray, np.ndarray]:
    """Training policy target of the root: (actions (k,) int64 action indices, probs (k,)
    float32 summing to 1) over the legal moves (``target_probs``)."""
    probs = target_probs(trees, games, settings, config, g)
    moves = root_moves(trees, g)
    actions = np.array([move_to_action(int(m), size) for m in moves], dtype=np.int64)
    return actions, probs.astype(np.float32)


def policy_dense(trees: Trees, games: Games, settings: np.ndarray, config: SearchConfig, size: int,
                 g: int) -> np.ndarray:
    """The policy target as a dense (A,) float32 vector over action indices."""
    actions, probs = policy_target(trees, games, settings, config, size, g)
    out = np.zeros(num_actions(size), dtype=np.float32)
    out[actions] = probs
    return out


def principal_variation(trees: Trees, g: int, first_move: int | None = None,
                        limit: int = 32) -> list[int]:
    """Move codes of the most visited line from the root (starting with ``first_move`` when
    given, e.g. the move actually chosen), at most ``limit`` plies."""
    pv: list[int] = []
    node = 0
    for depth in range(limit):
        f, k = int(trees.first_child[g, node]), int(trees.num_children[g, node])
        if k <= 0:
            break
        visits = trees.visits[g, f : f + k]
        if depth == 0 and first_move is not None:
            idx = np.flatnonzero(trees.move[g, f : f + k] == first_move)
            if idx.size == 0:
                break
            j = int(idx[0])
        else:
            j = int(np.argmax(visits))
            if visits[j] <= 0:
                break
        pv.append(int(trees.move[g, f + j]))
        node = f + j
    return pv


def choose_move(trees: Trees, games: Games, settings: np.ndarray, config: SearchConfig, g: int,
                temperature: float | None = None, rng=None) -> int:
    """Move code to play at the root after a search.

    A proven winning move is taken at once (the most visited one). Otherwise, children proven
    lost are avoided (unless all are), and:

    * PUCT: visit counts (after policy target pruning when ``config.policy_target_pruning``,
      ``pruned_visits``) with temperature ``tau`` (default ``config.temperature_at(ply)``):
      ``tau == 0`` takes the most visited move (ties: higher Q, then higher prior), or with
      ``config.select_q_fraction`` f > 0 the move of highest Q among those with at least f times
      the most visits (ties: more visits, then higher prior), else samples
      with probability proportional to ``N ** (1 / tau)``;
    * Gumbel: the Sequential Halving winner (most search visits, then the largest
      gumbel + log P + sigma(Q)); the temperature is not used, the exploration comes from the
      Gumbel draw (none when noise is off).

    ``rng`` (``numpy.random.Generator``) draws the sample; default: the game's own stream.

    Raises:
        ValueError: the root is not expanded.
    """
    sl = _children(trees, g)
    k = sl.stop - sl.start
    if k == 0:
        raise ValueError(f"game {g} has no expanded root (run a search first)")
    moves = trees.move[g, sl]
    visits = trees.visits[g, sl].astype(np.float64)
    status = trees.status[g, sl]
    win = status == WIN
    if win.any():
        return int(moves[np.argmax(np.where(win, visits, -1.0))])
    keep = status != LOSS
    if not keep.any():
        keep = np.ones(k, dtype=bool)
    if config.gumbel:
        score = games.gumbel_logits[g, :k].astype(np.float64) + sigma_q(trees, games, settings, g)
        search_visits = games.search_visits[g, :k]
        top = search_visits[keep].max()
        cand = keep & (search_visits == top)
        return int(moves[np.argmax(np.where(cand, score, -np.inf))])
    ply = int(games.root_state[g, I_PLY])
    tau = config.temperature_at(ply) if temperature is None else temperature
    if config.policy_target_pruning:  # KataGo plays from the pruned counts too
        visits = pruned_visits(trees, games, settings, config, g)
    weights = np.where(keep, visits, 0.0)
    if weights.sum() <= 0:
        weights = np.where(keep, trees.prior[g, sl].astype(np.float64) + 1e-12, 0.0)
    if tau <= 1e-6:
        best = weights.max()
        if config.select_q_fraction > 0:  # the best Q among the well-visited children
            cand = np.flatnonzero(keep & (weights >= config.select_q_fraction * best))
        else:
            cand = np.flatnonzero(weights == best)
        if cand.size > 1:
            q = root_q(trees, g)[cand]
            q = np.where(np.isnan(q), -np.inf, q)
            prior = trees.prior[g, sl][cand]
            cand = cand[np.lexsort((-prior, -weights[cand], -q))]
        return int(moves[cand[0]])
    with np.errstate(divide="ignore"):
        z = np.log(weights) / tau
    z = np.exp(z - z.max())
    cdf = np.cumsum(z / z.sum())
    u = rng.random() if rng is not None else rand_uniform(games.rng, g)
    return int(moves[min(int(np.searchsorted(cdf, u, side="right")), k - 1)])
