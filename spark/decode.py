"""Vectorised decoders for the bulk path: store file ranges to Arrow record batches.

No pyspark here: these are plain functions over a file path and a byte range, used inside
Spark executors (:mod:`mqtool.spark.source`) and usable (and tested) without Spark.

Commitlog ranges (:func:`decode_commitlog_range`): the file is memory-mapped read-only and
walked window by window (never read whole into Python memory; pages behind the walk are
released with ``madvise(MADV_DONTNEED)``, holes of sparse files skipped with ``SEEK_DATA``).
Per window, the project's vectorised decoder :mod:`mqtool.formats.fastdecode` follows the
TOTALSIZE chain (``walk``, the only sequential part) and decodes and checks every record at
once (``decode_records``: numpy gathers, ``calMsgLength`` and PHYSICALOFFSET checks, UTF-8).
This module adds what the tables need: Arrow columns (variable parts cut by Arrow in C++),
host strings and offsetMsgIds per distinct value, the body CRC check, and property maps built
with numpy and Arrow (``MessageDecoder#string2messageProperties``). The rows are proven equal
to :func:`mqtool.formats.commitlog.parse_message` on every record of the real stores.

Anything that is not a record becomes an ``unreadable`` row naming the file and offset; the
decoder then resynchronises on the next valid record and keeps going.
"""

from __future__ import annotations

import errno
import ipaddress
import mmap
import os
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mqtool.formats import fastdecode
from mqtool.formats.commitlog import (
    COMPRESSED_FLAG,
    COMPRESSION_NAMES,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    BlankRecord,
    parse_message,
)
from mqtool.formats.consumequeue import CQ_DTYPE, CQ_STORE_UNIT_SIZE
from mqtool.formats.errors import FormatError
from mqtool.formats.indexfile import INDEX_SIZE, index_geometry, parse_header
from mqtool.spark.schema import (
    CQ_SCHEMA,
    INDEX_SCHEMA,
    MESSAGE_SCHEMA,
    RECORD_KIND_BLANK,
    RECORD_KIND_MESSAGE,
    RECORD_KIND_UNREADABLE,
    RECORD_SCHEMA,
)

MESSAGE_FIELDS = list(MESSAGE_SCHEMA)
MESSAGE_NAMES = frozenset(MESSAGE_SCHEMA.names)
_NULLABLE_MESSAGE_SCHEMA = pa.schema([f.with_nullable(True) for f in MESSAGE_FIELDS])

WINDOW = 16 * 1024 * 1024
"""Bytes of commitlog decoded per Arrow batch (one Python walk + one vectorised decode)."""

MIN_RECORD_SIZE = 91  # calMsgLength(V1, IPv4 hosts, empty body/topic/properties)
_SIZE_MAGIC = struct.Struct(">iI")
_MAGIC_PREFIX = b"\xda\xa3\x20"  # V1 0xDAA320A7 and V2 0xDAA320AB share these bytes
_BLANK_BYTES = struct.pack(">I", MAGIC_BLANK)

_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_HEX2 = np.stack([_HEX[np.arange(256) >> 4], _HEX[np.arange(256) & 15]], axis=1)  # (256, 2)


# --- small numpy helpers ---------------------------------------------------------------------
def _slices(
    mv: memoryview, starts: np.ndarray, lengths: np.ndarray, typ: pa.DataType | None = None
) -> pa.Array:
    """A binary array of ``mv[s:s+l]`` for every (s, l), cut by Arrow in C++.

    The slices are ordered and do not overlap (they come from consecutive records), so the
    buffer window holding them is viewed, without a copy, as a binary array whose elements
    alternate slice / gap; Arrow's ``take`` of the even elements then copies the slices.
    ``typ=pa.string()`` when every slice is known to be UTF-8 (not checked again).
    """
    typ = typ or pa.binary()
    n = len(starts)
    if n == 0:
        return pa.array([], typ)
    lo = int(starts[0])
    ends = starts + lengths
    hi = int(ends.max())
    offsets = np.empty(2 * n + 1, dtype=np.int64)
    offsets[0:-1:2] = starts - lo
    offsets[1::2] = ends - lo
    offsets[-1] = hi - lo
    if hi - lo >= 2**31 - 1 or (np.diff(offsets) < 0).any():  # not ordered: copy in Python
        data = b"".join([mv[s:e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)])
        offs = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(lengths, out=offs[1:])
        return _binary(data, offs).cast(typ)
    window = pa.py_buffer(mv[lo:hi])
    alternating = pa.Array.from_buffers(
        typ, 2 * n, [None, pa.py_buffer(offsets.astype(np.int32)), window]
    )
    return alternating.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))


def _binary(data: bytes | np.ndarray, offsets: np.ndarray) -> pa.Array:
    n = len(offsets) - 1
    return pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _host_strings(ip: np.ndarray, v6: np.ndarray, port: np.ndarray) -> pa.Array:
    """``ip:port`` / ``[v6]:port`` strings (as :class:`HostPort` prints them), per row.

    ``ip`` is fastdecode's n x 16 bytes (IPv4 in the first 4). Hosts repeat: each distinct
    one is formatted once.
    """
    n = len(port)
    if n and not v6.any():  # IPv4 only: one uint64 per (ip, port), usually a single value
        ip4 = np.ascontiguousarray(ip[:, :4]).view(">u4").reshape(-1).astype(np.uint64)
        key = (ip4 << np.uint64(32)) | (port.astype(np.int64) & 0xFFFFFFFF).astype(np.uint64)

        def v4(k: int) -> str:
            a, p = k >> 32, k & 0xFFFFFFFF
            p = p - (1 << 32) if p & 0x80000000 else p
            return f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}:{p}"

        if (key == key[0]).all():
            return pa.repeat(v4(int(key[0])), n)
        u, inv = np.unique(key, return_inverse=True)
        return pa.array([v4(int(k)) for k in u], pa.string()).take(
            pa.array(inv.reshape(-1).astype(np.int32))
        )
    texts: dict[tuple[bytes, bool, int], str] = {}
    out = []
    for i in range(n):
        k = (bytes(ip[i]), bool(v6[i]), int(port[i]))
        t = texts.get(k)
        if t is None:
            if k[1]:
                t = f"[{ipaddress.IPv6Address(k[0])}]:{k[2]}"
            else:
                b = k[0]
                t = f"{b[0]}.{b[1]}.{b[2]}.{b[3]}:{k[2]}"
            texts[k] = t
        out.append(t)
    return pa.array(out, pa.string())


def _offset_msg_ids(
    ip: np.ndarray, v6: np.ndarray, port: np.ndarray, phys: np.ndarray
) -> pa.Array:
    """``MessageDecoder#createMessageId``: upper hex of store IP + port + commitlog offset."""
    n = len(port)
    if not v6.any():
        raw = np.empty((n, 16), dtype=np.uint8)
        raw[:, :4] = ip[:, :4]
        raw[:, 4:8] = port.astype(">i4").view(np.uint8).reshape(n, 4)
        raw[:, 8:] = phys.astype(">i8").view(np.uint8).reshape(n, 8)
        text = _HEX2[raw].reshape(-1)
        offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
        return _binary(text, offsets).cast(pa.string())
    ids = []
    for i in range(n):
        host = bytes(ip[i]) if v6[i] else bytes(ip[i][:4])
        ids.append(
            (host + int(port[i]).to_bytes(4, "big", signed=True)
             + int(phys[i]).to_bytes(8, "big", signed=True)).hex().upper()
        )
    return pa.array(ids, pa.string())


def _magic_strings(magic: np.ndarray) -> pa.Array:
    """``"0xdaa320a7"`` / ``"0xdaa320ab"`` per row (as ``mqtool messages --json`` shows it)."""
    names = pa.array([f"{MAGIC_V1:#010x}", f"{MAGIC_V2:#010x}"], pa.string())
    return names.take(pa.array((magic == MAGIC_V2).astype(np.int8)))


_COMPRESSION_NAMES = pa.array(
    [COMPRESSION_NAMES.get(i, "ZLIB") for i in range(8)], pa.string()
)


def _compression_types(sysflag: np.ndarray) -> pa.Array:
    """ZLIB / LZ4 / ZSTD for compressed bodies (sysFlag bits 8-10), null otherwise."""
    kind = (sysflag >> 8) & 7
    compressed = (sysflag & COMPRESSED_FLAG) != 0
    return _COMPRESSION_NAMES.take(pa.array(kind, mask=~compressed))


def _crc_ok(
    buf: mmap.mmap, body_pos: np.ndarray, body_len: np.ndarray, stored: np.ndarray
) -> pa.Array:
    """BODYCRC check: ``crc32(body) & 0x7FFFFFFF == BODYCRC`` per record (``UtilAll.crc32``)."""
    with memoryview(buf) as mv:
        crc = np.fromiter(
            (
                zlib.crc32(mv[s : s + ln]) & 0x7FFFFFFF
                for s, ln in zip(body_pos.tolist(), body_len.tolist(), strict=True)
            ),
            dtype=np.int64, count=len(body_pos),
        )
    return pa.array(crc == stored.astype(np.int64))


def _maps_for(props: pa.Array, sel: np.ndarray) -> pa.Array:
    """Property maps for the rows where ``sel`` is true, null elsewhere."""
    n = len(props)
    idx = np.flatnonzero(sel)
    maps, _ = property_maps(props.take(pa.array(idx)))
    offsets = np.zeros(n + 1, dtype=np.int32)
    counts = np.zeros(n, dtype=np.int32)
    counts[idx] = np.diff(np.asarray(maps.offsets, dtype=np.int32))
    np.cumsum(counts, out=offsets[1:])
    return pa.MapArray.from_arrays(
        pa.array(offsets), maps.keys, maps.items, mask=pa.array(~sel)
    )


# --- properties -------------------------------------------------------------------------------
def _property_pairs(props: pa.Array) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """Every ``key\x01value`` pair of every row: (keys, values, row of each pair).

    Byte-level and vectorised: the separators are found with numpy over the rows' UTF-8 data
    (``\x01``/``\x02`` are ASCII, never inside a multi-byte character), segments are the
    spans between row bounds and ``\x02``; a segment is a pair when its first ``\x01`` has a
    non-empty key before it and a non-empty value after it (Java: ``kvSepIndex > index &&
    kvSepIndex < newIndex - 1``). Keys and values are cut by Arrow from the data buffer.
    """
    n = len(props)
    empty = pa.array([], pa.string())
    if n == 0:
        return empty, empty, np.zeros(0, dtype=np.int64)
    offsets = np.frombuffer(props.buffers()[1], dtype=np.int32)[props.offset : props.offset + n + 1]
    lo, hi = int(offsets[0]), int(offsets[-1])
    data_buf = props.buffers()[2]
    if data_buf is None or hi == lo:
        return empty, empty, np.zeros(0, dtype=np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8)[:hi]
    rows = offsets.astype(np.int64)
    sep2 = np.flatnonzero(data[lo:hi] == 2) + lo
    # segment bounds: row start / after each \x02 .. each \x02 / row end, in order
    # The i-th start and the i-th end (both in row, then position order) bound segment i.
    # Both lists are merges of sorted arrays: np.insert at searchsorted places, no sort. A
    # segment start right after a row's last \x02 goes before the next rows' starts; a \x02
    # on a row's first byte goes after the previous row's end.
    at = np.searchsorted(rows[:-1], sep2 + 1, side="left")
    starts = np.insert(rows[:-1], at, sep2 + 1)
    seg_row = np.insert(np.arange(n, dtype=np.int64), at, at - 1)
    ends = np.insert(rows[1:], np.searchsorted(rows[1:], sep2, side="right"), sep2)
    sep1 = np.flatnonzero(data[lo:hi] == 1) + lo
    k = np.searchsorted(sep1, starts, side="left")
    has = k < len(sep1)
    kv = np.where(has, sep1[np.minimum(k, max(len(sep1) - 1, 0))] if len(sep1) else 0, -1)
    ok = has & (kv > starts) & (kv < ends - 1)
    starts, ends, kv, seg_row = starts[ok], ends[ok], kv[ok], seg_row[ok]
    m = len(starts)
    if m == 0:
        return empty, empty, np.zeros(0, dtype=np.int64)
    bounds = np.empty(4 * m + 1, dtype=np.int64)
    bounds[0:-1:4] = starts
    bounds[1::4] = kv
    bounds[2::4] = kv + 1
    bounds[3::4] = ends
    bounds[-1] = ends[-1]
    alternating = pa.Array.from_buffers(
        pa.string(), 4 * m, [None, pa.py_buffer(bounds.astype(np.int32)), data_buf]
    )
    keys = alternating.take(pa.array(np.arange(0, 4 * m, 4, dtype=np.int64)))
    values = alternating.take(pa.array(np.arange(2, 4 * m, 4, dtype=np.int64)))
    return keys, values, seg_row


def property_maps(props: pa.Array) -> tuple[pa.Array, dict[str, pa.Array]]:
    """``MessageDecoder#string2messageProperties`` over a string array, vectorised.

    Returns the ``map<string,string>`` array (last duplicate wins, as in the Java HashMap) and,
    for TAGS / KEYS / UNIQ_KEY, a string array with the value or null per row.
    """
    n = len(props)
    keys, values, parent = _property_pairs(props)
    m = len(keys)
    keep = np.ones(m, dtype=bool)
    if m:
        enc = pc.dictionary_encode(keys)
        codes = np.asarray(enc.indices, dtype=np.int64)
        ndistinct = len(enc.dictionary)
        counts = np.bincount(parent, minlength=n)
        starts = np.zeros(n, dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        nonempty = counts > 0
        if ndistinct <= 64:
            bits = np.left_shift(np.uint64(1), codes.astype(np.uint64))
            ored = np.bitwise_or.reduceat(bits, starts[nonempty]) if m else bits[:0]
            distinct = np.zeros(n, dtype=np.int64)
            distinct[nonempty] = np.bitwise_count(ored)
            dup_rows = np.flatnonzero(distinct != counts)
        else:
            order = np.lexsort((codes, parent))
            sp, sc = parent[order], codes[order]
            same = (sp[1:] == sp[:-1]) & (sc[1:] == sc[:-1])
            dup_rows = np.unique(sp[1:][same])
        for r in dup_rows:  # rare: batch messages carry WAIT twice
            seen: set[int] = set()
            for j in range(int(starts[r] + counts[r] - 1), int(starts[r]) - 1, -1):
                c = int(codes[j])
                if c in seen:
                    keep[j] = False
                seen.add(c)
        if not keep.all():
            mask = pa.array(keep)
            keys, values, parent = keys.filter(mask), values.filter(mask), parent[keep]
    counts = np.bincount(parent, minlength=n) if len(parent) else np.zeros(n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    maps = pa.MapArray.from_arrays(pa.array(offsets), keys, values)
    picked: dict[str, pa.Array] = {}
    for name in ("TAGS", "KEYS", "UNIQ_KEY"):
        hit = np.asarray(pc.equal(keys, name), dtype=bool) if len(keys) else np.zeros(0, bool)
        idx = np.full(n, -1, dtype=np.int64)
        idx[parent[hit]] = np.flatnonzero(hit)
        picked[name] = values.take(pa.array(idx, mask=idx < 0))
    return maps, picked


# --- commitlog ----------------------------------------------------------------------------
class _Decoded:
    """Result of decoding one window: a batch of the first ``good`` records."""

    def __init__(self, batch: pa.RecordBatch | None, good: int) -> None:
        self.batch = batch
        self.good = good


def _strings(b: fastdecode.Binary) -> pa.Array:
    """A fastdecode Binary column (checked UTF-8 item by item) as an Arrow string array."""
    return _slices(memoryview(b.data), b.starts, b.lengths, pa.string())


def _decode_records(
    mm: mmap.mmap,
    positions: list[int],
    *,
    store: str,
    name: str,
    file_start: int,
    check_crc: bool,
    columns: frozenset[str] | None = None,
    properties_for: tuple[str, ...] = (),
) -> _Decoded:
    """Decode the records at ``positions`` (from the walk) into one message batch.

    The fields are decoded and every record is checked by
    :func:`mqtool.formats.fastdecode.decode_records` (the project's vectorised decoder, proven
    equal to ``parse_message``); this adds what the tables need on top: Arrow columns, host
    strings, offsetMsgId, CRC check, property maps. ``good`` is how many leading records were
    decoded (``positions[good]`` starts an unreadable region). ``columns`` (None: all) names
    the message columns to compute, the others are null; ``properties_for``: compute
    ``properties`` only for topics with these prefixes.
    """
    cols, good = fastdecode.decode_records(mm, positions, file_start=file_start)
    n = len(cols)
    if n == 0:
        return _Decoded(None, good)
    c = cols.arrays
    pos = c["position"]
    topics = _strings(cols.topic)
    props = _strings(cols.properties)
    want = MESSAGE_NAMES if columns is None else columns
    sysflag = c["sys_flag"]
    lazy: dict[str, Any] = {
        "store": lambda: pa.repeat(store, n),
        "file": lambda: pa.repeat(name, n),
        "fileOffset": lambda: pa.array(pos),
        "commitLogOffset": lambda: pa.array(c["physical_offset"]),
        "storeSize": lambda: pa.array(c["total_size"].astype(np.int32)),
        "magic": lambda: _magic_strings(c["magic"]),
        "topic": lambda: topics,
        "queueId": lambda: pa.array(c["queue_id"].astype(np.int32)),
        "queueOffset": lambda: pa.array(c["queue_offset"]),
        "flag": lambda: pa.array(c["flag"].astype(np.int32)),
        "sysFlag": lambda: pa.array(sysflag.astype(np.int32)),
        "bodyCRC": lambda: pa.array(c["body_crc"].astype(np.int32)),
        "bornTimestamp": lambda: pa.array(c["born_timestamp"]),
        "bornHost": lambda: _host_strings(c["born_ip"], c["born_v6"], c["born_port"]),
        "storeTimestamp": lambda: pa.array(c["store_timestamp"]),
        "storeHost": lambda: _host_strings(c["store_ip"], c["store_v6"], c["store_port"]),
        "reconsumeTimes": lambda: pa.array(c["reconsume_times"].astype(np.int32)),
        "preparedTransactionOffset": lambda: pa.array(c["prepared_transaction_offset"]),
        "bodyLength": lambda: pa.array(c["body_length"].astype(np.int32)),
        "propertiesRaw": lambda: props,
        "offsetMsgId": lambda: _offset_msg_ids(
            c["store_ip"], c["store_v6"], c["store_port"], c["physical_offset"]
        ),
        "crcOk": lambda: _crc_ok(mm, c["body_position"], c["body_length"], c["body_crc"])
        if check_crc
        else pa.nulls(n, pa.bool_()),
        "compressionType": lambda: _compression_types(sysflag),
    }
    arrays: dict[str, pa.Array] = {}
    if want & {"properties", "tags", "keys", "uniqKey"}:
        if properties_for and not want & {"tags", "keys", "uniqKey"}:
            sel = np.zeros(n, dtype=bool)
            for prefix in properties_for:
                sel |= np.asarray(pc.starts_with(topics, prefix), dtype=bool)
            arrays["properties"] = _maps_for(props, sel)
        else:
            maps, picked = property_maps(props)
            arrays.update(
                properties=maps, tags=picked["TAGS"], keys=picked["KEYS"],
                uniqKey=picked["UNIQ_KEY"],
            )
    for f in MESSAGE_FIELDS:
        if f.name not in arrays:
            arrays[f.name] = lazy[f.name]() if f.name in want else pa.nulls(n, f.type)
    batch = pa.RecordBatch.from_arrays(
        [arrays[f.name] for f in MESSAGE_FIELDS], schema=_NULLABLE_MESSAGE_SCHEMA
    )
    return _Decoded(batch, good)


def _records(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A message batch widened to RECORD_SCHEMA (recordType = msg)."""
    n = batch.num_rows
    arrays = [pa.repeat(RECORD_KIND_MESSAGE, n), pa.nulls(n, pa.string())]
    arrays += [batch.column(i) for i in range(batch.num_columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=RECORD_SCHEMA)


def _special(kind: str, detail: str, *, store: str, name: str, file_start: int, offset: int,
             length: int) -> pa.RecordBatch:
    """A one-row RECORD_SCHEMA batch for a BLANK record or an unreadable region."""
    values: dict[str, Any] = {
        "recordType": kind, "detail": detail, "store": store, "file": name,
        "fileOffset": offset, "commitLogOffset": file_start + offset, "storeSize": length,
    }
    return pa.RecordBatch.from_pylist([values], schema=RECORD_SCHEMA)


def _valid_at(mm: mmap.mmap, q: int, *, file_start: int, fsize: int) -> bool:
    """Whether a complete, self-consistent record (or the file's BLANK) starts at ``q``."""
    if q < 0 or q + 8 > fsize:
        return False
    size, magic = _SIZE_MAGIC.unpack_from(mm, q)
    if magic == MAGIC_BLANK:
        return bool(size == fsize - q)
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        return False
    if size < MIN_RECORD_SIZE or q + size > fsize:
        return False
    try:
        rec = parse_message(mm, q, file_start=file_start)
    except FormatError:
        return False
    return not isinstance(rec, BlankRecord) and rec.physical_offset == file_start + q


def _data_extents(fd: int | None, start: int, stop: int) -> Iterator[tuple[int, int]]:
    """The parts of ``[start, stop)`` that hold data, skipping holes of a sparse file.

    RocketMQ pre-allocates commitlog files; where that left holes (``SEEK_DATA``/``SEEK_HOLE``),
    nothing needs to be read to know they are zeros. Without support, one extent.
    """
    if fd is None or not hasattr(os, "SEEK_DATA"):
        if start < stop:
            yield start, stop
        return
    pos = start
    while pos < stop:
        try:
            d = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno != errno.ENXIO:  # no SEEK_DATA support here: read everything
                yield pos, stop
            return  # ENXIO: only a hole is left
        if d >= stop:
            return
        try:
            h = os.lseek(fd, d, os.SEEK_HOLE)
        except OSError:
            h = stop
        yield d, min(h, stop)
        pos = h


def _release(mm: mmap.mmap, lo: int, hi: int) -> None:
    """Drop the mapped pages of ``[lo, hi)`` from this process (they stay in the page cache)."""
    page = mmap.PAGESIZE
    lo = (lo + page - 1) // page * page
    hi = hi // page * page
    if hi > lo:
        mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def resync(
    mm: mmap.mmap, start: int, *, file_start: int, fsize: int, fd: int | None = None
) -> int | None:
    """The first position >= ``start`` where a valid record or the file's BLANK starts.

    Candidates are found with ``mmap.find`` on the magic bytes (fast over zeros and garbage;
    holes of sparse files are skipped with ``SEEK_DATA`` when ``fd`` is given), then checked
    with :func:`mqtool.formats.commitlog.parse_message` and PHYSICALOFFSET.
    """
    for lo, hi in _data_extents(fd, max(start, 0), fsize):
        q = max(start, lo)
        found = _resync_in(mm, q, hi, file_start=file_start, fsize=fsize)
        if hi - lo > 4 * WINDOW:
            _release(mm, lo, found if found is not None else hi)
        if found is not None:
            return found
    return None


def _resync_in(mm: mmap.mmap, q: int, hi: int, *, file_start: int, fsize: int) -> int | None:
    """:func:`resync` within one data extent: records whose magic lies in ``[q + 4, hi)``."""
    next_magic = next_blank = -2  # cached find results, recomputed once passed
    while q < hi:
        if next_magic != -1 and next_magic < q + 4:
            next_magic = mm.find(_MAGIC_PREFIX, q + 4, hi)
        if next_blank != -1 and next_blank < q + 4:
            # a BLANK only matters before the next message candidate: bound the search
            bound = next_magic + 4 if next_magic >= 0 else hi
            next_blank = mm.find(_BLANK_BYTES, q + 4, bound)
            if next_blank == -1 and next_magic >= 0:
                next_blank = -2 if bound < hi else -1
        cands = [x for x in (next_magic, next_blank) if x >= 0]
        if not cands:
            return None
        i = min(cands)
        c = i - 4
        if i == next_magic and (i + 3 >= fsize or mm[i + 3] not in (0xA7, 0xAB)):
            q = c + 1
            continue
        if _valid_at(mm, c, file_start=file_start, fsize=fsize):
            return c
        q = c + 1
    return None


def _nonzero_end(
    mm: mmap.mmap, start: int, stop: int, fd: int | None = None, chunk: int = WINDOW
) -> int:
    """One past the last non-zero byte in ``[start, stop)`` (``start`` if all zero)."""
    for lo, hi0 in reversed(list(_data_extents(fd, start, stop))):
        hi = hi0
        while hi > lo:
            c_lo = max(lo, hi - chunk)
            a = np.frombuffer(mm, dtype=np.uint8, count=hi - c_lo, offset=c_lo)
            if a.any():
                end = hi - int(np.argmax(a[::-1] != 0))
                del a
                return end
            del a
            hi = c_lo
        if hi0 - lo > 4 * chunk:
            _release(mm, lo, hi0)
    return start


def _what_is_at(mm: mmap.mmap, q: int, fsize: int) -> str:
    """Why a walk stopped at ``q``: ``blank`` (the file's BLANK record), ``zeros``, ``tail``
    (fewer than 8 bytes left) or ``bad`` (anything else that is not a valid message)."""
    if q + 8 > fsize:
        return "tail"
    size, magic = _SIZE_MAGIC.unpack_from(mm, q)
    if magic == MAGIC_BLANK and size == fsize - q:
        return "blank"
    if size == 0 and magic == 0:
        return "zeros"
    return "bad"


def _bad_detail(mm: mmap.mmap, c: int, file_start: int, fsize: int) -> str:
    if c + 8 > fsize:
        return f"{fsize - c} stray bytes at the end of the file"
    try:
        rec = parse_message(mm, c, file_start=file_start)
    except FormatError as e:
        return str(e.detail)
    if isinstance(rec, BlankRecord):
        return f"BLANK record with TOTALSIZE {rec.total_size}, {fsize - c} bytes left in the file"
    if rec.physical_offset != file_start + c:
        return f"PHYSICALOFFSET field says {rec.physical_offset}, record sits at {file_start + c}"
    return "record does not decode"


def decode_commitlog_range(
    path: str,
    *,
    store: str,
    name: str,
    file_start: int,
    start: int,
    end: int,
    check_crc: bool = True,
    window: int = WINDOW,
    columns: frozenset[str] | None = None,
    properties_for: tuple[str, ...] = (),
) -> Iterator[pa.RecordBatch]:
    """Record batches (RECORD_SCHEMA) for the records that start in ``[start, end)``.

    ``file_start`` is the commitlog offset of the file's first byte (its name). The first
    record is found by :func:`resync`; the last one may extend past ``end``. A BLANK ends the
    file; zeros to the end of the file end the data. Anything else that is not a record is
    reported as one ``unreadable`` row (offset and length of the region, and what was found)
    by the range in which the region starts. ``columns`` / ``properties_for``: see
    :func:`_decode_records` (column pruning for the audits' pass).
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        fsize = os.fstat(fd).st_size
        if fsize == 0 or start >= fsize:
            os.close(fd)
            return
        mm = mmap.mmap(fd, fsize, access=mmap.ACCESS_READ)
    except BaseException:
        os.close(fd)
        raise
    released = 0

    def special(kind: str, detail: str, offset: int, length: int) -> pa.RecordBatch:
        return _special(
            kind, detail, store=store, name=name, file_start=file_start, offset=offset,
            length=length,
        )

    try:
        p = resync(mm, start, file_start=file_start, fsize=fsize, fd=fd)
        while p is not None and p < end:
            stop = min(end, p + window)
            positions, q = fastdecode.walk(mm, p, stop)
            if positions:
                dec = _decode_records(
                    mm, positions, store=store, name=name, file_start=file_start,
                    check_crc=check_crc, columns=columns, properties_for=properties_for,
                )
                if dec.batch is not None:
                    yield _records(dec.batch)
                if dec.good < len(positions):
                    q = positions[dec.good]
            if q >= end:
                break  # every record that starts in the range is out
            if q >= stop:
                p = q  # a window boundary inside the range
            else:
                why = _what_is_at(mm, q, fsize)
                if why == "blank":
                    size = _SIZE_MAGIC.unpack_from(mm, q)[0]
                    yield special(RECORD_KIND_BLANK, "", q, size)
                    break
                r = resync(mm, q + 1, file_start=file_start, fsize=fsize, fd=fd)
                stop_at = r if r is not None else fsize
                region_end = _nonzero_end(mm, q, stop_at, fd) if r is None else r
                if why in ("zeros", "tail") and r is None and region_end <= q:
                    break  # end of written data: zeros to the end of the file
                if r is None:
                    detail = _bad_detail(mm, q, file_start, fsize)
                    if region_end <= q:
                        region_end = min(q + 8, fsize)
                elif why == "zeros":
                    detail = f"{r - q} zero bytes, then records again at file offset {r}"
                else:
                    detail = _bad_detail(mm, q, file_start, fsize)
                yield special(RECORD_KIND_UNREADABLE, detail, q, region_end - q)
                p = r
            # give back pages we are done with (keeps RSS flat on big files)
            if p is not None and p - released > 4 * window:
                cut = (p - 2 * window) & ~(mmap.PAGESIZE - 1)
                if cut > released:
                    mm.madvise(mmap.MADV_DONTNEED, released, cut - released)
                    released = cut
    finally:
        mm.close()
        os.close(fd)


def decode_commitlog_file_messages(
    path: str, *, store: str = "", name: str = "", file_start: int | None = None,
    check_crc: bool = True,
) -> pa.Table:
    """All message rows (MESSAGE_SCHEMA) of one whole commitlog file (tests, benchmarks)."""
    base = int(os.path.basename(path)) if file_start is None else file_start
    size = os.path.getsize(path)
    batches = decode_commitlog_range(
        path, store=store, name=name or f"commitlog/{os.path.basename(path)}", file_start=base,
        start=0, end=size, check_crc=check_crc,
    )
    table = pa.Table.from_batches(list(batches), schema=RECORD_SCHEMA)
    msgs = table.filter(pc.equal(table["recordType"], RECORD_KIND_MESSAGE))
    return msgs.select(MESSAGE_SCHEMA.names).cast(MESSAGE_SCHEMA)


# --- consume queues -------------------------------------------------------------------------
def decode_cq_file(
    path: str, *, store: str, name: str, topic: str, queue_id: int, base: int,
    chunk_units: int = 1 << 20,
) -> Iterator[pa.RecordBatch]:
    """CQ_SCHEMA batches of the written units of one consume-queue file.

    ``base`` is the file's start byte offset in the queue (its name); the logical offset of a
    unit is (base + position) / 20. Reading stops at the first all-zero unit (unwritten space).
    """
    fsize = os.path.getsize(path)
    units = fsize // CQ_STORE_UNIT_SIZE
    with open(path, "rb") as f:
        done = 0
        while done < units:
            count = min(chunk_units, units - done)
            arr = np.fromfile(f, dtype=CQ_DTYPE, count=count)
            if len(arr) == 0:
                break
            empty = (arr["offset"] == 0) & (arr["size"] == 0) & (arr["tags"] == 0)
            cut = np.flatnonzero(empty)
            if cut.size:
                arr = arr[: cut[0]]
            k = len(arr)
            if k:
                file_off = (done + np.arange(k, dtype=np.int64)) * CQ_STORE_UNIT_SIZE
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.repeat(store, k), pa.repeat(name, k), pa.array(file_off),
                        pa.repeat(topic, k), pa.array(np.full(k, queue_id, dtype=np.int32)),
                        pa.array((base + file_off) // CQ_STORE_UNIT_SIZE),
                        pa.array(arr["offset"].astype(np.int64)),
                        pa.array(arr["size"].astype(np.int32)),
                        pa.array(arr["tags"].astype(np.int64)),
                    ],
                    schema=CQ_SCHEMA,
                )
            if cut.size:
                break
            done += count


# --- index files ----------------------------------------------------------------------------
def index_problem(path: str, name: str) -> FormatError | None:
    """Why an index file cannot be read (header, geometry), or None when it can."""
    fsize = os.path.getsize(path)
    if fsize == 0:
        return FormatError(name, 0, "empty index file (0 bytes)")
    with open(path, "rb") as f, mmap.mmap(f.fileno(), fsize, access=mmap.ACCESS_READ) as mm:
        try:
            header = parse_header(mm, file=name)
            geo = index_geometry(fsize, file=name, buf=mm)
        except FormatError as e:
            return e
        if header.index_count > geo.index_num:
            return FormatError(
                name, 36, f"indexCount {header.index_count} exceeds the {geo.index_num} entries"
            )
    return None


def decode_index_file(
    path: str, *, store: str, name: str, chunk_entries: int = 1 << 20
) -> Iterator[pa.RecordBatch]:
    """INDEX_SCHEMA batches of the used entries (1 .. indexCount-1) of one index file.

    A file whose header or geometry cannot be read gives no rows (the driver reports it, see
    :func:`index_problem`).
    """
    fsize = os.path.getsize(path)
    if fsize == 0:
        return
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), fsize, access=mmap.ACCESS_READ)
    try:
        try:
            header = parse_header(mm, file=name)
            geo = index_geometry(fsize, file=name, buf=mm)
        except FormatError:
            return
        count = min(header.index_count, geo.index_num)
        dtype = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])
        first = 1
        while first < count:
            k = min(chunk_entries, count - first)
            off = geo.entry_pos(first)
            arr = np.frombuffer(mm, dtype=dtype, count=k, offset=off).copy()
            entry = np.arange(first, first + k, dtype=np.int32)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.repeat(store, k), pa.repeat(name, k),
                    pa.array(off + (entry - first).astype(np.int64) * INDEX_SIZE),
                    pa.array(entry), pa.array(arr["hash"].astype(np.int32)),
                    pa.array(arr["phy"].astype(np.int64)), pa.array(arr["diff"].astype(np.int32)),
                    pa.array(arr["prev"].astype(np.int32)),
                    pa.array(np.full(k, header.begin_timestamp, dtype=np.int64)),
                ],
                schema=INDEX_SCHEMA,
            )
            del arr
            first += k
    finally:
        mm.close()
