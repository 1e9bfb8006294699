"""The broker's delay / retry / DLQ rules as pure functions (RocketMQ 4.9.7 semantics).

Mirrors, step for step:

* ``ScheduleMessageService#parseDelayLevel`` / ``computeDeliverTimestamp`` /
  ``correctDeliverTimestamp`` / ``messageTimeup`` (what a delivered copy keeps: the record is
  re-encoded from the schedule record's properties *before* DELAY is cleared, so the delivered
  copy still carries DELAY, REAL_TOPIC and REAL_QID);
* ``CommitLog#asyncPutMessage`` (a delay level > 0 rewrites the message to
  ``SCHEDULE_TOPIC_XXXX``, queue level - 1, after putting REAL_TOPIC and REAL_QID);
* ``SendMessageProcessor#asyncConsumerSendMsgBack`` (RETRY_TOPIC if absent, WAIT=false, DLQ when
  ``reconsumeTimes >= maxReconsumeTimes`` or the level is negative with DELAY=0, otherwise
  DELAY = client level or ``3 + reconsumeTimes``; ORIGIN_MESSAGE_ID = the first copy's
  offsetMsgId);
* ``SendMessageProcessor#handleRetryAndDLQ``: a client's own send to ``%RETRY%<group>`` (the
  orderly consumer's send-back), 4.9.7 and 5.3.3 (:func:`handle_retry_and_dlq`, the one home of
  that rule for ``mqtool serve`` and the reference store);
* ``MessageExtBrokerInner#tagsString2tagsCode`` and ``IndexService#buildIndex`` (index keys).

Property maps are plain ``dict`` objects in *Java insertion order* (a decoded record's map is
filled in stored order; puts append, replacements keep the position). Since no path removes a key
before encoding, the Java iteration order of such a map follows from its key sequence alone:
:func:`~mqtool.formats.javacompat.hashmap_key_order` turns it into RocketMQ's byte order.
"""

from __future__ import annotations

from dataclasses import dataclass

# The broker's names and rules have one home, formats/rules.py; they are re-exported here so the
# engine can keep writing ``B.SCHEDULE_TOPIC``.
from mqtool.formats.rules import (
    DEFAULT_MAX_RECONSUME_TIMES,
    DEFAULT_MESSAGE_DELAY_LEVEL,
    DLQ_GROUP_TOPIC_PREFIX,
    DLQ_NUMS_PER_GROUP,
    KEY_SEPARATOR,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    SEND_BACK_BASE_DELAY_LEVEL,
    TRANS_HALF_TOPIC,
    BrokerRuleError,
    delay_level_to_queue_id,
    dlq_topic,
    index_keys,
    parse_delay_levels,
    queue_id_to_delay_level,
    retry_topic,
)
from mqtool.formats.rules import tags_code_of as tags_code

__all__ = [
    "DEFAULT_MAX_RECONSUME_TIMES", "DEFAULT_MESSAGE_DELAY_LEVEL", "DLQ_GROUP_TOPIC_PREFIX",
    "DLQ_NUMS_PER_GROUP", "KEY_SEPARATOR", "PROPERTY_CLUSTER", "PROPERTY_DELAY_TIME_LEVEL",
    "PROPERTY_KEYS", "PROPERTY_MAX_RECONSUME_TIMES", "PROPERTY_ORIGIN_MESSAGE_ID",
    "PROPERTY_REAL_QUEUE_ID", "PROPERTY_REAL_TOPIC", "PROPERTY_RECONSUME_TIME",
    "PROPERTY_RETRY_TOPIC", "PROPERTY_TAGS", "PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX",
    "PROPERTY_WAIT_STORE_MSG_OK", "RETRY_GROUP_TOPIC_PREFIX", "SCHEDULE_TOPIC",
    "SEND_BACK_BASE_DELAY_LEVEL", "TRANS_HALF_TOPIC",
    "BrokerRuleError", "SendBackDecision", "TimeUp", "apply_send_back",
    "compute_deliver_timestamp", "correct_deliver_timestamp", "decide_send_back",
    "RetrySendDecision", "delay_level_of", "delay_level_to_queue_id", "dlq_topic",
    "handle_retry_and_dlq", "index_keys", "message_timeup",
    "parse_delay_levels", "queue_id_to_delay_level", "retry_topic", "rewrite_for_schedule",
    "tags_code",
]


def compute_deliver_timestamp(levels: dict[int, int], level: int, store_timestamp: int) -> int:
    """``ScheduleMessageService#computeDeliverTimestamp``: the SCHEDULE consume-queue tagsCode."""
    delay = levels.get(level)
    return store_timestamp + (delay if delay is not None else 1000)


def correct_deliver_timestamp(now: int, deliver_timestamp: int, level_delay: int) -> int:
    """``DeliverDelayedMessageTimerTask#correctDeliverTimestamp``: a deliver time further away
    than one full delay (clock moved back) is delivered now."""
    return now if deliver_timestamp > now + level_delay else deliver_timestamp


def delay_level_of(properties: dict[str, str]) -> int:
    """``Message#getDelayTimeLevel``: the DELAY property as int, 0 when absent."""
    t = properties.get(PROPERTY_DELAY_TIME_LEVEL)
    return int(t) if t is not None else 0


@dataclass(frozen=True, slots=True)
class SendBackDecision:
    """Where ``asyncConsumerSendMsgBack`` sends a failed message.

    ``topic`` is ``%RETRY%<group>`` or ``%DLQ%<group>``; ``delay_level`` the DELAY written (0 for
    the DLQ); ``to_dlq`` tells which.
    """

    topic: str
    delay_level: int
    to_dlq: bool


def decide_send_back(
    group: str, reconsume_times: int, delay_level: int, max_reconsume_times: int
) -> SendBackDecision:
    """The branch of ``SendMessageProcessor#asyncConsumerSendMsgBack`` (4.9.7)."""
    if reconsume_times >= max_reconsume_times or delay_level < 0:
        return SendBackDecision(dlq_topic(group), 0, True)
    if delay_level == 0:
        delay_level = SEND_BACK_BASE_DELAY_LEVEL + reconsume_times
    return SendBackDecision(retry_topic(group), delay_level, False)


def apply_send_back(
    props: dict[str, str],
    *,
    topic: str,
    group: str,
    reconsume_times: int,
    delay_level: int,
    max_reconsume_times: int,
    offset_msg_id: str,
) -> SendBackDecision:
    """Mutate a freshly decoded property map as the send-back path does; returns the decision.

    The order of the puts is the broker's: RETRY_TOPIC (if absent), WAIT=false, DELAY, then
    ORIGIN_MESSAGE_ID (if absent). The caller then encodes the map (and the store adds
    REAL_TOPIC / REAL_QID when DELAY > 0).
    """
    if props.get(PROPERTY_RETRY_TOPIC) is None:
        props[PROPERTY_RETRY_TOPIC] = topic
    props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
    decision = decide_send_back(group, reconsume_times, delay_level, max_reconsume_times)
    props[PROPERTY_DELAY_TIME_LEVEL] = str(decision.delay_level)
    origin = props.get(PROPERTY_ORIGIN_MESSAGE_ID)
    props[PROPERTY_ORIGIN_MESSAGE_ID] = origin if origin else offset_msg_id
    return decision


@dataclass(frozen=True, slots=True)
class RetrySendDecision:
    """Where ``SendMessageProcessor#handleRetryAndDLQ`` puts a client's own send to
    ``%RETRY%<group>``.

    ``topic`` is the retry topic (unchanged) or ``%DLQ%<group>``; ``queue_id`` is None when the
    sender's queue stays, else the DLQ queue. The property map passed in holds the DELAY that is
    stored (the store then parks any DELAY > 0 in ``SCHEDULE_TOPIC_XXXX``).
    """

    topic: str
    queue_id: int | None
    to_dlq: bool


def handle_retry_and_dlq(
    props: dict[str, str],
    *,
    group: str,
    reconsume_times: int,
    max_reconsume_times: int,
    dialect: str,
    group_locked: bool,
) -> RetrySendDecision:
    """``SendMessageProcessor#handleRetryAndDLQ`` for a send to ``%RETRY%<group>`` whose
    header carries ``reconsume_times`` (the ``maxReconsumeTimes`` header, else the group's
    retryMaxTimes, is ``max_reconsume_times``); mutates ``props``, the client's decoded map.

    This is how an orderly consumer's message reaches the DLQ: its client retries locally, then
    sends the message to the retry topic itself (``ConsumeMessageOrderlyService
    #sendMessageBack``, DELAY = 3 + its local count).

    * 4.9.7: dead-lettered when ``reconsume_times >= max``. The broker's ``setDelayTimeLevel(0)``
      goes to the new message's own map, which ``setProperties`` then replaces with the
      client's, so the client's DELAY stays (apache/rocketmq #2724): a DELAY > 0 parks the DLQ
      copy in ``SCHEDULE_TOPIC_XXXX`` (REAL_TOPIC ``%DLQ%<group>``) first.
    * 5.3.3: dead-lettered when ``reconsume_times > max`` or when the group holds a lock that
      has not expired (``RebalanceLockManager#isLockAllExpired`` is false: an orderly consumer);
      DELAY=-1 is put into the client's map, so the copy goes to the DLQ at once.

    ``dialect`` is the RocketMQ version the store or server emulates (``StoreConfig.dialect``).
    """
    if dialect.startswith("5"):
        to_dlq = reconsume_times > max_reconsume_times or group_locked
    else:
        to_dlq = reconsume_times >= max_reconsume_times
    if not to_dlq:
        return RetrySendDecision(retry_topic(group), None, False)
    if dialect.startswith("5"):
        props[PROPERTY_DELAY_TIME_LEVEL] = "-1"
    # nextInt(99999999) % DLQ_NUMS_PER_GROUP (one DLQ queue: always 0)
    return RetrySendDecision(dlq_topic(group), 0, True)


def rewrite_for_schedule(
    props: dict[str, str], *, topic: str, queue_id: int, max_delay_level: int
) -> tuple[str, int]:
    """``CommitLog#asyncPutMessage`` for a message with DELAY > 0: clamp the level, back up the
    real topic and queue, return ``(SCHEDULE_TOPIC_XXXX, level - 1)``."""
    level = delay_level_of(props)
    if level > max_delay_level:
        level = max_delay_level
        props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    props[PROPERTY_REAL_TOPIC] = topic
    props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    return SCHEDULE_TOPIC, delay_level_to_queue_id(level)


@dataclass(frozen=True, slots=True)
class TimeUp:
    """What ``ScheduleMessageService#messageTimeup`` makes of a due schedule record.

    ``properties`` is the map as encoded: taken *before* DELAY is cleared, so DELAY, REAL_TOPIC
    and REAL_QID stay on the delivered record (as the real stores show).
    """

    topic: str
    queue_id: int
    properties: dict[str, str]
    tags_code: int


def message_timeup(props: dict[str, str]) -> TimeUp:
    """The delivered copy of a schedule record whose decoded properties are ``props``."""
    real_topic = props.get(PROPERTY_REAL_TOPIC)
    real_qid = props.get(PROPERTY_REAL_QUEUE_ID)
    if real_topic is None or real_qid is None:
        raise BrokerRuleError("schedule record without REAL_TOPIC/REAL_QID")
    return TimeUp(real_topic, int(real_qid), dict(props), tags_code(props.get(PROPERTY_TAGS)))
