"""Batched MCTS benchmark: simulations per second, JSON lines on stdout.

Positions: 6x6 mid-game positions (plies 20-40) from the engine self-play games of
``tests/data/games/engine_selfplay_6x6.ptn`` (about 78 legal moves on average; random mid-game
positions if the file is missing), or with ``--positions random`` positions after 20-40 random
plies (about 60 legal moves: the cost per simulation grows with the number of legal moves).

* ``mcts_uniform`` (pure search cost, ``UniformEvaluator``): G games, S simulations per move.
  ``phase``: ``cold`` is the first search of a new ``BatchedMCTS`` (the OS maps the node pools as
  they are first touched), ``fresh`` searches start from unsearched roots (``reset``), ``reuse``
  searches continue from the subtree kept by ``advance`` (consecutive moves of self-play games;
  ``advance_ms`` is the tree-reuse time of all G games). Target: >= 200,000 simulations/s.
* ``network``: ``Evaluator.evaluate`` of the default model (``ModelConfig()``) on CPU at batch G,
  positions/s (encode + legal mask + forward + masked softmax).
* ``mcts_network``: one search with that evaluator; ``overhead_share`` is the share of the wall time
  spent outside ``evaluate`` (target: <= 15%).

Each line also has ``loadavg_1min`` (other processes sharing the CPU skew the figures) and the
torch thread count. Examples::

    python scripts/bench_mcts.py                          # G=256, 800 simulations, all parts
    python scripts/bench_mcts.py --net-sims 100           # shorter network part
    python scripts/bench_mcts.py --skip-net --searches 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from takzero.game.core import I_RESULT, generate_moves, num_actions  # noqa: E402
from takzero.search import BatchedMCTS, SearchConfig, UniformEvaluator  # noqa: E402

GAMES_FILE = ROOT / "tests" / "data" / "games" / "engine_selfplay_6x6.ptn"


def _load() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return -1.0


def _emit(**fields) -> None:
    fields["loadavg_1min"] = _load()
    print(json.dumps(fields), flush=True)


def random_positions(count: int, seed: int) -> list[np.ndarray]:
    """``count`` unfinished 6x6 positions after 20-40 uniformly random plies."""
    from takzero.game.core import make_move, new_state

    rng = np.random.default_rng(seed)
    buf = np.empty(num_actions(6), dtype=np.int64)
    out: list[np.ndarray] = []
    while len(out) < count:
        st = new_state(6, 30, 1)
        for _ in range(int(rng.integers(20, 41))):
            n = generate_moves(st, buf)
            if n == 0:
                break
            make_move(st, int(buf[rng.integers(n)]))
        if st[I_RESULT] == 0:
            out.append(st)
    return out


def midgame_positions(count: int, seed: int) -> list[np.ndarray]:
    """``count`` unfinished 6x6 positions at plies 20-40 (from real games when available)."""
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    try:
        from takzero.game.ptn import read_ptn_file

        games = [g for g in read_ptn_file(GAMES_FILE, check=False, strict_numbers=False)]
        lines = []
        for game in games:
            try:
                pos = game.start
            except ValueError:
                continue
            if pos.size != 6 or len(game.moves) < 24:
                continue
            lines.append((pos, game.moves))
        while len(out) < count and lines:
            pos, moves = lines[int(rng.integers(len(lines)))]
            ply = int(rng.integers(20, min(40, len(moves) - 2) + 1))
            st = pos.state.copy()
            buf = np.empty(num_actions(6), dtype=np.int64)
            ok = True
            for code in moves[:ply]:
                n = generate_moves(st, buf)
                if code not in set(buf[:n].tolist()):
                    ok = False
                    break
                from takzero.game.core import make_move

                make_move(st, int(code))
            if ok and st[I_RESULT] == 0:
                out.append(st)
    except Exception as exc:  # the games file is optional
        print(f"# games file not used: {exc}", file=sys.stderr)
    if len(out) < count:
        from takzero.nn.features import random_states

        extra = random_states(6, count - len(out), seed=seed, min_plies=20, max_plies=40)
        out.extend(s for s in extra if s[8] == 0)
    return out[:count]


def bench_uniform(positions, sims: int, searches: int, budget: int, seed: int) -> None:
    g_count = len(positions)
    cfg = SearchConfig(simulations=sims, node_budget=budget)
    mcts = BatchedMCTS(g_count, 6, cfg, seed=seed)
    ev = UniformEvaluator(6)
    buf = np.empty(num_actions(6), dtype=np.int64)
    legal = float(np.mean([generate_moves(p.copy(), buf) for p in positions]))

    def search(phase: str, advance_ms: float | None = None) -> float:
        games = mcts.active_games()
        stats = mcts.run(ev)
        done = sum(mcts.simulations_done(int(g)) for g in games)
        rate = done / stats.total_seconds
        sizes = [mcts.tree_size(int(g)) for g in games]
        fields = dict(
            bench="mcts_uniform", phase=phase, games=len(games), sims_per_move=sims,
            sims_per_s=round(rate), seconds=round(stats.total_seconds, 3), steps=stats.steps,
            evaluator_share=round(stats.eval_seconds / stats.total_seconds, 4),
            mean_tree_nodes=int(np.mean(sizes)), max_tree_nodes=int(np.max(sizes)),
            mean_legal_moves=round(legal, 1), node_budget=budget,
        )
        if advance_ms is not None:
            fields["advance_ms"] = round(advance_ms, 1)
        _emit(**fields)
        return rate

    for g, st in enumerate(positions):
        mcts.reset(g, st)
    search("cold")
    fresh = []
    for _ in range(searches):
        for g, st in enumerate(positions):
            mcts.reset(g, st)
        fresh.append(search("fresh"))
    reuse = []
    for _ in range(searches):
        t0 = time.perf_counter()
        for g in mcts.active_games():
            mcts.advance(int(g), mcts.choose_move(int(g), temperature=0.0))
        reuse.append(search("reuse", (time.perf_counter() - t0) * 1000))
    _emit(
        bench="mcts_uniform_summary", games=g_count, sims_per_move=sims,
        fresh_sims_per_s_median=round(statistics.median(fresh)),
        reuse_sims_per_s_median=round(statistics.median(reuse)), target=200_000,
    )


def bench_network(positions, sims: int, budget: int, seed: int, threads: int | None) -> None:
    import torch

    from takzero.nn.inference import Evaluator
    from takzero.nn.model import ModelConfig, TakNet

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    ev = Evaluator(TakNet(ModelConfig()), device="cpu")
    states = np.stack(positions)
    ev.evaluate(states)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        ev.evaluate(states)
        times.append(time.perf_counter() - t0)
    _emit(
        bench="network", batch=len(states), positions_per_s=round(len(states) / min(times)),
        ms_per_batch=round(1000 * statistics.median(times), 2), device="cpu",
        threads=torch.get_num_threads(),
    )
    cfg = SearchConfig(simulations=sims, node_budget=budget)
    mcts = BatchedMCTS(len(positions), 6, cfg, seed=seed)
    for g, st in enumerate(positions):
        mcts.reset(g, st)
    stats = mcts.run(ev)
    done = sum(mcts.simulations_done(g) for g in range(len(positions)))
    _emit(
        bench="mcts_network", games=len(positions), sims_per_move=sims,
        sims_per_s=round(done / stats.total_seconds), seconds=round(stats.total_seconds, 2),
        eval_seconds=round(stats.eval_seconds, 2), overhead_share=round(stats.overhead_share, 4),
        steps=stats.steps, leaves=stats.leaves, threads=torch.get_num_threads(), target=0.15,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", type=int, default=256)
    ap.add_argument("--sims", type=int, default=800, help="simulations per move (uniform part)")
    ap.add_argument("--searches", type=int, default=3, help="timed fresh and reuse searches")
    ap.add_argument("--node-budget", type=int, default=200_000)
    ap.add_argument("--net-sims", type=int, default=800, help="simulations (network part)")
    ap.add_argument("--skip-net", action="store_true")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--positions", choices=["games", "random"], default="games",
        help="mid-game positions from engine games (default) or after random plies",
    )
    args = ap.parse_args(argv)
    if args.positions == "games":
        positions = midgame_positions(args.games, args.seed)
    else:
        positions = random_positions(args.games, args.seed)
    bench_uniform(positions, args.sims, args.searches, args.node_budget, args.seed)
    if not args.skip_net:
        bench_network(positions, args.net_sims, args.node_budget, args.seed, args.threads)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
