"""The broker's naming and rules, in one place (RocketMQ 4.9.x / 5.x semantics).

Everything a reader or writer of a store needs to *name* things the way the broker does lives
here and nowhere else:

* topic names and kinds: ``%RETRY%<group>`` and ``%DLQ%<group>`` (``MixAll``),
  ``SCHEDULE_TOPIC_XXXX``, ``rmq_sys_wheel_timer``, the transaction half/op topics and the other
  system topics (``TopicValidator``);
* which topic and group names the broker accepts (``TopicValidator#validateTopic``,
  ``isNotAllowedSendTopic``, the group rule of ``Validators#checkGroup``) and which names a store
  can hold as a directory or config key (:func:`store_name_refusal`);
* message property names (``MessageConst``);
* delay levels: the ``messageDelayLevel`` string, its parsing
  (``ScheduleMessageService#parseDelayLevel``), level <-> SCHEDULE queue id, and
  :func:`fmt_delay` to print a delay the way the string writes it;
* the max-reconsume default (``SubscriptionGroupConfig.retryMaxTimes``);
* tagsCode rules (``MessageExtBrokerInner#tagsString2tagsCode``, ``ConsumeQueueExt`` addresses).

Pure functions and constants only; imports nothing of the project but ``formats``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, overload

from mqtool.formats.errors import FormatError, MqtoolError
from mqtool.formats.javacompat import java_string_hash

if TYPE_CHECKING:
    import numpy as np
    from pyspark.sql import Column

# --- topics (MixAll, TopicValidator, TransactionalMessageUtil) -------------------------------
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"  # MixAll.DLQ_GROUP_TOPIC_PREFIX
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
TIMER_TOPIC = "rmq_sys_wheel_timer"  # TimerMessageStore.TIMER_TOPIC
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"  # TransactionalMessageUtil.buildHalfTopic()
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"  # TransactionalMessageUtil.buildOpTopic()
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"  # TopicValidator: discarded halves
TRANS_OP_REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVETAG: the tag of every op record
TRANS_OP_OFFSET_SEPARATOR = ","  # 5.x op body: half queue offsets, each followed by ","
TRANS_CHECK_GROUP = "CID_RMQ_SYS_TRANS"  # MixAll.CID_SYS_RMQ_TRANS: the check service's offsets
TRANS_CHECK_MAX_TIME_QUEUE_NUMS = 1  # AbstractTransactionalMessageCheckListener.TCMT_QUEUE_NUMS
AUTO_CREATE_TOPIC = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"  # TopicValidator.RMQ_SYS_SELF_TEST_TOPIC
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"  # TopicValidator.RMQ_SYS_TRACE_TOPIC (client trace records)
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"  # TopicValidator.RMQ_SYS_OFFSET_MOVED_EVENT
SYSTEM_TOPIC_PREFIXES = ("rmq_sys_", "RMQ_SYS_")
DLQ_NUMS_PER_GROUP = 1  # MixAll / SubscriptionGroupConfig: one DLQ queue per group
TOPIC_KINDS = ("normal", "retry", "dlq", "schedule", "timer", "system")


def topic_kind(topic: str) -> str:
    """``normal``, ``retry``, ``dlq``, ``schedule``, ``timer`` or ``system``."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "retry"
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "dlq"
    if topic == SCHEDULE_TOPIC:
        return "schedule"
    if topic == TIMER_TOPIC:
        return "timer"
    if topic.startswith(SYSTEM_TOPIC_PREFIXES) or topic in (AUTO_CREATE_TOPIC, SELF_TEST_TOPIC):
        return "system"
    return "normal"


def is_system_topic(topic: str) -> bool:
    """A topic no user produces to: ``%...%`` group topics, ``rmq_sys_*``/``RMQ_SYS_*`` and
    ``SCHEDULE_TOPIC_XXXX``."""
    return topic.startswith(("%",) + SYSTEM_TOPIC_PREFIXES) or topic == SCHEDULE_TOPIC


# --- names the broker accepts (TopicValidator, Validators) ----------------------------------
TOPIC_MAX_LENGTH = 127  # TopicValidator.TOPIC_MAX_LENGTH (4.9.7 and 5.3.3)
GROUP_MAX_LENGTH = 255  # Validators.CHARACTER_MAX_LENGTH
NAME_MAX_BYTES = 255  # a file name's limit (NAME_MAX): a topic is a consume-queue directory
NAME_PATTERN = "^[%|a-zA-Z0-9_-]+$"  # TopicValidator.VALID_CHAR_BIT_MAP, as its remarks write it
NOT_ALLOWED_SEND_TOPICS = frozenset({
    SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
    SELF_TEST_TOPIC, OFFSET_MOVED_EVENT,
})
"""``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`` (the same in 4.9.7 and 5.3.3)."""

SYSTEM_TOPICS = NOT_ALLOWED_SEND_TOPICS | {
    AUTO_CREATE_TOPIC, "BenchmarkTest", TRACE_TOPIC,
}
"""``TopicValidator.SYSTEM_TOPIC_SET`` (the same in 4.9.7 and 5.3.3), without the cluster's
and brokers' own names the broker adds at start."""


def is_validator_system_topic(topic: str) -> bool:
    """``TopicValidator#isSystemTopic``: a topic ``mqadmin updateTopic`` may not change (unlike
    :func:`is_system_topic`, ``%RETRY%``/``%DLQ%`` topics are not system topics here)."""
    return topic in SYSTEM_TOPICS or topic.startswith("rmq_sys_")


_LEGAL_NAME = re.compile(r"[%|a-zA-Z0-9_-]*\Z")
#: Characters Python's ``str.isspace`` counts and Java's ``Character.isWhitespace`` does not.
_NOT_JAVA_WHITESPACE = frozenset("\u0085\u00a0\u2007\u202f")


def _java_blank(text: str) -> bool:
    """``UtilAll.isBlank``: empty or every char ``Character.isWhitespace``."""
    return all(c.isspace() and c not in _NOT_JAVA_WHITESPACE for c in text)


def is_name_illegal(name: str) -> bool:
    """``TopicValidator#isTopicOrGroupIllegal``: a char outside ``[%|a-zA-Z0-9_-]`` (the empty
    name is not illegal: blank is a separate check)."""
    return _LEGAL_NAME.match(name) is None


def topic_refusal(topic: str) -> str | None:
    """``TopicValidator#validateTopic``: the broker's remark for a topic it refuses (blank,
    illegal characters, longer than 127), None for a valid one. The broker answers it with
    SYSTEM_ERROR in 4.9.7, INVALID_PARAMETER in 5.3.3."""
    if _java_blank(topic):
        return "The specified topic is blank."
    if is_name_illegal(topic):
        return f"The specified topic contains illegal characters, allowing only {NAME_PATTERN}"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def is_not_allowed_send_topic(topic: str) -> bool:
    """``TopicValidator#isNotAllowedSendTopic``: a system topic no client may send to."""
    return topic in NOT_ALLOWED_SEND_TOPICS


def not_allowed_send_remark(topic: str) -> str:
    """The broker's remark (NO_PERMISSION) for a send to a not-allowed topic."""
    return f"Sending message to topic[{topic}] is forbidden."


def group_refusal(group: str) -> str | None:
    """``Validators#checkGroup``: why a group name is refused (blank, longer than 255, illegal
    characters), None for a valid one. 5.3.3's broker refuses such a group as not existing
    (``SubscriptionGroupManager#findSubscriptionGroupConfig``)."""
    if _java_blank(group):
        return "the specified group is blank"
    if len(group) > GROUP_MAX_LENGTH:
        return f"the specified group is longer than group max length {GROUP_MAX_LENGTH}."
    if is_name_illegal(group):
        return (f"the specified group[{group}] contains illegal characters, allowing only "
                f"{NAME_PATTERN}")
    return None


def store_name_refusal(kind: str, name: str) -> str | None:
    """Why a store cannot hold ``name`` (a ``topic`` or a ``group``) as a directory or a config
    key, None when it can: the broker's characters (no path separator or dot, so never a path
    outside the store, and no ``@`` of a ``topic@group`` offset key), not empty, at most 255
    characters (a file name's limit, which a ``%RETRY%<group>`` topic also meets). A 5.x POP
    retry topic ``%RETRY%<group>+<topic>`` (``enableRetryTopicV2``), which the broker makes and
    writes itself, holds one ``+``."""
    if not name:
        return f"the {kind} name is empty"
    pop_v2 = (kind == "topic" and name.startswith(RETRY_GROUP_TOPIC_PREFIX)
              and name.count("+") == 1)  # KeyBuilder.POP_RETRY_SEPARATOR_V2
    if is_name_illegal(name.replace("+", "_") if pop_v2 else name):
        return f"the {kind} name {name[:64]!r} has characters outside {NAME_PATTERN}"
    if len(name) > NAME_MAX_BYTES:
        return f"the {kind} name of {len(name)} characters is longer than {NAME_MAX_BYTES}"
    return None


def retry_topic(group: str) -> str:
    """``MixAll.getRetryTopic``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``MixAll.getDLQTopic``."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def group_of(topic: str) -> str | None:
    """The consumer group of a ``%RETRY%<group>`` or ``%DLQ%<group>`` topic, else None."""
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if topic.startswith(prefix):
            return topic[len(prefix):]
    return None


# --- transactions (MessageSysFlag; dispatch: CommitLogDispatcherBuildConsumeQueue, IndexService) -
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
TRANSACTION_TYPE_MASK = TRANSACTION_ROLLBACK_TYPE  # the two type bits of sysFlag (0xC)
NOT_IN_CONSUME_QUEUE = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
"""Transaction types whose records never get a consume-queue unit (and keep queue offset 0:
``CommitLog#doAppend``)."""


def gets_cq_unit(sys_flag: int) -> bool:
    """``CommitLogDispatcherBuildConsumeQueue#dispatch``: NOT_TYPE and COMMIT_TYPE records get a
    consume-queue unit, PREPARED and ROLLBACK records none."""
    return (sys_flag & TRANSACTION_TYPE_MASK) not in NOT_IN_CONSUME_QUEUE


def is_indexed(sys_flag: int) -> bool:
    """``IndexService#buildIndex``: every transaction type but ROLLBACK is indexed."""
    return (sys_flag & TRANSACTION_TYPE_MASK) != TRANSACTION_ROLLBACK_TYPE


# --- message properties (MessageConst) -------------------------------------------------------
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_MSG_REGION = "MSG_REGION"  # the broker's regionId (5.x: on every stored message)
PROPERTY_TRACE_SWITCH = "TRACE_ON"  # the broker's traceOn (5.x: on every stored message)
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"  # "true" on a transactional message (client)
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_TRANSACTION_ID = "__transactionId__"  # 5.x TransactionalMessageUtil.TRANSACTION_ID
KEY_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR (KEYS holds several keys)
PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"  # the LMQ queues a record goes to
PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"  # its offset in each of them
LMQ_PREFIX = "%LMQ%"  # MixAll.LMQ_PREFIX: a Light Message Queue's topic (one queue, id 0)
LMQ_QUEUE_ID = 0  # MixAll.LMQ_QUEUE_ID
LMQ_DISPATCH_SEPARATOR = ","  # MixAll.LMQ_DISPATCH_SEPARATOR


def is_lmq(topic: str) -> bool:
    """``MixAll.isLmq``: a Light Message Queue topic (``%LMQ%<name>``)."""
    return topic.startswith(LMQ_PREFIX)


def lmq_dispatch(properties: dict[str, str]) -> dict[str, int | None]:
    """The LMQ queues ``MultiDispatchUtils`` put a record's units in, with the queue offset
    the broker wrote for each (``INNER_MULTI_QUEUE_OFFSET``, same order; None where absent)."""
    names = properties.get(PROPERTY_INNER_MULTI_DISPATCH)
    if not names:
        return {}
    qs = names.split(LMQ_DISPATCH_SEPARATOR)
    offs = (properties.get(PROPERTY_INNER_MULTI_QUEUE_OFFSET) or "").split(LMQ_DISPATCH_SEPARATOR)
    out: dict[str, int | None] = {}
    for i, q in enumerate(qs):
        v = offs[i] if i < len(offs) else ""
        out[q] = int(v) if v.lstrip("-").isdigit() else None
    return out


def record_keys(properties: Mapping[str, str]) -> list[str]:
    """The keys ``IndexService#buildIndex`` indexes for one record, without their ``topic#``
    prefix: UNIQ_KEY, then every non-empty space-separated KEYS token."""
    out: list[str] = []
    uniq = properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq is not None:
        out.append(uniq)
    keys = properties.get(PROPERTY_KEYS)
    if keys:
        if KEY_SEPARATOR in keys:
            out += [k for k in keys.split(KEY_SEPARATOR) if k]
        else:  # one key
            out.append(keys)
    return out


def index_keys(topic: str, properties: Mapping[str, str]) -> list[str]:
    """Index keys ``IndexService#buildIndex`` adds for one record: :func:`record_keys`, each
    as ``topic#key``."""
    return [f"{topic}#{k}" for k in record_keys(properties)]


# --- delay levels (ScheduleMessageService) ---------------------------------------------------
DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
"""``MessageStoreConfig.messageDelayLevel`` default."""

_TIME_UNITS = {"s": 1000, "m": 1000 * 60, "h": 1000 * 60 * 60, "d": 1000 * 60 * 60 * 24}


class BrokerRuleError(MqtoolError):
    """Input the broker itself would reject (bad delay level string, unknown group, ...)."""


def java_split_space(text: str) -> list[str]:
    """Java's ``String.split(" ")``: trailing empty strings are dropped (leading and inner ones
    stay); a string with no space is one element, the empty string included."""
    parts = text.split(" ")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


_JAVA_LONG = re.compile(r"[+-]?[0-9]+\Z")


def parse_delay_levels(level_string: str = DEFAULT_MESSAGE_DELAY_LEVEL) -> dict[int, int]:
    """``ScheduleMessageService#parseDelayLevel``: ``{level (1-based): delay ms}``.

    The string is split as Java's ``split(" ")`` does (a trailing space is harmless, two spaces
    in a row make an empty level); each level is a ``Long.parseLong`` number followed by a unit
    ``s``, ``m``, ``h`` or ``d``. A level the broker could not parse raises BrokerRuleError (the
    broker's ``load()`` fails and it does not start).
    """
    table: dict[int, int] = {}
    for i, value in enumerate(java_split_space(level_string)):
        unit = _TIME_UNITS.get(value[-1:]) if value else None
        if unit is None or not _JAVA_LONG.match(value[:-1]):
            raise BrokerRuleError(f"bad delay level {i + 1} {value!r} in {level_string!r}")
        table[i + 1] = int(value[:-1]) * unit
    return table


def level_string(table: dict[int, int]) -> str:
    """The ``messageDelayLevel`` string of a ``{level: delay ms}`` table (levels 1..n, no gaps;
    the inverse of :func:`parse_delay_levels` for delays in whole units)."""
    if sorted(table) != list(range(1, len(table) + 1)):
        raise BrokerRuleError(f"delay levels {sorted(table)} are not 1..{len(table)}")
    return " ".join(fmt_delay(table[i]) for i in range(1, len(table) + 1))


def fmt_delay(ms: int) -> str:
    """A delay as ``messageDelayLevel`` writes it: the largest whole unit (``2h``, ``30s``),
    ``ms`` when no unit divides it."""
    for unit, size in (("d", _TIME_UNITS["d"]), ("h", _TIME_UNITS["h"]),
                       ("m", _TIME_UNITS["m"]), ("s", _TIME_UNITS["s"])):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def delay_level_to_queue_id(level: int) -> int:
    """``ScheduleMessageService#delayLevel2QueueId``."""
    return level - 1


def queue_id_to_delay_level(queue_id: int) -> int:
    """``ScheduleMessageService#queueId2DelayLevel``."""
    return queue_id + 1


@overload
def schedule_unit_delay(tags_code: int, store_timestamp: int) -> int: ...


@overload
def schedule_unit_delay(tags_code: np.ndarray, store_timestamp: np.ndarray) -> np.ndarray: ...


@overload
def schedule_unit_delay(tags_code: Column, store_timestamp: Column) -> Column: ...


def schedule_unit_delay(tags_code: int | np.ndarray | Column,
                        store_timestamp: int | np.ndarray | Column) -> int | np.ndarray | Column:
    """The delay a ``SCHEDULE_TOPIC_XXXX`` consume-queue unit was written with.

    ``CommitLog#checkMessageAndReturnSize`` sets such a unit's tagsCode to
    ``ScheduleMessageService#computeDeliverTimestamp(level, storeTimestamp)`` = the record's
    storeTimestamp + the level's delay, so tagsCode - storeTimestamp is the delay the broker had
    for level ``queueId + 1`` when it dispatched the unit (the store's evidence of its levels).
    """
    return tags_code - store_timestamp


DELAY_UNIT_MS = _TIME_UNITS["s"]
"""A delay level's unit: every delay a broker writes is a whole number of these."""
SCHEDULE_DELAY_MAX_MS = 3650 * _TIME_UNITS["d"]
"""The longest delay taken for one a broker wrote (ten years); see :func:`delay_written`."""


@overload
def delay_written(delay_ms: int) -> bool: ...


@overload
def delay_written(delay_ms: np.ndarray) -> np.ndarray: ...


@overload
def delay_written(delay_ms: Column) -> Column: ...


def delay_written(delay_ms: int | np.ndarray | Column) -> bool | np.ndarray | Column:
    """Whether ``delay_ms`` (:func:`schedule_unit_delay`) can be a delay a broker wrote (for
    a numpy array or a Spark column of delays, elementwise).

    ``parseDelayLevel``'s units are whole seconds (``s``, ``m``, ``h``, ``d``) and
    ``computeDeliverTimestamp`` gives a level outside the table 1000 ms, so every delay a
    broker writes is a whole number of seconds; no operator sets a level of more than ten years.
    Anything else comes from a damaged tagsCode or storeTimestamp (such damage gives delays
    like 7,143,517,753,971,253,763 ms), not from the broker's ``messageDelayLevel``."""
    d: Any = delay_ms  # one expression for the three kinds (the overloads type each)
    whole = d % DELAY_UNIT_MS == 0
    near = (d <= SCHEDULE_DELAY_MAX_MS) & (d >= -SCHEDULE_DELAY_MAX_MS)
    written: bool | np.ndarray | Column = whole & near  # elementwise for an array or a column
    return written


# --- reconsume / send-back (SubscriptionGroupConfig, SendMessageProcessor) ------------------
DEFAULT_MAX_RECONSUME_TIMES = 16  # SubscriptionGroupConfig.retryMaxTimes
SEND_BACK_BASE_DELAY_LEVEL = 3  # asyncConsumerSendMsgBack: DELAY = 3 + reconsumeTimes


# --- tagsCode (MessageExtBrokerInner, ConsumeQueueExt) ---------------------------------------
LONG_MIN_VALUE = -(2**63)
MAX_ADDR = -(2**31) - 1  # ConsumeQueueExt.MAX_ADDR = Integer.MIN_VALUE - 1L


def tags_code_of(tags: str | None) -> int:
    """``MessageExtBrokerInner#tagsString2tagsCode``: Java hashCode of the tag, 0 without."""
    return java_string_hash(tags) if tags else 0


MAX_REAL_OFFSET = MAX_ADDR - LONG_MIN_VALUE


def is_ext_addr(address: int) -> bool:
    """``ConsumeQueueExt#isExtAddr``: a tagsCode at or below MAX_ADDR is an ext address."""
    return address <= MAX_ADDR


def undecorate(address: int) -> int:
    """``ConsumeQueueExt#unDecorate``: ext address -> byte offset in the ext queue."""
    return address - LONG_MIN_VALUE if is_ext_addr(address) else address


def decorate(offset: int) -> int:
    """``ConsumeQueueExt#decorate``: byte offset in the ext queue -> ext address."""
    if not 0 <= offset <= MAX_REAL_OFFSET:
        raise FormatError(None, None, f"ext offset {offset} outside 0..{MAX_REAL_OFFSET}")
    return offset + LONG_MIN_VALUE
