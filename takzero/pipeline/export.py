"""Model files of a run: export a training checkpoint to one self-describing TorchScript or ONNX
file, read a file's metadata, and convert a trusted old checkpoint to a weights-only one.

The command line is ``python -m takzero.export`` (:mod:`takzero.export`, which only parses and
prints); its docstring describes the formats, the metadata and where the komi comes from. The
input is a checkpoint written by training (``best.pt`` or ``ckpt_*.pt``: a dict with at least
``model_config`` and ``model_state``), always read weights-only
(:mod:`takzero.nn.safe_load`), with its ``.sha256`` sidecar checked when present
(:mod:`takzero.pipeline.checkpoints`).
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

from takzero.io.files import free_names

__all__ = [
    "FORMATS", "check_not_input", "checkpoint_metadata", "convert_file", "convert_paths", "export_checkpoint",
    "free_name", "load_checkpoint", "read_metadata",
]

#: The export formats: TorchScript (holds code: share only with people who trust you) and ONNX.
#: Output formats: TorchScript, float32 ONNX, and ONNX quantized to int8 (``takzero.nn.quantize``).
FORMATS = ("torchscript", "onnx", "onnx-int8")


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a training checkpoint (``torch.save`` dict), weights-only
    (:func:`takzero.nn.safe_load.load_weights_only`: no code in the file runs). A
    ``<path>.sha256`` sidecar, when present, is verified
    (``takzero.pipeline.checkpoints.load_checked``).

    Raises FileNotFoundError for a missing file, ValueError (one line naming the file) when the
    file is not a checkpoint with ``model_config`` and ``model_state`` and integer ``half_komi``
    and ``generation`` (:func:`takzero.nn.safe_load.check_checkpoint`), fails its checksum, or is not weights-only (its
    pickle would run code: refused, with the ``--convert`` command for a trusted file).
    """
    from takzero.nn.safe_load import check_checkpoint, load_weights_only

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such checkpoint")
    side = Path(str(path) + ".sha256")
    if side.exists():
        from takzero.pipeline.checkpoints import CheckpointError, load_checked

        try:
            ckpt = load_checked(path)
        except CheckpointError as e:
            raise ValueError(str(e)) from None
    else:
        ckpt = load_weights_only(path)  # ValueError (UnsafeFileError) for a bad file
    check_checkpoint(ckpt, path)  # a list, a tensor, no model_state, a NaN half_komi: one line
    return ckpt


def convert_file(path: str | Path, out: str | Path | None = None, warn: Any = None) -> str:
    """Rewrite a *trusted* ``torch.save`` file that is not weights-only (written by an older
    tool, or holding numpy values) as one that is: read with full unpickling
    (:func:`takzero.nn.safe_load.load_trusted`, so the file's code runs: only for files one
    trusts), numpy scalars made numbers and arrays tensors, the result checked to read back
    weights-only, then written atomically to ``out`` (default: in place). A ``.sha256`` sidecar
    is verified first and rewritten with the new digest (in place; for ``out``, one is written
    beside it). Returns one line saying what was done; a file that already reads weights-only is
    left as it is.

    ``warn`` (a callable taking one line; None: nothing is said) is told, before the file's pickle
    runs, that it is about to run.

    Raises FileNotFoundError, ValueError (a checksum mismatch, an unreadable file, contents that
    cannot be made weights-only), OSError (the write failed; the file is unchanged).
    """
    from takzero.nn.safe_load import (
        UnsafeFileError,
        dumps_weights_only,
        load_trusted,
        load_weights_only,
    )
    from takzero.pipeline.checkpoints import CheckpointError, atomic_save_bytes, check_sidecar

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        check_sidecar(path)
    except CheckpointError as e:
        raise ValueError(f"{e}; not converted") from None
    side = Path(str(path) + ".sha256")
    target = Path(out) if out is not None else path
    try:
        data_obj = load_weights_only(path)
        if target == path:
            return f"{path}: already weights-only, left as it is"
    except UnsafeFileError:
        if warn is not None:
            warn(f"warning: {path} is not weights-only: converting it runs its pickle, which can run "
                 "any code (only for files you trust)")
        data_obj = load_trusted(path)
    try:
        data = dumps_weights_only(data_obj, path)
    except TypeError as e:
        raise ValueError(str(e)) from None
    if side.exists() or target != path:
        atomic_save_bytes(data, target)
    else:
        from takzero.io.files import atomic_write_bytes

        atomic_write_bytes(target, data)
    load_weights_only(target)  # the file on disk reads back weights-only
    return f"{path}: converted to a weights-only file{'' if target == path else f' {target}'}"


def convert_paths(target: str | Path, out: str | Path | None = None, warn: Any = None) -> list[str]:
    """:func:`convert_file` of one file, or of every ``ckpt_*.pt`` and ``best.pt`` of a run
    folder (``out`` must then be None: in place). Returns the lines of :func:`convert_file`.
    Raises what it raises (the first failure stops), ValueError for ``out`` with a folder."""
    from takzero.pipeline.checkpoints import list_checkpoints

    target = Path(target)
    if not target.is_dir():
        return [convert_file(target, out, warn)]
    if out is not None:
        raise ValueError(f"{target} is a folder: it is converted in place (no -o)")
    files = list_checkpoints(target) + ([target / "best.pt"] if (target / "best.pt").is_file() else [])
    if not files:
        raise ValueError(f"{target}: no ckpt_*.pt or best.pt to convert")
    return [convert_file(p, warn=warn) for p in files]


def _komi_from_run_config(folder: Path) -> float | None:
    """``board.komi`` of ``folder/config.yaml`` (written by ``takzero.train``), or None."""
    cfg = folder / "config.yaml"
    if not cfg.is_file():
        return None
    try:
        import yaml

        data = yaml.safe_load(cfg.read_text())
        return float(data["board"]["komi"])
    except Exception:  # noqa: BLE001 - fall back to a plain scan of the file
        m = re.search(r"^\s+komi:\s*([-0-9.]+)", cfg.read_text(), re.MULTILINE)
        return float(m.group(1)) if m else None


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("takzero")
    except Exception:  # noqa: BLE001 - not installed (run from the source tree)
        return "dev"


def checkpoint_metadata(
    ckpt: dict[str, Any],
    source: str | Path | None = None,
    komi: float | None = None,
    run_name: str | None = None,
    generation: int | None = None,
    warn=print,
) -> dict[str, Any]:
    """Metadata (beyond what ``model_export.model_metadata`` derives from the model) for ``ckpt``:
    ``half_komi``/``komi``, ``run_name``, ``generation``, ``source``, ``takzero_version`` and
    ``lineage`` (the training behind the weights over a chain of warm starts:
    ``takzero.pipeline.lineage.Lineage.to_dict``, read by ``Lineage.of_file``).

    Explicit arguments win over the checkpoint's keys; ``run_name`` falls back to the name of the
    checkpoint's folder, the komi to the run folder's ``config.yaml`` and then 0 (``warn`` is
    called with a message then). Raises ValueError for a komi that is not a multiple of 0.5, or
    for a malformed lineage entry or run counters (naming the file when ``source`` is given).
    """
    from takzero.game.position import komi_to_half_komi
    from takzero.nn.quoting import short_repr
    from takzero.pipeline.lineage import Lineage

    src = Path(source) if source is not None else None
    if komi is not None:
        half_komi = komi_to_half_komi(komi)
    elif "half_komi" in ckpt:
        half_komi = int(ckpt["half_komi"])
    else:
        found = _komi_from_run_config(src.parent) if src is not None else None
        if found is None:
            warn("warning: the checkpoint does not say its komi; writing komi 0 (use --komi)")
            found = 0.0
        half_komi = komi_to_half_komi(found)
    if run_name is None:
        run_name = ckpt.get("run_name")
        if run_name is not None and not isinstance(run_name, str):
            raise ValueError(f"{src if src is not None else 'checkpoint'}: its run_name is "
                             f"{short_repr(run_name, 60)}, not a string")
        if run_name is None and src is not None:
            run_name = src.resolve().parent.name
    if generation is None and ckpt.get("generation") is not None:
        generation = int(ckpt["generation"])
    try:
        lineage = Lineage.of_file(ckpt)
    except ValueError as e:
        raise ValueError(f"{src if src is not None else 'checkpoint'}: {e}") from None
    return {
        "half_komi": half_komi,
        "komi": half_komi / 2,
        "run_name": run_name,
        "generation": generation,
        "source": src.name if src is not None else None,
        "takzero_version": _version(),
        "lineage": lineage.to_dict(),
    }


def export_checkpoint(
    checkpoint: str | Path | dict[str, Any],
    out: str | Path,
    fmt: str = "torchscript",
    komi: float | None = None,
    run_name: str | None = None,
    generation: int | None = None,
    opset: int | None = None,
    warn=print,
) -> dict[str, Any]:
    """Export ``checkpoint`` (a path or a loaded dict) to ``out`` in ``fmt`` ('torchscript',
    'onnx', or 'onnx-int8': the ONNX graph quantized to int8, calibrated on the positions the
    checkpoint carries (``calibration_states``), else on games of the network's own policy, so
    the same checkpoint gives the same file; metadata ``precision: 'int8'`` and
    ``calibration_positions``); returns the metadata written (see the module docstring).

    Raises FileNotFoundError / ValueError for a bad checkpoint or arguments (one line naming the
    file: also for weights or outputs that are not finite, :func:`check_network`, and for a value
    nested too deeply to read), ImportError for ONNX
    without the ``onnx`` package.
    """
    from takzero.nn.model import model_from_checkpoint
    from takzero.nn.model_export import DEFAULT_ONNX_OPSET, export_onnx, export_torchscript

    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if not isinstance(checkpoint, dict):
        check_not_input(checkpoint, out)
    source = None
    if isinstance(checkpoint, dict):
        ckpt = checkpoint
    else:
        source = Path(checkpoint)
        ckpt = load_checkpoint(source)
    name = str(source) if source is not None else "the checkpoint"
    try:
        model = model_from_checkpoint(ckpt, source=name)
        check_network(model, name)  # NaN weights or outputs: refused as TEI refuses them
        meta = checkpoint_metadata(ckpt, source, komi, run_name, generation, warn=warn)
    except RecursionError:  # a value nested too deeply for Python's own walks of it
        raise ValueError(f"{name}: a value in it is nested too deeply to be read") from None
    out = Path(out)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "torchscript":
        return export_torchscript(model, out, metadata=meta)
    if fmt == "onnx":
        return export_onnx(model, out, metadata=meta, opset=opset or DEFAULT_ONNX_OPSET)
    return _export_int8(model, ckpt, out, meta, opset or DEFAULT_ONNX_OPSET)


def _export_int8(model: Any, ckpt: dict[str, Any], out: Path, meta: dict[str, Any], opset: int) -> dict[str, Any]:
    """The int8 ONNX file of ``model`` at ``out`` (written atomically), its metadata ``meta``
    plus ``precision`` and ``calibration_positions``; returns that metadata."""
    import tempfile

    import onnx

    from takzero.io.files import atomic_write_bytes
    from takzero.nn.backends import quantize
    from takzero.nn.inference import Evaluator
    from takzero.nn.model_export import export_onnx, set_onnx_metadata
    from takzero.nn.quantize import calibration_states_of

    with tempfile.TemporaryDirectory(prefix="takzero-export-") as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        meta = export_onnx(model, fp32, metadata=meta, opset=opset)
        int8, _ = quantize(Evaluator.from_onnx(fp32), calibration_states_of(ckpt))
    meta = {**meta, "precision": "int8", "calibration_positions": int8.metadata["calibration_positions"]}
    assert int8.onnx_bytes is not None  # quantize keeps the int8 graph's bytes
    proto = onnx.load_from_string(int8.onnx_bytes)
    set_onnx_metadata(proto, meta)
    atomic_write_bytes(out, proto.SerializeToString())
    return meta


def check_network(model: Any, source: str) -> None:
    """Refuse a network that cannot play, with the one-line messages of the model loaders
    (``Evaluator.from_checkpoint``): weights that are not finite
    (:func:`takzero.nn.inference.check_weights_finite`), or outputs that are not
    (``Evaluator.check_outputs_finite``: a BatchNorm running variance below zero). Raises
    ValueError naming ``source``."""
    from takzero.nn.inference import Evaluator, check_weights_finite

    check_weights_finite(model, source)
    Evaluator(model, device="cpu").check_outputs_finite(source)


def check_not_input(source: str | Path, out: str | Path) -> None:
    """Refuse an output that would write over the input or a checkpoint: ``out`` is ``source``
    itself (the same file, by any path or hard link), its ``.sha256`` sidecar, or any file that
    has a ``.sha256`` sidecar (a run's checkpoint: its sidecar would be left stale).

    Raises ValueError (one line naming both files) in those cases; nothing is written."""
    from takzero.io.files import check_not_input as check_not_its_input
    from takzero.io.files import same_file

    source, out = Path(source), Path(out)
    side = Path(str(source) + ".sha256")
    check_not_its_input(out, source)  # the one check of every command that writes a file
    if same_file(out, side):
        raise ValueError(f"{out} is the checksum file of the input {source}: choose another -o")
    if out.exists() and Path(str(out) + ".sha256").exists():
        raise ValueError(f"{out} is a checkpoint (it has {out.name}.sha256): an export does not write "
                         "over a checkpoint; choose another -o")


def read_metadata(path: str | Path) -> dict[str, Any]:
    """Metadata of an exported file (TorchScript or ONNX) or of a training checkpoint (the model
    part derived from its config). Raises ValueError for a file with no takzero metadata."""
    from takzero.nn import model_export

    path = Path(path)
    if path.suffix == ".onnx":
        return model_export.read_onnx_metadata(path)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            if any(n.endswith("extra/metadata.json") for n in zf.namelist()):
                return model_export.read_torchscript_metadata(path)
    from takzero.nn.model import model_from_checkpoint

    ckpt = load_checkpoint(path)
    meta = model_export.model_metadata(model_from_checkpoint(ckpt))
    meta.update(checkpoint_metadata(ckpt, path, warn=lambda _msg: None))
    return meta


def free_name(name: str) -> str:
    """``name`` if no such file exists, else the first free ``<stem>_<n><suffix>`` (n = 2, 3,
    ...): an export without ``-o`` never overwrites an earlier one (``io.files.free_names``, the
    one numbering rule of the commands' outputs)."""
    return str(free_names([name])[0])
