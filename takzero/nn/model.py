"""Policy/value network (residual tower, optional KataGo-style global pooling) and its losses.

``TakNet.forward(planes)`` takes (B, C, N, N) float32 planes from ``takzero.nn.features.encode``
(of the net's ``config.feature_version``) and returns three tensors:

* ``policy_logits`` (B, A), A = ``actions.num_actions(N)``, indexed like the action space
  (``channel * N * N + square``); raw logits, mask them with ``masked_log_softmax``;
* ``wdl_logits`` (B, 3): win, draw, loss of the player to move (in that order);
* ``aux`` (B, 1): predicted final flat-count difference (mover minus opponent, no komi) divided by
  N (the unit ``aux_loss`` trains it in).

The scalar value is ``W - L`` of ``softmax(wdl_logits)`` (``wdl_to_value``), in [-1, 1] from the
mover's view, matching game outcomes win +1, draw 0, loss -1.

Architecture: stem conv3x3 -> BN -> ReLU, then ``blocks`` residual blocks
(conv3x3-BN-ReLU-conv3x3-BN, skip, ReLU). With ``global_pool`` every ``gpool_every``-th block
(blocks gpool_every-1, 2*gpool_every-1, ...) is a global-pooling block as in KataGo: its first conv
also produces ``gpool_channels`` extra channels whose mean and max over the board go through a
linear layer and are added as a per-channel bias before the second conv; the policy head gets a
pooled bias the same way. Policy head: conv1x1 -> BN -> ReLU [-> pooled bias] -> conv1x1 to the
action channels, flattened. Value head: conv1x1 -> BN -> ReLU -> mean and max over the board -> FC
-> ReLU -> FC to WDL logits and FC to the auxiliary output. Pooling over the whole N x N board is
fine for single-size nets; a net serving several sizes on padded boards would need pooling masked by
the board plane.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from takzero.nn.actions import action_channels, num_actions
from takzero.nn.features import (
    FEATURE_VERSION,
    FEATURE_VERSIONS,
    default_layers,
    layers_from_channels,
    num_channels,
)

__all__ = [
    "LossWeights",
    "ModelConfig",
    "TakNet",
    "aux_loss",
    "checkpoint_dict",
    "masked_log_softmax",
    "masked_softmax",
    "model_from_checkpoint",
    "outcome_to_wdl",
    "model_from_config",
    "policy_loss",
    "total_loss",
    "value_loss",
    "wdl_to_value",
]


@dataclass
class ModelConfig:
    """Everything needed to rebuild a ``TakNet`` (stored in checkpoints and exported files).

    Attributes:
        size: board size N (3..8).
        channels: width of the residual tower.
        blocks: number of residual blocks.
        layers: stack layers L of the input features (None -> ``default_layers(size)`` = N + 2).
        global_pool: use KataGo-style global-pooling bias blocks (and a pooled policy bias).
        gpool_channels: pooled channels per pooling block (None -> channels // 4, at least 8).
        gpool_every: every gpool_every-th block is a pooling block.
        policy_channels: hidden channels of the policy head.
        value_channels: hidden channels of the value head before pooling.
        value_hidden: width of the value head's fully connected layer.
        feature_version: the input feature version the net was built for (one of
            ``features.FEATURE_VERSIONS``; new nets: ``features.FEATURE_VERSION``). It fixes the
            input planes (``features.encode(..., version=feature_version)``) and their number.
    """

    size: int = 6
    channels: int = 64
    blocks: int = 6
    layers: int | None = None
    global_pool: bool = True
    gpool_channels: int | None = None
    gpool_every: int = 3
    policy_channels: int = 32
    value_channels: int = 32
    value_hidden: int = 128
    feature_version: int = FEATURE_VERSION

    def __post_init__(self) -> None:
        if not 3 <= self.size <= 8:
            raise ValueError(f"size must be 3..8, got {self.size}")
        if self.layers is None:
            self.layers = default_layers(self.size)
        if self.gpool_channels is None:
            self.gpool_channels = max(8, self.channels // 4)
        if self.channels < 1 or self.blocks < 0 or self.layers < 1 or self.gpool_every < 1:
            raise ValueError(f"invalid model config {self}")
        if self.feature_version not in FEATURE_VERSIONS:
            raise ValueError(
                f"model built for feature version {self.feature_version}, this code encodes "
                f"versions {FEATURE_VERSIONS}"
            )

    @property
    def in_channels(self) -> int:
        """Input planes C = features.num_channels(layers, feature_version)."""
        return num_channels(self.layers, self.feature_version)

    @property
    def num_actions(self) -> int:
        """Policy size A = actions.num_actions(size)."""
        return num_actions(self.size)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-serialisable) of the fields."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        """Inverse of ``to_dict``; unknown keys raise ValueError."""
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown model config keys {sorted(unknown)}")
        return cls(**d)


def _pool(x: Tensor) -> Tensor:
    """(B, C, N, N) -> (B, 2C): mean and max over the board."""
    # adaptive pools export to ONNX GlobalAveragePool/GlobalMaxPool (no opset-dependent axes)
    return torch.cat(
        [F.adaptive_avg_pool2d(x, 1).flatten(1), F.adaptive_max_pool2d(x, 1).flatten(1)], dim=1
    )


class ResBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN + skip, ReLU."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(x + y)


class GlobalPoolBlock(nn.Module):
    """Residual block whose first conv also yields ``gpool`` channels pooled (mean, max) over the
    board into a per-channel bias of the other channels (KataGo's global pooling bias)."""

    def __init__(self, channels: int, gpool: int) -> None:
        super().__init__()
        self.channels = channels
        self.conv1 = nn.Conv2d(channels, channels + gpool, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels + gpool)
        self.pool_fc = nn.Linear(2 * gpool, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        a = y[:, : self.channels]
        g = y[:, self.channels :]
        a = a + self.pool_fc(_pool(g))[:, :, None, None]
        y = self.bn2(self.conv2(a))
        return F.relu(x + y)


class TakNet(nn.Module):
    """Residual policy/value network for one board size (see the module docstring).

    Args:
        size: board size N.
        channels: tower width.
        blocks: residual blocks.
        in_channels: input planes C (must be ``features.num_channels(L, feature_version)`` for
            some L >= 1).
        global_pool: KataGo-style pooling bias blocks on/off.
        gpool_channels, gpool_every, policy_channels, value_channels, value_hidden: see
            ``ModelConfig``.
        feature_version: input feature version (``features.FEATURE_VERSIONS``).

    The built configuration is ``self.config`` (a ``ModelConfig``).
    """

    def __init__(
        self,
        size: int,
        channels: int,
        blocks: int,
        in_channels: int,
        global_pool: bool = True,
        gpool_channels: int | None = None,
        gpool_every: int = 3,
        policy_channels: int = 32,
        value_channels: int = 32,
        value_hidden: int = 128,
        feature_version: int = FEATURE_VERSION,
    ) -> None:
        super().__init__()
        cfg = ModelConfig(
            size=size,
            channels=channels,
            blocks=blocks,
            layers=layers_from_channels(in_channels, feature_version),
            global_pool=global_pool,
            gpool_channels=gpool_channels,
            gpool_every=gpool_every,
            policy_channels=policy_channels,
            value_channels=value_channels,
            value_hidden=value_hidden,
            feature_version=feature_version,
        )
        self.config = cfg
        self.size = size
        self.num_actions = cfg.num_actions
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
        )
        tower: list[nn.Module] = []
        for i in range(blocks):
            if global_pool and i % gpool_every == gpool_every - 1:
                tower.append(GlobalPoolBlock(channels, cfg.gpool_channels))
            else:
                tower.append(ResBlock(channels))
        self.tower = nn.Sequential(*tower)
        self.policy_conv = nn.Conv2d(channels, policy_channels, 1, bias=False)
        self.policy_bn = nn.BatchNorm2d(policy_channels)
        self.policy_pool_fc = (
            nn.Linear(2 * policy_channels, policy_channels) if global_pool else None
        )
        self.policy_out = nn.Conv2d(policy_channels, action_channels(size), 1)
        self.value_conv = nn.Conv2d(channels, value_channels, 1, bias=False)
        self.value_bn = nn.BatchNorm2d(value_channels)
        self.value_fc = nn.Linear(2 * value_channels, value_hidden)
        self.wdl_out = nn.Linear(value_hidden, 3)
        self.aux_out = nn.Linear(value_hidden, 1)
        self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        # residual branches start near identity
        for block in self.tower:
            nn.init.zeros_(block.bn2.weight)
        nn.init.normal_(self.policy_out.weight, std=1.0 / math.sqrt(self.policy_out.in_channels))
        nn.init.zeros_(self.policy_out.bias)

    def forward(self, planes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, C, N, N) float -> (policy_logits (B, A), wdl_logits (B, 3), aux (B, 1))."""
        x = self.tower(self.stem(planes))
        p = F.relu(self.policy_bn(self.policy_conv(x)))
        if self.policy_pool_fc is not None:
            p = p + self.policy_pool_fc(_pool(p))[:, :, None, None]
        policy = self.policy_out(p).flatten(1)
        v = F.relu(self.value_bn(self.value_conv(x)))
        h = F.relu(self.value_fc(_pool(v)))
        return policy, self.wdl_out(h), self.aux_out(h)


def model_from_config(config: ModelConfig | dict[str, Any]) -> TakNet:
    """Build a freshly initialised ``TakNet`` from a ``ModelConfig`` (or its dict)."""
    if isinstance(config, dict):
        config = ModelConfig.from_dict(config)
    return TakNet(
        size=config.size,
        channels=config.channels,
        blocks=config.blocks,
        in_channels=config.in_channels,
        global_pool=config.global_pool,
        gpool_channels=config.gpool_channels,
        gpool_every=config.gpool_every,
        policy_channels=config.policy_channels,
        value_channels=config.value_channels,
        value_hidden=config.value_hidden,
        feature_version=config.feature_version,
    )


def checkpoint_dict(model: TakNet, **extra: Any) -> dict[str, Any]:
    """``{'model_config': dict, 'model_state': state_dict, **extra}``: the checkpoint format that
    ``model_from_checkpoint`` and ``inference.Evaluator`` read (save it with ``torch.save``)."""
    return {"model_config": model.config.to_dict(), "model_state": model.state_dict(), **extra}


def model_from_checkpoint(checkpoint: dict[str, Any] | str, map_location: str = "cpu") -> TakNet:
    """Rebuild a model from a checkpoint dict (or a path to one saved by ``torch.save``).

    Raises KeyError if 'model_config' or 'model_state' is missing, ValueError on a feature-version
    mismatch, RuntimeError if the weights do not fit the config.
    """
    if not isinstance(checkpoint, dict):
        checkpoint = torch.load(checkpoint, map_location=map_location, weights_only=False)
    cfg = checkpoint["model_config"]
    model = model_from_config(cfg)
    model.load_state_dict(checkpoint["model_state"])
    return model


# ---------------------------------------------------------------------------------------------
# Masked softmax and losses
# ---------------------------------------------------------------------------------------------


def masked_log_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """Log-softmax over the legal entries of each row, computed in float32.

    Args:
        logits: (B, A) float (any float dtype).
        mask: (B, A) bool, True = legal.

    Returns:
        (B, A) float32: log-probabilities on legal entries, ``-inf`` on illegal ones. A row with no
        legal entry is ``-inf`` everywhere, i.e. its probabilities are all ZERO (not uniform). Never
        NaN, and its gradient is finite (zero on illegal entries and on all-masked rows).
    """
    if logits.shape != mask.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and mask {tuple(mask.shape)} differ")
    mask = mask.bool()
    # all-masked rows are computed as if unmasked (finite, no NaN) and then masked out
    any_legal = mask.any(dim=-1, keepdim=True)
    effective = mask | ~any_legal
    x = logits.float().masked_fill(~effective, float("-inf"))
    return torch.log_softmax(x, dim=-1).masked_fill(~mask, float("-inf"))


def masked_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """(B, A) float32 probabilities: softmax over legal entries, 0 elsewhere; an all-masked row is
    all zeros. Never NaN."""
    return masked_log_softmax(logits, mask).exp()


def wdl_to_value(wdl_probs: Tensor) -> Tensor:
    """(..., 3) win/draw/loss probabilities -> (...) value W - L in [-1, 1]."""
    return wdl_probs[..., 0] - wdl_probs[..., 2]


def policy_loss(logits: Tensor, mask: Tensor, target_probs: Tensor) -> Tensor:
    """Cross-entropy over legal moves: ``mean_b( -sum_{a legal} target[b, a] * log p[b, a] )`` with
    ``p = masked_softmax(logits, mask)``.

    Shapes: logits (B, A), mask (B, A) bool, target_probs (B, A) (rows normally sum to 1 over legal
    moves; target mass on illegal moves is ignored, not renormalised). Returns a scalar tensor
    (nats). Rows without legal moves contribute 0.
    """
    logp = masked_log_softmax(logits, mask).masked_fill(~mask.bool(), 0.0)
    return -(target_probs.float() * logp).sum(dim=-1).mean()


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


@dataclass
class LossWeights:
    """Weights of ``total_loss``: policy, value (WDL) and auxiliary flat-difference terms."""

    policy: float = 1.0
    value: float = 1.0
    aux: float = 0.1


def total_loss(
    outputs: tuple[Tensor, Tensor, Tensor],
    mask: Tensor,
    target_policy: Tensor,
    target_value: Tensor,
    target_flat_diff: Tensor | None = None,
    size: int | None = None,
    weights: LossWeights | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """``w_p * policy_loss + w_v * value_loss + w_a * aux_loss`` for one batch.

    Args:
        outputs: ``model(planes)``: (policy_logits, wdl_logits, aux).
        mask: (B, A) bool legal mask; target_policy (B, A); target_value (B, 3) or (B,) outcomes.
        target_flat_diff: (B,) final flat difference from the mover's view, or None to skip the
            auxiliary term.
        size: board size N (needed with target_flat_diff).
        weights: ``LossWeights`` (None: the defaults).

    Returns:
        (scalar loss tensor, {'policy', 'value', 'aux', 'total'}: detached scalar tensors for
        logging; call ``.item()`` only when logging, to avoid a device sync per step).
    """
    if weights is None:
        weights = LossWeights()
    logits, wdl, aux = outputs
    lp = policy_loss(logits, mask, target_policy)
    lv = value_loss(wdl, target_value)
    total = weights.policy * lp + weights.value * lv
    parts = {"policy": lp.detach(), "value": lv.detach(), "aux": torch.zeros((), device=lp.device)}
    if target_flat_diff is not None and weights.aux:
        if size is None:
            raise ValueError("size is needed for the auxiliary loss")
        la = aux_loss(aux, target_flat_diff, size)
        total = total + weights.aux * la
        parts["aux"] = la.detach()
    parts["total"] = total.detach()
    return total, parts
