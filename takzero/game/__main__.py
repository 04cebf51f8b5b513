"""Command line tools of the rules engine.

``python -m takzero.game perft (--tps TPS | --size N) --depth D [--komi K] [--divide]
[--terminal-counts-one]``
    Count move sequences of length D (see :mod:`takzero.game.perft`) and print the count, the time
    and leaves per second; ``--divide`` first prints one ``move count`` line per legal move.

``python -m takzero.game replay FILE.ptn [FILE ...] [--lenient-numbers] [--komi K] [--flats N]
[--caps N]``
    Read each file game by game, replay every game under the rules and print one line per game:
    ``FILE game I (line L): RESULT TPS`` (RESULT is ``*`` for an unfinished game), or
    ``FILE game I (line L): rejected`` for a game that cannot be read or replayed, with a
    ``FILE:line:column: token '...': reason`` line on stderr (and a hint when custom reserves or
    ``--lenient-numbers`` would explain it); the next game goes on. A ``Result`` tag that
    disagrees with the moves by meaning (:func:`~takzero.game.ptn_game.result_tag_agrees`:
    chess-style ``1-0`` agrees with a white road or flat win; a resignation or a loss on time is
    no disagreement) adds ``(Result tag X disagrees)`` and a warning on stderr (which komi would
    fit, when the game has no Komi tag). ``--komi/--flats/--caps`` override the tags of every
    game. Ends with ``replay: N games replayed, M rejected, K Result tag disagreements`` on stderr;
    exit status 1 when any game (or file) was rejected, 0 otherwise. What is read is bounded
    (:mod:`takzero.game.ptn`: a file of at most 8 MiB, ``/dev/zero`` or a pipe read only that
    far, a line of 1 MiB, a tag of 4 KiB, a game of 200,000 plies): a file over a bound is one
    line naming it on stderr and counts as rejected.

``python -m takzero.game tinue --tps TPS [--komi K] [--flats N] [--caps N] [--attacker white|black]
[--nodes N | --seconds S]``
    Prove or disprove a forced road (tinuë) for the side to move (or ``--attacker``) with the
    df-pn prover of :mod:`takzero.game.tinue`; prints ``verdict WIN|NO_WIN|UNKNOWN``, for a WIN
    ``move`` (PTN), ``pv`` (PTN, ``...`` if cut short) and ``depth``, then nodes, time and nodes/s.
    Budget: ``--nodes`` node visits or ``--seconds`` of wall time (default 10 s). Exit status 0
    with a verdict, 2 with ``error: ...`` on stderr for bad input (a bad TPS, komi or budget, a
    finished position).

``python -m takzero.game annotate IN.ptn [-o OUT.ptn] [--nodes N] [--seconds S]``
    Write the games of IN.ptn (to OUT.ptn, else stdout) with the tak marks recomputed: ``'`` after
    a move that threatens a road (tak: :func:`~takzero.game.threats.is_tak`), ``"`` after a tak move
    whose forced road the prover proves within the per-move budget (tinuë; default 1000 node
    visits, about 0.1-1 s on 6x6, or ``--seconds`` per move). Existing ``'``/``"`` marks are
    replaced, ``!``/``?`` kept after the new mark; tags, comments and moves are written back
    unchanged, so reading the output gives the same games. A move that ends the game gets no tak
    mark. A summary goes to stderr. Exit status 2 with the file, line and reason on stderr when
    the file cannot be read or a game cannot be replayed (nothing is written then).
``python -m takzero.game show (--tps TPS [--last-move MOVE] | --ptn FILE [--game I] [--ply N])
-o OUT.png|OUT.svg [--komi K] [--flats N] [--caps N] [--title T] [--width INCHES] [--dpi D]``
    Draw a position (:mod:`takzero.io.picture`: stacks, top pieces, the last move marked) to a
    PNG or SVG file: a TPS (``--last-move`` marks a move given in PTN), or game I (1-based,
    default 1) of a PTN file after N plies of its move text (default: all; the last of them is
    marked). Prints the file written. Exit status 2 with ``error: ...`` on stderr for bad input.

``python -m takzero.game link FILE.ptn [--game I] [--ply N] [--name NAME]``
    Print a PTN Ninja link (:mod:`takzero.io.ptn_ninja`) for each game of the file (or game I
    only), opening at ply N when given (without it PTN Ninja opens the game at its start).
    A link over ``MAX_LINK_CHARS`` (32,000) characters is printed all the same, with a
    ``FILE: warning: game I: ...`` line on stderr (it may not open in a browser).
    Exit status 2 with ``error: ...`` for a bad file.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from takzero.game import threats, tinue
from takzero.game.core import MAX_SIZE
from takzero.game.moves import MoveError
from takzero.game.perft import divide, perft
from takzero.game.position import Position, TPSError, komi_to_half_komi
from takzero.game.ptn import (
    PTNError,
    PTNGame,
    RejectedGame,
    read_ptn_file,
    read_ptn_file_each,
    write_ptn_games,
)
from takzero.io.files import atomic_write_text, check_not_input
from takzero.io.ptn_ninja import link_length_problem, ptn_ninja_url

# Command-line value checks: argparse ``type=`` functions, so a bad value is refused at start-up
# (exit status 2, a message naming the option) before any file is read.


def _komi_arg(text: str) -> float:
    """A komi in points: a number, a multiple of 0.5 in -100..100 (``komi_to_half_komi``)."""
    try:
        komi = float(text)
        komi_to_half_komi(komi)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e) if "komi" in str(e) else f"not a number: {text!r}") from None
    return komi


#: The widest board picture ``show`` draws, in pixels (--width x --dpi): 10,000 pixels square is
#: about 400 MB of drawing buffer; --width 1000 asked for 45 GB.
MAX_PICTURE_PIXELS = 10_000


def _int_in(lo: int, hi: int | None = None, what: str = "a whole number"):
    """An argparse type: a whole number in lo..hi (no upper bound when hi is None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a whole number, got {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            bounds = f">= {lo}" if hi is None else f"in {lo}..{hi}"
            raise argparse.ArgumentTypeError(f"{what} must be {bounds}, got {value}")
        return value

    return parse


def _positive_float(what: str):
    """An argparse type: a finite number > 0."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number, got {text!r}") from None
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"{what} must be a number > 0, got {text}")
        return value

    return parse


#: Per-player piece counts any board size allows (``Position.reserves_for`` checks the size's own
#: capstone limit, 2 x size, once the size is known).
_flats_arg = _int_in(1, 62, "stones per player")
_caps_arg = _int_in(0, 2 * MAX_SIZE, "capstones per player")


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


@dataclass
class ReplaySummary:
    """Counts of a ``replay`` run: games replayed, games rejected, Result-tag disagreements."""

    replayed: int = 0
    rejected: int = 0
    disagreements: int = 0

    def line(self) -> str:
        return (f"replay: {self.replayed} games replayed, {self.rejected} rejected, "
                f"{self.disagreements} Result tag disagreements")


def _replay(args: argparse.Namespace) -> int:
    overrides = {}
    if args.komi is not None:
        overrides["Komi"] = f"{args.komi:g}"
    if args.flats is not None:
        overrides["Flats"] = str(args.flats)
    if args.caps is not None:
        overrides["Caps"] = str(args.caps)
    summary = ReplaySummary()
    for path in args.files:
        _replay_file(path, overrides, not args.lenient_numbers, summary)
    print(summary.line(), file=sys.stderr)
    return 1 if summary.rejected else 0


def _replay_file(path: str, overrides: dict[str, str], strict_numbers: bool, summary: ReplaySummary) -> None:
    """Replay the games of one file, one line each on stdout; a rejected game or a disagreeing
    Result tag gets a ``FILE:line:column:`` line on stderr and the next game goes on."""
    try:
        entries = read_ptn_file_each(path, check=False, strict_numbers=strict_numbers)
    except PTNError as e:  # not UTF-8: nothing of the file can be read
        print(f"{e}", file=sys.stderr)
        summary.rejected += 1
        return
    except OSError as e:
        print(f"{path}: cannot read: {e}", file=sys.stderr)
        summary.rejected += 1
        return
    for i, entry in enumerate(entries, 1):
        if isinstance(entry, RejectedGame):
            hint = " (--lenient-numbers reads the moves in order)" if "move number" in entry.error.reason else ""
            print(f"{path} game {i} (line {entry.line}): rejected", flush=True)
            print(f"{entry.error}{hint}", file=sys.stderr, flush=True)
            summary.rejected += 1
            continue
        game = entry
        for warning in game.warnings:  # what the lenient read tolerated (move numbers)
            print(f"{path}: warning: {warning}", file=sys.stderr)
        game.tags.update(overrides)
        try:
            final = game.final_position()  # checks every move (line:column on error)
        except PTNError as e:
            reserves = _reserves_hint(game, e)
            print(f"{path} game {i} (line {game.line}): rejected", flush=True)
            print(f"{e}{'; ' + reserves if reserves else ''}", file=sys.stderr, flush=True)
            summary.rejected += 1
            continue
        summary.replayed += 1
        result = str(final.result) if final.is_over else "*"
        disagreement = game.check_result_tag(final)
        note = ""
        if disagreement is not None:
            summary.disagreements += 1
            note = f" (Result tag {game.result_tag} disagrees)"
            line, col = game.tag_locations.get("Result", (game.line, 1))
            print(f"{path}:{line}:{col}: warning: {disagreement}", file=sys.stderr)
        print(f"{path} game {i} (line {game.line}): {result} {final.to_tps()}{note}", flush=True)


def _reserves_hint(game: PTNGame, error: PTNError) -> str | None:
    """When a game fails for want of a capstone or a stone, the smallest ``Caps``/``Flats`` tag
    with which it replays, as a hint that it was played with custom reserves the tags do not
    record; None otherwise (or when no count up to the limit helps)."""
    if "no capstone left" in error.reason:
        key = "Caps"
    elif "no stones left" in error.reason:
        key = "Flats"
    else:
        return None
    start = game.start
    size = start.size
    current = _int_tag_or_default(game.tags, key, size)
    limit = 2 * size if key == "Caps" else 62
    trial = PTNGame(tags=dict(game.tags), moves=game.moves)
    for count in range(current + 1, limit + 1):
        trial.tags[key] = str(count)
        try:
            trial.final_position()
        except PTNError:
            continue
        return (f"hint: the game replays with [{key} \"{count}\"]: it was probably played with custom "
                f"reserves that the tags do not record (--{key.lower()} {count} sets them for every game)")
    return None


def _int_tag_or_default(tags: dict[str, str], key: str, size: int) -> int:
    value = tags.get(key, "").strip()
    if value.isdigit():
        return int(value)
    stones, caps = Position.reserves_for(size)
    return caps if key == "Caps" else stones


def _tinue(args: argparse.Namespace) -> int:
    try:
        pos = Position.from_tps(args.tps, komi=args.komi, flats=args.flats, caps=args.caps)
        if pos.is_over:
            raise ValueError(f"the game is over in this position ({pos.result})")
        if args.nodes is not None and args.nodes < 1:
            raise ValueError("--nodes must be >= 1")
        if args.seconds is not None and not 0 < args.seconds <= tinue.MAX_SECONDS:
            raise ValueError(f"--seconds must be a number in (0, {tinue.MAX_SECONDS:g}]")
    except (TPSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    seconds = args.seconds if (args.seconds is not None or args.nodes is not None) else 10.0
    attacker = None if args.attacker is None else ("white", "black").index(args.attacker)
    result = tinue.prove_tinue(pos, max_nodes=args.nodes, max_seconds=seconds, attacker=attacker)
    print(tinue.format_result(result))
    return 0


def annotate_games(games: list, max_nodes: int | None, max_seconds: float | None) -> tuple[int, int]:
    """Recompute the tak (``'``) and tinuë (``"``) marks of ``games`` (PTNGame objects, changed in
    place; see the ``annotate`` command). Returns (tak marks, tinuë marks). Raises PTNError if a
    game cannot be replayed."""
    taks = 0
    tinues = 0
    for game in games:
        pos = game.start
        marks: dict[int, str] = {}
        for i, code in enumerate(game.moves):
            try:
                pos = pos.play(code)
            except MoveError as e:
                raise game.move_error(i, str(e)) from None
            rest = "".join(c for c in game.marks.get(i, "") if c not in "'\"")
            mark = ""
            if not pos.is_over and threats.is_tak(pos):
                mover = 1 - pos.side_to_move
                res = tinue.prove_tinue(pos, max_nodes=max_nodes, max_seconds=max_seconds, attacker=mover)
                mark = '"' if res.verdict == tinue.WIN else "'"
            if mark == '"':
                tinues += 1
            elif mark:
                taks += 1
            if mark + rest:
                marks[i] = mark + rest
        game.marks = marks
    return taks, tinues


def _annotate(args: argparse.Namespace) -> int:
    if args.nodes is not None and args.nodes < 1:
        print("error: --nodes must be >= 1", file=sys.stderr)
        return 2
    if args.seconds is not None and not 0 < args.seconds <= tinue.MAX_SECONDS:
        print(f"error: --seconds must be a number in (0, {tinue.MAX_SECONDS:g}]", file=sys.stderr)
        return 2
    nodes = args.nodes if (args.nodes is not None or args.seconds is not None) else 1000
    try:
        if args.output is not None:
            check_not_input(args.output, args.file)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        games = read_ptn_file(args.file, check=False, strict_numbers=False)
        taks, tinues = annotate_games(games, nodes, args.seconds)
        text = write_ptn_games(games)
    except PTNError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError) as e:
        print(f"error: {args.file}: cannot read: {e}", file=sys.stderr)
        return 2
    if args.output is None:
        sys.stdout.write(text)
    else:
        try:
            atomic_write_text(args.output, text)
        except OSError as e:
            print(f"error: {args.output}: cannot write: {e}", file=sys.stderr)
            return 2
    print(f"annotated {len(games)} games: {taks} tak, {tinues} tinue marks", file=sys.stderr)
    return 0


def _ptn_game_at(path: str, index: int, ply: int | None) -> tuple[Position, int | None]:
    """(position after ``ply`` plies of game ``index`` (1-based) of a PTN file, the last move
    played or None). Raises PTNError, OSError, ValueError."""
    games = read_ptn_file(path, check=False, strict_numbers=False)
    if not 1 <= index <= len(games):
        raise ValueError(f"{path} has {len(games)} games; --game must be in 1..{len(games)}")
    game = games[index - 1]
    n = len(game.moves) if ply is None else ply
    if not 0 <= n <= len(game.moves):
        raise ValueError(f"game {index} has {len(game.moves)} plies; --ply must be in 0..{len(game.moves)}")
    pos = game.start
    for i, code in enumerate(game.moves[:n]):
        try:
            pos = pos.play(code)
        except MoveError as e:
            raise game.move_error(i, str(e)) from None
    return pos, (game.moves[n - 1] if n else None)


def _show(args: argparse.Namespace) -> int:
    from takzero.io.picture import check_last_move, save_board

    try:
        if args.tps is not None:
            if args.game is not None or args.ply is not None:
                raise ValueError("--game and --ply go with --ptn, not --tps")
            pos = Position.from_tps(args.tps, komi=args.komi, flats=args.flats, caps=args.caps)
            last = args.last_move
            if last is not None:
                try:
                    last = check_last_move(pos, last)
                except MoveError as e:
                    raise ValueError(f"--last-move {args.last_move}: {e}") from None
        else:
            if args.last_move is not None:
                raise ValueError("--last-move goes with --tps (a PTN game marks its own last move)")
            check_not_input(args.output, args.ptn)
            pos, last = _ptn_game_at(args.ptn, 1 if args.game is None else args.game, args.ply)
        pixels = args.width * args.dpi
        if pixels > MAX_PICTURE_PIXELS:  # a picture's width in pixels (its height is about the same)
            raise ValueError(f"--width {args.width:g} at --dpi {args.dpi} is {pixels:,.0f} pixels wide; "
                             f"at most {MAX_PICTURE_PIXELS:,} (e.g. --width 4 --dpi 100)")
        path = save_board(pos, args.output, last_move=last, title=args.title, width=args.width, dpi=args.dpi)
    except (TPSError, PTNError, MoveError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def _link(args: argparse.Namespace) -> int:
    try:
        games = read_ptn_file(args.file, check=True, strict_numbers=False)
        if args.game is not None and not 1 <= args.game <= len(games):
            raise ValueError(f"{args.file} has {len(games)} games; --game must be in 1..{len(games)}")
        chosen = games if args.game is None else [games[args.game - 1]]
        if args.ply is not None and any(args.ply > len(g.moves) for g in chosen):
            raise ValueError(f"--ply {args.ply} is past the end of a game")
        links = [ptn_ninja_url(g, name=args.name, ply=args.ply) for g in chosen]
    except (PTNError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError) as e:
        print(f"error: {args.file}: cannot read: {e}", file=sys.stderr)
        return 2
    numbers = range(1, len(games) + 1) if args.game is None else [args.game]
    for n, link in zip(numbers, links, strict=True):
        problem = link_length_problem(link)  # printed all the same; the warning says why
        if problem:
            print(f"{args.file}: warning: game {n}: {problem}", file=sys.stderr)
        print(link)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m takzero.game``."""
    parser = argparse.ArgumentParser(prog="python -m takzero.game", description="Tak rules engine tools")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("perft", help="count move sequences from a position")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--tps", help='position in TPS, e.g. "x6/x6/x6/x6/x6/x6 1 1"')
    where.add_argument("--size", type=int, choices=range(3, 9), help="empty board of this size")
    p.add_argument("--depth", type=int, required=True, help="plies to count")
    p.add_argument("--komi", type=_komi_arg, default=0.0, help="komi in points (does not change counts)")
    p.add_argument("--divide", action="store_true", help="print the count below each legal move")
    p.add_argument("--terminal-counts-one", action="store_true",
                   help="count finished positions inside the tree as 1 (other engines' convention)")
    p.set_defaults(func=_perft)

    r = sub.add_parser("replay", help="replay and check the games of PTN files")
    r.add_argument("files", nargs="+", help="PTN files")
    r.add_argument("--lenient-numbers", action="store_true",
                   help="read moves in order and only warn about wrong move numbers")
    r.add_argument("--komi", type=_komi_arg, help="komi in points for every game (overrides tags)")
    r.add_argument("--flats", type=_flats_arg, help="stones per player for every game (overrides tags)")
    r.add_argument("--caps", type=_caps_arg, help="capstones per player for every game (overrides tags)")
    r.set_defaults(func=_replay)

    t = sub.add_parser("tinue", help="prove or disprove a forced road (tinue) from a position")
    t.add_argument("--tps", required=True, help='position in TPS, e.g. "x5/x5/x5/x5/x5 1 1"')
    t.add_argument("--komi", type=_komi_arg, default=0.0, help="komi in points (default 0)")
    t.add_argument("--flats", type=_flats_arg, help="stones per player (default: standard for the size)")
    t.add_argument("--caps", type=_caps_arg, help="capstones per player (default: standard for the size)")
    t.add_argument("--attacker", choices=("white", "black"), help="default: the side to move")
    budget = t.add_mutually_exclusive_group()
    budget.add_argument("--nodes", type=int, help="node visits budget")
    budget.add_argument("--seconds", type=float, help="wall-time budget (default 10 s)")
    t.set_defaults(func=_tinue)

    a = sub.add_parser("annotate", help="write a PTN file with tak (') and tinue (\") marks")
    a.add_argument("file", help="PTN file to annotate")
    a.add_argument("-o", "--output", help="output PTN file (default: stdout)")
    per = a.add_mutually_exclusive_group()
    per.add_argument("--nodes", type=int, help="prover budget per tak move in node visits (default 1000)")
    per.add_argument("--seconds", type=float, help="prover budget per tak move in seconds")
    a.set_defaults(func=_annotate)

    s = sub.add_parser("show", help="draw a position to a PNG or SVG file")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--tps", help='position in TPS, e.g. "x5/x5/x5/x5/x5 1 1"')
    src.add_argument("--ptn", help="a PTN file: draw one of its games after some plies")
    s.add_argument("-o", "--output", required=True, help="picture file, .png or .svg")
    s.add_argument("--last-move", help="with --tps: the move (PTN) to mark as the last one")
    s.add_argument("--game", type=_int_in(1, what="the game number"),
                   help="with --ptn: game number, 1-based (default 1)")
    s.add_argument("--ply", type=_int_in(0, what="the ply count"),
                   help="with --ptn: plies of the move text played (default: all)")
    s.add_argument("--komi", type=_komi_arg, default=0.0, help="with --tps: komi in points (default 0)")
    s.add_argument("--flats", type=_flats_arg, help="with --tps: stones per player (default: standard)")
    s.add_argument("--caps", type=_caps_arg, help="with --tps: capstones per player (default: standard)")
    s.add_argument("--title", help="a first title line, e.g. the players")
    s.add_argument("--width", type=_positive_float("the width"), default=4.0, help="width in inches (default 4)")
    s.add_argument("--dpi", type=_int_in(1, what="the dpi"), default=100, help="PNG pixels per inch (default 100)")
    s.set_defaults(func=_show)

    n = sub.add_parser("link", help="print PTN Ninja links for the games of a PTN file")
    n.add_argument("file", help="PTN file")
    n.add_argument("--game", type=_int_in(1, what="the game number"), help="only this game, 1-based")
    n.add_argument("--ply", type=_int_in(0, what="the ply count"), help="open the games after this many plies")
    n.add_argument("--name", help="the title PTN Ninja shows")
    n.set_defaults(func=_link)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``argv`` without the program name); returns the exit status."""
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
