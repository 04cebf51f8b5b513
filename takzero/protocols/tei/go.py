"""One TEI ``go`` as an object, from the search it starts to its one ``bestmove`` (as
python-chess's ``BaseCommand`` is one command in flight): its limits (nodes, the time budget less
what the ``go`` waited), its stop flag and the backstop timer that sets it, its worker thread, its
``info`` lines and its ``bestmove``.

The session (:class:`takzero.protocols.tei.engine.TEIEngine`) makes a :class:`GoCommand` for each
``go`` on an unfinished position, :meth:`GoCommand.start` s it, :meth:`GoCommand.stop` s it for a
``stop``, a ``quit``, the end of the input or a command during ``go infinite``, and
:meth:`GoCommand.wait` s for its ``bestmove`` before the next command that changes the game.
Whatever happens in the search, the command answers exactly one legal ``bestmove``: a failed
player is said with ``info string`` and the first legal move played.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from takzero.game.position import Position
from takzero.players.base import PlayerMove
from takzero.protocols.tei.lines import SearchLimits, clip, format_bestmove, format_info
from takzero.protocols.tei.options import TREE_BYTES_PER_NODE
from takzero.search.limit import Limit

__all__ = ["GoCommand"]


class GoCommand:
    """One ``go``: a search of ``position`` by ``player`` on a worker thread, its ``info`` lines
    and exactly one ``bestmove``.

    Args:
        player: the player that searches (its ``think`` keeps the clock).
        position: the position to search (the command's own copy).
        limits: the parsed ``go`` (:func:`takzero.protocols.tei.lines.parse_go`).
        number: the ``go``'s number in the reader's count (None: a line handled directly), which
            a later ``stop``/``quit`` compares with its own to know whether it stops this one.
        t_go: when the ``go`` was read (``time.perf_counter``); the time since comes out of the
            budget when the search starts.
        move_overhead: ms kept back from every time budget (``MoveOverhead``).
        nodes_default: simulations when ``go`` gives no limit (``Nodes``).
        multipv: how many best moves ``info`` reports (``MultiPV``).
        tree_nodes: the tree's node budget (``TreeNodes``), named when the tree fills up.
        send: prints one protocol line (thread-safe).
        info: prints one ``info string``.
    """

    def __init__(
        self,
        player: Any,
        position: Position,
        limits: SearchLimits,
        *,
        number: int | None,
        t_go: float | None,
        move_overhead: int,
        nodes_default: int | None,
        multipv: int,
        tree_nodes: int,
        send: Callable[[str], None],
        info: Callable[[str], None],
    ) -> None:
        self.number = number
        self.infinite = limits.infinite
        self.position = position
        seconds = limits.budget_seconds(position.side_to_move, move_overhead)
        nodes = limits.nodes
        if nodes is None and seconds is None and not limits.infinite:
            nodes = nodes_default
        self.nodes = nodes
        self.seconds = seconds
        self._player = player
        self._t_go = t_go
        self._multipv = multipv
        self._tree_nodes = tree_nodes
        self._send = send
        self._info = info
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        """Start the search on its worker thread."""
        self._thread.start()

    def stop(self) -> None:
        """Set the stop flag: the search ends within one simulation (or one network call) and
        answers what it found; a command not started yet starts stopped and answers at once."""
        self._stop.set()

    def wait(self) -> None:
        """Wait until the ``bestmove`` is sent."""
        self._thread.join()

    def _report(self, pm: PlayerMove, seconds: float, total: int) -> None:
        """The ``info`` lines of an answer: one, or one per line of ``pm.lines`` with MultiPV."""
        if self._multipv > 1 and pm.lines:
            for k, line in enumerate(pm.lines[: self._multipv], start=1):
                self._send(format_info(self.position, line, seconds, total, multipv=k))
        else:
            self._send(format_info(self.position, pm, seconds, total))

    def _run(self) -> None:
        """The worker thread: one search, its ``info`` lines and exactly one ``bestmove``. With
        ``infinite`` (``go infinite``) the ``bestmove`` waits for ``stop`` (or ``quit``) even when
        the player is done sooner (a player that does not search, a proven position), as UCI
        asks. The time since the ``go`` was read comes out of the budget."""
        pos, stop, infinite, nodes = self.position, self._stop, self.infinite, self.nodes
        t0 = time.perf_counter()
        seconds = self.seconds
        if seconds is not None and self._t_go is not None:
            seconds = max(0.005, seconds - (t0 - self._t_go))
        reported: list[PlayerMove] = []
        move: str | None = None
        timer = None
        if seconds is not None:
            # Backstop: the players keep ``seconds`` themselves (checked every simulation); this
            # stops whatever runs past a quarter more (e.g. the tinue checks after a search).
            # Still safe on a clock: the budget is at most half of the time left.
            timer = threading.Timer(1.25 * seconds, stop.set)
            timer.daemon = True
            timer.start()

        def progress(pm: PlayerMove, total: int) -> None:
            reported[:] = [pm]
            self._report(pm, time.perf_counter() - t0, total)

        try:
            # ``multipv`` only when asked for, so players whose ``think`` predates it still play.
            extra = {"multipv": self._multipv} if self._multipv > 1 else {}
            limit = Limit(nodes=nodes, seconds=seconds, stop=stop, infinite=infinite)
            pm = self._player.think(pos, limit, on_progress=progress, **extra)
            if not reported or reported[0] is not pm:
                self._report(pm, time.perf_counter() - t0, pm.nodes)
            if pm.info.get("tree_full"):
                self._info(f"the search tree is full ({self._tree_nodes} nodes, TreeNodes): the "
                           "search stopped there; raise TreeNodes for longer searches")
            if int(pm.code) not in {int(c) for c in pos.legal_move_codes()}:
                raise ValueError(f"the player answered an illegal move code {pm.code}")
            move = pos.ptn(pm.code)
        except MemoryError as e:  # the tree (or the search) did not fit: said as an error
            gib = self._tree_nodes * TREE_BYTES_PER_NODE / 2**30
            self._info(f"error: out of memory, no search ({clip(str(e) or 'MemoryError', 200)}; "
                       f"TreeNodes {self._tree_nodes} may take up to {gib:.1f} GiB): lower "
                       "TreeNodes; answering the first legal move, unsearched")
        except Exception as e:  # noqa: BLE001 - answer anyway: a legal move beats silence
            self._info(f"search failed ({e}); playing the first legal move")
        finally:
            if timer is not None:
                timer.cancel()
            if infinite:
                stop.wait()
            if move is None:
                move = pos.ptn(int(pos.legal_move_codes()[0]))
            self._send(format_bestmove(move))
