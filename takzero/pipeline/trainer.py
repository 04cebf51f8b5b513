"""The optimisation step: replay records to tensors, losses, optimiser, exact resume state.

The trainer turns replay records into tensors (a random board symmetry per sample) and steps the
optimiser with gradient clipping, a NaN/inf guard and bf16 autocast on GPU. Its
``state_dict``/``load_state_dict`` carry everything an exact resume needs (weights, optimiser,
step, generation, random streams); ``takzero.pipeline.checkpoints`` writes and verifies the files.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, Self

import numpy as np
import torch

from takzero.config import TrainSection
from takzero.game.symmetry import NUM_SYMMETRIES
from takzero.nn.actions import legal_mask, num_actions
from takzero.nn.features import FEATURE_VERSION, encode, num_channels
from takzero.nn.heads import HEADS
from takzero.nn.inference import resolve_device
from takzero.nn.interface import PolicyValueNet
from takzero.nn.model import LossWeights, ModelConfig, TakNet, total_loss
from takzero.pipeline.packing import unpack_states
from takzero.pipeline.records import Records
from takzero.pipeline.targets import (
    MAIN_TARGETS,
    TARGETS,
    TargetSettings,
    make_targets,
    transform_board_rows,
)

log = logging.getLogger(__name__)


@dataclass
class Batch:
    """Tensors of one training batch: planes (B, C, N, N) float32, mask (B, A) bool, policy
    (B, A) float32, value (B,) float32 outcome, flat_diff (B,) float32, and ``targets``: the
    auxiliary heads' targets (``takzero.pipeline.targets``: name -> tensor and
    ``heads.valid_key(name)`` -> (B,) bool), under the same symmetry as the planes."""

    planes: torch.Tensor
    mask: torch.Tensor
    policy: torch.Tensor
    value: torch.Tensor
    flat_diff: torch.Tensor
    targets: dict[str, torch.Tensor] = field(default_factory=dict)

    def targets_on(self, device: torch.device) -> dict[str, torch.Tensor]:
        """``targets`` on ``device``."""
        return {k: v.to(device, non_blocking=True) for k, v in self.targets.items()}


def make_batch(
    records: Records,
    size: int,
    layers: int,
    rng: np.random.Generator,
    augment: bool = True,
    feature_version: int = FEATURE_VERSION,
    targets: Iterable[str] | None = None,
    settings: TargetSettings | None = None,
) -> Batch:
    """Decode records into training tensors, each sample under a random one of the 8 symmetries
    (the same transform for its position, legal mask and every target; ``augment=False``: every
    sample as recorded). Every target is a row of ``pipeline.targets.TARGETS`` made here under
    ``settings`` (None: ``TargetSettings()``, the value target undiscounted and unblended): the
    main ones (policy, value with its discount and blend, flat_diff) always, the auxiliary ones
    named in ``targets`` (None: all of them). The symmetries are applied to the packed boards and
    the sparse action rows before decoding, one gather per batch
    (``pipeline.targets.transform_board_rows``, ``transform_action_indices``): the same tensors as
    transforming each decoded position."""
    settings = settings or TargetSettings()
    if augment:
        ts = rng.integers(0, NUM_SYMMETRIES, size=len(records))
        board = transform_board_rows(records.board, size, ts)
    else:
        ts = np.zeros(len(records), np.int64)
        board = records.board
    states = unpack_states(board, size)
    planes = np.zeros((len(records), num_channels(layers, feature_version), size, size), np.float32)
    encode(states, planes, layers, feature_version)
    mask = np.zeros((len(records), num_actions(size)), np.bool_)
    legal_mask(states, mask)
    main: dict[str, torch.Tensor] = {}
    for name in MAIN_TARGETS:
        made = TARGETS[name].produce(records, size, ts, settings)
        assert made is not None, name  # the main targets are always made
        main[TARGETS[name].batch_field] = torch.from_numpy(made[0])
    return Batch(
        planes=torch.from_numpy(planes),
        mask=torch.from_numpy(mask),
        targets=make_targets(records, size, ts, targets, settings),
        **main,
    )


#: Optimiser steps skipped in a row (a non-finite loss or gradient) after which the trainer
#: stops the run (:class:`NonFiniteError`): a step skipped now and then is noise, this many in
#: a row means the weights or the learning rate went wrong and no step will succeed again.
MAX_SKIPPED_IN_A_ROW = 20


class NonFiniteError(RuntimeError):
    """Training went non-finite: :data:`MAX_SKIPPED_IN_A_ROW` steps in a row had a non-finite
    loss or gradient, or the weights hold NaN or inf (the message says which and where)."""


def non_finite(state: Mapping[str, Any]) -> list[str]:
    """The names of the floating-point tensors of ``state`` (a state dict) that hold a NaN or
    an infinity, in ``state``'s order; [] when every one is finite (other values are ignored)."""
    return [k for k, v in state.items()
            if isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(torch.isfinite(v).all())]


def use_bf16_autocast(amp: bool, device: torch.device) -> bool:
    """Whether the trainer's forward pass runs under bf16 autocast: ``train.amp`` on a CUDA
    device; always float32 on the CPU (CPU bf16 is slower than float32 there)."""
    return bool(amp) and device.type == "cuda"


def _lr_factor(step: int, schedule: str, warmup: int, total: int) -> float:
    """Multiplier of the base learning rate at ``step``: linear warm-up, then constant, cosine
    to 0 at ``total``, or step decay (x0.1 at 50% and 75% of ``total``)."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "cosine":
        frac = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.5 * (1 + math.cos(math.pi * frac))
    if schedule == "step":
        return 0.01 if step >= 0.75 * total else 0.1 if step >= 0.5 * total else 1.0
    return 1.0


class TrainableNet(PolicyValueNet, Protocol):
    """A :class:`~takzero.nn.interface.PolicyValueNet` as the trainer holds it: a
    ``torch.nn.Module``, moved to the device, trained, its parameters optimised and its weights
    saved and loaded (for the type checker: ``isinstance`` checks stay on ``PolicyValueNet``)."""

    def to(self, device: torch.device) -> Self: ...

    def train(self, mode: bool = True) -> Self: ...

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> Any: ...


class Trainer:
    """Holds the model, optimiser and LR schedule; one ``train_step`` per sampled batch.

    Args:
        cfg: the ``train`` config section (:class:`takzero.config.TrainSection`: optimiser,
            learning-rate schedule, gradient clipping, autocast), read as ``self.cfg``.
        model_config: network shape (``takzero.nn.model.ModelConfig``; a run passes
            :meth:`takzero.config.TrainConfig.model_config`).
        weights: loss weights (a run passes :meth:`takzero.config.TrainConfig.loss_weights`;
            None: ``LossWeights()``).
        device: ``auto``, ``cpu`` or ``cuda[:N]``.
        seed: seed of the augmentation RNG and torch.
        settings: the targets' settings (``pipeline.targets.TargetSettings``: the value target's
            discount and Reanalyse blend; a run passes ``TargetSettings.from_replay(cfg.replay)``;
            None: undiscounted, unblended).
        build: ``build(model_config)`` -> the network to train, any
            :class:`takzero.nn.interface.PolicyValueNet` that is a ``torch.nn.Module``
            (:class:`TrainableNet`; default ``TakNet``), built after
            ``torch.manual_seed(seed)``.
    """

    def __init__(
        self,
        cfg: TrainSection,
        model_config: ModelConfig,
        weights: LossWeights | None = None,
        device: str = "auto",
        seed: int = 0,
        build: Callable[[ModelConfig], TrainableNet] = TakNet,
        settings: TargetSettings | None = None,
    ) -> None:
        self.cfg = cfg
        self.settings = settings or TargetSettings()
        self.device = resolve_device(device)
        torch.manual_seed(seed)
        self.model: TrainableNet = build(model_config).to(self.device)
        self.model_config = self.model.config
        #: the forward pass under bf16 autocast (:func:`use_bf16_autocast`: ``cfg.amp`` on CUDA)
        self.autocast_bf16 = use_bf16_autocast(cfg.amp, self.device)
        self.weights = weights or LossWeights()
        #: the batch targets the weighted heads train on (``pipeline.targets``)
        self.targets = [
            row.target for name, row in HEADS.items()
            if row.target is not None and self.weights.heads.get(name, 0.0) > 0
        ]
        params = self.model.parameters()
        if cfg.optimizer == "adamw":
            self.optimizer: torch.optim.Optimizer = torch.optim.AdamW(
                params, lr=cfg.lr, weight_decay=cfg.weight_decay
            )
        else:
            self.optimizer = torch.optim.SGD(
                params, lr=cfg.lr, momentum=cfg.momentum, nesterov=True,
                weight_decay=cfg.weight_decay,
            )
        self.step = 0
        self.generation = 0
        self.skipped_steps = 0
        self.skipped_in_a_row = 0  # reset by a step taken
        self.last_skip = ""  # why the last skipped step was skipped
        self.rng = np.random.default_rng(seed)

    @property
    def lr(self) -> float:
        return self.cfg.lr * _lr_factor(self.step, self.cfg.lr_schedule, self.cfg.warmup_steps, self.cfg.total_steps)

    def train_step(self, records: Records) -> dict[str, float]:
        """One optimiser step on ``records``; returns metrics (losses in nats, policy entropy,
        value sign accuracy on decisive positions, lr, grad norm). A non-finite loss or gradient
        skips the step instead of corrupting the weights: the metrics are then only
        ``train/skipped_steps`` (the count so far) and ``train/step_skipped`` (1.0), and the
        reason is in :attr:`last_skip`.

        Raises:
            NonFiniteError: the :data:`MAX_SKIPPED_IN_A_ROW`-th step in a row was skipped (the
                weights are not changed by a skipped step: the last checkpoint is good)."""
        size = self.model_config.size
        layers = self.model_config.layers
        assert layers is not None  # set by ModelConfig.__post_init__
        batch = make_batch(records, size, layers, self.rng,
                           feature_version=self.model_config.feature_version, targets=self.targets,
                           settings=self.settings)
        dev = self.device
        planes = batch.planes.to(dev, non_blocking=True)
        mask = batch.mask.to(dev, non_blocking=True)
        target_p = batch.policy.to(dev, non_blocking=True)
        target_v = batch.value.to(dev, non_blocking=True)
        flat = batch.flat_diff.to(dev, non_blocking=True)
        lr = self.lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.model.train()
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=self.autocast_bf16):
            heads = self.model.forward_all(planes)
        outputs = (heads["policy"], heads["wdl"], heads["aux"])
        loss, parts = total_loss(
            outputs, mask, target_p, target_v, flat, size, self.weights,
            heads=heads, targets=batch.targets_on(dev),
        )
        self.optimizer.zero_grad(set_to_none=True)
        metrics: dict[str, float] = {}
        if not torch.isfinite(loss):
            return self._skip(f"non-finite loss ({float(loss.detach())})")
        loss.backward()
        clip = self.cfg.grad_clip if self.cfg.grad_clip > 0 else float("inf")
        gnorm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        if not torch.isfinite(gnorm):
            self.optimizer.zero_grad(set_to_none=True)
            return self._skip(f"non-finite gradient norm ({float(gnorm)})")
        self.optimizer.step()
        self.step += 1
        self.skipped_in_a_row = 0
        with torch.no_grad():
            logits, wdl, _ = outputs
            logp = torch.log_softmax(logits.float().masked_fill(~mask, float("-inf")), dim=-1)
            p = logp.exp()
            entropy = -(p * logp.masked_fill(~mask, 0.0)).sum(-1).mean()
            v = torch.softmax(wdl.float(), -1)
            pred = v[:, 0] - v[:, 2]
            decisive = target_v != 0
            acc = ((pred.sign() == target_v.sign()) & decisive).sum() / decisive.sum().clamp(min=1)
        metrics.update(
            {
                "loss/total": float(parts["total"]),
                "loss/policy": float(parts["policy"]),
                "loss/value": float(parts["value"]),
                "loss/aux": float(parts["aux"]),
                "train/policy_entropy": float(entropy),
                "train/value_accuracy": float(acc),
                "train/lr": lr,
                "train/grad_norm": float(gnorm),
                "train/skipped_steps": float(self.skipped_steps),
            }
        )
        for name in HEADS:
            if name in parts:
                metrics[f"loss/{name}"] = float(parts[name])
        return metrics

    def _skip(self, why: str) -> dict[str, float]:
        """Count a skipped step (``why``: its reason, kept in :attr:`last_skip`); raise
        NonFiniteError at the bound."""
        self.skipped_steps += 1
        self.skipped_in_a_row += 1
        self.last_skip = f"{why} at step {self.step}"
        log.warning("%s: step skipped", self.last_skip)
        if self.skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW:
            raise NonFiniteError(
                f"{self.skipped_in_a_row} training steps in a row skipped ({self.last_skip}; "
                f"{self.skipped_steps} skipped in all): the weights or the learning rate went wrong "
                f"(train.lr={self.cfg.lr:g})"
            )
        return {"train/skipped_steps": float(self.skipped_steps), "train/step_skipped": 1.0}

    def check_finite(self) -> None:
        """Raise NonFiniteError when the model's weights hold a NaN or an infinity (naming the
        first tensors); the run calls it before each checkpoint, so none is ever written."""
        bad = non_finite(self.model.state_dict())
        if bad:
            raise NonFiniteError(f"the weights at step {self.step} are not finite (NaN or inf in "
                                 f"{', '.join(bad[:3])}{', ...' if len(bad) > 3 else ''})")

    # -- checkpoints -------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "model_config": self.model_config.to_dict(),
            "model_state": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "generation": self.generation,
            "skipped_steps": self.skipped_steps,
            "rng": {
                "numpy": self.rng.bit_generator.state,
                "torch": torch.get_rng_state(),
                "python": random.getstate(),
            },
        }

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.model.load_state_dict(d["model_state"])
        self.optimizer.load_state_dict(d["optimizer"])
        self.step = int(d["step"])
        self.generation = int(d["generation"])
        self.skipped_steps = int(d.get("skipped_steps", 0))
        self.rng.bit_generator.state = d["rng"]["numpy"]
        torch.set_rng_state(d["rng"]["torch"])
        random.setstate(d["rng"]["python"])
