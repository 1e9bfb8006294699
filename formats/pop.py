"""POP consumption records: checkpoints and acks in the revive topic (RocketMQ 5.x).

Parsed here; ``mqtool verify`` checks them in :mod:`mqtool.integrity.pop` (the same records,
one layer up).

Mirrors ``org.apache.rocketmq.store.pop.PopCheckPoint``, ``AckMsg`` and ``BatchAckMsg`` (their
fastjson ``@JSONField`` names) and ``org.apache.rocketmq.common.PopAckConstants``. The broker
stores them as the bodies of messages in ``rmq_sys_REVIVE_LOG_<cluster>`` (tag ``ck``, ``ack`` or
``bAck``), each put through the timer with a delivery time near the checkpoint's revive time.

Checkpoint (tag ``ck``): ``so`` startOffset, ``pt`` popTime (epoch ms), ``it`` invisibleTime (ms),
``bm`` bitMap, ``n`` num, ``q`` queueId, ``t`` topic, ``c`` consumer group, ``ro``
reviveOffset, ``d`` queueOffsetDiff (offsets of the popped messages relative to ``so``), ``bn``
brokerName, ``rp`` rePutTimes. Its revive time is ``pt + it``.

Ack (tag ``ack``): ``ao`` ackOffset, ``so`` startOffset, ``c`` group, ``t`` topic, ``q`` queueId,
``pt`` popTime, ``bn`` brokerName; a batch ack (tag ``bAck``) has ``aol`` (ackOffsetList) instead
of ``ao``.

Retry topics of POP groups (``KeyBuilder``): ``%RETRY%<group>_<topic>`` (V1) and, with
``enableRetryTopicV2``, ``%RETRY%<group>+<topic>`` (V2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqtool.formats.errors import BadFieldError
from mqtool.formats.rules import RETRY_GROUP_TOPIC_PREFIX, group_of, retry_topic, topic_kind

__all__ = [
    "ACK_TAG",
    "BATCH_ACK_TAG",
    "CK_TAG",
    "REVIVE_TOPIC_PREFIX",
    "PopAck",
    "PopCheckPoint",
    "dead_letter_original_topic",
    "parse_revive_body",
    "pop_retry_topic",
    "split_pop_retry_topic",
]

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"  # PopAckConstants.REVIVE_TOPIC
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
RETRY_V1_SEPARATOR = "_"  # KeyBuilder.POP_RETRY_SEPARATOR_V1
RETRY_V2_SEPARATOR = "+"  # KeyBuilder.POP_RETRY_SEPARATOR_V2


@dataclass(frozen=True, slots=True)
class PopCheckPoint:
    """A POP checkpoint record (``PopCheckPoint``) of the revive topic."""

    start_offset: int
    pop_time: int  # epoch ms
    invisible_time: int  # ms
    bit_map: int
    num: int
    queue_id: int
    topic: str
    group: str
    revive_offset: int
    queue_offset_diff: tuple[int, ...]
    broker_name: str | None
    re_put_times: str | None

    @property
    def revive_time(self) -> int:
        """When the popped messages become visible again unless acked (epoch ms)."""
        return self.pop_time + self.invisible_time

    def queue_offsets(self) -> list[int]:
        """The queue offsets of the popped messages (``ackOffsetByIndex``)."""
        if not self.queue_offset_diff:
            return [self.start_offset + i for i in range(self.num)]
        return [self.start_offset + d for d in self.queue_offset_diff]


@dataclass(frozen=True, slots=True)
class PopAck:
    """A POP ack record (``AckMsg`` or ``BatchAckMsg``) of the revive topic."""

    ack_offsets: tuple[int, ...]
    start_offset: int
    group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str | None
    batch: bool


def _field(d: dict[str, Any], short: str, long: str, kind: type, *, need: bool = True) -> Any:
    v = d.get(short, d.get(long))
    if v is None:
        if need:
            raise ValueError(f"no {short!r}")
        return None
    if kind is int and (isinstance(v, bool) or not isinstance(v, int)):
        raise ValueError(f"{short!r} is {v!r}, not an integer")
    if kind is str and not isinstance(v, str):
        raise ValueError(f"{short!r} is {v!r}, not a string")
    return v


def parse_revive_body(
    tag: str | None, body: bytes, *, file: str | None = None, offset: int | None = None,
    phy: int | None = None,
) -> PopCheckPoint | PopAck:
    """The checkpoint or ack a revive-topic message of ``tag`` holds (BadFieldError naming the
    record when its body is not the JSON the broker writes)."""
    import json  # a store with POP records only

    try:
        d = json.loads(body.decode("utf-8"))
        if not isinstance(d, dict):
            raise ValueError("not a JSON object")
        if tag == CK_TAG:
            diff = d.get("d") or []
            if not isinstance(diff, list) or not all(isinstance(x, int) for x in diff):
                raise ValueError(f"'d' is {diff!r}, not a list of integers")
            return PopCheckPoint(
                _field(d, "so", "startOffset", int), _field(d, "pt", "popTime", int),
                _field(d, "it", "invisibleTime", int), _field(d, "bm", "bitMap", int),
                _field(d, "n", "num", int), _field(d, "q", "queueId", int),
                _field(d, "t", "topic", str), _field(d, "c", "cid", str),
                _field(d, "ro", "reviveOffset", int), tuple(diff),
                _field(d, "bn", "brokerName", str, need=False),
                _field(d, "rp", "rePutTimes", str, need=False),
            )
        if tag in (ACK_TAG, BATCH_ACK_TAG):
            batch = tag == BATCH_ACK_TAG
            if batch:
                aol = d.get("aol", d.get("ackOffsetList"))
                if not isinstance(aol, list) or not all(isinstance(x, int) for x in aol):
                    raise ValueError(f"'aol' is {aol!r}, not a list of integers")
                offsets = tuple(aol)
            else:
                offsets = (_field(d, "ao", "ackOffset", int),)
            return PopAck(
                offsets, _field(d, "so", "startOffset", int),
                _field(d, "c", "consumerGroup", str), _field(d, "t", "topic", str),
                _field(d, "q", "queueId", int), _field(d, "pt", "popTime", int),
                _field(d, "bn", "brokerName", str, need=False), batch,
            )
        raise ValueError(f"tag {tag!r} is none of {CK_TAG!r}, {ACK_TAG!r}, {BATCH_ACK_TAG!r}")
    except (ValueError, UnicodeDecodeError) as e:
        raise BadFieldError(file, offset, f"revive record body is not a POP {tag or 'record'}: "
                            f"{e}", phy=phy) from e


def pop_retry_topic(group: str, topic: str, *, v2: bool = False) -> str:
    """``KeyBuilder.buildPopRetryTopic``: the retry topic of a POP group on ``topic``."""
    return retry_topic(group) + (RETRY_V2_SEPARATOR if v2 else RETRY_V1_SEPARATOR) + topic


def split_pop_retry_topic(retry_topic: str, groups: set[str] | None = None,
                          topics: set[str] | None = None) -> tuple[str, str] | None:
    """(group, original topic) of a POP retry topic, else None. A V2 name splits at its
    ``+`` (neither groups nor topics may hold one); a V1 name is ambiguous when the group or
    the topic holds ``_``: with ``groups`` given, the known group that prefixes it wins, then
    with ``topics`` given, the known topic that ends it."""
    if not retry_topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    rest = retry_topic[len(RETRY_GROUP_TOPIC_PREFIX):]
    if RETRY_V2_SEPARATOR in rest:
        g, _, t = rest.partition(RETRY_V2_SEPARATOR)
        return (g, t) if g and t else None
    if groups:
        for g in sorted(groups, key=len, reverse=True):
            if rest.startswith(g + RETRY_V1_SEPARATOR) and len(rest) > len(g) + 1:
                return g, rest[len(g) + 1:]
    if topics:
        for t in sorted(topics, key=len, reverse=True):
            if rest.endswith(RETRY_V1_SEPARATOR + t) and len(rest) > len(t) + 1:
                return rest[:-len(t) - 1], t
    if RETRY_V1_SEPARATOR in rest:
        g, _, t = rest.partition(RETRY_V1_SEPARATOR)
        return (g, t) if g and t else None
    return None


def dead_letter_original_topic(retry_topic_property: str, group: str) -> str:
    """The original topic of a dead letter of ``group`` whose ``RETRY_TOPIC`` is
    ``retry_topic_property``: that topic, or for a POP consumer's dead letter (sent back from
    its POP retry topic, which ``RETRY_TOPIC`` then names) the retry topic's topic part."""
    split = split_pop_retry_topic(retry_topic_property, {group})
    return split[1] if split is not None and split[0] == group else retry_topic_property


def dead_letter_origin(topic: str, retry_topic_property: str | None) -> str | None:
    """The topic a record of ``topic`` was first sent to, from its ``RETRY_TOPIC`` property
    (None without one): for a dead letter (``%DLQ%<group>``),
    :func:`dead_letter_original_topic`; for any other record the property as it is."""
    group = group_of(topic) if topic_kind(topic) == "dlq" else None
    if retry_topic_property is None or group is None:
        return retry_topic_property
    return dead_letter_original_topic(retry_topic_property, group)
