"""Dead-letter queues: list, select and export the records of ``%DLQ%<group>``.

A consumer group's failures end in the topic ``%DLQ%<group>`` (one queue,
``DLQ_NUMS_PER_GROUP``), written by the broker's ``CONSUMER_SEND_MSG_BACK`` path once
``reconsumeTimes >= maxReconsumeTimes`` or when the client asks for delay level < 0. A DLQ
record keeps the message's body, TAGS, KEYS, user properties and UNIQ_KEY, and adds

* ``RETRY_TOPIC``: the topic the message was first sent to (the *original topic*);
* ``ORIGIN_MESSAGE_ID``: the offsetMsgId of the first stored copy (the *original msgId*);
* ``reconsumeTimes``: how many times it was consumed and failed; ``DELAY=0``.

The commitlog is the truth: records are read in physical order (consume queues of a crashed
store may lag behind). Nothing here writes: resending lives in :mod:`mqtool.dlq.resend`, and the
resend journals it keeps are only *read* here to count how many records were already resent.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from mqtool.formats import rules
from mqtool.formats.commitlog import (
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    CommitLogMessage,
)
from mqtool.formats.errors import MqtoolError, usage
from mqtool.formats.pop import dead_letter_origin, dead_letter_original_topic
from mqtool.formats.rules import dlq_topic, retry_topic
from mqtool.jsonview import body_value, message_dict
from mqtool.query import MessageFilter, ProgressFn, scan_messages, select_messages
from mqtool.store import Store

__all__ = [
    "CSV_COLUMNS",
    "DlqError",
    "DlqGroup",
    "DlqSelection",
    "csv_header",
    "csv_row",
    "dlq_topic",
    "export_dict",
    "group_of",
    "group_retry_topic",
    "list_groups",
    "origin_msg_id",
    "original_topic",
    "retry_topic",
    "require_group",
    "select_dlq",
]


class DlqError(MqtoolError):
    """A DLQ request that cannot be served (unknown group, bad selection, ...)."""


def group_of(topic: str) -> str | None:
    """The consumer group of a ``%DLQ%<group>`` topic, None for any other topic."""
    return rules.group_of(topic) if rules.topic_kind(topic) == "dlq" else None


def original_topic(m: CommitLogMessage) -> str | None:
    """The topic the message was first sent to (``RETRY_TOPIC``). A POP consumer's dead letter
    was sent back from its POP retry topic, so ``RETRY_TOPIC`` names that retry topic
    (``%RETRY%<group>_<topic>`` or ``%RETRY%<group>+<topic>``): the original is its topic part."""
    return dead_letter_origin(m.topic, m.properties.get(PROPERTY_RETRY_TOPIC))


def group_retry_topic(m: CommitLogMessage, group: str) -> str:
    """Where ``group`` consumes a retry of dead letter ``m``: the POP retry topic its
    ``RETRY_TOPIC`` names (a POP consumer's dead letter, in the form the broker used:
    ``%RETRY%<group>_<topic>`` or ``%RETRY%<group>+<topic>``), else ``%RETRY%<group>``."""
    t = m.properties.get(PROPERTY_RETRY_TOPIC)
    if t is not None and dead_letter_original_topic(t, group) != t:
        return t
    return retry_topic(group)


def origin_msg_id(m: CommitLogMessage) -> str | None:
    """The offsetMsgId of the message's first stored copy (``ORIGIN_MESSAGE_ID``)."""
    return m.properties.get(PROPERTY_ORIGIN_MESSAGE_ID)


@dataclass(frozen=True, slots=True)
class DlqSelection:
    """Which DLQ records of one group. Times are store times in epoch ms (``until`` exclusive).

    ``topic`` matches the original topic (RETRY_TOPIC); ``msg_id`` matches the DLQ record's
    offsetMsgId, its UNIQ_KEY (client msgId) or its ORIGIN_MESSAGE_ID (case-insensitive);
    ``key`` one KEYS token.
    """

    group: str
    since: int | None = None
    until: int | None = None
    topic: str | None = None
    msg_id: str | None = None
    key: str | None = None
    limit: int | None = None

    @property
    def dlq_topic(self) -> str:
        return dlq_topic(self.group)

    def _extra(self, m: CommitLogMessage) -> bool:
        """What a plain message filter does not know: original topic and message ids."""
        if self.topic is not None and original_topic(m) != self.topic:
            return False
        if self.msg_id is not None:
            want = self.msg_id.upper()
            ids = (m.offset_msg_id, m.uniq_key, origin_msg_id(m))
            if not any(i is not None and i.upper() == want for i in ids):
                return False
        return True

    def message_filter(self) -> MessageFilter:
        return MessageFilter(
            topic=self.dlq_topic, since=self.since, until=self.until, key=self.key,
            limit=self.limit, where=self._extra,
        )

    def matches(self, m: CommitLogMessage) -> bool:
        return self.message_filter().matches(m)


def _group_seen(store: Store, group: str) -> bool:
    """Whether ``group`` has left any trace in the store: a ``%DLQ%``/``%RETRY%`` consume queue,
    a consumer offset, or a ``%DLQ%``/``%RETRY%`` record in the commitlog (the truth when the
    consume queues lag)."""
    topics = {dlq_topic(group), retry_topic(group)}
    if any(t in topics for t, _ in store.queue_ids()):
        return True
    from mqtool.overview import load_consumer_offsets

    try:
        offsets = load_consumer_offsets(store) or {}
    except MqtoolError:
        offsets = {}  # a damaged consumerOffset.json proves nothing; the commitlog decides
    if any(g == group for _, g in offsets):
        return True
    return any(m.topic in topics for m in scan_messages(store))


def require_group(store: Store, group: str) -> None:
    """Raise :class:`DlqError` when ``group`` is unknown to ``store`` (so that a typo is an
    error, not "0 records")."""
    if not group:
        raise usage(DlqError("--group must not be empty"))
    if not _group_seen(store, group):
        raise DlqError(
            f"unknown consumer group {group!r} in {store.root}: no {dlq_topic(group)} or "
            f"{retry_topic(group)} queue, record or consumer offset (see `mqtool dlq list`)"
        )


def select_dlq(
    store: Store, sel: DlqSelection, *, progress: ProgressFn | None = None
) -> Iterator[CommitLogMessage]:
    """The DLQ records ``sel`` selects, in commitlog order (streaming)."""
    return select_messages(store, sel.message_filter(), progress=progress)


@dataclass(slots=True)
class DlqGroup:
    """One ``%DLQ%<group>`` topic as ``dlq list`` reports it."""

    group: str
    dlq_topic: str
    count: int = 0
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None
    original_topics: dict[str, int] = field(default_factory=dict)
    resent: int = 0

    def add(self, m: CommitLogMessage, *, resent: bool = False) -> None:
        """Count one record of this DLQ."""
        self.count += 1
        ts = m.store_timestamp
        if self.first_store_timestamp is None or ts < self.first_store_timestamp:
            self.first_store_timestamp = ts
        if self.last_store_timestamp is None or ts > self.last_store_timestamp:
            self.last_store_timestamp = ts
        t = original_topic(m) or NO_RETRY_TOPIC
        self.original_topics[t] = self.original_topics.get(t, 0) + 1
        if resent:
            self.resent += 1

    def to_dict(self) -> dict[str, Any]:
        """The ``dlq list --json`` contract."""
        return {
            "group": self.group,
            "dlqTopic": self.dlq_topic,
            "count": self.count,
            "firstStoreTimestamp": self.first_store_timestamp,
            "lastStoreTimestamp": self.last_store_timestamp,
            "originalTopics": dict(self.original_topics),
            "resent": self.resent,
        }


NO_RETRY_TOPIC = "(none)"  # originalTopics key of records without RETRY_TOPIC


def list_groups(
    store: Store,
    *,
    resent_ids: Callable[[CommitLogMessage], bool] | None = None,
    progress: ProgressFn | None = None,
) -> list[DlqGroup]:
    """Every ``%DLQ%<group>`` with records in the commitlog (plus empty ones that only have a
    consume queue), sorted by group. ``resent_ids(record)`` says whether a record was already
    resent (see :func:`mqtool.dlq.journal.resent_checker`)."""
    groups: dict[str, DlqGroup] = {}
    for m in scan_messages(store, progress=progress):
        g = group_of(m.topic)
        if g is None:
            continue
        d = groups.get(g)
        if d is None:
            d = groups[g] = DlqGroup(g, m.topic)
        d.add(m, resent=resent_ids is not None and resent_ids(m))
    for topic, _ in store.queue_ids():
        g = group_of(topic)
        if g is not None and g not in groups:
            groups[g] = DlqGroup(g, topic)
    return [groups[k] for k in sorted(groups)]


def export_dict(m: CommitLogMessage, body: str = "utf8") -> dict[str, Any]:
    """One DLQ record for ``dlq show --json`` / ``dlq export --format jsonl``: the
    ``mqtool messages`` fields plus ``originalTopic`` (RETRY_TOPIC) and ``originMsgId``
    (ORIGIN_MESSAGE_ID)."""
    d = message_dict(m, body)
    d["originalTopic"] = original_topic(m)
    d["originMsgId"] = origin_msg_id(m)
    return d


CSV_COLUMNS = (
    # the Dashboard's DLQ export columns (DlqMessageExcelModel) ...
    "topic", "msgId", "bornHost", "bornTimestamp", "storeTimestamp", "reconsumeTimes",
    "properties", "body", "bodyCRC",
    # ... and what an operator needs to act on them
    "offsetMsgId", "originalTopic", "originMsgId", "tags", "keys", "storeHost", "queueId",
    "queueOffset", "commitLogOffset",
)


def csv_values(m: CommitLogMessage, body: str = "utf8") -> list[str]:
    """One CSV row in :data:`CSV_COLUMNS` order. ``msgId`` is the client msgId (UNIQ_KEY, as
    the Dashboard shows it; the offsetMsgId when absent); times are epoch ms; ``properties``
    is the property map as JSON."""
    vals: list[Any] = [
        m.topic, m.uniq_key or m.offset_msg_id, str(m.born_host), m.born_timestamp,
        m.store_timestamp, m.reconsume_times,
        json.dumps(m.properties, ensure_ascii=False, sort_keys=True),
        body_value(m, body) or "", m.body_crc,
        m.offset_msg_id, original_topic(m) or "", origin_msg_id(m) or "", m.tags or "",
        m.keys or "", str(m.store_host), m.queue_id, m.queue_offset, m.physical_offset,
    ]
    return [str(v) for v in vals]


def _csv_line(values: Iterable[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(list(values))
    return buf.getvalue()


def csv_header() -> str:
    return _csv_line(CSV_COLUMNS)


def csv_row(m: CommitLogMessage, body: str = "utf8") -> str:
    return _csv_line(csv_values(m, body))
