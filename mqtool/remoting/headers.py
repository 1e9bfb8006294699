"""Request and response header models (``CommandCustomHeader`` classes of apache/rocketmq).

A header travels as ``extFields`` (string -> string). Clients send numbers and booleans as JSON
numbers/booleans or as strings (``PEERS.md``: the C++ client mixes both); :mod:`frame` turns
every value into a string and :func:`decode_header` parses each field to its Java type:
``Integer``/``Long`` with ``parseInt``/``parseLong`` range, ``Boolean`` as Java's
``Boolean.parseBoolean`` reads it: ``true`` in any case is true, anything else false. The C++
client sends ``"1"`` for ``batch``, so RocketMQ's broker takes its batches as one message whose
body is the encoded batch, and so does ``mqtool serve``. A required field
that is missing or malformed raises :class:`HeaderFieldError` (the request is answered with an
error, the connection stays). Unknown keys (``AccessKey``, ``Signature``, ...) are ignored.

Field names are the Java bean names, spelled as on the wire, so ``to_ext`` needs no mapping.
``SEND_MESSAGE_V2`` uses one-letter names (``SendMessageRequestHeaderV2``: a..n); see
:func:`send_header_from_v2` / :func:`send_header_to_v2`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from mqtool.remoting.frame import HeaderFieldError

_INT = (-(2**31), 2**31 - 1)
_LONG = (-(2**63), 2**63 - 1)


def _f(kind: str, *, required: bool = True, default: Any = None) -> Any:
    """A header field: ``kind`` is ``str``, ``int`` (Java Integer), ``long`` or ``bool``."""
    meta = {"kind": kind, "required": required}
    return field(default=default, metadata=meta)


def _parse(kind: str, name: str, raw: str) -> Any:
    if kind == "str":
        return raw
    if kind == "bool":  # Boolean.parseBoolean: never an error
        return raw.lower() == "true"
    lo, hi = _INT if kind == "int" else _LONG
    try:
        value = int(raw.strip())
    except ValueError:
        raise HeaderFieldError(f"header field {name}: {raw!r} is not an integer") from None
    if not lo <= value <= hi:
        raise HeaderFieldError(f"header field {name}: {raw} out of range for a Java {kind}")
    return value


class Header:
    """Base of every header model."""

    _cache: ClassVar[dict[type, tuple[tuple[str, str, bool], ...]]] = {}

    @classmethod
    def _spec(cls) -> tuple[tuple[str, str, bool], ...]:
        spec = Header._cache.get(cls)
        if spec is None:
            spec = tuple(
                (f.name, f.metadata["kind"], f.metadata["required"])
                for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            )
            Header._cache[cls] = spec
        return spec

    def to_ext(self) -> dict[str, str]:
        """The extFields (None omitted, booleans as ``true``/``false``)."""
        out: dict[str, str] = {}
        for name, _kind, _req in self._spec():
            v = getattr(self, name)
            if v is None:
                continue
            out[name] = ("true" if v else "false") if isinstance(v, bool) else str(v)
        return out


H = TypeVar("H", bound=Header)


def decode_header(cls: type[H], ext: dict[str, str],
                  wire_names: dict[str, str] | None = None) -> H:
    """Parse ``ext`` into ``cls`` (HeaderFieldError names the bad field as it is spelled on
    the wire). ``wire_names`` maps a field's name to the key it travels under, where that is
    not the field's own name (the one-letter keys of ``SEND_MESSAGE_V2``)."""
    kwargs: dict[str, Any] = {}
    for name, kind, required in cls._spec():
        key = wire_names[name] if wire_names is not None else name
        raw = ext.get(key)
        if raw is None:
            if required:
                raise HeaderFieldError(f"the custom field <{key}> is null")
            continue
        kwargs[name] = raw if kind == "str" else _parse(kind, key, raw)
    return cls(**kwargs)


# -- name server -------------------------------------------------------------------------------


@dataclass
class GetRouteInfoRequestHeader(Header):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: str = _f("str")


# -- sending -----------------------------------------------------------------------------------


@dataclass
class SendMessageRequestHeader(Header):
    """SEND_MESSAGE (10) and SEND_BATCH_MESSAGE (320); V2 (310) maps onto it."""

    producerGroup: str = _f("str")
    topic: str = _f("str")
    defaultTopic: str = _f("str")
    defaultTopicQueueNums: int = _f("int")
    queueId: int = _f("int")
    sysFlag: int = _f("int")
    bornTimestamp: int = _f("long")
    flag: int = _f("int")
    properties: str | None = _f("str", required=False)
    reconsumeTimes: int | None = _f("int", required=False)
    unitMode: bool | None = _f("bool", required=False)
    batch: bool | None = _f("bool", required=False)
    maxReconsumeTimes: int | None = _f("int", required=False)
    brokerName: str | None = _f("str", required=False)


#: ``SendMessageRequestHeaderV2`` letters -> V1 names (``createSendMessageRequestHeaderV1``).
V2_FIELDS = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "brokerName",
}
V1_TO_V2 = {v: k for k, v in V2_FIELDS.items()}


def send_header_from_v2(ext: dict[str, str]) -> SendMessageRequestHeader:
    """Parse a SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE header (one-letter names); a missing
    or malformed field is named by its letter, as the broker names it."""
    return decode_header(SendMessageRequestHeader, ext, V1_TO_V2)


def send_header_to_v2(h: SendMessageRequestHeader) -> dict[str, str]:
    """The one-letter extFields of SEND_MESSAGE_V2."""
    return {V1_TO_V2[k]: v for k, v in h.to_ext().items()}


@dataclass
class SendMessageResponseHeader(Header):
    """Answer to 10/310/320: the stored message id (offset msg id) and where it went."""

    msgId: str = _f("str")
    queueId: int = _f("int")
    queueOffset: int = _f("long")
    transactionId: str | None = _f("str", required=False)


# -- administration --------------------------------------------------------------------------


@dataclass
class ResetOffsetRequestHeader(Header):
    """INVOKE_BROKER_TO_RESET_OFFSET (222, ``mqadmin resetOffsetByTime``,
    ``skipAccumulatedMessage``) and RESET_CONSUMER_CLIENT_OFFSET (220, to each consumer)."""

    topic: str = _f("str")
    group: str = _f("str")
    timestamp: int = _f("long")
    isForce: bool | None = _f("bool", required=False)


@dataclass
class DeleteSubscriptionGroupRequestHeader(Header):
    """DELETE_SUBSCRIPTIONGROUP (207, ``mqadmin deleteSubGroup``)."""

    groupName: str = _f("str")
    removeOffset: bool | None = _f("bool", required=False)


@dataclass
class CreateTopicRequestHeader(Header):
    """UPDATE_AND_CREATE_TOPIC (17, ``mqadmin updateTopic``)."""

    topic: str = _f("str")
    defaultTopic: str = _f("str")
    readQueueNums: int = _f("int")
    writeQueueNums: int = _f("int")
    perm: int = _f("int")
    topicFilterType: str = _f("str")
    topicSysFlag: int | None = _f("int", required=False)
    order: bool = _f("bool", required=False, default=False)


# -- transactions ----------------------------------------------------------------------------


@dataclass
class EndTransactionRequestHeader(Header):
    """END_TRANSACTION (37, oneway): ``commitOrRollback`` is the sysFlag transaction type
    (0 unknown, 8 commit, 12 rollback)."""

    producerGroup: str = _f("str")
    tranStateTableOffset: int = _f("long")
    commitLogOffset: int = _f("long")
    commitOrRollback: int = _f("int")
    msgId: str = _f("str")
    fromTransactionCheck: bool | None = _f("bool", required=False)
    transactionId: str | None = _f("str", required=False)


@dataclass
class CheckTransactionStateRequestHeader(Header):
    """CHECK_TRANSACTION_STATE (39), broker to producer: the half message to decide on."""

    tranStateTableOffset: int = _f("long")
    commitLogOffset: int = _f("long")
    msgId: str | None = _f("str", required=False)
    transactionId: str | None = _f("str", required=False)
    offsetMsgId: str | None = _f("str", required=False)


# -- clients -----------------------------------------------------------------------------------


@dataclass
class UnregisterClientRequestHeader(Header):
    """UNREGISTER_CLIENT (35)."""

    clientID: str = _f("str")
    producerGroup: str | None = _f("str", required=False)
    consumerGroup: str | None = _f("str", required=False)


@dataclass
class GetConsumerListByGroupRequestHeader(Header):
    """GET_CONSUMER_LIST_BY_GROUP (38)."""

    consumerGroup: str = _f("str")


# -- offsets -----------------------------------------------------------------------------------


@dataclass
class QueryConsumerOffsetRequestHeader(Header):
    """QUERY_CONSUMER_OFFSET (14)."""

    consumerGroup: str = _f("str")
    topic: str = _f("str")
    queueId: int = _f("int")


@dataclass
class UpdateConsumerOffsetRequestHeader(Header):
    """UPDATE_CONSUMER_OFFSET (15)."""

    consumerGroup: str = _f("str")
    topic: str = _f("str")
    queueId: int = _f("int")
    commitOffset: int = _f("long")


@dataclass
class SearchOffsetRequestHeader(Header):
    """SEARCH_OFFSET_BY_TIMESTAMP (29)."""

    topic: str = _f("str")
    queueId: int = _f("int")
    timestamp: int = _f("long")


@dataclass
class GetMaxOffsetRequestHeader(Header):
    """GET_MAX_OFFSET (30)."""

    topic: str = _f("str")
    queueId: int = _f("int")


@dataclass
class GetMinOffsetRequestHeader(Header):
    """GET_MIN_OFFSET (31)."""

    topic: str = _f("str")
    queueId: int = _f("int")


@dataclass
class OffsetResponseHeader(Header):
    """Answer to 14, 29, 30, 31: one ``offset``."""

    offset: int = _f("long")


# -- pulling -----------------------------------------------------------------------------------

#: PullSysFlag bits.
PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
PULL_FLAG_CLASS_FILTER = 0x8


@dataclass
class PullMessageRequestHeader(Header):
    """PULL_MESSAGE (11)."""

    consumerGroup: str = _f("str")
    topic: str = _f("str")
    queueId: int = _f("int")
    queueOffset: int = _f("long")
    maxMsgNums: int = _f("int")
    sysFlag: int = _f("int")
    commitOffset: int = _f("long")
    suspendTimeoutMillis: int = _f("long")
    subscription: str | None = _f("str", required=False)
    subVersion: int = _f("long")
    expressionType: str | None = _f("str", required=False)


@dataclass
class PullMessageResponseHeader(Header):
    """Answer to 11."""

    suggestWhichBrokerId: int = _f("long")
    nextBeginOffset: int = _f("long")
    minOffset: int = _f("long")
    maxOffset: int = _f("long")


# -- retry -------------------------------------------------------------------------------------


@dataclass
class ConsumerSendMsgBackRequestHeader(Header):
    """CONSUMER_SEND_MSG_BACK (36); ``offset`` is the commitlog offset of the failed message."""

    offset: int = _f("long")
    group: str = _f("str")
    delayLevel: int = _f("int")
    originMsgId: str | None = _f("str", required=False)
    originTopic: str | None = _f("str", required=False)
    unitMode: bool | None = _f("bool", required=False)
    maxReconsumeTimes: int | None = _f("int", required=False)


# -- queries -----------------------------------------------------------------------------------


@dataclass
class QueryMessageRequestHeader(Header):
    """QUERY_MESSAGE (12): by key through the index."""

    topic: str = _f("str")
    key: str = _f("str")
    maxNum: int = _f("int")
    beginTimestamp: int = _f("long")
    endTimestamp: int = _f("long")


@dataclass
class QueryMessageResponseHeader(Header):
    """Answer to 12."""

    indexLastUpdateTimestamp: int = _f("long")
    indexLastUpdatePhyoffset: int = _f("long")


@dataclass
class ViewMessageRequestHeader(Header):
    """VIEW_MESSAGE_BY_ID (33): ``offset`` is the commitlog offset from the offset msg id."""

    offset: int = _f("long")
