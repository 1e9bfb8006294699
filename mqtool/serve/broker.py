"""The broker side of ``mqtool serve``: remoting requests answered over a :class:`RefStore`.

Mirrors the request processors of a RocketMQ 4.x broker (``SendMessageProcessor``,
``PullMessageProcessor`` with ``PullRequestHoldService``, ``ClientManageProcessor``,
``ConsumerManageProcessor``, ``QueryMessageProcessor``, ``AdminBrokerProcessor`` for the
offset and lock codes). Storage rules (queue selection, delay levels, retry and DLQ on
send-back, schedule delivery, offsets files) stay in the engine; this module only translates.

Everything runs on one asyncio loop: the store is used from one thread, as it requires.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from mqtool.formats.commitlog import (
    CommitLogMessage,
    build_message,
)
from mqtool.formats.errors import MqtoolError
from mqtool.formats.rules import (
    group_refusal,
    retry_topic,
    store_name_refusal,
)
from mqtool.refstore import redelivery
from mqtool.refstore.engine import PutResult, RefStore
from mqtool.remoting import bodies, headers
from mqtool.remoting.codes import RequestCode, ResponseCode
from mqtool.remoting.frame import RemotingCommand
from mqtool.remoting.server import Peer, UnsupportedCode
from mqtool.serve import send
from mqtool.serve.admin import BROKER_VERSIONS, Admin
from mqtool.serve.config import BrokerSettings
from mqtool.serve.core import ClientInfo
from mqtool.serve.send import suggest_todo
from mqtool.serve.subscription import MessageFilter, SqlFilterError, is_tag_type, message_filter
from mqtool.serve.transaction import Transactions

#: ``RebalanceLockManager.REBALANCE_LOCK_MAX_LIVE_TIME`` (60 s).
LOCK_MAX_LIVE_MS = 60_000
#: Longest a pull is held, whatever the client asks (``suspendTimeoutMillis`` is 15 s in both
#: peers; RocketMQ holds up to it).
MAX_SUSPEND_MS = 30_000
#: Consume-queue units a pull may skip for tag filtering before answering (RocketMQ's
#: ``maxFilterMessageCount`` is 16,000).
MAX_FILTER_SCAN = 16_000
#: ``defaultQueryMaxNum``: QUERY_MESSAGE answers at most this many messages.
MAX_QUERY_RESULTS = 32
#: ``maxTransferCountOnMessageInMemory`` / ``maxTransferBytesOnMessageInMemory``: one pull
#: answers at most 32 messages and stops adding once 256 KiB are reached.
MAX_TRANSFER_COUNT = 32
MAX_TRANSFER_BYTES = 256 * 1024


def no_such_group(group: str) -> bool:
    """A group the broker would not have: ``Validators#checkGroup`` refuses its name (5.3.3's
    ``findSubscriptionGroupConfig`` gives null), or it is so long that the store cannot hold
    its ``%RETRY%`` topic as a directory."""
    return group_refusal(group) is not None or (
        store_name_refusal("topic", retry_topic(group)) is not None
    )


_PULL_REMARKS: dict[int, str] = {
    ResponseCode.PULL_NOT_FOUND: "no new message",
    ResponseCode.PULL_OFFSET_MOVED: "offset moved",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "no matched message",
}


class PullWaiters:
    """Held pulls per queue (``PullRequestHoldService``), woken when the queue grows."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, int], set[asyncio.Future[None]]] = {}

    async def wait(self, key: tuple[str, int], timeout: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            s = self._waiting.get(key)
            if s is not None:
                s.discard(fut)
                if not s:
                    del self._waiting[key]

    def notify(self, key: tuple[str, int]) -> None:
        for fut in self._waiting.get(key, ()):
            if not fut.done():
                fut.set_result(None)

    def notify_all(self) -> None:
        for key in list(self._waiting):
            self.notify(key)


class Broker:
    """Request handler of the broker port."""

    def __init__(
        self,
        store: RefStore,
        *,
        broker_name: str,
        on_schedule: asyncio.Event,
        settings: BrokerSettings | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        self.store = store
        self.broker_name = broker_name
        self.settings = settings or BrokerSettings()
        self.host = store.config.store_host.rpartition(":")[0]  # brokerIP1
        self.log = log
        self.transactions = Transactions(self, log)
        self.admin = Admin(self)
        self.waiters = PullWaiters()
        self.on_schedule = on_schedule  # set when a message entered SCHEDULE_TOPIC_XXXX
        self.consumers: dict[str, dict[str, ClientInfo]] = {}
        self.producers: dict[str, dict[str, ClientInfo]] = {}
        self.locks: dict[tuple[str, str, int], tuple[str, float]] = {}
        self.stopping = False
        self._tasks: set[asyncio.Task[None]] = set()  # notifications under way
        self.counts = {"sent": 0, "pulled": 0, "sent_back": 0}
        self.boot_ms = int(time.time() * 1000)
        self.version = BROKER_VERSIONS.get(store.config.dialect, (0, ""))[0]
        self._handlers = {
            RequestCode.SEND_MESSAGE: self.send_message,
            RequestCode.SEND_MESSAGE_V2: self.send_message,
            RequestCode.SEND_BATCH_MESSAGE: self.send_message,
            RequestCode.PULL_MESSAGE: self.pull_message,
            # 5.x: the lite pull consumer's pulls, served as PULL_MESSAGE (4.9.7 has no 361)
            **({RequestCode.LITE_PULL_MESSAGE: self.pull_message} if store.config.v5 else {}),
            RequestCode.QUERY_MESSAGE: self.query_message,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message,
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.consumer_list,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
            RequestCode.GET_MAX_OFFSET: self.max_offset,
            RequestCode.GET_MIN_OFFSET: self.min_offset,
            RequestCode.CONSUMER_SEND_MSG_BACK: self.send_back,
            RequestCode.END_TRANSACTION: self.transactions.end_transaction,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch,
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.admin.update_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.admin.delete_topic,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.admin.update_group,
            RequestCode.GET_BROKER_CONFIG: self.admin.broker_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.admin.runtime_info,
            RequestCode.GET_TOPIC_STATS_INFO: self.admin.topic_stats,
            RequestCode.GET_CONSUME_STATS: self.admin.consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.admin.consumer_connections,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.admin.delete_group,
            RequestCode.UPDATE_BROKER_CONFIG: self.admin.update_broker_config,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.admin.reset_offset,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.admin.consumed_by,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.admin.producer_connections,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.admin.consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.admin.consume_message_directly,
        }

    async def handle(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand | None:
        """Dispatch one request (UnsupportedCode for codes a broker of ours does not serve)."""
        fn = self._handlers.get(cmd.code)  # type: ignore[call-overload]
        if fn is None:
            raise UnsupportedCode(str(cmd.code))
        result: RemotingCommand | None = await fn(cmd, peer)
        if result is not None:
            result.version = self.version
        return result

    def half_put(self) -> None:
        self.transactions.half_put()

    def notify_put(self, results: Iterable[PutResult]) -> None:
        """Wake held pulls of the queues just written; poke the schedule service."""
        for key in dict.fromkeys([(r.topic, r.queue_id) for r in results]):  # a batch: one queue
            if key[0] == redelivery.SCHEDULE_TOPIC:
                self.on_schedule.set()
            else:
                self.waiters.notify(key)

    # -- sending ------------------------------------------------------------------------------

    async def send_message(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        return await send.send_message(self, cmd, peer)

    def retry_or_dlq(
        self, h: headers.SendMessageRequestHeader, props: dict[str, str]
    ) -> headers.SendMessageRequestHeader:
        """A client's own send to ``%RETRY%<group>`` (an orderly consumer's send-back): the
        store's rule (:func:`~mqtool.refstore.redelivery.handle_retry_and_dlq`, for the RocketMQ
        version the store emulates) decides on the DLQ and the DELAY that is stored; the max is
        the header's, else the group's."""
        group = h.topic[len(redelivery.RETRY_GROUP_TOPIC_PREFIX) :]
        cfg = self.store.groups.get(group)
        max_times = h.maxReconsumeTimes
        if max_times is None:
            max_times = (
                cfg.retry_max_times
                if cfg is not None
                else self.store.config.default_max_reconsume_times
            )
        decision = redelivery.handle_retry_and_dlq(
            props,
            group=group,
            reconsume_times=h.reconsumeTimes or 0,
            max_reconsume_times=max_times,
            dialect=self.store.config.dialect,
            group_locked=self._group_locked(group),
        )
        if not decision.to_dlq:
            return h
        self.store.create_topic(decision.topic, redelivery.DLQ_NUMS_PER_GROUP, perm=6)
        return replace(h, topic=decision.topic, queueId=decision.queue_id or 0)

    def _group_locked(self, group: str) -> bool:
        """``RebalanceLockManager#isLockAllExpired`` is false: a consumer of ``group`` holds a
        queue lock that has not expired (an orderly consumer)."""
        now = time.monotonic() * 1000
        return any(
            g == group and now - ts <= LOCK_MAX_LIVE_MS for (g, _, _), (_, ts) in self.locks.items()
        )

    # -- pulling ------------------------------------------------------------------------------

    def queue_bounds(self, topic: str, queue_id: int) -> tuple[int, int]:
        first = next(iter(self.store.queue_units(topic, queue_id, 0)), None)
        mx = self.store.max_offset(topic, queue_id)
        return (first[0] if first is not None else mx), mx

    def _pull_once(
        self, h: headers.PullMessageRequestHeader, offset: int, selects: MessageFilter
    ) -> tuple[int, int, int, int, list[bytes]]:
        """(response code, next offset, min, max, the records' stored bytes) for one look at
        the queue. Only a filter reads a record's fields; the bytes are copied as stored."""
        lo, hi = self.queue_bounds(h.topic, h.queueId)
        if hi == 0:
            return ResponseCode.PULL_NOT_FOUND, 0, 0, 0, []
        if offset < lo:
            return ResponseCode.PULL_OFFSET_MOVED, lo, lo, hi, []
        if offset > hi:
            return ResponseCode.PULL_OFFSET_MOVED, hi, lo, hi, []
        if offset == hi:
            return ResponseCode.PULL_NOT_FOUND, offset, lo, hi, []
        found: list[bytes] = []
        nxt = offset
        scanned = 0
        size = 0
        want = min(max(1, h.maxMsgNums), MAX_TRANSFER_COUNT)
        store = self.store
        every = selects.tags is None and selects.sql is None
        for off, phys, n, _tags_code in store.queue_units(h.topic, h.queueId, offset):
            if len(found) >= want or size >= MAX_TRANSFER_BYTES or scanned >= MAX_FILTER_SCAN:
                break
            scanned += 1
            nxt = off + 1
            if not every:
                m = store.read_message(phys)
                if not selects.matches(m.tags, m.properties):
                    continue
            found.append(store.record_bytes(phys, n))
            size += n
        if found:
            return ResponseCode.SUCCESS, nxt, lo, hi, found
        if nxt < hi:  # NO_MATCHED_MESSAGE
            return ResponseCode.PULL_RETRY_IMMEDIATELY, nxt, lo, hi, []
        return ResponseCode.PULL_NOT_FOUND, nxt, lo, hi, []

    async def pull_message(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        h = headers.decode_header(headers.PullMessageRequestHeader, cmd.ext_fields)
        v5 = self.store.config.v5
        if no_such_group(h.consumerGroup):  # findSubscriptionGroupConfig: null
            return cmd.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{h.consumerGroup}] does not exist, {suggest_todo(v5)}",
            )
        if h.topic not in self.store.topics:
            return cmd.response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{h.topic}] not exist, apply first please! {suggest_todo(v5)}",
            )
        if h.sysFlag & headers.PULL_FLAG_COMMIT_OFFSET and h.commitOffset >= 0:
            self.store.commit_offset(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        selects = self._pull_filter(cmd, h)
        if isinstance(selects, RemotingCommand):
            return selects
        suspend = bool(h.sysFlag & headers.PULL_FLAG_SUSPEND) and h.suspendTimeoutMillis > 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(h.suspendTimeoutMillis, MAX_SUSPEND_MS) / 1000
        offset = h.queueOffset
        while True:
            code, nxt, lo, hi, msgs = self._pull_once(h, offset, selects)
            left = deadline - loop.time()
            if code != ResponseCode.PULL_NOT_FOUND or not suspend or self.stopping or left <= 0:
                break
            offset = nxt
            await self.waiters.wait((h.topic, h.queueId), left)
        ext = headers.PullMessageResponseHeader(
            suggestWhichBrokerId=0, nextBeginOffset=nxt, minOffset=lo, maxOffset=hi
        ).to_ext()
        if code != ResponseCode.SUCCESS:
            remark = _PULL_REMARKS.get(code, "")
            return cmd.response(code, remark, ext)
        self.counts["pulled"] += len(msgs)
        return cmd.response(ext=ext, body=b"".join(msgs))

    def _pull_filter(self, cmd: RemotingCommand, h: headers.PullMessageRequestHeader
                     ) -> MessageFilter | RemotingCommand:
        """What a pull selects (``PullMessageProcessor``): the subscription the pull carries,
        else the one the group's consumers registered by heartbeat (a client that registered
        none is served everything); SQL92 only with ``enablePropertyFilter``."""
        carried = bool(h.sysFlag & headers.PULL_FLAG_SUBSCRIPTION)
        expr, kind = h.subscription, h.expressionType
        if not carried:
            sub = self._registered(h.consumerGroup, h.topic)
            if sub is not None:
                expr, kind = sub.sub_string, sub.expression_type
        if not is_tag_type(kind) and not self.settings.enablePropertyFilter:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"The broker does not support consumer to filter message by {kind}")
        try:
            return message_filter(expr, kind, v5=self.store.config.v5)
        except SqlFilterError:
            if carried:
                return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                    "parse the consumer's subscription failed")
            return cmd.response(ResponseCode.FILTER_DATA_NOT_EXIST,
                                "The broker's consumer filter data is not exist!Your expression "
                                "may be wrong!")

    def _registered(self, group: str, topic: str) -> bodies.Subscription | None:
        """The subscription to ``topic`` a consumer of ``group`` registered by heartbeat."""
        for info in self.consumers.get(group, {}).values():
            for sub in info.consumer.subscriptions if info.consumer else ():
                if sub.topic == topic:
                    return sub
        return None

    async def check_client_config(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG (46): whether the broker can filter by the client's expression
        (``ClientManageProcessor#checkClientConfig``), before a consumer starts."""
        _group, sub = bodies.parse_check_client(cmd.body)
        if sub is None or is_tag_type(sub.expression_type):
            return cmd.response()
        if not self.settings.enablePropertyFilter:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {sub.expression_type}")
        try:
            message_filter(sub.sub_string, sub.expression_type, v5=self.store.config.v5)
        except SqlFilterError as e:
            return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(e))
        return cmd.response()

    # -- clients ------------------------------------------------------------------------------

    async def heart_beat(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        hb = bodies.parse_heartbeat(cmd.body)
        for g in hb.producer_groups:
            self.producers.setdefault(g, {})[hb.client_id] = ClientInfo(
                hb.client_id, peer, cmd.language, cmd.version)
        for c in hb.consumers:
            if no_such_group(c.group):
                continue  # 5.3.3 ClientManageProcessor#heartBeat: no group config, not registered
            if c.group not in self.store.groups:  # autoCreateSubscriptionGroup
                self.store.create_group(c.group)
            cfg = self.store.groups[c.group]
            self.store.create_topic(redelivery.retry_topic(c.group), max(1, cfg.retry_queue_nums))
            members = self.consumers.setdefault(c.group, {})
            known = hb.client_id in members
            members[hb.client_id] = ClientInfo(hb.client_id, peer, cmd.language, cmd.version, c)
            if not known:
                await self._notify_ids_changed(c.group)
        return cmd.response()

    async def _notify_ids_changed(self, group: str) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (oneway) to every consumer of the group, the one that
        just joined too (``DefaultConsumerIdsChangeListener``, CHANGE): rebalance now."""
        if not self.settings.notifyConsumerIdsChangedEnable:
            return
        for info in list(self.consumers.get(group, {}).values()):
            if not info.peer.closed:
                await info.peer.send(
                    RemotingCommand.request(
                        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                        {"consumerGroup": group},
                        oneway=True,
                    )
                )

    async def unregister_client(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        h = headers.decode_header(headers.UnregisterClientRequestHeader, cmd.ext_fields)
        if h.producerGroup:
            self.producers.get(h.producerGroup, {}).pop(h.clientID, None)
        if h.consumerGroup and self.consumers.get(h.consumerGroup, {}).pop(h.clientID, None):
            await self._notify_ids_changed(h.consumerGroup)
        return cmd.response()

    def disconnected(self, peer: Peer) -> None:
        """A connection closed: forget the clients that spoke on it (``doChannelCloseEvent``);
        the groups that lost a consumer are told (NOTIFY_CONSUMER_IDS_CHANGED)."""
        for table in (self.consumers, self.producers):
            for group, members in table.items():
                gone = [c for c, info in members.items() if info.peer is peer]
                for cid in gone:
                    del members[cid]
                if gone and table is self.consumers and members:
                    task = asyncio.get_running_loop().create_task(
                        self._notify_ids_changed(group))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)

    async def consumer_list(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        h = headers.decode_header(headers.GetConsumerListByGroupRequestHeader, cmd.ext_fields)
        ids = sorted(self.consumers.get(h.consumerGroup, {}))
        if not ids:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumerGroup}"
            )
        return cmd.response(body=bodies.build_consumer_list(ids))

    # -- offsets ------------------------------------------------------------------------------

    async def query_consumer_offset(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        h = headers.decode_header(headers.QueryConsumerOffsetRequestHeader, cmd.ext_fields)
        off = self.store.get_consumer_offset(h.consumerGroup, h.topic, h.queueId)
        if off < 0:
            lo, _ = self.queue_bounds(h.topic, h.queueId)
            if lo > 0:  # the first message is gone: the client decides where to start
                return cmd.response(
                    ResponseCode.QUERY_NOT_FOUND, "Not found, maybe this group consumer boot first"
                )
            off = 0
        return cmd.response(ext=headers.OffsetResponseHeader(offset=off).to_ext())

    async def update_consumer_offset(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        h = headers.decode_header(headers.UpdateConsumerOffsetRequestHeader, cmd.ext_fields)
        refused = self._offset_refusal(cmd, h.consumerGroup, h.topic)
        if refused is not None:
            return refused
        self.store.commit_offset(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        return cmd.response()

    def _offset_refusal(
        self, cmd: RemotingCommand, group: str, topic: str
    ) -> RemotingCommand | None:
        """5.3.3 ``ConsumerManageProcessor#updateConsumerOffset``'s checks, so that an offset
        key (``topic@group``) is only ever made of names the store holds: a group the broker
        could not have (its name refused) and a topic the store does not have are refused."""
        if no_such_group(group):
            return cmd.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} not exist!"
            )
        if topic not in self.store.topics:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} not exist!")
        return None

    async def search_offset(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        """First queue offset whose store time is >= the timestamp (max offset when none)."""
        h = headers.decode_header(headers.SearchOffsetRequestHeader, cmd.ext_fields)
        offset = self.offset_at_time(h.topic, h.queueId, h.timestamp)
        return cmd.response(ext=headers.OffsetResponseHeader(offset=offset).to_ext())

    def offset_at_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """``getOffsetInQueueByTime``: the first queue offset whose store time is at or after
        ``timestamp`` (the max offset when none is)."""
        lo, hi = self.queue_bounds(topic, queue_id)
        a, b = lo, hi
        while a < b:
            mid = (a + b) // 2
            item = next(iter(self.store.iter_queue(topic, queue_id, mid)), None)
            if item is None or item[1].store_timestamp >= timestamp:
                b = mid
            else:
                a = mid + 1
        return a

    async def max_offset(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        h = headers.decode_header(headers.GetMaxOffsetRequestHeader, cmd.ext_fields)
        return cmd.response(
            ext=headers.OffsetResponseHeader(
                offset=self.store.max_offset(h.topic, h.queueId)).to_ext()
        )

    async def min_offset(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        h = headers.decode_header(headers.GetMinOffsetRequestHeader, cmd.ext_fields)
        lo, _ = self.queue_bounds(h.topic, h.queueId)
        return cmd.response(ext=headers.OffsetResponseHeader(offset=lo).to_ext())

    # -- retry --------------------------------------------------------------------------------

    async def send_back(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        """CONSUMER_SEND_MSG_BACK: the engine applies the broker's delay/retry/DLQ rules."""
        h = headers.decode_header(headers.ConsumerSendMsgBackRequestHeader, cmd.ext_fields)
        if no_such_group(h.group):  # findSubscriptionGroupConfig: null
            return cmd.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {h.group} {suggest_todo(self.store.config.v5)}",
            )
        r = self.store.send_back(
            h.group, h.offset, delay_level=h.delayLevel, max_reconsume_times=h.maxReconsumeTimes
        )
        self.counts["sent_back"] += 1
        self.notify_put([r])
        return cmd.response()

    # -- orderly locks ------------------------------------------------------------------------

    async def lock_batch(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        req = bodies.parse_lock_batch(cmd.body)
        now = time.monotonic() * 1000
        locked = []
        for mq in req.mqs:
            key = (req.consumer_group, mq.topic, mq.queue_id)
            held = self.locks.get(key)
            if held is None or held[0] == req.client_id or now - held[1] > LOCK_MAX_LIVE_MS:
                self.locks[key] = (req.client_id, now)
                locked.append(mq)
        return cmd.response(body=bodies.build_lock_batch_response(locked))

    async def unlock_batch(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        req = bodies.parse_lock_batch(cmd.body)
        for mq in req.mqs:
            key = (req.consumer_group, mq.topic, mq.queue_id)
            if self.locks.get(key, ("", 0.0))[0] == req.client_id:
                del self.locks[key]
        return cmd.response()

    # -- queries ------------------------------------------------------------------------------

    async def query_message(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        """QUERY_MESSAGE by key (a KEYS token or the UNIQ_KEY) within the time range.

        The engine buffers index entries, so this reads the topic's consume queues instead of
        the index files: every message of the topic is looked at.
        """
        h = headers.decode_header(headers.QueryMessageRequestHeader, cmd.ext_fields)
        limit = min(max(1, h.maxNum), MAX_QUERY_RESULTS)
        newest: list[tuple[int, CommitLogMessage]] = []  # a heap of the newest ``limit``
        for qid in self.store.queue_ids(h.topic):
            for _, m in self.store.iter_queue(h.topic, qid, 0):
                if not h.beginTimestamp <= m.store_timestamp <= h.endTimestamp:
                    continue
                if h.key in m.key_list or m.uniq_key == h.key:
                    heapq.heappush(newest, (m.physical_offset, m))
                    if len(newest) > limit:
                        heapq.heappop(newest)
        found = [m for _, m in sorted(newest, key=lambda e: e[0])]
        ext = headers.QueryMessageResponseHeader(
            indexLastUpdateTimestamp=self.store.last_store_timestamp,
            indexLastUpdatePhyoffset=self.store.write_position,
        ).to_ext()
        if not found:
            return cmd.response(
                ResponseCode.QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
                ext,
            )
        return cmd.response(ext=ext, body=b"".join(build_message(m) for m in found))

    async def view_message(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        h = headers.decode_header(headers.ViewMessageRequestHeader, cmd.ext_fields)
        try:
            m = self.store.read_message(h.offset)
        except MqtoolError as e:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}: {e}"
            )
        return cmd.response(body=build_message(m))
