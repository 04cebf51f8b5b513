"""The TEI engine as PTN Ninja meets it: the version 1 size lines of ``tei`` (what PTN Ninja's
``src/bots/tei.js`` reads: ``size ... halfkomi ...`` before the options), and the session over
WebSocket (``takzero.tei_websocket``, ``python -m takzero.tei --websocket``): the same golden
transcripts as on stdin, in process and through the command line, one engine per connection,
``go infinite``/``stop``, a client that leaves mid-search, and the address checks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from takzero import tei
from takzero.protocols.tei.engine import TEIEngine
from takzero.protocols.tei.lines import TEIProtocolError, format_sizes, parse_sizes
from takzero.protocols.tei.options import OPTIONS
from takzero.tei_websocket import DEFAULT_ADDRESS, parse_address, start_server
from tests.test_tei import GOLDEN, ROOT, normalise

websockets = pytest.importorskip("websockets")
from websockets.sync.client import connect  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ALL_KOMIS = list(range(-20, 21))


# ---------------------------------------------------------------------------------------------
# TEI version 1: size lines
# ---------------------------------------------------------------------------------------------


def _tei_reply(**kwargs) -> list[str]:
    lines: list[str] = []
    TEIEngine(out=lines.append, **kwargs).handle("tei")
    return lines


def _sizes(lines: list[str]) -> list[tuple[list[int], list[int]]]:
    return [s for s in map(parse_sizes, lines) if s is not None]


def test_size_lines_come_between_id_and_options_and_list_what_is_played(tmp_path: Path, tiny_tei_model) -> None:
    # No model: the baseline plays every size.
    lines = _tei_reply(player="uct:50")
    assert _sizes(lines) == [([3, 4, 5, 6, 7, 8], ALL_KOMIS)]
    kinds = [ln.split()[0] for ln in lines]
    assert kinds == ["id", "id", "size"] + ["option"] * len(OPTIONS) + ["teiok"]  # PTN Ninja reads sizes first
    # A 4x4 model with its fallback: the model's size, then the fallback's.
    model = tiny_tei_model(tmp_path)
    assert _sizes(_tei_reply(model=str(model))) == [([4], ALL_KOMIS), ([3, 5, 6, 7, 8], ALL_KOMIS)]
    # Fallback none: the model's size only.
    assert _sizes(_tei_reply(model=str(model), fallback="none")) == [([4], ALL_KOMIS)]


def test_size_lines_read_as_ptn_ninja_reads_them() -> None:
    """PTN Ninja's parser: words after ``size`` up to ``halfkomi`` are sizes, the rest half
    komis; every size of the line gets those komis (a stand-in written from tei.js)."""

    def ptn_ninja(line: str) -> dict[str, list[int]]:
        words, sizes, komis, key = line.split(), [], [], ""
        for w in words:
            if w in ("size", "halfkomi"):
                key = w
            elif key == "size":
                sizes.append(w)
            else:
                komis.append(int(w))
        return {s: komis for s in sizes}

    line = format_sizes([5], [0, 4, -2])
    assert line == "size 5 halfkomi 0 4 -2"
    assert ptn_ninja(line) == {"5": [0, 4, -2]}
    assert parse_sizes(line) == ([5], [0, 4, -2])
    assert parse_sizes("sizes 5") is None and parse_sizes("id name x") is None
    for bad in ("size 5", "size halfkomi 0", "size 5 halfkomi", "size five halfkomi 0"):
        with pytest.raises(TEIProtocolError):
            parse_sizes(bad)
    for sizes, komis in (([], [0]), ([5], []), ([9], [0])):
        with pytest.raises(ValueError):
            format_sizes(sizes, komis)


# ---------------------------------------------------------------------------------------------
# WebSocket
# ---------------------------------------------------------------------------------------------


@contextmanager
def _server(**engine_kwargs) -> Iterator[tuple[str, list[str]]]:
    """An in-process WebSocket TEI server on a free port: (url, log lines)."""
    log: list[str] = []
    server = start_server(lambda out: TEIEngine(out=out, **engine_kwargs), "127.0.0.1", 0, log.append)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        port = server.socket.getsockname()[1]
        yield f"ws://127.0.0.1:{port}", log
    finally:
        server.shutdown()
        t.join(timeout=10)


def _session(url: str, script: str) -> list[str]:
    """Send each line of ``script`` as one message (as PTN Ninja does), the line after a finite
    ``go`` once its ``bestmove`` came (a ``stop``/``quit`` read during a search stops every
    search before it, so a script sent ahead would cut its searches), and read every message
    until the server closes the connection (after ``quit``)."""
    got: list[str] = []
    closed = websockets.exceptions.ConnectionClosed
    try:
        with connect(url, open_timeout=30) as ws:
            try:  # a server that refuses the session may close before every line is sent
                goes = 0
                for line in script.splitlines():
                    ws.send(line)
                    words = line.split()
                    if words[:1] == ["go"] and "infinite" not in words:
                        goes += 1
                        while sum(ln.startswith("bestmove") for ln in got) < goes:
                            got.extend(str(ws.recv(timeout=120)).splitlines())
            except closed:
                pass
            try:  # what arrived before the close is still read
                while True:
                    got.extend(str(ws.recv(timeout=120)).splitlines())
            except closed:
                pass
    except closed:  # the closing handshake itself raced the server's close
        pass
    return got


def test_websocket_session_gives_the_golden_stdin_transcripts(tmp_path: Path, tiny_tei_model) -> None:
    for name, kwargs in (("baseline_session", {"seed": 7}), ("analysis_multipv", {"seed": 3})):
        with _server(player="uct:50", **kwargs) as (url, log):
            lines = normalise(_session(url, (GOLDEN / f"{name}.in").read_text()))
        assert lines == (GOLDEN / f"{name}.out").read_text().splitlines(), name
        assert any("connection 1 from 127.0.0.1" in m for m in log) and "connection 1 closed" in log
    model = tiny_tei_model(tmp_path)
    with _server(model=str(model), seed=7) as (url, _):
        lines = _session(url, (GOLDEN / "network_session.in").read_text())
    lines = normalise(lines, {str(model): "<MODEL>"}, values=True)
    assert lines == (GOLDEN / "network_session.out").read_text().splitlines()


def test_websocket_go_infinite_stop_and_one_engine_per_connection() -> None:
    with _server(player="uct:100000") as (url, _):
        with connect(url) as a, connect(url) as b:
            for ws, moves in ((a, "a1 e5"), (b, "e1 a5 c3")):
                ws.send("teinewgame size 5 halfkomi 4")
                ws.send("isready")
                ws.send(f"position startpos moves {moves}")
            for ws in (a, b):
                while ws.recv(timeout=600) != "readyok":  # warm-up (compiling) is not on the clock
                    pass
            a.send("go infinite")
            first = a.recv(timeout=60)
            assert first.startswith("info depth")
            b.send("go nodes 50")  # b's engine is another one: it answers while a searches
            b_lines = []
            while not (b_lines and b_lines[-1].startswith("bestmove")):
                b_lines.append(b.recv(timeout=60))
            assert b_lines[-1].split()[1] not in ("c3",)  # its own position (c3 is taken)
            t0 = time.monotonic()
            a.send("stop")
            line = a.recv(timeout=10)
            while not line.startswith("bestmove"):
                line = a.recv(timeout=10)
            assert time.monotonic() - t0 < 5
            assert line.split()[1] not in ("a1", "e5")


def test_a_client_that_leaves_mid_search_ends_its_engine_only() -> None:
    with _server(player="uct:100000") as (url, log):
        with connect(url) as a:
            a.send("teinewgame 5")
            a.send("position startpos")
            a.send("go infinite")
            assert a.recv(timeout=60).startswith("info")
        deadline = time.monotonic() + 10
        while "connection 1 closed" not in log:  # the search was stopped when the client left
            assert time.monotonic() < deadline, log
            time.sleep(0.02)
        lines = _session(url, "tei\nisready\nquit\n")  # the server goes on
        assert lines[-1] == "readyok" and "connection 2 closed" in log


def test_an_engine_that_cannot_start_is_told_to_the_client() -> None:
    with _server(model="/nonexistent/model.pt") as (url, log):
        lines = _session(url, "tei\n")
    assert len(lines) == 1 and lines[0].startswith("info string cannot start: ")
    assert any("cannot start the engine" in m for m in log)


@pytest.mark.slow  # the websocket server as a process, a whole session
def test_websocket_command_line_serves_the_golden_transcript() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "takzero.tei", "--player", "uct:50", "--seed", "7", "--websocket", "127.0.0.1:0"],
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stderr is not None
        url = None
        for line in proc.stderr:
            if m := re.search(r"serving TEI on (ws://127\.0\.0\.1:\d+) ", line):
                url = m.group(1)
                break
        assert url, "the server did not say where it listens"
        lines = normalise(_session(url, (GOLDEN / "baseline_session.in").read_text()))
        assert lines == (GOLDEN / "baseline_session.out").read_text().splitlines()
        proc.send_signal(signal.SIGINT)
        # communicate drains stderr while waiting: a server blocked on a full pipe cannot exit
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_websocket_address_and_argument_checks(capsys: pytest.CaptureFixture[str]) -> None:
    assert DEFAULT_ADDRESS == "127.0.0.1:7731"
    assert parse_address("7731") == ("127.0.0.1", 7731)
    assert parse_address("0.0.0.0:8000") == ("0.0.0.0", 8000)
    assert parse_address("[::1]:9") == ("::1", 9)
    for bad in ("", "host:", "host:x", "70000", ":80", "host:-1"):
        with pytest.raises(ValueError, match=r"\[HOST:\]PORT"):
            parse_address(bad)
    for argv in (["--websocket", "99999"], ["--websocket", "--commands", "x.txt"]):
        with pytest.raises(SystemExit) as e:
            tei.main(["--player", "random", *argv])
        assert e.value.code == 2
    assert "--websocket" in capsys.readouterr().err


def test_websocket_port_in_use_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with _server(player="random") as (url, _):
        port = url.rsplit(":", 1)[1]
        assert tei.main(["--player", "random", "--websocket", f"127.0.0.1:{port}"]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
