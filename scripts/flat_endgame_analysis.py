"""Where the flat-count games are lost: the network's value and its search's move along each lost game.

    taskset -c 0 python scripts/flat_endgame_analysis.py GAMES.ptn [GAMES.ptn ...]
        [--nodes 200] [--model-dir checkpoints/pretrained] [--late 6] [--exact-plies 0]
        [--player "takzero"] [--out FILE.jsonl]

Reads each PTN file (:func:`takzero.game.ptn.read_ptn_file`) and keeps the games the network lost
on the flat count: the side whose ``Player1`` / ``Player2`` tag contains ``--player`` lost by
``F-0`` / ``0-F`` (the result of the replayed moves, not only the tag). The network of the game's
board size is ``--model-dir/<N>x<N>.pt``, played by :class:`takzero.players.network.NetworkPlayer`
(backend ``onnx``, one thread, ``--nodes`` simulations, no tree reuse, the players' default search
with its tinuë checks). For every position of the game where the network (the losing side) is to
move, one JSON line (``"kind": "position"``):

* ``plies_to_end``: plies from this position to the end of the game (1: the network's last move);
* ``net_value``: the network's own value of the position (one evaluation, side to move's view);
  ``search_value``: the root value of the search at ``--nodes``;
* ``search_move`` / ``played_move`` (PTN) and ``agree``: whether the search chose the move the
  network played in the match (at 1 s a move, so with many more nodes);
* ``empty``: empty squares; ``reserve`` / ``opp_reserve``: pieces left (stones and capstones);
  ``flat_margin``: the network's flat count minus the opponent's, komi counted (in points, for the
  network), as if the game ended now;
* with ``--exact-plies D`` > 0, for the positions at most ``--exact-window`` plies before the
  end: ``exact`` -- the proved result for the network (``takzero.search.flat_endgame.solve`` at
  ``D`` plies: 1 win, 0 draw, -1 loss, None: not proved), its bounds ``exact_lower`` /
  ``exact_upper`` and ``exact_move`` (a move that forces ``exact_lower``), and
  ``played_lower`` / ``played_upper``: the bounds for the network after the move it played.

Per game one ``"kind": "game"`` line: ``plies`` (game length), ``net_colour``, the final flat
margin, ``turn_net`` / ``turn_search``: how many plies before the end the value turned for good
(``plies_to_end`` of the first network position after the last one whose value was >= 0; ``None``
if the value was never >= 0), ``decision_net`` / ``decision_search``: ``plies_to_end`` of that last
position with value >= 0, whose move is the *losing decision*, ``late_net`` / ``late_search``:
whether that decision lies within the last ``--late`` plies (a counting error) rather than earlier
(a strategic one), and with ``--exact-plies`` the
``blunder_plies_to_end`` of the network's last move that turned a proved non-loss into a proved
loss (``exact_lower`` >= 0 but ``played_upper`` == -1) and ``first_proved_loss``, the
``plies_to_end`` of the first position proved lost. The last line, ``"kind": "summary"``, counts
games, late and early decisions, the median
turn, and the agreement of the search with the played moves over the last ``--late`` plies.

The analysis is CPU-bound and meant to run beside a training run: pin it (``taskset -c 0``) and
keep ``--nodes`` small. Exit status 2 for bad arguments or unreadable files.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

from takzero.game import core
from takzero.game.position import Position
from takzero.game.ptn import PTNError, read_ptn_file

ROOT = Path(__file__).resolve().parents[1]


def _reserve(pos: Position, colour: int) -> int:
    return pos.stones(colour) + pos.capstones(colour)


def _empty(pos: Position) -> int:
    return sum(1 for sq in range(pos.size * pos.size) if pos.stack(sq)[1] == core.EMPTY)


def _flat_margin(pos: Position, colour: int) -> float:
    """Flat count of ``colour`` minus the opponent's, komi counted, in points."""
    w, b = pos.flat_counts()
    white_margin = (w - b) - pos.half_komi / 2
    return white_margin if colour == core.WHITE else -white_margin


def _net_colour(tags: dict[str, str], player: str) -> int | None:
    p1 = player.lower() in tags.get("Player1", "").lower()
    p2 = player.lower() in tags.get("Player2", "").lower()
    if p1 == p2:
        return None
    return core.WHITE if p1 else core.BLACK


def _turn(values: list[tuple[int, float]]) -> tuple[int | None, int | None]:
    """(turn, decision) for the network's positions in game order as ``(plies_to_end, value)``:
    ``decision`` is ``plies_to_end`` of the last position with value >= 0 (the network's move
    there is the losing decision), ``turn`` that of the next position (0 when the decision was
    the network's last move); (None, None) when no value was >= 0."""
    last_ok = None
    for i, (_, v) in enumerate(values):
        if v >= 0:
            last_ok = i
    if last_ok is None:
        return None, None
    turn = values[last_ok + 1][0] if last_ok + 1 < len(values) else 0
    return turn, values[last_ok][0]


def _lost_flat_games(paths: list[str], player: str) -> list[tuple[str, int, Any, int]]:
    out = []
    for path in paths:
        for i, game in enumerate(read_ptn_file(path)):
            colour = _net_colour(game.tags, player)
            if colour is None:
                continue
            final = game.replay().position
            r = int(final.state[core.I_RESULT])
            lost = (r == core.RESULT_FLAT_BLACK and colour == core.WHITE) or (
                r == core.RESULT_FLAT_WHITE and colour == core.BLACK
            )
            if lost:
                out.append((path, i, game, colour))
    return out


def analyse_game(path: str, index: int, game: Any, colour: int, player: Any, args: argparse.Namespace) -> list[dict]:
    """The JSON records of one lost game: its positions with the network to move, then the game."""
    solve = None
    if args.exact_plies > 0:
        from takzero.search.flat_endgame import solve
    pos = game.start
    n = len(game.moves)
    rows: list[dict] = []
    player.reset(pos.size, pos.half_komi)
    for ply, code in enumerate(game.moves):
        if pos.side_to_move == colour and ply >= 2:
            net_value = float(player.evaluator.evaluate(pos.state[None].copy())[1][0])
            answer = player.think(pos)
            row: dict[str, Any] = {
                "kind": "position", "file": Path(path).name, "game": index, "size": pos.size,
                "ply": ply, "plies_to_end": n - ply, "tps": pos.to_tps(),
                "net_value": round(net_value, 3),
                "search_value": None if answer.value is None else round(float(answer.value), 3),
                "search_move": pos.ptn(answer.code), "played_move": pos.ptn(code),
                "agree": int(answer.code) == int(code), "empty": _empty(pos),
                "reserve": _reserve(pos, colour), "opp_reserve": _reserve(pos, 1 - colour),
                "flat_margin": _flat_margin(pos, colour),
            }
            if solve is not None and n - ply <= args.exact_window:
                res = solve(pos, args.exact_plies, max_nodes=args.exact_nodes)
                row["exact"], row["exact_lower"], row["exact_upper"] = res.value, res.lower, res.upper
                row["exact_move"] = res.move
                after = pos.play(code)
                if after.is_over:
                    winner = after.result.winner
                    v = 0 if winner is None else (1 if winner == colour else -1)
                    row["played_lower"] = row["played_upper"] = v
                else:
                    res2 = solve(after, args.exact_plies, max_nodes=args.exact_nodes)
                    row["played_lower"], row["played_upper"] = -res2.upper, -res2.lower
            rows.append(row)
            print(json.dumps(row), flush=True)
        pos = pos.play(code)
    net = [(r["plies_to_end"], r["net_value"]) for r in rows]
    srch = [(r["plies_to_end"], r["search_value"]) for r in rows if r["search_value"] is not None]
    turn_net, decision_net = _turn(net)
    turn_search, decision_search = _turn(srch)
    summary: dict[str, Any] = {
        "kind": "game", "file": Path(path).name, "game": index, "size": pos.size, "plies": n,
        "net_colour": "white" if colour == core.WHITE else "black",
        "opening": game.tags.get("Opening"), "final_flat_margin": _flat_margin(pos, colour),
        "turn_net": turn_net, "turn_search": turn_search,
        "decision_net": decision_net, "decision_search": decision_search,
        "late_net": None if decision_net is None else decision_net <= args.late,
        "late_search": None if decision_search is None else decision_search <= args.late,
    }
    if solve is not None:
        solved = [r for r in rows if "exact" in r]
        blunders = [r["plies_to_end"] for r in solved
                    if r["exact_lower"] >= 0 and r["played_upper"] == -1]
        summary["blunder_plies_to_end"] = blunders[-1] if blunders else None
        lost = [r["plies_to_end"] for r in solved if r["exact"] == -1]
        summary["first_proved_loss"] = lost[0] if lost else None
    print(json.dumps(summary), flush=True)
    return rows + [summary]


def _summary(records: list[dict], late: int) -> dict:
    games = [r for r in records if r["kind"] == "game"]
    positions = [r for r in records if r["kind"] == "position"]
    out: dict[str, Any] = {"kind": "summary", "games": len(games), "late_window_plies": late}
    for which in ("net", "search"):
        turns = [g[f"turn_{which}"] for g in games if g[f"turn_{which}"] is not None]
        decisions = [g[f"decision_{which}"] for g in games if g[f"decision_{which}"] is not None]
        out[f"late_{which}"] = sum(1 for g in games if g[f"late_{which}"])
        out[f"early_{which}"] = sum(1 for g in games if g[f"late_{which}"] is False)
        out[f"never_ahead_{which}"] = sum(1 for g in games if g[f"turn_{which}"] is None)
        out[f"median_turn_{which}"] = statistics.median(turns) if turns else None
        out[f"decisions_{which}"] = sorted(decisions)
    lastp = [r for r in positions if r["plies_to_end"] <= late]
    out["agree_last_plies"] = f"{sum(r['agree'] for r in lastp)}/{len(lastp)}"
    out["agree_all"] = f"{sum(r['agree'] for r in positions)}/{len(positions)}"
    if games and "blunder_plies_to_end" in games[0]:
        b = [g["blunder_plies_to_end"] for g in games if g["blunder_plies_to_end"] is not None]
        out["exact_blunders_in_window"] = len(b)
        out["exact_blunder_plies_to_end"] = sorted(b)
        out["exact_first_proved_loss"] = sorted(g["first_proved_loss"] for g in games
                                                if g["first_proved_loss"] is not None)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("games", nargs="+", help="PTN files of the matches")
    ap.add_argument("--nodes", type=int, default=200, help="simulations per position (default 200)")
    ap.add_argument("--model-dir", default=str(ROOT / "checkpoints" / "pretrained"))
    ap.add_argument("--player", default="takzero", help="text of the network's Player tag")
    ap.add_argument("--late", type=int, default=6, help="plies before the end that count as late")
    ap.add_argument("--exact-plies", type=int, default=0, help="exact flat-endgame depth (0: off)")
    ap.add_argument("--exact-nodes", type=int, default=2_000_000, help="node budget of each proof")
    ap.add_argument("--exact-window", type=int, default=16,
                    help="solve only the positions this many plies or fewer before the end")
    ap.add_argument("--out", default=None, help="also write the JSON lines here")
    args = ap.parse_args(argv)
    if args.nodes < 1 or args.late < 0 or args.exact_plies < 0:
        print("error: --nodes must be >= 1, --late and --exact-plies >= 0", file=sys.stderr)
        return 2
    try:
        games = _lost_flat_games(args.games, args.player)
    except (OSError, PTNError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from takzero.players.network import NetworkPlayer

    players: dict[int, Any] = {}
    records: list[dict] = []
    warnings.simplefilter("ignore")
    for path, index, game, colour in games:
        size = game.size
        if size not in players:
            model = Path(args.model_dir) / f"{size}x{size}.pt"
            try:
                players[size] = NetworkPlayer.load(model, simulations=args.nodes, backend="onnx",
                                                   threads=1, reuse_tree=False)
            except (OSError, ValueError, RuntimeError) as e:
                print(f"error: {model}: {e}", file=sys.stderr)
                return 2
        records += analyse_game(path, index, game, colour, players[size], args)
    summary = _summary(records, args.late)
    print(json.dumps(summary), flush=True)
    if args.out:
        from takzero.io.files import atomic_write_text

        atomic_write_text(args.out, "".join(json.dumps(r) + "\n" for r in records + [summary]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
