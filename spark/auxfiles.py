"""Consume-queue and index files to Arrow record batches (no pyspark here).

Plain functions over a file path, used inside Spark executors (:mod:`mqtool.spark.source`) and
usable (and tested) without Spark. The commitlog has its own module, :mod:`.decode`.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from mqtool.formats.buffers import close_map
from mqtool.formats.consumequeue import CQ_DTYPE, CQ_STORE_UNIT_SIZE
from mqtool.formats.errors import FormatError
from mqtool.formats.indexfile import INDEX_SIZE, index_geometry, parse_header
from mqtool.spark.schema import CQ_SCHEMA, INDEX_SCHEMA


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
def index_span(path: str, name: str) -> tuple[int, int, int] | None:
    """Where the used entries (1 .. indexCount-1) of an index file sit: (entry 1's position,
    the end of the last used entry, the header's beginTimestamp); None when the header or the
    geometry cannot be read (the driver reports that:
    :func:`mqtool.spark.scan.index_file_findings`)."""
    fsize = os.path.getsize(path)
    if fsize == 0:
        return None
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), fsize, access=mmap.ACCESS_READ)
    try:
        try:
            header = parse_header(mm, file=name)
            geo = index_geometry(fsize, file=name, buf=mm)
        except FormatError:
            return None
        count = max(1, min(header.index_count, geo.index_num))
        return geo.entry_pos(1), geo.entry_pos(count), header.begin_timestamp
    finally:
        close_map(mm)


def decode_index_file(
    path: str, *, store: str, name: str, chunk_entries: int = 1 << 20
) -> Iterator[pa.RecordBatch]:
    """INDEX_SCHEMA batches of the used entries (1 .. indexCount-1) of one index file
    (:func:`index_span`; a file whose header or geometry cannot be read gives no rows)."""
    span = index_span(path, name)
    if span is None:
        return
    start, end, begin = span
    dtype = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), os.path.getsize(path), access=mmap.ACCESS_READ)
    try:
        first = 1
        off = start
        while off < end:
            k = min(chunk_entries, (end - off) // INDEX_SIZE)
            arr = np.frombuffer(mm, dtype=dtype, count=k, offset=off).copy()
            entry = np.arange(first, first + k, dtype=np.int32)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.repeat(store, k), pa.repeat(name, k),
                    pa.array(off + (entry - first).astype(np.int64) * INDEX_SIZE),
                    pa.array(entry), pa.array(arr["hash"].astype(np.int32)),
                    pa.array(arr["phy"].astype(np.int64)), pa.array(arr["diff"].astype(np.int32)),
                    pa.array(arr["prev"].astype(np.int32)),
                    pa.array(np.full(k, begin, dtype=np.int64)),
                ],
                schema=INDEX_SCHEMA,
            )
            del arr
            first += k
            off += k * INDEX_SIZE
    finally:
        close_map(mm)
