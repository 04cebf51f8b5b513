"""The TEI engine's queued commands and its memory budget against hostile peers (issue 58, items 4
and 7): a flood of queued ``go`` lines costs no search each and is dropped with a closed
WebSocket connection; ``TreeNodes`` is held against one budget shared by the server's
connections and the process's memory limit; an allocation failure at ``go`` is said as an error.
"""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from takzero.players import PlayerMove, RandomPlayer
from takzero.protocols.tei.engine import TEIEngine
from takzero.protocols.tei.options import GIB, TREE_BYTES_PER_NODE, MemoryBudget

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class BlockingPlayer(RandomPlayer):
    """A player whose search runs until its stop flag is set (a 10^8-node search), counting
    its searches and those that were stopped before they began."""

    def __init__(self) -> None:
        super().__init__(seed=0, name="blocking")
        self.searches = 0
        self.stopped_at_start = 0

    def think(self, position, limit=None, on_progress=None, multipv=1) -> PlayerMove:
        self.searches += 1
        stop = limit.stop if limit is not None else None
        if stop is not None and stop.is_set():
            self.stopped_at_start += 1
        if stop is not None:
            stop.wait(60)  # a safety net: every search here is stopped long before
        return PlayerMove(code=int(position.legal_move_codes()[0]), nodes=1)


def _blocking_engine(lines: list[str], **kwargs) -> tuple[TEIEngine, BlockingPlayer]:
    engine = TEIEngine(out=lines.append, player="random", **kwargs)
    player = BlockingPlayer()
    engine.baseline = player
    engine._select_player(announce=False)
    return engine, player


# ---------------------------------------------------------------------------------------------
# queued go commands
# ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("ending", ["quit\n", "", "stop\nisready\nquit\n"])
def test_a_flood_of_queued_gos_costs_no_search_each_and_each_is_answered(ending: str) -> None:
    """1,000 ``go nodes 10^8`` read ahead, then ``quit``, the end of the input or ``stop``:
    every ``go`` gets one legal ``bestmove``, but a ``go`` preempted while queued (by the next
    ``go`` or the ending) is answered without a search. Old: each queued ``go`` started a search
    (stopped at once, 8.5 ms a network search: 4,000 took 34 s to answer after a close)."""
    n = 1000
    lines: list[str] = []
    engine, player = _blocking_engine(lines)
    engine.run(io.StringIO("teinewgame 4\nposition startpos moves a1\n" + "go nodes 100000000\n" * n
                           + ending))
    best = [ln.split()[1] for ln in lines if ln.startswith("bestmove")]
    assert len(best) == n and "a1" not in best
    assert player.searches <= n // 10, player.searches  # old: n
    assert ending != "stop\nisready\nquit\n" or lines[-1] == "readyok"


@pytest.mark.timeout(120)
def test_a_go_read_during_a_search_stops_it_and_is_answered_after_it() -> None:
    """A ``go`` read while a ``go nodes 10^8`` searches stops that search (as ``stop`` does;
    old: it waited for 10^8 nodes), and both are answered, in order."""
    from tests.test_tei import PipeEngine

    eng = PipeEngine(player="random")
    player = BlockingPlayer()
    eng.engine.baseline = player
    eng.engine._select_player(announce=False)
    try:
        eng.send("teinewgame 4")
        eng.send("go nodes 100000000")
        deadline = time.monotonic() + 30
        while player.searches < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        eng.send("go nodes 100000000")
        eng.wait_for("bestmove", 30)  # the first search was stopped by the second go
        eng.send("stop")
        deadline = time.monotonic() + 30
        while sum(line.startswith("bestmove") for _, line in eng.lines) < 2:
            assert time.monotonic() < deadline, eng.lines
            time.sleep(0.01)
    finally:
        eng.close()
    assert not eng.thread.is_alive()


def _ws_server(make_engine):
    from takzero.tei_websocket import start_server

    log: list[str] = []
    server = start_server(make_engine, "127.0.0.1", 0, log.append)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    return server, t, log, f"ws://127.0.0.1:{server.socket.getsockname()[1]}"


@pytest.mark.timeout(120)
def test_a_closed_websocket_drops_what_its_engine_has_queued() -> None:
    """A client queues 1,000 ``tei`` behind a ``go nodes 10^8`` and leaves: its engine stops the
    search and ends without handling the queue (old: it handled every queued command for a peer
    that was gone, holding the connection's slot: 30 s of a core for 4,000 ``go``)."""
    pytest.importorskip("websockets")
    from websockets.sync.client import connect

    made: list[tuple[list[str], BlockingPlayer]] = []

    def make_engine(out):
        sent: list[str] = []
        engine, player = _blocking_engine(sent)
        engine._out = lambda line: (sent.append(line), out(line))
        made.append((sent, player))
        return engine

    server, t, log, url = _ws_server(make_engine)
    try:
        with connect(url, open_timeout=30) as ws:
            ws.send("teinewgame 4\nisready")
            while ws.recv(timeout=60) != "readyok":
                pass
            ws.send("go nodes 100000000\n" + "tei\n" * 1000)
            deadline = time.monotonic() + 30
            while made[0][1].searches < 1:  # the search runs: every tei waits behind it
                assert time.monotonic() < deadline
                time.sleep(0.01)
        deadline = time.monotonic() + 60
        while "connection 1 closed" not in log:
            assert time.monotonic() < deadline, log
            time.sleep(0.02)
    finally:
        server.shutdown()
        t.join(timeout=10)
    sent, player = made[0]
    assert sum(line == "teiok" for line in sent) <= 1  # the one being handled; old: 1,000
    assert sum(line.startswith("bestmove") for line in sent) == 1


# ---------------------------------------------------------------------------------------------
# the memory budget of TreeNodes
# ---------------------------------------------------------------------------------------------


def test_treenodes_is_held_against_a_budget_the_engines_share() -> None:
    """Two engines of one budget (the WebSocket server's connections): what one holds is not
    free for the other; a value that does not fit is refused in one line naming TreeNodes, what
    it takes, what is free and the most that fits, the old value kept; an engine's session end
    gives its share back. Old: each engine was checked against the whole machine."""
    budget = MemoryBudget(total=2 * GIB)
    a_lines: list[str] = []
    b_lines: list[str] = []
    a = TEIEngine(out=a_lines.append, player="random", memory=budget)
    b = TEIEngine(out=b_lines.append, player="random", memory=budget)
    big = 12_000_000  # 1.07 GiB at 96 bytes a node: one fits beside a default tree, two do not
    a.handle(f"setoption name TreeNodes value {big}")
    assert a.tree_nodes == big and not a_lines
    b.handle(f"setoption name TreeNodes value {big}")
    assert b.tree_nodes == 4_000_000 and len(b_lines) == 1
    line = b_lines[0]
    free = 2 * GIB - big * TREE_BYTES_PER_NODE
    assert line.startswith(f"info string setoption: TreeNodes {big} refused: ")
    assert f"{free / GIB:.1f} GiB is free" in line and "held by 1 other connection" in line
    assert f"at most {free // TREE_BYTES_PER_NODE} nodes" in line and line.endswith("keeping 4000000")
    b.handle(f"setoption name TreeNodes value {free // TREE_BYTES_PER_NODE}")  # the most that fits
    assert b.tree_nodes == free // TREE_BYTES_PER_NODE
    a.run(io.StringIO("quit\n"))  # a's session ends: its share is free again
    b.handle(f"setoption name TreeNodes value {big}")
    assert b.tree_nodes == big


@pytest.mark.timeout(120)
def test_websocket_connections_share_the_tree_budget() -> None:
    """The same through the WebSocket server: the second connection's TreeNodes is refused
    while the first holds its tree, and accepted once the first has closed."""
    pytest.importorskip("websockets")
    from websockets.sync.client import connect

    budget = MemoryBudget(total=2 * GIB)
    server, t, log, url = _ws_server(lambda out: TEIEngine(out=out, player="random", memory=budget))
    option = "setoption name TreeNodes value 12000000\nisready"

    def answers(ws) -> list[str]:
        got = []
        while not got or got[-1] != "readyok":
            got.append(str(ws.recv(timeout=60)))
        return got

    try:
        with connect(url, open_timeout=30) as a:
            a.send(option)
            assert answers(a) == ["readyok"]
            with connect(url, open_timeout=30) as b:
                b.send(option)
                refused = answers(b)
                assert len(refused) == 2 and "TreeNodes 12000000 refused" in refused[0]
        deadline = time.monotonic() + 30
        while "connection 2 closed" not in log or "connection 1 closed" not in log:
            assert time.monotonic() < deadline, log
            time.sleep(0.02)
        with connect(url, open_timeout=30) as c:
            c.send(option)
            assert answers(c) == ["readyok"]
    finally:
        server.shutdown()
        t.join(timeout=10)


_UNDER_A_LIMIT = r"""
import io, resource, sys
from takzero.protocols.tei.engine import TEIEngine
lines = []
engine = TEIEngine(out=lines.append, player="uct:100")
engine.handle("teinewgame 5")
engine.handle("isready")  # compiled before the limit
with open("/proc/self/statm") as f:
    mapped = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (mapped + 2**31, resource.RLIM_INFINITY))  # 2 GiB more
engine.handle("setoption name TreeNodes value 100000000")  # 9 GiB at 96 bytes a node
print("SET", engine.tree_nodes, lines[-1])
engine.tree_nodes = 100_000_000  # past the check: the search cannot allocate it
engine._configure_all()
engine.handle("position startpos")
engine.handle("go nodes 100000000")
engine._finish_search()
for line in lines[-3:]:
    print("OUT", line)
"""


@pytest.mark.timeout(300)
def test_treenodes_over_the_memory_limit_is_refused_and_a_failed_allocation_is_an_error() -> None:
    """Under an address-space limit (``ulimit -v``): a TreeNodes whose tree does not fit is
    refused at ``setoption`` (old: accepted, the machine's physical memory being larger, and
    then every ``go`` answered "search failed (Unable to allocate ...)"); a search that cannot
    allocate its tree anyway says so as one ``info string error: ...`` line and still answers a
    legal move."""
    proc = subprocess.run([sys.executable, "-c", _UNDER_A_LIMIT], capture_output=True, text=True,
                          timeout=280, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                                      "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout.splitlines()
    set_line = next(line for line in out if line.startswith("SET "))
    assert set_line.startswith("SET 4000000 info string setoption: TreeNodes 100000000 refused:")
    assert "address-space limit" in set_line
    said = [line.removeprefix("OUT ") for line in out if line.startswith("OUT ")]
    errors = [line for line in said if line.startswith("info string error: out of memory")]
    assert len(errors) == 1 and "TreeNodes 100000000" in errors[0], said
    assert said[-1].startswith("bestmove ")


@pytest.mark.timeout(120)
def test_a_flood_never_drops_isready_or_stop() -> None:
    """Over MAX_QUEUED_LINES commands wait behind a search: the bounded queue dropped ``isready``
    too (no ``readyok`` came); now a waiting search or position command is dropped in its place,
    and every ``isready`` is answered, after the ``stop``."""
    from takzero.protocols.tei.reader import MAX_QUEUED_LINES

    lines: list[str] = []
    engine, player = _blocking_engine(lines)
    flood = "position startpos moves a1\n" * (MAX_QUEUED_LINES + 500)
    text = "teinewgame 4\ngo nodes 100000000\n" + flood + "isready\n" * 3 + flood + "stop\nisready\nquit\n"
    gate = threading.Event()

    class SlowStart(io.StringIO):
        """Lines are read only once the search runs, so they all wait behind it."""

        def readline(self, size: int = -1) -> str:
            if self.tell() > 40:
                gate.wait(60)
            return super().readline(size)

    think = player.think

    def searching(*args, **kwargs):
        gate.set()
        return think(*args, **kwargs)

    player.think = searching
    engine.run(SlowStart(text))
    assert sum(ln == "readyok" for ln in lines) == 4, [ln for ln in lines if not ln.startswith("info")][:20]
    assert sum(ln.startswith("bestmove") for ln in lines) == 1
    assert any("dropped" in ln for ln in lines)
    assert lines[-1] == "readyok"
