"""Soak run of the playtak bot: N whole games against the in-process server at a fast clock, with
dropped connections in the middle of games, checking that nothing goes wrong on the wire.

::

    python scripts/playtak_soak.py                       # 20 games, the shipped 5x5 network vs greedy
    python scripts/playtak_soak.py --games 4 --player uct:100000 --size 4 --time 10

The bot under test (``--player``, default ``model:checkpoints/pretrained/5x5.pt``) posts a seek
of ``--size``, ``--time`` seconds and ``--inc`` increment; a second bot (``--opponent``, default
``greedy``) accepts it. In game ``--drop-server`` (1-based) the server closes the bot's connection
after ``--drop-after`` plies, and in game ``--drop-client`` the bot breaks it from its side; the
bot must reconnect and finish the game. One JSON line per game (result, why it ended, plies, the
bot's clock at the end), then a summary line with ``ok``: every game ended on the board (road,
flats, draw), no time loss, no abandonment, no refused command, no ignored, erroneous or
unhandled line, and every drop followed by a resumed game. Exit status 0 when ``ok``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from takzero.players.registry import make_player  # noqa: E402
from takzero.protocols.playtak.bot import PlaytakBot  # noqa: E402
from takzero.protocols.playtak.lines import SeekSpec  # noqa: E402
from takzero.protocols.playtak.server import PlaytakServer  # noqa: E402


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--games", type=int, default=20)
    p.add_argument("--player", default=f"model:{ROOT / 'checkpoints' / 'pretrained' / '5x5.pt'}")
    p.add_argument("--opponent", default="greedy")
    p.add_argument("--size", type=int, default=5)
    p.add_argument("--time", type=int, default=30, help="seconds per player")
    p.add_argument("--inc", type=int, default=0, help="increment per move, seconds")
    p.add_argument("--reserve", type=float, default=0.3, help="the bot's reserve, seconds")
    p.add_argument("--drop-server", type=int, default=5, help="game in which the server drops the bot (0: none)")
    p.add_argument("--drop-client", type=int, default=12, help="game in which the bot drops itself (0: none)")
    p.add_argument("--drop-after", type=int, default=6, help="plies before a drop")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--verbose", action="store_true", help="the bots' logs on stderr")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    import torch

    torch.set_num_threads(args.threads)
    quiet = (lambda msg: print(msg, file=sys.stderr)) if args.verbose else (lambda msg: None)
    t0 = time.perf_counter()
    seek = SeekSpec(args.size, args.time, args.inc)
    with PlaytakServer(reconnect_seconds=30, seed=1) as server:
        bot = PlaytakBot(
            make_player(args.player, seed=1), server.address, seek=seek, games=args.games,
            reserve_s=args.reserve, log=quiet,
        )
        opponent = PlaytakBot(
            make_player(args.opponent, seed=2), server.address, accept="", games=args.games,
            reserve_s=args.reserve, log=quiet,
        )
        errors: list[BaseException] = []

        def run(b: PlaytakBot) -> None:
            try:
                b.run()
            except BaseException as e:  # noqa: BLE001 - reported in the summary
                errors.append(e)

        threads = [threading.Thread(target=run, args=(b,), daemon=True) for b in (bot, opponent)]
        threads[0].start()
        while not bot.name and not errors:
            time.sleep(0.05)
        threads[1].start()
        drops: list[dict] = []
        planned = {args.drop_server: "server", args.drop_client: "client"}
        reported = 0
        while any(t.is_alive() for t in threads):
            time.sleep(0.01)
            now = server.game_of(bot.name)
            if now is not None:
                number, plies = now
                kind = planned.get(number)
                if kind and plies >= args.drop_after and not any(d["game"] == number for d in drops):
                    if kind == "server":
                        server.drop(bot.name)
                    else:
                        bot.drop_connection()
                    drops.append({"game": number, "by": kind, "at_ply": plies})
            while reported < len(server.finished):
                f = server.finished[reported]
                clock = f.clocks[0 if f.white == bot.name else 1]
                print(json.dumps({
                    "game": f.number, "white": f.white, "black": f.black, "result": f.result,
                    "reason": f.reason, "plies": len(f.moves), "bot_clock_left_s": round(clock, 3),
                }), flush=True)
                reported += 1
            if bot.stats.games >= args.games and opponent.stats.games >= args.games:
                break
        for b in (bot, opponent):
            b.stop()
        for t in threads:
            t.join(timeout=30)
    s = bot.stats
    reasons = [f.reason for f in server.finished]
    ok = (
        not errors
        and len(server.finished) == args.games
        and all(r in ("road", "flat", "draw", "stale") for r in reasons)
        and not server.refused
        and s.time_losses == s.abandoned == s.ignored == s.server_errors == s.internal_errors == 0
        and s.resumed == len(drops) == len([k for k in planned if 0 < k <= args.games])
    )
    print(json.dumps({
        "summary": True, "ok": ok, "games": len(server.finished), "player": args.player,
        "opponent": args.opponent, "clock": f"{args.time}+{args.inc}", "size": args.size,
        "bot": s.summary(), "opponent_stats": opponent.stats.summary(), "drops": drops,
        "reasons": {r: reasons.count(r) for r in sorted(set(reasons))},
        "refused": server.refused[:5], "errors": [repr(e) for e in errors],
        "wall_s": round(time.perf_counter() - t0, 1),
    }))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
