"""int8 networks: post-training static quantization with onnxruntime, calibrated on real positions.

The float32 network is exported to ONNX (``model_export.onnx_bytes_of_model``) and quantized by
``onnxruntime.quantization.quantize_static`` (QDQ format, per-channel symmetric int8 weights,
uint8 activations, MinMax calibration: the recipe of onnxruntime's "Choosing parameters for CPU
inference", which runs the int8 kernels with VNNI where the CPU has it). The result is an
``Evaluator`` over an onnxruntime session, used wherever a float32 one is (search, play,
self-play, evaluation).

Calibration sets each activation's range from the network's outputs on a set of positions. They
are always positions of games, never random planes (random planes give ranges real positions never
reach, and so coarser steps where they do):

* a checkpoint written by a training run carries its own (``calibration_states``: the newest
  self-play positions when it was written; :data:`CALIBRATION_KEY`), so the same file gives the same
  int8 network on every machine;
* any other network file gets them from the network itself (:func:`policy_games_states`): games
  of the float32 network playing moves drawn from its own policy with a fixed seed, at the komi the
  model was trained for. The same file gives the same positions and the same int8 network on
  every machine where float rounding does not change a drawn move (a draw lands within 1e-6 of a
  boundary in rare cases).

Quantization is deterministic: the same network and the same positions give bit-identical int8
weights and outputs (``tests/test_quantize.py``). It costs about a second for the shipped 4x32
networks (:func:`quantize` returns the seconds it took).

Post-training int8 is not free: Leela Chess Zero found such networks weaker and trained with
quantization instead (lc0 issue #794). ``docs/results.md`` ("int8") has what it costs here.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from takzero.game.core import I_SIZE, STATE_LEN
from takzero.game.position import Game, Position
from takzero.nn.actions import action_to_move
from takzero.nn.features import encode

__all__ = [
    "CALIBRATION_KEY",
    "CALIBRATION_POSITIONS",
    "MAX_BAD_PRIORS",
    "QuantizeError",
    "calibration_states_of",
    "policy_games_states",
    "encode_states",
    "quantize_onnx_bytes",
]

#: Key of a checkpoint's calibration positions: (K, STATE_LEN) int64 tensor of game positions.
CALIBRATION_KEY = "calibration_states"
#: Calibration positions used by default (enough for stable MinMax ranges on the 4x32 nets: the
#: outputs of 512 and 1,024 positions differed by less than the int8 rounding itself).
CALIBRATION_POSITIONS = 512
#: Positions whose priors may be unusable (NaN, inf, all zero: the game restarts) before the
#: calibration games give up (:func:`policy_games_states`).
MAX_BAD_PRIORS = 64
#: Positions per calibration batch fed to onnxruntime's calibrator.
_CALIBRATION_BATCH = 64


class QuantizeError(ValueError):
    """A network that cannot be quantized (an unsupported format, no positions, an onnxruntime
    failure); the message is one line naming what."""


def policy_games_states(
    evaluator: Any, positions: int = CALIBRATION_POSITIONS, games: int = 16, seed: int = 0,
    half_komi: int | None = None,
) -> np.ndarray:
    """Positions of games the network plays against itself with moves drawn from its own policy.

    Args:
        evaluator: a float32 ``takzero.nn.inference.Evaluator`` (its ``size``, ``evaluate``).
        positions: how many positions to return (>= 1).
        games: games played side by side (one batched network call per ply).
        seed: the seed of the move draws (``numpy.random.default_rng``).
        half_komi: the komi of the games in half points; None: the model's own
            (``metadata['half_komi']``, 0 when it has none).

    Returns:
        (positions, STATE_LEN) int64: every position of the games (the start position of each
        game included once), finished games replaced by new ones until there are enough.

    Raises:
        ValueError: ``positions`` or ``games`` below 1.
        QuantizeError: the network's priors are not finite (or all zero) on more than
            :data:`MAX_BAD_PRIORS` rows, or the positions are not made within
            ``2 * positions + 64`` network calls: a network of NaN outputs would restart its
            games for ever.
    """
    if positions < 1 or games < 1:
        raise ValueError(f"positions and games must be >= 1, got {positions} and {games}")
    max_calls = 2 * positions + 64  # a call adds a position per game in play, bar restarts
    bad = calls = 0
    size = int(evaluator.size)
    hk = int(evaluator.metadata.get("half_komi", 0) if half_komi is None else half_komi)
    rng = np.random.default_rng(seed)
    start = Position.start(size, half_komi=hk)
    live = [Game(start, ply_limit=4 * size * size) for _ in range(games)]
    out: list[np.ndarray] = []
    first = True
    while len(out) < positions:
        states = np.stack([g.position.state for g in live]).astype(np.int64)
        if first:  # the start position once, not once per game
            out.append(states[0].copy())
            first = False
        if calls >= max_calls:
            raise QuantizeError(f"the network's own games gave {len(out)} of {positions} calibration "
                                f"positions in {calls} network calls")
        calls += 1
        priors, _, _ = evaluator.evaluate(states)
        for i, g in enumerate(live):
            p = priors[i].astype(np.float64)
            total = p.sum()
            if not np.isfinite(total) or total <= 0:
                bad += 1
                if bad > MAX_BAD_PRIORS:
                    raise QuantizeError(f"the network's priors are not finite (NaN or inf) on {bad} "
                                        "positions of its own games: it cannot be calibrated")
                live[i] = Game(start, ply_limit=4 * size * size)
                continue
            action = int(rng.choice(len(p), p=p / total))
            g.play(int(action_to_move(action, size)))
            if g.result.over:
                live[i] = Game(start, ply_limit=4 * size * size)
            else:
                out.append(g.position.state.astype(np.int64).copy())
    return np.stack(out[:positions])


def calibration_states_of(checkpoint: dict[str, Any]) -> np.ndarray | None:
    """The calibration positions a checkpoint dict carries (:data:`CALIBRATION_KEY`) as a
    (K, STATE_LEN) int64 array, or None when it carries none. Raises QuantizeError for an
    entry of another shape or kind."""
    raw = checkpoint.get(CALIBRATION_KEY)
    if raw is None:
        return None
    arr = np.asarray(raw.numpy() if hasattr(raw, "numpy") else raw)
    if arr.ndim != 2 or arr.shape[1] != STATE_LEN or arr.dtype.kind not in "iu" or len(arr) == 0:
        raise QuantizeError(f"{CALIBRATION_KEY} must be (K, {STATE_LEN}) integers, got {arr.shape} {arr.dtype}")
    return arr.astype(np.int64)


class _Reader:
    """onnxruntime ``CalibrationDataReader``: the encoded planes of the positions, a batch at a time."""

    def __init__(self, planes: np.ndarray) -> None:
        self._batches = [planes[i : i + _CALIBRATION_BATCH] for i in range(0, len(planes), _CALIBRATION_BATCH)]
        self._i = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self._i >= len(self._batches):
            return None
        self._i += 1
        return {"planes": self._batches[self._i - 1]}

    def rewind(self) -> None:
        self._i = 0


def encode_states(states: np.ndarray, size: int, in_channels: int, layers: int, version: int) -> np.ndarray:
    """(K, STATE_LEN) int64 positions of one board size -> (K, C, N, N) float32 planes of the
    model's feature version. Raises QuantizeError for positions of another size."""
    states = np.ascontiguousarray(states, dtype=np.int64)
    if states.ndim != 2 or states.shape[1] != STATE_LEN:
        raise QuantizeError(f"calibration positions must be (K, {STATE_LEN}), got {states.shape}")
    if not (states[:, I_SIZE] == size).all():
        raise QuantizeError(f"calibration positions must be of the model's size {size}")
    planes = np.empty((len(states), in_channels, size, size), np.float32)
    encode(states, planes, layers, version)
    return planes


def _initializer_identities_inlined(onnx_model: bytes) -> bytes:
    """``onnx_model`` with every ``Identity`` of an initializer replaced by a copy of it. The
    exporter shares equal weights through such nodes (a fresh network's convolution biases are
    all zeros), and onnxruntime's quantizer leaves a convolution whose bias is not an
    initializer in float, so the graph would run slower in "int8" than in float32."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(onnx_model)
    inits = {t.name: t for t in model.graph.initializer}
    keep = []
    changed = False
    for node in model.graph.node:
        if node.op_type == "Identity" and node.input[0] in inits:
            copy = numpy_helper.from_array(numpy_helper.to_array(inits[node.input[0]]), node.output[0])
            model.graph.initializer.append(copy)
            inits[copy.name] = copy
            changed = True
        else:
            keep.append(node)
    if not changed:
        return onnx_model
    del model.graph.node[:]
    model.graph.node.extend(keep)
    return model.SerializeToString()


def quantize_onnx_bytes(onnx_model: bytes, planes: np.ndarray) -> bytes:
    """int8 (QDQ) ONNX model of the float32 ONNX ``onnx_model`` (input ``planes``), calibrated
    on ``planes`` (K, C, N, N) float32 (K >= 1): per-channel symmetric int8 weights, uint8
    activations, MinMax ranges. Deterministic. Raises QuantizeError (one line) when
    onnxruntime cannot quantize the graph, ImportError without onnxruntime."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    if len(planes) == 0:
        raise QuantizeError("no calibration positions")
    _quiet_onnxruntime_quantization()
    with tempfile.TemporaryDirectory(prefix="takzero-int8-") as tmp:
        src, dst = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        try:
            src.write_bytes(_initializer_identities_inlined(onnx_model))
            quantize_static(
                str(src), str(dst), _Reader(np.ascontiguousarray(planes, np.float32)),
                quant_format=QuantFormat.QDQ, per_channel=True,
                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                calibrate_method=CalibrationMethod.MinMax,
                extra_options={"CalibTensorRangeSymmetric": False},
            )
        except Exception as e:  # noqa: BLE001 - onnxruntime's own error types
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise QuantizeError(f"onnxruntime could not quantize the network: {first[:300]}") from None
        return dst.read_bytes()


class _OnnxruntimeQuantizationNotes(logging.Filter):
    """Drops the records below ERROR that onnxruntime's quantization code logs on the root logger
    (``logging.warning("Please consider pre-processing before quantization ...")``): advice to
    the author of a graph, not to a player."""

    def filter(self, record: logging.LogRecord) -> bool:
        path = record.pathname.replace("\\", "/")
        return record.levelno >= logging.ERROR or "onnxruntime/quantization/" not in path


_NOTES_FILTER = _OnnxruntimeQuantizationNotes()


def _quiet_onnxruntime_quantization() -> None:
    """Install :class:`_OnnxruntimeQuantizationNotes` on the root logger (once; a filter, not a
    level: the level of a logger shared by threads quantizing at once cannot be set and put back
    safely)."""
    root = logging.getLogger()
    if _NOTES_FILTER not in root.filters:
        root.addFilter(_NOTES_FILTER)
