"""Playtak server notation against the server's own rule: in ``M FROM TO D1 D2 ...`` the second
square is the last one dropped on, and there are as many drop counts as squares moved
(USTakAssociation/playtak-api, ``Game.java`` ``moveMove``). Checked on every legal move of random
games on every size, against a walk of the PTN text (an independent path), plus the examples of
the docs and of the docstrings."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from takzero.game import moves as moves_module
from takzero.game.moves import MoveError, format_playtak, format_ptn, parse_playtak, parse_ptn
from takzero.game.position import Position

ROOT = Path(__file__).resolve().parents[1]
_PTN_SPREAD = re.compile(r"^([1-8]?)([a-h])([1-8])([-+<>])([1-8]*)$")
_STEP = {"+": (0, 1), "-": (0, -1), ">": (1, 0), "<": (-1, 0)}


def _server_form(ptn: str) -> str:
    """The server's text of a PTN move, built by walking the squares the PTN names."""
    if ptn[0] in "SC" or len(ptn) == 2:
        piece = {"S": " W", "C": " C"}.get(ptn[0], "")
        return f"P {ptn[-2:].upper()}{piece}"
    m = _PTN_SPREAD.match(ptn)
    assert m, ptn
    count = int(m.group(1) or 1)
    drops = [int(c) for c in m.group(5)] or [count]
    df, dr = _STEP[m.group(4)]
    file, rank = ord(m.group(2)), int(m.group(3))
    end = f"{chr(file + df * len(drops))}{rank + dr * len(drops)}"  # the square of the last drop
    return f"M {m.group(2).upper()}{rank} {end.upper()} " + " ".join(map(str, drops))


@pytest.mark.parametrize("size", range(3, 9))
def test_every_legal_move_matches_the_server_rule(size: int) -> None:
    rng = np.random.default_rng(size)
    checked = 0
    for _game in range(4):
        pos = Position.start(size)
        while not pos.is_over and pos.ply < 80:
            codes = pos.legal_move_codes().tolist()
            for code in codes:
                text = format_playtak(code, size)
                assert text == _server_form(format_ptn(code, size))
                assert parse_playtak(text, size) == code
                checked += 1
            pos = pos.play(int(rng.choice(codes)))
    assert checked > 1000


def test_the_documented_examples_agree() -> None:
    assert parse_playtak("M A2 A4 2 1", 6) == parse_ptn("3a2+21", 6)
    assert format_playtak(parse_ptn("3a2+21", 6), 6) == "M A2 A4 2 1"
    # The docs (tak-rules.md) and the docstrings give the playtak example with its PTN.
    rules = (ROOT / "docs" / "tak-rules.md").read_text(encoding="utf-8")
    m = re.search(r"`(M [A-H]\d [A-H]\d[ \d]*)` \(move from .*?PTN `([^`]+)`", rules, re.S)
    assert m, "tak-rules.md lost its playtak spread example"
    assert parse_playtak(m.group(1), 6) == parse_ptn(m.group(2), 6)
    for doc in (parse_playtak.__doc__, format_playtak.__doc__, moves_module.__doc__ or ""):
        for example in re.findall(r"``(M [A-H]\d [A-H]\d[ \d]*)``", doc or ""):
            assert format_playtak(parse_playtak(example, 6), 6) == example


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("M A2 A5 2 1", "end on A4, not A5"),  # one square beyond the last drop: the server refuses it
        ("M A2 A3 2 1", "end on A4, not A3"),
        ("M A2 B3 1", "not on one line"),
        ("M A2 A4 2 0", "bad drop counts"),
        ("M A1 A8 1 1 1 1 1 1 1", "off the 6x6 board"),
        ("P A1 X", "piece must be W or C"),
    ],
)
def test_bad_server_moves_say_why(text: str, why: str) -> None:
    with pytest.raises(MoveError, match=why):
        parse_playtak(text, 6)
