"""The TEI engine's options as one table: :data:`OPTIONS`, one :class:`Option` row each (name,
type, start value, range, the engine attribute it sets and, where setting it does more, its
setter), as python-chess's ``engine.Option`` describes an engine's options. The ``option`` lines
of ``tei``, the checks of ``setoption`` and the engine's start values all read it
(:mod:`takzero.protocols.tei.engine`), so a new option is one row. A row with ``search=`` names a
field of :class:`takzero.search.SearchConfig`: its value is checked by ``SearchConfig`` as well and
handed to every player that searches with one (``set_search``), with no setter or player code of
its own.

Each option is checked against the range it advertises; a value outside it, or not a number, is
refused with ``info string`` and the old value is kept. The options, in the order ``tei``
announces them:

- ``HalfKomi`` (spin -20..20): half points added to black's flat count; its default is the
  komi the model was trained for (its ``half_komi``: checkpoint or export metadata), else 0. Also
  settable in ``teinewgame`` (:mod:`takzero.protocols.tei.engine`). A komi other than the model's
  gives one ``info string``
  (once per komi and model). PTN Ninja reads this option's range as the komis the engine plays.
- ``Nodes`` (spin 1..``MAX_NODES``, 10^8): simulations per move when ``go`` gives no limit.
- ``MultiPV`` (spin 1..32): how many best moves ``info`` reports (one line each, ``multipv K``).
- ``TreeNodes`` (spin 100000..:data:`MAX_TREE_NODES`, 10^8; a value whose tree could take
  more than the memory free for it at :data:`TREE_BYTES_PER_NODE` bytes a node is refused too,
  in one line naming the most that fits and what is free (:class:`MemoryBudget`: the machine's
  memory, or the process's address-space limit, less what the trees of the other engines of the
  process hold: the WebSocket server's connections share one budget)):
  the node budget of one search tree, the memory bound UCI engines call
  ``Hash`` (counted in nodes, not megabytes: a network tree node is
  ``takzero.search.config.BYTES_PER_NODE`` bytes, a UCT node one simulation). A full network
  tree ends the search (``info string`` says so: later simulations would only back frozen
  leaves up again, overstating the nodes); a full UCT tree scores new positions by rollouts
  without storing them.
- ``MoveOverhead`` (spin 0..5000, ms): kept back from every time budget for process and pipe
  latency.
- ``Seed`` (spin 0..2147483647): the players' seed, applied at every ``teinewgame``.
- ``Threads`` (spin 1..64): CPU threads of the search: with 2 or more, two search workers each
  select, evaluate and back up a batch of leaves, their network calls at once, each with
  ``Threads // 2`` onnxruntime (and torch) threads; with 1, one loop and the network on one
  thread; ``--threads`` sets it at start-up.
- ``Backend`` (combo auto, int8, onnx, torch; a runtime the model cannot run in, e.g. a
  TorchScript file in onnx or int8, is refused and the old one kept): the network's runtime
  (``takzero.players.network.play_evaluator``): ``auto`` (``AUTO_PLAY_BACKEND``: int8 in
  onnxruntime on the CPU where the model allows, float32 onnxruntime where it cannot be
  quantized), ``int8`` (the network quantized to int8,
  ``takzero.nn.quantize``, calibrated on the positions the checkpoint carries or on games of its
  own policy; a second or so the first time), ``onnx`` (float32) or ``torch``; ``--backend``
  sets it at start-up.
- ``Batch`` (spin 0..32): positions per network call of the network search (leaves selected
  with virtual loss); 0 (default) chooses by the limit
  (``takzero.players.network.auto_leaves``: 16, fewer when the limit allows under 1,600 nodes, so a
  search keeps 100 network calls); 1 is one
  simulation per network call.
- ``Model`` (string): path of an exported model or checkpoint; setting it loads it (``<empty>``:
  no model; an empty value is refused, the model kept). A checkpoint is read weights-only: one whose
  pickle would run code is refused with
  an ``info string`` naming it, and the previous player stays (README, "Which model files are
  safe to take from a stranger": a TorchScript file holds code).
- ``Fallback`` (string): the player for board sizes the model does not play, a player spec of
  ``takzero.players.registry`` such as ``uct:200`` (at most ``MAX_NODES`` = 10^8 simulations, as
  ``Nodes``), or ``none`` to refuse such sizes.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from takzero.io.machine import machine_memory
from takzero.players.network import PLAY_BACKENDS
from takzero.protocols.tei.lines import MAX_NODES, MOVE_OVERHEAD_MS, format_option
from takzero.search.config import SearchConfig

#: The engine an option reads and sets: a :class:`takzero.protocols.tei.engine.TEIEngine` (named,
#: not imported: the engine imports this table).
Engine = Any

__all__ = [
    "DEFAULT_TREE_NODES",
    "MAX_LEAVES",
    "MAX_SEED",
    "MAX_THREADS",
    "MAX_TREE_NODES",
    "MemoryBudget",
    "OPTIONS",
    "OPTION_TYPES",
    "SEARCH_FIELDS",
    "TREE_BYTES_PER_NODE",
    "Option",
    "search_settings",
]

#: Default of the ``TreeNodes`` option (network: 4e6 * 28 bytes = 112 MB per tree, committed as
#: used; a 5x5 search at 10,000 simulations/s fills about 0.6M nodes a second).
DEFAULT_TREE_NODES = 4_000_000
#: Most ``TreeNodes`` (a network tree of 10^8 nodes is 2.8 GB; a UCT tree of as many, some 9 GB).
MAX_TREE_NODES = 100_000_000
#: Bytes per tree node that ``TreeNodes`` is checked with against the machine's memory: an upper
#: estimate of a node of either player's tree (network: ``BYTES_PER_NODE`` = 28; UCT: five int64
#: node arrays, its path and an edge of five 8-byte fields, 96).
TREE_BYTES_PER_NODE = 96
#: Most ``Seed`` (the players' seeds are 31-bit).
MAX_SEED = 2**31 - 1
#: Most ``Threads`` (CPU threads of the network).
MAX_THREADS = 64
#: Most ``Batch`` (positions per network call of a network search; 0: automatic).
MAX_LEAVES = 32


#: The fields of :class:`takzero.search.SearchConfig`, which an option's ``search`` may name.
SEARCH_FIELDS = frozenset(f.name for f in dataclasses.fields(SearchConfig))


def search_settings(engine: Engine) -> dict[str, Any]:
    """The values of the options with ``search`` in ``engine``, by search field: what
    :class:`takzero.protocols.tei.seat.PlayerSeat` hands its players."""
    return {o.search: getattr(engine, o.attr) for o in OPTIONS.values() if o.search is not None}


#: The option types of UCI (and so of TEI), as python-chess's ``engine.Option.type`` names them.
OPTION_TYPES = ("spin", "check", "combo", "string", "button")


@dataclass(frozen=True)
class Option:
    """One TEI option, a row of :data:`OPTIONS` (the fields of python-chess's ``engine.Option``:
    name, type, default, min, max, var; plus where its value lives in the engine).

    Args:
        name: the name as announced and as ``setoption name`` gives it (matched case-insensitively).
        type: one of :data:`OPTION_TYPES`. ``spin``: an integer in ``min..max``; ``check``:
            ``true``/``false``; ``combo``: one of ``var``; ``string``: any text (the setter checks
            it); ``button``: no value (the setter is called with None).
        attr: the :class:`~takzero.protocols.tei.engine.TEIEngine` attribute that holds the value
            (read for the ``option`` line and for the "keeping ..." of a refused value; written by
            ``setoption`` unless ``setter`` is given).
        default: the value a new engine starts with (None: the constructor sets ``attr`` from its
            arguments, as for ``Nodes``, ``Seed``, ``Threads``, ``Model`` and ``Fallback``).
        min, max: the range of a ``spin`` (announced and checked).
        var: the choices of a ``combo``.
        setter: ``setter(engine, value)`` instead of setting ``attr``, for options whose change does
            more (reconfigure the players, load a model, restart the tree).
        shown: how the current value is written in the ``option`` line (default ``str``).
        search: a field of :class:`takzero.search.SearchConfig` the option sets in the players'
            search, generically: ``setoption`` checks the value against ``SearchConfig`` too
            (refused with ``info string``, the old value kept), keeps it in ``attr`` and hands
            every such option's value to each player that searches with a ``SearchConfig``
            (``set_search(**fields)``, :class:`takzero.players.network.NetworkPlayer`), now and
            whenever a player is made or loaded; players without one ignore it. It needs a
            ``default``: the value the players search with from the start.

    Raises ValueError (at construction) for an unknown type, a spin without a range, a combo
    without choices, or a ``search`` that is no field of ``SearchConfig``.
    """

    name: str
    type: str
    attr: str
    default: object = None
    min: int | None = None
    max: int | None = None
    var: tuple[str, ...] = ()
    setter: Callable[[Engine, Any], None] | None = field(default=None, compare=False)
    shown: Callable[[object], str] = field(default=str, compare=False)
    search: str | None = None

    def __post_init__(self) -> None:
        if self.search is not None and self.search not in SEARCH_FIELDS:
            raise ValueError(f"option {self.name}: search must name a field of SearchConfig, got {self.search!r}")
        if self.search is not None and self.default is None:
            raise ValueError(f"option {self.name}: an option with search needs its default (the players' value "
                             "at the start)")
        if self.type not in OPTION_TYPES:
            raise ValueError(f"option {self.name}: type must be one of {OPTION_TYPES}, got {self.type!r}")
        if self.type == "spin" and (self.min is None or self.max is None):
            raise ValueError(f"option {self.name}: a spin needs min and max")
        if self.type == "combo" and not self.var:
            raise ValueError(f"option {self.name}: a combo needs its choices (var)")

    def parse(self, text: str) -> Any:
        """The value ``setoption ... value <text>`` sets: an int for a spin, a bool for a check,
        the choice for a combo, ``text`` unchanged for a string, None for a button. Raises
        ValueError, with the message to print, when ``text`` is not a value of the option."""
        shown = text if len(text) <= 40 else text[:37] + "..."
        if self.type == "spin":
            assert self.min is not None and self.max is not None
            try:
                value = int(text.strip())
            except ValueError:
                value = None
            if value is None or not self.min <= value <= self.max:
                raise ValueError(
                    f"setoption: {self.name} must be an integer in {self.min}..{self.max}, got '{shown}'"
                )
            return value
        if self.type == "check":
            word = text.strip().lower()
            if word not in ("true", "false"):
                raise ValueError(f"setoption: {self.name} must be true or false, got '{shown}'")
            return word == "true"
        if self.type == "combo":
            for choice in self.var:
                if choice.lower() == text.strip().lower():
                    return choice
            raise ValueError(f"setoption: {self.name} must be one of {', '.join(self.var)}, got '{shown}'")
        if self.type == "button":
            return None
        return text

    def value(self, engine: Engine) -> Any:
        """The option's current value in ``engine``."""
        return getattr(engine, self.attr)

    def set(self, engine: Engine, value: Any) -> None:
        """Apply a parsed value to ``engine`` (its setter, else the attribute)."""
        if self.search is not None:
            try:
                SearchConfig(**{self.search: value})
            except ValueError as e:
                engine.info(f"setoption: {self.name}: {e}; keeping {self.text(engine)}")
                return
        if self.setter is not None:
            self.setter(engine, value)
        else:
            setattr(engine, self.attr, value)
        if self.search is not None:
            engine._configure_all()

    def text(self, engine: Engine) -> str:
        """The current value as the ``option`` line writes it (``true``/``false`` for a check)."""
        value = self.value(engine)
        if self.type == "check":
            return "true" if value else "false"
        return self.shown(value)

    def line(self, engine: Engine) -> str:
        """The ``option name ... type ...`` line announced after ``tei``."""
        if self.type == "button":
            return f"option name {self.name} type button"
        return format_option(self.name, self.type, self.text(engine), self.min, self.max, self.var)


def _reconfiguring(attr: str) -> Callable[[Engine, object], None]:
    """A setter that sets ``attr`` and applies it to every player the engine holds."""

    def setter(engine: Engine, value: object) -> None:
        setattr(engine, attr, value)
        engine._configure_all()

    return setter


#: The engine's options in the order ``tei`` announces them, by lower-case name. A new option is
#: one row (and, when it is more than a value the engine reads, its setter); one that sets a
#: field of the players' search is one row with ``search=`` (tests/test_tei_options.py walks it).
OPTIONS: dict[str, Option] = {
    o.name.lower(): o
    for o in (
        Option("HalfKomi", "spin", "half_komi", default=0, min=-20, max=20,
               setter=lambda e, v: e._set_half_komi(v)),
        Option("Nodes", "spin", "nodes_default", min=1, max=MAX_NODES),
        Option("MultiPV", "spin", "multipv", default=1, min=1, max=32),
        Option("TreeNodes", "spin", "tree_nodes", default=DEFAULT_TREE_NODES, min=100_000,
               max=MAX_TREE_NODES, setter=lambda e, v: e._set_tree_nodes(int(v))),
        Option("MoveOverhead", "spin", "move_overhead", default=MOVE_OVERHEAD_MS, min=0, max=5000),
        Option("Seed", "spin", "seed", min=0, max=MAX_SEED),
        Option("Threads", "spin", "threads", min=1, max=MAX_THREADS,
               setter=_reconfiguring("threads")),
        Option("Batch", "spin", "batch", default=0, min=0, max=MAX_LEAVES,
               setter=_reconfiguring("batch")),
        Option("Backend", "combo", "backend", default="auto", var=PLAY_BACKENDS,
               setter=lambda e, v: e._set_backend(str(v))),
        Option("Model", "string", "model_path", setter=lambda e, v: e._set_model(str(v)),
               shown=lambda v: str(v) if v else "<empty>"),
        Option("Fallback", "string", "fallback_spec",
               setter=lambda e, v: e._set_fallback(str(v).strip())),
    )
}



GIB = 2**30


def _address_space_free() -> int | None:
    """Bytes the process may still map under its address-space limit (``RLIMIT_AS``, as
    ``ulimit -v`` sets it), or None without such a limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        mapped = 0
    return max(0, soft - mapped)


class MemoryBudget:
    """The memory the search trees of the TEI engines of one process may take together: each
    engine holds ``TreeNodes * TREE_BYTES_PER_NODE`` bytes of it (:meth:`hold`; the WebSocket
    server gives every connection's engine the same budget, so 8 connections cannot each take the
    whole machine), given back when its session ends (:meth:`release`, or when the engine is
    garbage-collected). Thread-safe.

    Args:
        total: bytes of the budget; None: the machine's memory
            (:func:`takzero.io.machine.machine_memory`, the container's limit where lower), read
            at each check. Either way a process address-space limit (``RLIMIT_AS``) bounds what
            is free too.
    """

    def __init__(self, total: int | None = None) -> None:
        self._total = total
        self._held: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def total(self) -> int:
        """Bytes of the whole budget."""
        return int(self._total) if self._total is not None else machine_memory()

    def _others(self, owner: Any) -> tuple[int, int]:
        """(bytes, count) held by the engines other than ``owner`` (lock held)."""
        others = [n for o, n in self._held.items() if o is not owner]
        return sum(others), len(others)

    def free(self, owner: Any) -> int:
        """Bytes ``owner`` may hold: the total less what the others hold, at most what the
        address-space limit leaves (plus what ``owner`` holds now: its old tree goes when the
        budget changes)."""
        with self._lock:
            return self._free(owner)

    def _free(self, owner: Any) -> int:
        held, _ = self._others(owner)
        free = max(0, self.total() - held)
        room = _address_space_free()
        if room is not None:
            free = min(free, room + self._held.get(owner, 0))
        return free

    def hold(self, owner: Any, nbytes: int, force: bool = False) -> bool:
        """Make ``owner`` hold ``nbytes`` (instead of what it held): True, or False (nothing
        changed) when more than it held and more than :meth:`free`. ``force``: hold it whatever
        is free (an engine's start value: an engine always starts)."""
        with self._lock:
            if force or nbytes <= self._held.get(owner, 0) or nbytes <= self._free(owner):
                self._held[owner] = int(nbytes)
                return True
            return False

    def release(self, owner: Any) -> None:
        """``owner`` holds nothing any more."""
        with self._lock:
            self._held.pop(owner, None)

    def refusal(self, owner: Any, nbytes: int) -> str:
        """Why ``nbytes`` of tree does not fit, for the one line of a refused ``setoption``:
        what it takes, what is free and why, and the most ``TreeNodes`` that fits."""
        with self._lock:
            free = self._free(owner)
            held, count = self._others(owner)
            total = self.total()
            room = _address_space_free()
        why = f"of this machine's {total / GIB:.1f} GiB"
        if count:
            why += f", {held / GIB:.1f} GiB held by {count} other connection{'s' * (count != 1)}"
        if room is not None and room + self._held.get(owner, 0) <= max(0, total - held):
            why += f"; the process's address-space limit leaves {room / GIB:.1f} GiB"
        most = free // TREE_BYTES_PER_NODE
        return (f"its tree could take {nbytes / GIB:.1f} GiB ({TREE_BYTES_PER_NODE} bytes a node) "
                f"and {free / GIB:.1f} GiB is free ({why}): at most {most} nodes now")
