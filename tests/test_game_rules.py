"""Rules: tests/data/rules_cases.json (results, legality, TPS after moves, adjudications), tactics.json
(wins in one), ply limit, tall stacks beyond one 62-bit colour word, and error messages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from takzero.game import core
from takzero.game.core import CAP, DIR_CHARS, FLAT, WALL
from takzero.game.moves import MoveError, format_ptn, parse_ptn, pattern_to_drops, square_name
from takzero.game.position import Game, IllegalMoveError, Position, TPSError

DATA = Path(__file__).parent / "data"
RULES = json.loads((DATA / "rules_cases.json").read_text())
TACTICS = json.loads((DATA / "tactics.json").read_text())

# What the reason for each illegal move in rules_cases.json must mention (the rule it breaks).
ILLEGAL_REASON = {
    "B1-opening-no-wall-7x7": "first turn",
    "B2-opening-no-capstone-8x8": "first turn",
    "B3-no-second-capstone-6x6": "no capstone left",
    "B5-no-spread-onto-wall-4x4": "wall",
    "B6-no-spread-onto-capstone-7x7": "onto the capstone",
    "B7-carry-limit-3x3": "carry limit",
    "B8-take-more-than-stack-3x3": "has only 2",
    "B9-stack-not-controlled-5x5": "controlled by the opponent",
    "B10-spread-off-board-5x5": "off the board",
    "B11-carry-limit-5x5": "carry limit",
    "B14-smash-needs-lone-capstone-5x5": "alone",
}


def _start(case: dict) -> Position:
    start = case["start"]
    if "tps" in start:
        pos = Position.from_tps(start["tps"], komi=case["komi"])
    else:
        pos = Position.start(case["size"], komi=case["komi"])
    assert pos.size == case["size"]
    return pos


def _play_all(pos: Position, moves: list[str]) -> Position:
    for move in moves:
        assert not pos.is_over, f"the game ended before {move}"
        pos = pos.play(move)
    return pos


def _result_string(result) -> str | None:
    return str(result) if result.over else None


# ---------------------------------------------------------------------------------------------
# rules_cases.json
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", RULES["cases"], ids=lambda c: c["id"])
def test_rules_case(case: dict) -> None:
    pos = _play_all(_start(case), case["start"].get("moves", []))
    pos = _play_all(pos, case["play"])
    expect = case["expect"]
    legal = set(pos.legal_move_codes().tolist())
    checked = 0
    if "result" in expect:
        assert _result_string(pos.result) == expect["result"]
        checked += 1
    if "illegal_move" in expect:
        text = expect["illegal_move"]
        with pytest.raises(MoveError) as info:
            pos.check_move(text)
        assert ILLEGAL_REASON[case["id"]] in str(info.value)
        try:
            code = parse_ptn(text, pos.size)
        except MoveError:  # not even a move on this board (carry limit, off the board)
            assert text not in {format_ptn(c, pos.size) for c in legal}
        else:
            assert code not in legal, "an illegal move must not be generated"
            assert isinstance(info.value, IllegalMoveError)
        checked += 1
    if "legal_move" in expect:
        code = pos.check_move(expect["legal_move"])
        assert code in legal
        checked += 1
    if "tps_after" in expect:
        assert pos.to_tps() == expect["tps_after"]
        assert Position.from_tps(expect["tps_after"], komi=case["komi"]).to_tps() == expect["tps_after"]
        checked += 1
    if "legal_move_count" in expect:
        assert len(legal) == expect["legal_move_count"] == core.count_moves(pos.state)
        checked += 1
    assert checked == len(expect), f"unhandled expectation in {sorted(expect)}"


def test_rules_cases_cover_every_illegal_move() -> None:
    ids = {c["id"] for c in RULES["cases"] if "illegal_move" in c["expect"]}
    assert ids == set(ILLEGAL_REASON)


@pytest.mark.parametrize("case", RULES["adjudication_cases"], ids=lambda c: c["id"])
def test_adjudication_case(case: dict) -> None:
    moves = case["start"].get("moves", []) + case["play"]
    adjudicated = Game(_start(case), threefold=True)
    official = Game(_start(case))
    for move in moves:
        adjudicated.play(move)
        official.play(move)
    assert _result_string(adjudicated.result) == case["expect"]["result"]
    if adjudicated.result.over:
        assert adjudicated.result.reason == "repetition"
        assert not adjudicated.position.is_over, "repetition is an adjudication, not a rules result"
    assert _result_string(official.result) == case["official_rules_result"]


def test_threefold_undo_rebuilds_history() -> None:
    case = next(c for c in RULES["adjudication_cases"] if c["id"] == "A14-repetition-threefold-5x5")
    game = Game(_start(case), threefold=True)
    for move in case["start"]["moves"]:
        game.play(move)
    assert game.result.reason == "repetition"
    game.undo()
    assert not game.result.over
    game.play(case["start"]["moves"][-1])
    assert game.result.reason == "repetition"


def test_ply_limit() -> None:
    fill = ["a3", "c1", "c2", "c3", "b3", "b2", "b1", "a1"]  # A4: a2 then fills the 3x3 board
    game = Game(Position.start(3), ply_limit=8)
    for i, move in enumerate(fill):
        assert not game.result.over, f"over after {i} plies"
        game.play(move)
    assert game.result.over and game.result.is_draw
    assert game.result.reason == "ply limit"
    assert str(game.result) == "1/2-1/2"
    assert not game.position.is_over
    # A rules result on the limit ply wins over the adjudication.
    game = Game(Position.start(3), ply_limit=9)
    for move in [*fill, "a2"]:
        game.play(move)
    assert (str(game.result), game.result.reason) == ("F-0", "flat")
    # Without a limit the game goes on.
    game = Game(Position.start(3))
    for move in fill:
        game.play(move)
    assert not game.result.over
    with pytest.raises(ValueError, match="ply_limit"):
        Game(Position.start(3), ply_limit=0)


def test_no_move_after_the_end() -> None:
    case = next(c for c in RULES["cases"] if c["id"] == "A4-board-fill-3x3")
    game = Game(_start(case))
    for move in case["start"]["moves"] + case["play"]:
        game.play(move)
    assert str(game.result) == "F-0"
    with pytest.raises(IllegalMoveError, match="over"):
        game.play("a1+")
    assert game.position.legal_move_codes().size == 0
    with pytest.raises(IllegalMoveError, match="game is over"):
        game.position.check_move("a2+")


# ---------------------------------------------------------------------------------------------
# tactics.json
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rec", TACTICS, ids=lambda r: r["id"])
def test_tactic_win_in_one(rec: dict) -> None:
    pos = Position.from_tps(rec["tps"], komi=rec["komi"])
    assert pos.side_to_move == {"white": core.WHITE, "black": core.BLACK}[rec["side_to_move"]]
    assert not pos.is_over
    if rec.get("moves_from_start"):
        replayed = _play_all(Position.start(rec["size"], komi=rec["komi"]), rec["moves_from_start"])
        assert replayed.to_tps() == rec["tps"]
    mover = pos.side_to_move
    road_wins = set()
    for code in pos.legal_move_codes().tolist():
        child = pos.play(code)
        if child.result.reason == "road" and child.result.winner == mover:
            road_wins.add(code)
    winning = {pos.check_move(m) for m in rec["winning_moves"]}
    assert road_wins == winning
    assert {pos.check_move(m) for m in rec["expected_moves"]} <= winning
    for move in rec["winning_moves"]:
        child = pos.play(move)
        assert child.result.reason == "road" and child.result.winner == mover


# ---------------------------------------------------------------------------------------------
# A plain-Python model of moves, to check make_move on tall stacks and random games
# ---------------------------------------------------------------------------------------------


def _model_from(pos: Position) -> list[list]:
    """[colours bottom to top as a string of '1'/'2', top type] for every square."""
    out = []
    for sq in range(pos.size * pos.size):
        colours, top = pos.stack(sq)
        out.append(["".join(str(c + 1) for c in colours), top])
    return out


def _model_play(board: list[list], code: int, size: int, ply: int) -> None:
    sq, kind = code & 63, (code >> 6) & 3
    mover = ply & 1
    if kind != 0:
        colour = 1 - mover if ply < 2 else mover
        board[sq] = [str(colour + 1), kind]
        return
    direction = (code >> 8) & 3
    drops = pattern_to_drops((code >> 10) & 255)
    step = {0: size, 1: -size, 2: 1, 3: -1}[direction]
    count = sum(drops)
    stack, top = board[sq]
    carried = stack[len(stack) - count:]
    board[sq] = [stack[: len(stack) - count], FLAT if len(stack) > count else 0]
    s = sq
    for i, d in enumerate(drops):
        s += step
        dest = board[s]
        last = i == len(drops) - 1
        dest[0] += carried[:d]
        carried = carried[d:]
        dest[1] = top if last else FLAT


def _model_tps(board: list[list], size: int, ply: int) -> str:
    rows = []
    for rank in range(size - 1, -1, -1):
        cells: list[str] = []
        empty = 0
        for file in range(size):
            stack, top = board[rank * size + file]
            if not stack:
                empty += 1
                continue
            if empty:
                cells.append("x" if empty == 1 else f"x{empty}")
                empty = 0
            cells.append(stack + {FLAT: "", WALL: "S", CAP: "C"}[top])
        if empty:
            cells.append("x" if empty == 1 else f"x{empty}")
        rows.append(",".join(cells))
    return f"{'/'.join(rows)} {ply % 2 + 1} {ply // 2 + 1}"


def _check_make_unmake(pos: Position, code: int) -> Position:
    """Play ``code`` in place with make/unmake checks; returns the child (a copy)."""
    state = pos.state
    before = state.copy()
    model = _model_from(pos)
    _model_play(model, code, pos.size, pos.ply)
    undo = pos.make(code)
    try:
        assert int(state[core.I_HASH]) == int(core.hash_from_scratch(state))
        assert pos.to_tps() == _model_tps(model, pos.size, pos.ply)
        child = pos.copy()
    finally:
        pos.unmake(code, undo)
    assert np.array_equal(state, before), f"unmake of {format_ptn(code, pos.size)} did not restore the state"
    return child


# ---------------------------------------------------------------------------------------------
# Tall stacks (beyond one 62-bit colour word)
# ---------------------------------------------------------------------------------------------


def _colours(n_white: int, n_black: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    pieces = np.array(["1"] * n_white + ["2"] * n_black)
    rng.shuffle(pieces)
    return "".join(pieces)


def _tall_positions() -> list[tuple[Position, int]]:
    """(position, stones per player it was set up with)."""
    out = []
    # 7x7 with the standard 40 stones + 2 capstones: a 78-high stack on d4, topped white.
    tall = _colours(38, 39, 1) + "1"
    out.append((Position.from_tps(f"x7/x7/x7/x3,{tall},x3/x7/x7/1,x5,2 1 40"), 40))
    # 8x8 with 60 stones each: 100 on d4 (top white), 19 on d5 (top black), a white flat on e4.
    low = _colours(49, 50, 2) + "1"
    high = _colours(9, 9, 3) + "2"
    tps = f"x8/x8/x8/x3,{high},x4/x3,{low},1,x3/x8/x8/x8 1 60"
    out.append((Position.from_tps(tps, flats=60), 60))
    # Black to move, a white wall on c5 and a black capstone on e4 next to the stacks.
    tps = f"x8/x8/x8/x2,1S,{high},x4/x3,{low},2C,x3/x8/x8/x8 2 60"
    out.append((Position.from_tps(tps, flats=60), 60))
    return out


@pytest.mark.parametrize("index", range(3))
def test_tall_stack_every_move(index: int) -> None:
    pos, flats = _tall_positions()[index]
    assert max(int(pos.state[core.OFF_HEIGHT + sq]) for sq in range(pos.size**2)) > 62
    assert np.array_equal(Position.from_tps(pos.to_tps(), flats=flats).state, pos.state)
    assert int(pos.state[core.I_HASH]) == int(core.hash_from_scratch(pos.state))
    codes = pos.legal_move_codes().tolist()
    assert len(codes) == core.count_moves(pos.state)
    assert sum(1 for c in codes if (c >> 6) & 3 == 0) > 100
    for code in codes:
        _check_make_unmake(pos, code)


def test_tall_stack_random_walk() -> None:
    """Random spreads that pile the tall stacks together and apart (130 plies, checked each)."""
    rng = np.random.default_rng(7)
    for pos, _ in _tall_positions():
        plies = 0
        for plies in range(130):  # noqa: B007
            codes = [c for c in pos.legal_move_codes().tolist() if (c >> 6) & 3 == 0]
            if not codes:
                break
            pos = _check_make_unmake(pos, codes[rng.integers(len(codes))])
        assert plies > 20


def test_tall_stack_spread_onto_tall_stack() -> None:
    pos, _ = _tall_positions()[1]  # d4: 100 (white top), d5: 19 (black top)
    d4, d5 = 3 * 8 + 3, 4 * 8 + 3
    low, _ = pos.stack(d4)
    high, _ = pos.stack(d5)
    child = pos.play("8d4+").play("Ca8").play("8d5-")
    assert child.stack(d5)[0] == high
    assert child.stack(d4)[0] == low
    child = pos.play("Ca8").play("8d5-")  # black: 8 of 19 onto the 100 stack: 108 high
    colours, top = child.stack(d4)
    assert colours == low + high[-8:] and top == FLAT and len(colours) == 108
    assert child.stack(d5)[0] == high[:-8]
    assert int(child.state[core.I_HASH]) == int(core.hash_from_scratch(child.state))
    assert Position.from_tps(child.to_tps(), flats=60) == child


# ---------------------------------------------------------------------------------------------
# make_move against the Python model on random games of every size
# ---------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(3, 8), seed=st.integers(0, 2**32 - 1), plies=st.integers(1, 80))
def test_make_move_matches_model(size: int, seed: int, plies: int) -> None:
    rng = np.random.default_rng(seed)
    pos = Position.start(size)
    for _ in range(plies):
        codes = pos.legal_move_codes().tolist()
        if not codes:
            break
        spreads = [c for c in codes if (c >> 6) & 3 == 0]
        pool = spreads if spreads and rng.random() < 0.7 else codes
        pos = _check_make_unmake(pos, pool[rng.integers(len(pool))])


# ---------------------------------------------------------------------------------------------
# Error messages
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tps", "fragment"),
    [
        ("x5/x5/x5/x5/x5 1", "3 fields"),
        ("x5/x5/x5/x5/x5 3 1", "side to move"),
        ("x5/x5/x5/x5/x5 1 0", "move number"),
        ("x5/x5/x5/x5/x5 1 one", "move number"),
        ("x2/x2 1 1", "2 rows"),
        ("x5/x5/x5/x5/x4,3 1 1", "row 5: bad square '3'"),
        ("x5/x5/x5/x5/x4,12X 1 1", "row 5: bad square"),
        ("x5/x5/x5/x5/x6 1 1", "row 5 has 6 squares"),
        ("x5/x5/x4/x5/x5 1 1", "row 3 has 4 squares"),
        ("x5/x5/x5/x5/x5,1 1 1", "row 5 has more than 5"),
        ("x5/x5/xa,x3/x5/x5 1 1", "row 3: bad empty-run"),
        ("x3/x3/1C,x2 1 3", "capstones, more than the 0 allowed"),
        ("x3/x3/11111111111,x2 1 3", "stones, more than the 10 allowed"),
    ],
)
def test_tps_errors_name_the_field(tps: str, fragment: str) -> None:
    with pytest.raises(TPSError) as info:
        Position.from_tps(tps)
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("moves", "bad", "fragment"),
    [
        (["a1"], "a1", "not empty"),
        (["a1", "b1"], "c1+", "empty; there is no stack"),
        ([], "a1+", "nothing may move on each player's first turn"),
        (["a1", "b1", "Cc1", "Cc2", "d1"], "Cd2", "no capstone left"),
        (["a1", "b1", "c1", "Sc2"], "c1+", "only a capstone can flatten the wall on c2"),
        (["a1", "b1", "c1", "c2"], "c2-", "controlled by the opponent"),
    ],
)
def test_illegal_move_reasons(moves: list[str], bad: str, fragment: str) -> None:
    pos = _play_all(Position.start(5), moves)
    with pytest.raises(IllegalMoveError) as info:
        pos.check_move(bad)
    assert fragment in str(info.value)
    assert info.value.args[0].startswith(bad.lstrip("1"))


def test_no_stones_left_reason() -> None:
    pos = Position.from_tps("x2,1/x3/x,2,x 1 3", flats=1, caps=1)  # both out of stones, caps left
    with pytest.raises(IllegalMoveError, match="no stones left"):
        pos.check_move("a1")
    assert pos.check_move("Ca1") == parse_ptn("Ca1", 3)


def test_move_parse_errors() -> None:
    for text, fragment in [
        ("z9", "not a PTN move"),
        ("f1", "off the 5x5 board"),
        ("6a1>", "carry limit"),
        ("3a1>11", "sum to 2, not the count 3"),
        ("2a1>101", "not a PTN move"),
        ("3a1<", "off the board"),
    ]:
        with pytest.raises(MoveError, match=fragment):
            parse_ptn(text, 5)


def test_square_names_and_directions_agree() -> None:
    # Guards the helpers the model above relies on.
    assert square_name(0, 5) == "a1" and square_name(24, 5) == "e5"
    assert DIR_CHARS == "+-><"
