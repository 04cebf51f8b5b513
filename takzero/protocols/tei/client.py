"""The TEI client: one TEI engine process (:class:`TEIClient`) spoken to in TEI, started in a
session of its own, with bounded reads, timeouts and the kill of its whole process group;
:class:`EngineError` for an engine that crashed, timed out or broke the protocol. Used by the
match runner (``takzero.protocols.tei.match``) and by ``tei:`` baselines
(``takzero.protocols.tei.player``).
"""

from __future__ import annotations

import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from takzero.protocols.tei.lines import (
    TEIProtocolError,
    format_setoption,
    parse_bestmove,
    parse_id_name,
    parse_option_name,
    parse_sizes,
)

__all__ = ["EngineError", "TEIClient", "kill_process_group"]


class EngineError(RuntimeError):
    """An engine that crashed, timed out or broke the protocol; ``reason`` is short
    ('crash', 'timeout', 'protocol'), the message says more."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


#: Seconds between wake-ups of a wait for an engine's line (see ``TEIClient._next``).
POLL_S = 0.2
#: Seconds an engine that has exited gets for the lines still in its pipe to arrive; then what
#: is left of its process group (a child that holds the pipe open) is killed and the wait ends,
#: without waiting for the pipe's end (``TEIClient._next``).
EXIT_GRACE_S = 0.5
#: The longest line read from an engine (characters, the bound the TEI engine puts on the lines
#: it reads): a longer one, or output that never ends its line, is a protocol forfeit.
MAX_LINE = 1 << 18
#: Lines read ahead of the match loop (at most MAX_QUEUED_LINES * MAX_LINE characters held): the
#: reader then waits, and the engine's pipe fills, so a flooding engine holds no more memory.
MAX_QUEUED_LINES = 64
#: ``info`` lines an answer keeps (the last ones; ``go``'s list, ``ready_infos``) and options and
#: lines before ``teiok`` read at most.
MAX_KEPT_LINES = 1000


def kill_process_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL every process of ``proc``'s process group (``proc`` was started in a session of
    its own, so the group is the engine and every child it made that did not leave it), the
    engine itself included when it still runs. Nothing happens when the group is empty or on a
    platform without process groups."""
    if os.name != "posix":
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class TEIClient:
    """One TEI engine process, started in a session (and process group) of its own: when the
    engine exits, or is closed or killed, whatever is left of its group (a child that still holds
    its output pipe) is killed, and no wait is for the pipe's end once the engine has exited.

    Args:
        command: the command line (split with ``shlex.split``).
        label: a fallback name (used until/unless the engine sends ``id name``).
        stderr: file to append the engine's stderr to (None: discarded).
        log: called with ``'> line'`` / ``'< line'`` for every line sent / received (debugging).
        startup_timeout: seconds to wait for ``teiok`` and ``readyok``.
    """

    def __init__(
        self,
        command: str,
        label: str = "engine",
        stderr: str | Path | None = None,
        log: Callable[[str], None] | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.command = command
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("empty engine command")
        self.name = label
        self.id_name: str | None = None
        self.options: dict[str, str] = {}
        #: the (sizes, half komis) of each ``size ... halfkomi ...`` line the engine sent before
        #: ``teiok`` (TEI version 1); empty for an engine that sends none
        self.sizes: list[tuple[list[int], list[int]]] = []
        self.stderr_path = stderr
        self.log = log
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | EngineError | None] = queue.Queue(MAX_QUEUED_LINES)
        self._reader: threading.Thread | None = None
        self._closing = threading.Event()  # set by close: the reader stops waiting to hand a line
        self._stderr_file: TextIO | None = None
        #: ``info`` lines received while the last ``isready`` was awaited (what the engine said
        #: about ``teinewgame``, e.g. that it plays a fallback baseline for this size).
        self.ready_infos: list[str] = []

    # -- process -----------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start the process and do the ``tei`` handshake (and ``isready``).

        Raises EngineError when the program cannot be started or does not answer."""
        self.close()
        self._lines = queue.Queue(MAX_QUEUED_LINES)
        self._closing = threading.Event()
        if self.stderr_path is not None:
            self._stderr_file = open(self.stderr_path, "a", encoding="utf-8")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr_file or subprocess.DEVNULL,
                text=True,
                bufsize=1,
                start_new_session=True,  # its own process group: killed whole (kill_process_group)
            )
        except OSError as e:
            raise EngineError("crash", f"cannot start '{self.command}': {e}") from None
        self._reader = threading.Thread(target=self._read, args=(self.proc, self._lines, self._closing),
                                        daemon=True)
        self._reader.start()
        self.send("tei")
        self.options = {}
        self.sizes = []
        deadline = time.monotonic() + self.startup_timeout
        for _ in range(MAX_KEPT_LINES + 1):
            line = self._until(deadline, self.startup_timeout, "teiok")
            if len(self.options) >= MAX_KEPT_LINES:
                raise EngineError("protocol", f"{self.name} sent over {MAX_KEPT_LINES} lines before teiok")
            id_name = parse_id_name(line)
            option = parse_option_name(line)
            try:
                announced = parse_sizes(line)
            except TEIProtocolError:
                announced = None  # a malformed size line says nothing the match can rely on
            if id_name is not None:
                self.id_name = id_name
            elif option is not None:
                self.options[option.lower()] = option
            elif announced is not None:
                self.sizes.append(announced)
            elif line.strip() == "teiok":
                break
        else:
            raise EngineError("protocol", f"{self.name} sent over {MAX_KEPT_LINES} lines before teiok")
        self.is_ready(self.startup_timeout)

    def _read(
        self, proc: subprocess.Popen[str], lines: queue.Queue[str | EngineError | None], closing: threading.Event
    ) -> None:
        # The reader owns proc.stdout and closes it at the pipe's end: close() cannot (closing a
        # file another thread is reading waits for that read, i.e. for every holder of the pipe).
        # Lines of at most MAX_LINE characters; a longer one ends the reading with an EngineError
        # for the waiter. At most MAX_QUEUED_LINES wait: then the reader waits (until close).
        assert proc.stdout is not None

        def hand(item: str | EngineError | None) -> bool:
            while not closing.is_set():
                try:
                    lines.put(item, timeout=POLL_S)
                    return True
                except queue.Full:
                    continue
            return False

        try:
            while True:
                line = proc.stdout.readline(MAX_LINE + 1)
                if not line:
                    break
                if len(line) > MAX_LINE and not line.endswith("\n"):
                    hand(EngineError("protocol", f"{self.name} sent a line of over {MAX_LINE:,} characters "
                                                 "(no newline): not TEI"))
                    return
                line = line.rstrip("\r\n")
                if self.log:
                    self.log(f"< {line}")
                if not hand(line):
                    return
        except (OSError, ValueError):
            pass
        finally:
            hand(None)
            try:
                proc.stdout.close()
            except OSError:
                pass

    def send(self, line: str) -> None:
        """Send one line. Raises EngineError('crash') if the process is gone."""
        if not self.alive:
            raise EngineError("crash", f"{self.name} is not running ({self._exit_text()})")
        if self.log:
            self.log(f"> {line}")
        try:
            assert self.proc is not None and self.proc.stdin is not None
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise EngineError(
                "crash", f"{self.name} closed its input ({self._exit_text()})"
            ) from None

    def _exit_text(self) -> str:
        if self.proc is None:
            return "not started"
        code = self.proc.poll()
        return "still running" if code is None else f"exit code {code}"

    def _until(self, deadline: float, timeout: float, waiting_for: str) -> str:
        """The next line, or EngineError('timeout') once the monotonic ``deadline`` has passed,
        even while lines keep coming (an engine that floods ``info`` lines): ``timeout`` is the
        whole wait, for the message."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise EngineError("timeout", f"{self.name} did not answer {waiting_for} within {timeout:.1f} s")
        return self._next(left, waiting_for, said=timeout)

    def _next(self, timeout: float, waiting_for: str, said: float | None = None) -> str:
        """The next line within ``timeout`` s (``said``: the whole wait, for the message).
        Raises EngineError: timeout, the engine stopped, or a line over :data:`MAX_LINE`."""
        # Waited for in slices of POLL_S: a Ctrl-C that the kernel delivers to the reader thread
        # only sets CPython's flag, which the main thread acts on when it wakes up.
        deadline = time.monotonic() + max(timeout, 0.001)
        exited_at: float | None = None
        while True:
            try:
                line = self._lines.get(timeout=max(min(POLL_S, deadline - time.monotonic()), 0.001))
                break
            except queue.Empty:
                if self.proc is not None and self.proc.poll() is not None:
                    # The engine is gone but the pipe has not ended: a child of it holds the
                    # pipe. Its last lines get EXIT_GRACE_S, then its group is killed.
                    exited_at = exited_at or time.monotonic()
                    if time.monotonic() - exited_at >= EXIT_GRACE_S:
                        kill_process_group(self.proc)
                        line = None
                        break
                    continue
                if time.monotonic() >= deadline:
                    raise EngineError(
                        "timeout", f"{self.name} did not answer {waiting_for} within "
                        f"{timeout if said is None else said:.1f} s"
                    ) from None
        if isinstance(line, EngineError):  # a line over MAX_LINE: the reader has stopped
            raise line
        if line is None:
            if self.proc is not None:
                try:
                    self.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
                if self.proc.poll() is not None:
                    kill_process_group(self.proc)  # what it left behind
            raise EngineError(
                "crash",
                f"{self.name} stopped ({self._exit_text()}) while {waiting_for} was awaited",
            )
        return line

    def is_ready(self, timeout: float = 30.0) -> None:
        """``isready`` -> wait for ``readyok``. Raises EngineError."""
        self.send("isready")
        deadline = time.monotonic() + timeout
        infos: deque[str] = deque(maxlen=MAX_KEPT_LINES)
        while (line := self._until(deadline, timeout, "readyok").strip()) != "readyok":
            if line.split()[:1] == ["info"]:
                infos.append(line)
        self.ready_infos = list(infos)

    def new_game(self, size: int, half_komi: int) -> None:
        """``setoption name HalfKomi`` (when the engine has the option or komi is not 0),
        ``teinewgame <size>``, ``isready``. Starts the engine first if it is not running.
        Raises EngineError."""
        if not self.alive:
            self.start()
        if "halfkomi" in self.options or half_komi != 0:
            name = self.options.get("halfkomi", "HalfKomi")
            self.send(format_setoption(name, half_komi))
        self.send(f"teinewgame {size}")
        self.is_ready(self.startup_timeout)

    def go(self, position_cmd: str, go_cmd: str, timeout: float) -> tuple[str, list[str], float]:
        """Send ``position_cmd`` and ``go_cmd``; wait for ``bestmove``.

        Returns (the move text, the last :data:`MAX_KEPT_LINES` ``info`` lines received, seconds
        from ``go`` to ``bestmove``). Raises EngineError (crash, timeout after ``timeout`` s, also
        while ``info`` lines keep coming, a bestmove line without a move, or a line over
        :data:`MAX_LINE` characters)."""
        self.send(position_cmd)
        self.send(go_cmd)
        t0 = time.monotonic()
        infos: deque[str] = deque(maxlen=MAX_KEPT_LINES)
        received = 0
        while True:
            try:
                line = self._until(t0 + timeout, timeout, "bestmove")
            except EngineError as e:
                if e.reason != "timeout" or not received:
                    raise
                raise EngineError("timeout", f"{e}; it sent {received:,} other lines meanwhile") from None
            received += 1
            try:
                move = parse_bestmove(line)
            except TEIProtocolError:
                raise EngineError(
                    "protocol", f"{self.name} sent 'bestmove' without a move"
                ) from None
            if move is not None:
                return move, list(infos), time.monotonic() - t0
            parts = line.split()
            if parts and parts[0] == "info":
                infos.append(line)

    def close(self, timeout: float = 3.0) -> None:
        """``quit``, then terminate/kill if the process does not exit within ``timeout`` s; then
        every process left in its group (children holding its pipes) is killed. Returns once the
        engine has exited, never waiting for its output pipe to end (the reader thread closes
        it when it does)."""
        proc = self.proc
        self._closing.set()  # a reader waiting to hand a line stops
        if proc is not None:
            if proc.poll() is None:
                try:
                    assert proc.stdin is not None
                    proc.stdin.write("quit\n")
                    proc.stdin.flush()
                except (BrokenPipeError, OSError, ValueError):
                    pass
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    proc.terminate()
                    try:
                        proc.wait(timeout=timeout)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
            kill_process_group(proc)
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass
            if self._reader is not None:
                self._reader.join(timeout=1.0)  # ends at the pipe's end, now that the group is gone
            self.proc = None
        if self._stderr_file is not None:
            self._stderr_file.close()
            self._stderr_file = None

    def kill(self) -> None:
        """Kill the process and its group at once (after a timeout); the next game restarts it."""
        if self.proc is not None and self.proc.poll() is None:
            kill_process_group(self.proc)
            self.proc.kill()
            self.proc.wait()
        self.close(timeout=0.1)
