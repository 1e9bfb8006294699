"""The administration requests of the broker port (``AdminBrokerProcessor``), as ``mqadmin``
and ``DefaultMQAdminExt`` send them.

* UPDATE_AND_CREATE_TOPIC (17, ``updateTopic``): the topic's config is replaced by the header's
  queue numbers, perm, filter type and sysFlag (created when new), after
  ``TopicValidator#validateTopic`` and ``isSystemTopic`` (SYSTEM_ERROR in 4.9.7,
  INVALID_PARAMETER in 5.3.3, with the broker's remark).
* DELETE_TOPIC_IN_BROKER (215, ``deleteTopic``): after the broker's name checks (4.9.7: those
  of 17; 5.3.3: a blank name and the system topics), the topic's config is removed (so is its
  route) and its consume queues are deleted (a topic created again starts at offset 0); 5.3.3
  also removes the consumer offsets on it. Its records stay in the commitlog.
* UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200, ``updateSubGroup``): the body's
  ``SubscriptionGroupConfig`` replaces the group's.
* DELETE_SUBSCRIPTIONGROUP (207, ``deleteSubGroup``): the group's config is removed, its
  offsets too when the header says ``removeOffset``.
* GET_BROKER_CONFIG (26, ``getBrokerConfig``): the settings serve runs with, as
  ``key=value`` lines (only the keys serve has; a real broker lists every bean field).
* UPDATE_BROKER_CONFIG (25, ``updateBrokerConfig``): the honoured keys of the body's
  properties take effect at once; the others, and the store's own settings (read at start),
  are named once on stderr.
* INVOKE_BROKER_TO_RESET_OFFSET (222, ``resetOffsetByTime``, ``skipAccumulatedMessage``): per
  queue the offset at the time (``-1``: the max offset), kept where the group is already
  behind unless forced, sent oneway to each online consumer of the group
  (RESET_CONSUMER_CLIENT_OFFSET, 220) and answered; CONSUMER_NOT_ONLINE when none is (the
  tool then sets the offsets itself), SYSTEM_ERROR for a group without offsets on the topic.
* QUERY_TOPIC_CONSUME_BY_WHO (300, ``queryMsgByOffset``, ``queryMsgById``): the groups online
  on the topic and those with offsets for it.
* GET_BROKER_RUNTIME_INFO (28, ``brokerStatus``, ``clusterList``): the ``KVTable`` of what
  serve counts (puts and gets since it started, the commitlog's offsets, the disk) with the
  broker's key names; thread pool and latency keys are zero (serve has no such pools).
* GET_TOPIC_STATS_INFO (202, ``topicStatus``): per queue min and max offset and the store time
  of the last message.
* GET_CONSUMER_CONNECTION_LIST (203, ``consumerConnection``) and GET_PRODUCER_CONNECTION_LIST
  (204, ``producerConnection``): the group's connections (address, client id, language,
  version) and, for consumers, how they consume and their subscriptions.
* GET_CONSUMER_RUNNING_INFO (307, ``consumerStatus``) and CONSUME_MESSAGE_DIRECTLY (309,
  ``queryMsgById -g -d``, ``queryMsgByUniqueKey -g -d``): asked of the consumer client itself
  over its own connection (``Broker2Client#callClient``: the request's header and body, for 309
  the body replaced by the stored message the header's ``msgId`` names and ``brokerName``
  added), its response relayed as it came; SYSTEM_ERROR when the client is not online or older
  than V3_1_8_SNAPSHOT, CONSUME_MSG_TIMEOUT when it gives no response within 10 s or its
  connection closes first.
* GET_CONSUME_STATS (208, ``consumerProgress``): per queue of the group's topics (the one
  asked, else those it has offsets for) the broker's max offset, the group's offset and the
  store time of the last message it consumed.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace

from mqtool.formats.commitlog import build_message
from mqtool.formats.config.consumer_offset import split_offset_key
from mqtool.formats.config.properties import parse_properties
from mqtool.formats.config.subscription_group import SubscriptionGroupConfig
from mqtool.formats.config.topics import TopicConfig
from mqtool.formats.errors import MqtoolError
from mqtool.formats.msgid import decode_offset_msg_id
from mqtool.formats.rules import is_validator_system_topic, topic_refusal
from mqtool.refstore.configs import check_store_name
from mqtool.remoting import bodies, headers
from mqtool.remoting.codes import RequestCode, ResponseCode
from mqtool.remoting.frame import HeaderFieldError, RemotingCommand
from mqtool.remoting.server import NoResponse, Peer
from mqtool.serve.config import AT_START, BrokerConfError, updated
from mqtool.serve.core import BrokerCore, ClientInfo

#: ``MQVersion.Version`` ordinal and name of each dialect's broker. The broker's responses carry
#: the ordinal; clients read it (the Java client pulls by SQL92 only from 4.1.0 on).
BROKER_VERSIONS = {"4.9.7": (407, "V4_9_7"), "5.3.3": (479, "V5_3_3")}
#: ``MQVersion.Version.V3_1_8_SNAPSHOT.ordinal()``: the oldest client the broker asks.
OLDEST_ASKED_CLIENT = 62
#: ``Broker2Client#callClient``: how long the broker waits for a client's response (s).
CALL_CLIENT_TIMEOUT = 10.0


def _field(cmd: RemotingCommand, name: str, required: bool = True) -> str:
    value = cmd.ext_fields.get(name)
    if value is None:
        if required:
            raise HeaderFieldError(f"the custom field <{name}> is null")
        return ""
    return str(value)


class Admin:
    """The admin request handlers of one broker."""

    def __init__(self, broker: BrokerCore) -> None:
        self.broker = broker

    # -- topics and groups --------------------------------------------------------------------

    async def update_topic(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        h = headers.decode_header(headers.CreateTopicRequestHeader, cmd.ext_fields)
        store = self.broker.store
        code = ResponseCode.INVALID_PARAMETER if store.config.v5 else ResponseCode.SYSTEM_ERROR
        why = topic_refusal(h.topic)
        if why is not None:
            return cmd.response(code, why)
        if is_validator_system_topic(h.topic):
            return cmd.response(code, f"The topic[{h.topic}] is conflict with system topic.")
        check_store_name("topic", h.topic)
        old = store.topics.get(h.topic)
        new = TopicConfig(h.topic, h.readQueueNums, h.writeQueueNums, h.perm,
                          h.topicFilterType, h.topicSysFlag or 0,
                          attributes={} if store.config.v5 else None)
        if old is not None:
            new = replace(old, read_queue_nums=new.read_queue_nums,
                          write_queue_nums=new.write_queue_nums, perm=new.perm,
                          topic_filter_type=new.topic_filter_type,
                          topic_sys_flag=new.topic_sys_flag)
        if new != old:
            store.topics[h.topic] = new
            store.configs.persist_topics()
        return cmd.response()

    async def delete_topic(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        topic = _field(cmd, "topic")
        store = self.broker.store
        if store.config.v5:  # a blank name and the system topics only
            code = ResponseCode.INVALID_PARAMETER
            why = "The specified topic is blank." if not topic.strip() else None
        else:
            code, why = ResponseCode.SYSTEM_ERROR, topic_refusal(topic)
        if why is not None:
            return cmd.response(code, why)
        if is_validator_system_topic(topic):
            return cmd.response(code, f"The topic[{topic}] is conflict with system topic.")
        store.delete_topic(topic)
        return cmd.response()

    async def update_group(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        obj = bodies.parse_json_body(cmd.body, "subscription group")
        name = obj.get("groupName")
        if not isinstance(name, str):
            return cmd.response(ResponseCode.SYSTEM_ERROR, "the body has no groupName")
        check_store_name("group", name)
        store = self.broker.store
        store.groups[name] = SubscriptionGroupConfig({k: obj[k] for k in sorted(obj)})
        store.configs.persist_groups()
        return cmd.response()

    async def delete_group(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        h = headers.decode_header(headers.DeleteSubscriptionGroupRequestHeader, cmd.ext_fields)
        store = self.broker.store
        if store.groups.pop(h.groupName, None) is not None:
            store.configs.persist_groups()
        if h.removeOffset:
            gone = [k for k in store.consumer_offsets if split_offset_key(k)[1] == h.groupName]
            for key in gone:
                del store.consumer_offsets[key]
            if gone:
                store.configs.persist_consumer_offsets()
        return cmd.response()

    # -- offsets ------------------------------------------------------------------------------

    async def reset_offset(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        """``Broker2Client#resetOffset``."""
        h = headers.decode_header(headers.ResetOffsetRequestHeader, cmd.ext_fields)
        b = self.broker
        store = b.store
        tc = store.topics.get(h.topic)
        if tc is None:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}")
        rows: list[tuple[bodies.MessageQueue, int]] = []
        for qid in range(tc.write_queue_nums):
            current = store.get_consumer_offset(h.group, h.topic, qid)
            if current < 0:
                return cmd.response(ResponseCode.SYSTEM_ERROR,
                                    f"THe consumer group <{h.group}> not exist")
            target = (b.queue_bounds(h.topic, qid)[1] if h.timestamp == -1
                      else b.offset_at_time(h.topic, qid, h.timestamp))
            rows.append((bodies.MessageQueue(h.topic, store.config.broker_name, qid),
                         max(target, 0) if h.isForce or target < current else current))
        body = bodies.build_queue_table("offsetTable", rows)
        online = [info for info in b.consumers.get(h.group, {}).values() if not info.peer.closed]
        if not online:
            return cmd.response(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"Consumer not online, so can not reset offset, Group: {h.group} Topic: "
                f"{h.topic} Timestamp: {h.timestamp}")
        for info in online:
            await info.peer.send(RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                {"topic": h.topic, "group": h.group, "timestamp": h.timestamp},
                body, oneway=True))
        return cmd.response(body=body)

    async def consumed_by(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        topic = _field(cmd, "topic")
        b = self.broker
        groups = {g for g, members in b.consumers.items() for info in members.values()
                  if info.consumer is not None
                  and any(s.topic == topic for s in info.consumer.subscriptions)}
        groups |= {g for t, g in map(split_offset_key, b.store.consumer_offsets)
                   if t == topic and g}
        return cmd.response(body=bodies.json_body({"groupList": sorted(groups)}))

    # -- the broker ---------------------------------------------------------------------------

    async def update_broker_config(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        props = parse_properties((cmd.body or b"").decode("utf-8", "replace"))
        b = self.broker
        try:
            b.settings, not_taken = updated(b.settings, props, at_start=False)
        except BrokerConfError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(e))
        for key in not_taken:
            why = "read only at start (--broker-conf)" if key in AT_START else "not honoured"
            b.log(f"updateBrokerConfig: {key} is {why} by mqtool serve")
        return cmd.response()

    def settings_table(self) -> dict[str, str]:
        """The settings serve runs with, by the broker's key names."""
        b = self.broker
        config = b.store.config
        host, _, port = config.store_host.rpartition(":")
        out = {
            "brokerName": config.broker_name,
            "brokerClusterName": config.cluster_name or "",
            "brokerId": "0",
            "brokerIP1": host,
            "listenPort": port,
            "storePathRootDir": str(b.store.root),
            "storePathCommitLog": str(b.store.root / "commitlog"),
            "mappedFileSizeCommitLog": str(config.commitlog_file_size),
            "mappedFileSizeConsumeQueue": str(config.cq_entries_per_file * 20),
            "messageIndexEnable": _bool(config.message_index_enable),
            "messageDelayLevel": config.message_delay_level,
            "maxMessageSize": str(config.max_message_size),
        }
        s = b.settings
        out.update({
            "autoCreateTopicEnable": _bool(s.autoCreateTopicEnable),
            "autoCreateSubscriptionGroup": _bool(s.autoCreateSubscriptionGroup),
            "defaultTopicQueueNums": str(s.defaultTopicQueueNums),
            "enablePropertyFilter": _bool(s.enablePropertyFilter),
            "notifyConsumerIdsChangedEnable": _bool(s.notifyConsumerIdsChangedEnable),
            "rejectTransactionMessage": _bool(s.rejectTransactionMessage),
            "transactionTimeOut": str(s.transactionTimeOut),
            "transactionCheckMax": str(s.transactionCheckMax),
            "transactionCheckInterval": str(s.check_interval(config.v5)),
        })
        return out

    async def broker_config(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in self.settings_table().items())
        version = json.dumps({"counter": 0, "timestamp": self.broker.boot_ms})
        return cmd.response(ext={"version": version}, body=text.encode("utf-8"))

    def runtime_table(self, now_ms: int) -> dict[str, str]:
        """``prepareRuntimeInfo`` for what serve has."""
        b = self.broker
        store = b.store
        config = store.config
        ordinal, desc = BROKER_VERSIONS.get(config.dialect, (0, "V" + config.dialect.replace(
            ".", "_")))
        up_s = max(1, (now_ms - b.boot_ms) // 1000)
        disk = shutil.disk_usage(store.root)
        ratio = f"{(disk.total - disk.free) / disk.total:.2f}" if disk.total else "0.00"
        puts, gets = b.counts["sent"], b.counts["pulled"]
        earliest = -1
        try:
            earliest = store.read_message(0).store_timestamp if store.write_position else -1
        except MqtoolError:
            earliest = -1
        days, rest = divmod(up_s, 86400)
        hours, rest = divmod(rest, 3600)
        minutes, seconds = divmod(rest, 60)
        table = {
            "brokerVersionDesc": desc,
            "brokerVersion": str(ordinal),
            "bootTimestamp": str(b.boot_ms),
            "runtime": f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]",
            "msgPutTotalYesterdayMorning": "0",
            "msgPutTotalTodayMorning": "0",
            "msgPutTotalTodayNow": str(puts),
            "msgGetTotalYesterdayMorning": "0",
            "msgGetTotalTodayMorning": "0",
            "msgGetTotalTodayNow": str(gets),
            "putMessageTimesTotal": str(puts),
            "putTps": f"{puts / up_s}",
            "getTransferedTps": f"{gets / up_s}",
            "commitLogMinOffset": "0",
            "commitLogMaxOffset": str(store.write_position),
            "commitLogDiskRatio": ratio,
            "consumeQueueDiskRatio": ratio,
            "commitLogDirCapacity": f"Total : {_gib(disk.total)}, Free : {_gib(disk.free)}.",
            "earliestMessageTimeStamp": str(earliest),
            "dispatchBehindBytes": "0",
            "remainHowManyDataToFlush": "0 B",
            "pageCacheLockTimeMills": "0",
        }
        for pool in ("send", "pull", "query"):
            table[f"{pool}ThreadPoolQueueSize"] = "0"
            table[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = "0"
        return table

    async def runtime_info(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        table = self.runtime_table(int(time.time() * 1000))
        return cmd.response(body=bodies.json_body({"table": table}))

    # -- stats --------------------------------------------------------------------------------

    def _last_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at ``offset - 1`` of a queue (0 when there is none)."""
        if offset <= 0:
            return 0
        for _, m in self.broker.store.iter_queue(topic, queue_id, offset - 1):
            return m.store_timestamp
        return 0

    async def topic_stats(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        topic = _field(cmd, "topic")
        b = self.broker
        tc = b.store.topics.get(topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        rows = []
        for qid in range(tc.write_queue_nums):
            lo, hi = b.queue_bounds(topic, qid)
            rows.append((bodies.MessageQueue(topic, b.store.config.broker_name, qid), {
                "minOffset": lo, "maxOffset": hi,
                "lastUpdateTimestamp": self._last_store_time(topic, qid, hi)}))
        return cmd.response(body=bodies.build_queue_table("offsetTable", rows))

    async def consume_stats(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        group = _field(cmd, "consumerGroup")
        asked = _field(cmd, "topic", required=False)
        b = self.broker
        store = b.store
        topics = [asked] if asked else sorted({
            t for t, g in map(split_offset_key, store.consumer_offsets) if g == group})
        online = b.consumers.get(group, {})
        subscribed = {s.topic for info in online.values() if info.consumer is not None
                      for s in info.consumer.subscriptions}
        rows = []
        for topic in topics:
            tc = store.topics.get(topic)
            if tc is None or (online and topic not in subscribed):
                continue
            for qid in range(tc.write_queue_nums):
                _, hi = b.queue_bounds(topic, qid)
                off = store.get_consumer_offset(group, topic, qid)
                rows.append((bodies.MessageQueue(topic, store.config.broker_name, qid), {
                    "brokerOffset": hi, "consumerOffset": off,
                    "lastTimestamp": self._last_store_time(topic, qid, off)}))
        return cmd.response(body=bodies.build_queue_table("offsetTable", rows, consumeTps=0.0))

    # -- asking a consumer ---------------------------------------------------------------------

    async def consumer_running_info(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        return await self._call_consumer(RequestCode.GET_CONSUMER_RUNNING_INFO, cmd,
                                         cmd.ext_fields, cmd.body)

    async def consume_message_directly(self, cmd: RemotingCommand,
                                       peer: Peer) -> RemotingCommand:
        ext = dict(cmd.ext_fields)
        ext["brokerName"] = self.broker.store.config.broker_name
        body = cmd.body
        msg_id = ext.get("msgId")
        if msg_id is not None:
            offset = decode_offset_msg_id(msg_id).commit_log_offset
            body = build_message(self.broker.store.read_message(offset))
        return await self._call_consumer(RequestCode.CONSUME_MESSAGE_DIRECTLY, cmd, ext, body)

    async def _call_consumer(self, code: int, cmd: RemotingCommand, ext: dict[str, str],
                             body: bytes) -> RemotingCommand:
        """``AdminBrokerProcessor#callConsumer``: ``code`` with ``ext`` and ``body`` asked of
        the client the header names; its response is the answer."""
        group = _field(cmd, "consumerGroup")
        client_id = _field(cmd, "clientId")
        info = self.broker.consumers.get(group, {}).get(client_id)
        if info is None or info.peer.closed:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"The Consumer <{group}> <{client_id}> not online")
        if info.version < OLDEST_ASKED_CLIENT:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{client_id}> Version <{info.version}> too low to finish, please "
                "upgrade it to V3_1_8_SNAPSHOT")
        try:
            answer = await info.peer.invoke(RemotingCommand.request(code, ext, body),
                                            CALL_CLIENT_TIMEOUT)
        except NoResponse as e:
            return cmd.response(
                ResponseCode.CONSUME_MSG_TIMEOUT,
                f"consumer <{group}> <{client_id}> Timeout: "
                f"org.apache.rocketmq.remoting.exception.RemotingTimeoutException: {e}")
        return cmd.response(answer.code, answer.remark, answer.ext_fields, answer.body)

    # -- connections --------------------------------------------------------------------------

    @staticmethod
    def _connections(members: dict[str, ClientInfo]) -> list[dict[str, object]]:
        return [{"clientAddr": info.peer.address, "clientId": cid,
                 "language": info.language, "version": info.version}
                for cid, info in sorted(members.items()) if not info.peer.closed]

    async def consumer_connections(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        group = _field(cmd, "consumerGroup")
        members = self.broker.consumers.get(group, {})
        conns = self._connections(members)
        if not conns:
            return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE,
                                f"the consumer group[{group}] not online")
        data = next(info.consumer for info in members.values() if info.consumer is not None)
        assert data is not None
        subs = {s.topic: {"classFilterMode": False, "codeSet": [], "expressionType": "TAG",
                          "subString": s.sub_string, "subVersion": 0,
                          "tagsSet": list(s.tags), "topic": s.topic}
                for info in members.values() if info.consumer is not None
                for s in info.consumer.subscriptions}
        return cmd.response(body=bodies.json_body({
            "connectionSet": conns, "consumeFromWhere": data.consume_from_where,
            "consumeType": data.consume_type, "messageModel": data.message_model,
            "subscriptionTable": subs}))

    async def producer_connections(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        group = _field(cmd, "producerGroup")
        conns = self._connections(self.broker.producers.get(group, {}))
        if not conns:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"the producer group[{group}] not exist")
        return cmd.response(body=bodies.json_body({"connectionSet": conns}))


def _bool(v: bool) -> str:
    return "true" if v else "false"


def _gib(n: int) -> str:
    return f"{n / 1024 ** 3:.1f} GiB"
