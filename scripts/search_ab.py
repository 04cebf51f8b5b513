"""A/B of two search settings with one network: the same model searches with settings A against
itself with settings B, on paired random openings; one JSON line.

    python scripts/search_ab.py MODEL [--a KEY=VALUE ...] [--b KEY=VALUE ...]
                                [--simulations 200] [--pairs 25] [--seed 0] [--ply-limit 150]
                                [--threads 1] [--a-backend auto] [--b-backend auto]

Each side is a :class:`takzero.matches.games.NetSide` over one evaluator of ``MODEL`` (an
exported model or a checkpoint, loaded weights-only; onnxruntime where it is installed, with
``--threads`` threads) searching with the evaluation copy (``SearchConfig.evaluation()``: no
noise) of the network players' default search (``SearchConfig(select_q_fraction=
takzero.players.network.DEFAULT_SELECT_Q_FRACTION)``, ``--simulations`` a move, ``max_plies``
the ply limit) with that side's ``KEY=VALUE`` overrides: any ``SearchConfig`` field, the value
read as YAML (``gumbel=true``, ``gumbel_m=16``, ``select_q_fraction=0``, ``tinue_nodes=0``).
``takzero.matches.games.play_match`` plays every opening once with each colour (``--pairs``
openings of 2 plies from ``--seed``; komi: the model's). ``--a-backend`` / ``--b-backend``: each
side's network runtime (``takzero.players.network.play_evaluator``: auto, int8, onnx, torch), so
that ``--a-backend int8 --b-backend onnx`` measures the int8 copy of the network against its
float32 self at equal nodes.

The line: ``model``, ``a`` and ``b`` (the overrides), ``simulations``, ``pairs``, ``seed``,
``games``, ``wins``/``draws``/``losses`` (A's), ``tally`` (W-D-L), ``pentanomial`` (A's pair
counts, worst first, so that runs on other seeds pool), ``score``, ``elo`` with its pentanomial
95% interval (``elo_lower``/``elo_upper``; infinite as null) and ``seconds``. The comparisons in
docs/results.md ("The root rule in play", "The move a player plays") were made this way.

Exit status: 0, or 2 for bad arguments (a missing model, an unknown key or a bad value: named
before any game).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import yaml

#: settings a side may not override: the budget and ply limit are the command line's (both
#: sides alike), and ``SearchConfig.evaluation()`` turns the self-play ones off in play
FIXED = {
    "simulations": "set by --simulations, for both sides",
    "max_plies": "set by --ply-limit, for both sides",
    "root_noise": "off in play (SearchConfig.evaluation())",
    "playout_cap": "off in play (SearchConfig.evaluation())",
    "temperature": "not used in play (SearchConfig.evaluation() plays at temperature 0)",
    "temperature_plies": "not used in play (SearchConfig.evaluation() plays at temperature 0)",
    "temperature_final": "not used in play (SearchConfig.evaluation() plays at temperature 0)",
    "forced_playouts": "off in play (SearchConfig.evaluation())",
    "policy_target_pruning": "off in play (SearchConfig.evaluation())",
}
#: the largest integer a setting may hold (the compiled search packs them as int64)
MAX_INT = 2**62


def _typed(key: str, kind: str, value: Any) -> Any:
    """``value`` checked against the field's annotation ``kind`` ('bool', 'int', 'float', with
    ' | None' when None is allowed); a string that reads as a number (YAML reads ``1e-1`` as a
    string) is taken as that number. Raises ValueError naming the key."""
    optional = kind.endswith("| None")
    base = kind.split("|")[0].strip()
    if value is None:
        if optional:
            return None
        raise ValueError(f"{key}: a value is needed ({base})")
    if base == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{key}: expected true or false, got {value!r}")
        return value
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"{key}: expected a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{key}: expected a finite number, got {value!r}")
    if base == "int":
        if value != int(value) or abs(value) > MAX_INT:
            raise ValueError(f"{key}: expected a whole number up to {MAX_INT}, got {value!r}")
        return int(value)
    return float(value)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings as a dict of ``SearchConfig`` fields (values read as YAML and checked
    against the field's type). Raises ValueError naming an item without '=', an unknown key, a
    key given twice, a key of :data:`FIXED`, or a value of the wrong type."""
    from takzero.search import SearchConfig

    kinds = {f.name: str(f.type) for f in fields(SearchConfig)}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{item!r}: expected KEY=VALUE")
        if key not in kinds:
            raise ValueError(f"{key!r} is not a search setting; the settings are {sorted(kinds)}")
        if key in FIXED:
            raise ValueError(f"{key!r} cannot be set per side: {FIXED[key]}")
        if key in out:
            raise ValueError(f"{key!r} is given twice")
        out[key] = _typed(key, kinds[key], yaml.safe_load(value))
    return out


def side_config(simulations: int, ply_limit: int, overrides: dict[str, Any]):
    """The evaluation copy of the players' default search with ``overrides``. Raises ValueError
    (``SearchConfig.validate``) for a value out of range, TypeError for one of the wrong type."""
    from takzero.players.network import DEFAULT_SELECT_Q_FRACTION
    from takzero.search import SearchConfig

    base = SearchConfig(simulations=simulations, max_plies=ply_limit, select_q_fraction=DEFAULT_SELECT_Q_FRACTION)
    config = replace(base, **overrides)
    return config.evaluation()


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def main(argv: list[str] | None = None) -> int:
    """Run the A/B match; returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", type=Path, help="exported model or checkpoint")
    p.add_argument("--a", nargs="*", default=[], metavar="KEY=VALUE", help="side A's search settings")
    p.add_argument("--b", nargs="*", default=[], metavar="KEY=VALUE", help="side B's search settings")
    p.add_argument("--simulations", type=int, default=200, help="simulations per move, both sides")
    p.add_argument("--pairs", type=int, default=25, help="openings, each played with both colours")
    p.add_argument("--seed", type=int, default=0, help="openings and search seed")
    p.add_argument("--ply-limit", type=int, default=150, help="draw after this many plies")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of the network")
    from takzero.players.network import PLAY_BACKENDS

    for side in ("a", "b"):
        p.add_argument(f"--{side}-backend", choices=PLAY_BACKENDS, default="auto",
                       help=f"side {side.upper()}'s network runtime")
    args = p.parse_args(argv)
    if not args.model.exists():
        p.error(f"model file not found: {args.model}")
    if not args.model.is_file():
        p.error(f"not a model file: {args.model}")
    if args.simulations < 1 or args.pairs < 1 or args.ply_limit < 1 or args.threads < 1:
        p.error("--simulations, --pairs, --ply-limit and --threads must be >= 1")
    if args.ply_limit < 3:
        p.error("--ply-limit must be >= 3 (the openings are 2 plies)")
    configs = []
    for flag, items in (("--a", args.a), ("--b", args.b)):
        try:
            over = parse_overrides(items)
            configs.append((over, side_config(args.simulations, args.ply_limit, over)))
        except (ValueError, TypeError) as e:
            p.error(f"{flag}: {e}")
    (a_over, a_cfg), (b_over, b_cfg) = configs

    import torch

    from takzero.game.position import Position
    from takzero.matches.games import NetSide, play_match
    from takzero.matches.openings import random_openings
    from takzero.nn.inference import Evaluator
    from takzero.players.network import play_evaluator

    torch.set_num_threads(args.threads)
    try:
        source = Evaluator.load(str(args.model))
        ev_a = play_evaluator(source, args.a_backend, args.threads)
        ev_b = play_evaluator(source, args.b_backend, args.threads)
    except Exception as e:  # noqa: BLE001 - torch/zip raise many types for a bad file
        p.error(f"cannot load model {args.model}: {e}")
    a = NetSide("A", ev_a, a_cfg, args.simulations)
    b = NetSide("B", ev_b, b_cfg, args.simulations)
    ev = ev_a
    start = Position.start(ev.size, half_komi=int(ev.metadata.get("half_komi", 0)))
    t0 = time.perf_counter()
    openings = random_openings(start, args.pairs, plies=2, seed=args.seed)
    try:
        match = play_match(a, b, start, openings, args.ply_limit, seed=args.seed)
    except (ValueError, MemoryError) as e:  # e.g. a node_budget below the board's moves, or too large
        p.exit(2, f"{p.prog}: error: the search cannot run with these settings: {e}\n")
    elo = match.elo()
    line = {
        "model": str(args.model), "a": a_over, "b": b_over, "a_backend": args.a_backend,
        "b_backend": args.b_backend, "simulations": args.simulations,
        "pairs": args.pairs, "seed": args.seed, "games": match.num_games, "wins": match.wins,
        "draws": match.draws, "losses": match.losses, "tally": match.tally(),
        "pentanomial": [int(x) for x in match.pentanomial()], "score": match.score,
        "elo": _finite(elo.elo), "elo_lower": _finite(elo.lower), "elo_upper": _finite(elo.upper),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
