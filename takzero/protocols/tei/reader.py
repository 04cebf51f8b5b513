"""The input of a TEI session: a reader thread (:func:`read_commands`) that reads the command lines
ahead into a bounded :class:`Inbox` while the session handles them in order, so that ``stop``,
``quit`` and the end of the input act as soon as they are read, even while earlier commands wait
for a search.

Bounds: a command line is read up to :data:`MAX_LINE` characters (a longer one is skipped whole,
said with ``info string``); at most :data:`MAX_QUEUED_LINES` lines and :data:`MAX_QUEUED_CHARS`
characters wait while a search runs (more are dropped, said once per run of drops; ``isready``,
``stop`` and ``quit`` are never dropped for room: a later search or position command waiting is
dropped in their place, :meth:`Inbox.put_control`, so a flood never costs a ``readyok``). Each ``go`` is
numbered as it is read, and a ``stop``, a ``quit``, a later ``go`` or the end of the input calls
the session's ``preempt`` with the number of ``go`` lines read before it (it stops the search of
any of them: one still queued answers at once, without searching, so a flood of queued ``go``
lines costs one search and a ``bestmove`` line each). ``quit`` and the end of the input
:meth:`Inbox.close` the inbox: the session ends once it has handled what was read before them (no
search and no warm-up among it); when the peer is gone (a closed WebSocket connection: the
stream's ``peer_closed``) everything still queued is dropped instead, unanswered.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TextIO

from takzero.protocols.tei.lines import clip

__all__ = ["CONTROL", "MAX_LINE", "MAX_QUEUED_CHARS", "MAX_QUEUED_LINES", "Inbox", "read_commands"]

#: The commands never dropped for room (``quit`` ends the reading and is added past the bound).
CONTROL = ("isready", "stop")

#: The longest command line read (characters; a ``position`` of a 10,000-ply game is about
#: 100,000): a longer line is skipped whole, with one ``info string``.
MAX_LINE = 1 << 18
#: Most command lines waiting while a search runs; more are dropped (one ``info string`` per
#: search). ``quit`` and the end of the input are never dropped.
MAX_QUEUED_LINES = 4096
#: Most characters of the command lines waiting while a search runs (as ``MAX_QUEUED_LINES``).
MAX_QUEUED_CHARS = 1 << 22


class Inbox:
    """The lines read ahead for :meth:`takzero.protocols.tei.engine.TEIEngine.run`: a queue of
    ``(go number, line)`` items, at most :data:`MAX_QUEUED_LINES` of them and
    :data:`MAX_QUEUED_CHARS` characters (``force`` adds past it: ``quit``, the end), whose
    :meth:`get` waits; None is the end of the input."""

    def __init__(self) -> None:
        self._items: deque = deque()
        self._chars = 0
        self._ready = threading.Condition()
        self._dropping = False
        self._closing = False  # a quit or the end of the input was read: no search, no warm-up
        self._hung_up = False  # the peer is gone: nothing more is handled

    @property
    def closing(self) -> bool:
        """True once a ``quit`` or the end of the input was read (or the peer is gone)."""
        return self._closing

    def close(self, drop: bool = False) -> None:
        """A ``quit`` or the end of the input was read: what waits is still handled (with
        ``drop``, for a peer that is gone, it is dropped unanswered, and so is anything put
        later); :meth:`get` gives None after it."""
        with self._ready:
            self._closing = True
            if drop:
                self._hung_up = True
                self._items.clear()
                self._chars = 0
            self._items.append(None)
            self._ready.notify()

    def put(self, item: tuple[int, str] | None, force: bool = False) -> bool:
        """Add ``item``; False (not added) when full and not ``force``; after
        ``close(drop=True)`` nothing is added (True: dropped on purpose, not for room)."""
        size = len(item[1]) if item is not None else 0
        with self._ready:
            if self._hung_up:
                return True
            full = len(self._items) >= MAX_QUEUED_LINES or self._chars + size > MAX_QUEUED_CHARS
            if full and not force:
                return False
            self._dropping = False
            self._items.append(item)
            self._chars += size
            self._ready.notify()
            return True

    def put_control(self, item: tuple[int, str]) -> str | None:
        """Add ``item``, a control line (:data:`CONTROL`, kept short by the caller), which is never
        dropped for room: when full, the newest other line waiting is dropped in its place and
        returned (None: none was). Control lines alone are bounded too: with ``2 *``
        :data:`MAX_QUEUED_LINES` lines waiting and none to drop (a flood of nothing else) the
        item itself is not added and returned."""
        with self._ready:
            if self._hung_up:
                return None
            evicted = None
            if len(self._items) >= MAX_QUEUED_LINES or self._chars + len(item[1]) > MAX_QUEUED_CHARS:
                for i in range(len(self._items) - 1, -1, -1):
                    other = self._items[i]
                    if other is not None and (other[1].split(maxsplit=1) or [""])[0] not in CONTROL:
                        del self._items[i]
                        self._chars -= len(other[1])
                        evicted = other[1]
                        break
                else:
                    if len(self._items) >= 2 * MAX_QUEUED_LINES:
                        return item[1]
            self._items.append(item)
            self._chars += len(item[1])
            self._ready.notify()
            return evicted

    def note_drop(self) -> bool:
        """True for the first drop of a run of drops (said once)."""
        with self._ready:
            first = not self._dropping
            self._dropping = True
            return first

    def get(self) -> tuple[int, str] | None:
        """The next item, waiting for it (None: the end; always None once the peer is gone)."""
        with self._ready:
            while not self._items:
                self._ready.wait()
            if self._hung_up:
                return None
            item = self._items.popleft()
            if item is not None:
                self._chars -= len(item[1])
            return item


def read_commands(
    stream: TextIO, inbox: Inbox, info: Callable[[str], None], preempt: Callable[[int], None]
) -> None:
    """The reader thread: lines of at most :data:`MAX_LINE` characters into ``inbox`` (each
    ``go`` numbered), a ``stop``/``quit``/``go``/end of input stopping the running search and
    every ``go`` read before it (``preempt(number of gos read before it)``); ``info`` says what
    was skipped or dropped; ends after ``quit`` or at the end (closing ``inbox``, dropping what
    waits when ``stream.peer_closed`` is true: the peer is gone)."""
    gos = 0
    try:
        while True:
            line = stream.readline(MAX_LINE + 1)
            if not line:
                break
            if len(line) > MAX_LINE or (len(line) == MAX_LINE + 1 and not line.endswith("\n")):
                skipped = len(line)
                while line and not line.endswith("\n"):  # the rest of the line, in pieces
                    line = stream.readline(MAX_LINE + 1)
                    skipped += len(line)
                info(f"a command line of {skipped} characters (over {MAX_LINE}) was skipped")
                continue
            words = line.split(maxsplit=1)
            cmd = words[0] if words else ""
            if cmd in ("go", "stop", "quit"):
                preempt(gos)  # a go read during a search or behind a queued go preempts them
            if cmd == "go":
                gos += 1
            if cmd == "quit":
                inbox.put((gos, line), force=True)
                inbox.close()
                return
            if cmd in CONTROL:  # never dropped for room (its words after the command are not read)
                dropped = inbox.put_control((gos, cmd + "\n"))
                if dropped is not None and inbox.note_drop():
                    info(f"over {MAX_QUEUED_LINES} commands wait for the search: "
                         f"'{clip(dropped.split(maxsplit=1)[0])}' dropped for '{cmd}'")
            elif not inbox.put((gos, line)):
                if inbox.note_drop():
                    info(f"over {MAX_QUEUED_LINES} commands wait for the search: "
                         f"'{clip(cmd)}' and later ones dropped")
    except (OSError, ValueError) as e:  # a broken or closed input ends it as its end does
        info(f"the input cannot be read ({clip(str(e), 200)}): ending")
    preempt(gos)
    inbox.close(drop=bool(getattr(stream, "peer_closed", False)))
