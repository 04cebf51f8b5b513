"""Strength per CPU-hour: each weight snapshot of a run (or of a chain of warm-started runs)
played against one fixed network, as an Elo curve over the training behind it.

    python scripts/strength_curve.py RUN/snapshots [MORE.pt ...] \\
        --reference checkpoints/pretrained/6x6_v1.pt --pairs 50 --out curve.jsonl --plot curve.png

Inputs are model files (``snapshot_*.pt`` of ``train.snapshot_minutes``, a ``best.pt``, a shipped
network) or folders of them (their ``*.pt``), read weights-only; each is placed by its lineage
(``takzero.pipeline.lineage``: the training minutes, positions and steps of the whole warm-start
chain behind it; a file without one counts its own run only). Each plays ``--pairs`` random 2-ply
openings with both colours at ``--simulations`` PUCT simulations a side against
``model:REFERENCE`` (``takzero.matches.evaluation.evaluate_model``: no noise, the players' move
choice (``DEFAULT_SELECT_Q_FRACTION``; a line without ``select_q_fraction`` was measured with the
most visited move), the default tinuë checks at both roots), and one JSON line per file goes to stdout and is appended
to ``--out``: its lineage, W-D-L, score, the Elo with its pentanomial 95% interval on the game
pairs and the Wilson one (infinite Elo as null). A file already in ``--out`` with the same bytes,
reference, pairs, simulations, ply limit, seed and move choice is not played again (its line is reused), so a
curve grows session by session. ``--plot`` draws Elo over training hours (intervals as bars,
clipped to +-800, W-D-L beside each point) and writes the PNG atomically.

Exit status: 0, or 2 for bad arguments (a missing file, a file that is no model, a reference of
another board size: named before any game).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plot_run import ELO_CLIP, plt, save_figure  # noqa: E402

from takzero.io.files import atomic_write_text  # noqa: E402
from takzero.pipeline.checkpoints import CheckpointError, file_sha256, load_checked  # noqa: E402
from takzero.pipeline.lineage import Lineage  # noqa: E402
from takzero.players.network import DEFAULT_SELECT_Q_FRACTION  # noqa: E402

#: the keys of a JSON line that must agree for an earlier line to stand for a new evaluation
SAME = ("model_sha256", "reference_sha256", "pairs", "simulations", "ply_limit", "seed", "select_q_fraction")
#: what a line written before a key existed was measured with (the move choice: the most visited)
OLD_DEFAULTS = {"select_q_fraction": 0.0}


def model_files(paths: list[str]) -> list[Path]:
    """The model files named: files as given, folders as their ``*.pt`` (sorted), no repeats.

    Raises:
        ValueError: a path that does not exist, or a folder with no ``*.pt``.
    """
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("*.pt"))
            if not found:
                raise ValueError(f"{p}: a folder with no *.pt model files")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise ValueError(f"{p}: no such file or folder")
    seen: set[Path] = set()
    return [p for p in out if not (p.resolve() in seen or seen.add(p.resolve()))]


def read_model(path: Path) -> tuple[int, int, Lineage]:
    """(board size, generation, lineage) of a model or checkpoint file, read weights-only; its
    network is built and its weights loaded, so a file that cannot play is refused here.

    Raises:
        ValueError: naming the file: it cannot be read or verified, holds no model, its network
            cannot be built from its weights, or its generation or lineage is malformed.
    """
    from takzero.nn.model import model_from_checkpoint

    try:
        d = load_checked(path)
    except CheckpointError as e:
        raise ValueError(f"{path}: cannot be loaded: {e}") from None
    if not isinstance(d, dict) or not isinstance(d.get("model_config"), dict) or "model_state" not in d:
        raise ValueError(f"{path}: holds no model_config and model_state (not a takzero model file)")
    try:
        net = model_from_checkpoint(d)
    except Exception as e:  # noqa: BLE001 - any way the weights fail to build a network
        raise ValueError(f"{path}: its weights do not build a network ({type(e).__name__}: {e})") from None
    generation = d.get("generation", -1)
    if isinstance(generation, bool) or not isinstance(generation, int):
        raise ValueError(f"{path}: its generation must be a whole number, got {generation!r:.40}")
    try:
        lineage = Lineage.of_file(d)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    return int(net.config.size), generation, lineage


#: the keys a line of --out must have to stand for an evaluation (and to be drawn)
LINE_KEYS = (*SAME, "minutes", "wins", "draws", "losses")


def earlier_lines(out: Path | None) -> list[dict[str, Any]]:
    """The evaluations already in ``out`` (none when it does not exist). Lines that are not JSON
    objects with :data:`LINE_KEYS` (minutes a number) are skipped with a warning on stderr.

    Raises:
        ValueError: ``out`` is not a UTF-8 text file.
    """
    if out is None or not out.is_file():
        return []
    try:
        text = out.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"--out {out}: not a JSON lines file (not UTF-8 text)") from None
    lines = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            print(f"[strength_curve] {out}:{n}: not a JSON line ({e.msg}); ignored", file=sys.stderr)
            continue
        missing = [k for k in LINE_KEYS if k not in row] if isinstance(row, dict) else list(LINE_KEYS)
        if missing or isinstance(row["minutes"], bool) or not isinstance(row["minutes"], int | float):
            print(f"[strength_curve] {out}:{n}: not an evaluation line (missing or bad: "
                  f"{', '.join(missing) or 'minutes'}); ignored", file=sys.stderr)  # fmt: skip
            continue
        lines.append(row)
    return lines


def check_output(option: str, path: Path | None) -> None:
    """Refuse an output path before any game: a folder, an empty name, a missing parent folder.

    Raises:
        ValueError: naming ``option``.
    """
    if path is None:
        return
    if path.name in ("", ".", ".."):
        raise ValueError(f"{option} {str(path)!r}: not a file name")
    if path.is_dir():
        raise ValueError(f"{option} {path}: is a folder, not a file")
    if not path.parent.is_dir():
        raise ValueError(f"{option} {path}: no such folder {path.parent}")


def _finite(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def evaluate_file(path: Path, lineage: Lineage, generation: int, args: argparse.Namespace,
                  reference_sha: str) -> dict[str, Any]:  # fmt: skip
    """Play ``path`` against ``model:REFERENCE:SIMULATIONS``; the curve's JSON line."""
    from takzero.matches.evaluation import evaluate_model

    t0 = time.monotonic()
    (s,) = evaluate_model(
        str(path), [f"model:{args.reference}:{args.simulations}"], pairs=args.pairs,
        simulations=args.simulations, ply_limit=args.ply_limit, seed=args.seed, threads=args.threads,
        say=lambda line: None, progress=(lambda line: print(line, file=sys.stderr, flush=True)) if args.verbose else None,
    )  # fmt: skip
    return {
        "model": str(path),
        "model_sha256": file_sha256(path),
        "generation": generation,
        "reference": str(args.reference),
        "reference_sha256": reference_sha,
        "pairs": args.pairs,
        "simulations": args.simulations,
        "ply_limit": args.ply_limit,
        "seed": args.seed,
        "select_q_fraction": s["select_q_fraction"],
        "minutes": round(lineage.minutes, 2),
        "hours": round(lineage.minutes / 60, 3),
        "positions": lineage.positions,
        "games_selfplay": lineage.games,
        "steps": lineage.steps,
        "runs": list(lineage.runs),
        "wins": s["wins"],
        "draws": s["draws"],
        "losses": s["losses"],
        "score": s.get("score"),
        "elo": _finite(s.get("elo")),
        "elo_lower": _finite(s.get("elo_lower")),
        "elo_upper": _finite(s.get("elo_upper")),
        "elo_model": s.get("elo_model"),
        "elo_wilson_lower": _finite(s.get("elo_wilson_lower")),
        "elo_wilson_upper": _finite(s.get("elo_wilson_upper")),
        "eval_seconds": round(time.monotonic() - t0, 1),
    }


def plot_curve(points: list[dict[str, Any]], reference: str, path: Path) -> None:
    """Elo against ``reference`` over training hours, one point per line of ``points`` (its
    interval as a bar, clipped to +-ELO_CLIP, its W-D-L beside it); written atomically."""
    pts = sorted(points, key=lambda r: r["minutes"])
    fig, ax = plt.subplots(figsize=(7.5, 4.2))

    def clip(x: Any, default: float) -> float:
        v = x if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else default
        return max(-ELO_CLIP, min(ELO_CLIP, float(v)))

    hours = [r["minutes"] / 60 for r in pts]
    elo = [clip(r.get("elo"), ELO_CLIP if (r.get("score") or 0) > 0.5 else -ELO_CLIP) for r in pts]
    lo = [e - clip(r.get("elo_lower"), -ELO_CLIP) for e, r in zip(elo, pts, strict=True)]
    hi = [clip(r.get("elo_upper"), ELO_CLIP) - e for e, r in zip(elo, pts, strict=True)]
    ax.errorbar(hours, elo, yerr=[lo, hi], marker="o", capsize=3)
    for h, e, r in zip(hours, elo, pts, strict=True):
        ax.annotate(f"{r['wins']}-{r['draws']}-{r['losses']}", (h, e), textcoords="offset points",
                    xytext=(5, -12), fontsize=8)  # fmt: skip
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("training hours (over the warm-start chain)")
    ax.set_ylabel(f"Elo vs {Path(reference).name}")
    sims = {int(r["simulations"]) for r in pts}
    games = {2 * int(r["pairs"]) for r in pts}
    ax.set_title(f"strength per CPU-hour: {'/'.join(map(str, sorted(games)))} games a point, "
                 f"{'/'.join(map(str, sorted(sims)))} simulations a side")  # fmt: skip
    ax.grid(alpha=0.3)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    """``python scripts/strength_curve.py PATH [...] --reference REF``: the curve's JSON lines."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("paths", nargs="+", help="model files or folders of them (e.g. RUN/snapshots)")
    p.add_argument("--reference", required=True, help="the fixed network every file plays")
    p.add_argument("--pairs", type=int, default=50, help="openings, each with both colours (default 50)")
    p.add_argument("--simulations", type=int, default=200, help="simulations per move, both sides")
    p.add_argument("--ply-limit", type=int, default=150, help="draw after this many plies")
    p.add_argument("--seed", type=int, default=0, help="seed of the openings")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of the networks (default 1)")
    p.add_argument("--out", type=Path, help="JSON lines file: appended to, and read to skip files done")
    p.add_argument("--plot", type=Path, help="PNG of the curve (every line of --out and of this call)")
    p.add_argument("--verbose", action="store_true", help="a line per finished game on stderr")
    args = p.parse_args(argv)
    from takzero.matches.evaluation import MAX_PAIRS, MAX_PLY_LIMIT, MAX_SIMULATIONS, MAX_THREADS

    for name, value, top in (("--pairs", args.pairs, MAX_PAIRS), ("--simulations", args.simulations, MAX_SIMULATIONS),
                             ("--ply-limit", args.ply_limit, MAX_PLY_LIMIT), ("--threads", args.threads, MAX_THREADS)):  # fmt: skip
        if not 1 <= value <= top:
            p.error(f"{name} must be in 1..{top}, got {value}")
    try:
        check_output("--out", args.out)
        check_output("--plot", args.plot)
        files = model_files(args.paths)
        ref_size, _, _ = read_model(Path(args.reference))
        models = [(f, *read_model(f)) for f in files]
        done = earlier_lines(args.out)
    except ValueError as e:
        p.error(str(e))
    for f, size, _, _ in models:
        if size != ref_size:
            p.error(f"{f} plays {size}x{size}, the reference {args.reference} plays {ref_size}x{ref_size}")
    reference_sha = file_sha256(args.reference)
    points: list[dict[str, Any]] = []
    for f, _, generation, lineage in sorted(models, key=lambda m: m[3].minutes):
        key = {"model_sha256": file_sha256(f), "reference_sha256": reference_sha, "pairs": args.pairs,
               "simulations": args.simulations, "ply_limit": args.ply_limit, "seed": args.seed,
               "select_q_fraction": DEFAULT_SELECT_Q_FRACTION}  # fmt: skip
        old = next((r for r in done if all(r.get(k, OLD_DEFAULTS.get(k)) == key[k] for k in SAME)), None)
        if old is not None:
            where = f"in {args.out}" if args.out is not None else f"played above as {old['model']}"
            print(f"[strength_curve] {f}: the same bytes, reference and settings are already {where}; "
                  "not played again", file=sys.stderr)  # fmt: skip
            print(json.dumps(old), flush=True)
            points.append(old)
            continue
        print(f"[strength_curve] {f}: {lineage.describe()}; {2 * args.pairs} games against "
              f"{args.reference}", file=sys.stderr, flush=True)  # fmt: skip
        row = evaluate_file(f, lineage, generation, args, reference_sha)
        print(json.dumps(row), flush=True)
        if args.out is not None:
            text = args.out.read_text() if args.out.is_file() else ""
            if text and not text.endswith("\n"):
                text += "\n"
            atomic_write_text(args.out, text + json.dumps(row) + "\n")
        points.append(row)
        done.append(row)
    if args.plot is not None:
        shown = {r["model_sha256"]: r for r in done if all(r.get(k) == v for k, v in
                 (("reference_sha256", reference_sha), ("simulations", args.simulations)))}  # fmt: skip
        plot_curve(list(shown.values()), args.reference, args.plot)
        print(f"[strength_curve] curve of {len(shown)} points: {args.plot}", file=sys.stderr)
    print(f"[strength_curve] {len(points)} files against {args.reference}"
          + (f"; lines in {args.out}" if args.out else ""), file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
