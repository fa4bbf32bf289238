"""LLVM intrinsics for numba kernels: cache-prefetch hints (to read, or to write), a population
count and the ECC check word of a group of record words as vector operations.

A NIC's lookup pipeline keeps many packets in flight; a CPU emulating it one packet at a time
stalls on every table miss unless it asks for the next packets' buckets and records early.
A hint never changes results: it only moves cache lines. A line the pipeline will update (a
record, a completion) is asked for with write intent: PREFETCHW on a host with PRFCHW, as this
one; elsewhere LLVM emits no PREFETCHW and it stays a hint. `popcount` (llvm.ctpop, one POPCNT
instruction on x86-64) lets the ECC check take a half-word's parity in one step.
`check_word_at` / `check_word_of` compute a whole SEC-DED check word (ecc.py's layout) with
one vector XOR reduction and one vector population count over the group's half-words (on
AVX-512: a few instructions instead of two POPCNTs and five more per word); LLVM lowers the
same IR to whatever vector unit the host has, so results never depend on it.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _emit_prefetch(
    context: Any, builder: Any, aryty: Any, ary_val: Any, indices: list[Any], write: bool = False
) -> None:
    ary = context.make_array(aryty)(context, builder, ary_val)
    ptr = cgutils.get_item_pointer(context, builder, aryty, ary, indices)
    ptr_t = ir.PointerType(ir.IntType(8))
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [ptr_t, i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
    # read (0) or write (1), high temporal locality (3), data cache (1)
    builder.call(
        fn,
        [
            builder.bitcast(ptr, ptr_t),
            ir.Constant(i32, 1 if write else 0),
            ir.Constant(i32, 3),
            ir.Constant(i32, 1),
        ],
    )


def _prefetch_row_typer(write: bool) -> Any:
    """Typer of a hint for the cache line holding arr[row, 0] (2-D) or arr[row] (1-D)."""

    def typer(typingctx: Any, arr: Any, row: Any) -> Any:
        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            aryty, rowty = sig.args
            idx = context.cast(builder, args[1], rowty, types.intp)
            zero = context.get_constant(types.intp, 0)
            indices = [idx] + [zero] * (aryty.ndim - 1)
            _emit_prefetch(context, builder, aryty, args[0], indices, write)
            return context.get_dummy_value()

        return types.void(arr, row), codegen

    typer.__name__ = "prefetch_write_row" if write else "prefetch_row"
    return typer


def _prefetch_at_typer(write: bool) -> Any:
    """Typer of a hint for the cache line holding arr[row, col] of a 2-D array."""

    def typer(typingctx: Any, arr: Any, row: Any, col: Any) -> Any:
        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            aryty, rowty, colty = sig.args
            r = context.cast(builder, args[1], rowty, types.intp)
            c = context.cast(builder, args[2], colty, types.intp)
            _emit_prefetch(context, builder, aryty, args[0], [r, c], write)
            return context.get_dummy_value()

        return types.void(arr, row, col), codegen

    typer.__name__ = "prefetch_write_at" if write else "prefetch_at"
    return typer


_I32 = ir.IntType(32)
_I64 = ir.IntType(64)


def _fn(builder: Any, ret: Any, args: list[Any], name: str) -> Any:
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, args), name)


def _check_word(builder: Any, vec: Any, n: int) -> Any:
    """The SEC-DED check word (ecc.py's layout) of the n data words in the vector `vec`.

    X is the XOR of every half-word: the XOR of the words, folded; the 2n parity bits are one
    vector population count of the words seen as 2n 32-bit lanes, tested for odd; P is the
    parity of X, the data (the XOR of the words has the data's parity) and the parity bits.
    """
    vt = ir.VectorType(_I64, n)
    ht = ir.VectorType(_I32, 2 * n)
    acc = builder.call(_fn(builder, _I64, [vt], f"llvm.vector.reduce.xor.v{n}i64"), [vec])
    pc = builder.call(_fn(builder, ht, [ht], f"llvm.ctpop.v{2 * n}i32"), [builder.bitcast(vec, ht)])
    odd = builder.icmp_unsigned("!=", builder.and_(pc, ir.Constant(ht, [1] * (2 * n))),
                                ir.Constant(ht, [0] * (2 * n)))  # fmt: skip
    p = builder.zext(builder.bitcast(odd, ir.IntType(2 * n)), _I64)
    fold = builder.xor(builder.and_(acc, ir.Constant(_I64, 0xFFFF_FFFF)),
                       builder.lshr(acc, ir.Constant(_I64, 32)))  # fmt: skip
    check = builder.or_(fold, builder.shl(p, ir.Constant(_I64, 32)))
    pop = builder.call(_fn(builder, _I64, [_I64], "llvm.ctpop.i64"), [builder.xor(acc, check)])
    par = builder.and_(pop, ir.Constant(_I64, 1))
    return builder.or_(check, builder.shl(par, ir.Constant(_I64, 32 + 2 * n)))


def check_word_at(n: int) -> Any:
    """Intrinsic (rec, row, col) -> check word of the n words rec[row, col:col + n] of a
    2-D uint64 array (C order): one load of exactly those words as an n-lane vector."""

    def typer(typingctx: Any, arr: Any, row: Any, col: Any) -> Any:
        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            aryty, rowty, colty = sig.args
            ary = context.make_array(aryty)(context, builder, args[0])
            r = context.cast(builder, args[1], rowty, types.intp)
            c = context.cast(builder, args[2], colty, types.intp)
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [r, c])
            vp = builder.bitcast(ptr, ir.VectorType(_I64, n).as_pointer())
            return _check_word(builder, builder.load(vp, align=8), n)

        if not (isinstance(arr, types.Array) and arr.ndim == 2 and arr.dtype == types.uint64
                and arr.layout == "C"):  # fmt: skip
            return None
        return types.uint64(arr, row, col), codegen

    return intrinsic(typer)


def _check_word_of(typingctx: Any, words: Any) -> Any:
    """Check word of the data words given as a tuple of uint64 values (held in registers)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        n = len(sig.args[0])
        vec = ir.Constant(ir.VectorType(_I64, n), ir.Undefined)
        for i in range(n):
            vec = builder.insert_element(
                vec, builder.extract_value(args[0], i), ir.Constant(_I32, i)
            )
        return _check_word(builder, vec, n)

    if isinstance(words, types.UniTuple) and words.dtype == types.uint64:
        return types.uint64(words), codegen
    return None


def _popcount(typingctx: Any, x: Any) -> Any:
    """Number of set bits of a uint64, as a uint64."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.ctpop(args[0])

    if x == types.uint64:
        return types.uint64(types.uint64), codegen
    return None


#: Typed as Any: numba supplies the typing context when a kernel calls them.
prefetch_row: Any = intrinsic(_prefetch_row_typer(write=False))
prefetch_write_at: Any = intrinsic(_prefetch_at_typer(write=True))
prefetch_write_row: Any = intrinsic(_prefetch_row_typer(write=True))
popcount: Any = intrinsic(_popcount)
check_word_of: Any = intrinsic(_check_word_of)

__all__ = [
    "check_word_at",
    "check_word_of",
    "popcount",
    "prefetch_row",
    "prefetch_write_at",
    "prefetch_write_row",
]
