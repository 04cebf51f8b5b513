"""Batched network evaluation for search and play, and model export (TorchScript, ONNX).

``Evaluator`` turns positions (core state arrays) into priors over legal moves and values::

    ev = Evaluator.load("checkpoints/run/latest.pt", device="auto")   # checkpoint, .ts or .onnx
    priors, values, wdl = ev.evaluate(states)                          # states (B, STATE_LEN) int64

* ``priors`` (B, A) float32: softmax of the policy over the legal moves, 0 on illegal moves; a
  position without legal moves (finished) gets an all-zero row.
* ``values`` (B,) float32: W - L in [-1, 1] for the player to move.
* ``wdl`` (B, 3) float32: win/draw/loss probabilities of the player to move.

Positions are encoded with the model's feature version (``metadata['feature_version']``, see
``takzero.nn.features``): a version-1 model such as the shipped 5x5 one gets version-1 planes.

Backends: a PyTorch module (an eager network, any :class:`takzero.nn.interface.PolicyValueNet`
such as the ``TakNet`` of a checkpoint, or TorchScript), run in ``eval()``
mode under ``torch.inference_mode()`` on CPU or CUDA (``device="auto"`` picks CUDA when available),
optionally under bf16 autocast on CUDA; or an ONNX file run by onnxruntime (optional extra
``takzero[onnx]``). Input buffers (planes and masks) are preallocated per batch size (pinned memory
on CUDA) and reused; returned arrays are new on every call.

Export: ``export_torchscript`` (traced module, metadata as the ``metadata.json`` extra file) and
``export_onnx`` (metadata as ``metadata_props``, one key ``takzero`` holding the JSON plus one key
per top-level field). ONNX opset: 17 by default, written by PyTorch's TorchScript-based exporter
(``dynamo=False``); opset 18 and above use the ``torch.export``-based exporter. Graph inputs and
outputs: ``planes`` (batch, C, N, N) float32 -> ``policy_logits`` (batch, A), ``wdl_logits`` (batch,
3), ``aux`` (batch, 1); the batch axis is dynamic. Both formats hold the raw network; masking and
softmax happen in the evaluator.
"""

from __future__ import annotations

import copy
import io
import json
import threading
import time
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numba
import numpy as np
import torch
from torch import nn

from takzero.game.core import I_SIZE, STATE_LEN
from takzero.nn.actions import legal_mask, legal_softmax, num_actions, softmax_at
from takzero.nn.features import check_version, encode, layers_from_channels
from takzero.nn.interface import PolicyValueNet
from takzero.nn.losses import masked_softmax
from takzero.nn.model import ModelConfig, model_from_checkpoint
from takzero.nn.quantize import (
    QuantizeError,
    calibration_states_of,
    encode_states,
    policy_games_states,
    quantize_onnx_bytes,
)
from takzero.nn.safe_load import (
    check_model_file,
    check_onnx_file,
    load_weights_only,
    one_line_reason,
    unreadable_file_error,
)

__all__ = [
    "ACTION_SPACE",
    "DEFAULT_ONNX_OPSET",
    "Evaluator",
    "export_onnx",
    "export_torchscript",
    "choose_backend",
    "check_positions",
    "check_weights_finite",
    "masked_softmax_np",
    "model_metadata",
    "onnx_evaluator",
    "onnx_model_bytes",
    "onnx_session",
    "quantize",
    "with_backend",
    "EVAL_BACKENDS",
    "read_onnx_metadata",
    "read_torchscript_metadata",
    "set_onnx_metadata",
    "resolve_device",
]

#: Opset written by ``export_onnx`` unless told otherwise.
DEFAULT_ONNX_OPSET = 17
#: Name of the action-space layout stored in metadata (see ``takzero.nn.actions``).
ACTION_SPACE = "takzero-v1: index = channel * N * N + square; channels 3 placements + 4 x (2^N-2)"
_MAX_BUFFERS = 16
#: torch.onnx.export is not thread-safe (a global "in ONNX export" flag): two exports at once in
#: one process, e.g. two TEI WebSocket connections starting their engines, fail with "GLOBALS.
#: in_onnx_export must be False". Every export in takzero holds this lock.
ONNX_EXPORT_LOCK = threading.RLock()


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``'auto'`` -> CUDA if available else CPU; anything else -> ``torch.device(device)``."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


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
    model = _cpu_eval_copy(model)
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
    model = _cpu_eval_copy(model)
    example = _example_input(model)
    names: dict[str, Any] = {"input_names": ["planes"], "output_names": ["policy_logits", "wdl_logits", "aux"]}
    with ONNX_EXPORT_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if opset < 18:
            axes = {name: {0: "batch"} for name in ["planes", *names["output_names"]]}
            torch.onnx.export(
                cast(nn.Module, model), (example,), str(path), opset_version=opset, dynamo=False,
                dynamic_axes=axes, **names,
            )  # fmt: skip
        else:
            batch = torch.export.Dim("batch")
            torch.onnx.export(
                cast(nn.Module, model), (example,), str(path), opset_version=opset, dynamo=True,
                external_data=False, dynamic_shapes={"planes": {0: batch}}, verbose=False, **names,
            )  # fmt: skip
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


def _onnx_bytes_of_model(model: PolicyValueNet, opset: int = DEFAULT_ONNX_OPSET) -> bytes:
    """The float32 ONNX graph of ``model``'s current weights (the graph of ``export_onnx``,
    TorchScript-based exporter, opset < 18), in memory, without metadata."""
    if opset >= 18:
        raise ValueError("in-memory export uses the TorchScript-based exporter: opset < 18")
    cpu = _cpu_eval_copy(model)
    buf = io.BytesIO()
    names = ["policy_logits", "wdl_logits", "aux"]
    with ONNX_EXPORT_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            cast(nn.Module, cpu), (_example_input(cpu),), buf,  # type: ignore[arg-type]  # torch's stubs: f may be a file object
            opset_version=opset, dynamo=False,
            input_names=["planes"], output_names=names,
            dynamic_axes={name: {0: "batch"} for name in ["planes", *names]},
        )  # fmt: skip
    return buf.getvalue()


def onnx_session(model: bytes | str | Path, threads: int = 1, providers: list[str] | None = None) -> Any:
    """An onnxruntime ``InferenceSession`` of an ONNX model (bytes or a path) with ``threads``
    intra-op threads (>= 1; the ``Threads`` of the engine, ``--threads`` of the commands), one
    inter-op thread and sequential execution, so that a session never starts more busy threads
    than asked for. ``providers``: CPU unless given. Raises ImportError without onnxruntime,
    onnxruntime's own errors for a graph it cannot load."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(1, int(threads))
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    source = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(source, opts, providers=providers or ["CPUExecutionProvider"])


def onnx_model_bytes(ev: Evaluator) -> bytes:
    """The float32 ONNX graph an evaluator runs: exported from its eager network, or the bytes of
    the ONNX file it was loaded from. Raises ValueError for a TorchScript evaluator (no network
    to export: use the checkpoint or the ``.onnx`` file)."""
    if ev.onnx_bytes is not None:
        return ev.onnx_bytes
    if not isinstance(ev.model, PolicyValueNet):
        raise ValueError("a TorchScript export cannot be converted: use the checkpoint or the .onnx file")
    return _onnx_bytes_of_model(ev.model)


def onnx_evaluator(model: PolicyValueNet, threads: int = 1, opset: int = DEFAULT_ONNX_OPSET) -> Evaluator:
    """An ``Evaluator`` running ``model``'s current weights in onnxruntime on the CPU: the model
    (a float32 CPU eval copy) is exported to ONNX in memory (TorchScript-based exporter, opset
    ``opset`` < 18, the graph of ``export_onnx``) and loaded into a session with ``threads``
    intra-op threads and one inter-op thread (self-play: one thread per worker). Call it again for
    new weights. Raises ImportError without onnxruntime."""
    data = _onnx_bytes_of_model(model, opset)
    out = Evaluator(None, metadata=model_metadata(model), _onnx_session=onnx_session(data, threads))
    out.onnx_bytes = data
    out.threads = max(1, int(threads))
    return out


#: CPU inference backends of an evaluation (``with_backend``): PyTorch as loaded, onnxruntime in
#: float32, or onnxruntime with the network quantized to int8 (``takzero.nn.quantize``).
EVAL_BACKENDS = ("torch", "onnx", "int8")


def with_backend(ev: Evaluator, backend: str, threads: int = 1) -> Evaluator:
    """``ev``'s network run by ``backend`` (one of :data:`EVAL_BACKENDS`) on ``threads`` CPU
    threads:

    * ``'torch'``: ``ev`` as it is (an ONNX file's evaluator stays in onnxruntime);
    * ``'onnx'``: onnxruntime in float32 (:func:`onnx_evaluator`); an evaluator of an ``.onnx``
      file is kept, with a new session when its thread count differs;
    * ``'int8'``: the network quantized to int8 (:func:`takzero.nn.quantize.quantize`), calibrated
      on the positions its checkpoint carries or on games of its own policy; an int8 evaluator is
      kept (new session when its thread count differs).

    Priors and values of ``'onnx'`` agree with PyTorch's up to float rounding (about 1e-6); int8's
    differ more (docs/results.md, "int8"). The checkpoint's metadata (komi, run, generation) is
    kept. Raises ValueError for an unknown backend, or for ``'onnx'``/``'int8'`` with a
    TorchScript model (no network to export: use the checkpoint or the ``.onnx`` file);
    ``takzero.nn.quantize.QuantizeError`` (a ValueError) when the network cannot be quantized;
    ImportError without onnxruntime."""
    if backend not in EVAL_BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(EVAL_BACKENDS)}, got {backend!r}")
    threads = max(1, int(threads))
    if backend == "torch":
        return ev
    is_int8 = ev.metadata.get("precision") == "int8"
    if ev._session is not None and (backend == "onnx" or is_int8):
        if ev.threads == threads or ev.onnx_bytes is None:
            return ev
        out = Evaluator(None, metadata=ev.metadata, _onnx_session=onnx_session(ev.onnx_bytes, threads))
        out.onnx_bytes, out.threads, out.calibration_states = ev.onnx_bytes, threads, ev.calibration_states
        return out
    if ev._session is None and not isinstance(ev.model, PolicyValueNet):
        raise ValueError(f"the {backend} backend needs a checkpoint (or an .onnx file), not a TorchScript export")
    if backend == "onnx":
        out = onnx_evaluator(cast(PolicyValueNet, ev.model), threads=threads)  # no session: a network
    elif ev.int8_twin is not None:  # quantized before: a new session of the same int8 graph
        return with_backend(ev.int8_twin, "int8", threads)
    else:
        out, _ = quantize(ev, threads=threads)
    out.metadata = {**out.metadata, **ev.metadata, **{k: out.metadata[k] for k in ("precision", "calibration_positions") if k in out.metadata}}
    out.calibration_states = ev.calibration_states
    if backend == "int8" and isinstance(ev.model, PolicyValueNet):
        ev.int8_twin = out  # until its weights change (load_state_dict)
    return out


def choose_backend(model: PolicyValueNet, batch: int, threads: int = 1, repeats: int = 5) -> str:
    """``'onnx'`` if onnxruntime evaluates a (batch, C, N, N) input of ``model`` faster than
    PyTorch on the CPU (best of ``repeats`` calls each, after one warm-up call; PyTorch with its
    current thread count, onnxruntime with ``threads``), else ``'torch'`` (also when onnxruntime
    is not installed). Takes a fraction of a second for the self-play nets."""
    import importlib.util
    import time

    if importlib.util.find_spec("onnxruntime") is None:
        return "torch"
    cfg = model.config
    planes = np.random.default_rng(0).random((batch, cfg.in_channels, cfg.size, cfg.size))
    planes = planes.astype(np.float32)
    masks = np.ones((batch, cfg.num_actions), np.bool_)
    best = {}
    for name, ev in (
        ("torch", Evaluator(cast(nn.Module, _cpu_eval_copy(model)), device="cpu")),
        ("onnx", onnx_evaluator(model, threads)),
    ):
        ev.evaluate_planes(planes, masks)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            ev.evaluate_planes(planes, masks)
            times.append(time.perf_counter() - t0)
        best[name] = min(times)
    return "onnx" if best["onnx"] < best["torch"] else "torch"


def read_onnx_metadata(path: str | Path) -> dict[str, Any]:
    """Metadata stored by ``export_onnx`` (needs ``onnx``)."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    for entry in proto.metadata_props:
        if entry.key == "takzero":
            return json.loads(entry.value)
    raise ValueError(f"{path} has no takzero metadata")


def _cpu_eval_copy(model: PolicyValueNet) -> PolicyValueNet:
    """Float32 CPU copy of ``model`` in eval mode (the caller's model is left untouched)."""
    fresh = copy.deepcopy(model)
    return fresh.to("cpu", torch.float32).eval()  # type: ignore[attr-defined]


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


class Evaluator:
    """Batched evaluation of positions by one network (see the module docstring).

    Args:
        model: an eager network, a :class:`~takzero.nn.interface.PolicyValueNet` such as
            ``TakNet`` (used as is: it is moved to ``device`` and put in eval mode; pass a copy
            if it is still being trained), or a TorchScript module with ``metadata``.
        device: ``'auto'`` (CUDA if available, else CPU), ``'cpu'``, ``'cuda'``, ``'cuda:1'``, ...
        bf16: run the network under bf16 autocast (only on CUDA; ignored on CPU).
        metadata: required for a TorchScript module (``size`` and ``in_channels`` at least;
            ``feature_version`` picks the input encoding, 1 when missing: files from before
            version 2 were all version 1); for an eager network it defaults to
            ``model_metadata(model)``.

    Use the ``from_checkpoint``, ``from_torchscript``, ``from_onnx`` or ``load`` constructors to
    read files. Two threads may evaluate at once (each has its own input buffers).

    Raises:
        ValueError: missing/incompatible metadata (unknown size, a feature version this code does
            not encode, a channel count that does not fit the version).
    """

    def __init__(
        self,
        model: nn.Module | None,
        device: str | torch.device = "auto",
        bf16: bool = False,
        metadata: dict[str, Any] | None = None,
        *,
        _onnx_session: Any = None,
    ) -> None:
        if metadata is None:
            if not isinstance(model, PolicyValueNet):
                raise ValueError("metadata is required unless model is a PolicyValueNet (an eager network)")
            metadata = model_metadata(model)
        self.metadata = dict(metadata)
        self.size = int(metadata["size"])
        self.in_channels = int(metadata["in_channels"])
        #: input feature version of the model; ``evaluate`` encodes positions with it
        self.feature_version = check_version(int(metadata.get("feature_version", 1)))
        self.layers = layers_from_channels(self.in_channels, self.feature_version)
        self.num_actions = num_actions(self.size)
        if int(metadata.get("num_actions", self.num_actions)) != self.num_actions:
            raise ValueError("metadata num_actions does not match the size's action space")
        self._session = _onnx_session
        self.model = model
        #: the ONNX graph an onnxruntime evaluator runs (bytes), None for a PyTorch one
        self.onnx_bytes: bytes | None = None
        #: onnxruntime intra-op threads of the session (1 for PyTorch evaluators: torch's own)
        self.threads = 1
        #: (K, STATE_LEN) int64 positions the checkpoint carries for int8 calibration, or None
        self.calibration_states: np.ndarray | None = None
        #: the int8 evaluator ``with_backend`` made of this one's weights (reused, not remade)
        self.int8_twin: Evaluator | None = None
        if _onnx_session is not None:
            self.device = torch.device("cpu")
            self.bf16 = False
        else:
            if model is None:
                raise ValueError("a model or an ONNX session is needed")
            self.device = resolve_device(device)
            self.bf16 = bool(bf16) and self.device.type == "cuda"
            self.model = model.to(self.device).eval()
        self._buffers: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    # -- constructors -----------------------------------------------------------------------

    @classmethod
    def from_checkpoint(
        cls, checkpoint: dict[str, Any] | str | Path, device: str = "auto", bf16: bool = False
    ) -> Evaluator:
        """From a checkpoint dict ``{'model_config': ..., 'model_state': ...}`` or a file saved
        with ``torch.save``, read weights-only (:func:`takzero.nn.safe_load.load_weights_only`:
        no code in the file runs). Extra keys such as ``half_komi`` are kept in ``metadata``.

        Raises FileNotFoundError, ValueError (``UnsafeFileError`` for a file whose pickle would
        run code; an unreadable file), KeyError / RuntimeError (see ``model_from_checkpoint``)."""
        source = None
        if not isinstance(checkpoint, dict):
            source = str(checkpoint)
        checkpoint = checkpoint if isinstance(checkpoint, dict) else load_weights_only(checkpoint)
        model = model_from_checkpoint(checkpoint, source=source)
        check_weights_finite(model, source or "the checkpoint")
        meta = model_metadata(model)
        for key in ("half_komi", "generation"):
            if key in checkpoint:
                meta[key] = checkpoint[key]
        out = cls(model, device=device, bf16=bf16, metadata=meta)
        out.check_outputs_finite(source or "the checkpoint")
        out.calibration_states = calibration_states_of(checkpoint)
        return out

    @classmethod
    def from_torchscript(
        cls, path: str | Path, device: str = "auto", bf16: bool = False
    ) -> Evaluator:
        """From a file written by ``export_torchscript``. A TorchScript archive holds a program
        (TorchScript code run when the model is called): load only files from people you trust;
        a checkpoint or ONNX file is the format to take from a stranger. (Its pickled data is
        read by TorchScript's own unpickler, which knows TorchScript types only: a Python callable
        in it is refused, not called.)

        Raises ValueError (one line naming the file) for a file TorchScript cannot load or one
        without takzero metadata."""
        dev = resolve_device(device)
        extra = {"metadata.json": ""}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated in 2.x
            try:
                module = torch.jit.load(str(path), map_location=dev, _extra_files=extra)
            except RuntimeError as e:
                raise ValueError(f"{path}: cannot be read as a TorchScript archive ({one_line_reason(e)})") from None
            except OSError as e:  # a cut-off archive: torch's zip reader raises EINVAL, unnamed
                raise unreadable_file_error(path, e) from None
        if not extra["metadata.json"]:
            raise ValueError(f"{path} has no takzero metadata")
        out = cls(module, device=dev, bf16=bf16, metadata=json.loads(extra["metadata.json"]))
        out.check_outputs_finite(str(path))
        return out

    @classmethod
    def from_onnx(cls, path: str | Path, providers: list[str] | None = None, threads: int = 1) -> Evaluator:
        """From a file written by ``export_onnx`` (float32, or int8 from ``export --int8``), run
        by onnxruntime (CPU provider unless ``providers`` says otherwise) on ``threads`` intra-op
        threads (:func:`onnx_session`). Raises FileNotFoundError, ValueError (one line naming the
        file) for a file onnxruntime cannot read or one without takzero metadata, ImportError
        without onnxruntime."""
        if not Path(path).exists():
            raise FileNotFoundError(f"{path}: no such file")
        check_onnx_file(path)  # a regular file of bounded size and weights (safe_load)
        data = Path(path).read_bytes()
        try:
            session = onnx_session(data, threads, providers)
        except Exception as e:  # noqa: BLE001 - onnxruntime raises its own types (InvalidProtobuf, ...)
            raise ValueError(f"{path}: cannot be read as an ONNX model: truncated, corrupt or another "
                             f"format ({one_line_reason(e)})") from None  # fmt: skip
        meta_map = session.get_modelmeta().custom_metadata_map
        if "takzero" not in meta_map:
            raise ValueError(f"{path} has no takzero metadata")
        out = cls(None, metadata=json.loads(meta_map["takzero"]), _onnx_session=session)
        out.onnx_bytes, out.threads = data, max(1, int(threads))
        out.check_outputs_finite(str(path))
        return out

    @classmethod
    def load(cls, path: str | Path, device: str = "auto", bf16: bool = False, threads: int = 1) -> Evaluator:
        """Pick the format of ``path``: ``.onnx`` -> ONNX (on ``threads`` onnxruntime threads);
        a TorchScript archive -> ``from_torchscript``; otherwise a ``torch.save`` checkpoint."""
        path = Path(path)
        if path.exists():  # a device, a pipe or a huge file is refused before it is read
            check_model_file(path)
        if path.suffix == ".onnx":
            return cls.from_onnx(path, threads=threads)
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                if any("/code/" in n or n.startswith("code/") for n in zf.namelist()):
                    return cls.from_torchscript(path, device=device, bf16=bf16)
        return cls.from_checkpoint(path, device=device, bf16=bf16)

    def check_outputs_finite(self, source: str) -> None:
        """Refuse a network whose outputs are not finite: its raw policy logits (on the legal
        moves) and WDL logits on :data:`CHECK_PLIES` + 1 positions of a fixed game from the start
        position. Finite weights do not make finite outputs (a BatchNorm running variance below
        zero gives NaN everywhere), and a network of NaN outputs would play its first legal move
        every time, or keep the int8 calibration's games from ever starting. The constructors
        that read files (:meth:`from_checkpoint`, :meth:`from_torchscript`, :meth:`from_onnx`) and
        ``takzero.export`` call it; one batched network call.

        Raises ValueError (one line naming ``source``): ``'<source>: its outputs are not finite
        (NaN or inf on 9 of 9 test positions): the network cannot play ...'``."""
        hk = self.metadata.get("half_komi", 0)
        hk = hk if isinstance(hk, int) and not isinstance(hk, bool) and -200 <= hk <= 200 else 0
        states = check_positions(self.size, hk)
        planes, mask = self.buffers(len(states))
        encode(states, planes, self.layers, self.feature_version)
        legal_mask(states, mask)
        if self._session is not None:
            logits, wdl_logits = self._run_onnx(planes)
        else:
            assert self.model is not None  # an evaluator without a session has a network
            with torch.inference_mode():
                out = self.model(torch.as_tensor(planes).to(self.device, dtype=torch.float32))
            logits, wdl_logits = (np.asarray(t.float().cpu().numpy()) for t in out[:2])
        ok = np.isfinite(np.where(mask, logits, 0.0)).all(axis=1) & np.isfinite(wdl_logits).all(axis=1)
        if not ok.all():
            raise ValueError(f"{source}: its outputs are not finite (NaN or inf on {int((~ok).sum())} of "
                             f"{len(ok)} test positions): the network cannot play (weights out of "
                             "range, such as a BatchNorm running variance below zero)")  # fmt: skip

    def load_state_dict(self, model_state: dict[str, Any]) -> None:
        """Replace the weights of an eager network (a :class:`PolicyValueNet`, e.g. a new
        generation from the trainer). Raises TypeError for a TorchScript or ONNX evaluator."""
        if not isinstance(self.model, PolicyValueNet):
            raise TypeError("only an eager network (PolicyValueNet) evaluator can take new weights")
        self.model.load_state_dict(model_state)
        self.model.eval()
        self.int8_twin = None

    @property
    def config(self) -> ModelConfig:
        """The model's ``ModelConfig`` (from the metadata)."""
        return ModelConfig.from_dict(self.metadata["model_config"])

    # -- evaluation -------------------------------------------------------------------------

    def buffers(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """The preallocated (planes (batch, C, N, N) float32, mask (batch, A) bool) input
        buffers for ``batch`` (pinned memory on CUDA). Callers may fill them (planes with
        ``encode(states, planes, self.layers, self.feature_version)``) and pass them to
        ``evaluate_planes``; ``evaluate`` overwrites them. Each thread gets its own, so two
        threads may evaluate at once."""
        key = (threading.get_ident(), batch)  # two threads searching at once: one set each
        buf = self._buffers.get(key)
        if buf is None:
            if len(self._buffers) >= _MAX_BUFFERS:
                self._buffers.clear()
            shape = (batch, self.in_channels, self.size, self.size)
            pin = self.device.type == "cuda"
            planes = torch.empty(shape, dtype=torch.float32, pin_memory=pin).numpy()
            mask = torch.empty((batch, self.num_actions), dtype=torch.bool, pin_memory=pin).numpy()
            buf = (planes, mask)
            self._buffers[key] = buf
        return buf

    def evaluate(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Evaluate positions.

        Args:
            states: (B, STATE_LEN) int64 positions of the model's board size.

        Returns:
            (priors (B, A) float32, values (B,) float32, wdl (B, 3) float32), see the module
            docstring.

        Raises:
            ValueError: wrong shape/dtype or a board size other than the model's.
        """
        states = np.asarray(states)
        if states.ndim == 1:
            states = states[None]
        if states.ndim != 2 or states.shape[1] != STATE_LEN or states.dtype != np.int64:
            raise ValueError(f"states must be (B, {STATE_LEN}) int64, got {states.shape}")
        if len(states) and not (states[:, I_SIZE] == self.size).all():
            raise ValueError(f"this model plays size {self.size}")
        planes, mask = self.buffers(len(states))
        encode(states, planes, self.layers, self.feature_version)
        if self._session is not None and len(states):  # priors from the legal moves, no mask
            logits, wdl_logits = self._run_onnx(planes)
            wdl, values = wdl_values_np(wdl_logits)
            return legal_softmax(states, logits), values, wdl
        legal_mask(states, mask)
        return self.evaluate_planes(planes, mask)

    def evaluate_planes(
        self, planes: np.ndarray | torch.Tensor, masks: np.ndarray | torch.Tensor
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Evaluate already encoded positions: planes (B, C, N, N) float32 and legal masks (B, A)
        bool (numpy or torch). Returns (priors, values, wdl) like ``evaluate``.

        Raises ValueError on shapes that do not fit the model.
        """
        b = planes.shape[0]
        expect = (b, self.in_channels, self.size, self.size)
        if tuple(planes.shape) != expect or tuple(masks.shape) != (b, self.num_actions):
            raise ValueError(
                f"expected planes {expect} and masks {(b, self.num_actions)}, got "
                f"{tuple(planes.shape)} and {tuple(masks.shape)}"
            )
        if b == 0:
            return (
                np.zeros((0, self.num_actions), np.float32),
                np.zeros(0, np.float32),
                np.zeros((0, 3), np.float32),
            )
        if self._session is not None:
            return self._evaluate_onnx(planes, masks)
        return self._evaluate_torch(planes, masks)

    def _evaluate_onnx(
        self, planes: np.ndarray | torch.Tensor, masks: np.ndarray | torch.Tensor
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if isinstance(masks, torch.Tensor):
            masks = masks.detach().cpu().numpy()
        logits, wdl_logits = self._run_onnx(planes)
        priors = masked_softmax_np(logits, masks)
        wdl, values = wdl_values_np(wdl_logits)
        return priors, values, wdl

    def _run_onnx(self, planes: np.ndarray | torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """(policy logits (B, A), WDL logits (B, 3)) of planes (B, C, N, N) from the onnxruntime
        session."""
        if isinstance(planes, torch.Tensor):
            planes = planes.detach().cpu().numpy()
        logits, wdl_logits, _ = self._session.run(
            None, {"planes": np.ascontiguousarray(planes, dtype=np.float32)}
        )
        return logits, wdl_logits

    def _evaluate_torch(
        self, planes: np.ndarray | torch.Tensor, masks: np.ndarray | torch.Tensor
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        nb = self.device.type == "cuda"
        with torch.inference_mode():
            x = torch.as_tensor(planes).to(self.device, dtype=torch.float32, non_blocking=nb)
            m = torch.as_tensor(masks).to(self.device, dtype=torch.bool, non_blocking=nb)
            assert self.model is not None  # an evaluator without a session has a network
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
                logits, wdl_logits, _ = self.model(x)
            wdl = torch.softmax(wdl_logits.float(), dim=-1)
            values = wdl[:, 0] - wdl[:, 2]
            if self.device.type == "cpu":  # the compiled loop: one pass instead of six
                priors = masked_softmax_np(logits.float().numpy(), m.numpy())
            else:
                priors = masked_softmax(logits.float(), m).cpu().numpy()
            return priors, values.cpu().numpy(), wdl.cpu().numpy()

    def __call__(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Same as ``evaluate``."""
        return self.evaluate(states)


#: Plies of the fixed game whose positions :meth:`Evaluator.check_outputs_finite` evaluates.
CHECK_PLIES = 8


def check_positions(size: int, half_komi: int = 0, plies: int = CHECK_PLIES) -> np.ndarray:
    """(plies + 1, STATE_LEN) int64: the start position of ``size`` and the positions of a fixed
    game from it (each ply the middle move of the legal ones, fewer when the game ends), the
    test positions of :meth:`Evaluator.check_outputs_finite`."""
    from takzero.game.position import Game, Position

    game = Game(Position.start(size, half_komi=half_komi))
    out = [game.position.state.astype(np.int64).copy()]
    for _ in range(plies):
        moves = game.position.legal_moves()
        if game.result.over or not moves:
            break
        game.play(moves[len(moves) // 2])
        out.append(game.position.state.astype(np.int64).copy())
    return np.stack(out)


def check_weights_finite(model: nn.Module, source: str) -> None:
    """Refuse a network with a NaN or inf among its floating-point weights and buffers (it plays
    its first legal move every time). Raises ValueError (one line naming ``source`` and the first
    three such tensors)."""
    bad = [k for k, v in model.state_dict().items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        raise ValueError(f"{source}: its weights are not finite ({', '.join(bad[:3])}"
                         f"{', ...' if len(bad) > 3 else ''})")  # fmt: skip


#: Signature of anything that evaluates a batch of positions like ``Evaluator.evaluate``.
EvaluateFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


def quantize(
    evaluator: Evaluator, states: np.ndarray | None = None, threads: int = 1, seed: int = 0,
) -> tuple[Evaluator, float]:  # fmt: skip
    """The int8 twin of a float32 evaluator (``takzero.nn.quantize``).

    Args:
        evaluator: an ``Evaluator`` of an eager network (a checkpoint) or of a float32 ONNX file.
        states: (K, STATE_LEN) int64 calibration positions of the model's size; None: the ones
            the evaluator's file carries (``evaluator.calibration_states``), else
            :func:`takzero.nn.quantize.policy_games_states` of the network with ``seed`` (its
            float32 graph on one onnxruntime thread plays the games).
        threads: onnxruntime intra-op threads of the int8 session.

    Returns:
        (the int8 ``Evaluator``, seconds the quantization took, calibration included). Its
        metadata is the float32 one's plus ``precision: 'int8'`` and ``calibration_positions``.

    Raises:
        QuantizeError: a TorchScript network (no graph to quantize: use the checkpoint), an
            already quantized one, positions of another size, or onnxruntime refusing the graph.
        ImportError: without onnxruntime.
    """
    t0 = time.perf_counter()
    if evaluator.metadata.get("precision") == "int8":
        raise QuantizeError("the network is already int8")
    try:
        model_bytes = onnx_model_bytes(evaluator)
    except ValueError as e:
        raise QuantizeError(str(e)) from None
    if states is None:
        states = evaluator.calibration_states
    if states is None:
        fp32 = Evaluator(None, metadata=evaluator.metadata, _onnx_session=onnx_session(model_bytes, 1))
        states = policy_games_states(fp32, seed=seed)
    planes = encode_states(states, evaluator.size, evaluator.in_channels, evaluator.layers, evaluator.feature_version)
    int8 = quantize_onnx_bytes(model_bytes, planes)
    meta = {**evaluator.metadata, "precision": "int8", "calibration_positions": int(len(planes))}
    out = Evaluator(None, metadata=meta, _onnx_session=onnx_session(int8, threads))
    out.onnx_bytes, out.threads = int8, max(1, int(threads))
    return out, time.perf_counter() - t0
