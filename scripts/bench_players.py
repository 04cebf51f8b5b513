"""Speed (and optionally strength) of the baseline players; prints JSON lines.

    python scripts/bench_players.py                      # UCT 1000 sims/move on 5x5, greedy
    python scripts/bench_players.py --size 6 --games 1
    python scripts/bench_players.py --strength           # small matches between the baselines

Speed lines: ``{"bench": "uct", "size", "simulations", "games", "plies", "seconds",
"seconds_per_game", "seconds_per_move", "simulations_per_s"}`` from UCT-vs-UCT games (JIT compile
time excluded; ``simulations_per_s`` from wall time in ``choose``, ``simulations_per_cpu_s`` from
this process's CPU time, which is the better number on a shared, loaded machine; ``loadavg_1min``
says how loaded it was), and the same for the greedy player (``moves_per_s``). Strength lines:
the match summary of :meth:`takzero.matches.results.MatchResult.summary` plus wall time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

from takzero.game import Position
from takzero.matches.games import play_game, run_match
from takzero.players import GreedyPlayer, RandomPlayer, UCTPlayer


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def bench_uct(size: int, simulations: int, games: int, seed: int) -> dict:
    UCTPlayer(simulations=8, seed=0).choose(Position.start(size))  # compile
    plies = 0
    sims = 0  # simulations actually run (a win in one at the root is played unsearched)
    t_choose = 0.0
    t0 = time.perf_counter()
    c0 = time.process_time()
    for g in range(games):
        rec = play_game(
            UCTPlayer(simulations, seed=seed + g, name="w"),
            UCTPlayer(simulations, seed=seed + 1000 + g, name="b"),
            Position.start(size),
            ply_limit=300,
            seed=seed + g,
        )
        plies += rec.plies
        sims += sum(i.nodes for i in rec.infos if i is not None)
        t_choose += sum(rec.seconds)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return {
        "bench": "uct",
        "size": size,
        "simulations": simulations,
        "games": games,
        "plies": plies,
        "seconds": round(wall, 3),
        "seconds_per_game": round(wall / games, 3),
        "seconds_per_move": round(t_choose / plies, 5),
        "simulations_per_s": round(sims / t_choose),
        "cpu_seconds": round(cpu, 3),
        "simulations_per_cpu_s": round(sims / cpu),
        "loadavg_1min": _loadavg(),
    }


def bench_greedy(size: int, games: int, seed: int) -> dict:
    GreedyPlayer(0).choose(Position.start(size))  # compile
    plies = 0
    t_choose = 0.0
    for g in range(games):
        rec = play_game(
            GreedyPlayer(seed + g), GreedyPlayer(seed + 1000 + g), Position.start(size), 300
        )
        plies += rec.plies
        t_choose += sum(rec.seconds)
    return {
        "bench": "greedy",
        "size": size,
        "games": games,
        "plies": plies,
        "seconds_per_move": round(t_choose / plies, 6),
        "moves_per_s": round(plies / t_choose),
    }


def strength(size: int, simulations: int, openings: int, seed: int) -> list[dict]:
    out = []
    pairs = [
        (GreedyPlayer(1), RandomPlayer(2)),
        (UCTPlayer(simulations, seed=1), RandomPlayer(2)),
        (UCTPlayer(simulations, seed=1), GreedyPlayer(2)),
    ]
    for a, b in pairs:
        t0 = time.perf_counter()
        m = run_match(a, b, size, 0, openings, 300, seed=seed)
        line = {"bench": "strength", "size": size, **m.summary()}
        for k, v in line.items():  # JSON has no infinity: write "inf" / "-inf"
            if isinstance(v, float) and not math.isfinite(v):
                line[k] = str(v)
        line["seconds"] = round(time.perf_counter() - t0, 2)
        out.append(line)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=5)
    ap.add_argument("--simulations", type=int, default=1000)
    ap.add_argument("--games", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--strength", action="store_true", help="also run small matches")
    ap.add_argument("--openings", type=int, default=5, help="openings per strength match")
    args = ap.parse_args()
    print(json.dumps(bench_uct(args.size, args.simulations, args.games, args.seed)), flush=True)
    print(json.dumps(bench_greedy(args.size, args.games, args.seed)), flush=True)
    if args.strength:
        for line in strength(args.size, args.simulations, args.openings, args.seed):
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
