"""The game loop for in-process players: one loop (:func:`play_games`) that gating, evaluation,
the arena helpers and the benchmarks all use.

A side of a match is either batchable (``side.batchable``: a :class:`NetSide`, an inference
evaluator plus a search config, or a network player without a time limit; ``side.batched(...)``
searches all games of the call at once, one network call per search step for every game where it
is to move, ``takzero.players.network.NetworkSearch``) or any :class:`takzero.players.Player`
(asked one game at a time). :func:`play_games` plays many games at
once; :func:`play_game` (one game), :func:`run_match` (paired openings, game after game, with an
early stop) and :func:`play_match` (paired openings, all games at once) are thin calls of it.

Games are played with :class:`takzero.game.Game`, so the optional adjudications are draws: a ply
limit (``ply_limit`` plies in the game, opening plies included) and, by default, threefold
repetition (Tiltak's rule: a position seen three times since the last placement). Evaluation games
never enter the replay buffer.

TEI engines (external processes with clocks and forfeits) are played by their own loop,
``takzero.protocols.tei.match``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

import numpy as np

from takzero.game.position import Game, Position
from takzero.matches.openings import random_openings
from takzero.matches.results import GameRecord, MatchInterrupted, MatchResult
from takzero.players.base import BatchSearch, Player, PlayerMove, as_player_move
from takzero.players.network import NetworkSearch
from takzero.search import SearchConfig

#: The ply limit of a match or evaluation game unless one is given (a draw at that many plies,
#: opening plies included): ``run_match``, ``python -m takzero.evaluate`` and ``python -m
#: takzero.match`` (``takzero.protocols.tei.match``) share it. Tak games end far sooner (6x6:
#: 40-100 plies between networks), so it only stops a game that shuffles without end.
DEFAULT_PLY_LIMIT = 300


def komi_override_warning(model: str, model_half_komi: int, half_komi: int, source: str = "--komi") -> str:
    """The one line that says a command plays ``model`` at another komi than the one it was
    trained for (a model's own komi, its ``half_komi`` metadata, is the default of every tool
    that plays it: ``takzero.match``, ``takzero.evaluate``, ``takzero.playtak``, ``takzero.play``):
    ``'warning: komi 0 (--komi) is not the komi 2 that m.pt was trained for; its values may be
    off near the end of the game'``. Komis in half points; ``source``: where the komi came from."""
    return (f"warning: komi {half_komi / 2:g} ({source}) is not the komi {model_half_komi / 2:g} that "
            f"{model} was trained for; its values may be off near the end of the game")


@dataclass
class NetSide:
    """A network side of a batched match: ``evaluator`` with ``simulations`` per move under
    ``config`` (noise off). The first ``sampling_plies`` plies of a game after its opening are
    sampled from the visit counts with temperature 1 so that games differ; later moves take the
    most visited child."""

    name: str
    evaluator: Any
    config: SearchConfig
    simulations: int
    sampling_plies: int = 0

    #: A network side is always searched batched.
    batchable = True

    def batched(self, num_games: int, seed: int = 0, sampling_plies: int | None = None) -> NetworkSearch:
        """The batched search of this side over ``num_games`` games (``sampling_plies`` None:
        the side's own)."""
        return NetworkSearch(
            self.evaluator, self.config, num_games, int(self.evaluator.size), seed=seed,
            simulations=self.simulations, tinue_nodes=self.config.tinue_nodes,
            flat_endgame_nodes=self.config.flat_endgame_nodes,
            sampling_plies=self.sampling_plies if sampling_plies is None else sampling_plies,
            name=self.name,
        )


Side = NetSide | Player


class _Batchable(Protocol):
    """A side whose ``batchable`` is True: a :class:`NetSide`, or a player with ``batched``
    (``takzero.players.base.BasePlayer``)."""

    name: str

    def batched(self, num_games: int, seed: int = 0) -> BatchSearch: ...


def _batchable(side: Side) -> TypeGuard[_Batchable]:
    return bool(getattr(side, "batchable", False))


def _player(side: Side) -> Player:
    """``side``, not batchable, as the player it is (a :class:`NetSide` is always batchable)."""
    assert not isinstance(side, NetSide), side
    return side


def _seed_for(seed: int | None, *keys: int) -> int | None:
    if seed is None:
        return None
    return int(np.random.SeedSequence([seed, *keys]).generate_state(1)[0])


def play_games(
    side_a: Side,
    side_b: Side,
    start: Position,
    openings: Sequence[Sequence[int | str]],
    a_white: Sequence[bool],
    ply_limit: int | None,
    threefold: bool = True,
    seeds: tuple[int | None, int | None] = (None, None),
    sample_seed: int | None = None,
    on_game: Callable[[int, GameRecord], None] | None = None,
) -> list[GameRecord]:
    """Play ``len(openings)`` games between A and B from ``start``, all at once: game i plays
    ``openings[i]`` (codes or PTN) first, then A and B in turn (A white when ``a_white[i]``)
    until the rules end it or an adjudication draws it (``ply_limit`` plies, None for none;
    threefold repetition if ``threefold``).

    Each step, side A then side B moves in every open game where it is to move: a batchable
    side (``side.batchable``, e.g. a :class:`NetSide`) searches all of them in one batched
    search (``side.batched``: one tree per game, reused between moves), a player is asked one
    game at a time (with a copy of the position). Every ply (opening plies included) is then
    told to each player side (``observe``) and to the batched searches.

    Seeds: ``seeds[k]`` is side k's: a player side gets ``reset(size, half_komi, seeds[k])``
    once before the games (None leaves its random stream running; a player on both sides is
    reset once, with A's seed, and told each ply once); a batchable side seeds its batched
    search with it (None: 0). ``sample_seed`` seeds the sampling of the first plies of sides
    with ``sampling_plies``.

    ``on_game(i, record)`` is called as soon as game i is over (games end in any order), e.g.
    for a line per finished game or to keep the finished games when the caller is interrupted.

    Returns one :class:`GameRecord` per game (``infos``: the answer of the side that moved per
    ply, None for opening plies; a network side's answer has the root value, the simulations
    and the PV; ``seconds``: wall time per colour, a batched search shared evenly between its
    games).

    Raises ValueError if ``start`` is over, the opening lists do not match, or an opening ends
    the game, and ``takzero.game.IllegalMoveError`` (a ValueError) for an illegal move.
    """
    if start.is_over:
        raise ValueError(f"the start position is already over ({start.result})")
    if len(openings) != len(a_white):
        raise ValueError(f"{len(openings)} openings but {len(a_white)} colour assignments")
    sides = (side_a, side_b)
    n_games = len(openings)
    players = [  # (side index, player); a player on both sides once
        (k, _player(s))
        for k, s in enumerate(sides)
        if not _batchable(s) and (k == 0 or s is not side_a)
    ]
    for k, player in players:
        player.reset(start.size, start.half_komi, seeds[k])
    games = [Game(start, ply_limit=ply_limit, threefold=threefold) for _ in range(n_games)]
    ptn_moves: list[list[str]] = [[] for _ in range(n_games)]
    infos: list[list[PlayerMove | None]] = [[] for _ in range(n_games)]
    seconds = np.zeros((n_games, 2))
    trees: dict[int, BatchSearch] = {}

    def record(gi: int) -> GameRecord:
        game = games[gi]
        result = game.result
        white, black = (side_a, side_b) if a_white[gi] else (side_b, side_a)
        return GameRecord(
            white=white.name,
            black=black.name,
            start=start.copy(),
            moves=list(game.moves),
            ptn_moves=ptn_moves[gi],
            opening_plies=opening_plies[gi],
            result=str(result),
            reason=result.reason,
            winner=result.winner,
            infos=infos[gi],
            seconds=(float(seconds[gi, 0]), float(seconds[gi, 1])),
        )

    def play(gi: int, code: int, answer: PlayerMove | None) -> None:
        game = games[gi]
        before = game.position.copy()
        ptn_moves[gi].append(before.ptn(code))
        game.play(code)
        infos[gi].append(answer)
        for tree in trees.values():
            tree.observe(gi, before, code)
        for _, player in players:
            observe = getattr(player, "observe", None)
            if observe is not None:
                observe(before, code)

    for gi, opening in enumerate(openings):
        for mv in opening:
            if games[gi].result.over:
                raise ValueError("the opening ends the game before its last move")
            play(gi, games[gi].position.check_move(mv), None)
        if games[gi].position.is_over:
            raise ValueError("the opening ends the game")
    opening_plies = [len(o) for o in openings]
    for k, side in enumerate(sides):
        if _batchable(side):
            side_seed = seeds[k]
            trees[k] = side.batched(n_games, side_seed if side_seed is not None else 0)
            for gi, game in enumerate(games):
                if not game.position.is_over:
                    trees[k].reset(gi, game.position)
    rng = np.random.default_rng(sample_seed)

    while True:
        open_games = [gi for gi, g in enumerate(games) if not g.result.over]
        if not open_games:
            break
        # Who is to move in each open game: side 0 (A) or 1 (B).
        mover = {
            gi: 0 if (games[gi].position.side_to_move == 0) == a_white[gi] else 1
            for gi in open_games
        }
        chosen: dict[int, PlayerMove] = {}
        for k, side in enumerate(sides):
            mine = [gi for gi in open_games if mover[gi] == k]
            if not mine:
                continue
            if k in trees:
                t0 = time.perf_counter()
                positions = [games[gi].position for gi in mine]
                plies = [len(games[gi].moves) - opening_plies[gi] for gi in mine]
                chosen.update(trees[k].choose_many(mine, positions, plies, rng))
                share = (time.perf_counter() - t0) / len(mine)
                for gi in mine:
                    seconds[gi, games[gi].position.side_to_move] += share
            else:
                for gi in mine:
                    t0 = time.perf_counter()
                    chosen[gi] = as_player_move(_player(side).choose(games[gi].position.copy()))
                    seconds[gi, games[gi].position.side_to_move] += time.perf_counter() - t0
        for gi, answer in chosen.items():
            play(gi, answer.code, answer)
            if on_game is not None and games[gi].result.over:
                on_game(gi, record(gi))

    return [record(gi) for gi in range(n_games)]


def play_game(
    white: Player,
    black: Player,
    start: Position,
    ply_limit: int | None,
    threefold: bool = True,
    opening_moves: Sequence[int | str] = (),
    seed: int | None = None,
) -> GameRecord:
    """Play one game from ``start`` (:func:`play_games` with one game): ``opening_moves`` (codes
    or PTN) are played first, then ``white`` and ``black`` choose in turn until the rules end the
    game or an adjudication draws it (``ply_limit`` plies in the game, None for no limit;
    threefold repetition if ``threefold``).

    Both players get ``reset(size, half_komi, seed)`` first (per-colour seeds derived from
    ``seed``; None leaves their random streams running) and ``observe`` after every ply. A player
    may answer a bare move code instead of a :class:`PlayerMove`.

    Raises ValueError if ``start`` is already over or the opening ends the game, and
    ``takzero.game.IllegalMoveError`` (a ValueError) if a player or the opening gives an illegal
    move.
    """
    (record,) = play_games(
        white,
        black,
        start,
        [tuple(opening_moves)],
        [True],
        ply_limit,
        threefold=threefold,
        seeds=(_seed_for(seed, 0), _seed_for(seed, 1)),
    )
    return record


def run_match(
    player_a: Player,
    player_b: Player,
    size: int,
    half_komi: int = 0,
    num_openings: int = 10,
    ply_limit: int | None = DEFAULT_PLY_LIMIT,
    seed: int = 0,
    openings: Iterable[Sequence[int | str]] | None = None,
    opening_plies: int = 2,
    threefold: bool = True,
    start: Position | None = None,
    stop: Callable[[MatchResult], bool] | None = None,
    on_game: Callable[[GameRecord], None] | None = None,
) -> MatchResult:
    """Play ``player_a`` against ``player_b`` on paired openings, one game after the other: each
    opening is played twice, A white then B white, so the match has ``2 * num_openings`` games.

    Openings are ``openings`` (move sequences, codes or PTN, from the start) when given, otherwise
    ``num_openings`` distinct random sequences of ``opening_plies`` plies (:func:`random_openings`
    with ``seed``). ``start`` defaults to the empty ``size`` board with ``half_komi``. Each game
    is a :func:`play_game` with its own seed derived from ``seed``, opening and colour, so a match
    is reproducible. ``stop(result)`` is asked after each pair (e.g. an SPRT that has decided) and
    ends the match early when it returns True; ``on_game(record)`` is called after each game
    (e.g. PTN logging).

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


def play_match(
    side_a: Side,
    side_b: Side,
    start: Position,
    openings: Sequence[Sequence[int | str]],
    ply_limit: int | None,
    seed: int = 0,
    threefold: bool = True,
    on_game: Callable[[MatchResult, GameRecord], None] | None = None,
) -> MatchResult:
    """Play every opening twice (A white, then B white) with all games at once
    (:func:`play_games`); a batchable side (a :class:`NetSide`, a network player without a time
    limit) searches all its games at once.
    ``on_game(result, record)`` is called after each finished game with the match so far (the
    finished games, in the order they finished).

    Seeds derived from ``seed``: a player side k is reset with ``seed + 104729 * k``, a batchable
    side's search is seeded with ``seed + 7919 * k`` and the sampled plies with ``seed`` (the
    evaluator's scheme since its first version, kept so that matches replay exactly). Returns
    A's :class:`MatchResult` with the :class:`GameRecord` s. Raises ValueError like
    :func:`play_games`, and :class:`~takzero.matches.results.MatchInterrupted` (a
    KeyboardInterrupt) on Ctrl-C, with the games finished so far in its ``result``.
    """
    sides = (side_a, side_b)
    for side in sides:
        other = getattr(side, "model_size", None)
        if other is not None and int(other) != start.size:
            raise ValueError(f"{side.name} plays {other}x{other}, not {start.size}x{start.size}")
    seed_a, seed_b = (
        seed + (7919 if _batchable(side) else 104729) * k for k, side in enumerate(sides)
    )
    paired = [opening for opening in openings for _ in (0, 1)]
    a_white = [True, False] * len(openings)
    so_far = MatchResult(side_a.name, side_b.name)

    def finished(gi: int, record: GameRecord) -> None:
        so_far.add(record, a_white[gi], record.score_for(0 if a_white[gi] else 1), gi // 2)
        if on_game is not None:
            on_game(so_far, record)

    try:
        records = play_games(
            sides[0], sides[1], start, paired, a_white, ply_limit, threefold, (seed_a, seed_b),
            sample_seed=seed, on_game=finished,
        )
    except MatchInterrupted:
        raise
    except KeyboardInterrupt:
        raise MatchInterrupted(so_far) from None
    result = MatchResult(side_a.name, side_b.name)  # in game order (so_far is in finishing order)
    for gi, record in enumerate(records):
        result.add(record, a_white[gi], record.score_for(0 if a_white[gi] else 1), gi // 2)
    return result


__all__ = [
    "DEFAULT_PLY_LIMIT",
    "NetSide",
    "komi_override_warning",
    "Side",
    "play_game",
    "play_games",
    "play_match",
    "run_match",
]
