"""The commitlog pass of ``mqtool verify``: every file walked once, in windows.

Each commitlog file is walked by :func:`mqtool.formats.field_walker.walk_fields` (the compiled
kernel over good records, the one walker wherever it stops). Per file it records how the data
reads (:class:`FileScan`: messages, data end, first break, unreadable bytes) and adds the
walker's findings, the body-CRC and 5.x ``__CRC32#`` findings, gaps between files and zeros in
the middle of the data. The records come in windows (one kernel field table, at most
:data:`mqtool.formats.field_walker.BATCH` records): each window's compact facts
(:class:`Messages`) are handed to a callback and then dropped, so the pass needs memory for one
window, whatever the store's size.

The facts are built by :class:`mqtool.store.facts.MessagesBuilder`, which also builds them for
records read at given offsets (:func:`mqtool.store.records_at.messages_at`).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from mqtool.formats import commitlog_fields as fields
from mqtool.formats.commitlog import (
    CRC32_RESERVED_LEN,
    PROPERTY_CRC32,
    BlankRecord,
    CommitLogMessage,
    FileEnd,
    parse_message,
)
from mqtool.formats.errors import Finding, Severity, TornPropertiesError
from mqtool.integrity.verify_report import FileScan, FindingSink, ProgressFn
from mqtool.store.facts import Messages, MessagesBuilder
from mqtool.store.files import CommitLogFile
from mqtool.store.reader import Store

WindowFn = Callable[[Messages], None]
"""Called with the facts of each window of records, in commitlog order."""


_CRC_TAIL = (PROPERTY_CRC32 + "\x01").encode("ascii")


def _crc_findings(
    buf: Any, a: np.ndarray, f: np.ndarray, file: CommitLogFile, check_crc: bool,
    fs: FileScan, sink: FindingSink,
) -> None:
    """The body CRC and 5.x ``__CRC32#`` findings of a kernel field table's records."""
    bad = np.flatnonzero(f[fields.F_CRC_OK] == 0) if check_crc else np.zeros(0, np.int64)
    # the 5.x property CRC: records whose properties end in the reserved __CRC32# slot
    plen = f[fields.F_PROPS_LEN]
    cand = np.flatnonzero(plen >= CRC32_RESERVED_LEN)
    if cand.size:
        at = (f[fields.F_PROPS_POS][cand] + plen[cand] - CRC32_RESERVED_LEN)
        head = a[at[:, None] + np.arange(len(_CRC_TAIL))]
        cand = cand[(head == np.frombuffer(_CRC_TAIL, np.uint8)).all(axis=1)]
    for i in sorted(set(bad.tolist()) | set(cand.tolist())):
        pos = int(f[fields.F_POS, i])
        item = parse_message(buf, pos, file=file.rel, file_start=file.start)
        assert isinstance(item, CommitLogMessage)
        _record_crc(item, file, check_crc, fs, sink)


def _record_crc(
    item: CommitLogMessage, f: CommitLogFile, check_crc: bool, fs: FileScan, sink: FindingSink
) -> bool:
    """Check one record's body CRC and 5.x property CRC; whether the body CRC is good."""
    phy = item.physical_offset
    ok = True
    if check_crc:
        ok = item.body_crc == (zlib.crc32(item.body) & 0x7FFFFFFF)
        if not ok:
            sink.add(Finding(
                "crc-mismatch", f.rel, phy - f.start,
                f"body CRC mismatch ({item.topic}/{item.queue_id}@"
                f"{item.queue_offset})", expected=f"{item.body_crc:#010x}",
                found=f"{zlib.crc32(item.body) & 0x7FFFFFFF:#010x}", phy=phy,
            ))
            if fs.first_break is None:
                fs.first_break = phy  # checkCRCOnRecover stops there
        if PROPERTY_CRC32 in item.properties_raw:
            got = item.prop_crc()
            if got is not None and got[0] != got[1]:
                sink.add(Finding(
                    "crc-mismatch", f.rel, phy - f.start,
                    "5.x __CRC32# property does not match the record",
                    expected=str(got[0]), found=str(got[1]), phy=phy,
                ))
    return ok


def scan_commitlog(
    store: Store, sink: FindingSink, check_crc: bool, progress: ProgressFn | None,
    on_window: WindowFn,
) -> list[FileScan]:
    """Walk every commitlog file (see the module doc); ``on_window`` gets each window's
    facts (with tagsCodes and index key hashes)."""
    scans: list[FileScan] = []
    cols = MessagesBuilder()

    def flush() -> None:
        nonlocal cols
        if cols.rows:
            on_window(cols.messages())
            cols = MessagesBuilder()

    for f in store.commitlog_files:  # (a file of the wrong size is a finding of Store.open)
        fs = FileScan(f, data_end=f.start)
        scans.append(fs)
        buf = store.mapped(f)
        raw = fields.as_bytes(buf)
        try:  # the descriptor lets the walker skip the holes of a sparse (pre-allocated) file
            fd: int | None = os.open(f.path, os.O_RDONLY) if len(buf) else None
        except OSError:
            fd = None
        try:
            for item in store.walk_fields(f, check_crc=check_crc, crc_findings=False, fd=fd):
                if isinstance(item, np.ndarray):
                    k = item.shape[1]
                    if not k:
                        continue
                    _crc_findings(buf, raw, item, f, check_crc, fs, sink)
                    cols.add_fields(raw, item, check_crc)
                    flush()
                    fs.messages += k
                    fs.message_bytes += int(item[fields.F_SIZE].sum())
                    fs.data_end = int(item[fields.F_PHYS, k - 1] + item[fields.F_SIZE, k - 1])
                elif isinstance(item, CommitLogMessage):
                    ok = _record_crc(item, f, check_crc, fs, sink)
                    cols.add_message(item, ok)
                    fs.messages += 1
                    fs.message_bytes += item.total_size
                    fs.data_end = item.end_offset
                elif isinstance(item, BlankRecord):
                    fs.data_end = item.physical_offset
                elif isinstance(item, Finding):  # the walker's unreadable regions
                    pos = item.offset if item.offset is not None else 0
                    phy = item.phy if item.phy is not None else f.start + pos
                    fs.unreadable_bytes += int(getattr(item, "length", 0) or 0)
                    if item.kind == TornPropertiesError.kind:  # recovery keeps the record
                        if fs.first_kept_damage is None:
                            fs.first_kept_damage = phy
                    elif fs.first_break is None:
                        fs.first_break = phy
                    sink.add(Finding(
                        item.kind, f.rel, phy - f.start, item.detail, severity=item.severity,
                        expected=item.expected, found=item.found, phy=phy,
                    ))
                elif isinstance(item, FileEnd):
                    store.walked_ends[f.path] = item
                    fs.end_kind = item.kind
                    if item.kind in ("torn", "corrupt"):
                        pos = item.physical_offset - f.start
                        if fs.first_break is None or item.physical_offset < fs.first_break:
                            fs.first_break = item.physical_offset
                        if fs.unreadable_bytes == 0:
                            fs.unreadable_bytes = f.size - pos
                        sink.add(Finding(
                            "torn-record" if item.kind == "torn" else "corrupt", f.rel, pos,
                            item.detail or "unreadable bytes", phy=item.physical_offset,
                        ))
                    elif item.kind == "zeros" and fs.first_break is None:
                        fs.first_break = item.physical_offset
                        if fs.data_end < item.physical_offset:
                            fs.data_end = item.physical_offset
        finally:
            if fd is not None:
                os.close(fd)
        flush()
        del raw
        if progress is not None:
            progress(f.size)
    # layout across files: gaps, zeros before data
    for a, b in zip(scans, scans[1:], strict=False):
        if a.file.start + a.file.size != b.file.start:
            sink.add(Finding(
                "gap", b.file.rel, 0,
                f"file starts at {b.file.start} but the previous one ends at "
                f"{a.file.start + a.file.size} (commitlog data missing)",
            ))
    last_data = max((i for i, s in enumerate(scans) if s.messages), default=-1)
    for i, s in enumerate(scans):
        if s.end_kind == "zeros" and i < last_data:
            sink.add(Finding(
                "unexpected-zeros", s.file.rel, s.data_end - s.file.start,
                "the data of this file ends in zeros but a later commitlog file holds messages",
                phy=s.data_end,
            ))
        elif s.end_kind == "zeros" and i > last_data and s.messages == 0 and i > 0:
            sink.add(Finding(
                "zeros", s.file.rel, 0,
                "pre-allocated commitlog file, never written (normal after a crash or while the "
                "broker runs)", severity=Severity.INFO,
            ))
    return scans



def message_windows(store: Store, lo: int, hi: int | None = None) -> Iterator[Messages]:
    """The facts of the readable messages with ``lo <= phy < hi``, in commitlog order, one
    window at a time (a walk like :func:`scan_commitlog`'s, without CRC and findings)."""
    for f in store.commitlog_files:
        if f.start + f.size <= lo or (hi is not None and f.start >= hi):
            continue
        buf = store.mapped(f)
        raw = fields.as_bytes(buf)
        cols = MessagesBuilder(keys=False, tags=False)
        for item in store.walk_fields(f):
            if isinstance(item, np.ndarray):
                ph = item[fields.F_PHYS]
                sel = (ph >= lo) if hi is None else ((ph >= lo) & (ph < hi))
                if sel.any():
                    cols.add_fields(raw, np.ascontiguousarray(item[:, sel]), False)
                    yield cols.messages()
                    cols = MessagesBuilder(keys=False, tags=False)
            elif isinstance(item, CommitLogMessage) and item.physical_offset >= lo and (
                    hi is None or item.physical_offset < hi):
                cols.add_message(item, True)
        if cols.rows:
            yield cols.messages()
        del raw
