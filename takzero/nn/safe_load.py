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

Other formats: an ONNX file (``Evaluator.from_onnx``) is a graph of operators run by
onnxruntime, with no Python in it; a TorchScript archive (``Evaluator.from_torchscript``,
``torch.jit.load``) holds a program, TorchScript code that runs when the model is called, so it
is to be taken only from people one trusts (README, "Which model files are safe").
"""

from __future__ import annotations

import io
import pickle
import re
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = [
    "UnsafeFileError", "CONVERT_COMMAND", "load_weights_only", "load_trusted", "to_plain",
    "dumps_weights_only", "one_line_reason",
]

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


def load_weights_only(path: str | Path, map_location: str | torch.device = "cpu") -> Any:
    """Read a ``torch.save`` file with ``torch.load(weights_only=True)``: tensors and plain
    Python values only; no code in the file runs.

    Raises:
        FileNotFoundError: no such file.
        UnsafeFileError: the file's pickle needs other objects (it names a Python callable or
            class, such as ``posix.system`` or a numpy type); the message names the file, what it
            asked for, and the command that converts a trusted file once.
        ValueError: the file is not a ``torch.save`` file, or is truncated or corrupt (a
            TorchScript archive included: ``Evaluator.load`` reads those).
        OSError: the file cannot be read (permissions, a folder).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
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
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
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
        items = [(_plain(k, f"{where} key {k!r}"), _plain(v, f"{where}[{k!r}]")) for k, v in obj.items()]
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
                    "is not a plain value or tensor (a weights-only load would refuse it)")  # fmt: skip
