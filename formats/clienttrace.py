"""Client trace records: what producers and consumers with message trace on report about each
message, stored as the bodies of messages in ``RMQ_SYS_TRACE_TOPIC`` (or the topic the client
names with ``customizedTraceTopic``).

Mirrors ``org.apache.rocketmq.client.trace.TraceDataEncoder`` (4.9.7 and 5.3.3): a body is a
list of contexts, each ended by ``FIELD_SPLITOR`` (``\\x02``), its fields split by
``CONTENT_SPLITOR`` (``\\x01``). Field order per type:

* ``Pub``: type, timestamp, regionId, groupName, topic, msgId, tags, keys, storeHost,
  bodyLength, costTime, msgType (``MessageType`` ordinal), [offsetMsgId], success,
  [clientHost];
* ``SubBefore``: type, timestamp, regionId, groupName, requestId, msgId, retryTimes, keys;
* ``SubAfter``: type, requestId, msgId, costTime, success, keys, [contextCode
  (``ConsumeReturnType`` ordinal), [timestamp, [groupName]]];
* ``EndTransaction``: type, timestamp, regionId, groupName, topic, msgId, tags, keys,
  storeHost, msgType, transactionId, transactionState (``LocalTransactionState`` name),
  fromTransactionCheck.

The trace message's ``KEYS`` hold every traced msgId (and the messages' keys), so the index
finds a message's trace records by its id. Types this module does not know are kept with their
raw fields (clients of other languages add their own).
"""

from __future__ import annotations

from dataclasses import dataclass

from mqtool.formats.errors import BadFieldError
from mqtool.formats.rules import TRACE_TOPIC

__all__ = [
    "CONSUME_RETURN_TYPES",
    "CONTENT_SPLITOR",
    "FIELD_SPLITOR",
    "MESSAGE_TYPES",
    "TRACE_TOPIC",
    "TraceContext",
    "parse_trace_body",
]

CONTENT_SPLITOR = "\x01"  # TraceConstants.CONTENT_SPLITOR
FIELD_SPLITOR = "\x02"  # TraceConstants.FIELD_SPLITOR
MESSAGE_TYPES = ("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg")
"""``org.apache.rocketmq.common.message.MessageType`` in declaration order (ordinals)."""
CONSUME_RETURN_TYPES = ("SUCCESS", "TIME_OUT", "EXCEPTION", "RETURNNULL", "FAILED")
"""``org.apache.rocketmq.client.consumer.listener.ConsumeReturnType`` (ordinals)."""

_MIN_FIELDS = {"Pub": 13, "SubBefore": 8, "SubAfter": 6, "EndTransaction": 13}


@dataclass(frozen=True, slots=True)
class TraceContext:
    """One traced event of one message. ``timestamp`` is the client's clock (epoch ms; None for
    a ``SubAfter`` of a client that does not write it); ``cost_ms`` how long the send or the
    consume call took; ``success`` its outcome; ``detail`` what is particular to the type
    (storeHost, bodyLength, msgType, offsetMsgId, clientHost for ``Pub``; requestId and
    retryTimes for consumes; transactionId, transactionState and fromTransactionCheck for
    ``EndTransaction``; ``contextCode`` as a ``ConsumeReturnType`` name for ``SubAfter``)."""

    type: str
    msg_id: str
    timestamp: int | None
    group: str
    topic: str
    keys: str
    tags: str
    cost_ms: int | None
    success: bool | None
    detail: tuple[tuple[str, str], ...]


class _Bad(ValueError):
    """A context that does not read as its type (said in words; the caller adds where)."""


def _int(fields: list[str], i: int, what: str) -> int:
    try:
        return int(fields[i])
    except ValueError:
        raise _Bad(f"{fields[0]} {what} {fields[i]!r} is not a number") from None


def _bool(value: str) -> bool:
    return value == "true"  # Boolean.parseBoolean: anything else is false


def _named(names: tuple[str, ...], ordinal: int) -> str:
    return names[ordinal] if 0 <= ordinal < len(names) else str(ordinal)


def _context(f: list[str]) -> TraceContext:
    kind = f[0]
    need = _MIN_FIELDS.get(kind)
    if need is None:
        return TraceContext(kind, "", None, "", "", "", "", None, None,
                            tuple((str(i), v) for i, v in enumerate(f[1:], 1)))
    if len(f) < need:
        raise _Bad(f"{kind} has {len(f)} fields, fewer than its {need}")
    if kind == "Pub":
        detail = [("storeHost", f[8]), ("bodyLength", f[9]),
                  ("msgType", _named(MESSAGE_TYPES, _int(f, 11, "msgType")))]
        if len(f) >= 14:
            detail.append(("offsetMsgId", f[12]))
        if len(f) >= 15:
            detail.append(("clientHost", f[14]))
        success = f[13] if len(f) >= 14 else f[12]
        return TraceContext(kind, f[5], _int(f, 1, "timestamp"), f[3], f[4], f[7], f[6],
                            _int(f, 10, "costTime"), _bool(success), tuple(detail))
    if kind == "SubBefore":
        return TraceContext(kind, f[5], _int(f, 1, "timestamp"), f[3], "", f[7], "", None, None,
                            (("requestId", f[4]), ("retryTimes", str(_int(f, 6, "retryTimes")))))
    if kind == "SubAfter":
        detail = [("requestId", f[1])]
        if len(f) >= 7:
            detail.append(("contextCode",
                           _named(CONSUME_RETURN_TYPES, _int(f, 6, "contextCode"))))
        ts = _int(f, 7, "timestamp") if len(f) >= 8 else None
        return TraceContext(kind, f[2], ts, f[8] if len(f) >= 9 else "", "", f[5], "",
                            _int(f, 3, "costTime"), _bool(f[4]), tuple(detail))
    return TraceContext(kind, f[5], _int(f, 1, "timestamp"), f[3], f[4], f[7], f[6], None, None,
                        (("storeHost", f[8]),
                         ("msgType", _named(MESSAGE_TYPES, _int(f, 9, "msgType"))),
                         ("transactionId", f[10]), ("transactionState", f[11]),
                         ("fromTransactionCheck", f[12])))


def parse_trace_body(body: bytes, *, file: str | None = None, offset: int | None = None,
                     phy: int | None = None, bad: list[BadFieldError] | None = None
                     ) -> list[TraceContext]:
    """Every context in one trace message's body, in the order the client wrote them.

    A context that does not read as its type is a :class:`BadFieldError` at ``file``/``offset``
    (the record's) naming the context by its index: raised, or, when ``bad`` is given, added
    to it while the other contexts are still read."""

    def fail(err: BadFieldError) -> None:
        if bad is None:
            raise err
        bad.append(err)

    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(BadFieldError(file, offset, f"trace body is not UTF-8 at byte {e.start}", phy=phy))
        text = body.decode("utf-8", "replace")
    out: list[TraceContext] = []
    for i, ctx in enumerate(text.split(FIELD_SPLITOR)):
        if not ctx:
            continue
        try:
            out.append(_context(ctx.split(CONTENT_SPLITOR)))
        except _Bad as e:
            fail(BadFieldError(file, offset, f"trace context {i}: {e}", phy=phy))
    return out
