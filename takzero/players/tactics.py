"""Tinuë checks at a searching player's root: play a proven forced road at once, and never play
a move after which the opponent has one while a move without one exists.

The strongest Tak engines pair their search with a dedicated prover for exactly this (Topaz: a
proof-number tinuë solver; Tiltak: a tinuë proof search; Taktician: df-pn): a forced road is
often a few plies deep but narrow, and a search that spreads its visits by the priors does not
find it in time. Here the prover is :func:`takzero.game.tinue.prove_tinue` (df-pn under the tak
move restriction: the attacker only wins at once or makes tak), run with a small node budget:

1. before searching, on the root for the side to move: a WIN is played at once
   (:func:`proven_win`; value 1, the prover's principal variation, ``info["mate"]`` = plies to
   the road);
2. after searching, on the position after the chosen move, for the opponent
   (:func:`avoid_tinue`): while the opponent has a proven tinuë after it, the next move of the
   search's ranking is tried instead (the most visited first), down the whole ranking if need
   be. A move whose check ran out of budget (UNKNOWN) counts as safe. When every move is lost,
   the search's choice stays (a lost position: every move loses).

Budgets are node visits of the prover (deterministic, unlike seconds): ``max_nodes`` per call.
A move costs two calls when its search's choice is safe (nearly always); a refuted choice costs
one call per alternative tried, at most one per legal move (a lost position).

The flat-endgame checks do the same for the end of the game by count, with the exact search of
:mod:`takzero.search.flat_endgame` (``flat_endgame_nodes`` node visits, 0: off), only where the
flat count can end the game within :data:`FLAT_ENDGAME_PLIES` plies (``is_flat_endgame``):

1. before searching, :func:`flat_endgame_root` solves the root; a proved win is played at once
   (:func:`flat_endgame_win`; value 1, ``info["flat_endgame"]`` = ``"win"``);
2. after searching, :func:`avoid_flat_loss`: the searched move is solved too (one ply less); when
   it is proved worse than what the root can force (a loss or a draw where the root forces a
   draw or better), the root's proved move replaces it; when the root forces nothing but is not
   proved lost, a searched move proved lost is replaced by the next move of the search's ranking
   not proved lost. ``info["flat_endgame"]`` reports the root's result (``win``, ``draw``,
   ``loss`` or ``open``) on every answer of such a position.

A flat-endgame move costs one root search and, unless the root is proved lost, one of the
searched move (each at most ``flat_endgame_nodes`` node visits). A timed move's checks also end
by its deadline (``deadline``; ``NetworkSearch.think`` gives each a share of the move's budget,
``FLAT_ENDGAME_TIME_SHARE``), and none starts once ``stop`` is set.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from takzero.game.position import Position
from takzero.game.tinue import DEFAULT_TINUE_NODES, MAX_NODES, WIN, prove_tinue
from takzero.players.base import PlayerMove, Progress, is_integer
from takzero.search.flat_endgame import DEFAULT_PLIES as FLAT_ENDGAME_PLIES
from takzero.search.flat_endgame import MAX_NODES as MAX_FLAT_ENDGAME_NODES
from takzero.search.flat_endgame import FlatEndgameResult, is_flat_endgame, solve


def check_tinue_nodes(max_nodes: int) -> int:
    """``max_nodes`` as an int; raises ValueError unless it is an integer in
    0..``takzero.game.tinue.MAX_NODES`` (0: off)."""
    if not is_integer(max_nodes) or not 0 <= max_nodes <= MAX_NODES:
        raise ValueError(f"tinue_nodes must be an integer in 0..{MAX_NODES} (0: off), got {max_nodes!r}")
    return int(max_nodes)


def proven_win(position: Position, max_nodes: int) -> PlayerMove | None:
    """The side to move's proven forced road as an answer, or None (no proof within
    ``max_nodes`` prover nodes, or ``max_nodes`` is 0).

    The answer: the prover's first move, ``value`` 1, ``wdl`` (1, 0, 0), ``nodes`` 0 (no search
    simulations), ``pv`` the forced line, ``info``: ``tinue`` = ``"win"``, ``mate`` = plies of the
    proof's longest line (the game ends by then whatever the defender does), ``prover_nodes``.
    Raises ValueError for a finished position."""
    if max_nodes <= 0:
        return None
    result = prove_tinue(position, max_nodes=max_nodes)
    if result.verdict != WIN or result.move_code is None:
        return None
    plies = int(result.depth) if result.depth is not None else len(result.pv_codes)
    return PlayerMove(
        int(result.move_code),
        value=1.0,
        wdl=(1.0, 0.0, 0.0),
        nodes=0,
        pv=tuple(int(c) for c in result.pv_codes) or (int(result.move_code),),
        info={"tinue": "win", "mate": max(1, plies), "prover_nodes": result.nodes},
    )


def answer_proven_win(
    position: Position,
    max_nodes: int,
    nodes: int | None,
    seconds: float | None,
    stop: threading.Event | None,
    on_progress: Progress | None,
) -> PlayerMove | None:
    """:func:`proven_win` as a searching player's ``think`` answers it: reported once through
    ``on_progress`` (with 0 nodes) and, when the search has no limit but ``stop`` (TEI ``go
    infinite``), held until ``stop`` is set. None when there is no proof."""
    win = proven_win(position, max_nodes)
    if win is None:
        return None
    if on_progress is not None:
        on_progress(win, 0)
    if nodes is None and seconds is None and stop is not None:
        stop.wait()  # no limits (go infinite): answer when told to stop
    return win


def opponent_wins_after(position: Position, code: int, max_nodes: int) -> bool:
    """True if, after ``code`` is played in ``position``, the opponent has a proven forced road
    (a road in one included) within ``max_nodes`` prover nodes, or if the move itself ends the
    game with the opponent's win (e.g. a spread that completes only the opponent's road)."""
    after = position.play(int(code))
    if after.is_over:
        return after.result.winner == 1 - position.side_to_move
    return prove_tinue(after, max_nodes=max_nodes).verdict == WIN


def avoid_tinue(
    position: Position,
    answer: PlayerMove,
    ranked: Sequence[int],
    max_nodes: int,
    pv_of: Callable[[int], tuple[int, ...]] | None = None,
    stop: threading.Event | None = None,
) -> PlayerMove:
    """``answer`` unless its move lets the opponent force a road; then the first move of
    ``ranked`` (the search's order of preference, best first), then of the other legal moves in
    generation order, that does not. The replacement answer keeps the search's value and nodes, takes
    ``pv_of(move)`` (or just the move) as its PV, and lists the refuted moves in
    ``info["tinue_avoided"]``. When every move is refuted, ``answer`` with ``info["tinue_lost"]``.
    ``max_nodes`` 0: ``answer`` unchanged. Once ``stop`` is set (TEI ``stop``: answer now) the
    alternatives are no longer checked: the next one of the ranking is taken as it is, so a lost
    position with many moves cannot hold an answer up by one prover call per move."""
    if max_nodes <= 0 or not opponent_wins_after(position, answer.code, max_nodes):
        return answer
    refuted = [int(answer.code)]
    legal = [int(c) for c in position.legal_move_codes()]
    for code in itertools.chain(ranked, legal):
        code = int(code)
        if code in refuted:
            continue
        stopped = stop is not None and stop.is_set()
        if not stopped and opponent_wins_after(position, code, max_nodes):
            refuted.append(code)
            continue
        pv = pv_of(code) if pv_of is not None else (code,)
        info = {**dict(answer.info), "tinue_avoided": tuple(refuted)}
        return replace(answer, code=code, pv=pv or (code,), info=info)
    info = {**dict(answer.info), "tinue_lost": True}
    return replace(answer, info=info)


def check_flat_endgame_nodes(max_nodes: int) -> int:
    """``max_nodes`` as an int; raises ValueError unless it is an integer in
    0..``takzero.search.flat_endgame.MAX_NODES`` (0: off)."""
    if not is_integer(max_nodes) or not 0 <= max_nodes <= MAX_FLAT_ENDGAME_NODES:
        raise ValueError(
            f"flat_endgame_nodes must be an integer in 0..{MAX_FLAT_ENDGAME_NODES} (0: off), got {max_nodes!r}"
        )
    return int(max_nodes)


_RESULT_NAMES = {1: "win", 0: "draw", -1: "loss"}


def _seconds_left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (a ``time.perf_counter()`` time; None: no deadline, None)."""
    return None if deadline is None else deadline - time.perf_counter()


def flat_endgame_root(position: Position, max_nodes: int, plies: int = FLAT_ENDGAME_PLIES,
                      deadline: float | None = None) -> FlatEndgameResult | None:
    """The exact flat-endgame search of ``position`` (:func:`takzero.search.flat_endgame.solve`,
    ``plies`` deep, at most ``max_nodes`` node visits and, with a ``deadline`` (a
    ``time.perf_counter()`` time: a timed move's), the time left until it), or None when
    ``max_nodes`` is 0, the deadline has passed or the flat count cannot end the game within
    ``plies`` plies (``is_flat_endgame``). Raises ValueError for a finished position or a bad
    budget or depth."""
    max_nodes = check_flat_endgame_nodes(max_nodes)
    if max_nodes == 0 or not is_flat_endgame(position, plies):
        return None
    left = _seconds_left(deadline)
    if left is not None and left <= 0:
        return None
    return solve(position, plies, max_nodes=max_nodes, max_seconds=left)


def _flat_info(root: FlatEndgameResult) -> dict[str, object]:
    return {
        "flat_endgame": _RESULT_NAMES.get(root.value, "open") if root.value is not None else "open",
        "flat_endgame_depth": root.depth,
        "flat_endgame_nodes": root.nodes,
    }


def flat_endgame_win(root: FlatEndgameResult | None) -> PlayerMove | None:
    """The proved win of :func:`flat_endgame_root`'s answer ``root`` as a move, or None (no
    answer, or no proved win). The answer: the proved move, ``value`` 1, ``wdl`` (1, 0, 0),
    ``nodes`` 0 (no search simulations), ``info``: ``flat_endgame`` = ``"win"``,
    ``flat_endgame_depth`` (plies of the proof), ``flat_endgame_nodes`` (node visits)."""
    if root is None or root.lower != 1 or root.move_code is None:
        return None
    code = int(root.move_code)
    return PlayerMove(code, value=1.0, wdl=(1.0, 0.0, 0.0), nodes=0, pv=(code,), info=_flat_info(root))


def _move_bounds(position: Position, code: int, plies: int, max_nodes: int,
                 deadline: float | None = None) -> tuple[int, int]:
    """Proved (lower, upper) bounds of the result of ``code`` for the side to move of
    ``position``, the position after it searched ``plies`` deep (until ``deadline``, a
    ``time.perf_counter()`` time, at most; past it: (-1, 1), nothing proved)."""
    after = position.play(int(code))
    if after.is_over:
        w = after.result.winner
        v = 0 if w is None else (1 if w == position.side_to_move else -1)
        return v, v
    left = _seconds_left(deadline)
    if left is not None and left <= 0:
        return -1, 1
    child = solve(after, max(1, plies), max_nodes=max_nodes, max_seconds=left)
    return -child.upper, -child.lower


def avoid_flat_loss(
    position: Position,
    answer: PlayerMove,
    ranked: Sequence[int],
    root: FlatEndgameResult | None,
    max_nodes: int,
    pv_of: Callable[[int], tuple[int, ...]] | None = None,
    stop: threading.Event | None = None,
    deadline: float | None = None,
) -> PlayerMove:
    """``answer`` (the search's move in ``position``) checked against ``root``, the answer of
    :func:`flat_endgame_root` (None: ``answer`` unchanged): the searched move is solved
    :data:`FLAT_ENDGAME_PLIES` - 1 plies deep (``max_nodes`` node visits); when it is proved worse than the root's
    ``lower`` (>= 0), the root's proved move replaces it; when ``lower`` is -1 but the root is not
    proved lost and the move is proved lost, the first move of ``ranked`` (the search's order, best
    first), then of the other legal moves, not proved lost replaces it (once ``stop`` is set: the
    next one as it is). Once ``stop`` is set or ``deadline`` (a ``time.perf_counter()`` time: a
    timed move's end) has passed, no search starts: the searched move is kept unchecked (when
    its check has not run), an alternative taken unchecked; a search running then is cut at the
    deadline (a fraction of one of its passes later, :func:`~takzero.search.flat_endgame.solve`'s
    ``max_seconds``). A replacement keeps the search's value and nodes, takes ``pv_of(move)``
    (or just the move) as PV and lists the replaced moves in ``info["flat_endgame_avoided"]``.
    Every answer gets ``info["flat_endgame"]`` (the root's result: ``win``, ``draw``, ``loss`` or
    ``open``), ``flat_endgame_depth`` and ``flat_endgame_nodes``."""
    if root is None:
        return answer
    info = {**dict(answer.info), **_flat_info(root)}
    answer = replace(answer, info=info)
    if root.upper == -1:  # lost whatever is played
        return answer
    def out_of_time() -> bool:
        left = _seconds_left(deadline)
        return (stop is not None and stop.is_set()) or (left is not None and left <= 0)

    if out_of_time():
        return answer
    plies = FLAT_ENDGAME_PLIES - 1
    lower, upper = _move_bounds(position, answer.code, plies, max_nodes, deadline)
    goal = root.lower
    if goal >= 0 and root.move_code is not None:
        if upper >= goal:
            return answer
        code = int(root.move_code)
        pv = pv_of(code) if pv_of is not None else (code,)
        return replace(answer, code=code, pv=pv or (code,),
                       info={**info, "flat_endgame_avoided": (int(answer.code),)})
    if upper > -1:
        return answer
    refuted = [int(answer.code)]
    for code in itertools.chain(ranked, (int(c) for c in position.legal_move_codes())):
        code = int(code)
        if code in refuted:
            continue
        if not out_of_time() and _move_bounds(position, code, plies, max_nodes, deadline)[1] == -1:
            refuted.append(code)
            continue
        pv = pv_of(code) if pv_of is not None else (code,)
        return replace(answer, code=code, pv=pv or (code,), info={**info, "flat_endgame_avoided": tuple(refuted)})
    return answer


def ranked_by_visits(chosen: int, moves: Sequence[int] | np.ndarray,
                     visits: Sequence[int] | np.ndarray) -> list[int]:
    """``chosen`` first, then ``moves`` by visit count, most first (ties: the given order)."""
    order = sorted(range(len(moves)), key=lambda i: -int(visits[i]))
    return [int(chosen)] + [int(moves[i]) for i in order if int(moves[i]) != int(chosen)]


__all__ = [
    "DEFAULT_TINUE_NODES",
    "FLAT_ENDGAME_PLIES",
    "answer_proven_win",
    "avoid_flat_loss",
    "avoid_tinue",
    "check_flat_endgame_nodes",
    "check_tinue_nodes",
    "flat_endgame_root",
    "flat_endgame_win",
    "opponent_wins_after",
    "proven_win",
    "ranked_by_visits",
]
