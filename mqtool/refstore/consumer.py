"""Reads and the consumer side: read_message, queues, pull, consumer offsets, ``send_back``
(``asyncConsumerSendMsgBack``) and ``consume``."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from mqtool.formats.commitlog import CommitLogMessage, HostPort, parse_properties
from mqtool.refstore import redelivery
from mqtool.refstore.configs import BrokerConfigs
from mqtool.refstore.dispatch import ConsumeQueues
from mqtool.refstore.logfiles import CommitLogFiles
from mqtool.refstore.put import RecordWriter
from mqtool.refstore.values import PullResult, PutResult, StoreConfig


class Consumers:
    """What consumers do with the store: read queues, pull, commit offsets, send back."""

    def __init__(
        self, config: StoreConfig, clock: Callable[[], int], commitlog: CommitLogFiles,
        configs: BrokerConfigs, queues: ConsumeQueues, writer: RecordWriter,
    ) -> None:
        self.config = config
        self.clock = clock
        self.commitlog = commitlog
        self.configs = configs
        self.queues = queues
        self.writer = writer

    def read_message(self, commit_log_offset: int) -> CommitLogMessage:
        """``lookMessageByOffset``: the record at a commitlog offset."""
        return self.commitlog.read(commit_log_offset)

    def queue_topics(self) -> list[str]:
        """Topics that have consume queues, sorted."""
        return sorted({t for t, _ in self.queues.files})

    def queue_ids(self, topic: str) -> list[int]:
        """Queue ids of ``topic`` that have a consume queue."""
        return sorted(q for (t, q) in self.queues.files if t == topic)

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Next logical offset of a queue (0 when it has none)."""
        return self.queues.next_offset.get((topic, queue_id), 0)

    def iter_queue(
        self, topic: str, queue_id: int, offset: int = 0
    ) -> Iterator[tuple[int, CommitLogMessage]]:
        """``(queue offset, message)`` from ``offset`` to the end of one queue."""
        cq = self.queues.files.get((topic, queue_id))
        if cq is None:
            return
        for off in range(max(offset, cq.min_offset), cq.max_offset):
            unit = cq.get(off)
            if unit is None:
                break
            yield off, self.commitlog.read(unit[0])

    def queue_units(
        self, topic: str, queue_id: int, offset: int = 0
    ) -> Iterator[tuple[int, int, int, int]]:
        """``(queue offset, commitlog offset, size, tagsCode)`` of the units from ``offset`` to
        the end of one queue, without reading the records."""
        cq = self.queues.files.get((topic, queue_id))
        if cq is None:
            return
        get = cq.get
        for off in range(max(offset, cq.min_offset), cq.max_offset):
            unit = get(off)
            if unit is None:
                break
            yield off, unit[0], unit[1], unit[2]

    def send_back(
        self,
        group: str,
        commit_log_offset: int,
        *,
        delay_level: int = 0,
        max_reconsume_times: int | None = None,
    ) -> PutResult:
        """``CONSUMER_SEND_MSG_BACK``: a consumer of ``group`` failed the message at
        ``commit_log_offset``; store the retry copy (via the schedule topic) or the DLQ copy.

        ``max_reconsume_times`` is the client's header value (None: the group's retryMaxTimes).
        """
        cfg = self.configs.group(group)
        ext = self.commitlog.read(commit_log_offset)
        props = parse_properties(ext.properties_raw)
        max_times = cfg.retry_max_times if max_reconsume_times is None else max_reconsume_times
        decision = redelivery.apply_send_back(
            props, topic=ext.topic, group=group, reconsume_times=ext.reconsume_times,
            delay_level=delay_level, max_reconsume_times=max_times,
            offset_msg_id=ext.offset_msg_id,
        )
        if decision.to_dlq:
            self.configs.create_topic(decision.topic, redelivery.DLQ_NUMS_PER_GROUP, perm=6)
            qid = self.writer.rnd.randrange(99999999) % redelivery.DLQ_NUMS_PER_GROUP
        else:
            rq = max(1, cfg.retry_queue_nums)
            self.configs.create_topic(decision.topic, rq, perm=6)
            qid = self.writer.rnd.randrange(99999999) % rq
        now = self.clock()
        return self.writer.put_fields(
            decision.topic, qid, ext.body, props, flag=ext.flag, sys_flag=ext.sys_flag & ~0x30,
            born_timestamp=ext.born_timestamp, born_host=ext.born_host,
            reconsume_times=ext.reconsume_times + 1, store_timestamp=now,
        )

    def send_back_orderly(
        self,
        group: str,
        commit_log_offset: int,
        *,
        max_reconsume_times: int | None = None,
        consume_start_time: int | None = None,
        client_host: str = "127.0.0.1:50001",
        reconsume_times: int | None = None,
        group_locked: bool = True,
    ) -> PutResult:
        """The orderly consumer's path: after its own local retries reach the max, the client
        re-sends the message to ``%RETRY%<group>`` (``ConsumeMessageOrderlyService
        #sendMessageBack``) and the broker dead-letters it (``SendMessageProcessor
        #handleRetryAndDLQ``).

        As the Java client does: the new message takes the consumed message's property map
        (which the pull added MIN_OFFSET/MAX_OFFSET and the orderly service CONSUME_START_TIME
        to), ORIGIN_MESSAGE_ID (kept, else the consumed message's UNIQ_KEY), RETRY_TOPIC,
        RECONSUME_TIME, MAX_RECONSUME_TIMES and DELAY = 3 + reconsumeTimes; it is born at the
        client. The body and compression flag are kept as stored (the Java client would
        re-compress bodies over 4 KiB itself).

        * 4.9.7: RECONSUME_TIME and the stored reconsumeTimes are the local count (not + 1).
        * 5.3.3: the client sends the local count + 1 (#6164).

        The broker's side (dead-letter or not, which DELAY is stored) is
        :func:`~mqtool.refstore.redelivery.handle_retry_and_dlq`, the rule ``mqtool serve`` applies
        too: 4.9.7 keeps the client's DELAY and parks the DLQ copy in ``SCHEDULE_TOPIC_XXXX``
        first (apache/rocketmq #2724); 5.3.3 dead-letters at once with DELAY=-1 while the group
        holds a queue lock (``group_locked``: an orderly consumer does while it consumes).

        ``reconsume_times`` is the client's local count (the failed attempts minus one: each
        local retry adds one in ``checkReconsumeTimes`` without storing anything); default: the
        consumed record's stored value.
        """
        cfg = self.configs.group(group)
        ext = self.commitlog.read(commit_log_offset)
        props = parse_properties(ext.properties_raw)
        cq = self.queues.files.get((ext.topic, ext.queue_id))
        props["MIN_OFFSET"] = str(cq.min_offset if cq else 0)
        props["MAX_OFFSET"] = str(cq.max_offset if cq else 0)
        now = self.clock()
        props["CONSUME_START_TIME"] = str(consume_start_time if consume_start_time else now)
        max_times = cfg.retry_max_times if max_reconsume_times is None else max_reconsume_times
        rt = ext.reconsume_times if reconsume_times is None else reconsume_times
        sent = orderly_resend_properties(
            props, consumed_topic=ext.topic, group=group, local_count=rt, max_times=max_times,
            msg_id=ext.uniq_key or ext.offset_msg_id, client_v5=self.config.v5,
        )
        # the producer sends messageProperties2String(map); the broker decodes a fresh map
        wire = parse_properties(self.writer.encode_props(props))
        if self.writer.cluster:
            wire[redelivery.PROPERTY_CLUSTER] = self.writer.cluster
        # the broker's side: one rule for this store and ``mqtool serve``
        decision = redelivery.handle_retry_and_dlq(
            wire, group=group, reconsume_times=sent, max_reconsume_times=max_times,
            dialect=self.config.dialect, group_locked=group_locked,
        )
        if decision.to_dlq:
            self.configs.create_topic(decision.topic, redelivery.DLQ_NUMS_PER_GROUP, perm=6)
            qid = decision.queue_id or 0
        else:
            tc = self.configs.create_topic(decision.topic, max(1, cfg.retry_queue_nums), perm=6)
            qid = self.writer.rnd.randrange(max(1, tc.write_queue_nums))
        born = HostPort.parse(client_host)
        return self.writer.put_fields(
            decision.topic, qid, ext.body, wire, ext.flag, ext.sys_flag & ~0x30, now, born,
            sent, now,
        )

    def get_consumer_offset(self, group: str, topic: str, queue_id: int) -> int:
        """Committed offset of a group on a queue (-1 when none)."""
        return self.configs.consumer_offsets.get(f"{topic}@{group}", {}).get(queue_id, -1)

    def commit_offset(
        self, group: str, topic: str, queue_id: int, offset: int, *, persist: bool = False
    ) -> None:
        """``ConsumerOffsetManager#commitOffset`` (persisted on flush/close, or now)."""
        self.configs.consumer_offsets.setdefault(f"{topic}@{group}", {})[queue_id] = offset
        self.configs.offsets_dirty = True
        if persist:
            self.configs.persist_consumer_offsets()

    def pull(
        self,
        group: str,
        topic: str,
        queue_id: int,
        *,
        offset: int | None = None,
        max_nums: int = 32,
    ) -> PullResult:
        """``PULL_MESSAGE``: up to ``max_nums`` messages from ``offset`` (default: the group's
        committed offset, else the queue's min offset). Does not commit."""
        cq = self.queues.files.get((topic, queue_id))
        max_off = cq.max_offset if cq else 0
        if offset is None:
            offset = self.get_consumer_offset(group, topic, queue_id)
            if offset < 0:
                offset = cq.min_offset if cq else 0
        msgs: list[CommitLogMessage] = []
        nxt = offset
        if cq is not None:
            for off, m in self.iter_queue(topic, queue_id, offset):
                if len(msgs) >= max_nums:
                    break
                msgs.append(m)
                nxt = off + 1
        return PullResult(topic, queue_id, offset, nxt, max_off, msgs)

    def consume(
        self,
        group: str,
        topic: str,
        handler: Callable[[CommitLogMessage], bool | int],
        *,
        max_nums: int | None = None,
        include_retry: bool = True,
    ) -> dict[str, int]:
        """Run a push-style consumer once over everything available.

        ``handler`` returns True (CONSUME_SUCCESS), False (RECONSUME_LATER: send back with level
        0) or an int (send back with that delay level; negative = straight to the DLQ). Offsets
        are committed. Returns counts: ``ok``, ``retried``, ``dlq``.
        """
        self.configs.group(group)
        counts = {"ok": 0, "retried": 0, "dlq": 0}
        topics = [topic] + ([redelivery.retry_topic(group)] if include_retry else [])
        done = 0
        for t in topics:
            for qid in self.queue_ids(t):
                start = self.get_consumer_offset(group, t, qid)
                for _, m in self.iter_queue(t, qid, max(start, 0)):  # streaming
                    if max_nums is not None and done >= max_nums:
                        break
                    verdict = handler(m)
                    if verdict is True:
                        counts["ok"] += 1
                    else:
                        level = 0 if verdict is False else int(verdict)
                        r = self.send_back(group, m.physical_offset, delay_level=level)
                        to_dlq = r.topic.startswith(redelivery.DLQ_GROUP_TOPIC_PREFIX)
                        counts["dlq" if to_dlq else "retried"] += 1
                    done += 1
                    self.commit_offset(group, t, qid, m.queue_offset + 1)
        return counts


def orderly_resend_properties(
    props: dict[str, str],
    *,
    consumed_topic: str,
    group: str,
    local_count: int,
    max_times: int,
    msg_id: str,
    client_v5: bool,
) -> int:
    """The client's half of an orderly consumer's send-back (``ConsumeMessageOrderlyService
    #sendMessageBack``): turn the consumed message's property map into the new message's, in
    the client's order of puts; returns the send header's reconsumeTimes (``sendKernelImpl``
    takes it from RECONSUME_TIME, which stays in the encoded string).

    ``local_count`` is the consumed message's reconsumeTimes after the local retries (each one
    adds one in ``checkReconsumeTimes``); ``msg_id`` its ``getMsgId()`` (the UNIQ_KEY, else the
    offsetMsgId). A 5.1.1+ client (``client_v5``) sends the count + 1 (apache/rocketmq #6164).
    """
    topic = consumed_topic
    if topic == redelivery.retry_topic(group) and redelivery.PROPERTY_RETRY_TOPIC in props:
        topic = props[redelivery.PROPERTY_RETRY_TOPIC]  # resetRetryAndNamespace
    props[redelivery.PROPERTY_RECONSUME_TIME] = str(local_count)  # checkReconsumeTimes
    if not props.get(redelivery.PROPERTY_ORIGIN_MESSAGE_ID):  # MessageClientExt#getMsgId
        props[redelivery.PROPERTY_ORIGIN_MESSAGE_ID] = msg_id
    props[redelivery.PROPERTY_RETRY_TOPIC] = topic
    sent = local_count + 1 if client_v5 else local_count
    props[redelivery.PROPERTY_RECONSUME_TIME] = str(sent)
    props[redelivery.PROPERTY_MAX_RECONSUME_TIMES] = str(max_times)
    props.pop("TRAN_MSG", None)
    level = redelivery.SEND_BACK_BASE_DELAY_LEVEL + local_count
    props[redelivery.PROPERTY_DELAY_TIME_LEVEL] = str(level)
    return sent
