"""``python -m takzero.game``: perft and replay (game by game, with a summary)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from takzero.game.__main__ import main
from takzero.game.perft import perft
from takzero.game.position import Position

ROOT = Path(__file__).resolve().parent.parent
GAMES = Path(__file__).parent / "data" / "games"
INDEX = json.loads((GAMES / "INDEX.json").read_text())


@pytest.mark.slow
def test_perft_size(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perft", "--size", "5", "--depth", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "perft 3: 43320"
    assert out[1].startswith("time ") and out[1].endswith(" leaves/s")


def test_perft_tps_divide(capsys: pytest.CaptureFixture[str]) -> None:
    tps = "x4,2/x5/x5/x5/1,x4 1 2"
    assert main(["perft", "--tps", tps, "--depth", "2", "--divide"]) == 0
    lines = capsys.readouterr().out.splitlines()
    parts = [line.split() for line in lines[:-2]]
    assert all(len(p) == 2 for p in parts)
    assert lines[-2] == f"perft 2: {sum(int(n) for _, n in parts)}"
    counts = {move: int(n) for move, n in parts}
    pos = Position.from_tps(tps)
    assert len(counts) == len(pos.legal_move_codes())
    assert counts["Cc3"] == perft(pos.play("Cc3"), 1)


def test_perft_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perft", "--tps", "x5/x5 1 1", "--depth", "2"]) == 1
    assert "2 rows" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["perft", "--size", "5", "--tps", "x5/x5/x5/x5/x5 1 1", "--depth", "1"])
    with pytest.raises(SystemExit):
        main(["perft", "--size", "9", "--depth", "1"])


def test_replay_prints_final_tps_and_result(capsys: pytest.CaptureFixture[str]) -> None:
    files = [f for f in INDEX["files"] if f["file"].startswith("gotak/")]
    assert main(["replay", *(str(GAMES / f["file"]) for f in files)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(files)
    for line, entry in zip(lines, files, strict=True):
        rec = entry["game_list"][0]
        result = "*" if rec["oracle_result"] == "not finished" else rec["oracle_result"]
        assert line.startswith(f"{GAMES / entry['file']} game 1 (line 1): {result} {rec['final_tps']}")


def test_replay_malformed_file(capsys: pytest.CaptureFixture[str]) -> None:
    path = GAMES / "malformed_move_numbers.ptn"
    assert main(["replay", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:41:1: token '25.': move number 25 where 35 was expected" in err
    assert main(["replay", "--lenient-numbers", str(path)]) == 0
    captured = capsys.readouterr()
    assert "(Result tag R-0 disagrees)" in captured.out
    assert "1:1: warning: Result tag R-0 disagrees with the moves: the game is not over" in captured.err
    assert "warning: line 53, column 1: move number 47 where 37 was expected" in captured.err


def test_replay_overrides_and_illegal_move(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "caps.ptn"
    path.write_text('[Size "5"]\n\n1. a1 e5\n2. Cc3 Cc4\n3. Cd3\n')
    assert main(["replay", str(path)]) == 1
    assert f"{path}:5:4: token 'Cd3': Cd3: no capstone left in the reserve" in capsys.readouterr().err
    assert main(["replay", "--caps", "2", str(path)]) == 0
    assert capsys.readouterr().out.strip().endswith("x4,1/x2,2C,x2/x2,1C,1C,x/x5/2,x4 2 3")
    assert main(["replay", str(tmp_path / "missing.ptn")]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_replay_reports_every_data_game(capsys: pytest.CaptureFixture[str]) -> None:
    """Every game of every file in tests/data/games gets a line; the games the oracle could not
    replay as tagged (the extra capstone, the broken move numbers) are rejected with a reason and
    the games after them go on; Result tags disagree exactly where INDEX.json says they do."""
    files = sorted(INDEX["files"], key=lambda f: f["file"])
    assert main(["replay", *(str(GAMES / f["file"]) for f in files)]) == 1
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert len(out) == sum(f["games"] for f in files)
    expect_rejected = expect_disagree = 0
    lines = iter(out)
    for entry in files:
        for rec in entry["game_list"]:
            line = next(lines)
            assert line.startswith(f"{GAMES / entry['file']} game {rec['index'] + 1} (line "), line
            rejected = "replayed_with_caps" in rec or entry["file"].startswith("malformed")
            expect_rejected += rejected
            if rejected:
                assert line.endswith(": rejected"), line
                continue
            assert rec["final_tps"] in line
            disagrees = rec["result_tag_agrees"] is False
            expect_disagree += disagrees
            assert line.endswith(f"(Result tag {rec['result_tag']} disagrees)") == disagrees, line
    assert expect_rejected == 2 and expect_disagree == 13
    err = captured.err
    assert err.splitlines()[-1] == (f"replay: {len(out) - 2} games replayed, 2 rejected, "
                                    f"{expect_disagree} Result tag disagreements")
    assert "hint: the game replays with [Caps \"3\"]" in err
    assert "move number 25 where 35 was expected (--lenient-numbers reads the moves in order)" in err
    # Every game whose tag only fits another komi says which (INDEX: komi_values_matching_tag).
    hints = re.findall(r"the tag fits komi ([0-9.]+)(?: to ([0-9.]+))?", err)
    want = [(k[0], k[-1]) for f in files for r in f["game_list"]
            if (k := r.get("komi_values_matching_tag"))]
    assert [(float(a), float(b or a)) for a, b in hints] == want


def test_replay_goes_on_after_rejected_games(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A bad tag, an illegal move and a syntax error each reject their game only."""
    path = tmp_path / "mixed.ptn"
    path.write_text(
        '[Size "5"]\n[Result "1-0"]\n\n1. a1 e5 2. e4 a2 3. e3 a3 4. e2 a4 5. e1 R-0\n\n'  # 1-0 agrees
        '[Size "5"]\n[Caps "99"]\n\n1. a1 e5\n\n'  # bad tag
        '[Size "5"]\n\n1. a1 e5\n2. Cc3 Cc4\n3. Cd3 d4\n\n'  # a second capstone
        '[Size "5"]\n\n1. a1 e5 2. zz9\n\n'  # not a move
        '[Size "5"]\n[Result "0-1"]\n\n1. a1 e5\n'  # resignation: not a disagreement
        '[Size "5"]\n[Result "F-0"]\n\n1. a1 e5\n'  # claims a result the moves do not reach
    )
    assert main(["replay", str(path)]) == 1
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert [line.split(": ", 1)[1].split(" ")[0] for line in out] == ["R-0", "rejected", "rejected",
                                                                      "rejected", "*", "*"]
    assert out[-1].endswith("(Result tag F-0 disagrees)") and "disagrees" not in "".join(out[:-1])
    err = captured.err
    assert f"{path}:7:1: token '[Caps \"99\"]': Caps must be 0..10" in err
    assert (f"{path}:15:4: token 'Cd3': Cd3: no capstone left in the reserve; hint: the game replays with "
            '[Caps "2"]') in err
    assert f"{path}:19:13: token 'zz9'" in err
    assert f"{path}:26:1: warning: Result tag F-0 disagrees with the moves: the game is not over" in err
    assert err.splitlines()[-1] == "replay: 3 games replayed, 3 rejected, 1 Result tag disagreements"


def test_replay_all_good_exits_zero(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "ok.ptn"
    path.write_text('[Size "3"]\n[Result "1/2-1/2"]\n\n1. a1 c3\n')  # agreed draw
    assert main(["replay", str(path)]) == 0
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == "replay: 1 games replayed, 0 rejected, 0 Result tag disagreements"


def test_module_entry_point() -> None:
    """One real ``python -m takzero.game`` run: the exit status reaches the shell."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-m", "takzero.game", "replay", str(GAMES / "malformed_move_numbers.ptn")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )
    assert proc.returncode == 1
    assert "malformed_move_numbers.ptn:41:1:" in proc.stderr


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["replay", "{missing}", "--komi", "0.3"], "--komi"),
        (["replay", "{missing}", "--komi", "abc"], "--komi"),
        (["replay", "{missing}", "--flats", "0"], "--flats"),
        (["replay", "{missing}", "--caps", "-1"], "--caps"),
        (["perft", "--size", "5", "--depth", "1", "--komi", "0.3"], "--komi"),
        (["tinue", "--tps", "x5/x5/x5/x5/x5 1 1", "--komi", "0.25"], "--komi"),
        (["tinue", "--tps", "x5/x5/x5/x5/x5 1 1", "--caps", "17"], "--caps"),
        (["show", "--ptn", "{missing}", "-o", "{out}", "--komi", "101"], "--komi"),
        (["show", "--ptn", "{missing}", "-o", "{out}", "--game", "0"], "--game"),
        (["show", "--ptn", "{missing}", "-o", "{out}", "--ply", "-1"], "--ply"),
        (["show", "--ptn", "{missing}", "-o", "{out}", "--dpi", "0"], "--dpi"),
        (["show", "--ptn", "{missing}", "-o", "{out}", "--width", "nan"], "--width"),
        (["link", "{missing}", "--game", "0"], "--game"),
        (["link", "{missing}", "--ply", "-2"], "--ply"),
    ],
)
def test_bad_option_values_are_refused_at_start_naming_the_option(
    argv: list[str], option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit status 2 with the option's name before any file is read (the file does not exist:
    a message about it would mean the value reached the file)."""
    paths = {"missing": str(tmp_path / "missing.ptn"), "out": str(tmp_path / "b.png")}
    with pytest.raises(SystemExit) as exc:
        main([a.format(**paths) for a in argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and f"argument {option}" in err and "missing.ptn" not in err
