"""Policy/value network (a trunk from the registry, the policy/value heads) and its losses.

``TakNet.forward(planes)`` takes (B, C, N, N) float32 planes from ``takzero.nn.features.encode``
(of the net's ``config.feature_version``) and returns three tensors:

* ``policy_logits`` (B, A), A = ``actions.num_actions(N)``, indexed like the action space
  (``channel * N * N + square``); raw logits, mask them with ``masked_log_softmax``;
* ``wdl_logits`` (B, 3): win, draw, loss of the player to move (in that order);
* ``aux`` (B, 1): predicted final flat-count difference (mover minus opponent, no komi) divided by
  N (the unit ``aux_loss`` trains it in).

Optional auxiliary heads (KataGo, Wu 2019, "Accelerating Self-Play Learning in Go",
arXiv:1902.10565; each built only when its ``ModelConfig`` flag is on, so a checkpoint without
them, such as the shipped 5x5 model, loads unchanged). ``forward`` never computes them (inference,
search and exports see the three outputs above); ``forward_all`` returns them for training:

* ``ownership`` (B, N, N) in [-1, 1] (tanh): the final owner of each square's top piece at the end
  of the game, +1 the player to move at this position, -1 the opponent, 0 empty
  (``game.ownership``); a conv1x1 on the value head's hidden planes. Trained by ``ownership_loss``.
* ``opponent_policy`` (B, A) logits: the policy target of the opponent's reply, i.e. of the next
  recorded position (KataGo's auxiliary opponent-policy target); a conv1x1 on the policy head's
  hidden planes. Trained by ``opponent_policy_loss``.
* ``soft_policy`` (B, A) logits: the policy target raised to the power 1/4 and renormalised
  (KataGo methods notes, "Auxiliary Soft Policy Target"); a conv1x1 on the policy head's hidden
  planes. Trained by ``policy_loss`` against ``soft_policy_target(target)``.

The scalar value is ``W - L`` of ``softmax(wdl_logits)`` (``wdl_to_value``), in [-1, 1] from the
mover's view, matching game outcomes win +1, draw 0, loss -1.

Architecture: a trunk, ``ModelConfig.trunk``, one row of :data:`takzero.nn.trunks.TRUNKS`
(``resnet``: a residual tower with optional KataGo global pooling; ``transformer``: attention over
the squares), maps the planes to (B, channels, N, N) hidden planes; the heads read those. Policy
head: conv1x1 -> BN -> ReLU [-> pooled bias, with ``global_pool``: mean and max over the board
through a linear layer, added per channel] -> conv1x1 to the action channels, flattened. Value
head: conv1x1 -> BN -> ReLU -> mean and max over the board -> FC -> ReLU -> FC to WDL logits and
FC to the auxiliary output. Pooling over the whole N x N board is fine for single-size nets; a net
serving several sizes on padded boards would need pooling masked by the board plane.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
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
    num_channels,
)
from takzero.nn.safe_load import load_weights_only
from takzero.nn.trunks import TRUNKS, build_trunk, pool_mean_max

__all__ = [
    "LossWeights",
    "ModelConfig",
    "TakNet",
    "AuxTargets",
    "aux_loss",
    "checkpoint_dict",
    "masked_log_softmax",
    "masked_softmax",
    "model_from_checkpoint",
    "outcome_to_wdl",
    "opponent_policy_loss",
    "ownership_loss",
    "policy_loss",
    "soft_policy_target",
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
        ownership_head: build the ownership head (see the module docstring).
        opponent_policy_head: build the opponent-policy head.
        soft_policy_head: build the soft-policy head.
        The three head flags default to off: a stored config without them (every checkpoint from
        before they existed) rebuilds the same network.
        trunk: the body between the input planes and the heads, a name of
            :data:`takzero.nn.trunks.TRUNKS` (``resnet``, the default and every checkpoint from
            before the registry; ``transformer``). ``channels`` and ``blocks`` size either trunk;
            ``global_pool``, ``gpool_channels`` and ``gpool_every`` shape the ResNet's blocks (the
            policy head's pooled bias is on with ``global_pool`` for both).
        attention_heads: heads of the transformer trunk's attention (``channels`` must be
            divisible by it); unused by the ResNet.

    Raises ValueError (naming the field) for a size outside 3..8, an unknown trunk or feature
    version, or a value a trunk refuses.
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
    ownership_head: bool = False
    opponent_policy_head: bool = False
    soft_policy_head: bool = False
    trunk: str = "resnet"
    attention_heads: int = 4

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
        row = TRUNKS.get(self.trunk)
        if row is None:
            raise ValueError(f"trunk: unknown trunk {self.trunk!r}; the trunks are {sorted(TRUNKS)}")
        why = row.check(self)
        if why:
            raise ValueError(f"trunk {self.trunk!r}: {why}")

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


_OLD_TRUNK_PREFIXES = ("stem.", "tower.")


class TakNet(nn.Module):
    """Policy/value network for one board size: a trunk from :data:`takzero.nn.trunks.TRUNKS`
    (``cfg.trunk``) and the heads of the module docstring.

    Args:
        cfg: the :class:`ModelConfig` (kept as ``self.config``; checkpoints store its dict).

    Raises ValueError when the trunk refuses the config (``trunks.build_trunk``).
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.size = cfg.size
        self.num_actions = cfg.num_actions
        channels, size = cfg.channels, cfg.size
        policy_channels, value_channels = cfg.policy_channels, cfg.value_channels
        self.trunk = build_trunk(cfg)
        self.policy_conv = nn.Conv2d(channels, policy_channels, 1, bias=False)
        self.policy_bn = nn.BatchNorm2d(policy_channels)
        self.policy_pool_fc = (
            nn.Linear(2 * policy_channels, policy_channels) if cfg.global_pool else None
        )
        self.policy_out = nn.Conv2d(policy_channels, action_channels(size), 1)
        self.value_conv = nn.Conv2d(channels, value_channels, 1, bias=False)
        self.value_bn = nn.BatchNorm2d(value_channels)
        self.value_fc = nn.Linear(2 * value_channels, cfg.value_hidden)
        self.wdl_out = nn.Linear(cfg.value_hidden, 3)
        self.aux_out = nn.Linear(cfg.value_hidden, 1)
        # optional auxiliary heads (absent unless configured: old checkpoints load unchanged)
        self.ownership_out = nn.Conv2d(value_channels, 1, 1) if cfg.ownership_head else None
        self.opponent_policy_out = (
            nn.Conv2d(policy_channels, action_channels(size), 1) if cfg.opponent_policy_head else None
        )
        self.soft_policy_out = (
            nn.Conv2d(policy_channels, action_channels(size), 1) if cfg.soft_policy_head else None
        )
        self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        init_trunk = getattr(self.trunk, "init_weights", None)
        if init_trunk is not None:
            init_trunk()
        nn.init.normal_(self.policy_out.weight, std=1.0 / math.sqrt(self.policy_out.in_channels))
        nn.init.zeros_(self.policy_out.bias)
        for head in (self.opponent_policy_out, self.soft_policy_out):
            if head is not None:
                nn.init.normal_(head.weight, std=1.0 / math.sqrt(head.in_channels))
                nn.init.zeros_(head.bias)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False):  # type: ignore[override]
        """``nn.Module.load_state_dict``, first renaming the keys of a checkpoint from before the
        trunk registry (top-level ``stem.*``/``tower.*`` -> ``trunk.stem.*``/``trunk.tower.*``),
        so every ResNet checkpoint ever written loads unchanged."""
        if not any(k.startswith("trunk.") for k in state_dict):
            state_dict = {
                (f"trunk.{k}" if k.startswith(_OLD_TRUNK_PREFIXES) else k): v
                for k, v in state_dict.items()
            }
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    @property
    def has_extra_heads(self) -> bool:
        """True when any optional auxiliary head exists (then ``forward_all`` has more keys)."""
        return any(
            h is not None
            for h in (self.ownership_out, self.opponent_policy_out, self.soft_policy_out)
        )

    def _heads(self, planes: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """Trunk and heads' hidden planes: (policy_logits, wdl_logits, aux, policy hidden p
        (B, policy_channels, N, N), value hidden v (B, value_channels, N, N))."""
        x = self.trunk(planes)
        p = F.relu(self.policy_bn(self.policy_conv(x)))
        if self.policy_pool_fc is not None:
            p = p + self.policy_pool_fc(pool_mean_max(p))[:, :, None, None]
        policy = self.policy_out(p).flatten(1)
        v = F.relu(self.value_bn(self.value_conv(x)))
        h = F.relu(self.value_fc(pool_mean_max(v)))
        return policy, self.wdl_out(h), self.aux_out(h), p, v

    def forward(self, planes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, C, N, N) float -> (policy_logits (B, A), wdl_logits (B, 3), aux (B, 1))."""
        policy, wdl, aux, _, _ = self._heads(planes)
        return policy, wdl, aux

    def forward_all(self, planes: Tensor) -> dict[str, Tensor]:
        """Every output, for training: ``policy`` (B, A), ``wdl`` (B, 3), ``aux`` (B, 1), and for
        each head the net has: ``ownership`` (B, N, N) tanh values with ``ownership_logit``
        (B, N, N) (the pre-tanh value the loss reads), ``opponent_policy`` (B, A) logits,
        ``soft_policy`` (B, A) logits."""
        policy, wdl, aux, p, v = self._heads(planes)
        out = {"policy": policy, "wdl": wdl, "aux": aux}
        if self.ownership_out is not None:
            z = self.ownership_out(v)[:, 0]
            out["ownership_logit"] = z
            out["ownership"] = torch.tanh(z)
        if self.opponent_policy_out is not None:
            out["opponent_policy"] = self.opponent_policy_out(p).flatten(1)
        if self.soft_policy_out is not None:
            out["soft_policy"] = self.soft_policy_out(p).flatten(1)
        return out


def checkpoint_dict(model: TakNet, **extra: Any) -> dict[str, Any]:
    """``{'model_config': dict, 'model_state': state_dict, **extra}``: the checkpoint format that
    ``model_from_checkpoint`` and ``inference.Evaluator`` read (save it with ``torch.save``)."""
    return {"model_config": model.config.to_dict(), "model_state": model.state_dict(), **extra}


def model_from_checkpoint(checkpoint: dict[str, Any] | str, map_location: str = "cpu") -> TakNet:
    """Rebuild a model from a checkpoint dict (or a path to one saved by ``torch.save``, read
    weights-only: :func:`takzero.nn.safe_load.load_weights_only`).

    Raises KeyError if 'model_config' or 'model_state' is missing, ValueError on a feature-version
    mismatch or a file that cannot be read (``UnsafeFileError``, a ValueError, for one whose
    pickle would run code), RuntimeError if the weights do not fit the config.
    """
    if not isinstance(checkpoint, dict):
        checkpoint = load_weights_only(checkpoint, map_location=map_location)
    cfg = checkpoint["model_config"]
    model = TakNet(cfg if isinstance(cfg, ModelConfig) else ModelConfig.from_dict(cfg))
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


def _masked_mean(per_row: Tensor, valid: Tensor | None) -> Tensor:
    """Mean of (B,) ``per_row`` over the rows where ``valid`` (B,) is True (all rows when None);
    0 (with a gradient of 0) when no row is valid."""
    if valid is None:
        return per_row.mean()
    v = valid.to(per_row.dtype)
    return (per_row * v).sum() / v.sum().clamp(min=1.0)


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
    return _masked_mean(per_sq.mean(dim=1), valid)


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
    return _masked_mean(per_row, valid)


def soft_policy_target(target_probs: Tensor, power: float = 0.25) -> Tensor:
    """KataGo's soft policy target: ``target ** power`` renormalised per row (power 1/4, KataGo
    methods notes, "Auxiliary Soft Policy Target"). (B, A) -> (B, A) float32; entries that are 0
    stay 0, an all-zero row stays all zero."""
    t = target_probs.float().clamp(min=0.0).pow(power)
    return t / t.sum(dim=-1, keepdim=True).clamp(min=1e-30)


@dataclass
class AuxTargets:
    """Targets of the optional auxiliary heads for one batch (any may be None: term skipped).

    ownership: (B, N*N) float32 in {-1, 0, 1} (mover's view, ``game.ownership``);
    ownership_valid: (B,) bool, False where the game ended without a final position (resigned);
    opponent_policy: (B, A) float32, the next recorded position's policy target;
    opponent_valid: (B,) bool, False where there is no next recorded position.
    """

    ownership: Tensor | None = None
    ownership_valid: Tensor | None = None
    opponent_policy: Tensor | None = None
    opponent_valid: Tensor | None = None


@dataclass
class LossWeights:
    """Weights of ``total_loss``: policy, value (WDL) and auxiliary flat-difference terms, and the
    optional heads (0 = off): ownership (KataGo: 1.5, with the 1/N^2 inside ``ownership_loss``),
    opponent policy (KataGo: 0.15), soft policy."""

    policy: float = 1.0
    value: float = 1.0
    aux: float = 0.1
    ownership: float = 0.0
    opponent_policy: float = 0.0
    soft_policy: float = 0.0


def total_loss(
    outputs: tuple[Tensor, Tensor, Tensor],
    mask: Tensor,
    target_policy: Tensor,
    target_value: Tensor,
    target_flat_diff: Tensor | None = None,
    size: int | None = None,
    weights: LossWeights | None = None,
    heads: dict[str, Tensor] | None = None,
    aux_targets: AuxTargets | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """``w_p * policy_loss + w_v * value_loss + w_a * aux_loss`` for one batch, plus the optional
    heads' terms: ``w_own * ownership_loss + w_opp * opponent_policy_loss + w_soft *
    policy_loss(soft_policy, mask, soft_policy_target(target_policy))`` for each weight > 0.

    Args:
        outputs: ``model(planes)``: (policy_logits, wdl_logits, aux).
        mask: (B, A) bool legal mask; target_policy (B, A); target_value (B, 3) or (B,) outcomes.
        target_flat_diff: (B,) final flat difference from the mover's view, or None to skip the
            auxiliary term.
        size: board size N (needed with target_flat_diff).
        weights: ``LossWeights`` (None: the defaults).
        heads: ``model.forward_all(planes)`` (needed for a head whose weight is > 0).
        aux_targets: the heads' targets (``AuxTargets``).

    Returns:
        (scalar loss tensor, {'policy', 'value', 'aux', 'total'} plus 'ownership',
        'opponent_policy', 'soft_policy' for the heads that are on: detached scalar tensors for
        logging; reading one (``float``, ``.item()``) waits for the device. The trainer reads
        them at every step (``Trainer.train_step``, which waits there anyway for its checks that
        the loss and the gradient norm are finite), so per-step scalars cost no extra sync).

    Raises:
        ValueError: a head's weight is > 0 but its output or target is missing.
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
    extra = _head_losses(weights, heads, aux_targets, mask, target_policy)
    for name, (w, term) in extra.items():
        total = total + w * term
        parts[name] = term.detach()
    parts["total"] = total.detach()
    return total, parts


def _head_losses(
    weights: LossWeights,
    heads: dict[str, Tensor] | None,
    targets: AuxTargets | None,
    mask: Tensor,
    target_policy: Tensor,
) -> dict[str, tuple[float, Tensor]]:
    """{name: (weight, loss)} of the optional heads whose weight is > 0."""
    out: dict[str, tuple[float, Tensor]] = {}
    wanted = {
        "ownership": weights.ownership,
        "opponent_policy": weights.opponent_policy,
        "soft_policy": weights.soft_policy,
    }
    for name, w in wanted.items():
        if not w:
            continue
        if heads is None or name not in heads:
            raise ValueError(f"the {name} loss weight is {w} but the model has no {name} head")
        if name == "soft_policy":
            out[name] = (w, policy_loss(heads[name], mask, soft_policy_target(target_policy)))
            continue
        if targets is None or getattr(targets, name) is None:
            raise ValueError(f"the {name} loss weight is {w} but the batch has no {name} target")
        if name == "ownership":
            loss = ownership_loss(heads["ownership_logit"], targets.ownership, targets.ownership_valid)
        else:
            loss = opponent_policy_loss(heads[name], targets.opponent_policy, targets.opponent_valid)
        out[name] = (w, loss)
    return out
