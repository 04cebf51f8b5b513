"""The typed record of one finished self-play game: what the worker hands over when a game ends,
and what the replay records are derived from (``replay.Records.from_game``: each field of
``replay.RECORD_FIELDS`` names its producer, a function of the game record).

A game record holds the game's recorded positions (those of full searches; the playout cap leaves
cheap searches unrecorded) with the search's policy at each, the proofs, the final position and
how the game ended: everything a per-position target can be computed from, so a new target of the
game's data is a new producer, not a new list kept by the worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from takzero.game import core

__all__ = ["NO_PROOF", "GameRecord"]

#: No proof for a recorded position (``GameRecord.proven``): the game's outcome is its target.
NO_PROOF = -128


@dataclass(frozen=True)
class GameRecord:
    """One finished game, n recorded positions (P policy entries in all).

    Attributes:
        size: the board size.
        game_id: the game's id (``selfplay.game_id``: ``(stream << 32) | counter``).
        generation: the model generation that played it (at its end).
        states: (n, core.STATE_LEN) int64, the recorded positions.
        plies: (n,) int16, each recorded position's ply.
        movers: (n,) int8, its side to move (0 white, 1 black).
        proven: (n,) int8, its exact value for the mover (1, 0, -1; ``selfplay.proven_value_targets``)
            or :data:`NO_PROOF`.
        policy_offsets: (n + 1,) int64, position i's policy entries are
            ``policy_actions[policy_offsets[i]:policy_offsets[i + 1]]`` (0 first, P last).
        policy_actions: (P,) int64, the search's policy target: action indices
            (``nn.actions``) of the root's children, position after position.
        policy_probs: (P,) float32, their probabilities.
        final_state: (core.STATE_LEN,) int64, the game's final position (at a resignation, the
            position the resigner resigned in).
        winner: 0 white, 1 black, -1 none (a draw or the ply limit).
        reason: how it ended: ``game.position.Result.reason`` (``road``, ``flat``, ``draw``,
            ``ply limit``, ``repetition``) or ``resign`` for a resignation.

    Raises ValueError (one line, naming the array) when the arrays do not agree in shape or dtype.
    """

    size: int
    game_id: int
    generation: int
    states: np.ndarray
    plies: np.ndarray
    movers: np.ndarray
    proven: np.ndarray
    policy_offsets: np.ndarray
    policy_actions: np.ndarray
    policy_probs: np.ndarray
    final_state: np.ndarray
    winner: int
    reason: str

    #: (name, dtype, shape with "n" / "n+1" / "P" / "S" (STATE_LEN)): the arrays, checked on creation
    ARRAYS = (
        ("states", np.int64, ("n", "S")), ("plies", np.int16, ("n",)), ("movers", np.int8, ("n",)),
        ("proven", np.int8, ("n",)), ("policy_offsets", np.int64, ("n+1",)),
        ("policy_actions", np.int64, ("P",)), ("policy_probs", np.float32, ("P",)),
        ("final_state", np.int64, ("S",)),
    )

    def __post_init__(self) -> None:
        n = self.states.shape[0] if self.states.ndim == 2 else -1
        dims = {"n": n, "n+1": n + 1, "P": self.policy_actions.shape[0], "S": core.STATE_LEN}
        for name, dtype, shape in self.ARRAYS:
            a = getattr(self, name)
            want = tuple(dims[d] for d in shape)
            if a.dtype != dtype or a.shape != want:
                raise ValueError(f"game record {name}: {a.dtype}{list(a.shape)}, expected "
                                 f"{np.dtype(dtype)}{list(want)}")
        if n and (self.policy_offsets[0] != 0 or self.policy_offsets[-1] != dims["P"]
                  or (np.diff(self.policy_offsets) < 0).any()):
            raise ValueError("game record policy_offsets: not 0 .. P, non-decreasing")
        if self.winner not in (-1, 0, 1):
            raise ValueError(f"game record winner: {self.winner} (0, 1 or -1)")

    def __len__(self) -> int:
        return int(self.states.shape[0])

    @classmethod
    def of_game(
        cls,
        size: int,
        game_id: int,
        generation: int,
        states: Sequence[np.ndarray],
        plies: Sequence[int],
        movers: Sequence[int],
        proven: Sequence[int | None],
        actions: Sequence[np.ndarray],
        probs: Sequence[np.ndarray],
        final_state: np.ndarray,
        winner: int | None,
        reason: str,
    ) -> GameRecord:
        """A record from the per-position lists a worker keeps while a game is played (one
        entry per recorded position; ``proven`` None where there is no proof, ``winner`` None
        for none)."""
        n = len(states)
        counts = np.array([len(a) for a in actions], np.int64)
        return cls(
            size=size, game_id=int(game_id), generation=int(generation),
            states=np.stack(states).astype(np.int64, copy=False) if n else np.zeros((0, core.STATE_LEN), np.int64),
            plies=np.array(plies, np.int16), movers=np.array(movers, np.int8),
            proven=np.array([NO_PROOF if v is None else v for v in proven], np.int8),
            policy_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            policy_actions=np.concatenate(actions).astype(np.int64) if n else np.zeros(0, np.int64),
            policy_probs=np.concatenate(probs).astype(np.float32) if n else np.zeros(0, np.float32),
            final_state=np.asarray(final_state, np.int64), winner=-1 if winner is None else int(winner),
            reason=reason,
        )

    def policies(self, rows: Sequence[int] | np.ndarray | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The policy targets of positions ``rows`` (None: all) as (actions, probabilities)
        lists of (k,) int64 / float32 arrays (views)."""
        rows = range(len(self)) if rows is None else rows
        o = self.policy_offsets
        return ([self.policy_actions[o[i]:o[i + 1]] for i in rows],
                [self.policy_probs[o[i]:o[i + 1]] for i in rows])
