"""Mine a tactics set from the game files: forced wins before road wins, and defences.

    python scripts/mine_tactics.py [--games DIR] [--out FILE] [--per-kind N] [--max-nodes N]

Reads every ``*.ptn`` under ``--games`` (default ``tests/data/games``, sorted, subfolders too)
with :func:`takzero.game.ptn.read_ptn_file` (lenient move numbers); files and games that fail to
read or replay are skipped (named on stderr). For every game that ends with a road, the positions
before the winner's last moves are examined:

* 1, 3 and 5 plies before the end (the winner to move): if a plain exhaustive search
  (:mod:`takzero.game.exhaustive`: all legal moves of both sides, no move restriction) proves a
  forced road within 1, 3 or 5 plies (only a road counts as the attacker's win; a flat ending
  counts as no win), the position is kept under the kind of the shortest one -- ``win_in_1``,
  ``win_in_3`` (attacker, defender, attacker) or ``win_in_5`` -- with every move that forces a
  road within that many plies as ``expected_moves``;
* 2 and 4 plies before the end (the loser to move): ``avoid_loss`` when the opponent threatens --
  he has a road in one (tak), or he would have a forced win within 3 plies if it were his move
  (tinuë threat, found with a null move) -- and some but not all moves avoid a forced loss:
  ``expected_moves`` are the moves after which the opponent has no forced win (road or flats)
  within 3 plies (``plies`` = 3, the horizon), again by exhaustive search, less those after which
  the tinuë prover (:func:`takzero.game.tinue.prove_tinue`, 5000 node visits, deterministic)
  proves a longer forced road for the opponent; these are listed as ``lost_beyond_horizon``.
  Positions where no move is left (lost beyond the horizon) are not kept.

A position whose exhaustive search runs out of ``--max-nodes`` is dropped (counted on stderr).
Duplicates (same TPS, komi and reserves) are kept once. At most ``--per-kind`` positions per
(kind, size) are kept, taken from the games in an order that spreads them over the files (round
robin over the files, games in file order), and at most ``--max-total`` in all.

Output (``--out``, default ``takzero/data/tactics_mined.json``, the package's copy that the training
run's tactics curve and the tests read): a JSON list of objects with ``id``,
``size``, ``komi``, ``tps``, ``side_to_move`` (white/black), ``kind``, ``plies`` (the forced win's
length, or the avoid_loss horizon), ``expected_moves`` (PTN), ``threat`` and
``lost_beyond_horizon`` (avoid_loss only; threat ``road_in_one`` or ``tinue``), ``flats``/``caps``
(only if not the standard reserves) and ``source`` (``file`` relative to the games folder,
``game_index`` 0-based in the file, ``ply``: moves played in the game before the position). A
summary line per (kind, size) goes to stdout as JSON. Deterministic: same files, same output
(about 13 minutes on one core).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from takzero.game import core
from takzero.game.core import STANDARD_RESERVES
from takzero.game.exhaustive import forced_win, safe_moves, winning_moves
from takzero.game.position import Position
from takzero.game.ptn import PTNError, read_ptn_file
from takzero.game.threats import is_tak
from takzero.game.tinue import WIN, prove_tinue
from takzero.io.files import atomic_write_text

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("win_in_1", "win_in_3", "win_in_5", "avoid_loss")
PROVER_NODES = 5000  # node budget of the tinue prover when it checks a defence (deterministic)


def _null_move(pos: Position) -> Position:
    """The same board with the other side to move (a pass, which the rules do not allow: only
    used to ask what the opponent threatens)."""
    state = pos.state.copy()
    state[core.I_PLY] += 1
    state[core.I_HASH] = core.hash_from_scratch(state)
    return Position(state)


def _reserves(start: Position) -> dict:
    """``flats``/``caps`` entries when the game does not use the standard reserves."""
    stones = start.stones(core.WHITE)
    caps = start.capstones(core.WHITE)
    for sq in range(start.size * start.size):
        colours, top = start.stack(sq)
        for depth, c in enumerate(reversed(colours)):
            if c == core.WHITE:
                if depth == 0 and top == core.CAP:
                    caps += 1
                else:
                    stones += 1
    if (stones, caps) == STANDARD_RESERVES[start.size]:
        return {}
    return {"flats": stones, "caps": caps}


def _entry(pos: Position, kind: str, plies: int, moves: list[int], source: dict, extra: dict) -> dict:
    entry = {
        "id": f"mined-{Path(source['file']).stem}-g{source['game_index']}-p{source['ply']}",
        "size": pos.size,
        "komi": pos.komi,
        "tps": pos.to_tps(),
        "side_to_move": "white" if pos.side_to_move == core.WHITE else "black",
        "kind": kind,
        "plies": plies,
        "expected_moves": [pos.ptn(c) for c in moves],
        **extra,
        "source": source,
    }
    # the entry must rebuild the same position
    check = Position.from_tps(entry["tps"], komi=entry["komi"], flats=extra.get("flats"), caps=extra.get("caps"))
    assert (check.state == pos.state).all(), entry["id"]
    return entry


def classify_win(pos: Position, max_nodes: int) -> tuple[str, int, list[int]] | None | str:
    """(kind, plies, winning moves) of the shortest forced road within 5 plies, None if there is
    none, 'budget' if the search ran out."""
    for plies in (1, 3, 5):
        v = forced_win(pos, plies, max_nodes=max_nodes, roads_only=True)
        if v is None:
            return "budget"
        if v:
            moves = winning_moves(pos, plies, max_nodes=max_nodes, roads_only=True)
            if moves is None:
                return "budget"
            return f"win_in_{plies}", plies, moves
    return None


def classify_defence(pos: Position, max_nodes: int) -> tuple[str, list[int]] | None | str:
    """(threat, safe moves) when the opponent threatens and some but not all moves avoid a
    forced loss within 3 plies; None otherwise; 'budget' if a search ran out."""
    if is_tak(pos):
        threat = "road_in_one"
    else:
        v = forced_win(_null_move(pos), 3, max_nodes=max_nodes)
        if v is None:
            return "budget"
        if not v:
            return None
        threat = "tinue"
    safe = safe_moves(pos, 3, max_nodes=max_nodes)
    if safe is None:
        return "budget"
    if not safe or len(safe) == len(pos.legal_move_codes()):
        return None
    # a move that survives 3 plies may still lose to a longer forced road: the prover's proofs
    # are sound (checked against the exhaustive search in tests/test_game_tinue.py), so a move it
    # proves lost is no defence
    me = pos.side_to_move
    lost = []
    for code in safe:
        after = pos.play(code)
        if not after.is_over and prove_tinue(after, max_nodes=PROVER_NODES, attacker=1 - me).verdict == WIN:
            lost.append(code)
    keep = [c for c in safe if c not in lost]
    if not keep:
        return None
    return threat, keep, lost


def road_games(games_dir: Path) -> list[list[tuple[str, int, list[Position], Position]]]:
    """Per file (sorted): the games that end with a road, as (file, index, positions, start)."""
    out = []
    for path in sorted(games_dir.rglob("*.ptn")):
        rel = path.relative_to(games_dir).as_posix()
        try:
            games = read_ptn_file(path, check=False, strict_numbers=False)
        except (PTNError, OSError) as e:
            print(f"skip file {rel}: {e}", file=sys.stderr)
            continue
        found = []
        for i, game in enumerate(games):
            try:
                replay = game.replay()
            except PTNError as e:
                print(f"skip {rel} game {i}: {e}", file=sys.stderr)
                continue
            if replay.result.reason != "road":
                continue
            pos = replay.start.copy()
            positions = [pos.copy()]
            for code in replay.moves:
                pos.make(code)
                positions.append(pos.copy())
            found.append((rel, i, positions, replay.start))
        out.append(found)
    return out


def mine(games_dir: Path, per_kind: int, max_total: int, max_nodes: int) -> list[dict]:
    """The mined entries (see the module docstring)."""
    files = road_games(games_dir)
    order = []
    for j in range(max((len(f) for f in files), default=0)):
        for f in files:
            if j < len(f):
                order.append(f[j])
    kept: list[dict] = []
    seen: set[tuple] = set()
    counts: Counter = Counter()
    dropped = 0
    for rel, index, positions, start in order:
        if len(kept) >= max_total:
            break
        end = len(positions) - 1
        size = positions[0].size
        extra = _reserves(start)
        for back in (1, 2, 3, 4, 5):
            ply = end - back
            if ply < 2 or len(kept) >= max_total:
                continue
            pos = positions[ply]
            key = (pos.to_tps(), pos.half_komi, pos.stones(0), pos.capstones(0), pos.stones(1), pos.capstones(1))
            if key in seen:
                continue
            source = {"file": rel, "game_index": index, "ply": ply}
            if back % 2 == 1:
                if all(counts[(k, size)] >= per_kind for k in KINDS[:3]):
                    continue
                got = classify_win(pos, max_nodes)
                if got == "budget":
                    dropped += 1
                    continue
                if got is None:
                    continue
                kind, plies, moves = got
                if counts[(kind, size)] >= per_kind:
                    continue
                entry = _entry(pos, kind, plies, moves, source, extra)
            else:
                if counts[("avoid_loss", size)] >= per_kind:
                    continue
                got = classify_defence(pos, max_nodes)
                if got == "budget":
                    dropped += 1
                    continue
                if got is None:
                    continue
                threat, moves, lost = got
                extra_a = {**extra, "threat": threat, "lost_beyond_horizon": [pos.ptn(c) for c in lost]}
                entry = _entry(pos, "avoid_loss", 3, moves, source, extra_a)
            seen.add(key)
            counts[(entry["kind"], size)] += 1
            kept.append(entry)
            print(f"{entry['id']}: {entry['kind']} ({len(kept)})", file=sys.stderr, flush=True)
    print(f"dropped {dropped} positions whose exhaustive search ran out of nodes", file=sys.stderr)
    kept.sort(key=lambda e: (e["size"], KINDS.index(e["kind"]), e["source"]["file"], e["source"]["game_index"],
                             e["source"]["ply"]))
    return kept


def write_set(out: Path, entries: list[dict], t0: float) -> None:
    """Write a mined tactics set to ``out`` (JSON, temp file and rename) and print one JSON line per
    (kind, size) with its count, then the total, the seconds since ``t0`` (``time.perf_counter``)
    and the path."""
    atomic_write_text(out, json.dumps(entries, indent=1) + "\n")
    counts = Counter((e["kind"], e["size"]) for e in entries)
    for (kind, size), n in sorted(counts.items()):
        print(json.dumps({"kind": kind, "size": size, "positions": n}))
    print(json.dumps({"total": len(entries), "seconds": round(time.perf_counter() - t0, 1), "out": str(out)}))


def main(argv: list[str] | None = None) -> int:
    """Mine and write the tactics file; returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--games", type=Path, default=ROOT / "tests" / "data" / "games", help="folder of PTN files")
    p.add_argument("--out", type=Path, default=ROOT / "takzero" / "data" / "tactics_mined.json")
    p.add_argument("--per-kind", type=int, default=25, help="at most this many per (kind, size)")
    p.add_argument("--max-total", type=int, default=300, help="at most this many in all")
    p.add_argument("--max-nodes", type=int, default=3_000_000, help="exhaustive search budget per call")
    args = p.parse_args(argv)
    if args.per_kind < 1 or args.max_total < 1 or args.max_nodes < 1:
        p.error("--per-kind, --max-total and --max-nodes must be >= 1")
    t0 = time.perf_counter()
    entries = mine(args.games, args.per_kind, args.max_total, args.max_nodes)
    write_set(args.out, entries, t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
