"""Model files: a network's metadata and its export to TorchScript and ONNX.

``export_torchscript`` writes a traced module with the metadata as the ``metadata.json`` extra
file; ``export_onnx`` writes the metadata as ``metadata_props``, one key ``takzero`` holding the
JSON plus one key per top-level field (``read_torchscript_metadata`` and ``read_onnx_metadata``
read them back without running the network). ONNX opset: 17 by default, written by PyTorch's
TorchScript-based exporter (``dynamo=False``); opset 18 and above use the ``torch.export``-based
exporter. Graph inputs and outputs: ``planes`` (batch, C, N, N) float32 -> ``policy_logits``
(batch, A), ``wdl_logits`` (batch, 3), ``aux`` (batch, 1); the batch axis is dynamic. Both formats
hold the raw network; masking and softmax happen in the evaluator (``takzero.nn.inference``).
``onnx_bytes_of_model`` is the same ONNX graph in memory (for onnxruntime sessions and int8
quantization, ``takzero.nn.backends``).
"""

from __future__ import annotations

import copy
import io
import json
import threading
import warnings
import zipfile
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from takzero.nn.interface import PolicyValueNet

__all__ = [
    "ACTION_SPACE",
    "DEFAULT_ONNX_OPSET",
    "ONNX_EXPORT_LOCK",
    "cpu_eval_copy",
    "export_onnx",
    "export_torchscript",
    "model_metadata",
    "onnx_bytes_of_model",
    "read_onnx_metadata",
    "read_torchscript_metadata",
    "set_onnx_metadata",
]

#: Opset written by ``export_onnx`` unless told otherwise.
DEFAULT_ONNX_OPSET = 17
#: Name of the action-space layout stored in metadata (see ``takzero.nn.actions``).
ACTION_SPACE = "takzero-v1: index = channel * N * N + square; channels 3 placements + 4 x (2^N-2)"
#: torch.onnx.export is not thread-safe (a global "in ONNX export" flag): two exports at once in
#: one process, e.g. two TEI WebSocket connections starting their engines, fail with "GLOBALS.
#: in_onnx_export must be False". Every export in takzero holds this lock.
ONNX_EXPORT_LOCK = threading.RLock()


def model_metadata(model: PolicyValueNet, half_komi: int | None = None, **extra: Any) -> dict[str, Any]:
    """Metadata dict describing ``model``: size, feature version, layers, channels, action space,
    the model config, and ``half_komi`` (the komi the model was trained for, in half points) if
    given; ``extra`` keys are added (must be JSON-serialisable)."""
    cfg = model.config
    meta: dict[str, Any] = {
        "format": "takzero",
        "size": cfg.size,
        "feature_version": cfg.feature_version,
        "layers": cfg.layers,
        "in_channels": cfg.in_channels,
        "num_actions": cfg.num_actions,
        "action_space": ACTION_SPACE,
        "model_config": cfg.to_dict(),
    }
    if half_komi is not None:
        meta["half_komi"] = int(half_komi)
        meta["komi"] = half_komi / 2
    meta.update(extra)
    return meta


def _merge_metadata(model: PolicyValueNet, metadata: dict[str, Any] | None) -> dict[str, Any]:
    meta = model_metadata(model)
    for key in ("size", "feature_version", "layers", "in_channels", "num_actions"):
        if metadata and key in metadata and metadata[key] != meta[key]:
            raise ValueError(
                f"metadata {key}={metadata[key]!r} contradicts the model ({meta[key]})"
            )
    meta.update(metadata or {})
    return meta


def _example_input(model: PolicyValueNet, batch: int = 2) -> torch.Tensor:
    cfg = model.config
    gen = torch.Generator().manual_seed(0)
    return torch.rand(batch, cfg.in_channels, cfg.size, cfg.size, generator=gen)


def export_torchscript(
    model: PolicyValueNet, path: str | Path, metadata: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Trace ``model`` (in eval mode, on CPU, float32) to TorchScript at ``path``.

    The metadata (``model_metadata(model)`` updated with ``metadata``) is stored as the extra file
    ``metadata.json``; returns it. The traced module maps (B, C, N, N) float32 planes to
    (policy_logits, wdl_logits, aux) for any batch size B.

    Raises ValueError if ``metadata`` contradicts the model (size, feature version, ...).
    """
    meta = _merge_metadata(model, metadata)
    model = cpu_eval_copy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(model, _example_input(model), check_trace=False)
        torch.jit.save(traced, str(path), _extra_files={"metadata.json": json.dumps(meta)})
    return meta


def read_torchscript_metadata(path: str | Path) -> dict[str, Any]:
    """Metadata stored by ``export_torchscript`` (without loading the module's code)."""
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if name.endswith("extra/metadata.json"):
                return json.loads(zf.read(name))
    raise ValueError(f"{path} has no takzero metadata")


def export_onnx(
    model: PolicyValueNet,
    path: str | Path,
    metadata: dict[str, Any] | None = None,
    opset: int = DEFAULT_ONNX_OPSET,
) -> dict[str, Any]:
    """Export ``model`` (eval mode, CPU, float32) to ONNX at ``path`` with a dynamic batch axis.

    Opset < 18 uses PyTorch's TorchScript-based exporter, opset >= 18 the ``torch.export``-based
    one (see the module docstring for the graph's names). Metadata (``model_metadata`` updated with
    ``metadata``, plus ``onnx_opset``) goes into the model's ``metadata_props``; returns it.

    Raises ImportError without ``onnx``/``onnxscript``, ValueError on contradicting metadata.
    """
    import onnx

    meta = _merge_metadata(model, metadata)
    meta["onnx_opset"] = int(opset)
    model = cpu_eval_copy(model)
    example = _example_input(model)
    names: dict[str, Any] = {"input_names": ["planes"], "output_names": ["policy_logits", "wdl_logits", "aux"]}
    with ONNX_EXPORT_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if opset < 18:
            axes = {name: {0: "batch"} for name in ["planes", *names["output_names"]]}
            torch.onnx.export(
                cast(nn.Module, model), (example,), str(path), opset_version=opset, dynamo=False,
                dynamic_axes=axes, **names,
            )
        else:
            batch = torch.export.Dim("batch")
            torch.onnx.export(
                cast(nn.Module, model), (example,), str(path), opset_version=opset, dynamo=True,
                external_data=False, dynamic_shapes={"planes": {0: batch}}, verbose=False, **names,
            )
    proto = onnx.load(str(path))
    written = {o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")}
    if written != {opset}:
        raise RuntimeError(f"asked for ONNX opset {opset}, the exporter wrote {sorted(written)}")
    set_onnx_metadata(proto, meta)
    onnx.save(proto, str(path))
    return meta


def set_onnx_metadata(proto: Any, meta: dict[str, Any]) -> None:
    """Replace an ONNX ``ModelProto``'s ``metadata_props`` with takzero's: one key ``takzero``
    holding ``meta`` as JSON plus one key per top-level field (what ``read_onnx_metadata`` and
    ``Evaluator.from_onnx`` read)."""
    del proto.metadata_props[:]
    entry = proto.metadata_props.add()
    entry.key, entry.value = "takzero", json.dumps(meta)
    for key, value in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, json.dumps(value)


def onnx_bytes_of_model(model: PolicyValueNet, opset: int = DEFAULT_ONNX_OPSET) -> bytes:
    """The float32 ONNX graph of ``model``'s current weights (the graph of ``export_onnx``,
    TorchScript-based exporter, opset < 18), in memory, without metadata."""
    if opset >= 18:
        raise ValueError("in-memory export uses the TorchScript-based exporter: opset < 18")
    cpu = cpu_eval_copy(model)
    buf = io.BytesIO()
    names = ["policy_logits", "wdl_logits", "aux"]
    with ONNX_EXPORT_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            cast(nn.Module, cpu), (_example_input(cpu),), buf,  # type: ignore[arg-type]  # torch's stubs: f may be a file object
            opset_version=opset, dynamo=False,
            input_names=["planes"], output_names=names,
            dynamic_axes={name: {0: "batch"} for name in ["planes", *names]},
        )
    return buf.getvalue()


def read_onnx_metadata(path: str | Path) -> dict[str, Any]:
    """Metadata stored by ``export_onnx`` (needs ``onnx``)."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    for entry in proto.metadata_props:
        if entry.key == "takzero":
            return json.loads(entry.value)
    raise ValueError(f"{path} has no takzero metadata")


def cpu_eval_copy(model: PolicyValueNet) -> PolicyValueNet:
    """Float32 CPU copy of ``model`` in eval mode (the caller's model is left untouched)."""
    fresh = copy.deepcopy(model)
    return fresh.to("cpu", torch.float32).eval()  # type: ignore[attr-defined]
