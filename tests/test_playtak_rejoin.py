"""The playtak bot across reconnections in every order of lines the real server can produce
(``takzero.protocols.playtak.server``'s docstring cites the server's code for each): a guest's
resumed game before ``Welcome``, an account's after it, the order the test server used before
(``Welcome`` first for guests too) and the rejoin's ``Game Start`` in either layout, each with a
drop at ply 6 and at ply 19; a game the bot does not know is adopted and finished, or resigned
when its player cannot play it or its plies cannot be replayed; the trace of issue 34 line for
line from a scripted server."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from takzero.protocols.playtak.bot import PlaytakBot
from takzero.protocols.playtak.lines import SeekSpec, parse_game_start
from takzero.protocols.playtak.server import PlaytakServer
from tests.test_playtak import CLEAN, Log, SleepyPlayer, _bot, _clean, _running, _wait

ACCOUNT = {"TakBot": "secret1"}


class NotFivePlayer(SleepyPlayer):
    """A player that cannot play 5x5 (as a network trained for another size)."""

    def reset(self, size: int, half_komi: int, seed: int | None = None) -> None:
        if size == 5:
            raise ValueError("this player does not play 5x5")
        super().reset(size, half_komi, seed)


def _drop_at(server: PlaytakServer, name: str, ply: int, timeout: float = 60.0) -> int:
    """Drop ``name``'s connection as soon as its game has ``ply`` plies; the plies at the drop."""
    deadline = time.monotonic() + timeout
    while True:
        now = server.game_of(name)
        if now is not None and now[1] >= ply:
            assert server.drop(name)
            return now[1]
        assert time.monotonic() < deadline, "the game did not reach the ply"
        time.sleep(0.002)


ORDERS = [
    pytest.param("guest", "real", "game", id="guest-game-before-welcome"),
    pytest.param("account", "real", "game", id="account-welcome-then-game"),
    pytest.param("guest", "welcome_first", "game", id="guest-welcome-first-old-test-server"),
    pytest.param("guest", "real", "protocol", id="guest-rejoin-in-protocol-2-layout"),
]


@pytest.mark.parametrize("ply", [6, 19])
@pytest.mark.parametrize("who, order, layout", ORDERS)
@pytest.mark.slow  # command-line processes or whole games: ~3-20 s, run by .ci/run's slow pass
def test_a_drop_at_a_ply_resumes_the_game_and_finishes_it(who: str, order: str, layout: str, ply: int) -> None:
    login = {"user": "TakBot", "password": "secret1"} if who == "account" else {}
    with PlaytakServer(ACCOUNT if login else None, reconnect_seconds=20, rejoin_order=order,
                       rejoin_layout=layout, record=True) as server:
        log = Log()
        a = _bot(server, SleepyPlayer(0.04, seed=ply), seek=SeekSpec(5, 60, 0, "W"), games=1,
                 log=log, **login)
        b = _bot(server, SleepyPlayer(0.04, seed=ply + 1), accept="", games=1)
        with _running(a, b) as errors:
            at = _drop_at(server, a.name, ply)
            assert server.wait_finished(1, 60)
            _wait(lambda: a.stats.games == 1 and b.stats.games == 1)
        assert not errors
    assert ply <= at <= ply + 1
    f = server.finished[0]
    assert f.reason in CLEAN and len(f.moves) > at
    assert (a.stats.reconnects, a.stats.resumed) == (1, 1), log.lines[-20:]
    _clean(a)
    _clean(b)
    assert server.refused == []  # never a seek (or anything else) refused while the game was on
    for bot in (a, b):
        assert [(r["game"], r["result"], r["plies"]) for r in bot.stats.results] == [
            (f.number, f.result, len(f.moves))
        ]
    # The lines really came in the order under test.
    lines = server.sent[a.name]
    welcomes = [i for i, line in enumerate(lines) if line == f"Welcome {a.name}!"]
    starts = [i for i, line in enumerate(lines) if line.startswith("Game Start")]
    assert len(welcomes) == 2 and len(starts) == 2
    rejoin = starts[1]
    assert (rejoin < welcomes[1]) == (who == "guest" and order == "real")
    resumed = lines.index("Message Your game is resumed", rejoin)
    plies = lines[rejoin + 1 : resumed - 1]  # every ply so far, then the clock
    assert len(plies) >= at and all(re.match(rf"Game#{f.number} [PM] ", p) for p in plies)
    assert lines[resumed - 1].startswith(f"Game#{f.number} Timems ")
    assert (parse_game_start(lines[rejoin]).increment_s is None) == (layout == "game")


def _left_game(server: PlaytakServer, plies: int) -> tuple[int, PlaytakBot]:
    """TakBot starts a game against a guest bot and stops (a restarted program) after ``plies``
    plies; the game goes on on the server. Returns (game number, the guest bot, still running
    in the caller's ``_running``)."""
    first = _bot(server, SleepyPlayer(0.04, seed=1), user="TakBot", password="secret1",
                 seek=SeekSpec(5, 60, 0, "W"), games=1)
    with _running(first) as errors:
        _wait(lambda: (server.game_of("TakBot") or (0, 0))[1] >= plies)
    assert not errors
    game = server.game_of("TakBot")
    assert game is not None and first.stats.games == 0
    return game[0], first


@pytest.mark.slow
def test_a_game_the_bot_does_not_know_is_adopted_and_finished() -> None:
    with PlaytakServer(ACCOUNT, reconnect_seconds=30) as server:
        b = _bot(server, SleepyPlayer(0.04, seed=2), accept="", games=1)
        with _running(b) as errors:
            number, _ = _left_game(server, 5)
            log = Log()
            second = _bot(server, SleepyPlayer(0.04, seed=3), user="TakBot", password="secret1",
                          seek=SeekSpec(5, 60, 0), games=1, log=log)
            with _running(second) as errors2:
                assert server.wait_finished(1, 60)
                _wait(lambda: second.stats.games == 1 and b.stats.games == 1)
        assert not errors and not errors2
    assert log.has(rf"adopting game {number}: ")
    assert not log.has("seeking")  # the game was on: no seek, and none after (games=1)
    f = server.finished[0]
    assert f.number == number and f.reason in CLEAN
    assert second.stats.results[0]["game"] == number
    _clean(second)
    assert server.refused == []


def test_an_adopted_game_the_player_cannot_play_is_resigned_at_once() -> None:
    with PlaytakServer(ACCOUNT, reconnect_seconds=30) as server:
        b = _bot(server, SleepyPlayer(0.04, seed=2), accept="", games=1)
        with _running(b) as errors:
            number, _ = _left_game(server, 3)
            log = Log()
            second = _bot(server, NotFivePlayer(0.04), user="TakBot", password="secret1", games=1, log=log)
            with _running(second) as errors2:
                assert server.wait_finished(1, 30)
                _wait(lambda: second.stats.games == 1)
        assert not errors and not errors2
    assert log.has(rf"cannot play game {number} .*does not play 5x5.*; resigning")
    assert server.finished[0].reason == "resign"
    s = second.stats
    assert (s.losses, s.time_losses, s.abandoned, s.server_errors) == (1, 0, 0, 0)


@contextmanager
def _scripted(script: Callable[[Callable[[str], None], Callable[[str], str]], None]) -> Iterator[tuple]:
    """A one-connection server that runs ``script(send, expect)``: ``expect(pattern)`` reads
    the bot's lines until one matches and returns it. Yields (address, every line read, the
    script's errors)."""
    listener = socket.create_server(("127.0.0.1", 0))
    read: list[str] = []
    errors: list[BaseException] = []

    def serve() -> None:
        conn, _ = listener.accept()
        f = conn.makefile("r", encoding="utf-8")

        def send(line: str) -> None:
            conn.sendall((line + "\n").encode())

        def expect(pattern: str) -> str:
            for raw in f:
                read.append(raw.strip())
                if re.match(pattern, raw):
                    return raw.strip()
            raise AssertionError(f"closed before {pattern}")

        try:
            script(send, expect)
            for raw in f:  # until the bot quits
                read.append(raw.strip())
        except BaseException as e:  # noqa: BLE001 - handed to the test
            errors.append(e)
        finally:
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield listener.getsockname()[:2], read, errors
    finally:
        listener.close()
        t.join(timeout=10)


def _trace(plies: list[str], end: str) -> Callable:
    """The lines of issue 34's trace: the game (protocol 2 layout, as there), its plies, the
    clock, ``Message Your game is resumed``, then ``Welcome`` and ``Online``."""

    def script(send: Callable[[str], None], expect: Callable[[str], str]) -> None:
        send("Welcome!")
        send("Login or Register")
        expect("Login Guest")
        send("Game Start 3 Guest6 vs Guest7 white 5 180 5 0 21 1 0 0 0 0 0")
        for p in plies:
            send(f"Game#3 {p}")
        send("Game#3 Timems 170000 171000")
        send("Message Your game is resumed")
        send("Welcome Guest6!")
        send("Online 2")
        expect("PING")
        send("OK")
        expect(end)
        send("Game#3 Over 0-1" if end.endswith("Resign") else "Game#3 Abandoned. Guest7 quit")

    return script


def test_the_trace_of_issue_34_the_game_before_welcome_is_played() -> None:
    with _scripted(_trace(["P A1", "P E5"], r"Game#3 [PM] ")) as (address, read, script_errors):
        log = Log()
        bot = PlaytakBot(SleepyPlayer(0.05), address, seek=SeekSpec(5, 180, 5), games=1,
                         reserve_s=0.2, log=log)
        stats = bot.run()
    assert not script_errors, script_errors
    assert log.has("adopting game 3: Guest6 vs Guest7") and not log.has("did not come back")
    assert stats.wins == 1 and stats.abandoned == 0
    assert not [line for line in read if line.startswith("Seek")]


def test_an_adopted_game_whose_plies_cannot_be_replayed_is_resigned() -> None:
    with _scripted(_trace(["P A1", "P A1"], r"Game#3 Resign")) as (address, read, script_errors):
        log = Log()
        bot = PlaytakBot(SleepyPlayer(0.05), address, seek=SeekSpec(5, 180, 5), games=1,
                         reserve_s=0.2, log=log)
        stats = bot.run()
    assert not script_errors, script_errors
    assert log.has(r"game 3 cannot be rebuilt from the server's lines \(ply 2 'P A1'.*; resigning")
    assert (stats.losses, stats.time_losses, stats.ignored) == (1, 0, 1)
    assert not [line for line in read if re.match(r"Game#3 [PM] |Seek", line)]


class _Client:
    """A raw line client of the test server."""

    def __init__(self, server: PlaytakServer) -> None:
        self.sock = socket.create_connection(server.address, timeout=10)
        self.file = self.sock.makefile("r", encoding="utf-8")

    def send(self, line: str) -> None:
        self.sock.sendall((line + "\n").encode())

    def until(self, pattern: str) -> list[str]:
        """Every line up to and with the first that matches ``pattern``."""
        got = []
        for raw in self.file:
            got.append(raw.strip())
            if re.match(pattern, got[-1]):
                return got
        raise AssertionError(f"closed before {pattern}: {got}")

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.file.close()
        self.sock.close()


def _kinds(lines: list[str]) -> list[str]:
    return [" ".join(line.split()[:2]) if line.startswith(("Game", "Seek")) else line.split()[0]
            for line in lines]


def test_the_test_server_sends_the_real_servers_order_of_lines() -> None:
    token = "abcdefghijklmnopqrst"
    with PlaytakServer(ACCOUNT, reconnect_seconds=2, record=True) as server:
        a, b = _Client(server), _Client(server)  # protocol 0: clocks as "Time" in seconds
        a.send(f"Login Guest {token}")
        a.send("PING")
        assert _kinds(a.until("OK")) == ["Welcome!", "Login", "Welcome", "Online", "OnlinePlayers", "OK"]
        b.send("Login TakBot secret1")
        b.until("Welcome TakBot!")
        a.send("Seek 4 60 0 W 0 15 0 0 0 0 0 ")  # Seek.addSeek: Seek new to every listener, no OK
        number = b.until("Seek new")[-1].split()[2]
        b.send(f"Accept {number}")  # Client.run: seeks removed, GameList Add, Game Start (b, then a)
        assert _kinds(b.until("Game Start"))[-3:] == ["Seek remove", "GameList Add", "Game Start"]
        assert _kinds(a.until("Game Start"))[-3:] == ["Seek remove", "GameList Add", "Game Start"]
        a.send("Game#1 P A1")  # Game.placeMove: clock to both, the ply to the other, OK
        assert _kinds(a.until("OK")) == ["Game#1 Time", "OK"]
        assert _kinds(b.until("Game#1 P")) == ["Game#1 Time", "Game#1 P"]
        a.close()  # Client.clientQuit: the opponent told, the guest's seek gone, Online
        assert _kinds(b.until("Online"))[-2:] == ["Message", "Online"]
        a = _Client(server)  # the guest again: the game before Welcome (Player.login)
        a.send(f"Login Guest {token}")
        a.send("PING")
        got = _kinds(a.until("OK"))
        assert got[2:] == ["Game Start", "Game#1 P", "Game#1 Time", "Message", "Welcome",
                           "GameList Add", "Online", "OnlinePlayers", "OK"], got
        assert _kinds(b.until("Message"))[-1] == "Message"  # ... has reconnected.
        b.close()  # the account leaves and comes back: Welcome before the game
        assert _kinds(a.until("Online"))[-2:] == ["Message", "Online"]
        b = _Client(server)
        b.send("Login TakBot secret1")
        b.send("PING")
        got = _kinds(b.until("OK"))
        assert got[2:] == ["Welcome", "Game Start", "Game#1 P", "Game#1 Time", "Message",
                           "GameList Add", "Online", "OnlinePlayers", "OK"], got
        b.send("Seek 4 60 0 W 0 15 0 0 0 0 0 ")  # refused while a game is on
        assert b.until("NOK")[-1] == "NOK"
        b.close()  # gone for good: Abandoned to the winner, no Over, GameList Remove
        got = _kinds(a.until("GameList Remove"))
        assert got[-2:] == ["Game#1 Abandoned.", "GameList Remove"] and "Game#1 Over" not in got
        a.close()
    assert server.finished[0].reason == "abandoned"
    assert server.sent is not None and server.sent["TakBot"][0] == "Welcome TakBot!"
    with pytest.raises(ValueError, match="rejoin_order"):
        PlaytakServer(rejoin_order="guest_last")
    with pytest.raises(ValueError, match="rejoin_layout"):
        PlaytakServer(rejoin_layout="v9")
