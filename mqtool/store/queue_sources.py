"""The consume queues of a store that are not ``consumequeue/<topic>/<queueId>/`` files.

* a RocksDB consume queue (``storeType=defaultRocksDB``): the database at ``consumequeue/``
  (:mod:`mqtool.store.rocksdb_queue`); with ``rocksdbCQDoubleWriteEnable`` the broker writes the
  file queue beside it, and both are read (``verify`` compares them);
* BatchConsumeQueue topics (``queue.type=BatchCQ``): ``batchconsumequeue/<topic>/<queueId>/``,
  46-byte units, one per (inner) batch, at the queue offset of the batch's first message
  (:mod:`mqtool.formats.batchcq`).

A unit of these queues is a :class:`mqtool.store.files.QueueEntry` like a file unit: its
``file`` is the batch queue file, or ``consumequeue`` for RocksDB with ``file_offset`` -1 (the
unit's RocksDB key is :meth:`QueueSources.rocks_key`). LMQ queues (``%LMQ%<name>/0``) are file
or RocksDB queues like any other; which record a unit of theirs may name is a verify rule
(:mod:`mqtool.integrity.lmq`).
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mqtool.formats.consumequeue import CqEntry
from mqtool.formats.errors import Finding, Severity
from mqtool.formats.store_dirs import (
    BATCH_DIR,
    COMPACTED,
    COMPACTION_DIR,
    CONSUMEQUEUE_DIR,
    is_rocksdb_dir,
    numbered_files,
    queue_dirs,
    special_parts,
)
from mqtool.store.files import QueueEntry, map_readonly, queue_stray

if TYPE_CHECKING:  # the batch layout and RocksDB are imported where a store has them
    from mqtool.formats.batchcq import BatchCqEntry
    from mqtool.store.rocksdb_queue import RocksQueues

ROCKS_REL = CONSUMEQUEUE_DIR


@dataclass
class QueueSources:
    """Which queues a store root holds beside its file consume queues, and their units."""

    root: Path
    rocks: RocksQueues | None = None
    batch: list[tuple[str, int]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    # batch units per queue (read once): (queue offset, entry, file rel, in-file offset)
    _batch_units: dict[tuple[str, int], list[tuple[int, BatchCqEntry, str, int]]] = field(
        default_factory=dict)

    @classmethod
    def of(cls, root: Path) -> QueueSources:
        qs = cls(root)
        cq = root / ROCKS_REL
        if cq.is_dir() and is_rocksdb_dir(cq):
            from mqtool.store.rocksdb_queue import RocksQueues  # a RocksDB store only

            qs.rocks = RocksQueues.open(cq, ROCKS_REL)
            qs.findings += qs.rocks.findings
        bd = root / BATCH_DIR
        others: list[Path] = []
        qs.batch = [(topic, qid) for topic, qid, _ in queue_dirs(bd, others)]
        qs.findings += [queue_stray(root, bd, p) for p in others]
        return qs

    @property
    def file_queues_dir(self) -> Path | None:
        """Where ``<topic>/<queueId>/`` consume-queue files are: ``consumequeue/`` unless the
        RocksDB queue is there (then the double-written file queue, if any, sits among the
        database's files as topic directories all the same)."""
        return self.root / ROCKS_REL

    def is_rocks_file(self, name: str) -> bool:
        """A file of the RocksDB database at ``consumequeue/`` (not a topic directory)."""
        return self.rocks is not None and not (self.root / ROCKS_REL / name).is_dir()

    def ids(self) -> list[tuple[str, int]]:
        out = set(self.batch)
        if self.rocks is not None:
            out.update(self.rocks.queue_ids())
        return sorted(out)

    def kind(self, topic: str, queue_id: int) -> str:
        """``batch``, ``rocksdb`` or ``file`` (a file queue, or none of these). A queue written
        both ways (``rocksdbCQDoubleWriteEnable`` on the file store) is a file queue; its RocksDB
        copy is :meth:`double_written`."""
        if (topic, queue_id) in self.batch:
            return "batch"
        if self.rocks is not None and (topic, queue_id) in self.rocks.units \
                and not (self.root / ROCKS_REL / topic / str(queue_id)).is_dir():
            return "rocksdb"
        return "file"

    def double_written(self) -> list[tuple[str, int]]:
        """Queues with both a file queue and RocksDB units."""
        if self.rocks is None:
            return []
        return [tq for tq in self.rocks.queue_ids()
                if (self.root / ROCKS_REL / tq[0] / str(tq[1])).is_dir()]

    def rocks_entries(self, topic: str, queue_id: int) -> Iterator[QueueEntry]:
        """The RocksDB units of a queue, whatever its kind."""
        if self.rocks is not None:
            for qoff, u in self.rocks.queue_units(topic, queue_id):
                yield QueueEntry(topic, queue_id, qoff, CqEntry(u.phy_offset, u.size,
                                                                u.tags_code), ROCKS_REL, -1)

    def rocks_key(self, topic: str, queue_id: int, queue_offset: int) -> str:
        return self.rocks.key_of(topic, queue_id, queue_offset) if self.rocks else ""

    def batch_units(self, topic: str, queue_id: int
                    ) -> list[tuple[int, BatchCqEntry, str, int]]:
        from mqtool.formats.batchcq import CQ_STORE_UNIT_SIZE as BATCH_UNIT_SIZE
        from mqtool.formats.batchcq import iter_batch_cq

        key = (topic, queue_id)
        got = self._batch_units.get(key)
        if got is not None:
            return got
        out: list[tuple[int, BatchCqEntry, str, int]] = []
        d = self.root / BATCH_DIR / topic / str(queue_id)
        for p in numbered_files(d):
            rel = f"{BATCH_DIR}/{topic}/{queue_id}/{p.name}"
            size = p.stat().st_size
            if size % BATCH_UNIT_SIZE:
                self.findings.append(Finding(
                    "cq", rel, size - size % BATCH_UNIT_SIZE, f"batch consume-queue file size "
                    f"{size} is not a multiple of {BATCH_UNIT_SIZE}"))
            buf = map_readonly(p)
            try:
                for pos, e in iter_batch_cq(buf, file=rel):
                    out.append((e.msg_base_offset, e, rel, pos))
            finally:
                if isinstance(buf, mmap.mmap):
                    buf.close()
        self._batch_units[key] = out
        return out

    def entries(self, topic: str, queue_id: int, start: int = 0) -> Iterator[QueueEntry]:
        """Units of a batch or RocksDB queue in queue order from logical offset ``start`` (a
        batch unit is given at its first message's offset; it covers ``batch_size``)."""
        if self.kind(topic, queue_id) == "batch":
            for qoff, e, rel, pos in self.batch_units(topic, queue_id):
                if qoff + e.batch_size > start:
                    yield QueueEntry(topic, queue_id, qoff,
                                     CqEntry(e.phy_offset, e.size, e.tags_code), rel, pos)
            return
        for qe in self.rocks_entries(topic, queue_id):
            if qe.queue_offset >= start:
                yield qe

    def span(self, topic: str, queue_id: int) -> tuple[int, int, int | None]:
        """(min offset, max offset, last unit's commitlog offset) of a batch or RocksDB queue."""
        if self.kind(topic, queue_id) == "batch":
            us = self.batch_units(topic, queue_id)
            if not us:
                return 0, 0, None
            last = us[-1]
            return us[0][0], last[0] + last[1].batch_size, last[1].phy_offset
        units = list(self.rocks.queue_units(topic, queue_id)) if self.rocks else []
        if not units:
            return 0, 0, None
        return units[0][0], units[-1][0] + 1, units[-1][1].phy_offset


def unread_parts(root: Path) -> list[Finding]:
    """Warnings naming the parts of the store mqtool does not read, for ``inspect`` and
    ``verify`` to say so rather than show nothing: the compaction store of 5.x compacted topics
    (``CompactionStore``: ``compaction/compactionLog/``, ``compactionCq/``, derived from the
    commitlog, whose records of those topics are read as any others)."""
    out = []
    if COMPACTED in special_parts(root):
        out.append(Finding(
            "layout", f"{COMPACTION_DIR}/", None, "compacted topics (cleanup.policy=COMPACTION): "
            "their compaction log and queues are not read (their records in the commitlog are)",
            severity=Severity.WARNING))
    return out
