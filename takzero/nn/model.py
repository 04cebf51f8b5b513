"""Policy/value network (a trunk from the registry, the policy/value heads, the auxiliary heads
of the head table), its checkpoint format and its training loss.

``TakNet.forward(planes)`` takes (B, C, N, N) float32 planes from ``takzero.nn.features.encode``
(of the net's ``config.feature_version``) and returns three tensors:

* ``policy_logits`` (B, A), A = ``actions.num_actions(N)``, indexed like the action space
  (``channel * N * N + square``); raw logits, mask them with ``masked_log_softmax``;
* ``wdl_logits`` (B, 3): win, draw, loss of the player to move (in that order);
* ``aux`` (B, 1): predicted final flat-count difference (mover minus opponent, no komi) divided by
  N (the unit ``aux_loss`` trains it in).

Optional auxiliary heads (KataGo, Wu 2019, "Accelerating Self-Play Learning in Go",
arXiv:1902.10565): the rows of :data:`takzero.nn.heads.HEADS` named in ``ModelConfig.heads``
(``ownership``, ``opponent_policy``, ``soft_policy``; none by default, so a checkpoint without them,
such as the shipped 5x5 model, loads unchanged), built into ``TakNet.heads``. Each reads the policy
or the value head's hidden planes. ``forward`` never computes them (inference, search and exports
see the three outputs above); ``forward_all`` returns them for training, each under its name
(``ownership`` (B, N, N) in [-1, 1] with ``ownership_logit``; ``opponent_policy`` and
``soft_policy`` (B, A) logits; shapes, targets and losses in ``takzero.nn.heads``).

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

Where things live: the trunks in ``takzero.nn.trunks`` (one row each), the auxiliary heads with
their losses in ``takzero.nn.heads`` (one row each), the policy, value and aux losses and the
masked softmax in ``takzero.nn.losses`` (these losses are re-exported here), the settings and
config with their bounds in ``takzero.nn.model_config`` (re-exported here too); this module holds the
network, its checkpoint format and ``total_loss``, which weighs and sums the terms. Anything that
only runs or exports a network depends on the small interface
:class:`takzero.nn.interface.PolicyValueNet`, which ``TakNet`` implements.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from takzero.nn.actions import action_channels
from takzero.nn.heads import (
    HEADS,
    HeadContext,
    build_heads,
    opponent_policy_loss,
    ownership_loss,
    soft_policy_target,
)
from takzero.nn.losses import (
    aux_loss,
    masked_log_softmax,
    masked_softmax,
    outcome_to_wdl,
    policy_loss,
    value_loss,
    wdl_to_value,
)
from takzero.nn.model_config import (
    FIELD_RANGES,
    MAX_BLOCKS,
    MAX_CHANNELS,
    MAX_HEAD_CHANNELS,
    MAX_LAYERS,
    MAX_PARAMETERS,
    MAX_VALUE_HIDDEN,
    ModelConfig,
    NetworkSettings,
)
from takzero.nn.quoting import short_repr, shown
from takzero.nn.safe_load import check_checkpoint, load_weights_only
from takzero.nn.trunks import build_trunk, pool_mean_max

__all__ = [
    "LossWeights",
    "ModelConfig",
    "NetworkSettings",
    "TakNet",
    "aux_loss",
    "MAX_BLOCKS",
    "MAX_CHANNELS",
    "MAX_HEAD_CHANNELS",
    "MAX_LAYERS",
    "MAX_PARAMETERS",
    "MAX_VALUE_HIDDEN",
    "FIELD_RANGES",
    "check_weights_fit",
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


#: Parameter prefixes of checkpoints from before the trunk registry and the head table, and
#: today's: the trunk's layers were top-level, the heads were attributes ``<name>_out``.
_OLD_TRUNK_PREFIXES = ("stem.", "tower.")
_OLD_HEAD_PREFIXES = {
    "ownership_out.": "heads.ownership.conv.",
    "opponent_policy_out.": "heads.opponent_policy.conv.",
    "soft_policy_out.": "heads.soft_policy.conv.",
}


class TakNet(nn.Module):
    """Policy/value network for one board size: a trunk from :data:`takzero.nn.trunks.TRUNKS`
    (``cfg.trunk``), the policy and value heads of the module docstring and the auxiliary heads
    of ``cfg.heads`` (rows of :data:`takzero.nn.heads.HEADS`, in ``self.heads``). Implements
    :class:`takzero.nn.interface.PolicyValueNet`.

    Args:
        cfg: the :class:`ModelConfig` (kept as ``self.config``; checkpoints store its dict).

    Raises ValueError when the trunk refuses the config (``trunks.build_trunk``) or a head is
    unknown (``heads.build_heads``).
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
        # the optional auxiliary heads, built last in table order (empty unless configured: old
        # checkpoints load unchanged, and a seeded network has the weights it always had)
        self.heads = build_heads(cfg)
        self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        init_trunk = getattr(self.trunk, "init_weights", None)
        if init_trunk is not None:
            init_trunk()
        nn.init.normal_(self.policy_out.weight, std=1.0 / math.sqrt(self.policy_out.in_channels))
        assert self.policy_out.bias is not None  # built with a bias
        nn.init.zeros_(self.policy_out.bias)
        for head in self.heads.values():
            init_head = getattr(head, "init_weights", None)
            if init_head is not None:
                init_head()

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False):
        """``nn.Module.load_state_dict``, first renaming the keys of checkpoints from before the
        trunk registry (top-level ``stem.*``/``tower.*`` -> ``trunk.stem.*``/``trunk.tower.*``)
        and the head table (``ownership_out.*`` -> ``heads.ownership.conv.*``, likewise
        ``opponent_policy_out.*`` and ``soft_policy_out.*``), so every checkpoint ever written
        loads unchanged."""
        state_dict = current_keys(state_dict)
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def _hidden(self, planes: Tensor) -> tuple[Tensor, Tensor, Tensor, dict[str, Tensor]]:
        """Trunk and heads: (policy_logits, wdl_logits, aux, hidden planes ``{'policy': p
        (B, policy_channels, N, N), 'value': v (B, value_channels, N, N)}``, what the auxiliary
        heads read)."""
        x = self.trunk(planes)
        p = F.relu(self.policy_bn(self.policy_conv(x)))
        if self.policy_pool_fc is not None:
            p = p + self.policy_pool_fc(pool_mean_max(p))[:, :, None, None]
        policy = self.policy_out(p).flatten(1)
        v = F.relu(self.value_bn(self.value_conv(x)))
        h = F.relu(self.value_fc(pool_mean_max(v)))
        return policy, self.wdl_out(h), self.aux_out(h), {"policy": p, "value": v}

    def forward(self, planes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, C, N, N) float -> (policy_logits (B, A), wdl_logits (B, 3), aux (B, 1))."""
        policy, wdl, aux, _ = self._hidden(planes)
        return policy, wdl, aux

    def forward_all(self, planes: Tensor) -> dict[str, Tensor]:
        """Every output, for training: ``policy`` (B, A), ``wdl`` (B, 3), ``aux`` (B, 1), and
        each auxiliary head's output under its name (``ownership`` (B, N, N) tanh values with
        ``ownership_logit`` (B, N, N), the pre-tanh value the loss reads; ``opponent_policy``
        (B, A) logits; ``soft_policy`` (B, A) logits)."""
        policy, wdl, aux, hidden = self._hidden(planes)
        out = {"policy": policy, "wdl": wdl, "aux": aux}
        for name, head in self.heads.items():
            y = head(hidden[HEADS[name].reads])
            if isinstance(y, Tensor):
                out[name] = y
            else:
                out.update(y)
        return out


def current_keys(state_dict: Mapping[str, Any]) -> Mapping[str, Any]:
    """``state_dict`` with the parameter names of older checkpoints renamed to today's
    (``TakNet.load_state_dict``); a current one is returned as it is."""
    old_trunk = not any(k.startswith("trunk.") for k in state_dict)
    old_heads = any(k.startswith(tuple(_OLD_HEAD_PREFIXES)) for k in state_dict)
    if not (old_trunk or old_heads):
        return state_dict
    out = {}
    for k, v in state_dict.items():
        if old_trunk and k.startswith(_OLD_TRUNK_PREFIXES):
            k = f"trunk.{k}"
        for old, new in _OLD_HEAD_PREFIXES.items():
            if k.startswith(old):
                k = new + k[len(old):]
        out[k] = v
    return out


def checkpoint_dict(model: TakNet, **extra: Any) -> dict[str, Any]:
    """``{'model_config': dict, 'model_state': state_dict, **extra}``: the checkpoint format that
    ``model_from_checkpoint`` and ``inference.Evaluator`` read (save it with ``torch.save``)."""
    return {"model_config": model.config.to_dict(), "model_state": model.state_dict(), **extra}


def model_from_checkpoint(
    checkpoint: dict[str, Any] | str | os.PathLike, map_location: str = "cpu", source: str | None = None
) -> TakNet:
    """Rebuild a model from a checkpoint dict (or a path to one saved by ``torch.save``, read
    weights-only: :func:`takzero.nn.safe_load.load_weights_only`).

    ``source``: the file a loaded object came from, named in the errors (default: the path, or
    "the checkpoint"); with it, a ``str`` ``checkpoint`` is that object, not a path. Nothing is
    allocated before the config is checked against the bounds (``MAX_BLOCKS``,
    ``MAX_CHANNELS``, ..., ``MAX_PARAMETERS``: :class:`ModelConfig`) and the weights' shapes
    against the config (:func:`check_weights_fit`).

    Raises ValueError (one line naming ``source``) for contents that are not a checkpoint (a
    list, a tensor, no ``model_config`` or ``model_state``, a ``half_komi`` or ``generation``
    that is not an integer: :func:`takzero.nn.safe_load.check_checkpoint`), on a feature-version
    mismatch, a config over the bounds or a file that cannot be read (``UnsafeFileError``, a
    ValueError, for one whose pickle would run code; a device or a file over
    ``safe_load.MAX_MODEL_FILE_BYTES``), RuntimeError if the weights do not fit the config.
    """
    # a str is a path unless ``source`` names the file it was loaded from (then it is the content)
    is_path = isinstance(checkpoint, os.PathLike) or (isinstance(checkpoint, str) and source is None)
    source = source or (str(checkpoint) if is_path else "the checkpoint")
    loaded: Any = checkpoint
    if isinstance(checkpoint, str | os.PathLike) and is_path:
        loaded = load_weights_only(Path(checkpoint), map_location=map_location)
    check_checkpoint(loaded, source)  # a list, a tensor, no model_state, a NaN half_komi
    checkpoint = loaded
    assert isinstance(checkpoint, dict)  # check_checkpoint refused anything else
    cfg = checkpoint["model_config"]
    if not isinstance(cfg, ModelConfig):
        if not isinstance(cfg, Mapping):
            raise ValueError(f"{source}: its model_config is a {type(cfg).__name__}, not a dict")
        try:
            cfg = ModelConfig.from_dict(cfg)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{source}: {e}") from None
    state = checkpoint["model_state"]
    check_weights_fit(cfg, state, source)
    model = TakNet(cfg)
    try:
        model.load_state_dict(state)
    except RuntimeError as e:  # torch's message is many lines: its last one says what failed
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        last = lines[-1] if lines else ""
        raise RuntimeError(f"{source}: the weights cannot be loaded ({shown(last, 200)})") from None
    return model


def check_weights_fit(cfg: ModelConfig, state: Any, source: str = "the checkpoint") -> None:
    """Check the sizes of the weights ``state`` (a state dict, older parameter names included)
    against the network ``cfg`` describes, before it is built: the network is made on torch's
    ``meta`` device (shapes only, no memory) and each parameter's shape compared.

    Raises RuntimeError (as ``load_state_dict`` would, one line naming ``source``) for a missing
    or extra parameter or a shape that differs, ValueError when ``state`` is not a dict of
    tensors or holds one that is not a dense real tensor (sparse, meta, complex, quantized)."""
    if not isinstance(state, Mapping) or not all(isinstance(v, Tensor) for v in state.values()):
        raise ValueError(f"{source}: its model_state is not a dict of tensors")
    odd = [(k, v) for k, v in state.items() if v.layout != torch.strided or v.is_meta or v.is_complex()
           or v.is_quantized]
    if odd:  # load_state_dict would fail with torch's multi-line message, or drop a part
        k, v = odd[0]
        kind = "a meta" if v.is_meta else ("a complex" if v.is_complex() else
                                           ("a quantized" if v.is_quantized else f"a {v.layout}"))
        raise ValueError(f"{source}: its weight {short_repr(k)} is {kind} tensor; a network's weights are "
                         "dense real tensors")
    with torch.device("meta"):
        expected = {k: tuple(v.shape) for k, v in TakNet(cfg).state_dict().items()}
    got = {k: tuple(v.shape) for k, v in current_keys(state).items()}
    missing = [k for k in expected if k not in got]
    extra = [k for k in got if k not in expected]
    wrong = [k for k in expected if k in got and got[k] != expected[k]]
    problems = [f"{k} is {list(got[k])} in the file, {list(expected[k])} by its model_config" for k in wrong]
    problems += [f"missing {k}" for k in missing] + [f"unexpected {k}" for k in extra]
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise RuntimeError(f"{source}: the weights do not fit the model config: "
                           f"{'; '.join(problems[:3])}{more}")



# ---------------------------------------------------------------------------------------------
# The training loss: the terms of takzero.nn.losses and of the head table, weighed and summed
# ---------------------------------------------------------------------------------------------


@dataclass
class LossWeights:
    """Weights of ``total_loss``: policy, value (WDL) and auxiliary flat-difference terms, and
    ``heads``: the weight of each auxiliary head's loss by its name in
    :data:`takzero.nn.heads.HEADS` (missing or 0 = term off; KataGo: ownership 1.5, with the
    1/N^2 inside ``ownership_loss``, opponent policy 0.15).

    Raises ValueError naming a head that is not a row of the table.
    """

    policy: float = 1.0
    value: float = 1.0
    aux: float = 0.1
    heads: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.heads) - set(HEADS))
        if unknown:
            raise ValueError(f"loss weights for unknown heads {unknown}; the heads are {list(HEADS)}")


def total_loss(
    outputs: tuple[Tensor, Tensor, Tensor],
    mask: Tensor,
    target_policy: Tensor,
    target_value: Tensor,
    target_flat_diff: Tensor | None = None,
    size: int | None = None,
    weights: LossWeights | None = None,
    heads: Mapping[str, Tensor] | None = None,
    targets: Mapping[str, Tensor] | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """``w_p * policy_loss + w_v * value_loss + w_a * aux_loss`` for one batch, plus
    ``w * row.loss(heads, ctx)`` for each row of :data:`takzero.nn.heads.HEADS` (in table order)
    whose weight ``weights.heads[name]`` is > 0.

    Args:
        outputs: ``model(planes)``: (policy_logits, wdl_logits, aux).
        mask: (B, A) bool legal mask; target_policy (B, A); target_value (B, 3) or (B,) outcomes.
        target_flat_diff: (B,) final flat difference from the mover's view, or None to skip the
            auxiliary term.
        size: board size N (needed with target_flat_diff).
        weights: ``LossWeights`` (None: the defaults).
        heads: ``model.forward_all(planes)`` (needed for a head whose weight is > 0).
        targets: the batch's targets (name -> tensor, ``heads.valid_key(name)`` -> (B,) bool;
            ``takzero.pipeline.targets``), needed for a head with a ``target`` whose weight is
            > 0.

    Returns:
        (scalar loss tensor, {'policy', 'value', 'aux', 'total'} plus the name of each head
        whose weight is > 0: detached scalar tensors for logging; reading one (``float``,
        ``.item()``) waits for the device. The trainer reads them at every step
        (``Trainer.train_step``, which waits there anyway for its checks that the loss and the
        gradient norm are finite), so per-step scalars cost no extra sync).

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
    ctx = HeadContext(mask=mask, policy=target_policy, targets=targets or {})
    for name, row in HEADS.items():
        w = weights.heads.get(name, 0.0)
        if not w:
            continue
        if heads is None or name not in heads:
            raise ValueError(f"the {name} loss weight is {w} but the model has no {name} head")
        if row.target is not None and row.target not in ctx.targets:
            raise ValueError(f"the {name} loss weight is {w} but the batch has no {row.target} target")
        term = row.loss(heads, ctx)
        total = total + w * term
        parts[name] = term.detach()
    parts["total"] = total.detach()
    return total, parts
