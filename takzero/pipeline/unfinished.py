"""Self-play games in play: a worker's slot (:class:`GameSlot`, one game and the positions it has
recorded so far) and the games still in play at a stop as plain arrays (:class:`UnfinishedGames`),
kept in the run folder and continued by the next start (``takzero.pipeline.selfplay``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from takzero.game.position import Game, Position
from takzero.io.files import atomic_open
from takzero.pipeline.game_record import NO_PROOF

__all__ = ["MAX_UNFINISHED_BYTES", "NO_PROOF", "GameSlot", "UnfinishedGames"]


@dataclass
class GameSlot:
    """One game of a worker's slots and what it has recorded so far (one entry per recorded
    position: its state, the search policy's actions (k,) int64 and probabilities (k,) float32,
    mover, ply and proof, None: none); at the game's end it becomes a
    :class:`~takzero.pipeline.game_record.GameRecord`."""

    game: Game
    game_id: int
    resign_disabled: bool
    low_streak: list[int] = field(default_factory=lambda: [0, 0])
    would_resign: int | None = None  # colour that would have resigned (resignation disabled)
    resigned: int | None = None
    states: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    probs: list[np.ndarray] = field(default_factory=list)
    movers: list[int] = field(default_factory=list)
    plies: list[int] = field(default_factory=list)
    proven: list[int | None] = field(default_factory=list)  # exact value for the mover, if known



#: The largest unfinished-games file read back (:meth:`UnfinishedGames.load`), bytes.
MAX_UNFINISHED_BYTES = 1 << 31

@dataclass
class UnfinishedGames:
    """Self-play games still in play at a stop, as plain arrays (written to the run folder as an
    ``.npz``, read back without pickle): G games, their moves (N move codes in all) and their
    recorded positions (R in all: ply, mover, proof and policy target; the positions themselves
    are the games' positions at those plies, rebuilt from the moves).

    Attributes (G = games, R = recorded positions, P = policy entries):
        size: the board size (0 with no games).
        old_id: (G,) int64, each game's id before the stop (information only: a continued game
            takes a new id).
        resign_disabled: (G,) bool, resignation off in the game (``selfplay.resign_playout_share``).
        low_streak: (G, 2) int32, each colour's plies in a row below the resignation threshold.
        would_resign: (G,) int8, the colour that would have resigned (resignation off), -1 none.
        n_moves, n_recorded: (G,) int32, moves played and positions recorded, by game.
        moves: (N,) int64 move codes, game after game.
        plies: (R,) int32 ply of each recorded position; movers: (R,) int8 its side to move;
            proven: (R,) int8 its exact value for the mover, :data:`NO_PROOF` when none.
        n_policy: (R,) int32 policy-target entries of each recorded position.
        actions: (P,) int64 and probs: (P,) float32, the policy targets' entries.
    """

    size: int = 0
    old_id: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    resign_disabled: np.ndarray = field(default_factory=lambda: np.zeros(0, np.bool_))
    low_streak: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int32))
    would_resign: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    n_moves: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    n_recorded: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    moves: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    plies: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    movers: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    proven: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    n_policy: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    actions: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    probs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    #: (name, dtype, trailing shape, what counts its rows): the arrays and how they must agree
    ARRAYS = (
        ("old_id", np.int64, (), "games"), ("resign_disabled", np.bool_, (), "games"),
        ("low_streak", np.int32, (2,), "games"), ("would_resign", np.int8, (), "games"),
        ("n_moves", np.int32, (), "games"), ("n_recorded", np.int32, (), "games"),
        ("moves", np.int64, (), "n_moves"), ("plies", np.int32, (), "n_recorded"),
        ("movers", np.int8, (), "n_recorded"), ("proven", np.int8, (), "n_recorded"),
        ("n_policy", np.int32, (), "n_recorded"), ("actions", np.int64, (), "n_policy"),
        ("probs", np.float32, (), "n_policy"),
    )

    @property
    def games(self) -> int:
        return len(self.old_id)

    @property
    def positions(self) -> int:
        """Recorded positions of all the games (the records they will hand in, less resignations'
        none: each is a record once its game ends)."""
        return len(self.plies)

    @classmethod
    def from_slots(cls, size: int, slots: list[GameSlot]) -> UnfinishedGames:
        """The games of ``slots`` (each still in play)."""
        if not slots:
            return cls()
        acts = [a for s in slots for a in s.actions]
        probs = [p for s in slots for p in s.probs]
        return cls(
            size=size,
            old_id=np.array([s.game_id for s in slots], np.int64),
            resign_disabled=np.array([s.resign_disabled for s in slots], np.bool_),
            low_streak=np.array([s.low_streak for s in slots], np.int32).reshape(-1, 2),
            would_resign=np.array([-1 if s.would_resign is None else s.would_resign for s in slots], np.int8),
            n_moves=np.array([len(s.game.moves) for s in slots], np.int32),
            n_recorded=np.array([len(s.states) for s in slots], np.int32),
            moves=np.array([m for s in slots for m in s.game.moves], np.int64),
            plies=np.array([p for s in slots for p in s.plies], np.int32),
            movers=np.array([m for s in slots for m in s.movers], np.int8),
            proven=np.array([NO_PROOF if v is None else v for s in slots for v in s.proven], np.int8),
            n_policy=np.array([len(a) for a in acts], np.int32),
            actions=np.concatenate(acts).astype(np.int64) if acts else np.zeros(0, np.int64),
            probs=np.concatenate(probs).astype(np.float32) if probs else np.zeros(0, np.float32),
        )

    @classmethod
    def concat(cls, parts: list[UnfinishedGames]) -> UnfinishedGames:
        """The games of ``parts`` one after the other. Raises ValueError for parts of other sizes."""
        parts = [p for p in parts if p.games]
        if not parts:
            return cls()
        sizes = {p.size for p in parts}
        if len(sizes) > 1:
            raise ValueError(f"unfinished games of several board sizes: {sorted(sizes)}")
        return cls(size=parts[0].size,
                   **{name: np.concatenate([getattr(p, name) for p in parts]) for name, *_ in cls.ARRAYS})

    def split(self, n: int) -> tuple[UnfinishedGames, UnfinishedGames]:
        """(the first ``n`` games, the rest)."""
        n = max(0, min(n, self.games))
        moves = int(self.n_moves[:n].sum())
        recs = int(self.n_recorded[:n].sum())
        pol = int(self.n_policy[:recs].sum())
        cut = {"games": n, "n_moves": moves, "n_recorded": recs, "n_policy": pol}
        head: dict[str, Any] = {}
        tail: dict[str, Any] = {}
        for name, _, _, rows in self.ARRAYS:
            a = getattr(self, name)
            head[name], tail[name] = a[: cut[rows]], a[cut[rows]:]
        size_head = self.size if n else 0
        size_tail = self.size if self.games - n else 0
        return UnfinishedGames(size=size_head, **head), UnfinishedGames(size=size_tail, **tail)

    def save(self, path: str | Path) -> None:
        """Write the games to ``path`` (an ``.npz``, atomically). Raises OSError."""
        arrays = {name: getattr(self, name) for name, *_ in self.ARRAYS}
        with atomic_open(path, "wb") as f:
            np.savez(f, size=np.int64(self.size), **arrays)

    @classmethod
    def load(cls, path: str | Path, size: int) -> UnfinishedGames:
        """Read games that :meth:`save` wrote, for a board of ``size`` (no pickle is read).

        Raises:
            ValueError: not such a file, another board size, arrays of wrong types or that
                disagree in length (one line).
            OSError: the file cannot be read.
        """
        if os.path.getsize(path) > MAX_UNFINISHED_BYTES:  # (np.savez does not compress: a bound on what is read)
            raise ValueError(f"over {MAX_UNFINISHED_BYTES >> 20} MiB: not a file this run wrote")
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except OSError:
            raise
        except Exception as e:  # noqa: BLE001 - a .npy, a pickle, a broken zip: one line
            raise ValueError(f"not an unfinished-games file ({type(e).__name__}: {e})") from None
        missing = [name for name, *_ in cls.ARRAYS if name not in data] + ([] if "size" in data else ["size"])
        if missing:
            raise ValueError(f"not an unfinished-games file (no {', '.join(missing)})")
        if data["size"].shape != () or int(data["size"]) != size:
            raise ValueError(f"its games are of board size {data['size']}, this run's is {size}")
        out: dict[str, np.ndarray] = {}
        for name, dtype, shape, _ in cls.ARRAYS:
            a = data[name]
            if a.dtype != dtype or a.shape[1:] != shape:
                raise ValueError(f"{name} is {a.dtype}{list(a.shape)}, not {np.dtype(dtype)}")
            out[name] = a
        lengths = {"games": len(out["old_id"]), "n_moves": int(out["n_moves"].sum()),
                   "n_recorded": int(out["n_recorded"].sum()), "n_policy": int(out["n_policy"].sum())}
        for name, _, _, rows in cls.ARRAYS:
            if len(out[name]) != lengths[rows]:
                raise ValueError(f"{name} has {len(out[name])} rows, not {lengths[rows]}")
        if any((out[k] < 0).any() for k in ("n_moves", "n_recorded", "n_policy")):
            raise ValueError("negative counts")
        return cls(size=size if lengths["games"] else 0, **out)

    def slots(self, start: Position, ply_limit: int) -> list[GameSlot | None]:
        """The games as worker slots, each replayed from ``start`` with its positions recorded
        again; None for a game that does not replay (an illegal move, a recorded ply or mover
        that does not fit the moves) or that is already over (a lower ``selfplay.ply_limit``):
        it cannot go on. Game ids are left 0 (the worker gives new ones)."""
        out: list[GameSlot | None] = []
        m0 = r0 = p0 = 0
        for g in range(self.games):
            nm, nr = int(self.n_moves[g]), int(self.n_recorded[g])
            moves = self.moves[m0:m0 + nm].tolist()
            plies = self.plies[r0:r0 + nr].tolist()
            n_pol = self.n_policy[r0:r0 + nr]
            ends = p0 + np.cumsum(n_pol)
            starts = ends - n_pol
            m0, r0, p0 = m0 + nm, r0 + nr, p0 + int(n_pol.sum())
            try:
                game = Game(start, ply_limit=ply_limit)
                states: list[np.ndarray] = []
                at = {p: i for i, p in enumerate(plies)}
                if len(at) != nr or any(p < 0 or p >= nm for p in plies) or plies != sorted(plies):
                    raise ValueError("recorded plies out of order")
                for ply, move in enumerate(moves):
                    if ply in at:
                        if int(self.movers[r0 - nr + at[ply]]) != game.position.side_to_move:
                            raise ValueError("mover")
                        states.append(game.position.state.copy())
                    if game.result.over:
                        raise ValueError("over")
                    game.play(int(move))
                if game.result.over:
                    raise ValueError("over")
            except Exception:  # noqa: BLE001 - an illegal move included: this game cannot go on
                out.append(None)
                continue
            rows = range(r0 - nr, r0)
            proven = [None if int(self.proven[i]) == NO_PROOF else int(self.proven[i]) for i in rows]
            out.append(GameSlot(
                game=game, game_id=0, resign_disabled=bool(self.resign_disabled[g]),
                low_streak=[int(x) for x in self.low_streak[g]],
                would_resign=None if int(self.would_resign[g]) < 0 else int(self.would_resign[g]),
                states=states,
                actions=[self.actions[a:b].copy() for a, b in zip(starts, ends, strict=True)],
                probs=[self.probs[a:b].copy() for a, b in zip(starts, ends, strict=True)],
                movers=[int(self.movers[i]) for i in rows], plies=plies, proven=proven,
            ))
        return out
