"""Matches between players: single games, paired-opening matches, Elo and gating (threshold/SPRT).

Games are played with :class:`takzero.game.Game`, so the optional adjudications are draws: a ply
limit (``ply_limit`` plies in the game, opening plies included) and, by default, threefold
repetition (Tiltak's rule: a position seen three times since the last placement).

Matches use paired openings: each opening (a short move sequence from the start position, random
or given) is played twice, once with each player as white, so first-move advantage and opening
luck cancel within a pair.

Statistics (all scores are the first player's, draws count half):

* Elo from a score: the logistic model, ``elo = -400 * log10(1 / score - 1)`` (score 0.75 ->
  190.85 Elo).
* Confidence interval: normal approximation of the mean score, ``score +- z * se``, mapped to Elo
  through the same formula. ``se`` comes from the trinomial (win/draw/loss per game) variance, or
  for paired games from the pentanomial variance (the five outcomes of a game pair, scores 0, 1/4,
  1/2, 3/4, 1 per game of the pair), which accounts for the correlation inside a pair (the
  fishtest convention). :meth:`MatchResult.elo` uses the pentanomial when every opening was played
  with both colours, otherwise the trinomial, and says which in ``EloEstimate.model``.
* SPRT: Wald's sequential probability ratio test (Wald 1945) of H0: elo = elo0 against H1: elo =
  elo1 (logistic Elo), with the generalized log-likelihood ratio (GSPRT) computed as fishtest does
  (``LLRcalc.LLR_logistic`` in official-stockfish/fishtest, after M. Van den Bergh, "A practical
  introduction to the GSPRT", hardy.uhasselt.be/Fishtest/GSPRT_approximation.pdf): the maximum-
  likelihood outcome distributions with mean score s0 and s1 are found from the empirical one
  (empty outcome classes regularised to 1e-3 games), and ``LLR = N * sum_i p_i log(p1_i / p0_i)``.
  Bounds: accept H1 when ``LLR >= log((1 - beta) / alpha)``, accept H0 when
  ``LLR <= log(beta / (1 - alpha))``, continue otherwise. :func:`llr_normal` gives the simpler
  normal approximation ``N (s1 - s0)(2 s - s0 - s1) / (2 var)`` (fishtest's ``LLR_alt2``).

PTN: :meth:`GameRecord.to_ptn` writes the game with the shared writer of ``takzero.game.ptn``
(tags Size, Komi, Player1, Player2, Result, and Flats/Caps/TPS when the start needs them).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from takzero.game.position import Game, Position
from takzero.game.ptn import PTNGame, write_ptn
from takzero.players import Player, PlayerMove, as_player_move

# ---------------------------------------------------------------------------------------------
# Games
# ---------------------------------------------------------------------------------------------


@dataclass
class GameRecord:
    """One finished game.

    ``moves``: all move codes from ``start`` (opening plies first); ``ptn_moves``: the same in PTN;
    ``opening_plies``: how many of them were forced by the opening. ``result``: PTN result string
    (``R-0``, ``0-R``, ``F-0``, ``0-F``, ``1/2-1/2``); ``reason``: 'road', 'flat', 'draw' (flat
    tie), 'ply limit' or 'repetition'; ``winner``: 0 white, 1 black, None for a draw.
    ``infos``: each player's :class:`PlayerMove` per ply (None for opening plies);
    ``seconds``: (white, black) wall-clock seconds spent in ``choose``.
    """

    white: str
    black: str
    start: Position
    moves: list[int]
    ptn_moves: list[str]
    opening_plies: int
    result: str
    reason: str
    winner: int | None
    infos: list[PlayerMove | None] = field(default_factory=list)
    seconds: tuple[float, float] = (0.0, 0.0)

    @property
    def plies(self) -> int:
        """Plies played in the game, opening plies included."""
        return len(self.moves)

    @property
    def size(self) -> int:
        return self.start.size

    @property
    def half_komi(self) -> int:
        return self.start.half_komi

    def score_for(self, colour: int) -> float:
        """1 for a win of ``colour`` (0 white, 1 black), 0.5 for a draw, 0 for a loss."""
        if self.winner is None:
            return 0.5
        return 1.0 if self.winner == colour else 0.0

    def to_ptn(self, extra_tags: dict[str, str] | None = None) -> str:
        """The game as PTN text (see :func:`game_to_ptn`)."""
        return game_to_ptn(self, extra_tags)


def game_to_ptn(record: GameRecord, extra_tags: dict[str, str] | None = None) -> str:
    """PTN text of a game record through the shared writer (``takzero.game.ptn``): tags Size,
    Komi (Flats/Caps/TPS when the start needs them), Player1, Player2, ``extra_tags``, Result; an
    adjudicated draw gets a final comment naming the adjudication. Raises ValueError if
    ``extra_tags`` sets a setup tag or Result, or the start cannot be described by PTN tags, and
    ``takzero.game.IllegalMoveError`` if the record's moves are not legal from its start."""
    game = Game(record.start)
    for code in record.moves:
        game.play(code)
    tags = {"Player1": record.white, "Player2": record.black, **(extra_tags or {})}
    comments = {}
    if record.reason in ("ply limit", "repetition"):
        comments[len(record.moves)] = [f"adjudicated draw: {record.reason}"]
    return write_ptn(PTNGame.from_game(game, tags=tags, result=record.result, comments=comments))


def _distinct(white: Player, black: Player) -> list[Player]:
    return [white] if white is black else [white, black]


def _seed_for(seed: int | None, *keys: int) -> int | None:
    if seed is None:
        return None
    return int(np.random.SeedSequence([seed, *keys]).generate_state(1)[0])


def play_game(
    white: Player,
    black: Player,
    start: Position,
    ply_limit: int | None,
    threefold: bool = True,
    opening_moves: Sequence[int | str] = (),
    seed: int | None = None,
) -> GameRecord:
    """Play one game from ``start``: ``opening_moves`` (codes or PTN) are played first, then
    ``white`` and ``black`` choose in turn until the rules end the game or an adjudication draws it
    (``ply_limit`` plies in the game, None for no limit; threefold repetition if ``threefold``).

    Both players get ``reset(size, half_komi, seed)`` first (per-colour seeds derived from
    ``seed``; None leaves their random streams running) and ``observe`` after every ply. A player
    may answer a bare move code instead of a :class:`PlayerMove`.

    Raises ValueError if ``start`` is already over or the opening ends the game, and
    ``takzero.game.IllegalMoveError`` (a ValueError) if a player or the opening gives an illegal
    move.
    """
    if start.is_over:
        raise ValueError(f"the start position is already over ({start.result})")
    game = Game(start, ply_limit=ply_limit, threefold=threefold)
    size, half_komi = start.size, start.half_komi
    if white is black:
        white.reset(size, half_komi, _seed_for(seed, 0))
    else:
        white.reset(size, half_komi, _seed_for(seed, 0))
        black.reset(size, half_komi, _seed_for(seed, 1))
    players = _distinct(white, black)
    ptn_moves: list[str] = []
    infos: list[PlayerMove | None] = []
    seconds = [0.0, 0.0]

    def _play(code: int) -> None:
        before = game.position.copy()
        ptn_moves.append(before.ptn(code))
        game.play(code)
        for p in players:
            observe = getattr(p, "observe", None)
            if observe is not None:
                observe(before, code)

    for mv in opening_moves:
        if game.result.over:
            raise ValueError("the opening ends the game before its last move")
        _play(game.position.check_move(mv))
        infos.append(None)
    if game.position.is_over:
        raise ValueError("the opening ends the game")
    while not game.result.over:
        side = game.position.side_to_move
        player = white if side == 0 else black
        t0 = time.perf_counter()
        answer = as_player_move(player.choose(game.position.copy()))
        seconds[side] += time.perf_counter() - t0
        _play(answer.code)
        infos.append(answer)
    result = game.result
    return GameRecord(
        white=white.name,
        black=black.name,
        start=start.copy(),
        moves=list(game.moves),
        ptn_moves=ptn_moves,
        opening_plies=len(opening_moves),
        result=str(result),
        reason=result.reason,
        winner=result.winner,
        infos=infos,
        seconds=(seconds[0], seconds[1]),
    )


# ---------------------------------------------------------------------------------------------
# Openings
# ---------------------------------------------------------------------------------------------


def random_openings(
    start: Position, count: int, plies: int = 2, seed: int = 0, max_tries: int = 50
) -> list[tuple[int, ...]]:
    """``count`` random openings of ``plies`` uniformly random legal moves from ``start``, distinct
    while possible (after ``max_tries * count`` draws duplicates are allowed), none ending the game.
    Deterministic for a seed. Raises ValueError for count < 0, plies < 0, or a finished start."""
    if count < 0 or plies < 0:
        raise ValueError(f"count and plies must be >= 0, got count={count} plies={plies}")
    if start.is_over:
        raise ValueError(f"the start position is already over ({start.result})")
    rng = np.random.default_rng(seed)
    out: list[tuple[int, ...]] = []
    seen: set[tuple[int, ...]] = set()
    tries = 0
    while len(out) < count:
        tries += 1
        pos = start.copy()
        seq: list[int] = []
        for _ in range(plies):
            codes = pos.legal_move_codes()
            if len(codes) == 0:
                break
            code = int(codes[int(rng.integers(len(codes)))])
            seq.append(code)
            pos.make(code)
        if pos.is_over or len(seq) < plies:
            if tries > max_tries * max(count, 1):
                raise ValueError(f"could not find {count} openings of {plies} plies that go on")
            continue
        key = tuple(seq)
        if key in seen and tries <= max_tries * max(count, 1):
            continue
        seen.add(key)
        out.append(key)
    return out


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------


def score_to_elo(score: float) -> float:
    """Logistic Elo difference of a mean score: ``-400 * log10(1 / score - 1)``; -inf at 0, +inf
    at 1. Raises ValueError outside [0, 1]."""
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"score must be in [0, 1], got {score}")
    if score == 0.0:
        return -math.inf
    if score == 1.0:
        return math.inf
    return -400.0 * math.log10(1.0 / score - 1.0) + 0.0  # + 0.0: no -0.0 at score 0.5


def elo_to_score(elo: float) -> float:
    """Expected score of a logistic Elo difference: ``1 / (1 + 10 ** (-elo / 400))``."""
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


@dataclass(frozen=True)
class EloEstimate:
    """Elo difference with a confidence interval (``lower``..``upper``, Elo), the mean score, its
    standard error (score units), the number of samples (games, or game pairs for the
    pentanomial model) and the model ('trinomial' or 'pentanomial')."""

    elo: float
    lower: float
    upper: float
    score: float
    stderr: float
    samples: int
    model: str
    confidence: float = 0.95


def _check_counts(counts: Sequence[float], k: int) -> list[float]:
    if len(counts) != k:
        raise ValueError(f"expected {k} outcome counts, got {len(counts)}")
    out = [float(c) for c in counts]
    if any(c < 0 for c in out):
        raise ValueError(f"outcome counts must be >= 0, got {list(counts)}")
    if sum(out) <= 0:
        raise ValueError("no games: the outcome counts sum to 0")
    return out


def _estimate(counts: Sequence[float], confidence: float, model: str) -> EloEstimate:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    k = len(counts)
    values = [i / (k - 1) for i in range(k)]
    n = sum(counts)
    s = sum(v * c for v, c in zip(values, counts, strict=True)) / n
    var = sum(c * (v - s) ** 2 for v, c in zip(values, counts, strict=True)) / n
    se = math.sqrt(var / n)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    lo = min(max(s - z * se, 0.0), 1.0)
    hi = min(max(s + z * se, 0.0), 1.0)
    return EloEstimate(
        elo=score_to_elo(s),
        lower=score_to_elo(lo),
        upper=score_to_elo(hi),
        score=s,
        stderr=se,
        samples=round(n),
        model=model,
        confidence=confidence,
    )


def elo_trinomial(wins: int, draws: int, losses: int, confidence: float = 0.95) -> EloEstimate:
    """Elo and interval from win/draw/loss counts, each game an independent sample: per-game
    variance ``(W (1-s)^2 + D (1/2-s)^2 + L s^2) / n``, ``se = sqrt(var / n)``. Raises ValueError
    for negative counts, no games, or a confidence outside (0, 1)."""
    return _estimate(_check_counts([losses, draws, wins], 3), confidence, "trinomial")


def elo_pentanomial(counts: Sequence[int], confidence: float = 0.95) -> EloEstimate:
    """Elo and interval from game-pair counts ``[LL, LD+DL, LW+DD+WL, DW+WD, WW]`` (pair scores 0,
    1/2, 1, 3/2, 2 out of 2), each pair one sample of score 0, 1/4, 1/2, 3/4, 1. Raises ValueError
    like :func:`elo_trinomial`."""
    return _estimate(_check_counts(counts, 5), confidence, "pentanomial")


def _mle_with_mean(values: list[float], probs: list[float], s: float) -> list[float]:
    """Maximum-likelihood distribution on ``values`` with mean ``s`` given the empirical ``probs``:
    ``q_i = p_i / (1 + x (v_i - s))`` with x the root of ``sum p_i (v_i - s) / (1 + x (v_i - s))``
    (decreasing in x; found by bisection on the interval where every denominator is > 0)."""
    b = [v - s for v in values]
    bmax, bmin = max(b), min(b)
    lo = -1.0 / bmax + 1e-12
    hi = -1.0 / bmin - 1e-12
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        f = sum(p * bi / (1.0 + mid * bi) for p, bi in zip(probs, b, strict=True))
        if f > 0:
            lo = mid
        else:
            hi = mid
    x = 0.5 * (lo + hi)
    q = [p / (1.0 + x * bi) for p, bi in zip(probs, b, strict=True)]
    total = sum(q)
    return [qi / total for qi in q]


def _results_pdf(results: Sequence[float]) -> tuple[float, list[float], list[float]]:
    k = len(results)
    if k not in (3, 5):
        raise ValueError(f"results must have 3 (L, D, W) or 5 (pentanomial) counts, got {k}")
    counts = _check_counts(results, k)
    counts = [c if c > 0 else 1e-3 for c in counts]  # fishtest's regularisation of empty classes
    n = sum(counts)
    return n, [i / (k - 1) for i in range(k)], [c / n for c in counts]


def llr_logistic(elo0: float, elo1: float, results: Sequence[float]) -> float:
    """GSPRT log-likelihood ratio of H1 (elo1) against H0 (elo0), logistic Elo, as fishtest's
    ``LLR_logistic``. ``results``: ``[L, D, W]`` game counts or ``[LL, LD+DL, LW+DD+WL, DW+WD,
    WW]`` pair counts (ascending score). Raises ValueError for bad counts."""
    n, values, probs = _results_pdf(results)
    s0, s1 = elo_to_score(elo0), elo_to_score(elo1)
    q0 = _mle_with_mean(values, probs, s0)
    q1 = _mle_with_mean(values, probs, s1)
    return n * sum(p * (math.log(a) - math.log(b)) for p, a, b in zip(probs, q1, q0, strict=True))


def llr_normal(elo0: float, elo1: float, results: Sequence[float]) -> float:
    """Normal approximation of :func:`llr_logistic`: ``N (s1 - s0)(2 s - s0 - s1) / (2 var)``
    with s, var the empirical mean and variance per sample (fishtest's ``LLR_alt2``)."""
    n, values, probs = _results_pdf(results)
    s0, s1 = elo_to_score(elo0), elo_to_score(elo1)
    s = sum(v * p for v, p in zip(values, probs, strict=True))
    var = sum(p * (v - s) ** 2 for v, p in zip(values, probs, strict=True))
    return n * (s1 - s0) * (2.0 * s - s0 - s1) / (2.0 * var)


@dataclass(frozen=True)
class SPRTResult:
    """``decision``: 'accept' (H1: elo >= elo1 is accepted), 'reject' (H0 accepted) or
    'continue'; ``llr`` and the Wald bounds ``lower`` = log(beta / (1 - alpha)), ``upper`` =
    log((1 - beta) / alpha)."""

    decision: str
    llr: float
    lower: float
    upper: float
    elo0: float
    elo1: float


def sprt(
    results: Sequence[float],
    elo0: float = 0.0,
    elo1: float = 35.0,
    alpha: float = 0.05,
    beta: float = 0.05,
) -> SPRTResult:
    """Wald's SPRT on ``results`` (``[L, D, W]`` or pentanomial pair counts, see
    :func:`llr_logistic`) for H0: elo = elo0 against H1: elo = elo1 (logistic Elo, elo0 < elo1)
    with error rates ``alpha`` (false accept of H1) and ``beta`` (false accept of H0). Raises
    ValueError for elo0 >= elo1, alpha/beta outside (0, 1), or bad counts."""
    if not elo0 < elo1:
        raise ValueError(f"need elo0 < elo1, got {elo0} and {elo1}")
    if not (0.0 < alpha < 1.0 and 0.0 < beta < 1.0):
        raise ValueError(f"alpha and beta must be in (0, 1), got {alpha} and {beta}")
    llr = llr_logistic(elo0, elo1, results)
    lower = math.log(beta / (1.0 - alpha))
    upper = math.log((1.0 - beta) / alpha)
    decision = "accept" if llr >= upper else ("reject" if llr <= lower else "continue")
    return SPRTResult(decision, llr, lower, upper, elo0, elo1)


# ---------------------------------------------------------------------------------------------
# Matches
# ---------------------------------------------------------------------------------------------


@dataclass
class MatchResult:
    """Games between player A and player B, from A's point of view.

    ``a_scores[i]``: A's score in game i (1, 0.5, 0); ``a_white[i]``: A had white;
    ``opening_index[i]``: which opening game i used (games of a pair share it). ``games`` holds the
    :class:`GameRecord` s (may be empty for a result built from counts).
    """

    player_a: str
    player_b: str
    a_scores: list[float] = field(default_factory=list)
    a_white: list[bool] = field(default_factory=list)
    opening_index: list[int] = field(default_factory=list)
    games: list[GameRecord] = field(default_factory=list)

    def add(self, record: GameRecord | None, a_white: bool, score: float, opening: int) -> None:
        """Append one game (A's ``score``: 1, 0.5 or 0). Raises ValueError for another score."""
        if score not in (0.0, 0.5, 1.0):
            raise ValueError(f"a game score is 0, 0.5 or 1, got {score}")
        self.a_scores.append(float(score))
        self.a_white.append(bool(a_white))
        self.opening_index.append(int(opening))
        if record is not None:
            self.games.append(record)

    @property
    def num_games(self) -> int:
        return len(self.a_scores)

    @property
    def wins(self) -> int:
        return sum(1 for s in self.a_scores if s == 1.0)

    @property
    def draws(self) -> int:
        return sum(1 for s in self.a_scores if s == 0.5)

    @property
    def losses(self) -> int:
        return sum(1 for s in self.a_scores if s == 0.0)

    @property
    def score(self) -> float:
        """A's mean score per game (draws count half). Raises ValueError with no games."""
        if not self.a_scores:
            raise ValueError("no games played")
        return sum(self.a_scores) / len(self.a_scores)

    @property
    def white_wins(self) -> int:
        return sum(
            1
            for s, w in zip(self.a_scores, self.a_white, strict=True)
            if (s == 1.0 and w) or (s == 0.0 and not w)
        )

    @property
    def white_win_rate(self) -> float:
        """Share of all games won by white (whoever played it); 0.0 with no games."""
        return self.white_wins / self.num_games if self.num_games else 0.0

    @property
    def draw_rate(self) -> float:
        return self.draws / self.num_games if self.num_games else 0.0

    def trinomial(self) -> list[int]:
        """``[L, D, W]`` game counts for A (fishtest order, ascending score)."""
        return [self.losses, self.draws, self.wins]

    def pairs(self) -> list[tuple[int, int]]:
        """Index pairs (A white, A black) of games sharing an opening, in opening order; games
        without a partner are left out."""
        by_opening: dict[int, dict[bool, list[int]]] = {}
        for i, (o, w) in enumerate(zip(self.opening_index, self.a_white, strict=True)):
            by_opening.setdefault(o, {True: [], False: []})[w].append(i)
        out = []
        for o in sorted(by_opening):
            whites, blacks = by_opening[o][True], by_opening[o][False]
            out.extend(zip(whites, blacks, strict=False))
        return out

    def pentanomial(self) -> list[int]:
        """``[LL, LD+DL, LW+DD+WL, DW+WD, WW]`` counts of A's pair scores 0, 1/2, 1, 3/2, 2 over
        :meth:`pairs`."""
        counts = [0] * 5
        for i, j in self.pairs():
            counts[round(2 * (self.a_scores[i] + self.a_scores[j]))] += 1
        return counts

    @property
    def fully_paired(self) -> bool:
        return self.num_games > 0 and 2 * len(self.pairs()) == self.num_games

    def elo(self, confidence: float = 0.95, model: str | None = None) -> EloEstimate:
        """A's Elo over B with an interval: the pentanomial model when every game is paired
        (``model=None``), else the trinomial; ``model`` forces one. Raises ValueError with no games
        or an unknown model."""
        if model is None:
            model = "pentanomial" if self.fully_paired else "trinomial"
        if model == "pentanomial":
            return elo_pentanomial(self.pentanomial(), confidence)
        if model == "trinomial":
            return elo_trinomial(self.wins, self.draws, self.losses, confidence)
        raise ValueError(f"model must be 'trinomial' or 'pentanomial', got '{model}'")

    def sprt(
        self, elo0: float = 0.0, elo1: float = 35.0, alpha: float = 0.05, beta: float = 0.05
    ) -> SPRTResult:
        """:func:`sprt` on the pentanomial counts when fully paired, else on ``[L, D, W]``."""
        results = self.pentanomial() if self.fully_paired else self.trinomial()
        return sprt(results, elo0, elo1, alpha, beta)

    def summary(self) -> dict[str, float | int | str]:
        """Flat dict for logs: games, W/D/L, score, white win rate, Elo and interval (Elo values are
        +-inf when a side scored everything or nothing; clip them before plotting)."""
        out: dict[str, float | int | str] = {
            "player_a": self.player_a,
            "player_b": self.player_b,
            "games": self.num_games,
            "wins": self.wins,
            "draws": self.draws,
            "losses": self.losses,
            "white_win_rate": self.white_win_rate,
        }
        if self.num_games:
            est = self.elo()
            out.update(
                score=est.score,
                elo=est.elo,
                elo_lower=est.lower,
                elo_upper=est.upper,
                elo_model=est.model,
            )
        return out


def run_match(
    player_a: Player,
    player_b: Player,
    size: int,
    half_komi: int = 0,
    num_openings: int = 10,
    ply_limit: int | None = 300,
    seed: int = 0,
    openings: Iterable[Sequence[int | str]] | None = None,
    opening_plies: int = 2,
    threefold: bool = True,
    start: Position | None = None,
    stop: Callable[[MatchResult], bool] | None = None,
    on_game: Callable[[GameRecord], None] | None = None,
) -> MatchResult:
    """Play ``player_a`` against ``player_b`` on paired openings: each opening is played twice,
    A white then B white, so the match has ``2 * num_openings`` games.

    Openings are ``openings`` (move sequences, codes or PTN, from the start) when given, otherwise
    ``num_openings`` distinct random sequences of ``opening_plies`` plies (:func:`random_openings`
    with ``seed``). ``start`` defaults to the empty ``size`` board with ``half_komi``. Each game
    gets its own seed derived from ``seed``, opening and colour, so a match is reproducible.
    ``stop(result)`` is asked after each pair (e.g. an SPRT that has decided) and ends the match
    early when it returns True; ``on_game(record)`` is called after each game (e.g. PTN logging).

    Raises ValueError for bad sizes, counts, or openings that are illegal or end the game.
    """
    if start is None:
        start = Position.start(size, half_komi=half_komi)
    elif start.size != size or start.half_komi != half_komi:
        raise ValueError("start position does not match size/half_komi")
    if openings is None:
        if num_openings < 1:
            raise ValueError(f"num_openings must be >= 1, got {num_openings}")
        opening_list: list[Sequence[int | str]] = list(
            random_openings(start, num_openings, opening_plies, seed)
        )
    else:
        opening_list = [tuple(o) for o in openings]
        if not opening_list:
            raise ValueError("openings is empty")
    result = MatchResult(player_a.name, player_b.name)
    for k, opening in enumerate(opening_list):
        for a_white in (True, False):
            white, black = (player_a, player_b) if a_white else (player_b, player_a)
            record = play_game(
                white,
                black,
                start,
                ply_limit,
                threefold=threefold,
                opening_moves=opening,
                seed=_seed_for(seed, k, 0 if a_white else 1),
            )
            result.add(record, a_white, record.score_for(0 if a_white else 1), k)
            if on_game is not None:
                on_game(record)
        if stop is not None and stop(result):
            break
    return result


# ---------------------------------------------------------------------------------------------
# Gating
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


__all__ = [
    "EloEstimate",
    "GameRecord",
    "GateDecision",
    "MatchResult",
    "SPRTResult",
    "elo_pentanomial",
    "elo_to_score",
    "elo_trinomial",
    "game_to_ptn",
    "gate",
    "llr_logistic",
    "llr_normal",
    "play_game",
    "random_openings",
    "run_match",
    "score_to_elo",
    "sprt",
]
