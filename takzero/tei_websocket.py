"""The TEI engine over WebSocket: ``python -m takzero.tei --model M --websocket [HOST:]PORT``.

PTN Ninja's TEI client (``src/bots/tei.js``) opens ``ws://localhost:7731`` (its default address
and port), sends each command as one text message and reads every message it gets as lines. So
this module serves the very session of ``takzero.tei`` (:class:`takzero.tei.TEIEngine`) over a
WebSocket, with no bridge such as websocketd in between:

* one engine per connection, built when the connection opens (so two browser tabs never share a
  search tree or a position; engines start while others search: the network's ONNX export
  is serialised by ``takzero.nn.inference.ONNX_EXPORT_LOCK``) and ended when it closes (a
  running search is stopped at once, as at the end of stdin, even while commands wait for it;
  the engine, its tree and its network runtime are dropped with the connection);
* at most :data:`MAX_CONNECTIONS` connections at once (``max_connections``): one more is told
  ``info string the server is full ...`` and closed (close code 1013, "try again later");
  a message is at most :data:`MAX_MESSAGE` bytes (a longer one closes the connection, code
  1009) and a line of it at most the engine's ``MAX_LINE`` characters;
* every message from the client is split into lines, and the engine reads them in order, exactly
  as it reads stdin (the same commands give the same transcript, ``tests/test_tei_interop.py``);
* every line the engine prints goes out as one text message (a search's ``info`` lines from its
  worker thread too; the engine sends one line at a time);
* the address is ``[HOST:]PORT`` (:func:`parse_address`; default ``127.0.0.1:7731``: only this
  machine). Any web page the user opens can reach a local WebSocket, as with websocketd; the
  engine only answers TEI commands. ``0.0.0.0:PORT`` serves the network, with no TLS (PTN
  Ninja's ``ssl`` setting needs a ``wss://`` proxy in front).

The server is the ``websockets`` library's threading server (``websockets.sync.server``), which
fits the engine: it reads on one thread and searches on another. Nothing here knows TEI: the
engine comes from the caller's ``make_engine(out)``, which is ``takzero.tei``'s command line
(this module imports nothing of takzero, so it sits beside ``tei.py`` without a cycle).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol

DEFAULT_HOST = "127.0.0.1"
#: PTN Ninja's default TEI port.
DEFAULT_PORT = 7731
DEFAULT_ADDRESS = f"{DEFAULT_HOST}:{DEFAULT_PORT}"
#: The largest message read from a client (a ``position`` of a long game is a few kB).
MAX_MESSAGE = 1 << 20
#: Most connections served at once (each has its engine: a search tree of up to ``TreeNodes``
#: nodes, 112 MB at the default, and a network runtime); more are refused politely.
MAX_CONNECTIONS = 8


class LineEngine(Protocol):
    """What is served: an object that reads commands from a text stream until it ends."""

    def run(self, stream: Any) -> None: ...


def parse_address(text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` -> (host, port); HOST defaults to 127.0.0.1, ``[::1]:PORT`` is an IPv6
    host. Raises ValueError for a port that is not an integer in 0..65535 (0: any free port) or
    an empty host."""
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = DEFAULT_HOST, text
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        raise ValueError(f"--websocket takes [HOST:]PORT, got {text!r} (an empty host)")
    if not (port.isascii() and port.isdigit()) or not 0 <= int(port) <= 65535:
        raise ValueError(f"--websocket takes [HOST:]PORT with a port in 0..65535, got {text!r}")
    return host, int(port)


class MessageLines:
    """A WebSocket connection read as a text stream: :meth:`readline` returns the client's next
    line (messages split at line breaks, each line ending in ``\\n``), and ``""`` once the
    connection is closed, as a file at its end. One message is held at a time, its lines cut
    out as they are read (no copy of every line)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._text = ""
        self._pos = 0

    def readline(self, size: int = -1) -> str:
        """The next line (at most ``size`` characters when ``size`` >= 0: a longer line comes
        in pieces, as ``io`` streams give it)."""
        from websockets.exceptions import ConnectionClosed

        while self._pos >= len(self._text):
            try:
                message = self._connection.recv()
            except ConnectionClosed:
                return ""
            if isinstance(message, bytes):
                message = message.decode("utf-8", "replace")
            message = message.replace("\r\n", "\n").replace("\r", "\n")
            if not message.strip("\n"):
                continue  # an empty message has no line
            self._text = message if message.endswith("\n") else message + "\n"
            self._pos = 0
        end = self._text.find("\n", self._pos) + 1
        if size >= 0:
            end = min(end, self._pos + max(1, size))
        line = self._text[self._pos : end]
        self._pos = end
        return line


def _sender(connection: Any) -> Callable[[str], None]:
    """``out(line)``: one text message per line; nothing once the connection is gone."""
    from websockets.exceptions import ConnectionClosed

    def out(line: str) -> None:
        try:
            connection.send(line)
        except ConnectionClosed:
            pass

    return out


def _stderr(msg: str) -> None:
    print(f"takzero.tei: {msg}", file=sys.stderr, flush=True)


def start_server(
    make_engine: Callable[[Callable[[str], None]], LineEngine],
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    log: Callable[[str], None] = _stderr,
    max_connections: int = MAX_CONNECTIONS,
) -> Any:
    """Listen on ``host:port`` and return the ``websockets`` server, not yet serving: call its
    ``serve_forever()`` (blocks; in a thread for tests) and ``shutdown()`` to stop. Each
    connection gets ``make_engine(out)``, whose ``run`` reads the connection's lines; an engine
    that cannot be built is reported to the client as ``info string cannot start: ...`` and the
    connection closed. At most ``max_connections`` (>= 1) connections are served at once; one
    more is told ``info string the server is full ...`` and closed with code 1013. Raises
    ImportError (no ``websockets``), OSError (the address cannot be bound, e.g. the port is
    taken) and ValueError (``max_connections`` < 1)."""
    from websockets.sync.server import serve

    if max_connections < 1:
        raise ValueError(f"max_connections must be >= 1, got {max_connections}")
    count = [0]
    lock = threading.Lock()
    slots = threading.BoundedSemaphore(max_connections)

    def handler(connection: Any) -> None:
        with lock:
            count[0] += 1
            n = count[0]
        who = connection.remote_address
        out = _sender(connection)
        if not slots.acquire(blocking=False):
            log(f"connection {n} from {who[0]}:{who[1]} refused: {max_connections} connections already")
            out(f"info string the server is full ({max_connections} connections, its most): "
                "try again later")  # fmt: skip
            connection.close(1013, "try again later")
            return
        try:
            log(f"connection {n} from {who[0]}:{who[1]}")
            try:
                engine = make_engine(out)
            except Exception as e:  # noqa: BLE001 - told to the client, the server goes on
                log(f"connection {n}: cannot start the engine: {e}")  # first: the client may be gone
                out(f"info string cannot start: {e}")
                return
            engine.run(MessageLines(connection))
            del engine  # its tree and network go now, not when the next connection comes
            log(f"connection {n} closed")
        finally:
            slots.release()

    return serve(handler, host, port, compression=None, max_size=MAX_MESSAGE)


def serve_websocket(
    make_engine: Callable[[Callable[[str], None]], LineEngine],
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    log: Callable[[str], None] = _stderr,
) -> int:
    """Serve until Ctrl-C (see :func:`start_server`); says where on ``log``. Returns the exit
    status: 0 after Ctrl-C, 2 when ``websockets`` is missing or the address cannot be bound."""
    try:
        server = start_server(make_engine, host, port, log)
    except ImportError:
        log("--websocket needs the websockets package (pip install websockets)")
        return 2
    except OSError as e:
        log(f"cannot listen on {host}:{port}: {e.strerror or e}")
        return 2
    with server:
        bound = server.socket.getsockname()
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        log(f"serving TEI on ws://{shown}:{bound[1]} (one engine per connection; Ctrl-C ends)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            log("stopped")
    return 0


__all__ = [
    "DEFAULT_ADDRESS",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "MAX_CONNECTIONS",
    "MAX_MESSAGE",
    "MessageLines",
    "parse_address",
    "serve_websocket",
    "start_server",
]
