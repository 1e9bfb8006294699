"""What a 5.x broker still owes its consumers: POP messages in flight and the timer backlog.

* POP: every checkpoint (``ck``) and ack in the revive topic, or still in the timer on its way
  there (:mod:`mqtool.integrity.pop`). A popped message is *acked* when an ack names its
  (group, topic, queue, offset); otherwise it is *in flight* (invisible until the checkpoint's
  revive time, ``popTime + invisibleTime``) while its checkpoint waits in the timer or in the
  revive queue beyond the revive service's committed offset (group
  ``CID_RMQ_SYS_REVIVE_GROUP`` in ``consumerOffset.json``) and its revive time is ahead, *due
  for revive* when that time is past, and *revived* (sent to the retry topic) once the revive
  service has passed its checkpoint or its revived copy is in the group's POP retry topic
  (:func:`revived_copy_of`: the service commits its offset lazily).
* Timer: a record of ``rmq_sys_wheel_timer`` is waiting while its ``TIMER_OUT_MS`` is after the
  timer's ``lastReadTimeMs`` (``config/timercheck``); it is overdue when that is before the
  store's own "now" (:func:`mqtool.overview.store_time`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.errors import FormatError, MqtoolError
from mqtool.formats.pop import (
    REVIVE_TOPIC_PREFIX,
    PopAck,
    PopCheckPoint,
    pop_retry_topic,
    split_pop_retry_topic,
)
from mqtool.formats.rules import PROPERTY_REAL_TOPIC, PROPERTY_TIMER_OUT_MS, TIMER_TOPIC
from mqtool.integrity.pop import parse_record, revive_records
from mqtool.store.reader import Store

REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"  # PopAckConstants.REVIVE_GROUP

#: What became of one popped message of a checkpoint (:meth:`PopLedger.state`).
POP_STATES = ("acked", "changed", "revived", "revive-due", "in-flight")


@dataclass(frozen=True, slots=True)
class Checkout:
    """One checkpoint: the messages one POP request checked out of one queue, the first stored
    copy of its record (``record``: the timer's, else the revive topic's) and whether the revive
    service has passed its revive-topic copy (``passed``)."""

    ck: PopCheckPoint
    record: CommitLogMessage
    passed: bool


class PopLedger:
    """Every checkpoint and ack of the revive records (at commitlog offset ``since`` or later,
    of the ``topics`` given, else of all). A record whose body does not parse is noted on the
    store (a finding at its file and offset) and left out."""

    def __init__(self, store: Store, revive_offsets: dict[int, int] | None = None, *,
                 since: int = 0, topics: Iterable[str] | None = None) -> None:
        want = None if topics is None else set(topics)
        self.checkouts: dict[tuple[str, str, int, int, int], Checkout] = {}
        # (group, topic, queue, queue offset, popTime of the checkpoint acked) -> first record
        self.acks: dict[tuple[str, str, int, int, int], CommitLogMessage] = {}
        for m in revive_records(store, since):
            try:
                rec = parse_record(store, m)
            except FormatError as e:
                store.note(e.finding())
                continue
            if want is not None and rec.topic not in want:
                continue
            if isinstance(rec, PopAck):
                for off in rec.ack_offsets:
                    k = (rec.group, rec.topic, rec.queue_id, off, rec.pop_time)
                    if k not in self.acks or m.physical_offset < self.acks[k].physical_offset:
                        self.acks[k] = m
                continue
            key = (rec.group, rec.topic, rec.queue_id, rec.start_offset, rec.pop_time)
            passed = (m.topic.startswith(REVIVE_TOPIC_PREFIX) and revive_offsets is not None
                      and m.queue_offset < revive_offsets.get(m.queue_id, 0))
            old = self.checkouts.get(key)
            if old is not None:
                first = min(old.record, m, key=lambda x: x.physical_offset)
                self.checkouts[key] = Checkout(rec, first, passed or old.passed)
            else:
                self.checkouts[key] = Checkout(rec, m, passed)
        self._popped: dict[tuple[str, str, int, int], list[int]] = {}
        for (g, t, q, _, pt), c in self.checkouts.items():
            for off in c.ck.queue_offsets():
                self._popped.setdefault((g, t, q, off), []).append(pt)

    def ack_of(self, ck: PopCheckPoint, offset: int) -> CommitLogMessage | None:
        """The first record acking ``offset`` of checkpoint ``ck`` (an ack names the popTime
        of the checkpoint it closes)."""
        return self.acks.get((ck.group, ck.topic, ck.queue_id, offset, ck.pop_time))

    def checked_out_again(self, ck: PopCheckPoint, offset: int) -> bool:
        """Whether a later checkpoint holds ``offset`` (changeInvisibleTime writes a new
        checkpoint and acks the old one)."""
        return any(pt > ck.pop_time
                   for pt in self._popped.get((ck.group, ck.topic, ck.queue_id, offset), ()))

    def state(self, c: Checkout, offset: int, now: int, *, revived: bool = False) -> str:
        """One of :data:`POP_STATES` for ``offset`` of checkout ``c``: ``revived`` when the
        revive service has passed its checkpoint or the caller has seen the revived copy."""
        if self.ack_of(c.ck, offset) is not None:
            return "changed" if self.checked_out_again(c.ck, offset) else "acked"
        if revived or c.passed:
            return "revived"
        return "revive-due" if c.ck.revive_time <= now else "in-flight"


def revived_copy_of(m: CommitLogMessage, group: str, candidates: Iterable[CommitLogMessage]
                    ) -> CommitLogMessage | None:
    """The copy the revive service wrote of ``m`` checked out by ``group``, among
    ``candidates``: the same message (UNIQ_KEY) in the group's POP retry topic
    (``%RETRY%<group>_<topic>`` or ``+``) with one more reconsume time
    (``PopReviveService#reviveRetry``)."""
    for x in candidates:
        split = split_pop_retry_topic(x.topic, {group})
        if split is not None and split[0] == group and x.uniq_key == m.uniq_key and \
                x.reconsume_times == m.reconsume_times + 1:
            return x
    return None


def _retry_copies(store: Store, group: str, topic: str) -> dict[str | None, list[CommitLogMessage]]:
    """The messages of the POP retry topics a revive of ``group``'s checkout of ``topic`` writes
    to, by UNIQ_KEY (a retry topic's own checkouts are revived into it again)."""
    names = {topic} if split_pop_retry_topic(topic, {group}) is not None else {
        pop_retry_topic(group, topic), pop_retry_topic(group, topic, v2=True)}
    out: dict[str | None, list[CommitLogMessage]] = {}
    for t, qid in store.queue_ids():
        if t not in names:
            continue
        for qe in store.queue_entries(t, qid):
            x = store.try_message_at(qe.entry.commit_log_offset)
            if x is not None:
                out.setdefault(x.uniq_key, []).append(x)
    return out


def _seen_revived(store: Store, group: str, topic: str, qid: int, offset: int,
                  copies: dict[str | None, list[CommitLogMessage]]) -> bool:
    unit = store.unit_at(topic, qid, offset)
    m = None if unit is None else store.try_message_at(unit.commit_log_offset)
    return m is not None and revived_copy_of(m, group, copies.get(m.uniq_key, ())) is not None


def pop_inflight(store: Store, revive_offsets: dict[int, int] | None, now: int
                 ) -> list[dict[str, Any]]:
    """Per (group, topic, queue): popped messages acked, acked by an invisible-time change,
    in flight (invisible until when), due for revive (their revive time is past ``now`` but
    the revive service has not passed their checkpoint nor written their revived copy) and
    revived. ``revive_offsets``: the revive service's committed offset per revive queue."""
    ledger = PopLedger(store, revive_offsets)
    copies: dict[tuple[str, str], dict[str | None, list[CommitLogMessage]]] = {}
    names = {"acked": "acked", "changed": "invisibleChanged", "revived": "revived",
             "revive-due": "reviveDue", "in-flight": "inFlight"}
    rows: dict[tuple[str, str, int], dict[str, Any]] = {}
    for (group, topic, qid, _, _), c in sorted(ledger.checkouts.items()):
        row = rows.setdefault((group, topic, qid), {
            "group": group, "topic": topic, "queueId": qid, "popped": 0, "acked": 0,
            "invisibleChanged": 0, "inFlight": 0, "reviveDue": 0, "revived": 0,
            "invisibleUntil": None})
        for off in c.ck.queue_offsets():
            row["popped"] += 1
            st = ledger.state(c, off, now)
            if st == "revive-due":
                got = copies.get((group, topic))
                if got is None:
                    got = copies[(group, topic)] = _retry_copies(store, group, topic)
                if _seen_revived(store, group, topic, qid, off, got):
                    st = "revived"
            row[names[st]] += 1
            if st == "in-flight":
                row["invisibleUntil"] = max(row["invisibleUntil"] or 0, c.ck.revive_time)
    return list(rows.values())


def timer_read_ms(store: Store) -> int | None:
    """The timer's ``lastReadTimeMs`` (``config/timercheck``), None without a readable one."""
    p = store.config_path("timercheck")
    if not p.exists():
        return None
    from mqtool.formats.timer import parse_timer_checkpoint  # a 5.x store's timer only

    try:
        return parse_timer_checkpoint(p.read_bytes(), file="config/timercheck").last_read_time_ms
    except MqtoolError:
        return None


def timer_backlog(store: Store, read_ms: int | None, now: int) -> dict[str, Any]:
    """Timer records still waiting (by real topic), the next due time, how many are overdue
    and how many a broker starting at ``now`` never delivers (due before the read time its
    recovery raises an old one to: :func:`mqtool.integrity.timer.raised_read_time`)."""
    waiting: dict[str, int] = {}
    due: list[int] = []
    for topic, qid in store.queue_ids():
        if topic != TIMER_TOPIC:
            continue
        for qe in store.queue_entries(topic, qid):
            m = store.try_message_at(qe.entry.commit_log_offset)
            if m is None:
                continue
            t = m.properties.get(PROPERTY_TIMER_OUT_MS, "")
            at = int(t) if t.lstrip("-").isdigit() else None
            if at is None or (read_ms is not None and at <= read_ms):
                continue
            real = m.properties.get(PROPERTY_REAL_TOPIC, "?")
            waiting[real] = waiting.get(real, 0) + 1
            due.append(at)
    minutes: dict[int, int] = {}
    for d in due:
        minutes[d - d % 60_000] = minutes.get(d - d % 60_000, 0) + 1
    lost = 0
    if due:
        from mqtool.integrity.timer import raised_read_time

        floor = raised_read_time(Path(store.root), read_ms, now)
        lost = 0 if floor is None else sum(d < floor for d in due)
    return {"waiting": sum(waiting.values()), "byTopic": dict(sorted(waiting.items())),
            "nextDue": min(due) if due else None, "overdue": sum(d <= now for d in due),
            "neverDelivered": lost,
            "byDueMinute": [{"dueStart": k, "count": v} for k, v in sorted(minutes.items())],
            "lastReadTimeMs": read_ms}


def revive_offsets(entries: Iterable[tuple[str, str, int, int]]) -> dict[int, int]:
    """The revive service's committed offset per revive queue, from consumerOffset.json's
    ``(group, topic, queueId, offset)`` entries."""
    return {q: o for g, t, q, o in entries
            if g == REVIVE_GROUP and t.startswith(REVIVE_TOPIC_PREFIX)}


def backlogs(store: Store, revive: dict[int, int] | None, now: int, *, pop: bool = True,
             timer: bool = True) -> dict[str, Any]:
    """What ``inspect`` and ``scan`` show of a 5.x store's backlog: ``popInFlight``
    (:func:`pop_inflight`) and ``timerBacklog`` (:func:`timer_backlog`), measured at ``now``;
    ``revive``: :func:`revive_offsets` (None: no consumerOffset.json)."""
    out: dict[str, Any] = {}
    if pop:
        out["popInFlight"] = pop_inflight(store, revive, now)
    if timer:
        out["timerBacklog"] = timer_backlog(store, timer_read_ms(store), now)
    return out
