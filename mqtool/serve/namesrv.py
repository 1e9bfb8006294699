"""The name server side of ``mqtool serve`` (``DefaultRequestProcessor`` of a RocketMQ
namesrv), answering from the one broker it fronts.

GET_ROUTEINFO_BY_TOPIC answers the route of a topic the broker has, and TOPIC_NOT_EXIST for any
other (the name server creates nothing): a producer then sends with the route of TBW102, which
the broker has while ``autoCreateTopicEnable`` is on, and the broker creates the topic on that
send (:mod:`mqtool.serve.send`). A topic is routed with the broker's perm (TBW102 without
inherit while auto-creation is off, as the broker registers it).
"""

from __future__ import annotations

from mqtool.formats.rules import AUTO_CREATE_TOPIC
from mqtool.refstore.engine import RefStore
from mqtool.remoting import bodies, headers
from mqtool.remoting.codes import RequestCode, ResponseCode
from mqtool.remoting.frame import RemotingCommand
from mqtool.remoting.server import Peer, UnsupportedCode
from mqtool.serve.config import BrokerSettings
from mqtool.serve.send import PERM_INHERIT, suggest_todo


class NameServer:
    """Request handler of the name server port."""

    def __init__(self, store: RefStore, *, cluster: str, broker_name: str, broker_addr: str,
                 settings: BrokerSettings | None = None):
        self.store = store
        self.settings = settings or BrokerSettings()
        self.cluster = cluster
        self.broker_name = broker_name
        self.broker_addr = broker_addr

    @property
    def broker_data(self) -> bodies.BrokerData:
        return bodies.BrokerData(self.cluster, self.broker_name, {0: self.broker_addr})

    async def handle(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand | None:
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return self.route(cmd)
        if cmd.code == RequestCode.GET_BROKER_CLUSTER_INFO:
            return cmd.response(body=bodies.build_cluster_info(self.cluster, [self.broker_data]))
        if cmd.code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
            return cmd.response(body=bodies.build_topic_list(self.store.topics))
        if cmd.code == RequestCode.DELETE_TOPIC_IN_NAMESRV:
            return cmd.response()  # routes are the broker's topics: DELETE_TOPIC_IN_BROKER did it
        raise UnsupportedCode(str(cmd.code))

    def perm(self, topic: str, perm: int) -> int:
        """The perm the broker registers: TBW102 loses inherit while auto-creation is off."""
        if topic == AUTO_CREATE_TOPIC and not self.settings.autoCreateTopicEnable:
            return perm & ~PERM_INHERIT
        return perm

    def route(self, cmd: RemotingCommand) -> RemotingCommand:
        h = headers.decode_header(headers.GetRouteInfoRequestHeader, cmd.ext_fields)
        topic = h.topic
        tc = self.store.topics.get(topic)
        if tc is None:
            return cmd.response(
                ResponseCode.TOPIC_NOT_EXIST,
                "No topic route info in name server for the topic: "
                + topic
                + suggest_todo(self.store.config.v5),
            )
        route = bodies.TopicRouteData(
            [
                bodies.QueueData(
                    self.broker_name,
                    tc.read_queue_nums,
                    tc.write_queue_nums,
                    self.perm(tc.topic_name, tc.perm),
                    tc.topic_sys_flag,
                )
            ],
            [self.broker_data],
        )
        return cmd.response(body=bodies.build_route(route))
