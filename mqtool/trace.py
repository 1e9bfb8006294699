"""``mqtool trace``: one message's whole journey through a store, by message id or key.

RocketMQ spreads what happened to a message over several topics (FORMATS.md 6.7): the original
record, copies waiting in ``SCHEDULE_TOPIC_XXXX`` (``REAL_TOPIC``/``REAL_QID``), redeliveries in
``%RETRY%<group>`` (``RETRY_TOPIC``, ``ORIGIN_MESSAGE_ID``), 5.x POP retry topics
(``%RETRY%<group>_<topic>``, ``%RETRY%<group>+<topic>``), timer copies in ``rmq_sys_wheel_timer``,
transaction half/op records, the dead-letter copy in ``%DLQ%<group>`` and copies resent from
there. Every copy keeps the client's ``UNIQ_KEY``; copies of a message without one are tied to
it by ``ORIGIN_MESSAGE_ID`` (the offsetMsgId of the first copy).

Records are found through the index files when there are any (``topic#UNIQ_KEY`` in every
topic, then the commitlog written after the last indexed record), otherwise by one pass over the
commitlog that looks for the property bytes and parses only the records that hold them.

The result is data (:class:`Trace`); rendering lives in ``mqtool/cli/trace.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
from mqtool.formats.errors import MqtoolError
from mqtool.formats.msgid import classify_id
from mqtool.formats.rules import (
    DLQ_GROUP_TOPIC_PREFIX,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    is_system_topic,
    parse_delay_levels,
)
from mqtool.overview import (
    DEFAULT_DELAY_LEVELS,
    load_consumer_offsets,
    load_delay_offsets,
    read_checkpoint,
)
from mqtool.query import ProgressFn
from mqtool.search import Finder
from mqtool.store import Store

# Properties a resent DLQ copy carries (mqtool.dlq_resend: MQTOOL_DLQ_MSG_ID, MQTOOL_DLQ_TOPIC
# and MQTOOL_RESEND_ID).
RESEND_PROPERTY_NAMES = ("MQTOOL_DLQ_MSG_ID", "MQTOOL_DLQ_TOPIC")
RESEND_PROPERTY_PREFIX = "MQTOOL_RESEND"  # MQTOOL_RESEND_ID (mqtool.dlq_resend)
RESEND_TARGET_PLACEHOLDER = "TARGET_STORE"  # `dlq resend` needs --target: the user's choice

_CQ_UNIT = struct.Struct(">qiq")  # commitlog offset, size, tagsCode



class TraceError(MqtoolError):
    """An id or key that cannot be traced as given (bad id, nothing found)."""


@dataclass(frozen=True, slots=True)
class ConsumerState:
    """One consumer group's progress on the queue of a hop (consumerOffset.json)."""

    group: str
    offset: int  # next queue offset the group will consume
    consumed: bool

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "offset": self.offset, "consumed": self.consumed}


@dataclass(frozen=True, slots=True)
class Hop:
    """One record of the journey, with what the store says happened to it.

    ``kind``: original, schedule, timer, retry, pop-retry, delivered (a schedule/timer copy
    re-put to its real topic), half, op, commit, dlq, resend. ``state``: a short word
    (``delivered``, ``pending``, ``overdue``, ``consumed``, ``not-consumed``, ``unknown``,
    ``dead-lettered``, ``committed``, ``rolled-back``, ``op``); ``state_detail`` says it in
    words. Times are epoch ms; ``since_previous_ms`` is the store-time gap to the hop before.
    """

    kind: str
    message: CommitLogMessage
    since_previous_ms: int | None
    delay_level: int | None
    delay_ms: int | None
    deliver_timestamp: int | None
    state: str
    state_detail: str
    group: str | None = None
    consumers: tuple[ConsumerState, ...] = ()
    note: str | None = None  # e.g. which DLQ record a resent copy came from

    @property
    def topic(self) -> str:
        return self.message.topic

    @property
    def queue_id(self) -> int:
        return self.message.queue_id

    @property
    def queue_offset(self) -> int:
        return self.message.queue_offset

    @property
    def commit_log_offset(self) -> int:
        return self.message.physical_offset

    @property
    def store_timestamp(self) -> int:
        return self.message.store_timestamp

    @property
    def reconsume_times(self) -> int:
        return self.message.reconsume_times

    @property
    def offset_msg_id(self) -> str:
        return self.message.offset_msg_id

    @property
    def real_topic(self) -> str | None:
        return self.message.properties.get(PROPERTY_REAL_TOPIC)

    def to_json(self) -> dict[str, Any]:
        p = self.message.properties
        return {
            "kind": self.kind,
            "topic": self.topic,
            "queueId": self.queue_id,
            "queueOffset": self.queue_offset,
            "commitLogOffset": self.commit_log_offset,
            "offsetMsgId": self.offset_msg_id,
            "storeTimestamp": self.store_timestamp,
            "sincePreviousMs": self.since_previous_ms,
            "reconsumeTimes": self.reconsume_times,
            "delayLevel": self.delay_level,
            "delayMs": self.delay_ms,
            "deliverTimestamp": self.deliver_timestamp,
            "state": self.state,
            "stateDetail": self.state_detail,
            "group": self.group,
            "realTopic": p.get(PROPERTY_REAL_TOPIC),
            "retryTopic": p.get(PROPERTY_RETRY_TOPIC),
            "originMessageId": p.get(PROPERTY_ORIGIN_MESSAGE_ID),
            "consumers": [c.to_json() for c in self.consumers],
            "note": self.note,
        }


@dataclass
class Trace:
    """A message's journey: hops in commitlog (write) order and the verdict."""

    id: str
    uniq_key: str | None
    hops: list[Hop]
    verdict: str
    verdict_kind: str
    via: str
    now: int
    now_source: str
    dlq_group: str | None = None
    dlq_msg_id: str | None = None
    resend_command: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "uniqKey": self.uniq_key,
            "verdict": self.verdict,
            "verdictKind": self.verdict_kind,
            "via": self.via,
            "now": self.now,
            "nowSource": self.now_source,
            "dlqGroup": self.dlq_group,
            "resendCommand": self.resend_command,
            "notes": list(self.notes),
            "hops": [h.to_json() for h in self.hops],
        }


@dataclass
class KeyTrace:
    """``--key``: every journey whose records carry the business key."""

    key: str
    topic: str | None
    via: str
    traces: list[Trace]

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "topic": self.topic, "via": self.via,
                "traces": [t.to_json() for t in self.traces]}


# --------------------------------------------------------------------------------------------
# finding records


def scan_for(
    store: Store,
    patterns: Iterable[bytes],
    *,
    start_offset: int = 0,
    progress: ProgressFn | None = None,
) -> list[CommitLogMessage]:
    """Messages whose bytes contain any of ``patterns``: :meth:`Store.search`."""
    return store.search(patterns, start_offset=start_offset, progress=progress)


def _collect(
    store: Store, finder: Finder, seeds: list[CommitLogMessage], searched: set[str]
) -> list[CommitLogMessage]:
    """Close ``seeds`` over the UNIQ_KEY / ORIGIN_MESSAGE_ID links (``searched``: UNIQ_KEYs
    whose records are all among the seeds already)."""
    got: dict[int, CommitLogMessage] = {m.physical_offset: m for m in seeds}
    done_u: set[str] = set(searched)
    done_o: set[str] = set()
    for _ in range(8):  # links are at most a couple of steps deep
        new_u: set[str] = set()
        new_o: set[str] = set()
        for m in list(got.values()):
            u = m.uniq_key
            if u and u not in done_u:
                new_u.add(u)
            o = m.properties.get(PROPERTY_ORIGIN_MESSAGE_ID)
            if o and o.upper() not in done_o:
                first = store.find_by_offset_msg_id(o)
                done_o.add(o.upper())
                if first is not None and first.offset_msg_id.upper() == o.upper():
                    got.setdefault(first.physical_offset, first)
                    if first.uniq_key and first.uniq_key not in done_u:
                        new_u.add(first.uniq_key)
            if not u and m.offset_msg_id.upper() not in done_o:
                new_o.add(m.offset_msg_id)  # copies of a message without UNIQ_KEY
        if not new_u and not new_o:
            break
        for m in finder.find(new_u, new_o, set()):
            got.setdefault(m.physical_offset, m)
        done_u |= new_u
        done_o |= {o.upper() for o in new_o}
    return [got[k] for k in sorted(got)]


# --------------------------------------------------------------------------------------------
# states and verdict


@dataclass
class _Context:
    store: Store
    levels: dict[int, int]  # delay level (1-based) -> delay ms
    delay_offsets: dict[int, int] | None
    consumer_offsets: dict[tuple[str, str], dict[int, int]] | None
    timer_read_ms: int | None
    now: int


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


def _utc(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _int_prop(m: CommitLogMessage, name: str) -> int | None:
    v = m.properties.get(name)
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def _is_resend(m: CommitLogMessage) -> bool:
    return any(n in m.properties for n in RESEND_PROPERTY_NAMES) or any(
        n.startswith(RESEND_PROPERTY_PREFIX) for n in m.properties
    )


def _retry_group(topic: str, original_topic: str | None) -> tuple[str, bool]:
    """The consumer group of a ``%RETRY%`` topic, and whether it is a 5.x POP retry topic."""
    rest = topic[len(RETRY_GROUP_TOPIC_PREFIX):]
    if original_topic:
        for sep in ("+", "_"):
            suffix = sep + original_topic
            if rest.endswith(suffix) and len(rest) > len(suffix):
                return rest[: -len(suffix)], True
    return rest, False


def _consumers(ctx: _Context, m: CommitLogMessage, only: str | None) -> tuple[ConsumerState, ...]:
    out = []
    for (topic, group), table in sorted((ctx.consumer_offsets or {}).items()):
        if topic != m.topic or (only is not None and group != only):
            continue
        off = table.get(m.queue_id)
        if off is None:
            continue
        out.append(ConsumerState(group, off, off > m.queue_offset))
    return tuple(out)


def _consumption_state(
    ctx: _Context, m: CommitLogMessage, only: str | None
) -> tuple[str, str, tuple[ConsumerState, ...]]:
    cons = _consumers(ctx, m, only)
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


def _cq_unit(
    store: Store, topic: str, queue_id: int, queue_offset: int
) -> tuple[int, int, int] | None:
    """One consume-queue unit (commitlog offset, size, tagsCode), read with one pread."""
    d = store.consumequeue_dir / topic / str(queue_id)
    pos = queue_offset * CQ_STORE_UNIT_SIZE
    try:
        names = sorted((int(p.name), p) for p in d.iterdir() if p.name.isdigit())
    except OSError:
        return None
    for start, path in reversed(names):
        if start <= pos:
            with path.open("rb") as fh:
                fh.seek(pos - start)
                raw = fh.read(CQ_STORE_UNIT_SIZE)
            if len(raw) < CQ_STORE_UNIT_SIZE:
                return None
            unit: tuple[int, int, int] = _CQ_UNIT.unpack(raw)
            return None if unit == (0, 0, 0) else unit
    return None


def _schedule_state(
    ctx: _Context, m: CommitLogMessage
) -> tuple[int, int | None, int | None, str, str]:
    """(level, delay ms, deliver time, state, detail) of a SCHEDULE_TOPIC_XXXX copy."""
    level = m.queue_id + 1  # ScheduleMessageService#queueId2DelayLevel
    delay = ctx.levels.get(level)
    due = None
    unit = _cq_unit(ctx.store, SCHEDULE_TOPIC, m.queue_id, m.queue_offset)
    if unit is not None and unit[0] == m.physical_offset:
        due = unit[2]  # the deliver timestamp (CommitLog#checkMessageAndReturnSize)
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


def _timer_state(
    ctx: _Context, m: CommitLogMessage, delivered: bool
) -> tuple[int | None, str, str]:
    due = _int_prop(m, PROPERTY_TIMER_OUT_MS)
    if delivered:
        return due, "delivered", "delivered by the timer wheel"
    if ctx.timer_read_ms is not None and due is not None and due <= ctx.timer_read_ms:
        return due, "delivered", (
            f"due before the timer's lastReadTimeMs ({_utc(ctx.timer_read_ms)}): delivered "
            "(copy not found)"
        )
    waited = fmt_duration(ctx.now - m.store_timestamp)
    if due is None:
        return due, "pending", f"pending for {waited}"
    if due > ctx.now:
        return due, "pending", f"pending for {waited}, due in {fmt_duration(due - ctx.now)}"
    return due, "overdue", f"pending for {waited}, overdue by {fmt_duration(ctx.now - due)}"


def _op_offsets(m: CommitLogMessage) -> set[int]:
    """Half-message queue offsets an op record names (body ``"12"`` or ``"12,13"``)."""
    try:
        text = m.decompressed_body().decode("ascii")
    except (MqtoolError, UnicodeDecodeError):
        return set()
    return {int(t) for t in text.split(",") if t.strip().isdigit()}


def _op_records(store: Store, half: CommitLogMessage) -> list[CommitLogMessage]:
    """Op records (RMQ_SYS_TRANS_OP_HALF_TOPIC) that close the half message ``half``."""
    out = []
    for qe in store.queue_entries(TRANS_OP_HALF_TOPIC, half.queue_id):
        if qe.entry.commit_log_offset < half.physical_offset:
            continue
        m = store.try_message_at(qe.entry.commit_log_offset)
        if m is not None and half.queue_offset in _op_offsets(m):
            out.append(m)
    return out


def _sent_back(
    m: CommitLogMessage, later: list[CommitLogMessage], original_topic: str | None
) -> str | None:
    """The group that consumed ``m`` and sent it back, if a later copy says so (the next
    copy has reconsumeTimes + 1; its topic, or the schedule copy's REAL_TOPIC, names the
    group)."""
    for x in later:
        if x.reconsume_times != m.reconsume_times + 1:
            continue
        if PROPERTY_ORIGIN_MESSAGE_ID not in x.properties:
            continue
        t = x.properties.get(PROPERTY_REAL_TOPIC, x.topic) if x.topic == SCHEDULE_TOPIC else x.topic
        if t.startswith(DLQ_GROUP_TOPIC_PREFIX):
            return "group " + t[len(DLQ_GROUP_TOPIC_PREFIX):]
        if t.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return "group " + _retry_group(t, original_topic)[0]
    return None


def _build_hops(ctx: _Context, msgs: list[CommitLogMessage]) -> list[Hop]:
    original_topic = None
    for m in msgs:
        rt = m.properties.get(PROPERTY_RETRY_TOPIC)
        if rt:
            original_topic = rt
            break
    if original_topic is None:
        for m in msgs:
            if not is_system_topic(m.topic):
                original_topic = m.topic
                break
    hops: list[Hop] = []
    prev: CommitLogMessage | None = None
    seen_dlq = resent = seen_half = False
    for i, m in enumerate(msgs):
        later = msgs[i + 1:]
        since = None if prev is None else m.store_timestamp - prev.store_timestamp
        prev = m
        note: str | None = None
        delay_prop = _int_prop(m, PROPERTY_DELAY_TIME_LEVEL)
        level: int | None = delay_prop
        delay_ms: int | None = None
        if level is not None:
            delay_ms = ctx.levels.get(level)
        due: int | None = None
        group: str | None = None
        cons: tuple[ConsumerState, ...] = ()
        t = m.topic
        if t == SCHEDULE_TOPIC:
            kind = "schedule"
            level, delay_ms, due, state, detail = _schedule_state(ctx, m)
            real = m.properties.get(PROPERTY_REAL_TOPIC, "?")
            if real.startswith(RETRY_GROUP_TOPIC_PREFIX):
                group = _retry_group(real, original_topic)[0]
            if state == "delivered" and not any(x.topic == real for x in later):
                detail += f"; the copy in {real} was not found"
        elif t == TIMER_TOPIC:
            kind = "timer"
            real = m.properties.get(PROPERTY_REAL_TOPIC, "?")
            due, state, detail = _timer_state(ctx, m, any(x.topic == real for x in later))
        elif t.startswith(DLQ_GROUP_TOPIC_PREFIX):
            kind = "dlq"
            seen_dlq, resent = True, False
            group = t[len(DLQ_GROUP_TOPIC_PREFIX):]
            state = "dead-lettered"
            retries = max(0, m.reconsume_times - 1)
            detail = f"dead-lettered for group {group} after {retries} retries"
            cons = _consumers(ctx, m, None)
            read = [c.group for c in cons if c.consumed]
            if read:
                detail += "; read from the DLQ by " + ", ".join(read)
        elif t == TRANS_HALF_TOPIC:
            kind = "half"
            seen_half = True
            real = m.properties.get(PROPERTY_REAL_TOPIC, "?")
            checks = _int_prop(m, PROPERTY_TRANSACTION_CHECK_TIMES)
            committed = any(x.topic == real for x in later)
            ops = any(x.topic == TRANS_OP_HALF_TOPIC for x in later)
            if committed:
                state, detail = "committed", f"committed to {real}"
            elif ops:
                state, detail = "rolled-back", "rolled back (op record, no committed copy)"
            else:
                state, detail = "pending", (
                    f"half message pending for {fmt_duration(ctx.now - m.store_timestamp)}"
                )
            if checks:
                detail += f"; checked {checks} times"
        elif t == TRANS_OP_HALF_TOPIC:
            kind, state, detail = "op", "op", "transaction op record (half message closed)"
        else:
            pop = False
            if t.startswith(RETRY_GROUP_TOPIC_PREFIX):
                group, pop = _retry_group(t, original_topic)
            if (seen_dlq and not resent) or (_is_resend(m) and m.reconsume_times == 0):
                kind = "resend"  # the first copy after a DLQ hop, or marked by `dlq resend`
                resent = True
            elif t.startswith(RETRY_GROUP_TOPIC_PREFIX):
                kind = "pop-retry" if pop or PROPERTY_FIRST_POP_TIME in m.properties else "retry"
            elif seen_half:
                kind = "commit"
            elif hops and hops[-1].kind in ("schedule", "timer"):
                kind = "delivered"
            else:
                kind = "original"
            state, detail, cons = _consumption_state(ctx, m, group)
            if kind == "resend":
                origin = m.properties.get(RESEND_PROPERTY_NAMES[0])
                note = (f"resent from DLQ record {origin}" if origin else
                        "stored after the DLQ copy: a resend")
            back = _sent_back(m, later, original_topic)
            if back is not None:
                state, detail = "consumed", f"consumed by {back} and sent back" + (
                    "" if ctx.consumer_offsets is None else f"; {detail}")
        hops.append(Hop(kind, m, since, level, delay_ms, due, state, detail, group, cons, note))
    return hops


def _verdict(ctx: _Context, hops: list[Hop]) -> tuple[str, str]:
    if not hops:
        return "not found", "unknown"
    dlqs = [h for h in hops if h.kind == "dlq"]
    prefix = ""
    tail = hops
    if dlqs:
        last_dlq = dlqs[-1]
        after = [h for h in hops if h.commit_log_offset > last_dlq.commit_log_offset]
        resent = [h for h in after if h.kind != "op"]
        if not resent:
            return (
                f"dead-lettered after {max(0, last_dlq.reconsume_times - 1)} retries "
                f"(group {last_dlq.group})",
                "dead-lettered",
            )
        prefix = (f"resent from %DLQ%{last_dlq.group} at {_utc(resent[0].store_timestamp)}; ")
        tail = resent
    last = next((h for h in reversed(tail) if h.kind != "op"), tail[-1])
    due = _utc(last.deliver_timestamp) if last.deliver_timestamp else "?"
    rel = ""
    if last.deliver_timestamp:
        d = last.deliver_timestamp - ctx.now
        rel = f", in {fmt_duration(d)}" if d >= 0 else f", overdue by {fmt_duration(-d)}"
    if last.kind == "schedule":
        real = last.real_topic or "?"
        if last.state in ("pending", "overdue", "unknown"):
            if real.startswith(RETRY_GROUP_TOPIC_PREFIX):
                return (prefix + f"waiting for retry {last.reconsume_times} at {due}{rel} "
                        f"(group {last.group}, delay level {last.delay_level})", "waiting-retry")
            return (prefix + f"still scheduled: delay level {last.delay_level} due at {due}{rel}",
                    "scheduled")
        return prefix + f"delivered by the schedule service to {real}; copy not found", "delivered"
    if last.kind == "timer":
        if last.state in ("pending", "overdue"):
            return prefix + f"still scheduled: timer due at {due}{rel}", "scheduled"
        return prefix + f"delivered by the timer to {last.real_topic}; copy not found", "delivered"
    if last.kind == "half":
        if last.state == "rolled-back":
            return prefix + "transaction rolled back", "rolled-back"
        return prefix + "transaction half message not yet committed or rolled back", (
            "transaction-pending")
    retries = len([h for h in tail if h.kind in ("retry", "pop-retry")])
    what = "delivered" if retries == 0 else (
        f"delivered after {retries} {'retry' if retries == 1 else 'retries'}")
    if last.state == "consumed":
        return prefix + f"{what} and consumed ({last.state_detail})", "consumed"
    return prefix + f"{what}; {last.state_detail}", "delivered"


def _store_now(store: Store, msgs: list[CommitLogMessage]) -> int:
    """The store's latest recorded store time: checkpoint, index headers, the journey."""
    cands = [m.store_timestamp for m in msgs]
    try:
        cp = read_checkpoint(store)
    except MqtoolError:
        cp = None
    if cp:
        cands += [cp["physicMsgTimestamp"], cp["logicsMsgTimestamp"]]
    cands += [r.header.end_timestamp for _, r in store.index_files()]
    return max(cands, default=0)


def _timer_read_ms(store: Store) -> int | None:
    p = store.config_path("timercheck")
    if not p.exists():
        return None
    from mqtool.formats.timer import parse_timer_checkpoint

    try:
        return parse_timer_checkpoint(p.read_bytes(), file="config/timercheck").last_read_time_ms
    except MqtoolError:
        return None


def _context(store: Store, levels: str, now: int | None, msgs: list[CommitLogMessage]) -> tuple[
    _Context, str
]:
    if now is None:
        now_v, src = _store_now(store, msgs), "store"
    else:
        now_v, src = now, "given"
    ctx = _Context(
        store=store,
        levels=parse_delay_levels(levels),
        delay_offsets=load_delay_offsets(store),
        consumer_offsets=load_consumer_offsets(store),
        timer_read_ms=_timer_read_ms(store),
        now=now_v,
    )
    return ctx, src


def _resolve(
    store: Store, finder: Finder, msg_id: str
) -> tuple[list[CommitLogMessage], set[str]]:
    t = msg_id.strip()
    kind = classify_id(t)
    if kind == "invalid":
        raise TraceError(
            f"{msg_id!r} is not a message id (offsetMsgId or UNIQ_KEY: 32 or 56 hex characters; "
            "5.x id: 34 characters starting 01)"
        )
    if kind != "v5":
        m = store.find_by_offset_msg_id(t)
        if m is not None and m.offset_msg_id == t.upper():
            return [m], set()
    found = finder.find({t, t.upper()}, set(), set())
    if not found and kind != "v5":
        m = store.find_by_offset_msg_id(t)
        if m is not None:  # the offset names a record, stored under another host address
            return [m], set()
    return found, {t, t.upper()}


def _make_trace(
    store: Store, finder: Finder, ident: str, seeds: list[CommitLogMessage],
    searched: set[str], *, delay_levels: str, now: int | None, store_label: str,
) -> Trace:
    msgs = _collect(store, finder, seeds, searched)
    ctx, src = _context(store, delay_levels, now, msgs)
    hops = _build_hops(ctx, msgs)
    uniq = next((m.uniq_key for m in msgs if m.uniq_key), None)
    verdict, vkind = _verdict(ctx, hops)
    tr = Trace(ident, uniq, hops, verdict, vkind, finder.via, ctx.now, src)
    dlqs = [h for h in hops if h.kind == "dlq"]
    if dlqs:
        import shlex

        d = dlqs[-1]
        tr.dlq_group = d.group
        tr.dlq_msg_id = d.offset_msg_id  # exact even when the message was dead-lettered twice
        tr.resend_command = (
            f"mqtool dlq resend {shlex.quote(store_label)} --group {shlex.quote(d.group or '')} "
            f"--msg-id {tr.dlq_msg_id} --target {RESEND_TARGET_PLACEHOLDER}"
        )
    if finder.via == "index" and finder.tail_bytes:
        tr.notes.append(f"scanned {finder.tail_bytes} bytes written after the last indexed record")
    return tr


def trace_id(
    store: Store,
    msg_id: str,
    *,
    delay_levels: str = DEFAULT_DELAY_LEVELS,
    now: int | None = None,
    progress: ProgressFn | None = None,
    store_label: str | None = None,
) -> Trace:
    """The journey of the message ``msg_id`` names: an offsetMsgId of any of its records, its
    UNIQ_KEY (32/56 hex) or a 5.x ``01...`` id.

    ``delay_levels`` is the broker's ``messageDelayLevel``; ``now`` (epoch ms) is the time
    pending copies are measured against (default: the store's latest recorded store time);
    ``progress`` is called during a commitlog scan; ``store_label`` is the store path shown in
    the suggested ``dlq resend`` command. Raises :class:`TraceError` when nothing matches.
    """
    finder = store.finder(progress)
    seeds, searched = _resolve(store, finder, msg_id)
    if not seeds:
        raise TraceError(
            f"no record with offsetMsgId or UNIQ_KEY {msg_id} (searched by {finder.via})"
        )
    return _make_trace(store, finder, msg_id.strip(), seeds, searched,
                       delay_levels=delay_levels, now=now,
                       store_label=store_label or str(store.root))


def trace_key(
    store: Store,
    key: str,
    *,
    topic: str | None = None,
    delay_levels: str = DEFAULT_DELAY_LEVELS,
    now: int | None = None,
    progress: ProgressFn | None = None,
    store_label: str | None = None,
) -> KeyTrace:
    """Every journey whose records carry the business key ``key`` (KEYS), optionally only
    those with a record in ``topic``; one :class:`Trace` per message (UNIQ_KEY)."""
    finder = store.finder(progress)
    found = finder.find(set(), set(), {key}, topic)
    if not found:
        where = f" in topic {topic}" if topic else ""
        raise TraceError(f"no record with key {key!r}{where} (searched by {finder.via})")
    traces: list[Trace] = []
    covered: set[int] = set()
    for m in found:
        if m.physical_offset in covered:
            continue
        # copies keep KEYS: without --topic the key search already found every copy
        same = [x for x in found if m.uniq_key and x.uniq_key == m.uniq_key] or [m]
        searched = {m.uniq_key} if m.uniq_key and topic is None else set()
        tr = _make_trace(store, finder, m.uniq_key or m.offset_msg_id, same, searched,
                         delay_levels=delay_levels, now=now,
                         store_label=store_label or str(store.root))
        covered.update(h.commit_log_offset for h in tr.hops)
        traces.append(tr)
    return KeyTrace(key, topic, finder.via, traces)
