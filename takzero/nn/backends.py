"""The CPU backends an evaluator's network runs on: PyTorch as loaded, onnxruntime in float32,
or onnxruntime with the network quantized to int8.

``with_backend`` turns an ``Evaluator`` (``takzero.nn.inference``) into one of another backend
(:data:`EVAL_BACKENDS`); ``onnx_evaluator`` exports an eager network to ONNX in memory and runs it
in an onnxruntime session; ``quantize`` makes an evaluator's int8 twin (``takzero.nn.quantize``);
``choose_backend`` times PyTorch against onnxruntime for a self-play batch.
"""

from __future__ import annotations

import time
from typing import Any, cast

import numpy as np
from torch import nn

from takzero.nn.inference import Evaluator, onnx_session
from takzero.nn.interface import PolicyValueNet
from takzero.nn.model_export import (
    DEFAULT_ONNX_OPSET,
    cpu_eval_copy,
    model_metadata,
    onnx_bytes_of_model,
)
from takzero.nn.quantize import (
    QuantizeError,
    encode_states,
    policy_games_states,
    quantize_onnx_bytes,
)

__all__ = [
    "EVAL_BACKENDS",
    "choose_backend",
    "onnx_evaluator",
    "onnx_model_bytes",
    "quantize",
    "with_backend",
]


def onnx_model_bytes(ev: Evaluator) -> bytes:
    """The float32 ONNX graph an evaluator runs: exported from its eager network, or the bytes of
    the ONNX file it was loaded from. Raises ValueError for a TorchScript evaluator (no network
    to export: use the checkpoint or the ``.onnx`` file)."""
    if ev.onnx_bytes is not None:
        return ev.onnx_bytes
    if not isinstance(ev.model, PolicyValueNet):
        raise ValueError("a TorchScript export cannot be converted: use the checkpoint or the .onnx file")
    return onnx_bytes_of_model(ev.model)


def onnx_evaluator(model: PolicyValueNet, threads: int = 1, opset: int = DEFAULT_ONNX_OPSET) -> Evaluator:
    """An ``Evaluator`` running ``model``'s current weights in onnxruntime on the CPU: the model
    (a float32 CPU eval copy) is exported to ONNX in memory (TorchScript-based exporter, opset
    ``opset`` < 18, the graph of ``export_onnx``) and loaded into a session with ``threads``
    intra-op threads and one inter-op thread (self-play: one thread per worker). Call it again for
    new weights. Raises ImportError without onnxruntime."""
    data = onnx_bytes_of_model(model, opset)
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
    * ``'int8'``: the network quantized to int8 (:func:`quantize`), calibrated
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
    own: dict[str, Any] = {k: out.metadata[k] for k in ("precision", "calibration_positions") if k in out.metadata}
    out.metadata = {**out.metadata, **ev.metadata, **own}
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
        ("torch", Evaluator(cast(nn.Module, cpu_eval_copy(model)), device="cpu")),
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


def quantize(
    evaluator: Evaluator, states: np.ndarray | None = None, threads: int = 1, seed: int = 0,
) -> tuple[Evaluator, float]:
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
