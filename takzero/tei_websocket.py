"""The TEI engine over WebSocket: ``python -m takzero.tei --model M --websocket [HOST:]PORT``.

PTN Ninja's TEI client (``src/bots/tei.js``) opens ``ws://localhost:7731`` (its default address
and port), sends each command as one text message and reads every message it gets as lines. So
this module serves the very session of ``takzero.tei`` (:class:`takzero.tei.TEIEngine`) over a
WebSocket, with no bridge such as websocketd in between:

* one engine per connection, built when the connection opens (so two browser tabs never share a
  search tree or a position; engines start while others search: the network's ONNX export
  is serialised by ``takzero.nn.model_export.ONNX_EXPORT_LOCK``) and ended when it closes (a
  running search is stopped at once, as at the end of stdin, even while commands wait for it, and
  the commands still queued are dropped unanswered; the engine, its tree and its network runtime
  are dropped with the connection; the engines share one memory budget for their search trees,
  given by the caller's ``make_engine``, so a ``TreeNodes`` that does not fit beside the other
  connections' is refused);
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

import errno
import logging
import selectors
import socket
import sys
import threading
import time
from collections import OrderedDict, deque
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
#: Seconds a connection has for its opening handshake (an idle or half-open socket is dropped).
HANDSHAKE_TIMEOUT = 5.0
#: (ping interval, ping timeout), seconds: a client that answers no ping in time is dropped (the
#: ``websockets`` library's defaults).
KEEPALIVE = (20.0, 20.0)
#: Most accepted sockets held that have sent nothing yet (no thread each; the oldest is closed
#: to make room, each is closed after :data:`HANDSHAKE_TIMEOUT` seconds of silence).
MAX_IDLE = 256
#: Errors of ``accept`` that pass (out of file descriptors or memory for a moment, a peer gone
#: before it was accepted): the listener waits a little and goes on instead of ending.
_TRANSIENT_ACCEPT = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED,
                     errno.EPROTO, errno.EPERM, errno.EINTR}


class _Gate:
    """The sockets the server has started threads for, counted from when they are handed on
    (:class:`_GatedListener`: once they sent their first bytes), so a socket still in its opening
    handshake counts: at most ``engines`` serving an engine and ``pending`` in their handshake or
    being refused; a new socket when ``pending`` are waiting pushes the oldest waiting one out
    (shut down: its handshake ends at once), so slow handshakes cannot lock good clients out;
    and at most ``engines + 2 * pending`` sockets (the pushed-out ones still closing) at all,
    beyond which a new socket is closed at once, with no thread started for it."""

    def __init__(self, engines: int, pending: int) -> None:
        self.engines = engines
        self.pending = pending
        self._lock = threading.Lock()
        self._waiting: OrderedDict[socket.socket, None] = OrderedDict()  # oldest first
        self._held: set[socket.socket] = set()
        self._serving = 0

    def admit(self, sock: socket.socket) -> bool:
        """Count a socket just accepted; False: too many held, close it."""
        out = None
        with self._lock:
            if len(self._held) >= self.engines + 2 * self.pending:
                return False
            if len(self._waiting) >= self.pending:
                out, _ = self._waiting.popitem(last=False)
            self._held.add(sock)
            self._waiting[sock] = None
        if out is not None:
            try:
                out.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return True

    def serve(self, sock: socket.socket) -> bool:
        """The handshake of ``sock`` is done: True and it serves an engine, or False when
        ``engines`` serve already (it stays waiting while it is refused)."""
        with self._lock:
            if self._serving >= self.engines:
                return False
            self._serving += 1
            self._waiting.pop(sock, None)
            return True

    def unserve(self) -> None:
        """An engine's connection ended."""
        with self._lock:
            self._serving -= 1

    def done(self, sock: socket.socket) -> None:
        """The socket's handler ended (closed)."""
        with self._lock:
            self._waiting.pop(sock, None)
            self._held.discard(sock)

    def held(self) -> int:
        """Sockets held now."""
        with self._lock:
            return len(self._held)


class _GatedListener:
    """The listening socket as the ``websockets`` server sees it. A watcher thread accepts the
    connections and holds each one, with no thread of its own, until it sends its first bytes
    (its opening handshake; at most :data:`MAX_IDLE` such sockets, the oldest closed first, each
    closed after ``idle_timeout`` seconds of silence), then hands it on if the :class:`_Gate`
    admits it (else closes it). The server's accept loop waits on :meth:`fileno` (readable while
    sockets are ready) and takes them with :meth:`accept`. An ``accept`` error that passes
    (:data:`_TRANSIENT_ACCEPT`, such as running out of file descriptors) is waited out instead of
    ending the server. Everything else (``getsockname`` ...) is the real socket's."""

    def __init__(self, sock: socket.socket, gate: _Gate, log: Callable[[str], None],
                 idle_timeout: float, max_idle: int) -> None:
        self._sock = sock
        self._gate = gate
        self._log = log
        self._idle_timeout = idle_timeout
        self._max_idle = max_idle
        self._ready: deque[tuple[socket.socket, Any]] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._wake_r, self._wake_w = socket.socketpair()  # a byte per ready socket
        self._stop_r, self._stop_w = socket.socketpair()  # wakes the watcher at close
        sock.setblocking(False)
        self._watcher = threading.Thread(target=self._watch, daemon=True, name="tei-ws-accept")
        self._watcher.start()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def fileno(self) -> int:
        """What the server's accept loop waits on: readable while a socket is ready."""
        return self._wake_r.fileno()

    def close(self) -> None:
        """Stop accepting: the listener, the sockets held and those ready are closed."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
            ready = list(self._ready)
            self._ready.clear()
        for s, _ in ready:
            s.close()
        try:
            self._stop_w.send(b"x")
        except OSError:
            pass
        self._watcher.join(timeout=5)
        for s in (self._wake_r, self._wake_w, self._stop_r, self._stop_w):
            s.close()

    def accept(self) -> tuple[socket.socket, Any]:
        """The next socket that sent its first bytes (waits for one); OSError once closed."""
        with self._cond:
            while not self._ready and not self._closed:
                self._cond.wait(0.5)  # a timed wait: a Ctrl-C or a close is seen within it
            if self._closed:
                raise OSError(errno.EBADF, "the server is closed")
            item = self._ready.popleft()
        try:
            self._wake_r.recv(1)
        except OSError:
            pass
        return item

    def _hand_on(self, sock: socket.socket, addr: Any) -> None:
        sock.setblocking(True)
        if not self._gate.admit(sock):
            sock.close()
            return
        with self._cond:
            if self._closed:
                sock.close()
                return
            self._ready.append((sock, addr))
            self._cond.notify()
        self._wake_w.send(b"x")

    def _watch(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._sock, selectors.EVENT_READ)
        sel.register(self._stop_r, selectors.EVENT_READ)
        idle: OrderedDict[socket.socket, tuple[float, Any]] = OrderedDict()  # oldest first
        said = -1e9

        def drop(s: socket.socket) -> None:
            idle.pop(s, None)
            try:
                sel.unregister(s)
            except (KeyError, ValueError, OSError):
                pass

        try:
            while not self._closed:
                timeout = 1.0
                if idle:
                    timeout = max(0.0, min(1.0, next(iter(idle.values()))[0] - time.monotonic()))
                for key, _ in sel.select(timeout):
                    obj = key.fileobj
                    if obj is self._stop_r:
                        return
                    if obj is self._sock:
                        for _ in range(64):  # a few per round: the held ones are served too
                            try:
                                s, addr = self._sock.accept()
                            except BlockingIOError:
                                break
                            except OSError as e:
                                if self._closed or e.errno not in _TRANSIENT_ACCEPT:
                                    return
                                if time.monotonic() - said > 60:  # said once a minute at most
                                    said = time.monotonic()
                                    self._log(f"accept failed ({e.strerror or e}): waiting, the server goes on")
                                time.sleep(0.1)
                                break
                            if len(idle) >= self._max_idle:
                                oldest = next(iter(idle))
                                drop(oldest)
                                oldest.close()
                            idle[s] = (time.monotonic() + self._idle_timeout, addr)
                            sel.register(s, selectors.EVENT_READ)
                    elif isinstance(obj, socket.socket) and obj in idle:
                        # its first bytes (or its end): on to the server
                        _, addr = idle[obj]
                        drop(obj)
                        self._hand_on(obj, addr)
                now = time.monotonic()
                while idle and next(iter(idle.values()))[0] <= now:  # silent too long
                    s = next(iter(idle))
                    drop(s)
                    s.close()
        finally:
            for s in list(idle):
                drop(s)
                s.close()
            sel.close()
            self._sock.close()


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
    out as they are read (no copy of every line). ``peer_closed`` is True once the connection
    is closed: the engine then drops what it has queued, as nobody reads its answers."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._text = ""
        self._pos = 0
        self.peer_closed = False

    def readline(self, size: int = -1) -> str:
        """The next line (at most ``size`` characters when ``size`` >= 0: a longer line comes
        in pieces, as ``io`` streams give it)."""
        from websockets.exceptions import ConnectionClosed

        while self._pos >= len(self._text):
            try:
                message = self._connection.recv()
            except ConnectionClosed:
                self.peer_closed = True
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


class _OneLineLog(logging.Handler):
    """A ``logging`` handler that hands each record of the ``websockets`` library (warnings and
    errors: a keepalive ping that failed, a handler that raised) to the server's ``log`` as one
    line, the exception as ``type: message`` instead of its traceback."""

    def __init__(self, log: Callable[[str], None]) -> None:
        super().__init__(logging.WARNING)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:
                msg = f"{msg}: {type(exc).__name__}: {exc}"
            self._log("websocket: " + " ".join(msg.split()))
        except Exception:  # noqa: BLE001 - logging must not raise into the library
            self.handleError(record)


def _library_logger(log: Callable[[str], None]) -> logging.Logger:
    """A logger of its own for one server's ``websockets`` records (not in logging's tree, so
    nothing propagates to the root logger's handlers), through :class:`_OneLineLog`."""
    logger = logging.Logger("takzero.tei.websocket", logging.WARNING)
    logger.addHandler(_OneLineLog(log))
    logger.propagate = False
    return logger


def start_server(
    make_engine: Callable[[Callable[[str], None]], LineEngine],
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    log: Callable[[str], None] = _stderr,
    max_connections: int = MAX_CONNECTIONS,
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
    keepalive: tuple[float, float] = KEEPALIVE,
) -> Any:
    """Listen on ``host:port`` and return the ``websockets`` server, not yet serving: call its
    ``serve_forever()`` (blocks; in a thread for tests) and ``shutdown()`` to stop. Each
    connection gets ``make_engine(out)``, whose ``run`` reads the connection's lines; an engine
    that cannot be built is reported to the client as ``info string cannot start: ...`` and the
    connection closed. At most ``max_connections`` (>= 1) connections are served at once; one
    more is told ``info string the server is full ...`` and closed with code 1013. Sockets are
    counted from ``accept`` on (:class:`_Gate`): besides those served, at most
    ``max_connections`` more in their opening handshake (``handshake_timeout`` seconds each;
    a new socket pushes the oldest waiting one out) or being refused, so idle or half-open
    sockets cost neither threads nor the service of good clients. Raises ImportError (no
    ``websockets``), OSError (the address cannot be bound, e.g. the port is taken) and
    ValueError (``max_connections`` < 1).

    ``keepalive``: (ping interval, ping timeout) in seconds: a client that answers no ping
    within the timeout (one that stopped reading) is dropped; the ``websockets`` library's
    records of it (and of any failed handler) reach ``log`` as one line each, never as a
    traceback."""
    from websockets.sync.server import serve

    if max_connections < 1:
        raise ValueError(f"max_connections must be >= 1, got {max_connections}")
    count = [0]
    lock = threading.Lock()
    gate = _Gate(max_connections, max_connections)

    def handler(connection: Any) -> None:
        with lock:
            count[0] += 1
            n = count[0]
        who = connection.remote_address
        out = _sender(connection)
        if not gate.serve(connection.socket):
            log(f"connection {n} from {who[0]}:{who[1]} refused: {max_connections} connections already")
            out(f"info string the server is full ({max_connections} connections, its most): "
                "try again later")
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
            gate.unserve()

    # Any: it gets a stand-in socket and a test hook (gate) beyond what websockets' Server declares
    server: Any = serve(handler, host, port, compression=None, max_size=MAX_MESSAGE,
                        open_timeout=handshake_timeout, ping_interval=keepalive[0],
                        ping_timeout=keepalive[1], logger=_library_logger(log))
    inner = server.handler

    def sock_handler(sock: socket.socket, addr: Any) -> None:
        try:
            inner(sock, addr)
        finally:
            gate.done(sock)

    server.handler = sock_handler
    server.socket = _GatedListener(server.socket, gate, log, handshake_timeout, MAX_IDLE)
    server.gate = gate  # for tests: gate.held()
    return server


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
