"""Dispatch of a stored record (``CommitLogDispatcher``): its consume-queue unit, with the
tagsCode, and its index keys (handed to the :class:`~mqtool.refstore.index.IndexBuilder`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from mqtool.formats.commitlog import TRANSACTION_ROLLBACK_TYPE, CommitLogMessage
from mqtool.formats.rules import gets_cq_unit, is_indexed, record_keys
from mqtool.formats.store_dirs import CONSUMEQUEUE_DIR, queue_dirs
from mqtool.refstore import redelivery
from mqtool.refstore.configs import check_store_name
from mqtool.refstore.index import IndexBuilder
from mqtool.refstore.key_hashes import JavaHashCache
from mqtool.refstore.mapped import ConsumeQueueFiles, MappedFile
from mqtool.refstore.values import StoreConfig


class ConsumeQueues:
    """The store's consume queues (one :class:`ConsumeQueueFiles` per topic and queue), the next
    queue offset of each, and the dispatch of records to them and to the index."""

    def __init__(
        self, root: Path, config: StoreConfig, delay_table: dict[int, int],
        hashes: JavaHashCache, index: IndexBuilder,
    ) -> None:
        self.root = root
        self.config = config
        self.delay_table = delay_table
        self.max_delay_level = max(delay_table)
        self.hashes = hashes
        self.index = index
        self.files: dict[tuple[str, int], ConsumeQueueFiles] = {}
        self.next_offset: dict[tuple[str, int], int] = {}  # ``topicQueueTable``

    def open_existing(self) -> None:
        """Open every consume queue the store has on disk."""
        for topic, qid, qdir in queue_dirs(self.root / CONSUMEQUEUE_DIR):
            self.files[(topic, qid)] = ConsumeQueueFiles(qdir, self.config.cq_entries_per_file)

    def offsets_from_files(self) -> None:
        """Every queue's next offset as its files say (after recovery cut them)."""
        self.next_offset = {k: cq.max_offset for k, cq in self.files.items()}

    def get(self, topic: str, queue_id: int) -> ConsumeQueueFiles | None:
        """The queue's files, None when the queue has none."""
        return self.files.get((topic, queue_id))

    def cq(self, topic: str, queue_id: int) -> ConsumeQueueFiles:
        """The queue's files, created when missing."""
        cq = self.files.get((topic, queue_id))
        if cq is None:
            check_store_name("topic", topic)  # the one place a topic becomes a path
            cq = ConsumeQueueFiles(self.root / CONSUMEQUEUE_DIR / topic / str(queue_id),
                                   self.config.cq_entries_per_file)
            self.files[(topic, queue_id)] = cq
        return cq

    def tags_code(self, topic: str, props: Mapping[str, str], store_timestamp: int) -> int:
        """A unit's tagsCode: the deliver time for ``SCHEDULE_TOPIC_XXXX``, else the TAGS hash."""
        if topic == redelivery.SCHEDULE_TOPIC:
            t = props.get(redelivery.PROPERTY_DELAY_TIME_LEVEL)
            if t is not None:
                level = min(int(t), self.max_delay_level)
                if level > 0:
                    return redelivery.compute_deliver_timestamp(
                        self.delay_table, level, store_timestamp
                    )
        return self.hashes.tags_code(props.get(redelivery.PROPERTY_TAGS))

    def dispatch(self, msg: CommitLogMessage, *, recovering: bool) -> None:
        """Dispatch a record read back from the commitlog."""
        props = msg.properties
        self.dispatch_fields(
            msg.topic, msg.queue_id, msg.queue_offset, msg.physical_offset, msg.total_size,
            self.tags_code(msg.topic, props, msg.store_timestamp), props, msg.store_timestamp,
            msg.sys_flag & TRANSACTION_ROLLBACK_TYPE, recovering,
        )

    def dispatch_fields(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        phys: int,
        size: int,
        tags_code: int,
        props: Mapping[str, str],
        store_timestamp: int,
        tran: int,
        recovering: bool,
    ) -> None:
        """Dispatch a record the writer has just put (its fields as written)."""
        if gets_cq_unit(tran):
            cq = self.files.get((topic, queue_id)) or self.cq(topic, queue_id)
            if not recovering or queue_offset >= cq.max_offset:
                cq.put(queue_offset, phys, size, tags_code)
                if recovering:
                    key = (topic, queue_id)
                    self.next_offset[key] = max(self.next_offset.get(key, 0), queue_offset + 1)
        if not self.indexes(tran):
            return
        keys = record_keys(props)
        if keys:
            self.index.add(topic, keys, phys, store_timestamp, recovering=recovering)

    def dispatch_run(
        self, topic: str, queue_id: int, first: int, units: Sequence[tuple[int, int, int]],
        props: Sequence[Mapping[str, str]], store_timestamp: int, tran: int,
    ) -> None:
        """:meth:`dispatch_fields` of records the writer has just put one after the other into
        one queue (a batch): their ``units`` (phys, size, tagsCode) for the queue offsets from
        ``first`` on, and each one's properties."""
        if gets_cq_unit(tran):
            self.cq(topic, queue_id).put_run(first, units)
        if self.indexes(tran):
            keys: list[str] = []
            offsets: list[int] = []
            for (phys, _size, _tags), p in zip(units, props, strict=True):
                ks = record_keys(p)
                keys += ks
                offsets += [phys] * len(ks)
            self.index.add_run(topic, keys, offsets, store_timestamp)

    def dispatch_hashed_run(
        self, topic: str, queue_id: int, first: int, units: bytes, end_phys: int,
        hashes: list[int], offsets: list[int], store_timestamp: int, tran: int,
    ) -> None:
        """:meth:`dispatch_run` of units already packed (``CQ_DTYPE``; ``end_phys``: the last
        record's end) and index keys given as their index hashes, each with its record's
        offset (the compiled batch encoder's)."""
        if gets_cq_unit(tran):
            self.cq(topic, queue_id).put_packed(first, units, end_phys)
        if self.indexes(tran):
            self.index.add_hashed(hashes, offsets, store_timestamp)

    def indexes(self, tran: int) -> bool:
        """Whether a record of transaction type ``tran`` gets index entries."""
        return self.config.message_index_enable and is_indexed(tran)

    def destroy_topic(self, topic: str) -> None:
        """Every consume queue of ``topic`` deleted (each queue's directory with it), its next
        offsets forgotten (``DefaultMessageStore#cleanUnusedTopic``, 5.3.3 ``deleteTopics``: a
        topic created again starts at 0)."""
        for key in [k for k in self.files if k[0] == topic]:
            self.files.pop(key).destroy()
            self.next_offset.pop(key, None)
        tdir = self.root / CONSUMEQUEUE_DIR / topic
        if self.config.v5 and tdir.is_dir() and not any(tdir.iterdir()):
            tdir.rmdir()  # 5.3.3 deleteTopics: the emptied topic directory too

    def close(self) -> None:
        """Unmap every queue's files."""
        for cq in self.files.values():
            cq.close()

    def flush_files(self) -> list[MappedFile]:
        """The files a flush makes durable: each queue's last two."""
        return [mf for cq in self.files.values() for mf in cq.flush_files()]

