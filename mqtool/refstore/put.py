"""The put path: encode a message (the one encoder) into the commitlog, then dispatch it."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any

import numpy as np

from mqtool.formats.commitlog import (
    TRANSACTION_ROLLBACK_TYPE,
    HostPort,
    packed_ip,
    parse_properties,
)
from mqtool.formats.consumequeue import CQ_DTYPE
from mqtool.formats.encoder import (
    CRC32_PLACEHOLDER,
    RecordFields,
    magic_for,
    pack_record_into,
    pack_records_into,
    record_head,
    record_size,
    topic_header,
    write_total_size,
)
from mqtool.formats.indexfile import index_key_hash_of
from mqtool.formats.javacompat import hashmap_key_order
from mqtool.formats.rules import gets_cq_unit
from mqtool.refstore import redelivery
from mqtool.refstore.configs import BrokerConfigs, check_store_name
from mqtool.refstore.dispatch import ConsumeQueues
from mqtool.refstore.logfiles import CommitLogFiles
from mqtool.refstore.mapped import CheckpointFile, RefStoreError
from mqtool.refstore.uniqkey import UniqKeyGenerator
from mqtool.refstore.values import BatchItem, Message, PutResult, StoreConfig

DEFAULT_BORN_HOST = HostPort("127.0.0.1", 50000)
"""The born host of a message that names none."""
_CRC_PLACEHOLDER = CRC32_PLACEHOLDER.encode("ascii")
_CRC_KEY = "__CRC32#"
_READ_KEYS = (  # what a unit, the index and a put's result read of a record's properties
    redelivery.PROPERTY_TAGS, redelivery.PROPERTY_KEYS,
    redelivery.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, redelivery.PROPERTY_DELAY_TIME_LEVEL,
)


_BATCH_ENCODER: Any = None  # mqtool.formats.batch_encoder, once load_batch_encoder has run


def load_batch_encoder() -> None:
    """Load the compiled batch encoder (compiled on a fresh install: seconds; then numba's
    cache); until it is loaded, batches take the Python encoder. Serve calls it at start, in
    a thread of its own."""
    global _BATCH_ENCODER
    from mqtool.formats import batch_encoder

    batch_encoder.warm()
    _BATCH_ENCODER = batch_encoder


def _no_batch_ref() -> tuple[Any, Any, int, int, int]:
    return np.frombuffer(b"", dtype=np.uint8), np.zeros(1, dtype=np.int64), -1, -1, -1


_UNSEEN = b"unseen"  # a batch-property set not looked at yet (_batch_tails)


class RecordWriter:
    """Puts records: queue choice, properties in Java's order, the encoder, dispatch."""

    def __init__(
        self, config: StoreConfig, clock: Callable[[], int], uniq: UniqKeyGenerator,
        rnd: random.Random, commitlog: CommitLogFiles, configs: BrokerConfigs,
        queues: ConsumeQueues, checkpoint: CheckpointFile,
    ) -> None:
        self.config = config
        self.clock = clock
        self.uniq = uniq
        self.rnd = rnd  # the broker's random queue choices (send-back, check-max discard)
        self.commitlog = commitlog
        self.configs = configs
        self.queues = queues
        self.checkpoint = checkpoint
        self.store_host = HostPort.parse(config.store_host)
        self.cluster = config.cluster_name
        self.last_record = -1  # commitlog offset of the last record written or recovered
        self._store_ip = packed_ip(self.store_host)
        self._store_v6 = len(self._store_ip) == 16
        self._store_port = self.store_host.port
        self._msg_id_prefix = (
            self._store_ip + self._store_port.to_bytes(4, "big", signed=True)
        ).hex().upper()
        self._msg_id_prefix_b = self._msg_id_prefix.encode("ascii")
        self._max_body = config.max_message_size
        self._props_capacity = config.properties_capacity
        self._trailing_sep = config.v5
        self._prop_crc = config.append_prop_crc
        self._rr: dict[str, int] = {}
        self._topic_hdrs: dict[str, tuple[bytes, int, int]] = {}
        self._prop_orders: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._sent_orders: dict[tuple[str, ...], bool] = {}
        self._born_hosts: dict[str, HostPort] = {}
        # the compiled batch encoder's reference message: its keys' bytes, where each
        # starts, the places of UNIQ_KEY, TAGS and KEYS among them (none yet: no key at all)
        self._batch_ref: tuple[Any, Any, int, int, int] = _no_batch_ref()
        # per batch-property set: what each record's properties end with, None when the
        # compiled batch encoder does not take the batch (its properties have keys a unit reads)
        self._batch_tails: dict[tuple[tuple[str, str], ...], bytes | None] = {}
        self._shapes: dict[tuple[str | None, int, str], tuple[HostPort, bytes, int, int]] = {}

    def put(self, msg: Message, *, as_sent: bool = False) -> PutResult:
        """Put one message (``SendMessageProcessor`` + ``DefaultMessageStore#putMessage``);
        ``as_sent``: see :meth:`.RefStore.put`."""
        tc = self.configs.topics.get(msg.topic) or self.configs.create_topic(msg.topic)
        qid = msg.queue_id
        if qid is None:
            qid = self.next_queue(msg.topic, tc.write_queue_nums)
        elif qid < 0 or (qid >= tc.write_queue_nums and msg.topic != redelivery.SCHEDULE_TOPIC):
            raise RefStoreError(
                f"queue {qid} of topic {msg.topic} does not exist "
                f"(writeQueueNums {tc.write_queue_nums})"
            )
        props: dict[str, str] = dict(msg.properties)
        if not as_sent and redelivery.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in props:
            uniq = self.uniq
            t, c = uniq.next_parts()
            props[redelivery.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq.fix_string + t + c
        if self.cluster:
            props[redelivery.PROPERTY_CLUSTER] = self.cluster
        now = self.clock()
        born = self.born_host(msg.born_host) if msg.born_host else DEFAULT_BORN_HOST
        return self.put_fields(
            msg.topic, qid, msg.body, props, msg.flag, msg.sys_flag,
            msg.born_timestamp if msg.born_timestamp is not None else now, born,
            msg.reconsume_times, now, True, 0,
        )

    def put_batch(
        self,
        msgs: Sequence[Message],
        *,
        queue_id: int | None = None,
        batch_properties: Iterable[tuple[str, str]] = (("WAIT", "true"),),
    ) -> list[PutResult]:
        """A client ``MessageBatch`` (one topic, one queue), as 4.9.7 stores it.

        Every message becomes its own record, written contiguously (never across a file end);
        a record's properties are the message's own string + ``\x02`` + the batch message's
        properties (``WAIT`` and the broker's ``CLUSTER``), hence ``WAIT`` twice, as the real
        stores show (``CommitLog.MessageExtBatchEncoder``). Delayed batches are refused
        (MESSAGE_ILLEGAL), like RocketMQ.
        """
        if not msgs:
            return []
        topic = msgs[0].topic
        if any(m.topic != topic for m in msgs):
            raise RefStoreError("a batch holds messages of one topic")
        return self.put_batch_items(
            topic, queue_id if queue_id is not None else msgs[0].queue_id,
            [BatchItem(m.flag, m.body, dict(m.properties), m.sys_flag, m.born_timestamp,
                       m.born_host, m.reconsume_times) for m in msgs],
            batch_properties)

    def put_batch_items(
        self, topic: str, queue_id: int | None, items: Sequence[BatchItem],
        batch_properties: Iterable[tuple[str, str]],
    ) -> list[PutResult]:
        """:meth:`put_batch` of a batch's messages as :class:`BatchItem` (each ``props`` map
        is the message's own and gets its UNIQ_KEY there when it has none)."""
        if not items:
            return []
        qid = self._batch_queue(topic, queue_id)
        bprops, batch_raw = self._batch_properties(batch_properties)
        tail = "\x02" + batch_raw if batch_raw else ""
        # the keys a unit and the index read: from the batch's properties only when it has them
        merge = any(k in bprops for k in _READ_KEYS)
        now = self.clock()
        topic_hdr, topic_len, magic = self._topic_header(topic)
        uniq_key = redelivery.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
        delay_key = redelivery.PROPERTY_DELAY_TIME_LEVEL
        encode_props, create_uniq = self.encode_props, self.uniq.create
        # per (born host, sysflag): the born host, its packed ip, the record's sysflag and its
        # size without body and properties (a batch's messages share them)
        shapes: dict[tuple[str | None, int], tuple[HostPort, bytes, int, int]] = {}
        shape_key: tuple[str | None, int] | None = None
        shape: tuple[HostPort, bytes, int, int] = (DEFAULT_BORN_HOST, b"", 0, 0)
        records: list[RecordFields] = []
        unit_props: list[dict[str, str]] = []  # each record's properties as read back
        total = 0
        tran = items[0].sys_flag & TRANSACTION_ROLLBACK_TYPE
        one_tran = True  # every record of one transaction type: one dispatch run
        for flag, body, props, sys_flag, born_ts, born_host, times, sent in items:
            if delay_key in props and redelivery.delay_level_of(props) > 0:
                raise RefStoreError("MessageBatch does not support delayed messages")
            if uniq_key not in props:
                props[uniq_key] = create_uniq()
                sent = None
            own = encode_props(props) if sent is None else self.as_sent(sent, props)
            props_b = (own + tail if own and not own.endswith("\x02") else own + batch_raw
                       ).encode("utf-8")
            if shape_key is None or born_host != shape_key[0] or sys_flag != shape_key[1]:
                shape_key = (born_host, sys_flag)
                one_tran = one_tran and sys_flag & TRANSACTION_ROLLBACK_TYPE == tran
                hit = shapes.get(shape_key)
                if hit is None:
                    hit = shapes[shape_key] = self._shape(born_host, sys_flag, topic_len)
                shape = hit
            size = shape[3] + len(body) + len(props_b)
            records.append((size, flag, shape[2], now if born_ts is None else born_ts,
                            shape[1], shape[0].port, times, 0, body, props_b, None))
            # the record's properties read back: its own, then the batch's (the last one wins)
            unit_props.append({**props, **bprops} if merge else props)
            total += size
        cl = self.commitlog
        queues = self.queues
        mf, pos = cl.reserve(total)
        # the units' room before the records: a full disk stops the batch before them
        first = queues.next_offset.get((topic, qid), 0)
        queues.cq(topic, qid).make_room(first, first + len(records) - 1)
        mm, base = mf.mm, mf.file_from_offset
        # every record but the first's TOTALSIZE: the batch's commit point, written below
        pack_records_into(mm, pos, records, magic, qid, first, base + pos, now, self._store_ip,
                          self._store_port, topic_hdr, False, False)
        id_prefix = self._msg_id_prefix
        tags_code = queues.hashes.tags_code
        scheduled = topic == redelivery.SCHEDULE_TOPIC
        tags_key = redelivery.PROPERTY_TAGS
        units: list[tuple[int, int, int]] = []
        out: list[PutResult] = []
        new = tuple.__new__  # a PutResult without the Python-level __new__
        phys = base + pos
        qoff = first
        for rec, props in zip(records, unit_props, strict=True):
            size = rec[0]  # TOTALSIZE
            units.append((phys, size, queues.tags_code(topic, props, now) if scheduled
                          else tags_code(props.get(tags_key))))
            out.append(new(PutResult, (
                phys, size, topic, qid, qoff, now, f"{id_prefix}{phys:016X}", props[uniq_key],
            )))
            phys += size
            qoff += 1
        cl.write_pos = phys
        self.last_record = out[-1].physical_offset
        queues.next_offset[(topic, qid)] = qoff
        if one_tran:
            queues.dispatch_run(topic, qid, first, units, unit_props, now, tran)
        else:
            for i, m in enumerate(items):
                queues.dispatch_run(topic, qid, first + i, units[i : i + 1],
                                    unit_props[i : i + 1], now,
                                    m.sys_flag & TRANSACTION_ROLLBACK_TYPE)
        # the batch's commit point: the first record's TOTALSIZE, so a kill anywhere before it
        # leaves no record of the batch (recovery cuts it and its CQ units)
        write_total_size(mm, pos, records[0][0])
        self.checkpoint.note_put(now, self.queues.index.written_ts)
        return out

    def put_raw_batch(
        self, topic: str, queue_id: int | None, body: bytes, sys_flag: int,
        born_timestamp: int | None, born_host: str | None, reconsume_times: int,
        batch_properties: Iterable[tuple[str, str]],
        later: list[Callable[[], None]] | None = None,
    ) -> list[PutResult] | None:
        """:meth:`put_batch_items` of a batch body as a client sent it (``MessageBatch``
        encoding, uncompressed), by the compiled batch encoder (:mod:`.batch_encoder`): the
        same records, units and index keys. With ``later``, the records are committed when it
        returns and their dispatch (consume-queue units, index keys, the checkpoint's times)
        is appended to ``later`` instead, as RocketMQ dispatches after the put returns: the
        caller runs it before the store is read or written again (a kill before it loses
        nothing: recovery dispatches what the checkpoint has not seen). None, having changed
        nothing, when that encoder is not loaded (:func:`load_batch_encoder`) or the batch is
        not one it takes (a body it refuses, messages whose keys differ, non-ASCII keys or
        tags, a delay, a message without UNIQ_KEY, transactions, the schedule topic, 5.2+
        property CRCs): the caller then decodes the batch for :meth:`put_batch_items`."""
        kern = _BATCH_ENCODER
        if (kern is None or self._prop_crc or topic == redelivery.SCHEDULE_TOPIC
                or sys_flag & TRANSACTION_ROLLBACK_TYPE):
            return None
        batch_properties = tuple(batch_properties)
        tail = self._batch_tails.get(batch_properties, _UNSEEN)
        if tail is _UNSEEN:
            bprops, batch_raw = self._batch_properties(batch_properties)
            # each record's properties: the message's own (no trailing separator) + this
            tail = None if any(k in bprops for k in _READ_KEYS) else (
                "\x02" + batch_raw if batch_raw or self._trailing_sep else "").encode("utf-8")
            if len(self._batch_tails) > 1024:
                self._batch_tails.clear()
            self._batch_tails[batch_properties] = tail
        if tail is None:
            return None
        shape_key = (born_host, sys_flag, topic)
        shape = self._shapes.get(shape_key)
        if shape is None:
            shape = self._shape(born_host, sys_flag, len(topic.encode("utf-8")))
            if len(self._shapes) > 1024:
                self._shapes.clear()
            self._shapes[shape_key] = shape
        src = np.frombuffer(body, dtype=np.uint8)
        rows = np.empty((len(body) // (kern.HEAD_SIZE + 2) + 1, kern.COLUMNS), dtype=np.int64)
        totals = np.empty(3, dtype=np.int64)
        for again in (False, True):
            ref = self._batch_ref
            n = kern.plan(src, *ref, shape[3], len(tail), rows, totals)
            if (n != kern.OTHER_KEYS or again
                    or not self._new_batch_ref(body, int(rows[0, kern.C_PROPS]))):
                break
        if n <= 0:
            return None
        qid = self._batch_queue(topic, queue_id)
        topic_hdr, _topic_len, magic = self._topic_header(topic)
        now = self.clock()
        rows = rows[:n]
        total, n_keys, uniq_bytes = totals.tolist()
        cl = self.commitlog
        queues = self.queues
        mf, pos = cl.reserve(total)
        first = queues.next_offset.get((topic, qid), 0)
        queues.cq(topic, qid).make_room(first, first + n - 1)
        born, born_ip, sf, _fixed = shape
        head = record_head(magic, qid, sf, now if born_timestamp is None else born_timestamp,
                           born_ip, born.port, now, self._store_ip, self._store_port,
                           reconsume_times)
        prefix = self._msg_id_prefix_b
        tags = np.empty(n, dtype=np.int64)
        phys = np.empty(n, dtype=np.int64)
        hashes = np.empty(n_keys, dtype=np.int64)
        hash_phys = np.empty(n_keys, dtype=np.int64)
        text = np.empty(n * (len(prefix) + 17) + uniq_bytes + n, dtype=np.uint8)
        base = mf.file_from_offset + pos
        dst = np.frombuffer(mf.mm, dtype=np.uint8)
        try:
            kern.write(src, rows, dst, pos, np.frombuffer(head, dtype=np.uint8),
                       np.frombuffer(topic_hdr, dtype=np.uint8),
                       np.frombuffer(tail, dtype=np.uint8), base, first, *kern.CRC,
                       queues.index.topic_prefix(topic), np.frombuffer(prefix, dtype=np.uint8),
                       tags, hashes, hash_phys, phys, text)
        finally:
            del dst  # the mapping's export (an unmap needs none left)
        ids = text.tobytes().decode("ascii").split(",")  # n message ids, n UNIQ_KEYs, ""
        offsets = phys.tolist()
        sizes = rows[:, kern.C_SIZE].tolist()
        # PutResults built in C (tuple.__new__ skips the Python-level __new__)
        out: list[PutResult] = list(map(tuple.__new__, repeat(PutResult, n), zip(
            offsets, sizes, repeat(topic, n), repeat(qid, n), range(first, first + n),
            repeat(now, n), ids[:n], ids[n : 2 * n], strict=True)))
        cl.write_pos = base + total
        self.last_record = offsets[-1]
        queues.next_offset[(topic, qid)] = first + n

        def dispatch() -> None:
            units = np.empty(n, dtype=CQ_DTYPE)
            units["offset"] = phys
            units["size"] = rows[:, kern.C_SIZE]
            units["tags"] = tags.astype(np.uint32).view(np.int32)  # tagsCode: the signed hash
            queues.dispatch_hashed_run(topic, qid, first, units.tobytes(), base + total,
                                       index_key_hash_of(hashes).tolist(), hash_phys.tolist(),
                                       now, 0)
            self.checkpoint.note_put(now, self.queues.index.written_ts)

        # the batch's commit point: the first record's TOTALSIZE (see put_batch_items), after
        # its units unless they are dispatched later
        if later is None:
            dispatch()
            write_total_size(mf.mm, pos, sizes[0])
        else:
            write_total_size(mf.mm, pos, sizes[0])
            later.append(dispatch)
        return out

    def _new_batch_ref(self, body: bytes, props_at: int) -> bool:
        """Make the message whose properties start at ``body[props_at]`` the compiled batch
        encoder's reference (its keys are what every message of a batch must have), when
        :meth:`put_batch_items` would store its properties as sent: UNIQ_KEY, no delay, the
        keys in the order the store writes, every segment one pair."""
        plen = int.from_bytes(body[props_at - 2 : props_at], "big")
        try:
            sent = body[props_at : props_at + plen].decode("utf-8")
        except UnicodeDecodeError:
            return False
        props = parse_properties(sent)
        keys = tuple(props)
        if (not sent or redelivery.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in props
                or redelivery.PROPERTY_DELAY_TIME_LEVEL in props
                or not self._in_store_order(keys)
                or sent.count("\x02") + (sent[-1] != "\x02") != len(keys)):
            return False
        names = [k.encode("utf-8") for k in keys]
        at = np.zeros(len(names) + 1, dtype=np.int64)
        at[1:] = np.cumsum([len(k) for k in names])

        def index(key: str) -> int:
            return keys.index(key) if key in props else -1

        self._batch_ref = (
            np.frombuffer(b"".join(names), dtype=np.uint8), at,
            index(redelivery.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            index(redelivery.PROPERTY_TAGS), index(redelivery.PROPERTY_KEYS),
        )
        return True

    def _batch_queue(self, topic: str, queue_id: int | None) -> int:
        """A batch's queue: the given one (checked) or the next round-robin one; the topic is
        created when it does not exist."""
        tc = self.configs.topics.get(topic) or self.configs.create_topic(topic)
        if queue_id is None:
            return self.next_queue(topic, tc.write_queue_nums)
        if queue_id < 0 or queue_id >= tc.write_queue_nums:
            raise RefStoreError(f"queue {queue_id} of topic {topic} does not exist")
        return queue_id

    def _batch_properties(
        self, batch_properties: Iterable[tuple[str, str]],
    ) -> tuple[dict[str, str], str]:
        """A batch's own properties (the broker's CLUSTER added) and their text."""
        bprops = dict(batch_properties)
        if self.cluster:
            bprops[redelivery.PROPERTY_CLUSTER] = self.cluster
        return bprops, self.encode_props(bprops)

    def _shape(
        self, born_host: str | None, sys_flag: int, topic_len: int,
    ) -> tuple[HostPort, bytes, int, int]:
        """A record's born host, its packed ip, the SYSFLAG written (the host bits set from
        the born and store hosts) and the record's size without body and properties."""
        born = self.born_host(born_host) if born_host else DEFAULT_BORN_HOST
        born_ip = packed_ip(born)
        sf = (sys_flag | 0x10) if len(born_ip) == 16 else (sys_flag & ~0x10)
        sf = (sf | 0x20) if self._store_v6 else (sf & ~0x20)
        return born, born_ip, sf, record_size(sf, 0, topic_len, 0)

    def born_host(self, text: str) -> HostPort:
        """``HostPort.parse`` of a message's born host, cached (a connection's sends share one)."""
        born = self._born_hosts.get(text)
        if born is None:
            born = HostPort.parse(text)
            if len(self._born_hosts) < 1024:
                self._born_hosts[text] = born
        return born

    def next_queue(self, topic: str, write_queue_nums: int) -> int:
        """The queue a message without one goes to: round robin over the topic's queues."""
        n = self._rr.get(topic, -1) + 1
        self._rr[topic] = n
        return n % max(1, write_queue_nums)

    def encode_props(self, props: Mapping[str, str]) -> str:
        """``messageProperties2String`` of a map filled in ``props``' order (Java order)."""
        keys = tuple(props)
        ordered = self._prop_orders.get(keys)
        if ordered is None:
            order = hashmap_key_order(keys, self._props_capacity)
            ordered = tuple(keys[i] for i in order)
            if len(self._prop_orders) > 10_000:
                self._prop_orders.clear()
            self._prop_orders[keys] = ordered
        text = "\x02".join([k + "\x01" + props[k] for k in ordered])  # encode_properties
        return text + "\x02" if self._trailing_sep and text else text

    def as_sent(self, sent: str, props: dict[str, str]) -> str:
        """:meth:`encode_props` of ``props`` parsed from ``sent``: ``sent`` itself (its
        separator style made the store's) when its keys are in the order the store writes."""
        keys = tuple(props)
        same = self._in_store_order(keys)
        # every segment one of the keys (none skipped, none repeated): sent is their join
        if not (same and sent and sent.count("\x02") + (sent[-1] != "\x02") == len(keys)):
            return self.encode_props(props)
        if sent.endswith("\x02"):
            return sent if self._trailing_sep else sent[:-1]
        return sent + "\x02" if self._trailing_sep else sent

    def _in_store_order(self, keys: tuple[str, ...]) -> bool:
        """Whether a map filled with ``keys`` in this order is written in this order."""
        same = self._sent_orders.get(keys)
        if same is None:
            order = hashmap_key_order(keys, self._props_capacity)
            same = list(order) == list(range(len(keys)))
            if len(self._sent_orders) > 10_000:
                self._sent_orders.clear()
            self._sent_orders[keys] = same
        return same

    def _topic_header(self, topic: str) -> tuple[bytes, int, int]:
        hit = self._topic_hdrs.get(topic)
        if hit is None:
            check_store_name("topic", topic)  # before any byte of the record is written
            tb = topic.encode("utf-8")
            if len(tb) > 32767:
                raise RefStoreError(f"topic of {len(tb)} bytes is too long")
            hit = (topic_header(tb), len(tb), magic_for(len(tb)))
            self._topic_hdrs[topic] = hit
        return hit

    def put_fields(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        props: dict[str, str],
        flag: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: HostPort,
        reconsume_times: int,
        store_timestamp: int,
        schedule: bool = True,
        prepared_transaction_offset: int = 0,
    ) -> PutResult:
        """Encode and append one record from its fields (the broker's ``putMessage`` after the
        processor: a delayed message is rewritten to ``SCHEDULE_TOPIC_XXXX`` when
        ``schedule``), dispatch it and note it in the checkpoint."""
        tran = sys_flag & TRANSACTION_ROLLBACK_TYPE
        normal = gets_cq_unit(tran)  # NOT/COMMIT: a queue offset, a unit, may be delayed
        if (
            schedule
            and normal
            and redelivery.PROPERTY_DELAY_TIME_LEVEL in props
            and redelivery.delay_level_of(props) > 0
        ):
            topic, queue_id = redelivery.rewrite_for_schedule(
                props, topic=topic, queue_id=queue_id, max_delay_level=self.queues.max_delay_level
            )
        if _CRC_KEY in props:  # a copy of a 5.x record: its CRC belongs to the old record
            del props[_CRC_KEY]
        props_b = self.encode_props(props).encode("utf-8")
        if self._prop_crc:
            props_b += _CRC_PLACEHOLDER
        if len(props_b) > 32767:
            raise RefStoreError(f"properties of {len(props_b)} bytes exceed 32767")
        if len(body) > self._max_body:
            raise RefStoreError(
                f"message body of {len(body)} bytes exceeds maxMessageSize {self._max_body}"
            )
        topic_hdr, topic_len, magic = self._topic_header(topic)
        born_ip = packed_ip(born_host)
        sf = (sys_flag | 0x10) if len(born_ip) == 16 else (sys_flag & ~0x10)
        sf = (sf | 0x20) if self._store_v6 else (sf & ~0x20)
        size = record_size(sf, len(body), topic_len, len(props_b))
        key = (topic, queue_id)
        queue_offset = self.queues.next_offset.get(key, 0) if normal else 0
        cl = self.commitlog
        mf, pos = cl.reserve(size)
        if normal:  # the unit's room before the record: a full disk stops the put before it
            self.queues.cq(topic, queue_id).make_room(queue_offset, queue_offset)
        phys = mf.file_from_offset + pos
        pack_record_into(
            mf.mm, pos, size, magic, queue_id, flag, queue_offset, phys, sf,
            born_timestamp, born_ip, born_host.port, store_timestamp, self._store_ip,
            self._store_port, reconsume_times, prepared_transaction_offset, body,
            topic_hdr, props_b, self._prop_crc,
        )
        cl.write_pos = phys + size
        self.last_record = phys
        if normal:
            self.queues.next_offset[key] = queue_offset + 1
        tags_code = self.queues.tags_code(topic, props, store_timestamp)
        self.queues.dispatch_fields(
            topic, queue_id, queue_offset, phys, size, tags_code, props, store_timestamp, tran,
            False,
        )
        self.checkpoint.note_put(store_timestamp, self.queues.index.written_ts)
        return PutResult(
            phys, size, topic, queue_id, queue_offset, store_timestamp,
            f"{self._msg_id_prefix}{phys:016X}",
            props.get(redelivery.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        )
