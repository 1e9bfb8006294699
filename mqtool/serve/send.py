"""Sends (codes 10, 310, 320) as the broker's ``SendMessageProcessor`` takes them.

``parseRequestHeader``: 310 and 320 carry the one-letter V2 header, 10 the long names; the
header's ``batch`` flag (not the code) makes a batch (``Boolean.parseBoolean``, so librocketmq's
``"1"`` is a single message whose body is the encoded batch, stored as sent).
``msgCheck``: the name checks, then the topic: an unknown one is created from the header's
``defaultTopic`` (TBW102) when that topic may be inherited (``autoCreateTopicEnable``), with
``min(defaultTopicQueueNums, its write queues)`` queues, a ``%RETRY%`` topic with one queue;
else TOPIC_NOT_EXIST. A queue id past the topic's queues is refused, a negative one picked at
random. Then the retry/DLQ rule for a client's own ``%RETRY%`` send, MESSAGE_ILLEGAL for a body
over ``maxMessageSize`` or properties over 32767 bytes, and the put: a ``TRAN_MSG=true``
message is a half message (:func:`mqtool.refstore.transaction.send_half`).
"""

from __future__ import annotations

import random
from dataclasses import replace

from mqtool.formats.commitlog import (
    COMPRESSED_FLAG,
    decompress,
    encode_properties,
    parse_properties,
)
from mqtool.formats.config.topics import TopicConfig
from mqtool.formats.encoder import record_size
from mqtool.formats.rules import (
    AUTO_CREATE_TOPIC,
    PROPERTY_CLUSTER,
    PROPERTY_MSG_REGION,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_WAIT_STORE_MSG_OK,
    is_not_allowed_send_topic,
    not_allowed_send_remark,
    topic_refusal,
)
from mqtool.refstore import redelivery, transaction
from mqtool.refstore.engine import BatchItem, Message, PutResult
from mqtool.remoting import bodies, headers
from mqtool.remoting.codes import RequestCode, ResponseCode
from mqtool.remoting.frame import RemotingCommand
from mqtool.remoting.server import Peer
from mqtool.serve.core import BrokerCore

#: PermName bits.
PERM_INHERIT = 0x1
PERM_WRITE = 0x2
PERM_READ = 0x4
#: A record's properties are at most ``Short.MAX_VALUE`` bytes.
PROPERTIES_MAX = 32767

#: ``FAQUrl.APPLY_TOPIC_URL`` / ``SUBSCRIPTION_GROUP_NOT_EXIST`` (one page in each version).
FAQ_URL_4 = "http://rocketmq.apache.org/docs/faq/"
FAQ_URL_5 = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"


def suggest_todo(v5: bool) -> str:
    """``FAQUrl.suggestTodo`` of the FAQ page, as the broker appends it to a remark."""
    return f"\nSee {FAQ_URL_5 if v5 else FAQ_URL_4} for further details."


def perm_string(perm: int) -> str:
    """``PermName.perm2String``."""
    return ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-") + (
        "X" if perm & PERM_INHERIT else "-")


def topic_config_string(tc: TopicConfig, v5: bool) -> str:
    """``TopicConfig#toString``."""
    text = (f"TopicConfig [topicName={tc.topic_name}, readQueueNums={tc.read_queue_nums}, "
            f"writeQueueNums={tc.write_queue_nums}, perm={perm_string(tc.perm)}, "
            f"topicFilterType={tc.topic_filter_type}, topicSysFlag={tc.topic_sys_flag}, "
            f"order={'true' if tc.order else 'false'}")
    if v5:
        attrs = ", ".join(f"{k}={v}" for k, v in (tc.attributes or {}).items())
        text += f", attributes={{{attrs}}}"
    return text + "]"


def send_topic_refusal(cmd: RemotingCommand, topic: str, *, v5: bool) -> RemotingCommand | None:
    """``AbstractSendMessageProcessor#msgCheck``'s name checks: ``TopicValidator#validateTopic``
    (SYSTEM_ERROR in 4.9.7, INVALID_PARAMETER in 5.3.3) then ``isNotAllowedSendTopic``
    (NO_PERMISSION); None when the topic may be sent to."""
    why = topic_refusal(topic)
    if why is not None:
        code = ResponseCode.INVALID_PARAMETER if v5 else ResponseCode.SYSTEM_ERROR
        return cmd.response(code, why)
    if is_not_allowed_send_topic(topic):
        return cmd.response(ResponseCode.NO_PERMISSION, not_allowed_send_remark(topic))
    return None


def create_from_default(broker: BrokerCore, topic: str, default_topic: str,
                        client_queue_nums: int) -> TopicConfig | None:
    """``TopicConfigManager#createTopicInSendMessageMethod``: a new topic like
    ``default_topic`` when its perm may be inherited; None when it may not."""
    store = broker.store
    default = store.topics.get(default_topic)
    if default is None:
        return None
    perm = default.perm
    if default_topic == AUTO_CREATE_TOPIC and not broker.settings.autoCreateTopicEnable:
        perm = PERM_READ | PERM_WRITE
    if not perm & PERM_INHERIT:
        return None
    nums = max(0, min(client_queue_nums, default.write_queue_nums))
    return store.create_topic(topic, nums, perm=perm & ~PERM_INHERIT)


def send_topic(broker: BrokerCore, cmd: RemotingCommand, h: headers.SendMessageRequestHeader,
               producer: str) -> TopicConfig | RemotingCommand:
    """The topic config a send goes to (created when the broker would), or the refusal."""
    store = broker.store
    v5 = store.config.v5
    refused = send_topic_refusal(cmd, h.topic, v5=v5)
    if refused is not None:
        return refused
    tc = store.topics.get(h.topic)
    if tc is None:
        tc = create_from_default(broker, h.topic, h.defaultTopic, h.defaultTopicQueueNums)
        if tc is None and h.topic.startswith(redelivery.RETRY_GROUP_TOPIC_PREFIX):
            tc = store.create_topic(h.topic, 1, perm=PERM_READ | PERM_WRITE)
    if tc is None:
        return cmd.response(
            ResponseCode.TOPIC_NOT_EXIST,
            f"topic[{h.topic}] not exist, apply first please!{suggest_todo(v5)}")
    if h.queueId >= max(tc.write_queue_nums, tc.read_queue_nums):
        return cmd.response(
            ResponseCode.INVALID_PARAMETER if v5 else ResponseCode.SYSTEM_ERROR,
            f"request queueId[{h.queueId}] is illegal, {topic_config_string(tc, v5)} "
            f"Producer: {producer}")
    return tc


#: ``MessageExtEncoder``: a record may be this much larger than ``maxMessageSize``.
RECORD_SLACK = 64 * 1024
#: A topic name this long (4 bytes a character at most) keeps a record whose body and
#: properties are within their limits under ``maxMessageSize`` + :data:`RECORD_SLACK`.
MAX_TOPIC_CHARS = 1024


def illegal(broker: BrokerCore, cmd: RemotingCommand, h: headers.SendMessageRequestHeader,
            body: bytes) -> RemotingCommand | None:
    """MESSAGE_ILLEGAL as ``MessageExtEncoder#encode`` refuses a record: a body (as sent,
    compressed or not) over ``maxMessageSize``, properties (with the broker's ``CLUSTER``) over
    32767 bytes, or the whole record (``calMsgLength``) over ``maxMessageSize`` + 64 KiB;
    None when the message may be stored."""
    config = broker.store.config
    limit = config.max_message_size
    props = h.properties or ""
    if (len(body) <= limit and 4 * (len(props) + len(config.cluster_name or "")) + 64
            <= PROPERTIES_MAX and len(h.topic) <= MAX_TOPIC_CHARS):
        return None  # every UTF-8 character is at most 4 bytes: within every limit below
    props_len = len(props.encode("utf-8"))
    if config.cluster_name:
        props_len += len(f"{PROPERTY_CLUSTER}\x01{config.cluster_name}\x02".encode())
    size = record_size(h.sysFlag, len(body), len(h.topic.encode("utf-8")), props_len)
    if len(body) <= limit and props_len <= PROPERTIES_MAX and size <= limit + RECORD_SLACK:
        return None
    return cmd.response(
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched. "
        f"msg body length limit {limit}B, msg properties length limit 32KB.",
    )


def parse_send_header(cmd: RemotingCommand) -> headers.SendMessageRequestHeader:
    """``parseRequestHeader``: 310 and 320 are V2 (one-letter names), 10 the long names."""
    if cmd.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        return headers.send_header_from_v2(cmd.ext_fields)
    return headers.decode_header(headers.SendMessageRequestHeader, cmd.ext_fields)


async def send_message(broker: BrokerCore, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
    h = parse_send_header(cmd)
    store = broker.store
    tc = send_topic(broker, cmd, h, peer.address)
    if isinstance(tc, RemotingCommand):
        return tc
    if h.queueId < 0:
        h = replace(h, queueId=random.randrange(max(1, tc.write_queue_nums)))
    prop_map = parse_properties(h.properties or "")
    if store.config.v5 and not h.batch:
        # 5.x SendMessageProcessor#buildMsgContext writes the broker's region and trace switch
        # into every message's properties before it is stored
        prop_map[PROPERTY_MSG_REGION] = broker.settings.regionId
        prop_map[PROPERTY_TRACE_SWITCH] = "true" if broker.settings.traceOn else "false"
        h = replace(h, properties=encode_properties(prop_map.items()))
    if h.topic.startswith(redelivery.RETRY_GROUP_TOPIC_PREFIX):
        h = broker.retry_or_dlq(h, prop_map)
    transaction_id = None
    if h.batch:
        results = put_batch(broker, h, cmd.body, prop_map, peer)
        msg_id = ",".join([r.msg_id for r in results])
    else:
        refused = illegal(broker, cmd, h, cmd.body)
        if refused is not None:
            return refused
        half = prop_map.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true" and not (
            (h.reconsumeTimes or 0) > 0 and redelivery.delay_level_of(prop_map) > 0)
        if not half and not store.config.v5:
            # 4.x SendMessageProcessor#sendMessage writes the properties without WAIT ("no need
            # to store WAIT=true"); a half message's are written again later, with it. 5.x
            # stores the properties as sent, WAIT too.
            prop_map.pop(PROPERTY_WAIT_STORE_MSG_OK, None)
        msg = Message(h.topic, cmd.body, tuple(prop_map.items()), h.queueId, h.flag,
                      h.sysFlag, h.bornTimestamp, peer.address, h.reconsumeTimes or 0)
        if half:
            if broker.settings.rejectTransactionMessage:
                return cmd.response(
                    ResponseCode.NO_PERMISSION,
                    f"the broker[{broker.host}] sending transaction message is forbidden")
            group = prop_map.get(PROPERTY_PRODUCER_GROUP) or h.producerGroup
            r = transaction.send_half(store, msg, group)
            broker.half_put()
        else:
            r = store.put(msg, as_sent=True)
        results = [r]
        msg_id = r.msg_id
        if store.config.v5:
            transaction_id = r.uniq_key
    broker.counts["sent"] += len(results)
    broker.notify_put(results)
    first = results[0]
    ext = headers.SendMessageResponseHeader(
        msgId=msg_id,
        queueId=first.queue_id if first.topic == h.topic else h.queueId,
        queueOffset=first.queue_offset,
        transactionId=transaction_id,
    ).to_ext()
    # SendMessageProcessor: the region and trace switch the client's SendResult reports
    ext[PROPERTY_MSG_REGION] = broker.settings.regionId
    ext[PROPERTY_TRACE_SWITCH] = "true" if broker.settings.traceOn else "false"
    return cmd.response(ext=ext)


def put_batch(broker: BrokerCore, h: headers.SendMessageRequestHeader, body: bytes,
              prop_map: dict[str, str], peer: Peer) -> list[PutResult]:
    """A ``MessageBatch``: every message its own record, the batch's properties appended."""
    store = broker.store
    raw = body
    sys_flag = h.sysFlag
    if sys_flag & COMPRESSED_FLAG:
        raw = decompress(raw, "ZLIB", 32 * store.config.max_message_size)
        sys_flag &= ~COMPRESSED_FLAG
    born_ts, born, times = h.bornTimestamp, peer.address, h.reconsumeTimes or 0
    # dispatched once the answer is out (Peer.after_reply), as the broker's reput service does
    fast = store.put_raw_batch(h.topic, h.queueId, raw, sys_flag, born_ts, born, times,
                               tuple(prop_map.items()), peer.after_reply)
    if fast is not None:
        return fast
    new = tuple.__new__  # a BatchItem without the Python-level __new__
    items = [new(BatchItem, (flag, body, parse_properties(props), sys_flag, born_ts, born,
                             times, props))
             for flag, body, props in bodies.decode_batch(raw)]
    return store.put_batch_items(h.topic, h.queueId, items, tuple(prop_map.items()))
