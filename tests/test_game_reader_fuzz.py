"""Fuzzing the PTN and TPS readers (hypothesis): whatever the text, a reader either returns or
raises its documented error (PTNError / TPSError) with a line and a column; never another
exception, never recursion on input length, never Python's integer-conversion limit.

The texts are real games and TPS strings from tests/data mutated (characters deleted, inserted,
replaced, runs repeated, long digit strings and PTN fragments spliced in), plus text drawn from
the PTN alphabet. Sized for CI (3,300 examples in
all, derandomized); ``pytest --hypothesis-show-statistics`` shows the counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from takzero.game.position import Position, TPSError
from takzero.game.ptn import PTNError, PTNGame, read_ptn

DATA = Path(__file__).parent / "data"
SETTINGS = settings(max_examples=1000, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _seed_ptn() -> list[str]:
    """A few short real records (one per feature: comments, TPS start, marks, 4x4 and 6x6)."""
    texts = []
    for name in ("gotak/gotak_5x5_02.ptn", "gotak/gotak_5x5_03.ptn", "gotak/gotak_6x6_01.ptn",
                 "taktician_zoo/zoo_5x5_01.ptn", "malformed_move_numbers.ptn"):
        texts.append((DATA / "games" / name).read_text(encoding="utf-8"))
    texts.append('[Size "4"]\n[Komi "0.5"]\n[Caps "1"]\n\n1. a1 d4 2. Cb2 {c} c3\' 3. b2+ 1c3<1 R-0\n')
    texts.append('[TPS "x4,1/x5/x5/x5/2,x4 2 2"]\n\n2. -- c3 3. d3 c4 *\n')
    return texts


def _seed_tps() -> list[str]:
    cases = json.loads((DATA / "perft.json").read_text(encoding="utf-8"))
    return [c["tps"] for c in cases][:8] + ["x3/x3/x3 1 1", "x5/x5/x2,1C,x2/x5/2S,x4 2 7"]


SEED_PTN = _seed_ptn()
SEED_TPS = _seed_tps()
FRAGMENTS = ["1.", "1. ", "--", "R-0", "1/2-1/2", "{", "}", "[", "]", '"', "\n", "'", "*", "a1", "Ca1",
             "3c3>12", '[Size "5"]', '[Caps "', '[TPS "', "x", "/", ",", "\\", "\ufeff", "\r\n"]


@st.composite
def mutated(draw: st.DrawFn, seeds: list[str], alphabet: str) -> str:
    """A seed text with a few random edits (delete, insert, replace, repeat, splice)."""
    text = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = min(len(text), i + draw(st.integers(0, 12)))
        kind = draw(st.sampled_from(["delete", "insert", "replace", "repeat", "digits", "fragment"]))
        if kind == "delete":
            text = text[:i] + text[j:]
        elif kind in ("insert", "replace"):
            piece = draw(st.text(alphabet, max_size=8))
            text = text[:i] + piece + (text[j:] if kind == "replace" else text[i:])
        elif kind == "repeat":
            text = text[:i] + text[i:j] * draw(st.integers(2, 3000)) + text[j:]
        elif kind == "digits":
            text = text[:i] + draw(st.sampled_from("123456789")) * draw(st.integers(1, 5000)) + text[i:]
        else:
            text = text[:i] + draw(st.sampled_from(FRAGMENTS)) + text[i:]
    return text


PTN_ALPHABET = "abcdefgh123456789 \n.{}[]\"'!?*<>+-/\\FSCRx0,_Kk"
TPS_ALPHABET = "x12SC/, 3456789\n0-"


def _check_ptn_error(e: PTNError) -> None:
    assert isinstance(e.line, int) and e.line >= 1, e
    assert isinstance(e.column, int) and e.column >= 1, e


def _read(text: str) -> list[PTNGame] | None:
    try:
        return read_ptn(text, check=True, strict_numbers=False)
    except PTNError as e:
        _check_ptn_error(e)
        return None


@pytest.mark.slow  # fuzz
@SETTINGS
@given(mutated(SEED_PTN, PTN_ALPHABET))
def test_fuzz_read_ptn_mutated(text: str) -> None:
    games = _read(text)
    for game in games or []:
        # What was read replays (the checked read already played every move).
        game.final_position()
    try:
        unchecked = read_ptn(text, check=False, strict_numbers=True)
    except PTNError as e:
        _check_ptn_error(e)
        return
    for game in unchecked:  # a later replay reports an illegal move where it is written
        try:
            game.final_position()
        except PTNError as e:
            _check_ptn_error(e)


@pytest.mark.slow  # fuzz
@settings(SETTINGS, max_examples=500)
@given(st.text(PTN_ALPHABET, max_size=300))
def test_fuzz_read_ptn_alphabet(text: str) -> None:
    _read(text)


def _from_tps(text: str) -> None:
    try:
        Position.from_tps(text)
    except TPSError as e:
        assert isinstance(e.line, int) and e.line >= 1, e
        assert isinstance(e.column, int) and 1 <= e.column <= len(text) + 1, e


@pytest.mark.slow  # fuzz
@settings(SETTINGS, max_examples=800)
@given(mutated(SEED_TPS, TPS_ALPHABET))
def test_fuzz_from_tps_mutated(text: str) -> None:
    _from_tps(text)
    # The same text as a PTN TPS tag: a PTNError at the tag (or inside its value).
    _read('[TPS "' + text.replace("\n", " ").replace('"', "").replace("\\", "") + '"]\n')


@pytest.mark.slow  # fuzz
@settings(SETTINGS, max_examples=500)
@given(st.text(TPS_ALPHABET, max_size=120))
def test_fuzz_from_tps_alphabet(text: str) -> None:
    _from_tps(text)


# -- the cases of issue 15, each one of its kind ------------------------------------------------


@pytest.mark.parametrize("n", [1000, 20_000])
@pytest.mark.parametrize("unit", ["1.", "1.a1", "{c}", "1. -- "])
def test_long_repeats_do_not_recurse(unit: str, n: int) -> None:
    """Input length never becomes recursion depth (``'1.' * 1000`` was a RecursionError)."""
    _read('[Size "5"]\n' + unit * n)


BIG = "1" * 4301  # over Python's 4,300-digit int conversion limit


@pytest.mark.parametrize(
    "text",
    [
        f'[Size "5"]\n{BIG}. a1',
        f'[Size "5"]\n1. a1 e5\n{BIG}... c3',
        f'[Size "{BIG}"]\n1. a1',
        f'[Size "5"]\n[Caps "{BIG}"]\n1. a1',
        f'[Size "5"]\n[Flats "{BIG}"]\n1. a1',
        f'[Size "5"]\n[Komi "{BIG}"]\n1. a1',
        f'[TPS "x5/x5/x5/x5/x5 1 {BIG}"]\n',
        f'[TPS "x{BIG}/x5/x5/x5/x5 1 1"]\n',
        f'[Size "5"]\n1. {BIG}a1>1',
        f'[Size "5"]\n1. a1 e5 2. a1>{BIG}',
    ],
)
def test_huge_digit_strings_are_ptn_errors(text: str) -> None:
    with pytest.raises(PTNError) as info:
        read_ptn(text)
    _check_ptn_error(info.value)
    assert "Exceeds the limit" not in str(info.value)


@pytest.mark.parametrize(
    ("tps", "column"),
    [
        (f"x5/x5/x5/x5/x5 1 {BIG}", 18),
        (f"x{BIG}/x5/x5/x5/x5 1 1", 1),
        (f"x5/x5/x5/x5/x5 {BIG} 1", 16),
        (f"x5/x5/x5/x5/x4,{BIG} 1 1", 16),  # one stack taller than any reserve
        ("x5/x5/x5/x5/x4,3 1 1", 16),
        ("x5/x5/x5/x5 1 1", 1),
        ("x5/x5/x5/x5/x5 1 1 extra", 20),
    ],
)
def test_tps_errors_have_a_column(tps: str, column: int) -> None:
    with pytest.raises(TPSError) as info:
        Position.from_tps(tps)
    assert (info.value.line, info.value.column) == (1, column)
    assert str(info.value) == info.value.reason and "Exceeds the limit" not in str(info.value)


def test_tps_stack_over_the_reserves_is_refused_before_it_is_built() -> None:
    """A stack of more pieces than the state can hold never reaches the compiled state."""
    with pytest.raises(TPSError, match="more than the 50 allowed"):
        Position.from_tps(f"x7,{'1' * 200}/x8/x8/x8/x8/x8/x8/x8 1 1")


@pytest.mark.parametrize(
    ("tags", "key"),
    [
        ('[Size "5"]\n[Caps "99"]', "Caps"),
        ('[Caps "99"]\n[Size "5"]', "Caps"),
        ('[Size "5"]\n[Flats "0"]', "Flats"),
        ('[Size "5"]\n[Flats "99"]\n[Caps "1"]', "Flats"),
        ('[Caps "11"]\n[TPS "x5/x5/x5/x5/x5 1 1"]', "Caps"),
        ('[Size "5"]\n[Caps "x"]', "Caps"),
    ],
)
def test_reserve_tag_problems_name_their_tag(tags: str, key: str) -> None:
    with pytest.raises(PTNError) as info:
        read_ptn(tags + "\n\n1. a1 e5\n")
    assert info.value.token is not None and info.value.token.startswith(f"[{key} ")
    line = next(i for i, t in enumerate(tags.split("\n"), 1) if t.startswith(f"[{key} "))
    assert (info.value.line, info.value.column) == (line, 1)


def test_tps_tag_error_points_into_the_tag() -> None:
    with pytest.raises(PTNError) as info:
        read_ptn('[Size "5"]\n[TPS "x5/x5/x5/x5/x4,3 1 1"]\n1. a1')
    # '[TPS "' is 6 characters; the bad square '3' is the 16th of the value.
    assert (info.value.line, info.value.column) == (2, 22)
