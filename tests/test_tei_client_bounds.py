"""The TEI client (``takzero.match``, and the ``tei:`` baselines of evaluate and training) against
engines that never end a line or flood it with lines: a protocol forfeit or a timeout in one
line, in bounded time and memory (issue 58's hostile pass: 3.8 GB, then a MemoryError traceback
in a thread; a flood of ``info`` lines hung the match and forfeited 'within -0.0 s')."""

from __future__ import annotations

import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MEMORY_LIMIT = 2 * 2**30

ENGINES = {
    # id name, then 64 KB pieces of one line for ever
    "noline": """
        import sys
        for line in sys.stdin:
            if line.strip() == "tei":
                sys.stdout.write("id name noline\\n"); sys.stdout.flush()
                while True:
                    sys.stdout.write("x" * 65536)
    """,
    # a good handshake, then info lines for ever after go
    "flood": """
        import sys
        for line in sys.stdin:
            cmd = line.split()[:1]
            if cmd == ["tei"]:
                print("id name flood"); print("teiok", flush=True)
            elif cmd == ["isready"]:
                print("readyok", flush=True)
            elif cmd == ["go"]:
                while True:
                    sys.stdout.write("info depth 1 score cp 0 pv a1\\n" * 1000)
    """,
    # option lines for ever, never teiok
    "options": """
        import sys, itertools
        for line in sys.stdin:
            if line.strip() == "tei":
                for i in itertools.count():
                    sys.stdout.write(f"option name O{i} type check default false\\n")
    """,
    # readyok never comes: info lines for ever after isready
    "readyflood": """
        import sys
        for line in sys.stdin:
            cmd = line.split()[:1]
            if cmd == ["tei"]:
                print("id name readyflood"); print("teiok", flush=True)
            elif cmd == ["isready"]:
                while True:
                    sys.stdout.write("info string loading\\n" * 1000)
    """,
}


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _drive(tmp_path: Path, engine: str, action: str, timeout: float = 150) -> str:
    """Run ``action`` (Python, with ``client``: a TEIClient of the engine; ``player``: an
    EnginePlayer of it) in a subprocess under MEMORY_LIMIT; returns its stdout + stderr."""
    script = tmp_path / f"{engine}.py"
    script.write_text(textwrap.dedent(ENGINES[engine]))
    code = textwrap.dedent(f"""
        import sys
        from takzero.protocols.tei.match import EngineError, TEIClient
        from takzero.protocols.tei.player import EnginePlayer
        from takzero.players.base import PlayerFailed
        command = {f"{sys.executable} {script}"!r}
        client = TEIClient(command, startup_timeout=20)
        player = EnginePlayer("tei:" + command, startup_timeout=20)
        try:
            {action}
        except (EngineError, PlayerFailed) as e:
            print("ERROR", getattr(e, "reason", ""), e)
        finally:
            client.close(); player.close()
    """)
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                           cwd=ROOT, preexec_fn=_limit_memory, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the client did not give up on the {engine} engine within {timeout} s")
    assert "Traceback" not in r.stderr and "MemoryError" not in r.stderr, r.stderr[-3000:]
    return r.stdout + r.stderr


@pytest.mark.timeout(200)
@pytest.mark.parametrize("who", ["client", "player"])
def test_an_engine_that_never_ends_its_line_forfeits_in_bounded_memory(tmp_path: Path, who: str) -> None:
    action = "client.start()" if who == "client" else "player.reset(5, 0)"
    out = _drive(tmp_path, "noline", action)
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR protocol"), out[-3000:]
    assert "a line of over 262,144 characters (no newline)" in lines[0]


@pytest.mark.timeout(200)
def test_an_engine_that_floods_info_lines_times_out_on_time_saying_so(tmp_path: Path) -> None:
    out = _drive(tmp_path, "flood", "client.start(); client.go('position startpos', 'go nodes 100', 2.0)")
    assert "ERROR timeout" in out and "did not answer bestmove within 2.0 s; it sent" in out, out[-3000:]
    assert "other lines meanwhile" in out and "-0.0" not in out


@pytest.mark.timeout(200)
@pytest.mark.parametrize("engine", ["options", "readyflood"])
def test_a_handshake_that_floods_lines_ends(tmp_path: Path, engine: str) -> None:
    out = _drive(tmp_path, engine, "client.start()")
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR"), out[-3000:]
    assert ("over 1000 lines before teiok" in lines[0] or "did not answer readyok within 20.0 s" in lines[0]), lines


def test_an_engines_stderr_is_read_from_its_end_and_shown_escaped(tmp_path: Path) -> None:
    """The error of a failed ``tei:`` baseline quotes the last lines of the engine's stderr: it
    read the whole file (an engine wrote 1.5 GB there) and printed its bytes as they were."""
    from takzero.protocols.tei.player import STDERR_TAIL_BYTES, EnginePlayer

    player = EnginePlayer("tei:true")
    player._stderr = tmp_path / "stderr.log"
    with open(player._stderr, "w") as f:
        f.write("early line\n" * (4 * STDERR_TAIL_BYTES // 11))
        f.write("\x1b[31mlast\x1b[0m " + "y" * 10_000 + "\n")
    text = str(player._failure("crash", "went away"))
    assert "\x1b" not in text and "\\x1b[31mlast" in text and len(text) < 3000, text[:3000]
