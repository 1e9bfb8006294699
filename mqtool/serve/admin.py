"""The administration requests of the broker port (``AdminBrokerProcessor``), as ``mqadmin``
and ``DefaultMQAdminExt`` send them.

* UPDATE_AND_CREATE_TOPIC (17, ``mqadmin updateTopic``): the topic's config is replaced by the
  header's queue numbers, perm, filter type and sysFlag (created when new), after
  ``TopicValidator#validateTopic`` and ``isSystemTopic`` (SYSTEM_ERROR in 4.9.7,
  INVALID_PARAMETER in 5.3.3, with the broker's remark).
"""

from __future__ import annotations

from dataclasses import replace

from mqtool.formats.config.topics import TopicConfig
from mqtool.formats.rules import is_validator_system_topic, topic_refusal
from mqtool.refstore.configs import check_store_name
from mqtool.remoting import headers as H
from mqtool.remoting.codes import ResponseCode
from mqtool.remoting.frame import RemotingCommand
from mqtool.remoting.transport import Peer
from mqtool.serve.core import BrokerCore


class Admin:
    """The admin request handlers of one broker."""

    def __init__(self, broker: BrokerCore) -> None:
        self.broker = broker

    async def update_topic(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand:
        h = H.decode_header(H.CreateTopicRequestHeader, cmd.ext_fields)
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
