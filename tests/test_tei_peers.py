"""The TEI engine and the playtak bot against impatient, hostile or many peers (issue 58):
``stop``/``quit``/the end of the input stop a search even while commands before them wait for
it, bounded lines and echoes, the model's own komi as ``HalfKomi``'s default, the search tree
allocated before a timed ``go``, WebSocket connections capped and stopped when they close, the
bot's lobby bounded and its accepting linear."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pytest

from takzero.players import RandomPlayer
from takzero.protocols.tei.engine import MAX_INFO, TEIEngine
from takzero.protocols.tei.reader import MAX_LINE
from tests.test_tei import PipeEngine

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------------------------------------
# stop, quit and the end of the input behind a command that waits for the search
# ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(900)
@pytest.mark.parametrize("ending", ["quit", "stop", "eof"])
def test_a_search_is_stopped_by_what_comes_after_a_waiting_command(ending: str) -> None:
    """``go nodes 100000000`` then ``position`` (which waits for the search) then the ending:
    the search ends (old engine: the ``position`` waited for 10^8 nodes, the ending unread)."""
    eng = PipeEngine(player="uct:100000", seed=1)
    try:
        eng.send("teinewgame 5")
        eng.send("isready")
        eng.wait_for("readyok", 600)  # warm-up (compiling) is not on the clock
        eng.send("go nodes 100000000")
        time.sleep(0.3)  # the search runs
        eng.send("position startpos moves a1")
        if ending == "eof":
            eng.writer.close()
        else:
            eng.send(ending)
        eng.wait_for("bestmove", 60)
        if ending == "stop":  # the engine goes on, at the new position
            eng.send("isready")
            eng.wait_for("readyok", 60)
            eng.send("go nodes 10")
            best = [line for _, line in eng.lines if line.startswith("bestmove")]
            deadline = time.monotonic() + 60
            while len(best) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
                best = [line for _, line in eng.lines if line.startswith("bestmove")]
            assert len(best) == 2 and best[1].split()[1] != "a1"
        else:
            eng.thread.join(60)
            assert not eng.thread.is_alive()
    finally:
        if not eng.writer.closed:
            eng.close()


def test_a_stop_stops_every_go_before_it_and_each_go_is_answered_once() -> None:
    """A ``stop`` read while an earlier search runs stops it and the ``go`` waiting behind it
    (``tests/test_tei_hostile.py`` has the 10^8-node case); each ``go`` gets one ``bestmove``,
    in order, after the ``position`` between them."""
    lines: list[str] = []
    engine = TEIEngine(out=lines.append, player="uct:50", seed=3)
    engine.run(io.StringIO("teinewgame 4\ngo nodes 300\nposition startpos moves a1\ngo nodes 5\n"
                           "stop\nquit\n"))
    best = [ln.split()[1] for ln in lines if ln.startswith("bestmove")]
    assert len(best) == 2 and best[1] != "a1"


# ---------------------------------------------------------------------------------------------
# bounded lines and echoes
# ---------------------------------------------------------------------------------------------


class EndlessLine:
    """A stream whose first line is ``chars`` characters without a line break (read whole by
    ``readline()`` with no size), then ``rest``."""

    def __init__(self, chars: int, rest: str) -> None:
        self.left = chars
        self.rest = io.StringIO(rest)

    def readline(self, size: int = -1) -> str:
        if self.left > 0:
            n = self.left if size < 0 else min(size, self.left)
            self.left -= n
            return "position startpos moves " + "a" * (n - 24) if n > 24 else "a" * n
        return self.rest.readline(size)


@pytest.mark.timeout(120)
def test_a_huge_line_is_skipped_and_a_huge_token_is_not_echoed_whole() -> None:
    lines: list[str] = []
    engine = TEIEngine(out=lines.append, player="random")
    token = "x" * 100_000  # under MAX_LINE: read, refused, quoted in part
    engine.run(EndlessLine(8 * MAX_LINE, f"\nposition startpos moves {token}\nisready\nquit\n"))
    assert lines[-1] == "readyok"
    assert max(len(ln) for ln in lines) <= MAX_INFO + 20, [ln[:80] for ln in lines]
    assert any(f"over {MAX_LINE}" in ln for ln in lines)
    assert any("(100000 characters)" in ln for ln in lines)


# ---------------------------------------------------------------------------------------------
# HalfKomi: the model's own komi by default, one warning per other komi
# ---------------------------------------------------------------------------------------------


def test_halfkomi_defaults_to_the_models_komi_and_warns_once_per_other_komi(tmp_path: Path, tiny_tei_model) -> None:
    model = tiny_tei_model(tmp_path)  # trained for half komi 2
    lines: list[str] = []
    engine = TEIEngine(out=lines.append, model=str(model))
    engine.handle("tei")
    assert "option name HalfKomi type spin default 2 min -20 max 20" in lines
    engine.handle("teinewgame 4")
    assert not [ln for ln in lines if "trained for komi" in ln]  # its own komi: nothing to say
    for _ in range(3):
        engine.handle("teinewgame size 4 halfkomi 0")
    engine.handle("setoption name HalfKomi value 0")
    warned = [ln for ln in lines if "trained for komi" in ln]
    assert warned == ["info string the model was trained for komi 1; playing komi 0"]
    engine.handle("setoption name HalfKomi value 4")
    assert len([ln for ln in lines if "trained for komi" in ln]) == 2


# ---------------------------------------------------------------------------------------------
# The search tree is allocated before a timed go; the budget counts from the go
# ---------------------------------------------------------------------------------------------


def test_isready_allocates_the_tree_so_go_does_not(tmp_path: Path, tiny_tei_model, monkeypatch) -> None:
    import takzero.search.mcts as mcts

    model = tiny_tei_model(tmp_path)
    engine = TEIEngine(out=lambda _l: None, model=str(model))
    engine.handle("isready")
    built: list[int] = []
    original = mcts.BatchedMCTS.__init__

    def counting(self, *args, **kwargs) -> None:
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(mcts.BatchedMCTS, "__init__", counting)
    for script in ("position startpos", "position startpos moves a1", "teinewgame 4",
                   "isready", "position startpos moves d4"):
        engine.handle(script)
        if script.startswith("position"):
            engine.handle("go movetime 200")
            engine._finish_search()
    assert built == []


class SlowToFollow(RandomPlayer):
    """A random player whose ``observe`` takes 0.3 s and which records its time budgets."""

    def __init__(self) -> None:
        super().__init__(seed=0, name="slow")
        self.budgets: list[float | None] = []

    def observe(self, position, move) -> None:
        time.sleep(0.3)
        super().observe(position, move)

    def think(self, position, limit=None, on_progress=None, **kw):
        self.budgets.append(limit.move_seconds(position.side_to_move) if limit else None)
        return super().think(position, limit, on_progress, **kw)


def test_the_time_to_follow_the_game_comes_out_of_movetime() -> None:
    engine = TEIEngine(out=lambda _l: None, player="random")
    player = SlowToFollow()
    engine._player = player
    engine.handle("teinewgame 5")
    engine._player = player  # teinewgame chose the baseline again
    engine._synced = None
    engine.handle("position startpos moves a1")
    engine.handle("go movetime 1000")
    engine._finish_search()
    # 1 s less the overhead (30 ms) less the 0.3 s that observe took before the search
    assert player.budgets and player.budgets[0] is not None and player.budgets[0] <= 0.671


# ---------------------------------------------------------------------------------------------
# WebSocket: a cap on connections; a closed connection stops its search
# ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(900)
def test_websocket_refuses_connections_over_the_cap_and_stops_a_closed_ones_search() -> None:
    websockets = pytest.importorskip("websockets")
    from websockets.sync.client import connect

    from takzero.tei_websocket import start_server

    log: list[str] = []
    server = start_server(lambda out: TEIEngine(out=out, player="uct:100000"), "127.0.0.1", 0,
                          log.append, max_connections=1)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        url = f"ws://127.0.0.1:{server.socket.getsockname()[1]}"
        with connect(url, open_timeout=60) as a:
            a.send("isready")
            while a.recv(timeout=600) != "readyok":  # warm-up (compiling) is not on the clock
                pass
            with connect(url, open_timeout=60) as b:
                got = b.recv(timeout=60)
                assert got.startswith("info string the server is full (1 connections")
                with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                    b.recv(timeout=60)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
            a.send("go nodes 100000000")
            time.sleep(0.3)
            a.send("position startpos moves a1")  # waits for the search
        deadline = time.monotonic() + 60
        while "connection 1 closed" not in log:  # the search was stopped when the client left
            assert time.monotonic() < deadline, log
            time.sleep(0.02)
        with connect(url, open_timeout=60) as c:  # the slot is free again
            c.send("isready")
            assert c.recv(timeout=120) == "readyok"
    finally:
        server.shutdown()
        t.join(timeout=10)


# ---------------------------------------------------------------------------------------------
# The playtak bot's lobby
# ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_the_bots_lobby_is_bounded_and_accepting_is_linear(monkeypatch) -> None:
    import takzero.protocols.playtak.bot as bot_module
    from takzero.protocols.playtak.bot import PlaytakBot
    from takzero.protocols.playtak.lines import parse_seek
    from takzero.protocols.playtak.lobby import MAX_OFFERS

    bot = PlaytakBot(RandomPlayer(seed=0), ("127.0.0.1", 9), accept="", log=lambda _m: None)
    bot._login_done, bot._name = True, "Bot"
    sent: list[str] = []
    monkeypatch.setattr(bot, "_send", lambda line: sent.append(line) or True)
    monkeypatch.setattr(bot, "_warm_up", lambda *a: None)
    starts = [0]
    real_start = bot_module.Position.start

    def counting_start(*args, **kwargs):
        starts[0] += 1
        return real_start(*args, **kwargs)

    monkeypatch.setattr(bot_module.Position, "start", staticmethod(counting_start))
    n = 3000
    for i in range(1, n + 1):  # seeks the bot cannot play (too many capstones)
        bot._on_seek(*parse_seek(f"Seek new {i} Other{i} 5 600 10 A 0 21 20 1 0 0 0 0"))
    assert sent == [] and len(bot._lobby.offers) == 0
    assert starts[0] <= 2  # one check per setting, not per seek and seek already read
    bot._lobby.accepting = -1  # an accept in flight: playable seeks are kept, up to the bound
    for i in range(n + 1, n + 2 * MAX_OFFERS):
        bot._on_seek(*parse_seek(f"Seek new {i} Other{i} 5 600 10 A 0 21 1 1 0 0 0 0"))
    assert len(bot._lobby.offers) == MAX_OFFERS
    bot._lobby.accepting = None
    bot._try_accept()
    assert sent == [f"Accept {n + 1}"]


# ---------------------------------------------------------------------------------------------
# The playtak command line exits 0 after its games, every time
# ---------------------------------------------------------------------------------------------

_EXIT_SCRIPT = r'''
import runpy, sys, threading
import torch
from takzero.game.position import Position
from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
from takzero.players import NetworkPlayer
from takzero.players.registry import make_player
from takzero.protocols.playtak.bot import PlaytakBot
from takzero.protocols.playtak.server import PlaytakServer
from takzero.search.limit import Limit

torch.manual_seed(0)
ckpt = sys.argv[1]
torch.save(checkpoint_dict(TakNet(ModelConfig(size=4, channels=8, blocks=1)), generation=1), ckpt)
net = NetworkPlayer.load(ckpt, backend="onnx")
net.think(Position.start(4), Limit(nodes=4))

states = Position.start(4).state[None].repeat(512, axis=0)


def busy():  # a thread inside onnxruntime when the command line ends (as a search can be)
    while True:
        net.evaluator.evaluate(states)

threading.Thread(target=busy, daemon=True).start()
with PlaytakServer() as server:
    opponent = PlaytakBot(make_player("random", seed=1), server.address, accept="", games=1,
                          reserve_s=0.2, log=lambda _m: None)
    threading.Thread(target=opponent.run, daemon=True).start()
    host, port = server.address
    sys.argv = ["takzero.playtak", "--player", "random", "--guest", "--seek", "4", "30", "0",
                "--games", "1", "--server", f"{host}:{port}"]
    runpy.run_module("takzero.playtak", run_name="__main__")
'''


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_playtak_command_line_exits_0_after_its_games_every_time(tmp_path: Path) -> None:
    """Old: ``sys.exit(main())`` tore the interpreter down with a thread inside onnxruntime,
    which aborted it (status 134, "terminate called without an active exception")."""
    import os
    import subprocess
    import sys

    from tests.test_tei import ROOT

    script = tmp_path / "bot_exit.py"
    script.write_text(_EXIT_SCRIPT)
    for i in range(3):
        proc = subprocess.run(
            [sys.executable, str(script), str(tmp_path / f"net{i}.pt")], capture_output=True,
            text=True, timeout=600, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert proc.returncode == 0, (i, proc.returncode, proc.stderr[-2000:])
        assert '"games": 1' in proc.stdout, proc.stdout
