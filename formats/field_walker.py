"""The walker's answers at the kernel's speed: one commitlog file in batches of decoded fields.

:func:`walk_fields` gives what :func:`.walker.walk` gives for a file (records in physical
order, BLANK ends, unreadable regions, CRC findings, and last the :class:`.commitlog.FileEnd`),
except that runs of good records come as the compiled kernel's field tables
(:func:`.commitlog_fields.scan`, one column per record) instead of one Python object per record.

The kernel never judges damage. Wherever it stops, the walk is handed to the one walker
(:mod:`.walker`) from the last record known to be good: the walker says what is there (a
BLANK, the zero tail, an unreadable region and where records start again) and the kernel
resumes at the next record. Where the walker finds a record the kernel has just refused and
now accepts, a writer is appending to the file (a running broker): the walk ends there, at
the data as it was when the walk reached it. A CRC mismatch the kernel sees is turned into
the walker's own finding by walking that one record. So damage gets the walker's kinds,
offsets and texts.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from mqtool.formats import commitlog_fields
from mqtool.formats.buffers import Buffer
from mqtool.formats.commitlog import BlankRecord, CommitLogMessage, FileEnd
from mqtool.formats.commitlog_layout import MIN_RECORD_SIZE
from mqtool.formats.errors import Finding
from mqtool.formats.walker import Unreadable, walk

FieldItem = np.ndarray | CommitLogMessage | BlankRecord | Finding | FileEnd
"""What :func:`walk_fields` yields: a field table (``commitlog_fields.N_FIELDS`` x k records, valid
until the next item is asked for), or one of :func:`.walker.walk`'s items."""

BATCH = 1 << 16  # records per kernel call


def _crc_split(
    buf: Buffer, fields: np.ndarray, file: str | None, file_start: int
) -> Iterator[FieldItem]:
    """``fields`` with the walker's ``crc-mismatch`` finding before each record whose body CRC
    the kernel found wrong (the record itself stays in the table, ``F_CRC_OK`` 0)."""
    bad = np.flatnonzero(fields[commitlog_fields.F_CRC_OK] == 0)
    lo = 0
    for i in bad.tolist():
        if i > lo:
            yield fields[:, lo:i]
        pos = int(fields[commitlog_fields.F_POS, i])
        for item in walk(buf, file=file, file_start=file_start, start=pos, stop=pos + 1,
                         check_crc=True):
            if isinstance(item, Finding):
                yield item
        lo = i
    if lo < fields.shape[1]:
        yield fields[:, lo:]


def _accepts(buf: Buffer, pos: int, file_start: int) -> bool:
    """Whether the kernel accepts a record at ``pos`` now."""
    fields, _, _ = commitlog_fields.scan_buffer(buf, pos, len(buf), file_start=file_start, cap=1)
    return bool(fields.shape[1] == 1)


def walk_fields(
    buf: Buffer,
    *,
    file: str | None = None,
    file_start: int = 0,
    check_crc: bool = False,
    crc_findings: bool = True,
    batch: int = BATCH,
    fd: int | None = None,
) -> Iterator[FieldItem]:
    """Walk the commitlog file ``buf`` like :func:`.walker.walk` (same arguments), records in
    kernel field tables.

    With ``check_crc`` the kernel checks every BODYCRC (``F_CRC_OK`` 1/0); ``crc_findings``
    also yields the walker's ``crc-mismatch`` finding before each record that fails. Messages
    the walker accepts and the kernel does not (none are known) come as
    :class:`CommitLogMessage`. Ends with the file's :class:`FileEnd`.
    """
    n = len(buf)
    table = commitlog_fields.field_table(max(1, min(batch, n // MIN_RECORD_SIZE + 1)))
    p = 0  # where the kernel goes on
    anchor = 0  # a position where a record is known to start (or 0)
    while True:
        fields, q, status = commitlog_fields.scan_buffer(buf, p, n, file_start=file_start,
                                               check_crc=check_crc, out=table)
        k = fields.shape[1]
        if k:
            anchor = int(fields[commitlog_fields.F_POS, k - 1])
            if check_crc and crc_findings and (fields[commitlog_fields.F_CRC_OK] == 0).any():
                yield from _crc_split(buf, fields, file, file_start)
            else:
                yield fields
        if status == commitlog_fields.STOP_FULL:
            p = q
            continue
        if status == commitlog_fields.STOP_END:  # q >= n: records fill the file exactly
            yield FileEnd(file_start + q, "eof")
            return
        # the kernel stopped at q: the walker, from the last good record, says what is there
        items = walk(buf, file=file, file_start=file_start, start=anchor, fd=fd)
        resume: int | None = None
        for item in items:
            if isinstance(item, CommitLogMessage):
                pos = item.physical_offset - file_start
                if pos < q:
                    continue  # the anchor record: the kernel gave it already
                if resume is not None:  # records again after an unreadable region
                    p = anchor = pos
                    break
                if pos == q and _accepts(buf, q, file_start):
                    # refused by the kernel a moment ago, taken now: a writer (a running
                    # broker) is appending to the file. The walk ends where its data ended,
                    # rather than chase the writer.
                    yield FileEnd(file_start + q, "zeros", "the file was being written")
                    return
                if check_crc:  # the kernel refused what the walker accepts: take its record
                    crc_item = next(walk(buf, file=file, file_start=file_start, start=pos,
                                         stop=pos + 1, check_crc=True))
                    if crc_findings and isinstance(crc_item, Finding):
                        yield crc_item
                yield item
                p = anchor = pos + item.total_size
                break
            if isinstance(item, Unreadable):
                yield item
                resume = int(item.offset or 0) + item.length
                continue
            if isinstance(item, int):  # pragma: no cover - only with decode=False
                continue
            yield item  # BlankRecord, then FileEnd; or the FileEnd after zeros or damage
            if isinstance(item, FileEnd):
                return
        else:
            # no record at the anchor any more: the bytes changed under the walk (a file a
            # running broker writes); the walker says what is at q now
            for item in walk(buf, file=file, file_start=file_start, start=q, fd=fd,
                             chained=True):
                if isinstance(item, Finding | FileEnd | BlankRecord | CommitLogMessage):
                    yield item
            return
