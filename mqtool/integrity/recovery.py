"""What RocketMQ's own recovery would cut at the broker's next start (read from a verify report).

RocketMQ's recovery at two layers: this module predicts it on a store that is only read;
:mod:`mqtool.refstore.recovery` performs it when the reference store opens a store.

The facts (apache/rocketmq 4.9.7 ``store``; 5.x keeps them):

* ``DefaultMessageStore#load``: ``lastExitOK = !abort file exists``; configs load first
  (``ConfigManager#load``: an empty or undecodable file falls back to ``<file>.bak``), then the
  commitlog, consume queues, checkpoint and index (``IndexService#load(lastExitOK)``), then
  ``recover(lastExitOK)``.
* ``ConsumeQueue#recover``: from the third-last file of each queue, units are valid while
  ``offset >= 0 && size > 0``; the first other unit ends the queue (later units are cut).
* ``CommitLog#recoverNormally`` (clean exit) starts at the third-last commitlog file;
  ``recoverAbnormally`` (abort file) walks back from the last file to the first whose first
  record has a message magic and a store time ``<= StoreCheckpoint#getMinTimestamp()``
  (min of physic/logics timestamps minus 3 s), and re-dispatches every record from there.
  Both read records with ``checkMessageAndReturnSize(checkCRCOnRecover = true)``: a bad magic,
  a body CRC mismatch or a TOTALSIZE that disagrees with the fields stops the walk; a BLANK moves
  to the next file. The stop position is ``processOffset``: ``truncateDirtyFiles`` drops every
  byte after it (later files deleted), and when a consume queue points at or past it,
  ``truncateDirtyLogicFiles`` drops those units from the queues' tails.
* 5.x timer files (``TimerMessageStore#recover``, facts in :mod:`.timer`): the timerlog is
  truncated only where a unit's size or magic is bad; units whose record is past the cut are
  kept (and never delivered); a read time older than the wheel's 7 days at the start's clock
  time is raised, and the units due before the raised time are never delivered.
* ``IndexService#load``: after an abnormal exit, every index file whose ``endTimestamp`` is
  after the checkpoint's ``indexMsgTimestamp`` is destroyed (whole file); the re-dispatch of
  ``recoverAbnormally`` re-indexes only the records from its start file on.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mqtool.formats.timer import TIMER_PRECISION_MS
from mqtool.integrity.checks import Report
from mqtool.integrity.commitlog_pass import message_windows
from mqtool.integrity.timer import timer_restart_loss
from mqtool.integrity.verify_report import QueueScan
from mqtool.store.facts import Messages
from mqtool.store.reader import Store
from mqtool.store.records_at import messages_at
from mqtool.timefmt import fmt_time

THIRD_LAST = 3  # recoverNormally / ConsumeQueue.recover start this many files from the end
MIN_TIMESTAMP_SLACK_MS = 3000  # StoreCheckpoint#getMinTimestamp subtracts 3 s


@dataclass
class RestartLoss:
    """What the next broker start would drop."""

    abnormal: bool
    start_file: str | None  # the commitlog file recovery starts from
    cut_at: int  # processOffset: the commitlog offset where the valid data ends
    cut_file: str | None
    cut_file_offset: int | None
    data_end: int  # where readable data ends (verify's view)
    lost_messages: int = 0
    lost_bytes: int = 0  # commitlog bytes after the cut (messages and unreadable bytes)
    lost_by_queue: dict[str, int] = field(default_factory=dict)  # "topic/queueId" -> messages
    cq_units_dropped: dict[str, int] = field(default_factory=dict)  # "topic/queueId" -> units
    cq_units_rebuilt: int = 0  # units the abnormal recovery re-dispatches (missing ones)
    index_files_destroyed: list[str] = field(default_factory=list)
    index_entries_destroyed: int = 0
    index_entries_reindexed: int = 0
    index_entries_dangling: int = 0  # entries left pointing past the cut (clean exit)
    configs_from_bak: list[str] = field(default_factory=list)
    configs_stop_start: list[str] = field(default_factory=list)  # the broker's start fails
    # 5.x timer files (None on 4.x): see :func:`mqtool.integrity.timer.timer_restart_loss`
    timer: dict[str, Any] | None = None

    @property
    def nothing(self) -> bool:
        t = self.timer or {}
        return not (self.lost_messages or self.lost_bytes or self.cq_units_dropped
                    or self.index_entries_destroyed - self.index_entries_reindexed > 0
                    or self.index_entries_dangling or self.configs_from_bak
                    or self.configs_stop_start
                    or t.get("timerUnitsTruncated") or t.get("timerlogCutAt")
                    or t.get("timerUnitsDangling") or t.get("timerUnitsSkipped"))

    def timer_lines(self) -> list[str]:
        """The timer part of the human report (nothing on 4.x)."""
        t = self.timer
        if t is None:
            return []
        lines = [f"  timerlog: {t['timerUnitsKept']} units kept"]
        if t["timerlogCutAt"] or t["timerUnitsTruncated"]:
            lines.append(f"    truncated at {t['timerlogCutAt'] or 'the end of the data'}: "
                         f"{t['timerUnitsTruncated']} readable units after it dropped")
        if t["timerUnitsDangling"]:
            lines.append(
                f"    kept although their record is past the cut: {t['timerUnitsDangling']} "
                f"({t['timerUnitsDanglingPending']} not yet delivered: the timer service finds "
                "no message there and drops them without a word; `mqtool repair` truncates "
                "the timerlog before them)")
        if t["readTimeRaisedTo"] is not None:
            lines.append(
                f"    read time {fmt_time(t['readTimeMs'])} is over 7 days before the start at "
                f"{fmt_time(t['startedAt'])}: recovery raises it to "
                f"{fmt_time(t['readTimeRaisedTo'])}")
            lines.append(f"    pending timer messages due before it, never delivered: "
                         f"{t['timerUnitsSkipped']} (--now: a start at another time)")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "recovery": "abnormal (abort file present)" if self.abnormal else "normal",
            "startFile": self.start_file, "cutAt": self.cut_at, "cutFile": self.cut_file,
            "cutFileOffset": self.cut_file_offset, "lostMessages": self.lost_messages,
            "lostBytes": self.lost_bytes, "lostByQueue": self.lost_by_queue,
            "cqUnitsDropped": self.cq_units_dropped,
            "cqUnitsDroppedTotal": sum(self.cq_units_dropped.values()),
            "cqUnitsRebuilt": self.cq_units_rebuilt,
            "indexFilesDestroyed": self.index_files_destroyed,
            "indexEntriesDestroyed": self.index_entries_destroyed,
            "indexEntriesReindexed": self.index_entries_reindexed,
            "indexEntriesDangling": self.index_entries_dangling,
            "configsFromBak": self.configs_from_bak,
            "configsStopStart": self.configs_stop_start,
            **({} if self.timer is None else {"timer": self.timer}),
        }


def _start_file(r: Report, store: Store) -> int:
    files = r.files
    if not files:
        return 0
    if not r.abort:
        return max(0, len(files) - THIRD_LAST)
    cp = r.checkpoint
    min_ts = 0 if cp is None else max(
        0, min(cp.physic_msg_timestamp, cp.logics_msg_timestamp) - MIN_TIMESTAMP_SLACK_MS)
    for i in range(len(files) - 1, -1, -1):
        f = files[i].file
        m = messages_at(store, np.array([f.start], np.int64), tags=False)
        if not len(m):  # the file's first record must be a readable message
            continue
        ts = int(m.store_ts[0])
        if ts != 0 and ts <= min_ts:
            return i
    return 0


@contextmanager
def _opened(r: Report, store: Store | None) -> Iterator[Store]:
    if store is not None:
        yield store
        return
    with Store.open(r.root) as st:
        yield st


def cut_position(r: Report, store: Store | None = None) -> tuple[int, int]:
    """(start file index, processOffset) of RocketMQ's commitlog recovery on this store (a
    record with torn properties does not stop it: see the module doc)."""
    if not r.files:
        return 0, 0
    with _opened(r, store) as st:
        start = _start_file(r, st)
    cut = r.files[start].file.start
    for s in r.files[start:]:
        if s.first_break is not None:
            return start, s.first_break
        cut = s.data_end  # a BLANK end: on to the next file
    return start, cut


def queue_cut(phys: np.ndarray, sizes: np.ndarray, cut: int) -> int:
    """How many units of a queue (in order) survive ConsumeQueue.recover and
    truncateDirtyLogicFiles(cut): up to the first impossible unit, then the tail of units
    pointing at or past ``cut`` is dropped."""
    return queue_cut_chunks([(phys, sizes)], cut)


def queue_cut_chunks(chunks: Iterable[tuple[np.ndarray, np.ndarray]], cut: int) -> int:
    """:func:`queue_cut` over a queue's units given in consecutive (phys, sizes) chunks."""
    keep = base = 0
    for phys, sizes in chunks:
        bad = np.flatnonzero((phys < 0) | (sizes <= 0))
        n = int(bad[0]) if bad.size else len(phys)
        below = np.flatnonzero(phys[:n] < cut)
        if below.size:
            keep = base + int(below[-1]) + 1
        if bad.size:
            break
        base += len(phys)
    return keep


def _unit_chunks(r: Report, q: QueueScan) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    if r.tables:
        return [(q.phys, q.sizes)]
    return ((c[1], c[2]) for c in q.chunks())


def _uncovered(m: Messages, queues: dict[tuple[str, int], tuple[QueueScan, int]]) -> int:
    """How many messages of ``m`` no kept unit points at (the unit at the message's queue
    offset first; the queue's kept units when that one does not)."""
    n = 0
    for t_idx, topic in enumerate(m.topics):
        sel = np.flatnonzero(m.topic == t_idx)
        for qid in np.unique(m.queue_id[sel]).tolist():
            rows = sel[m.queue_id[sel] == qid]
            qk = queues.get((topic, qid))
            if qk is None:
                n += len(rows)
                continue
            q, keep = qk
            _, at, _, _ = q.units_at(m.queue_offset[rows])
            rows = rows[(at != m.phy[rows]) | (m.queue_offset[rows] >= q.min_offset + keep)]
            if rows.size:
                n += int(np.count_nonzero(~np.isin(m.phy[rows], q.all_phys()[:keep])))
    return n


def restart_loss(r: Report, now_ms: int | None = None) -> RestartLoss:
    """What the next broker start would drop, the broker starting at clock time ``now_ms``
    (default: now; only the 5.x timer's recovery depends on it). The store is read again where
    needed: messages after the cut, units, index entries; a bounded amount at a time."""
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    with Store.open(r.root) as store:
        return _restart_loss(r, store, now_ms)


def _restart_loss(r: Report, store: Store, now_ms: int) -> RestartLoss:
    start, cut = cut_position(r, store)
    cut_file = cut_off = None
    for s in r.files:
        if s.file.start <= cut < s.file.start + s.file.size or (
                cut == s.file.start + s.file.size and s is r.files[-1]):
            cut_file, cut_off = s.file.rel, cut - s.file.start
            break
    loss = RestartLoss(
        abnormal=r.abort, start_file=r.files[start].file.rel if r.files else None,
        cut_at=cut, cut_file=cut_file, cut_file_offset=cut_off, data_end=r.data_end,
    )
    byq: Counter[str] = Counter()
    lost_bytes = 0
    if cut < r.data_end:  # readable messages end at data_end
        for m in message_windows(store, cut):
            loss.lost_messages += len(m)
            lost_bytes += int(m.size.sum())
            for t, q in zip(m.topic.tolist(), m.queue_id.tolist(), strict=True):
                byq[f"{m.topics[t]}/{q}"] += 1
    loss.lost_by_queue = dict(sorted(byq.items()))
    # bytes after the cut that hold something (messages or unreadable bytes)
    for s in r.files:
        if s.file.start + s.file.size <= cut:
            continue
        lost_bytes += s.unreadable_bytes
    loss.lost_bytes = lost_bytes
    kept: dict[tuple[str, int], tuple[QueueScan, int]] = {}
    for q in r.queues:
        keep = queue_cut_chunks(_unit_chunks(r, q), cut)
        kept[(q.topic, q.queue_id)] = (q, keep)
        if keep < q.units:
            loss.cq_units_dropped[f"{q.topic}/{q.queue_id}"] = q.units - keep
    if r.abort and r.files:
        # messages after the recovery start whose unit is missing are re-dispatched
        dispatch_from = r.files[start].file.start
        loss.cq_units_rebuilt = sum(
            _uncovered(m, kept) for m in message_windows(store, dispatch_from, cut))
    idx_ts = r.checkpoint.index_msg_timestamp if r.checkpoint is not None else 0
    for ix in r.indexes:
        if not ix.readable:
            continue
        if r.abort and ix.end_timestamp > idx_ts:
            loss.index_files_destroyed.append(ix.rel)
            loss.index_entries_destroyed += ix.entries
    if r.abort and loss.index_files_destroyed and r.files:
        # re-dispatch re-indexes the records from the start file up to the cut
        dispatch_from = r.files[start].file.start
        loss.index_entries_reindexed = min(loss.index_entries_destroyed,
                                           _keys_of(store, dispatch_from, cut))
    for ix in r.indexes:
        if ix.rel in loss.index_files_destroyed:
            continue
        for phys in ([ix.phys] if r.tables else ix.phys_chunks()):
            loss.index_entries_dangling += int(np.count_nonzero(phys >= cut))
    loss.configs_from_bak = sorted(
        c.source for c in r.configs.values() if c.from_bak and c.source is not None)
    loss.configs_stop_start = list(r.configs_stop_start)
    precision = r.summary.get("timer", {}).get("precisionMs", TIMER_PRECISION_MS)
    loss.timer = timer_restart_loss(r.root, cut, now_ms, precision)
    return loss


def _keys_of(store: Store, lo: int, hi: int) -> int:
    """How many index entries RocketMQ's dispatch writes for the messages in [lo, hi) (read
    from the commitlog)."""
    from mqtool.integrity import dispatch_rules

    n = 0
    for m in message_windows(store, lo, hi):
        for phy in m.phy.tolist():
            msg = store.try_message_at(int(phy))
            if msg is not None and (msg.sys_flag & dispatch_rules.TRANSACTION_TYPE_MASK) != (
                    dispatch_rules.NOT_IN_CONSUME_QUEUE[1]):
                n += len(dispatch_rules.index_keys(msg.topic, msg.properties))
    return n

