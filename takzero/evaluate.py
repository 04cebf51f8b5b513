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

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from takzero.arena import GameRecord, MatchResult, gate, random_openings
from takzero.game.position import Game, Position
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
        from takzero.train import model_config_of  # local: train imports this module's users

        self.cfg = cfg
        self.model_config = model_config_of(cfg)
        self.start = Position.start(
            cfg.board.size, komi=cfg.board.komi, flats=cfg.board.flats, caps=cfg.board.caps
        )
        base = SearchConfig.from_dict(dict(cfg.mcts))
        sims = cfg.evaluator.simulations or base.simulations
        self.search = SearchConfig.from_dict(
            {**base.evaluation().to_dict(), "max_plies": cfg.selfplay.ply_limit, "simulations": sims}
        )
        self.simulations = sims
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
                f"{e.gating}: {decision.decision}"
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
