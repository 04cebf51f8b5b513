"""Evaluation of network generations: batched matches (many games at once, one network call per
search step for every game where that network is to move), gating against the incumbent, and
matches against the fixed baselines for an Elo curve on a fixed scale.

A side of a match is either a network (:class:`NetSide`: an inference evaluator plus a search
config, searched with :class:`takzero.search.BatchedMCTS` over all games of the match at once) or
any :class:`takzero.players.Player` (asked one game at a time). Games use paired openings (each
opening once with each colour) and the adjudications of :class:`takzero.game.Game` (ply limit and
threefold repetition are draws). Evaluation games never enter the replay buffer.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from takzero.arena import GameRecord, MatchResult, elo_to_score, gate, random_openings
from takzero.game.position import Game, Position, komi_to_half_komi
from takzero.nn.inference import Evaluator
from takzero.nn.model import ModelConfig, model_from_config
from takzero.players import Player, make_player
from takzero.search import BatchedMCTS, SearchConfig

log = logging.getLogger(__name__)


@dataclass
class NetSide:
    """A network side of a batched match: ``evaluator`` with ``simulations`` per move under
    ``config`` (noise off). The first ``sampling_plies`` plies of a game are sampled from the visit
    counts with temperature 1 so that games differ; later moves take the most visited child."""

    name: str
    evaluator: Any
    config: SearchConfig
    simulations: int
    sampling_plies: int = 0


Side = NetSide | Player


def play_match(
    side_a: Side,
    side_b: Side,
    start: Position,
    openings: list[tuple[int, ...]],
    ply_limit: int,
    seed: int = 0,
    threefold: bool = True,
) -> MatchResult:
    """Play every opening twice (A white, then B white) with all games at once.

    Network sides search all their games of a step in one batched search; players are asked one
    game at a time. Returns A's :class:`MatchResult` with the :class:`GameRecord` s.
    """
    n_games = 2 * len(openings)
    size = start.size
    name_a, name_b = side_a.name, side_b.name
    games: list[Game] = []
    a_white: list[bool] = []
    for opening in openings:
        for swap in (False, True):
            g = Game(start, ply_limit=ply_limit, threefold=threefold)
            for code in opening:
                g.play(code)
            games.append(g)
            a_white.append(not swap)
    rng = np.random.default_rng(seed)
    trees: dict[int, BatchedMCTS] = {}
    sides = (side_a, side_b)
    for k, side in enumerate(sides):
        if isinstance(side, NetSide):
            trees[k] = BatchedMCTS(n_games, size, side.config, seed=seed + 7919 * k)
            for gi, g in enumerate(games):
                trees[k].reset(gi, g.position.state)
        else:
            side.reset(size, start.half_komi, seed=seed + 104729 * k)
    seconds = np.zeros((n_games, 2))
    infos: list[list] = [[] for _ in range(n_games)]
    while True:
        open_games = [gi for gi, g in enumerate(games) if not g.result.over]
        if not open_games:
            break
        # Who is to move in each open game: side index 0 (A) or 1 (B).
        to_move = {
            gi: 0 if (games[gi].position.side_to_move == 0) == a_white[gi] else 1 for gi in open_games
        }
        chosen: dict[int, int] = {}
        for k, side in enumerate(sides):
            mine = [gi for gi in open_games if to_move[gi] == k]
            if not mine:
                continue
            t0 = time.perf_counter()
            if isinstance(side, NetSide):
                tree = trees[k]
                tree.run(side.evaluator, games=mine, add_noise=False, simulations=side.simulations)
                for gi in mine:
                    ply = games[gi].position.ply - len(openings[gi // 2])
                    temp = 1.0 if ply < side.sampling_plies else 0.0
                    chosen[gi] = tree.choose_move(gi, temperature=temp, rng=rng)
            else:
                for gi in mine:
                    chosen[gi] = int(side.choose(games[gi].position).code)
            dt = (time.perf_counter() - t0) / len(mine)
            for gi in mine:
                seconds[gi, k] += dt
        for gi, code in chosen.items():
            for k, side in enumerate(sides):
                if k in trees:
                    trees[k].advance(gi, code)
                else:
                    side.observe(games[gi].position, code)
            games[gi].play(code)
            infos[gi].append(None)
    result = MatchResult(name_a, name_b)
    for gi, g in enumerate(games):
        res = g.result
        white_is_a = a_white[gi]
        winner = res.winner
        score_a = 0.5 if winner is None else (1.0 if (winner == 0) == white_is_a else 0.0)
        rec = GameRecord(
            white=name_a if white_is_a else name_b,
            black=name_b if white_is_a else name_a,
            start=start,
            moves=list(g.moves),
            ptn_moves=g.ptn_moves(),
            opening_plies=len(openings[gi // 2]),
            result=str(res),
            reason=res.reason,
            winner=winner,
            seconds=(
                float(seconds[gi, 0 if white_is_a else 1]),
                float(seconds[gi, 1 if white_is_a else 0]),
            ),
        )
        result.add(rec, white_is_a, score_a, gi // 2)
    return result


def evaluator_from_weights(
    model_config: ModelConfig, state_dict: dict[str, torch.Tensor], device: str = "cpu"
) -> Evaluator:
    """An inference evaluator of ``model_config`` loaded with ``state_dict``."""
    model = model_from_config(model_config)
    model.load_state_dict(state_dict)
    return Evaluator(model, device=device)


class GatingEvaluator:
    """Plays each new generation against the incumbent (gating) and against fixed baselines.

    Args:
        cfg: the run's :class:`takzero.config.TrainConfig`.
    """

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self.model_config = cfg.model_config()
        self.start = Position.start(
            cfg.board.size, komi=cfg.board.komi, flats=cfg.board.flats, caps=cfg.board.caps
        )
        self.search = cfg.evaluation_search_config()
        self.simulations = cfg.evaluation_simulations()
        self.rounds = 0

    def _side(self, name: str, weights: dict[str, torch.Tensor]) -> NetSide:
        return NetSide(
            name=name,
            evaluator=evaluator_from_weights(self.model_config, weights),
            config=self.search,
            simulations=self.simulations,
            sampling_plies=self.cfg.evaluator.sampling_plies,
        )

    def evaluate(
        self,
        candidate: tuple[int, dict[str, torch.Tensor]],
        incumbent: tuple[int, dict[str, torch.Tensor]],
        play_baselines: bool,
    ) -> dict[str, Any]:
        """Gating match of ``candidate`` (generation, weights) against ``incumbent``, then (if
        ``play_baselines``) the baselines. Returns a dict with 'decision' ('promote' | 'reject' |
        None when gating is off), 'scalars' for TensorBoard, 'ptn' (file name -> PTN text),
        'summary', 'candidate_generation' and 'candidate_weights'."""
        e = self.cfg.evaluator
        self.rounds += 1
        gen, weights = candidate
        inc_gen, inc_weights = incumbent
        cand_side = self._side(f"takzero-gen{gen}", weights)
        scalars: dict[str, float] = {}
        ptn: dict[str, str] = {}
        out: dict[str, Any] = {
            "candidate_generation": gen,
            "candidate_weights": weights,
            "decision": None,
            "scalars": scalars,
            "ptn": ptn,
            "summary": "",
        }
        seed = self.cfg.seed * 1000 + self.rounds
        if e.gating != "off":
            t0 = time.perf_counter()
            openings = random_openings(self.start, e.games // 2, plies=2, seed=seed)
            inc_side = self._side(f"takzero-gen{inc_gen}", inc_weights)
            match = play_match(cand_side, inc_side, self.start, openings, self.cfg.selfplay.ply_limit, seed)
            decision = gate(
                match,
                method=e.gating,
                threshold=e.threshold,
                elo0=e.sprt_elo0,
                elo1=e.sprt_elo1,
                alpha=e.sprt_alpha,
                beta=e.sprt_beta,
            )
            out["decision"] = "promote" if decision.promote else "reject"
            out["summary"] = (
                f"score {match.score:.3f} vs gen {inc_gen} over {match.num_games} games, "
                f"{e.gating}{f' {e.threshold:g}' if e.gating == 'threshold' else ''}: {decision.decision}"
            )
            scalars["gating/score_vs_incumbent"] = match.score
            scalars["gating/promoted"] = float(decision.promote)
            scalars["gating/seconds"] = time.perf_counter() - t0
            ptn[f"gating_gen{gen:05d}_vs_gen{inc_gen:05d}.ptn"] = "\n".join(
                g.to_ptn() for g in match.games
            )
        if play_baselines:
            for name in e.baselines:
                spec = f"uct:{e.uct_simulations}" if name == "uct" else name
                player = make_player(spec, seed=seed)
                openings = random_openings(self.start, e.baseline_games // 2, plies=2, seed=seed + 1)
                match = play_match(cand_side, player, self.start, openings, self.cfg.selfplay.ply_limit, seed)
                est = match.elo()
                scalars[f"elo/vs_{name}"] = float(np.clip(est.elo, -1000, 1000))
                scalars[f"score/vs_{name}"] = match.score
                ptn[f"baseline_gen{gen:05d}_vs_{name}.ptn"] = "\n".join(g.to_ptn() for g in match.games)
        return out


# ---------------------------------------------------------------------------------------------
# Command line: a model against the baselines
# ---------------------------------------------------------------------------------------------


#: Upper bounds of the evaluation CLI's numbers (beyond them a run cannot finish sensibly).
MAX_PAIRS = 10_000
MAX_SIMULATIONS = 1_000_000
MAX_PLY_LIMIT = 10_000
MAX_THREADS = 1024


def evaluate_model(
    model: str,
    baselines: list[str],
    pairs: int,
    simulations: int,
    ply_limit: int,
    seed: int = 0,
    komi: float | None = None,
    opening_plies: int = 2,
    device: str = "cpu",
    ptn_dir: str | None = None,
    say: Any = print,
) -> list[dict[str, Any]]:
    """Play ``model`` (an exported model or a checkpoint) with ``simulations`` PUCT simulations per
    move (no noise, most visited move) against each baseline spec (``random``, ``greedy``,
    ``uct:<simulations>``) on ``pairs`` random openings of ``opening_plies`` plies, each played once
    with each colour (2 * pairs games per baseline). Komi: ``komi`` points, or the model's own
    (``half_komi`` in its metadata), else 0. Returns one summary dict per baseline (see
    :meth:`takzero.arena.MatchResult.summary`, plus 'seconds', the score's 95% interval from the
    pentanomial Elo interval ('score_lower'/'score_upper', a point when every game was won) and
    the Wilson interval ('score_wilson_lower'/'score_wilson_upper')); each is also printed with
    ``say`` as a JSON line (infinite Elo as null). Writes the games as PTN into
    ``ptn_dir`` when given. Raises ValueError for a bad spec, pairs < 1, simulations < 1, a komi
    that is not a multiple of 0.5, or a file that is not a model."""
    if not 1 <= pairs <= MAX_PAIRS:
        raise ValueError(f"pairs must be in 1..{MAX_PAIRS}, got {pairs}")
    if not 1 <= simulations <= MAX_SIMULATIONS:
        raise ValueError(f"simulations must be in 1..{MAX_SIMULATIONS}, got {simulations}")
    if not 1 <= ply_limit <= MAX_PLY_LIMIT:
        raise ValueError(f"ply limit must be in 1..{MAX_PLY_LIMIT}, got {ply_limit}")
    if len(set(baselines)) != len(baselines):
        raise ValueError(f"a baseline is given twice: {' '.join(baselines)}")
    players = [make_player(spec, seed=seed) for spec in baselines]  # bad specs fail before loading
    given_half_komi = None if komi is None else komi_to_half_komi(komi)
    try:
        net = Evaluator.load(model, device=device)
    except Exception as e:  # noqa: BLE001 - torch/zip/pickle raise many types for a bad file
        raise ValueError(f"cannot load model {model}: {e}") from None
    size = net.config.size
    half_komi = int(net.metadata.get("half_komi", 0)) if given_half_komi is None else given_half_komi
    start = Position.start(size, half_komi=half_komi)
    search = SearchConfig(simulations=simulations, max_plies=ply_limit).evaluation()
    side = NetSide(name=f"takzero:{Path(model).name}", evaluator=net, config=search, simulations=simulations)
    openings = random_openings(start, pairs, plies=opening_plies, seed=seed)
    ptn_files: list[Path] = []
    if ptn_dir is not None:  # created (empty) before any game: a bad folder or file fails at once
        folder = Path(ptn_dir)
        folder.mkdir(parents=True, exist_ok=True)
        for spec in baselines:
            ptn_files.append(folder / f"vs_{spec.strip().replace(':', '')}.ptn")
            ptn_files[-1].write_text("")
    out: list[dict[str, Any]] = []
    for k, (spec, player) in enumerate(zip(baselines, players, strict=True)):
        t0 = time.perf_counter()
        match = play_match(side, player, start, openings, ply_limit, seed=seed)
        summary: dict[str, Any] = {"baseline": spec, **match.summary()}
        summary["score_lower"], summary["score_upper"] = _score_interval(match)
        summary["score_wilson_lower"], summary["score_wilson_upper"] = wilson_interval(
            match.score, match.num_games
        )
        summary["seconds"] = round(time.perf_counter() - t0, 1)
        summary.update(size=size, half_komi=half_komi, simulations=simulations, pairs=pairs, seed=seed)
        out.append(summary)
        say(json.dumps(_finite_or_none(summary)))
        if ptn_files:
            ptn_files[k].write_text("\n".join(g.to_ptn() for g in match.games))
    return out


def wilson_interval(score: float, games: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval (Wilson 1927) of a mean score over ``games`` games (draws count
    half, games taken as independent), 95% by default. Unlike the normal interval it does not
    collapse to a point at a score of 0 or 1 (200 wins in 200 games: [0.981, 1]). Raises
    ValueError for games < 1 or a score outside [0, 1]."""
    if games < 1 or not 0.0 <= score <= 1.0:
        raise ValueError(f"need games >= 1 and 0 <= score <= 1, got {games} games, score {score}")
    z2 = z * z / games
    centre = (score + z2 / 2) / (1 + z2)
    half = z * math.sqrt(score * (1 - score) / games + z2 / (4 * games)) / (1 + z2)
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


def _finite_or_none(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with infinite or NaN floats as None, so that the JSON line is strict JSON."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def _score_interval(match: MatchResult) -> tuple[float, float]:
    """The 95% interval of A's score (the Elo interval mapped back to a score)."""
    est = match.elo()
    return round(elo_to_score(est.lower), 4), round(elo_to_score(est.upper), 4)


def main(argv: list[str] | None = None) -> int:
    """``python -m takzero.evaluate MODEL``: the model against the baselines, JSON line each."""
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m takzero.evaluate",
        description="Play a model against the baselines on paired openings; one JSON line each.",
    )
    p.add_argument("model", help="exported model (TorchScript/ONNX) or checkpoint (.pt)")
    p.add_argument(
        "--baselines", nargs="+", default=["random", "greedy", "uct:1000"],
        help="baseline specs: random, greedy, uct:<simulations> (default: random greedy uct:1000)",
    )
    p.add_argument("--pairs", type=int, default=50, help="openings, each played with both colours")
    p.add_argument("--simulations", type=int, default=200, help="network simulations per move")
    p.add_argument("--ply-limit", type=int, default=150, help="draw after this many plies")
    p.add_argument("--komi", type=float, help="komi in points (default: the model's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--ptn-dir", help="write the games as PTN files into this folder")
    args = p.parse_args(argv)
    if not 0 <= args.threads <= MAX_THREADS:
        p.error(f"--threads must be in 0..{MAX_THREADS}, got {args.threads}")
    if not Path(args.model).exists():
        p.error(f"model file not found: {args.model}")
    if not Path(args.model).is_file():
        p.error(f"not a model file: {args.model}")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        evaluate_model(
            args.model, args.baselines, args.pairs, args.simulations, args.ply_limit,
            seed=args.seed, komi=args.komi, ptn_dir=args.ptn_dir,
        )
    except (OSError, ValueError) as e:
        p.error(str(e))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
