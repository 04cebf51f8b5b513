"""Match runner for TEI engines: ``python -m takzero.match --engine CMD --engine CMD ...``.

Example::

    python -m takzero.match \\
        --engine "python -m takzero.tei --model a.pt" \\
        --engine "python -m takzero.tei --model b.pt" \\
        --games 100 --openings openings.txt --nodes 400 --out runs/match1

What it does:

* starts both engines (``shlex.split`` of each ``--engine`` string) and speaks TEI with them
  (``tei``/``teiok``, ``setoption name HalfKomi``, ``teinewgame``, ``isready``, ``position ...
  moves ...``, ``go ...``, ``bestmove``); any TEI engine works, not only takzero's;
* plays paired openings: each opening is played twice with the colours swapped (``--games`` games
  in all; an odd count leaves the last opening unpaired). Openings come from ``--openings FILE``
  (one per line: PTN moves such as ``a1 f6`` or ``1. a1 f6``, or a TPS; ``#`` starts a comment;
  a file with PTN tags is read as PTN games and each game's moves are an opening), else
  ``--opening-plies`` (default 2) random plies per opening from ``--seed``;
* time control: ``--nodes N`` (``go nodes N``), ``--movetime MS`` (``go movetime MS``) or
  ``--tc BASE+INC`` in seconds (``go wtime btime winc binc`` with clocks kept by the runner; an
  engine that overruns its clock by more than ``--time-margin`` ms loses on time). ``--nodes``
  and ``--movetime`` take one value for both engines or two, one per engine in ``--engine``
  order (``--nodes 400 1000``: 400 for engine 1, 1000 for engine 2);
* the board size and komi: ``--size`` and ``--komi`` (points), by default those of the model that
  engine 1 plays (engine 2's when engine 1 is not a takzero engine with a model: ``python -m
  takzero.tei --model PATH`` or ``--player model:PATH``), else 6x6 and komi 0; a line says where
  they came from, and one warning line names each model trained for another komi than the
  match's (its values are off near the end of the game);
* an engine whose model does not play ``--size`` (it says at ``teinewgame``
  that it would play its Fallback baseline) stops the match before the first game, unless
  ``--allow-fallback``: then it is named after the baseline it really plays
  (``uct:200 (fallback of takzero model-5x5)``) in the game lines, the PTN and the score; an
  engine whose TEI version 1 ``size ... halfkomi ...`` lines leave out the match's komi for
  ``--size`` stops it too (it would play another komi than the one the games are scored with);
* adjudicates with the rules engine: roads and flat wins, the ply limit (``--ply-limit``, draw;
  default :data:`takzero.matches.games.DEFAULT_PLY_LIMIT`, as ``takzero.evaluate``'s) and
  threefold repetition (draw; ``--no-threefold`` turns it off);
* an engine that crashes, stops answering (``--move-timeout``), or sends a malformed or illegal
  move loses the game (PTN result ``1-0``/``0-1`` with a comment giving the reason); it is
  restarted for the next game and the match goes on;
* writes every game as PTN to ``--out DIR/games.ptn`` (rewritten atomically after each game;
  when an earlier match's ``games.ptn`` is there it is kept and this match writes
  ``games_2.ptn``, ``games_3.ptn``, ..., said at the start and the end) and prints a line
  per game with engine 1's tally so far as W-D-L (with ``--links`` followed by a PTN Ninja link
  that opens the game), then the score (W-D-L) with the Elo difference of engine 1 over engine 2
  and its 95% interval, the interval's model named (``MatchResult.describe_elo``: the
  pentanomial score-test interval when every opening was played with both colours, else the
  trinomial one; "too few games" under 2 games);
* Ctrl-C stops the match: the engines are stopped, the finished games are in the PTN file, the
  score so far is printed with its interval, and the exit status is 130.

This module is the command line only; the runner is ``takzero.protocols.tei.match`` and the
openings file reader ``takzero.matches.openings``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from takzero.game.position import komi_to_half_komi
from takzero.io.files import check_not_input, check_writable_folder
from takzero.io.ptn_ninja import ptn_ninja_url
from takzero.matches.games import DEFAULT_PLY_LIMIT, komi_override_warning
from takzero.matches.openings import load_openings
from takzero.matches.spec import MatchSpec
from takzero.protocols.tei.match import (
    GameOutcome,
    MatchAborted,
    MatchInterrupted,
    TimeControl,
    run_tei_match,
)

__all__ = ["engine_model", "main", "match_settings"]


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m takzero.match",
        description="Play two TEI engines against each other on paired openings.",
    )
    p.add_argument(
        "--engine",
        action="append",
        required=True,
        help="engine command line (give it twice); e.g. 'python -m takzero.tei --model a.pt'",
    )
    p.add_argument("--games", type=int, default=10, help="games in all (default 10)")
    p.add_argument("--size", type=int,
                   help="board size (default: the model's of engine 1, else of engine 2, else 6)")
    p.add_argument("--komi", type=float,
                   help="komi in points (default: the model's of engine 1, else of engine 2, else 0)")
    p.add_argument("--openings", help="openings file (PTN moves or TPS per line, or PTN games)")
    p.add_argument("--opening-plies", type=int, default=2, help="random opening plies (default 2)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random openings")
    tcg = p.add_mutually_exclusive_group()
    tcg.add_argument("--nodes", type=int, nargs="+", metavar="N",
                     help="go nodes N for every move; two values: one per engine, in --engine order")
    tcg.add_argument("--movetime", type=int, nargs="+", metavar="MS",
                     help="go movetime MS for every move (default 1000); two values: one per engine")
    tcg.add_argument("--tc", help="clock BASE+INC in seconds, e.g. 60+0.5")
    p.add_argument("--allow-fallback", action="store_true",
                   help="let an engine whose model does not play --size play its Fallback baseline "
                        "(named after it); default: stop before the first game")
    p.add_argument(
        "--time-margin",
        type=int,
        default=1000,
        help="ms past its clock before an engine loses on time (default 1000)",
    )
    p.add_argument(
        "--move-timeout",
        type=float,
        default=120.0,
        help="seconds to wait for a bestmove under nodes/movetime (default 120)",
    )
    p.add_argument(
        "--ply-limit", type=int, default=DEFAULT_PLY_LIMIT,
        help=f"draw after this many plies (0: none; default {DEFAULT_PLY_LIMIT})",
    )
    p.add_argument("--no-threefold", action="store_true", help="no threefold-repetition draws")
    p.add_argument(
        "--out", default="match_games",
        help="folder for games.ptn (default match_games; an earlier games.ptn is kept: then games_2.ptn ...)",
    )
    p.add_argument("--log", action="store_true", help="print every TEI line to stderr")
    p.add_argument("--links", action="store_true", help="print a PTN Ninja link after each game")
    return p.parse_args(argv)


def _per_engine(values: list[int]) -> list[int]:
    """One value for both engines, or one each."""
    return values * 2 if len(values) == 1 else values


def engine_model(command: str) -> str | None:
    """The model file that a takzero TEI engine command line plays (``python -m takzero.tei
    --model PATH``, ``--model=PATH``, or ``--player model:PATH[:N]``); None for another engine or
    one without a model (the file is not checked here)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if "takzero.tei" not in argv:
        return None
    args = argv[argv.index("takzero.tei") + 1:]
    given: dict[str, str] = {}
    for i, a in enumerate(args):
        name, eq, value = a.partition("=")
        if name in ("--model", "--player"):
            if eq:
                given[name] = value
            elif i + 1 < len(args):
                given[name] = args[i + 1]
    if given.get("--model"):
        return given["--model"]
    from takzero.players.registry import model_spec_path

    return model_spec_path(given.get("--player", ""))


def model_settings(path: str) -> tuple[int, int | None] | None:
    """The board size and the half-komi (None: not recorded) that the model file ``path`` was
    trained for, from its metadata (a checkpoint's, an export's or an ONNX file's); None when it
    cannot be read (the engine that plays it says why when it starts)."""
    from takzero.nn.inference import Evaluator

    try:
        meta = Evaluator.load(path, device="cpu").metadata
        half_komi = meta.get("half_komi")
        return int(meta["size"]), None if half_komi is None else int(half_komi)
    except Exception:  # noqa: BLE001 - any unreadable file: the engine reports it
        return None


def match_settings(
    engines: list[str], size: int | None, komi: float | None, say: Callable[[str], None] = print
) -> tuple[int, int]:
    """The match's board size and half-komi: ``size`` and ``komi`` (points) when given, else those
    of the model engine 1 plays, else engine 2's (:func:`engine_model`), else 6 and 0. ``say``
    gets a line naming where defaults came from, and one warning line per model trained for
    another komi than the match's. Raises ValueError for a komi that is not a multiple of 0.5."""
    found = [(i + 1, path, model_settings(path)) for i, cmd in enumerate(engines)
             if (path := engine_model(cmd)) is not None]
    models = [(n, path, got) for n, path, got in found if got is not None]
    first = models[0] if models else None
    half_komi = komi_to_half_komi(komi) if komi is not None else None
    taken = []
    if size is None:
        size = first[2][0] if first else 6
        if first:
            taken.append(f"{size}x{size}")
    if half_komi is None:
        half_komi = (first[2][1] or 0) if first else 0
        if first and first[2][1] is not None:
            taken.append(f"komi {half_komi / 2:g}")
    if taken and first:
        say(f"{' and '.join(taken)}: the model of engine {first[0]} ({first[1]}); --size and --komi change it")
    source = "--komi" if komi is not None else f"engine {first[0]}'s model's" if first else "the default"
    for n, path, (model_size, model_half_komi) in models:
        if model_half_komi is not None and model_half_komi != half_komi and model_size == size:
            say(komi_override_warning(f"engine {n}'s model {path}", model_half_komi, half_komi, source))
    return size, half_komi


def _print_link(outcome: GameOutcome) -> None:
    print(f"  PTN Ninja: {ptn_ninja_url(outcome.ptn)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns 0, 2 for bad arguments/openings, 3 when an engine does not start
    or cannot play the size (message on stderr), 130 after Ctrl-C (the score so far printed)."""
    args = _parse_args(argv)
    try:
        if args.komi is not None:
            komi_to_half_komi(args.komi)  # a bad --komi: refused before any model is read
        if args.ply_limit < 0:
            raise ValueError(f"--ply-limit must be >= 0 (0: none), got {args.ply_limit}")
        if not 0 < args.move_timeout <= 86400:
            raise ValueError(f"--move-timeout must be in (0, 86400] seconds, got {args.move_timeout}")
        common = {"margin": args.time_margin, "move_timeout": args.move_timeout}
        if args.tc:
            tc: TimeControl | list[TimeControl] = TimeControl.parse_tc(args.tc, **common)
        elif args.nodes is not None:
            if not 1 <= len(args.nodes) <= 2:
                raise ValueError(f"--nodes takes one value or two (one per engine), got {args.nodes}")
            if min(args.nodes) < 1:
                raise ValueError(f"--nodes must be >= 1, got {args.nodes}")
            tc = [TimeControl(nodes=n, **common) for n in _per_engine(args.nodes)]
        else:
            movetimes = args.movetime or [1000]
            if not 1 <= len(movetimes) <= 2:
                raise ValueError(f"--movetime takes one value or two (one per engine), got {movetimes}")
            if min(movetimes) < 1:
                raise ValueError(f"--movetime must be >= 1 ms, got {movetimes}")
            tc = [TimeControl(movetime=m, **common) for m in _per_engine(movetimes)]
        if args.out:
            try:
                check_writable_folder(args.out)
                if (Path(args.out) / "games.ptn").is_dir():
                    raise IsADirectoryError(f"{Path(args.out) / 'games.ptn'} is a folder")
            except OSError as e:
                raise ValueError(f"--out {args.out}: cannot write games.ptn there: {e.strerror or e}") from None
            check_not_input(Path(args.out) / "games.ptn", args.openings, option="--out")
        size, half_komi = match_settings(args.engine, args.size, args.komi,
                                         say=lambda line: print(line, file=sys.stderr, flush=True))
        openings = load_openings(args.openings, size, half_komi) if args.openings else None
        log = (lambda line: print(line, file=sys.stderr, flush=True)) if args.log else None
        match = MatchSpec(
            games=args.games, size=size, half_komi=half_komi, ply_limit=args.ply_limit or None,
            opening_plies=args.opening_plies, seed=args.seed, threefold=not args.no_threefold,
            openings=None if openings is None else tuple(openings),
        )
        run_tei_match(
            args.engine,
            match,
            tc,
            out_dir=args.out,
            printer=lambda s: print(s, flush=True),
            log=log,
            allow_fallback=args.allow_fallback,
            on_game=_print_link if args.links else None,
        )
    except MatchInterrupted:
        return 130  # the score so far is printed
    except KeyboardInterrupt:  # before the first game: nothing to report
        print("takzero.match: interrupted before the first game", file=sys.stderr)
        return 130
    except (OSError, ValueError) as e:
        print(f"takzero.match: {e}", file=sys.stderr)
        return 2
    except MatchAborted as e:
        print(f"takzero.match: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
