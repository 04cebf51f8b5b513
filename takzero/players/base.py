"""The player interface: what matches, the play CLI and the TEI engine need from a player.

The interface (:class:`Player`) is deliberately small:

* ``name`` -- a label for logs, PTN tags and match tables;
* ``reset(size, half_komi, seed=None)`` -- a new game starts on a ``size`` board with that komi (in
  half points); a ``seed`` (when given) restarts the player's random stream, so a game played from
  the same seeds is the same game;
* ``choose(position) -> PlayerMove`` -- the move to play in ``position`` (a legal move code plus
  optional evaluation: value, win/draw/loss, nodes searched, principal variation). The player must
  not change ``position`` (the game loop hands it a copy anyway);
* ``observe(position, move)`` -- called by the game loop after every ply of the game (both
  players' plies, opening plies included) with the position before the move and the move code, so
  a search player can keep its tree between moves. Players that need nothing do nothing.

:class:`BasePlayer` adds the shared plumbing and ``think(position, limit, on_progress)``, the
anytime search under a :class:`~takzero.search.limit.Limit` (nodes, seconds or a clock, a stop
flag) that the TEI engine, the playtak bot and the play CLI use. Its default is one ``choose``; a
searching player overrides it with its own clock (the UCT baseline: searches of growing size; the
network player: the search front end, ``takzero.search.driver``), so callers never need to know
which kind of player they hold.

Batched matches: a player whose ``batchable`` is True gives ``batched(num_games, seed,
sampling_plies)``, an object of the :class:`BatchSearch` protocol that searches every game of a
match where it is to move at once (the network player: one network call per step for all of
them). Game loops ask ``batchable``, never the player's class.

Values everywhere are from the point of view of the player to move: win +1, draw 0, loss -1.
"""

from __future__ import annotations

import numbers
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from takzero.game.position import Position
from takzero.search.limit import Limit


@dataclass(frozen=True)
class PlayerMove:
    """A player's answer: the move and what the player knows about the position.

    ``code``: the move code (``takzero.game.core`` encoding), legal in the position asked about.
    ``value``: expected outcome for the side to move, -1 (loss) .. +1 (win); None if unknown.
    ``wdl``: (win, draw, loss) probabilities for the side to move; None if unknown.
    ``nodes``: simulations / positions searched for this move (0 if none).
    ``pv``: principal variation, move codes starting with ``code`` (may be empty).
    ``info``: anything else worth logging (e.g. ``{"kind": "win"}`` for the greedy player).
    ``lines``: the best root moves as answers of their own (``code``, ``value``, ``wdl``, root
    visits as ``nodes``, ``pv``), best first, when ``think`` was asked for more than one line
    (TEI ``MultiPV``); empty otherwise.
    """

    code: int
    value: float | None = None
    wdl: tuple[float, float, float] | None = None
    nodes: int = 0
    pv: tuple[int, ...] = ()
    info: Mapping[str, object] = field(default_factory=dict)
    lines: tuple[PlayerMove, ...] = ()


#: ``on_progress(answer, nodes_so_far)``: called by :meth:`BasePlayer.think` during a search.
Progress = Callable[[PlayerMove, int], None]


@runtime_checkable
class Player(Protocol):
    """What a game loop, the play CLI and the TEI engine need from a player (see the module
    doc)."""

    name: str

    def reset(self, size: int, half_komi: int, seed: int | None = None) -> None:
        """A new game on a ``size`` board with ``half_komi``; ``seed`` restarts the randomness."""
        ...

    def choose(self, position: Position) -> PlayerMove:
        """The move to play in ``position`` (not over); must not modify ``position``."""
        ...

    def observe(self, position: Position, move: int) -> None:
        """``move`` was played in ``position`` (by either side); for tree reuse. May do nothing."""
        ...


class BatchSearch(Protocol):
    """Many games of one player searched together (``Player.batched``): slot ``g`` is game ``g``
    of the match."""

    name: str

    def reset(self, g: int, position: Position) -> None:
        """Game ``g`` is at ``position`` (a fresh tree)."""
        ...

    def observe(self, g: int, position: Position, move: int) -> None:
        """``move`` was played in ``position`` of game ``g`` (by either side)."""
        ...

    def choose_many(self, games: Sequence[int], positions: Sequence[Position],
                    plies: Sequence[int], rng: np.random.Generator | None = None,
                    ) -> dict[int, PlayerMove]:
        """The move of each game of ``games`` (at ``positions``; ``plies`` since its opening),
        searched together."""
        ...


class PlayerFailed(RuntimeError):
    """A player that cannot answer any more: an external engine (``tei:``,
    ``takzero.protocols.tei.player``) that did not start, refused the board size, crashed, hung
    or played an illegal move. The match it plays is void (a yardstick that fails measures
    nothing): callers record the baseline as failed. ``reason``: short ('crash', 'timeout',
    'protocol', 'illegal move', 'refused'); the message says more."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def close_player(player: object) -> None:
    """Stop what ``player`` started: its ``close()`` when it has one (a ``tei:`` engine's
    process, ``takzero.protocols.tei.player.EnginePlayer``); nothing for an in-process player
    or None. Callers of a baseline call it in a ``finally``."""
    close = getattr(player, "close", None)
    if close is not None:
        close()


def is_integer(x: object) -> bool:
    """True for an integer (Python or numpy), False for a bool or anything else: the check of
    every integer setting of a player."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def as_player_move(answer: PlayerMove | int) -> PlayerMove:
    """Wrap a bare move code (what a minimal player may return) as a :class:`PlayerMove`."""
    if isinstance(answer, PlayerMove):
        return answer
    return PlayerMove(int(answer))


class BasePlayer:
    """Shared plumbing: a name, a seeded ``numpy`` Generator, no-op :meth:`observe`, and a
    :meth:`think` that is one :meth:`choose` unless a searching player overrides it.

    ``seed`` (int) seeds the player's random stream; :meth:`reset` with a seed restarts it. Each
    compiled search draws its own 31-bit seed from this stream, so a player is deterministic for a
    given seed and sequence of positions.
    """

    name = "base"

    def __init__(self, seed: int = 0, name: str | None = None) -> None:
        if name is not None:
            self.name = name
        self._rng = np.random.default_rng(seed)
        self.size = 0
        self.half_komi = 0

    def reset(self, size: int, half_komi: int, seed: int | None = None) -> None:
        """A new game on a ``size`` board with ``half_komi``; ``seed`` restarts the randomness."""
        self.size = int(size)
        self.half_komi = int(half_komi)
        if seed is not None:
            self._rng = np.random.default_rng(seed)

    def observe(self, position: Position, move: int) -> None:  # noqa: B027 - optional hook
        """``move`` was played in ``position``; nothing to do for a player without a tree."""
        return None

    def choose(self, position: Position) -> PlayerMove:
        """The move to play in ``position``; subclasses implement it."""
        raise NotImplementedError

    #: The most nodes one search tree may hold (TEI ``TreeNodes``); None: the player has no tree.
    tree_nodes: int | None = None

    def set_tree_nodes(self, nodes: int) -> None:
        """Bound the search tree to ``nodes`` nodes (memory); players without a tree ignore it."""
        return None

    @property
    def batchable(self) -> bool:
        """True if :meth:`batched` gives a search of many games at once."""
        return False

    def batched(self, num_games: int, seed: int = 0, sampling_plies: int = 0) -> BatchSearch:
        """A :class:`BatchSearch` over ``num_games`` games (only when ``batchable``). Raises
        ValueError for a player that is not batchable."""
        raise ValueError(f"{self.name} is not batchable: it is asked one game at a time")

    def think(
        self,
        position: Position,
        limit: Limit | None = None,
        on_progress: Progress | None = None,
        multipv: int = 1,
    ) -> PlayerMove:
        """An anytime search of ``position`` under ``limit`` (:class:`Limit`: nodes
        (simulations), seconds or a clock, ended early when its ``stop`` is set; None: the
        player's own default); ``on_progress(answer, nodes)`` is called during the search by
        players that report progress. The returned answer's ``nodes`` is the number searched for
        it in all. ``multipv`` > 1 asks a searching player for that many best root moves in
        ``PlayerMove.lines``.

        This default (a player that does not search: random, greedy) is one :meth:`choose`,
        whatever the limits, without progress reports. Raises ValueError on a finished position.
        """
        return self.choose(position)

    def _next_seed(self) -> int:
        return int(self._rng.integers(0, 2**31 - 1))

    @staticmethod
    def _check_open(position: Position) -> None:
        if position.is_over:
            raise ValueError(f"the game is over ({position.result}); there is no move to choose")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


@contextmanager
def stop_flag(
    stop: threading.Event | None, deadline: float | None = None, poll: float = 0.002
) -> Iterator[np.ndarray]:
    """A (1,) uint8 array for a compiled search to poll (non-zero: stop now), set by a watcher
    thread once ``stop`` is set or ``time.perf_counter()`` passes ``deadline`` (checked every
    ``poll`` seconds). Compiled code cannot wait on a ``threading.Event``; a ``nogil`` kernel that
    reads this array stops within one of its iterations. Without ``stop`` and ``deadline`` the
    array stays zero and no thread runs."""
    flag = np.zeros(1, dtype=np.uint8)
    if stop is None and deadline is None:
        yield flag
        return

    def fired() -> bool:
        return (stop is not None and stop.is_set()) or (
            deadline is not None and time.perf_counter() >= deadline
        )

    if fired():
        flag[0] = 1
    done = threading.Event()

    def watch() -> None:
        while not done.wait(poll):
            if fired():
                flag[0] = 1
                return

    watcher = threading.Thread(target=watch, daemon=True, name="stop-flag")
    watcher.start()
    try:
        yield flag
    finally:
        done.set()
        watcher.join()


__all__ = [
    "BasePlayer",
    "BatchSearch",
    "Limit",
    "Player",
    "PlayerFailed",
    "PlayerMove",
    "Progress",
    "as_player_move",
    "close_player",
    "is_integer",
    "stop_flag",
]
