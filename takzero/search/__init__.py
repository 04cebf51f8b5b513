"""Batched MCTS over many games at once: PUCT with first-play urgency, Dirichlet noise, proven
wins/losses, the Gumbel root with Sequential Halving, playout cap randomization, tree reuse.

See ``takzero.search.mcts`` for the API and ``takzero.search.config`` for the formulas.
"""

from takzero.search.config import SearchConfig
from takzero.search.evaluators import HashEvaluator, UniformEvaluator
from takzero.search.mcts import (
    BatchedMCTS,
    SearchResult,
    SearchStats,
    game_seed,
    search_position,
)

__all__ = [
    "BatchedMCTS",
    "HashEvaluator",
    "SearchConfig",
    "SearchResult",
    "SearchStats",
    "UniformEvaluator",
    "game_seed",
    "search_position",
]
