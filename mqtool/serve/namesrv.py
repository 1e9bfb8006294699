"""The name server side of ``mqtool serve`` (``DefaultRequestProcessor`` of a RocketMQ
namesrv), answering from the one broker it fronts.

GET_ROUTEINFO_BY_TOPIC creates an unknown topic in the store first, as a broker with
``autoCreateTopicEnable`` would on the first send (clients that cannot fall back to TBW102,
like the C++ 1.0.1 core, need a route up front). Never created this way: ``%DLQ%`` topics, and
any topic the broker would refuse a send to (``TopicValidator``: a blank name, characters
outside ``^[%|a-zA-Z0-9_-]+$``, longer than 127, a not-allowed system topic); those are
answered as the name server answers any topic it has no route for.
"""

from __future__ import annotations

from mqtool.formats.rules import is_not_allowed_send_topic, topic_refusal
from mqtool.refstore import broker as B
from mqtool.refstore.engine import RefStore
from mqtool.remoting import bodies
from mqtool.remoting import headers as H
from mqtool.remoting.codes import RequestCode, ResponseCode
from mqtool.remoting.frame import RemotingCommand
from mqtool.remoting.transport import Peer, UnsupportedCode
from mqtool.serve.broker import suggest_todo


class NameServer:
    """Request handler of the name server port."""

    def __init__(self, store: RefStore, *, cluster: str, broker_name: str, broker_addr: str):
        self.store = store
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
        raise UnsupportedCode(str(cmd.code))

    def route(self, cmd: RemotingCommand) -> RemotingCommand:
        h = H.decode_header(H.GetRouteInfoRequestHeader, cmd.ext_fields)
        topic = h.topic
        tc = self.store.topics.get(topic)
        if (
            tc is None
            and topic_refusal(topic) is None
            and not is_not_allowed_send_topic(topic)
            and not topic.startswith(B.DLQ_GROUP_TOPIC_PREFIX)
        ):
            if topic.startswith(B.RETRY_GROUP_TOPIC_PREFIX):
                group = topic[len(B.RETRY_GROUP_TOPIC_PREFIX) :]
                cfg = self.store.groups.get(group)
                tc = self.store.create_topic(topic, max(1, cfg.retry_queue_nums) if cfg else 1)
            else:
                tc = self.store.create_topic(topic)
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
                    tc.perm,
                    tc.topic_sys_flag,
                )
            ],
            [self.broker_data],
        )
        return cmd.response(body=bodies.build_route(route))
