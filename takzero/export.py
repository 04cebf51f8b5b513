"""Export a trained network to one self-describing file: TorchScript (default) or ONNX.

Command line::

    python -m takzero.export checkpoints/<run>/best.pt -o model.pt            # TorchScript
    python -m takzero.export checkpoints/<run>/best.pt -o model.onnx --format onnx
    python -m takzero.export checkpoints/<run>/best.pt -o model_int8.onnx --format onnx-int8
    python -m takzero.export model.pt --info        # print metadata (long strings and lists cut)
    python -m takzero.export --convert OLD.pt       # a trusted file that is not weights-only

The output never replaces the input, its ``.sha256`` sidecar or another checkpoint (a file with
a sidecar): such a ``-o`` is refused in one line. The input is a checkpoint written by training (``best.pt`` or ``ckpt_*.pt``: a ``torch.save`` dict
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
prints JSON, with strings over 200 characters and lists over 100 items cut.

TorchScript keeps it as the archive's extra file ``metadata.json``, ONNX in ``metadata_props``
(see :mod:`takzero.nn.inference`; the code is :mod:`takzero.pipeline.export`). Loading needs only takzero (not the run folder)::

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

from takzero.nn.quoting import shown
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
                   "pickle is run to read it, so only for files you trust")  # fmt: skip
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


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit status (0 ok, 1 error with a message on stderr)."""
    args = _parse_args(argv)
    try:
        if args.info:
            print(json.dumps(_shortened(read_metadata(args.checkpoint)), indent=2, sort_keys=True))
            return 0
        if args.convert:
            for line in convert_paths(args.checkpoint, args.out, warn=lambda msg: print(msg, file=sys.stderr, flush=True)):
                print(line)
            return 0
        out = args.out or free_name("model.onnx" if args.format.startswith("onnx") else "model.pt")
        if not args.out and out not in ("model.pt", "model.onnx"):
            print(f"{Path(out).stem.rsplit('_', 1)[0]}{Path(out).suffix} exists, not overwritten: "
                  f"writing {out} (-o FILE chooses the name)", file=sys.stderr)  # fmt: skip
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
