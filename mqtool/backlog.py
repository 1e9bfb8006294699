"""What a 5.x broker still owes its consumers: POP messages in flight and the timer backlog.

* POP: every checkpoint (``ck``) and ack in the revive topic, or still in the timer on its way
  there (:mod:`mqtool.integrity.pop`). A popped message is *acked* when an ack names its
  (group, topic, queue, offset); otherwise it is *in flight* (invisible until the checkpoint's
  revive time, ``popTime + invisibleTime``) while its checkpoint waits in the timer or in the
  revive queue beyond the revive service's committed offset (group
  ``CID_RMQ_SYS_REVIVE_GROUP`` in ``consumerOffset.json``) and its revive time is ahead, *due
  for revive* when that time is past, and *revived* (sent to the retry topic) once the revive
  service has passed its checkpoint.
* Timer: a record of ``rmq_sys_wheel_timer`` is waiting while its ``TIMER_OUT_MS`` is after the
  timer's ``lastReadTimeMs`` (``config/timercheck``); it is overdue when that is before the
  store's own "now" (:func:`mqtool.overview.store_time`).
"""

from __future__ import annotations

from typing import Any

from mqtool.formats.errors import MqtoolError
from mqtool.formats.pop import REVIVE_TOPIC_PREFIX, PopAck, PopCheckPoint
from mqtool.formats.rules import PROPERTY_REAL_TOPIC, PROPERTY_TIMER_OUT_MS, TIMER_TOPIC
from mqtool.formats.timer import parse_timer_checkpoint
from mqtool.integrity.pop import parse_record, revive_records
from mqtool.store.reader import Store

REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"  # PopAckConstants.REVIVE_GROUP


def pop_inflight(store: Store, revive_offsets: dict[int, int] | None, now: int
                 ) -> list[dict[str, Any]]:
    """Per (group, topic, queue): popped messages acked, in flight (invisible until when),
    due for revive (their revive time is past ``now`` but the revive service has not passed
    their checkpoint) and revived. ``revive_offsets``: the revive service's committed offset
    per revive queue."""
    cks: dict[tuple[str, str, int, int, int], tuple[PopCheckPoint, bool]] = {}
    acked: set[tuple[str, str, int, int]] = set()
    for m in revive_records(store):
        try:
            rec = parse_record(store, m)
        except MqtoolError:
            continue  # verify reports it (integrity.pop.check_pop)
        if isinstance(rec, PopAck):
            for off in rec.ack_offsets:
                acked.add((rec.group, rec.topic, rec.queue_id, off))
            continue
        key = (rec.group, rec.topic, rec.queue_id, rec.start_offset, rec.pop_time)
        passed = (m.topic.startswith(REVIVE_TOPIC_PREFIX) and revive_offsets is not None
                  and m.queue_offset < revive_offsets.get(m.queue_id, 0))
        old = cks.get(key)
        cks[key] = (rec, passed or (old[1] if old else False))
    rows: dict[tuple[str, str, int], dict[str, Any]] = {}
    for (group, topic, qid, _, _), (ck, passed) in sorted(cks.items()):
        row = rows.setdefault((group, topic, qid), {
            "group": group, "topic": topic, "queueId": qid, "popped": 0, "acked": 0,
            "inFlight": 0, "reviveDue": 0, "revived": 0, "invisibleUntil": None})
        for off in ck.queue_offsets():
            row["popped"] += 1
            if (group, topic, qid, off) in acked:
                row["acked"] += 1
            elif passed:
                row["revived"] += 1
            elif ck.revive_time <= now:
                row["reviveDue"] += 1
            else:
                row["inFlight"] += 1
                row["invisibleUntil"] = max(row["invisibleUntil"] or 0, ck.revive_time)
    return list(rows.values())


def timer_read_ms(store: Store) -> int | None:
    """The timer's ``lastReadTimeMs`` (``config/timercheck``), None without a readable one."""
    p = store.config_path("timercheck")
    if not p.exists():
        return None
    try:
        return parse_timer_checkpoint(p.read_bytes(), file="config/timercheck").last_read_time_ms
    except MqtoolError:
        return None


def timer_backlog(store: Store, read_ms: int | None, now: int) -> dict[str, Any]:
    """Timer records still waiting (by real topic), the next due time and how many are
    overdue."""
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
    return {"waiting": sum(waiting.values()), "byTopic": dict(sorted(waiting.items())),
            "nextDue": min(due) if due else None, "overdue": sum(d <= now for d in due),
            "lastReadTimeMs": read_ms}
