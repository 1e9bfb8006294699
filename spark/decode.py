"""Commitlog byte ranges to Arrow record batches, through the compiled record kernel.

No pyspark here: plain functions over a file path and a byte range, used inside Spark executors
(:mod:`mqtool.spark.source`) and usable (and tested) without Spark.

:func:`decode_commitlog_range` maps the file read-only and hands it, window by window, to the
record kernel (:func:`mqtool.formats.kernel.scan`: TOTALSIZE walk, every check of
``parse_message``, field gather and optionally BODYCRC, compiled); :mod:`.arrowcols` wraps the
kernel's buffers as Arrow columns (property maps split by the kernel too). Pages behind the
walk are released with ``madvise(MADV_DONTNEED)`` and holes of sparse files skipped with
``SEEK_DATA``, so memory stays flat whatever the file size.

The kernel only decodes clean runs of records: where it stops, this module asks what is there
(the file's BLANK, zeros, or damage). Anything that is not a record becomes an ``unreadable``
row naming the file and offset; the decoder then resynchronises on the next valid record (the
one "a record is here" rule, :func:`_valid_at`: ``parse_message`` accepts it and its
PHYSICALOFFSET is its own position) and keeps going.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mqtool.formats import kernel as K
from mqtool.formats.commitlog import (
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    BlankRecord,
    parse_message,
)
from mqtool.formats.errors import FormatError
from mqtool.spark import arrowcols
from mqtool.spark.arrowcols import property_maps
from mqtool.spark.schema import (
    MESSAGE_SCHEMA,
    RECORD_KIND_BLANK,
    RECORD_KIND_MESSAGE,
    RECORD_KIND_UNREADABLE,
    RECORD_SCHEMA,
)

__all__ = ["decode_commitlog_range", "decode_commitlog_file_messages", "property_maps", "resync"]

MESSAGE_FIELDS = list(MESSAGE_SCHEMA)
MESSAGE_NAMES = frozenset(MESSAGE_SCHEMA.names)
_NULLABLE_MESSAGE_SCHEMA = pa.schema([f.with_nullable(True) for f in MESSAGE_FIELDS])

WINDOW = 16 * 1024 * 1024
"""Bytes of commitlog between page releases, and the unit of the resync search."""

BATCH_RECORDS = 8192
"""Records per Arrow batch (one kernel call): small enough to stay in the CPU caches."""

MIN_RECORD_SIZE = 91  # calMsgLength(V1, IPv4 hosts, empty body/topic/properties)
_SIZE_MAGIC = struct.Struct(">iI")
_MAGIC_PREFIX = b"\xda\xa3\x20"  # V1 0xDAA320A7 and V2 0xDAA320AB share these bytes
_BLANK_BYTES = struct.pack(">I", MAGIC_BLANK)


def _message_batch(
    a: np.ndarray, fields: np.ndarray, *, store: str, name: str,
    columns: frozenset[str] | None, properties_for: tuple[str, ...],
    splitter: K.PropertySplitter,
) -> pa.RecordBatch:
    """One RECORD_SCHEMA batch of the kernel's accepted records (``columns``: None for all;
    the others are null)."""
    n = fields.shape[1]
    want = MESSAGE_NAMES if columns is None else columns
    arrays = arrowcols.message_columns(
        a, fields, store=store, name=name, want=want, properties_for=properties_for,
        splitter=splitter,
    )
    cols = [pa.repeat(RECORD_KIND_MESSAGE, n), pa.nulls(n, pa.string())]
    cols += [arrays[f.name] if f.name in arrays else pa.nulls(n, f.type) for f in MESSAGE_FIELDS]
    return pa.RecordBatch.from_arrays(cols, schema=RECORD_SCHEMA)


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
    batch_records: int = BATCH_RECORDS,
) -> Iterator[pa.RecordBatch]:
    """Record batches (RECORD_SCHEMA) for the records that start in ``[start, end)``.

    ``file_start`` is the commitlog offset of the file's first byte (its name). The first
    record is found by :func:`resync`; the last one may extend past ``end``. A BLANK ends the
    file; zeros to the end of the file end the data. Anything else that is not a record is
    reported as one ``unreadable`` row (offset and length of the region, and what was found)
    by the range in which the region starts. ``columns`` (None: all) names the message
    columns to compute, the others are null; ``properties_for``: compute ``properties`` only
    for topics with these prefixes (column pruning for the audits' pass).
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

    a = np.frombuffer(mm, dtype=np.uint8)
    words = K.words_of(a)
    table = K.field_table(batch_records)
    splitter = K.PropertySplitter(8 * batch_records)
    try:
        p = resync(mm, start, file_start=file_start, fsize=fsize, fd=fd)
        while p is not None and p < end:
            count, q, status = K.scan(
                a, words, p, end, file_start, check_crc, table, K.CRC_TABLES
            )
            if count:
                yield _message_batch(
                    a, table[:, :count], store=store, name=name, columns=columns,
                    properties_for=properties_for, splitter=splitter,
                )
            if status == K.STOP_FULL:
                p = q
            elif q >= end:
                break  # every record that starts in the range is out
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
        del a, words
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
