"""TEI engine fuzz test: thousands of mutated command lines (a seeded mutation loop over a corpus
of valid commands), checking after every line that

* the engine never lets an exception out, never prints a traceback and never reaches its
  catch-all ("could not handle"): every bad input has its own clear ``info string``;
* every ``go`` is answered by exactly one ``bestmove``, a legal move of the position it was given
  (``bestmove (none)`` only on a finished position), whatever earlier lines did to the options,
  the size or the model; searches that do not end by themselves soon are ended by ``stop`` (or
  ``quit``), which must answer;
* every ``isready`` is answered with ``readyok``, also while a search runs.

The number of lines is ``TAKZERO_FUZZ_LINES`` (default sized to about a minute on a CI machine);
the counts are printed (``pytest -s``).
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest

from takzero.game.moves import MoveError
from takzero.protocols.tei.engine import TEIEngine

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LINES = int(os.environ.get("TAKZERO_FUZZ_LINES", "2500"))
#: How long a search may run before the driver sends ``stop`` (seconds).
PATIENCE = 0.05
#: How long ``stop`` may take to answer before the test fails (generous: a loaded CI machine).
STOP_LIMIT = 10.0

CORPUS = [
    "tei",
    "isready",
    "teinewgame 5",
    "teinewgame 4",
    "teinewgame 3",
    "teinewgame size 6 halfkomi 4",
    "teinewgame 5 halfkomi -2",
    "setoption name HalfKomi value 4",
    "setoption name Nodes value 30",
    "setoption name MultiPV value 3",
    "setoption name Seed value 12",
    "setoption name TreeNodes value 100000",
    "setoption name MoveOverhead value 10",
    "setoption name Fallback value uct:20",
    "setoption name Fallback value none",
    "setoption name Fallback value random",
    "setoption name Model value /nonexistent/model.pt",
    "position startpos",
    "position startpos moves a1 e5 c3",
    "position startpos moves a1 d4 b2 c3",
    "position startpos moves a1 c3",
    "position tps x5/x5/x5/x5/x5 1 1 moves a1",
    "position tps 1,1,1,1,x/x5/x5/2,2,2,2,x/x5 1 5",
    "position tps 1,1,1,1,x/x5/x5/2,2,2,2,x/x5 1 5 moves e5",
    "position tps x4/x4/x4/x4 1 1",
    "position tps 21,x2/x3/x2,1 2 3 moves a1+",
    "go nodes 20",
    "go nodes 5",
    "go movetime 50",
    "go wtime 1000 btime 1000 winc 10 binc 10",
    "go wtime 20 btime 20",
    "go infinite",
    "go",
    "stop",
    "quit",
]

TOKENS = [
    "-1", "0", "1", "2", "3", "5", "8", "9", "10", "32", "33", "100000", "2147483647",
    "2147483648", "100000000", "100000000000000000000000", "1e23", "1e99", "nan", "inf", "-0",
    "0x10", "\u0663", "a1", "e5", "c3", "Sc3", "Cd4", "3a1>12", "a1+", "2b2<11", "position",
    "go", "moves", "startpos", "tps", "x5/x5/x5/x5/x5", "x4/x4", "1", "name", "value",
    "HalfKomi", "Seed", "Nodes", "MultiPV", "TreeNodes", "MoveOverhead", "Model", "Fallback",
    "none", "uct:x", "uct:0", "random", "greedy", "size", "halfkomi", "infinite", "nodes",
    "movetime", "wtime", "btime", "winc", "binc", "depth", "ponder", "\x00", "\u00e9", "\t", "",
    "1" * 5000, "teinewgame", "setoption", "isready", "stop",
]
CHARS = "ab1/,x+<>-*'\"SC \t\x00\x7f\u00e9\u2028"


def mutate(rng: random.Random, line: str) -> str:
    """One to three random edits of ``line``: token replaced, inserted, deleted, duplicated or
    swapped; characters inserted or cut; case changed."""
    for _ in range(rng.randint(1, 3)):
        tokens = line.split(" ")
        op = rng.randrange(9)
        i = rng.randrange(len(tokens))
        if op == 0:
            tokens[i] = rng.choice(TOKENS)
        elif op == 1:
            tokens.insert(i, rng.choice(TOKENS))
        elif op == 2 and len(tokens) > 1:
            del tokens[i]
        elif op == 3:
            tokens.insert(i, tokens[i])
        elif op == 4:
            j = rng.randrange(len(tokens))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif op == 5:
            k = rng.randrange(len(line) + 1)
            line = line[:k] + rng.choice(CHARS) + line[k:]
            continue
        elif op == 6:
            line = line[: rng.randrange(len(line) + 1)]
            continue
        elif op == 7:
            tokens[i] = tokens[i].upper() if rng.random() < 0.5 else tokens[i].lower()
        else:
            tokens.append(rng.choice(TOKENS))
        line = " ".join(tokens)
    return line


class Driver:
    """Feeds lines to an engine and checks the properties of the module doc after each."""

    def __init__(self, engine_kwargs: dict) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self.engine = TEIEngine(out=self._out, **engine_kwargs)
        self.gos = 0
        self.stops = 0
        self.max_stop = 0.0
        self.readies = 0

    def _out(self, line: str) -> None:
        with self._lock:
            self.lines.append(line)

    def _bestmoves(self) -> list[str]:
        with self._lock:
            return [ln for ln in self.lines if ln.startswith("bestmove")]

    def _wait_bestmove(self, count: int, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if len(self._bestmoves()) >= count:
                return True
            time.sleep(0.002)
        return len(self._bestmoves()) >= count

    def feed(self, line: str, rng: random.Random) -> None:
        eng = self.engine
        assert not eng._searching()
        tokens = "".join(ch if ch.isprintable() or ch.isspace() else "?" for ch in line).split()
        cmd = tokens[0] if tokens else ""
        before_pos = eng.position.copy()
        n_best = len(self._bestmoves())
        n_lines = len(self.lines)
        eng.handle(line)
        if cmd == "isready":
            self.readies += 1
            assert "readyok" in self.lines[n_lines:], (line, self.lines[n_lines:])
        if cmd != "go":
            assert len(self._bestmoves()) == n_best, (line, self.lines[n_lines:])
            return
        self.gos += 1
        # Drawn for every go, so that the line stream does not depend on the machine's speed.
        ask_ready = rng.random() < 0.3
        ender = "stop" if rng.random() < 0.8 else "quit"
        if not self._wait_bestmove(n_best + 1, PATIENCE):
            if ask_ready:  # isready during a search is answered at once
                k = len(self.lines)
                eng.handle("isready")
                assert "readyok" in self.lines[k:]
                self.readies += 1
            t0 = time.monotonic()
            eng.handle(ender)
            took = time.monotonic() - t0
            self.stops += 1
            self.max_stop = max(self.max_stop, took)
            assert took < STOP_LIMIT, (line, took)
        eng._finish_search()  # the search is over: this returns at once
        eng._quit = False
        best = self._bestmoves()
        assert len(best) == n_best + 1, (line, self.lines[n_lines:])
        move = best[-1].split(maxsplit=1)[1]
        if move == "(none)":
            assert before_pos.is_over, (line, before_pos.to_tps())
        else:
            assert not before_pos.is_over
            try:
                before_pos.check_move(move)
            except MoveError as e:  # pragma: no cover - the failure message
                raise AssertionError(f"illegal bestmove {move} after {line!r}: {e}") from None

    def check_output(self) -> None:
        for ln in self.lines:
            assert "Traceback" not in ln, ln
            assert "could not handle" not in ln, ln


def fuzz(engine_kwargs: dict, lines: int, seed: int) -> Driver:
    rng = random.Random(seed)
    drv = Driver(engine_kwargs)
    drv.feed("isready", rng)
    for _ in range(lines):
        base = rng.choice(CORPUS)
        line = base if rng.random() < 0.25 else mutate(rng, base)
        drv.feed(line, rng)
    drv.check_output()
    print(
        f"\nfuzz {engine_kwargs.get('player', 'model')}: {lines} lines, {drv.gos} go, "
        f"{drv.stops} stopped (slowest stop {drv.max_stop * 1000:.0f} ms), "
        f"{drv.readies} isready, {len(drv.lines)} lines out"
    )
    return drv


@pytest.mark.slow  # fuzz
def test_fuzz_baseline_engine() -> None:
    drv = fuzz({"player": "uct:20", "seed": 1}, LINES, seed=2026)
    assert drv.gos > LINES // 10 and drv.stops > 0 and drv.readies > 0


@pytest.mark.slow  # fuzz
def test_fuzz_network_engine_with_a_model_of_one_size(tmp_path: Path, tiny_tei_model) -> None:
    """The issue's case: a 4x4 model, sizes changing under it, Seed and Fallback mutated."""
    model = tiny_tei_model(tmp_path)
    drv = fuzz({"model": str(model), "fallback": "uct:20", "seed": 1}, LINES // 3, seed=7)
    assert drv.gos > LINES // 40


def test_the_issue_cases_answer() -> None:
    """Seed -1 and 10^23 refused (old value kept); ``position moves a1`` says what is wrong; a
    long node-limited UCT search ends on ``stop`` at once and ``isready`` is answered during it."""
    drv = Driver({"player": "uct:20", "seed": 5})
    rng = random.Random(0)
    for line in (
        "setoption name Seed value -1",
        "setoption name Seed value 100000000000000000000000",
        "position moves a1",
        "teinewgame 5",
        "position startpos moves a1 e5",
    ):
        drv.feed(line, rng)
    text = "\n".join(drv.lines)
    assert "Seed must be an integer in 0..2147483647, got '-1'; keeping 5" in text
    assert "got '100000000000000000000000'; keeping 5" in text
    assert drv.engine.seed == 5
    assert "position: expected 'startpos' or 'tps" in text and "Error" not in text
    drv.feed("go nodes 100000000", rng)
    assert drv.stops == 1
    drv.check_output()
