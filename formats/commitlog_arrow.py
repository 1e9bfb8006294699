"""Commitlog records to Arrow-layout columns: one compiled pass per window, every column of
every record.

:func:`decode` does, per record and in one pass over the mapped bytes, what the separate kernels of
:mod:`.commitlog_fields` do one after the other (and accepts exactly the records
:func:`.commitlog_fields.scan` accepts, with the same checks in the same order): the TOTALSIZE
walk, every check of ``parse_message`` (magic, lengths adding up to TOTALSIZE, PHYSICALOFFSET,
strict UTF-8 topic and properties), the field gather, optionally BODYCRC, and writes every column
straight into Arrow-layout buffers (int32 offsets + data): topic, the raw properties string, the
property map (``MessageDecoder#string2messageProperties``: last duplicate wins) as key and value
strings, TAGS / KEYS / UNIQ_KEY, the offsetMsgId (``createMessageId``, upper hex) and the
born/store hosts as ``ip:port`` text (IPv4; IPv6 rows are left empty and counted, the caller
formats them).

The kernel never judges damage: it stops at the first record it does not accept
(:data:`.commitlog_fields.STOP_ANOMALY`) and the caller asks the walker. Buffers are the caller's
(:class:`.commitlog_columns.Decoder` keeps and reuses them); the kernel stops with
:data:`.commitlog_fields.STOP_FULL` before a record that would not fit, so nothing is ever written
past a buffer. numpy in, numpy out.
"""

from __future__ import annotations

# isort: off
from mqtool.formats import jit  # first: it sets NUMBA_CACHE_DIR for numba
# isort: on
from typing import Any, TypeVar, cast

import numba as nb
import numpy as np

from mqtool.formats.commitlog_fields import STOP_ANOMALY, STOP_END, STOP_FULL, record_layout
from mqtool.formats.commitlog_layout import (
    BODYCRC_AT,
    BORNHOST_AT,
    BORNTIMESTAMP_AT,
    FLAG_AT,
    QUEUEID_AT,
    QUEUEOFFSET_AT,
    RECONSUMETIMES_WIDTH,
    TOPICLEN_V1_WIDTH,
)
from mqtool.formats.jit import (
    copy8,
    crc32,
    i32,
    i64,
    inlined,
    load64,
    native_crc,
    or_bytes,
    prefetch,
    same_bytes,
    store64,
    trailing_zeros,
    u32,
    utf8_ok,
)

_Fn = TypeVar("_Fn")

# --- int64 columns (rows of ``o64``) ----------------------------------------------------------
L_POS = 0  # byte position of the record in the buffer (fileOffset)
L_PHYS = 1  # PHYSICALOFFSET (commitLogOffset)
L_QUEUE_OFFSET = 2
L_BORN_TS = 3
L_STORE_TS = 4
L_PREPARED = 5
L_BODY_POS = 6  # where the body starts in the buffer
N64 = 7

# --- int32 columns (rows of ``o32``) ----------------------------------------------------------
I_SIZE = 0  # TOTALSIZE (storeSize)
I_QUEUE_ID = 1
I_FLAG = 2
I_SYS_FLAG = 3
I_BODY_CRC = 4
I_RECONSUME = 5
I_BODY_LEN = 6
I_BORN_PORT = 7
I_STORE_PORT = 8
I_MAGIC_V2 = 9  # 0: MAGIC_V1, 1: MAGIC_V2
I_CRC_OK = 10  # 1 / 0, or -1 when not checked
N32 = 11

# --- string columns (rows of ``offs`` / ``data``) ---------------------------------------------
S_TOPIC = 0
S_PROPS = 1  # the raw properties string
S_KEY = 2  # property map keys (one item per pair: ``map_off`` cuts them into rows)
S_VALUE = 3  # property map values
S_TAGS = 4  # TAGS value ('' and invalid where absent: see ``valid``)
S_KEYS = 5
S_UNIQ = 6
S_MSGID = 7  # offsetMsgId
S_BORN = 8  # bornHost "a.b.c.d:port" ('' for IPv6 rows)
S_STORE = 9  # storeHost
S_MAGIC = 10  # "0xdaa320a7" / "0xdaa320ab"
NS = 11

# --- counters (``used``) ----------------------------------------------------------------------
# used[s] for s < NS: bytes of data in string column s; then:
U_PAIRS = NS  # property pairs written (items of S_KEY / S_VALUE)
U_V6_HOSTS = NS + 1  # rows with an IPv6 born or store host (left empty)
N_USED = NS + 2

PICKS = (b"TAGS", b"KEYS", b"UNIQ_KEY")
"""The property names picked out into their own columns, S_TAGS, S_KEYS, S_UNIQ in order."""
PICK_BYTES = np.zeros((3, 8), dtype=np.uint8)
PICK_LENS = np.array([len(x) for x in PICKS], dtype=np.int64)
for _j, _name in enumerate(PICKS):
    PICK_BYTES[_j, : len(_name)] = np.frombuffer(_name, dtype=np.uint8)
PICK_WORDS = np.array([int.from_bytes(x, "little") for x in PICKS], dtype=np.uint64)
"""Each pick name as one little-endian word (names of up to 8 bytes compare in one step)."""
MAGIC_TEXT = np.frombuffer(b"0xdaa320a70xdaa320ab".ljust(32, b"\0"), dtype=np.uint8).copy()
"""The magic column's text: V1 at 0, V2 at 10 (padded: copied 8 bytes at a time)."""



def _no_refcounts(fn: _Fn) -> _Fn:
    """Compiled without numba's reference counting (``_nrt=False``): the kernel allocates
    nothing and only borrows its caller's arrays, and the inlined helpers would otherwise
    increment and decrement array counts (atomics) in the per-record loop."""
    options: dict[str, Any] = {"_nrt": False, **jit.JIT_OPTIONS}
    return cast(_Fn, nb.njit(**options)(fn))


AHEAD = 4096
"""Bytes the kernel asks the CPU to fetch ahead of the record it decodes (software prefetch:
the checks of a record take longer than the hardware prefetcher looks ahead)."""
AHEAD_LINES = 32  # at most this many cache lines per record (records bigger than 2 KiB)

HOST_MAX = 24  # "255.255.255.255:-2147483648"
MSGID_MAX = 56  # IPv6 store host: 16 + 4 + 8 bytes in hex


_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_ADD3 = np.uint64(0x7D7D7D7D7D7D7D7D)  # a byte of 3..127 plus this sets its high bit
_HIGH = np.uint64(0x8080808080808080)


@inlined
def _split_ascii(buf: np.ndarray, p0: int, n: int, pr: np.ndarray) -> tuple[int, int]:
    """Pairs of one properties string ``buf[p0:p0+n]`` into ``pr`` (3 x at least n // 2 + 1):
    key start, the ``\\x01`` after the key, the end of the value.

    Returns (number of pairs found, OR of every byte). Segment rules as
    ``string2messageProperties``: a segment between ``\\x02`` separators is a pair when its
    first ``\\x01`` has a non-empty key before it and a non-empty value after it. Eight bytes
    at a time: only the bytes below 3 are looked at one by one.
    """
    m = 0
    acc = np.uint64(0)
    seg = p0
    kv = -1
    end = p0 + n
    k = p0
    while k < end:
        if end + 8 <= buf.shape[0]:
            w = load64(buf, k)
            if k + 8 > end:  # the bytes past the string do not count
                keep = (np.uint64(1) << np.uint64(8 * (end - k))) - np.uint64(1)
                w &= keep
                hits = ~(((w & _LOW7) + _ADD3) | w) & _HIGH & keep
            else:
                hits = ~(((w & _LOW7) + _ADD3) | w) & _HIGH
            acc |= w
            while hits:
                q = k + int(trailing_zeros(hits) >> np.uint64(3))
                hits &= hits - np.uint64(1)
                c = buf[q]
                if c == 1:
                    if kv < 0:
                        kv = q
                elif c == 2:
                    if kv > seg and kv < q - 1:
                        pr[0, m] = seg
                        pr[1, m] = kv
                        pr[2, m] = q
                        m += 1
                    seg = q + 1
                    kv = -1
            k += 8
        else:  # near the end of the buffer: byte by byte
            c = buf[k]
            acc |= np.uint64(c)
            if c == 1:
                if kv < 0:
                    kv = k
            elif c == 2:
                if kv > seg and kv < k - 1:
                    pr[0, m] = seg
                    pr[1, m] = kv
                    pr[2, m] = k
                    m += 1
                seg = k + 1
                kv = -1
            k += 1
    if kv > seg and kv < end - 1:
        pr[0, m] = seg
        pr[1, m] = kv
        pr[2, m] = end
        m += 1
    return m, int(acc & _HIGH)


@inlined
def _host4(d: np.ndarray, q: int, buf: np.ndarray, ip: int, port: int) -> int:
    """Write ``a.b.c.d:port`` (IPv4 at ``buf[ip:ip+4]``, signed port) at ``d[q]``; returns
    its length."""
    n = 0
    for k in range(4):
        v = int(buf[ip + k])
        if v >= 100:
            d[q + n] = 48 + v // 100
            d[q + n + 1] = 48 + (v // 10) % 10
            d[q + n + 2] = 48 + v % 10
            n += 3
        elif v >= 10:
            d[q + n] = 48 + v // 10
            d[q + n + 1] = 48 + v % 10
            n += 2
        else:
            d[q + n] = 48 + v
            n += 1
        d[q + n] = 58 if k == 3 else 46  # ':' after the last octet, '.' between
        n += 1
    v = port
    if v < 0:
        d[q + n] = 45
        n += 1
        v = -v
    digits = 1
    t = v
    while t >= 10:
        t //= 10
        digits += 1
    for k in range(digits - 1, -1, -1):
        d[q + n + k] = 48 + v % 10
        v //= 10
    return n + digits


_NIB = np.uint64(0x000F000F000F000F)
_SIX = np.uint64(0x0606060606060606)
_ONES = np.uint64(0x0101010101010101)
_ZERO = np.uint64(0x3030303030303030)


@inlined
def _hex8(d: np.ndarray, q: int, v: int) -> None:
    """The 8 upper-case hex digits of the 32-bit ``v`` (most significant first) at ``d[q]``:
    every nibble to a byte at once (SWAR), one store."""
    x = np.uint64(v & 0xFFFFFFFF)
    z = (((x >> np.uint64(24)) & np.uint64(0xFF)) | (((x >> np.uint64(16)) & np.uint64(0xFF))
         << np.uint64(16)) | (((x >> np.uint64(8)) & np.uint64(0xFF)) << np.uint64(32))
         | ((x & np.uint64(0xFF)) << np.uint64(48)))
    nib = ((z >> np.uint64(4)) & _NIB) | ((z & _NIB) << np.uint64(8))
    over9 = ((nib + _SIX) >> np.uint64(4)) & _ONES
    store64(d, q, nib + _ZERO + over9 * np.uint64(7))


@inlined
def _key_word(buf: np.ndarray, kpos: int, klen: int) -> Any:
    """A key of up to 8 bytes as one little-endian word (the bytes after it masked off)."""
    w = load64(buf, kpos)
    if klen < 8:
        w &= (np.uint64(1) << np.uint64(8 * klen)) - np.uint64(1)
    return w


@_no_refcounts
def decode(
    buf: np.ndarray, start: int, stop: int, file_start: int, check_crc: bool,
    tables: np.ndarray, o64: np.ndarray, o32: np.ndarray, offs: np.ndarray, data: np.ndarray,
    map_off: np.ndarray, valid: np.ndarray, used: np.ndarray, scratch: np.ndarray,
    pick: np.ndarray, pick_lens: np.ndarray, pick_words: np.ndarray, magic_text: np.ndarray,
    ahead: int = AHEAD, crc_fn: int = 0, crc_kind: int = 0,
) -> tuple[int, int, int]:
    """Decode the records chained by TOTALSIZE from ``start`` into every column buffer.

    ``o64`` (N64 x cap) and ``o32`` (N32 x cap): fixed columns; ``offs`` (NS x ocap + 1,
    int32) and ``data`` (NS x dcap, uint8, C order): string columns (row ``i`` of column ``s``
    is ``data[s, offs[s, i]:offs[s, i + 1]]``; S_KEY / S_VALUE are indexed by pair, the others
    by record); ``map_off`` (cap + 1): row ``i``'s pairs are ``map_off[i]:map_off[i + 1]``;
    ``valid`` (3 x cap, uint8): TAGS / KEYS / UNIQ_KEY present; ``used`` (N_USED): counters,
    set here; ``scratch``: int64 (3 x at least the longest properties string / 2 + 2);
    ``pick`` / ``pick_lens`` / ``pick_words``: :data:`PICK_BYTES`, :data:`PICK_LENS`,
    :data:`PICK_WORDS`; ``magic_text``: :data:`MAGIC_TEXT`; ``ahead``: bytes to prefetch ahead
    (0: none); ``crc_fn`` / ``crc_kind``: a native CRC-32 (:func:`.jit.native_crc32`) or 0
    for the kernel's own.

    Returns ``(count, position, status)`` as :func:`.commitlog_fields.scan`.
    """
    n = buf.shape[0]
    cap = o64.shape[1]
    ocap = offs.shape[1] - 1
    dcap = data.shape[1]
    room = dcap - 8  # _copy may write 7 bytes past the end of a string
    d = data.reshape(-1)
    b_topic = S_TOPIC * dcap
    b_props = S_PROPS * dcap
    b_key = S_KEY * dcap
    b_value = S_VALUE * dcap
    b_msgid = S_MSGID * dcap
    b_born = S_BORN * dcap
    b_store = S_STORE * dcap
    b_magic = S_MAGIC * dcap
    wide = n - 8  # keys that start before this can be read as one word
    born_seen = False  # the last IPv4 host formatted, as (address << 32 | port), and its text
    born_key = 0
    born_at = 0
    born_txt = 0
    store_seen = False
    store_key = 0
    store_at = 0
    store_txt = 0
    for s in range(N_USED):
        used[s] = 0
    for s in range(NS):
        offs[s, 0] = 0
    map_off[0] = 0
    u_topic = 0
    u_props = 0
    u_key = 0
    u_value = 0
    u_pick0 = 0
    u_pick1 = 0
    u_pick2 = 0
    u_msgid = 0
    u_born = 0
    u_store = 0
    npairs = 0
    nv6 = 0
    p = start
    i = 0
    pf = start  # the next byte to prefetch
    while True:
        if p >= stop:
            return i, p, STOP_END
        if i >= cap:
            return i, p, STOP_FULL
        target = min(p + ahead, n)
        pf = max(pf, target - 64 * AHEAD_LINES)
        while pf < target:
            prefetch(buf, pf)
            pf += 64
        (tl_w, size, sys_flag, born_len, store_len, store_ts_pos, store_pos, recon_pos,
         body_pos, body_len, topic_pos, topic_len, props_pos, props_len,
         phys) = record_layout(buf, p, file_start)
        if tl_w == 0:
            return i, p, STOP_ANOMALY
        born_pos = p + BORNHOST_AT
        # does the whole row fit? (else the caller takes what is done and calls again)
        if (npairs + props_len // 2 + 1 > ocap or props_len // 2 + 2 > scratch.shape[1]
                or u_topic + topic_len > room or u_props + props_len > room
                or u_key + props_len > room or u_value + props_len > room
                or u_pick0 + props_len > room or u_pick1 + props_len > room
                or u_pick2 + props_len > room or u_msgid + MSGID_MAX > room
                or u_born + HOST_MAX > room or u_store + HOST_MAX > room
                or 10 * (i + 1) > room):
            return i, p, STOP_FULL
        if or_bytes(buf, topic_pos, topic_len) and not utf8_ok(buf, topic_pos, topic_len):
            return i, p, STOP_ANOMALY
        m, acc = _split_ascii(buf, props_pos, props_len, scratch)
        if acc and not utf8_ok(buf, props_pos, props_len):
            return i, p, STOP_ANOMALY
        # accepted: from here on the row is written
        body_crc = i32(buf, p + BODYCRC_AT)
        o64[L_POS, i] = p
        o64[L_PHYS, i] = phys
        o64[L_QUEUE_OFFSET, i] = i64(buf, p + QUEUEOFFSET_AT)
        o64[L_BORN_TS, i] = i64(buf, p + BORNTIMESTAMP_AT)
        o64[L_STORE_TS, i] = i64(buf, store_ts_pos)
        o64[L_PREPARED, i] = i64(buf, recon_pos + RECONSUMETIMES_WIDTH)
        o64[L_BODY_POS, i] = body_pos
        born_port = i32(buf, born_pos + born_len)
        store_port = i32(buf, store_pos + store_len)
        o32[I_SIZE, i] = size
        o32[I_QUEUE_ID, i] = i32(buf, p + QUEUEID_AT)
        o32[I_FLAG, i] = i32(buf, p + FLAG_AT)
        o32[I_SYS_FLAG, i] = sys_flag
        o32[I_BODY_CRC, i] = body_crc
        o32[I_RECONSUME, i] = i32(buf, recon_pos)
        o32[I_BODY_LEN, i] = body_len
        o32[I_BORN_PORT, i] = born_port
        o32[I_STORE_PORT, i] = store_port
        o32[I_MAGIC_V2, i] = tl_w - TOPICLEN_V1_WIDTH
        if check_crc:
            if crc_fn != 0 and body_len > 0:
                crc = native_crc(crc_fn, crc_kind, buf, body_pos, body_len) & 0x7FFFFFFF
            else:
                crc = crc32(buf, body_pos, body_len, tables) & 0x7FFFFFFF
            o32[I_CRC_OK, i] = 1 if crc == body_crc else 0
        else:
            o32[I_CRC_OK, i] = -1
        copy8(d, b_topic + u_topic, buf, topic_pos, topic_len)
        u_topic += topic_len
        offs[S_TOPIC, i + 1] = u_topic
        copy8(d, b_props + u_props, buf, props_pos, props_len)
        u_props += props_len
        offs[S_PROPS, i + 1] = u_props
        # the property map: pairs in order, an earlier duplicate key dropped
        valid[0, i] = 0
        valid[1, i] = 0
        valid[2, i] = 0
        for j in range(m):
            kpos = scratch[0, j]
            klen = scratch[1, j] - kpos
            short = klen <= 8 and kpos <= wide
            kw = _key_word(buf, kpos, klen) if short else np.uint64(0)
            dup = False
            for j2 in range(j + 1, m):
                k2 = scratch[0, j2]
                if scratch[1, j2] - k2 == klen:
                    if short and k2 <= wide:
                        same = _key_word(buf, k2, klen) == kw
                    else:
                        same = same_bytes(buf, kpos, k2, klen)
                    if same:
                        dup = True
                        break
            if dup:
                continue
            vpos = scratch[1, j] + 1
            vlen = scratch[2, j] - vpos
            copy8(d, b_key + u_key, buf, kpos, klen)
            u_key += klen
            copy8(d, b_value + u_value, buf, vpos, vlen)
            u_value += vlen
            npairs += 1
            offs[S_KEY, npairs] = u_key
            offs[S_VALUE, npairs] = u_value
            for t in range(3):
                if klen == pick_lens[t]:
                    if short:
                        hit = kw == pick_words[t]
                    else:
                        hit = True
                        for k in range(klen):
                            if buf[kpos + k] != pick[t, k]:
                                hit = False
                                break
                    if hit:
                        if t == 0:
                            copy8(d, (S_TAGS + t) * dcap + u_pick0, buf, vpos, vlen)
                            u_pick0 += vlen
                        elif t == 1:
                            copy8(d, (S_TAGS + t) * dcap + u_pick1, buf, vpos, vlen)
                            u_pick1 += vlen
                        else:
                            copy8(d, (S_TAGS + t) * dcap + u_pick2, buf, vpos, vlen)
                            u_pick2 += vlen
                        valid[t, i] = 1
                        break
        map_off[i + 1] = npairs
        offs[S_TAGS, i + 1] = u_pick0
        offs[S_KEYS, i + 1] = u_pick1
        offs[S_UNIQ, i + 1] = u_pick2
        # offsetMsgId: store address + port + PHYSICALOFFSET in upper hex
        q = b_msgid + u_msgid
        for k in range(0, store_len, 4):
            _hex8(d, q, u32(buf, store_pos + k))
            q += 8
        _hex8(d, q, store_port)
        _hex8(d, q + 8, phys >> 32)
        _hex8(d, q + 16, phys)
        u_msgid = q + 24 - b_msgid
        offs[S_MSGID, i + 1] = u_msgid
        # hosts as text (IPv4; IPv6 rows are left empty for the caller); hosts repeat: the
        # text of the previous one is copied when it is the same host
        if born_len == 4:
            key = (u32(buf, born_pos) << 32) | (born_port & 0xFFFFFFFF)
            q = b_born + u_born
            if born_seen and key == born_key:
                copy8(d, q, d, born_at, born_txt)
            else:
                born_txt = _host4(d, q, buf, born_pos, born_port)
                born_key = key
                born_seen = True
            born_at = q
            u_born += born_txt
        if store_len == 4:
            key = (u32(buf, store_pos) << 32) | (store_port & 0xFFFFFFFF)
            q = b_store + u_store
            if store_seen and key == store_key:
                copy8(d, q, d, store_at, store_txt)
            else:
                store_txt = _host4(d, q, buf, store_pos, store_port)
                store_key = key
                store_seen = True
            store_at = q
            u_store += store_txt
        if born_len != 4 or store_len != 4:
            nv6 += 1
        offs[S_BORN, i + 1] = u_born
        offs[S_STORE, i + 1] = u_store
        copy8(d, b_magic + 10 * i, magic_text, 10 * (tl_w - TOPICLEN_V1_WIDTH), 10)
        offs[S_MAGIC, i + 1] = 10 * (i + 1)
        used[S_TOPIC] = u_topic
        used[S_PROPS] = u_props
        used[S_KEY] = u_key
        used[S_VALUE] = u_value
        used[S_TAGS] = u_pick0
        used[S_KEYS] = u_pick1
        used[S_UNIQ] = u_pick2
        used[S_MSGID] = u_msgid
        used[S_BORN] = u_born
        used[S_STORE] = u_store
        used[U_PAIRS] = npairs
        used[U_V6_HOSTS] = nv6
        i += 1
        p += size
