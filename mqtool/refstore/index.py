"""Dispatch of a stored record: consume-queue units and IndexFile entries
(``CommitLogDispatcher``)."""

from __future__ import annotations

from collections.abc import Mapping

from mqtool.formats.commitlog import (
    TRANSACTION_ROLLBACK_TYPE,
    CommitLogMessage,
)
from mqtool.formats.rules import gets_cq_unit, is_indexed
from mqtool.refstore import broker as B
from mqtool.refstore.configs import ConfigsMixin, check_store_name
from mqtool.refstore.fastpath import index_hashes, java_hash_unsigned
from mqtool.refstore.mapped import (
    ConsumeQueueFiles,
    IndexFileWriter,
    RefStoreError,
    index_file_name,
)
from mqtool.refstore.state import (
    _UNIQ,
    INDEX_BATCH,
)


class IndexMixin(ConfigsMixin):
    """Dispatch to consume queues and the index."""

    def _cq(self, topic: str, queue_id: int) -> ConsumeQueueFiles:
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            check_store_name("topic", topic)  # the one place a topic becomes a path
            cq = ConsumeQueueFiles(
                self.root / "consumequeue" / topic / str(queue_id), self.config.cq_entries_per_file
            )
            self._cqs[(topic, queue_id)] = cq
        return cq

    def _tags_code(self, topic: str, props: Mapping[str, str], store_timestamp: int) -> int:
        if topic == B.SCHEDULE_TOPIC:
            t = props.get(B.PROPERTY_DELAY_TIME_LEVEL)
            if t is not None:
                level = min(int(t), self.max_delay_level)
                if level > 0:
                    return B.compute_deliver_timestamp(self._delay_table, level, store_timestamp)
        return self._hashes.tags_code(props.get(B.PROPERTY_TAGS))

    def _dispatch(self, msg: CommitLogMessage, *, recovering: bool) -> None:
        props = msg.properties
        self._dispatch_fast(
            msg.topic, msg.queue_id, msg.queue_offset, msg.physical_offset, msg.total_size,
            self._tags_code(msg.topic, props, msg.store_timestamp), props, msg.store_timestamp,
            msg.sys_flag & TRANSACTION_ROLLBACK_TYPE, recovering,
        )

    def _dispatch_fast(
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
        if gets_cq_unit(tran):
            cq = self._cqs.get((topic, queue_id)) or self._cq(topic, queue_id)
            if not recovering or queue_offset >= cq.max_offset:
                cq.put(queue_offset, phys, size, tags_code)
                if recovering:
                    key = (topic, queue_id)
                    self._queue_table[key] = max(self._queue_table.get(key, 0), queue_offset + 1)
        if not self._index_enable or not is_indexed(tran):
            return
        keys: list[str] = []
        uniq = props.get(_UNIQ)
        if uniq is not None:
            keys.append(uniq)
        kv = props.get(B.PROPERTY_KEYS)
        if kv:
            keys.extend(k for k in kv.split(" ") if k)
        if not keys:
            return
        ix = self._index
        if recovering and ix is not None:
            if phys < ix.end_phy_offset:
                return
            if phys == ix.end_phy_offset and ix.index_count > 1:
                have = ix.keys_hashes_at(phys)
                if self._prev_index is not None and len(have) == ix.index_count - 1:
                    have += self._prev_index.keys_hashes_at(phys)
                missing: list[str] = []
                for k in keys:
                    h = self._hashes.index_hash(topic, k)
                    if h in have:
                        have.remove(h)
                    else:
                        missing.append(k)
                keys = missing
        pre = self._topic_pre.get(topic)
        if pre is None:
            pre = self._topic_pre[topic] = java_hash_unsigned(topic + "#")
        for k in keys:
            self._ix_pre.append(pre)
            self._ix_key.append(k)
            self._ix_off.append(phys)
            self._ix_ts.append(store_timestamp)
        if len(self._ix_key) >= INDEX_BATCH:
            try:
                self._flush_index()
            except RefStoreError:
                # the record and its unit are written: the put stands (the index is built
                # behind the puts, as RocketMQ's dispatch does). Not lost: the keys stay
                # buffered, the next put tries again, and flush() and close() raise the error
                # while it lasts (serve's flush round says it on stderr)
                pass

    def _flush_index(self) -> None:
        """Write the buffered index keys (``IndexService#buildIndex``, batched like RocketMQ's
        asynchronous dispatch; the checkpoint's indexMsgTimestamp only covers written ones, so
        recovery re-indexes whatever a kill lost). Key hashes are computed vectorised."""
        keys, off, ts = self._ix_key, self._ix_off, self._ix_ts
        if not keys:
            return
        h = index_hashes(self._ix_pre, keys)
        start = 0
        try:
            while start < len(h):
                ix = self._index
                if ix is None or ix.index_count >= ix.index_num:
                    ix = self._index_file(off[start], ts[start])
                start += ix.put_many(h, off, ts, start)
        finally:  # what was written leaves the buffer, even when the rest could not be
            if start:
                self._index_ts = ts[start - 1]
                for buf in (self._ix_pre, self._ix_key, self._ix_off, self._ix_ts):
                    del buf[:start]

    def _index_file(self, end_phy: int, end_ts: int) -> IndexFileWriter:
        ix = self._index
        if ix is None or ix.is_full:
            if ix is not None:
                end_phy, end_ts = ix.end_phy_offset, ix.end_timestamp
                if self._prev_index is not None:
                    self._prev_index.close()
                self._prev_index = ix
            ts = self.clock()
            d = self.root / "index"
            name = index_file_name(ts)
            while (d / name).exists():
                ts += 1
                name = index_file_name(ts)
            ix = IndexFileWriter(
                d / name, self.config.index_hash_slots, self.config.index_max_entries,
                create=True, end_phy_offset=end_phy, end_timestamp=end_ts,
            )
            self._index = ix
        return ix
