"""The playtak bot's searches: the move's time budget and the player's search in a worker thread.

* **Clock**: the time left is the last clock update minus the time since it arrived. A move gets
  the TEI engine's budget (:meth:`~takzero.protocols.tei.lines.SearchLimits.budget_seconds`:
  about 1/20 of the time left plus 3/4 of the increment) of the time left less ``reserve_s``
  (latency); at a hard deadline (at most half of that time) the bot stops the search and sends
  the best move it reported so far, or a one-ply tactical move (the greedy baseline), at once,
  without waiting for the search (:func:`move_budget`). So a move never takes more than half of
  the time left.
* **The player in its own thread** (:class:`MoveSearch`): the bot's loop never calls the player;
  resets and the plies it is told wait for the next search, which makes them in its thread,
  holding the player, so a slow call (a kernel compiling, a chunk of simulations that overruns)
  delays a search, never a move; a new search waits for a stopped one to end.
"""

from __future__ import annotations

import queue
import threading

from takzero.game.core import WHITE
from takzero.game.position import Position
from takzero.players.base import BasePlayer, PlayerMove
from takzero.protocols.tei.lines import SearchLimits
from takzero.search.limit import Limit


def move_budget(remaining_s: float, increment_s: float, reserve_s: float) -> tuple[float, float]:
    """(soft, hard) seconds for a move with ``remaining_s`` on the clock: ``soft`` is the search's
    time limit, the TEI engine's budget (:meth:`SearchLimits.budget_seconds`) of the time left
    less ``reserve_s``; ``hard`` is when the bot sends a move whatever the search is doing: at
    most half of the time left less the reserve, and at least ``soft``. (0, 0) when nothing is
    left beyond the reserve (play at once)."""
    avail = remaining_s - reserve_s
    if avail <= 0.01:
        return 0.0, 0.0
    limits = SearchLimits(wtime=int(avail * 1000), winc=int(max(0.0, increment_s) * 1000))
    soft = limits.budget_seconds(WHITE) or 0.0
    hard = min(avail / 2, max(1.5 * soft, soft + 0.1))
    return min(soft, hard), hard


class MoveSearch:
    """The player's searches, one at a time, each in a worker thread that posts
    ``("progress", token, PlayerMove)`` and finally ``("answer", token, PlayerMove | Exception)``
    on ``events``; tokens count from 1. ``nodes``: a cap on a move's simulations (None: the clock
    alone decides). The player calls that wait (``new_game``, ``observe``) are made by the next
    search, in order, in its thread."""

    def __init__(self, player: BasePlayer, events: queue.Queue, nodes: int | None = None) -> None:
        self.player = player
        self.nodes = nodes
        self._events = events
        self._player_lock = threading.Lock()
        # ("reset", size, half_komi, seed) and ("observe", position, code), made by the next search
        self._todo: list[tuple] = []
        self._todo_lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._stop = threading.Event()
        self._token = 0

    def new_game(self, size: int, half_komi: int, seed: int) -> None:
        """The player starts a game afresh at its next search (calls waiting before are dropped)."""
        with self._todo_lock:
            self._todo = [("reset", size, half_komi, seed)]

    def observe(self, position: Position, code: int) -> None:
        """Tell the player, at its next search, that ``code`` was played in ``position``."""
        with self._todo_lock:
            self._todo.append(("observe", position, code))

    def warm_up(self, position: Position, half_komi: int, seed: int) -> None:
        """Two tiny searches from ``position`` (a start position) and a ply after it, so that the
        search, tree reuse and a second search have compiled before any clock runs. Raises
        ValueError if the player cannot play it."""
        size = position.size
        with self._player_lock:
            self.player.reset(size, half_komi, seed=seed)
            code = self.player.think(position, Limit(nodes=8)).code
            self.player.observe(position, code)
            self.player.think(position.play(code), Limit(nodes=8))

    def busy(self) -> bool:
        """Whether a search thread is still running (e.g. a stopped one ending its chunk)."""
        return self._worker is not None and self._worker.is_alive()

    def start(self, position: Position, seconds: float) -> int:
        """Search ``position`` for at most ``seconds`` (and ``nodes``) in a new thread; returns
        its token. Call only when not :meth:`busy`."""
        self._token += 1
        self._stop = threading.Event()
        self._worker = threading.Thread(
            target=self._search, args=(self._token, position, seconds, self._stop),
            daemon=True, name="playtak-search",
        )
        self._worker.start()
        return self._token

    def cancel(self) -> None:
        """Ask the running search to stop (its answer still comes, for a token no longer wanted)."""
        self._stop.set()

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the search thread to end; True when it has."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout=timeout)
        return not self.busy()

    def _catch_up_player(self) -> None:
        with self._todo_lock:
            todo, self._todo = self._todo, []
        for call in todo:
            if call[0] == "reset":
                self.player.reset(call[1], call[2], seed=call[3])
            else:
                self.player.observe(call[1], call[2])

    def _search(self, token: int, position: Position, seconds: float, stop: threading.Event) -> None:
        def progress(pm: PlayerMove, _nodes: int) -> None:
            self._events.put(("progress", token, pm))

        try:
            with self._player_lock:
                self._catch_up_player()
                answer: PlayerMove | Exception = self.player.think(
                    position, Limit(nodes=self.nodes, seconds=seconds, stop=stop), on_progress=progress
                )
        except Exception as e:  # noqa: BLE001 - reported to the loop, which plays a fallback
            answer = e
        self._events.put(("answer", token, answer))


__all__ = ["MoveSearch", "move_budget"]
