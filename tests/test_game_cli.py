"""``python -m takzero.game``: perft and replay."""

from __future__ import annotations

import json
import os
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
    assert "(Result tag R-0)" in captured.out
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


def test_module_entry_point() -> None:
    """One real ``python -m takzero.game`` run: the exit status reaches the shell."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-m", "takzero.game", "replay", str(GAMES / "malformed_move_numbers.ptn")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )
    assert proc.returncode == 1
    assert "malformed_move_numbers.ptn:41:1:" in proc.stderr
