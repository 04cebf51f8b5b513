"""Batched MCTS over many games at once: PUCT with first-play urgency, Dirichlet noise, proven
wins/losses, the Gumbel root with Sequential Halving, playout cap randomization, tree reuse.

See ``takzero.search.mcts`` for the API, ``takzero.search.driver`` for the front end every caller
searches through (with ``takzero.search.limit.Limit``) and ``takzero.search.config`` for the
formulas.
"""

from takzero.search.config import SearchConfig
from takzero.search.driver import CachedEvaluator, SearchDriver, SearchOutcome
from takzero.search.evaluators import HashEvaluator, UniformEvaluator
from takzero.search.limit import Limit
from takzero.search.mcts import (
    BatchedMCTS,
    SearchResult,
    SearchStats,
    game_seed,
    search_position,
)

__all__ = [
    "BatchedMCTS",
    "CachedEvaluator",
    "HashEvaluator",
    "Limit",
    "SearchConfig",
    "SearchDriver",
    "SearchOutcome",
    "SearchResult",
    "SearchStats",
    "UniformEvaluator",
    "game_seed",
    "search_position",
]
