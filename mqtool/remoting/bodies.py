"""Request and response bodies (``RemotingSerializable`` JSON, and the batch message layout).

JSON bodies mirror apache/rocketmq classes: ``HeartbeatData`` (with ``ConsumerData``,
``ProducerData``, ``SubscriptionData``), ``TopicRouteData`` (``BrokerData``, ``QueueData``),
``ClusterInfo``, ``TopicList``, ``GetConsumerListByGroupResponseBody``,
``LockBatchRequestBody`` / ``UnlockBatchRequestBody`` / ``LockBatchResponseBody``.
Enums arrive as numbers (C++ client) or names (Java/JS clients); both are kept as sent.

A batch send body is ``MessageDecoder.encodeMessages``: per message ``int32 totalSize,
int32 magic (0), int32 bodyCRC, int32 flag, int32 bodyLen + body, int16 propertiesLen +
properties``. :func:`decode_batch` checks every length against the buffer.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mqtool.remoting.frame import HeaderFieldError, RemotingError


class BodyError(RemotingError):
    """A request body that does not parse (answered with an error, connection kept)."""


def json_body(obj: object) -> bytes:
    """A compact UTF-8 JSON body."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_json_body(body: bytes, what: str) -> dict[str, Any]:
    """A JSON object body (trailing newline allowed)."""
    try:
        obj = json.loads(body.decode("utf-8")) if body else {}
    except (UnicodeDecodeError, ValueError) as e:
        raise BodyError(f"{what} body is not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise BodyError(f"{what} body is a {type(obj).__name__}, not an object")
    return obj


# -- heartbeat ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subscription:
    """``SubscriptionData``: topic and expression (``TAG``, or ``SQL92`` with the broker's
    ``enablePropertyFilter``)."""

    topic: str
    sub_string: str = "*"
    tags: tuple[str, ...] = ()
    expression_type: str = "TAG"


@dataclass(frozen=True)
class ConsumerData:
    """``ConsumerData`` (group, how it consumes, what it subscribes)."""

    group: str
    consume_type: str = ""
    message_model: str = ""
    consume_from_where: str = ""
    subscriptions: tuple[Subscription, ...] = ()


@dataclass(frozen=True)
class HeartbeatData:
    """``HeartbeatData`` sent with HEART_BEAT (34)."""

    client_id: str
    producer_groups: tuple[str, ...] = ()
    consumers: tuple[ConsumerData, ...] = field(default_factory=tuple)


def _s(v: object) -> str:
    return "" if v is None else str(v)


def parse_heartbeat(body: bytes) -> HeartbeatData:
    """Parse a HEART_BEAT body."""
    obj = parse_json_body(body, "heartbeat")
    client = obj.get("clientID")
    if not isinstance(client, str):
        raise BodyError("heartbeat body has no clientID")
    try:
        producers = tuple(
            str(p["groupName"]) for p in obj.get("producerDataSet") or () if isinstance(p, dict)
        )
        consumers = []
        for c in obj.get("consumerDataSet") or ():
            subs = tuple(_subscription(s) for s in c.get("subscriptionDataSet") or ())
            consumers.append(
                ConsumerData(
                    str(c["groupName"]),
                    _s(c.get("consumeType")),
                    _s(c.get("messageModel")),
                    _s(c.get("consumeFromWhere")),
                    subs,
                )
            )
    except (KeyError, TypeError, AttributeError) as e:
        raise BodyError(f"heartbeat body: malformed producer/consumer data ({e})") from None
    return HeartbeatData(client, producers, tuple(consumers))


def _subscription(s: dict[str, Any]) -> Subscription:
    return Subscription(str(s.get("topic", "")), _s(s.get("subString", "*")) or "*",
                        tuple(str(t) for t in s.get("tagsSet") or ()),
                        _s(s.get("expressionType")) or "TAG")


def parse_check_client(body: bytes) -> tuple[str, Subscription | None]:
    """A CHECK_CLIENT_CONFIG body (``CheckClientRequestBody``): the group and the subscription
    the client asks the broker to check."""
    obj = parse_json_body(body, "check client config")
    sub = obj.get("subscriptionData")
    try:
        return str(obj.get("group") or ""), _subscription(sub) if isinstance(sub, dict) else None
    except (TypeError, AttributeError) as e:
        raise BodyError(f"check client config body: malformed subscription ({e})") from None


def build_heartbeat(hb: HeartbeatData) -> bytes:
    """The HEART_BEAT body a Java client sends (names for enums)."""
    return json_body(
        {
            "clientID": hb.client_id,
            "consumerDataSet": [
                {
                    "groupName": c.group,
                    "consumeType": c.consume_type or "CONSUME_PASSIVELY",
                    "messageModel": c.message_model or "CLUSTERING",
                    "consumeFromWhere": c.consume_from_where or "CONSUME_FROM_LAST_OFFSET",
                    "subscriptionDataSet": [
                        {
                            "topic": s.topic,
                            "subString": s.sub_string,
                            "tagsSet": list(s.tags),
                            "codeSet": [],
                            "classFilterMode": False,
                            "expressionType": s.expression_type,
                            "subVersion": 0,
                        }
                        for s in c.subscriptions
                    ],
                    "unitMode": False,
                }
                for c in hb.consumers
            ],
            "producerDataSet": [{"groupName": g} for g in hb.producer_groups],
        }
    )


# -- name server ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueData:
    """``QueueData``: one broker's queues of a topic."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = 6
    topic_sys_flag: int = 0


@dataclass(frozen=True)
class BrokerData:
    """``BrokerData``: a broker name and its addresses by broker id (0 = master)."""

    cluster: str
    broker_name: str
    addrs: Mapping[int, str]


@dataclass(frozen=True)
class TopicRouteData:
    """``TopicRouteData``: the answer to GET_ROUTEINFO_BY_TOPIC."""

    queue_datas: Sequence[QueueData]
    broker_datas: Sequence[BrokerData]
    order_topic_conf: str | None = None


def build_route(route: TopicRouteData) -> bytes:
    """The route body (``brokerAddrs`` keys as JSON strings, which both peers accept)."""
    obj: dict[str, Any] = {
        "brokerDatas": [
            {
                "brokerAddrs": {str(k): v for k, v in b.addrs.items()},
                "brokerName": b.broker_name,
                "cluster": b.cluster,
            }
            for b in route.broker_datas
        ],
        "filterServerTable": {},
        "queueDatas": [
            {
                "brokerName": q.broker_name,
                "perm": q.perm,
                "readQueueNums": q.read_queue_nums,
                "topicSysFlag": q.topic_sys_flag,
                "writeQueueNums": q.write_queue_nums,
            }
            for q in route.queue_datas
        ],
    }
    if route.order_topic_conf is not None:
        obj["orderTopicConf"] = route.order_topic_conf
    return json_body(obj)


def _int(v: object, what: str) -> int:
    try:
        return int(v)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError):
        raise BodyError(f"{what}: {v!r} is not an integer") from None


def parse_route(body: bytes) -> TopicRouteData:
    """Parse a route body (fastjson may write ``brokerAddrs`` keys unquoted: ``{0:"..."}``)."""
    obj = _fastjson_loads(body)
    try:
        brokers = [
            BrokerData(
                str(b.get("cluster", "")),
                str(b["brokerName"]),
                {
                    _int(k, "brokerAddrs key"): str(v)
                    for k, v in (b.get("brokerAddrs") or {}).items()
                },
            )
            for b in obj.get("brokerDatas") or ()
        ]
        queues = [
            QueueData(
                str(q["brokerName"]),
                _int(q.get("readQueueNums", 0), "readQueueNums"),
                _int(q.get("writeQueueNums", 0), "writeQueueNums"),
                _int(q.get("perm", 6), "perm"),
                _int(q.get("topicSysFlag", 0), "sysFlag"),
            )
            for q in obj.get("queueDatas") or ()
        ]
    except (KeyError, TypeError, AttributeError) as e:
        raise BodyError(f"route body: malformed ({e})") from None
    return TopicRouteData(queues, brokers, obj.get("orderTopicConf"))


def _fastjson_loads(body: bytes) -> Any:
    """JSON as fastjson writes it (map keys that are numbers may be unquoted: ``{0:"..."}``);
    ValueError when it is not."""
    text = body.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(_quote_numeric_keys(text))


def _quote_numeric_keys(text: str) -> str:
    import re

    return re.sub(r"([{,])(-?\d+):", r'\1"\2":', text)


def build_cluster_info(cluster: str, brokers: Sequence[BrokerData]) -> bytes:
    """``ClusterInfo``: brokerAddrTable and clusterAddrTable."""
    return json_body(
        {
            "brokerAddrTable": {
                b.broker_name: {
                    "brokerAddrs": {str(k): v for k, v in b.addrs.items()},
                    "brokerName": b.broker_name,
                    "cluster": b.cluster,
                }
                for b in brokers
            },
            "clusterAddrTable": {cluster: sorted(b.broker_name for b in brokers)},
        }
    )


def parse_cluster_info(body: bytes) -> list[BrokerData]:
    """The brokers of a ``ClusterInfo`` body (GET_BROKER_CLUSTER_INFO; fastjson may write the
    ``brokerAddrs`` keys unquoted)."""
    obj = _fastjson_loads(body)
    try:
        return [
            BrokerData(
                str(b.get("cluster", "")),
                str(b.get("brokerName", name)),
                {
                    _int(k, "brokerAddrs key"): str(v)
                    for k, v in (b.get("brokerAddrs") or {}).items()
                },
            )
            for name, b in (obj.get("brokerAddrTable") or {}).items()
        ]
    except (TypeError, AttributeError) as e:
        raise BodyError(f"cluster info body: malformed ({e})") from None


def build_topic_list(topics: Iterable[str]) -> bytes:
    """``TopicList``."""
    return json_body({"topicList": sorted(topics)})


def build_consumer_list(client_ids: Iterable[str]) -> bytes:
    """``GetConsumerListByGroupResponseBody``."""
    return json_body({"consumerIdList": list(client_ids)})


def parse_consumer_list(body: bytes) -> list[str]:
    """Client ids from a GET_CONSUMER_LIST_BY_GROUP answer."""
    obj = parse_json_body(body, "consumer list")
    ids = obj.get("consumerIdList") or []
    if not isinstance(ids, list):
        raise BodyError("consumer list body: consumerIdList is not a list")
    return [str(i) for i in ids]


# -- orderly locks --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MessageQueue:
    """``MessageQueue`` (topic, brokerName, queueId)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        """As fastjson writes it."""
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}


@dataclass(frozen=True)
class LockBatchRequest:
    """``LockBatchRequestBody`` / ``UnlockBatchRequestBody``."""

    consumer_group: str
    client_id: str
    mqs: tuple[MessageQueue, ...]


def parse_lock_batch(body: bytes) -> LockBatchRequest:
    """Parse a LOCK_BATCH_MQ (41) or UNLOCK_BATCH_MQ (42) body."""
    obj = parse_json_body(body, "lock batch")
    try:
        mqs = tuple(
            MessageQueue(
                str(m["topic"]), str(m.get("brokerName", "")), _int(m["queueId"], "queueId")
            )
            for m in obj.get("mqSet") or ()
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise BodyError(f"lock batch body: malformed mqSet ({e})") from None
    return LockBatchRequest(_s(obj.get("consumerGroup")), _s(obj.get("clientId")), mqs)


def build_lock_batch_response(locked: Iterable[MessageQueue]) -> bytes:
    """``LockBatchResponseBody``."""
    return json_body({"lockOKMQSet": [m.to_json() for m in locked]})


# -- batch messages --------------------------------------------------------------------------------


class BatchMessage(NamedTuple):
    """One message of a batch body."""

    flag: int
    body: bytes
    properties: str


_BATCH_HEAD = struct.Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLen
_I16 = struct.Struct(">h")


def decode_batch(data: bytes) -> list[BatchMessage]:
    """``MessageDecoder.decodeMessages`` with every length checked (BodyError when bad)."""
    out: list[BatchMessage] = []
    new = tuple.__new__  # a BatchMessage without the Python-level __new__
    head_size, unpack_head, unpack_i16 = _BATCH_HEAD.size, _BATCH_HEAD.unpack_from, _I16.unpack_from
    pos = 0
    n = len(data)
    while pos < n:
        if n - pos < head_size + 2:
            raise BodyError(f"batch body: truncated message at byte {pos}")
        total, _magic, _crc, flag, blen = unpack_head(data, pos)
        if total < head_size + 2 or total > n - pos:
            raise BodyError(f"batch body: message at byte {pos} has bad totalSize {total}")
        if blen < 0 or blen > total - head_size - 2:
            raise BodyError(f"batch body: message at byte {pos} has bad body length {blen}")
        q = pos + head_size + blen
        plen = unpack_i16(data, q)[0]
        q += 2
        end = pos + total
        if plen < 0 or q + plen != end:
            raise BodyError(f"batch body: message at byte {pos} has bad properties length {plen}")
        try:
            props = data[q:end].decode("utf-8")
        except UnicodeDecodeError:
            raise BodyError(f"batch body: message at byte {pos}: properties not UTF-8") from None
        out.append(new(BatchMessage, (flag, data[pos + head_size : pos + head_size + blen], props)))
        pos = end
    if not out:
        raise HeaderFieldError("batch body holds no message")
    return out


def encode_batch(msgs: Iterable[BatchMessage]) -> bytes:
    """``MessageDecoder.encodeMessages`` (bodyCRC and magic 0, as clients send)."""
    parts = []
    for m in msgs:
        props = m.properties.encode("utf-8")
        total = _BATCH_HEAD.size + len(m.body) + 2 + len(props)
        parts.append(
            _BATCH_HEAD.pack(total, 0, 0, m.flag, len(m.body))
            + m.body
            + _I16.pack(len(props))
            + props
        )
    return b"".join(parts)


def build_queue_table(name: str,
                      rows: Iterable[tuple[MessageQueue, Mapping[str, object] | int]],
                      **fields: object) -> bytes:
    """An object with a ``Map<MessageQueue, V>`` field ``name`` as fastjson writes it (each key
    the queue as an object, which ``JSON.parseObject`` reads back) and the other ``fields``,
    in fastjson's (alphabetical) order: ``TopicStatsTable``, ``ConsumeStats``,
    ``ResetOffsetBody`` (an offset per queue)."""
    table = ",".join(
        json.dumps(mq.to_json(), sort_keys=True, separators=(",", ":")) + ":"
        + json.dumps(v if isinstance(v, int) else dict(v), sort_keys=True,
                     separators=(",", ":"))
        for mq, v in rows)
    parts = {k: json.dumps(v, sort_keys=True, separators=(",", ":")) for k, v in fields.items()}
    parts[name] = "{" + table + "}"
    return ("{" + ",".join(f"{json.dumps(k)}:{parts[k]}" for k in sorted(parts)) + "}").encode()
