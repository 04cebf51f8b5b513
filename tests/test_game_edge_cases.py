"""Edge cases found by trying to break the API: finished positions at move 1, empty reserves,
komi and move-number limits."""

from __future__ import annotations

import math

import pytest

from takzero.game import Position, TPSError
from takzero.game.core import count_moves


def test_a_full_board_at_move_one_is_over() -> None:
    pos = Position.from_tps("1,2,1/2,1,2/1,2,1 1 1")
    assert pos.is_over and str(pos.result) == "F-0"
    assert pos.legal_moves() == [] and count_moves(pos.state) == 0


def test_a_road_at_move_one_is_over() -> None:
    assert str(Position.from_tps("1,1,1,1/x4/x4/x4 1 1").result) == "R-0"


def test_opening_placement_needs_the_opponents_stone() -> None:
    # White's first ply places a black flat from black's reserve; black has no stone left (only
    # its capstone), so no placement is generated and none may be played.
    pos = Position.from_tps("22,x4/x5/x5/x5/x5 1 1", flats=2, caps=1)
    assert not pos.is_over
    assert pos.stones(1) == 0 and pos.capstones(1) == 1
    assert pos.legal_moves() == [] and count_moves(pos.state) == 0
    with pytest.raises(ValueError):
        pos.play("b1")


@pytest.mark.parametrize("kwargs", [{"flats": 0}, {"flats": 2.5}, {"caps": -1}, {"half_komi": 1.7}])
def test_bad_reserves_and_half_komi_are_rejected(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Position.start(5, **kwargs)


@pytest.mark.parametrize("komi", [math.inf, math.nan, 1e300, 0.3])
def test_bad_komi_is_rejected(komi: float) -> None:
    with pytest.raises(ValueError, match="komi"):
        Position.start(6, komi=komi)


@pytest.mark.parametrize("tps", ["x4/x4/x4/x4 1 99999999999999999999", "x0,x4/x4/x4/x4/x4 1 1", "x4/x4/x4/x4 1 ١"])
def test_bad_tps_numbers_raise_tps_error(tps: str) -> None:
    with pytest.raises(TPSError):
        Position.from_tps(tps)
