"""Export a trained network to one self-describing file: TorchScript (default) or ONNX.

Command line::

    python -m takzero.export checkpoints/<run>/best.pt -o model.pt            # TorchScript
    python -m takzero.export checkpoints/<run>/best.pt -o model.onnx --format onnx
    python -m takzero.export checkpoints/<run>/best.pt -o model_int8.onnx --format onnx-int8
    python -m takzero.export model.pt --info        # print metadata (long strings and lists cut)
    python -m takzero.export --convert OLD.pt       # a trusted file that is not weights-only

The output never replaces the input, its ``.sha256`` sidecar or another checkpoint (a file with
a sidecar): such a ``-o`` is refused in one line. The input is a checkpoint written by training
(``best.pt`` or ``ckpt_*.pt``: a ``torch.save`` dict
with at least ``model_config`` and ``model_state``), read weights-only
(:mod:`takzero.nn.safe_load`): a file whose pickle would run code is refused, naming the file.
``--convert`` rewrites a file one trusts that is not weights-only (or every checkpoint of a run
folder) as one that is; it runs the file's pickle to read it. The output holds the network and a
metadata dict (JSON) with:

* ``size``, ``half_komi`` and ``komi`` (the komi the model was trained for), ``feature_version``,
  ``layers``, ``in_channels``, ``num_actions``, ``action_space``, ``model_config``;
* ``run_name`` and ``generation`` (None when unknown), ``source`` (the checkpoint's file name),
  ``takzero_version``;
* ``lineage``: the training behind the weights, summed over a chain of warm starts
  (``minutes``, ``positions``, ``games``, ``steps``, ``runs``; :mod:`takzero.pipeline.lineage`);
  ``known: false`` when a file of the chain carried none (the counters are then lower bounds, and
  a file with no lineage at all is said as "training: unknown", never as 0.0 min).

What the command prints of a file's metadata is cut and escaped (a run name of a stranger's file
may hold a megabyte, newlines or terminal escape sequences: ``safe_load.shown``); ``--info``
prints JSON, with strings over 200 characters and lists over 100 items cut. The metadata is what
the file says, not a fact: ``--info`` checks it (:func:`metadata_problems`: the size, the action
count, the feature version and input planes, the komi, ``model_config`` and the run fields agree
and are of their kinds) and says the outcome in the JSON's ``metadata_checks`` (``"passed"``, or
the list of what fails; a file's own key of that name is replaced) and, when one fails, in a
warning line on stderr.

TorchScript keeps it as the archive's extra file ``metadata.json``, ONNX in ``metadata_props``
(see :mod:`takzero.nn.model_export`; the code is :mod:`takzero.pipeline.export`). Loading needs only
takzero (not the run folder)::

    from takzero.nn.inference import Evaluator
    ev = Evaluator.load("model.pt")      # or model.onnx; ev.metadata is the dict above

A TorchScript file holds a program (TorchScript code run when the model is called): give it only
to people who trust you, and take one only from people you trust; a checkpoint (read
weights-only) or an ONNX file is the format to share with strangers.

Where the komi comes from, first found wins: ``--komi``, the checkpoint's ``half_komi``, the run
folder's ``config.yaml`` (``board.komi``), else 0 with a warning.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from takzero.nn.quoting import short_repr, shown
from takzero.pipeline.export import (
    FORMATS,
    convert_paths,
    export_checkpoint,
    free_name,
    read_metadata,
)
from takzero.pipeline.lineage import Lineage

__all__ = ["main"]


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m takzero.export",
        description="Export a training checkpoint to one self-describing TorchScript/ONNX file.",
    )
    p.add_argument("checkpoint", help="checkpoint file (checkpoints/<run>/best.pt or ckpt_*.pt)")
    p.add_argument("-o", "--out", help="output file (default: model.pt / model.onnx, or model_2.pt ... "
                   "when that exists: never overwritten without -o)")
    p.add_argument("--format", choices=FORMATS, default="torchscript")
    p.add_argument("--komi", type=float, help="komi the model was trained for (overrides)")
    p.add_argument("--run-name", help="run name to record (default: from the checkpoint)")
    p.add_argument("--generation", type=int, help="generation to record (default: checkpoint's)")
    p.add_argument("--opset", type=int, help="ONNX opset (default 17)")
    p.add_argument("--info", action="store_true", help="only print the file's metadata as JSON")
    p.add_argument("--convert", action="store_true",
                   help="rewrite a TRUSTED checkpoint (or every ckpt_*.pt and best.pt of a run "
                   "folder) that is not weights-only as one that is, in place or to -o; its "
                   "pickle is run to read it, so only for files you trust")
    return p.parse_args(argv)


#: The longest metadata string ``--info`` prints whole (a longer one is cut, its length said).
INFO_STRING_CHARS = 200
#: The longest metadata list ``--info`` prints whole.
INFO_LIST_ITEMS = 100


def _shortened(value: Any) -> Any:
    """``value`` (metadata) with every string over :data:`INFO_STRING_CHARS` characters cut and
    its length said, and every list over :data:`INFO_LIST_ITEMS` items cut (``--info``; JSON
    escapes the control characters itself)."""
    if isinstance(value, str) and len(value) > INFO_STRING_CHARS:
        return f"{value[:INFO_STRING_CHARS]}... ({len(value):,} characters)"
    if isinstance(value, dict):
        return {k: _shortened(v) for k, v in value.items()}
    if isinstance(value, list):
        more = [f"... ({len(value) - INFO_LIST_ITEMS:,} more)"] if len(value) > INFO_LIST_ITEMS else []
        return [_shortened(v) for v in value[:INFO_LIST_ITEMS]] + more
    return value


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def metadata_problems(meta: dict[str, Any]) -> list[str]:
    """What fails in an exported file's (or a checkpoint's) metadata ``meta``, one short line each
    with the value quoted short (empty: it passed): ``size`` a whole number in 3..8,
    ``num_actions`` the size's, ``feature_version`` one this code encodes and ``in_channels`` (and
    ``layers``) a plane count of it, ``half_komi`` a whole number in -200..200 and ``komi`` its
    half, ``model_config`` a network settings dict of that size and feature version, ``run_name``
    a string, ``generation`` a whole number >= 0, ``lineage`` a lineage dict (the last four may be
    missing or null). Never raises: it checks a stranger's file."""
    from takzero.game.core import STANDARD_RESERVES
    from takzero.nn.actions import num_actions
    from takzero.nn.features import check_version, layers_from_channels
    from takzero.nn.model import ModelConfig

    problems: list[str] = []

    def bad(key: str, why: str) -> None:
        problems.append(f"{key} {short_repr(meta.get(key), 40)} {why}")

    size = meta.get("size")
    if not (_whole(size) and size in STANDARD_RESERVES):
        bad("size", "is not a whole number in 3..8")
        size = None
    elif meta.get("num_actions") != num_actions(size):
        bad("num_actions", f"is not the {num_actions(size)} moves of {size}x{size}")
    version = meta.get("feature_version", 1)
    try:
        if not _whole(version):
            raise ValueError("not a whole number")
        version = check_version(version)
    except ValueError:
        bad("feature_version", "is not a feature version this code encodes")
        version = None
    layers = None
    if version is not None:
        try:
            channels = meta.get("in_channels")
            layers = layers_from_channels(channels, version) if isinstance(channels, int) and _whole(channels) else None
        except (TypeError, ValueError):
            layers = None
        if layers is None:
            bad("in_channels", f"is not a plane count of feature version {version}")
        elif "layers" in meta and meta["layers"] != layers:
            bad("layers", f"is not the {layers} of in_channels {meta['in_channels']}")
    half_komi = meta.get("half_komi")
    if half_komi is not None and not (_whole(half_komi) and -200 <= half_komi <= 200):
        bad("half_komi", "is not a whole number in -200..200")
    elif half_komi is not None and "komi" in meta and meta["komi"] != half_komi / 2:
        bad("komi", f"is not half of half_komi {half_komi}")
    try:
        config = ModelConfig.from_dict(meta["model_config"]) if "model_config" in meta else None
    except Exception:  # noqa: BLE001 - not a dict, or settings that do not build
        bad("model_config", "is not the settings of a network")
    else:
        if config is None:
            problems.append("model_config is missing")
        elif size is not None and config.size != size:
            bad("model_config", f"is of size {config.size}, not {size}")
        elif version is not None and config.feature_version != version:
            bad("model_config", f"is of feature version {config.feature_version}, not {version}")
    if meta.get("run_name") is not None and not isinstance(meta["run_name"], str):
        bad("run_name", "is not a string")
    generation = meta.get("generation")
    if generation is not None and not (_whole(generation) and generation >= 0):
        bad("generation", "is not a whole number >= 0")
    if meta.get("lineage") is not None:
        try:
            Lineage.from_dict(meta["lineage"])
        except Exception:  # noqa: BLE001 - a stranger's value of any shape
            bad("lineage", "is not a lineage")
    return problems


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit status (0 ok, 1 error with a message on stderr)."""
    args = _parse_args(argv)
    try:
        if args.info:
            meta = read_metadata(args.checkpoint)
            problems = metadata_problems(meta)  # what the file says is not taken as a fact
            shown_meta = {**_shortened(meta), "metadata_checks": _shortened(problems) or "passed"}
            print(json.dumps(shown_meta, indent=2, sort_keys=True))
            if problems:
                print(f"warning: {shown(args.checkpoint, 200)}: its metadata fails {len(problems)} check(s) "
                      f"(metadata_checks), the values are as the file says: {shown('; '.join(problems), 600)}",
                      file=sys.stderr)
            return 0
        if args.convert:
            def warn(msg: str) -> None:
                print(msg, file=sys.stderr, flush=True)

            for line in convert_paths(args.checkpoint, args.out, warn=warn):
                print(line)
            return 0
        out = args.out or free_name("model.onnx" if args.format.startswith("onnx") else "model.pt")
        if not args.out and out not in ("model.pt", "model.onnx"):
            print(f"{Path(out).stem.rsplit('_', 1)[0]}{Path(out).suffix} exists, not overwritten: "
                  f"writing {out} (-o FILE chooses the name)", file=sys.stderr)
        meta = export_checkpoint(
            args.checkpoint,
            out,
            fmt=args.format,
            komi=args.komi,
            run_name=args.run_name,
            generation=args.generation,
            opset=args.opset,
            warn=lambda msg: print(msg, file=sys.stderr),
        )
    except (OSError, ValueError, ImportError, KeyError, RuntimeError) as e:
        print(f"export failed: {shown(str(e), 2000)}", file=sys.stderr)
        return 1
    lineage = Lineage.from_dict(meta["lineage"])  # (a file without one: unknown, never "0.0 min")
    print(  # the file's strings cut and escaped (a run name may hold newlines or ANSI codes)
        f"wrote {shown(out, 200)} ({args.format}): {meta['size']}x{meta['size']}, komi {meta['komi']:g}, "
        f"feature version {meta['feature_version']}, {meta['num_actions']} actions, "
        f"run {shown(meta.get('run_name'), 60)} generation {meta.get('generation')}; "
        f"{'trained' if lineage.known else 'training:'} {lineage.describe()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
