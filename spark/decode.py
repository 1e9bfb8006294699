"""Commitlog byte ranges to Arrow record batches, through the compiled record kernel.

No pyspark here: plain functions over a file path and a byte range, used inside Spark executors
(:mod:`mqtool.spark.source`) and usable (and tested) without Spark.

:func:`decode_commitlog_range` maps the file read-only and hands it, window by window, to the
record kernel (:func:`mqtool.formats.commitlog_fields.scan`: TOTALSIZE walk, every check of
``parse_message``, field gather and optionally BODYCRC, compiled); :mod:`.arrowcols` wraps the
kernel's buffers as Arrow columns (property maps split by the kernel too). Pages behind the
walk are released with ``madvise(MADV_DONTNEED)`` and holes of sparse files skipped with
``SEEK_DATA``, so memory stays flat whatever the file size.

The kernel only decodes clean runs of records: where it stops, this module asks what is there
(the file's BLANK, zeros, or damage). Anything that is not a record becomes an ``unreadable``
row naming the file and offset; the decoder then resynchronises on the next valid record (the
one "a record is here" rule of :mod:`mqtool.formats.walker`: ``looks_like_record_at`` /
``next_record``) and keeps going.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mqtool.formats import commitlog_fields, jit, walker
from mqtool.formats.buffers import close_map
from mqtool.formats.commitlog import (
    MAGIC_BLANK,
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

_SIZE_MAGIC = struct.Struct(">iI")


def _message_batch(
    a: np.ndarray, fields: np.ndarray, *, store: str, name: str,
    columns: frozenset[str] | None, properties_for: tuple[str, ...],
    splitter: commitlog_fields.PropertySplitter,
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


def resync(
    mm: mmap.mmap, start: int, *, file_start: int, fsize: int, fd: int | None = None
) -> int | None:
    """The first position >= ``start`` where a valid record or the file's BLANK starts: the one
    "a record is here" rule and its search, :func:`mqtool.formats.walker.next_record` (holes of
    sparse files skipped when ``fd`` is given)."""
    return walker.next_record(mm, max(start, 0), file_start, fd=fd)


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
    chain: bool | None = None,
) -> Iterator[pa.RecordBatch]:
    """Record batches (RECORD_SCHEMA) for the records that start in ``[start, end)``.

    ``file_start`` is the commitlog offset of the file's first byte (its name). The first
    record is found by :func:`resync`; the last one may extend past ``end``. A BLANK ends the
    file; zeros to the end of the file end the data. Anything else that is not a record is
    reported as one ``unreadable`` row (offset and length of the region, and what was found)
    by the range in which the region starts. ``columns`` (None: all) names the message
    columns to compute, the others are null; ``properties_for``: compute ``properties`` only
    for topics with these prefixes (column pruning for the audits' pass).

    ``chain`` (default: ``start == 0``) says that ``start`` is where a record must start (a
    file's first byte, or where a chain of records read elsewhere broke off): no resync there,
    so damage at ``start`` is reported, not skipped. When the chain of records leaves the range
    on something that is neither a record nor the BLANK nor zeros to the end of the file, the
    region starting there is reported by this range too (the next range resyncs past it).
    """
    if chain is None:
        chain = start == 0
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
    words = commitlog_fields.words_of(a)
    table = commitlog_fields.field_table(batch_records)
    splitter = commitlog_fields.PropertySplitter(8 * batch_records)
    try:
        p = start if chain else resync(mm, start, file_start=file_start, fsize=fsize, fd=fd)
        while p is not None:
            if p >= end:
                if p >= fsize or walker.looks_like_record_at(mm, p, file_start):
                    break  # the next range owns what starts here
                q, status = p, commitlog_fields.STOP_ANOMALY
            else:
                count, q, status = commitlog_fields.scan(
                    a, words, p, end, file_start, check_crc, table, jit.CRC_TABLES
                )
                if count:
                    yield _message_batch(
                        a, table[:, :count], store=store, name=name, columns=columns,
                        properties_for=properties_for, splitter=splitter,
                    )
            if status != commitlog_fields.STOP_ANOMALY:
                p = q  # batch full, or the chain left the range (checked above)
            else:
                why = _what_is_at(mm, q, fsize)
                if why == "blank":
                    size = _SIZE_MAGIC.unpack_from(mm, q)[0]
                    yield special(RECORD_KIND_BLANK, "", q, size)
                    break
                r = resync(mm, q + 1, file_start=file_start, fsize=fsize, fd=fd)
                stop_at = r if r is not None else fsize
                region_end = walker.nonzero_end(mm, q, stop_at, fd=fd) if r is None else r
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
        close_map(mm)
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
