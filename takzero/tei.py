"""TEI (Tak Engine Interface) engine: ``python -m takzero.tei [--model model.pt]``.

Speaks the line protocol of ``tak-rules.md`` (UCI with ``tei`` in place of ``uci``) on
stdin/stdout, so match runners (``takzero.match``, racetrack) and GUIs can use takzero:

* ``tei`` -> ``id name``, ``id author``, the options, ``teiok``. Options:
  ``HalfKomi`` (spin, half points added to black's flat count), ``Nodes`` (spin, simulations per
  move when ``go`` gives no limit), ``Model`` (string, path of an exported model or checkpoint;
  setting it loads it), ``Fallback`` (string, the player for board sizes the model cannot play:
  a player spec of ``takzero.players.registry`` such as ``uct:200``, or ``none`` to refuse),
  ``Seed`` (spin).
* ``isready`` -> ``readyok``; ``setoption``; ``teinewgame <size>``; ``position``; ``go``;
  ``stop``; ``quit``. During a search: ``info`` lines (``wdl`` in permille, only when the player
  knows it), then ``bestmove <ptn>``. The syntax of each line: ``takzero.matches.tei_protocol``.

Behaviour worth knowing:

* The search runs on a worker thread (the player's own ``think``, which keeps its clock); stdin
  is read on the main thread, so ``stop`` (and ``quit``) act during a search. Network searches run
  in chunks of 32 simulations and check the stop flag between chunks, whatever the limit (so
  ``stop`` or ``quit`` right after ``go nodes N`` answers with the chunks searched so far); the UCT
  baseline under a node limit runs its one search to its end. Other commands that arrive during
  a finite search wait for it to finish (so transcripts are deterministic); during ``go infinite``
  ``isready`` is answered at once and any other command stops the search first.
* Tree reuse: when a ``position`` command extends the previous one by some moves, the player is told
  those moves (``Player.observe``) and keeps its search tree; otherwise it starts a fresh tree.
  ``teinewgame`` resets the player with the seed (``--seed`` / ``Seed``), so a session replays
  exactly with the same commands (``go nodes``).
* Bad input never ends the engine: unknown commands, bad options, malformed or illegal moves, a size
  outside 3..8 get ``info string <what was wrong>`` and the engine carries on (an illegal
  ``position`` leaves the previous position in place). A board size the model does not play is
  played by the ``Fallback`` baseline (said once per game with ``info string``); with
  ``Fallback none`` the engine refuses: ``go`` answers ``info string`` and ``bestmove (none)``.
  ``go`` on a finished position also answers ``bestmove (none)``.
* Scores: ``score cp`` is ``round(111.7146 * tan(1.5620688 * v))`` of the value v in [-1, 1] for
  the side to move (the mapping Leela Chess Zero used for its value head), about +-100 at v = +-0.5.

Without ``--model`` the engine plays ``--player`` (a player spec, default ``uct:200``), which makes
it testable without a network.

The protocol state machine (:class:`TEIEngine`) lives here, in the command-line module, because an
engine protocol server *is* a command line: it reads commands and prints lines, like
``takzero.play``'s terminal session. The text of the protocol lines (``setoption``, ``position``
and ``go`` parsed; ``id``, ``option``, ``info`` and ``bestmove`` formatted) and the time budget
of a ``go`` are in ``takzero.matches.tei_protocol``, shared with the match runner's client
(``SearchLimits``, ``parse_go``, ``value_to_cp`` and ``format_info`` are importable from here
too). What is not protocol lives below it: players and their clocks in ``takzero.players``
(``BasePlayer.think``), player specs in ``takzero.players.registry``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from takzero.game.core import STANDARD_RESERVES
from takzero.game.position import Position
from takzero.matches.tei_protocol import (
    MAX_NODES,
    MOVE_OVERHEAD_MS,
    SearchLimits,
    TEIProtocolError,
    format_bestmove,
    format_id,
    format_info,
    format_option,
    parse_go,
    parse_position,
    parse_setoption,
    value_to_cp,
)
from takzero.players.base import BasePlayer, PlayerMove
from takzero.players.registry import check_spec, help_text, make_player, spec_syntax

__all__ = [
    "ENGINE_AUTHOR",
    "ENGINE_NAME",
    "MAX_NODES",
    "MOVE_OVERHEAD_MS",
    "SearchLimits",
    "TEIEngine",
    "format_info",
    "main",
    "parse_go",
    "value_to_cp",
]

ENGINE_NAME = "takzero"
ENGINE_AUTHOR = "takzero developers"
DEFAULT_PLAYER = "uct:200"
DEFAULT_SIZE = 6
HALF_KOMI_RANGE = (-20, 20)


# ---------------------------------------------------------------------------------------------
# Player construction
# ---------------------------------------------------------------------------------------------


def load_network_player(path: str | Path, simulations: int, seed: int, device: str = "cpu"):
    """A :class:`takzero.players.NetworkPlayer` for an exported model (TorchScript/ONNX) or a
    checkpoint. Raises OSError/ValueError/RuntimeError when the file cannot be used."""
    from takzero.players import NetworkPlayer

    return NetworkPlayer.load(str(path), simulations=simulations, seed=seed, device=device)


def _player_nodes(player: Any) -> int | None:
    sims = getattr(player, "simulations", None)
    return int(sims) if sims is not None else None


# ---------------------------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------------------------


class TEIEngine:
    """The protocol state machine. ``out(line)`` receives every line the engine prints (without
    newline); :meth:`run` reads commands from a text stream until ``quit`` or end of input.

    Args:
        model: path of a model (exported file or checkpoint) or None for ``player``.
        player: baseline spec (``players.make_player``) played without a model.
        fallback: baseline for sizes the model cannot play (None: ``player``; ``"none"``: refuse).
        nodes: default simulations per move (``Nodes`` option); None: the player's own count.
        seed: seed given to the player at every ``teinewgame``.
        device: torch device for the network ('cpu', 'cuda', 'auto').
        out: where lines go (default: stdout, flushed).
        model_loader: builds the network player from (path, nodes, seed, device) (tests may swap).

    Raises (constructor only) whatever ``model_loader`` raises for a bad ``model``, ValueError for
    a bad player spec.
    """

    def __init__(
        self,
        model: str | None = None,
        player: str = DEFAULT_PLAYER,
        fallback: str | None = None,
        nodes: int | None = None,
        seed: int = 0,
        device: str = "cpu",
        out: Callable[[str], None] | None = None,
        model_loader: Callable[..., Any] = load_network_player,
    ) -> None:
        self._out = out or _stdout_line
        self._out_lock = threading.Lock()
        self.seed = int(seed)
        self.device = device
        self.model_loader = model_loader
        self.player_spec = player
        check_spec(player)  # validate early
        self.fallback_spec = fallback if fallback is not None else player
        if self.fallback_spec != "none":
            check_spec(self.fallback_spec)
        self.model_path: str | None = None
        self.network: Any = None
        self.half_komi = 0
        self.size = DEFAULT_SIZE
        self.baseline: BasePlayer = make_player(player, seed=self.seed)
        self.nodes_default = nodes
        if model:
            self.network = self._load(model, nodes)
            self.model_path = str(model)
            self.size = int(self.network.model_size)
        if self.nodes_default is None:
            self.nodes_default = _player_nodes(self.network or self.baseline) or 200
        self.start = Position.start(self.size, half_komi=self.half_komi)
        self.moves: list[int] = []
        self.position = self.start.copy()
        self._player: Any = None
        self._synced: tuple[Position, list[int]] | None = None
        self._worker: threading.Thread | None = None
        self._stop = threading.Event()
        self._infinite = False
        self._quit = False
        self._select_player(announce=False)

    # -- output ----------------------------------------------------------------------------

    def send(self, line: str) -> None:
        """Print one line (thread-safe)."""
        with self._out_lock:
            self._out(line)

    def info(self, text: str) -> None:
        self.send(f"info string {text}")

    # -- players ---------------------------------------------------------------------------

    def _load(self, path: str, nodes: int | None) -> Any:
        """Load the network player and run a one-simulation search, so that compiling and
        loading happen before ``readyok``, not in the first timed ``go``."""
        sims = nodes if nodes is not None else 400
        net = self.model_loader(path, sims, self.seed, self.device)
        warm = getattr(net, "think", None)
        if warm is not None:
            warm(Position.start(int(net.model_size)), nodes=1)
        return net

    def _select_player(self, announce: bool = True) -> None:
        """Pick the player for ``self.size``: the network if it plays this size, else the
        fallback (or none)."""
        if self.network is None:
            self._player = self.baseline
        elif int(self.network.model_size) == self.size:
            self._player = self.network
        elif self.fallback_spec == "none":
            self._player = None
            if announce:
                self.info(
                    f"the model plays {self.network.model_size}x{self.network.model_size} only "
                    f"and Fallback is none: cannot play {self.size}x{self.size}"
                )
        else:
            self._player = make_player(self.fallback_spec, seed=self.seed)
            if announce:
                self.info(
                    f"the model plays {self.network.model_size}x{self.network.model_size} only; "
                    f"playing {self.size}x{self.size} with the baseline {self.fallback_spec}"
                )
        if self._player is not None:
            self._player.reset(self.size, self.half_komi, self.seed)
        self._synced = None

    def _sync_player(self) -> None:
        """Tell the player the moves since its last position (tree reuse), or reset its tree."""
        p = self._player
        if p is None:
            return
        if self._synced is not None:
            start, moves = self._synced
            if start == self.start and self.moves[: len(moves)] == moves:
                new = self.moves[len(moves) :]
                pos = self.start.copy()
                for code in moves:
                    pos.make(code)
                for code in new:
                    p.observe(pos.copy(), code)
                    pos.make(code)
                self._synced = (self.start.copy(), list(self.moves))
                return
        p.reset(self.size, self.half_komi, None)
        pos = self.start.copy()
        for code in self.moves:
            p.observe(pos.copy(), code)
            pos.make(code)
        self._synced = (self.start.copy(), list(self.moves))

    # -- main loop -------------------------------------------------------------------------

    def run(self, stream: TextIO) -> None:
        """Read and handle commands from ``stream`` until ``quit`` or end of input (which acts
        like ``quit``: a running search is stopped and answered)."""
        while not self._quit:
            line = stream.readline()
            if not line:
                break
            self.handle(line)
        self._finish_search(stop=True)

    def handle(self, line: str) -> None:
        """Handle one command line (never raises; problems become ``info string``)."""
        try:
            line = "".join(ch if ch.isprintable() or ch.isspace() else "?" for ch in line)
            tokens = line.strip().split()
            if not tokens:
                return
            cmd = tokens[0]
            if self._searching():
                if cmd == "stop":
                    self._stop.set()
                    self._finish_search()
                    return
                if cmd == "quit":
                    self._quit = True
                    self._finish_search(stop=True)
                    return
                if cmd == "isready" and self._infinite:
                    self.send("readyok")
                    return
                if self._infinite:
                    self.info(f"'{cmd}' during go infinite: stopping the search first")
                    self._finish_search(stop=True)
                else:
                    self._finish_search()
            handler = getattr(self, f"_cmd_{cmd}", None)
            if handler is None:
                self.info(f"unknown command '{cmd}'")
                return
            handler(tokens[1:])
        except Exception as e:  # noqa: BLE001 - the engine must survive anything
            self.info(f"error: {type(e).__name__}: {e}")

    # -- commands --------------------------------------------------------------------------

    def _cmd_tei(self, args: list[str]) -> None:
        who = self.network if self.network is not None else self.baseline
        for line in format_id(f"{ENGINE_NAME} {who.name}", ENGINE_AUTHOR):
            self.send(line)
        self.send(format_option("HalfKomi", "spin", 0, *HALF_KOMI_RANGE))
        self.send(format_option("Nodes", "spin", self.nodes_default, 1, MAX_NODES))
        self.send(format_option("Model", "string", self.model_path or "<empty>"))
        self.send(format_option("Fallback", "string", self.fallback_spec))
        self.send(format_option("Seed", "spin", self.seed, 0, 2147483647))
        self.send("teiok")

    def _cmd_isready(self, args: list[str]) -> None:
        self.send("readyok")

    def _cmd_stop(self, args: list[str]) -> None:
        return None  # no search running: nothing to stop

    def _cmd_quit(self, args: list[str]) -> None:
        self._quit = True

    def _cmd_setoption(self, args: list[str]) -> None:
        text = " ".join(args)
        try:
            name, value = parse_setoption(args)
        except TEIProtocolError as e:
            self.info(str(e))
            return
        key = name.lower()
        if key == "halfkomi":
            try:
                hk = int(value)
            except ValueError:
                self.info(f"setoption: HalfKomi must be an integer, got '{value}'")
                return
            lo, hi = HALF_KOMI_RANGE
            if not lo <= hk <= hi:
                self.info(f"setoption: HalfKomi must be in {lo}..{hi}, got {hk}")
                return
            self.half_komi = hk
            # The current game goes on under the new komi; the player starts a fresh tree.
            start = Position.from_tps(self.start.to_tps(), half_komi=hk)
            self._new_position(start, self.moves)
            self._synced = None
            self._check_model_komi()
        elif key == "nodes":
            try:
                n = int(value)
                if not 1 <= n <= MAX_NODES:
                    raise ValueError
            except ValueError:
                self.info(f"setoption: Nodes must be an integer in 1..{MAX_NODES}, got '{value}'")
                return
            self.nodes_default = n
        elif key == "seed":
            try:
                self.seed = int(value)
            except ValueError:
                self.info(f"setoption: Seed must be an integer, got '{value}'")
        elif key == "model":
            self._set_model(value)
        elif key == "fallback":
            spec = value.strip()
            if spec != "none":
                try:
                    check_spec(spec)
                except ValueError as e:
                    self.info(f"setoption: Fallback: {e}")
                    return
            self.fallback_spec = spec
            self._select_player(announce=False)
        else:
            self.info(f"setoption: unknown option '{name}' ({text})")

    def _set_model(self, value: str) -> None:
        path = value.strip()
        if path in ("", "<empty>"):
            self.network = None
            self.model_path = None
            self._select_player(announce=False)
            return
        try:
            net = self._load(path, self.nodes_default)
        except Exception as e:  # noqa: BLE001 - report and keep the old model
            self.info(f"setoption: cannot load model '{path}': {e}; keeping the previous player")
            return
        self.network = net
        self.model_path = path
        self._select_player(announce=True)

    def _check_model_komi(self) -> None:
        if self._player is None or self._player is not self.network:
            return
        hk = getattr(self.network, "model_half_komi", None)
        if hk is not None and hk != self.half_komi:
            self.info(
                f"the model was trained for komi {hk / 2:g}; playing komi {self.half_komi / 2:g}"
            )

    def _cmd_teinewgame(self, args: list[str]) -> None:
        size = self.size
        if args:
            try:
                size = int(args[0])
            except ValueError:
                size = -1
            if size not in STANDARD_RESERVES:
                self.info(
                    f"teinewgame: board size must be 3..8, got '{args[0]}'; "
                    f"keeping {self.size}x{self.size}"
                )
                size = self.size
        else:
            self.info(f"teinewgame: no size given; playing {self.size}x{self.size}")
        self.size = size
        self.start = Position.start(size, half_komi=self.half_komi)
        self.moves = []
        self.position = self.start.copy()
        self._select_player(announce=True)
        self._check_model_komi()

    def _new_position(self, start: Position, moves: list[int]) -> None:
        size_changed = start.size != self.size
        self.size = start.size
        self.start = start
        self.moves = list(moves)
        pos = start.copy()
        for code in moves:
            pos.make(code)
        self.position = pos
        if size_changed:
            self._select_player(announce=True)

    def _cmd_position(self, args: list[str]) -> None:
        try:
            start, codes = parse_position(args, self.size, self.half_komi)
        except TEIProtocolError as e:  # the previous position stays
            self.info(str(e))
            return
        self._new_position(start, codes)

    def _cmd_go(self, args: list[str]) -> None:
        limits, problems = parse_go(args)
        for p in problems:
            self.info(p)
        pos = self.position.copy()
        if pos.is_over:
            self.info(f"the game is over ({pos.result}, {pos.result.reason}); there is no move")
            self.send(format_bestmove(None))
            return
        if self._player is None:
            self.info(
                f"cannot play {self.size}x{self.size}: the model plays "
                f"{self.network.model_size}x{self.network.model_size} and Fallback is none"
            )
            self.send(format_bestmove(None))
            return
        self._sync_player()
        side = pos.side_to_move
        seconds = limits.budget_seconds(side)
        nodes = limits.nodes
        if nodes is None and seconds is None and not limits.infinite:
            nodes = self.nodes_default
        self._stop.clear()
        self._infinite = limits.infinite
        self._worker = threading.Thread(
            target=self._search, args=(self._player, pos, nodes, seconds), daemon=True
        )
        self._worker.start()

    # -- searching -------------------------------------------------------------------------

    def _searching(self) -> bool:
        return self._worker is not None

    def _finish_search(self, stop: bool = False) -> None:
        """Wait for the running search (setting the stop flag first if ``stop``)."""
        w = self._worker
        if w is None:
            return
        if stop:
            self._stop.set()
        w.join()
        self._worker = None
        self._infinite = False

    def _search(self, player: Any, pos: Position, nodes: int | None, seconds: float | None) -> None:
        t0 = time.perf_counter()
        reported: list[PlayerMove] = []

        def progress(pm: PlayerMove, total: int) -> None:
            reported[:] = [pm]
            self.send(format_info(pos, pm, time.perf_counter() - t0, total))

        try:
            pm = player.think(
                pos, nodes=nodes, seconds=seconds, stop=self._stop, on_progress=progress
            )
            if not reported or reported[0] is not pm:
                self.send(format_info(pos, pm, time.perf_counter() - t0, pm.nodes))
            move = pos.ptn(pm.code)
        except Exception as e:  # noqa: BLE001 - answer anyway: a legal move beats silence
            codes = pos.legal_move_codes()
            self.info(f"search failed ({type(e).__name__}: {e}); playing the first legal move")
            move = pos.ptn(int(codes[0]))
        self.send(format_bestmove(move))


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _stdout_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m takzero.tei",
        description="takzero as a TEI engine (reads commands on stdin, answers on stdout).",
        epilog=help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", help="exported model (model.pt / model.onnx) or checkpoint")
    p.add_argument(
        "--player",
        default=DEFAULT_PLAYER,
        help=f"player without --model: {spec_syntax()} (default {DEFAULT_PLAYER})",
    )
    p.add_argument(
        "--fallback",
        help="player spec for sizes the model does not play, or 'none' to refuse (default: --player)",
    )
    p.add_argument(
        "--nodes",
        "--simulations",
        dest="nodes",
        type=int,
        help="simulations per move when go gives no limit (Nodes option)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the player (Seed option)")
    p.add_argument("--device", default="cpu", help="torch device for the network (cpu, cuda, auto)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (default 1: batch-1 searches gain nothing from more; "
        "0 leaves torch's default)",
    )
    p.add_argument("--commands", help="read commands from this file instead of stdin")
    args = p.parse_args(argv)
    if args.nodes is not None and args.nodes < 1:
        p.error(f"--nodes must be >= 1, got {args.nodes}")
    if args.seed < 0:
        p.error(f"--seed must be >= 0, got {args.seed}")
    if args.threads < 0:
        p.error(f"--threads must be >= 0, got {args.threads}")
    return args


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: build the engine, then serve stdin until ``quit``. Returns the exit
    status (2 when the model or player given on the command line cannot be used)."""
    args = _parse_args(argv)
    if args.threads and args.model:
        import torch

        torch.set_num_threads(args.threads)
    try:
        engine = TEIEngine(
            model=args.model,
            player=args.player,
            fallback=args.fallback,
            nodes=args.nodes,
            seed=args.seed,
            device=args.device,
        )
    except Exception as e:  # noqa: BLE001 - a clear message instead of a traceback
        print(f"takzero.tei: cannot start: {e}", file=sys.stderr)
        return 2
    if args.commands:
        try:
            f = open(args.commands, encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as e:
            print(f"takzero.tei: cannot read --commands {args.commands}: {e.strerror}", file=sys.stderr)
            return 2
        with f:
            engine.run(f)
    else:
        engine.run(sys.stdin)
    return 0


def command_line(model: str | None = None, **options: Any) -> list[str]:
    """The argv to start this engine as a subprocess (for the match runner and tests):
    ``[sys.executable, '-m', 'takzero.tei', ...]`` with ``--model`` and ``--<key> value``."""
    cmd = [sys.executable, "-m", "takzero.tei"]
    if model:
        cmd += ["--model", str(model)]
    for key, value in options.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    return cmd


def command_string(model: str | None = None, **options: Any) -> str:
    """:func:`command_line` joined for a shell / ``--engine`` argument."""
    return shlex.join(command_line(model, **options))


if __name__ == "__main__":
    sys.exit(main())
