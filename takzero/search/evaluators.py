"""The search's evaluator seam, :class:`Evaluator`, and evaluators without a network.

:class:`Evaluator` is what ``BatchedMCTS.run``, ``SearchDriver`` and ``CachedEvaluator`` call:
``evaluate(states (B, STATE_LEN) int64) -> (priors (B, A) float32, values (B,) float32,
wdl (B, 3) float32)`` (:data:`EvaluatorOutput`), values from the view of the side to move.
``takzero.nn.inference.Evaluator`` (a network), ``CachedEvaluator`` and the two below satisfy it.

* :class:`UniformEvaluator`: equal priors, value 0 (pure search cost; tactics found by the search
  alone).
* :class:`HashEvaluator`: pseudo-random priors over the legal moves and values, a fixed function of
  each position (its Zobrist hash and a seed), so results never depend on the batch; for tests of
  determinism and of the search's plumbing.
"""

from __future__ import annotations

from typing import Protocol, TypeAlias

import numpy as np

from takzero.game.core import I_HASH, num_actions
from takzero.nn.actions import legal_mask

__all__ = ["Evaluator", "EvaluatorOutput", "HashEvaluator", "UniformEvaluator"]

#: What :meth:`Evaluator.evaluate` returns for B positions: ``(priors, values, wdl)``:
#: priors (B, A) float32 (A = ``num_actions(size)``; the search renormalises them over the legal
#: moves), values (B,) float32 in [-1, 1] and wdl (B, 3) float32 (win, draw, loss
#: probabilities), both from the view of the side to move. The arrays may be read-only views.
EvaluatorOutput: TypeAlias = tuple[np.ndarray, np.ndarray, np.ndarray]


class Evaluator(Protocol):
    """Anything the search can evaluate positions with (a structural type: no base class)."""

    def evaluate(self, states: np.ndarray) -> EvaluatorOutput:
        """The network's view of ``states`` ((B, STATE_LEN) int64 positions, B >= 1): see
        :data:`EvaluatorOutput`. Output for a position must not depend on the rest of the batch
        where searches are to be reproducible."""
        ...


def _draw_wdl(values: np.ndarray) -> np.ndarray:
    wdl = np.zeros((values.shape[0], 3), dtype=np.float32)
    wdl[:, 0] = np.maximum(values, 0.0)
    wdl[:, 2] = np.maximum(-values, 0.0)
    wdl[:, 1] = 1.0 - np.abs(values)
    return wdl


class UniformEvaluator:
    """Equal priors and value 0 for every position.

    With ``masked=False`` (default, free) every action gets 1/A and the search's renormalisation
    over the legal moves makes the prior uniform; the priors are then a read-only broadcast view
    (``np.broadcast_to``) of one row, which costs nothing to make or to read, and the values and
    WDL are read-only views of cached arrays. With ``masked=True`` the priors are 1/n_legal on the
    legal moves and 0 elsewhere,
    exactly as a network evaluator returns them.
    """

    def __init__(self, size: int, masked: bool = False) -> None:
        self.size = int(size)
        self.num_actions = num_actions(self.size)
        self.masked = masked
        self._row = np.full(self.num_actions, 1.0 / self.num_actions, dtype=np.float32)
        self._values = np.zeros(0, dtype=np.float32)
        self._wdl = np.zeros((0, 3), dtype=np.float32)

    def evaluate(self, states: np.ndarray) -> EvaluatorOutput:
        b = states.shape[0]
        if self.masked:
            mask = legal_mask(states, np.zeros((b, self.num_actions), dtype=np.bool_))
            counts = np.maximum(mask.sum(axis=1, keepdims=True), 1)
            priors = (mask / counts).astype(np.float32)
            values = np.zeros(b, dtype=np.float32)
            return priors, values, _draw_wdl(values)
        if self._values.shape[0] < b:
            self._values = np.zeros(b, dtype=np.float32)
            self._wdl = _draw_wdl(self._values)
            self._values.flags.writeable = False
            self._wdl.flags.writeable = False
        priors = np.broadcast_to(self._row, (b, self.num_actions))
        return priors, self._values[:b], self._wdl[:b]


class HashEvaluator:
    """Deterministic pseudo-random evaluator: for each position, priors ``~ U(0,1) ** sharpness``
    over the legal moves (normalised, 0 elsewhere) and a value ``value_scale * U(-1, 1)``, drawn
    from a generator seeded by the position's hash and ``seed``. Slow (a Python loop over the
    batch); meant for tests."""

    def __init__(self, size: int, seed: int = 0, sharpness: float = 3.0, value_scale: float = 0.5):
        self.size = int(size)
        self.num_actions = num_actions(self.size)
        self.seed = int(seed)
        self.sharpness = float(sharpness)
        self.value_scale = float(value_scale)

    def evaluate(self, states: np.ndarray) -> EvaluatorOutput:
        b = states.shape[0]
        mask = legal_mask(states, np.zeros((b, self.num_actions), dtype=np.bool_))
        priors = np.zeros((b, self.num_actions), dtype=np.float32)
        values = np.zeros(b, dtype=np.float32)
        for i in range(b):
            key = (int(states[i, I_HASH]) & ((1 << 64) - 1), self.seed)
            rng = np.random.default_rng(key)
            raw = rng.random(self.num_actions) ** self.sharpness * mask[i]
            total = raw.sum()
            if total > 0:
                priors[i] = raw / total
            values[i] = self.value_scale * (2.0 * rng.random() - 1.0)
        return priors, values, _draw_wdl(values)
