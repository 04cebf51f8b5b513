"""The price of leaf batching at equal nodes: the same network searching K leaves per network call
(virtual loss) against one leaf per call, both at N simulations a move, on paired random
openings. One JSON line on stdout (W-D-L of the K side, score with its Wilson interval, Elo with
its pentanomial and Wilson intervals); a line per finished game on stderr.

    python scripts/bench_leaves.py                                   # 5x5 shipped, K=16, 400 nodes, 100 pairs
    python scripts/bench_leaves.py --leaves 32 --nodes 800 --pairs 50 --size 6

Both sides are batched match sides (``takzero.matches.games.NetSide``: every game where a side
is to move searched together); a side's search of one game does not depend on the other games of
the batch, so a K side plays exactly as one game's search with K leaves per network call
(``NetworkPlayer(leaves=K)``, the TEI engine's ``Batch``) would at N nodes. Nodes, not time:
the result says what virtual loss costs in search quality, whatever the machine's speed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=5)
    p.add_argument("--model", help="default: checkpoints/pretrained/<size>x<size>.pt")
    p.add_argument("--leaves", type=int, default=16, help="K of the batched side (2..32)")
    p.add_argument("--nodes", type=int, default=400, help="simulations a move, both sides")
    p.add_argument("--pairs", type=int, default=100, help="openings, each played with both colours")
    p.add_argument("--opening-plies", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ply-limit", type=int, default=200)
    p.add_argument("--backend", choices=("torch", "onnx"), default="onnx")
    args = p.parse_args(argv)
    if not 2 <= args.leaves <= 32:
        p.error(f"--leaves must be in 2..32, got {args.leaves}")
    from takzero.game.position import Position
    from takzero.matches.games import NetSide, play_match
    from takzero.matches.openings import random_openings
    from takzero.matches.stats import wilson_interval
    from takzero.nn.backends import with_backend
    from takzero.nn.inference import Evaluator
    from takzero.players.network import set_search_threads
    from takzero.search import SearchConfig

    set_search_threads(1)
    model = args.model or str(ROOT / "checkpoints" / "pretrained" / f"{args.size}x{args.size}.pt")
    ev = Evaluator.load(model, device="cpu")
    if args.backend == "onnx":
        ev = with_backend(ev, "onnx", threads=1)
    half_komi = int(ev.metadata.get("half_komi", 0) or 0)
    start = Position.start(ev.size, half_komi=half_komi)
    base = SearchConfig(simulations=args.nodes, max_plies=args.ply_limit).evaluation()
    side_k = NetSide(f"k{args.leaves}", ev, replace(base, leaves_per_step=args.leaves), args.nodes)
    side_1 = NetSide("k1", ev, base, args.nodes)
    openings = random_openings(start, args.pairs, plies=args.opening_plies, seed=args.seed)
    t0 = time.perf_counter()

    def progress(so_far, record) -> None:
        print(f"game {so_far.num_games}/{2 * args.pairs}: {record.white} - {record.black} "
              f"{record.result}; k{args.leaves} {so_far.wins}-{so_far.draws}-{so_far.losses} (W-D-L)",
              file=sys.stderr, flush=True)

    m = play_match(side_k, side_1, start, openings, args.ply_limit, seed=args.seed, on_game=progress)
    lo, hi = wilson_interval(m.score, m.num_games)
    penta = m.elo()
    wil = m.elo(model="wilson")
    print(json.dumps({
        "model": model, "size": ev.size, "half_komi": half_komi, "leaves": args.leaves,
        "nodes": args.nodes, "pairs": args.pairs, "seed": args.seed, "backend": args.backend,
        "wins": m.wins, "draws": m.draws, "losses": m.losses, "score": round(m.score, 4),
        "score_wilson95": [round(lo, 4), round(hi, 4)],
        "elo": round(penta.elo, 1), "elo_pentanomial95": [round(penta.lower, 1), round(penta.upper, 1)],
        "elo_wilson95": [round(wil.lower, 1), round(wil.upper, 1)],
        "pentanomial": m.pentanomial(), "seconds": round(time.perf_counter() - t0, 1),
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
