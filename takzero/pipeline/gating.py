"""Gating in training: the promotion decision (:func:`gate`: a score threshold or an SPRT) and
the evaluator that plays each new generation against the incumbent and the fixed baselines
(:class:`GatingEvaluator`), with batched matches of ``takzero.matches.games``.

Games use paired openings (each opening once with each colour); evaluation games never enter the
replay buffer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from takzero.game.position import Position
from takzero.matches.games import NetSide, Side, play_games, play_match
from takzero.matches.openings import random_openings
from takzero.matches.results import MatchResult
from takzero.matches.stats import EloEstimate, SPRTResult
from takzero.matches.tactics_set import TACTICS_FILE, load_entries, network_moves, solve_rates
from takzero.nn.inference import Evaluator
from takzero.nn.model import ModelConfig, TakNet
from takzero.players.base import Player, PlayerFailed, close_player
from takzero.players.registry import check_spec, ladder_offset, spec_label
from takzero.protocols.tei.player import make_baseline

# ---------------------------------------------------------------------------------------------
# The decision
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateDecision:
    """``promote``: True when the candidate (player A) should replace the incumbent.
    ``decision``: 'accept' | 'reject' | 'continue' (SPRT undecided: play more games; ``promote``
    is False). ``score``: A's mean score; ``sprt``: the SPRT details (None for 'threshold')."""

    promote: bool
    decision: str
    method: str
    score: float
    elo: EloEstimate
    sprt: SPRTResult | None = None


def gate(
    match: MatchResult,
    method: str = "threshold",
    threshold: float = 0.55,
    elo0: float = 0.0,
    elo1: float = 35.0,
    alpha: float = 0.05,
    beta: float = 0.05,
) -> GateDecision:
    """Promotion decision for candidate A against incumbent B.

    ``method='threshold'``: promote when A's score >= ``threshold`` (AlphaGo Zero's gate is 0.55).
    ``method='sprt'``: :meth:`MatchResult.sprt` with (elo0, elo1, alpha, beta); default H1 of 35
    Elo is about a 0.55 score. Raises ValueError for no games, an unknown method, or a threshold
    outside [0, 1].
    """
    if match.num_games == 0:
        raise ValueError("no games to gate on")
    est = match.elo()
    if method == "threshold":
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        ok = match.score >= threshold
        return GateDecision(ok, "accept" if ok else "reject", method, match.score, est)
    if method == "sprt":
        res = match.sprt(elo0, elo1, alpha, beta)
        return GateDecision(res.decision == "accept", res.decision, method, match.score, est, res)
    raise ValueError(f"method must be 'threshold' or 'sprt', got '{method}'")


# ---------------------------------------------------------------------------------------------
# The evaluator
# ---------------------------------------------------------------------------------------------


def evaluator_from_weights(
    model_config: ModelConfig, state_dict: dict[str, torch.Tensor], device: str = "cpu"
) -> Evaluator:
    """An inference evaluator of ``model_config`` loaded with ``state_dict``."""
    model = TakNet(model_config)
    model.load_state_dict(state_dict)
    return Evaluator(model, device=device)


def match_record(kind: str, opponent: str, match: MatchResult, seconds: float) -> dict[str, Any]:
    """What the run prints and keeps of one evaluation match (plain types, for Ray): ``kind``
    ('gating' or 'baseline'), ``opponent`` (a baseline label or ``gen N``), wins/draws/losses,
    games, score, Elo with its 95% interval and model (``MatchResult.elo``, as in the
    TensorBoard scalars), ``elo_text`` (:meth:`MatchResult.describe_elo`: the interval, its model
    named) and ``seconds``. Raises ValueError for a match without games."""
    est = match.elo()
    return {
        "kind": kind,
        "opponent": opponent,
        "wins": match.wins,
        "draws": match.draws,
        "losses": match.losses,
        "games": match.num_games,
        "score": match.score,
        "elo": est.elo,
        "elo_lower": est.lower,
        "elo_upper": est.upper,
        "elo_model": est.model,
        "elo_text": match.describe_elo(),
        "seconds": seconds,
    }


def failed_record(opponent: str, error: str, seconds: float) -> dict[str, Any]:
    """The record of a baseline match that could not be played to its end (a ``tei:`` engine
    that did not start, refused the size, crashed, hung or played an illegal move):
    ``kind`` 'baseline', ``opponent``, ``error`` (one line), ``games`` 0 and ``seconds``; the run
    prints it (``progress.evaluation_line``) and lists it among the checks not run."""
    return {"kind": "baseline", "opponent": opponent, "error": " ".join(error.split()),
            "games": 0, "seconds": seconds}


def baseline_player(spec: str, uct_simulations: int, seed: int) -> Player:
    """The player of one ``evaluator.baselines`` entry (a player spec,
    ``takzero.players.registry``; a ``tei:`` engine is an
    :class:`~takzero.protocols.tei.player.EnginePlayer`, started at its first game: close it with
    ``close_player``). A ``uct`` without a count searches ``uct_simulations``
    (``evaluator.uct_simulations``) per move: the one place of that rule. Raises ValueError for
    a bad spec."""
    simulations = uct_simulations if check_spec(spec, engines=True) == "uct" else None
    return make_baseline(spec, seed=seed, simulations=simulations)


#: Node budget of the exhaustive check of a move in the tactics curve (a check that runs out
#: counts as unsolved; ``tactics_set.VERIFY_NODES``, the benchmark's, is 10 times more: a slow
#: check would hold up the run's evaluations).
TACTICS_VERIFY_NODES = 2_000_000


def tactics_entries(size: int) -> list[dict[str, Any]]:
    """The positions of the tactics curve for ``size``: the entries of the package's mined set
    (``takzero.matches.tactics_set.TACTICS_FILE``) of that board size, [] for a size it has
    none of."""
    return load_entries([TACTICS_FILE], size=size)


def tactics_plan(cfg: Any) -> tuple[int, str]:
    """(the tactics curve's rate, its start-up line) for the run's config: ``evaluator.tactics_every``
    and what it measures, or 0 and why it is off when the set has no positions of
    ``board.size`` (or ``evaluator.tactics_every`` is 0: line "")."""
    every = cfg.evaluator.tactics_every
    if every == 0:
        return 0, ""
    entries = tactics_entries(cfg.board.size)
    size = f"{cfg.board.size}x{cfg.board.size}"
    if not entries:
        return 0, (f"tactics curve: off (the tactics set {TACTICS_FILE.name} has no {size} positions; "
                   "it has 4x4 to 6x6)")
    kinds: dict[str, int] = {}
    for e in entries:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    counts = ", ".join(f"{k} {n}" for k, n in kinds.items())
    return every, (f"tactics curve: every {every} generation(s), {len(entries)} {size} positions "
                   f"({counts}), the network alone at {cfg.evaluation_simulations()} simulations")


#: Games a check has finished, by match (:func:`match_key`): ``{"games": the match's game
#: count, "done": {game index (str): [A's score, PTN]}}``, plain types (JSON, the run's
#: ``evaluation_games.json``). Game ``i`` plays opening ``i // 2``, A white when ``i`` is even.
KeptGames = dict[str, dict[str, Any]]

#: ``on_game(match key, game index, A's score, PTN)``: one game of a check finished.
GameCallback = Callable[[str, int, float, str], None]


def match_key(kind: str, opponent: str) -> str:
    """The key of one match of a check in :data:`KeptGames`: ``'gating vs gen 3'``,
    ``'baseline uct'`` (the incumbent is part of a gating match's key: games against another
    incumbent are not kept for it)."""
    return f"gating vs {opponent}" if kind == "gating" else f"baseline {opponent}"


def kept_count(kept: KeptGames | None) -> int:
    """How many games ``kept`` holds, over its matches."""
    return sum(len(m.get("done", {})) for m in (kept or {}).values())


def play_rest(
    key: str,
    side_a: Side,
    side_b: Side,
    start: Position,
    openings: list[Any],
    ply_limit: int | None,
    seed: int,
    kept: KeptGames | None = None,
    on_game: GameCallback | None = None,
) -> tuple[MatchResult, str]:
    """:func:`~takzero.matches.games.play_match` of A against B on ``openings`` (each twice,
    A white first), playing only the games that ``kept[key]`` does not hold already (a check
    cut by a stop and run again: its finished games count as they were, for a match of the same
    game count). ``on_game`` hears each game as it finishes. Returns A's result in game order
    (kept games without a record) and the PTN of every game, in game order."""
    n = 2 * len(openings)
    prior = (kept or {}).get(key) or {}
    done: dict[int, tuple[float, str]] = {}
    if prior.get("games") == n:
        for gi, (score, ptn) in prior.get("done", {}).items():
            if 0 <= int(gi) < n and float(score) in (0.0, 0.5, 1.0):
                done[int(gi)] = (float(score), str(ptn))
    a_white = [True, False] * len(openings)
    records: dict[int, Any] = {}
    if not done:  # the whole match: play_match's exact scheme
        def heard(so_far: MatchResult, record: Any) -> None:
            gi = 2 * so_far.opening_index[-1] + (0 if so_far.a_white[-1] else 1)
            if on_game is not None:
                on_game(key, gi, so_far.a_scores[-1], record.to_ptn())

        match = play_match(side_a, side_b, start, openings, ply_limit, seed, on_game=heard)
        return match, "\n".join(g.to_ptn() for g in match.games)
    todo = [gi for gi in range(n) if gi not in done]
    if todo:
        def finished(j: int, record: Any) -> None:
            gi = todo[j]
            records[gi] = record
            if on_game is not None:
                on_game(key, gi, record.score_for(0 if a_white[gi] else 1), record.to_ptn())

        played = play_games(side_a, side_b, start, [openings[gi // 2] for gi in todo], [a_white[gi] for gi in todo],
                            ply_limit, seeds=(seed, seed + 104729), sample_seed=seed + len(done),
                            on_game=finished)
        records.update(zip(todo, played, strict=True))
    match = MatchResult(side_a.name, side_b.name)
    texts = []
    for gi in range(n):
        if gi in done:
            match.add(None, a_white[gi], done[gi][0], gi // 2)
            texts.append(done[gi][1])
        else:
            rec = records[gi]
            match.add(rec, a_white[gi], rec.score_for(0 if a_white[gi] else 1), gi // 2)
            texts.append(rec.to_ptn())
    return match, "\n".join(texts)


class GatingEvaluator:
    """Plays each new generation against the incumbent (gating) and against fixed baselines.

    Args:
        cfg: the run's :class:`takzero.config.TrainConfig` (board, ``selfplay.ply_limit``,
            ``evaluator.*``; the network from ``cfg.model_config()``, the search from
            ``cfg.evaluation_search_config()`` and ``cfg.evaluation_simulations()``).
        baseline_specs: the player specs actually built for ``evaluator.baselines``, one per
            entry (default: those entries); the evaluator actor passes local copies of
            ``model:PATH`` files here. Labels always come from ``evaluator.baselines``.
        make_evaluator: ``make_evaluator(generation, weights) -> evaluator`` (the ``Evaluator``
            interface) for each network side; default :func:`evaluator_from_weights` (torch on
            the CPU). The evaluator actor passes one that searches through the inference server
            (``evaluator.inference``; ``inference_server.RemoteEvaluator`` with the weights
            pinned there by generation).
    """

    def __init__(self, cfg: Any, baseline_specs: list[str] | None = None,
                 make_evaluator: Callable[[int, dict[str, torch.Tensor]], Any] | None = None) -> None:
        self.cfg = cfg
        self.make_evaluator = make_evaluator
        self.baseline_specs = list(cfg.evaluator.baselines) if baseline_specs is None else list(baseline_specs)
        if len(self.baseline_specs) != len(cfg.evaluator.baselines):
            raise ValueError("baseline_specs must have one spec per evaluator.baselines entry")
        self.model_config = cfg.model_config()
        self.start = Position.start(
            cfg.board.size, komi=cfg.board.komi, flats=cfg.board.flats, caps=cfg.board.caps
        )
        self.search = cfg.evaluation_search_config()
        self.simulations = cfg.evaluation_simulations()
        self.rounds = 0
        #: the ladder's rungs: (generation, weights) of the candidates of the latest baseline
        #: checks, oldest first, as many as the deepest ``generation:-K`` baseline reaches
        self.ladder: list[tuple[int, dict[str, torch.Tensor]]] = []
        self.ladder_depth = max((ladder_offset(s) or 0 for s in cfg.evaluator.baselines), default=0)
        #: the tactics curve's positions (none when evaluator.tactics_every is 0)
        self.tactics = tactics_entries(cfg.board.size) if cfg.evaluator.tactics_every > 0 else []

    def _evaluator(self, generation: int, weights: dict[str, torch.Tensor]) -> Any:
        """The network of ``generation``'s ``weights`` (see ``make_evaluator``)."""
        if self.make_evaluator is not None:
            return self.make_evaluator(generation, weights)
        return evaluator_from_weights(self.model_config, weights)

    def _side(self, name: str, generation: int, weights: dict[str, torch.Tensor]) -> NetSide:
        return NetSide(
            name=name,
            evaluator=self._evaluator(generation, weights),
            config=self.search,
            simulations=self.simulations,
            sampling_plies=self.cfg.evaluator.sampling_plies,
        )

    def evaluate(
        self,
        candidate: tuple[int, dict[str, torch.Tensor]],
        incumbent: tuple[int, dict[str, torch.Tensor]],
        play_baselines: bool,
        seed: int | None = None,
        tactics: bool = False,
        baseline_games: int = 0,
        kept: KeptGames | None = None,
        on_game: GameCallback | None = None,
    ) -> dict[str, Any]:
        """Gating match of ``candidate`` (generation, weights) against ``incumbent``, then (if
        ``play_baselines``) the baselines (``baseline_games`` games each, an even number; 0:
        ``evaluator.baseline_games``; the schedule's ``Check.baseline_games``), then (if
        ``tactics`` and the set has positions of the board size) the tactics curve's point
        (:meth:`tactics_point`: 'tactics' and the
        ``tactics/<kind>`` scalars). Returns a dict with 'decision' ('promote' | 'reject' |
        None when gating is off), 'scalars' for TensorBoard ('elo/vs_<label>' and
        'score/vs_<label>' per baseline, the label from
        ``takzero.players.registry.spec_label``), 'ptn' (file name -> PTN text), 'summary',
        'candidate_generation', 'candidate_weights' and 'matches' (one :func:`match_record`
        per match played, gating first, then the baselines in ``evaluator.baselines`` order; a
        baseline whose ``tei:`` engine failed has a :func:`failed_record` and no scalars, and
        the other baselines are still played; a ladder baseline ``generation:-K`` plays the
        candidate of the K-th baseline check before (:meth:`ladder_rung`; its record has
        'opponent_generation'), and is left out while there is none). ``seed`` draws the openings and the
        sampled plies (default: from ``seed`` and the count of evaluations of this object; a
        training run passes one per generation, kept with the check, so a check run again after
        a stop plays the same openings). ``kept``: the games an earlier, cut run of the same check
        finished (:data:`KeptGames`): each match plays only the rest (:func:`play_rest`);
        ``on_game`` hears every game as it finishes (the run keeps them)."""
        e = self.cfg.evaluator
        self.rounds += 1
        gen, weights = candidate
        inc_gen, inc_weights = incumbent
        cand_side = self._side(f"takzero-gen{gen}", gen, weights)
        scalars: dict[str, float] = {}
        ptn: dict[str, str] = {}
        out: dict[str, Any] = {
            "candidate_generation": gen,
            "candidate_weights": weights,
            "decision": None,
            "scalars": scalars,
            "ptn": ptn,
            "summary": "",
            "matches": [],
        }
        if seed is None:
            seed = self.cfg.seed * 1000 + self.rounds
        ply_limit = self.cfg.selfplay.ply_limit
        if e.gating != "off":
            t0 = time.perf_counter()
            openings = random_openings(self.start, e.games // 2, plies=2, seed=seed)
            inc_side = self._side(f"takzero-gen{inc_gen}", inc_gen, inc_weights)
            key = match_key("gating", f"gen {inc_gen}")
            match, text = play_rest(key, cand_side, inc_side, self.start, openings, ply_limit, seed, kept, on_game)
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
            rule = f"{e.gating} {e.threshold:g}" if e.gating == "threshold" else e.gating
            out["summary"] = (
                f"score {match.score:.3f} vs gen {inc_gen} over {match.num_games} games, "
                f"{rule}: {decision.decision}"
            )
            scalars["gating/score_vs_incumbent"] = match.score
            scalars["gating/promoted"] = float(decision.promote)
            scalars["gating/seconds"] = time.perf_counter() - t0
            out["matches"].append(match_record("gating", f"gen {inc_gen}", match, scalars["gating/seconds"]))
            ptn[f"gating_gen{gen:05d}_vs_gen{inc_gen:05d}.ptn"] = text
        if play_baselines:
            for spec, built in zip(e.baselines, self.baseline_specs, strict=True):
                label = spec_label(spec)
                t0 = time.perf_counter()
                pairs = (baseline_games or e.baseline_games) // 2
                openings = random_openings(self.start, pairs, plies=2, seed=seed + 1)
                rung = self.ladder_rung(spec, gen)
                if rung is not None:  # generation:-K: the candidate of K checks back
                    if rung is False:
                        continue  # fewer than K checks yet (in this evaluator's life): no match
                    opp_gen, opp_weights = rung  # type: ignore[misc]
                    opp_side = self._side(f"takzero-gen{opp_gen}", opp_gen, opp_weights)
                    match, text = play_rest(match_key("baseline", f"{label} (gen {opp_gen})"), cand_side, opp_side,
                                            self.start, openings, ply_limit, seed, kept, on_game)
                    est = match.elo()
                    scalars[f"elo/vs_{label}"] = float(np.clip(est.elo, -1000, 1000))
                    scalars[f"score/vs_{label}"] = match.score
                    record = match_record("baseline", label, match, time.perf_counter() - t0)
                    out["matches"].append({**record, "opponent_generation": opp_gen})
                    ptn[f"baseline_gen{gen:05d}_vs_{label}.ptn"] = text
                    continue
                player = baseline_player(built, e.uct_simulations, seed)
                try:
                    match, text = play_rest(match_key("baseline", label), cand_side, player, self.start, openings,
                                            ply_limit, seed, kept, on_game)
                except PlayerFailed as err:  # a tei: engine that failed: recorded as failed
                    out["matches"].append(failed_record(label, str(err), time.perf_counter() - t0))
                    continue
                finally:
                    close_player(player)  # a tei: engine's process, always
                est = match.elo()
                scalars[f"elo/vs_{label}"] = float(np.clip(est.elo, -1000, 1000))
                scalars[f"score/vs_{label}"] = match.score
                out["matches"].append(match_record("baseline", label, match, time.perf_counter() - t0))
                ptn[f"baseline_gen{gen:05d}_vs_{label}.ptn"] = text
        if play_baselines and self.ladder_depth > 0 and (not self.ladder or self.ladder[-1][0] < gen):
            self.ladder = [*self.ladder, (gen, weights)][-self.ladder_depth:]
        if tactics and self.tactics:
            out["tactics"] = self.tactics_point(weights, seed, generation=gen)
            scalars.update({f"tactics/{k}": v for k, v in out["tactics"]["rates"].items()})
        return out

    def ladder_rung(self, spec: str, generation: int) -> tuple[int, dict[str, torch.Tensor]] | bool | None:
        """The opponent of a ladder baseline ``generation:-K`` for a check of ``generation``:
        (its generation, weights), the candidate of the K-th baseline check before this one
        (checks of ``generation`` or later excluded: a check played again); False when this
        evaluator has not kept K such checks yet (a run's first K checks, or the first after a
        resume or a restarted evaluator: the ladder lives in memory); None for another spec."""
        k = ladder_offset(spec)
        if k is None:
            return None
        rungs = [r for r in self.ladder if r[0] < generation]
        return rungs[-k] if len(rungs) >= k else False

    def tactics_point(self, weights: dict[str, torch.Tensor], seed: int = 0, generation: int = -1) -> dict[str, Any]:
        """The network ``weights`` alone (tinuë and flat-endgame checks off: no prover, no exact
        search) at the evaluation simulations on the tactics positions of the run's size, all searched at once
        (``tactics_set.network_moves``), judged by ``tactics_set.solves`` with
        :data:`TACTICS_VERIFY_NODES`. The positions keep the set's own komi (0) and reserves
        whatever the run's: the set's answers were mined for them. Returns 'rates', 'solved',
        'positions' (by kind, and 'all'; rates in [0, 1]), 'unverified' (ids) and 'seconds'.
        ``generation``: the weights' generation (the key of a network pinned on the server)."""
        t0 = time.perf_counter()
        side = NetSide(
            name="tactics",
            evaluator=self._evaluator(generation, weights),
            # no prover, no flat-endgame search, no ply limit
            config=replace(self.search, tinue_nodes=0, flat_endgame_nodes=0, max_plies=0),
            simulations=self.simulations,
        )
        moves = network_moves(side, [e["position"] for e in self.tactics], seed)
        score = solve_rates(self.tactics, moves, max_nodes=TACTICS_VERIFY_NODES)
        return {"rates": score.rates, "solved": score.solved, "positions": score.positions,
                "unverified": score.unverified, "seconds": time.perf_counter() - t0}


__all__ = [
    "GameCallback",
    "GateDecision",
    "KeptGames",
    "TACTICS_VERIFY_NODES",
    "GatingEvaluator",
    "baseline_player",
    "evaluator_from_weights",
    "failed_record",
    "gate",
    "kept_count",
    "match_key",
    "match_record",
    "play_rest",
    "tactics_entries",
    "tactics_plan",
]
