"""The playtak bot against the in-process server (``takzero.protocols.playtak.server``): whole games,
a seek with komi and custom reserves, a dropped connection and the resumed game (with a move sent
while away), malformed server lines, a search that overruns its time, the login, the keep-alive,
the protocol lines and the command line."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from takzero import playtak as cli
from takzero.game.position import Position
from takzero.players.base import BasePlayer, PlayerMove
from takzero.players.registry import make_player
from takzero.protocols.playtak.bot import LoginError, PlaytakBot, move_budget
from takzero.protocols.playtak.lines import (
    ProtocolError,
    SeekSpec,
    parse_clock,
    parse_game_start,
    parse_over,
    parse_seek,
)
from takzero.protocols.playtak.server import PlaytakServer
from takzero.protocols.playtak.server_records import SEEK_V2, SEEK_V3

CLEAN = ("road", "flat", "draw", "stale", "resign")


class SleepyPlayer(BasePlayer):
    """A random mover that takes ``delay`` seconds per move (cut short by ``stop`` unless
    ``deaf``): a slow opponent, or a search that overruns its clock."""

    name = "sleepy"

    def __init__(self, delay: float, seed: int = 0, deaf: bool = False) -> None:
        super().__init__(seed)
        self.delay = delay
        self.deaf = deaf

    def choose(self, position: Position) -> PlayerMove:
        codes = position.legal_move_codes()
        return PlayerMove(int(codes[self._rng.integers(len(codes))]))

    def think(self, position, limit=None, on_progress=None) -> PlayerMove:
        stop = limit.stop if limit is not None else None
        if self.deaf or stop is None:
            time.sleep(self.delay)
        else:
            stop.wait(self.delay)
        return self.choose(position)


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, msg: str) -> None:
        self.lines.append(msg)

    def has(self, pattern: str) -> bool:
        return any(re.search(pattern, line) for line in self.lines)


def _wait(cond: Callable[[], object], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@contextmanager
def _running(*bots: PlaytakBot) -> Iterator[list[BaseException]]:
    errors: list[BaseException] = []

    def run(bot: PlaytakBot) -> None:
        try:
            bot.run()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            errors.append(e)

    threads = []
    for bot in bots:
        t = threading.Thread(target=run, args=(bot,), daemon=True)
        t.start()
        threads.append(t)
        _wait(lambda b=bot: b.name or errors, 600)  # a first run compiles the kernels
    try:
        yield errors
    finally:
        for bot in bots:
            bot.stop()
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads)


def _bot(server: PlaytakServer, player: BasePlayer, **kw) -> PlaytakBot:
    kw.setdefault("reserve_s", 0.2)
    kw.setdefault("log", Log())
    return PlaytakBot(player, server.address, **kw)


def _clean(bot: PlaytakBot) -> None:
    s = bot.stats
    assert (s.ignored, s.server_errors, s.internal_errors, s.time_losses, s.abandoned) == (0, 0, 0, 0, 0), (
        s.summary(), bot._log.lines[-20:]  # type: ignore[attr-defined]
    )


@pytest.mark.slow
def test_whole_games_with_komi_custom_reserves_clock_and_pings() -> None:
    seek = SeekSpec(size=4, time_s=3, increment_s=0, colour="A", half_komi=3, flats=12, caps=1)
    with PlaytakServer(seed=3) as server:
        a = _bot(server, make_player("uct:100000", seed=1), seek=seek, games=3, ping_interval=0.3)
        b = _bot(server, make_player("random", seed=2), accept="", games=3)
        with _running(a, b) as errors:
            assert server.wait_finished(3, 120)
            _wait(lambda: a.stats.games == 3 and b.stats.games == 3)
        assert not errors
    assert server.refused == []
    assert server.pings.get(a.name, 0) >= 1
    for f in server.finished:
        assert f.reason in CLEAN
        assert (f.size, f.half_komi, f.flats, f.caps) == (4, 3, 12, 1)
        assert a.name in (f.white, f.black)
    for bot in (a, b):
        _clean(bot)
        assert [(r["game"], r["result"], r["plies"]) for r in bot.stats.results] == [
            (f.number, f.result, len(f.moves)) for f in server.finished
        ]
    # The searching bot spent its clock, and never all of it.
    assert a.stats.min_clock_s is not None and 0 < a.stats.min_clock_s < 2.9


def test_dropped_connection_resumes_the_game_and_resends_a_move_made_while_away() -> None:
    with PlaytakServer(reconnect_seconds=20) as server:
        log = Log()
        a = _bot(server, SleepyPlayer(0.4, seed=1), seek=SeekSpec(4, 60, 0, "W"), games=1, log=log)
        with _running(a) as errors:
            c = socket.create_connection(server.address, timeout=20)
            f = c.makefile("r", encoding="utf-8")

            def send(line: str) -> None:
                c.sendall((line + "\n").encode())

            def read_until(pattern: str) -> str:
                for line in f:
                    if re.match(pattern, line):
                        return line.strip()
                raise AssertionError(f"connection closed before {pattern}")

            send("Client test")
            send("Protocol 2")
            send("Login Guest")
            seek_no = read_until(rf"Seek new \d+ {a.name} ").split()[2]
            send(f"Accept {seek_no}")
            start = parse_game_start(read_until("Game Start"))
            game = f"Game#{start.number}"
            assert start.colour == 1  # the bot seeks as white
            first = read_until(rf"{game} P ")  # the bot's first ply
            pos = Position.start(4).play(first.split(" ", 1)[1].replace("P ", "").lower())
            reply = "P A1" if pos.stack(0)[0] == [] else "P D4"
            send(f"{game} {reply}")
            time.sleep(0.1)  # the bot is searching its second ply (0.4 s) ...
            server.hold_logins.set()  # ... when its connection breaks and cannot come back
            assert server.drop(a.name)
            _wait(lambda: log.has("reconnection failed"), 10)
            time.sleep(0.5)  # its search ends while it is away: the move waits
            server.hold_logins.clear()
            second = read_until(rf"{game} [PM] ")  # sent again after the resumed game
            assert server.game_of(a.name) == (start.number, 3)
            send(f"{game} Resign")
            assert server.wait_finished(1, 20)
            _wait(lambda: a.stats.games == 1)
            c.close()
        assert not errors
    assert second.split()[0] == game
    assert a.stats.reconnects >= 1 and a.stats.resumed == 1
    assert log.has("resumed") and log.has("sending the move again")
    assert server.finished[0].reason == "resign" and a.stats.wins == 1
    _clean(a)
    assert server.refused == []


@pytest.mark.slow
def test_drop_mid_game_between_two_bots_and_the_game_ends_normally() -> None:
    with PlaytakServer(reconnect_seconds=20) as server:
        a = _bot(server, make_player("greedy", seed=1), seek=SeekSpec(4, 30, 0), games=1)
        b = _bot(server, SleepyPlayer(0.15, seed=2), accept="", games=1)
        with _running(a, b) as errors:
            _wait(lambda: (server.game_of(a.name) or (0, 0))[1] >= 3)
            assert server.drop(a.name)
            assert server.wait_finished(1, 60)
            _wait(lambda: a.stats.games == 1 and b.stats.games == 1)
        assert not errors
    assert server.finished[0].reason in CLEAN
    assert a.stats.reconnects == 1 and a.stats.resumed == 1
    _clean(a)
    _clean(b)


def test_malformed_server_lines_are_logged_and_ignored() -> None:
    with PlaytakServer() as server:
        log = Log()
        a = _bot(server, make_player("greedy", seed=1), seek=SeekSpec(4, 30, 0), games=1, log=log)
        b = _bot(server, SleepyPlayer(0.15, seed=2), accept="", games=1)
        with _running(a, b) as errors:
            _wait(lambda: server.game_of(a.name))
            n = server.game_of(a.name)[0]
            bad = [
                "Game#", "Game#x P A1", "Game Start 1 2 3",
                f"Game Start {n} Guest1 vs Guest2 purple 4 30 0 0 15 0 0 0 0 0 0",
                f"Game#{n} P Z9", f"Game#{n} M A1 B2 1", f"Game#{n} M A1 A2 0",
                f"Game#{n} Timems 12 abc", f"Game#{n} Over 2-0", f"Game#{n} Frobnicate",
                "Game#777 P A1", "Seek new 5 x", "\x00\x01garbage", "é" * 10,
            ]
            for line in bad:
                server.send_raw(a.name, line)
            server.send_raw(a.name, "")  # an empty line is nothing at all
            server.send_raw(a.name, "X" * 70000)  # too long: read in two pieces, both ignored
            assert server.wait_finished(1, 60)
            _wait(lambda: a.stats.games == 1)
        assert not errors
    assert a.stats.ignored == len(bad) + 2
    assert log.has(r"ignored server line 'Game#x P A1'")
    assert server.finished[0].reason in CLEAN
    assert (a.stats.server_errors, a.stats.internal_errors, a.stats.time_losses) == (0, 0, 0)


@pytest.mark.slow
def test_a_search_that_ignores_its_clock_never_loses_on_time() -> None:
    with PlaytakServer() as server:
        a = _bot(server, SleepyPlayer(0.8, seed=1, deaf=True), seek=SeekSpec(3, 2, 0), games=1)
        b = _bot(server, make_player("random", seed=2), accept="", games=1)
        with _running(a, b) as errors:
            assert server.wait_finished(1, 60)
            _wait(lambda: a.stats.games == 1)
        assert not errors
    assert server.finished[0].reason != "time"
    assert a.stats.deadline_moves >= 1  # moves played without waiting for the search
    _clean(a)


def test_login_with_an_account_and_a_refused_password() -> None:
    with PlaytakServer(accounts={"TakBot": "secret1"}) as server:
        bad = _bot(server, make_player("random"), user="TakBot", password="wrong12", seek=SeekSpec(3, 60))
        with pytest.raises(LoginError, match="TakBot"):
            bad.run()
        good = _bot(server, make_player("random"), user="TakBot", password="secret1", seek=SeekSpec(3, 60))
        with _running(good) as errors:
            _wait(lambda: "TakBot" in server.logged_in())
        assert not errors and good.name == "TakBot"


def test_move_budget() -> None:
    assert move_budget(0.5, 0, 1.0) == (0.0, 0.0)
    for remaining in (0.3, 1.0, 5.0, 60.0, 900.0):
        for inc in (0, 1, 30):
            soft, hard = move_budget(remaining, inc, 0.2)
            assert 0 < soft <= hard <= (remaining - 0.2) / 2
    soft, hard = move_budget(60.0, 0, 1.0)
    assert 59 / 25 < soft < 59 / 15  # about a twentieth of the time left


def test_protocol_lines() -> None:
    seek = SeekSpec(6, 600, 20, "W", half_komi=4, flats=32, caps=2)
    line = seek.command()
    m = SEEK_V3.match(line)
    assert m and m.groups() == ("6", "600", "20", "W", "4", "32", "2", "0", "0", "0", "0", "")
    # Without the trailing space the server would read its V2 form with opponent "0".
    assert SEEK_V2.match(line.rstrip()).group(10) == "0"
    assert SeekSpec(5, 60).command().startswith("Seek 5 60 0 A 0 21 1 ")
    for bad in ({"half_komi": 9}, {"flats": 9}, {"caps": 6}, {"colour": "X"}, {"size": 9}):
        with pytest.raises(ValueError):
            SeekSpec(**{"size": 5, "time_s": 60, **bad})
    new = parse_game_start("Game Start 7 alice vs bob black 6 600 20 4 32 2 0 0 0 0 0")
    old = parse_game_start("Game Start 7 6 alice vs bob black 600 4 32 2 0 0")
    assert (new.number, new.colour, new.size, new.time_s, new.half_komi, new.flats, new.caps) == (
        old.number, old.colour, old.size, old.time_s, old.half_komi, old.flats, old.caps
    ) == (7, 1, 6, 600, 4, 32, 2)
    assert (new.increment_s, old.increment_s) == (20, None)
    assert parse_clock("Timems 1500 200") == (1.5, 0.2) and parse_clock("Time 3 4") == (3.0, 4.0)
    assert parse_over("Over 1/2-1/2") == "1/2-1/2"
    kind, offer = parse_seek("Seek new 3 bob 5 180 5 A 2 21 1 0 0 0 0 0 1")
    assert (kind, offer.number, offer.half_komi, offer.opponent, offer.open_to("x")) == ("new", 3, 2, "0", True)
    kind, offer = parse_seek("Seek remove 4 bob 5 180 5 B 0 21 1 0 0 0 0 alice")
    assert kind == "remove" and offer.open_to("Alice") and not offer.open_to("carol")
    for bad_line in ("Game Start 7 x vs y green 5 1 1 0 21 1 0 0 0 0 0", "Game Start 1", "Seek new 5 x"):
        with pytest.raises(ProtocolError):
            (parse_seek if bad_line.startswith("Seek") else parse_game_start)(bad_line)


def test_command_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for argv in (
        ["--player", "random", "--seek", "5", "60"],
        ["--player", "random", "--seek", "5", "60", "0", "purple"],
        ["--player", "random", "--seek", "5", "60", "0", "--komi", "5"],
        ["--player", "random", "--user", "TakBot", "--password-env", "NO_SUCH_VAR_X", "--accept"],
        ["--player", "random"],
        ["--player", "nobody", "--accept"],
        ["--player", "random", "--accept", "--flats", "20"],
    ):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2
    capsys.readouterr()
    monkeypatch.setenv("TAKZERO_TEST_PW", "secret1")
    with PlaytakServer(accounts={"TakBot": "secret1"}) as server:
        host, port = server.address
        opponent = _bot(server, make_player("random", seed=2), accept="TakBot", games=1)
        with _running(opponent) as errors:
            status = cli.main([
                "--player", "random", "--user", "TakBot", "--password-env", "TAKZERO_TEST_PW",
                "--seek", "3", "20", "0", "white", "--komi", "1.5", "--flats", "11", "--caps", "0",
                "--games", "1", "--server", f"{host}:{port}",
            ])
            _wait(lambda: opponent.stats.games == 1)
        assert not errors
    assert status == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["games"] == 1 and summary["internal_errors"] == 0
    f = server.finished[0]
    assert (f.white, f.size, f.half_komi, f.flats, f.caps) == ("TakBot", 3, 3, 11, 0)


def test_server_refuses_a_spread_whose_end_square_is_one_beyond() -> None:
    """The in-process server follows the real one: ``M A1 A3 1 1`` is a two-square spread, and
    ``M A1 A4 1 1`` (one beyond the last drop) is refused."""
    with PlaytakServer() as server:
        c = [socket.create_connection(server.address, timeout=10) for _ in range(2)]
        files = [s.makefile("r", encoding="utf-8") for s in c]

        def say(i: int, line: str) -> None:
            c[i].sendall((line + "\n").encode())

        def read(i: int, pattern: str) -> str:
            for line in files[i]:
                if re.match(pattern, line):
                    return line.strip()
            raise AssertionError(pattern)

        for i in range(2):
            say(i, "Login Guest")
            read(i, "Welcome Guest")
        say(0, "Seek 4 60 0 W 0 15 0 0 0 0 0 ")
        say(1, "Accept " + read(1, "Seek new").split()[2])
        for i in range(2):
            read(i, "Game Start")
        plies = ["P B1", "P A1", "P A2", "P D4", "M A2 A1 1", "P C4"]  # a 2-stack of white's on a1
        for k, ply in enumerate(plies):
            say(k % 2, f"Game#1 {ply}")
            read(1 - k % 2, f"Game#1 {ply}")
            assert read(k % 2, "NOK|OK") == "OK"
        say(0, "Game#1 M A1 A4 1 1")
        assert read(0, "NOK|OK") == "NOK"
        say(0, "Game#1 M A1 A3 1 1")
        assert read(1, "Game#1 [PM]") == "Game#1 M A1 A3 1 1"
        for s in c:
            s.close()
    assert [r[1] for r in server.refused] == ["Game#1 M A1 A4 1 1"]


def test_an_opponent_who_leaves_for_good_abandons_and_the_bot_wins() -> None:
    with PlaytakServer(reconnect_seconds=0.3) as server:
        log = Log()
        a = _bot(server, make_player("greedy", seed=1), seek=SeekSpec(4, 60, 0, "B"), games=1, log=log)
        with _running(a) as errors:
            c = socket.create_connection(server.address, timeout=20)
            f = c.makefile("r", encoding="utf-8")
            c.sendall(b"Login Guest\n")
            seek_no = next(line for line in f if line.startswith(f"Seek new 1 {a.name}")).split()[2]
            c.sendall(f"Accept {seek_no}\n".encode())
            start = parse_game_start(next(line for line in f if line.startswith("Game Start")))
            c.sendall(f"Game#{start.number} P A1\n".encode())
            next(line for line in f if line.startswith(f"Game#{start.number} P"))  # the bot's reply
            c.shutdown(socket.SHUT_RDWR)  # gone, and not back within the server's 0.3 s
            c.close()
            _wait(lambda: a.stats.games == 1)
        assert not errors
    assert server.finished[0].reason == "abandoned"
    assert a.stats.wins == 1 and log.has(r"Abandoned\. Guest\d+ quit")
    _clean(a)
