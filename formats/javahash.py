"""``String.hashCode`` over many byte ranges in compiled code (numba), for the bulk readers.

The rule's home is :mod:`.javacompat` (:func:`.javacompat.java_hash_unsigned`); this is its
compiled loop for ranges of a mapped buffer: :func:`.javacompat.java_hash_ranges` and
:func:`.javacompat.java_token_hashes` call it, and the batch encoder its ASCII form,
:func:`continue_hash`. Each range's hash is continued from a given state
(``h = 31 * h + c``, uint32 wrapping like Java's int) over its bytes; a range holding a
non-ASCII byte is flagged for the caller, who hashes its UTF-16 units in Python.
"""

from __future__ import annotations

import numpy as np

from mqtool.formats.jit import compiled, inlined


@inlined
def continue_hash(buf: np.ndarray, start: int, length: int, h: int) -> int:
    """The state ``h`` continued over the ASCII bytes ``buf[start:start+length]``
    (unsigned 32-bit); the put path's batch encoder calls it."""
    for p in range(start, start + length):
        h = int((h * 31 + np.int64(buf[p])) & 0xFFFFFFFF)
    return h


@compiled
def hash_ranges(
    buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, init: np.ndarray,
    out: np.ndarray, wide: np.ndarray,
) -> None:
    """``out[i]``: the hash state ``init[i]`` continued over ``buf[starts[i]:][:lengths[i]]``;
    ``wide[i]``: the range holds a byte >= 0x80 (``out[i]`` is then not the Java hash)."""
    for i in range(starts.shape[0]):
        h = np.int64(init[i])
        w = False
        s = starts[i]
        for p in range(s, s + lengths[i]):
            c = buf[p]
            if c >= 0x80:
                w = True
            h = (h * 31 + c) & 0xFFFFFFFF
        out[i] = h
        wide[i] = w


@compiled
def token_hashes(
    buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, sep: int, init: np.ndarray,
    rows: np.ndarray, t_start: np.ndarray, t_len: np.ndarray, out: np.ndarray,
    wide: np.ndarray,
) -> int:
    """Split each range at byte ``sep`` into non-empty tokens and hash each one, continued from
    its range's ``init``; fills (range index, start, length, state, wide) per token and returns
    the token count, or -1 when the output arrays are too small."""
    m = 0
    cap = out.shape[0]
    for i in range(starts.shape[0]):
        p = starts[i]
        e = p + lengths[i]
        while p < e:
            if buf[p] == sep:
                p += 1
                continue
            if m >= cap:
                return -1
            h = np.int64(init[i])
            w = False
            q = p
            while q < e and buf[q] != sep:
                c = buf[q]
                if c >= 0x80:
                    w = True
                h = (h * 31 + c) & 0xFFFFFFFF
                q += 1
            rows[m] = i
            t_start[m] = p
            t_len[m] = q - p
            out[m] = h
            wide[m] = w
            m += 1
            p = q
    return m
