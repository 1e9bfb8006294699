"""A double-written consume queue in ``mqtool verify``: with ``rocksdbCQDoubleWriteEnable`` the
file store's dispatcher also puts every unit into a RocksDB consume queue beside the files
(``DefaultMessageStore#enableRocksdbCQWrite``, the same dispatch rules). Each queue's RocksDB
units must be its file units: one that differs, or that one side has and the other lacks, is a
finding naming the file unit or the RocksDB key."""

from __future__ import annotations

from collections.abc import Callable

from mqtool.formats.consumequeue import CqEntry
from mqtool.formats.errors import Finding, Severity
from mqtool.store.reader import Store


def compare_double_written(store: Store, add: Callable[[Finding], None]) -> int:
    """Compare every double-written queue; returns how many units were compared."""
    qs = store.queue_sources
    n = 0
    for topic, qid in qs.double_written():
        files = {e.queue_offset: e for e in store.queue_entries(topic, qid)}
        rocks = {e.queue_offset: e for e in qs.rocks_entries(topic, qid)}
        last_file = max(files, default=-1)
        for qoff in sorted(set(files) | set(rocks)):
            n += 1
            f, r = files.get(qoff), rocks.get(qoff)
            key = f"consumequeue (RocksDB key {qs.rocks_key(topic, qid, qoff)})"
            unit = f"unit {topic}/{qid}@{qoff}"
            if f is not None and r is not None:
                if f.entry != r.entry:
                    add(Finding("cq", f.file, f.file_offset,
                                f"{unit}: the file queue says {_u(f.entry)}, the RocksDB queue "
                                f"{_u(r.entry)} ({key})", phy=f.entry.commit_log_offset))
            elif f is not None:
                add(Finding("cq", f.file, f.file_offset, f"{unit} is in the file queue but not "
                            "in the RocksDB queue written beside it", phy=f.entry.commit_log_offset,
                            severity=Severity.WARNING if qoff > max(rocks, default=-1)
                            else Severity.ERROR))
            elif r is not None:
                add(Finding("cq", key, None, f"{unit} is in the RocksDB queue but not in the "
                            "file queue", phy=r.entry.commit_log_offset,
                            severity=Severity.WARNING if qoff > last_file else Severity.ERROR))
    return n


def _u(e: CqEntry) -> str:
    return f"commitlog offset {e.commit_log_offset} size {e.size} tagsCode {e.tags_code}"
