"""Results of games and matches: :class:`GameRecord` (one finished game, with PTN output through
the shared writer of ``takzero.game.ptn``) and :class:`MatchResult` (a match from player A's point
of view, with Elo, SPRT and the trinomial/pentanomial counts of ``takzero.matches.stats``).

Used by both game loops: ``takzero.matches.games`` (in-process players and networks) and
``takzero.protocols.tei.match`` (external TEI engines; its results have no records).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from takzero.game.position import Game, Position
from takzero.game.ptn import PTNGame, write_ptn
from takzero.matches.stats import (
    EloEstimate,
    SPRTResult,
    describe_estimate,
    elo_pentanomial,
    elo_trinomial,
    elo_wilson,
    sprt,
)
from takzero.players.base import PlayerMove


def colour_score(winner: int | None, colour: int) -> float:
    """The score of ``colour`` (0 white, 1 black) in a game won by ``winner`` (None: a draw):
    1 for a win, 0.5 for a draw, 0 for a loss."""
    if winner is None:
        return 0.5
    return 1.0 if winner == colour else 0.0


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
        return colour_score(self.winner, colour)

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
        out: list[tuple[int, int]] = []
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
        (``model=None``), else the trinomial; ``model`` forces one, or ``'wilson'`` for the
        Wilson score interval mapped to Elo (:func:`~takzero.matches.stats.elo_wilson`, the one
        that stays honest for small and one-sided samples, games taken as independent).
        Raises ValueError with no games or an unknown model."""
        if model is None:
            model = "pentanomial" if self.fully_paired else "trinomial"
        if model == "pentanomial":
            return elo_pentanomial(self.pentanomial(), confidence)
        if model == "trinomial":
            return elo_trinomial(self.wins, self.draws, self.losses, confidence)
        if model == "wilson":
            return elo_wilson(self.wins, self.draws, self.losses, confidence)
        raise ValueError(f"model must be 'trinomial', 'pentanomial' or 'wilson', got '{model}'")

    def describe_elo(self, confidence: float = 0.95) -> str:
        """A's Elo over B for people: :meth:`elo` (the model :meth:`summary` carries, named) by
        :func:`~takzero.matches.stats.describe_estimate`, or "too few games"."""
        if not self.num_games:
            return "too few games (0) for an Elo interval"
        return describe_estimate(self.elo(confidence))

    def tally(self) -> str:
        """A's games as ``'3-1-2 (W-D-L)'``: the one order of a tally in every printed line."""
        return f"{self.wins}-{self.draws}-{self.losses} (W-D-L)"

    def sprt(
        self, elo0: float = 0.0, elo1: float = 35.0, alpha: float = 0.05, beta: float = 0.05
    ) -> SPRTResult:
        """:func:`sprt` on the pentanomial counts when fully paired, else on ``[L, D, W]``."""
        results = self.pentanomial() if self.fully_paired else self.trinomial()
        return sprt(results, elo0, elo1, alpha, beta)

    def summary(self) -> dict[str, float | int | str]:
        """Flat dict for logs: games, W/D/L, score, white win rate, Elo and interval (Elo values are
        +-inf when a side scored everything or nothing; clip them before plotting), and when every
        game is paired the ``pentanomial`` counts (:meth:`pentanomial`, 5 ints), so that matches
        on other openings can be pooled (sum the counts, then
        :func:`takzero.matches.stats.elo_pentanomial`)."""
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
        if self.fully_paired:
            out["pentanomial"] = self.pentanomial()  # type: ignore[assignment]
        return out


class MatchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a match: ``result`` holds the games finished so far (A's point of view) and
    ``outcomes`` whatever else the runner keeps of them (the TEI runner's GameOutcome list). A
    KeyboardInterrupt, so code that does not know it still stops."""

    def __init__(self, result: MatchResult, outcomes: list[Any] | None = None) -> None:
        super().__init__(f"interrupted after {result.num_games} games")
        self.result = result
        self.outcomes = list(outcomes or [])


__all__ = ["GameRecord", "MatchInterrupted", "MatchResult", "colour_score", "game_to_ptn"]
