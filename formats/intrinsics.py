"""LLVM-level helpers of the fused kernel (:mod:`.fused`): unaligned 8-byte loads and stores,
software prefetch, a call to a native CRC-32 by address, trailing zeros of a word, and the byte
copies and ORs built on them (numba intrinsics, compiled into their callers).
"""

from __future__ import annotations

# isort: off
from mqtool.formats import kernel as _kernel  # first: it sets NUMBA_CACHE_DIR for numba
# isort: on
from collections.abc import Callable
from typing import Any, cast

import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba import types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros as _tz
from numba.extending import intrinsic

inlined = _kernel.inlined


def _load64_typing(typingctx: object, arr: types.Array, idx: types.Integer) -> object:
    """The 8 bytes at ``arr[idx]`` as one native (little-endian) uint64, unaligned."""
    sig = types.uint64(arr, idx)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(ptr, align=1)

    return sig, codegen


def _store64_typing(typingctx: object, arr: types.Array, idx: types.Integer,
                    val: types.Integer) -> object:
    """Store ``val`` as 8 native bytes at ``arr[idx]``, unaligned."""
    sig = types.void(arr, idx, types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), ir.IntType(64).as_pointer())
        builder.store(args[2], ptr, align=1)
        return context.get_dummy_value()

    return sig, codegen


def _prefetch_typing(typingctx: object, arr: types.Array, idx: types.Integer) -> object:
    """Ask for the cache line of ``arr[idx]`` (``llvm.prefetch``, read, keep): no fault, no
    effect on results."""
    sig = types.void(arr, idx)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(  # type: ignore[no-untyped-call]
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
            "llvm.prefetch.p0i8")
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), i8p)
        builder.call(fn, [ptr, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


def _native_crc_typing(typingctx: object, fn: types.Integer, kind: types.Integer,
                       arr: types.Array, idx: types.Integer, n: types.Integer) -> object:
    """zlib's CRC-32 of ``arr[idx:idx+n]`` by a C function at address ``fn``: ``kind`` 1 is
    ``libdeflate_crc32(uint32, const void *, size_t)``, 2 is zlib's ``crc32(unsigned long,
    const Bytef *, unsigned int)`` (the address is data, so the compiled kernel stays
    cacheable)."""
    sig = types.int64(fn, kind, arr, idx, n)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        fnaddr, kindv, _, idxv, nv = args
        ary = context.make_array(signature.args[2])(context, builder, args[2])
        i8p = ir.IntType(8).as_pointer()
        i32, i64 = ir.IntType(32), ir.IntType(64)
        ptr = builder.bitcast(builder.gep(ary.data, [idxv]), i8p)
        deflate_t = ir.FunctionType(i32, [i32, i8p, i64])
        zlib_t = ir.FunctionType(i64, [i64, i8p, i32])
        out = cgutils.alloca_once(builder, i64)  # type: ignore[no-untyped-call]
        with builder.if_else(builder.icmp_signed("==", kindv, ir.Constant(i64, 1))) as (
            is_deflate, is_zlib
        ):
            with is_deflate:
                f = builder.inttoptr(fnaddr, deflate_t.as_pointer())
                r = builder.call(f, [ir.Constant(i32, 0), ptr, nv])
                builder.store(builder.zext(r, i64), out)
            with is_zlib:
                f = builder.inttoptr(fnaddr, zlib_t.as_pointer())
                r = builder.call(f, [ir.Constant(i64, 0), ptr, builder.trunc(nv, i32)])
                builder.store(builder.and_(r, ir.Constant(i64, 0xFFFFFFFF)), out)
        return builder.load(out)

    return sig, codegen


load64 = cast(Callable[..., Any], intrinsic(_load64_typing))
native_crc = cast(Callable[..., Any], intrinsic(_native_crc_typing))
prefetch = cast(Callable[..., Any], intrinsic(_prefetch_typing))
trailing_zeros = cast(Callable[..., Any], _tz)  # of a non-zero uint64 (llvm.cttz)
store64 = cast(Callable[..., Any], intrinsic(_store64_typing))


@inlined
def copy8(dst: np.ndarray, q: int, src: np.ndarray, p: int, n: int) -> None:
    """``dst[q:q+n] = src[p:p+n]``, 8 bytes at a time (``dst`` may get up to 7 more bytes
    written after ``q + n``: callers leave that room; ``src`` is never read past its end)."""
    if p + n + 8 <= src.shape[0]:
        k = 0
        while k < n:
            store64(dst, q + k, load64(src, p + k))
            k += 8
    else:
        for k in range(n):
            dst[q + k] = src[p + k]


@inlined
def or_bytes(src: np.ndarray, p: int, n: int) -> int:
    """OR of ``src[p:p+n]`` (>= 0x80: not ASCII)."""
    acc = np.uint64(0)
    k = 0
    if p + n + 8 <= src.shape[0]:
        while k + 8 <= n:
            acc |= load64(src, p + k)
            k += 8
    while k < n:
        acc |= np.uint64(src[p + k])
        k += 1
    return int(acc & np.uint64(0x8080808080808080))
