"""Match runner: TEI processes playing through ``takzero.match``, PTN that replays to the reported
result, forfeits (crash, malformed/illegal move, timeout) and openings files."""

from __future__ import annotations

import math
import os
import sys
import textwrap
from pathlib import Path

import pytest

from takzero.game import Position
from takzero.game.ptn import read_ptn, read_ptn_file
from takzero.io.ptn_ninja import read_ptn_ninja_url
from takzero.io.version import file_sha256, program_version
from takzero.match import main
from takzero.matches.openings import Opening, load_openings
from takzero.matches.spec import MatchSpec
from takzero.protocols.tei.match import MatchAborted, MatchInterrupted, TimeControl, run_tei_match

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _pythonpath(monkeypatch: pytest.MonkeyPatch) -> None:
    """Engines started by the runner import takzero from this checkout."""
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + (os.pathsep + old if old else ""))


def tei(*args: str) -> str:
    return " ".join([sys.executable, "-m", "takzero.tei", *args])


def tiny_model(tmp_path: Path, size: int = 4) -> Path:
    import torch

    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
    from takzero.pipeline.export import export_checkpoint

    torch.manual_seed(0)
    model = TakNet(ModelConfig(size=size, channels=8, blocks=1))
    out = tmp_path / "model.pt"
    export_checkpoint(checkpoint_dict(model, generation=1, run_name="tiny", half_komi=0), out)
    return out


def replay_matches(path: Path, outcomes, ply_limit: int | None) -> None:
    """Every PTN game replays legally and ends with the result the runner reported."""
    games = read_ptn_file(path)
    assert len(games) == len(outcomes)
    for g, out in zip(games, outcomes, strict=True):
        game = g.replay(ply_limit=ply_limit, threefold=True)
        assert g.result == out.result == g.tags["Result"]
        assert g.tags["Player1"] == out.white and g.tags["Player2"] == out.black
        if out.reason in ("road", "flat", "draw", "ply limit", "repetition"):
            assert str(game.result) == out.result
            assert game.result.reason == out.reason
        else:  # a forfeit: the rules did not end the game
            assert not game.result.over
            assert out.result in ("1-0", "0-1")


@pytest.mark.slow
def test_network_engine_and_baseline_play_through_the_runner(tmp_path: Path, capsys) -> None:
    model = tiny_model(tmp_path)
    out = tmp_path / "games"
    code = main([
        "--engine", tei("--model", str(model), "--threads", "1"),
        "--engine", tei("--player", "greedy", "--seed", "1"),
        "--games", "2", "--size", "4", "--komi", "0", "--nodes", "8", "--seed", "5",
        "--out", str(out), "--links",
    ])
    printed = capsys.readouterr().out
    assert code == 0, printed
    v = program_version()
    net = f"takzero {v} tiny-g1 model {file_sha256(model)[:8]} auto"  # its id name: code, player, network
    assert f"match: {net} vs takzero {v} greedy" in printed
    assert f"score of {net} vs takzero {v} greedy" in printed
    assert "elo difference" in printed and "95%" in printed
    games = read_ptn_file(out / "games.ptn")
    assert len(games) == 2
    # Paired: the same opening with the colours swapped.
    assert games[0].moves[:2] == games[1].moves[:2]
    assert games[0].tags["Opening"] == games[1].tags["Opening"]
    assert games[0].tags["Player1"] == games[1].tags["Player2"]
    for g in games:
        game = g.replay(ply_limit=300, threefold=True)
        assert game.result.over
        assert str(game.result) == g.result == g.tags["Result"]
        assert f"{g.tags['Player1']} - {g.tags['Player2']} {g.result}" in printed
    # --links: a PTN Ninja link after each game line, opening that game
    lines = printed.splitlines()
    links = [ln.split("PTN Ninja: ", 1)[1] for ln in lines if ln.startswith("  PTN Ninja: ")]
    assert [read_ptn(read_ptn_ninja_url(url)[0])[0] for url in links] == games
    for i, line in enumerate(lines):
        if line.startswith("  PTN Ninja: "):
            assert lines[i - 1].startswith("game ")


def test_match_result_statistics_and_ply_limit(tmp_path: Path) -> None:
    lines: list[str] = []
    result, outcomes = run_tei_match(
        [tei("--player", "random", "--seed", "1"), tei("--player", "random", "--seed", "2")],
        MatchSpec(games=4, size=5, half_komi=2, seed=3, ply_limit=6), TimeControl(nodes=1),
        out_dir=tmp_path, printer=lines.append,
    )
    assert result.num_games == 4 and len(outcomes) == 4
    # Random players do not finish a 5x5 game in 6 plies: all adjudicated draws.
    assert all(o.reason == "ply limit" and o.result == "1/2-1/2" for o in outcomes)
    assert result.draws == 4 and result.score == 0.5
    est = result.elo()
    assert est.elo == 0.0 and est.model == "pentanomial"
    assert "elo difference" in lines[-2]
    replay_matches(tmp_path / "games.ptn", outcomes, ply_limit=6)
    assert all(g.tags["Komi"] == "1" for g in read_ptn_file(tmp_path / "games.ptn"))


FAKE_ENGINE = textwrap.dedent(
    """
    import sys, time
    mode = sys.argv[1]
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "tei":
            print("id name fake-" + mode)
            print("teiok", flush=True)
        elif cmd[0] == "isready":
            print("readyok", flush=True)
        elif cmd[0] == "go":
            if mode == "crash":
                sys.exit(3)
            if mode == "hang":
                time.sleep(60)
            print("bestmove " + {"garbage": "zz9", "illegal": "a1"}[mode], flush=True)
        elif cmd[0] == "quit":
            break
    """
)


@pytest.mark.parametrize(
    "mode, reason",
    [("crash", "crash"), ("garbage", "illegal move"), ("illegal", "illegal move"),
     pytest.param("hang", "timeout", marks=pytest.mark.slow)],
)
def test_bad_engines_lose_and_the_match_goes_on(tmp_path: Path, mode: str, reason: str) -> None:
    fake = tmp_path / "fake.py"
    fake.write_text(FAKE_ENGINE)
    lines: list[str] = []
    # The opening "a1 b1" fills a1, so the fake's "a1" is illegal; "zz9" is not PTN at all.
    result, outcomes = run_tei_match(
        [f"{sys.executable} {fake} {mode}", tei("--player", "random")],
        MatchSpec(games=2, size=4, half_komi=0,
                  openings=(Opening(Position.start(4), (Position.start(4).check_move("a1"),
                                                        Position.start(4).play("a1").check_move("b1"))),)),
        TimeControl(nodes=5, move_timeout=1.5),
        out_dir=tmp_path, printer=lines.append,
    )
    assert len(outcomes) == 2
    for i, out in enumerate(outcomes):
        fake_white = i == 0
        assert out.reason == reason, out.detail
        assert out.winner == (1 if fake_white else 0)
        assert out.result == ("0-1" if fake_white else "1-0")
        assert "fake" in out.detail
    assert result.losses == 2 and result.wins == 0
    assert math.isinf(result.elo().elo)
    replay_matches(tmp_path / "games.ptn", outcomes, ply_limit=300)
    text = (tmp_path / "games.ptn").read_text()
    assert "forfeits" in text


def test_an_engine_that_cannot_start_aborts_the_match(tmp_path: Path, capsys) -> None:
    lines: list[str] = []
    with pytest.raises(MatchAborted, match="engine1 .*no-such-engine.* did not start"):
        run_tei_match(
            [str(tmp_path / "no-such-engine"), tei("--player", "random")],
            MatchSpec(games=2, size=3, half_komi=0), TimeControl(nodes=1), out_dir=tmp_path,
            printer=lines.append,
        )
    assert not any(ln.startswith("game ") for ln in lines)
    argv = ["--engine", str(tmp_path / "nope"), "--engine", "nope2", "--out", str(tmp_path / "m")]
    assert main(argv) == 3
    assert "did not start" in capsys.readouterr().err


def test_load_openings(tmp_path: Path) -> None:
    f = tmp_path / "openings.txt"
    f.write_text(
        "# two plies each\n"
        "a1 e5\n"
        "1. e1 a5   # numbered\n"
        "\n"
        "x5/x5/x2,1,x2/x5/x5 2 1\n"
        "x5/x5/x2,1,x2/x5/x5 2 1 | b2\n"
    )
    ops = load_openings(f, 5, 4)
    assert [op.describe() for op in ops] == [
        "a1 e5",
        "e1 a5",
        "x5/x5/x2,1,x2/x5/x5 2 1",
        "x5/x5/x2,1,x2/x5/x5 2 1 | b2",
    ]
    assert all(op.start.half_komi == 4 for op in ops)
    assert ops[3].start.side_to_move == 1 and len(ops[3].moves) == 1
    bad = tmp_path / "bad.txt"
    bad.write_text("a1 e5\na1 a1\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: opening move 'a1'"):
        load_openings(bad, 5, 0)
    bad.write_text("x6/x6/x6/x6/x6/x6 1 1\n")
    with pytest.raises(ValueError, match="6x6 position in a 5x5 match"):
        load_openings(bad, 5, 0)
    bad.write_text("# nothing\n")
    with pytest.raises(ValueError, match="no openings"):
        load_openings(bad, 5, 0)
    ptn = tmp_path / "book.ptn"
    ptn.write_text('[Size "4"]\n\n1. a1 d4\n\n[Size "4"]\n\n1. b2 c3 2. a1\n')
    ops = load_openings(ptn, 4, 0)
    assert [op.describe() for op in ops] == ["a1 d4", "b2 c3 a1"]


def test_time_control_commands() -> None:
    tc = TimeControl.parse_tc("60+0.5")
    assert (tc.base, tc.inc) == (60000, 500)
    assert tc.go_command((59000.4, 61000)) == "go wtime 59000 btime 61000 winc 500 binc 500"
    assert tc.timeout(2000) == pytest.approx(3.0)
    assert TimeControl(nodes=7).go_command((0, 0)) == "go nodes 7"
    assert TimeControl(movetime=250).go_command((0, 0)) == "go movetime 250"
    with pytest.raises(ValueError):
        TimeControl.parse_tc("0+1")


def test_cli_rejects_bad_arguments(tmp_path: Path, capsys) -> None:
    assert main(["--engine", "a", "--engine", "b", "--komi", "0.3"]) == 2
    assert "multiple of 0.5" in capsys.readouterr().err
    assert main(["--engine", "a", "--engine", "b", "--openings", str(tmp_path / "none")]) == 2
    assert main(["--engine", "a", "--games", "2"]) == 2
    assert "exactly two engines" in capsys.readouterr().err
    assert main(["--engine", "a", "--engine", "b", "--movetime", "0"]) == 2  # was read as 1000
    assert "--movetime must be >= 1" in capsys.readouterr().err


# -- issue 15: fallback, per-engine limits, Ctrl-C --------------------------------------------

SAYING_ENGINE = textwrap.dedent(
    """
    import sys
    say = sys.argv[1]  # what to say after teinewgame ('' for nothing)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "tei":
            print("id name model-5x5")
            print("teiok", flush=True)
        elif cmd[0] == "teinewgame" and say:
            print("info string " + say.replace("SIZE", cmd[1]), flush=True)
        elif cmd[0] == "isready":
            print("readyok", flush=True)
        elif cmd[0] == "go":
            print("bestmove zz9", flush=True)  # forfeits at once: the games are short
        elif cmd[0] == "quit":
            break
    """
)


def _saying(tmp_path: Path, say: str) -> str:
    path = tmp_path / "saying.py"
    path.write_text(SAYING_ENGINE)
    return f"{sys.executable} {path} '{say}'"


FALLBACK_SAY = "the model plays 5x5 only; playing SIZExSIZE with the baseline uct:200"


def test_an_engine_that_would_play_its_fallback_stops_the_match(tmp_path: Path, capsys) -> None:
    engine = _saying(tmp_path, FALLBACK_SAY)
    lines: list[str] = []
    with pytest.raises(MatchAborted, match="does not play 6x6 itself.*--allow-fallback.*uct:200"):
        run_tei_match([engine, tei("--player", "random")], MatchSpec(games=2, size=6, half_komi=0),
                      TimeControl(nodes=1), printer=lines.append)
    assert not any(ln.startswith("game ") for ln in lines)
    assert main(["--engine", engine, "--engine", tei("--player", "random"), "--size", "6",
                 "--nodes", "1", "--out", str(tmp_path / "m")]) == 3
    assert "does not play 6x6 itself" in capsys.readouterr().err


def test_allowed_fallback_is_named_after_the_baseline(tmp_path: Path) -> None:
    lines: list[str] = []
    result, outcomes = run_tei_match(
        [_saying(tmp_path, FALLBACK_SAY), tei("--player", "random")], MatchSpec(games=2, size=6, half_komi=0),
        TimeControl(nodes=1), printer=lines.append, out_dir=tmp_path, allow_fallback=True,
    )
    name = "uct:200 (fallback of model-5x5)"
    assert result.player_a == name
    assert outcomes[0].white == name and outcomes[1].black == name
    games = read_ptn_file(tmp_path / "games.ptn")
    assert games[0].tags["Player1"] == name and games[1].tags["Player2"] == name
    assert lines[-3].startswith(f"score of {name} vs ")


def test_an_engine_that_refuses_the_size_stops_the_match(tmp_path: Path) -> None:
    engine = _saying(tmp_path, "the model plays 5x5 only and Fallback is none: cannot play SIZExSIZE")
    with pytest.raises(MatchAborted, match="refuses 6x6"):
        run_tei_match([engine, tei("--player", "random")], MatchSpec(games=2, size=6, half_komi=0),
                      TimeControl(nodes=1), printer=lambda s: None, allow_fallback=True)


@pytest.mark.parametrize(("given", "want"), [(["3", "7"], (3, 7)), (["5"], (5, 5))])
def test_node_limits_per_engine(tmp_path: Path, capsys, given: list[str], want: tuple[int, int]) -> None:
    """``--nodes A B``: engine 1 is asked ``go nodes A`` and engine 2 ``go nodes B`` in every game
    whatever its colour (the README's ``uct:1000`` engine really searches 1000)."""
    engine = _saying(tmp_path, "")
    assert main(["--engine", engine, "--engine", engine, "--size", "4", "--games", "2", "--log",
                 "--nodes", *given, "--out", str(tmp_path / "m")]) == 0
    captured = capsys.readouterr()
    gos = [ln.split(None, 2) for ln in captured.err.splitlines() if " > go " in ln]
    assert len(gos) == 2  # one move each: the fakes forfeit
    assert {(label, text) for label, _, text in gos} == {("engine1", f"go nodes {want[0]}"),
                                                          ("engine2", f"go nodes {want[1]}")}
    if want[0] != want[1]:
        assert f"nodes {want[0]}" in captured.out and f"nodes {want[1]}" in captured.out
    assert main(["--engine", engine, "--engine", engine, "--nodes", "1", "2", "3"]) == 2


def test_interrupt_prints_the_score_so_far(tmp_path: Path) -> None:
    """Ctrl-C (here: raised by the printer after the second game) ends the match cleanly: the
    engines are stopped, the two games are in the PTN file and the score so far is printed with a
    real interval."""
    lines: list[str] = []

    def printer(line: str) -> None:
        lines.append(line)
        if line.startswith("game 2/"):
            raise KeyboardInterrupt

    engine = _saying(tmp_path, "")
    with pytest.raises(MatchInterrupted) as info:
        run_tei_match([engine, tei("--player", "random")], MatchSpec(games=6, size=4, half_komi=0),
                      TimeControl(nodes=1), printer=printer, out_dir=tmp_path)
    assert info.value.result.num_games == 2 and len(info.value.outcomes) == 2
    assert "interrupted after 2 of 6 games" in lines[-4]
    # every tally W-D-L: two losses are 0-0-2, per game and in the score line
    game_lines = [ln for ln in lines if ln.startswith("game ")]
    assert game_lines[0].endswith("; model-5x5 0-0-1 (W-D-L)")
    assert game_lines[1].endswith("; model-5x5 0-0-2 (W-D-L)")
    assert lines[-3].startswith(f"score of model-5x5 vs takzero {program_version()} random: 0-0-2 (W-D-L) "
                                "[0.000] 2 games")
    # the interval names its model: the two games share an opening, one pair
    assert "): < +" in lines[-2] and "inf" not in lines[-2]  # a one-sided result: its bound
    assert lines[-2].endswith("(95%, pentanomial score-test interval, 1 game pair)")
    assert len(read_ptn_file(tmp_path / "games.ptn")) == 2


@pytest.mark.slow
def test_ctrl_c_exits_130_with_the_score(tmp_path: Path) -> None:
    """A real SIGINT to ``python -m takzero.match`` while an engine thinks: status 130, the
    score so far on stdout, no traceback."""
    import signal
    import subprocess
    import time

    fake = tmp_path / "fake.py"
    fake.write_text(FAKE_ENGINE)
    proc = subprocess.Popen(
        [sys.executable, "-m", "takzero.match", "--engine", f"{sys.executable} {fake} hang",
         "--engine", f"{sys.executable} {fake} hang", "--nodes", "1", "--move-timeout", "300",
         "--out", str(tmp_path / "m")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        # as from a shell: SIGINT not ignored, whatever an earlier test left in this process
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the match line: both engines are up, game 1 is on
    assert first.startswith("match: "), first + proc.stderr.read() if proc.stderr else first
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted after 0 of 10 games" in out
    assert "too few games (0) for an Elo interval" in out
    assert "Traceback" not in err


def test_an_unusable_out_is_refused_at_start_naming_out(tmp_path: Path, capsys) -> None:
    """--out a file, or a folder whose games.ptn is a folder: exit 2 naming --out before any
    engine starts; an earlier games.ptn is never emptied by a match that plays no game."""
    (tmp_path / "afile").write_text("x")
    (tmp_path / "d" / "games.ptn").mkdir(parents=True)
    for out in (tmp_path / "afile", tmp_path / "afile" / "sub", tmp_path / "d"):
        argv = ["--engine", str(tmp_path / "nope"), "--engine", "nope2", "--out", str(out)]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "--out" in err and "did not start" not in err
    old = tmp_path / "old"
    old.mkdir()
    (old / "games.ptn").write_text("[Event \"earlier\"]\n\n1. a1 e5\n")
    argv = ["--engine", str(tmp_path / "nope"), "--engine", "nope2", "--out", str(old)]
    assert main(argv) == 3
    assert (old / "games.ptn").read_text().startswith("[Event \"earlier\"]")


def test_a_second_match_into_one_folder_keeps_the_earlier_games(tmp_path: Path) -> None:
    """``--out DIR`` twice: the second match writes games_2.ptn (and says so), the first
    match's games.ptn is left as it was (it used to be replaced)."""
    engines = [tei("--player", "random", "--seed", "1"), tei("--player", "random", "--seed", "2")]
    first = "[Event \"earlier\"]\n\n1. a1 e5\n"
    (tmp_path / "games.ptn").write_text(first)
    for n in (2, 3):
        lines: list[str] = []
        _, outcomes = run_tei_match(engines, MatchSpec(games=2, size=4, half_komi=0, seed=n, ply_limit=4),
                                    TimeControl(nodes=1), out_dir=tmp_path, printer=lines.append)
        assert f"this match's games go to {tmp_path / f'games_{n}.ptn'}" in lines[0]
        assert lines[-1] == f"games written to {tmp_path / f'games_{n}.ptn'}"
        replay_matches(tmp_path / f"games_{n}.ptn", outcomes, ply_limit=4)
    assert (tmp_path / "games.ptn").read_text() == first
    assert (tmp_path / "games_2.ptn").read_text() != (tmp_path / "games_3.ptn").read_text()


def test_engines_that_announce_the_same_program_and_player_are_flagged(tmp_path: Path) -> None:
    """Two different commands whose engines announce the same ``id name`` (the same code, player
    and network: here the random player with two seeds) get a warning line before the games (the
    mistake it catches: ``python -m takzero.tei`` run from a folder holding another takzero, which
    goes before ``PYTHONPATH``, so both sides run one program); two different players do not."""
    lines: list[str] = []
    run_tei_match([tei("--player", "random", "--seed", "1"), tei("--player", "random", "--seed", "2")],
                  MatchSpec(games=2, size=4, half_komi=0), TimeControl(nodes=1), printer=lines.append,
                  out_dir=tmp_path / "same")
    warnings = [ln for ln in lines if ln.startswith("warning: both engines announce")]
    assert len(warnings) == 1 and f"takzero {program_version()} random" in warnings[0]
    assert lines.index(warnings[0]) < min(i for i, ln in enumerate(lines) if ln.startswith("game "))
    lines.clear()
    run_tei_match([tei("--player", "random"), tei("--player", "uct:2")], MatchSpec(games=2, size=4, half_komi=0),
                  TimeControl(nodes=1), printer=lines.append, out_dir=tmp_path / "other")
    assert not [ln for ln in lines if ln.startswith("warning")]
    assert lines[0].startswith(f"match: takzero {program_version()} random vs takzero {program_version()} uct")


@pytest.mark.parametrize("half_komi", [100, -21])
def test_a_komi_the_engine_does_not_announce_stops_the_match(tmp_path: Path, half_komi: int) -> None:
    """An engine whose TEI version 1 size lines do not list the match's half komi for its size
    stops the match before any game: takzero's engine keeps komi 0 for ``HalfKomi 100`` (an
    ``info string``), so the games were played at komi 0 and scored by the runner at komi 50."""
    with pytest.raises(MatchAborted, match=rf"random#1 \(.*\) plays 4x4 with half komi -20\.\.20 only, not the match's "
                                           rf"{half_komi} .*no games played"):
        run_tei_match([tei("--player", "random"), tei("--player", "random")],
                      MatchSpec(games=2, size=4, half_komi=half_komi), TimeControl(nodes=1), printer=lambda s: None,
                      out_dir=tmp_path)
    assert not (tmp_path / "games.ptn").exists()


def test_an_engine_without_size_lines_is_not_held_to_a_komi(tmp_path: Path) -> None:
    """A TEI version 0 engine (no size lines; here a fake one) says nothing of its komis: the match
    plays on."""
    engine = _saying(tmp_path, "")
    result, _ = run_tei_match([engine, engine], MatchSpec(games=2, size=4, half_komi=100, ply_limit=4),
                              TimeControl(nodes=1), printer=lambda s: None)
    assert result.num_games == 2
