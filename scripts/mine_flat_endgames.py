"""Mine the flat-endgame tactics set: positions where the game must end by the flat count within a
few plies and the side to move has a proved win or a proved draw-saving move that not every move
achieves.

    python scripts/mine_flat_endgames.py [--games PATH ...] [--out FILE] [--per-kind N]
                                         [--max-nodes N] [--back N] [--games-per-file N]

Reads the PTN files given by ``--games`` (files or folders, folders searched for ``*.ptn``; by
default the project's engine matches of 2026-12-07, ``../shared/data/matches-2026-12-07`` when it
is there, then ``tests/data/games``) in the order given, files of a folder sorted; games that
fail to read or replay are skipped (named on stderr). Of the first ``--games-per-file`` games
(default 30) of each file that end by the flat count (a full board or an empty reserve, reason
``flat`` or ``draw``), the positions of the last
``--back`` plies (default 8) where :func:`takzero.search.flat_endgame.is_flat_endgame` holds
(6 plies) are solved by :func:`takzero.search.flat_endgame.solve` (6 plies, ``--max-nodes``
node visits, default 300,000). Kept, when the value is proved:

* value 1 (the side to move wins) and no forced *road* within the proof's depth (so the win
  needs the count): kind ``win_in_N`` (N the smallest of 1, 3, 5 not below the proof's depth;
  deeper ones are not kept), ``plies`` N, ``expected_moves`` every move after which the side to
  move wins by force within N - 1 plies (:func:`takzero.game.exhaustive.winning_moves`: all
  moves of both sides), kept when not every legal move wins;
* value 0 (a draw): kind ``avoid_loss``, ``plies`` the proof's depth, ``expected_moves`` the
  moves proved to hold the draw (:func:`solve` of the position after the move, its depth less
  one: the opponent's upper bound is at most 0), kept when every other move is proved lost (the
  opponent forces a win within the depth less one, checked by
  :func:`~takzero.game.exhaustive.forced_win`) and there is at least one such move: no move is
  left unproved, so ``expected_moves`` are exactly the moves that do not lose.

So each entry is solved by the rule every tactics kind uses
(:func:`takzero.matches.tactics_set.solves`): a win kind by a move that wins by force within the
plies, ``avoid_loss`` by one of the expected moves. Every entry has ``theme`` ``flat_endgame``,
``value`` (1 or 0) and ``proof_depth``. Duplicates (same TPS, komi and reserves) are kept once; at
most ``--per-kind`` per (kind, size), from the games in an order that spreads them over the files
(round robin). Deterministic: same files, same output (27 minutes on a loaded 2-core machine).

Output (``--out``, default ``takzero/data/tactics_flat.json``, package data beside
``tactics_mined.json``): a JSON list in the format of ``scripts/mine_tactics.py`` (``id``,
``size``, ``komi``, ``tps``, ``side_to_move``, ``kind``, ``plies``, ``expected_moves``,
``flats``/``caps`` when not standard, ``source``), sorted by size, kind and source; one JSON
summary line per (kind, size) on stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mine_tactics import _entry, _reserves, write_set  # noqa: E402

from takzero.game.exhaustive import forced_win, winning_moves  # noqa: E402
from takzero.game.position import Position  # noqa: E402
from takzero.game.ptn import PTNError, read_ptn_file  # noqa: E402
from takzero.search.flat_endgame import is_flat_endgame, solve  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_GAMES = (ROOT.parent / "shared" / "data" / "matches-2026-12-07", ROOT / "tests" / "data" / "games")
KINDS = ("win_in_1", "win_in_3", "win_in_5", "avoid_loss")
#: depth of the flat-endgame search and of the is_flat_endgame test (plies)
DEPTH = 6


def _files(paths: list[Path]) -> list[tuple[Path, str]]:
    """(file, name in the entries' ``source``) of every PTN file of ``paths``, in order."""
    out = []
    for path in paths:
        if path.is_dir():
            out += [(f, f"{path.name}/{f.relative_to(path).as_posix()}") for f in sorted(path.rglob("*.ptn"))]
        elif path.is_file():
            out.append((path, path.name))
        else:
            print(f"skip {path}: not found", file=sys.stderr)
    return out


def flat_games(paths: list[Path], per_file: int) -> list[list[tuple[str, int, list[Position], Position]]]:
    """Per file: the first ``per_file`` games that end by the flat count, as (name, index,
    positions, start)."""
    out = []
    for path, rel in _files(paths):
        try:
            games = read_ptn_file(path, check=False, strict_numbers=False)
        except (PTNError, OSError) as e:
            print(f"skip file {rel}: {e}", file=sys.stderr)
            continue
        found = []
        for i, game in enumerate(games):
            if len(found) >= per_file:
                break
            try:
                replay = game.replay()
            except PTNError as e:
                print(f"skip {rel} game {i}: {e}", file=sys.stderr)
                continue
            if replay.result is None or replay.result.reason not in ("flat", "draw"):
                continue
            pos = replay.start.copy()
            positions = [pos.copy()]
            for code in replay.moves:
                pos.make(code)
                positions.append(pos.copy())
            if positions[-1].is_over:
                found.append((rel, i, positions, replay.start))
        out.append(found)
    return out


def classify(pos: Position, max_nodes: int) -> tuple[str, int, list[int], dict] | None:
    """(kind, plies, expected moves, extra fields) of a kept position (see the module
    docstring), else None."""
    res = solve(pos, DEPTH, max_nodes=max_nodes)
    legal = [int(c) for c in pos.legal_move_codes()]
    me = pos.side_to_move
    extra = {"theme": "flat_endgame", "value": res.value, "proof_depth": res.depth}
    if res.value == 1:
        plies = next((n for n in (1, 3, 5) if n >= res.depth), None)
        if plies is None or forced_win(pos, plies, max_nodes=max_nodes, roads_only=True) is not False:
            return None
        moves = winning_moves(pos, plies, max_nodes=max_nodes)
        if not moves or len(moves) == len(legal):
            return None
        return f"win_in_{plies}", plies, moves, extra
    if res.value == 0:
        held = []
        for code in legal:
            after = pos.play(code)
            if after.is_over:
                w = after.result.winner
                if w is None or w == me:
                    held.append(code)
                continue
            lost = forced_win(after, res.depth - 1, max_nodes=max_nodes, attacker=1 - me) if res.depth > 1 else False
            if lost is None:
                return None
            if lost:
                continue
            child = solve(after, max(1, res.depth - 1), max_nodes=max_nodes)
            if child.upper > 0:  # not proved to hold the draw and not proved lost: open
                return None
            held.append(code)
        if not held or len(held) == len(legal):
            return None
        return "avoid_loss", res.depth, held, extra
    return None


def mine(paths: list[Path], per_kind: int, max_nodes: int, back: int, per_file: int) -> list[dict]:
    """The mined entries (see the module docstring)."""
    files = flat_games(paths, per_file)
    order = []
    for j in range(max((len(f) for f in files), default=0)):
        for f in files:
            if j < len(f):
                order.append(f[j])
    kept: list[dict] = []
    seen: set[tuple] = set()
    counts: Counter = Counter()
    for rel, index, positions, start in order:
        end = len(positions) - 1
        size = positions[0].size
        if all(counts[(k, size)] >= per_kind for k in KINDS):
            continue
        extra = _reserves(start)
        for ply in range(max(2, end - back), end):
            pos = positions[ply]
            if not is_flat_endgame(pos, DEPTH):
                continue
            key = (pos.to_tps(), pos.half_komi, pos.stones(0), pos.capstones(0), pos.stones(1), pos.capstones(1))
            if key in seen:
                continue
            seen.add(key)
            got = classify(pos, max_nodes)
            if got is None:
                continue
            kind, plies, moves, more = got
            if counts[(kind, size)] >= per_kind:
                continue
            entry = _entry(pos, kind, plies, moves, {"file": rel, "game_index": index, "ply": ply},
                           {**extra, **more})
            entry["id"] = entry["id"].replace("mined-", "flat-", 1)
            counts[(kind, size)] += 1
            kept.append(entry)
            print(f"{entry['id']}: {kind} ({len(kept)})", file=sys.stderr, flush=True)
    kept.sort(key=lambda e: (e["size"], KINDS.index(e["kind"]), e["source"]["file"], e["source"]["game_index"],
                             e["source"]["ply"]))
    return kept


def main(argv: list[str] | None = None) -> int:
    """Mine and write the flat-endgame tactics file; returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--games", type=Path, nargs="+", default=list(DEFAULT_GAMES), help="PTN files or folders")
    p.add_argument("--out", type=Path, default=ROOT / "takzero" / "data" / "tactics_flat.json")
    p.add_argument("--per-kind", type=int, default=8, help="at most this many per (kind, size)")
    p.add_argument("--max-nodes", type=int, default=300_000, help="search budget per call (node visits)")
    p.add_argument("--back", type=int, default=8, help="positions of the last N plies of each game")
    p.add_argument("--games-per-file", type=int, default=30, help="flat-count games read per file")
    args = p.parse_args(argv)
    if min(args.per_kind, args.max_nodes, args.back, args.games_per_file) < 1:
        p.error("--per-kind, --max-nodes, --back and --games-per-file must be >= 1")
    t0 = time.perf_counter()
    entries = mine(args.games, args.per_kind, args.max_nodes, args.back, args.games_per_file)
    write_set(args.out, entries, t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
