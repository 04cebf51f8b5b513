"""The playtak bot's TCP connection: a reader thread and a locked writer, the login's token.

Keep-alive and reconnection (the bot's side, :class:`takzero.protocols.playtak.bot.PlaytakBot`):
``PING`` every ``ping_interval`` seconds (30: the server's advice); a connection that says nothing
for three intervals, or breaks, is replaced: the bot logs in again (same guest token or account),
with growing waits, for up to ``reconnect_timeout`` seconds. Each connection has an id; lines of
an older connection still in the queue are dropped by the bot.
"""

from __future__ import annotations

import queue
import secrets
import socket
import string
import threading

#: Longest line read from the server; a longer one arrives in pieces (each ignored as malformed).
MAX_LINE = 65536


class LoginError(RuntimeError):
    """The server refused the login (wrong name or password)."""


def new_guest_token() -> str:
    """20 random lower-case letters (the server's guest token; cryptographically random)."""
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(20))


class Connection:
    """A TCP connection: a reader thread putting ``("line", cid, text)`` (at most
    :data:`MAX_LINE` bytes a line) and finally ``("closed", cid, why)`` on ``events``, and a
    locked writer. ``sock``: a connected socket (made blocking here); ``cid``: its id."""

    def __init__(self, sock: socket.socket, cid: int, events: queue.Queue) -> None:
        self.sock = sock
        self.cid = cid
        self._events = events
        self._lock = threading.Lock()
        sock.settimeout(None)
        threading.Thread(target=self._read, daemon=True, name=f"playtak-read-{cid}").start()

    def _read(self) -> None:
        why = "closed by the server"
        try:
            with self.sock.makefile("rb") as f:
                while raw := f.readline(MAX_LINE):
                    self._events.put(("line", self.cid, raw.decode("utf-8", "replace").rstrip("\r\n")))
        except (OSError, ValueError) as e:
            why = str(e) or type(e).__name__
        self._events.put(("closed", self.cid, why))

    def send(self, line: str) -> bool:
        """Send ``line`` and a newline; False when the connection is broken."""
        with self._lock:
            try:
                self.sock.sendall((line + "\n").encode())
                return True
            except OSError:
                return False

    def close(self) -> None:
        """Shut the socket down (the reader then reports it closed)."""
        for op in (lambda: self.sock.shutdown(socket.SHUT_RDWR), self.sock.close):
            try:
                op()
            except OSError:
                pass


__all__ = ["MAX_LINE", "Connection", "LoginError", "new_guest_token"]
