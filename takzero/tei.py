"""TEI (Tak Engine Interface) engine: ``python -m takzero.tei [--model model.pt]``.

The command line only: it parses the arguments and serves stdin (or, with ``--websocket``,
WebSocket connections through :mod:`takzero.tei_websocket`) with a
:class:`takzero.protocols.tei.engine.TEIEngine`. The commands the engine answers, its options (one
row each of :data:`takzero.protocols.tei.options.OPTIONS`) and its behaviour are described there.
"""

from __future__ import annotations

import argparse
import sys

from takzero.io.files import exit_now
from takzero.players.network import PLAY_BACKENDS
from takzero.players.registry import help_text, spec_syntax
from takzero.protocols.tei.engine import DEFAULT_PLAYER, TEIEngine
from takzero.protocols.tei.options import MAX_SEED, MAX_THREADS, MemoryBudget
from takzero.tei_websocket import DEFAULT_ADDRESS, parse_address, serve_websocket

__all__ = ["main"]


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m takzero.tei",
        description="takzero as a TEI engine (reads commands on stdin, answers on stdout).",
        epilog=help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", help="exported model (model.pt / model.onnx) or checkpoint")
    p.add_argument(
        "--player",
        default=DEFAULT_PLAYER,
        help=f"player without --model: {spec_syntax()} (default {DEFAULT_PLAYER})",
    )
    p.add_argument(
        "--fallback",
        help="player spec for sizes the model does not play, or 'none' to refuse (default: --player)",
    )
    p.add_argument(
        "--nodes",
        "--simulations",
        dest="nodes",
        type=int,
        help="simulations per move when go gives no limit (Nodes option)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the player (Seed option)")
    p.add_argument("--device", default="cpu", help="torch device for the network (cpu, cuda, auto)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads of the network (Threads option; onnxruntime intra-op and torch threads; "
        "default 1; 0 leaves torch's default and runs onnxruntime on one)",
    )
    p.add_argument(
        "--backend",
        choices=PLAY_BACKENDS,
        default="auto",
        help="the network's runtime (Backend option): auto (int8 in onnxruntime on the CPU, float32 "
        "where the network cannot be quantized), int8 (the network quantized to int8), onnx (float32), torch",
    )
    p.add_argument("--commands", help="read commands from this file instead of stdin")
    p.add_argument(
        "--websocket",
        nargs="?",
        const=DEFAULT_ADDRESS,
        metavar="[HOST:]PORT",
        help="serve the session over WebSocket instead of stdin, one engine per connection "
        f"(default {DEFAULT_ADDRESS}, PTN Ninja's; takzero/tei_websocket.py)",
    )
    args = p.parse_args(argv)
    if args.websocket is not None:
        if args.commands:
            p.error("--websocket and --commands cannot be used together")
        try:
            args.websocket = parse_address(args.websocket)
        except ValueError as e:
            p.error(str(e))
    if args.nodes is not None and args.nodes < 1:
        p.error(f"--nodes must be >= 1, got {args.nodes}")
    if not 0 <= args.seed <= MAX_SEED:
        p.error(f"--seed must be in 0..{MAX_SEED}, got {args.seed}")
    if not 0 <= args.threads <= MAX_THREADS:
        p.error(f"--threads must be in 0..{MAX_THREADS}, got {args.threads}")
    return args


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: build the engine, then serve stdin until ``quit`` (or, with
    ``--websocket``, serve WebSocket connections until Ctrl-C, a new engine for each). Returns
    the exit status (2 when the model or player given on the command line cannot be used, or the
    WebSocket address cannot be bound)."""
    args = _parse_args(argv)
    if args.model:
        import warnings

        from takzero.players.network import KomiMismatchWarning, set_search_threads

        set_search_threads(args.threads)  # the library's one place (0: torch's default)
        # The engine says it to the GUI as an "info string" (_check_model_komi); the library's
        # Python warning on stderr would repeat it with a source path.
        warnings.filterwarnings("ignore", category=KomiMismatchWarning)
    options = dict(model=args.model, player=args.player, fallback=args.fallback,
                   nodes=args.nodes, seed=args.seed, device=args.device,
                   threads=max(1, args.threads), backend=args.backend)
    try:  # with --websocket: a check at start, then one engine per connection
        engine = TEIEngine(**options, out=(lambda _line: None) if args.websocket else None)
    except Exception as e:  # noqa: BLE001 - a clear message instead of a traceback
        print(f"takzero.tei: cannot start: {e}", file=sys.stderr)
        return 2
    if args.websocket is not None:
        del engine  # it was the check; each connection builds its own
        memory = MemoryBudget()  # one for all connections: their trees together fit the machine
        return serve_websocket(lambda out: TEIEngine(**options, out=out, memory=memory), *args.websocket)
    if args.commands:
        try:
            f = open(args.commands, encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as e:
            print(f"takzero.tei: cannot read --commands {args.commands}: {e.strerror}", file=sys.stderr)
            return 2
        with f:
            engine.run(f)
    else:
        engine.run(sys.stdin)
    return 0


if __name__ == "__main__":
    exit_now(main())
