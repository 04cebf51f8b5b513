"""One match's terms as one value: :class:`MatchSpec` (how many games, on which board, with which
komi, openings, ply limit and seed), what ``takzero.matches.evaluation.evaluate`` and
``takzero.protocols.tei.match.run_tei_match`` take beside how each side searches (a
``takzero.search.SearchConfig`` for a network, a ``TimeControl`` for a TEI engine).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from takzero.game.position import komi_to_half_komi
from takzero.matches.games import DEFAULT_PLY_LIMIT
from takzero.matches.openings import Opening
from takzero.players.base import is_integer

__all__ = ["MatchSpec"]

#: The most half-komi a match accepts (as a model's metadata: -200..200).
MAX_HALF_KOMI = 200


@dataclass(frozen=True)
class MatchSpec:
    """The terms of a match between two sides, each opening played once with each colour.

    Attributes:
        games: games in all (>= 1); the openings are ``pairs`` = ceil(games / 2), the second
            game of a pair with the colours swapped.
        size: board size (3..8); None: the one the model plays (resolved by the caller).
        half_komi: komi in half points (-200..200); None: the model's own, else 0.
        ply_limit: a game is drawn after this many plies (>= 1); None: no limit.
        opening_plies: random plies of each generated opening (>= 0), when ``openings`` is None.
        seed: the seed of the openings and of the players (>= 0).
        threefold: a threefold repetition draws (a bool).
        openings: the openings to play in turn (``takzero.matches.openings.Opening``, as
            ``load_openings`` reads them); None: ``pairs`` random ones of ``opening_plies``.

    Raises ValueError (one line, naming the field) for a value out of range.
    """

    games: int
    size: int | None = None
    half_komi: int | None = None
    ply_limit: int | None = DEFAULT_PLY_LIMIT
    opening_plies: int = 2
    seed: int = 0
    threefold: bool = True
    openings: tuple[Opening, ...] | None = None

    def __post_init__(self) -> None:
        def integer(name: str, value: object, low: int, high: int | None = None) -> None:
            if not is_integer(value) or value < low or (high is not None and value > high):  # type: ignore[operator]
                span = f"in {low}..{high}" if high is not None else f">= {low}"
                raise ValueError(f"match: {name} must be an integer {span}, got {value!r}")

        integer("games", self.games, 1)
        if self.size is not None:
            integer("size", self.size, 3, 8)
        if self.half_komi is not None:
            integer("half_komi", self.half_komi, -MAX_HALF_KOMI, MAX_HALF_KOMI)
        if self.ply_limit is not None:
            integer("ply_limit", self.ply_limit, 1)
        integer("opening_plies", self.opening_plies, 0)
        integer("seed", self.seed, 0)
        if not isinstance(self.threefold, bool):  # "no" or 0 would be read as a truth value
            raise ValueError(f"match: threefold must be true or false, got {self.threefold!r}")
        if self.openings is not None:
            given = self.openings
            if isinstance(given, str | bytes) or not isinstance(given, Iterable):  # a string: its characters
                raise ValueError(f"match: openings must be a sequence of Opening, got a {type(given).__name__}")
            if not isinstance(given, tuple):
                object.__setattr__(self, "openings", tuple(given))
            if not self.openings:
                raise ValueError("match: no openings")
            wrong = next((o for o in self.openings if not isinstance(o, Opening)), None)
            if wrong is not None:
                raise ValueError(f"match: openings must be Opening values (takzero.matches.openings, as "
                                 f"load_openings reads them), got a {type(wrong).__name__}")
            if self.size is not None and any(o.start.size != self.size for o in self.openings):
                raise ValueError(f"match: openings must be for {self.size}x{self.size}")

    @classmethod
    def from_pairs(cls, pairs: int, komi: float | None = None, **fields: object) -> MatchSpec:
        """``2 * pairs`` games; ``komi`` in points (None: the model's), converted to half points.
        Raises ValueError as the constructor, and for a komi that is not a multiple of 0.5."""
        if not is_integer(pairs) or pairs < 1:
            raise ValueError(f"match: pairs must be an integer >= 1, got {pairs!r}")
        half_komi = None if komi is None else komi_to_half_komi(komi)
        return cls(games=2 * int(pairs), half_komi=half_komi, **fields)  # type: ignore[arg-type]

    @property
    def pairs(self) -> int:
        """Openings played, each with both colours (the last one once when ``games`` is odd)."""
        return (self.games + 1) // 2
