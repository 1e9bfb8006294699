"""The data of a trace: hops, journeys and the error (rendering is in ``mqtool/cli/trace.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mqtool.formats.clienttrace import TraceContext
from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.errors import MqtoolError
from mqtool.formats.rules import (
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
)

# Properties a resent DLQ copy carries (mqtool.dlq_resend: MQTOOL_DLQ_MSG_ID, MQTOOL_DLQ_TOPIC
# and MQTOOL_RESEND_ID).
RESEND_PROPERTY_NAMES = ("MQTOOL_DLQ_MSG_ID", "MQTOOL_DLQ_TOPIC")
RESEND_PROPERTY_PREFIX = "MQTOOL_RESEND"  # MQTOOL_RESEND_ID (mqtool.dlq_resend)
RESEND_TARGET_PLACEHOLDER = "TARGET_STORE"  # `dlq resend` needs --target: the user's choice



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
class PopCheckout:
    """One POP checkout of a hop's copy (a checkpoint of the revive records): by which group,
    when (``pop_time``), invisible until ``revive_time``; ``state`` one of
    :data:`mqtool.backlog.POP_STATES`, ``at`` when it ended (the ack's or the revived copy's
    store time), the commitlog offsets of the checkpoint and ack records."""

    group: str
    pop_time: int
    invisible_time: int
    revive_time: int
    state: str
    at: int | None
    detail: str
    ck_record: int
    ack_record: int | None

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "popTime": self.pop_time,
                "invisibleTimeMs": self.invisible_time, "invisibleUntil": self.revive_time,
                "state": self.state, "at": self.at, "detail": self.detail,
                "checkpointRecord": self.ck_record, "ackRecord": self.ack_record}


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
    checkouts: tuple[PopCheckout, ...] = ()  # POP checkouts of this copy

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
            "popCheckouts": [c.to_json() for c in self.checkouts],
        }


@dataclass(frozen=True, slots=True)
class ClientEvent:
    """One event a client reported about the message (send, consume start, consume result,
    transaction end), from the trace record at commitlog offset ``record``. Its timestamp is
    the client's clock."""

    context: TraceContext
    record: int

    @property
    def what(self) -> str:
        """The event in a word: sent, consuming, consumed, tx end (else the client's type)."""
        return {"Pub": "sent", "SubBefore": "consuming", "SubAfter": "consumed",
                "EndTransaction": "tx end"}.get(self.context.type, self.context.type)

    @property
    def summary(self) -> str:
        """Who, from and to where, how long, the outcome, in a line."""
        c = self.context
        d = dict(c.detail)
        bits = []
        if c.group:
            bits.append(f"by {c.group}")
        if "clientHost" in d:
            bits.append(f"from {d['clientHost']}")
        if c.type == "Pub":
            bits.append(f"to {d.get('storeHost', '?')}")
        if "retryTimes" in d:
            bits.append(f"attempt {int(d['retryTimes']) + 1}")
        if "transactionState" in d:
            check = " (answering a check)" if d.get("fromTransactionCheck") == "true" else ""
            bits.append(f"{d['transactionState']}{check}")
        if c.cost_ms is not None:
            bits.append(f"{c.cost_ms} ms")
        if c.success is not None:
            code = d.get("contextCode")
            bits.append(("ok" if c.success else "FAILED")
                        + (f" ({code})" if code and code != "SUCCESS" else ""))
        return "  ".join(bits)

    def to_json(self) -> dict[str, Any]:
        c = self.context
        return {"what": self.what, "summary": self.summary, "type": c.type,
                "timestamp": c.timestamp, "group": c.group,
                "topic": c.topic or None, "tags": c.tags or None, "keys": c.keys or None,
                "costMs": c.cost_ms, "success": c.success, "detail": dict(c.detail),
                "traceRecordOffset": self.record}


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
    resend_command: str | None = None  # dead-lettered and not resent: how to resend it
    resent_to: str | None = None  # resent into this store: where its first copy is
    notes: list[str] = field(default_factory=list)
    client: list[ClientEvent] = field(default_factory=list)  # the clients' trace records

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
            "resentTo": self.resent_to,
            "notes": list(self.notes),
            "hops": [h.to_json() for h in self.hops],
            "clientTrace": [e.to_json() for e in self.client],
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
