"""The losses of the policy, value and auxiliary outputs, and the masked softmax they share.

Every formula of the training loss is written once, here or (for an optional auxiliary head) next
to its row in :mod:`takzero.nn.heads`; :func:`takzero.nn.model.total_loss` weighs and sums them.
Shapes: B positions, A = ``actions.num_actions(N)`` action indices. Every loss returns a scalar
tensor in nats (``aux_loss``: in (flats / N)**2) and is computed in float32 whatever the dtype of
the network's outputs (bf16 under autocast).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "aux_loss",
    "masked_log_softmax",
    "masked_mean",
    "masked_softmax",
    "outcome_to_wdl",
    "policy_loss",
    "value_loss",
    "wdl_to_value",
]


def masked_log_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """Log-softmax over the legal entries of each row, computed in float32.

    Args:
        logits: (B, A) float (any float dtype).
        mask: (B, A) bool, True = legal.

    Returns:
        (B, A) float32: log-probabilities on legal entries, ``-inf`` on illegal ones. A row with no
        legal entry, or with ``-inf`` on every legal one, is ``-inf`` everywhere, i.e. its
        probabilities are all ZERO (not uniform). Whatever the illegal entries hold (``+inf``,
        NaN), the result is never NaN and its gradient is finite (zero on illegal entries and on
        such empty rows), unless a *legal* logit is NaN or ``+inf``: then that row is NaN on its
        legal entries (a broken network output is shown, not hidden; the trainer skips a step
        whose loss is not finite). ``masked_softmax_np`` follows the same rules.

    Raises ValueError when the shapes differ.
    """
    if logits.shape != mask.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and mask {tuple(mask.shape)} differ")
    mask = mask.bool()
    x = logits.float()
    # A row with nothing to take is computed on a finite stand-in (zeros: no NaN, zero gradient)
    # and then masked out.
    empty = ~(mask & ~torch.isneginf(x)).any(dim=-1, keepdim=True)
    x = torch.where(empty, torch.zeros_like(x), x).masked_fill(~mask & ~empty, float("-inf"))
    return torch.log_softmax(x, dim=-1).masked_fill(~mask | empty, float("-inf"))


def masked_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """(B, A) float32 probabilities: softmax over legal entries, 0 elsewhere; a row with no legal
    entry (or ``-inf`` on every legal one) is all zeros. Never NaN unless a legal logit is NaN or
    ``+inf`` (see :func:`masked_log_softmax`)."""
    return masked_log_softmax(logits, mask).exp()


def wdl_to_value(wdl_probs: Tensor) -> Tensor:
    """(..., 3) win/draw/loss probabilities -> (...) value W - L in [-1, 1]."""
    return wdl_probs[..., 0] - wdl_probs[..., 2]


def policy_loss(logits: Tensor, mask: Tensor, target_probs: Tensor) -> Tensor:
    """Cross-entropy over legal moves: ``mean_b( -sum_{a legal} target[b, a] * log p[b, a] )`` with
    ``p = masked_softmax(logits, mask)``.

    Shapes: logits (B, A), mask (B, A) bool, target_probs (B, A) (rows normally sum to 1 over legal
    moves; target mass on illegal moves is ignored, not renormalised). Returns a scalar tensor
    (nats). Rows without legal moves contribute 0, and so do entries the target gives no mass
    (a legal move the network rules out with a ``-inf`` logit costs nothing unless the target
    wants it: then the loss is ``+inf``, which the trainer skips).
    """
    target = target_probs.float()
    logp = masked_log_softmax(logits, mask).masked_fill(~mask.bool() | (target == 0), 0.0)
    return -(target * logp).sum(dim=-1).mean()


def outcome_to_wdl(outcome: Tensor) -> Tensor:
    """(B,) value targets z in [-1, 1] from the mover's view -> (B, 3) float32 (win, draw, loss).

    Outcomes +1 / 0 / -1 give one-hot rows; a fractional z (e.g. a search value blended in) gives
    the distribution with W - L = z and no mass on the opposite result: win = max(z, 0),
    loss = max(-z, 0), draw = 1 - |z|. Values outside [-1, 1] are clamped.
    """
    z = outcome.float().clamp(-1.0, 1.0)
    win = z.clamp(min=0.0)
    loss = (-z).clamp(min=0.0)
    return torch.stack([win, 1.0 - win - loss, loss], dim=-1)


def value_loss(wdl_logits: Tensor, target: Tensor) -> Tensor:
    """WDL cross-entropy ``mean_b( -sum_k target[b, k] * log_softmax(wdl_logits)[b, k] )``.

    ``target`` is either (B, 3) win/draw/loss probabilities of the mover or (B,) outcomes /
    values in [-1, 1] (+1 win, 0 draw, -1 loss; converted by ``outcome_to_wdl``).
    Returns a scalar tensor (nats).
    Raises ValueError on other shapes.
    """
    if target.dim() == 1:
        target = outcome_to_wdl(target)
    if target.shape != wdl_logits.shape:
        raise ValueError(f"target {tuple(target.shape)} does not fit {tuple(wdl_logits.shape)}")
    return -(target.float() * torch.log_softmax(wdl_logits.float(), dim=-1)).sum(dim=-1).mean()


def aux_loss(aux: Tensor, flat_diff: Tensor, size: int) -> Tensor:
    """Mean squared error of the auxiliary head: ``mean_b( (aux[b] - flat_diff[b] / N)**2 )``.

    ``aux`` (B, 1) or (B,); ``flat_diff`` (B,) final flat count of the mover minus the opponent's
    (flats, no komi). Returns a scalar tensor in (flats / N)**2.
    """
    return F.mse_loss(aux.float().reshape(-1), flat_diff.float().reshape(-1) / size)


def masked_mean(per_row: Tensor, valid: Tensor | None) -> Tensor:
    """Mean of (B,) ``per_row`` over the rows where ``valid`` (B,) is True (all rows when None);
    0 (with a gradient of 0) when no row is valid."""
    if valid is None:
        return per_row.mean()
    v = valid.to(per_row.dtype)
    return (per_row * v).sum() / v.sum().clamp(min=1.0)
