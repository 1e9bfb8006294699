"""Commitlog records to a table of their fields, compiled (numba): the record scan.

One pass over a mapped commitlog window does, per record, what ``MessageDecoder.decode`` does
(and what :func:`.commitlog.parse_message` plus :func:`.walker.scan_file`'s PHYSICALOFFSET
check accept): follow TOTALSIZE, check the magic, every length against TOTALSIZE
(``MessageExtEncoder#calMsgLength``), PHYSICALOFFSET against the record's place, properties
not torn (:func:`record_layout`, shared with :mod:`.commitlog_arrow`), topic and properties as
UTF-8, gather every fixed field, optionally check BODYCRC (``UtilAll.crc32``). The kernel never
judges damage: it stops at the first record it does not accept and returns where, with status
:data:`STOP_ANOMALY`; the caller hands that position to the one damage rule (the walker,
:func:`.walker.scan_file`) for the verdict.

The other kernels turn the accepted records into Arrow buffers directly (offsets + data):
:func:`gather` (topic, properties string), :func:`split_properties` (the property map,
``MessageDecoder#string2messageProperties``: ``\\x02``-separated ``key\\x01value`` pairs, the
last duplicate wins, and TAGS / KEYS / UNIQ_KEY picked out), :func:`offset_msg_ids`
(``MessageDecoder#createMessageId`` in upper hex).

Compiled once per machine (numba ``cache=True``; the first call of a fresh install compiles
for a few seconds). Pure numpy in and out: no pyarrow, no pyspark here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mqtool.formats.commitlog_layout import (
    BODYCRC_AT,
    BODYLEN_WIDTH,
    BORNHOST_AT,
    BORNHOST_V6_FLAG,
    BORNTIMESTAMP_AT,
    END_FILE_MIN_BLANK_LENGTH,
    FLAG_AT,
    IPV4_WIDTH,
    IPV6_WIDTH,
    MAGIC_AT,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    PHYSICALOFFSET_AT,
    PORT_WIDTH,
    PREPAREDTRANSACTIONOFFSET_WIDTH,
    PROPERTIESLEN_WIDTH,
    QUEUEID_AT,
    QUEUEOFFSET_AT,
    RECONSUMETIMES_WIDTH,
    STOREHOSTADDRESS_V6_FLAG,
    STORETIMESTAMP_WIDTH,
    SYSFLAG_AT,
    TOPICLEN_V1_WIDTH,
    TOPICLEN_V2_WIDTH,
    TOTALSIZE_AT,
)
from mqtool.formats.jit import (
    CRC_TABLES,
    compiled,
    crc32,
    i16,
    i32,
    i64,
    inlined,
    same_bytes,
    u32,
    utf8_ok,
)

# --- the field table the scan kernel fills (one row per field, one column per record) -------
F_POS = 0  # byte position of the record in the buffer
F_SIZE = 1  # TOTALSIZE
F_MAGIC = 2  # MAGICCODE (unsigned)
F_BODY_CRC = 3
F_QUEUE_ID = 4
F_FLAG = 5
F_QUEUE_OFFSET = 6
F_PHYS = 7  # PHYSICALOFFSET
F_SYS_FLAG = 8
F_BORN_TS = 9
F_BORN_PORT = 10
F_STORE_TS = 11
F_STORE_PORT = 12
F_RECONSUME = 13
F_PREPARED = 14
F_BODY_POS = 15
F_BODY_LEN = 16
F_TOPIC_POS = 17
F_TOPIC_LEN = 18
F_PROPS_POS = 19
F_PROPS_LEN = 20
F_CRC_OK = 21  # 1 / 0, or -1 when not checked
F_BORN_IP4 = 22  # first 4 address bytes as an unsigned int (IPv4)
F_STORE_IP4 = 23
F_STORE_IP_POS = 24  # byte position of the store address (IPv6 rows read 16 bytes there)
N_FIELDS = 25

STOP_END = 0  # the next record would start at or after ``stop``
STOP_FULL = 1  # ``cap`` records decoded
STOP_ANOMALY = 2  # the bytes at the returned position are not a record the kernel accepts
"""Why :func:`scan` returned."""

_BORN6 = BORNHOST_V6_FLAG
_STORE6 = STOREHOSTADDRESS_V6_FLAG
_MV1 = MAGIC_V1
_MV2 = MAGIC_V2

_NO_RECORD = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)


@inlined
def record_layout(buf: np.ndarray, p: int, file_start: int) -> tuple[int, ...]:
    """The one record-layout rule of both kernels (:func:`scan`, :func:`.commitlog_arrow.decode`): a
    record at ``p`` as ``parse_message`` (less UTF-8) and the walker's PHYSICALOFFSET accept.
    Magic V1 or V2; TOTALSIZE at least the smallest record (``MIN_RECORD_SIZE``, +1 for V2)
    and inside ``buf``; every length adding up to TOTALSIZE (``MessageExtEncoder#calMsgLength``);
    PHYSICALOFFSET equal to ``file_start + p``; properties not torn (not ending in a zero
    byte: :func:`.commitlog.properties_torn`).

    Returns ``(tl_w, size, sys_flag, born_len, store_len, store_ts_pos, store_pos, recon_pos,
    body_pos, body_len, topic_pos, topic_len, props_pos, props_len, phys)``; ``tl_w``, the
    width of TOPICLEN (1: V1, 2: V2), is 0 when no such record is at ``p``.
    """
    n = buf.shape[0]
    if p + END_FILE_MIN_BLANK_LENGTH > n:
        return _NO_RECORD
    size = i32(buf, p + TOTALSIZE_AT)
    magic = u32(buf, p + MAGIC_AT)
    if magic == _MV1:
        tl_w = TOPICLEN_V1_WIDTH
    elif magic == _MV2:
        tl_w = TOPICLEN_V2_WIDTH
    else:
        return _NO_RECORD
    if size < MIN_RECORD_SIZE + tl_w - TOPICLEN_V1_WIDTH or p + size > n:
        return _NO_RECORD
    end = p + size
    sys_flag = i32(buf, p + SYSFLAG_AT)
    born_len = IPV6_WIDTH if sys_flag & _BORN6 else IPV4_WIDTH
    store_len = IPV6_WIDTH if sys_flag & _STORE6 else IPV4_WIDTH
    store_ts_pos = p + BORNHOST_AT + born_len + PORT_WIDTH
    store_pos = store_ts_pos + STORETIMESTAMP_WIDTH
    recon_pos = store_pos + store_len + PORT_WIDTH
    blen_pos = recon_pos + RECONSUMETIMES_WIDTH + PREPAREDTRANSACTIONOFFSET_WIDTH
    if blen_pos + BODYLEN_WIDTH > end:
        return _NO_RECORD
    body_len = i32(buf, blen_pos)
    body_pos = blen_pos + BODYLEN_WIDTH
    if body_len < 0 or body_pos + body_len > end:
        return _NO_RECORD
    tl_pos = body_pos + body_len
    if tl_pos + tl_w > end:
        return _NO_RECORD
    if tl_w == TOPICLEN_V2_WIDTH:
        topic_len = i16(buf, tl_pos)
    else:
        topic_len = int(buf[tl_pos])
        if topic_len > 127:
            topic_len -= 256
    topic_pos = tl_pos + tl_w
    if topic_len < 0 or topic_pos + topic_len > end:
        return _NO_RECORD
    pl_pos = topic_pos + topic_len
    if pl_pos + PROPERTIESLEN_WIDTH > end:
        return _NO_RECORD
    props_len = i16(buf, pl_pos)
    props_pos = pl_pos + PROPERTIESLEN_WIDTH
    if props_len < 0 or props_pos + props_len != end:  # calMsgLength == TOTALSIZE
        return _NO_RECORD
    if props_len > 0 and buf[end - 1] == 0:  # torn properties (commitlog.properties_torn)
        return _NO_RECORD
    phys = i64(buf, p + PHYSICALOFFSET_AT)
    if phys != file_start + p:
        return _NO_RECORD
    return (tl_w, size, sys_flag, born_len, store_len, store_ts_pos, store_pos, recon_pos,
            body_pos, body_len, topic_pos, topic_len, props_pos, props_len, phys)


@compiled
def _ascii(b: np.ndarray, w: np.ndarray, start: int, length: int) -> bool:
    """Whether ``b[start:start+length]`` is ASCII, 8 bytes at a time (``w``: ``b`` as aligned
    little-endian uint64 words, a byte loop past its end)."""
    if length <= 0:
        return True
    end = start + length
    nw = w.shape[0]
    if (end - 1) >> 3 >= nw:
        for p in range(start, end):
            if b[p] >= 0x80:
                return False
        return True
    ws = start >> 3
    we = (end - 1) >> 3
    hi = np.uint64(0x8080808080808080)
    lo_mask = ~np.uint64((1 << (8 * (start & 7))) - 1) if start & 7 else ~np.uint64(0)
    top = 8 * ((end - 1) & 7) + 8
    hi_mask = np.uint64((1 << top) - 1) if top < 64 else ~np.uint64(0)
    if ws == we:
        return bool((w[ws] & lo_mask & hi_mask & hi) == 0)
    acc = w[ws] & lo_mask
    for k in range(ws + 1, we):
        acc |= w[k]
    acc |= w[we] & hi_mask
    return bool((acc & hi) == 0)


@compiled
def scan(
    buf: np.ndarray, words: np.ndarray, start: int, stop: int, file_start: int, check_crc: bool,
    out: np.ndarray, tables: np.ndarray,
) -> tuple[int, int, int]:
    """Decode the records chained by TOTALSIZE from ``start`` into ``out`` (N_FIELDS x cap).

    ``words`` is ``buf`` as little-endian uint64 words (:func:`words_of`), for the ASCII test.

    Returns ``(count, position, status)``: ``count`` records were accepted; ``position`` is
    where the next record starts (:data:`STOP_END`: at or past ``stop``; :data:`STOP_FULL`:
    ``out`` is full) or the bytes the kernel did not accept (:data:`STOP_ANOMALY`: a BLANK,
    zeros, a torn or damaged record, the end of the buffer: the caller asks the damage rule).
    """
    cap = out.shape[1]
    p = start
    i = 0
    while True:
        if p >= stop:
            return i, p, STOP_END
        if i >= cap:
            return i, p, STOP_FULL
        born_pos = p + BORNHOST_AT
        (tl_w, size, sys_flag, born_len, store_len, store_ts_pos, store_pos, recon_pos,
         body_pos, body_len, topic_pos, topic_len, props_pos, props_len,
         phys) = record_layout(buf, p, file_start)
        if tl_w == 0:
            return i, p, STOP_ANOMALY
        if not _ascii(buf, words, topic_pos, topic_len) and not utf8_ok(buf, topic_pos, topic_len):
            return i, p, STOP_ANOMALY
        if not _ascii(buf, words, props_pos, props_len) and not utf8_ok(buf, props_pos, props_len):
            return i, p, STOP_ANOMALY
        body_crc = i32(buf, p + BODYCRC_AT)
        out[F_POS, i] = p
        out[F_SIZE, i] = size
        out[F_MAGIC, i] = _MV2 if tl_w == TOPICLEN_V2_WIDTH else _MV1
        out[F_BODY_CRC, i] = body_crc
        out[F_QUEUE_ID, i] = i32(buf, p + QUEUEID_AT)
        out[F_FLAG, i] = i32(buf, p + FLAG_AT)
        out[F_QUEUE_OFFSET, i] = i64(buf, p + QUEUEOFFSET_AT)
        out[F_PHYS, i] = phys
        out[F_SYS_FLAG, i] = sys_flag
        out[F_BORN_TS, i] = i64(buf, p + BORNTIMESTAMP_AT)
        out[F_BORN_IP4, i] = u32(buf, born_pos)
        out[F_BORN_PORT, i] = i32(buf, born_pos + born_len)
        out[F_STORE_TS, i] = i64(buf, store_ts_pos)
        out[F_STORE_IP4, i] = u32(buf, store_pos)
        out[F_STORE_IP_POS, i] = store_pos
        out[F_STORE_PORT, i] = i32(buf, store_pos + store_len)
        out[F_RECONSUME, i] = i32(buf, recon_pos)
        out[F_PREPARED, i] = i64(buf, recon_pos + RECONSUMETIMES_WIDTH)
        out[F_BODY_POS, i] = body_pos
        out[F_BODY_LEN, i] = body_len
        out[F_TOPIC_POS, i] = topic_pos
        out[F_TOPIC_LEN, i] = topic_len
        out[F_PROPS_POS, i] = props_pos
        out[F_PROPS_LEN, i] = props_len
        if check_crc:
            crc = crc32(buf, body_pos, body_len, tables) & 0x7FFFFFFF
            out[F_CRC_OK, i] = 1 if crc == body_crc else 0
        else:
            out[F_CRC_OK, i] = -1
        i += 1
        p += size


@compiled
def gather(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[
    np.ndarray, np.ndarray
]:
    """Arrow binary/string buffers of ``buf[starts[i]:starts[i]+lengths[i]]``: (int32 offsets
    of n + 1, data)."""
    n = starts.shape[0]
    offsets = np.empty(n + 1, dtype=np.int32)
    total = 0
    offsets[0] = 0
    for i in range(n):
        total += lengths[i]
        offsets[i + 1] = total
    data = np.empty(total, dtype=np.uint8)
    q = 0
    for i in range(n):
        s = starts[i]
        ln = lengths[i]
        data[q : q + ln] = buf[s : s + ln]
        q += ln
    return offsets, data


# the property names picked out into their own columns
_PICK = (b"TAGS", b"KEYS", b"UNIQ_KEY")
PICK_NAMES = ("TAGS", "KEYS", "UNIQ_KEY")
_PICK_BYTES = np.zeros((3, 8), dtype=np.uint8)
_PICK_LENS = np.array([len(x) for x in _PICK], dtype=np.int64)
for _j, _name in enumerate(_PICK):
    _PICK_BYTES[_j, : len(_name)] = np.frombuffer(_name, dtype=np.uint8)


@compiled
def split_properties(
    buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, pick: np.ndarray,
    pick_lens: np.ndarray, pairs: np.ndarray, map_off: np.ndarray, picked: np.ndarray,
) -> int:
    """``string2messageProperties`` of every properties string, as Arrow map offsets and pairs.

    Fills ``map_off`` (n + 1: row ``i``'s pairs are ``map_off[i]:map_off[i+1]``), ``pairs``
    (4 x cap: key start, key length, value start, value length) and ``picked`` (``[j, i]``:
    the pair of row ``i`` whose key is ``pick[j]``, or -1); returns the number of pairs, or -1
    when ``pairs`` is too small (call again with a bigger one). A segment between ``\x02``
    separators is a pair when its first ``\x01`` has a non-empty key before it and a
    non-empty value after it; of duplicate keys the last one is kept.
    """
    n = starts.shape[0]
    cap = pairs.shape[1]
    m = 0
    map_off[0] = 0
    for i in range(n):
        row_first = m
        seg = starts[i]
        e_row = seg + lengths[i]
        kv = -1
        for t in range(pick.shape[0]):
            picked[t, i] = -1
        for p in range(seg, e_row + 1):
            c = buf[p] if p < e_row else 2
            if c == 1:
                if kv < 0:
                    kv = p
            elif c == 2:
                if kv > seg and kv < p - 1:
                    klen = kv - seg
                    # last duplicate wins: drop an earlier pair with the same key
                    for j in range(row_first, m):
                        if pairs[1, j] == klen and same_bytes(buf, pairs[0, j], seg, klen):
                            for t in range(j, m - 1):
                                pairs[0, t] = pairs[0, t + 1]
                                pairs[1, t] = pairs[1, t + 1]
                                pairs[2, t] = pairs[2, t + 1]
                                pairs[3, t] = pairs[3, t + 1]
                            m -= 1
                            break
                    if m >= cap:
                        return -1
                    pairs[0, m] = seg
                    pairs[1, m] = klen
                    pairs[2, m] = kv + 1
                    pairs[3, m] = p - kv - 1
                    m += 1
                seg = p + 1
                kv = -1
        for j in range(row_first, m):
            for t in range(pick.shape[0]):
                if pairs[1, j] == pick_lens[t] and _eq_pick(buf, pairs[0, j], pick, t,
                                                            pick_lens[t]):
                    picked[t, i] = j
        map_off[i + 1] = m
    return m


@compiled
def _eq_pick(buf: np.ndarray, a: int, pick: np.ndarray, t: int, ln: int) -> bool:
    for k in range(ln):
        if buf[a + k] != pick[t, k]:
            return False
    return True


_HEXDIGITS = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8).copy()


@compiled
def offset_msg_ids(
    buf: np.ndarray, store_ip_pos: np.ndarray, v6: np.ndarray, port: np.ndarray,
    phys: np.ndarray, hexdigits: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``createMessageId``: upper hex of store address + port + PHYSICALOFFSET (Arrow string
    buffers: int32 offsets, data)."""
    n = phys.shape[0]
    offsets = np.empty(n + 1, dtype=np.int32)
    offsets[0] = 0
    for i in range(n):
        offsets[i + 1] = offsets[i] + (56 if v6[i] else 32)
    data = np.empty(offsets[n], dtype=np.uint8)
    for i in range(n):
        q = offsets[i]
        alen = 16 if v6[i] else 4
        a = store_ip_pos[i]
        for k in range(alen):
            b = buf[a + k]
            data[q] = hexdigits[b >> 4]
            data[q + 1] = hexdigits[b & 15]
            q += 2
        pv = np.int64(port[i]) & 0xFFFFFFFF
        for k in range(7, -1, -1):
            data[q] = hexdigits[(pv >> (4 * k)) & 15]
            q += 1
        ph = phys[i]
        for k in range(15, -1, -1):
            data[q] = hexdigits[(ph >> (4 * k)) & 15]
            q += 1
    return offsets, data


def field_table(cap: int) -> np.ndarray:
    """An empty field table for :func:`scan` (N_FIELDS x cap, int64)."""
    return np.empty((N_FIELDS, cap), dtype=np.int64)


def words_of(a: np.ndarray) -> np.ndarray:
    """``a`` (uint8, 8-byte aligned start) as little-endian uint64 words, no copy."""
    n = len(a) // 8 * 8
    if a.ctypes.data % 8:
        return np.zeros(0, dtype="<u8")
    return a[:n].view("<u8")


def as_bytes(buf: Any) -> np.ndarray:
    """A uint8 array view of any buffer (bytes, bytearray, memoryview, mmap), no copy."""
    return np.frombuffer(buf, dtype=np.uint8)


def scan_buffer(
    buf: Any, start: int = 0, stop: int | None = None, *, file_start: int = 0,
    check_crc: bool = False, cap: int = 1 << 16, out: np.ndarray | None = None,
) -> tuple[np.ndarray, int, int]:
    """:func:`scan` over a Python buffer: (fields of the accepted records, position, status)."""
    a = as_bytes(buf)
    table = field_table(cap) if out is None else out
    count, pos, status = scan(
        a, words_of(a), start, len(a) if stop is None else stop, file_start, check_crc, table,
        CRC_TABLES,
    )
    return table[:, :count], pos, status


class PropertySplitter:
    """:func:`split_properties` with reusable scratch (TAGS / KEYS / UNIQ_KEY picked, in
    :data:`PICK_NAMES` order)."""

    def __init__(self, cap: int = 1 << 16) -> None:
        self.pairs = np.empty((4, cap), dtype=np.int64)

    def split(self, a: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
    ]:
        """(map offsets, key offsets, key data, value offsets, value data, picked)."""
        n = len(starts)
        map_off = np.empty(n + 1, dtype=np.int32)
        picked = np.empty((len(PICK_NAMES), n), dtype=np.int64)
        while True:
            m = split_properties(a, starts, lengths, _PICK_BYTES, _PICK_LENS, self.pairs,
                                 map_off, picked)
            if m >= 0:
                break
            self.pairs = np.empty((4, self.pairs.shape[1] * 2), dtype=np.int64)
        pr = self.pairs
        k_off, k_data = gather(a, pr[0, :m], pr[1, :m])
        v_off, v_data = gather(a, pr[2, :m], pr[3, :m])
        return map_off, k_off, k_data, v_off, v_data, picked


def msg_ids_of(buf: Any, store_ip_pos: np.ndarray, v6: np.ndarray, port: np.ndarray,
               phys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`offset_msg_ids` over a Python buffer."""
    result: tuple[np.ndarray, np.ndarray] = offset_msg_ids(
        as_bytes(buf), store_ip_pos, v6, port, phys, _HEXDIGITS
    )
    return result
