"""The evaluation command line: ``python -m takzero.evaluate MODEL`` plays a model against the
baselines on paired openings and prints one JSON line per baseline on stdout (with ``--links``,
first one per game with a PTN Ninja link); on stderr a line per finished game (with the tally so
far, W-D-L) and each baseline's tally, score and Elo with its interval: the interval the JSON line
carries ('elo', 'elo_lower', 'elo_upper', its model in 'elo_model': pentanomial on paired games),
named (``MatchResult.describe_elo``), or "too few games". Ctrl-C prints the score so far of the
baseline in progress (its JSON line with
``"interrupted": true`` and its Elo line), writes its finished games (``--ptn-dir``) and exits
with status 130. A ``model:PATH`` baseline of another board size than the model is refused
before any game. The komi is the model's own unless ``--komi`` gives another (then one warning
line on stderr before the first game); the ply limit's default is the one ``takzero.match``
has (``takzero.matches.games.DEFAULT_PLY_LIMIT``). A ``tei:`` engine baseline
(``takzero.protocols.tei.player``) that fails gives
a JSON line with 'error' and the other baselines are played; the status is then 1.

This module is the command line only (argument checks, then one call); the match logic is
:func:`takzero.matches.evaluation.evaluate` (a ``MatchSpec`` and the model's ``SearchConfig``). The
evaluator used during training is
``takzero.pipeline.gating.GatingEvaluator``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from takzero.game.tinue import DEFAULT_TINUE_NODES
from takzero.io.files import check_writable_folder
from takzero.matches.evaluation import (
    MAX_GUMBEL_M,
    MAX_PAIRS,
    MAX_PLY_LIMIT,
    MAX_THREADS,
    evaluate,
    model_search,
)
from takzero.matches.games import DEFAULT_PLY_LIMIT
from takzero.matches.spec import MatchSpec
from takzero.nn.backends import EVAL_BACKENDS
from takzero.players.network import DEFAULT_SELECT_Q_FRACTION
from takzero.players.registry import ModelFileError, help_text, spec_syntax
from takzero.protocols.tei.player import make_baseline

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """``python -m takzero.evaluate MODEL``: the model against the baselines, JSON line each."""
    p = argparse.ArgumentParser(
        prog="python -m takzero.evaluate",
        description="Play a model against the baselines on paired openings; one JSON line each.",
        epilog=help_text(engines=True),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", help="exported model (TorchScript/ONNX) or checkpoint (.pt)")
    p.add_argument(
        "--baselines", nargs="+", default=["random", "greedy", "uct:1000"],
        help=f"baseline specs: {spec_syntax(engines=True)} (default: random greedy uct:1000)",
    )
    p.add_argument("--pairs", type=int, default=50, help="openings, each played with both colours")
    p.add_argument("--simulations", type=int, default=200, help="network simulations per move")
    p.add_argument(
        "--gumbel", type=int, default=0, metavar="M",
        help="the model searches with the Gumbel root (Sequential Halving over its M moves of highest "
             "prior, no noise) instead of PUCT; 0 (default): PUCT. Model baselines keep PUCT",
    )
    p.add_argument(
        "--select-q", type=float, default=DEFAULT_SELECT_Q_FRACTION, metavar="F",
        help="after a PUCT search the model plays the move of highest Q among those with at least F "
             f"of the most visits (default {DEFAULT_SELECT_Q_FRACTION:g}, the players' rule; 0: the most "
             "visited move). Model baselines keep the players' default",
    )
    p.add_argument("--ply-limit", type=int, default=DEFAULT_PLY_LIMIT,
                   help=f"draw after this many plies (default {DEFAULT_PLY_LIMIT}, as takzero.match's)")
    p.add_argument("--komi", type=float,
                   help="komi in points (default: the model's own; another gives one warning line)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0,
                   help="CPU threads of the networks (torch's, and onnxruntime's; 0: torch's default)")
    p.add_argument("--backend", choices=("auto", *EVAL_BACKENDS), default="auto",
                   help="CPU inference backend of the model and the model baselines: auto (default: "
                        "int8 in onnxruntime where it is installed and the network can be exported "
                        "and quantized, float32 onnx where it cannot be quantized, else torch), "
                        "torch, onnx (float32, the same networks up to float rounding) or int8")
    p.add_argument("--ptn-dir", help="write the games as PTN files into this folder (vs_<baseline>.ptn; "
                   "an earlier run's are kept: then vs_<baseline>_2.ptn ...)")
    p.add_argument(
        "--links", action="store_true",
        help="before each summary, a JSON line per game with a PTN Ninja link ('ptn_ninja')",
    )
    p.add_argument(
        "--tinue-nodes", type=int, default=DEFAULT_TINUE_NODES,
        help="prover nodes of the model's tinue checks at its root (0: off)",
    )
    p.add_argument(
        "--flat-endgame-nodes", type=int, default=0,
        help="node budget of the model's exact flat-endgame checks at its root (0, default: off)",
    )
    args = p.parse_args(argv)
    if not 0.0 <= args.select_q <= 1.0:
        p.error(f"--select-q must be in [0, 1] (0: the most visited move), got {args.select_q}")
    if not 0 <= args.gumbel <= MAX_GUMBEL_M:
        p.error(f"--gumbel must be in 0..{MAX_GUMBEL_M} (0: the PUCT root), got {args.gumbel}")
    if not 0 <= args.threads <= MAX_THREADS:
        p.error(f"--threads must be in 0..{MAX_THREADS}, got {args.threads}")
    if not Path(args.model).exists():
        p.error(f"model file not found: {args.model}")
    if not Path(args.model).is_file():
        p.error(f"not a model file: {args.model}")
    if args.ptn_dir is not None:
        try:
            check_writable_folder(args.ptn_dir)
        except OSError as e:
            p.error(f"--ptn-dir {args.ptn_dir}: cannot write there: {e.strerror or e}")
    try:
        if not 1 <= args.pairs <= MAX_PAIRS:
            raise ValueError(f"pairs must be in 1..{MAX_PAIRS}, got {args.pairs}")
        if not 1 <= args.ply_limit <= MAX_PLY_LIMIT:
            raise ValueError(f"ply limit must be in 1..{MAX_PLY_LIMIT}, got {args.ply_limit}")
        match = MatchSpec.from_pairs(args.pairs, komi=args.komi, ply_limit=args.ply_limit, seed=args.seed)
        search = model_search(args.simulations, tinue_nodes=args.tinue_nodes, gumbel_m=args.gumbel,
                              select_q_fraction=args.select_q, flat_endgame_nodes=args.flat_endgame_nodes)
        results = evaluate(
            args.model, args.baselines, match, search, ptn_dir=args.ptn_dir,
            progress=lambda line: print(line, file=sys.stderr, flush=True), threads=args.threads,
            links=args.links, backend=args.backend, make_baseline=make_baseline,  # tei: engines too
        )
    except ModelFileError as e:  # not a usage error: one line, no usage text
        p.exit(2, f"{p.prog}: error: {e}\n")
    except (OSError, ValueError) as e:
        p.error(str(e))
    except KeyboardInterrupt:  # the score so far is printed (MatchInterrupted) or nothing ran yet
        print("takzero.evaluate: interrupted", file=sys.stderr)
        return 130
    failed = [r["baseline"] for r in results if "error" in r]
    if failed:  # the other baselines' lines are printed; the status says that not all were played
        print(f"takzero.evaluate: {len(failed)} baseline(s) failed: {' '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
