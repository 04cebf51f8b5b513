"""A ``tei:`` engine that leaves a child holding its output pipe (issue 58: "one that leaves a
child holding its pipe: ``evaluate`` ends only after that child does"). The TEI client starts
each engine in a process group of its own, stops waiting for the pipe's end once the engine has
exited (``EXIT_GRACE_S``), and kills the group on close: nothing waits for the child, and the
child is gone afterwards."""

from __future__ import annotations

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

from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict

ROOT = Path(__file__).resolve().parent.parent
PY = shlex.quote(sys.executable)

#: A TEI engine that starts ``sleep 300`` (which inherits its stdout, the client's pipe) and
#: says the child's pid; it exits at ``quit``, or at its first ``go`` with ``crash``.
HOLDER = textwrap.dedent("""
    import subprocess, sys
    child = subprocess.Popen(["sleep", "300"])
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "tei":
            print(f"id name holder\\ninfo string child {child.pid}\\nteiok", flush=True)
        elif cmd[0] == "isready":
            print("readyok", flush=True)
        elif cmd[0] == "go" and sys.argv[1:] == ["crash"]:
            sys.exit(3)
        elif cmd[0] == "quit":
            sys.exit(0)
""")


def _gone(pid: int) -> bool:
    """The process ``pid`` has ended (no /proc entry, or a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"


def _wait_gone(pid: int, seconds: float = 30.0) -> bool:
    """Whether ``pid`` ends within ``seconds`` (a wait, not a timed assertion: at once when gone)."""
    deadline = time.monotonic() + seconds
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _gone(pid)


#: Drives the holder engine through the client in a process of its own (the old client blocked
#: in a close() that no signal interrupts): prints the child's pid, then what happened.
DRIVER = textwrap.dedent("""
    import sys
    from takzero.protocols.tei.match import EngineError, TEIClient
    log = []
    client = TEIClient(sys.argv[1], startup_timeout=30, log=log.append)
    client.start()
    print(next(x.split()[-1] for x in log if x.startswith("< info string child")), flush=True)
    if sys.argv[2] == "go":
        try:
            client.go("position startpos", "go nodes 1", timeout=300)
        except EngineError as e:
            print(e.reason, e, flush=True)
    client.close()
    print("closed", client.proc is None, flush=True)
""")


def _drive(tmp_path: Path, what: str) -> tuple[int, list[str]]:
    """(the engine's child's pid, the driver's other lines) for ``what`` ('close' or 'go')."""
    (tmp_path / "holder.py").write_text(HOLDER)
    (tmp_path / "driver.py").write_text(DRIVER)
    engine = f"{PY} {shlex.quote(str(tmp_path / 'holder.py'))}" + (" crash" if what == "go" else "")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "driver.py"), engine, what], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    child = None
    try:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the client waited for the engine's child ({what})")
    finally:
        if proc.poll() is None:
            proc.kill()
        if child is not None and not _gone(child):
            os.kill(child, signal.SIGKILL)  # only when the test fails: the child outlived it all
    return child, out.splitlines()


@pytest.mark.timeout(120)
def test_close_does_not_wait_for_a_child_holding_the_pipe_and_kills_it(tmp_path: Path) -> None:
    child, lines = _drive(tmp_path, "close")  # old code: close() blocked for the child's 300 s
    assert lines == ["closed True"]
    assert _wait_gone(child), "the engine's child outlived close()"


@pytest.mark.timeout(120)
def test_an_engine_that_exits_while_its_child_holds_the_pipe_fails_at_once(tmp_path: Path) -> None:
    child, lines = _drive(tmp_path, "go")  # old code: waited out the 300 s move timeout
    assert lines[0].startswith("crash ") and "exit code 3" in lines[0], lines
    assert lines[1] == "closed True"
    assert _wait_gone(child)


@pytest.mark.slow  # a real evaluate process and engine (some 30-60 s on a busy machine)
@pytest.mark.timeout(400)
def test_evaluate_ends_when_its_engine_leaves_a_child_holding_the_pipe(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = tmp_path / "tiny.pt"
    torch.save(checkpoint_dict(TakNet(ModelConfig(size=4, channels=8, blocks=1))), model)
    marker = "313.25"  # the child's sleep, found by its command line afterwards
    engine = f"sh -c 'sleep {marker} & exec {sys.executable} -m takzero.tei --player greedy'"
    try:
        r = subprocess.run(
            [sys.executable, "-m", "takzero.evaluate", str(model), "--pairs", "1", "--simulations", "4",
             "--ply-limit", "40", "--baselines", f"tei:nodes=1:{engine}"],
            capture_output=True, text=True, timeout=300, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail("evaluate waited for the engine's child")
    assert r.returncode == 0, r.stderr[-2000:]
    assert '"games": 2' in r.stdout
    left = [p for p in Path("/proc").glob("[0-9]*/cmdline")
            if _read(p).split("\0")[:2] == ["sleep", marker] and not _gone(int(p.parent.name))]
    assert not left, "the engine's child was left running"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
