"""Message selection over a store: filters applied in physical order, with progress.

The commitlog is walked by the compiled kernel (:func:`mqtool.formats.field_walker.walk_fields`:
the walker's records and findings, damage judged by the one walker); the filter's topic, queue
and time bounds are applied to the kernel's field tables, and only the records that can match
are decoded into :class:`CommitLogMessage` (:meth:`MessageFilter.matches` has the last word).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from mqtool.formats.buffers import Buffer
from mqtool.formats.commitlog import CommitLogMessage, FileEnd, parse_message
from mqtool.formats.errors import Finding, FormatError
from mqtool.formats.rules import is_lmq, lmq_dispatch
from mqtool.formats.walker import Unreadable
from mqtool.integrity.record_check import RecordCheck
from mqtool.store.files import CommitLogFile
from mqtool.store.reader import Store

ProgressFn = Callable[[int, int], None]
"""``progress(bytes done, bytes total)`` over the commitlog."""

CHECK_BATCH = 4096
"""Selected messages checked together against their units and index entries."""


@dataclass(frozen=True, slots=True)
class MessageFilter:
    """What to select. Times are epoch ms (``until`` exclusive); ``where`` is any further test
    (e.g. the DLQ selection's original topic and message ids). An LMQ ``topic`` (``%LMQ%<name>``,
    one queue, id 0) selects the records of other topics the broker dispatched to it (their
    ``INNER_MULTI_DISPATCH`` names it)."""

    topic: str | None = None
    queue_id: int | None = None
    since: int | None = None
    until: int | None = None
    tag: str | None = None
    key: str | None = None
    start_offset: int = 0
    limit: int | None = None
    where: Callable[[CommitLogMessage], bool] | None = None

    def matches(self, m: CommitLogMessage) -> bool:
        if self.topic is not None and is_lmq(self.topic):  # its records are another topic's
            if self.topic not in lmq_dispatch(m.properties) or self.queue_id not in (None, 0):
                return False
        elif self.topic is not None and m.topic != self.topic:
            return False
        elif self.queue_id is not None and m.queue_id != self.queue_id:
            return False
        if self.since is not None and m.store_timestamp < self.since:
            return False
        if self.until is not None and m.store_timestamp >= self.until:
            return False
        if self.tag is not None and m.tags != self.tag:
            return False
        if self.key is not None and self.key not in m.key_list:
            return False
        return self.where is None or self.where(m)

    def may_match(self, buf: Buffer, fields: np.ndarray) -> np.ndarray:
        """Which records of a kernel field table can match (topic, queue and time bounds; the
        rest is for :meth:`matches`)."""
        f = fields
        from mqtool.formats import (
            commitlog_fields,  # numba loads only when a command walks (CLI start-up)
        )

        ok = f[commitlog_fields.F_PHYS] >= self.start_offset
        lmq = self.topic is not None and is_lmq(self.topic)
        if self.queue_id is not None and not lmq:
            ok &= f[commitlog_fields.F_QUEUE_ID] == self.queue_id
        if self.since is not None:
            ok &= f[commitlog_fields.F_STORE_TS] >= self.since
        if self.until is not None:
            ok &= f[commitlog_fields.F_STORE_TS] < self.until
        if self.topic is not None and not lmq:
            want = np.frombuffer(self.topic.encode("utf-8"), dtype=np.uint8)
            ok &= f[commitlog_fields.F_TOPIC_LEN] == len(want)
            rows = np.flatnonzero(ok)
            if rows.size and len(want):
                a = commitlog_fields.as_bytes(buf)
                got = a[f[commitlog_fields.F_TOPIC_POS][rows][:, None] + np.arange(len(want))]
                del a
                ok[rows] = (got == want).all(axis=1)
        return np.asarray(ok, dtype=bool)


def kernel_messages(
    store: Store, start_offset: int = 0, *, since: int | None = None,
    flt: MessageFilter | None = None, progress: ProgressFn | None = None,
) -> Iterator[CommitLogMessage]:
    """:meth:`Store.messages` on the compiled kernel: every message in physical order from
    ``start_offset`` (files before ``since`` skipped), the walker's findings noted in
    ``store.findings``; with ``flt``, only records that :meth:`MessageFilter.may_match` are
    decoded (the caller still applies :meth:`MessageFilter.matches`)."""
    from mqtool.formats import (
        commitlog_fields,  # numba loads only when a command walks (CLI start-up)
    )

    files = store.commitlog_files
    first = 0
    if start_offset:
        first = max(0, bisect.bisect_right([f.start for f in files], start_offset) - 1)
    if since is not None:
        first = max(first, store._first_file_since(since))
    total = sum(f.size for f in files)
    base = files[0].start if files else 0
    ends: list[tuple[CommitLogFile, FileEnd, int]] = []
    for f in files[first:]:
        buf = store.mapped(f)
        try:  # the descriptor lets the walker skip the holes of a sparse (pre-allocated) file
            fd: int | None = os.open(f.path, os.O_RDONLY) if len(buf) else None
        except OSError:
            fd = None
        count = 0
        try:
            for item in store.walk_fields(f, check_crc=store.check_crc, fd=fd):
                if isinstance(item, np.ndarray):
                    k = item.shape[1]
                    count += k
                    ok = (flt.may_match(buf, item) if flt is not None
                          else item[commitlog_fields.F_PHYS] >= start_offset)
                    at = item[commitlog_fields.F_POS][ok].tolist()
                    last = int(item[commitlog_fields.F_PHYS, k - 1]) if k else f.start
                    for pos in at:
                        rec = _accepted(store, f, buf, pos)
                        if rec is not None:
                            yield rec
                    if progress is not None:
                        progress(last - base, total)
                elif isinstance(item, CommitLogMessage):
                    count += 1
                    if item.physical_offset >= start_offset:
                        yield item
                elif isinstance(item, Finding):
                    store.note(item)
                elif isinstance(item, FileEnd):
                    ends.append((f, item, count))
        finally:
            if fd is not None:
                os.close(fd)
    store._check_early_end(ends)
    if progress is not None:
        progress(total, total)


def _accepted(
    store: Store, f: CommitLogFile, buf: Buffer, pos: int
) -> CommitLogMessage | None:
    """The record the kernel accepted at ``pos``, decoded; None, and a finding, when the bytes
    no longer decode (they changed under the walk: a live store's write point)."""
    try:
        rec = parse_message(buf, pos, file=f.rel, file_start=f.start)
    except FormatError as e:
        why = e.detail
    else:
        if isinstance(rec, CommitLogMessage):
            return rec
        why = "not a message"
    store.note(Unreadable("corrupt", f.rel, pos, f"record changed while it was read: {why}",
                          phy=f.start + pos))
    return None


def scan_messages(
    store: Store, start_offset: int = 0, *, since: int | None = None,
    progress: ProgressFn | None = None,
) -> Iterator[CommitLogMessage]:
    """Every message in physical order, reporting progress in commitlog bytes."""
    return kernel_messages(store, start_offset, since=since, progress=progress)


def select_messages(
    store: Store, flt: MessageFilter, *, progress: ProgressFn | None = None
) -> Iterator[CommitLogMessage]:
    """Messages matching ``flt`` in commitlog order (files before ``since`` are skipped); the
    damage around each (its consume-queue unit, its index entries:
    :class:`mqtool.integrity.record_check.RecordCheck`) is noted in the store's findings."""
    n = 0
    if flt.limit is not None and flt.limit <= 0:
        return
    check = RecordCheck(store)
    shown: list[CommitLogMessage] = []  # checked a batch at a time
    try:
        for m in kernel_messages(store, flt.start_offset, since=flt.since, flt=flt,
                                 progress=progress):
            if flt.matches(m):
                yield m
                shown.append(m)
                if len(shown) >= CHECK_BATCH:
                    check.check(shown)
                    shown.clear()
                n += 1
                if flt.limit is not None and n >= flt.limit:
                    return
    finally:
        if shown:
            check.check(shown)
