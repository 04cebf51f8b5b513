"""A game between a human at a terminal and an engine player (:class:`PlaySession`), the session
behind ``python -m takzero.play`` (the command line, :mod:`takzero.play`, parses the arguments,
picks the opponent with :func:`make_opponent` and runs it).

The board is redrawn before every move; moves are typed in PTN (``a1``, ``Sc3``, ``Cd4``,
``3c3>12``). Other input:

=================  ===========================================================================
``undo``           take back your last move (and the engine's reply to it)
``tps``            print the position as TPS
``save FILE.ptn``  write the game so far as PTN to a new file (an existing one is refused)
``save! FILE.ptn`` the same, replacing an existing file (never the model being played, nor a
                   device, FIFO or folder)
``moves``          list the legal moves
``resign``         give up the game
``help``           this list
``quit``           leave (also end of input)
=================  ===========================================================================

When the game ends (a road, a flat win, a draw, a resignation) the session prints a PTN Ninja
link that opens the game in the browser (``takzero.io.ptn_ninja``).

A malformed or illegal move gets a message saying why, and the game goes on. After its move the
engine prints its evaluation: win/draw/loss percentages from its own point of view (a network
player), or its expected score (the UCT baseline).

The session reads lines with ``input_fn`` and prints with ``print_fn`` (``input`` and ``print`` by
default), so a test or a script can drive a game.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from takzero.game.core import BLACK, CAP, WALL, WHITE
from takzero.game.moves import FILES, MoveError
from takzero.game.position import Game, Position
from takzero.game.ptn import PTNGame
from takzero.io.files import check_not_input, write_ptn_file
from takzero.io.ptn_ninja import ptn_ninja_url
from takzero.players.base import PlayerMove
from takzero.players.network import DEFAULT_NETWORK_SIMULATIONS, NetworkPlayer, player_search
from takzero.players.registry import make_player
from takzero.search.limit import Limit

__all__ = [
    "PlaySession",
    "default_size",
    "describe_eval",
    "make_opponent",
    "pretrained_path",
    "render_board",
    "start_position",
]

HELP = """commands:
  <move>          a move in PTN: a1 (flat), Sa1 (wall), Ca1 (capstone), c3>, 3c3>12 ...
  undo            take back your last move (and the engine's reply)
  tps             print the position as TPS
  save FILE.ptn   save the game as PTN (a new file; an existing one is kept)
  save! FILE.ptn  save the game as PTN, replacing FILE.ptn if it exists
  moves           list the legal moves
  resign          give up
  help            this text
  quit            leave"""

COLOUR_NAMES = ("white", "black")


# ---------------------------------------------------------------------------------------------
# Drawing
# ---------------------------------------------------------------------------------------------


def _cell(pos: Position, sq: int) -> str:
    colours, top = pos.stack(sq)
    if not colours:
        return "."
    below = "".join("wb"[c] for c in colours[:-1])
    if len(below) > 6:
        below = f"{len(colours) - 1}:" + below[-4:]
    head = "WB"[colours[-1]]
    mark = "S" if top == WALL else ("C" if top == CAP else "")
    return below + head + mark


def render_board(pos: Position, last: str | None = None, you: int | None = None) -> str:
    """The board as text for a terminal (rank N at the top, files a.. left to right).

    Each square shows its stack bottom to top: buried pieces in lower case (``w``/``b``), the top
    piece in capitals (``W``/``B``), followed by ``S`` for a wall or ``C`` for a capstone; ``.`` is
    an empty square; a stack taller than 7 shows ``<buried count>:`` and its upper pieces. Below:
    reserves, flat count, komi, the last move and whose turn it is (``you``: the human's colour).
    """
    size = pos.size
    cells = [_cell(pos, sq) for sq in range(size * size)]
    width = max(5, max(len(c) for c in cells) + 2)
    sep = "   +" + "+".join("-" * width for _ in range(size)) + "+"
    lines = ["    " + " ".join(f.center(width) for f in FILES[:size]), sep]
    for rank in range(size - 1, -1, -1):
        row = "|".join(cells[rank * size + f].center(width) for f in range(size))
        lines.append(f"{rank + 1:>2} |{row}| {rank + 1}")
        lines.append(sep)
    lines.append("    " + " ".join(f.center(width) for f in FILES[:size]))
    lines.append("stacks bottom to top; the top piece in capitals, S = wall, C = capstone")
    w_flats, b_flats = pos.flat_counts()
    for colour in (WHITE, BLACK):
        caps = pos.capstones(colour)
        who = " (you)" if you == colour else ""
        lines.append(
            f"{COLOUR_NAMES[colour]:>5}{who}: {pos.stones(colour)} stones, {caps} "
            f"capstone{'s' if caps != 1 else ''} in reserve; "
            f"{(w_flats, b_flats)[colour]} flat{'s' if (w_flats, b_flats)[colour] != 1 else ''} "
            f"on top"
        )
    lines.append(f"komi {pos.komi:g}" + (f"; last move {last}" if last else ""))
    if pos.is_over:
        lines.append(f"game over: {pos.result} ({pos.result.reason})")
    else:
        side = pos.side_to_move
        who = "" if you is None else (" (you)" if side == you else " (engine)")
        note = ""
        if pos.ply < 2:
            note = f" - first turn: place a flat of {COLOUR_NAMES[1 - side]}'s colour"
        lines.append(f"move {pos.move_number}, {COLOUR_NAMES[side]} to move{who}{note}")
    return "\n".join(lines)


def describe_eval(pm: PlayerMove) -> str:
    """The engine's evaluation after its move, from its own point of view: win/draw/loss in
    percent when known, else the expected score from the value; plus simulations."""
    parts = []
    if pm.wdl is not None:
        w, d, loss = (100.0 * x for x in pm.wdl)
        parts.append(f"win {w:.0f}% draw {d:.0f}% loss {loss:.0f}%")
    if pm.value is not None:
        if pm.wdl is None:
            parts.append(f"expected score {50.0 * (1.0 + pm.value):.0f}%")
        parts.append(f"value {pm.value:+.2f}")
    if pm.nodes:
        parts.append(f"{pm.nodes} simulations")
    kind = pm.info.get("kind") if pm.info else None
    if kind:
        parts.append(str(kind))
    return ", ".join(parts) if parts else "no evaluation"


# ---------------------------------------------------------------------------------------------
# Opponents
# ---------------------------------------------------------------------------------------------


#: Where the shipped models live: ``checkpoints/pretrained`` of the working directory first, then
#: of the repository this package was installed from (an editable install).
PRETRAINED_DIRS = (Path("checkpoints/pretrained"), Path(__file__).resolve().parents[2] / "checkpoints" / "pretrained")


def pretrained_path(size: int, roots: tuple[str | Path, ...] | None = None) -> Path:
    """The pretrained model ``<N>x<N>.pt`` for ``size``: the first of ``roots`` (default
    :data:`PRETRAINED_DIRS`) that has it, else the path in the first root (which does not exist)."""
    roots = PRETRAINED_DIRS if roots is None else roots
    for root in roots:
        if (Path(root) / f"{size}x{size}.pt").is_file():
            return Path(root) / f"{size}x{size}.pt"
    return Path(roots[0]) / f"{size}x{size}.pt"


def default_size(roots: tuple[str | Path, ...] | None = None) -> int:
    """The board size to play when none is given: 6 if a 6x6 model is shipped, else the largest
    size with a pretrained model, else 6."""
    have = [n for n in range(3, 9) if pretrained_path(n, roots).is_file()]
    return 6 if 6 in have or not have else max(have)


def start_position(
    size: int, komi: float | None, player: Any, say: Callable[[str], None]
) -> Position:
    """The start position: ``komi`` points, or (``None``) the komi a network opponent was trained
    with (``model_half_komi`` of its metadata; ``say`` tells), else 0. Raises ValueError for a
    komi that is not a finite multiple of 0.5."""
    if komi is not None:
        return Position.start(size, komi=komi)
    half_komi = getattr(player, "model_half_komi", None) or 0
    if half_komi:
        say(f"komi {half_komi / 2:g}, as the network was trained (--komi to change)")
    return Position.start(size, half_komi=half_komi)


def make_opponent(
    model: str | None,
    opponent: str | None,
    size: int | None,
    simulations: int | None,
    seed: int,
    say: Callable[[str], None],
    device: str = "cpu",
    pretrained_roots: tuple[str | Path, ...] | None = None,
) -> tuple[Any, int]:
    """The engine player and the board size to play.

    ``opponent`` (a player spec; a ``model:PATH`` spec plays its network's size) wins over
    models; ``model`` is loaded as a
    :class:`takzero.players.NetworkPlayer`; with neither, the pretrained model for the size is
    used when it exists (without ``size``: see :func:`default_size`; ``pretrained_roots``: where
    to look, default :data:`PRETRAINED_DIRS`), else ``uct`` (``say`` explains). A model that does not play ``size``
    falls back to ``uct`` with a message. Raises ValueError for a bad spec or an unusable model
    file given explicitly.
    """
    def baseline(spec: str, board: int) -> tuple[Any, int]:
        return make_player(spec, seed=seed, simulations=simulations), board

    if opponent is not None and opponent != "network":
        player = make_player(opponent, seed=seed, simulations=simulations)
        model_size = getattr(player, "model_size", None)
        if model_size is not None:  # a model:PATH network
            if size is not None and size != model_size:
                raise ValueError(
                    f"--opponent {opponent} plays {model_size}x{model_size}, not {size}x{size}"
                )
            return player, model_size
        return player, size or 6
    path = model
    if path is None:
        board = size or default_size(pretrained_roots)
        candidate = pretrained_path(board, pretrained_roots)
        if candidate.is_file():
            path = str(candidate)
        else:
            say(
                f"no --model given and {candidate} does not exist: playing the UCT baseline "
                f"(random rollouts) instead of a network"
            )
            return baseline("uct", board)
    try:
        search = player_search(simulations=simulations or DEFAULT_NETWORK_SIMULATIONS)
        net = NetworkPlayer.load(path, config=search, seed=seed, device=device)
    except Exception as e:  # noqa: BLE001 - one clear message for any unreadable file
        raise ValueError(f"cannot load model {path}: {e}") from None
    if size is not None and size != net.model_size:
        say(
            f"the model {path} plays {net.model_size}x{net.model_size}, not {size}x{size}: "
            f"playing the UCT baseline instead"
        )
        return baseline("uct", size)
    return net, net.model_size


# ---------------------------------------------------------------------------------------------
# The session
# ---------------------------------------------------------------------------------------------


class PlaySession:
    """One game between a human (``input_fn``) and an engine player, printed with ``print_fn``.

    Args:
        player: the engine (a :class:`takzero.players.Player`; ``think`` is used when it has it).
        start: the start position (size and komi).
        human: the human's colour (0 white, 1 black).
        simulations, seconds: the engine's limit per move (None: the player's own settings).
        ply_limit: draw after that many plies (None: no limit); threefold repetition is a draw.
        input_fn, print_fn: I/O (``input`` and ``print`` by default).
        inputs: the files the session reads (the model played): ``save`` never writes over one.
    """

    def __init__(
        self,
        player: Any,
        start: Position,
        human: int,
        simulations: int | None = None,
        seconds: float | None = None,
        ply_limit: int | None = None,
        input_fn: Callable[[str], str] = input,
        print_fn: Callable[[str], None] = print,
        inputs: tuple[str | Path | None, ...] = (),
    ) -> None:
        self.player = player
        self.inputs = inputs
        self.start = start
        self.human = human
        self.simulations = simulations
        self.seconds = seconds
        self.game = Game(start, ply_limit=ply_limit, threefold=True)
        self.input = input_fn
        self.say = print_fn
        self.resigned: int | None = None
        self.engine_name = getattr(player, "name", "engine")
        self.player.reset(start.size, start.half_komi)

    # -- state -----------------------------------------------------------------------------

    @property
    def over(self) -> bool:
        return self.resigned is not None or self.game.result.over

    def _last_move(self) -> str | None:
        moves = self.game.ptn_moves()
        return moves[-1] if moves else None

    def result_text(self) -> str:
        """The result as a PTN token (``R-0``, ``0-F``, ``1-0`` after a resignation, ...)."""
        if self.resigned is not None:
            return "0-1" if self.resigned == WHITE else "1-0"
        return str(self.game.result) if self.game.result.over else ""

    def _announce_end(self) -> None:
        if self.resigned is not None:
            self.say(f"{COLOUR_NAMES[self.resigned]} resigns: {self.result_text()}")
        else:
            res = self.game.result
            if res.winner is None:
                verdict = "a draw"
            else:
                verdict = "you win!" if res.winner == self.human else f"{self.engine_name} wins"
            self.say(f"result {res}: {verdict}")
        self.say(f"view the game in PTN Ninja: {ptn_ninja_url(self.record())}")
        if self.resigned is None:
            self.say("type 'save FILE.ptn' to keep the game, 'undo' to take back, 'quit' to leave")

    # -- engine ----------------------------------------------------------------------------

    def engine_move(self) -> None:
        pos = self.game.position.copy()
        nodes = self.simulations
        if nodes is None and self.seconds is None:
            nodes = getattr(self.player, "simulations", None)
        t0 = time.perf_counter()
        if nodes is None and self.seconds is None:
            pm = self.player.choose(pos)
        else:
            pm = self.player.think(pos, Limit(nodes=nodes, seconds=self.seconds))
        took = time.perf_counter() - t0
        text = pos.ptn(pm.code)
        self._play(pm.code)
        self.say(f"{self.engine_name} plays {text}  ({describe_eval(pm)}; {took:.1f} s)")

    def _play(self, code: int) -> None:
        before = self.game.position.copy()
        self.game.play(code)
        self.player.observe(before, code)

    # -- commands --------------------------------------------------------------------------

    def undo(self) -> None:
        plies = len(self.game.moves)
        start_ply = self.start.ply
        human_plies = [i for i in range(plies) if (start_ply + i) & 1 == self.human]
        if not human_plies:
            self.say("nothing to undo: you have not moved yet")
            return
        self.resigned = None
        while self.game.moves:
            idx = len(self.game.moves) - 1
            self.game.undo()
            if (start_ply + idx) & 1 == self.human:
                break
        self.player.reset(self.start.size, self.start.half_komi)
        self.say("took back your last move")

    def record(self) -> PTNGame:
        """The game so far as a PTN record (players, event, date, result)."""
        tags = {
            "Player1": "human" if self.human == WHITE else self.engine_name,
            "Player2": "human" if self.human == BLACK else self.engine_name,
            "Event": "takzero play",
            "Date": _dt.date.today().strftime("%Y.%m.%d"),
        }
        result = self.result_text() if self.resigned is not None else None
        return PTNGame.from_game(self.game, tags=tags, result=result)

    def save(self, path: str, replace: bool = False) -> None:
        """Write the game as PTN to ``path``: refused in one line (nothing written) when it is
        one of the session's ``inputs`` (the model) or not a regular file, and when it exists
        unless ``replace`` (``save!``)."""
        try:
            check_not_input(path, *self.inputs, option="file name")
        except ValueError as e:
            self.say(f"cannot save to {path}: {e}")
            return
        if not replace and os.path.lexists(path):
            self.say(f"{path} exists, not overwritten: 'save! {path}' replaces it, or save to a new name")
            return
        try:
            write_ptn_file(path, self.record())
        except OSError as e:
            self.say(f"cannot save to {path}: {e}")
            return
        self.say(f"saved {len(self.game.moves)} plies to {path}")

    def human_input(self, line: str) -> bool:
        """Handle one line typed by the human; returns False to quit."""
        text = line.strip()
        if not text:
            return True
        word, _, rest = text.partition(" ")
        cmd = word.lower()
        if cmd in ("quit", "exit", "q"):
            return False
        if cmd in ("help", "?", "h"):
            self.say(HELP)
        elif cmd == "undo":
            self.undo()
            self.show()
        elif cmd == "tps":
            self.say(self.game.position.to_tps())
        elif cmd in ("save", "save!"):
            if not rest.strip():
                self.say(f"usage: {cmd} FILE.ptn")
            else:
                self.save(rest.strip(), replace=cmd == "save!")
        elif cmd == "moves":
            if self.over:
                self.say("the game is over: there are no moves")
            else:
                moves = self.game.position.legal_moves()
                self.say(f"{len(moves)} legal moves: " + " ".join(m.to_ptn() for m in moves))
        elif cmd == "resign":
            if self.over:
                self.say("the game is already over")
            else:
                self.resigned = self.human
                self._announce_end()
        elif self.over:
            self.say(f"the game is over ({self.result_text()}); 'undo', 'save FILE.ptn' or 'quit'")
        elif self.game.position.side_to_move != self.human:
            self.say("it is the engine's turn")  # not reachable from the loop; kept for safety
        else:
            try:
                code = self.game.position.check_move(text)
            except MoveError as e:
                self.say(f"'{text}' cannot be played: {e}")
                self.say("type a move in PTN (e.g. a1, Sb2, Cc3, 2c3>11) or 'help'")
                return True
            self._play(code)
            self.show()
            if self.over:
                self._announce_end()
        return True

    def show(self) -> None:
        self.say(render_board(self.game.position, self._last_move(), self.human))

    # -- loop ------------------------------------------------------------------------------

    def run(self) -> None:
        """Play until ``quit`` or end of input."""
        self.say(
            f"you play {COLOUR_NAMES[self.human]} against {self.engine_name} on "
            f"{self.start.size}x{self.start.size}, komi {self.start.komi:g}; 'help' lists "
            f"the commands"
        )
        self.show()
        while True:
            if not self.over and self.game.position.side_to_move != self.human:
                self.engine_move()
                self.show()
                if self.over:
                    self._announce_end()
                continue
            prompt = "> " if self.over else f"your move ({COLOUR_NAMES[self.human]})> "
            try:
                line = self.input(prompt)
            except EOFError:
                self.say("")
                break
            if not self.human_input(line):
                break
        self.say("bye")
