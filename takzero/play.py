"""Play takzero in a terminal: ``python -m takzero.play [--model model.pt | --opponent uct]``.

The command line only: it checks the arguments, picks the opponent and runs the session of
:mod:`takzero.protocols.terminal` (the commands a player types, the board drawing and the end of
the game are described there).

Opponent: ``--model FILE`` (an exported model or a checkpoint); without it
``checkpoints/pretrained/<N>x<N>.pt`` when that file exists (without ``--size``: the shipped
model's size, 6x6 today), else the UCT baseline (said clearly).
``--opponent SPEC`` picks a player spec instead (``takzero.players.registry``: ``random``,
``greedy``, ``uct[:N]``, ``model:PATH[:N]``). Strength: ``--simulations N`` and/or
``--time SECONDS`` per engine move. ``--size``, ``--komi``, ``--colour white|black|random``,
``--seed``, ``--ply-limit`` (draw after that many plies; threefold repetition is always a draw).

``save FILE.ptn`` writes the game to a new file: an existing file is kept (``save! FILE.ptn``
replaces it), and the model being played is never written over.

Everything is read with ``input()`` from stdin, so a script can drive a game::

    printf 'a1\\nb2\\nsave game.ptn\\nquit\\n' | python -m takzero.play --opponent random --size 4
"""

from __future__ import annotations

import argparse
import os
import sys

from takzero.game.core import BLACK, STANDARD_RESERVES, WHITE
from takzero.players.network import PLAY_BACKENDS, set_play_backend, set_search_threads
from takzero.players.registry import check_spec, help_text, model_spec_path, spec_syntax
from takzero.protocols.terminal import (
    PlaySession,
    default_size,
    make_opponent,
    pretrained_path,
    start_position,
)

__all__ = ["main"]


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m takzero.play",
        description="Play takzero in the terminal (moves in PTN).",
        epilog=help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--model",
        help="exported model or checkpoint (default: checkpoints/pretrained/<N>x<N>.pt if present; "
        "without --size, the shipped model's size)",
    )
    p.add_argument("--opponent", help=f"a player spec instead of the network: {spec_syntax()}")
    p.add_argument("--size", type=int, help="board size 3..8 (default: the model's, else 6)")
    p.add_argument(
        "--komi", type=float, help="komi in points (default: the network's training komi, else 0)"
    )
    p.add_argument(
        "--colour",
        "--color",
        dest="colour",
        default="white",
        choices=("white", "black", "random"),
        help="your colour (default white)",
    )
    p.add_argument("--simulations", type=int, help="engine simulations per move (strength)")
    p.add_argument("--time", type=float, help="engine seconds per move (strength)")
    p.add_argument("--seed", type=int, default=0, help="seed of the engine (and random colour)")
    p.add_argument("--ply-limit", type=int, help="draw after this many plies")
    p.add_argument("--device", default="cpu", help="torch device for the network")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads of the network (onnxruntime and torch; default 1; 0 leaves torch's "
        "default and runs onnxruntime on one)",
    )
    p.add_argument("--backend", choices=PLAY_BACKENDS, default="auto",
                   help="the network's runtime: auto (int8 in onnxruntime on the CPU), int8 (quantized), onnx, torch")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns 0, or 2 for bad arguments (message on stderr)."""
    args = _parse_args(argv)
    try:
        if args.size is not None and args.size not in STANDARD_RESERVES:
            raise ValueError(f"--size must be 3..8, got {args.size}")
        if args.simulations is not None and args.simulations < 1:
            raise ValueError("--simulations must be >= 1")
        if args.time is not None and not (0 < args.time <= 86400):
            raise ValueError(f"--time must be a number of seconds in (0, 86400], got {args.time}")
        if args.threads is not None and not 0 <= args.threads <= 1024:
            raise ValueError(f"--threads must be in 0..1024, got {args.threads}")
        if args.ply_limit is not None and args.ply_limit < 1:
            raise ValueError(f"--ply-limit must be >= 1, got {args.ply_limit}")
        if args.model and args.opponent not in (None, "network"):
            raise ValueError(f"--model and --opponent {args.opponent} exclude each other")
        network = args.opponent in (None, "network") or check_spec(args.opponent) == "model"
        if args.model or network:
            set_search_threads(args.threads)
            set_play_backend(args.backend)
        player, size = make_opponent(
            args.model, args.opponent, args.size, args.simulations, args.seed, print, args.device
        )
        start = start_position(size, args.komi, player, print)
        # the files read, which 'save' never writes over: the model, or the pretrained one
        inputs = (args.model, model_spec_path(args.opponent) if args.opponent else None,
                  None if args.model or not network else pretrained_path(args.size or default_size()))
    except ValueError as e:
        print(f"takzero.play: {e}", file=sys.stderr)
        return 2
    if args.colour == "random":
        import random

        human = random.Random(args.seed).randrange(2)
    else:
        human = WHITE if args.colour == "white" else BLACK
    session = PlaySession(
        player,
        start,
        human,
        simulations=args.simulations,
        seconds=args.time,
        ply_limit=args.ply_limit,
        inputs=inputs,
    )
    try:
        session.run()
    except KeyboardInterrupt:
        print("\nbye")
    except BrokenPipeError:
        # the reader of our output went away (e.g. piped into head): stop without a traceback;
        # point stdout at devnull so that the flush at exit does not fail again (Python docs,
        # "Note on SIGPIPE")
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
