"""Tactics sets: positions with a known tactical answer, what counts as solving one, and the
solve rate of a batched network on them (the training run's tactics curve).

The sets are JSON lists (``docs/tactics.md``): the mined set shipped with the package,
:data:`TACTICS_FILE` (``takzero/data/tactics_mined.json``, made by ``scripts/mine_tactics.py``:
``win_in_1``, ``win_in_3``, ``win_in_5`` and ``avoid_loss`` on 4x4 to 6x6), the flat-endgame set
:data:`FLAT_TACTICS_FILE` (``takzero/data/tactics_flat.json``, made by
``scripts/mine_flat_endgames.py``: positions whose game must end by the flat count within a few
plies, a proved win as ``win_in_N`` and a proved draw-saving move as ``avoid_loss``, each
with ``theme`` ``flat_endgame``), and the given set ``tests/data/tactics.json`` (``win_in_1``).
``scripts/bench_tactics.py`` and the training evaluator (``evaluator.tactics_every``,
``takzero.pipeline.gating``) both judge a move with :func:`solves`, the one implementation of the rule:

* a win kind (``win_in_N``) is solved when the move wins: the game ends with the mover winning,
  or the exhaustive search (:func:`takzero.game.exhaustive.forced_win`, all moves of both sides)
  confirms that the mover wins by force after it within the plies left (the kind's plies minus
  one; for a move answered from a tinuë proof that fails that check, deeper, two plies at a time,
  up to the proof's length minus one, at most 12: df-pn may prove a longer win than the
  shortest). A check that runs out of its node budget counts as unsolved (None: unverified).
  Answers are cached by (TPS, move, plies), so a network that keeps its move costs no search;
* ``avoid_loss`` is solved when the move is one of the entry's ``expected`` (safe) moves.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from takzero.game.position import Position
from takzero.game.ptn import PTNError, read_bounded
from takzero.matches.games import NetSide
from takzero.players.base import PlayerMove

__all__ = [
    "FLAT_TACTICS_FILE",
    "TACTICS_FILE",
    "VERIFY_NODES",
    "WIN_KINDS",
    "TacticsScore",
    "kind_plies",
    "load_entries",
    "move_wins",
    "network_moves",
    "solve_rates",
    "solves",
]

#: The mined tactics set shipped with the package (package data, see pyproject.toml).
TACTICS_FILE = Path(__file__).resolve().parent.parent / "data" / "tactics_mined.json"
#: The flat-endgame tactics set shipped with the package (``scripts/mine_flat_endgames.py``).
FLAT_TACTICS_FILE = TACTICS_FILE.with_name("tactics_flat.json")
#: The kinds a move wins (the others: ``avoid_loss``).
WIN_KINDS = ("win_in_1", "win_in_3", "win_in_5")
#: Node budget of the exhaustive check of a winning move (positions visited).
VERIFY_NODES = 20_000_000
#: The deepest check of a move answered from a proof (plies; forced_win's limit).
MAX_VERIFY_PLIES = 12


def load_entries(paths: Sequence[str | Path], size: int | None = None) -> list[dict[str, Any]]:
    """The entries of the tactics files, each the file's object with ``set`` (the file's stem),
    ``position`` (a :class:`Position` from ``tps``, ``komi``, ``flats``, ``caps``) and
    ``expected`` (the moves that solve it, PTN: ``winning_moves`` when the file lists them, else
    ``expected_moves``), in file order; ``size``: only the entries of that board size. Raises
    OSError for an unreadable file, ValueError (naming the file and entry) for a malformed one or
    one that is not a regular file of at most 8 MiB (``takzero.game.ptn.read_bounded``)."""
    out = []
    for path in paths:
        try:
            data = json.loads(read_bounded(path).decode("utf-8"))
        except PTNError as err:  # a FIFO, a device, a folder or over 8 MiB: refused unread
            raise ValueError(str(err)) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{path}: not JSON: {err}") from None
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of positions")
        for i, e in enumerate(data):
            if not isinstance(e, dict):
                raise ValueError(f"{path}: entry {i}: expected an object (size, tps, kind, ...), got {e!r}")
            try:
                if size is not None and int(e["size"]) != size:
                    continue
                pos = Position.from_tps(e["tps"], komi=e.get("komi", 0.0), flats=e.get("flats"), caps=e.get("caps"))
                expected = e.get("winning_moves") or e.get("expected_moves") or []
                kind = e["kind"]
            except KeyError as err:
                raise ValueError(f"{path}: entry {i} ({e.get('id')}): missing key {err}") from None
            except (TypeError, ValueError) as err:
                raise ValueError(f"{path}: entry {i} ({e.get('id')}): {err}") from None
            if kind not in (*WIN_KINDS, "avoid_loss"):
                raise ValueError(f"{path}: entry {i} ({e.get('id')}): unknown kind {kind!r}")
            out.append({**e, "set": Path(path).stem, "position": pos, "expected": list(expected)})
    return out


def kind_plies(entry: dict[str, Any]) -> int:
    """Plies of a win kind: the entry's ``plies``, else the N of ``win_in_N``."""
    if entry.get("plies"):
        return int(entry["plies"])
    return int(entry["kind"].rsplit("_", 1)[1])


#: Answers of :func:`move_wins` by (TPS, move code, plies), with the node budget they had:
#: players and generations often play the same move, and a deep check can take seconds.
_VERIFIED: dict[tuple[str, int, int], tuple[bool | None, int]] = {}


def move_wins(entry: dict[str, Any], pos: Position, code: int, mate: int | None = None,
              max_nodes: int = VERIFY_NODES) -> bool | None:
    """Whether ``code`` wins ``entry``'s win kind in ``pos`` (see the module doc: the game ends
    with the mover winning, or :func:`~takzero.game.exhaustive.forced_win` within the kind's
    plies minus one; ``mate``, the plies of a tinuë proof the move was answered from: deeper
    checks up to ``mate`` minus one). None when a check ran out of ``max_nodes`` and none proved
    the win."""
    from takzero.game.exhaustive import forced_win

    mover = pos.side_to_move
    after = pos.play(int(code))
    if after.is_over:
        return after.result.winner == mover
    # iterative deepening from the kind's plies to the proof's (a win found at a smaller depth
    # is a win within the deeper one, and the deep searches are the costly ones)
    depths = [kind_plies(entry) - 1]
    if mate is not None:
        deepest = min(int(mate) - 1, MAX_VERIFY_PLIES)
        depths += list(range(depths[0] + 2, deepest, 2)) + ([deepest] if deepest > depths[0] else [])
    answer: bool | None = False
    for plies in depths:
        key = (pos.to_tps(), int(code), plies)
        won, budget = _VERIFIED.get(key, (None, 0))
        if won is None and max_nodes > budget:  # not checked yet, or out of a smaller budget
            won = forced_win(after, plies, max_nodes=max_nodes, attacker=mover)
            _VERIFIED[key] = (won, max_nodes)
        if won:
            return True
        if won is None:
            answer = None
    return answer


def solves(entry: dict[str, Any], code: int, mate: int | None = None,
           max_nodes: int = VERIFY_NODES) -> bool | None:
    """Whether the move ``code`` solves ``entry`` (the rule of the module doc): a win kind by
    :func:`move_wins` (None: unverified within ``max_nodes``), ``avoid_loss`` when the move's PTN
    is one of the entry's ``expected``. Raises ValueError for an unknown kind."""
    pos: Position = entry["position"]
    if entry["kind"] in WIN_KINDS:
        return move_wins(entry, pos, code, mate, max_nodes)
    if entry["kind"] == "avoid_loss":
        return pos.ptn(int(code)) in entry["expected"]
    raise ValueError(f"{entry.get('id')}: unknown kind {entry['kind']!r}")


@dataclass(frozen=True)
class TacticsScore:
    """Solve rates of one set of answers: ``rates`` by kind (in :data:`WIN_KINDS` order, then
    ``avoid_loss``; only the kinds present) and ``all``; ``solved`` and ``positions`` per kind
    and ``all`` (counts); ``unverified``: ids of the win entries whose check ran out of nodes
    (counted unsolved)."""

    rates: dict[str, float]
    solved: dict[str, int]
    positions: dict[str, int]
    unverified: list[str]


def solve_rates(entries: Sequence[dict[str, Any]], answers: Sequence[PlayerMove | int],
                max_nodes: int = VERIFY_NODES) -> TacticsScore:
    """The solve rate per kind and overall of ``answers`` (one move per entry, a code or a
    :class:`PlayerMove`, whose ``info['mate']`` with ``info['tinue'] == 'win'`` is the proof
    length of :func:`move_wins`), each in [0, 1]. Raises ValueError for no entries or a count
    of answers that does not match."""
    if not entries:
        raise ValueError("no tactics entries")
    if len(answers) != len(entries):
        raise ValueError(f"{len(answers)} answers for {len(entries)} entries")
    order = [*WIN_KINDS, "avoid_loss"]
    solved: dict[str, int] = {}
    positions: dict[str, int] = {}
    unverified: list[str] = []
    for entry, answer in zip(entries, answers, strict=True):
        move = answer if isinstance(answer, PlayerMove) else PlayerMove(int(answer))
        info = dict(move.info)
        mate = info.get("mate") if info.get("tinue") == "win" else None
        ok = solves(entry, move.code, int(mate) if isinstance(mate, numbers.Integral) else None, max_nodes)
        if ok is None:
            unverified.append(str(entry.get("id")))
        kind = entry["kind"]
        positions[kind] = positions.get(kind, 0) + 1
        solved[kind] = solved.get(kind, 0) + bool(ok)
    kinds = sorted(positions, key=order.index)
    solved = {k: solved[k] for k in kinds} | {"all": sum(solved.values())}
    positions = {k: positions[k] for k in kinds} | {"all": len(entries)}
    rates = {k: solved[k] / positions[k] for k in positions}
    return TacticsScore(rates, solved, positions, unverified)


def network_moves(side: NetSide, positions: Sequence[Position], seed: int = 0) -> list[PlayerMove]:
    """The move of the network ``side`` in each of ``positions`` (all of one board size), found
    by one batched search of all of them at once (``NetSide.batched``: one tree per position, one
    network call per search step for every position; ``side.simulations`` per position; the
    side's ``config.tinue_nodes`` checks, 0 for the network alone; no sampling: the most visited
    move). Raises ValueError for no positions, mixed sizes, or a finished position."""
    if not positions:
        raise ValueError("no positions")
    sizes = {p.size for p in positions}
    if len(sizes) != 1:
        raise ValueError(f"positions of one board size, got sizes {sorted(sizes)}")
    if any(p.is_over for p in positions):
        raise ValueError("a position is already over")
    search = side.batched(len(positions), seed, sampling_plies=0)
    games = list(range(len(positions)))
    for g, pos in enumerate(positions):
        search.reset(g, pos)
    answers = search.choose_many(games, list(positions), [0] * len(positions))
    return [answers[g] for g in games]
