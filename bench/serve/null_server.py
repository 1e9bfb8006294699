"""A null broker for bench/serve's ceiling case: the same transport as ``mqtool serve``
(:class:`mqtool.remoting.server.RemotingServer`), no store.

The name server answers GET_ROUTEINFO_BY_TOPIC with one broker of 4 queues; the broker answers
SEND_MESSAGE / SEND_MESSAGE_V2 with SEND_OK (msgId, queueId, queueOffset) and every other request
with SUCCESS, storing nothing. With the real clients against it, what is left of a sync send's
cost is the clients', the kernel's and the transport's: the most any broker could reach on this
machine with these clients.

Usage: python bench/serve/null_server.py   (prints ``namesrv HOST:PORT`` once listening;
SIGTERM stops it)
"""

from __future__ import annotations

import asyncio
import signal

from mqtool.remoting import bodies
from mqtool.remoting.codes import RequestCode
from mqtool.remoting.frame import RemotingCommand
from mqtool.remoting.server import Peer, RemotingServer

HOST = "127.0.0.1"


async def main() -> None:
    addr: dict[str, str] = {}
    offsets = [0]

    async def ns(cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        if cmd.code != RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return cmd.response()
        route = bodies.TopicRouteData(
            [bodies.QueueData("null", 4, 4, 6, 0)],
            [bodies.BrokerData("NullCluster", "null", {0: addr["broker"]})],
        )
        return cmd.response(body=bodies.build_route(route))

    async def broker(cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        if cmd.code not in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
            return cmd.response()
        offsets[0] += 1
        return cmd.response(
            ext={
                "msgId": f"7F00000100002A9F{offsets[0]:016X}",
                "queueId": cmd.ext_fields.get("queueId", cmd.ext_fields.get("e", "0")),
                "queueOffset": offsets[0],
            }
        )

    b = RemotingServer(broker, name="null-broker")
    n = RemotingServer(ns, name="null-namesrv")
    addr["broker"] = f"{HOST}:{await b.start(HOST, 0)}"
    nport = await n.start(HOST, 0)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(f"null broker ready namesrv {HOST}:{nport} broker {addr['broker']}", flush=True)
    await stop.wait()
    await b.close()
    await n.close()


if __name__ == "__main__":
    asyncio.run(main())
