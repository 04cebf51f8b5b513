"""A takzero network (or any player spec) as a playtak bot.

::

    python -m takzero.playtak --model model.pt --guest --seek 5 300 10
    TAK_PASSWORD=... python -m takzero.playtak --model model.pt --user MyBot --password-env TAK_PASSWORD \\
        --seek 6 600 20 white --komi 2 --flats 30 --caps 1 --games 10
    python -m takzero.playtak --player uct:2000 --guest --accept --server localhost:10000

``--seek SIZE TIME INC [white|black|any]`` posts a seek (TIME and INC in seconds) after the login
and after every game; ``--komi`` (points, 0..4 by halves), ``--flats`` and ``--caps`` (default:
the size's standard counts) and ``--unrated`` go with it; the komi's default is the one the
model was trained for (its ``half_komi``: 2 for the shipped 6x6 network, else 0), and a
``--komi`` that differs gives one warning line. ``--accept [NAME]`` accepts open seeks
(of anyone, or of NAME only) that the player can play. The password is read from the environment
variable named by ``--password-env``, never from the command line. ``--games N`` stops after N
games (default: run until interrupted). The bot reconnects and resumes its game after a dropped
connection, and keeps ``--reserve`` seconds of its clock for the network (see
:mod:`takzero.protocols.playtak.bot`; the protocol lines are in
:mod:`takzero.protocols.playtak.lines`). At the end one JSON line of statistics goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from dataclasses import replace

from takzero.game.position import komi_to_half_komi
from takzero.io.files import exit_now
from takzero.matches.games import komi_override_warning
from takzero.players.network import (
    PLAY_BACKENDS,
    KomiMismatchWarning,
    set_play_backend,
    set_search_threads,
)
from takzero.players.registry import check_spec, help_text, make_player, spec_syntax
from takzero.protocols.playtak.bot import DEFAULT_RESERVE_S, DEFAULT_SERVER, LoginError, PlaytakBot
from takzero.protocols.playtak.lines import SeekSpec

_COLOURS = {"white": "W", "w": "W", "black": "B", "b": "B", "any": "A", "a": "A", "random": "A"}


def _server(text: str) -> tuple[str, int]:
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def _parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, SeekSpec | None, str | None]:
    p = argparse.ArgumentParser(
        prog="python -m takzero.playtak",
        description="Play on a playtak server as a bot.",
        epilog=help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--model", help="exported model or checkpoint (the player model:PATH)")
    who.add_argument("--player", help=f"a player spec instead: {spec_syntax()}")
    p.add_argument("--simulations", type=int, help="most simulations of a move (default: the clock decides)")
    login = p.add_mutually_exclusive_group()
    login.add_argument("--guest", action="store_true", help="log in as a guest (the default)")
    login.add_argument("--user", help="playtak account name")
    p.add_argument("--password-env", metavar="VAR", help="environment variable holding the password of --user")
    p.add_argument("--seek", nargs="+", metavar="ARG", help="SIZE TIME INC [white|black|any]: post this seek")
    p.add_argument("--komi", type=float,
                   help="komi of the seek in points (0..4, by halves; default: the model's own, else 0)")
    p.add_argument("--flats", type=int, help="flats per player of the seek (default: the size's standard)")
    p.add_argument("--caps", type=int, help="capstones per player of the seek (default: the size's standard)")
    p.add_argument("--unrated", action="store_true", help="post the seek as unrated")
    p.add_argument("--accept", nargs="?", const="", metavar="NAME", help="accept open seeks (of NAME only, if given)")
    p.add_argument("--games", type=int, help="stop after this many games")
    p.add_argument("--server", type=_server, default=DEFAULT_SERVER, help="HOST:PORT (default playtak.com:10000)")
    p.add_argument("--reserve", type=float, default=DEFAULT_RESERVE_S, help="seconds of the clock kept for latency")
    p.add_argument("--seed", type=int, default=0, help="seed of the player")
    p.add_argument("--threads", type=int, default=1,
                   help="CPU threads of the network (onnxruntime and torch; default 1)")
    p.add_argument("--backend", choices=PLAY_BACKENDS, default="auto",
                   help="the network's runtime: auto (int8 in onnxruntime on the CPU), int8 (quantized), onnx, torch")
    p.add_argument("-v", "--verbose", action="store_true", help="log every line sent and read")
    args = p.parse_args(argv)
    if args.seek is None and args.accept is None:
        p.error("give --seek SIZE TIME INC [colour] and/or --accept [NAME]")
    if args.seek is None and (args.flats is not None or args.caps is not None or args.komi is not None
                              or args.unrated):
        p.error("--komi, --flats, --caps and --unrated describe a seek: give --seek too")
    if args.user and not args.password_env:
        p.error("--user needs --password-env VAR (the password is read from that variable)")
    if args.password_env and not args.user:
        p.error("--password-env goes with --user")
    password = None
    if args.user:
        password = os.environ.get(args.password_env)
        if not password:
            p.error(f"the environment variable {args.password_env} is not set")
    if args.games is not None and args.games < 1:
        p.error(f"--games must be >= 1, got {args.games}")
    if args.simulations is not None and args.simulations < 1:
        p.error(f"--simulations must be >= 1, got {args.simulations}")
    if args.reserve < 0:
        p.error(f"--reserve must be >= 0, got {args.reserve}")
    spec = args.player or f"model:{args.model}"
    try:
        check_spec(spec)
    except ValueError as e:
        p.error(str(e))
    seek = None
    if args.seek is not None:
        if len(args.seek) not in (3, 4) or not all(x.isdigit() for x in args.seek[:3]):
            p.error("--seek takes SIZE TIME INC [white|black|any] (whole numbers, seconds)")
        colour = _COLOURS.get(args.seek[3].lower()) if len(args.seek) == 4 else "A"
        if colour is None:
            p.error(f"--seek colour must be white, black or any, got {args.seek[3]!r}")
        try:
            seek = SeekSpec(
                size=int(args.seek[0]), time_s=int(args.seek[1]), increment_s=int(args.seek[2]),
                colour=colour, half_komi=komi_to_half_komi(args.komi or 0.0), flats=args.flats,
                caps=args.caps, unrated=args.unrated,
            )
        except ValueError as e:
            p.error(str(e))
    return args, seek, password


def seek_komi(seek: SeekSpec, komi: float | None, player: object, spec: str) -> SeekSpec:
    """The seek with its komi: ``komi`` points when given, else the komi the player's network was
    trained for (``model_half_komi``; said in one line on stderr), else 0. A given komi that is
    not the network's gives one warning line (:func:`takzero.matches.games.komi_override_warning`;
    the player's own warning of the same komi is not repeated at each game). Raises ValueError for
    a komi the seek cannot carry."""
    model_half_komi = getattr(player, "model_half_komi", None)
    if komi is None:
        if model_half_komi:
            print(f"takzero.playtak: seek komi {model_half_komi / 2:g}, as the network was trained "
                  "(--komi to change)", file=sys.stderr)
        return replace(seek, half_komi=int(model_half_komi or 0))
    half_komi = komi_to_half_komi(komi)
    if model_half_komi is not None and model_half_komi != half_komi:
        print(f"takzero.playtak: {komi_override_warning(spec, model_half_komi, half_komi)}", file=sys.stderr)
        warnings.filterwarnings("ignore", message=f".* plays a game with komi {half_komi / 2:g};",
                                category=KomiMismatchWarning)
    return replace(seek, half_komi=half_komi)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point. Exit status 0 after the games (or Ctrl-C), 1 when the connection is lost
    for good, 2 for bad arguments, a player that cannot be built or a refused login."""
    args, seek, password = _parse_args(argv)
    spec = args.player or f"model:{args.model}"
    try:
        if not 1 <= args.threads <= 1024:
            raise ValueError(f"--threads must be in 1..1024, got {args.threads}")
        set_search_threads(args.threads)  # the network's CPU threads (model:PATH players)
        set_play_backend(args.backend)  # and its runtime
        player = make_player(spec, seed=args.seed)
        if seek is not None:
            seek = seek_komi(seek, args.komi, player, spec)
        bot = PlaytakBot(
            player, args.server, user=args.user, password=password, seek=seek,
            accept=args.accept, games=args.games, nodes=args.simulations, reserve_s=args.reserve, seed=args.seed,
            verbose=args.verbose,
        )
    except ValueError as e:
        print(f"takzero.playtak: cannot start: {e}", file=sys.stderr)
        return 2
    status = 0
    try:
        bot.run()
    except KeyboardInterrupt:
        print("takzero.playtak: interrupted", file=sys.stderr)
    except LoginError as e:
        print(f"takzero.playtak: {e}", file=sys.stderr)
        status = 2
    except (ConnectionError, OSError) as e:
        print(f"takzero.playtak: {e}", file=sys.stderr)
        status = 1
    except ValueError as e:  # the player cannot play the seek's settings
        print(f"takzero.playtak: cannot play: {e}", file=sys.stderr)
        status = 2
    print(json.dumps(bot.stats.summary()))
    return status


if __name__ == "__main__":
    exit_now(main())
