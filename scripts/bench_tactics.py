"""Tactics benchmark: solve rate and speed per kind and board size, one JSON object per line.

    python scripts/bench_tactics.py [--solvers prover uct net200 net800] [--seconds 1]
                                    [--uct-simulations 10000] [--model PATH] [--gumbel M]
                                    [--select-q F] [--tinue-nodes N] [--flat-endgame-nodes N]
                                    [--files A.json B.json ...] [--kinds K ...] [--sizes N ...]
                                    [--limit N]
    python scripts/bench_tactics.py --root-cost [--root-positions 150] [--tinue-nodes N]

Positions: ``tests/data/tactics.json`` (the given set, read as it is) and
``takzero/data/tactics_mined.json`` (mined by ``scripts/mine_tactics.py``; the package's copy,
which the training run's tactics curve reads too) unless ``--files`` says otherwise; read by
``takzero.matches.tactics_set.load_entries``. Everything runs on one core (numba code is
single-threaded; torch is set to one thread).

Solvers (``--solvers``, default ``prover``; one function per solver in ``SOLVERS``, the players'
built by :func:`player_solver`; each takes the entry, its position and the time budget and
returns ``solved``, ``move``, ``nodes``, ``seconds``, and ``skipped`` for a position it cannot
play):

* ``prover`` -- the df-pn tinuë prover (:func:`takzero.game.tinue.prove_tinue`), ``--seconds``
  of wall time per position (default 1). A win kind (``win_in_1``, ``win_in_3``, ``win_in_5``)
  is solved when the prover answers WIN within the budget (``move_expected`` also says whether
  its move is one of the listed moves: it may find another win, e.g. a flat win at once or a
  longer road). ``avoid_loss``: a move that wins at once is played; else the moves not yet
  proved lost are searched in passes, each pass sharing half the time left among them; the
  first move after which the prover proves that the opponent has no forced road (NO_WIN) is
  played, or when the time is up the first move not proved lost; solved when it is one of the
  expected (safe) moves.
* ``uct`` -- :class:`takzero.players.UCTPlayer` at ``--uct-simulations`` (default 10000).
* ``net200``, ``net800`` -- :class:`takzero.players.network.NetworkPlayer` of ``--model``
  (default the shipped ``checkpoints/pretrained/5x5.pt``) at 200 / 800 simulations; only on
  positions of the model's board size, the others are reported as ``skipped`` (not unsolved).
  ``--gumbel M`` (M >= 1) searches them with the Gumbel root over M moves instead of PUCT (the
  evaluation copy of the search: no noise; the line's ``gumbel_m``; 0, the default: PUCT).
  ``--select-q F``: after a PUCT search the move of highest Q among those with at least F of the
  most visits (default the players' ``DEFAULT_SELECT_Q_FRACTION``; 0: the most visited move; the
  line's ``select_q_fraction``).

  Each player runs with its root tinuë checks (:mod:`takzero.players.tactics`) at
  ``--tinue-nodes`` prover nodes (default the players' default; 0: the checks off), and the
  network players with the exact flat-endgame checks at ``--flat-endgame-nodes`` node visits
  (default 0: off; ``takzero.players.tactics.flat_endgame_root``). A player is
  reset (size, half komi, seed 0) and asked ``choose(position)``. The rule that judges its move
  is ``takzero.matches.tactics_set.solves`` (the training run's tactics curve uses it too): a
  win kind is solved when the
  move wins: the game ends with the mover winning, or the exhaustive search
  (:func:`takzero.game.exhaustive.forced_win`, all moves of both sides) confirms that the mover
  wins by force after the move within the plies left (the kind's plies minus one; for a move
  the player answered from a proof and that check fails, up to ``info["mate"]`` minus one,
  deepening two plies at a time, since df-pn may prove a longer win than the shortest; checks
  are cached across solvers and not timed). A check that runs out of its node budget counts as
  unsolved and is listed under ``unverified``. ``avoid_loss`` is solved when the move is one of
  the entry's expected (safe) moves.

Lines: ``machine``; then one ``tactics`` line per (solver, set, kind, size): positions, skipped,
solved, solve_rate (of the positions not skipped), move_expected_rate, nodes (prover node
visits for ``prover``, search simulations for a player), seconds, seconds_per_move,
nodes_per_s (prover only), for a player ``tinue_nodes``, ``by_proof`` (moves answered from a
proven forced road or a proved flat-endgame win) and ``avoided`` (moves whose search choice the
checks replaced), for a network player ``flat_endgame_nodes``, unsolved
(ids); then one ``total`` line per solver. The JIT and the network are warmed up before
timing.

``--root-cost``: what the tinuë checks cost a player per move. On mid-game positions (every 6th
ply from ply 4 of the first games of ``tests/data/games/playtak_takai_bot_5x5.ptn`` and
``playtak_skoolin_6x6_part1.ptn``, ``--root-positions`` per size, default 150), the prover
calls of a move whose choice is safe (:func:`~takzero.players.tactics.proven_win` on the
position and :func:`~takzero.players.tactics.opponent_wins_after` on the game's move) at
``--tinue-nodes`` are timed against a 200-simulation network move with the checks off,
alternating the two in one loop. 5x5: the shipped network; 6x6 (no shipped network): an
untrained network of the ``configs/config/6x6.yaml`` model size (the time of a move does not
depend on the weights). One ``root_cost`` line per size.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from takzero.game import tinue
from takzero.game.position import Position
from takzero.matches.evaluation import MAX_GUMBEL_M
from takzero.matches.tactics_set import TACTICS_FILE, WIN_KINDS, load_entries, solves
from takzero.players.network import DEFAULT_SELECT_Q_FRACTION

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILES = (ROOT / "tests" / "data" / "tactics.json", TACTICS_FILE)
DEFAULT_MODEL = ROOT / "checkpoints" / "pretrained" / "5x5.pt"
PLAYER_SOLVERS = ("uct", "net200", "net800")
#: games and ply schedule of ``--root-cost``
ROOT_COST_GAMES = {
    5: ROOT / "tests" / "data" / "games" / "playtak_takai_bot_5x5.ptn",
    6: ROOT / "tests" / "data" / "games" / "playtak_skoolin_6x6_part1.ptn",
}
ROOT_COST_FIRST_PLY = 4
ROOT_COST_EVERY = 6
ROOT_COST_SIMULATIONS = 200


def solve_prover(entry: dict, pos: Position, seconds: float) -> dict:
    """The tinuë prover on one position (see the module docstring)."""
    t0 = time.perf_counter()
    if entry["kind"] in WIN_KINDS:
        r = tinue.prove_tinue(pos, max_seconds=seconds)
        return {
            "solved": r.verdict == tinue.WIN,
            "move": r.move,
            "nodes": r.nodes,
            "seconds": time.perf_counter() - t0,
        }
    if entry["kind"] != "avoid_loss":
        raise ValueError(f"{entry.get('id')}: unknown kind {entry['kind']!r}")
    me = pos.side_to_move
    nodes = 0
    chosen = None
    candidates = []
    for code in (int(c) for c in pos.legal_move_codes()):
        after = pos.play(code)
        if after.is_over and after.result.winner == me:
            chosen = code  # a move that wins at once is the best defence
            break
        if not after.is_over:
            candidates.append((code, after))
    # passes over the moves not proved lost yet, each with half the time left shared among them,
    # until a move is proved safe (NO_WIN) or the time is up; then the first one left
    while chosen is None and candidates:
        left = seconds - (time.perf_counter() - t0)
        if left <= 0.002:
            chosen = candidates[0][0]
            break
        share = left / 2 / len(candidates)
        keep = []
        for code, after in candidates:
            r = tinue.prove_tinue(after, max_seconds=share, attacker=1 - me)
            nodes += r.nodes
            if r.verdict == tinue.NO_WIN:
                chosen = code
                break
            if r.verdict == tinue.UNKNOWN:
                keep.append((code, after))
        candidates = keep
    move = pos.ptn(chosen) if chosen is not None else None
    return {
        "solved": move is not None and move in entry["expected"],
        "move": move,
        "nodes": nodes,
        "seconds": time.perf_counter() - t0,
    }


def player_solver(player, size: int | None = None) -> Callable[[dict, Position, float], dict]:
    """A solver that asks ``player`` (reset to the entry's size and half komi, seed 0) for its move
    (see the module docstring); positions of another size than ``size`` (when given) are
    skipped. The time budget argument is not used (the player's simulations are its budget)."""

    def solve(entry: dict, pos: Position, seconds: float) -> dict:
        if size is not None and pos.size != size:
            return {"skipped": True, "solved": False, "move": None, "nodes": 0, "seconds": 0.0}
        player.reset(pos.size, pos.half_komi, seed=0)
        t0 = time.perf_counter()
        answer = player.choose(pos)
        took = time.perf_counter() - t0
        move = pos.ptn(answer.code)
        info = dict(answer.info)
        res = {
            "move": move,
            "nodes": int(answer.nodes),
            "seconds": took,
            "by_proof": info.get("tinue") == "win" or (info.get("flat_endgame") == "win" and answer.nodes == 0),
            "avoided": bool(info.get("tinue_avoided") or info.get("flat_endgame_avoided")),
        }
        mate = info.get("mate") if info.get("tinue") == "win" else None
        t1 = time.perf_counter()
        won = solves(entry, answer.code, mate)  # the library's one rule (tactics_set)
        res["verify_seconds"] = time.perf_counter() - t1
        res["solved"] = bool(won)
        if entry["kind"] in WIN_KINDS:
            res["unverified"] = won is None
        return res

    return solve


def set_torch_threads(n: int = 1) -> None:
    """One torch thread (the benchmark runs on one core)."""
    import torch

    torch.set_num_threads(n)


def build_solver(name: str, args: argparse.Namespace) -> Callable[[dict, Position, float], dict]:
    """The solver called ``name`` with the settings of ``args``."""
    if name == "prover":
        return SOLVERS["prover"]
    if name == "uct":
        from takzero.players.uct import UCTPlayer

        return player_solver(UCTPlayer(simulations=args.uct_simulations, tinue_nodes=args.tinue_nodes))
    if name in ("net200", "net800"):
        from takzero.players.network import NetworkPlayer

        set_torch_threads(1)
        from takzero.search import SearchConfig

        config = SearchConfig(gumbel=True, gumbel_m=args.gumbel) if args.gumbel else SearchConfig(
            select_q_fraction=args.select_q
        )
        player = NetworkPlayer.load(
            str(args.model), simulations=int(name[3:]), device="cpu", tinue_nodes=args.tinue_nodes,
            config=config, flat_endgame_nodes=args.flat_endgame_nodes,
        )
        return player_solver(player, size=player.model_size)
    raise ValueError(f"unknown solver {name!r}")


#: Solvers by name; a solver is ``f(entry, position, seconds) -> {solved, move, nodes, seconds}``
#: (plus ``skipped`` for a position it does not play). The players' solvers are built by
#: :func:`build_solver` (they need the command line's settings).
SOLVERS: dict[str, Callable[[dict, Position, float], dict]] = {"prover": solve_prover}


def warm_up(entries: list[dict], solvers: dict[str, Callable] | None = None) -> None:
    """Compile or load the JIT code (and run each player's search once) before anything is
    timed."""
    from takzero.game.exhaustive import forced_win

    for e in entries[:1]:
        tinue.prove_tinue(e["position"], max_nodes=50)
        forced_win(e["position"], 1, max_nodes=1000)
    for name, fn in (solvers or {}).items():
        if name == "prover":
            continue
        # an avoid_loss position first: a win may be answered by a proof, without a search
        for e in sorted(entries, key=lambda e: e["kind"] != "avoid_loss"):
            res = fn(e, e["position"], 0.0)
            if not res.get("skipped"):
                break


def run(
    entries: list[dict], solver: str, seconds: float, fn: Callable | None = None, progress: bool = False, **extra
) -> list[dict]:
    """JSON lines of one solver over the entries: one per (set, kind, size), then a total.
    ``fn``: the solver (default ``SOLVERS[solver]``); ``progress``: a line per position on stderr;
    ``extra``: fields added to every line."""
    fn = fn or SOLVERS[solver]
    player = solver != "prover"
    groups: dict[tuple, list] = defaultdict(list)
    for i, e in enumerate(entries):
        res = fn(e, e["position"], seconds)
        res["move_expected"] = res["move"] is not None and res["move"] in e["expected"]
        if progress:
            print(
                f"{solver} {i + 1}/{len(entries)} {e.get('id')} {e['kind']} {e['size']}x{e['size']}: "
                f"{'skipped' if res.get('skipped') else ('solved' if res['solved'] else 'UNSOLVED')} "
                f"{res['move']} {res['seconds']:.2f}s (check {res.get('verify_seconds', 0.0):.2f}s)",
                file=sys.stderr,
                flush=True,
            )
        groups[(e["set"], e["kind"], e["size"])].append((e, res))
    lines = []
    total = {"positions": 0, "skipped": 0, "solved": 0, "nodes": 0, "seconds": 0.0}
    if player:
        total.update(by_proof=0, avoided=0)
    for (set_name, kind, size), all_items in sorted(groups.items()):
        items = [(e, r) for e, r in all_items if not r.get("skipped")]
        skipped = len(all_items) - len(items)
        line = {
            "bench": "tactics",
            "solver": solver,
            **extra,
            "set": set_name,
            "kind": kind,
            "size": size,
            "positions": len(all_items),
            "skipped": skipped,
        }
        total["positions"] += len(all_items)
        total["skipped"] += skipped
        if not items:
            lines.append({**line, "solved": None, "solve_rate": None})
            continue
        n = len(items)
        solved = sum(r["solved"] for _, r in items)
        nodes = sum(r["nodes"] for _, r in items)
        secs = sum(r["seconds"] for _, r in items)
        line.update(
            solved=solved,
            solve_rate=round(solved / n, 3),
            move_expected_rate=round(sum(r["move_expected"] for _, r in items) / n, 3),
            nodes=nodes,
            seconds=round(secs, 3),
            seconds_per_move=round(secs / n, 3),
            max_seconds_one=round(max(r["seconds"] for _, r in items), 3),
        )
        if player:
            line.update(
                by_proof=sum(r["by_proof"] for _, r in items),
                avoided=sum(r["avoided"] for _, r in items),
                unverified=[e.get("id") for e, r in items if r.get("unverified")],
            )
            total["by_proof"] += line["by_proof"]
            total["avoided"] += line["avoided"]
        else:
            line["nodes_per_s"] = round(nodes / secs) if secs > 0 else None
        line["unsolved"] = [e.get("id") for e, r in items if not r["solved"]]
        lines.append(line)
        total["solved"] += solved
        total["nodes"] += nodes
        total["seconds"] += secs
    played = total["positions"] - total["skipped"]
    out = {
        "bench": "total",
        "solver": solver,
        **extra,
        **total,
        "seconds": round(total["seconds"], 3),
        "solve_rate": round(total["solved"] / played, 3) if played else None,
        "seconds_per_move": round(total["seconds"] / played, 3) if played else None,
    }
    if player:
        out["unsolved"] = [i for ln in lines for i in ln.get("unsolved", [])]
    else:
        out["nodes_per_s"] = round(total["nodes"] / total["seconds"]) if total["seconds"] > 0 else None
        out["budget_seconds"] = seconds
    lines.append(out)
    return lines


def root_cost_positions(path: Path, count: int) -> list[tuple[Position, int]]:
    """(position, the game's move) at every :data:`ROOT_COST_EVERY`-th ply from
    :data:`ROOT_COST_FIRST_PLY` of the games of ``path`` in file order, the first ``count``."""
    from takzero.game.ptn import read_ptn_file

    out: list[tuple[Position, int]] = []
    for game in read_ptn_file(path):
        pos = game.start
        for ply, code in enumerate(game.moves):
            if ply >= ROOT_COST_FIRST_PLY and (ply - ROOT_COST_FIRST_PLY) % ROOT_COST_EVERY == 0:
                out.append((pos, int(code)))
                if len(out) >= count:
                    return out
            pos = pos.play(int(code))
            if pos.is_over:
                break
    return out


def six_by_six_evaluator():
    """An untrained network of the ``configs/config/6x6.yaml`` model size (channels, blocks), read
    as a run reads the file's ``model:`` section (``ModelSection``: its ``model.preset`` and any
    size it gives); returns the evaluator and ``{'channels': C, 'blocks': B}``."""
    import torch
    import yaml

    from takzero.config import ModelSection
    from takzero.nn.inference import Evaluator
    from takzero.nn.model import ModelConfig, TakNet

    cfg = yaml.safe_load((ROOT / "configs" / "config" / "6x6.yaml").read_text())
    section = ModelSection(**cfg["model"])
    torch.manual_seed(0)
    model = TakNet(ModelConfig(size=6, channels=section.channels, blocks=section.blocks))
    return Evaluator(model, device="cpu"), {"channels": section.channels, "blocks": section.blocks}


def root_cost(size: int, count: int, tinue_nodes: int, model: Path) -> dict:
    """The ``root_cost`` line of one board size (see the module docstring)."""
    from takzero.players.network import NetworkPlayer
    from takzero.players.tactics import opponent_wins_after, proven_win

    set_torch_threads(1)
    if size == 5:
        player = NetworkPlayer.load(str(model), simulations=ROOT_COST_SIMULATIONS, device="cpu", tinue_nodes=0)
        network = f"{Path(model).relative_to(ROOT) if Path(model).is_relative_to(ROOT) else model} (shipped)"
    else:
        ev, mcfg = six_by_six_evaluator()
        player = NetworkPlayer(ev, simulations=ROOT_COST_SIMULATIONS, tinue_nodes=0)
        network = (
            f"untrained {size}x{size} network of configs/config/6x6.yaml size "
            f"({mcfg['channels']} channels, {mcfg['blocks']} blocks): no {size}x{size} network is shipped"
        )
    positions = root_cost_positions(ROOT_COST_GAMES[size], count)
    # warm-up: the JIT, torch's first calls
    for pos, code in positions[:2]:
        proven_win(pos, tinue_nodes)
        opponent_wins_after(pos, code, tinue_nodes)
        player.reset(pos.size, pos.half_komi, seed=0)
        player.choose(pos)
    prover_ms, net_ms = [], []
    wins = refuted = 0
    for pos, code in positions:
        t0 = time.perf_counter()
        win = proven_win(pos, tinue_nodes)
        lost = opponent_wins_after(pos, code, tinue_nodes)
        prover_ms.append((time.perf_counter() - t0) * 1000)
        wins += win is not None
        refuted += lost
        player.reset(pos.size, pos.half_komi, seed=0)
        t0 = time.perf_counter()
        player.choose(pos)
        net_ms.append((time.perf_counter() - t0) * 1000)
    prover_mean = statistics.fmean(prover_ms)
    net_mean = statistics.fmean(net_ms)
    return {
        "bench": "root_cost",
        "size": size,
        "positions": len(positions),
        "games_file": str(ROOT_COST_GAMES[size].relative_to(ROOT)),
        "plies": f"every {ROOT_COST_EVERY}th from ply {ROOT_COST_FIRST_PLY}",
        "tinue_nodes": tinue_nodes,
        "prover_ms_per_move": round(prover_mean, 2),
        "prover_ms_median": round(statistics.median(prover_ms), 2),
        "prover_ms_max": round(max(prover_ms), 2),
        "net200_ms_per_move": round(net_mean, 1),
        "net200_ms_median": round(statistics.median(net_ms), 1),
        "ratio": round(prover_mean / net_mean, 4),
        "proven_wins": wins,
        "game_moves_refuted": refuted,
        "network": network,
    }


def machine_line() -> dict:
    return {
        "bench": "machine",
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "threads": 1,
        "load_avg_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status (2 for bad arguments or files)."""
    from takzero.players.tactics import DEFAULT_TINUE_NODES, check_flat_endgame_nodes, check_tinue_nodes

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--solvers",
        nargs="+",
        default=["prover"],
        choices=["prover", *PLAYER_SOLVERS],
        help="solvers to run (default: prover)",
    )
    p.add_argument("--seconds", type=float, default=1.0, help="prover time budget per position")
    p.add_argument("--uct-simulations", type=int, default=10000, help="UCT simulations per move")
    p.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="network of net200/net800")
    p.add_argument("--select-q", type=float, default=DEFAULT_SELECT_Q_FRACTION, metavar="F",
                   help="net200/net800 with PUCT play the best-Q move among those with at least F of "
                        f"the most visits (default {DEFAULT_SELECT_Q_FRACTION:g}, the players'; 0: the most visited)")
    p.add_argument("--gumbel", type=int, default=0, metavar="M",
                   help="net200/net800 search with the Gumbel root over M moves (0, default: PUCT)")
    p.add_argument(
        "--tinue-nodes",
        type=int,
        default=DEFAULT_TINUE_NODES,
        help=f"players' tinuë check budget in prover nodes (default {DEFAULT_TINUE_NODES}; 0: off)",
    )
    p.add_argument(
        "--flat-endgame-nodes",
        type=int,
        default=0,
        help="network players' flat-endgame check budget in node visits (default 0: off)",
    )
    p.add_argument("--files", type=Path, nargs="+", default=list(DEFAULT_FILES), help="tactics JSON files")
    p.add_argument("--kinds", nargs="+", help="only these kinds")
    p.add_argument("--sizes", type=int, nargs="+", help="only these board sizes")
    p.add_argument("--limit", type=int, help="at most this many positions per (set, kind, size)")
    p.add_argument("--progress", action="store_true", help="a line per position on stderr")
    p.add_argument("--root-cost", action="store_true", help="measure the prover's cost per move instead")
    p.add_argument("--root-positions", type=int, default=150, help="positions per size of --root-cost")
    args = p.parse_args(argv)
    if not args.seconds > 0:
        p.error("--seconds must be > 0")
    if args.uct_simulations < 1:
        p.error("--uct-simulations must be >= 1")
    if not 0 <= args.gumbel <= MAX_GUMBEL_M:
        p.error(f"--gumbel must be in 0..{MAX_GUMBEL_M} (0: the PUCT root), got {args.gumbel}")
    if args.limit is not None and args.limit < 1:
        p.error(f"--limit must be >= 1, got {args.limit}")
    if not 0.0 <= args.select_q <= 1.0:
        p.error(f"--select-q must be in [0, 1] (0: the most visited move), got {args.select_q}")
    try:
        check_tinue_nodes(args.tinue_nodes)
        check_flat_endgame_nodes(args.flat_endgame_nodes)
    except ValueError as e:
        p.error(str(e))
    if args.root_cost:
        if args.root_positions < 1:
            p.error("--root-positions must be >= 1")
        print(json.dumps(machine_line()), flush=True)
        for size in (args.sizes or sorted(ROOT_COST_GAMES)):
            if size not in ROOT_COST_GAMES:
                p.error(f"--root-cost has games for sizes {sorted(ROOT_COST_GAMES)} only")
            print(json.dumps(root_cost(size, args.root_positions, args.tinue_nodes, args.model)), flush=True)
        return 0
    try:
        entries = load_entries(args.files)
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.kinds:
        entries = [e for e in entries if e["kind"] in args.kinds]
    if args.sizes:
        entries = [e for e in entries if e["size"] in args.sizes]
    if args.limit is not None:
        seen: dict[tuple, int] = defaultdict(int)
        kept = []
        for e in entries:
            key = (e["set"], e["kind"], e["size"])
            if seen[key] < args.limit:
                seen[key] += 1
                kept.append(e)
        entries = kept
    try:
        solvers = {name: build_solver(name, args) for name in dict.fromkeys(args.solvers)}
    except (OSError, ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(machine_line()), flush=True)
    warm_up(entries, solvers)
    for name, fn in solvers.items():
        extra = {}
        if name != "prover":
            extra["tinue_nodes"] = args.tinue_nodes
            extra["simulations"] = args.uct_simulations if name == "uct" else int(name[3:])
            if name != "uct":
                extra["gumbel_m"] = args.gumbel
                extra["select_q_fraction"] = 0.0 if args.gumbel else args.select_q
                extra["flat_endgame_nodes"] = args.flat_endgame_nodes
        for line in run(entries, name, args.seconds, fn, progress=args.progress, **extra):
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
