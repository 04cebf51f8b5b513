"""Numba extensions for the search kernels: views without a memory owner and software prefetch.

* ``unowned(a)`` / ``unowned_row(a, i)`` / ``unowned_tuple(t)``: every array that numba passes to
  a non-inlined function (``make_move``, ``generate_moves``, ...) gets an atomic reference-count
  increment and decrement; on the hot path that costs as much as the rules themselves. The step
  kernels therefore work on views without a memory owner (``carray`` over the same buffer), for
  which those updates are no-ops. The owning arrays stay alive in the Python object for the
  whole call. ``unowned_tuple`` does it for every array of a (named) tuple at once, so a kernel
  takes the pools ``Trees`` / ``Games`` whole and passes them on as one object.
* ``prefetch(a, i, j)`` / ``prefetch_write(a, i, j)``: ``llvm.prefetch`` of the cache line of
  ``a[i, j]`` (2-D array), so that independent loads overlap instead of waiting one after the
  other; no effect on results.

Each of ``unowned``, ``unowned_row`` and ``unowned_tuple`` is registered with numba's alias
analysis as returning a view of its first argument (``numba.core.ir_utils.alias_func_extensions``,
the hook numba's own ``reshape`` / ``ravel`` use). Without it numba's dead-code elimination, which
runs after inlining, takes the result for a fresh object: a write ``a[i] = v`` to an array read
from it (``trees = unowned_tuple(trees)``, then ``first_child = trees.first_child`` in a function
inlined with ``inline="always"``) after which that variable is not read again was removed as dead,
and the search lost its expansions (``tests/test_search_rules.py`` checks that no write of the
search is removed).

In plain Python (``NUMBA_DISABLE_JIT=1``) ``unowned`` returns its argument, ``unowned_row`` the row
and the prefetches do nothing.
"""

from __future__ import annotations

from llvmlite import ir
from numba import carray, types
from numba.core import cgutils, ir_utils
from numba.extending import intrinsic, overload
from numba.np.arrayobj import populate_array

__all__ = ["prefetch", "prefetch_write", "unowned", "unowned_row", "unowned_tuple"]


@intrinsic
def _pointer_like(typingctx, addr, arr):
    """Cast the integer ``addr`` to a pointer to ``arr``'s dtype."""
    if not isinstance(addr, types.Integer) or not isinstance(arr, types.Array):
        return None
    ptr_t = types.CPointer(arr.dtype)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(ptr_t))

    return ptr_t(addr, arr), codegen


def unowned(a):
    """A view of the C-contiguous array ``a`` with no memory owner (see the module docstring);
    ``a`` itself in plain Python (``NUMBA_DISABLE_JIT=1``)."""
    return a


def unowned_row(a, i):
    """Row ``i`` of the C-contiguous 2-D array ``a`` as a view with no memory owner."""
    return a[i]


def unowned_tuple(t):
    """The (named) tuple ``t`` of arrays with every array's memory owner cleared (the same
    buffers, shapes and strides; see the module docstring); ``t`` itself in plain Python."""
    return t


@intrinsic
def _unowned_tuple(typingctx, tup):
    """``tup`` (a tuple or named tuple of arrays) rebuilt with each array a view of the same data,
    shape and strides without a memory owner (as ``carray`` makes)."""
    if not isinstance(tup, types.BaseTuple) or not all(
        isinstance(t, types.Array) for t in tup.types
    ):
        return None

    def codegen(context, builder, signature, args):
        out = cgutils.get_null_value(context.get_value_type(signature.return_type))
        for i, ty in enumerate(tup.types):
            src = context.make_array(ty)(context, builder, value=builder.extract_value(args[0], i))
            dst = context.make_array(ty)(context, builder)
            populate_array(dst, data=src.data, shape=src.shape, strides=src.strides,
                           itemsize=src.itemsize, meminfo=None)
            out = builder.insert_value(out, dst._getvalue(), i)
        return out

    return tup(tup), codegen


@overload(unowned, inline="always")
def _unowned_impl(a):
    def impl(a):
        return carray(_pointer_like(a.ctypes.data, a), a.shape)

    return impl


@overload(unowned_tuple)
def _unowned_tuple_impl(t):
    def impl(t):
        return _unowned_tuple(t)

    return impl


@overload(unowned_row, inline="always")
def _unowned_row_impl(a, i):
    def impl(a, i):
        return carray(_pointer_like(a.ctypes.data + i * a.strides[0], a), (a.shape[1],))

    return impl


def _alias_of_first_argument(lhs: str, args: list, alias_map: dict, arg_aliases: set) -> None:
    """numba's alias rule for a function whose result is a view of ``args[0]`` (as its own
    ``_add_alias``): an alias of an argument is an argument alias (its writes are never dead),
    else the two names alias each other."""
    source = args[0].name
    if source in arg_aliases:
        arg_aliases.add(lhs)
    else:
        alias_map.setdefault(source, set()).add(lhs)
        alias_map.setdefault(lhs, set()).add(source)


for _view in (unowned, unowned_row, unowned_tuple):
    ir_utils.alias_func_extensions[(_view.__name__, __name__)] = _alias_of_first_argument


def _make_prefetch_intrinsic(write: int):
    @intrinsic
    def _prefetch_addr(typingctx, addr):
        """Software prefetch (``llvm.prefetch``, high locality) of the cache line at ``addr``."""
        if not isinstance(addr, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            ptr_t = ir.IntType(8).as_pointer()
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [ptr_t, i32, i32, i32])
            fn = builder.module.declare_intrinsic("llvm.prefetch", [ptr_t], fnty)
            builder.call(fn, [builder.inttoptr(args[0], ptr_t), i32(write), i32(3), i32(1)])
            return context.get_dummy_value()

        return types.none(addr), codegen

    return _prefetch_addr


_prefetch_read = _make_prefetch_intrinsic(0)
_prefetch_write = _make_prefetch_intrinsic(1)


def prefetch(a, i, j):
    """Ask the CPU to start loading the cache line of ``a[i, j]`` (2-D array) without waiting for
    it; no effect on results (nothing in plain Python)."""


def prefetch_write(a, i, j):
    """``prefetch`` for a line that is about to be written."""


@overload(prefetch, inline="always")
def _prefetch_impl(a, i, j):
    def impl(a, i, j):
        _prefetch_read(a.ctypes.data + i * a.strides[0] + j * a.strides[1])

    return impl


@overload(prefetch_write, inline="always")
def _prefetch_write_impl(a, i, j):
    def impl(a, i, j):
        _prefetch_write(a.ctypes.data + i * a.strides[0] + j * a.strides[1])

    return impl
