"""PTN game files: every game of tests/data/games replays to the oracle's result and final TPS,
the malformed file is reported, the format's corners are read, errors name line/column/token, and
writing then reading gives the same game."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from takzero.game import core
from takzero.game.moves import parse_ptn
from takzero.game.position import Game, Position, Result
from takzero.game.ptn import (
    RESULT_TOKENS,
    PTNError,
    PTNGame,
    RejectedGame,
    game_to_ptn,
    read_ptn,
    read_ptn_each,
    read_ptn_file,
    read_ptn_file_each,
    result_tag_agrees,
    start_from_tags,
    write_ptn,
    write_ptn_games,
)
from takzero.io.files import write_ptn_file

GAMES = Path(__file__).parent / "data" / "games"
INDEX = json.loads((GAMES / "INDEX.json").read_text())
FILES = [f for f in INDEX["files"] if not f["file"].startswith("malformed")]
MALFORMED = next(f for f in INDEX["files"] if f["file"].startswith("malformed"))


def _oracle_tags(game: PTNGame, rec: dict) -> None:
    """Apply the oracle's replay settings for quirky records (INDEX.json)."""
    if "replayed_with_caps" in rec:  # extra_capstone: played with custom piece counts
        game.tags["Caps"] = str(rec["replayed_with_caps"])
    # no_komi_tag_but_komi_needed: the oracle replays with komi 0, which is what a missing Komi
    # tag means here, so nothing to do.


# ---------------------------------------------------------------------------------------------
# The data games
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", FILES, ids=lambda f: f["file"])
def test_data_games_replay_like_the_oracle(entry: dict) -> None:
    games = read_ptn_file(GAMES / entry["file"], check=False)
    assert len(games) == entry["games"] == len(entry["game_list"])
    for game, rec in zip(games, entry["game_list"], strict=True):
        assert game.warnings == []
        assert game.size == entry["size"]
        assert len(game.moves) == rec["plies"]
        assert game.result_tag == rec["result_tag"]
        _oracle_tags(game, rec)
        final = game.final_position()
        where = f"{entry['file']} game {rec['index']}"
        assert final.to_tps() == rec["final_tps"], where
        if rec["oracle_result"] == "not finished":
            assert not final.is_over, where
        else:
            assert str(final.result) == rec["oracle_result"], where
        if "no_komi_tag_but_komi_needed" in " ".join(rec["quirks"]):
            # With komi 2 (all 13 games fit it) the Result tag is right.
            game.tags["Komi"] = "2"
            assert str(game.final_position().result) == rec["result_tag"]


@pytest.mark.parametrize("entry", FILES, ids=lambda f: f["file"])
def test_data_games_write_read_round_trip(entry: dict) -> None:
    games = read_ptn_file(GAMES / entry["file"], check=False)
    for game, rec in zip(games, entry["game_list"], strict=True):
        _oracle_tags(game, rec)
    text = write_ptn_games(games)
    again = read_ptn(text)  # checks every move
    assert again == games
    for a, b in zip(again, games, strict=True):
        assert list(a.tags.items()) == list(b.tags.items())
    assert write_ptn_games(again) == text


def test_extra_capstone_game_is_rejected_with_its_location() -> None:
    """The one game with more capstones than the default fails a checked read at the capstone."""
    with pytest.raises(PTNError) as info:
        read_ptn_file(GAMES / "playtak_skoolin_6x6_part2.ptn")
    e = info.value
    assert (e.line, e.column, e.token) == (5697, 4, "Cd4")
    assert "no capstone left" in e.reason
    assert str(e).startswith(f"{GAMES / 'playtak_skoolin_6x6_part2.ptn'}:5697:4: token 'Cd4': ")
    games = read_ptn_file(GAMES / "playtak_skoolin_6x6_part2.ptn", check=False)
    with pytest.raises(PTNError, match="5697:4"):
        games[159].replay()


def test_malformed_move_numbers_strict() -> None:
    """Decision: a move number that does not match the ply count is an error by default."""
    path = GAMES / MALFORMED["file"]
    with pytest.raises(PTNError) as info:
        read_ptn_file(path)
    e = info.value
    assert (e.line, e.column, e.token) == (41, 1, "25.")
    assert "move number 25 where 35 was expected" in str(e)
    assert f"{path}:41:1" in str(e)


def test_malformed_move_numbers_lenient() -> None:
    """With strict_numbers=False the moves are read in order and every oddity is reported."""
    (game,) = read_ptn_file(GAMES / MALFORMED["file"], strict_numbers=False)
    rec = MALFORMED["game_list"][0]
    assert game.warnings == [
        "line 41, column 1: move number 25 where 35 was expected",
        "line 53, column 1: move number 47 where 37 was expected",
        *[f"line {n}, column 1: move line without a move number" for n in range(57, 62)],
        "line 1, column 1: Result tag R-0 disagrees with the moves: the game is not over",
    ]
    assert len(game.moves) == rec["plies"]
    final = game.final_position()
    assert final.to_tps() == rec["final_tps"]
    assert not final.is_over and game.result_tag == "R-0"


def test_data_game_features() -> None:
    (game,) = read_ptn_file(GAMES / "gotak" / "gotak_5x5_01.ptn")
    assert game.result == "0-R" and game.tags == {"Result": "0-R", "Size": "5"}
    assert game.comments[4] == ["Player EU plays my new favourite opening, and I play a defensive move, "
                                "spreading my pieces."]
    assert game.comments[55][0].startswith("A premature move")  # between white and black of move 28
    assert game.locations[0] == (4, 4, "a1")
    (game,) = read_ptn_file(GAMES / "gotak" / "gotak_5x5_02.ptn")
    assert game.marks == {44: '"'}
    (game,) = read_ptn_file(GAMES / "gotak" / "gotak_5x5_03.ptn")
    assert game.moves == [] and game.result == "" and game.result_tag == ""
    assert game.start.to_tps() == game.tags["TPS"] and game.start.side_to_move == 1
    games = read_ptn_file(GAMES / "takai_ai_vs_ai_4x4.ptn")
    assert games[0].result == "R-0" and games[0].comments[0][0].startswith("(AI level 1")
    assert [g.line for g in games[:2]] == [1, 19]


# ---------------------------------------------------------------------------------------------
# Format corners
# ---------------------------------------------------------------------------------------------


def test_comments_anywhere() -> None:
    text = ('[Size "5"]\n{before}\n1. {after number} a1 {between} e5 {end of\nline}\n'
            '2. c3{tight} c4 R-0 {after result}')
    (game,) = read_ptn(text)
    assert game.comments == {0: ["before", "after number"], 1: ["between"], 2: ["end of\nline"],
                             3: ["tight"], 4: ["after result"]}
    assert len(game.moves) == 4 and game.result == "R-0"
    assert read_ptn(write_ptn(game)) == [game]


def test_marks_and_flattening_star() -> None:
    with pytest.raises(PTNError, match="not a PTN move"):  # a bare quote is not a move
        read_ptn('[Size "5"]\n1. a1 e5 "tinue"')
    text = '[Size "5"]\n1. a1 e5 2. Cc3 Sd3\'! 3. c3>*" b1?!'
    (game,) = read_ptn(text)
    assert game.marks == {3: "'!", 4: '"', 5: "?!"}
    assert game.ptn_moves() == ["a1", "e5", "Cc3", "Sd3", "c3>*", "b1"]
    text_out = write_ptn(game)
    assert "3. c3>*\" b1?!" in text_out
    # '*' is optional when reading
    (game2,) = read_ptn(text.replace("c3>*", "c3>"))
    assert game2.moves == game.moves


def test_flats_with_f_prefix_explicit_counts_double_spaces_crlf_no_newline() -> None:
    text = '[Size "4"]\r\n\r\n1.  Fd4   a1\r\n2. 1a1>1  c1\r\n3. a1 1c1<1 0-1'
    (game,) = read_ptn(text)
    assert game.ptn_moves() == ["d4", "a1", "a1>", "c1", "a1", "c1<"]
    assert game.result == "0-1"


def test_unnumbered_move_list_and_dotted_numbers() -> None:
    a = read_ptn('[Size "5"]\na1 e5 c3 c4\nd3')[0]
    b = read_ptn('[Size "5"]\n1.a1 e5 2. c3 c4 3.d3')[0]
    c = read_ptn('[Size "5"]\n1. a1 1... e5 2. c3 2... c4 3. d3')[0]
    assert a.moves == b.moves == c.moves and len(a.moves) == 5


@pytest.mark.parametrize("token", RESULT_TOKENS)
def test_result_tokens(token: str) -> None:
    for text in (f'[Size "5"]\n1. a1 e5 {token}', f'[Size "5"]\n1. a1 e5\n{token}\n'):
        (game,) = read_ptn(text)
        assert game.result == token and len(game.moves) == 2
        assert write_ptn(game).rstrip().endswith(f"1. a1 e5 {token}")


def test_black_to_move_start() -> None:
    tps = "x4,1/x5/x5/x5/2,x4 2 2"
    text = f'[Size "5"]\n[TPS "{tps}"]\n\n2. -- c3 3. d3 c4\n'
    (game,) = read_ptn(text)
    assert game.start.to_tps() == tps
    assert game.ptn_moves() == ["c3", "d3", "c4"]
    assert write_ptn(game).endswith("\n\n2. -- c3\n3. d3 c4\n")
    # Without '--' (or without numbers) it reads the same.
    assert read_ptn(f'[TPS "{tps}"]\n2. c3 3. d3 c4')[0].moves == game.moves
    assert read_ptn(f'[TPS "{tps}"]\nc3 d3 c4')[0].moves == game.moves


def test_tags_kept_in_order_with_unknown_and_escaped_values() -> None:
    text = ('[Event "Test \\"cup\\""]\n[Size "6"]\n[Opening "swap"]\n[Komi "2.5"]\n[Zzz "1"]\n'
            '[Player1 "a\\\\b"]\n\n1. a1 f6\n')
    (game,) = read_ptn(text)
    assert list(game.tags) == ["Event", "Size", "Opening", "Komi", "Zzz", "Player1"]
    assert game.tags["Event"] == 'Test "cup"' and game.tags["Player1"] == "a\\b"
    assert game.start.half_komi == 5
    out = write_ptn(game)
    assert out.startswith('[Event "Test \\"cup\\""]\n[Size "6"]\n[Opening "swap"]')
    assert read_ptn(out) == [game]


def test_setup_tags() -> None:
    assert start_from_tags({"Size": "6"}).komi == 0.0  # missing Komi is 0
    pos = start_from_tags({"Size": "5", "Komi": "1.5", "Flats": "30", "Caps": "2"})
    assert (pos.half_komi, pos.stones(0), pos.capstones(1)) == (3, 30, 2)
    pos = start_from_tags({"TPS": "x3/x3/x3 1 1"})
    assert pos.size == 3
    assert start_from_tags({"Size": "", "Komi": "", "TPS": "x3/x3/x3 1 1"}).size == 3


def test_several_games_and_boundaries() -> None:
    text = ('[Size "3"]\n\n1. a1 c3\n2. b2 0-R\n{trailing}\n[Size "4"]\n[Result "*"]\n1. a1 d4 *\n\n'
            '[Size "5"]\n')
    games = read_ptn(text)
    assert [g.size for g in games] == [3, 4, 5]
    assert [g.line for g in games] == [1, 6, 10]
    assert games[0].comments == {3: ["trailing"]}
    assert [len(g.moves) for g in games] == [3, 2, 0]
    assert read_ptn("") == [] and read_ptn("\n  \n") == []
    assert read_ptn(write_ptn_games(games)) == games


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "column", "token", "fragment"),
    [
        ('[Size "5"]\n1. a1 {never closed\n2. e5', 2, 7, "{", "never closed"),
        ('[Size "5"]\n1. a1 e5 }', 2, 10, "}", "without an opening"),
        ('[Size 5]\n1. a1', 1, 1, "[Size 5]", "malformed tag"),
        ('[Size "5"]\n[Size "5"]\n', 2, 1, '[Size "5"]', "duplicate tag Size"),
        ('[Size "5"]\n\n1. a1 e5\n2. c3 zz9', 4, 7, "zz9", "not a PTN move"),
        ('[Size "5"]\n1. a1 f6', 2, 7, "f6", "off the 5x5 board"),
        ('[Size "5"]\n1. a1 e5\n3. c3', 3, 1, "3.", "move number 3 where 2 was expected"),
        ('[Size "5"]\n1. a1 2. e5', 2, 7, "2.", "after white's ply"),
        ('1. a1 e5', 1, 1, "1.", "no Size tag"),
        ('[Size "9"]\n1. a1', 1, 1, '[Size "9"]', "3..8"),
        ('[Komi "x"]\n[Size "5"]\n1. a1', 1, 1, '[Komi "x"]', "Komi"),
        ('[Komi "0.3"]\n[Size "5"]\n', 1, 1, '[Komi "0.3"]', "multiple of 0.5"),
        ('[Size "6"]\n[TPS "x5/x5/x5/x5/x5 1 1"]\n1. a1', 1, 1, '[Size "6"]', "does not match"),
        ('[TPS "x5/x5/x5/x5 1 1"]\n1. a1', 1, 7, '[TPS "x5/x5/x5/x5 1 1"]', "row 1 has 5"),
        ('[Size "5"]\n1. -- a1', 2, 4, "--", "starts with black to move"),
        ('[Size "5"]\n1. a1 e5 R-0\n2. c3', 3, 4, "c3", "after the result token"),
        ('[Size "5"]\n1. a1 e5 R-0 0-R', 2, 14, "0-R", "second result token"),
        ('[Size "5"]\n1. Sa1', 2, 4, "Sa1", "first turn only a flat"),
        ('[Size "3"]\n1. a1 b1\n2. 3b1<', 3, 4, "3b1<", "has only 1"),
        ('[Size "3"]\n1. c1 a3\n2. a1 c2\n3. b1 c3\n4. a2', 5, 4, "a2", "game is over (0-R)"),
        ('[Size "5"]\n1. a1 e5\n2. Sc3 d3\n3. d3<', 4, 4, "d3<", "controlled by the opponent"),
    ],
)
def test_ptn_errors(text: str, line: int, column: int, token: str, fragment: str) -> None:
    with pytest.raises(PTNError) as info:
        read_ptn(text, source="t.ptn")
    e = info.value
    assert (e.line, e.column, e.token) == (line, column, token)
    assert fragment in e.reason
    assert str(e) == f"t.ptn:{line}:{column}: token {token!r}: {e.reason}"
    assert isinstance(e, ValueError)


def test_lenient_numbers_only_affect_numbers() -> None:
    (game,) = read_ptn('[Size "5"]\n1. a1 e5\n3. c3', strict_numbers=False)
    assert game.warnings == ["line 3, column 1: move number 3 where 2 was expected"]
    with pytest.raises(PTNError, match="not a PTN move"):
        read_ptn('[Size "5"]\n1. a1 zz9', strict_numbers=False)


def test_unchecked_read_defers_illegal_moves_to_replay() -> None:
    (game,) = read_ptn('[Size "5"]\n1. a1 e5\n2. a1', check=False)
    with pytest.raises(PTNError) as info:
        game.replay()
    assert (info.value.line, info.value.column, info.value.token) == (3, 4, "a1")
    assert "not empty" in info.value.reason
    with pytest.raises(PTNError, match="3:4"):
        write_ptn(game)


def test_error_without_location() -> None:
    assert str(PTNError("bad")) == "bad"
    assert str(PTNError("bad", line=3, column=4)) == "line 3, column 4: bad"
    game = PTNGame(tags={"Size": "5"}, moves=[parse_ptn("a1", 5)] * 2)
    with pytest.raises(PTNError, match="move 2: a1: a1 is not empty"):
        game.replay()
    with pytest.raises(PTNError, match="no Size tag"):
        PTNGame().replay()


# ---------------------------------------------------------------------------------------------
# Games from code (self-play, match runner)
# ---------------------------------------------------------------------------------------------


def _play(game: Game, moves: list[str]) -> Game:
    for m in moves:
        game.play(m)
    return game


def test_from_game_round_trip_with_flattening_and_road() -> None:
    moves = ["a1", "e5", "Cc3", "Sd3", "c3>", "e1", "b1", "e2", "b2", "e3", "b3", "e4", "b4", "a2", "b5"]
    game = _play(Game(Position.start(5, komi=1.5)), moves)
    assert str(game.result) == "R-0"
    ptn = PTNGame.from_game(game, tags={"Player1": "net-12", "Player2": "net-11"})
    assert list(ptn.tags.items()) == [("Size", "5"), ("Komi", "1.5"), ("Player1", "net-12"),
                                      ("Player2", "net-11"), ("Result", "R-0")]
    text = write_ptn(ptn)
    assert "3. c3>* e1" in text and text.rstrip().endswith("8. b5 R-0")
    assert text == game_to_ptn(game, tags={"Player1": "net-12", "Player2": "net-11"})
    (back,) = read_ptn(text)
    assert back == ptn
    replayed = back.replay()
    assert replayed.moves == game.moves and replayed.position == game.position


def test_from_game_custom_start_and_reserves(tmp_path: Path) -> None:
    start = Position.from_tps("x4,1/x5/x5/x5/2,x4 2 2", flats=25, caps=2, half_komi=-1)
    game = _play(Game(start), ["c3", "Cd3", "Cc4", "d4"])
    ptn = PTNGame.from_game(game, result="0-1")
    assert ptn.tags == {"Size": "5", "Komi": "-0.5", "Flats": "25", "Caps": "2",
                        "TPS": "x4,1/x5/x5/x5/2,x4 2 2", "Result": "0-1"}
    text = write_ptn(ptn)
    assert "\n2. -- c3\n3. Cd3 Cc4\n4. d4 0-1\n" in text
    path = tmp_path / "g.ptn"
    write_ptn_file(path, [ptn, ptn])
    games = read_ptn_file(path)
    assert games == [ptn, ptn]
    assert games[1].final_position() == game.position


def test_from_game_adjudicated_draw_and_unfinished() -> None:
    game = _play(Game(Position.start(4), ply_limit=4), ["a1", "d4", "b2", "c3"])
    ptn = PTNGame.from_game(game)
    assert ptn.result == "1/2-1/2" and ptn.tags["Result"] == "1/2-1/2"
    assert ptn.comments == {4: ["adjudicated draw: ply limit"]}
    assert write_ptn(ptn).rstrip().endswith("2. b2 c3 {adjudicated draw: ply limit} 1/2-1/2")
    ptn = PTNGame.from_game(_play(Game(Position.start(4)), ["a1"]))
    assert ptn.result == "" and "Result" not in ptn.tags
    assert write_ptn(ptn) == '[Size "4"]\n[Komi "0"]\n\n1. a1\n'


def test_from_game_rejects() -> None:
    game = Game(Position.start(5))
    with pytest.raises(ValueError, match="Size"):
        PTNGame.from_game(game, tags={"Size": "6"})
    with pytest.raises(ValueError, match="result"):
        PTNGame.from_game(game, result="W")
    odd = Position.start(5)
    odd.state[2] -= 1  # white has one stone fewer than black: not describable by tags
    with pytest.raises(ValueError, match="piece counts differ"):
        PTNGame.from_game(Game(odd))
    with pytest.raises(ValueError, match="comment"):
        write_ptn(PTNGame(tags={"Size": "5"}, comments={0: ["a } b"]}))
    with pytest.raises(ValueError, match="comments at plies"):
        write_ptn(PTNGame(tags={"Size": "5"}, comments={3: ["after a move that is not there"]}))
    with pytest.raises(ValueError, match="newline"):
        write_ptn(PTNGame(tags={"Size": "5", "Event": "a\nb"}))


def test_binary_file_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "junk.ptn"
    path.write_bytes(b'[Size "5"]\n\n1. a1 e5 2. \x00\xff zz\n')
    with pytest.raises(PTNError) as info:
        read_ptn_file(path)
    assert (info.value.line, info.value.column) == (3, 14)
    assert f"{path}:3:14" in str(info.value) and "not UTF-8 text (byte 0xff)" in str(info.value)


# ---------------------------------------------------------------------------------------------
# Result tags by meaning, warnings, game-by-game reading
# ---------------------------------------------------------------------------------------------

def _result(code_name: str) -> Result:
    return Result(getattr(core, code_name))


@pytest.mark.parametrize(
    ("tag", "board", "agrees"),
    [
        ("R-0", "RESULT_ROAD_WHITE", True),
        ("1-0", "RESULT_ROAD_WHITE", True),  # chess style, same winner
        ("1-0", "RESULT_FLAT_WHITE", True),
        ("0-1", "RESULT_ROAD_WHITE", False),
        ("F-0", "RESULT_ROAD_WHITE", False),  # same winner, another kind
        ("0-R", "RESULT_ROAD_WHITE", False),
        ("1/2-1/2", "RESULT_DRAW", True),
        ("1/2-1/2", "RESULT_FLAT_BLACK", False),
        ("0-F", "RESULT_DRAW", False),
        ("1-0", "RESULT_NONE", None),  # resignation or time: decided off the board
        ("0-1", "RESULT_NONE", None),
        ("1/2-1/2", "RESULT_NONE", None),  # agreed draw
        ("R-0", "RESULT_NONE", False),  # the record stops before the result it claims
        ("*", "RESULT_ROAD_WHITE", None),
        ("0-0", "RESULT_NONE", None),
        ("", "RESULT_ROAD_BLACK", None),
        (None, "RESULT_ROAD_BLACK", None),
        ("2-0", "RESULT_ROAD_BLACK", False),  # not a result
    ],
)
def test_result_tag_agrees_by_meaning(tag: str | None, board: str, agrees: bool | None) -> None:
    assert result_tag_agrees(tag, _result(board)) is agrees


@pytest.mark.parametrize("name", ["playtak_skoolin_6x6_part2.ptn", "playtak_takai_bot_5x5.ptn"])
def test_checked_read_records_disagreements_in_warnings(name: str) -> None:
    """A checked read compares each Result tag with the moves; the disagreements (and only they)
    are in ``PTNGame.warnings``, as INDEX.json has them (chess-style tags and resignations are not
    disagreements); a game the rules reject is a RejectedGame and the next one goes on."""
    entry = next(f for f in FILES if f["file"] == name)
    out = read_ptn_file_each(GAMES / name)
    assert len(out) == entry["games"]
    for got, rec in zip(out, entry["game_list"], strict=True):
        if "replayed_with_caps" in rec:
            assert isinstance(got, RejectedGame) and "no capstone left" in got.error.reason
            continue
        assert isinstance(got, PTNGame)
        disagree = [w for w in got.warnings if "disagrees" in w]
        assert bool(disagree) == (rec["result_tag_agrees"] is False), (rec["index"], got.warnings)
        if disagree and "komi_values_matching_tag" in rec:
            assert "no Komi tag (komi 0 assumed), the tag fits komi" in disagree[0]
        if disagree:  # the warning names where the tag is
            line, col = got.tag_locations["Result"]
            assert disagree[0].startswith(f"line {line}, column {col}: Result tag {rec['result_tag']} disagrees")


def test_read_each_goes_on_after_each_kind_of_problem() -> None:
    """A problem in the tags, in the move text, or an unclosed comment rejects one game."""
    text = (
        '[Size "5"]\n1. a1 e5\n\n'
        '[Size 5]\n[Komi "1"]\n1. a1 e5\n\n'  # malformed tag: the rest of this game is skipped
        '[Size "5"]\n1. a1 e5 2. a1\n\n'  # illegal move
        '[Size "5"]\n1. a1 e5 2. c3 c4\n\n'
        '[Size "5"]\n1. a1 {never closed\n'
    )
    out = read_ptn_each(text, source="t.ptn")
    kinds = [type(g).__name__ for g in out]
    assert kinds == ["PTNGame", "RejectedGame", "RejectedGame", "PTNGame", "RejectedGame"]
    assert [g.line for g in out] == [1, 4, 8, 11, 14]
    assert out[3].moves == read_ptn('[Size "5"]\n1. a1 e5 2. c3 c4')[0].moves
    assert (out[1].error.line, out[1].error.column) == (4, 1)
    assert (out[2].error.line, out[2].error.column, out[2].error.token) == (9, 13, "a1")
    with pytest.raises(PTNError):  # read_ptn stops at the first problem
        read_ptn(text)
