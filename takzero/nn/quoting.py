"""Quoting values read from files one does not trust, in bounded time and length.

A model file, a checkpoint or an engine's output is a stranger's word also when it is shown: a
self-referencing list whose repr is 2**60 characters (a 440 KB file), a list nested 200,000 deep
(past Python's recursion limit), a run name of a megabyte with newlines and terminal escape
sequences. :func:`short_repr` is what every message quoting such a value uses (never
``f"{value!r:.60}"``, which builds the whole repr before cutting it), :func:`shown` what prints a
string of one on a terminal. Imports nothing of torch (the TEI client quotes an engine with it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["short_repr", "shown"]

#: Items of a container and levels of nesting that :func:`short_repr` writes out.
_REPR_ITEMS = 4
_REPR_DEPTH = 3


def short_repr(value: Any, limit: int = 60) -> str:
    """A repr of ``value`` of at most ``limit`` characters (> 3), for a message quoting a value
    read from a file. Built in time and memory bounded by the limits, whatever ``value`` holds:
    containers (any ``dict``, ``list``, ``tuple``, ``set`` and subclasses) show at most 4 items
    and 3 levels (``[[[...], ...], ...]``), strings and bytes their first characters, a huge
    integer its bit length, a tensor or array its shape and dtype, anything else its type name;
    nothing of ``value``'s own ``__repr__`` runs except for Python numbers. Never raises."""
    try:
        text = _bounded_repr(value, _REPR_DEPTH, limit)
    except Exception:  # noqa: BLE001 - a value whose pieces misbehave: its type is enough
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


def _bounded_repr(x: Any, depth: int, limit: int) -> str:
    """:func:`short_repr`'s walk: at most ``depth`` more levels, strings cut near ``limit``."""
    if x is None or isinstance(x, bool):
        return repr(x)
    if isinstance(x, np.generic):
        x = x.item()
        if isinstance(x, np.generic):  # no Python equivalent (a float128)
            return f"<{type(x).__name__}>"
    if isinstance(x, int):
        return repr(int(x)) if abs(x) < 10**30 else f"<an integer of {x.bit_length()} bits>"
    if isinstance(x, float | complex):
        return repr(x)
    if isinstance(x, str | bytes | bytearray):
        head = repr(x[:limit])
        return head + ("..." if len(x) > limit else "")
    if isinstance(getattr(x, "shape", None), tuple) and hasattr(x, "dtype"):  # an array, a tensor
        kind = "tensor" if type(x).__module__.startswith("torch") else "array"
        return f"<{kind} of shape {list(x.shape)[:8]} {x.dtype}>"
    if isinstance(x, dict | list | tuple | set | frozenset):
        opening, closing = ("{", "}") if isinstance(x, dict | set | frozenset) else (
            ("(", ")") if isinstance(x, tuple) else ("[", "]"))
        if not len(x):
            return opening + closing if not isinstance(x, set | frozenset) else f"{type(x).__name__}()"
        if depth <= 0:
            return f"{opening}...{closing}"
        parts = []
        for i, item in enumerate(x.items() if isinstance(x, dict) else x):
            if i == _REPR_ITEMS:
                parts.append("...")
                break
            if isinstance(x, dict):
                k, v = item
                parts.append(f"{_bounded_repr(k, depth - 1, limit)}: {_bounded_repr(v, depth - 1, limit)}")
            else:
                parts.append(_bounded_repr(item, depth - 1, limit))
        return opening + ", ".join(parts) + closing
    return f"<{type(x).__name__}>"


def shown(value: Any, limit: int = 80) -> str:
    """``value``, a string of a file (a run name, a source name), made fit to print on one
    terminal line: control and other unprintable characters (newlines, the ESC of ANSI colour
    sequences, bidirectional overrides) escaped as ``\\n``, ``\\x1b``, ``\\u202e``, and a string
    longer than ``limit`` characters cut, with its length said (``'abc... (1,846,000
    characters)'``). Anything other than a string is its :func:`short_repr`. Never raises."""
    if not isinstance(value, str):
        return short_repr(value, limit)
    head = value[: limit + 1]
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in head)
    if len(value) <= limit and len(out) <= limit:
        return out
    return f"{out[:limit]}... ({len(value):,} characters)"
