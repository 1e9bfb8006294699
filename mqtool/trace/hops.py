"""Hop rules: what the store says happened to one record of a journey (schedule, timer,
consumption; transactions are in :mod:`mqtool.trace.transaction`) and the helpers those rules
share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.pop import split_pop_retry_topic
from mqtool.formats.rules import (
    DLQ_GROUP_TOPIC_PREFIX,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_TIMER_OUT_MS,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
)
from mqtool.store.reader import Store
from mqtool.timefmt import fmt_time
from mqtool.trace.results import (
    RESEND_PROPERTY_NAMES,
    RESEND_PROPERTY_PREFIX,
    ConsumerState,
    PopCheckout,
)


@dataclass
class TraceContext:
    """What the hops of a trace are judged against: the store, delay levels, offsets, now."""

    store: Store
    levels: dict[int, int]  # delay level (1-based) -> delay ms
    delay_offsets: dict[int, int] | None
    consumer_offsets: dict[tuple[str, str], dict[int, int]] | None
    timer_read_ms: int | None
    now: int
    # records whose place in their queue holds another unit (RecordCheck.check)
    unreached: frozenset[int] = frozenset()
    # POP checkouts by the commitlog offset of the copy checked out (mqtool.trace.checkouts)
    checkouts: Mapping[int, tuple[PopCheckout, ...]] = field(default_factory=dict)


def fmt_duration(ms: int) -> str:
    """``1h 2m 3s``, ``2.5s``, ``120ms``: a duration for people."""
    neg = ms < 0
    ms = abs(ms)
    if ms < 1000:
        s = f"{ms}ms"
    elif ms < 60_000:
        s = f"{ms / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    else:
        secs = ms // 1000
        d, rem = divmod(secs, 86_400)
        h, rem = divmod(rem, 3600)
        m, sec = divmod(rem, 60)
        parts = [f"{v}{u}" for v, u in ((d, "d"), (h, "h"), (m, "m"), (sec, "s")) if v]
        s = " ".join(parts[:3])
    return "-" + s if neg else s


def int_prop(m: CommitLogMessage, name: str) -> int | None:
    v = m.properties.get(name)
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def is_resend(m: CommitLogMessage) -> bool:
    return any(n in m.properties for n in RESEND_PROPERTY_NAMES) or any(
        n.startswith(RESEND_PROPERTY_PREFIX) for n in m.properties
    )


def retry_group(topic: str, original_topic: str | None) -> tuple[str, bool]:
    """The consumer group of a ``%RETRY%`` topic, and whether it is a 5.x POP retry topic of
    ``original_topic`` (:func:`mqtool.formats.pop.split_pop_retry_topic`)."""
    if original_topic:
        split = split_pop_retry_topic(topic, topics={original_topic})
        if split is not None and split[1] == original_topic:
            return split[0], True
    return topic[len(RETRY_GROUP_TOPIC_PREFIX):], False


def consumers(
    ctx: TraceContext, m: CommitLogMessage, only: str | None
) -> tuple[ConsumerState, ...]:
    out = []
    for (topic, group), table in sorted((ctx.consumer_offsets or {}).items()):
        if topic != m.topic or (only is not None and group != only):
            continue
        off = table.get(m.queue_id)
        if off is None:
            continue
        out.append(ConsumerState(group, off, off > m.queue_offset))
    return tuple(out)


def consumption_state(
    ctx: TraceContext, m: CommitLogMessage, only: str | None
) -> tuple[str, str, tuple[ConsumerState, ...]]:
    cons = consumers(ctx, m, only)
    if m.physical_offset in ctx.unreached:
        return "unreachable", (f"its place in {m.topic} queue {m.queue_id} holds another "
                               "consume-queue unit: no consumer reads it"), cons
    if ctx.consumer_offsets is None:
        return "unknown", "consumption unknown (no consumerOffset.json)", cons
    if not cons:
        who = f"group {only}" if only else "any group"
        return "not-consumed", f"no offset of {who} on {m.topic} queue {m.queue_id}", cons
    done = [c.group for c in cons if c.consumed]
    todo = [f"{c.group} at offset {c.offset}" for c in cons if not c.consumed]
    if not todo:
        return "consumed", "consumed by " + ", ".join(done), cons
    text = "not yet consumed by " + ", ".join(todo)
    if done:
        text += "; consumed by " + ", ".join(done)
    return ("consumed" if done and only is None else "not-consumed"), text, cons


def schedule_state(
    ctx: TraceContext, m: CommitLogMessage
) -> tuple[int, int | None, int | None, str, str]:
    """(level, delay ms, deliver time, state, detail) of a SCHEDULE_TOPIC_XXXX copy."""
    level = m.queue_id + 1  # ScheduleMessageService#queueId2DelayLevel
    delay = ctx.levels.get(level)
    due = None
    unit = ctx.store.unit_at(SCHEDULE_TOPIC, m.queue_id, m.queue_offset)
    if unit is not None and unit.commit_log_offset == m.physical_offset:
        due = unit.tags_code  # the deliver timestamp (CommitLog#checkMessageAndReturnSize)
    elif delay is not None:
        due = m.store_timestamp + delay
    if ctx.delay_offsets is None:
        return level, delay, due, "unknown", "no delayOffset.json: delivery unknown"
    progress = ctx.delay_offsets.get(level, 0)
    if progress > m.queue_offset:
        return level, delay, due, "delivered", (
            f"delivered by the schedule service (delayOffset {level}:{progress} > "
            f"queue offset {m.queue_offset})"
        )
    waited = fmt_duration(ctx.now - m.store_timestamp)
    if due is None:
        return level, delay, due, "pending", f"pending for {waited}"
    if due > ctx.now:
        return level, delay, due, "pending", (
            f"pending for {waited}, due in {fmt_duration(due - ctx.now)} "
            f"(delayOffset {level}:{progress})"
        )
    return level, delay, due, "overdue", (
        f"pending for {waited}, overdue by {fmt_duration(ctx.now - due)} "
        f"(delayOffset {level}:{progress})"
    )


def timer_state(
    ctx: TraceContext, m: CommitLogMessage, delivered: bool
) -> tuple[int | None, str, str]:
    due = int_prop(m, PROPERTY_TIMER_OUT_MS)
    if delivered:
        return due, "delivered", "delivered by the timer wheel"
    if ctx.timer_read_ms is not None and due is not None and due <= ctx.timer_read_ms:
        return due, "delivered", (
            f"due before the timer's lastReadTimeMs ({fmt_time(ctx.timer_read_ms)}): delivered "
            "(copy not found)"
        )
    waited = fmt_duration(ctx.now - m.store_timestamp)
    if due is None:
        return due, "pending", f"pending for {waited}"
    floor = timer_floor(ctx)
    if floor is not None and due < floor:
        return due, "never-delivered", (
            f"pending for {waited}, due {fmt_time(due)}: a broker starting at "
            f"{fmt_time(ctx.now)} raises the timer's read time ({fmt_time(ctx.timer_read_ms)}, "
            f"more than the wheel's 7 days before) to {fmt_time(floor)}, past it: never "
            "delivered")
    if due > ctx.now:
        return due, "pending", f"pending for {waited}, due in {fmt_duration(due - ctx.now)}"
    return due, "overdue", f"pending for {waited}, overdue by {fmt_duration(ctx.now - due)}"


def timer_floor(ctx: TraceContext) -> int | None:
    """The read time the timer's recovery raises ``lastReadTimeMs`` to at a start at
    ``ctx.now``, None when it keeps it (:func:`mqtool.integrity.timer.raised_read_time`)."""
    if ctx.timer_read_ms is None:  # no timer (a 4.x store)
        return None
    from mqtool.integrity.timer import raised_read_time

    return raised_read_time(Path(ctx.store.root), ctx.timer_read_ms, ctx.now)


def sent_back(
    m: CommitLogMessage, later: list[CommitLogMessage], original_topic: str | None
) -> str | None:
    """The group that consumed ``m`` and sent it back, if a later copy says so (the next
    copy has reconsumeTimes + 1; its topic, or the schedule copy's REAL_TOPIC, names the
    group)."""
    for x in later:
        # the broker's send-back stores reconsumeTimes + 1; an orderly consumer's client sends
        # its local retry count (RECONSUME_TIME) after retrying locally
        client_sent = PROPERTY_RECONSUME_TIME in x.properties and (
            x.reconsume_times > m.reconsume_times)
        if x.reconsume_times != m.reconsume_times + 1 and not client_sent:
            continue
        if PROPERTY_ORIGIN_MESSAGE_ID not in x.properties:
            continue
        t = x.properties.get(PROPERTY_REAL_TOPIC, x.topic) if x.topic == SCHEDULE_TOPIC else x.topic
        if t.startswith(DLQ_GROUP_TOPIC_PREFIX):
            return "group " + t[len(DLQ_GROUP_TOPIC_PREFIX):]
        if t.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return "group " + retry_group(t, original_topic)[0]
    return None
