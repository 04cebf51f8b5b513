"""The playtak bot's games: each game as the bot follows it from the server's lines
(:class:`BotGame`), kept in sync with the server (:class:`GameSync`), and what the bot counts of
them (:class:`BotStats`).

* **Game sync**: every ``Game Start`` (a new game, a rejoined one, or one the bot did not know)
  starts from the empty board and applies the plies that follow; the game is in sync when its
  clock update arrives (after a rejoin the server sends every ply and then the clocks; a new game
  has no plies and, for white, no clock until the first move, so a quiet wait of
  :data:`SETTLE_S` ends it). The opponent's plies, ``Over`` (the result), ``Abandoned`` (the
  opponent left: a win) and ``Undo`` are followed. A game whose settings the player cannot play,
  or whose plies cannot be replayed, is resigned (``Game#N Resign``) as soon as its lines are read.
* **Games across a reconnection**: our game sent again is resumed (a move that was sent but not
  received is sent again); a game the bot did not know is adopted; a game of ours that did not
  come back ended while the bot was away and is counted as a loss (``abandoned``), taken back
  should it still come.

:class:`GameSync` is the part of :class:`takzero.protocols.playtak.bot.PlaytakBot` that does this
(the bot is one): it works on the bot's state, listed in its body, and calls the bot's search
(``_maybe_think``, ``_cancel_search``), lobby and connection (``_send``, ``_say``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from takzero.game.core import WHITE
from takzero.game.moves import MoveError, parse_playtak
from takzero.game.position import Position
from takzero.players.base import PlayerMove
from takzero.protocols.playtak.lines import (
    GameStart,
    ProtocolError,
    SeekSpec,
    format_resign,
    parse_clock,
    parse_over,
    result_winner,
)
from takzero.protocols.playtak.lobby import Lobby
from takzero.protocols.playtak.thinking import MoveSearch

__all__ = ["SETTLE_S", "BotGame", "BotStats", "GameSync"]

#: Quiet time after a ``Game Start`` with no plies before the game counts as in sync.
SETTLE_S = 0.2
_GAME_NOTES = {"OfferDraw", "RemoveDraw", "RequestUndo", "RemoveUndo", "GivenTime", "Show"}


@dataclass
class BotStats:
    """What happened, for logs and tests: games finished (``wins``/``losses``/``draws``;
    ``time_losses``: lost on the clock; ``abandoned``: lost because the bot did not come back),
    ``reconnects``, games ``resumed`` after one, server lines ``ignored`` (malformed or out of
    place), ``server_errors`` (``NOK``/``Error`` lines), ``deadline_moves`` (sent at the hard
    deadline without the search's answer), ``internal_errors`` (exceptions while handling a
    line, logged with their traceback), the least time left when a move was sent
    (``min_clock_s``) and one dict per game in ``results``."""

    wins: int = 0
    losses: int = 0
    draws: int = 0
    time_losses: int = 0
    abandoned: int = 0
    reconnects: int = 0
    resumed: int = 0
    ignored: int = 0
    server_errors: int = 0
    deadline_moves: int = 0
    internal_errors: int = 0
    min_clock_s: float | None = None
    results: list[dict] = field(default_factory=list)

    @property
    def games(self) -> int:
        return self.wins + self.losses + self.draws

    def summary(self) -> dict:
        """Everything but the per-game results, plus ``games``."""
        d = asdict(self)
        d.pop("results")
        d["games"] = self.games
        return d


@dataclass
class BotGame:
    start: GameStart
    position: Position
    increment_s: float
    codes: list[int] = field(default_factory=list)
    clocks: list[float] = field(default_factory=lambda: [0.0, 0.0])
    clock_at: float = 0.0
    syncing: bool = True
    settle_at: float = 0.0
    cid: int = 0  # the connection whose server sent this game's Game Start: moves go only there
    expect_clock: bool = False  # in sync only at the clock line (a game sent during a login)
    broken: str | None = None  # why the position could not be rebuilt from the server's lines
    token: int | None = None  # the search running for our move
    deadline: float = 0.0
    best: PlayerMove | None = None
    pending: tuple[int, int, int] | None = None  # (ply, position hash, code) of our last move
    resigned: bool = False

    @property
    def number(self) -> int:
        return self.start.number

    @property
    def our_turn(self) -> bool:
        return not self.position.is_over and self.position.side_to_move == self.start.colour


class GameSync:
    """The game the bot plays, from its ``Game Start`` to its end (module doc). A part of
    :class:`takzero.protocols.playtak.bot.PlaytakBot`: the attributes below are the bot's."""

    # the bot's state that following a game reads and writes
    seek: SeekSpec | None
    seed: int
    verbose: bool
    stats: BotStats
    _cid: int
    _login_done: bool
    _asked: bool
    _game: BotGame | None
    _lost: tuple[int, BotGame] | None
    _games_started: int
    _lobby: Lobby
    _search: MoveSearch
    _say: Callable[[str], None]
    _send: Callable[[str], bool]
    _warm_up: Callable[[int, int, int, int], None]
    _maybe_think: Callable[[], None]
    _cancel_search: Callable[[], None]
    _ask_for_game: Callable[[], None]

    def _on_game_start(self, gs: GameStart) -> None:
        """A ``Game Start``: a new game, our game sent again after a reconnection (before or
        after ``Welcome``: either is the server's order), or a game the bot did not know (from
        before this session), which it adopts: every game starts from the empty board and
        applies the plies that follow. A game whose settings the player cannot play is
        resigned."""
        old = self._game
        self._cancel_search()
        self._lobby.accepting = None
        self._asked = False
        if old is None and self._lost is not None and self._lost[0] == gs.number:
            old = self._take_back_loss()  # counted as gone too early: it is back after all
        resumed = old is not None and old.number == gs.number
        if old is not None and not resumed:
            if old.cid != self._cid:  # our game did not come back; the server has another
                self._game_not_resumed(ask=False)
            else:
                self._say(f"game {old.number} was left for game {gs.number}")
        increment: float | None = gs.increment_s
        if increment is None:  # a protocol 0/1 line (as every rejoin's): the increment we know
            s = self.seek
            if resumed and old is not None:
                increment = old.increment_s
            else:
                increment = s.increment_s if s and (s.size, s.time_s) == (gs.size, gs.time_s) else 0
        position = Position.start(gs.size, flats=gs.flats, caps=gs.caps, half_komi=gs.half_komi)
        g = BotGame(gs, position, float(increment), cid=self._cid)
        g.expect_clock = resumed or not self._login_done
        g.clocks = [float(gs.time_s), float(gs.time_s)]
        g.clock_at = g.settle_at = time.monotonic()
        g.settle_at += SETTLE_S
        if resumed and old is not None:
            g.pending = old.pending
            self.stats.resumed += 1
            self._say(f"game {gs.number} resumed")
        else:
            self._games_started += 1
            colour = "white" if gs.colour == WHITE else "black"
            what = "adopting game" if not self._login_done else "game"
            self._say(
                f"{what} {gs.number}: {gs.white} vs {gs.black}, {gs.size}x{gs.size}, "
                f"{gs.time_s}+{increment} s, komi {gs.half_komi / 2:g}, {gs.flats} flats "
                f"{gs.caps} caps; we are {colour}"
            )
        self._game = g
        self._new_player_game(g)
        try:
            self._warm_up(gs.size, gs.flats, gs.caps, gs.half_komi)
        except ValueError as e:
            self._resign(g, f"cannot play game {gs.number} ({e})")

    def _resign(self, g: BotGame, why: str) -> None:
        self._say(f"{why}; resigning")
        self._cancel_search()
        g.resigned = True
        self._send(format_resign(g.number))

    def _on_game_line(self, number: int, rest: str) -> None:
        g = self._game
        kind = rest.split(maxsplit=1)[0] if rest else ""
        if kind in ("Over", "Abandoned."):
            self._on_over(number, rest)
            return
        if g is None or number != g.number:
            raise ProtocolError(f"a line for game {number}, which the bot is not playing")
        if g.cid != self._cid:  # a ply between the login and the rejoin: it comes again in it
            if self.verbose:
                self._say(f"game {number}: {rest!r} before the game is sent again; skipped")
            return
        if kind in ("P", "M"):
            try:
                code = parse_playtak(rest, g.start.size)
                g.position.check_move(code)  # an illegal ply: MoveError, logged and ignored
            except (MoveError, ValueError) as e:
                if g.syncing:  # the game cannot be rebuilt: resigned once the lines are read
                    g.broken = g.broken or f"ply {len(g.codes) + 1} {rest!r}: {e}"
                raise
            self._apply(g, code)
            if not g.syncing:
                g.pending = None  # the opponent answered: our last move arrived
                self._maybe_think()
        elif kind in ("Time", "Timems"):
            g.clocks = list(parse_clock(rest))
            g.clock_at = time.monotonic()
            if g.syncing:
                self._end_sync()
        elif kind == "Undo":
            if not g.codes:
                raise ProtocolError("undo with no ply played")
            self._cancel_search()
            codes = g.codes[:-1]
            g.position = Position.start(g.start.size, flats=g.start.flats, caps=g.start.caps,
                                        half_komi=g.start.half_komi)
            g.codes = []
            self._new_player_game(g)
            for c in codes:
                self._apply(g, c)
            g.pending = None
            self._say(f"game {number}: the last ply was taken back")
            self._maybe_think()
        elif kind in _GAME_NOTES:
            self._say(f"game {number}: {rest} (not answered)")
        else:
            raise ProtocolError("unknown game line")

    def _new_player_game(self, g: BotGame) -> None:
        """The player starts the game afresh at its next search (earlier calls are dropped)."""
        self._search.new_game(g.start.size, g.start.half_komi, self.seed + self._games_started)

    def _apply(self, g: BotGame, code: int) -> None:
        self._search.observe(g.position, code)
        g.position = g.position.play(code)
        g.codes.append(code)

    def _end_sync(self) -> None:
        g = self._game
        assert g is not None
        g.syncing = False
        if g.broken is not None and not g.resigned:
            self._resign(g, f"game {g.number} cannot be rebuilt from the server's lines ({g.broken})")
            return
        self._maybe_think()

    def _game_not_resumed(self, ask: bool = True) -> None:
        """Our game was not sent again at the reconnection: it ended while the bot was away
        (abandoned, or lost on time); counted as a loss."""
        g = self._game
        assert g is not None
        self._say(f"game {g.number} did not come back after the reconnection: lost (abandoned)")
        self.stats.losses += 1
        self.stats.abandoned += 1
        self._record(g, "abandoned", "loss")
        self._lost = (g.number, g)
        self._game = None
        if ask:
            self._ask_for_game()

    def _take_back_loss(self) -> BotGame:
        """The game counted lost by :meth:`_game_not_resumed` came back: not a loss."""
        assert self._lost is not None
        number, g = self._lost
        self._lost = None
        self.stats.losses -= 1
        self.stats.abandoned -= 1
        for i in range(len(self.stats.results) - 1, -1, -1):
            if self.stats.results[i]["game"] == number:
                del self.stats.results[i]
                break
        self._say(f"game {number} is back after all")
        return g

    def _on_over(self, number: int, rest: str) -> None:
        g = self._game
        if g is None or number != g.number:
            raise ProtocolError(f"the end of game {number}, which the bot is not playing")
        if rest.startswith("Abandoned."):
            result, note = ("1-0" if g.start.colour == WHITE else "0-1"), rest
        else:
            result, note = parse_over(rest), ""
        self._cancel_search()
        winner = result_winner(result)
        if winner is None:
            outcome = "draw"
            self.stats.draws += 1
        elif winner == g.start.colour:
            outcome = "win"
            self.stats.wins += 1
        else:
            outcome = "loss"
            self.stats.losses += 1
            if result in ("1-0", "0-1") and not g.resigned:
                outcome = "loss on time"
                self.stats.time_losses += 1
        self._record(g, result, outcome)
        self._say(f"game {number} over: {result} ({outcome}{'; ' + note if note else ''}), "
                  f"{len(g.codes)} plies; {self.stats.wins}-{self.stats.losses}-{self.stats.draws}")
        self._game = None
        self._ask_for_game()

    def _record(self, g: BotGame, result: str, outcome: str) -> None:
        self.stats.results.append({
            "game": g.number, "white": g.start.white, "black": g.start.black,
            "size": g.start.size, "result": result, "outcome": outcome, "plies": len(g.codes),
        })
