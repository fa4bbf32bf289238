"""LLVM intrinsics for numba kernels: a cache-prefetch hint and a population count.

A NIC's lookup pipeline keeps many packets in flight; a CPU emulating it one packet at a time
stalls on every table miss unless it asks for the next packets' buckets and records early.
The hint never changes results: it only moves cache lines. `popcount` (llvm.ctpop, one POPCNT
instruction on x86-64) lets the ECC check take a half-word's parity in one step.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _emit_prefetch(
    context: Any, builder: Any, aryty: Any, ary_val: Any, indices: list[Any]
) -> None:
    ary = context.make_array(aryty)(context, builder, ary_val)
    ptr = cgutils.get_item_pointer(context, builder, aryty, ary, indices)
    ptr_t = ir.PointerType(ir.IntType(8))
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [ptr_t, i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
    # read (0), high temporal locality (3), data cache (1)
    builder.call(
        fn,
        [
            builder.bitcast(ptr, ptr_t),
            ir.Constant(i32, 0),
            ir.Constant(i32, 3),
            ir.Constant(i32, 1),
        ],
    )


def _prefetch_row(typingctx: Any, arr: Any, row: Any) -> Any:
    """Prefetch the cache line holding arr[row, 0] (2-D) or arr[row] (1-D)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        aryty, rowty = sig.args
        idx = context.cast(builder, args[1], rowty, types.intp)
        zero = context.get_constant(types.intp, 0)
        indices = [idx] + [zero] * (aryty.ndim - 1)
        _emit_prefetch(context, builder, aryty, args[0], indices)
        return context.get_dummy_value()

    return types.void(arr, row), codegen


def _prefetch_at(typingctx: Any, arr: Any, row: Any, col: Any) -> Any:
    """Prefetch the cache line holding arr[row, col] of a 2-D array."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        aryty, rowty, colty = sig.args
        r = context.cast(builder, args[1], rowty, types.intp)
        c = context.cast(builder, args[2], colty, types.intp)
        _emit_prefetch(context, builder, aryty, args[0], [r, c])
        return context.get_dummy_value()

    return types.void(arr, row, col), codegen


def _popcount(typingctx: Any, x: Any) -> Any:
    """Number of set bits of a uint64, as a uint64."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.ctpop(args[0])

    if x == types.uint64:
        return types.uint64(types.uint64), codegen
    return None


#: Typed as Any: numba supplies the typing context when a kernel calls them.
prefetch_row: Any = intrinsic(_prefetch_row)
prefetch_at: Any = intrinsic(_prefetch_at)
popcount: Any = intrinsic(_popcount)

__all__ = ["popcount", "prefetch_at", "prefetch_row"]
