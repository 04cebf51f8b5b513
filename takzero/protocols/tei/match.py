"""Matches between TEI engines (external processes): time controls, one game with clocks and
engine-fault forfeits (:func:`play_tei_game`) and a paired-opening match (:func:`run_tei_match`)
over the TEI client of ``takzero.protocols.tei.client`` (``TEIClient`` and ``EngineError``,
re-exported here). ``python -m takzero.match`` is its command line.

This loop stays separate from the in-process loop of ``takzero.matches.games``: it drives
external processes one game at a time, keeps the clocks, and turns crashes, timeouts, lost time
and illegal or malformed moves into forfeits (the engine is restarted for the next game), none of
which an in-process player can do.

* Engines are started with ``shlex.split`` of their command and spoken to in TEI (``tei``/
  ``teiok``, ``setoption name HalfKomi``, ``teinewgame``, ``isready``, ``position ... moves ...``,
  ``go ...``, ``bestmove``); any TEI engine works, not only takzero's. The lines are written and
  read by ``takzero.protocols.tei.lines``, the module the engine (``takzero.tei``) uses too.
* Paired openings: each opening is played twice with the colours swapped (an odd game count leaves
  the last opening unpaired); openings from a file (``takzero.matches.openings.load_openings``) or
  random.
* Time control: ``go nodes N``, ``go movetime MS`` or a clock ``BASE+INC`` (``go wtime btime winc
  binc`` with clocks kept by the runner; an engine that overruns its clock by more than the margin
  loses on time).
* Adjudication by the rules engine: roads and flat wins, the ply limit (draw) and threefold
  repetition (draw, optional).
* Results: the match from engine 1's point of view (``takzero.matches.results.MatchResult``:
  pentanomial Elo over game pairs when every opening was played with both colours, else
  trinomial) and each game as PTN.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from takzero.game.core import RESULT_NONE
from takzero.game.moves import MoveError
from takzero.game.position import Game, Position
from takzero.game.ptn import PTNGame, write_ptn
from takzero.io.files import atomic_write_text, check_writable_folder, free_names
from takzero.matches.games import DEFAULT_PLY_LIMIT
from takzero.matches.openings import Opening, random_openings
from takzero.matches.results import MatchInterrupted, MatchResult, colour_score
from takzero.matches.spec import MatchSpec
from takzero.protocols.tei.client import EngineError, TEIClient
from takzero.protocols.tei.lines import (
    SearchLimits,
    format_go,
    format_position,
)

__all__ = [
    "EngineError",
    "GameOutcome",
    "MatchAborted",
    "MatchInterrupted",
    "TEIClient",
    "TimeControl",
    "check_board_size",
    "print_match_score",
    "play_tei_game",
    "run_tei_match",
]


class MatchAborted(RuntimeError):
    """The match cannot be played at all (an engine does not start, or refuses the board size or
    would play a fallback baseline for it); no game was played."""


#: What a takzero TEI engine says (``info string``) at ``teinewgame`` for a size its model does
#: not play: the fallback baseline it will use, or that it refuses.
_FALLBACK_RE = re.compile(r"with the (?:baseline|fallback) (\S+)", re.IGNORECASE)
_REFUSED_RE = re.compile(r"cannot play \d+x\d+|refus", re.IGNORECASE)


def check_board_size(client: TEIClient, size: int, half_komi: int, allow_fallback: bool) -> None:
    """Start a game of ``size`` on ``client`` and read what it says: an engine that refuses the
    size raises MatchAborted; one that would play a fallback baseline (a model for another size)
    raises MatchAborted too, unless ``allow_fallback``, in which case the client is renamed after
    the baseline (``uct:200 (fallback of takzero model-5x5)``) so that the score is credited to
    the player that really plays. An engine that announced the sizes and half komis it plays
    (TEI version 1 ``size ... halfkomi ...`` lines, ``TEIClient.sizes``) and not this half komi
    with this size raises MatchAborted before any game (it would play another komi than the one
    the runner scores: takzero's engine keeps its komi and says so in an ``info string``).
    Raises EngineError when the engine fails."""
    announced = [komis for sizes, komis in client.sizes if size in sizes]
    if announced and not any(half_komi in komis for komis in announced):
        komis = sorted({k for ks in announced for k in ks})
        whole = komis == list(range(komis[0], komis[-1] + 1))
        span = f"{komis[0]}..{komis[-1]}" if whole else " ".join(map(str, komis))
        raise MatchAborted(f"{client.name} ({client.command}) plays {size}x{size} with half komi {span} only, not "
                           f"the match's {half_komi} (komi {half_komi / 2:g}); no games played")
    client.new_game(size, half_komi)
    for line in client.ready_infos:
        text = line.split(None, 2)[2] if line.split()[1:2] == ["string"] else line
        m = _FALLBACK_RE.search(text)
        if m:
            spec = m.group(1).rstrip(".,;:")
            if not allow_fallback:
                raise MatchAborted(
                    f"{client.name} ({client.command}) does not play {size}x{size} itself: "
                    f"'{text}'. Give the model's --size, or --allow-fallback to play (and name) "
                    f"the fallback {spec}; no games played")
            client.name = f"{spec} (fallback of {client.name})"
            return
        if _REFUSED_RE.search(text):
            raise MatchAborted(f"{client.name} ({client.command}) refuses {size}x{size}: '{text}'; "
                               "no games played")


# ---------------------------------------------------------------------------------------------
# Time control
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimeControl:
    """How a move is asked for: ``nodes`` (go nodes), ``movetime`` (ms, go movetime) or a clock
    ``base`` + ``inc`` (ms; go wtime/btime/winc/binc). ``margin`` (ms): how far past its clock an
    engine may go before it loses on time; ``move_timeout`` (s): the longest wait for a
    ``bestmove`` under a node or move-time limit."""

    nodes: int | None = None
    movetime: int | None = None
    base: int | None = None
    inc: int = 0
    margin: int = 1000
    move_timeout: float = 120.0

    @classmethod
    def parse_tc(cls, text: str, **kw) -> TimeControl:
        """``'60+0.5'`` (seconds) -> base 60000 ms, inc 500 ms. Raises ValueError."""
        base, _, inc = text.partition("+")
        b, i = float(base), float(inc) if inc else 0.0
        if b <= 0 or i < 0:
            raise ValueError(f"time control must be BASE+INC with BASE > 0, got '{text}'")
        return cls(base=int(b * 1000), inc=int(i * 1000), **kw)

    def describe(self) -> str:
        if self.nodes is not None:
            return f"nodes {self.nodes}"
        if self.movetime is not None:
            return f"movetime {self.movetime} ms"
        return f"{(self.base or 0) / 1000:g}+{self.inc / 1000:g} s"

    def go_command(self, clocks: tuple[float, float]) -> str:
        """The ``go`` line for the current clocks (ms, white and black)."""
        if self.nodes is not None:
            return format_go(SearchLimits(nodes=self.nodes))
        if self.movetime is not None:
            return format_go(SearchLimits(movetime=self.movetime))
        w, b = (max(0, int(c)) for c in clocks)
        return format_go(SearchLimits(wtime=w, btime=b, winc=self.inc, binc=self.inc))

    def timeout(self, remaining_ms: float) -> float:
        """Seconds to wait for a bestmove."""
        if self.base is not None and self.nodes is None and self.movetime is None:
            return max(0.0, remaining_ms + self.margin) / 1000.0
        if self.movetime is not None:
            return min(self.move_timeout, 3 * self.movetime / 1000.0 + 10.0)
        return self.move_timeout


# ---------------------------------------------------------------------------------------------
# One game
# ---------------------------------------------------------------------------------------------


@dataclass
class GameOutcome:
    """A finished game between two engines.

    ``result``: PTN result token; ``reason``: 'road', 'flat', 'draw', 'ply limit', 'repetition',
    'crash', 'timeout', 'time', 'illegal move', 'protocol'; ``winner``: 0 white, 1 black, None
    draw; ``detail``: what happened for forfeits; ``ptn``: the game as PTN text."""

    white: str
    black: str
    result: str
    reason: str
    winner: int | None
    plies: int
    ptn: str
    detail: str = ""
    moves: list[int] = field(default_factory=list)
    seconds: tuple[float, float] = (0.0, 0.0)

    def score_for(self, colour: int) -> float:
        """1 for a win of ``colour`` (0 white, 1 black), 0.5 for a draw, 0 for a loss."""
        return colour_score(self.winner, colour)


def play_tei_game(
    white: TEIClient,
    black: TEIClient,
    opening: Opening,
    tc: TimeControl | tuple[TimeControl, TimeControl],
    ply_limit: int | None = DEFAULT_PLY_LIMIT,
    threefold: bool = True,
    tags: dict[str, str] | None = None,
) -> GameOutcome:
    """Play one game: the opening's moves, then the engines in turn until the rules or an
    adjudication end it, or an engine forfeits (crash, timeout, lost on time, illegal or
    malformed move: the opponent wins ``1-0``/``0-1``). ``tc``: one time control for both, or
    (white's, black's). Never raises for engine failures; a failed engine is killed so the next
    game restarts it."""
    tcs = tc if isinstance(tc, tuple) else (tc, tc)
    start = opening.start
    game = Game(start, ply_limit=ply_limit, threefold=threefold)
    ptn_moves: list[str] = []
    for code in opening.moves:
        ptn_moves.append(game.position.ptn(code))
        game.play(code)
    engines = (white, black)
    clocks = [float(tcs[0].base or 0), float(tcs[1].base or 0)]
    spent = [0.0, 0.0]
    forfeit: tuple[int, str, str] | None = None  # (loser colour, reason, detail)
    for colour, eng in enumerate(engines):
        try:
            eng.new_game(start.size, start.half_komi)
        except EngineError as e:
            eng.kill()
            forfeit = (colour, e.reason, str(e))
            break
    while forfeit is None and not game.result.over:
        side = game.position.side_to_move
        eng = engines[side]
        tc = tcs[side]
        pos_cmd = format_position(start, ptn_moves)
        go_cmd = tc.go_command((clocks[0], clocks[1]))
        try:
            text, _infos, elapsed = eng.go(pos_cmd, go_cmd, tc.timeout(clocks[side]))
        except EngineError as e:
            eng.kill()
            forfeit = (side, e.reason, str(e))
            break
        spent[side] += elapsed
        if tc.base is not None and tc.nodes is None and tc.movetime is None:
            clocks[side] -= elapsed * 1000.0
            if clocks[side] < -tc.margin:
                forfeit = (side, "time", f"{eng.name} lost on time ({-clocks[side]:.0f} ms over)")
                break
            clocks[side] += tc.inc
        try:
            code = game.position.check_move(text)
        except MoveError as e:
            forfeit = (side, "illegal move", f"{eng.name} played '{text}': {e}")
            break
        ptn_moves.append(game.position.ptn(code))
        game.play(code)
    all_tags = {"Player1": white.name, "Player2": black.name}
    all_tags.update(tags or {})
    comments: dict[int, list[str]] = {}
    if forfeit is not None:
        loser, reason, detail = forfeit
        result = "0-1" if loser == 0 else "1-0"
        winner: int | None = 1 - loser
        comments[len(game.moves)] = [
            f"{'white' if loser == 0 else 'black'} forfeits: {detail.replace('}', ')')}"
        ]
        ptn_game = PTNGame.from_game(game, tags=all_tags, result=result, comments=comments)
    else:
        res = game.result
        assert res.code != RESULT_NONE
        result, reason, winner, detail = str(res), res.reason, res.winner, ""
        ptn_game = PTNGame.from_game(game, tags=all_tags)
    return GameOutcome(
        white=white.name,
        black=black.name,
        result=result,
        reason=reason,
        winner=winner,
        plies=len(game.moves),
        ptn=write_ptn(ptn_game),
        detail=detail,
        moves=list(game.moves),
        seconds=(spent[0], spent[1]),
    )


# ---------------------------------------------------------------------------------------------
# A match
# ---------------------------------------------------------------------------------------------


def _distinct_names(a: TEIClient, b: TEIClient) -> str | None:
    """Name each engine by its ``id name`` (``#1`` / ``#2`` added when they are equal). Returns a
    warning when the two engines announce the same ``id name`` but were started by different
    commands (takzero's name carries its code's digest and its network's: the match may be
    pitting one engine against itself), else None."""
    na = a.id_name or a.name
    nb = b.id_name or b.name
    warning = None
    if na == nb:
        if a.id_name is not None and a.command != b.command:
            warning = (
                f"warning: both engines announce '{na}' though their commands differ: they may run the "
                "same program with the same network (python -m takzero.tei runs the working "
                "directory's takzero before PYTHONPATH's; start the match from a folder without one)"
            )
        na, nb = f"{na}#1", f"{nb}#2"
    a.name, b.name = na, nb
    return warning


def _prefixed(log: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    """``log`` with ``prefix`` and a space before each line."""
    return lambda line: log(f"{prefix} {line}")


def run_tei_match(
    commands: Sequence[str],
    match: MatchSpec,
    tc: TimeControl | Sequence[TimeControl],
    *,
    out_dir: str | Path | None = None,
    printer: Callable[[str], None] = print,
    log: Callable[[str], None] | None = None,
    allow_fallback: bool = False,
    on_game: Callable[[GameOutcome], None] | None = None,
) -> tuple[MatchResult, list[GameOutcome]]:
    """Play ``match`` (:class:`~takzero.matches.spec.MatchSpec`: ``games`` games on ``size``
    boards with ``half_komi``, both given, on paired openings: ``openings`` in turn, else random
    ones of ``opening_plies`` plies drawn with ``seed``; ``ply_limit``, ``threefold``) between the
    two engines ``commands`` (see the module docstring); returns the match from engine 1's point
    of view and the games.

    ``tc``: one time control for both engines, or one per engine (in ``commands`` order; e.g.
    ``go nodes 400`` for one and ``go nodes 1000`` for the other). Before the first game each
    engine is asked for a game of ``size`` (:func:`check_board_size`): an engine whose model does
    not play the size and would play a fallback baseline aborts the match, or with
    ``allow_fallback`` is named after that baseline. A line per finished game, then the score and
    the Elo with its interval (:meth:`MatchResult.describe_elo`: Wilson score interval mapped to
    Elo, "too few games" under 2).

    Raises ValueError for bad arguments (not two engines, no size or komi in ``match``),
    MatchAborted when an engine does not start or cannot play the size (no game is played), and
    MatchInterrupted (a KeyboardInterrupt) on Ctrl-C, after closing the engines and printing the
    score so far. Later engine failures never raise: they lose games (a crashed engine is
    restarted for the next game). ``on_game`` is called with each finished game after its line
    is printed. ``out_dir``: the games go to its ``games.ptn``, or, when an earlier match's is
    there, to the first free ``games_<n>.ptn`` (:func:`takzero.io.files.free_names`; said with
    ``printer``), so an earlier match's games are never replaced."""
    if len(commands) != 2:
        raise ValueError(f"a match needs exactly two engines, got {len(commands)}")
    if match.size is None or match.half_komi is None:
        raise ValueError("a TEI match needs the board size and the komi (MatchSpec.size, half_komi)")
    games, size, half_komi = match.games, match.size, match.half_komi
    seed, ply_limit, threefold = match.seed, match.ply_limit, match.threefold
    tcs = (tc, tc) if isinstance(tc, TimeControl) else tuple(tc)
    if len(tcs) != 2:
        raise ValueError(f"give one time control or one per engine, got {len(tcs)}")
    start = Position.start(size, half_komi=half_komi)
    n_open = match.pairs
    if match.openings is None:
        openings = [Opening(start, o) for o in random_openings(start, n_open, match.opening_plies, seed)]
    else:
        openings = list(match.openings)
        if len(openings) < n_open:
            printer(f"note: {len(openings)} openings for {n_open} pairs; they are reused in turn")
        openings = [openings[i % len(openings)] for i in range(n_open)]
    out_path = None
    stderr_paths: list[Path | None] = [None, None]
    if out_dir is not None:
        out = check_writable_folder(out_dir)
        out_path = out / "games.ptn"
        if out_path.is_dir():
            raise IsADirectoryError(f"{out_path} is a folder, not a PTN file")
        out_path = free_names([out_path])[0]  # an earlier match's games are kept
        if out_path.name != "games.ptn":
            printer(f"{out / 'games.ptn'} exists (an earlier match): this match's games go to {out_path}")
        stderr_paths = [out / "engine1.stderr.log", out / "engine2.stderr.log"]
    clients = [
        TEIClient(cmd, label=f"engine{i + 1}", stderr=stderr_paths[i],
                  log=None if log is None else _prefixed(log, f"engine{i + 1}"))
        for i, cmd in enumerate(commands)
    ]
    try:
        for c in clients:
            try:
                c.start()
            except EngineError as e:
                raise MatchAborted(f"{c.name} ({c.command}) did not start: {e}; no games played") from None
        warning = _distinct_names(*clients)
        if warning is not None:
            printer(warning)
        for c in clients:
            try:
                check_board_size(c, size, half_komi, allow_fallback)
            except EngineError as e:
                raise MatchAborted(f"{c.name} ({c.command}) failed at teinewgame {size}: {e}; "
                                   "no games played") from None
    except BaseException:
        for other in clients:
            other.kill()
        raise
    a, b = clients
    tc_text = (tcs[0].describe() if tcs[0] == tcs[1]
               else f"{a.name}: {tcs[0].describe()}, {b.name}: {tcs[1].describe()}")
    printer(
        f"match: {a.name} vs {b.name}, {games} games, {size}x{size}, komi {start.komi:g}, "
        f"{tc_text}, ply limit {ply_limit}"
    )
    result = MatchResult(a.name, b.name)
    outcomes: list[GameOutcome] = []
    date = _dt.date.today().strftime("%Y.%m.%d")
    interrupted = False
    try:
        for g in range(games):
            k, a_white = g // 2, g % 2 == 0
            opening = openings[k]
            white, black = (a, b) if a_white else (b, a)
            tags = {"Event": "takzero match", "Date": date, "Round": str(g + 1)}
            if opening.moves or opening.start != start:
                tags["Opening"] = opening.describe()
            game_tcs = (tcs[0], tcs[1]) if a_white else (tcs[1], tcs[0])
            outcome = play_tei_game(white, black, opening, game_tcs, ply_limit, threefold, tags)
            outcomes.append(outcome)
            score = outcome.score_for(0 if a_white else 1)
            result.add(None, a_white, score, k)
            if out_path is not None:  # rewritten whole after each game: never half a file
                atomic_write_text(out_path, "\n".join(o.ptn for o in outcomes))
            why = outcome.reason + (f": {outcome.detail}" if outcome.detail else "")
            printer(
                f"game {g + 1}/{games}: {outcome.white} - {outcome.black} {outcome.result} "
                f"({why}), {outcome.plies} plies; {a.name} {result.tally()}"
            )
            if on_game is not None:
                on_game(outcome)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for c in clients:
            if interrupted:
                c.kill()  # an engine in the middle of a search would not answer quit in time
            else:
                c.close()
    if interrupted:
        printer(f"interrupted after {result.num_games} of {games} games (the game in progress is not counted)")
    print_match_score(result, printer)
    if out_path is not None:
        printer(f"games written to {out_path}")
    if interrupted:
        raise MatchInterrupted(result, outcomes)
    return result, outcomes


def print_match_score(result: MatchResult, printer: Callable[[str], None] = print) -> None:
    """The score line and the Elo line of a match (also of an interrupted one)."""
    a, b = result.player_a, result.player_b
    score = f"{result.score:.3f}" if result.num_games else "-"
    printer(f"score of {a} vs {b}: {result.tally()} [{score}] {result.num_games} games")
    printer(f"elo difference ({a} - {b}): {result.describe_elo()}")
