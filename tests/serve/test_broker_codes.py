"""Every served request code, in process, through mqtool's own remoting connection.

The real peers (test_peers.py) are the judge of the wire format; this covers the codes they do
not send (cluster info, topic list, batch 320, offsets by time, queries, locks) and the error
answers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mqtool.formats.commitlog import parse_message
from mqtool.remoting import bodies, frame, headers
from mqtool.remoting.codes import RequestCode, ResponseCode, SerializeType
from mqtool.remoting.connection import Connection
from mqtool.remoting.frame import RemotingCommand
from mqtool.serve.service import ServeOptions, Service


def _run(tmp_path: Path, body: Callable[[Service, Connection, Connection], Awaitable[None]],
         **opts: Any) -> Service:
    svc = Service(ServeOptions(store=tmp_path / "store", namesrv_port=0, broker_port=0, **opts),
                  log=lambda line: None)

    async def main() -> None:
        await svc.start()
        nhost, nport = svc.namesrv_addr.rsplit(":", 1)
        bhost, bport = svc.broker_addr.rsplit(":", 1)
        ns = await Connection.open(nhost, int(nport))
        br = await Connection.open(bhost, int(bport))
        try:
            await body(svc, ns, br)
        finally:
            await ns.close()
            await br.close()
            await svc.stop()

    asyncio.run(main())
    return svc


def _send_ext(topic: str, queue: int, props: str, **extra: object) -> dict[str, object]:
    return {"producerGroup": "PID", "topic": topic, "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4, "queueId": queue, "sysFlag": 0,
            "bornTimestamp": 1, "flag": 0, "properties": props, **extra}


def _records(body: bytes) -> list[Any]:
    out, pos = [], 0
    while pos < len(body):
        m = parse_message(body, pos)
        out.append(m)
        pos += m.total_size
    return out


def test_namesrv_codes(tmp_path: Path) -> None:
    async def body(svc: Service, ns: Connection, br: Connection) -> None:
        # the name server creates nothing: an unknown topic has no route, TBW102 has one (8
        # queues, perm RWX) and a send with it as defaultTopic creates the topic on the broker
        route_new = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NewT"})
        r = await ns.invoke(route_new)
        assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST,
                                      "No topic route info in name server "
                                      "for the topic: NewT\nSee http://rocketmq.apache.org/"
                                      "docs/faq/ for further details.")
        r = await ns.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                    {"topic": "TBW102"}))
        qd = bodies.parse_route(r.body).queue_datas[0]
        assert (qd.write_queue_nums, qd.perm) == (8, 7)
        r = await br.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE,
                                                    _send_ext("NewT", 0, ""), b"x"))
        assert r.code == ResponseCode.SUCCESS
        r = await ns.invoke(route_new)
        route = bodies.parse_route(r.body)
        assert r.code == ResponseCode.SUCCESS and route.queue_datas[0].write_queue_nums == 4
        assert route.queue_datas[0].perm == 6
        assert route.broker_datas[0].addrs == {0: svc.broker_addr}
        # UPDATE_AND_CREATE_TOPIC (mqadmin updateTopic): created or changed, routed at once
        upd = {"topic": "Upd", "defaultTopic": "TBW102", "readQueueNums": 2,
               "writeQueueNums": 2, "perm": 6, "topicFilterType": "SINGLE_TAG",
               "topicSysFlag": 0, "order": "false"}
        for queues in (2, 3):
            upd.update(readQueueNums=queues, writeQueueNums=queues)
            r = await br.invoke(RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, upd))
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await ns.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                        {"topic": "Upd"}))
            assert bodies.parse_route(r.body).queue_datas[0].write_queue_nums == queues
        for topic, remark in (("TBW102", "The topic[TBW102] is conflict with system topic."),
                              ("a b", "The specified topic contains illegal characters, "
                               "allowing only ^[%|a-zA-Z0-9_-]+$")):
            r = await br.invoke(RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                                        {**upd, "topic": topic}))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        r = await ns.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                    {"topic": "%DLQ%g"}))
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        r = await ns.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        info = json.loads(r.body)
        assert info["clusterAddrTable"] == {"C1": ["bx"]}
        assert info["brokerAddrTable"]["bx"]["brokerAddrs"] == {"0": svc.broker_addr}
        r = await ns.invoke(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        assert "NewT" in json.loads(r.body)["topicList"]
        r = await ns.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE))  # a broker code
        assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

    _run(tmp_path, body, broker_name="bx", cluster="C1")


def test_send_pull_offsets_queries_locks(tmp_path: Path) -> None:
    async def body(svc: Service, ns: Connection, br: Connection) -> None:
        # single send (ROCKETMQ header serialization answered in kind)
        r = await br.invoke(RemotingCommand.request(
            RequestCode.SEND_MESSAGE, _send_ext("T", 1, "KEYS\x01k1\x02TAGS\x01A\x02"), b"one",
            serialize_type=SerializeType.ROCKETMQ))
        assert r.code == ResponseCode.SUCCESS and r.serialize_type == SerializeType.ROCKETMQ
        assert (r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == ("1", "0")
        first_id = r.ext_fields["msgId"]
        # batch: code 320 (the Java client's: the V2 header, batch "m") and code 10 with
        # batch "true"; 320 with the long names is refused as the broker does
        batch = bodies.encode_batch([bodies.BatchMessage(0, f"b{i}".encode(),
                                                         f"KEYS\x01kb{i}\x02TAGS\x01B\x02")
                                     for i in range(3)])
        long_names = _send_ext("T", 1, "WAIT\x01true\x02", batch="true")
        r = await br.invoke(RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, long_names,
                                                    batch))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the custom field <a> is null")
        v2 = {headers.V1_TO_V2[k]: v for k, v in long_names.items()}
        r = await br.invoke(RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, v2, batch))
        assert r.code == ResponseCode.SUCCESS and len(r.ext_fields["msgId"].split(",")) == 3
        r = await br.invoke(RemotingCommand.request(
            RequestCode.SEND_MESSAGE, _send_ext("T", 1, "WAIT\x01true\x02", batch="true"), batch))
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "4"
        # offsets
        for code, want in ((RequestCode.GET_MAX_OFFSET, "7"), (RequestCode.GET_MIN_OFFSET, "0")):
            r = await br.invoke(RemotingCommand.request(code, {"topic": "T", "queueId": 1}))
            assert r.ext_fields["offset"] == want
        r = await br.invoke(RemotingCommand.request(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "T", "queueId": 1, "timestamp": 0}))
        assert r.ext_fields["offset"] == "0"
        r = await br.invoke(RemotingCommand.request(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "T", "queueId": 1,
                                                     "timestamp": 2**62}))
        assert r.ext_fields["offset"] == "7"
        q = {"consumerGroup": "G", "topic": "T", "queueId": 1}
        r = await br.invoke(RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, q))
        assert r.ext_fields["offset"] == "0"
        await br.invoke(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                {**q, "commitOffset": 5}))
        r = await br.invoke(RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, q))
        assert r.ext_fields["offset"] == "5"
        # pull with a tag filter: only TAGS B
        pull = {**q, "queueOffset": 0, "maxMsgNums": 32, "sysFlag": 0, "commitOffset": 0,
                "suspendTimeoutMillis": 0, "subscription": "B", "subVersion": 0}
        r = await br.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE, pull))
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["nextBeginOffset"] == "7"
        assert [m.body for m in _records(r.body)] == [b"b0", b"b1", b"b2"] * 2
        # long polling: a held pull is answered by a later send on another connection
        held = asyncio.create_task(br.invoke(RemotingCommand.request(
            RequestCode.PULL_MESSAGE, {**pull, "queueOffset": 7, "sysFlag": 2,
                             "suspendTimeoutMillis": 20000, "subscription": "*"}), timeout=30))
        await asyncio.sleep(0.3)
        assert not held.done()
        other = await Connection.open(*svc.broker_addr.rsplit(":", 1)[:1],
                                      int(svc.broker_addr.rsplit(":", 1)[1]))
        await other.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE,
                                                   _send_ext("T", 1, ""), b"late"))
        await other.close()
        r = await held
        assert r.code == ResponseCode.SUCCESS and [m.body for m in _records(r.body)] == [b"late"]
        # queries: by key, by offset id
        r = await br.invoke(RemotingCommand.request(RequestCode.QUERY_MESSAGE, {
            "topic": "T", "key": "kb1", "maxNum": 32, "beginTimestamp": 0,
            "endTimestamp": 2**62}))
        assert [m.body for m in _records(r.body)] == [b"b1", b"b1"]
        r = await br.invoke(RemotingCommand.request(RequestCode.QUERY_MESSAGE, {
            "topic": "T", "key": "nope", "maxNum": 32, "beginTimestamp": 0,
            "endTimestamp": 2**62}))
        assert r.code == ResponseCode.QUERY_NOT_FOUND
        r = await br.invoke(RemotingCommand.request(
            RequestCode.VIEW_MESSAGE_BY_ID, {"offset": int(first_id[-16:], 16)}))
        assert [m.body for m in _records(r.body)] == [b"one"]
        r = await br.invoke(RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": 3}))
        assert r.code == ResponseCode.SYSTEM_ERROR
        # orderly locks: a second client is refused while the first holds the queue
        mq = {"topic": "T", "brokerName": "broker-a", "queueId": 1}
        lock = {"consumerGroup": "G", "clientId": "c1", "mqSet": [mq]}
        r = await br.invoke(RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {},
                                                    bodies.json_body(lock)))
        assert json.loads(r.body)["lockOKMQSet"] == [mq]
        r = await br.invoke(RemotingCommand.request(
            RequestCode.LOCK_BATCH_MQ, {}, bodies.json_body({**lock, "clientId": "c2"})))
        assert json.loads(r.body)["lockOKMQSet"] == []
        await br.invoke(RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, {},
                                                bodies.json_body(lock)))
        r = await br.invoke(RemotingCommand.request(
            RequestCode.LOCK_BATCH_MQ, {}, bodies.json_body({**lock, "clientId": "c2"})))
        assert json.loads(r.body)["lockOKMQSet"] == [mq]

    _run(tmp_path, body)


def test_clients_and_errors_keep_the_connection(tmp_path: Path) -> None:
    async def body(svc: Service, ns: Connection, br: Connection) -> None:
        r = await br.invoke(RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                    {"consumerGroup": "G"}))
        assert r.code == ResponseCode.SYSTEM_ERROR and "no consumer" in (r.remark or "")
        hb = bodies.build_heartbeat(bodies.HeartbeatData("cid-1", (), (
            bodies.ConsumerData("G", subscriptions=(bodies.Subscription("T"),)),)))
        assert (await br.invoke(RemotingCommand.request(RequestCode.HEART_BEAT, {}, hb))).code == 0
        r = await br.invoke(RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                    {"consumerGroup": "G"}))
        assert bodies.parse_consumer_list(r.body) == ["cid-1"]
        assert "%RETRY%G" in svc.store.topics  # type: ignore[union-attr]
        r = await br.invoke(RemotingCommand.request(RequestCode.UNREGISTER_CLIENT,
                                                    {"clientID": "cid-1", "consumerGroup": "G"}))
        assert r.code == 0
        # bad requests are answered; the connection stays usable
        r = await br.invoke(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T"}))
        assert r.code == ResponseCode.SYSTEM_ERROR and "<queueId> is null" in (r.remark or "")
        r = await br.invoke(RemotingCommand.request(RequestCode.HEART_BEAT, {}, b"{not json"))
        assert r.code == ResponseCode.SYSTEM_ERROR and "not valid JSON" in (r.remark or "")
        r = await br.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE,
                                                    _send_ext("T", 99, ""), b"x"))
        assert r.code == ResponseCode.SYSTEM_ERROR and (r.remark or "").startswith(
            "request queueId[99] is illegal, TopicConfig [topicName=T, readQueueNums=4, "
            "writeQueueNums=4, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, "
            "order=false] Producer: 127.0.0.1:")
        r = await br.invoke(RemotingCommand.request(4242))
        assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        r = await br.invoke(RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                                    {"topic": "T", "queueId": 0}))
        assert r.code == ResponseCode.SUCCESS
        # a oneway request gets no response; the next request still matches its own opaque
        await br.invoke_oneway(RemotingCommand.request(RequestCode.SEND_MESSAGE,
                                                       _send_ext("T", 0, ""), b"o"))
        r = await br.invoke(RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                                    {"topic": "T", "queueId": 0}))
        assert r.ext_fields["offset"] == "1"
        assert frame.decode(frame.encode(r)).opaque == r.opaque

    _run(tmp_path, body)


def test_client_send_to_retry_topic_past_max_is_dead_lettered(tmp_path: Path) -> None:
    async def body(svc: Service, ns: Connection, br: Connection) -> None:
        ext = _send_ext("%RETRY%G", 0, "RECONSUME_TIME\x013\x02", reconsumeTimes=3)
        r = await br.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE, ext, b"x"))
        assert r.code == ResponseCode.SUCCESS
        r = await br.invoke(RemotingCommand.request(
            RequestCode.SEND_MESSAGE, {**ext, "reconsumeTimes": 1, "maxReconsumeTimes": 2}, b"y"))
        assert r.code == ResponseCode.SUCCESS
        store = svc.store
        assert store is not None
        # 3 >= the default max (3, from --max-reconsume-times): DLQ; 1 < the header's 2: retry
        assert [m.body for _, m in store.iter_queue("%DLQ%G", 0)] == [b"x"]
        assert [m.body for _, m in store.iter_queue("%RETRY%G", 0)] == [b"y"]

    _run(tmp_path, body, max_reconsume_times=3)


def test_delete_topic_deletes_its_queues(tmp_path: Path) -> None:
    """DELETE_TOPIC_IN_BROKER: the config and the consume queues go (the records stay); a topic
    created again starts at offset 0. A system topic is refused."""
    async def body(svc: Service, ns: Connection, br: Connection) -> None:
        assert svc.store is not None
        send = RemotingCommand.request(RequestCode.SEND_MESSAGE, _send_ext("DelT", 1, ""), b"x")
        for want in ("0", "1"):
            r = await br.invoke(send)
            assert (r.code, r.ext_fields["queueOffset"]) == (ResponseCode.SUCCESS, want)
        queues = svc.store.root / "consumequeue" / "DelT"
        assert (queues / "1").is_dir()
        r = await br.invoke(RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER,
                                                    {"topic": "DelT"}))
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert not (queues / "1").exists() and "DelT" not in svc.store.topics
        assert '"DelT"' not in (svc.store.root / "config" / "topics.json").read_text()
        r = await br.invoke(send)
        assert (r.code, r.ext_fields["queueOffset"]) == (ResponseCode.SUCCESS, "0")
        r = await br.invoke(RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER,
                                                    {"topic": "SCHEDULE_TOPIC_XXXX"}))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The topic[SCHEDULE_TOPIC_XXXX] "
                                      "is conflict with system topic.")

    _run(tmp_path, body)


def test_lite_pull_code_of_5x(tmp_path: Path) -> None:
    """LITE_PULL_MESSAGE (361), the 5.x lite pull consumer's pull, is served as PULL_MESSAGE by
    a 5.3.3 broker; a 4.9.7 broker does not know it."""
    pull = {"consumerGroup": "G", "topic": "LiteT", "queueId": 0, "queueOffset": 0,
            "maxMsgNums": 32, "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 0,
            "subscription": "*", "subVersion": 0}
    got: dict[str, tuple[int, list[bytes]]] = {}
    for dialect in ("4.9.7", "5.3.3"):
        async def body(svc: Service, ns: Connection, br: Connection, dialect: str = dialect
                       ) -> None:
            r = await br.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE,
                                                        _send_ext("LiteT", 0, ""), b"lite"))
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await br.invoke(RemotingCommand.request(RequestCode.LITE_PULL_MESSAGE, pull))
            got[dialect] = (r.code, [m.body for m in _records(r.body)])

        _run(tmp_path / dialect, body, dialect=dialect)
    assert got == {"4.9.7": (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, []),
                   "5.3.3": (ResponseCode.SUCCESS, [b"lite"])}
