"""``tei:`` baselines: any TEI engine as a yardstick of ``takzero.evaluate`` and of the training
evaluator, played through the TEI client of ``protocols/tei/match.py``. The external engine is the
project's own (``python -m takzero.tei --player greedy``, cheap), plus a small fake engine (this
file writes it) that crashes or plays an illegal move on cue. Every engine started is checked to
be gone afterwards, also when its parent is killed."""

from __future__ import annotations

import functools
import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from smoke_config import smoke_raw

from takzero.config import ConfigError, load_config
from takzero.game.position import Position
from takzero.matches.games import NetSide, play_match
from takzero.matches.openings import random_openings
from takzero.nn.inference import Evaluator
from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
from takzero.pipeline.gating import GatingEvaluator
from takzero.pipeline.progress import evaluation_line
from takzero.players import GreedyPlayer, make_player
from takzero.players.base import PlayerFailed
from takzero.players.registry import check_spec, engine_spec, spec_label
from takzero.protocols.tei.player import EnginePlayer, make_baseline
from takzero.search import SearchConfig

ROOT = Path(__file__).resolve().parent.parent
PY = shlex.quote(sys.executable)
#: the project's own TEI engine as the external one: one-ply greedy, quick to answer
GREEDY_ENGINE = f"{PY} -m takzero.tei --player greedy"

#: A TEI engine in a few lines: 'crash' writes to stderr and exits at its first go; 'illegal'
#: answers every go with a move that is not on the board; 'hang' never answers a go.
FAKE_ENGINE = textwrap.dedent("""
    import sys
    mode = sys.argv[1]
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "tei":
            print("id name fake", flush=True)
            print("teiok", flush=True)
        elif cmd[0] == "isready":
            print("readyok", flush=True)
        elif cmd[0] == "go":
            if mode == "crash":
                print("fake engine: out of luck at go", file=sys.stderr, flush=True)
                sys.exit(3)
            if mode == "illegal":
                print("bestmove z9", flush=True)
        elif cmd[0] == "quit":
            break
""")


@pytest.fixture
def fake_engine(tmp_path: Path) -> Path:
    path = tmp_path / "fake_engine.py"
    path.write_text(FAKE_ENGINE)
    return path


def _gone(pid: int) -> bool:
    """The process ``pid`` has ended (no /proc entry, or a zombie waiting for its parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"


def _children() -> set[int]:
    """Pids of this process's living children (from /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            out.add(int(stat.parent.name))
    return out


def _side(size: int) -> NetSide:
    torch.manual_seed(0)
    net = Evaluator(TakNet(ModelConfig(size=size, channels=8, blocks=1)), device="cpu")
    cfg = SearchConfig(simulations=4, tinue_nodes=0).evaluation()
    return NetSide(name="net", evaluator=net, config=cfg, simulations=4)


def test_engine_specs_parse_label_and_are_refused_where_engines_do_not_play() -> None:
    spec = engine_spec("tei:nodes=200:python -m takzero.tei --player uct:200")
    assert spec is not None and spec.nodes == 200 and spec.movetime is None
    assert spec.command == "python -m takzero.tei --player uct:200"
    assert spec_label("tei:nodes=200:python -m takzero.tei --player uct:200") == (
        "tei-python-m-takzero.tei-player-uct-200-n200")
    default = engine_spec("tei:/opt/engines/tiltak --tei")
    assert default is not None and default.movetime == 1000 and default.nodes is None
    assert spec_label("tei:/opt/engines/tiltak --tei") == "tei-tiltak-tei-mt1000"  # no folder
    assert spec_label("tei:movetime=50:name=tiltak50:tiltak") == "tiltak50"
    assert engine_spec("uct:20") is None
    assert check_spec("tei:x", engines=True) == "tei"
    for bad, why in [("tei:", "needs the engine's command"), ("tei:nodes=0:x", "nodes= must be"),
                     ("tei:nodes=1:movetime=2:x", "not both"), ("tei:name=a/b:x", "name= must be"),
                     ("tei:nodes=1:nodes=2:x", "given twice"), ('tei:"open', "cannot be split")]:
        with pytest.raises(ValueError, match=why):
            check_spec(bad, engines=True)
    for refuse in (make_player, check_spec):  # the TEI engine, play, playtak: no engines there
        with pytest.raises(ValueError, match="external TEI engine"):
            refuse("tei:x")


_cfg = functools.partial(smoke_raw, run_name="test")


def test_config_rejects_bad_engine_specs_and_twin_labels_with_the_key() -> None:
    ok = load_config(_cfg(**{"evaluator.baselines": ["greedy", f"tei:nodes=5:{GREEDY_ENGINE}"]}))
    assert ok.evaluator.baselines[1].startswith("tei:nodes=5:")
    with pytest.raises(ConfigError, match=r"evaluator.baselines: unknown player 'tei:nodes=x:a'.*nodes="):
        load_config(_cfg(**{"evaluator.baselines": ["tei:nodes=x:a"]}))
    with pytest.raises(ConfigError, match=r"evaluator.baselines: has the label 'twin'"):
        load_config(_cfg(**{"evaluator.baselines": ["tei:name=twin:a", "tei:name=twin:b"]}))


@pytest.mark.slow  # an engine process started (a minute on a busy machine)
def test_an_engine_plays_a_batched_match_and_is_stopped() -> None:
    side = _side(4)
    start = Position.start(4)
    openings = random_openings(start, 2, plies=2, seed=3)
    with EnginePlayer(f"tei:nodes=1:{GREEDY_ENGINE}") as engine:
        match = play_match(side, engine, start, openings, ply_limit=40, seed=1)
        pid = engine.pid
        assert pid is not None and not _gone(pid)
    assert _gone(pid)
    assert match.num_games == 4 and match.wins + match.draws + match.losses == 4
    names = {(g.white, g.black) for g in match.games}
    assert names == {("net", engine.name), (engine.name, "net")}  # paired: each colour once
    assert all(g.reason for g in match.games)  # every game ended by the rules or the ply limit


@pytest.mark.parametrize("mode, reason, words", [
    ("crash", "crash", "out of luck at go"), ("illegal", "illegal move", "played 'z9'")])
def test_an_engine_that_fails_mid_match_raises_a_clear_error_and_is_gone(
    fake_engine: Path, mode: str, reason: str, words: str
) -> None:
    engine = EnginePlayer(f"tei:name=fake:{PY} {shlex.quote(str(fake_engine))} {mode}")
    start = Position.start(4)
    try:
        engine.reset(4, 0)  # started, teinewgame answered
        pid = engine.pid
        assert pid is not None
        with pytest.raises(PlayerFailed) as err:
            play_match(_side(4), engine, start, random_openings(start, 1, plies=2, seed=0), 40)
    finally:
        engine.close()
    assert err.value.reason == reason
    assert "engine fake" in str(err.value) and words in str(err.value)
    assert _gone(pid)


@pytest.mark.slow  # waits out the move timeout of movetime=1 (10 s)
def test_an_engine_that_hangs_times_out_and_is_killed(fake_engine: Path) -> None:
    engine = EnginePlayer(f"tei:movetime=1:name=stuck:{PY} {shlex.quote(str(fake_engine))} hang")
    start = Position.start(4)
    try:
        engine.reset(4, 0)
        pid = engine.pid
        assert pid is not None
        with pytest.raises(PlayerFailed, match=r"engine stuck .*did not answer bestmove within") as err:
            play_match(_side(4), engine, start, random_openings(start, 1, plies=2, seed=0), 40)
    finally:
        engine.close()
    assert err.value.reason == "timeout" and _gone(pid)


def test_an_engine_that_does_not_start_says_so() -> None:
    engine = EnginePlayer("tei:name=nothing:/nonexistent/engine --tei")
    with pytest.raises(PlayerFailed, match=r"engine nothing \(/nonexistent/engine --tei\): did not start"):
        engine.reset(4, 0)
    engine.close()


def test_an_engine_whose_parent_is_killed_ends_with_its_input(tmp_path: Path) -> None:
    """``kill -9`` of the process that holds the engine (as ``ray.kill`` ends an evaluator):
    the engine reads the end of its input and quits, no orphan left."""
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        from takzero.protocols.tei.player import EnginePlayer
        e = EnginePlayer({f"tei:nodes=1:{GREEDY_ENGINE}"!r})
        e.start()
        print(e.pid, flush=True)
        time.sleep(600)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = parent.stdout.readline() if parent.stdout else ""
        engine_pid = int(line)
        assert not _gone(engine_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 120  # a wait, not a timed assertion: it ends at once when gone
        while not _gone(engine_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _gone(engine_pid), "the engine outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


@pytest.mark.slow  # an engine process started and a match (a minute or two on a busy machine)
def test_the_training_evaluator_plays_engines_and_records_a_failed_one(fake_engine: Path) -> None:
    broken = f"tei:name=broken:{PY} {shlex.quote(str(fake_engine))} crash"
    good = f"tei:nodes=1:name=tei-greedy:{GREEDY_ENGINE}"
    cfg = load_config(_cfg(**{
        "board.size": 4, "mcts.simulations": 4, "evaluator.gating": "off",
        "evaluator.baseline_games": 2, "evaluator.baselines": ["random", broken, good],
        "selfplay.ply_limit": 40,
    }))
    before = _children()
    ev = GatingEvaluator(cfg)
    torch.manual_seed(0)
    weights = TakNet(cfg.model_config()).state_dict()
    out = ev.evaluate((3, weights), (2, weights), play_baselines=True)
    assert _children() <= before  # every engine stopped
    assert [(m["kind"], m["opponent"]) for m in out["matches"]] == [
        ("baseline", "random"), ("baseline", "broken"), ("baseline", "tei-greedy")]
    failed = out["matches"][1]
    assert "out of luck at go" in failed["error"] and failed["games"] == 0
    line = evaluation_line(3, failed)
    assert line.startswith("evaluation: gen 3 vs broken: FAILED after ") and "out of luck" in line
    played = out["matches"][2]
    assert played["games"] == 2 and played["wins"] + played["draws"] + played["losses"] == 2
    # the same lines and tags as any baseline; none for the failed one
    assert out["scalars"]["score/vs_tei-greedy"] == played["score"] and "elo/vs_tei-greedy" in out["scalars"]
    assert not any("broken" in k for k in out["scalars"])
    assert '[Player2 "tei-greedy"]' in out["ptn"]["baseline_gen00003_vs_tei-greedy.ptn"] or \
        '[Player1 "tei-greedy"]' in out["ptn"]["baseline_gen00003_vs_tei-greedy.ptn"]


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    path = tmp_path / "tiny.pt"
    torch.save(checkpoint_dict(TakNet(ModelConfig(size=4, channels=8, blocks=1))), path)
    return path


def test_evaluate_plays_an_engine_and_reports_a_dead_one(tiny_model: Path, capsys: pytest.CaptureFixture) -> None:
    from takzero.evaluate import main

    before = _children()
    status = main([str(tiny_model), "--pairs", "1", "--simulations", "4", "--ply-limit", "40",
                   "--baselines", f"tei:nodes=1:{GREEDY_ENGINE}", "tei:name=dead:/nonexistent/engine"])
    assert _children() <= before
    captured = capsys.readouterr()
    lines = [json.loads(x) for x in captured.out.splitlines()]
    assert status == 1 and "1 baseline(s) failed: tei:name=dead:/nonexistent/engine" in captured.err
    assert lines[0]["games"] == 2 and lines[0]["baseline"].startswith("tei:nodes=1:")
    assert lines[0]["wins"] + lines[0]["draws"] + lines[0]["losses"] == 2
    assert lines[1]["baseline"] == "tei:name=dead:/nonexistent/engine" and "did not start" in lines[1]["error"]
    assert "vs tei:name=dead:/nonexistent/engine: FAILED: engine dead" in captured.err


def test_make_baseline_builds_players_and_engines() -> None:
    assert isinstance(make_baseline("greedy"), GreedyPlayer)
    engine = make_baseline("tei:nodes=3:x")
    assert isinstance(engine, EnginePlayer) and engine.pid is None and engine._stderr is None  # nothing held yet
    assert engine.tc.go_command((0.0, 0.0)) == "go nodes 3"
    engine.close()
    with EnginePlayer("tei:x") as default:  # no limit given: one second a move
        assert default.tc.go_command((0.0, 0.0)) == "go movetime 1000"
    with EnginePlayer("tei:movetime=250:x") as timed:
        assert timed.tc.go_command((0.0, 0.0)) == "go movetime 250"
