"""Numba extensions for the search kernels: views without a memory owner and software prefetch.

* ``unowned(a)`` / ``unowned_row(a, i)``: every array that numba passes to a non-inlined function
  (``make_move``, ``generate_moves``, ...) gets an atomic reference-count increment and decrement;
  on the hot path that costs as much as the rules themselves. The step kernels therefore work on
  views without a memory owner (``carray`` over the same buffer), for which those updates are
  no-ops. The owning arrays stay alive in the Python object for the whole call.
* ``prefetch(a, i, j)`` / ``prefetch_write(a, i, j)``: ``llvm.prefetch`` of the cache line of
  ``a[i, j]`` (2-D array), so that independent loads overlap instead of waiting one after the
  other; no effect on results.

In plain Python (``NUMBA_DISABLE_JIT=1``) ``unowned`` returns its argument, ``unowned_row`` the row
and the prefetches do nothing.
"""

from __future__ import annotations

from llvmlite import ir
from numba import carray, types
from numba.extending import intrinsic, overload

__all__ = ["prefetch", "prefetch_write", "unowned", "unowned_row"]


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


@overload(unowned, inline="always")
def _unowned_impl(a):
    def impl(a):
        return carray(_pointer_like(a.ctypes.data, a), a.shape)

    return impl


@overload(unowned_row, inline="always")
def _unowned_row_impl(a, i):
    def impl(a, i):
        return carray(_pointer_like(a.ctypes.data + i * a.strides[0], a), (a.shape[1],))

    return impl


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
