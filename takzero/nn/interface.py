"""The small interface a network offers to what runs, exports and trains it.

:class:`PolicyValueNet` is what ``takzero.nn.inference`` (the evaluators),
``takzero.nn.model_export`` (TorchScript/ONNX export), ``takzero.nn.backends`` (the in-memory
onnxruntime evaluator), ``takzero.export``, ``takzero.players.network`` and the trainer
(``takzero.pipeline.trainer``) rely on, instead of the concrete class
:class:`takzero.nn.model.TakNet`, which implements it. Another network (a research variant) can be
evaluated, exported and trained by the same code when it is a ``torch.nn.Module`` with these
members; it is checked structurally (``isinstance(net, PolicyValueNet)``, which tells an eager
network from a TorchScript export: a traced module keeps only ``forward``).

Members:

* ``config``: the :class:`takzero.nn.model_config.ModelConfig` the network was built from (checkpoints
  and exported files store ``config.to_dict()``; metadata is derived from it).
* ``size``: board size N; ``num_actions``: A = ``actions.num_actions(N)``.
* ``forward(planes)``: (B, C, N, N) float32 planes (``features.encode`` of
  ``config.feature_version``) -> (policy_logits (B, A), wdl_logits (B, 3), aux (B, 1)): what
  inference, search and exports use.
* ``forward_all(planes)``: a dict with at least ``policy``, ``wdl`` and ``aux`` (the same tensors as
  ``forward``) and each auxiliary head's output under its name (``takzero.nn.heads``): what the
  losses read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from torch import Tensor

if TYPE_CHECKING:
    from takzero.nn.model import ModelConfig

__all__ = ["PolicyValueNet"]


@runtime_checkable
class PolicyValueNet(Protocol):
    """A policy/value network as the rest of the package uses it (see the module docstring);
    implementations are ``torch.nn.Module`` subclasses (``to``, ``eval``, ``state_dict``,
    ``load_state_dict`` and ``parameters`` are used too)."""

    config: ModelConfig
    size: int
    num_actions: int

    def forward(self, planes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, C, N, N) float32 -> (policy_logits (B, A), wdl_logits (B, 3), aux (B, 1))."""
        ...

    def forward_all(self, planes: Tensor) -> dict[str, Tensor]:
        """(B, C, N, N) float32 -> {'policy', 'wdl', 'aux', and each auxiliary head's outputs}."""
        ...

    def __call__(self, planes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``forward`` (through ``nn.Module.__call__``)."""
        ...
