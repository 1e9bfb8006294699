"""Consume queues in ``mqtool verify``: each queue's files, its units against the commitlog,
and messages that have no unit.

* :func:`queue_shape` reads a queue's files one at a time: empty files, sizes that are not whole
  units, bad names, units written after the queue ended, and where the written units are
  (:class:`QueueScan` ``segments``, min and max offset).
* :func:`check_window` takes one window of the commitlog pass: for each message it reads the
  unit at its queue offset; a unit that points at the message, with its size and tagsCode, is
  marked good (one bit per unit). Messages that must have a unit
  (``dispatch_rules.expected_in_cq``) and have none are findings; only when the unit at the
  message's offset is not its unit is the whole queue consulted.
* :func:`check_units` reads the units :data:`QueueScan.CHUNK` at a time and checks every unit
  not marked good against the record at its commitlog offset (read in place,
  :func:`mqtool.store.records_at.messages_at`): impossible values, units past the valid data, units
  that point at no record or at another queue's record (topic, queueId, queueOffset, size),
  tagsCodes that are not the record's tag hash.

Nothing here holds a queue's units or the store's messages: memory is one chunk or window
(and one bit per unit).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from mqtool.formats.consumequeue import CQ_DTYPE, CQ_STORE_UNIT_SIZE, MAX_ADDR
from mqtool.formats.errors import Finding, Severity
from mqtool.formats.rules import SCHEDULE_TOPIC, delay_written, schedule_unit_delay
from mqtool.formats.store_dirs import numbered_files
from mqtool.formats.walker import data_extents
from mqtool.integrity import dispatch_rules
from mqtool.integrity.verify_report import FindingSink, ProgressFn, QueueChunk, QueueScan
from mqtool.store.facts import Messages, distinct
from mqtool.store.files import misnamed
from mqtool.store.reader import Store
from mqtool.store.unit_check import unit_findings


class MemQueueScan(QueueScan):
    """A queue whose units are not 20-byte files (RocksDB, batch): read once, held in memory,
    each unit with where it is (file and offset, or the RocksDB key)."""

    labels: list[tuple[str, int | None]]

    @classmethod
    def of(cls, store: Store, topic: str, qid: int) -> MemQueueScan:
        es = list(store.queue_entries(topic, qid))
        qs = cls(topic, qid, [])
        qs.labels = []
        for e in es:
            if e.file_offset >= 0:
                qs.labels.append((e.file, e.file_offset))
            else:
                key = store.queue_sources.rocks_key(topic, qid, e.queue_offset)
                qs.labels.append((f"{e.file} (RocksDB key {key})", None))
        qs.offsets = np.array([e.queue_offset for e in es], np.int64)
        qs.phys = np.array([e.entry.commit_log_offset for e in es], np.int64)
        qs.sizes = np.array([e.entry.size for e in es], np.int64)
        qs.tags = np.array([e.entry.tags_code for e in es], np.int64)
        qs.units = len(es)
        info = store.queue_info(topic, qid)
        qs.min_offset, qs.max_offset = info.min_offset, info.max_offset
        return qs

    def chunks(self, chunk: int = QueueScan.CHUNK) -> Iterator[QueueChunk]:
        for c in range(0, self.units, chunk):
            sl = slice(c, c + chunk)
            yield self.offsets[sl], self.phys[sl], self.sizes[sl], self.tags[sl]

    def units_at(self, qoffs: np.ndarray) -> QueueChunk:
        n = len(qoffs)
        where = np.full(n, -1, np.int64)
        out = [np.full(n, -1, np.int64) for _ in range(3)]
        if self.units:
            i = np.minimum(np.searchsorted(self.offsets, qoffs), self.units - 1)
            hit = self.offsets[i] == qoffs
            where[hit] = i[hit]
            for o, src in zip(out, (self.phys, self.sizes, self.tags), strict=True):
                o[hit] = src[i[hit]]
        return where, out[0], out[1], out[2]

    def where(self, logical: int) -> tuple[str, int | None]:  # type: ignore[override]
        i = int(np.searchsorted(self.offsets, logical))
        return self.labels[min(i, self.units - 1)] if self.units else ("consumequeue", None)


def read_units(path: Path, size: int) -> np.ndarray:
    """The whole units of the first ``size`` bytes of consume-queue file ``path``, up to the
    end of its data: the holes of a sparse (pre-allocated) file are zeros, not read, and the
    all-zero units of a trailing hole are left out (the array is then shorter than the file's
    ``size // 20`` units)."""
    units = size // CQ_STORE_UNIT_SIZE
    with open(path, "rb", buffering=0) as fh:
        extents = list(data_extents(fh.fileno(), 0, units * CQ_STORE_UNIT_SIZE))
        end = -(-extents[-1][1] // CQ_STORE_UNIT_SIZE) if extents else 0
        arr = np.zeros(min(end, units), CQ_DTYPE)
        raw = arr.view(np.uint8).data
        for lo, hi in extents:
            fh.seek(lo)
            fh.readinto(raw[lo:hi])  # a short read (truncated meanwhile) leaves zeros
    return arr


def queue_shape(
    store: Store, topic: str, qid: int, sink: FindingSink, progress: ProgressFn | None
) -> QueueScan:
    """Where a queue's written units are (file-level findings added to ``sink``)."""
    if store.queue_kind(topic, qid) != "file":
        return MemQueueScan.of(store, topic, qid)
    qdir = store.consumequeue_dir / topic / str(qid)
    others: list[Path] = []
    try:
        names = numbered_files(qdir, others)
        listed = [(p, p.stat().st_size) for p in names]
    except FileNotFoundError:  # deleted since the listing (a running broker's cleanup)
        names, listed = [], []
    for p in others:
        sink.add(misnamed(f"consumequeue/{topic}/{qid}/{p.name}",
                          "a consume-queue file name (20 digits)"))
    qs = QueueScan(topic, qid, [])
    sizes = Counter(size for _, size in listed)
    qs.file_size = sizes.most_common(1)[0][0] if sizes else 0
    ended = False
    for p, size in listed:
        rel = f"consumequeue/{topic}/{qid}/{p.name}"
        base = int(p.name)
        try:
            arr = read_units(p, size)
        except FileNotFoundError:
            continue  # deleted since the listing
        qs.files.append((rel, base, size))
        if progress is not None:
            progress(size)
        if size == 0:
            if not (store.live and p == names[-1]):  # live: a file the broker is making
                sink.add(Finding("cq", rel, 0, "empty consume-queue file (0 bytes)"))
            continue
        if size % CQ_STORE_UNIT_SIZE:
            sink.add(Finding(
                "cq", rel, size - size % CQ_STORE_UNIT_SIZE,
                f"consume-queue file size {size} is not a multiple of {CQ_STORE_UNIT_SIZE}",
            ))
        if base % CQ_STORE_UNIT_SIZE:
            sink.add(Finding("layout", rel, None,
                             f"file name {base} is not a multiple of {CQ_STORE_UNIT_SIZE}"))
            continue
        zero = (arr["offset"] == 0) & (arr["size"] == 0) & (arr["tags"] == 0)
        del arr
        if ended:
            written = np.flatnonzero(~zero)
            if written.size:
                sink.add(Finding(
                    "cq", rel, int(written[0]) * CQ_STORE_UNIT_SIZE,
                    "units after the end of the queue (an earlier file ends in zeros)",
                ))
            continue
        zi = np.flatnonzero(zero)
        n = int(zi[0]) if zi.size else len(zero)  # a unit past the array is a zero one
        if n < size // CQ_STORE_UNIT_SIZE or size < qs.file_size:
            ended = True
        if n == 0:
            if p == names[-1] and not store.live:  # live: its first unit is being written
                # RocketMQ 4.9.7 and 5.3.3 ConsumeQueue#truncateDirtyLogicFiles (run at load
                # whenever a queue reaches the log's end) accepts unit 0 of a queue's last file
                # whenever its offset is below the log's end, whatever its size
                sink.add(Finding(
                    "cq", rel, 0,
                    f"the queue's last file begins with an all-zero unit: RocketMQ's load keeps "
                    f"it and serves a phantom unit {topic}/{qid}@{base // CQ_STORE_UNIT_SIZE} "
                    "(phy 0, size 0); the queue's messages are not re-dispatched after it "
                    "(repair leaves the file out)",
                    expected="a unit or no file", found="unit 0/0/0",
                ))
            continue
        qs.segments.append((p, base // CQ_STORE_UNIT_SIZE, n))
        qs.units += n
    if qs.segments:
        qs.min_offset = qs.segments[0][1]
        qs.max_offset = qs.segments[-1][1] + qs.segments[-1][2]
    elif names:
        qs.min_offset = qs.max_offset = int(names[0].name) // CQ_STORE_UNIT_SIZE
    return qs


def check_units(
    store: Store, qs: QueueScan, first_start: int, data_end: int, sink: FindingSink, keep: bool,
) -> None:
    """Every written unit of ``qs`` not marked good against its record (:func:`unit_findings`);
    ``keep``: also keep the units in ``qs`` (for repair)."""
    kept: list[tuple[np.ndarray, ...]] = []
    place = 0
    for offsets, phys, sizes, tags in qs.chunks():
        if keep:
            kept.append((offsets, phys, sizes, tags))
        todo = np.flatnonzero(~qs.good_at(place, len(offsets)))
        place += len(offsets)
        if not todo.size:
            continue  # every unit was seen to point at its own message
        for i, f in unit_findings(store, qs.topic, qs.queue_id, offsets[todo], phys[todo],
                                  sizes[todo], tags[todo], qs.where, first_start, data_end):
            qs.bad.add(int(offsets[todo[i]]))
            sink.add(f)
    if keep and kept:
        qs.offsets, qs.phys, qs.sizes, qs.tags = (np.concatenate(c) for c in zip(*kept,
                                                                                 strict=True))


def check_places(
    store: Store, msgs: Messages, queues: dict[tuple[str, int], QueueScan], abort: bool,
    first_start: int, sink: FindingSink,
) -> set[int]:
    """The consume-queue units at the places of the records ``msgs`` (a read command's,
    any subset of the store): :func:`check_window` (the unit at a record's place must be
    its own), then :func:`unit_findings` for each unit there that is not (the store's data
    end, which takes a walk of its last commitlog file, is found only then). ``queues``
    caches the queues read (:func:`queue_shape`, its file findings added too). Returns the
    commitlog offsets of the records whose place holds another unit (no consumer reads
    them)."""
    for t_idx, topic in enumerate(msgs.topics):
        for qid in distinct(msgs.queue_id[msgs.topic == t_idx]).tolist():
            if (topic, qid) not in queues and (store.consumequeue_dir / topic / str(qid)).is_dir():
                queues[(topic, qid)] = queue_shape(store, topic, qid, sink, None)
    unreached = check_window(store, msgs, queues, abort, sink)
    for t_idx, topic in enumerate(msgs.topics):
        sel = np.flatnonzero(msgs.topic == t_idx)
        for qid in distinct(msgs.queue_id[sel]).tolist():
            qs = queues.get((topic, qid))
            if qs is None:
                continue
            qoffs = distinct(msgs.queue_offset[sel[msgs.queue_id[sel] == qid]])
            place, at, size, tags = qs.units_at(qoffs)
            has = place >= 0
            good = np.zeros(len(qoffs), bool)
            if len(qs.good):
                p = place[has]
                good[has] = ((qs.good[p >> 3] >> (p & 7)) & 1).astype(bool)
            todo = np.flatnonzero(has & ~good)
            if not todo.size:
                continue
            for _, f in unit_findings(store, topic, qid, qoffs[todo], at[todo], size[todo],
                                      tags[todo], qs.where, first_start,
                                      store.max_physical_offset()):
                sink.add(f)
    return unreached


def check_window(
    store: Store, msgs: Messages, queues: dict[tuple[str, int], QueueScan], abort: bool,
    sink: FindingSink,
) -> set[int]:
    """One window of the commitlog pass against the consume queues: the unit at each
    message's queue offset that points at it, with its size and tagsCode, is marked good
    (:func:`check_units` looks again only at the others); messages that must have a unit and
    have none are findings. Returns the commitlog offsets of those messages whose place in
    the queue holds another unit (not those still to be dispatched)."""
    unreached: set[int] = set()
    if not len(msgs):
        return unreached
    for t_idx, topic in enumerate(msgs.topics):
        sel = np.flatnonzero(msgs.topic == t_idx)
        tag_hash = dispatch_rules.tags_code_is_tag_hash(topic)
        schedule = topic == SCHEDULE_TOPIC
        for qid in distinct(msgs.queue_id[sel]).tolist():
            rows = sel[msgs.queue_id[sel] == qid]
            qs = queues.get((topic, qid))
            ours = np.zeros(len(rows), bool)
            if qs is not None:
                place, at, size, tags = qs.units_at(msgs.queue_offset[rows])
                ours = at == msgs.phy[rows]
                good = ours & (size == msgs.size[rows])
                if tag_hash:
                    good &= (tags <= MAX_ADDR) | (tags == msgs.tags_code[rows])
                if schedule:  # the deliver time: store time + a delay some level gives
                    good &= (tags <= MAX_ADDR) | delay_written(
                        schedule_unit_delay(tags, msgs.store_ts[rows]))
                qs.mark_good(place[good])
            need = dispatch_rules.expected_in_cq(msgs.sys_flag[rows]) & ~ours
            qmin = qs.min_offset if qs is not None else 0
            qmax = qs.max_offset if qs is not None else 0
            rows = rows[need & (msgs.queue_offset[rows] >= qmin)]
            if qs is not None and rows.size:  # a unit elsewhere in the queue may point at it
                rows = rows[~np.isin(msgs.phy[rows], qs.all_phys())]
            for r in rows.tolist():
                phy = int(msgs.phy[r])
                f = store.file_for(phy)
                if f is None:  # pragma: no cover - every message is inside a file
                    continue
                qoff = int(msgs.queue_offset[r])
                tail = qoff >= qmax
                if not tail:
                    unreached.add(phy)
                sink.add(Finding(
                    "cq", f.rel, phy - f.start,
                    f"message {topic}/{qid}@{qoff} has no consume-queue unit"
                    + ("; not yet dispatched (RocketMQ's recovery rebuilds it)" if tail else ""),
                    severity=Severity.INFO if (tail and (abort or store.live)) else (
                        Severity.WARNING if tail else Severity.ERROR),
                    phy=phy,
                ))
    return unreached
