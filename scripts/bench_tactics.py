"""Tactics benchmark: solve rate and speed per kind and board size, one JSON object per line.

    python scripts/bench_tactics.py [--seconds 1] [--files A.json B.json ...] [--kinds K ...]
                                    [--sizes N ...] [--limit N]

Positions: ``tests/data/tactics.json`` (the given set, read as it is) and
``tests/data/tactics_mined.json`` (mined by ``scripts/mine_tactics.py``) unless ``--files`` says
otherwise. Each position gets ``--seconds`` of wall time (default 1) on one core.

Solvers (one function per solver in ``SOLVERS``; each takes the entry, its position and the time
budget and returns ``solved``, ``move``, ``nodes``, ``seconds``):

* ``prover`` -- the df-pn tinuë prover (:func:`takzero.game.tinue.prove_tinue`). A win kind
  (``win_in_1``, ``win_in_3``, ``win_in_5``) is solved when the prover answers WIN within the
  budget (``move_expected`` also says whether its move is one of the listed moves: it may find
  another win, e.g. a flat win at once or a longer road). ``avoid_loss``: a move that wins at
  once is played; else the moves not yet proved lost are searched in passes, each pass sharing
  half the time left among them; the first move after which the prover proves that the opponent
  has no forced road (NO_WIN) is played, or when the time is up the first move not proved lost;
  solved when it is one of the expected (safe) moves.

Lines: ``machine``; then one ``tactics`` line per (solver, set, kind, size): positions, solved,
solve_rate, move_expected_rate, nodes, seconds, nodes_per_s (node visits per second of solver
time), unsolved (ids); then one ``total`` line per solver. The JIT is warmed up before timing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from takzero.game import tinue
from takzero.game.position import Position

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILES = (ROOT / "tests" / "data" / "tactics.json", ROOT / "tests" / "data" / "tactics_mined.json")
WIN_KINDS = ("win_in_1", "win_in_3", "win_in_5")


def load_entries(paths: list[Path]) -> list[dict]:
    """Entries of the tactics files, each with ``set`` (the file's stem), ``position`` and
    ``expected`` (the moves that solve it: ``winning_moves`` when the file lists them, else
    ``expected_moves``). Raises OSError/ValueError for a missing or malformed file."""
    out = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of positions")
        for e in data:
            pos = Position.from_tps(e["tps"], komi=e.get("komi", 0.0), flats=e.get("flats"), caps=e.get("caps"))
            expected = e.get("winning_moves") or e.get("expected_moves") or []
            out.append({**e, "set": Path(path).stem, "position": pos, "expected": list(expected)})
    return out


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


#: Solvers by name; a solver is ``f(entry, position, seconds) -> {solved, move, nodes, seconds}``.
#: More solvers (the UCT and network players) plug in here.
SOLVERS: dict[str, Callable[[dict, Position, float], dict]] = {"prover": solve_prover}


def warm_up(entries: list[dict]) -> None:
    """Compile or load the JIT code before anything is timed."""
    for e in entries[:1]:
        tinue.prove_tinue(e["position"], max_nodes=50)


def run(entries: list[dict], solver: str, seconds: float) -> list[dict]:
    """JSON lines of one solver over the entries: one per (set, kind, size), then a total."""
    fn = SOLVERS[solver]
    groups: dict[tuple, list] = defaultdict(list)
    for e in entries:
        res = fn(e, e["position"], seconds)
        res["move_expected"] = res["move"] is not None and res["move"] in e["expected"]
        groups[(e["set"], e["kind"], e["size"])].append((e, res))
    lines = []
    total = {"positions": 0, "solved": 0, "nodes": 0, "seconds": 0.0}
    for (set_name, kind, size), items in sorted(groups.items()):
        n = len(items)
        solved = sum(r["solved"] for _, r in items)
        nodes = sum(r["nodes"] for _, r in items)
        secs = sum(r["seconds"] for _, r in items)
        lines.append(
            {
                "bench": "tactics",
                "solver": solver,
                "set": set_name,
                "kind": kind,
                "size": size,
                "positions": n,
                "solved": solved,
                "solve_rate": round(solved / n, 3),
                "move_expected_rate": round(sum(r["move_expected"] for _, r in items) / n, 3),
                "nodes": nodes,
                "seconds": round(secs, 3),
                "nodes_per_s": round(nodes / secs) if secs > 0 else None,
                "max_seconds_one": round(max(r["seconds"] for _, r in items), 3),
                "unsolved": [e.get("id") for e, r in items if not r["solved"]],
            }
        )
        total["positions"] += n
        total["solved"] += solved
        total["nodes"] += nodes
        total["seconds"] += secs
    lines.append(
        {
            "bench": "total",
            "solver": solver,
            **total,
            "seconds": round(total["seconds"], 3),
            "solve_rate": round(total["solved"] / max(total["positions"], 1), 3),
            "nodes_per_s": round(total["nodes"] / total["seconds"]) if total["seconds"] > 0 else None,
            "budget_seconds": seconds,
        }
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status (2 for bad arguments or files)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=1.0, help="time budget per position")
    p.add_argument("--files", type=Path, nargs="+", default=list(DEFAULT_FILES), help="tactics JSON files")
    p.add_argument("--kinds", nargs="+", help="only these kinds")
    p.add_argument("--sizes", type=int, nargs="+", help="only these board sizes")
    p.add_argument("--limit", type=int, help="at most this many positions per (set, kind, size)")
    args = p.parse_args(argv)
    if not args.seconds > 0:
        p.error("--seconds must be > 0")
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
    print(
        json.dumps(
            {
                "bench": "machine",
                "platform": platform.platform(),
                "cpu_count": os.cpu_count(),
                "python": platform.python_version(),
                "threads": 1,
                "load_avg_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
            }
        ),
        flush=True,
    )
    warm_up(entries)
    for line in run(entries, "prover", args.seconds):
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
