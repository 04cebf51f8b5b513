"""Calling a compiled kernel many times without numba's argument typing on every call.

A numba dispatcher types every argument of every call to choose the compiled version. For arrays
and numbers numba has a fast path in C; a namedtuple of arrays (the search's ``Trees``, ``Games``
and ``Leaves``) is typed in Python, field by field: 60-80% of a step kernel's call overhead, about
40-60 us a call on this machine's cores against the 3-10 us of the same arrays passed one by one
(``scripts/bench_dispatch.py``). The search calls ``select_kernel`` and ``expand_backup_kernel``
once per network call (thousands of times a second in play), and that typing holds the GIL, so
with two search workers it is also time the other worker waits.

:class:`BoundKernel` wraps a dispatcher and calls the compiled version's entry point directly
(numba's ``Dispatcher.overloads[signature].entry_point``: the same machine code, the same
unboxing of the arguments; only the choice of the version is skipped) once it knows the
arguments' types. Those are found cheaply: a namedtuple (or structured array) argument is typed
once per object (kept in a small table by identity, since the search's are built once and live as
long as the search), an array by its dtype, dimensions, layout and writeability, a number by its
Python type. An
argument it cannot type this way (anything else), or a combination without a compiled version
yet, goes through the dispatcher as before (which compiles it). Results are those of the
dispatcher, bit for bit: the same compiled function runs.

Under ``NUMBA_DISABLE_JIT=1`` a kernel is a plain function and is called as it is.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["BoundKernel"]

_NPY_VOID = np.dtype([("x", np.int8)]).num  # the type number of structured dtypes
#: the array flags that make up numba's array type besides dtype and dimensions: C and Fortran
#: contiguity (the layout), alignment and writeability (``numpy.ndarray.flags.num`` bits)
_FLAG_BITS = 0x1 | 0x2 | 0x100 | 0x400

#: Namedtuple and structured-array arguments typed and kept per kernel (by identity; the oldest
#: dropped first): a search passes a few (its trees, its games, two leaf buffers, its packed
#: settings), so a handful is enough and a replaced tree does not stay alive for long.
KNOWN_OBJECTS = 12


class BoundKernel:
    """A numba-compiled function called through its compiled version's entry point.

    ``kernel(*args)`` returns what ``dispatcher(*args)`` returns. Keyword arguments are not
    supported (the step kernels take none). Not thread-safe to *first* call from two threads at
    once with new argument objects (the tables are plain dicts); the search calls its kernels
    under its lock.
    """

    def __init__(self, dispatcher: Callable[..., Any]) -> None:
        self.dispatcher = dispatcher
        self._overloads = getattr(dispatcher, "overloads", None)  # None: a plain function
        self._typeof = getattr(dispatcher, "typeof_pyval", None)
        self._objects: OrderedDict[int, tuple[Any, int]] = OrderedDict()  # id -> (object, token)
        self._tokens: dict[Any, int] = {}  # numba type -> token
        self._entries: dict[tuple, Callable[..., Any]] = {}
        #: calls that went through the dispatcher (first calls, unknown argument kinds)
        self.slow_calls = 0

    def _registered(self, a: Any) -> Any:
        """The token of object ``a``'s numba type (typed once per object, kept by identity), or
        None without a dispatcher to type it."""
        known = self._objects.get(id(a))
        if known is not None and known[0] is a:
            return known[1]
        if self._typeof is None:
            return None
        t = self._typeof(a)
        token = self._tokens.setdefault(t, len(self._tokens))
        self._objects[id(a)] = (a, token)  # kept alive: its id is not reused while listed
        while len(self._objects) > KNOWN_OBJECTS:
            self._objects.popitem(last=False)
        return token

    def _type_of(self, a: Any) -> Any:
        """A small hashable key that stands for the numba type of ``a`` (equal keys, equal
        types), or None where this cheap typing does not apply. Hashing numba's own types costs
        as much as typing, so the keys are plain: an array of a builtin dtype by the dtype's
        number, byte order, dimensions and flags (layout, writeability, alignment); a namedtuple or a
        structured array by a token of its type (:meth:`_registered`); a number by its class."""
        if isinstance(a, np.ndarray):
            d = a.dtype
            if d.num == _NPY_VOID:  # a structured dtype
                return ("s", self._registered(a))
            return (d.num, d.isnative, a.ndim, a.flags.num & _FLAG_BITS)
        if isinstance(a, tuple):
            token = self._registered(a)
            return None if token is None else ("t", token)
        if isinstance(a, (bool, int, float, np.integer, np.floating, np.bool_)):
            return type(a)
        return None

    def __call__(self, *args: Any) -> Any:
        if self._overloads is None:
            return self.dispatcher(*args)
        key = tuple([self._type_of(a) for a in args])
        entry = self._entries.get(key)
        if entry is not None:
            return entry(*args)
        self.slow_calls += 1
        out = self.dispatcher(*args)
        typeof = self._typeof
        if typeof is not None and None not in key and ("t", None) not in key and ("s", None) not in key:
            signature = tuple(typeof(a) for a in args)
            compiled = self._overloads.get(signature)
            if compiled is not None:
                self._entries[key] = compiled.entry_point
        return out
