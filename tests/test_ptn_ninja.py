"""PTN Ninja links and the lz-string codec under them, against pairs made with the JavaScript
reference (``tests/data/lz_string_pairs.json``, written by ``scripts/lz_string_pairs.js`` with
lz-string 1.5.0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from takzero.game.__main__ import main
from takzero.game.ptn import read_ptn, read_ptn_file
from takzero.io.lz_string import (
    URI_SAFE_ALPHABET,
    compress_to_encoded_uri_component,
    decompress_from_encoded_uri_component,
)
from takzero.io.ptn_ninja import PTN_NINJA, _url_encode, ptn_ninja_url, read_ptn_ninja_url

DATA = Path(__file__).parent / "data"
REFERENCE = json.loads((DATA / "lz_string_pairs.json").read_text(encoding="utf-8"))
GAME_FILE = DATA / "games" / "gotak" / "gotak_5x5_01.ptn"


@pytest.mark.parametrize("pair", REFERENCE["pairs"], ids=lambda p: repr(p["text"][:16]))
def test_compress_matches_the_javascript_reference(pair: dict[str, str]) -> None:
    assert compress_to_encoded_uri_component(pair["text"]) == pair["compressed"]
    assert decompress_from_encoded_uri_component(pair["compressed"]) == pair["text"]


def test_reference_covers_the_hard_cases() -> None:
    """The fixture holds non-BMP characters (surrogate pairs in JavaScript), 16-bit literals
    and long texts whose codes grow past 8 bits: the cases an implementation gets wrong."""
    texts = [p["text"] for p in REFERENCE["pairs"]]
    assert any(any(ord(c) > 0xFFFF for c in t) for t in texts)
    assert any(any(255 < ord(c) <= 0xFFFF for c in t) for t in texts)
    assert max(len(t) for t in texts) > 2000


@pytest.mark.parametrize("case", REFERENCE["url_encode"], ids=lambda c: c["text"])
def test_parameters_are_percent_encoded_as_ptn_ninja_does(case: dict[str, str]) -> None:
    assert _url_encode(case["text"]) == case["encoded"]


@pytest.mark.parametrize("case", REFERENCE["links"], ids=lambda c: c["name"] or "no name")
def test_links_match_the_reference_and_read_back(case: dict) -> None:
    url = ptn_ninja_url(case["ptn"], name=case["name"] or None, ply=case["ply"])
    assert url == case["url"]
    ptn, params = read_ptn_ninja_url(url)
    assert ptn == case["ptn"]
    assert params.get("name", "") == case["name"]
    assert params["ply"] == (f"{case['ply'] - 1}!" if case["ply"] else "0")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_decompress_inverts_compress(text: str) -> None:
    data = compress_to_encoded_uri_component(text)
    assert set(data) <= set(URI_SAFE_ALPHABET)
    assert decompress_from_encoded_uri_component(data) == text


def test_a_game_record_opens_as_itself() -> None:
    """A link made from a PTNGame carries its PTN: reading the link's text gives the same game
    (tags, moves, comments, result)."""
    game = read_ptn_file(GAME_FILE)[0]
    url = ptn_ninja_url(game, name="gotak 5x5")
    assert url.startswith(PTN_NINJA)
    ptn, params = read_ptn_ninja_url(url)
    assert read_ptn(ptn) == [game]
    assert params == {"name": "gotak 5x5"}


def test_spaces_read_as_plus() -> None:
    """A ``+`` of the data that a query decoder turned into a space still decodes."""
    data = next(p["compressed"] for p in REFERENCE["pairs"] if "+" in p["compressed"])
    text = next(p["text"] for p in REFERENCE["pairs"] if p["compressed"] == data)
    assert decompress_from_encoded_uri_component(data.replace("+", " ")) == text


@pytest.mark.parametrize("data", ["", "abc!", "a/b"])
def test_decompress_rejects_what_is_not_lz_string(data: str) -> None:
    with pytest.raises(ValueError):
        decompress_from_encoded_uri_component(data)


def test_decompress_rejects_cut_data() -> None:
    data = compress_to_encoded_uri_component(GAME_FILE.read_text())
    with pytest.raises(ValueError):
        decompress_from_encoded_uri_component(data[: len(data) // 2])


def test_bad_link_arguments() -> None:
    with pytest.raises(ValueError):
        ptn_ninja_url("  \n")
    with pytest.raises(ValueError):
        ptn_ninja_url('[Size "5"]\n\n1. a1 e5\n', ply=-1)
    with pytest.raises(TypeError):
        ptn_ninja_url(b'[Size "5"]')  # type: ignore[arg-type]


def test_link_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["link", str(GAME_FILE), "--ply", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    games = read_ptn_file(GAME_FILE)
    assert len(lines) == len(games)
    for line, game in zip(lines, games, strict=True):
        ptn, params = read_ptn_ninja_url(line)
        assert read_ptn(ptn) == [game]
        assert params == {"ply": "3!"}
    bad = tmp_path / "bad.ptn"
    bad.write_text('[Size "5"]\n\n1. a1 a1\n')
    assert main(["link", str(bad)]) == 2
    err = capsys.readouterr()
    assert err.out == "" and "error:" in err.err
    assert main(["link", str(GAME_FILE), "--game", "9"]) == 2
