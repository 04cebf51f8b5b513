"""Network package: input features, action space, model, losses and batched inference.

* ``takzero.nn.features``: positions -> (B, C, N, N) float32 planes (``encode``, the plane
  table ``PLANES``, ``FEATURE_VERSION`` for new models, ``FEATURE_VERSIONS`` encoded).
* ``takzero.nn.actions``: move code <-> action index, legal masks, symmetry permutations.
* ``takzero.nn.trunks``: the trunk registry (``TRUNKS``: resnet, transformer).
* ``takzero.nn.heads``: the auxiliary head table (``HEADS``: ownership, opponent policy, soft
  policy), their modules and losses.
* ``takzero.nn.losses``: masked softmax and the policy, value and aux losses.
* ``takzero.nn.model``: ``TakNet``, ``ModelConfig``, the checkpoint format and ``total_loss``.
* ``takzero.nn.interface``: ``PolicyValueNet``, the interface inference, export and the trainer
  rely on.
* ``takzero.nn.inference``: ``Evaluator``; ``takzero.nn.model_export``: TorchScript/ONNX export;
  ``takzero.nn.backends``: onnxruntime and int8 evaluators; ``takzero.nn.outputs``: the compiled
  output softmaxes.

Importing the package loads only the numba parts (features, actions); the torch modules load on
first use of one of their names (``takzero.nn.TakNet``) or by importing them directly.
"""

from __future__ import annotations

import importlib
from typing import Any

from takzero.nn.actions import (
    action_permutation,
    action_to_move,
    legal_actions,
    legal_mask,
    move_to_action,
    num_actions,
    transform_planes,
    transform_policy,
)
from takzero.nn.features import (
    FEATURE_VERSION,
    FEATURE_VERSIONS,
    default_layers,
    encode,
    num_channels,
)

_LAZY = {
    "ModelConfig": "takzero.nn.model",
    "TakNet": "takzero.nn.model",
    "PolicyValueNet": "takzero.nn.interface",
    "HEADS": "takzero.nn.heads",
    "LossWeights": "takzero.nn.model",
    "masked_log_softmax": "takzero.nn.losses",
    "total_loss": "takzero.nn.model",
    "Evaluator": "takzero.nn.inference",
    "export_onnx": "takzero.nn.model_export",
    "export_torchscript": "takzero.nn.model_export",
}

__all__ = [
    "FEATURE_VERSION",
    "FEATURE_VERSIONS",
    "action_permutation",
    "action_to_move",
    "default_layers",
    "encode",
    "legal_actions",
    "legal_mask",
    "move_to_action",
    "num_actions",
    "num_channels",
    "transform_planes",
    "transform_policy",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'takzero.nn' has no attribute {name!r}")
