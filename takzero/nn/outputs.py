"""From a network's raw outputs to priors and values, in compiled loops over numpy arrays.

``masked_softmax_np``: (B, A) policy logits and a (B, A) legal mask -> priors over the legal
moves (the numpy twin of ``takzero.nn.losses.masked_softmax``); ``wdl_values_np``: (B, 3) WDL
logits -> win/draw/loss probabilities and values (win - loss). The evaluators of
``takzero.nn.inference`` call them on every batch they run on the CPU.
"""

from __future__ import annotations

import numba
import numpy as np

from takzero.nn.actions import softmax_at

__all__ = ["masked_softmax_np", "wdl_values_np"]


@numba.njit(cache=True, nogil=True)
def _masked_softmax_rows(logits: np.ndarray, mask: np.ndarray, out: np.ndarray) -> None:
    """Fill ``out`` (B, A) float32 with the softmax of ``logits`` (B, A) float32 over the entries
    where ``mask`` (B, A) bool is True, 0 elsewhere; an all-masked row (or one whose legal logits
    are all -inf) is all zeros; a NaN or +inf legal logit makes the row's legal entries NaN (as
    ``model.masked_softmax``). One scan of each row's mask gathers its legal entries (a few dozen
    of A = 1,575 on 5x5, 9,036 on 6x6); the exponentials and the normalisation then touch only
    those, and the rest of the row is zeroed in one fill: no (B, A) temporaries."""
    b_rows, a_cols = logits.shape
    legal = np.empty(a_cols, np.int64)
    for b in range(b_rows):
        n = 0
        for a in range(a_cols):
            if mask[b, a]:
                legal[n] = a
                n += 1
        softmax_at(logits[b], out[b], legal, n)


@numba.njit(cache=True, nogil=True)
def _wdl_rows(wdl_logits: np.ndarray, wdl: np.ndarray, values: np.ndarray) -> None:
    """Fill ``wdl`` (B, 3) float32 with the softmax of ``wdl_logits`` (B, 3) float32 (win, draw,
    loss of the side to move) and ``values`` (B,) float32 with win - loss. One compiled pass: the
    numpy version's seven small-array calls cost about 2.5% of an engine's search."""
    for b in range(wdl_logits.shape[0]):
        mx = max(wdl_logits[b, 0], wdl_logits[b, 1], wdl_logits[b, 2])
        e0 = np.exp(wdl_logits[b, 0] - mx)
        e1 = np.exp(wdl_logits[b, 1] - mx)
        e2 = np.exp(wdl_logits[b, 2] - mx)
        inv = 1.0 / (e0 + e1 + e2)
        wdl[b, 0] = e0 * inv
        wdl[b, 1] = e1 * inv
        wdl[b, 2] = e2 * inv
        values[b] = wdl[b, 0] - wdl[b, 2]


def wdl_values_np(wdl_logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(wdl (B, 3) float32 probabilities, values (B,) float32 = win - loss) of (B, 3) float
    logits (``_wdl_rows``). Raises ValueError for another shape."""
    x = np.ascontiguousarray(wdl_logits, dtype=np.float32)
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"wdl logits must be (B, 3), got {x.shape}")
    wdl = np.empty(x.shape, np.float32)
    values = np.empty(x.shape[0], np.float32)
    _wdl_rows(x, wdl, values)
    return wdl, values


def masked_softmax_np(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """NumPy twin of ``model.masked_softmax``: (B, A) float logits, (B, A) bool mask -> (B, A)
    float32 probabilities over legal entries, 0 elsewhere, all-zero rows where nothing is legal
    (or every legal logit is -inf), NaN on the legal entries of a row with a NaN or +inf legal
    logit. Raises ValueError for shapes that are not the same (B, A).
    A compiled loop (``_masked_softmax_rows``): on 6x6 (A = 9,036) it is several times faster
    than the six (B, A) passes of the torch version, which took a fifth of a self-play worker's
    time (``scripts/bench_inference.py --softmax``)."""
    logits = np.ascontiguousarray(logits, dtype=np.float32)
    mask = np.ascontiguousarray(mask, dtype=np.bool_)
    if logits.ndim != 2 or logits.shape != mask.shape:
        raise ValueError(f"logits {logits.shape} and mask {mask.shape} must be the same (B, A)")
    out = np.empty(logits.shape, np.float32)
    _masked_softmax_rows(logits, mask, out)
    return out
