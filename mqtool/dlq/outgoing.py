"""The resent copy of a DLQ record: what it keeps, what it drops, where it goes, where it landed.

``build_outgoing`` turns one ``%DLQ%<group>`` record into the message to send. The copy keeps
the body (bytes as stored, with the compression bits of SYSFLAG), FLAG, TAGS, KEYS, every user
property, ``UNIQ_KEY`` (the client msgId), ``RETRY_TOPIC``, ``ORIGIN_MESSAGE_ID`` and the born
timestamp/host; its reconsume count is reset to 0. Properties that only describe the old
record's trip through the broker are dropped (:data:`DROPPED_PROPERTIES`: ``DELAY``,
``REAL_TOPIC``, ``REAL_QID``, ``CLUSTER``, ``__CRC32#``, ``TIMER_*``, ``RECONSUME_TIME``, POP and
inner-batch bookkeeping), so the copy is neither delayed nor re-routed again.

Tie properties (what ``mqtool trace`` reads to show the resend as a hop)
-----------------------------------------------------------------------
* ``ORIGIN_MESSAGE_ID`` (kept): offsetMsgId of the message's very first stored copy;
* ``MQTOOL_DLQ_TOPIC`` = the DLQ topic the record was taken from (``%DLQ%<group>``);
* ``MQTOOL_DLQ_MSG_ID`` = the offsetMsgId of that DLQ record;
  (deliberately not RocketMQ 5.x's ``DLQ_ORIGIN_TOPIC`` / ``DLQ_ORIGIN_MESSAGE_ID``: the 5.x
  gRPC proxy reads those to present a message *as a dead letter* of its original topic, which
  a resent copy is not);
* ``MQTOOL_RESEND_ID`` (:data:`RESEND_ID_PROPERTY`) = a 32-hex id derived only from the DLQ
  record (:func:`resend_id`): the same record always gets the same id, which is what makes a
  resend idempotent and checkable in the target. ``KEYS`` stay exactly the record's: a live
  broker is asked "do you hold it?" with QUERY_MESSAGE by the copy's ``UNIQ_KEY`` (which the
  broker indexes), and the answers carrying this id are the copies. A record without
  ``UNIQ_KEY`` gives its copy the resend id as ``UNIQ_KEY``.

Destinations (``--to``)
-----------------------
``retry`` (default): ``%RETRY%<group>``: only the group that failed consumes it again (its
client maps it back to RETRY_TOPIC); for a POP consumer's dead letter, whose RETRY_TOPIC names
its POP retry topic (``%RETRY%<group>_<topic>`` or ``%RETRY%<group>+<topic>``), that topic, which
the broker pops for the group. ``original``: the original topic (RETRY_TOPIC, or a POP retry
topic's topic part); every group subscribed to that topic receives it again, not only the
failed one. Anything else: that topic.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from mqtool.dlq.selection import DlqError, group_retry_topic, original_topic
from mqtool.formats.commitlog import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    CommitLogMessage,
)
from mqtool.formats.rules import (
    DLQ_GROUP_TOPIC_PREFIX,
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    SCHEDULE_TOPIC,
)

__all__ = [
    "DROPPED_PROPERTIES",
    "RESEND_DLQ_MSG_ID",
    "RESEND_DLQ_TOPIC",
    "RESEND_ID_PROPERTY",
    "TO_ORIGINAL",
    "TO_RETRY",
    "OutgoingMessage",
    "ResendError",
    "build_outgoing",
    "destination_topic",
    "resend_id",
]

RESEND_ID_PROPERTY = "MQTOOL_RESEND_ID"
# Not 5.x's DLQ_ORIGIN_TOPIC / DLQ_ORIGIN_MESSAGE_ID (the gRPC proxy would mark the copy as a
# dead letter): mqtool's own names.
RESEND_DLQ_TOPIC = "MQTOOL_DLQ_TOPIC"
RESEND_DLQ_MSG_ID = "MQTOOL_DLQ_MSG_ID"

DROPPED_PROPERTIES = frozenset({
    "DELAY", "REAL_TOPIC", "REAL_QID", "CLUSTER", "__CRC32#", "RECONSUME_TIME",
    "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_DELAY_MS", "TIMER_OUT_MS", "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_DEL_UNIQKEY", "1ST_POP_TIME", "POP_CK",
    "DUP_INFO", "INNER_NUM", "INNER_BASE",
})
"""Properties of the DLQ record that the resent copy does not carry."""

TO_RETRY = "retry"
TO_ORIGINAL = "original"



class ResendError(DlqError):
    """A resend that cannot go ahead (bad destination, journal locked or damaged, ...)."""


@dataclass(frozen=True, slots=True)
class SendResult:
    """Where a resent copy landed (``msg_id``: its offsetMsgId in the target)."""

    msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int | None
    store_timestamp: int


class SendFailure(ResendError):
    """One message not accepted. ``fatal``: the fault ends the run (target unreachable, refused,
    topic missing); ``unknown``: the message may have been stored (no answer after it was
    written) - the journal keeps it unresolved, a rerun asks the target before sending."""

    def __init__(self, text: str, *, fatal: bool = False, unknown: bool = False) -> None:
        super().__init__(text)
        self.fatal = fatal
        self.unknown = unknown



def resend_id(m: CommitLogMessage) -> str:
    """The id of resending this DLQ record: the same for every run and every copy of the
    store (DLQ topic, offsetMsgId, store time, body CRC and UNIQ_KEY), 32 upper-case hex."""
    text = "|".join((m.topic, m.offset_msg_id, str(m.store_timestamp), str(m.body_crc),
                     m.uniq_key or ""))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32].upper()


def destination_topic(to: str, group: str, m: CommitLogMessage) -> str:
    """``retry`` -> ``%RETRY%<group>`` (a POP group's: its POP retry topic), ``original`` ->
    the original topic (:func:`mqtool.dlq.selection.original_topic`), else ``to`` itself."""
    if to == TO_RETRY:
        return group_retry_topic(m, group)
    if to == TO_ORIGINAL:
        t = original_topic(m)
        if not t:
            raise ResendError("the DLQ record has no RETRY_TOPIC property (original unknown)")
        return t
    if not to or to.startswith(DLQ_GROUP_TOPIC_PREFIX) or to == SCHEDULE_TOPIC:
        raise ResendError(f"refusing to resend into {to!r} (a DLQ or system topic)")
    return to


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """One message to send, built from a DLQ record by :func:`build_outgoing`."""

    resend_id: str
    topic: str
    body: bytes
    properties: tuple[tuple[str, str], ...]
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    # where it comes from
    dlq_topic: str
    dlq_msg_id: str
    dlq_offset: int
    uniq_key: str | None
    origin_msg_id: str | None
    original_topic: str | None

    def to_dict(self, body: str = "utf8") -> dict[str, Any]:
        """What would be sent (``--dry-run`` output): topic, properties, flags, body."""
        d: dict[str, Any] = {
            "resendId": self.resend_id,
            "topic": self.topic,
            "flag": self.flag,
            "sysFlag": self.sys_flag,
            "bornTimestamp": self.born_timestamp,
            "bornHost": self.born_host,
            "reconsumeTimes": 0,
            "properties": dict(self.properties),
            "bodyLength": len(self.body),
        }
        if body != "none":  # one home for body encodings: jsonview (never a silent U+FFFD)
            from mqtool.jsonview import encode_bytes

            d["body"], d["bodyEncoding"] = encode_bytes(self.body, body)
        return d


def build_outgoing(m: CommitLogMessage, group: str, to: str = TO_RETRY) -> OutgoingMessage:
    """The resent copy of DLQ record ``m`` (see the module docstring for what it keeps)."""
    topic = destination_topic(to, group, m)
    rid = resend_id(m)
    old_rid = m.properties.get(RESEND_ID_PROPERTY)
    props = [(k, v) for k, v in m.properties.items() if k not in DROPPED_PROPERTIES
             and k not in (RESEND_DLQ_TOPIC, RESEND_DLQ_MSG_ID, RESEND_ID_PROPERTY)]
    if old_rid is not None and m.properties.get(PROPERTY_KEYS) is not None:
        # a copy an older mqtool resent had the id appended to KEYS: the user's keys are kept
        keys = [k for k in m.properties[PROPERTY_KEYS].split(KEY_SEPARATOR) if k != old_rid]
        props = [(k, KEY_SEPARATOR.join(keys) if k == PROPERTY_KEYS else v) for k, v in props
                 if k != PROPERTY_KEYS or keys]
    uniq_key = m.uniq_key
    if uniq_key is None:
        uniq_key = rid
        props.append((PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, rid))
    props += [
        (RESEND_DLQ_TOPIC, m.topic),
        (RESEND_DLQ_MSG_ID, m.offset_msg_id),
        (RESEND_ID_PROPERTY, rid),
    ]
    return OutgoingMessage(
        resend_id=rid, topic=topic, body=m.body, properties=tuple(props), flag=m.flag,
        sys_flag=m.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG),
        born_timestamp=m.born_timestamp, born_host=str(m.born_host), dlq_topic=m.topic,
        dlq_msg_id=m.offset_msg_id, dlq_offset=m.physical_offset, uniq_key=uniq_key,
        origin_msg_id=m.properties.get(PROPERTY_ORIGIN_MESSAGE_ID),
        original_topic=original_topic(m),
    )
