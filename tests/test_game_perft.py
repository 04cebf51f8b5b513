"""Perft and legal-move counts against tests/data/perft.json and legal_move_counts.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from takzero.game import core
from takzero.game.moves import format_ptn
from takzero.game.perft import divide, perft
from takzero.game.position import Position

DATA = Path(__file__).parent / "data"
PERFT = json.loads((DATA / "perft.json").read_text())
COUNTS = json.loads((DATA / "legal_move_counts.json").read_text())

# Every depth of every record's ``perft`` list runs (about 6 s in all on one core of the development
# machine: bulk counting makes even the 180-million counts take 1-2 s). Depths above 20 million
# leaves are marked ``slow`` so that ``-m "not slow"`` gives a quick run; nothing is skipped. The 6x6
# depth-5 count (``benchmark_depth5``, 1.25 billion, ~5 s) is checked by scripts/bench_perft.py.
SLOW_LEAVES = 20_000_000


def _position(record: dict) -> Position:
    return Position.from_tps(record["tps"], komi=record.get("komi", 0.0))


def _perft_params() -> list:
    params = []
    for rec in PERFT:
        for depth, count in enumerate(rec["perft"]):
            marks = [pytest.mark.slow] if count > SLOW_LEAVES else []
            params.append(pytest.param(rec["id"], depth, count, marks=marks, id=f"{rec['id']}-d{depth}"))
    return params


@pytest.mark.parametrize(("record_id", "depth", "expected"), _perft_params())
def test_perft_record(record_id: str, depth: int, expected: int) -> None:
    rec = next(r for r in PERFT if r["id"] == record_id)
    pos = _position(rec)
    before = pos.state.copy()
    assert perft(pos, depth) == expected
    assert np.array_equal(pos.state, before), "perft must leave the position unchanged"


@pytest.mark.parametrize("rec", [r for r in PERFT if "perft_terminal_counted_as_1" in r], ids=lambda r: r["id"])
def test_perft_other_convention(rec: dict) -> None:
    """Records that also give the counts of engines that count a finished position as 1."""
    pos = _position(rec)
    other = rec["perft_terminal_counted_as_1"]
    assert [perft(pos, d, terminal_counts_one=True) for d in range(len(other))] == other
    # The conventions differ here because suicides end games inside the tree.
    assert other != rec["perft"][: len(other)]


def test_perft_3x3_start_other_convention_depth6() -> None:
    # perft.json's note: another engine reports 3,715,592 (finished positions counted as 1).
    assert perft(Position.start(3), 6, terminal_counts_one=True) == 3_715_592
    assert perft(Position.start(3), 6) == 3_712_952


@pytest.mark.parametrize("rec", [r for r in PERFT if r.get("moves_from_start")], ids=lambda r: r["id"])
def test_perft_records_moves_from_start(rec: dict) -> None:
    pos = Position.start(rec["size"], komi=rec["komi"])
    for move in rec["moves_from_start"]:
        pos = pos.play(move)
    assert pos.to_tps() == _position(rec).to_tps()
    assert pos == _position(rec)


@pytest.mark.parametrize("rec", [r for r in PERFT if r["id"].startswith(("tiltak", "max-stacks", "capstone"))],
                         ids=lambda r: r["id"])
def test_perft_same_under_symmetries(rec: dict) -> None:
    pos = _position(rec)
    depth = min(3, len(rec["perft"]) - 1)
    for t in range(8):
        assert perft(pos.transform(t), depth) == rec["perft"][depth], f"transform {t}"


def test_perft_divide_sums_and_names_moves() -> None:
    rec = next(r for r in PERFT if r["id"] == "capstone-blocking-smash-5x5")
    pos = _position(rec)
    parts = divide(pos, 2)
    assert len(parts) == rec["perft"][1]
    assert sum(parts.values()) == rec["perft"][2]
    assert any(k.endswith("*") for k in parts), "flattening spreads are marked with *"
    for text, count in parts.items():
        assert count == perft(pos.play(text), 1)


def test_perft_argument_errors() -> None:
    with pytest.raises(ValueError, match="depth"):
        perft(Position.start(5), -1)
    with pytest.raises(ValueError, match="depth"):
        divide(Position.start(5), 0)
    with pytest.raises(TypeError):
        perft("x5/x5/x5/x5/x5 1 1", 1)  # type: ignore[arg-type]
    assert perft(Position.start(5).state, 2) == 600  # a raw state array works too


def test_perft_finished_position_counts_zero() -> None:
    # A18: the loaded position already holds a black road.
    pos = Position.from_tps("2,1,1,1,1,2S/1,12,1,x2,111121C/x,2,2,212,2C,11121/2,2,1,1,12,2/x3,1,1,x/"
                            "x2,2,21,x,112S 1 36")
    assert pos.is_over
    assert [perft(pos, d) for d in range(3)] == [1, 0, 0]
    assert [perft(pos, d, terminal_counts_one=True) for d in range(3)] == [1, 1, 1]


@pytest.mark.parametrize("rec", COUNTS, ids=lambda r: r["id"])
def test_legal_move_count(rec: dict) -> None:
    pos = _position(rec)
    codes = pos.legal_move_codes()
    assert len(codes) == rec["legal_moves"]
    assert core.count_moves(pos.state) == rec["legal_moves"]
    assert len(set(codes.tolist())) == len(codes), "no move is generated twice"
    # Every generated move survives the Python-side legality check and a PTN round trip.
    for code in codes.tolist():
        assert pos.check_move(format_ptn(code, pos.size)) == code
