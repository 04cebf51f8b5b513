"""An external TEI engine as a player of the in-process game loop: the ``tei:`` player specs
(``takzero.players.registry``: ``tei:[nodes=N:|movetime=MS:][name=LABEL:]COMMAND``), played as
baselines by ``takzero.evaluate`` and by the training evaluator (``evaluator.baselines``).

The engine is driven through the TEI client of :mod:`takzero.protocols.tei.match` (the engine
runner of ``takzero.match``; there is no second client): :class:`EnginePlayer` starts it, asks
it for a game of the match's size and komi (``teinewgame``, refusing an engine that would play a
fallback baseline for the size, :func:`~takzero.protocols.tei.match.check_board_size`), and answers
each ``choose`` with ``position tps <the position> moves`` and ``go nodes N`` / ``go movetime
MS``. The batched loop of ``takzero.matches.games`` plays many games at once, so the engine is
given each position on its own (TPS), not the game's moves.

Unlike ``takzero.match``, where an engine fault loses the game and the engine is restarted, a
fault here ends the match: a yardstick that crashes, hangs or plays an illegal move measures
nothing, so :meth:`EnginePlayer.choose` raises :class:`~takzero.players.base.PlayerFailed`
(with the engine's last stderr lines; an exception of the players' room, so that the match layer
below this one, ``takzero.matches.evaluation``, can catch it) and the caller records the
baseline as failed. The engine
process is always stopped: :meth:`EnginePlayer.close` (``quit``, then terminate, then kill) in
every caller's ``finally``; an engine whose parent is killed without that sees the end of its
input, which ends the takzero engine (``takzero.tei``: end of input acts like ``quit``) and any
engine that follows the usual UCI convention.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from takzero.game.moves import MoveError
from takzero.game.position import Position
from takzero.nn.quoting import shown
from takzero.players.base import BasePlayer, PlayerFailed, PlayerMove, close_player
from takzero.players.registry import EngineSpec, engine_spec, make_player
from takzero.protocols.tei.lines import format_position
from takzero.protocols.tei.match import (
    EngineError,
    MatchAborted,
    TEIClient,
    TimeControl,
    check_board_size,
)

__all__ = ["EnginePlayer", "PlayerFailed", "close_player", "make_baseline"]

#: Seconds to wait for an engine's teiok and each readyok (an engine may load a network first;
#: a yardstick of a long run can wait).
STARTUP_TIMEOUT_S = 120.0
#: Lines of the engine's stderr quoted in the error of a failed engine.
STDERR_TAIL_LINES = 5
#: The bytes of the end of an engine's stderr file read for those lines.
STDERR_TAIL_BYTES = 1 << 16


class EnginePlayer(BasePlayer):
    """An external TEI engine as a :class:`~takzero.players.base.Player` (see the module doc).

    Args:
        spec: a ``tei:`` spec (text or :class:`~takzero.players.registry.EngineSpec`); its
            label is the player's name.
        startup_timeout: seconds to wait for ``teiok`` and each ``readyok``.

    Nothing is held until the first :meth:`reset` (or :meth:`start`) starts the process; it runs
    until :meth:`close` (also as a context manager). Its stderr goes to a private temporary
    file, deleted by :meth:`close`, whose last lines errors quote. Raises ValueError for a spec that is
    not a good ``tei:`` spec.
    """

    def __init__(self, spec: EngineSpec | str, startup_timeout: float = STARTUP_TIMEOUT_S) -> None:
        parsed = engine_spec(spec) if isinstance(spec, str) else spec
        if parsed is None:
            raise ValueError(f"not a tei: engine spec: {spec}")
        super().__init__(0, name=parsed.label)
        self.spec = parsed
        self.tc = TimeControl(nodes=parsed.nodes, movetime=parsed.movetime)
        self._stderr: Path | None = None  # made by start: nothing is held before
        self.client = TEIClient(parsed.command, label=parsed.label, startup_timeout=startup_timeout)

    @property
    def pid(self) -> int | None:
        """The engine process's id while it runs, else None."""
        proc = self.client.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _failure(self, reason: str, what: str) -> PlayerFailed:
        """A PlayerFailed saying ``what`` with the engine's command and last stderr lines."""
        tail = ""
        try:  # the file's last STDERR_TAIL_BYTES only: an engine may write gigabytes there
            text = ""
            if self._stderr is not None:
                with open(self._stderr, "rb") as f:
                    f.seek(max(0, f.seek(0, os.SEEK_END) - STDERR_TAIL_BYTES))
                    text = f.read(STDERR_TAIL_BYTES).decode("utf-8", errors="replace")
            lines = [x for x in text.splitlines() if x.strip()]
            if lines:  # cut and escaped: an engine's bytes, bound for a terminal
                tail = "; its stderr ends: " + " | ".join(shown(x, 200) for x in lines[-STDERR_TAIL_LINES:])
        except OSError:
            pass
        return PlayerFailed(reason, f"engine {self.name} ({self.spec.command}): {what}{tail}")

    def start(self) -> None:
        """Start the engine (``tei``, ``isready``) if it does not run. Raises PlayerFailed."""
        if self.client.alive:
            return
        if self._stderr is None:
            fd, path = tempfile.mkstemp(prefix="takzero-engine-", suffix=".stderr.log")
            os.close(fd)
            self._stderr = self.client.stderr_path = Path(path)
        try:
            self.client.start()
        except EngineError as e:
            self.client.kill()
            raise self._failure(e.reason, f"did not start: {e}") from None

    def reset(self, size: int, half_komi: int, seed: int | None = None) -> None:
        """A new game: the engine started if needed, then ``HalfKomi``, ``teinewgame``,
        ``isready``. Raises PlayerFailed: the engine failed, or refuses the size or would play a
        fallback baseline for it (reason 'refused')."""
        super().reset(size, half_komi, seed)
        self.start()
        try:
            check_board_size(self.client, size, half_komi, allow_fallback=False)
        except EngineError as e:
            self.client.kill()
            raise self._failure(e.reason, f"failed at teinewgame {size}: {e}") from None
        except MatchAborted as e:
            raise self._failure("refused", str(e)) from None

    def choose(self, position: Position) -> PlayerMove:
        """The engine's move in ``position`` (sent as TPS, under the spec's limit). Raises
        PlayerFailed when the engine is not running (it is never restarted in the middle of a
        match, without its game set up), crashes, does not answer within the limit's timeout
        (``TimeControl.timeout``) or answers a move that is malformed or illegal (the engine is
        killed then), ValueError for a finished position."""
        self._check_open(position)
        try:  # an engine that is not running (never reset, or gone) fails here: no silent restart
            if not self.client.alive:
                raise EngineError("crash", f"{self.name} is not running (start it with reset)")
            text, _infos, _seconds = self.client.go(
                format_position(position, []), self.tc.go_command((0.0, 0.0)), self.tc.timeout(0.0)
            )
        except EngineError as e:
            self.client.kill()
            raise self._failure(e.reason, str(e)) from None
        try:
            code = position.check_move(text)
        except MoveError as e:
            self.client.kill()
            raise self._failure("illegal move", f"played '{text}' in {position.to_tps()}: {e}") from None
        return PlayerMove(int(code))

    def close(self) -> None:
        """Stop the engine (``quit``; terminate, then kill, if it does not exit within 3 s each)
        and delete its stderr file. Safe to call more than once."""
        self.client.close()
        if self._stderr is not None:
            try:
                self._stderr.unlink(missing_ok=True)
            except OSError:
                pass
            self._stderr = None

    def __enter__(self) -> EnginePlayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_baseline(spec: str, seed: int = 0, simulations: int | None = None) -> BasePlayer:
    """The player of a baseline spec: an :class:`EnginePlayer` (not started yet) for a ``tei:``
    spec, else ``takzero.players.registry.make_player(spec, seed, simulations)``. Close it with
    :func:`~takzero.players.base.close_player`. Raises ValueError for a bad spec (and as
    ``make_player`` does)."""
    parsed = engine_spec(spec)
    if parsed is not None:
        return EnginePlayer(parsed)
    return make_player(spec, seed=seed, simulations=simulations)
