"""Batched network evaluation for search and play: the ``Evaluator`` front end.

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

Reading and writing model files: ``takzero.nn.model_export`` (metadata, TorchScript and ONNX
export); other CPU backends of an evaluator (onnxruntime float32, int8): ``takzero.nn.backends``;
the compiled masked softmax and WDL softmax of the outputs: ``takzero.nn.outputs``.
"""

from __future__ import annotations

import json
import threading
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from takzero.game.core import I_SIZE, STATE_LEN
from takzero.nn.actions import legal_mask, legal_softmax, num_actions
from takzero.nn.features import check_version, encode, layers_from_channels
from takzero.nn.interface import PolicyValueNet
from takzero.nn.losses import masked_softmax
from takzero.nn.model import ModelConfig, model_from_checkpoint
from takzero.nn.model_export import model_metadata
from takzero.nn.outputs import masked_softmax_np, wdl_values_np
from takzero.nn.quantize import calibration_states_of
from takzero.nn.safe_load import (
    check_model_file,
    check_onnx_file,
    load_weights_only,
    one_line_reason,
    unreadable_file_error,
)

__all__ = [
    "CHECK_PLIES",
    "EvaluateFn",
    "Evaluator",
    "check_positions",
    "check_weights_finite",
    "onnx_session",
    "resolve_device",
]

_MAX_BUFFERS = 16


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``'auto'`` -> CUDA if available else CPU; anything else -> ``torch.device(device)``."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


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
                             f"format ({one_line_reason(e)})") from None
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
                             "range, such as a BatchNorm running variance below zero)")

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
                         f"{', ...' if len(bad) > 3 else ''})")


#: Signature of anything that evaluates a batch of positions like ``Evaluator.evaluate``.
EvaluateFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]
