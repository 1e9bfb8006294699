"""The compiled-code toolkit of the record readers (numba): the JIT options and numba's cache
directory, big-endian integer reads, byte comparison, UTF-8 and CRC-32 checks over a uint8
buffer, and LLVM-level operations (unaligned 8-byte loads and stores, software prefetch, a call
to a native CRC-32 by address, trailing zeros) with the byte copies and ORs built on them.

Import this module before anything else that compiles: it sets ``NUMBA_CACHE_DIR`` when the
package directory is not writable. Compiled once per machine (``cache=True``; the first call
of a fresh install compiles for a few seconds).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

from mqtool.formats.usercache import user_cache_dir

if "NUMBA_CACHE_DIR" not in os.environ and not os.access(os.path.dirname(__file__), os.W_OK):
    # an install whose files are read-only (a system site-packages): the user's cache
    os.environ["NUMBA_CACHE_DIR"] = str(user_cache_dir("numba"))

import numba as nb  # noqa: E402 - after NUMBA_CACHE_DIR
from llvmlite import ir  # type: ignore[import-untyped]  # noqa: E402
from numba import types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.cpython.unsafe.numbers import trailing_zeros as _tz  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

JIT_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "boundscheck": False}
_Fn = TypeVar("_Fn", bound=Callable[..., Any])


def compiled(fn: _Fn) -> _Fn:
    """``numba.njit`` (cached, no GIL, no bounds checks), keeping the signature for mypy."""
    return cast(_Fn, nb.njit(**JIT_OPTIONS)(fn))


def inlined(fn: _Fn) -> _Fn:
    """A helper compiled into its callers (numba ``inline="always"``: no call per use)."""
    return cast(_Fn, nb.njit(inline="always", **JIT_OPTIONS)(fn))


def _crc_tables() -> np.ndarray:
    """Slicing-by-8 tables of the reflected CRC-32 (zlib's polynomial 0xEDB88320)."""
    t = np.zeros((8, 256), dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        t[0, i] = c
    for i in range(256):
        c = int(t[0, i])
        for k in range(1, 8):
            c = int(t[0, c & 0xFF]) ^ (c >> 8)
            t[k, i] = c
    return t


CRC_TABLES = _crc_tables()


@functools.cache
def native_crc32() -> tuple[int, int]:
    """(address, kind) of a C CRC-32 equal to zlib's, or (0, 0): libdeflate's ``libdeflate_crc32``
    (kind 1: carry-less multiply, many GB/s) when the library is on the machine, else zlib's
    ``crc32`` (kind 2). Used by :func:`.commitlog_arrow.decode` for BODYCRC; the tests check it
    equals ``zlib.crc32``; the slicing-by-8 :func:`crc32` is the fallback."""
    import ctypes
    import ctypes.util

    for name, symbol, kind in (("deflate", "libdeflate_crc32", 1), ("z", "crc32", 2)):
        path = ctypes.util.find_library(name)
        if not path:
            continue
        try:
            fn = getattr(ctypes.CDLL(path), symbol)
        except (OSError, AttributeError):
            continue
        return ctypes.cast(fn, ctypes.c_void_p).value or 0, kind
    return 0, 0


@compiled
def crc32(buf: np.ndarray, start: int, length: int, tables: np.ndarray) -> int:
    """zlib's ``crc32(buf[start:start+length])`` (slicing-by-8)."""
    c = np.uint32(0xFFFFFFFF)
    p = start
    end = start + length
    while p + 8 <= end:
        lo = c ^ (
            np.uint32(buf[p]) | (np.uint32(buf[p + 1]) << 8) | (np.uint32(buf[p + 2]) << 16)
            | (np.uint32(buf[p + 3]) << 24)
        )
        c = (
            tables[7, lo & 0xFF] ^ tables[6, (lo >> 8) & 0xFF]
            ^ tables[5, (lo >> 16) & 0xFF] ^ tables[4, lo >> 24]
            ^ tables[3, buf[p + 4]] ^ tables[2, buf[p + 5]]
            ^ tables[1, buf[p + 6]] ^ tables[0, buf[p + 7]]
        )
        p += 8
    while p < end:
        c = tables[0, (c ^ np.uint32(buf[p])) & 0xFF] ^ (c >> 8)
        p += 1
    return int(c ^ np.uint32(0xFFFFFFFF))


@compiled
def u32(b: np.ndarray, p: int) -> int:
    return int(
        (np.int64(b[p]) << 24) | (np.int64(b[p + 1]) << 16) | (np.int64(b[p + 2]) << 8)
        | np.int64(b[p + 3])
    )


@compiled
def i32(b: np.ndarray, p: int) -> int:
    v = u32(b, p)
    return v - 4294967296 if v >= 2147483648 else v


@compiled
def i16(b: np.ndarray, p: int) -> int:
    v = int((np.int64(b[p]) << 8) | np.int64(b[p + 1]))
    return v - 65536 if v >= 32768 else v


@compiled
def i64(b: np.ndarray, p: int) -> int:
    return int((np.int64(u32(b, p)) << 32) | np.int64(u32(b, p + 4)))


@compiled
def utf8_ok(b: np.ndarray, start: int, length: int) -> bool:
    """Whether ``b[start:start+length]`` is well-formed UTF-8 (what Python's strict decode
    accepts: no overlong forms, no surrogates, nothing above U+10FFFF)."""
    p = start
    end = start + length
    while p < end:
        c = b[p]
        if c < 0x80:
            p += 1
            continue
        if c < 0xC2 or c > 0xF4:
            return False
        if c < 0xE0:
            n = 1
            lo, hi = 0x80, 0xBF
        elif c < 0xF0:
            n = 2
            lo = 0xA0 if c == 0xE0 else 0x80
            hi = 0x9F if c == 0xED else 0xBF
        else:
            n = 3
            lo = 0x90 if c == 0xF0 else 0x80
            hi = 0x8F if c == 0xF4 else 0xBF
        if p + n >= end:
            return False
        d = b[p + 1]
        if d < lo or d > hi:
            return False
        for k in range(2, n + 1):
            if (b[p + k] & 0xC0) != 0x80:
                return False
        p += n + 1
    return True


@inlined
def same_bytes(buf: np.ndarray, a: int, b: int, ln: int) -> bool:
    for k in range(ln):
        if buf[a + k] != buf[b + k]:
            return False
    return True


# --- LLVM-level operations ------------------------------------------------------------------
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
def copy_exact(dst: np.ndarray, q: int, src: np.ndarray, p: int, n: int) -> None:
    """``dst[q:q+n] = src[p:p+n]``, 8 bytes at a time, nothing written or read past either
    end (a slice assignment copies through a temporary: ten times slower)."""
    k = 0
    while k + 8 <= n:
        store64(dst, q + k, load64(src, p + k))
        k += 8
    while k < n:
        dst[q + k] = src[p + k]
        k += 1


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
