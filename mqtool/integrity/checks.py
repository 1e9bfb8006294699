"""Integrity checks of a store in one process, no JVM: what ``mqtool verify`` reports.

Reads the store through :class:`mqtool.store.Store` (read-only maps; the commitlog through its
record walk) and checks:

* the commitlog (:mod:`.commitlog_pass`): the record chain of every file (magic, TOTALSIZE,
  PHYSICALOFFSET, fields adding up), body CRC (and the 5.x ``__CRC32#`` property CRC) when
  asked, BLANK ends, file sizes, gaps between files, zeros in the middle of the data versus a
  crash's pre-allocated tail;
* consume-queue units against the commitlog (:mod:`.queues`): impossible values, units past the
  valid data, units that point at no record or at another queue's record (topic, queueId,
  queueOffset, size) and tagsCodes that are not the record's tag hash; messages that have no
  unit;
* index headers and entries (:mod:`.indexcheck`): entries past the valid data or at no record,
  key hashes that are none of the record's keys, time differences;
* the checkpoint against the data, ``delayOffset.json`` against the ``SCHEDULE_TOPIC_XXXX``
  queues, ``consumerOffset.json`` against the queues, empty or garbled config files and their
  ``.bak``, the abort and lock state (:mod:`.meta`); 5.x timer files (:mod:`.timer`).

Memory does not grow with the store: the commitlog is walked in windows of records, units and
index entries are read in chunks and checked against the records at their offsets, read in
place. Only ``tables=True`` (what ``mqtool repair`` asks for) keeps every message, unit and
entry in the report.

The rules shared with the Spark audits (which units and messages are not findings) live in
:mod:`mqtool.integrity.dispatch_rules`. Every finding names the file relative to the store root
and the byte offset inside that file (a commitlog position may follow as ``phy``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqtool.formats.errors import Finding, Severity
from mqtool.integrity.commitlog_pass import scan_commitlog
from mqtool.integrity.indexcheck import IndexCheck
from mqtool.integrity.meta import check_checkpoint, check_configs
from mqtool.integrity.pop import check_pop
from mqtool.integrity.queues import check_units, check_window, queue_shape
from mqtool.integrity.rocksdb import compare_double_written
from mqtool.integrity.verify_report import (
    FileScan,
    FindingSink,
    IndexScan,
    ProgressFn,
    QueueScan,
    Report,
)
from mqtool.store.facts import Messages
from mqtool.store.queue_sources import unread_parts
from mqtool.store.reader import Store

__all__ = ["FileScan", "IndexScan", "Messages", "ProgressFn", "QueueScan", "Report", "verify"]


def verify(
    root: str | Path, *, check_crc: bool = True, progress: ProgressFn | None = None,
    delay_levels: str | None = None, broker_conf: str | Path | None = None,
    tables: bool = False,
) -> Report:
    """Check the store at ``root`` (read-only) and return what was read and found.

    ``tables``: also keep every message's facts, every unit and every index entry in the
    report (``Report.messages``, ``QueueScan.phys``..., ``IndexScan.phys``; memory grows with
    the store); without it they are empty and memory is bounded."""
    from mqtool.delaylevels import given_levels
    from mqtool.integrity.delay import check_delay_levels, delay_summary
    from mqtool.integrity.timer import check_timer

    given_levels(delay_levels, broker_conf)  # bad options fail before the long read

    with Store.open(root) as store:
        sink = _LiveSink(store) if store.live else FindingSink()
        for f in store.findings:  # layout findings made while opening
            sink.add(f)
        abort = store.abort_exists
        lock = store.lock_state()
        queues: dict[tuple[str, int], QueueScan] = {}
        for topic, qid in store.queue_ids():
            queues[(topic, qid)] = queue_shape(store, topic, qid, sink, progress)
        for f in store.queue_sources.findings:  # RocksDB and batch queues that do not read
            sink.add(f)
        windows: list[Messages] = []
        last_ts = 0
        first_start = store.commitlog_files[0].start if store.commitlog_files else 0
        index = IndexCheck(store, first_start, sink, progress, tables)

        def window(m: Messages) -> None:
            nonlocal last_ts
            if len(m):
                last_ts = max(last_ts, int(m.store_ts.max()))
            check_window(store, m, queues, abort, sink)
            index.window(m)
            if tables:
                windows.append(m)

        scans = scan_commitlog(store, sink, check_crc, progress, window)
        # the schedule queues' evidence (the pass told the store where its data ends)
        levels = check_delay_levels(store, sink, delay_levels, broker_conf)
        msgs = Messages.concat(windows) if tables else Messages.empty()
        windows.clear()
        n_msgs = sum(s.messages for s in scans)
        data_end = max((s.data_end for s in scans if s.messages), default=first_start)
        if abort:
            sink.add(Finding("layout", "abort", None, "abort file present: the broker did not "
                             "shut down cleanly; its next start runs the abnormal recovery",
                             severity=Severity.INFO))
        if lock.locked:
            sink.add(Finding("layout", "lock", None, f"the store is locked by pid "
                             f"{lock.holder_pid} (a running broker): what is read may change",
                             severity=Severity.WARNING))
        for qs in queues.values():
            check_units(store, qs, first_start, data_end, sink, tables)
        indexes = index.finish(data_end)
        cp = check_checkpoint(store, n_msgs, last_ts, data_end, abort, sink)
        configs, stop_start = check_configs(store, queues, sink, max_now=_max_now(store))
        timer = check_timer(store, first_start, data_end, queues, sink)
        check_pop(store, sink.add)
        compare_double_written(store, sink.add)
        for f in store.findings:  # findings the store noted while reading (its listings')
            if f.kind in ("layout", "cq"):
                sink.add(f)
        for f in unread_parts(store.root):
            sink.add(f)
        report = Report(
            Path(store.root), sink.items, scans, msgs, list(queues.values()), indexes, configs,
            cp, abort, {"exists": lock.exists, "locked": lock.locked, "pid": lock.holder_pid},
            store.mapped_file_size, data_end,
            bytes_read=sum(s.file.size for s in scans), check_crc=check_crc, tables=tables,
            last_store_ts=last_ts, configs_stop_start=stop_start,
        )
    report.findings.sort(key=lambda f: (f.file, f.offset if f.offset is not None else -1))
    report.summary = summarize(report)
    report.summary["delayLevels"] = delay_summary(levels)
    if timer is not None:
        report.summary["timer"] = timer
    return report


class _LiveSink(FindingSink):
    """The findings of a live store: what its broker is still writing goes to the store's
    ``in_progress`` (:meth:`Store.written_since`), not to the report."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    def add(self, f: Finding) -> None:
        if self.store.written_since(f):
            self.store.in_progress.append(f)
        else:
            super().add(f)


def _max_now(store: Store) -> Callable[[str, int], int] | None:
    """On a live store: a queue's max offset measured again (a config file read after the
    queues may name units written since)."""
    if not store.live:
        return None
    return lambda topic, qid: queue_shape(store, topic, qid, FindingSink(), None).max_offset


def summarize(r: Report) -> dict[str, Any]:
    sev = Counter(str(f.severity) for f in r.findings)
    return {
        "store": str(r.root),
        "state": "crashed (abort file present)" if r.abort else "clean shutdown",
        "lock": r.lock,
        "commitlogFiles": len(r.files),
        "commitlogBytes": sum(s.file.size for s in r.files),
        "messages": sum(s.messages for s in r.files),
        "messageBytes": sum(s.message_bytes for s in r.files),
        "dataEnd": r.data_end,
        "unreadableBytes": sum(s.unreadable_bytes for s in r.files),
        "crcChecked": r.check_crc,
        "consumeQueues": len(r.queues),
        "consumeQueueUnits": sum(q.units for q in r.queues),
        "indexFiles": len(r.indexes),
        "indexEntries": sum(i.entries for i in r.indexes),
        "configFiles": sorted(r.configs),
        "errors": sev.get("error", 0),
        "warnings": sev.get("warning", 0),
        "infos": sev.get("info", 0),
    }
