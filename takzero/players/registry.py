"""Player specs: the one table of player kinds that the command lines, the TEI engine, the
evaluator and the training config read.

A spec is ``KIND`` or ``KIND:ARG`` (the kind is case-insensitive):

===================  ============================================================================
``random``           a uniformly random legal move
``greedy``           one-ply tactics: win in one, else block a win in one, else the most flats
``uct[:N]``          UCT with random rollouts, N simulations per move (default 1000)
``model:PATH[:N]``   a fixed network (exported model or checkpoint) with N MCTS simulations per
                     move (default 400); the last ``:N`` is read as the count when it is digits
===================  ============================================================================

Adding a player kind is one row of :data:`KINDS` (and the player's own module); every help string
and the config check read this table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from takzero.players.base import BasePlayer
from takzero.players.baselines import GreedyPlayer, RandomPlayer
from takzero.players.network import DEFAULT_NETWORK_SIMULATIONS, NetworkPlayer
from takzero.players.uct import DEFAULT_SIMULATIONS, UCTPlayer


@dataclass(frozen=True)
class PlayerKind:
    """One kind of player.

    ``name``: the spec's kind; ``syntax``: how a spec is written; ``help``: one line for help
    texts. ``parse(arg)``: checks the text after the colon (None: no colon) and returns what
    ``build`` needs, raising ValueError for a bad argument. ``build(parsed, seed, simulations)``:
    the player; ``simulations`` is the count to use when the spec gives none (None: the kind's
    default; kinds that do not search ignore it).
    """

    name: str
    syntax: str
    help: str
    parse: Callable[[str | None], object]
    build: Callable[[object, int, int | None], BasePlayer]


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
    if not Path(path).is_file():
        raise ValueError(f"model file not found: {path}")
    return path, sims


def _build_uct(sims: object, seed: int, simulations: int | None) -> BasePlayer:
    n = sims if sims is not None else simulations
    return UCTPlayer(simulations=int(n) if n is not None else DEFAULT_SIMULATIONS, seed=seed)


class ModelFileError(ValueError):
    """A model file that cannot be loaded (unreadable, not a model, or not weights-only): not a
    usage error, so command lines print it as one line, without their usage text."""


def _build_model(parsed: object, seed: int, simulations: int | None) -> BasePlayer:
    path, sims = parsed  # type: ignore[misc]
    n = sims if sims is not None else simulations
    n = int(n) if n is not None else DEFAULT_NETWORK_SIMULATIONS
    try:
        player = NetworkPlayer.load(path, simulations=n, seed=seed)
    except Exception as e:  # noqa: BLE001 - torch/zip/pickle raise many types for a bad file
        raise ModelFileError(f"cannot load model {path}: {e}") from None
    if player.name == NetworkPlayer.name:  # no run name in the file: name it after the file
        player.name = f"model-{Path(path).stem}"
    return player


#: Every player kind, in the order help texts list them.
KINDS: tuple[PlayerKind, ...] = (
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
)  # fmt: skip

_BY_NAME = {k.name: k for k in KINDS}


def spec_syntax() -> str:
    """The specs in one line for help strings: ``'random, greedy, uct[:N], model:PATH[:N]'``."""
    return ", ".join(k.syntax for k in KINDS)


def help_text() -> str:
    """Every kind with its syntax and one line of help (for ``--help`` epilogs)."""
    width = max(len(k.syntax) for k in KINDS) + 2
    return "player specs:\n" + "\n".join(f"  {k.syntax:<{width}}{k.help}" for k in KINDS)


def _parse(spec: str) -> tuple[PlayerKind, object]:
    name, colon, arg = str(spec).partition(":")
    kind = _BY_NAME.get(name.strip().lower())
    if kind is None:
        raise ValueError(f"unknown player '{spec}'; expected one of: {spec_syntax()}")
    try:
        return kind, kind.parse(arg if colon else None)
    except ValueError as e:
        known = spec_syntax()
        raise ValueError(f"unknown player '{spec}' ({e}); expected one of: {known}") from None


def check_spec(spec: str) -> str:
    """Check a player spec without building the player (a ``model`` file must exist, it is not
    loaded). Returns the kind's name. Raises ValueError naming the known kinds."""
    return _parse(spec)[0].name


def make_player(spec: str, seed: int = 0, simulations: int | None = None) -> BasePlayer:
    """The player of a spec (see the module doc), seeded with ``seed``. ``simulations``: the
    count for a searching kind whose spec gives none (``uct``, ``model:PATH``; None: the kind's
    default). Raises ValueError naming the known kinds for a bad spec, or for a model file that
    cannot be loaded."""
    kind, parsed = _parse(spec)
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
    ``model-g5-100``). Raises ValueError for a bad spec."""
    kind, parsed = _parse(spec)
    if kind.name == "model":
        path, sims = parsed  # type: ignore[misc]
        return f"model-{Path(path).stem}" + (f"-{sims}" if sims is not None else "")
    return spec.strip().replace(":", "")


__all__ = [
    "KINDS",
    "ModelFileError",
    "PlayerKind",
    "check_spec",
    "help_text",
    "make_player",
    "model_spec_path",
    "spec_label",
    "spec_syntax",
]
