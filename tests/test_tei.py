"""TEI engine: golden transcripts (exact lines, timing fields normalised), stop/movetime,
tree reuse, and robustness against bad input.

Regenerate the golden files after an intended change of the output with
``TAKZERO_REGEN_GOLDEN=1 pytest tests/test_tei.py`` and review the diff.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from takzero.game import Position
from takzero.io.version import program_version
from takzero.players import PlayerMove, RandomPlayer
from takzero.protocols.tei.engine import TEIEngine
from takzero.protocols.tei.lines import SearchLimits, parse_go, value_to_cp
from takzero.search.limit import Limit

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "data" / "tei"
REGEN = os.environ.get("TAKZERO_REGEN_GOLDEN") == "1"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def normalise(
    lines: list[str], replace: dict[str, str] | None = None, values: bool = False
) -> list[str]:
    """Timing fields of info lines -> '*'; with ``values`` also score and wdl (float-sensitive);
    the program's version and the model's digest in ``id name`` -> ``<version>`` / ``<sha>``."""
    out = []
    for line in lines:
        for old, new in (replace or {}).items():
            line = line.replace(old, new)
        if line.startswith("id name "):
            line = line.replace(program_version(), "<version>")
            line = re.sub(r" model [0-9a-f]{8} ", " model <sha> ", line)
        if line.startswith("info ") and not line.startswith("info string"):
            line = re.sub(r"\btime \d+", "time *", line)
            line = re.sub(r"\bnps \d+", "nps *", line)
            if values:
                line = re.sub(r"\bscore cp -?\d+", "score cp *", line)
                line = re.sub(r"\bwdl \d+ \d+ \d+", "wdl * * *", line)
        out.append(line)
    return out


class Lockstep:
    """A script read as a peer that waits for answers: the line after a finite ``go`` is given
    only once that ``go`` has its ``bestmove`` in ``lines`` (a ``stop`` or ``quit`` read while
    searches run stops them all, so a script read ahead would cut its searches at random)."""

    def __init__(self, script: str, lines: list[str], timeout: float = 120) -> None:
        self._rest = io.StringIO(script)
        self._lines = lines
        self._goes = 0
        self._timeout = timeout

    def readline(self, size: int = -1) -> str:
        deadline = time.monotonic() + self._timeout
        while sum(ln.startswith("bestmove") for ln in list(self._lines)) < self._goes:
            assert time.monotonic() < deadline, "no bestmove"
            time.sleep(0.002)
        line = self._rest.readline(size)
        words = line.split()
        if words[:1] == ["go"] and "infinite" not in words:
            self._goes += 1
        return line


def run_session(script: str, **kwargs) -> list[str]:
    lines: list[str] = []
    engine = TEIEngine(out=lines.append, **kwargs)
    engine.run(Lockstep(script, lines))
    return lines


def check_golden(name: str, lines: list[str]) -> None:
    path = GOLDEN / f"{name}.out"
    if REGEN:
        path.write_text("\n".join(lines) + "\n")
    expected = path.read_text().splitlines()
    assert lines == expected


# ---------------------------------------------------------------------------------------------
# Golden transcripts
# ---------------------------------------------------------------------------------------------


def test_golden_baseline_session() -> None:
    script = (GOLDEN / "baseline_session.in").read_text()
    lines = normalise(run_session(script, player="uct:50", seed=7))
    check_golden("baseline_session", lines)
    # The transcript covers the error paths it claims to.
    text = "\n".join(lines)
    for needle in (
        "unknown command 'hello'",
        "is not empty",
        "is not a PTN move",
        "bad TPS",
        "over the carry limit",
        "board size must be 3..8",
        "bestmove (none)",
        "unknown option 'Frob'",
        "HalfKomi must be an integer in -20..20, got '99'; keeping 4",
    ):
        assert needle in text


def test_golden_baseline_session_as_subprocess() -> None:
    """The same script through ``python -m takzero.tei`` gives the same transcript."""
    script = (GOLDEN / "baseline_session.in").read_text()
    proc = subprocess.Popen(
        [sys.executable, "-m", "takzero.tei", "--player", "uct:50", "--seed", "7"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(ln.rstrip("\n") for ln in proc.stdout), daemon=True)
    reader.start()
    steps = Lockstep(script, got)  # one line at a time, after the answer of each go
    try:
        while line := steps.readline():
            proc.stdin.write(line)
            proc.stdin.flush()
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    finally:
        proc.kill()
    reader.join(timeout=30)
    expected = (GOLDEN / "baseline_session.out").read_text().splitlines()
    assert normalise(got) == expected


def test_golden_network_session(tmp_path: Path, tiny_tei_model) -> None:
    model = tiny_tei_model(tmp_path)
    script = (GOLDEN / "network_session.in").read_text()
    lines = run_session(script, model=str(model), seed=7)
    lines = normalise(lines, {str(model): "<MODEL>"}, values=True)
    check_golden("network_session", lines)
    text = "\n".join(lines)
    assert "playing 5x5 with the baseline uct:200" in text
    assert "Fallback none refused" in text
    assert "4x4 only and Fallback is none: 5x5 refused" in text  # teinewgame and position tps
    assert "cannot load model" in text
    assert any(" wdl " in ln for ln in lines)


# ---------------------------------------------------------------------------------------------
# Searching: stop, movetime, tree reuse
# ---------------------------------------------------------------------------------------------


class PipeEngine:
    """An engine running on a thread, fed through a pipe; lines are collected with times."""

    def __init__(self, **kwargs) -> None:
        self.lines: list[tuple[float, str]] = []
        self.engine = TEIEngine(out=lambda s: self.lines.append((time.monotonic(), s)), **kwargs)
        r, w = os.pipe()
        self.reader = os.fdopen(r, "r")
        self.writer = os.fdopen(w, "w")
        self.thread = threading.Thread(target=self.engine.run, args=(self.reader,), daemon=True)
        self.thread.start()

    def send(self, text: str) -> float:
        self.writer.write(text + "\n")
        self.writer.flush()
        return time.monotonic()

    def wait_for(self, prefix: str, timeout: float) -> tuple[float, str]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for t, line in self.lines:
                if line.startswith(prefix):
                    return t, line
            time.sleep(0.01)
        raise AssertionError(f"no '{prefix}' within {timeout} s: {self.lines}")

    def close(self) -> None:
        self.send("quit")
        self.thread.join(10)
        self.writer.close()
        self.reader.close()


def test_go_infinite_runs_until_stop() -> None:
    eng = PipeEngine(player="uct:50", seed=1)
    try:
        eng.send("teinewgame 4")
        eng.send("position startpos moves a1 d4")
        eng.send("go infinite")
        eng.send("isready")  # answered at once during an infinite search
        eng.wait_for("readyok", 10)
        time.sleep(0.5)
        assert not any(line.startswith("bestmove") for _, line in eng.lines)
        t_stop = eng.send("stop")
        t_best, best = eng.wait_for("bestmove", 10)
        assert t_best - t_stop < 5.0
        move = best.split()[1]
        Position.start(4).play("a1").play("d4").check_move(move)
    finally:
        eng.close()


def test_go_movetime_answers_in_time() -> None:
    eng = PipeEngine(player="uct:50", seed=1)
    try:
        eng.send("teinewgame 5")
        eng.send("position startpos moves a1 e5")
        t0 = eng.send("go movetime 400")
        t_best, best = eng.wait_for("bestmove", 20)
        # Budget 400 ms; allow for a loaded CI machine, but not for a search that ignores time.
        assert t_best - t0 < 4.0
        infos = [line for _, line in eng.lines if line.startswith("info depth")]
        assert infos and " pv " in infos[-1]
    finally:
        eng.close()


class RecordingPlayer(RandomPlayer):
    """A random player that records the calls the engine makes."""

    def __init__(self) -> None:
        super().__init__(seed=0, name="recorder")
        self.calls: list[tuple] = []

    def reset(self, size, half_komi, seed=None) -> None:
        super().reset(size, half_komi, seed)
        self.calls.append(("reset", size, half_komi))

    def observe(self, position, move) -> None:
        self.calls.append(("observe", position.ptn(move)))


def test_tree_reuse_observes_new_moves_only() -> None:
    rec = RecordingPlayer()
    engine = TEIEngine(out=lambda s: None, player="random")
    engine.baseline = rec
    engine._select_player(announce=False)
    for line in [
        "teinewgame 4",
        "position startpos moves a1 d4",
        "go",
        "position startpos moves a1 d4 b2 c3",
        "go",
        "position startpos moves a1 d1",
        "go",
        "quit",
    ]:
        engine.handle(line)
    engine._finish_search()
    names = [c for c in rec.calls]
    # teinewgame resets; the first go syncs a1 d4 (after a reset: no tree yet); the second go only
    # tells the two new moves; a position that is not an extension resets and replays.
    first = names.index(("observe", "a1"))
    assert names[first : first + 2] == [("observe", "a1"), ("observe", "d4")]
    rest = names[first + 2 :]
    assert rest[:2] == [("observe", "b2"), ("observe", "c3")]
    assert rest[2][0] == "reset"
    assert rest[3:] == [("observe", "a1"), ("observe", "d1")]


class FailingPlayer(RandomPlayer):
    def choose(self, position):
        raise RuntimeError("boom")


def test_a_failing_search_still_answers_a_legal_move() -> None:
    lines: list[str] = []
    engine = TEIEngine(out=lines.append, player="random")
    engine.baseline = FailingPlayer()
    engine._select_player(announce=False)
    # Lockstep: the quit comes after the bestmove (a go still queued at a quit is not searched)
    engine.run(Lockstep("teinewgame 4\nposition startpos moves a1\ngo nodes 5\nquit\n", lines))
    assert any("search failed (boom)" in ln for ln in lines)
    move = lines[-1].split()[1]
    assert lines[-1].startswith("bestmove")
    Position.start(4).play("a1").check_move(move)


def test_garbage_never_kills_the_engine() -> None:
    garbage = [
        "\x00\x01\x02",
        "position",
        "position tps",
        "position tps x4/x4 1",
        "position startpos moves a1 a1 a1",
        "go nodes",
        "go wtime abc",
        "setoption",
        "setoption name",
        "teinewgame x",
        "position startpos moves " + "a1 " * 500,
        "ééé ü",
        "go movetime 1e99",
        "isready",
    ]
    lines = run_session("\n".join(garbage) + "\n", player="random", seed=3)
    assert "readyok" in lines  # answered at once, even while the last search runs
    assert sum(1 for ln in lines if ln.startswith("bestmove")) == 3  # three go commands


@pytest.mark.slow  # the command line as a process
def test_unknown_model_file_fails_at_start_with_a_message(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "takzero.tei", "--model", str(tmp_path / "missing.pt")],
        input="quit\n", capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2
    assert "cannot start" in proc.stderr and "missing.pt" in proc.stderr


# ---------------------------------------------------------------------------------------------
# Small pieces
# ---------------------------------------------------------------------------------------------


def test_parse_go_and_budgets() -> None:
    limits, problems = parse_go("wtime 60000 btime 30000 winc 500 binc 250".split())
    assert problems == []
    assert limits.budget_seconds(0) == pytest.approx((60000 / 20 + 375 - 30) / 1000)
    assert limits.budget_seconds(1) == pytest.approx((30000 / 20 + 187.5 - 30) / 1000)
    limits, problems = parse_go(["movetime", "100", "nodes", "7", "bogus"])
    assert (limits.movetime, limits.nodes) == (100, 7)
    assert problems == ["go: unknown parameter 'bogus' ignored"]
    assert limits.budget_seconds(0) == pytest.approx(0.07)
    assert SearchLimits(infinite=True, movetime=5).budget_seconds(0) is None
    assert SearchLimits().budget_seconds(0) is None
    assert SearchLimits(wtime=10).budget_seconds(0) == pytest.approx(0.005)  # floor 5 ms


def test_value_to_cp_is_monotone_and_symmetric() -> None:
    values = [-1.0, -0.9, -0.5, -0.1, 0.0, 0.1, 0.5, 0.9, 1.0]
    cps = [value_to_cp(v) for v in values]
    assert cps == sorted(cps) and len(set(cps)) == len(cps)
    assert value_to_cp(0.0) == 0
    assert all(value_to_cp(v) == -value_to_cp(-v) for v in values)
    assert 90 <= value_to_cp(0.5) <= 115


def test_info_line_fields() -> None:
    from takzero.protocols.tei.lines import format_info

    pos = Position.start(4).play("a1").play("d4")
    pm = PlayerMove(
        pos.check_move("b2"),
        value=0.25,
        wdl=(0.5, 0.25, 0.25),
        nodes=100,
        pv=(pos.check_move("b2"),),
    )
    line = format_info(pos, pm, 0.5)
    assert line == (
        f"info depth 1 nodes 100 time 500 nps 200 score cp {value_to_cp(0.25)} "
        "wdl 500 250 250 pv b2"
    )


# ---------------------------------------------------------------------------------------------
# Analysis: MultiPV, HalfKomi in teinewgame (golden), time management, tree budget
# ---------------------------------------------------------------------------------------------


def test_golden_multipv_analysis_session() -> None:
    """MultiPV 3 on the UCT baseline with a fixed seed and node limit: the lines are exact up to
    the timing fields; each search reports three different moves, best (most visited) first."""
    script = (GOLDEN / "analysis_multipv.in").read_text()
    raw = run_session(script, player="uct:50", seed=3)
    lines = normalise(raw)
    check_golden("analysis_multipv", lines)
    infos = [ln.split() for ln in lines if ln.startswith("info depth")]
    ranked = [ln for ln in infos if "multipv" in ln]
    assert len(ranked) == 6  # two searches, three lines each
    for first in (0, 3):
        group = ranked[first : first + 3]
        assert [ln[ln.index("multipv") + 1] for ln in group] == ["1", "2", "3"]
        moves = [ln[ln.index("pv") + 1] for ln in group]
        assert len(set(moves)) == 3
        assert all(" ".join(ln).count(" wdl ") == 1 for ln in group)
    text = "\n".join(lines)
    assert "MultiPV must be an integer in 1..32, got '99'; keeping 3" in text
    assert "HalfKomi must be an integer in -20..20, got '41'; keeping 4" in text
    # After MultiPV 1: a plain info line again.
    last_info = [ln for ln in lines if ln.startswith("info depth")][-1]
    assert "multipv" not in last_info


def test_teinewgame_sets_size_and_half_komi_in_every_form() -> None:
    for line, size, hk in (
        ("teinewgame 4", 4, 0),
        ("teinewgame size 5 halfkomi 4", 5, 4),
        ("teinewgame 6 halfkomi -3", 6, -3),
        ("teinewgame size 3", 3, 0),
    ):
        engine = TEIEngine(out=lambda s: None, player="random")
        engine.handle(line)
        assert (engine.size, engine.half_komi, engine.start.half_komi) == (size, hk, hk), line
        assert engine.position == Position.start(size, half_komi=hk)


@pytest.mark.slow
def test_clock_never_runs_out() -> None:
    """A UCT engine plays both sides on a 6 s + 0.1 s clock (each side), its clock charged with
    the wall time from ``go`` to ``bestmove`` and given the increment after each move: it must
    never reach zero (the budget is at most half of what is left, less MoveOverhead) and must
    use its time (not answer every move at once)."""
    eng = PipeEngine(player="uct:5000", seed=2)
    try:
        eng.send("teinewgame 5")
        eng.send("isready")
        eng.wait_for("readyok", 600)  # warm-up (compiling) is not on the clock
        clock = [6000.0, 6000.0]
        inc = 100
        moves: list[str] = []
        pos = Position.start(5)
        spent = [0.0, 0.0]
        for ply in range(16):
            if pos.is_over:
                break
            eng.lines.clear()
            eng.send(f"position startpos moves {' '.join(moves)}".rstrip())
            t0 = eng.send(
                f"go wtime {int(clock[0])} btime {int(clock[1])} winc {inc} binc {inc}"
            )
            t1, best = eng.wait_for("bestmove", 30)
            side = ply % 2
            took = (t1 - t0) * 1000
            clock[side] -= took
            assert clock[side] > 0, (ply, took, clock)
            clock[side] += inc
            spent[side] += took
            move = best.split()[1]
            pos = pos.play(move)
            moves.append(move)
        assert min(spent) > 500, spent  # about 300 + 75 ms a move were budgeted
    finally:
        eng.close()


def test_uct_tree_budget_and_stop_flag() -> None:
    """TreeNodes bounds the UCT tree whatever the node limit, and a node-limited search ends
    soon after its stop flag is set from another thread (the kernel runs without the GIL)."""
    from takzero.players import UCTPlayer

    pos = Position.start(5).play("a1").play("e5")
    p = UCTPlayer(simulations=50, seed=1)
    p.set_tree_nodes(100)
    pm = p.think(pos, Limit(nodes=2000))
    assert pm.nodes == 2000 and pm.info["tree_nodes"] <= 100
    pos.check_move(pos.ptn(pm.code))

    p.set_tree_nodes(10**6)
    stop = threading.Event()
    ticks = 0
    out: list = []
    worker = threading.Thread(target=lambda: out.append(p.think(pos, Limit(nodes=10**8, stop=stop))))
    worker.start()
    end = time.monotonic() + 0.5
    while time.monotonic() < end:  # the main thread runs while the compiled search does
        time.sleep(0.01)
        ticks += 1
    stop.set()
    worker.join(30)
    assert not worker.is_alive() and ticks > 5
    assert 0 < out[0].nodes < 10**8
    pos.check_move(pos.ptn(out[0].code))


def test_isready_warms_the_player_first() -> None:
    """``isready`` runs a warm-up search of the current player's spec before ``readyok`` (on a
    throw-away player: the engine's own player and its random stream are untouched)."""
    lines: list[str] = []
    engine = TEIEngine(out=lines.append, player="uct:20", seed=4)
    rng_before = engine._player._rng.bit_generator.state
    engine.handle("teinewgame 4")
    engine.handle("isready")
    assert lines[-1] == "readyok"
    assert "uct:20@4" in engine._warmed
    assert engine._player._rng.bit_generator.state == rng_before


def test_go_infinite_answers_only_after_stop_even_when_the_player_is_done() -> None:
    """UCI: in ``go infinite`` the engine must not answer before ``stop``, also when its player
    does not search (random) and is done at once."""
    eng = PipeEngine(player="random", seed=1)
    try:
        eng.send("teinewgame 4")
        eng.send("go infinite")
        time.sleep(0.3)
        assert not any(line.startswith("bestmove") for _, line in eng.lines)
        eng.send("stop")
        _, best = eng.wait_for("bestmove", 10)
        Position.start(4).check_move(best.split()[1])
    finally:
        eng.close()
