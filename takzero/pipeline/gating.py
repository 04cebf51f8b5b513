"""TEMPORARY (replaced by the players/matches branch at merge)."""

from takzero.evaluate import GatingEvaluator

__all__ = ["GatingEvaluator"]
