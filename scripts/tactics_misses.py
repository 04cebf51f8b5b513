"""Why a network misses the win kinds of the tactics set: one JSON line per missed position.

    python scripts/tactics_misses.py --model checkpoints/long6x6/link3.pt [--simulations 200]
        [--files A.json ...] [--prover-nodes 200000]

For each ``win_in_1`` / ``win_in_3`` / ``win_in_5`` entry of the model's board size (the files of
``scripts/bench_tactics.py``), the network alone (``tinue_nodes=0``) chooses a move at
``--simulations`` and the move is judged by the set's one rule
(:func:`takzero.matches.tactics_set.solves`). A missed entry gets a ``miss`` line:

* ``root_value``: the network's value of the position for the mover (-1..1);
* ``win_prior_rank`` / ``win_prior``: the best-ranked expected winning move among the legal moves
  by the network's prior (0 = the highest prior) and its prior;
* ``value_after_win`` / ``value_after_chosen``: the network's value for the *mover* after the
  winning move and after the chosen one (the negated value of the opponent to move; None when
  the move ends the game);
* ``chosen_keeps_forced_road``: whether the tinuë prover (:func:`takzero.game.tinue.prove_tinue`,
  ``--prover-nodes``) proves a forced road for the mover after the chosen move, i.e. a slower
  win; False also covers "no proof by tak moves within the budget" (a quiet win may exist).

The last line, ``summary``: positions, solved, missed, and of the missed how many the network
already valued as won (root value > 0.9), how many chosen moves it valued as wins (> 0.9 after
the move), how many kept a proven forced road, and how many had a winning move in its prior's
top 5: the split between blindness (the winning move never searched) and slow wins (a won
position converted by another winning move). Runs on one core. Exit status 2 for bad arguments,
a model that cannot be read or no positions of its size.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_tactics import DEFAULT_FILES  # noqa: E402

from takzero.game import Position  # noqa: E402
from takzero.game.tinue import WIN, prove_tinue  # noqa: E402
from takzero.matches.tactics_set import WIN_KINDS, load_entries, solves  # noqa: E402
from takzero.nn.actions import move_to_action  # noqa: E402

#: A value above this (for the mover) counts as "the network sees a win".
WON = 0.9


def _mover_value(evaluator: Any, after: Position) -> float | None:
    """The network's value, for the player who just moved, of ``after`` (None when the game is
    over)."""
    if after.is_over:
        return None
    return round(-float(evaluator.evaluate(after.state[None].copy())[1][0]), 3)


def miss_report(entry: dict[str, Any], chosen: int, evaluator: Any, prover_nodes: int) -> dict[str, Any]:
    """The ``miss`` line of a missed win entry (see the module doc). ``chosen``: the move code the
    player chose; ``evaluator``: its network (``evaluate(states) -> (priors (B, A), values (B,),
    wdl)``)."""
    pos: Position = entry["position"]
    priors, values, _ = evaluator.evaluate(pos.state[None].copy())
    codes = [int(c) for c in pos.legal_move_codes()]
    prior = np.array([priors[0, move_to_action(c, pos.size)] for c in codes], np.float64)
    rank_of = {codes[i]: r for r, i in enumerate(np.argsort(-prior, kind="stable"))}
    wins = [c for c in codes if pos.ptn(c) in entry["expected"]]
    best = min(wins, key=lambda c: rank_of[c]) if wins else None
    after = pos.play(chosen)
    if after.is_over:
        keeps = after.result.winner == pos.side_to_move
    else:
        keeps = (prover_nodes > 0
                 and prove_tinue(after, max_nodes=prover_nodes, attacker=pos.side_to_move).verdict == WIN)
    return {
        "line": "miss",
        "id": entry.get("id"),
        "kind": entry["kind"],
        "legal_moves": len(codes),
        "winning_moves": len(wins),
        "root_value": round(float(values[0]), 3),
        "win_prior_rank": rank_of[best] if best is not None else None,
        "win_prior": round(float(prior[codes.index(best)]), 4) if best is not None else None,
        "value_after_win": _mover_value(evaluator, pos.play(best)) if best is not None else None,
        "chosen": pos.ptn(chosen),
        "value_after_chosen": _mover_value(evaluator, after),
        "chosen_keeps_forced_road": bool(keeps),
    }


def summarise(total: int, misses: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``summary`` line over ``total`` positions and their ``miss`` lines."""

    def won(v: float | None) -> bool:
        return v is not None and v > WON

    return {
        "line": "summary",
        "positions": total,
        "solved": total - len(misses),
        "missed": len(misses),
        "missed_root_valued_won": sum(won(m["root_value"]) for m in misses),
        "missed_chosen_valued_won": sum(won(m["value_after_chosen"]) for m in misses),
        "missed_chosen_keeps_forced_road": sum(m["chosen_keeps_forced_road"] for m in misses),
        "missed_win_in_prior_top5": sum(m["win_prior_rank"] is not None and m["win_prior_rank"] < 5 for m in misses),
    }


def main(argv: list[str] | None = None) -> int:
    """Run it; returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, required=True, help="network (checkpoint or exported file)")
    p.add_argument("--simulations", type=int, default=200, help="search simulations per move")
    p.add_argument("--files", type=Path, nargs="+", default=list(DEFAULT_FILES), help="tactics JSON files")
    p.add_argument("--prover-nodes", type=int, default=200_000, help="prover budget of the slow-win check")
    args = p.parse_args(argv)
    if args.simulations < 1:
        p.error("--simulations must be >= 1")
    if args.prover_nodes < 0:
        p.error("--prover-nodes must be >= 0")
    import torch

    from takzero.players.network import NetworkPlayer
    from takzero.players.registry import ModelFileError

    torch.set_num_threads(1)
    try:
        player = NetworkPlayer.load(str(args.model), simulations=args.simulations, device="cpu", tinue_nodes=0)
        entries = [e for e in load_entries(args.files, size=player.model_size) if e["kind"] in WIN_KINDS]
    except (OSError, ValueError, ModelFileError) as e:
        print(f"tactics_misses: {e}", file=sys.stderr)
        return 2
    if not entries:
        names = ", ".join(str(f) for f in args.files)
        print(f"tactics_misses: no win entries of size {player.model_size} in {names}", file=sys.stderr)
        return 2
    misses = []
    for entry in entries:
        pos = entry["position"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the set's komi 0 against a network trained with komi
            player.reset(pos.size, pos.half_komi, seed=0)
            code = player.choose(pos).code
        if not solves(entry, code):
            misses.append(miss_report(entry, code, player.evaluator, args.prover_nodes))
            print(json.dumps(misses[-1]), flush=True)
    print(json.dumps({**summarise(len(entries), misses), "model": str(args.model), "simulations": args.simulations,
                      "prover_nodes": args.prover_nodes, "files": [str(f) for f in args.files]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
