"""Property tests over random legal games on every board size (hypothesis): notation round trips,
symmetry invariance, make/unmake exactness and incremental hashing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from takzero.game import core
from takzero.game.moves import (
    Move,
    format_playtak,
    format_ptn,
    parse_playtak,
    parse_ptn,
    pattern_to_drops,
    square_name,
)
from takzero.game.perft import perft
from takzero.game.position import Game, Position
from takzero.game.ptn import PTNGame, read_ptn, write_ptn
from takzero.game.symmetry import inverse, transform_move

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class RandomGame:
    game: Game
    positions: list[Position]  # the start and the position after each ply

    @property
    def final(self) -> Position:
        return self.positions[-1]


@st.composite
def random_games(draw: st.DrawFn, max_plies: int = 40) -> RandomGame:
    """A random legal game: size 3..8, komi, and up to ``max_plies`` plies that prefer spreads
    (so stacks grow) where the drawn bit says so."""
    size = draw(st.integers(3, 8))
    komi = draw(st.sampled_from([0.0, 0.5, 2.0, -1.5]))
    plies = draw(st.integers(0, max_plies))
    game = Game(Position.start(size, komi=komi))
    positions = [game.position.copy()]
    for _ in range(plies):
        codes = game.position.legal_move_codes().tolist()
        if not codes:
            break
        spreads = [c for c in codes if (c >> 6) & 3 == 0]
        pool = spreads if spreads and draw(st.booleans()) else codes
        game.play(pool[draw(st.integers(0, len(pool) - 1))])
        positions.append(game.position.copy())
    return RandomGame(game, positions)


def _explicit_ptn(code: int, size: int) -> str:
    """The longest PTN form: count and drops always written (``1c4>1``), flats with ``F``."""
    sq = code & 63
    if (code >> 6) & 3:
        return "FSC"[((code >> 6) & 3) - 1] + square_name(sq, size)
    drops = pattern_to_drops((code >> 10) & 255)
    return f"{sum(drops)}{square_name(sq, size)}{core.DIR_CHARS[(code >> 8) & 3]}" + "".join(map(str, drops))


@SETTINGS
@given(random_games())
def test_tps_round_trip(rg: RandomGame) -> None:
    for pos in rg.positions:
        tps = pos.to_tps()
        back = Position.from_tps(tps, half_komi=pos.half_komi)
        assert back.to_tps() == tps
        assert np.array_equal(back.state, pos.state), tps


@SETTINGS
@given(random_games())
def test_ptn_write_read_round_trip(rg: RandomGame) -> None:
    ptn = PTNGame.from_game(rg.game, tags={"Event": "property test"})
    text = write_ptn(ptn)
    (back,) = read_ptn(text)
    assert back == ptn
    assert back.moves == rg.game.moves
    assert back.final_position() == rg.final
    assert write_ptn(back) == text


@SETTINGS
@given(random_games(), st.integers(0, 7))
def test_symmetry_invariance(rg: RandomGame, t: int) -> None:
    pos = rg.final
    size = pos.size
    image = pos.transform(t)
    assert int(image.state[core.I_HASH]) == int(core.hash_from_scratch(image.state))
    assert image.transform(inverse(t)) == pos
    legal = pos.legal_move_codes().tolist()
    assert {transform_move(c, size, t) for c in legal} == set(image.legal_move_codes().tolist())
    assert perft(image, 2) == perft(pos, 2)
    for code in legal[:: max(1, len(legal) // 6)]:
        moved = image.play(transform_move(code, size, t))
        assert moved == pos.play(code).transform(t)


@SETTINGS
@given(random_games(max_plies=60))
def test_make_unmake_and_hash(rg: RandomGame) -> None:
    for pos in rg.positions:
        assert int(pos.state[core.I_HASH]) == int(core.hash_from_scratch(pos.state))
        assert core.count_moves(pos.state) == len(pos.legal_move_codes())
    pos = rg.final.copy()
    before = pos.state.copy()
    for code in pos.legal_move_codes().tolist():
        undo = pos.make(code)
        assert int(pos.state[core.I_HASH]) == int(core.hash_from_scratch(pos.state))
        assert int(pos.state[core.I_RESULT]) == int(Position.from_tps(pos.to_tps(), half_komi=pos.half_komi)
                                                   .state[core.I_RESULT])
        pos.unmake(code, undo)
        assert np.array_equal(pos.state, before), format_ptn(code, pos.size)


@SETTINGS
@given(random_games())
def test_move_notation_round_trips(rg: RandomGame) -> None:
    for pos in rg.positions[-3:]:
        size = pos.size
        for code in pos.legal_move_codes().tolist():
            assert parse_ptn(format_ptn(code, size), size) == code
            assert parse_ptn(_explicit_ptn(code, size), size) == code
            assert parse_ptn(pos.ptn(code) + "'!?", size) == code
            assert parse_playtak(format_playtak(code, size), size) == code
            move = Move(code, size)
            assert Move.from_ptn(str(move), size) == move
            assert Move.from_playtak(move.to_playtak(), size) == move
            assert move.is_placement == bool((code >> 6) & 3)
            if not move.is_placement:
                assert move.count == sum(move.drops) <= size
