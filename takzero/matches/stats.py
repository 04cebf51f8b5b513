"""Match statistics: Elo from a score, confidence intervals (trinomial, pentanomial, Wilson) and
Wald's SPRT. All scores are the first player's, draws count half.

* Elo from a score: the logistic model, ``elo = -400 * log10(1 / score - 1)`` (score 0.75 ->
  190.85 Elo).
* Confidence interval of the mean score, by inverting the score test (Wilson 1927, generalised
  from two outcomes to the three of a game or the five of a game pair): a mean ``mu`` is inside
  when ``n (s - mu)^2 <= z^2 V(mu)``, where ``V(mu)`` is the variance of the maximum-likelihood
  outcome distribution with mean ``mu`` (the same tilted distribution the SPRT below uses, empty
  outcome classes regularised the same way). With two outcomes this is exactly the Wilson interval;
  with many games it approaches the normal interval ``s +- z * se``; unlike that one it never
  collapses to a point (100 won pairs: [+566, +inf]; 10 pairs all split 1-1:
  [-99, +99]). The per-sample variance comes from the trinomial model (win/draw/loss per game)
  or, for paired games, from the pentanomial one (the five outcomes of a game pair, scores 0,
  1/4, 1/2, 3/4, 1 per game of the pair), which accounts for the correlation inside a pair (the
  fishtest convention). ``MatchResult.elo`` (``takzero.matches.results``) uses the pentanomial
  when every opening was played with both colours, otherwise the trinomial, and says which in
  ``EloEstimate.model``.
* Wilson score interval (Wilson 1927) of a mean score, games taken as independent:
  :func:`elo_wilson` maps it to Elo (:func:`describe_elo` prints it).
* What people see: :func:`describe_estimate` of ``MatchResult.elo()`` (pentanomial on paired
  games, else trinomial; the model the evaluate JSON, TensorBoard and gating use) is the one
  interval the match and evaluate command lines and the training run print, named by
  :func:`format_elo` (or "too few games" under :data:`MIN_ELO_GAMES`); :func:`elo_text` writes
  every Elo interval people read, a one-sided result as a bound (``'< +113.2'``, never -inf).
* SPRT: Wald's sequential probability ratio test (Wald 1945) of H0: elo = elo0 against H1: elo =
  elo1 (logistic Elo), with the generalized log-likelihood ratio (GSPRT) computed as fishtest does
  (``LLRcalc.LLR_logistic`` in official-stockfish/fishtest, after M. Van den Bergh, "A practical
  introduction to the GSPRT", hardy.uhasselt.be/Fishtest/GSPRT_approximation.pdf): the maximum-
  likelihood outcome distributions with mean score s0 and s1 are found from the empirical one
  (empty outcome classes regularised to 1e-3 games), and ``LLR = N * sum_i p_i log(p1_i / p0_i)``.
  Bounds: accept H1 when ``LLR >= log((1 - beta) / alpha)``, accept H0 when
  ``LLR <= log(beta / (1 - alpha))``, continue otherwise. :func:`llr_normal` gives the simpler
  normal approximation ``N (s1 - s0)(2 s - s0 - s1) / (2 var)`` (fishtest's ``LLR_alt2``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist


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


#: The most games (or pairs) an interval is computed for: beyond about 1e15 the bounds round to
#: the estimate in float64, so larger counts are refused rather than given a point.
MAX_GAMES = 1e12


def _check_counts(counts: Sequence[float], k: int) -> list[float]:
    """``counts`` as floats. Raises ValueError for a string, another length than ``k``, a count
    that is not a finite number >= 0, fewer than one game (pair) in all, or more than
    :data:`MAX_GAMES`."""
    if isinstance(counts, (str, bytes)) or len(counts) != k:
        raise ValueError(f"expected {k} outcome counts, got {counts!r}")
    try:
        out = [float(c) for c in counts]
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"outcome counts must be numbers, got {list(counts)!r}") from None
    if not all(math.isfinite(c) and c >= 0 for c in out):
        raise ValueError(f"outcome counts must be finite and >= 0, got {list(counts)}")
    if sum(out) < 1:
        raise ValueError(f"no games: the outcome counts sum to {sum(out):g} (under 1)")
    if sum(out) > MAX_GAMES:
        raise ValueError(f"the outcome counts sum to {sum(out):g}: over {MAX_GAMES:g}, where float "
                         "rounding would collapse the intervals")
    return out


def _estimate(counts: Sequence[float], confidence: float, model: str) -> EloEstimate:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    k = len(counts)
    values = [i / (k - 1) for i in range(k)]
    n = sum(counts)
    s = sum(v * c for v, c in zip(values, counts, strict=True)) / n
    var = sum(c * (v - s) ** 2 for v, c in zip(values, counts, strict=True)) / n
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    lo, hi = _score_test_interval(values, counts, s, z)
    return EloEstimate(
        elo=score_to_elo(s),
        lower=score_to_elo(lo),
        upper=score_to_elo(hi),
        score=s,
        stderr=math.sqrt(var / n),
        samples=round(n),
        model=model,
        confidence=confidence,
    )


def _score_test_interval(
    values: list[float], counts: Sequence[float], s: float, z: float
) -> tuple[float, float]:
    """The means ``mu`` with ``n (s - mu)^2 <= z^2 V(mu)`` (see the module docstring): each end
    found by bisection between the mean score ``s`` (inside) and 0 or 1 (outside unless ``s`` is
    there, where ``V`` is 0). ``counts`` are per outcome in the order of ``values``; the
    maximum-likelihood distributions come from the counts with empty classes regularised to 1e-3
    (fishtest's), so that a one-sided sample can still be tilted to any mean."""
    n = sum(counts)
    _, probs = _regularised(counts)

    def outside(mu: float) -> bool:
        if not 0.0 < mu < 1.0:  # a mean of 0 or 1 has one distribution, of variance 0
            return s != mu
        q = _mle_with_mean(values, probs, mu)
        v = sum(qi * (x - mu) ** 2 for qi, x in zip(q, values, strict=True))
        return n * (s - mu) ** 2 > z * z * v

    def end(inside: float, out: float) -> float:
        for _ in range(60):
            mid = 0.5 * (inside + out)
            if outside(mid):
                out = mid
            else:
                inside = mid
        return out

    lo = 0.0 if s <= 0.0 else end(s, 0.0)
    hi = 1.0 if s >= 1.0 else end(s, 1.0)
    return lo, hi


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
    n, probs = _regularised(_check_counts(results, k))
    return n, [i / (k - 1) for i in range(k)], probs


def _regularised(counts: Sequence[float]) -> tuple[float, list[float]]:
    """fishtest's regularisation of empty outcome classes (1e-3 games each): the regularised
    total and the outcome probabilities."""
    reg = [c if c > 0 else 1e-3 for c in counts]
    n = sum(reg)
    return n, [c / n for c in reg]


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


def _wilson(score: float, games: float, z: float) -> tuple[float, float]:
    """Unrounded Wilson score interval (see :func:`wilson_interval`)."""
    z2 = z * z / games
    centre = (score + z2 / 2) / (1 + z2)
    half = z * math.sqrt(score * (1 - score) / games + z2 / (4 * games)) / (1 + z2)
    # Exact bounds at the ends (the formula gives them up to rounding: 1e-17 is not 0).
    lo = 0.0 if score == 0.0 else max(0.0, centre - half)
    hi = 1.0 if score == 1.0 else min(1.0, centre + half)
    return lo, hi


def wilson_interval(score: float, games: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval (Wilson 1927) of a mean score over ``games`` games (draws count
    half, games taken as independent), 95% by default. Unlike the normal interval it does not
    collapse to a point at a score of 0 or 1 (200 wins in 200 games: [0.981, 1]). Raises
    ValueError for games < 1 or a score outside [0, 1]."""
    if games < 1 or not 0.0 <= score <= 1.0:
        raise ValueError(f"need games >= 1 and 0 <= score <= 1, got {games} games, score {score}")
    lo, hi = _wilson(score, games, z)
    return round(lo, 4), round(hi, 4)


#: Fewer games than this give no Elo interval ("too few games"): one game cannot tell a
#: stronger player from the first-move (or colour) advantage.
MIN_ELO_GAMES = 2


def elo_wilson(wins: int, draws: int, losses: int, confidence: float = 0.95) -> EloEstimate:
    """Elo and interval from the Wilson score interval (Wilson 1927) of the mean score (draws
    half, each game one sample) mapped to Elo through :func:`score_to_elo`. It never collapses to
    a point: 1-1 gives about [-390, +390], 0-4 gives -inf [-inf, -7.0] (the point estimate and
    the lower bound stay -inf: no difference however large is excluded), 2 draws the same as
    1-1. It takes paired games as independent: where the two games of a pair disagree that makes
    it wider than the pentanomial interval, and on a one-sided result (every pair won) narrower,
    because the pentanomial counts pairs, not games, as samples (100 won pairs: Wilson
    [+687, +inf] over 200 games, pentanomial [+566, +inf]).
    ``model`` is 'wilson'; ``stderr`` the normal standard error of the score. Raises ValueError
    like :func:`elo_trinomial`."""
    counts = _check_counts([losses, draws, wins], 3)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = sum(counts)
    s = (counts[2] + 0.5 * counts[1]) / n
    var = (counts[2] * (1 - s) ** 2 + counts[1] * (0.5 - s) ** 2 + counts[0] * s**2) / n
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    lo, hi = _wilson(s, n, z)
    return EloEstimate(
        elo=score_to_elo(s),
        lower=score_to_elo(lo),
        upper=score_to_elo(hi),
        score=s,
        stderr=math.sqrt(var / n),
        samples=round(n),
        model="wilson",
        confidence=confidence,
    )


def _games_of(est: EloEstimate) -> int:
    """Games behind an estimate: its samples, twice over for the pentanomial model (pairs)."""
    return 2 * est.samples if est.model == "pentanomial" else est.samples


def describe_estimate(est: EloEstimate) -> str:
    """An Elo estimate for people, its interval's model named (:func:`format_elo`), or ``'too
    few games (1) for an Elo interval'`` under :data:`MIN_ELO_GAMES` games. The one line of an
    interval that the match and evaluate command lines and the training run print."""
    games = _games_of(est)
    if games < MIN_ELO_GAMES:
        return f"too few games ({games}) for an Elo interval"
    return format_elo(est)


def describe_elo(wins: int, draws: int, losses: int, confidence: float = 0.95) -> str:
    """The Wilson interval of :func:`elo_wilson` for people: ``'+35.2 [-10.1, +80.3] (95%, Wilson
    score interval mapped to Elo, 40 games)'``, or ``'too few games (1) for an Elo interval'``
    under :data:`MIN_ELO_GAMES` games (:func:`describe_estimate`)."""
    games = wins + draws + losses
    if games < MIN_ELO_GAMES:
        return f"too few games ({games}) for an Elo interval"
    return describe_estimate(elo_wilson(wins, draws, losses, confidence))


def elo_text(elo: float, lower: float, upper: float, digits: int = 1) -> str:
    """An Elo estimate and its interval for people, never with an infinity: ``'+35.2 [-10.1,
    +80.3]'``; a one-sided result (a side scored nothing: the estimate is infinite) as the bound
    its interval gives, ``'< +113.2'`` (nothing won: -inf [-inf, +113.2]) or ``'> +45.9'``
    (everything won: +inf [+45.9, +inf]); a finite estimate whose interval is open on one side
    ``'+20.0 [< +300.0]'`` / ``'+20.0 [> -300.0]'``, on both ``'+0.0 [no bound]'``; no bound at
    all ``'no bound'``; ``'?'`` when a number is NaN. ``digits``: decimals (1 in the match and
    evaluation lines, 0 on the progress line). The one formatter of an Elo interval: the
    numbers themselves (JSON, TensorBoard) stay as they are."""
    if any(x != x for x in (elo, lower, upper)):
        return "?"

    def signed(x: float) -> str:
        return f"{x:+.{digits}f}"

    low_open, high_open = math.isinf(lower), math.isinf(upper)
    if math.isinf(elo):
        if elo < 0 and not high_open:
            return f"< {signed(upper)}"
        if elo > 0 and not low_open:
            return f"> {signed(lower)}"
        return "no bound"
    if low_open and high_open:
        return f"{signed(elo)} [no bound]"
    if low_open:
        return f"{signed(elo)} [< {signed(upper)}]"
    if high_open:
        return f"{signed(elo)} [> {signed(lower)}]"
    return f"{signed(elo)} [{signed(lower)}, {signed(upper)}]"


def score_interval(est: EloEstimate) -> tuple[float, float]:
    """The interval of the mean score that an Elo interval stands for (``est.lower``..``upper``
    mapped back through :func:`elo_to_score`), rounded to 4 decimals."""
    return round(elo_to_score(est.lower), 4), round(elo_to_score(est.upper), 4)


#: How each interval model is named wherever an interval is printed (:func:`format_elo`).
MODEL_NAMES = {
    "pentanomial": "pentanomial score-test interval",
    "trinomial": "trinomial score-test interval",
    "wilson": "Wilson score interval mapped to Elo",
}


def format_elo(est: EloEstimate) -> str:
    """``'+35.2 [-10.1, +80.3] (95%, pentanomial score-test interval, 20 game pairs)'``: the
    estimate and its interval (:func:`elo_text`: a one-sided result as its bound, ``'< +113.2
    (95%, ...)'`` when nothing was won), the interval's model (:data:`MODEL_NAMES`) and its
    samples. Raises KeyError for an unknown model."""
    unit = "game pair" if est.model == "pentanomial" else "game"
    samples = f"{est.samples} {unit}{'' if est.samples == 1 else 's'}"
    return (f"{elo_text(est.elo, est.lower, est.upper)} "
            f"({est.confidence * 100:g}%, {MODEL_NAMES[est.model]}, {samples})")


__all__ = [
    "MIN_ELO_GAMES",
    "MODEL_NAMES",
    "EloEstimate",
    "SPRTResult",
    "elo_pentanomial",
    "elo_to_score",
    "describe_elo",
    "describe_estimate",
    "elo_text",
    "elo_trinomial",
    "elo_wilson",
    "format_elo",
    "llr_logistic",
    "llr_normal",
    "score_interval",
    "score_to_elo",
    "sprt",
    "wilson_interval",
]
