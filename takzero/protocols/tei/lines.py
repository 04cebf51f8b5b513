"""The text of the TEI (Tak Engine Interface) protocol lines, one implementation of each, shared by
the engine (``takzero.tei``) and the match runner's client (``takzero.protocols.tei.match``).

The protocol is the one of ``tak-rules.md`` (UCI with ``tei`` in place of ``uci``). Here:

* the handshake: ``id name <name>`` / ``id author <author>`` (:func:`format_id`,
  :func:`parse_id_name`), ``option name <Name> type <kind> default <v> [min <a>] [max <b>]``
  (:func:`format_option`, :func:`parse_option_name`) and ``setoption name <Name> value <v>``
  (:func:`format_setoption`, :func:`parse_setoption`); TEI version 1's announcement of the
  sizes and komis an engine plays, ``size <s1> [<s2> ...] halfkomi <k1> [<k2> ...]``, one line
  per group of sizes sharing the same komis, between the ``id`` lines and the options
  (:func:`format_sizes`, :func:`parse_sizes`; the form PTN Ninja's ``src/bots/tei.js`` reads:
  a ``size`` line makes it treat the engine as version 1, send ``teinewgame size <s> halfkomi
  <k>`` and no longer derive the komis from a ``HalfKomi`` option that comes after it);
* ``teinewgame <size>`` and the PTN Ninja form ``teinewgame size <size> halfkomi <k>``:
  :func:`parse_teinewgame` (engine);
* ``position startpos|tps <board> <side> <move> [moves m1 m2 ...]``: :func:`format_position`
  (client) and :func:`parse_position` (engine);
* ``go [nodes N] [movetime MS] [wtime MS btime MS [winc MS binc MS]] [infinite]``:
  :class:`SearchLimits`, :func:`format_go` (client) and :func:`parse_go` (engine), and the
  engine's time budget of a ``go`` (:meth:`SearchLimits.budget_seconds`);
* ``info depth D nodes N time MS nps X [score cp C] [wdl W D L] pv m1 m2 ...``:
  :func:`format_info` (engine), with the score mapping :func:`value_to_cp`;
* ``bestmove <ptn>`` / ``bestmove (none)``: :func:`format_bestmove` (engine) and
  :func:`parse_bestmove` (client).

The command loop and its state (options, the current game, the search thread) stay in
``takzero.tei``; the processes, clocks and forfeits in ``takzero.protocols.tei.match``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from takzero.game.moves import MoveError
from takzero.game.position import Position, TPSError
from takzero.players.base import PlayerMove
from takzero.search.limit import Limit

__all__ = [
    "MAX_MS",
    "MAX_NODES",
    "MOVE_OVERHEAD_MS",
    "SearchLimits",
    "TEIProtocolError",
    "clip",
    "format_bestmove",
    "format_go",
    "format_id",
    "format_info",
    "format_option",
    "format_position",
    "format_setoption",
    "format_sizes",
    "parse_bestmove",
    "parse_go",
    "parse_id_name",
    "parse_option_name",
    "parse_position",
    "parse_setoption",
    "parse_sizes",
    "parse_teinewgame",
    "value_to_cp",
]

#: The largest node count a ``go nodes`` (or the engine's ``Nodes`` option) asks for.
MAX_NODES = 100_000_000
#: Milliseconds kept back from every time budget for process and pipe latency.
MOVE_OVERHEAD_MS = 30
#: The largest time (ms) a ``go`` parameter is taken at (larger values are capped, saying so:
#: 2**31 - 1 ms is 24.8 days, beyond any clock and within what a timer can wait).
MAX_MS = 2**31 - 1


#: The most characters of a token (a move, a word, a value) that an error message quotes.
CLIP_CHARS = 40


def clip(text: str, limit: int = CLIP_CHARS) -> str:
    """``text`` as an error message quotes it: whole when at most ``limit`` characters, else its
    start, ``...`` and its length (``'aaaa... (4000000 characters)'``), so that a huge token is
    never echoed back whole."""
    if len(text) <= limit:
        return text
    return f"{text[: max(1, limit - 3)]}... ({len(text)} characters)"


class TEIProtocolError(ValueError):
    """A protocol line that cannot be used; the message says what was wrong (the engine prints it
    as ``info string``)."""


# ---------------------------------------------------------------------------------------------
# Handshake: id, option, setoption
# ---------------------------------------------------------------------------------------------


def format_id(name: str, author: str) -> list[str]:
    """The ``id name`` and ``id author`` lines an engine answers ``tei`` with."""
    return [f"id name {name}", f"id author {author}"]


def parse_id_name(line: str) -> str | None:
    """The name of an ``id name <name>`` line (stripped); None for any other line."""
    if not line.startswith("id name "):
        return None
    return line[len("id name ") :].strip()


def format_option(
    name: str,
    kind: str,
    default: object,
    lo: int | None = None,
    hi: int | None = None,
    var: Sequence[str] = (),
) -> str:
    """``option name <name> type <kind> default <default>``, then ``min <lo>`` and ``max <hi>``
    when given, then ``var <choice>`` for each choice of a combo (UCI's order)."""
    line = f"option name {name} type {kind} default {default}"
    if lo is not None:
        line += f" min {lo}"
    if hi is not None:
        line += f" max {hi}"
    for choice in var:
        line += f" var {choice}"
    return line


def parse_option_name(line: str) -> str | None:
    """The option name of an ``option name <Name> type ...`` line (as written, stripped); None for
    any other line."""
    if not line.startswith("option name "):
        return None
    return line[len("option name ") :].split(" type ")[0].strip()


def format_sizes(sizes: Iterable[int], half_komis: Iterable[int]) -> str:
    """``size <s1> <s2> ... halfkomi <k1> <k2> ...``: the board sizes and the half komis an
    engine plays on them (TEI version 1). Raises ValueError when either list is empty, a size is
    outside 3..8 or a value is not an integer."""
    s = [int(x) for x in sizes]
    k = [int(x) for x in half_komis]
    if not s or not k:
        raise ValueError(f"a size line needs at least one size and one half komi, got {s} {k}")
    if any(not 3 <= x <= 8 for x in s):
        raise ValueError(f"board sizes must be 3..8, got {s}")
    return f"size {' '.join(map(str, s))} halfkomi {' '.join(map(str, k))}"


def parse_sizes(line: str) -> tuple[list[int], list[int]] | None:
    """(sizes, half komis) of a ``size ... halfkomi ...`` line; None for any other line. Raises
    TEIProtocolError for a size line that is not of that form (a word that is not an integer,
    an empty list)."""
    words = line.split()
    if not words or words[0] != "size":
        return None
    if "halfkomi" not in words:
        raise TEIProtocolError(f"a size line without halfkomi: {line!r}")
    cut = words.index("halfkomi")
    try:
        sizes, komis = [int(w) for w in words[1:cut]], [int(w) for w in words[cut + 1 :]]
    except ValueError:
        raise TEIProtocolError(f"a size line with a word that is not an integer: {line!r}") from None
    if not sizes or not komis:
        raise TEIProtocolError(f"a size line with no size or no half komi: {line!r}")
    return sizes, komis


def format_setoption(name: str, value: object) -> str:
    """``setoption name <name> value <value>``."""
    return f"setoption name {name} value {value}"


def parse_setoption(args: list[str]) -> tuple[str, str]:
    """The option name and value of a ``setoption`` command (``args``: the tokens after it; both
    may hold spaces; the value is ``""`` without ``value``). Raises TEIProtocolError without
    ``name`` or without an option name."""
    if not args or args[0] != "name":
        raise TEIProtocolError("setoption: expected 'setoption name <Name> value <value>'")
    rest = args[1:]
    if "value" in rest:
        k = rest.index("value")
        name, value = " ".join(rest[:k]), " ".join(rest[k + 1 :])
    else:
        name, value = " ".join(rest), ""
    if not name.lower():
        raise TEIProtocolError("setoption: no option name given")
    return name, value


# ---------------------------------------------------------------------------------------------
# position
# ---------------------------------------------------------------------------------------------


def format_position(start: Position, moves: Sequence[str]) -> str:
    """The ``position`` line for the game from ``start`` with the PTN ``moves``: ``startpos`` when
    ``start`` is the empty board of its size and komi, else ``tps <tps>``; always ``moves``
    (``position startpos moves`` with no moves is valid)."""
    std = Position.start(start.size, half_komi=start.half_komi)
    head = "position startpos" if start == std else f"position tps {start.to_tps()}"
    return f"{head} moves {' '.join(moves)}".rstrip() if moves else f"{head} moves"


def parse_position(args: list[str], size: int, half_komi: int) -> tuple[Position, list[int]]:
    """The start position and move codes of a ``position`` command (``args``: the tokens after
    it); ``startpos`` is the empty ``size`` board, and both starts get ``half_komi``. Raises
    TEIProtocolError (the message starts with ``position:``) for a bad TPS or an illegal or
    malformed move."""
    if not args:
        raise TEIProtocolError("position: expected 'startpos' or 'tps <board> <side> <move>'")
    if "moves" in args:
        k = args.index("moves")
        head, move_tokens = args[:k], args[k + 1 :]
    else:
        head, move_tokens = args, []
    if not head:
        raise TEIProtocolError(
            "position: expected 'startpos' or 'tps <board> <side> <move>' before 'moves'; "
            "position not changed"
        )
    if head[0] == "startpos":
        if len(head) > 1:
            raise TEIProtocolError(f"position: unexpected '{clip(' '.join(head[1:]))}' after startpos")
        start = Position.start(size, half_komi=half_komi)
    elif head[0] == "tps":
        tps = " ".join(head[1:])
        try:
            start = Position.from_tps(tps, half_komi=half_komi)
        except (TPSError, ValueError) as e:
            raise TEIProtocolError(f"position: bad TPS: {clip(str(e), 200)}; position not changed") from None
    else:
        raise TEIProtocolError(
            f"position: expected 'startpos' or 'tps', got '{clip(head[0])}'; position not changed"
        )
    pos = start.copy()
    codes: list[int] = []
    for i, tok in enumerate(move_tokens):
        try:
            code = pos.check_move(tok)
        except MoveError as e:
            why = str(e) if len(tok) <= CLIP_CHARS else "not a move (too long)"
            raise TEIProtocolError(
                f"position: move {i + 1} '{clip(tok)}': {clip(why, 200)}; position not changed"
            ) from None
        pos.make(code)
        codes.append(code)
    return start, codes


# ---------------------------------------------------------------------------------------------
# teinewgame
# ---------------------------------------------------------------------------------------------


def parse_teinewgame(args: list[str]) -> tuple[str | None, str | None, list[str]]:
    """The size and half-komi texts of a ``teinewgame`` command (``args``: the tokens after it),
    each None when not given, and a list of complaints for ``info string``. Accepted forms:
    ``teinewgame <size>`` (tak-rules.md, Tiltak), ``teinewgame size <size> halfkomi <k>`` (what
    PTN Ninja sends to engines of TEI version 1) and ``teinewgame <size> halfkomi <k>``. The
    values are not checked here (the engine checks them against its options' ranges)."""
    size: str | None = None
    half_komi: str | None = None
    problems: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        key = tok.lower()
        if key in ("size", "halfkomi"):
            if i + 1 >= len(args):
                problems.append(f"teinewgame: '{clip(tok)}' needs a value")
                break
            if key == "size":
                size = args[i + 1]
            else:
                half_komi = args[i + 1]
            i += 2
            continue
        if size is None:
            size = tok
        else:
            problems.append(f"teinewgame: unexpected '{clip(tok)}' ignored")
        i += 1
    return size, half_komi, problems


# ---------------------------------------------------------------------------------------------
# go
# ---------------------------------------------------------------------------------------------


@dataclass
class SearchLimits:
    """What a ``go`` command asks for. Times in milliseconds; None = not given."""

    nodes: int | None = None
    movetime: int | None = None
    wtime: int | None = None
    btime: int | None = None
    winc: int | None = None
    binc: int | None = None
    infinite: bool = False

    def budget_seconds(self, side: int, overhead_ms: int = MOVE_OVERHEAD_MS) -> float | None:
        """Seconds to think for the side to move (0 white, 1 black), or None for no time limit.

        ``movetime`` minus ``overhead_ms`` (the engine's ``MoveOverhead``, default
        :data:`MOVE_OVERHEAD_MS`: process, pipe and answer latency); with a clock,
        ``remaining / 20 + inc * 3/4`` capped at half the remaining time, minus the overhead. At
        least 5 ms (:meth:`takzero.search.limit.Limit.move_seconds`, the one rule). The cap keeps a
        clock from running out whatever the increment: each move
        spends at most half of what is left (plus the overhead), so ``remaining`` shrinks
        geometrically instead of reaching zero, and with an increment the clock settles where a
        move's budget equals the increment.
        """
        return self.to_limit(overhead_ms).move_seconds(side)

    def to_limit(self, overhead_ms: int = MOVE_OVERHEAD_MS, stop=None) -> Limit:
        """These limits as a search :class:`~takzero.search.limit.Limit` (seconds; the clock
        rule is :meth:`Limit.move_seconds`), with ``stop`` (a ``threading.Event``)."""
        def sec(ms: int | None) -> float | None:
            return None if ms is None else max(0.0, ms / 1000.0)

        return Limit(
            nodes=self.nodes, seconds=sec(self.movetime), white_clock=sec(self.wtime),
            black_clock=sec(self.btime), white_inc=sec(self.winc) or 0.0,
            black_inc=sec(self.binc) or 0.0, overhead=max(0, overhead_ms) / 1000.0, stop=stop,
            infinite=self.infinite,
        )


def parse_go(tokens: list[str]) -> tuple[SearchLimits, list[str]]:
    """Parse the arguments of ``go`` (the tokens after it). Returns the limits and a list of
    complaints (unknown tokens, bad numbers) for ``info string``; nothing raises. A value is a
    whole number in ASCII digits (``1e3``, ``1.5``, ``nan``, ``-5``, ``0`` nodes: said and
    ignored); one over the most (:data:`MAX_NODES` nodes, :data:`MAX_MS` ms) is capped there,
    saying so."""
    limits = SearchLimits()
    problems: list[str] = []
    keys = {"nodes", "movetime", "wtime", "btime", "winc", "binc"}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "infinite":
            limits.infinite = True
            i += 1
            continue
        if tok in ("depth", "movestogo", "mate"):  # accepted, not used by an MCTS engine
            i += 2
            problems.append(f"go: '{tok}' is not supported and was ignored")
            continue
        if tok == "ponder":
            problems.append("go: 'ponder' is not supported and was ignored")
            i += 1
            continue
        if tok not in keys:
            problems.append(f"go: unknown parameter '{clip(tok)}' ignored")
            i += 1
            continue
        if i + 1 >= len(tokens):
            problems.append(f"go: '{tok}' needs a number")
            break
        raw = tokens[i + 1]
        least = 1 if tok == "nodes" else 0
        digits = raw[1:] if raw[:1] in "+-" else raw
        if not (digits.isascii() and digits.isdigit()):
            problems.append(f"go: '{tok}' takes a whole number (ASCII digits), got '{clip(raw)}': ignored")
            i += 2
            continue
        value = int(raw) if len(digits) <= 40 else (-1 if raw[0] == "-" else 10**40)  # no huge int()
        if value < least:
            problems.append(f"go: '{tok}' must be at least {least}, got '{clip(raw)}': ignored")
            i += 2
            continue
        most = MAX_NODES if tok == "nodes" else MAX_MS
        if value > most:
            unit = "nodes" if tok == "nodes" else f"ms, {most / 86_400_000:.1f} days"
            problems.append(f"go: '{tok}' {clip(raw)} is over the most, {most} ({unit}): capped there")
            value = most
        setattr(limits, tok, value)
        i += 2
    return limits, problems


def format_go(limits: SearchLimits) -> str:
    """The ``go`` line of ``limits``: ``go`` then each limit that is set, in the order nodes,
    movetime, wtime, btime, winc, binc, infinite (``go nodes 7``, ``go wtime 59000 btime 61000
    winc 500 binc 500``)."""
    parts = ["go"]
    for key in ("nodes", "movetime", "wtime", "btime", "winc", "binc"):
        value = getattr(limits, key)
        if value is not None:
            parts += [key, str(value)]
    if limits.infinite:
        parts.append("infinite")
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------
# info
# ---------------------------------------------------------------------------------------------


def value_to_cp(value: float) -> int:
    """Centipawn-like score of a value in [-1, 1] (side to move's view):
    ``round(111.714640912 * tan(1.5620688421 * v))``; monotone, 0 at 0, about +-12,700 at +-1."""
    v = max(-1.0, min(1.0, float(value)))
    return int(round(111.714640912 * math.tan(1.5620688421 * v)))


def _pv_text(position: Position, pv: Iterable[int]) -> list[str]:
    """PTN of the legal prefix of ``pv`` from ``position``."""
    out: list[str] = []
    pos = position.copy()
    for code in pv:
        if pos.is_over:
            break
        try:
            text = pos.ptn(int(code))
            pos = pos.play(int(code))
        except (MoveError, ValueError):
            break
        out.append(text)
    return out


def format_info(
    position: Position,
    pm: PlayerMove,
    seconds: float,
    nodes: int | None = None,
    multipv: int | None = None,
) -> str:
    """One ``info`` line for the answer ``pm`` found in ``seconds`` (``nodes`` overrides
    ``pm.nodes``): depth (= PV length), ``multipv K`` when ``multipv`` is given (the rank of
    this line among the best moves, 1 first, as in UCI), nodes, time (ms), nps, score: ``mate M`` when the
    player proved a forced road (``pm.info["mate"]`` plies to the road; M = the mover's moves,
    ``(plies + 1) // 2``, as UCI counts mate in moves), else cp (if a value is known),
    wdl permille (if known), pv (the move itself when the player gave no PV)."""
    n = pm.nodes if nodes is None else nodes
    ms = int(round(seconds * 1000))
    nps = int(n / seconds) if seconds > 0 else 0
    pv = _pv_text(position, pm.pv or (pm.code,))
    if not pv:
        pv = [position.ptn(pm.code)]
    parts = ["info", "depth", str(len(pv))]
    if multipv is not None:
        parts += ["multipv", str(multipv)]
    parts += ["nodes", str(n), "time", str(ms), "nps", str(nps)]
    if pm.value is not None:
        mate = pm.info.get("mate") if pm.info else None
        if isinstance(mate, numbers.Integral) and mate:
            parts += ["score", "mate", str((int(mate) + 1) // 2)]
        else:
            parts += ["score", "cp", str(value_to_cp(pm.value))]
    if pm.wdl is not None:
        w = int(round(1000 * pm.wdl[0]))
        loss = int(round(1000 * pm.wdl[2]))
        w = max(0, min(1000, w))
        loss = max(0, min(1000 - w, loss))
        parts += ["wdl", str(w), str(1000 - w - loss), str(loss)]
    parts += ["pv", *pv]
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------
# bestmove
# ---------------------------------------------------------------------------------------------


def format_bestmove(move: str | None) -> str:
    """``bestmove <move>``, or ``bestmove (none)`` when there is no move to play."""
    return f"bestmove {move if move is not None else '(none)'}"


def parse_bestmove(line: str) -> str | None:
    """The move text of a ``bestmove`` line (``(none)`` included, as sent); None when the line is
    not a ``bestmove`` line. Raises TEIProtocolError for ``bestmove`` without a move."""
    parts = line.split()
    if not parts or parts[0] != "bestmove":
        return None
    if len(parts) < 2:
        raise TEIProtocolError("'bestmove' without a move")
    return parts[1]
