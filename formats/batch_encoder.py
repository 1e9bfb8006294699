"""A client ``MessageBatch`` to commitlog records, compiled (numba): the put path's batch form
of the one encoder (:mod:`.encoder`) for the batches clients send most.

:func:`plan` walks a batch body (``MessageDecoder.encodeMessages``: TOTALSIZE, MAGIC, BODYCRC,
FLAG, BODYLEN, BODY, PROPERTIESLEN, PROPERTIES per message) with :func:`.bodies.decode_batch`'s
length checks and the properties' UTF-8 check, and accepts it only when every message's
properties are the same keys in the same order as a reference message's (``key\\x01value``
pairs, no empty value, at most one trailing ``\\x02``): then each record's properties are the
message's own text (the store's separator style) plus the batch's, as
:meth:`.RecordWriter.put_batch_items` writes them. It gives each message's spans and record
size and finds the values of TAGS, KEYS and UNIQ_KEY (ASCII only). :func:`write` then writes
the records back to back into the commitlog mapping: a record head packed once by the encoder
(:func:`.encoder.record_head`) with the per-record fields patched at the layout's offsets,
BODYCRC (``UtilAll.crc32`` & 0x7FFFFFFF), body, topic, properties; the first record's
TOTALSIZE stays 0 (the batch's commit point, written by the caller last). It also gives each
record's TAGS hash and the hashes of its index keys (``topic#key``: UNIQ_KEY, then each
non-empty KEYS token), which the caller turns into the tagsCode and ``indexKeyHashMethod``.

Anything else (a body the checks refuse, other keys, non-ASCII keys or tags) is the Python
encoder's: the caller falls back to it, so both give the same bytes (tests compare them).
"""

from __future__ import annotations

import numpy as np

from mqtool.formats import jit
from mqtool.formats.commitlog_layout import (
    BODYCRC_AT,
    FLAG_AT,
    PHYSICALOFFSET_AT,
    QUEUEOFFSET_AT,
    TOTALSIZE_AT,
)
from mqtool.formats.javacompat import compiled_ascii_hash
from mqtool.formats.jit import CRC_TABLES, compiled, copy_exact, crc32, native_crc, utf8_ok

continue_hash = compiled_ascii_hash()
#: (address, kind) of the machine's native CRC-32 for :func:`write` (:func:`.jit.native_crc32`;
#: (0, 0): none, the slicing-by-8 one is used)
CRC = jit.native_crc32()

# --- the columns of plan's table, one row per message ---------------------------------------
C_FLAG = 0
C_BODY = 1  # body start in the batch body
C_BODY_LEN = 2
C_PROPS = 3  # properties start
C_PROPS_LEN = 4  # without a trailing separator
C_SIZE = 5  # the record's TOTALSIZE
C_TAGS = 6  # TAGS value start (-1: none)
C_TAGS_LEN = 7
C_KEYS = 8  # KEYS value start (-1: none)
C_KEYS_LEN = 9
C_UNIQ = 10  # UNIQ_KEY value start
C_UNIQ_LEN = 11
C_INDEX_KEYS = 12  # index keys of the record (UNIQ_KEY and the KEYS tokens)
COLUMNS = 13

HEAD_SIZE = 20  # TOTALSIZE MAGIC BODYCRC FLAG BODYLEN of a batch message

# plan's refusals (a row count otherwise)
BAD_BODY = -1  # decode_batch refuses it: the Python path says why
OTHER_KEYS = -2  # a message's keys differ from the reference's (row 0's properties are set
#                  when message 0 itself could be read)
NOT_ASCII = -3  # TAGS, KEYS or UNIQ_KEY not ASCII
TOO_LONG = -4  # a record's properties over 32767 bytes


@compiled
def _i32(b: np.ndarray, p: int) -> int:
    v = (np.int64(b[p]) << 24) | (np.int64(b[p + 1]) << 16) | (np.int64(b[p + 2]) << 8) \
        | np.int64(b[p + 3])
    return int(v - 4294967296 if v >= 2147483648 else v)


@compiled
def plan(src: np.ndarray, ref: np.ndarray, ref_at: np.ndarray, j_uniq: int, j_tags: int,
         j_keys: int, fixed: int, tail_len: int, out: np.ndarray, totals: np.ndarray) -> int:
    """Check the batch ``src`` against the reference keys (``ref[ref_at[j]:ref_at[j+1]]``,
    the ``j``-th key) and fill ``out`` (one row per message, :data:`COLUMNS`); ``fixed``: a
    record's size without body and properties, ``tail_len``: the bytes each record's
    properties get after its own. Returns the message count or a refusal; ``totals`` gets
    the records' bytes, their index keys and the bytes of their UNIQ_KEYs."""
    totals[0] = 0
    totals[1] = 0
    totals[2] = 0
    n = src.shape[0]
    nkeys = ref_at.shape[0] - 1
    pos = 0
    i = 0
    while pos < n:
        if n - pos < HEAD_SIZE + 2 or i >= out.shape[0]:
            return BAD_BODY
        total = _i32(src, pos)
        if total < HEAD_SIZE + 2 or total > n - pos:
            return BAD_BODY
        flag = _i32(src, pos + 12)
        blen = _i32(src, pos + 16)
        if blen < 0 or blen > total - HEAD_SIZE - 2:
            return BAD_BODY
        q = pos + HEAD_SIZE + blen
        plen = int((np.int64(src[q]) << 8) | np.int64(src[q + 1]))
        if plen >= 32768:
            return BAD_BODY
        q += 2
        end = pos + total
        if q + plen != end:
            return BAD_BODY
        if not utf8_ok(src, q, plen):
            return BAD_BODY
        row = out[i]
        row[C_FLAG] = flag
        row[C_BODY] = pos + HEAD_SIZE
        row[C_BODY_LEN] = blen
        row[C_PROPS] = q
        row[C_PROPS_LEN] = plen
        row[C_TAGS] = -1
        row[C_TAGS_LEN] = 0
        row[C_KEYS] = -1
        row[C_KEYS_LEN] = 0
        row[C_UNIQ] = -1
        row[C_UNIQ_LEN] = 0
        # the pairs, key by key against the reference
        p = q
        for j in range(nkeys):
            k0 = ref_at[j]
            klen = ref_at[j + 1] - k0
            if p + klen + 1 > end:
                return OTHER_KEYS
            for k in range(klen):
                if src[p + k] != ref[k0 + k]:
                    return OTHER_KEYS
            if src[p + klen] != 1:
                return OTHER_KEYS
            v = p + klen + 1
            e = v
            while e < end and src[e] != 2:
                e += 1
            if e == v:
                return OTHER_KEYS  # an empty value: parse_properties skips the pair
            if j == j_tags:
                row[C_TAGS] = v
                row[C_TAGS_LEN] = e - v
            elif j == j_keys:
                row[C_KEYS] = v
                row[C_KEYS_LEN] = e - v
            elif j == j_uniq:
                row[C_UNIQ] = v
                row[C_UNIQ_LEN] = e - v
            if j < nkeys - 1:
                if e >= end:
                    return OTHER_KEYS
                p = e + 1
            else:
                if not (e == end or (e + 1 == end and src[e] == 2)):
                    return OTHER_KEYS
                row[C_PROPS_LEN] = e - q
        if nkeys == 0:
            return OTHER_KEYS  # no reference yet (a reference has UNIQ_KEY)
        # ASCII values and the index keys: UNIQ_KEY, then each non-empty KEYS token
        for c in range(C_TAGS, C_UNIQ + 1, 2):  # TAGS, KEYS, UNIQ_KEY: (start, length)
            for k in range(row[c], row[c] + row[c + 1]):
                if src[k] >= 0x80:
                    return NOT_ASCII
        count = 1 if row[C_UNIQ] >= 0 else 0
        prev = 32
        for k in range(row[C_KEYS], row[C_KEYS] + row[C_KEYS_LEN]):
            if src[k] != 32 and prev == 32:
                count += 1
            prev = src[k]
        row[C_INDEX_KEYS] = count
        props_len = row[C_PROPS_LEN] + tail_len
        if props_len > 32767:
            return TOO_LONG
        row[C_SIZE] = fixed + blen + props_len
        totals[0] += row[C_SIZE]
        totals[1] += count
        totals[2] += row[C_UNIQ_LEN]
        pos = end
        i += 1
    return i if i > 0 else BAD_BODY


@compiled
def write(src: np.ndarray, rows: np.ndarray, dst: np.ndarray, at: int, head: np.ndarray,
          topic: np.ndarray, tail: np.ndarray, phys: int, queue_offset: int, crc_fn: int,
          crc_kind: int, topic_pre: int, id_prefix: np.ndarray, tags_code: np.ndarray,
          hashes: np.ndarray, hash_phys: np.ndarray, phys_out: np.ndarray,
          text: np.ndarray) -> int:
    """Write the records of ``rows`` (:func:`plan`'s) from ``dst[at]``, the first at commitlog
    offset ``phys`` with QUEUEOFFSET ``queue_offset``; ``head``: the record head up to BODYLEN
    with the shared fields (:func:`.encoder.record_head`), ``topic``: TOPICLEN + topic,
    ``tail``: the batch's part of every record's properties. Fills each record's commitlog
    offset and the ``String.hashCode`` states (unsigned) of its TAGS (0 without: the
    tagsCode as an unsigned int) and of its index keys (with their records' offsets), those
    continued from the state ``topic_pre`` of ``topic#``, and ``text``: the records' offset
    message ids (``id_prefix`` + the offset in 16 upper-case hex digits), then their
    UNIQ_KEYs, each followed by a comma. Returns the number of index keys."""
    hn = head.shape[0]
    tn = topic.shape[0]
    xn = tail.shape[0]
    pn = id_prefix.shape[0]
    nk = 0
    w = 0
    for i in range(rows.shape[0]):
        row = rows[i]
        size = row[C_SIZE]
        blen = row[C_BODY_LEN]
        body = row[C_BODY]
        copy_exact(dst, at, head, 0, hn)
        _put32(dst, at + TOTALSIZE_AT, 0 if i == 0 else size)
        if crc_fn != 0:
            crc = int(np.int64(native_crc(crc_fn, crc_kind, src, body, blen)))
        else:
            crc = int(np.int64(crc32(src, body, blen, CRC_TABLES)))
        _put32(dst, at + BODYCRC_AT, crc & 0x7FFFFFFF)
        _put32(dst, at + FLAG_AT, row[C_FLAG])
        _put64(dst, at + QUEUEOFFSET_AT, queue_offset + i)
        _put64(dst, at + PHYSICALOFFSET_AT, phys)
        _put32(dst, at + hn - 4, blen)  # BODYLEN, the head's last field
        q = at + hn
        copy_exact(dst, q, src, body, blen)
        q += blen
        copy_exact(dst, q, topic, 0, tn)
        q += tn
        plen = row[C_PROPS_LEN]
        dst[q] = ((plen + xn) >> 8) & 0xFF
        dst[q + 1] = (plen + xn) & 0xFF
        q += 2
        copy_exact(dst, q, src, row[C_PROPS], plen)
        q += plen
        copy_exact(dst, q, tail, 0, xn)
        # tagsCode and the index keys
        t = row[C_TAGS]
        tags_code[i] = continue_hash(src, t, row[C_TAGS_LEN], 0) if t >= 0 else 0
        if row[C_UNIQ] >= 0:
            hashes[nk] = continue_hash(src, row[C_UNIQ], row[C_UNIQ_LEN], topic_pre)
            hash_phys[nk] = phys
            nk += 1
        k = row[C_KEYS]
        e = k + row[C_KEYS_LEN]
        while k < e:
            if src[k] == 32:
                k += 1
                continue
            s = k
            while k < e and src[k] != 32:
                k += 1
            hashes[nk] = continue_hash(src, s, k - s, topic_pre)
            hash_phys[nk] = phys
            nk += 1
        phys_out[i] = phys
        copy_exact(text, w, id_prefix, 0, pn)
        w += pn
        for d in range(16):
            x = (phys >> (60 - 4 * d)) & 0xF
            text[w + d] = x + 48 if x < 10 else x + 55
        text[w + 16] = 44
        w += 17
        at += size
        phys += size
    for i in range(rows.shape[0]):
        u = rows[i, C_UNIQ]
        ul = rows[i, C_UNIQ_LEN]
        copy_exact(text, w, src, u, ul)
        text[w + ul] = 44
        w += ul + 1
    return nk


@compiled
def _put32(b: np.ndarray, p: int, v: int) -> None:
    b[p] = (v >> 24) & 0xFF
    b[p + 1] = (v >> 16) & 0xFF
    b[p + 2] = (v >> 8) & 0xFF
    b[p + 3] = v & 0xFF


@compiled
def _put64(b: np.ndarray, p: int, v: int) -> None:
    _put32(b, p, (v >> 32) & 0xFFFFFFFF)
    _put32(b, p + 4, v & 0xFFFFFFFF)


def warm() -> None:
    """Compile (or load from numba's cache) both kernels for the types the put path passes:
    read-only views of bytes (the request body, the reference keys, the head, topic and
    tail), writable int64 arrays and a writable view of the mapping."""
    ro = np.frombuffer(b"", dtype=np.uint8)
    rows = np.zeros((1, COLUMNS), dtype=np.int64)
    at = np.zeros(3, dtype=np.int64)
    plan(ro, ro, at, -1, -1, -1, 0, 0, rows, at)
    dst = np.zeros(8, dtype=np.uint8)
    write(ro, rows[:0], dst, 0, ro, ro, ro, 0, 0, 0, 0, 0, ro, at, at, at, at, dst)
