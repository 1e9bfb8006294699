"""The IndexFile writer side (``IndexService``): index keys buffered per record, written in
vectorised batches, new files as they fill; and loading the last two files at open."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mqtool.formats.store_dirs import numbered_files
from mqtool.refstore.key_hashes import JavaHashCache, index_hashes, java_hash_unsigned
from mqtool.refstore.mapped import IndexFileWriter, MappedFile, RefStoreError, index_file_name
from mqtool.refstore.values import StoreConfig

INDEX_BATCH = 1024  # index keys buffered before a vectorised write
#: Keys buffered at most while a write asked of the owner (``IndexBuilder.on_due``) is awaited;
#: past it the put writes them itself.
INDEX_DUE_LIMIT = 8 * INDEX_BATCH


class IndexBuilder:
    """The current and the previous index file, and the keys not yet written."""

    def __init__(
        self, root: Path, config: StoreConfig, clock: Callable[[], int], hashes: JavaHashCache
    ) -> None:
        self.dir = root / "index"
        self.config = config
        self.clock = clock
        self.hashes = hashes
        self.current: IndexFileWriter | None = None
        self.previous: IndexFileWriter | None = None
        self.written_ts = 0  # store time of the last key written (indexMsgTimestamp)
        self._pre: list[int] = []  # unsigned Java hash of "topic#" per buffered key
        self._key: list[str] = []
        self._hash: list[int] = []  # a key's index hash when given, else -1 (from _pre, _key)
        self._unhashed = 0  # buffered keys whose hash is -1
        self._off: list[int] = []
        self._ts: list[int] = []
        self._topic_pre: dict[str, int] = {}
        #: When set, a full batch of keys is not written by the put that filled it: this is
        #: called (once until they are written) and the owner calls :meth:`write_buffered` soon
        #: after (serve: once the request is answered; RocketMQ's IndexService also builds the
        #: index behind the puts). None: the put writes them.
        self.on_due: Callable[[], object] | None = None
        self._due = False

    def load(self) -> None:
        """Open the last two index files (a file killed while being created is removed)."""
        d = self.dir
        d.mkdir(exist_ok=True)
        names = [p.name for p in numbered_files(d, strict=False)]
        size = 40 + self.config.index_hash_slots * 4 + self.config.index_max_entries * 20
        opened: list[IndexFileWriter] = []
        if names and (d / names[-1]).stat().st_size < size:
            (d / names[-1]).unlink()  # killed while creating it: nothing was written to it
            names.pop()
        for name in names[-2:]:
            path = d / name
            if path.stat().st_size != size:
                raise RefStoreError(
                    f"{path}: {path.stat().st_size} bytes, the store's index files are {size} "
                    "bytes (pass the matching StoreConfig)"
                )
            opened.append(
                IndexFileWriter(
                    path, self.config.index_hash_slots, self.config.index_max_entries,
                    create=False,
                )
            )
        if opened and opened[-1].index_count <= 1 and opened[-1].end_phy_offset == 0:
            empty = opened.pop()  # created but never written (or killed before its header)
            empty.close()
            empty.path.unlink()
        if opened:
            self.current = opened[-1]
            self.current.repair_slots()
            self.previous = opened[-2] if len(opened) > 1 else None

    def add(
        self, topic: str, keys: list[str], phys: int, store_timestamp: int, *, recovering: bool
    ) -> None:
        """Buffer a record's keys (UNIQ_KEY and KEYS); during recovery only those the index does
        not hold yet. A full buffer is written."""
        ix = self.current
        if recovering and ix is not None:
            if phys < ix.end_phy_offset:
                return
            if phys == ix.end_phy_offset and ix.index_count > 1:
                have = ix.keys_hashes_at(phys)
                if self.previous is not None and len(have) == ix.index_count - 1:
                    have += self.previous.keys_hashes_at(phys)
                missing: list[str] = []
                for k in keys:
                    h = self.hashes.index_hash(topic, k)
                    if h in have:
                        have.remove(h)
                    else:
                        missing.append(k)
                keys = missing
        self._buffer(topic, keys, [phys] * len(keys), store_timestamp)

    def add_run(self, topic: str, keys: list[str], offsets: list[int],
                store_timestamp: int) -> None:
        """Buffer the keys of records just put, each with its record's commitlog offset; a
        full buffer is written."""
        self._buffer(topic, keys, offsets, store_timestamp)

    def add_hashed(self, hashes: list[int], offsets: list[int], store_timestamp: int) -> None:
        """:meth:`add_run` of keys given by their index hashes (``indexKeyHashMethod`` of
        ``topic#key``, the compiled batch encoder's)."""
        n = len(hashes)
        self._key += [""] * n
        self._pre += [0] * n
        self._hash += hashes
        self._after_buffer(offsets, store_timestamp)

    def topic_prefix(self, topic: str) -> int:
        """The unsigned Java hash state of ``topic#`` (what a key's index hash continues)."""
        pre = self._topic_pre.get(topic)
        if pre is None:
            pre = self._topic_pre[topic] = java_hash_unsigned(topic + "#")
        return pre

    def _buffer(self, topic: str, keys: list[str], offsets: list[int],
                store_timestamp: int) -> None:
        """Buffer keys of one topic, each with its record's offset; a full buffer is written."""
        pre = self.topic_prefix(topic)
        n = len(keys)
        self._key += keys
        self._pre += [pre] * n
        self._hash += [-1] * n
        self._unhashed += n
        self._after_buffer(offsets, store_timestamp)

    def _after_buffer(self, offsets: list[int], store_timestamp: int) -> None:
        self._off += offsets
        self._ts += [store_timestamp] * len(offsets)
        n = len(self._key)
        if n >= INDEX_BATCH:
            if self.on_due is not None and n < INDEX_DUE_LIMIT:
                if not self._due:
                    self._due = True
                    self.on_due()
                return
            try:
                self.write_buffered()
            except RefStoreError:
                # the record and its unit are written: the put stands (the index is built
                # behind the puts, as RocketMQ's dispatch does). Not lost: the keys stay
                # buffered, the next put tries again, and flush() and close() raise the error
                # while it lasts (serve's flush round says it on stderr)
                pass

    def write_buffered(self) -> None:
        """Write the buffered index keys (``IndexService#buildIndex``, batched like RocketMQ's
        asynchronous dispatch; the checkpoint's indexMsgTimestamp only covers written ones, so
        recovery re-indexes whatever a kill lost). Key hashes are computed vectorised."""
        self._due = False
        keys, off, ts = self._key, self._off, self._ts
        if not keys:
            return
        h = self._hash
        if self._unhashed == len(h):
            h = index_hashes(self._pre, keys)
        elif self._unhashed:
            todo = [i for i, v in enumerate(h) if v < 0]
            h = list(h)
            pre = self._pre
            for i, v in zip(todo, index_hashes([pre[i] for i in todo], [keys[i] for i in todo]),
                            strict=True):
                h[i] = v
        start = 0
        try:
            while start < len(h):
                ix = self.current
                if ix is None or ix.index_count >= ix.index_num:
                    ix = self._file_for(off[start], ts[start])
                start += ix.put_many(h, off, ts, start)
        finally:  # what was written leaves the buffer, even when the rest could not be
            if start:
                self.written_ts = ts[start - 1]
                if self._unhashed == len(self._hash):
                    self._unhashed -= start
                elif self._unhashed:
                    self._unhashed -= sum(1 for v in self._hash[:start] if v < 0)
                for buf in (self._pre, self._key, self._hash, self._off, self._ts):
                    del buf[:start]

    def _file_for(self, end_phy: int, end_ts: int) -> IndexFileWriter:
        ix = self.current
        if ix is None or ix.is_full:
            if ix is not None:
                end_phy, end_ts = ix.end_phy_offset, ix.end_timestamp
                if self.previous is not None:
                    self.previous.close()
                self.previous = ix
            ts = self.clock()
            name = index_file_name(ts)
            while (self.dir / name).exists():
                ts += 1
                name = index_file_name(ts)
            ix = IndexFileWriter(
                self.dir / name, self.config.index_hash_slots, self.config.index_max_entries,
                create=True, end_phy_offset=end_phy, end_timestamp=end_ts,
            )
            self.current = ix
        return ix

    def flush_files(self) -> list[MappedFile]:
        """The file a flush makes durable (the current one; the keys buffered are written to it
        first, by :meth:`write_buffered`)."""
        return [self.current.mf] if self.current is not None else []

    def close(self) -> None:
        """Unmap both files."""
        for ix in (self.current, self.previous):
            if ix is not None:
                ix.close()
