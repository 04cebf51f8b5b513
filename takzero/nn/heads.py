"""The head table: the optional auxiliary heads of the network, one row each.

A row of :data:`HEADS` (:class:`Head`) holds everything the network and its loss need of one head:
which hidden planes it reads, the module it builds, its loss, the config key of its loss weight and
the batch target it trains on. ``ModelConfig.heads`` names the rows a network has (``TakNet``
builds them into ``self.heads``, a ``ModuleDict`` in table order); ``TakNet.forward`` never
computes them (inference, search and exports see policy, WDL and aux only), ``forward_all`` adds
each one's output under its name, and ``model.total_loss`` adds ``weight * row.loss(...)`` for each
row whose weight (``LossWeights.heads[name]``) is > 0.

A new head is: one row here (with its module and loss), its weight field in
``config.ModelSection`` named by ``weight_key`` and its line under ``model:`` in
``configs/train.yaml`` (``ModelSection.check``, ``TrainConfig.model_config`` and ``loss_weights``
loop over the table), and, unless its loss needs only the legal mask and the policy target, its
target producer in ``takzero.pipeline.targets`` (and the replay field that stores the target's raw
data, if new).

Rows (KataGo, Wu 2019, "Accelerating Self-Play Learning in Go", arXiv:1902.10565, and its methods
notes; all off by default):

* ``ownership``: reads the value head's hidden planes; a conv1x1 to one plane, output
  ``ownership`` (B, N, N) = tanh of ``ownership_logit`` (B, N, N), the final owner of each square's
  top piece (+1 the player to move at this position, -1 the opponent, 0 empty;
  ``game.ownership``). Loss :func:`ownership_loss` against the ``ownership`` target. Weight
  ``model.ownership_weight`` (KataGo 1.5).
* ``opponent_policy``: reads the policy head's hidden planes; a conv1x1 to the action channels,
  (B, A) logits of the next recorded position's policy target (the opponent's reply). Loss
  :func:`opponent_policy_loss` against the ``opponent_policy`` target. Weight
  ``model.opponent_policy_weight`` (KataGo 0.15).
* ``soft_policy``: reads the policy head's hidden planes; a conv1x1 to the action channels, (B, A)
  logits trained by ``policy_loss`` against ``soft_policy_target(policy target)`` (KataGo methods
  notes, "Auxiliary Soft Policy Target"). No batch target of its own. Weight
  ``model.soft_policy_weight``.

Targets: ``HeadContext.targets`` maps a target name to its (B, ...) tensor and
``valid_key(name)`` to its (B,) bool mask of the rows that have one (absent: every row has one).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from takzero.nn.actions import action_channels
from takzero.nn.losses import masked_mean, policy_loss
from takzero.nn.quoting import short_repr

if TYPE_CHECKING:  # the config is built in model.py, which imports this module
    from takzero.nn.model import ModelConfig

__all__ = [
    "HEADS",
    "HIDDEN_PLANES",
    "ActionHead",
    "Head",
    "HeadContext",
    "OwnershipHead",
    "build_heads",
    "head_names",
    "opponent_policy_loss",
    "ownership_loss",
    "soft_policy_target",
    "valid_key",
]

#: What a head may read (``Head.reads``): the policy head's hidden planes (B, policy_channels, N,
#: N) or the value head's (B, value_channels, N, N), both after their conv1x1-BN-ReLU.
HIDDEN_PLANES = ("policy", "value")


def valid_key(target: str) -> str:
    """The key of ``target``'s (B,) bool row mask in a targets dict: ``'<target>_valid'``."""
    return f"{target}_valid"


@dataclass(frozen=True)
class HeadContext:
    """What a head's loss may read besides the network's outputs.

    Attributes:
        mask: (B, A) bool legal moves of each position.
        policy: (B, A) float32 policy target (the search's visit distribution).
        targets: the batch's targets (``takzero.pipeline.targets``): name -> (B, ...) tensor, and
            ``valid_key(name)`` -> (B,) bool (False: the row has no target, e.g. a resigned game's
            ownership).
    """

    mask: Tensor
    policy: Tensor
    targets: Mapping[str, Tensor]

    def target(self, name: str) -> tuple[Tensor, Tensor | None]:
        """(target tensor, its (B,) bool valid mask or None: every row valid). Raises KeyError
        naming ``name`` when the batch has no such target."""
        if name not in self.targets:
            raise KeyError(f"the batch has no {name} target")
        return self.targets[name], self.targets.get(valid_key(name))


@dataclass(frozen=True)
class Head:
    """One row of :data:`HEADS`.

    Attributes:
        name: the value in ``ModelConfig.heads``, the key of the module in ``TakNet.heads``, of its
            output in ``forward_all`` and of its term in ``total_loss``'s parts (logged as
            ``loss/<name>``).
        reads: which hidden planes the module reads, one of :data:`HIDDEN_PLANES`.
        build: ``build(cfg) -> nn.Module`` taking those planes (B, C, N, N) float32 and returning
            a tensor (stored under ``name``) or a dict of tensors holding ``name`` (merged into
            the outputs; ownership adds ``ownership_logit``). The module may have
            ``init_weights()``, called after ``TakNet`` has initialised every conv (Kaiming) and
            the policy output, in table order.
        loss: ``loss(outputs, ctx) -> scalar Tensor`` with ``outputs`` the dict of ``forward_all``
            and ``ctx`` a :class:`HeadContext`.
        weight_key: the field of ``config.ModelSection`` holding the loss weight (config key
            ``model.<weight_key>``; 0 = head absent).
        target: the batch target the loss needs (a name of ``pipeline.targets.TARGETS``), or None
            when it needs only the legal mask and the policy target.
        description: one line for docs and help texts.
    """

    name: str
    reads: str
    build: Callable[[ModelConfig], nn.Module]
    loss: Callable[[Mapping[str, Tensor], HeadContext], Tensor]
    weight_key: str
    target: str | None
    description: str


class OwnershipHead(nn.Module):
    """conv1x1 to one plane: (B, C, N, N) -> ``{'ownership_logit': z, 'ownership': tanh(z)}``,
    each (B, N, N)."""

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, 1, 1)

    def forward(self, x: Tensor) -> dict[str, Tensor]:
        z = self.conv(x)[:, 0]
        return {"ownership_logit": z, "ownership": torch.tanh(z)}


class ActionHead(nn.Module):
    """conv1x1 to the action channels, flattened: (B, C, N, N) -> (B, A) logits, indexed like the
    policy (``channel * N * N + square``); initialised as the policy output (normal with std
    1/sqrt(C), bias 0)."""

    def __init__(self, in_channels: int, size: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, action_channels(size), 1)

    def init_weights(self) -> None:
        """Weights N(0, 1/C), bias 0 (as ``TakNet.policy_out``)."""
        nn.init.normal_(self.conv.weight, std=1.0 / math.sqrt(self.conv.in_channels))
        assert self.conv.bias is not None  # built with a bias
        nn.init.zeros_(self.conv.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(x).flatten(1)


def ownership_loss(logit: Tensor, target: Tensor, valid: Tensor | None = None) -> Tensor:
    """Ownership cross-entropy (KataGo, Wu 2019, arXiv:1902.10565, section 4.1):
    ``mean_b( -(1 / N^2) * sum_sq [ t log o + (1 - t) log(1 - o) ] )`` with ``t = (1 + target) / 2``
    and ``o = (1 + tanh(logit)) / 2 = sigmoid(2 * logit)``, over the rows with ``valid``.

    The paper's ownership term is ``-w_o * sum_sq sum_p t log o`` with ``w_o = 1.5 / b^2`` on a
    b x b board; here the ``1 / N^2`` is inside the loss, so ``model.ownership_weight`` = 1.5 is
    KataGo's scaling.

    Shapes: ``logit`` (B, N, N) or (B, N*N) pre-tanh outputs; ``target`` the same number of
    entries per row, values in {-1, 0, +1} (mover's / empty / opponent's, ``game.ownership``);
    ``valid`` (B,) bool or None (all). Returns a scalar tensor (nats per square); 0 when no row
    is valid.
    """
    b = logit.shape[0]
    z = 2.0 * logit.float().reshape(b, -1)
    t = (1.0 + target.float().reshape(b, -1)) / 2.0
    if z.shape != t.shape:
        raise ValueError(f"ownership logits {tuple(z.shape)} and targets {tuple(t.shape)} differ")
    per_sq = F.binary_cross_entropy_with_logits(z, t, reduction="none")
    return masked_mean(per_sq.mean(dim=1), valid)


def opponent_policy_loss(logits: Tensor, target_probs: Tensor, valid: Tensor | None = None) -> Tensor:
    """Cross-entropy of the opponent-policy head (KataGo, Wu 2019, section 3.3):
    ``mean_b( -sum_a target[b, a] * log_softmax(logits)[b, a] )`` over the rows with ``valid``.

    The target is the policy target of the next position (the opponent's reply), whose legal moves
    are not those of this position, so the softmax runs over every action index (no legal mask, as
    KataGo's policy heads); the target is 0 outside the next position's legal moves, so the head
    learns to put little mass there. Shapes: logits (B, A), target_probs (B, A), valid (B,) bool or
    None. Returns a scalar tensor (nats); 0 when no row is valid.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    per_row = -(target_probs.float() * logp).sum(dim=-1)
    return masked_mean(per_row, valid)


def soft_policy_target(target_probs: Tensor, power: float = 0.25) -> Tensor:
    """KataGo's soft policy target: ``target ** power`` renormalised per row (power 1/4, KataGo
    methods notes, "Auxiliary Soft Policy Target"). (B, A) -> (B, A) float32; entries that are 0
    stay 0, an all-zero row stays all zero."""
    t = target_probs.float().clamp(min=0.0).pow(power)
    return t / t.sum(dim=-1, keepdim=True).clamp(min=1e-30)


def _ownership_loss(outputs: Mapping[str, Tensor], ctx: HeadContext) -> Tensor:
    target, valid = ctx.target("ownership")
    return ownership_loss(outputs["ownership_logit"], target, valid)


def _opponent_policy_loss(outputs: Mapping[str, Tensor], ctx: HeadContext) -> Tensor:
    target, valid = ctx.target("opponent_policy")
    return opponent_policy_loss(outputs["opponent_policy"], target, valid)


def _soft_policy_loss(outputs: Mapping[str, Tensor], ctx: HeadContext) -> Tensor:
    return policy_loss(outputs["soft_policy"], ctx.mask, soft_policy_target(ctx.policy))


#: The heads, in the order ``TakNet`` builds and initialises them (which fixes a seeded network's
#: weights) and ``total_loss`` adds their terms.
HEADS: dict[str, Head] = {
    row.name: row
    for row in (
        Head("ownership", "value", lambda cfg: OwnershipHead(cfg.value_channels),
             _ownership_loss, "ownership_weight", "ownership",
             "final owner of each square's top piece, tanh per square (KataGo)"),
        Head("opponent_policy", "policy", lambda cfg: ActionHead(cfg.policy_channels, cfg.size),
             _opponent_policy_loss, "opponent_policy_weight", "opponent_policy",
             "the next position's policy target, the opponent's reply (KataGo)"),
        Head("soft_policy", "policy", lambda cfg: ActionHead(cfg.policy_channels, cfg.size),
             _soft_policy_loss, "soft_policy_weight", None,
             "the policy target ** (1/4), renormalised (KataGo methods notes)"),
    )
}


def head_names(names: Iterable[str]) -> list[str]:
    """``names`` checked against :data:`HEADS`, without repeats, in table order. Raises
    ValueError naming an unknown head and the rows."""
    wanted = list(names)
    unknown = [n for n in wanted if n not in HEADS]
    if unknown:
        raise ValueError(f"heads: unknown head {short_repr(unknown[0])}; the heads are {list(HEADS)}")
    return [n for n in HEADS if n in wanted]


def build_heads(cfg: ModelConfig) -> nn.ModuleDict:
    """The modules of ``cfg.heads``, built in table order (:func:`head_names`). Raises ValueError
    for an unknown name or a row whose ``reads`` is not one of :data:`HIDDEN_PLANES`."""
    modules = {}
    for name in head_names(cfg.heads):
        row = HEADS[name]
        if row.reads not in HIDDEN_PLANES:
            raise ValueError(f"head {name!r} reads {row.reads!r}; a head reads one of {HIDDEN_PLANES}")
        modules[name] = row.build(cfg)
    return nn.ModuleDict(modules)
