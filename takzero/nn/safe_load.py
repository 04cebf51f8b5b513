"""Loading model and checkpoint files without running code from them: the one place where
takzero calls ``torch.load``.

A ``torch.save`` file is a pickle, and a pickle can name any Python callable to be called while it
is read (``__reduce__``): ``torch.load(weights_only=False)`` of a file from a stranger runs the
stranger's code. Every model and checkpoint file is therefore read by :func:`load_weights_only`,
``torch.load(weights_only=True)``: only tensors and plain Python values (dicts, lists, tuples,
sets, numbers, strings, bytes, None) are rebuilt, and a file that asks for anything else is refused with
:class:`UnsafeFileError`, never unpickled. Nothing is added to torch's allow-list: takzero's
files hold only plain values (:func:`to_plain` makes sure of it before a checkpoint is written).

A file one trusts that needs more (written by another tool, or holding numpy scalars) is
converted once by ``python -m takzero.export --convert FILE`` (:func:`load_trusted` is the one
full unpickling load, used only by that command).

What such a file holds is a stranger's word, also when it is shown: every message quoting a value
read from one uses :func:`takzero.nn.quoting.short_repr` (re-exported here), and what prints a
string of one on a terminal :func:`takzero.nn.quoting.shown`.

Other formats: an ONNX file (``Evaluator.from_onnx``) is a graph of operators run by
onnxruntime, with no Python in it; a TorchScript archive (``Evaluator.from_torchscript``,
``torch.jit.load``) holds a program, TorchScript code that runs when the model is called, so it
is to be taken only from people one trusts (README, "Which model files are safe").
"""

from __future__ import annotations

import io
import math
import os
import pickle
import re
import stat
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from takzero.nn.quoting import short_repr, shown

__all__ = [
    "UnsafeFileError", "CONVERT_COMMAND", "load_weights_only", "load_trusted", "to_plain",
    "dumps_weights_only", "one_line_reason", "MAX_MODEL_FILE_BYTES", "MAX_ONNX_WEIGHT_BYTES",
    "MAX_ONNX_TENSOR_ELEMENTS", "check_model_file", "check_onnx_file", "checkpoint_problem",
    "check_checkpoint", "short_repr", "shown",
]

#: The largest model or checkpoint file read (2 GiB): a 40-block, 256-channel network is some
#: 190 MB of float32 weights, 0.6 GB with its optimiser state in a checkpoint. A larger file, or
#: anything that is not a regular file (``/dev/zero``, a pipe), is refused before it is read.
MAX_MODEL_FILE_BYTES = 2 * 2**30
#: The most bytes of weights (initializers and constants) of an ONNX file: 1 GiB, 250 million
#: float32 parameters (``takzero.nn.model_config.MAX_PARAMETERS``).
MAX_ONNX_WEIGHT_BYTES = 2**30
#: The most elements of one tensor of an ONNX graph, per position of the batch, where shape
#: inference can tell (2**26: 256 MiB of float32, some 4,000 times the largest planes of a
#: 1024-channel 8x8 network).
MAX_ONNX_TENSOR_ELEMENTS = 2**26

#: The command that rewrites a trusted file as a weights-only one (``takzero.export --convert``).
CONVERT_COMMAND = "python -m takzero.export --convert"


class UnsafeFileError(ValueError):
    """A file whose pickle needs more than tensors and plain values (it could run code): refused
    without being unpickled."""


def _unsafe_globals(path: Path, message: str) -> list[str]:
    """The Python globals a refused pickle names: torch's scan of the file (it reads the opcodes
    and calls nothing), else the one named in torch's message."""
    try:
        found = list(torch.serialization.get_unsafe_globals_in_checkpoint(str(path)))
    except Exception:  # noqa: BLE001 - the legacy (non-zip) format cannot be scanned
        found = []
    return found or re.findall(r"GLOBAL ([\w.]+)", message)


def one_line_reason(e: BaseException) -> str:
    """One line of torch's (long, multi-line) error text: the detail after "WeightsUnpickler
    error:" when there is one, else the first sentence."""
    text = str(e)
    if "WeightsUnpickler error:" in text:
        rest = [ln.strip() for ln in text.split("WeightsUnpickler error:", 1)[1].splitlines()]
        text = next((ln for ln in rest if ln), "unknown")
    line = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    return line.split(". ")[0].rstrip(".")[:200]


def unreadable_file_error(path: str | Path, error: OSError) -> OSError | ValueError:
    """What a model loader raises for an ``OSError`` met while reading an existing ``path``: the
    error itself when the file system refused (no such file, permissions, a folder), else a
    ValueError naming the file as truncated or corrupt (torch's zip reader raises
    ``OSError(EINVAL)`` for a cut-off archive, with no file name in its message)."""
    if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return error
    return ValueError(f"{path}: cannot be read: truncated or corrupt ({one_line_reason(error)})")


def check_model_file(path: str | Path, max_bytes: int = MAX_MODEL_FILE_BYTES) -> None:
    """Refuse, before anything reads it, a model path that is not a regular file of at most
    ``max_bytes`` bytes (default :data:`MAX_MODEL_FILE_BYTES`): a device such as ``/dev/zero`` or
    ``/dev/urandom``, a pipe or a socket would be read without end. A folder is left to the
    loader (its own one-line error).

    Raises FileNotFoundError (no such file), ValueError (one line naming the file: not a regular
    file, or too large), OSError (cannot be looked at: permissions)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    if stat.S_ISDIR(st.st_mode):
        return
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path}: not a regular file (a device, a pipe or a socket); a model is a file")
    if st.st_size > max_bytes:
        raise ValueError(f"{path}: {st.st_size:,} bytes, over the bound of {max_bytes:,} bytes of a "
                         "model file (MAX_MODEL_FILE_BYTES)")


def check_onnx_file(
    path: str | Path,
    max_bytes: int = MAX_MODEL_FILE_BYTES,
    max_weight_bytes: int = MAX_ONNX_WEIGHT_BYTES,
    max_tensor_elements: int = MAX_ONNX_TENSOR_ELEMENTS,
) -> None:
    """Check an ONNX file before a session is made of it (call it first in
    ``Evaluator.from_onnx``): :func:`check_model_file` (a regular file of at most ``max_bytes``),
    then, with the ``onnx`` package (skipped without it), the graph read without its external
    data: no weights in external files (a session from the file's bytes could not read them, and
    their size is not in the file), the initializers' and constants' bytes at most
    ``max_weight_bytes`` and finite (no NaN or inf in a floating-point initializer, no NaN in
    a node's constant: such a network plays its first legal move every time, refused like a
    checkpoint's), and every
    tensor whose shape inference knows (the batch axis counted as
    1) at most ``max_tensor_elements`` elements, so that a small graph that makes a huge tensor
    (``ConstantOfShape``, ``Expand``) at its first run is refused.

    Raises FileNotFoundError, ValueError (one line naming the file and the bound, or the first
    weights that are not finite)."""
    check_model_file(path, max_bytes)
    try:
        import onnx
        from onnx import numpy_helper  # noqa: F401 - part of the package checked for
    except ImportError:
        return
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and others: not an ONNX file
        raise ValueError(f"{path}: cannot be read as an ONNX model: truncated, corrupt or another "
                         f"format ({one_line_reason(e)})") from None
    total = 0
    tensors: list[tuple[Any, bool]] = []  # (TensorProto, whether it is an initializer)
    for graph in _onnx_graphs(proto.graph):
        tensors.extend((t, True) for t in graph.initializer)
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    tensors.append((attr.t, False))
                elif attr.type == onnx.AttributeProto.TENSORS:
                    tensors.extend((t, False) for t in attr.tensors)
    for t, _ in tensors:
        if t.data_location == onnx.TensorProto.EXTERNAL or len(t.external_data):
            raise ValueError(f"{path}: its weight {short_repr(t.name)} is in an external data file; takzero "
                             "reads ONNX models of one file only")
        total += _onnx_tensor_bytes(t)
        if total > max_weight_bytes:
            raise ValueError(f"{path}: more than {max_weight_bytes:,} bytes of weights, over the "
                             "bound of an ONNX model (MAX_ONNX_WEIGHT_BYTES)")
    bad = [shown(t.name, 60) or "(unnamed)" for t, weight in tensors if not _onnx_tensor_finite(t, weight)]
    if bad:  # a network of NaN or inf plays its first legal move every time (as a checkpoint's)
        raise ValueError(f"{path}: its weights are not finite (NaN or inf in {', '.join(bad[:3])}"
                         f"{', ...' if len(bad) > 3 else ''})")
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    except Exception:  # noqa: BLE001 - a graph shape inference cannot follow: the session decides
        return
    values = [*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input]
    for v in values:
        if not v.type.HasField("tensor_type") or not v.type.tensor_type.HasField("shape"):
            continue
        n = 1
        for d in v.type.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                n *= max(1, d.dim_value)
        if n > max_tensor_elements:
            raise ValueError(f"{path}: its tensor {short_repr(v.name)} has {n:,} elements per position, over "
                             f"the bound of {max_tensor_elements:,} (MAX_ONNX_TENSOR_ELEMENTS)")


def _onnx_graphs(graph: Any) -> list[Any]:
    """``graph`` and every subgraph of its nodes (``If``/``Loop`` bodies), depth first."""
    out = [graph]
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                out.extend(_onnx_graphs(attr.g))
            for g in attr.graphs:
                out.extend(_onnx_graphs(g))
    return out


def _onnx_tensor_finite(t: Any, weight: bool = True) -> bool:
    """False when the floating-point TensorProto ``t`` holds a NaN, or an infinity when it is a
    ``weight`` (an initializer: a constant of a node may be -inf, a mask's fill); its bytes are
    already bounded by :data:`MAX_ONNX_WEIGHT_BYTES`. True for other types and for a tensor
    whose data cannot be read (the session will say so)."""
    import onnx
    from onnx import numpy_helper

    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
              onnx.TensorProto.BFLOAT16)
    if t.data_type not in floats:
        return True
    try:
        values = np.asarray(numpy_helper.to_array(t)).astype(np.float32, copy=False)
    except Exception:  # noqa: BLE001 - wrong dims for its data: onnxruntime refuses it itself
        return True
    return bool(np.isfinite(values).all() if weight else not np.isnan(values).any())


def _onnx_tensor_bytes(t: Any) -> int:
    """The bytes a TensorProto ``t`` stands for: its elements (dims) times its element size, or
    the bytes it holds when that is more (a tensor with wrong dims)."""
    import onnx

    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    except Exception:  # noqa: BLE001 - an unknown or string type
        itemsize = 8
    n = 1
    for d in t.dims:
        n *= max(0, int(d))
    held = len(t.raw_data) + 8 * (len(t.float_data) + len(t.int32_data) + len(t.int64_data)
                                  + len(t.double_data) + len(t.uint64_data)) + sum(len(x) for x in t.string_data)
    return max(n * itemsize, held)


#: The half-komi a checkpoint may say (``takzero.game.position``: komi -100..100 points).
MAX_ABS_HALF_KOMI = 200


def _kind(obj: Any) -> str:
    """A short name of ``obj``'s type for a message ('a list', 'a tensor', 'a str')."""
    if isinstance(obj, torch.Tensor):
        return "a tensor"
    name = type(obj).__name__
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


def _integer_problem(value: Any, key: str, low: int, high: int) -> str | None:
    """Why ``value`` (the checkpoint's ``key``) is not an integer in ``low..high``, or None. An
    integral float (``2.0``) counts as an integer; a bool, NaN, inf, ``1.5`` or a string does
    not."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"its {key} is {_kind(value)} ({short_repr(value, 40)}), not an integer"
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        return f"its {key} is {value!r}, not an integer"
    if not low <= value <= high:
        return f"its {key} is {int(value)}, outside {low}..{high}"
    return None


def checkpoint_problem(obj: Any) -> str | None:
    """What is wrong with ``obj`` as a takzero model checkpoint (what ``torch.load`` gave back
    from a model or checkpoint file), in a few words, or None: it must be a dict with
    ``model_config`` and ``model_state``; its ``half_komi``, when present, an
    integer in -200..200; its ``generation``, when present and not None, an integer >= 0. The
    config and the weights themselves are checked later (``takzero.nn.model.model_from_checkpoint``:
    the config's bounds, :func:`~takzero.nn.model.check_weights_fit`)."""
    if not isinstance(obj, dict):
        return f"it holds {_kind(obj)}, not a dict with model_config and model_state"
    missing = [k for k in ("model_config", "model_state") if k not in obj]
    if missing:
        keys = ", ".join(shown(k, 30) for k in list(obj)[:6]) + (", ..." if len(obj) > 6 else "")
        return f"it has no {' and no '.join(missing)} (its keys: {keys or 'none'})"
    if "half_komi" in obj:
        problem = _integer_problem(obj["half_komi"], "half_komi", -MAX_ABS_HALF_KOMI, MAX_ABS_HALF_KOMI)
        if problem:
            return problem
    if obj.get("generation") is not None:
        problem = _integer_problem(obj["generation"], "generation", 0, 2**62)
        if problem:
            return problem
    return None


def check_checkpoint(obj: Any, source: str | Path) -> None:
    """Raise ValueError (one line: ``'<source>: not a takzero checkpoint: <what is wrong>'``)
    when :func:`checkpoint_problem` finds something wrong with ``obj``, read from ``source``."""
    problem = checkpoint_problem(obj)
    if problem:
        raise ValueError(f"{source}: not a takzero checkpoint: {problem}")


def load_weights_only(path: str | Path, map_location: str | torch.device = "cpu") -> Any:
    """Read a ``torch.save`` file with ``torch.load(weights_only=True)``: tensors and plain
    Python values only; no code in the file runs.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a regular file (``/dev/zero``, a pipe) or one over
            :data:`MAX_MODEL_FILE_BYTES` (:func:`check_model_file`), refused before reading.
        UnsafeFileError: the file's pickle needs other objects (it names a Python callable or
            class, such as ``posix.system`` or a numpy type); the message names the file, what it
            asked for, and the command that converts a trusted file once.
        ValueError: the file is not a ``torch.save`` file, or is truncated or corrupt (a
            TorchScript archive included: ``Evaluator.load`` reads those).
        OSError: the file cannot be read (permissions, a folder).
    """
    path = Path(path)
    check_model_file(path)
    try:
        with warnings.catch_warnings():  # torch's notes on pickle protocols and TorchScript:
            warnings.simplefilter("ignore", UserWarning)  # the error below says it in one line
            return torch.load(str(path), map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        names = _unsafe_globals(path, str(e))
        if names:
            raise UnsafeFileError(
                f"{path}: not a weights-only file (its pickle asks for {', '.join(names)}: more than "
                "tensors and plain values, which could run code), so it was not loaded; if you "
                f"trust where it came from, convert it once with: {CONVERT_COMMAND} {path}"
            ) from None
        raise ValueError(f"{path}: cannot be read: not a torch.save file ({one_line_reason(e)})") from None
    except OSError as e:
        raise unreadable_file_error(path, e) from None
    except Exception as e:  # noqa: BLE001 - torch raises RuntimeError, EOFError, ... for a bad file
        if "TorchScript" in str(e):
            raise ValueError(f"{path}: a TorchScript archive, not a checkpoint") from None
        raise ValueError(
            f"{path}: cannot be read: not a torch.save file, or truncated or corrupt ({one_line_reason(e)})"
        ) from None


def dumps_weights_only(obj: Any, name: str | Path = "the data") -> bytes:
    """``torch.save`` bytes of ``to_plain(obj)``, checked to read back with
    ``torch.load(weights_only=True)`` before they are returned (``takzero.export --convert``
    writes them).

    Raises TypeError (naming ``name`` and the place) for something :func:`to_plain` cannot make
    plain, ValueError when the bytes would not read back weights-only."""
    try:
        plain = to_plain(obj)
    except TypeError as e:
        raise TypeError(f"{name}: cannot be made weights-only: {e}") from None
    buf = io.BytesIO()
    torch.save(plain, buf)
    data = buf.getvalue()
    try:
        torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any failure means the conversion did not work
        raise ValueError(f"{name}: the converted data does not load weights-only ({one_line_reason(e)})") from None
    return data


def load_trusted(path: str | Path) -> Any:
    """Read a ``torch.save`` file with full unpickling (``weights_only=False``): the file's pickle
    may run any code. Only for a file the user vouches for (``takzero.export --convert``);
    nothing else in takzero calls it.

    Raises FileNotFoundError for a missing file, ValueError for one torch cannot read."""
    path = Path(path)
    check_model_file(path)
    try:
        return torch.load(str(path), map_location="cpu", weights_only=False)
    except OSError as e:
        raise unreadable_file_error(path, e) from None
    except Exception as e:  # noqa: BLE001 - torch raises many types for a bad file
        raise ValueError(f"{path}: cannot be read: not a torch.save file ({one_line_reason(e)})") from None


def to_plain(obj: Any) -> Any:
    """``obj`` with numpy scalars made Python numbers (``np.float64(1.5)`` -> ``1.5``) and numpy
    arrays made tensors, inside dicts (keys too), lists, tuples and sets; everything else that is
    already a tensor or plain value is kept, and a container with nothing to change is returned
    as the same object (a state dict's ``OrderedDict`` and its ``_metadata`` stay). What
    :func:`load_weights_only` can read back.

    Raises TypeError naming the first other object found and its place (e.g. ``['run']['x']``),
    which a weights-only load would refuse."""
    return _plain(obj, "")


#: What torch's weights-only unpickler rebuilds besides tensors and containers (exact types: an
#: IntEnum or a str subclass is not plain; frozenset, range and slice are refused by torch).
_PLAIN = (bool, int, float, complex, str, bytes, bytearray)
_KEPT = (torch.Tensor, torch.dtype, torch.device, torch.Size)


def _plain(obj: Any, where: str) -> Any:
    if isinstance(obj, np.generic):  # first: np.float64 is a float subclass
        return obj.item()
    if obj is None or type(obj) in _PLAIN or isinstance(obj, _KEPT):
        return obj
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(obj))
    if isinstance(obj, dict):
        items = [(_plain(k, f"{where} key {short_repr(k)}"), _plain(v, f"{where}[{short_repr(k)}]"))
                 for k, v in obj.items()]
        same = all(k2 is k and v2 is v for (k2, v2), (k, v) in zip(items, obj.items(), strict=True))
        if same and type(obj) in (dict, OrderedDict):
            return obj
        out = type(obj)(items) if type(obj) in (dict, OrderedDict) else dict(items)
        if hasattr(obj, "_metadata"):  # a module state dict's version information
            out._metadata = obj._metadata  # type: ignore[attr-defined]
        return out
    if type(obj) in (list, tuple, set):
        vals = [_plain(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        if all(a is b for a, b in zip(vals, obj, strict=True)):
            return obj
        return type(obj)(vals)
    raise TypeError(f"{type(obj).__module__}.{type(obj).__qualname__} at {where or 'the top'} "
                    "is not a plain value or tensor (a weights-only load would refuse it)")
