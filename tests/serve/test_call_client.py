"""The broker asks a client over the client's own connection (``Broker2Client#callClient``):
GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309) relayed to the consumer the
header names, its response relayed back; a consumer that is not online, or whose connection
closes before it answers, gets the real broker's codes. In process, through mqtool's own
connection as the consumer (the differential mqadmin test has the real Java consumer)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mqtool.formats.commitlog import parse_message
from mqtool.remoting import bodies
from mqtool.remoting.codes import RequestCode, ResponseCode
from mqtool.remoting.connection import Connection
from mqtool.remoting.frame import RemotingCommand
from mqtool.remoting.server import NoResponse, Peer, RemotingServer
from mqtool.serve.service import ServeOptions, Service

GROUP = "GID_c"


def _heartbeat(client_id: str) -> RemotingCommand:
    hb = bodies.build_heartbeat(bodies.HeartbeatData(client_id, (), (
        bodies.ConsumerData(GROUP, subscriptions=(bodies.Subscription("T"),)),)))
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, {}, hb)
    cmd.version = 407  # V4_9_7
    return cmd


def _ask(code: int, client_id: str, **more: str) -> RemotingCommand:
    return RemotingCommand.request(code, {"consumerGroup": GROUP, "clientId": client_id, **more})


def test_requests_relayed_to_the_consumer(tmp_path: Path) -> None:
    svc = Service(ServeOptions(store=tmp_path / "store", namesrv_port=0, broker_port=0),
                  log=lambda line: None)
    asked: list[RemotingCommand] = []
    closing: list[asyncio.Task[None]] = []

    async def main() -> None:
        await svc.start()
        host, port = svc.broker_addr.rsplit(":", 1)
        admin = await Connection.open(host, int(port))
        consumer = await Connection.open(host, int(port))

        def answer(cmd: RemotingCommand) -> None:
            asked.append(cmd)
            if cmd.code in (RequestCode.GET_CONSUMER_RUNNING_INFO,
                            RequestCode.CONSUME_MESSAGE_DIRECTLY):
                consumer.respond(cmd.response(ResponseCode.SUCCESS, "fine", {"k": "v"}, b"info"))

        consumer.on_request = answer
        try:
            sent = await admin.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE, {
                "producerGroup": "PID", "topic": "T", "defaultTopic": "TBW102",
                "defaultTopicQueueNums": 4, "queueId": 0, "sysFlag": 0, "bornTimestamp": 1,
                "flag": 0, "properties": ""}, b"hello"))
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            assert (await consumer.invoke(_heartbeat("cid-a"))).code == ResponseCode.SUCCESS

            r = await admin.invoke(_ask(RequestCode.GET_CONSUMER_RUNNING_INFO, "cid-a",
                                        jstackEnable="false"))
            assert (r.code, r.remark, r.ext_fields, r.body) == (0, "fine", {"k": "v"}, b"info")
            req = [c for c in asked if c.code == RequestCode.GET_CONSUMER_RUNNING_INFO]
            assert len(req) == 1 and not req[0].is_response
            assert req[0].ext_fields == {"consumerGroup": GROUP, "clientId": "cid-a",
                                         "jstackEnable": "false"}

            r = await admin.invoke(_ask(RequestCode.CONSUME_MESSAGE_DIRECTLY, "cid-a",
                                        msgId=sent.ext_fields["msgId"]))
            assert (r.code, r.body) == (0, b"info")
            req = [c for c in asked if c.code == RequestCode.CONSUME_MESSAGE_DIRECTLY]
            assert req[0].ext_fields["brokerName"] == "broker-a"
            assert parse_message(req[0].body, 0).body == b"hello"  # the stored message

            r = await admin.invoke(_ask(RequestCode.GET_CONSUMER_RUNNING_INFO, "nobody"))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                          f"The Consumer <{GROUP}> <nobody> not online")

            def close(cmd: RemotingCommand) -> None:  # closes instead of answering
                closing.append(asyncio.get_running_loop().create_task(consumer.close()))

            consumer.on_request = close
            r = await admin.invoke(_ask(RequestCode.GET_CONSUMER_RUNNING_INFO, "cid-a"))
            assert r.code == ResponseCode.CONSUME_MSG_TIMEOUT, r.remark
            assert (r.remark or "").startswith(f"consumer <{GROUP}> <cid-a> Timeout: ")
        finally:
            await admin.close()
            await consumer.close()
            await svc.stop()

    asyncio.run(main())


def test_a_request_to_a_client_gets_its_response_or_none(tmp_path: Path) -> None:
    """Peer.invoke: the other connection's response matched by opaque; none within the
    timeout: NoResponse."""
    said: list[str] = []

    async def handle(cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        other = next(p for p in server.peers if p is not peer)
        try:
            got = await other.invoke(RemotingCommand.request(500, {"n": cmd.ext_fields["n"]}),
                                     timeout=float(cmd.ext_fields["wait"]))
        except NoResponse as e:
            said.append(str(e))
            return cmd.response(ResponseCode.SYSTEM_ERROR, "none")
        return cmd.response(body=got.body)

    server = RemotingServer(handle, log=said.append)

    async def main() -> None:
        port = await server.start("127.0.0.1", 0)
        client = await Connection.open("127.0.0.1", port)
        asker = await Connection.open("127.0.0.1", port)
        asked: list[RemotingCommand] = []

        def answer(cmd: RemotingCommand) -> None:
            asked.append(cmd)
            if cmd.ext_fields["n"] != "2":
                client.respond(cmd.response(body=b"one"))

        client.on_request = answer
        try:
            while len(server.peers) < 2:
                await asyncio.sleep(0.01)
            for n in ("1", "3"):
                r = await asker.invoke(RemotingCommand.request(1, {"n": n, "wait": "30"}))
                assert (r.code, r.body) == (ResponseCode.SUCCESS, b"one")
            r = await asker.invoke(RemotingCommand.request(1, {"n": "2", "wait": "0.2"}))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "none")
            assert said[-1].startswith("wait response on the channel <127.0.0.1:")
            assert said[-1].endswith("> timeout, 200(ms)")
            assert [c.ext_fields["n"] for c in asked] == ["1", "3", "2"]
            assert len({c.opaque for c in asked}) == 3 and not any(c.is_response for c in asked)
        finally:
            await asker.close()
            await client.close()
            await server.close()

    asyncio.run(main())
