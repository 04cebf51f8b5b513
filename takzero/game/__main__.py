"""Command line tools of the rules engine.

``python -m takzero.game perft (--tps TPS | --size N) --depth D [--komi K] [--divide]
[--terminal-counts-one]``
    Count move sequences of length D (see :mod:`takzero.game.perft`) and print the count, the time
    and leaves per second; ``--divide`` first prints one ``move count`` line per legal move.

``python -m takzero.game replay FILE.ptn [FILE ...] [--lenient-numbers] [--komi K] [--flats N]
[--caps N]``
    Read every game of each file, replay it under the rules and print one line per game:
    ``FILE game I (line L): RESULT TPS`` (RESULT is ``*`` for an unfinished game; a ``Result`` tag
    that disagrees is shown too). ``--komi/--flats/--caps`` override the tags of every game.
    Exit status 1 with a ``FILE:line:column: token '...': reason`` line on stderr at the first
    malformed or illegal move, 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from takzero.game.perft import divide, perft
from takzero.game.position import Position, TPSError
from takzero.game.ptn import PTNError, read_ptn_file


def _perft(args: argparse.Namespace) -> int:
    try:
        if args.tps is not None:
            pos = Position.from_tps(args.tps, komi=args.komi)
        else:
            pos = Position.start(args.size, komi=args.komi)
    except (TPSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.depth < 0:
        print("error: --depth must be >= 0", file=sys.stderr)
        return 1
    perft(pos, min(args.depth, 2))  # compile / load the JIT cache outside the timing
    t0 = time.perf_counter()
    if args.divide and args.depth >= 1:
        parts = divide(pos, args.depth, terminal_counts_one=args.terminal_counts_one)
        for move, count in parts.items():
            print(f"{move} {count}")
        total = sum(parts.values())
    else:
        total = perft(pos, args.depth, terminal_counts_one=args.terminal_counts_one)
    dt = time.perf_counter() - t0
    rate = total / dt if dt > 0 else float("inf")
    print(f"perft {args.depth}: {total}")
    print(f"time {dt:.3f} s, {rate:,.0f} leaves/s")
    return 0


def _replay(args: argparse.Namespace) -> int:
    overrides = {}
    if args.komi is not None:
        overrides["Komi"] = f"{args.komi:g}"
    if args.flats is not None:
        overrides["Flats"] = str(args.flats)
    if args.caps is not None:
        overrides["Caps"] = str(args.caps)
    status = 0
    for path in args.files:
        try:
            games = read_ptn_file(path, check=False, strict_numbers=not args.lenient_numbers)
            for i, game in enumerate(games, 1):
                for warning in game.warnings:
                    print(f"{path}: warning: {warning}", file=sys.stderr)
                game.tags.update(overrides)
                final = game.final_position()  # checks every move (line:column on error)
                result = str(final.result) if final.is_over else "*"
                tag = game.result_tag
                note = f" (Result tag {tag})" if tag and tag != result else ""
                print(f"{path} game {i} (line {game.line}): {result} {final.to_tps()}{note}")
        except PTNError as e:
            print(str(e), file=sys.stderr)
            status = 1
        except (OSError, UnicodeDecodeError) as e:
            print(f"{path}: cannot read: {e}", file=sys.stderr)
            status = 1
    return status


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m takzero.game``."""
    parser = argparse.ArgumentParser(prog="python -m takzero.game", description="Tak rules engine tools")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("perft", help="count move sequences from a position")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--tps", help='position in TPS, e.g. "x6/x6/x6/x6/x6/x6 1 1"')
    where.add_argument("--size", type=int, choices=range(3, 9), help="empty board of this size")
    p.add_argument("--depth", type=int, required=True, help="plies to count")
    p.add_argument("--komi", type=float, default=0.0, help="komi in points (does not change counts)")
    p.add_argument("--divide", action="store_true", help="print the count below each legal move")
    p.add_argument("--terminal-counts-one", action="store_true",
                   help="count finished positions inside the tree as 1 (other engines' convention)")
    p.set_defaults(func=_perft)

    r = sub.add_parser("replay", help="replay and check the games of PTN files")
    r.add_argument("files", nargs="+", help="PTN files")
    r.add_argument("--lenient-numbers", action="store_true",
                   help="read moves in order and only warn about wrong move numbers")
    r.add_argument("--komi", type=float, help="komi in points for every game (overrides tags)")
    r.add_argument("--flats", type=int, help="stones per player for every game (overrides tags)")
    r.add_argument("--caps", type=int, help="capstones per player for every game (overrides tags)")
    r.set_defaults(func=_replay)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``argv`` without the program name); returns the exit status."""
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
