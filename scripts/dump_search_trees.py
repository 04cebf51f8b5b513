"""Whole-tree dump of a fixed set of searches, to check that a change of the search code keeps
its results bit for bit. JSON lines on stdout.

    python scripts/dump_search_trees.py [--tree PATH] [--quick]

Each case builds a ``BatchedMCTS``, searches a few positions (sizes 5 and 6: starts, mid-game TPS,
roads in one, road threats), then plays a few moves with ``choose_move`` and ``advance`` (tree
reuse). After every search one line gives, for the case and move number: the sha256 of every node
array of every tree (``tree_sha``) and of the per-game search arrays (random streams, noise, the
Gumbel schedule: ``games_sha``), the sha256 of the readouts (policy targets, root Q and priors,
root values, proofs, principal variations, visit counts: ``readout_sha``) and the chosen moves.
The last line holds the sha256 of all lines before it (``all_sha``).

Cases: PUCT with and without Dirichlet noise, the Gumbel root with and without noise, playout
cap randomization, several leaves per game (virtual loss), proven wins and losses (road check
and root terminal check on and off, a ply limit), a full tree (tiny node budget), a fixed
first-play value with a constant c_puct and no tree reuse, the step protocol driven by hand
(``begin_search`` / ``select_leaves`` / ``expand_backup``) on a subset of the games, forced
playouts with policy target pruning (the targets and the moves played from the pruned counts);
with the ``UniformEvaluator`` and the ``HashEvaluator``.

Only the public ``BatchedMCTS`` API is used, plus a read of its tree arrays through
``_tree_arrays``, which knows each layout the class has had (and hashes them under the first
layout's names, so a rename keeps the hashes), so the script runs unchanged against
older checkouts: ``--tree /path/to/checkout`` puts that checkout first on ``sys.path`` (default:
the checkout holding this script). Exit status 0; compare the output of two checkouts with
``diff``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

# mid-game positions at plies 20 and 30 of games in tests/data/games (5x5 playtak, 6x6 engine)
TPS_5_A = "1,2C,12121,x,1C/x,1,x,12,x/x2,1,2,x/2,x4/2,x4 1 11"
TPS_5_B = "1,1,2,x,1C/x,1,x,122121,x/x,1,1212C,x,2/2,x4/2,x4 1 16"
TPS_5_C = "2,2,2,1S,x/222221S,2,2,x,1/2,2,2,1S,1/1S,1S,21S,2,x/x5 1 16"
TPS_6_A = "x3,2,x2/2,2,21C,2,x2/x3,1,2,x/x,1,2,2,x2/1,1,1,2C,1,x/x3,1,2,1 1 11"
TPS_6_B = "x2,2,2,2,2/2,2,21C,x,121,x/x,1,1,1,2,x/x,1,2,2,2,x/1,1,1,2C,1,x/x3,1,2,1 1 16"
TPS_6_C = "2,1,1,1,1,1/2S,1,x2,1,x/2,1,x2,1,x/x,2,2221C,2,12C,x/2,2,x2,1,2/x2,2,x3 1 16"
# win-in-one positions of tests/data/tactics.json
TPS_5_MID = "2,2,x3/x,2112,2,2,x/x2,2,1,x/x,12,1,1,1/x,1112,x,21,x 2 18"
TPS_5_MID2 = "2,2,112,1S,22221S/2,x,212212C,x2/x4,1/x2,21C,2,x/1,1,x,1S,x 2 22"
TPS_5_WIN = "x5/x,2,2,2,x/x2,2,x2/x,1,1,1,1/x5 1 5"  # white: a2 completes a road
TPS_5_THREAT = "x5/x5/2,2,2,2,x/x5/1,1,1,x2 1 5"  # white must block e3
TPS_5_LOST = "x5/x5/x5/1,1,1,1,x/1,1,1,1,x 2 6"  # black is lost (two road threats)
TPS_6_MID = "2,x,2,x2,1/x2,2,2,x,1/x2,2,2,21112,1/x3,212C,221C,x/1,2S,x,21,21,11/2S,1,1,2,12,x 2 29"
TPS_6_MID2 = "1,1,1,2,2,1/2,2,2,2S,12,1/2,1,112C,12121C,112S,1/1,2,2S,x,1,1/1S,1,2,x3/2,x5 1 24"
TPS_6_WIN = (
    "1,1,2,1,1,1/x2,2,2,1,x/x,2,2,1,2221S,x/1,x,2222221C,11112C,2,x/x,2121,2,1,21,2/"
    "21,2,2,1,12,x 1 36"
)


#: Today's field names -> the names of the first layout, which the hashes use (so that a pure
#: rename keeps every sha): the node pools and the per-game arrays.
_TREE_NAMES = {
    "visits": "n", "value_sum": "w", "prior": "p", "move": "mv", "first_child": "first",
    "num_children": "nch", "virtual_visits": "vl", "num_nodes": "count",
}
_GAME_NAMES = {
    "root_state": "root", "mixed_prior": "mixp", "search_visits": "sv", "raw_value": "raw",
    "considered_visits": "seq",
}


def _tree_arrays(mcts) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(node arrays by name, per-game arrays by name) of a ``BatchedMCTS``, whatever the layout
    of the checkout, under the names of the first layout: the named tuples ``_T`` and ``_GM``
    (fields ``n``, ``w``, ...; one ``extra`` array for the Dirichlet noise or the Gumbel logits)
    or ``_trees`` and ``_games`` (fields ``visits``, ``value_sum``, ...; ``dirichlet_noise`` and
    ``gumbel_logits``, of which the search mode uses one: it is hashed as ``extra``, and the
    other must be all zero)."""
    for tree_name, games_name in (("_T", "_GM"), ("_trees", "_games"), ("trees", "games")):
        t = getattr(mcts, tree_name, None)
        gm = getattr(mcts, games_name, None)
        if t is None or gm is None:
            continue
        nodes = {_TREE_NAMES.get(k, k): v for k, v in t._asdict().items()}
        per_game = {_GAME_NAMES.get(k, k): v for k, v in gm._asdict().items()}
        if "gumbel_logits" in per_game:
            used, unused = ("gumbel_logits", "dirichlet_noise")
            if not mcts.config.gumbel:
                used, unused = unused, used
            if per_game[unused].any():
                raise AssertionError(f"{unused} is written in a search that does not use it")
            per_game["extra"] = per_game.pop(used)
            del per_game[unused]
        return nodes, per_game
    raise AttributeError("no tree arrays found on this BatchedMCTS")


def _sha(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode())
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _readouts(mcts, games) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for g in games:
        g = int(g)
        if mcts.tree_size(g) == 0 or not mcts.root_moves(g).size:
            continue
        actions, probs = mcts.policy_target(g)
        moves, visits = mcts.root_visits(g)
        pm, pr, mixed = mcts.root_priors(g)
        proven = mcts.root_proven(g)
        out[f"{g}.actions"] = actions
        out[f"{g}.probs"] = probs
        out[f"{g}.moves"] = moves
        out[f"{g}.visits"] = visits
        out[f"{g}.q"] = mcts.root_q(g)
        out[f"{g}.priors"] = np.concatenate([pm.astype(np.float64), pr, mixed])
        out[f"{g}.value"] = np.array([mcts.root_value(g)])
        out[f"{g}.proven"] = np.array([-9 if proven is None else proven])
        out[f"{g}.pv"] = np.array(mcts.principal_variation(g), dtype=np.int64)
        out[f"{g}.sims"] = np.array([mcts.simulations_done(g), mcts.overflow(g)])
        out[f"{g}.full"] = np.array([mcts.is_full_search(g)])
    return out


def _emit(lines: list[str], **fields) -> None:
    line = json.dumps(fields, sort_keys=True)
    lines.append(line)
    print(line, flush=True)


def _run_case(lines, name, size, tps_list, cfg, evaluator, seed, plies, temperature=None,
              simulations=None, manual_games=None) -> None:
    from takzero.game import Position
    from takzero.search import BatchedMCTS

    mcts = BatchedMCTS(len(tps_list), size, cfg, seed=seed)
    for g, tps in enumerate(tps_list):
        pos = Position.start(size) if tps is None else Position.from_tps(tps)
        mcts.reset(g, pos.state)
    for ply in range(plies + 1):
        games = mcts.active_games()
        if not games.size:
            break
        if manual_games is not None:
            sub = [g for g in manual_games if mcts.is_active(g)]
            full = mcts.begin_search(sub, add_noise=ply % 2 == 0, simulations=simulations)
            steps = 0
            while True:
                states, leaf_games = mcts.select_leaves()
                if states.shape[0] == 0:
                    break
                priors, values, _ = evaluator.evaluate(states)
                mcts.expand_backup(priors, values)
                steps += 1
            games = np.array(sub, dtype=np.int64)
            extra = {"full": [bool(x) for x in full], "steps": steps}
        else:
            stats = mcts.run(evaluator, simulations=simulations)
            extra = {"steps": stats.steps, "leaves": stats.leaves}
        nodes, per_game = _tree_arrays(mcts)
        chosen = []
        for g in games:
            g = int(g)
            if mcts.root_moves(g).size == 0:
                chosen.append(None)
                continue
            chosen.append(mcts.choose_move(g, temperature=temperature))
        _emit(
            lines, case=name, ply=ply, games=[int(g) for g in games], moves=chosen,
            tree_sha=_sha(nodes), games_sha=_sha(per_game),
            readout_sha=_sha(_readouts(mcts, games)),
            sizes=[mcts.tree_size(int(g)) for g in games], **extra,
        )
        for g, m in zip(games, chosen, strict=True):
            if m is not None and mcts.is_active(int(g)):
                mcts.advance(int(g), m)


def cases(quick: bool):
    """(name, size, positions, config, evaluator, seed, plies, keyword args) of every case."""
    from takzero.search import HashEvaluator, SearchConfig, UniformEvaluator

    plies = 1 if quick else 3
    s5 = [None, TPS_5_A, TPS_5_B, TPS_5_C, TPS_5_MID, TPS_5_WIN, TPS_5_THREAT, TPS_5_LOST]
    s6 = [None, TPS_6_A, TPS_6_B, TPS_6_C, TPS_6_MID, TPS_6_WIN]
    budget = 30_000
    ev = SearchConfig(node_budget=budget).evaluation()
    yield ("puct_noise_uniform_5", 5, s5, SearchConfig(simulations=64, node_budget=budget),
           UniformEvaluator(5), 1, plies, {})
    yield ("puct_noise_hash_6", 6, s6, SearchConfig(simulations=48, node_budget=budget,
           dirichlet_alpha=0.3), HashEvaluator(6, seed=2), 2, plies, {})
    yield ("puct_nonoise_hash_5", 5, s5, SearchConfig(simulations=80, node_budget=budget)
           .evaluation(), HashEvaluator(5, seed=1), 3, plies, {})
    yield ("puct_nonoise_uniform_masked_6", 6, s6, ev, UniformEvaluator(6, masked=True), 4,
           plies, {"simulations": 40})
    yield ("puct_sampled_temperature_5", 5, s5, SearchConfig(simulations=48, node_budget=budget,
           temperature_plies=10), HashEvaluator(5, seed=5), 5, plies, {})
    yield ("gumbel_noise_hash_6", 6, s6, SearchConfig(simulations=48, node_budget=budget,
           gumbel=True, gumbel_m=8), HashEvaluator(6, seed=3), 6, plies, {})
    yield ("gumbel_nonoise_uniform_5", 5, s5, SearchConfig(simulations=40, node_budget=budget,
           gumbel=True, root_noise=False, gumbel_m=4), UniformEvaluator(5), 7, plies, {})
    yield ("gumbel_noise_hash_5", 5, s5, SearchConfig(simulations=64, node_budget=budget,
           gumbel=True, gumbel_m=16, gumbel_c_visit=20.0), HashEvaluator(5, seed=4), 8,
           plies, {})
    yield ("playout_cap_hash_5", 5, s5, SearchConfig(playout_cap=True, full_prob=0.5,
           full_sims=64, cheap_sims=12, node_budget=budget), HashEvaluator(5, seed=6), 9,
           plies + 1, {})
    yield ("virtual_loss_hash_6", 6, s6, SearchConfig(simulations=48, node_budget=budget,
           leaves_per_step=4, virtual_loss=1.0), HashEvaluator(6, seed=7), 10, plies, {})
    yield ("virtual_loss_gumbel_5", 5, s5, SearchConfig(simulations=48, node_budget=budget,
           leaves_per_step=3, virtual_loss=0.5, gumbel=True), HashEvaluator(5, seed=8), 11,
           plies, {})
    yield ("proofs_uniform_5", 5, [TPS_5_WIN, TPS_5_THREAT, TPS_5_LOST, TPS_5_MID],
           SearchConfig(node_budget=budget).evaluation(), UniformEvaluator(5), 12, plies,
           {"simulations": 300})
    yield ("proofs_no_checks_5", 5, [TPS_5_WIN, TPS_5_THREAT, TPS_5_LOST],
           SearchConfig(node_budget=budget, road_check=False, root_terminal_check=False)
           .evaluation(), UniformEvaluator(5), 13, plies, {"simulations": 200})
    yield ("proofs_ply_limit_5", 5, [TPS_5_WIN, TPS_5_THREAT, TPS_5_LOST],
           SearchConfig(simulations=120, node_budget=budget, max_plies=12),
           HashEvaluator(5, seed=9), 14, plies, {})
    yield ("proofs_ply_limit_mid_5", 5, [TPS_5_A, TPS_5_B, TPS_5_C],
           SearchConfig(simulations=120, node_budget=budget, max_plies=34),
           UniformEvaluator(5), 19, plies, {})
    yield ("proofs_hash_6", 6, [TPS_6_WIN, TPS_6_MID, TPS_6_MID2, TPS_6_C],
           SearchConfig(simulations=64, node_budget=budget, root_terminal_check=False),
           HashEvaluator(6, seed=10), 15, plies, {})
    yield ("full_tree_5", 5, [None, TPS_5_A, TPS_5_C, TPS_5_THREAT],
           SearchConfig(simulations=64, node_budget=3_300), HashEvaluator(5, seed=11), 16,
           plies, {})
    yield ("fixed_fpu_const_c_noreuse_6", 6, s6, SearchConfig(simulations=40, node_budget=budget,
           fpu_value=-1.0, c_base=0.0, c_init=2.0, reuse_tree=False, fpu_reduction=0.0),
           HashEvaluator(6, seed=12), 17, plies, {})
    yield ("step_protocol_subset_5", 5, s5, SearchConfig(simulations=32, node_budget=budget,
           leaves_per_step=2), HashEvaluator(5, seed=13), 18, plies,
           {"manual_games": [0, 2, 3, 5, 7], "simulations": 24})
    yield ("forced_pruned_hash_5", 5, s5, SearchConfig(simulations=96, node_budget=budget,
           forced_playouts=True, policy_target_pruning=True), HashEvaluator(5, seed=14), 20,
           plies, {"temperature": 0.0})
    yield ("forced_pruned_sampled_6", 6, s6, SearchConfig(simulations=64, node_budget=budget,
           forced_playouts=True, policy_target_pruning=True, temperature_plies=10),
           HashEvaluator(6, seed=15), 21, plies, {})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1],
                    help="checkout whose takzero is imported (default: this script's)")
    ap.add_argument("--quick", action="store_true", help="one move per case instead of three")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(args.tree.resolve()))
    import takzero

    lines: list[str] = []
    print(json.dumps({"takzero": str(Path(takzero.__file__).parent)}), flush=True)
    for name, size, positions, cfg, evaluator, seed, plies, kw in cases(args.quick):
        _run_case(lines, name, size, positions, cfg, evaluator, seed, plies, **kw)
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    print(json.dumps({"all_sha": digest, "lines": len(lines)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
