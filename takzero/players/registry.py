"""Player specs: the one table of player kinds that the command lines, the TEI engine, the
evaluator and the training config read.

A spec is ``KIND`` or ``KIND:ARG`` (the kind is case-insensitive):

===================  ============================================================================
``random``           a uniformly random legal move
``greedy``           one-ply tactics: win in one, else block a win in one, else the most flats
``uct[:N]``          UCT with random rollouts, N simulations per move (default 1000)
``model:PATH[:N]``   a fixed network (exported model or checkpoint) with N MCTS simulations per
                     move (default 400); the last ``:N`` is read as the count when it is digits
``tei:[OPTS:]CMD``   an external TEI engine, started with the command line CMD (any TEI engine,
                     e.g. ``tei:nodes=1000:python -m takzero.tei --player uct:1000``); OPTS, each
                     followed by a colon, before CMD: ``nodes=N`` (``go nodes N``) or
                     ``movetime=MS`` (``go movetime MS``; the default, 1000 ms), and
                     ``name=LABEL`` (its name in TensorBoard tags and files)
===================  ============================================================================

Adding a player kind is one row of :data:`KINDS` (and the player's own module); every help string
and the config check read this table.

A ``tei:`` spec is an *engine* kind (``PlayerKind.engine``): the engine is a process that the
protocols layer starts and stops (``takzero.protocols.tei.player``, over the TEI client of
``takzero.protocols.tei.match``), so it is a baseline of ``takzero.evaluate`` and of the training
evaluator (``evaluator.baselines``) only. Here it is parsed and checked (:func:`engine_spec`,
``check_spec(spec, engines=True)``) and labelled; :func:`make_player` refuses it, and so does
:func:`check_spec` unless asked with ``engines=True``.

One more spec is no player kind: ``generation:-K``, a *ladder* baseline of the training
evaluator (``evaluator.baselines``): the run's own network of K baseline checks before the one
being measured (``takzero.pipeline.gating.GatingEvaluator`` keeps them). Nothing here builds it;
:func:`ladder_offset` reads K, :func:`spec_label` labels it (``generation-K``), and the training
config's check accepts it (``takzero.config.EvaluatorConfig.check``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from takzero.players.base import BasePlayer
from takzero.players.baselines import GreedyPlayer, RandomPlayer
from takzero.players.network import DEFAULT_NETWORK_SIMULATIONS, NetworkPlayer, player_search
from takzero.players.uct import DEFAULT_SIMULATIONS, UCTPlayer

#: What a kind's ``parse`` returns and its ``build`` takes.
Parsed = TypeVar("Parsed")


@dataclass(frozen=True)
class PlayerKind(Generic[Parsed]):
    """One kind of player.

    ``name``: the spec's kind; ``syntax``: how a spec is written; ``help``: one line for help
    texts. ``parse(arg)``: checks the text after the colon (None: no colon) and returns what
    ``build`` needs, raising ValueError for a bad argument. ``build(parsed, seed, simulations)``:
    the player; ``simulations`` is the count to use when the spec gives none (None: the kind's
    default; kinds that do not search ignore it). ``engine``: an external process started by the
    protocols layer (``tei:``), not built here (see the module doc).
    """

    name: str
    syntax: str
    help: str
    parse: Callable[[str | None], Parsed]
    build: Callable[[Parsed, int, int | None], BasePlayer]
    engine: bool = False


def _no_argument(kind: str) -> Callable[[str | None], None]:
    def parse(arg: str | None) -> None:
        if arg is not None:  # "random:" and "random:3" are errors, not "random"
            raise ValueError(f"'{kind}' takes no argument")

    return parse


def _is_count_text(text: str) -> bool:
    """Whether ``text`` is written as a count: ASCII digits only (``"²".isdigit()`` is true too)."""
    return text.isascii() and text.isdigit()


def _count(arg: str) -> int:
    if not _is_count_text(arg) or int(arg) < 1:
        raise ValueError(f"the simulation count must be a whole number >= 1, got '{arg}'")
    return int(arg)


def _parse_uct(arg: str | None) -> int | None:
    if arg is None:
        return None
    return _count(arg)  # "uct:" (nothing after the colon) is an error, not the default


def _split_model_arg(arg: str) -> tuple[str, str | None]:
    """``PATH[:N]`` -> (PATH, N text or None): the text after the last ``:`` is the count when it
    is digits, or when the whole ``arg`` is no file but the part before that ``:`` is one (then
    a bad count such as ``abc`` or ``-3`` is reported as a bad count, not as a missing file)."""
    path, colon, last = arg.rpartition(":")
    if colon and (_is_count_text(last) or (Path(path).is_file() and not Path(arg).is_file())):
        return path, last
    return arg, None


def _parse_model(arg: str | None) -> tuple[str, int | None]:
    if not arg:
        raise ValueError("'model' needs a path: model:PATH or model:PATH:N")
    path, count = _split_model_arg(arg)
    sims = _count(count) if count is not None else None
    if not Path(path).exists():
        raise ValueError(f"model file not found: {path}")
    if not Path(path).is_file():
        raise ValueError(f"{path}: not a regular file (a folder, a device, a pipe or a socket); a model is a file")
    return path, sims


def _build_uct(sims: int | None, seed: int, simulations: int | None) -> BasePlayer:
    n = sims if sims is not None else simulations
    return UCTPlayer(simulations=int(n) if n is not None else DEFAULT_SIMULATIONS, seed=seed)


class ModelFileError(ValueError):
    """A model file that cannot be loaded (unreadable, not a model, or not weights-only): not a
    usage error, so command lines print it as one line, without their usage text."""


def _build_model(parsed: tuple[str, int | None], seed: int, simulations: int | None) -> BasePlayer:
    path, sims = parsed
    n = sims if sims is not None else simulations
    n = int(n) if n is not None else DEFAULT_NETWORK_SIMULATIONS
    try:
        player = NetworkPlayer.load(path, config=player_search(simulations=n), seed=seed)
    except Exception as e:  # noqa: BLE001 - torch/zip/pickle raise many types for a bad file
        raise ModelFileError(f"cannot load model {path}: {e}") from None
    if player.name == NetworkPlayer.name:  # no run name in the file: name it after the file
        player.name = f"model-{Path(path).stem}"
    return player


#: The most checks back a ``generation:-K`` ladder spec may reach (the evaluator keeps that many).
MAX_LADDER_OFFSET = 100

#: The kind of the ladder spec ``generation:-K`` (not a row of :data:`KINDS`: see the module doc).
LADDER_KIND = "generation"


def ladder_offset(spec: str) -> int | None:
    """K of a ladder spec ``generation:-K`` (the run's network of K baseline checks back; the
    kind case-insensitive), None for any other spec (not checked here).

    Raises:
        ValueError: a ``generation`` spec whose argument is not ``-K`` with K in
            1..:data:`MAX_LADDER_OFFSET`.
    """
    name, _colon, arg = str(spec).partition(":")
    if name.strip().lower() != LADDER_KIND:
        return None
    text = arg.strip()
    if not text.startswith("-") or not _is_count_text(text[1:]) or not 1 <= int(text[1:]) <= MAX_LADDER_OFFSET:
        raise ValueError(f"bad ladder baseline '{spec}': write generation:-K, K in 1..{MAX_LADDER_OFFSET} "
                         "(generation:-1: the network of the baseline check before)")
    return int(text[1:])


#: ``go movetime`` of a ``tei:`` engine whose spec gives no limit (ms).
DEFAULT_ENGINE_MOVETIME_MS = 1000

_ENGINE_OPTION = re.compile(r"(nodes|movetime|name)=([^:\s]*):")
_LABEL_TEXT = re.compile(r"[A-Za-z0-9._+-]+")


@dataclass(frozen=True)
class EngineSpec:
    """A parsed ``tei:[OPTS:]CMD`` spec (see the module doc).

    ``command``: the engine's command line (split with ``shlex.split`` when started);
    ``nodes``: ``go nodes N`` per move, or None; ``movetime``: ``go movetime MS`` per move (ms),
    or None (with ``nodes`` None too: :data:`DEFAULT_ENGINE_MOVETIME_MS`); ``name``: the label
    given with ``name=``, or None."""

    command: str
    nodes: int | None = None
    movetime: int | None = None
    name: str | None = None

    @property
    def label(self) -> str:
        """The name of the engine in TensorBoard tags, PTN tags and file names: ``name=`` when
        given, else ``tei-`` + the command's words (the program without its folder; characters
        other than letters, digits and ``._+-`` as ``-``; at most 40 characters) + the limit
        (``-n1000`` for nodes, ``-mt1000`` for movetime): ``tei:nodes=200:python -m
        takzero.tei --player uct:200`` -> ``tei-python-m-takzero.tei-player-uct-200-n200``."""
        if self.name:
            return self.name
        words = shlex.split(self.command)
        words[0] = Path(words[0]).name
        slug = "-".join(w for w in (re.sub(r"[^A-Za-z0-9._+]+", "-", x).strip("-") for x in words) if w)
        limit = f"n{self.nodes}" if self.nodes is not None else f"mt{self.movetime}"
        return f"tei-{slug[:40].rstrip('-')}-{limit}"


def _parse_engine(arg: str | None) -> EngineSpec:
    """``[nodes=N:|movetime=MS:][name=LABEL:]CMD`` -> :class:`EngineSpec`. Raises ValueError for
    an option given twice, both limits, a limit that is not a whole number >= 1, a bad label, an
    empty command or one that ``shlex`` cannot split (unbalanced quotes)."""
    rest = (arg or "").lstrip()
    opts: dict[str, str] = {}
    while (m := _ENGINE_OPTION.match(rest)) is not None:
        key, value = m.group(1), m.group(2)
        if key in opts:
            raise ValueError(f"'{key}=' is given twice")
        opts[key] = value
        rest = rest[m.end():].lstrip()
    if not rest:
        raise ValueError("'tei' needs the engine's command: tei:[nodes=N:|movetime=MS:][name=LABEL:]COMMAND")
    try:
        words = shlex.split(rest)
    except ValueError as e:
        raise ValueError(f"the engine command cannot be split ({e}): {rest}") from None
    if not words:
        raise ValueError("'tei' needs the engine's command")
    if "nodes" in opts and "movetime" in opts:
        raise ValueError("give nodes= or movetime=, not both")
    limits: dict[str, int] = {}
    for key in ("nodes", "movetime"):
        if key in opts:
            if not _is_count_text(opts[key]) or int(opts[key]) < 1:
                raise ValueError(f"{key}= must be a whole number >= 1, got '{opts[key]}'")
            limits[key] = int(opts[key])
    name = opts.get("name")
    if name is not None and _LABEL_TEXT.fullmatch(name) is None:
        raise ValueError(f"name= must be letters, digits and ._+- only, got '{name}'")
    if not limits:
        limits["movetime"] = DEFAULT_ENGINE_MOVETIME_MS
    return EngineSpec(rest, limits.get("nodes"), limits.get("movetime"), name)


def _build_engine(parsed: EngineSpec, seed: int, simulations: int | None) -> BasePlayer:
    raise ValueError(_engine_refused(f"tei:{parsed.command}"))


def _engine_refused(spec: str) -> str:
    return (f"'{spec}' is an external TEI engine: it plays as a baseline of takzero.evaluate "
            "(--baselines) and of the training evaluator (evaluator.baselines) only")


#: Every player kind, in the order help texts list them.
KINDS: tuple[PlayerKind[Any], ...] = (
    PlayerKind(
        "random", "random", "a uniformly random legal move",
        _no_argument("random"), lambda _a, seed, _n: RandomPlayer(seed),
    ),
    PlayerKind(
        "greedy", "greedy",
        "one-ply tactics: win in one, else block a win in one, else the most flats",
        _no_argument("greedy"), lambda _a, seed, _n: GreedyPlayer(seed),
    ),
    PlayerKind(
        "uct", "uct[:N]",
        f"UCT with random rollouts, N simulations per move (default {DEFAULT_SIMULATIONS})",
        _parse_uct, _build_uct,
    ),
    PlayerKind(
        "model", "model:PATH[:N]",
        "a fixed network (exported model or checkpoint), N MCTS simulations per move "
        f"(default {DEFAULT_NETWORK_SIMULATIONS})",
        _parse_model, _build_model,
    ),
    PlayerKind(
        "tei", "tei:[OPTS:]CMD",
        "an external TEI engine started with the command CMD; OPTS (each followed by ':'): "
        f"nodes=N or movetime=MS per move (default movetime={DEFAULT_ENGINE_MOVETIME_MS}), name=LABEL",
        _parse_engine, _build_engine, engine=True,
    ),
)

_BY_NAME = {k.name: k for k in KINDS}


def _kinds(engines: bool) -> tuple[PlayerKind[Any], ...]:
    return tuple(k for k in KINDS if engines or not k.engine)


def spec_syntax(engines: bool = False) -> str:
    """The specs in one line for help strings: ``'random, greedy, uct[:N], model:PATH[:N]'``
    (``engines``: with ``tei:[OPTS:]CMD``, for the command lines that play engines)."""
    return ", ".join(k.syntax for k in _kinds(engines))


def help_text(engines: bool = False) -> str:
    """Every kind with its syntax and one line of help (for ``--help`` epilogs; ``engines``: the
    engine kinds too)."""
    kinds = _kinds(engines)
    width = max(len(k.syntax) for k in kinds) + 2
    return "player specs:\n" + "\n".join(f"  {k.syntax:<{width}}{k.help}" for k in kinds)


def _parse(spec: str, engines: bool = True) -> tuple[PlayerKind[Any], Any]:
    """The kind of ``spec`` and what its ``parse`` returned (of the kind's own type)."""
    name, colon, arg = str(spec).partition(":")
    kind = _BY_NAME.get(name.strip().lower())
    if kind is None:
        raise ValueError(f"unknown player '{spec}'; expected one of: {spec_syntax(engines)}")
    try:
        parsed = kind.parse(arg if colon else None)
    except ValueError as e:
        known = spec_syntax(engines)
        raise ValueError(f"unknown player '{spec}' ({e}); expected one of: {known}") from None
    if kind.engine and not engines:
        raise ValueError(_engine_refused(str(spec).strip()))
    return kind, parsed


def check_spec(spec: str, engines: bool = False) -> str:
    """Check a player spec without building the player (a ``model`` file must exist, it is not
    loaded; a ``tei`` command is not started). Returns the kind's name. ``engines``: accept the
    engine kinds (``tei:``; for the evaluator's baselines). Raises ValueError naming the known
    kinds, or saying where an engine plays when ``engines`` is False."""
    return _parse(spec, engines)[0].name


def engine_spec(spec: str) -> EngineSpec | None:
    """The :class:`EngineSpec` of a ``tei:`` spec, None for a spec of another kind. Raises
    ValueError for a bad spec."""
    kind, parsed = _parse(spec)
    return parsed if kind.engine else None


def make_player(spec: str, seed: int = 0, simulations: int | None = None) -> BasePlayer:
    """The player of a spec (see the module doc), seeded with ``seed``. ``simulations``: the
    count for a searching kind whose spec gives none (``uct``, ``model:PATH``; None: the kind's
    default). Raises ValueError naming the known kinds for a bad spec, for a model file that
    cannot be loaded, or for an engine spec (``tei:``, started by ``takzero.protocols.tei.player``)."""
    kind, parsed = _parse(spec, engines=False)
    return kind.build(parsed, seed, simulations)


def model_spec_path(spec: str) -> str | None:
    """The PATH of a ``model:PATH[:N]`` spec (not checked: the file may be on another machine),
    None for a spec of another kind or without a path."""
    name, colon, arg = str(spec).partition(":")
    if name.strip().lower() != "model" or not colon or not arg:
        return None
    return _split_model_arg(arg)[0]


def spec_label(spec: str) -> str:
    """A short name of a spec for file names and TensorBoard tags: the spec without colons
    (``uct:200`` -> ``uct200``); a model spec uses the file's stem (``model:runs/g5.pt:100`` ->
    ``model-g5-100``); an engine spec its :attr:`EngineSpec.label`; a ladder spec
    ``generation:-K`` ``generation-K``. Raises ValueError for a bad spec."""
    k = ladder_offset(spec)
    if k is not None:
        return f"{LADDER_KIND}-{k}"
    kind, parsed = _parse(spec)
    if kind.name == "model":
        path, sims = parsed
        return f"model-{Path(path).stem}" + (f"-{sims}" if sims is not None else "")
    if kind.engine:
        return parsed.label
    return spec.strip().replace(":", "")


__all__ = [
    "DEFAULT_ENGINE_MOVETIME_MS",
    "KINDS",
    "LADDER_KIND",
    "MAX_LADDER_OFFSET",
    "EngineSpec",
    "ModelFileError",
    "PlayerKind",
    "check_spec",
    "engine_spec",
    "help_text",
    "ladder_offset",
    "make_player",
    "model_spec_path",
    "spec_label",
    "spec_syntax",
]
