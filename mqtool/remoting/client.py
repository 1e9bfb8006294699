"""A remoting client for a live cluster: routes, sends, pulls and queries, as the Java client.

* Name servers come as RocketMQ writes them, ``host:port;host:port`` (``--namesrv`` or the
  ``NAMESRV_ADDR`` environment variable, :func:`namesrv_from`). A route is asked of one name
  server after the other until one answers (``GET_ROUTEINFO_BY_TOPIC`` 105).
* Brokers: a broker name's master is its address with brokerId 0; sends and reads go to masters.
* Sending (``SEND_MESSAGE_V2`` 310, the compact ``a``..``k`` header): queues are taken round
  robin over the writable queues of the masters; a send that fails is retried on another broker
  (another queue when there is one broker), ``1 + retry_times`` attempts in all, like the Java
  producer's ``retryTimesWhenSendFailed`` (2): retried are failures to connect and the broker
  answers the Java producer retries (SYSTEM_ERROR, SERVICE_NOT_AVAILABLE, TOPIC_NOT_EXIST,
  NO_PERMISSION). Unlike the Java producer, a request that was written and got no answer
  (timeout, connection lost) is *not* sent again blindly: its outcome is unknown
  (:class:`SendUnknown`), and the caller asks the broker (``QUERY_MESSAGE`` by key) first.
  FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE mean the master stored the
  message without the durability asked for (Java: a SendResult with that status, not retried):
  :class:`SendNotDurable`.
* Reading: ``GET_MIN_OFFSET`` 31 / ``GET_MAX_OFFSET`` 30 per queue, then ``PULL_MESSAGE`` 11
  from min to max with the subscription in the request (no suspend, no offset commit: sysFlag
  ``SUBSCRIPTION`` only); ``UPDATE_CONSUMER_OFFSET`` 15 only when asked (:meth:`commit_offset`).
* ``QUERY_MESSAGE`` 12: every master of the topic is asked for messages indexed under a key.
* ACL: with credentials every request is signed (:mod:`mqtool.remoting.acl`).

Every error is a :class:`ClientError` with one line of text naming the server and the answer.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from mqtool.formats.commitlog import BlankRecord, CommitLogMessage, encode_properties, parse_message
from mqtool.formats.errors import FormatError, usage
from mqtool.formats.rules import AUTO_CREATE_TOPIC, RETRY_GROUP_TOPIC_PREFIX
from mqtool.remoting.acl import AclCredentials, sign
from mqtool.remoting.bodies import BodyError, TopicRouteData, parse_cluster_info, parse_route
from mqtool.remoting.codes import RequestCode, ResponseCode
from mqtool.remoting.connection import Connection
from mqtool.remoting.frame import RemotingCommand, RemotingError
from mqtool.remoting.headers import (
    PULL_FLAG_COMMIT_OFFSET,
    PULL_FLAG_SUBSCRIPTION,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    PullMessageRequestHeader,
    QueryMessageRequestHeader,
    SendMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    send_header_to_v2,
)

__all__ = [
    "NAMESRV_ENV",
    "ClientError",
    "LiveClient",
    "Outgoing",
    "SendNotDurable",
    "SendReceipt",
    "SendUnknown",
    "namesrv_from",
    "parse_namesrv",
]

NAMESRV_ENV = "NAMESRV_ADDR"  # MixAll.NAMESRV_ADDR_ENV
MASTER_ID = 0  # MixAll.MASTER_ID
PERM_WRITE = 0x2  # PermName.PERM_WRITE
PERM_READ = 0x4  # PermName.PERM_READ
DEFAULT_TOPIC_QUEUE_NUMS = 4  # DefaultMQProducer.defaultTopicQueueNums
RETRY_TIMES_WHEN_SEND_FAILED = 2  # DefaultMQProducer.retryTimesWhenSendFailed
PULL_BATCH = 32  # DefaultMQPullConsumer / ali-ons maxMsgNums

#: Broker answers the Java producer retries on another broker (DefaultMQProducer
#: ``retryResponseCodes``).
RETRY_CODES = frozenset({ResponseCode.SYSTEM_ERROR, ResponseCode.SERVICE_NOT_AVAILABLE,
                         ResponseCode.TOPIC_NOT_EXIST, ResponseCode.NO_PERMISSION})
FLUSH_DISK_TIMEOUT = 10
FLUSH_SLAVE_TIMEOUT = 12
SLAVE_NOT_AVAILABLE = 11
NOT_DURABLE = {FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT", FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
               SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE"}

T = TypeVar("T")


class ClientError(RemotingError):
    """A request the cluster did not serve. ``code``: the broker's answer when there was one;
    ``fatal``: no later request can do better (unreachable, refused, topic missing)."""

    def __init__(self, text: str, *, code: int | None = None, fatal: bool = False) -> None:
        super().__init__(text)
        self.code = code
        self.fatal = fatal


class SendUnknown(ClientError):
    """The request was written and no answer came: the broker may have stored the message."""


class SendNotDurable(ClientError):
    """The master stored the message but answered a flush/replication timeout."""

    def __init__(self, text: str, receipt: SendReceipt, code: int) -> None:
        super().__init__(text, code=code)
        self.receipt = receipt


def parse_namesrv(text: str) -> list[str]:
    """``host:port;host:port`` -> the addresses (ClientError on anything else)."""
    out: list[str] = []
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        host, sep, port = part.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise usage(ClientError(f"--namesrv: name server address {part!r} is not "
                                    "host:port (several: host:port;host:port)", fatal=True))
        out.append(f"{host}:{int(port)}")
    if not out:
        raise usage(ClientError("no name server address given (--namesrv host:port or "
                                f"{NAMESRV_ENV})", fatal=True))
    return out


def namesrv_from(option: str | None) -> str | None:
    """The name server list: the option, else ``$NAMESRV_ADDR``, else None (offline)."""
    if option:
        return option
    env = os.environ.get(NAMESRV_ENV, "").strip()
    return env or None


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to send: topic, body, properties (in order), flags, born time."""

    topic: str
    body: bytes
    properties: Sequence[tuple[str, str]]
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class SendReceipt:
    """A SEND_OK (or stored-not-durable) answer: the stored copy's offset msg id and place."""

    msg_id: str
    topic: str
    broker: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True, slots=True)
class _Queue:
    broker_name: str
    addr: str
    queue_id: int


class LiveClient:
    """A client of one cluster, driven from synchronous code: each public method runs on the
    client's own event loop (connections are kept between calls). Close with :meth:`close`.
    """

    def __init__(
        self,
        namesrv: str,
        *,
        acl: AclCredentials | None = None,
        timeout: float = 3.0,
        retry_times: int = RETRY_TIMES_WHEN_SEND_FAILED,
        producer_group: str = "mqtool_dlq_resend",
    ) -> None:
        self.namesrv = parse_namesrv(namesrv)
        self.acl = acl
        self.timeout = timeout
        self.retry_times = retry_times
        self.producer_group = producer_group
        self._loop = asyncio.new_event_loop()
        self._conns: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._routes: dict[str, TopicRouteData] = {}
        self._rr = itertools.count()
        self._ns_first = 0
        self.down: set[str] = set()  # brokers that failed a connection during this run

    # -- plumbing -------------------------------------------------------------------------------
    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the client's loop (synchronous callers)."""
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        async def _close() -> None:
            for c in self._conns.values():
                await c.close()
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        try:
            self._loop.run_until_complete(_close())
        finally:
            self._conns.clear()
            self._loop.close()

    def __enter__(self) -> LiveClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _conn(self, addr: str) -> Connection:
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:  # requests in flight together share one connection per address
            return await self._open(addr)

    async def _open(self, addr: str) -> Connection:
        c = self._conns.get(addr)
        if c is not None and c._error is None and not c._writer.is_closing():
            return c
        if c is not None:
            await c.close()
            del self._conns[addr]
        host, port = _split(addr)
        try:
            c = await Connection.open(host, port, timeout=self.timeout)
        except RemotingError as e:
            raise ClientError(str(e)) from None
        self._conns[addr] = c
        return c

    def _request(self, code: int, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
        if self.acl is not None:
            ext = sign(ext, body, self.acl)
        return RemotingCommand.request(code, ext, body)

    async def invoke(self, addr: str, code: int, ext: dict[str, str], body: bytes = b"",
                     *, timeout: float | None = None) -> RemotingCommand:
        """One request to ``addr``; ClientError when it cannot connect (nothing was sent),
        :class:`SendUnknown` when the request went out and no answer came."""
        conn = await self._conn(addr)
        try:
            return await conn.invoke(self._request(code, ext, body), timeout or self.timeout)
        except RemotingError as e:
            dead = self._conns.pop(addr, None)
            if dead is not None:
                await dead.close()
            raise SendUnknown(f"{addr}: {e}") from None

    # -- name servers ---------------------------------------------------------------------------
    async def _route(self, topic: str) -> TopicRouteData | None:
        """The topic's route, None when the name servers do not know it (code 17)."""
        errors: list[str] = []
        n = len(self.namesrv)
        for i in range(n):
            addr = self.namesrv[(self._ns_first + i) % n]
            try:
                resp = await self.invoke(addr, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                         {"topic": topic})
            except ClientError as e:
                errors.append(str(e))
                continue
            self._ns_first = (self._ns_first + i) % n
            if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                return None
            _check_acl(resp, f"name server {addr}")
            if resp.code != ResponseCode.SUCCESS:
                raise ClientError(f"name server {addr} answered code {resp.code} for the route "
                                  f"of {topic}: {resp.remark or ''}".rstrip(": "), code=resp.code,
                                  fatal=True)
            try:
                return parse_route(resp.body)
            except (BodyError, ValueError) as e:
                raise ClientError(f"name server {addr}: unreadable route of {topic}: {e}",
                                  fatal=True) from None
        raise ClientError("no name server reachable (" + "; ".join(errors) + ")", fatal=True)

    async def _ns_request(self, code: int, ext: dict[str, str], what: str) -> RemotingCommand:
        errors: list[str] = []
        n = len(self.namesrv)
        for i in range(n):
            addr = self.namesrv[(self._ns_first + i) % n]
            try:
                resp = await self.invoke(addr, code, ext)
            except ClientError as e:
                errors.append(str(e))
                continue
            self._ns_first = (self._ns_first + i) % n
            _check_acl(resp, f"name server {addr}")
            if resp.code != ResponseCode.SUCCESS:
                raise ClientError(f"name server {addr} answered code {resp.code} for {what}: "
                                  f"{resp.remark or ''}", code=resp.code, fatal=True)
            return resp
        raise ClientError("no name server reachable (" + "; ".join(errors) + ")", fatal=True)

    def topics(self) -> set[str]:
        """Every topic the name servers know (GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206)."""
        resp = self.run(self._ns_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {},
                                         "the topic list"))
        try:
            obj = json.loads(resp.body.decode("utf-8"))
            return {str(t) for t in obj.get("topicList") or ()}
        except (ValueError, AttributeError, TypeError) as e:
            raise ClientError(f"unreadable topic list from the name server: {e}",
                              fatal=True) from None

    def route(self, topic: str, *, refresh: bool = False) -> TopicRouteData | None:
        """The topic's route (cached), None when no name server knows the topic."""
        if refresh or topic not in self._routes:
            r = self.run(self._route(topic))
            if r is None:
                self._routes.pop(topic, None)
                return None
            self._routes[topic] = r
        return self._routes[topic]

    def cluster_masters(self) -> dict[str, str]:
        """Broker name -> master address of every broker the name servers know
        (GET_BROKER_CLUSTER_INFO 106)."""
        resp = self.run(self._ns_request(RequestCode.GET_BROKER_CLUSTER_INFO, {},
                                         "the cluster's brokers"))
        try:
            brokers = parse_cluster_info(resp.body)
        except (BodyError, ValueError) as e:
            raise ClientError(f"unreadable cluster info from the name server: {e}",
                              fatal=True) from None
        return {b.broker_name: b.addrs[MASTER_ID] for b in brokers if MASTER_ID in b.addrs}

    @staticmethod
    def masters(route: TopicRouteData) -> dict[str, str]:
        """Broker name -> master address (brokerId 0); brokers without a master are left out."""
        return {b.broker_name: b.addrs[MASTER_ID] for b in route.broker_datas
                if MASTER_ID in b.addrs}

    def _queues(self, route: TopicRouteData, perm: int, read: bool) -> list[_Queue]:
        masters = self.masters(route)
        out = []
        for q in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if not q.perm & perm or q.broker_name not in masters:
                continue
            for i in range(q.read_queue_nums if read else q.write_queue_nums):
                out.append(_Queue(q.broker_name, masters[q.broker_name], i))
        return out

    # -- sending --------------------------------------------------------------------------------
    def write_queues(self, topic: str) -> list[_Queue]:
        """The writable master queues of ``topic``; ClientError (fatal) when there are none.

        A ``%RETRY%<group>`` topic no broker has yet: queue 0 of each master of the cluster
        (a send goes to one of them). A broker creates a retry topic on the first send to it,
        as on a consumer's send-back (``AbstractSendMessageProcessor#msgCheck``:
        ``createTopicInSendMessageMethod`` from TBW102 when it may be inherited, else
        ``createTopicInSendMessageBackMethod`` with one queue), and then registers it with the
        name servers."""
        route = self.route(topic)
        if route is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            masters = self.cluster_masters()
            if not masters:
                raise ClientError(f"topic {topic}: no master broker in the cluster", fatal=True)
            return [_Queue(name, addr, 0) for name, addr in sorted(masters.items())]
        if route is None:
            raise ClientError(f"topic {topic} does not exist (no name server has a route for "
                              "it)", code=ResponseCode.TOPIC_NOT_EXIST, fatal=True)
        qs = self._queues(route, PERM_WRITE, read=False)
        if not qs:
            raise ClientError(f"topic {topic}: no writable queue on a master broker",
                              fatal=True)
        return qs

    async def _send_one(self, msg: Outgoing, queues: list[_Queue]) -> SendReceipt:
        last_broker: str | None = None
        errors: list[str] = []
        fatal = False
        code: int | None = None
        for _attempt in range(1 + self.retry_times):
            cands = [q for q in queues if q.addr not in self.down] or queues
            start = next(self._rr)
            pick = cands[start % len(cands)]
            for k in range(len(cands)):  # another broker than the one that failed, if any
                q = cands[(start + k) % len(cands)]
                if q.broker_name != last_broker:
                    pick = q
                    break
            try:
                return await self._send_to(msg, pick)
            except SendUnknown:
                raise
            except SendNotDurable:
                raise
            except ClientError as e:
                errors.append(str(e))
                code = e.code
                fatal = e.fatal or e.code is None
                if e.code is None:
                    self.down.add(pick.addr)
                elif e.code not in RETRY_CODES:
                    raise
                last_broker = pick.broker_name
        raise ClientError(f"send to {msg.topic} failed {1 + self.retry_times} times: "
                          + errors[-1], code=code,
                          fatal=fatal or code in (ResponseCode.NO_PERMISSION,
                                                  ResponseCode.TOPIC_NOT_EXIST,
                                                  ResponseCode.SERVICE_NOT_AVAILABLE))

    async def _send_to(self, msg: Outgoing, q: _Queue) -> SendReceipt:
        header = SendMessageRequestHeader(
            producerGroup=self.producer_group, topic=msg.topic, defaultTopic=AUTO_CREATE_TOPIC,
            defaultTopicQueueNums=DEFAULT_TOPIC_QUEUE_NUMS, queueId=q.queue_id,
            sysFlag=msg.sys_flag, bornTimestamp=msg.born_timestamp or _now_ms(),
            flag=msg.flag, properties=encode_properties(msg.properties, True),
            reconsumeTimes=0, unitMode=False,
        )
        resp = await self.invoke(q.addr, RequestCode.SEND_MESSAGE_V2,
                                 send_header_to_v2(header), msg.body)
        where = f"broker {q.broker_name} ({q.addr})"
        if resp.code in (ResponseCode.SUCCESS, *NOT_DURABLE):
            try:
                receipt = SendReceipt(resp.ext_fields["msgId"], msg.topic, q.broker_name,
                                      int(resp.ext_fields["queueId"]),
                                      int(resp.ext_fields["queueOffset"]))
            except (KeyError, ValueError) as e:
                raise SendUnknown(f"{where}: malformed send answer ({e})") from None
            if resp.code != ResponseCode.SUCCESS:
                raise SendNotDurable(
                    f"{where} stored the message but answered {NOT_DURABLE[resp.code]}",
                    receipt, resp.code)
            return receipt
        _check_acl(resp, where)
        raise ClientError(f"{where} refused the send to {msg.topic}: code {resp.code}"
                          + (f" ({resp.remark})" if resp.remark else ""), code=resp.code)

    def send_many(self, msgs: Sequence[Outgoing]) -> list[SendReceipt | ClientError]:
        """Send all of ``msgs`` at once (in flight together); a result per message, in order.

        To a ``%RETRY%`` topic no broker has yet, one message goes first, alone: the broker
        creates the topic while it stores it (and registers it with the name servers, which
        holds up the sends queued behind), the others follow to the queues it then has."""
        topics = {m.topic for m in msgs}
        new = {t for t in topics if t.startswith(RETRY_GROUP_TOPIC_PREFIX) and
               self.route(t) is None}
        first = [next(i for i, m in enumerate(msgs) if m.topic == t) for t in sorted(new)]
        rest = [i for i in range(len(msgs)) if i not in set(first)]
        out: dict[int, SendReceipt | ClientError] = {}
        for batch in (first, rest):
            if batch:
                out.update(zip(batch, self._send_together([msgs[i] for i in batch]),
                               strict=True))
        return [out[i] for i in range(len(msgs))]

    def _send_together(self, msgs: Sequence[Outgoing]) -> list[SendReceipt | ClientError]:
        queues = {t: self.write_queues(t) for t in {m.topic for m in msgs}}

        async def one(m: Outgoing) -> SendReceipt | ClientError:
            try:
                return await self._send_one(m, queues[m.topic])
            except ClientError as e:
                return e

        async def all_() -> list[SendReceipt | ClientError]:
            return list(await asyncio.gather(*(one(m) for m in msgs)))

        return self.run(all_())

    # -- reading --------------------------------------------------------------------------------
    def read_queues(self, topic: str) -> list[_Queue] | None:
        """The readable master queues of ``topic``, None when the topic has no route."""
        route = self.route(topic)
        return None if route is None else self._queues(route, PERM_READ, read=True)

    async def _offset(self, q: _Queue, topic: str, code: int) -> int:
        cls = GetMinOffsetRequestHeader if code == RequestCode.GET_MIN_OFFSET else \
            GetMaxOffsetRequestHeader
        ext = cls(topic=topic, queueId=q.queue_id).to_ext()
        resp = await self.invoke(q.addr, code, ext)
        _check_acl(resp, q.addr)
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(f"broker {q.addr}: code {resp.code} for the offsets of {topic} "
                              f"queue {q.queue_id}: {resp.remark or ''}", code=resp.code,
                              fatal=True)
        return int(resp.ext_fields.get("offset", "0"))

    def offsets(self, topic: str, q: _Queue) -> tuple[int, int]:
        """(min, max) offsets of one queue (max: the next offset to be written)."""
        async def both() -> tuple[int, int]:
            return (await self._offset(q, topic, RequestCode.GET_MIN_OFFSET),
                    await self._offset(q, topic, RequestCode.GET_MAX_OFFSET))

        return self.run(both())

    def pull(self, group: str, topic: str, q: _Queue, offset: int, *, max_nums: int = PULL_BATCH,
             commit_offset: int | None = None) -> tuple[list[CommitLogMessage], int]:
        """Messages of one queue from ``offset`` and the next offset to ask for."""
        flag = PULL_FLAG_SUBSCRIPTION
        if commit_offset is not None:
            flag |= PULL_FLAG_COMMIT_OFFSET
        ext = PullMessageRequestHeader(
            consumerGroup=group, topic=topic, queueId=q.queue_id, queueOffset=offset,
            maxMsgNums=max_nums, sysFlag=flag, commitOffset=commit_offset or 0,
            suspendTimeoutMillis=0, subscription="*", subVersion=_now_ms(),
        ).to_ext()
        resp = self.run(self.invoke(q.addr, RequestCode.PULL_MESSAGE, ext))
        _check_acl(resp, q.addr)
        nxt = int(resp.ext_fields.get("nextBeginOffset", offset))
        if resp.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
                         ResponseCode.PULL_OFFSET_MOVED):
            return [], nxt
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(f"broker {q.addr}: pull of {topic} queue {q.queue_id} at {offset}"
                              f" answered code {resp.code}: {resp.remark or ''}",
                              code=resp.code, fatal=True)
        return list(decode_messages(resp.body, f"pull answer from {q.addr}")), nxt

    def commit_offset(self, group: str, topic: str, q: _Queue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET: ``group`` has consumed ``topic``/queue up to ``offset``."""
        ext = UpdateConsumerOffsetRequestHeader(consumerGroup=group, topic=topic,
                                                queueId=q.queue_id, commitOffset=offset).to_ext()
        resp = self.run(self.invoke(q.addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext))
        _check_acl(resp, q.addr)
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(f"broker {q.addr}: offset commit answered code {resp.code}: "
                              f"{resp.remark or ''}", code=resp.code, fatal=True)

    def query(self, topic: str, key: str, *, begin: int = 0, end: int | None = None,
              max_num: int = 64) -> list[CommitLogMessage]:
        """QUERY_MESSAGE: messages of ``topic`` indexed under ``key`` on every master."""
        route = self.route(topic)
        if route is None:
            return []
        ext = QueryMessageRequestHeader(topic=topic, key=key, maxNum=max_num,
                                        beginTimestamp=begin,
                                        endTimestamp=end or _now_ms() + 3_600_000).to_ext()

        async def ask(addr: str) -> list[CommitLogMessage]:
            resp = await self.invoke(addr, RequestCode.QUERY_MESSAGE, ext,
                                     timeout=max(self.timeout, 5.0))
            _check_acl(resp, addr)
            if resp.code == ResponseCode.QUERY_NOT_FOUND:
                return []
            if resp.code != ResponseCode.SUCCESS:
                raise ClientError(f"broker {addr}: query of key {key} in {topic} answered "
                                  f"code {resp.code}: {resp.remark or ''}", code=resp.code)
            return list(decode_messages(resp.body, f"query answer from {addr}"))

        async def all_() -> list[CommitLogMessage]:
            out: list[CommitLogMessage] = []
            for addr in sorted(set(self.masters(route).values())):
                out += await ask(addr)
            return out

        return self.run(all_())


def decode_messages(body: bytes, what: str) -> Iterator[CommitLogMessage]:
    """The stored-message records of a pull/query answer (MessageDecoder layout)."""
    pos = 0
    while pos < len(body):
        try:
            m = parse_message(body, pos, file=what)
        except FormatError as e:
            raise ClientError(f"{what}: undecodable message at byte {pos}: {e}") from None
        if isinstance(m, BlankRecord) or m.total_size <= 0:
            raise ClientError(f"{what}: not a message record at byte {pos}")
        yield m
        pos += m.total_size


def _check_acl(resp: RemotingCommand, where: str) -> None:
    """A refusal by the ACL layer (NO_PERMISSION, or the broker's AclException text)."""
    remark = resp.remark or ""
    low = remark.lower()
    if resp.code == ResponseCode.NO_PERMISSION or (
        resp.code != ResponseCode.SUCCESS
        and any(w in low for w in ("acl", "signature", "accesskey", "access key"))
    ):
        raise ClientError(f"{where} refused the request (ACL): code {resp.code}"
                          + (f": {remark}" if remark else "")
                          + " - check --access-key/--secret-key", code=resp.code, fatal=True)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
