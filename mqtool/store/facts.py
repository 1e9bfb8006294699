"""Compact facts about records (commitlog offset, size, queue, topic, store time, tagsCode,
sysFlag, body CRC, index key hashes), one column each, in commitlog order.

:class:`MessagesBuilder` builds them from kernel field tables (topic ids, tagsCode, index key
hashes) or from records the walker decoded; ``verify``'s commitlog pass
(:mod:`mqtool.integrity.commitlog_pass`) builds them window by window, and
:func:`mqtool.store.records_at.messages_at` for records read at given offsets (consume-queue
units, index entries).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np

from mqtool.formats.commitlog import PROPERTY_TAGS, CommitLogMessage
from mqtool.formats.consumequeue import tags_code_of
from mqtool.formats.indexfile import index_key_hash_of, index_key_hashes
from mqtool.formats.javacompat import java_hash_ranges, java_hash_unsigned, java_token_hashes
from mqtool.formats.rules import KEY_SEPARATOR, record_keys

SORT_DISTINCT_BELOW = 4096
"""Arrays shorter than this get their distinct values from a sort (:func:`distinct`)."""


def distinct(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``a``, as ``np.unique(a)``. A short array is sorted
    instead: the first ``np.unique`` of a process imports ``numpy.ma`` (tens of milliseconds,
    more than a read command spends on its records)."""
    a = np.asarray(a).ravel()
    if len(a) >= SORT_DISTINCT_BELOW:
        return np.unique(a)
    s = np.sort(a)
    if len(s) < 2:
        return s
    keep = np.empty(len(s), bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


@dataclass
class Messages:
    """Compact facts about every readable message, in commitlog order."""

    phy: np.ndarray
    size: np.ndarray
    queue_id: np.ndarray
    queue_offset: np.ndarray
    topic: np.ndarray  # index into ``topics``
    store_ts: np.ndarray
    tags_code: np.ndarray
    sys_flag: np.ndarray
    crc_ok: np.ndarray
    topics: list[str]
    key_rows: np.ndarray  # sorted (message row << 31 | index key hash) of every index key

    def __len__(self) -> int:
        return len(self.phy)

    def lookup(self, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised :meth:`at`: (row of the message at or after each offset, clamped to the
        table; whether a message starts exactly there)."""
        if not len(self.phy):
            return np.zeros(len(offsets), np.int64), np.zeros(len(offsets), bool)
        rows = np.minimum(np.searchsorted(self.phy, offsets), len(self.phy) - 1)
        return rows, self.phy[rows] == offsets

    def at(self, offset: int) -> int | None:
        """Row of the message starting at commitlog ``offset`` (None: no message starts there)."""
        i = int(np.searchsorted(self.phy, offset))
        return i if i < len(self.phy) and int(self.phy[i]) == offset else None

    _COLUMNS = ("phy", "size", "queue_id", "queue_offset", "topic", "store_ts", "tags_code",
                "sys_flag", "crc_ok")

    @classmethod
    def empty(cls) -> Messages:
        z = np.zeros(0, np.int64)
        return cls(z, z, z, z, z, z, z, z, np.zeros(0, bool), [], z)

    def take(self, rows: np.ndarray) -> Messages:
        """The rows ``rows`` (in that order), with their index keys."""
        cols = {k: getattr(self, k)[rows] for k in self._COLUMNS}
        inv = np.full(len(self), -1, np.int64)
        inv[rows] = np.arange(len(rows), dtype=np.int64)
        kr = self.key_rows
        new = inv[kr >> 31] if len(kr) else np.zeros(0, np.int64)
        keep = new >= 0
        key_rows = np.sort((new[keep] << 31) | (kr[keep] & 0x7FFFFFFF))
        return Messages(**cols, topics=self.topics, key_rows=key_rows)

    @classmethod
    def concat(cls, parts: list[Messages]) -> Messages:
        """One table of ``parts`` (in that order; topic ids and key rows renumbered)."""
        if not parts:
            return cls.empty()
        topics: dict[str, int] = {}
        cols: dict[str, list[np.ndarray]] = {k: [] for k in cls._COLUMNS}
        keys: list[np.ndarray] = []
        base = 0
        for m in parts:
            remap = np.array([topics.setdefault(t, len(topics)) for t in m.topics] or [0],
                             dtype=np.int64)
            for k in cls._COLUMNS:
                v = getattr(m, k)
                cols[k].append(remap[v] if k == "topic" and len(v) else v)
            keys.append(m.key_rows + (base << 31))
            base += len(m)
        return cls(**{k: np.concatenate(v) for k, v in cols.items()}, topics=list(topics),
                   key_rows=np.concatenate(keys))


class _KeyHashes:
    """The index key hashes of every message (``IndexService#buildIndex``'s keys), hashed in
    vectorised batches and kept as ``row << 31 | hash`` (hash is 0..2^31-1)."""

    BATCH = 65_536

    def __init__(self) -> None:
        self._pre: dict[str, int] = {}
        self.rows: array[int] = array("q")
        self.prefixes: list[int] = []
        self.keys: list[str] = []
        self.done: list[np.ndarray] = []

    def add(self, row: int, topic: str, props: dict[str, str]) -> None:
        ks = record_keys(props)  # without their topic# prefix, hashed once per topic
        if not ks:
            return
        pre = self.prefix(topic)
        for k in ks:
            self.rows.append(row)
            self.prefixes.append(pre)
            self.keys.append(k)
        if len(self.keys) >= self.BATCH:
            self._flush()

    def prefix(self, topic: str) -> int:
        """Java hash state of ``topic#`` (the prefix of every index key of the topic)."""
        pre = self._pre.get(topic)
        if pre is None:
            pre = self._pre[topic] = java_hash_unsigned(topic + "#")
        return pre

    def add_states(self, rows: np.ndarray, states: np.ndarray) -> None:
        """Keys of ``rows`` given as ``String.hashCode`` states of ``topic#key``."""
        if len(rows):
            self.done.append((rows.astype(np.int64) << 31) | index_key_hash_of(states))

    def _flush(self) -> None:
        if self.keys:
            h = np.asarray(index_key_hashes(self.prefixes, self.keys), dtype=np.int64)
            self.done.append((np.asarray(self.rows, dtype=np.int64) << 31) | h)
            self.rows, self.prefixes, self.keys = array("q"), [], []

    def finish(self) -> np.ndarray:
        self._flush()
        out = np.concatenate(self.done) if self.done else np.zeros(0, np.int64)
        self.done = []
        out.sort()
        return out


class MessagesBuilder:
    """The per-message facts of :class:`Messages`, gathered batch by batch."""

    NAMES = ("phy", "size", "qid", "qoff", "topic", "ts", "tags", "sys", "crc")

    _pairs = [np.empty((4, 1 << 18), dtype=np.int64)]  # property pairs (scratch, shared)

    def __init__(self, keys: bool = True, tags: bool = True) -> None:
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in self.NAMES}
        self.rows = 0
        self.topics: dict[bytes, int] = {}
        self.with_keys = keys  # also the index key hashes (key_rows)
        self.with_tags = tags  # also the tagsCode (else 0)
        self.keys = _KeyHashes()

    def picked(self, a: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[
        np.ndarray, np.ndarray
    ]:
        """``string2messageProperties`` of each record (the kernel's split): the pair index of
        TAGS, KEYS and UNIQ_KEY per record (-1: none) and the pairs (key start, key length,
        value start, value length in ``a``)."""
        from mqtool.formats import commitlog_fields as fields  # numba: where the kernel runs

        n = len(starts)
        map_off = np.empty(n + 1, dtype=np.int32)
        picked = np.empty((len(fields.PICK_NAMES), n), dtype=np.int64)
        scratch = MessagesBuilder._pairs
        while fields.split_properties(a, starts, lengths, fields._PICK_BYTES, fields._PICK_LENS,
                                      scratch[0], map_off, picked) < 0:
            scratch[0] = np.empty((4, scratch[0].shape[1] * 2), dtype=np.int64)
        return picked, scratch[0]

    def topic_ids(self, a: np.ndarray, pos: np.ndarray, ln: np.ndarray) -> np.ndarray:
        """Topic ids of byte ranges of ``a``: grouped by (String.hashCode, length), each group
        checked byte for byte against its first member (a colliding row is looked up alone)."""
        if not len(pos):
            return np.zeros(0, np.int64)
        h = java_hash_ranges(a, pos, ln).astype(np.int64) | (ln.astype(np.int64) << 32)
        _, first, inv = np.unique(h, return_index=True, return_inverse=True)
        ids = np.empty(len(first), np.int64)
        for u in np.argsort(first, kind="stable").tolist():  # new topics in commitlog order
            r = int(first[u])
            ids[u] = self._topic_id(a, int(pos[r]), int(ln[r]))
        out = ids[inv]
        rep = pos[first][inv]
        lens = ln.astype(np.int64)
        ends = np.cumsum(lens)
        k = np.arange(int(ends[-1]), dtype=np.int64) - np.repeat(ends - lens, lens)
        differ = a[np.repeat(pos, lens) + k] != a[np.repeat(rep, lens) + k]
        if differ.any():
            rows = np.unique(np.searchsorted(ends, np.flatnonzero(differ), side="right"))
            for r in rows.tolist():
                out[r] = self._topic_id(a, int(pos[r]), int(ln[r]))
        return out

    def _topic_id(self, a: np.ndarray, pos: int, ln: int) -> int:
        raw = a[pos : pos + ln].tobytes()
        t = self.topics.get(raw)
        if t is None:
            t = self.topics[raw] = len(self.topics)
        return t

    def add_fields(self, a: np.ndarray, f: np.ndarray, check_crc: bool) -> None:
        """Add the records of a kernel field table (``a``: the file's bytes)."""
        from mqtool.formats import commitlog_fields as fields  # numba: where the kernel runs

        n = f.shape[1]
        rows = self.rows + np.arange(n, dtype=np.int64)
        tid = self.topic_ids(a, f[fields.F_TOPIC_POS], f[fields.F_TOPIC_LEN])
        tags = np.zeros(n, np.int64)
        if self.with_tags or self.with_keys:
            picked, pairs = self.picked(a, f[fields.F_PROPS_POS], f[fields.F_PROPS_LEN])
            # tagsCode: the tag's String.hashCode (tags_code_of), 0 without a tag
            i = np.flatnonzero(picked[0] >= 0)
            j = picked[0][i]
            tags[i] = java_hash_ranges(a, pairs[2][j], pairs[3][j]).view(np.int32)
            if self.with_keys:
                self._add_keys(a, rows, tid, picked, pairs)
        crc = (f[fields.F_CRC_OK] != 0) if check_crc else np.ones(n, bool)
        for k, v in (("phy", f[fields.F_PHYS]), ("size", f[fields.F_SIZE]),
                     ("qid", f[fields.F_QUEUE_ID]), ("qoff", f[fields.F_QUEUE_OFFSET]),
                     ("topic", tid), ("ts", f[fields.F_STORE_TS]), ("tags", tags),
                     ("sys", f[fields.F_SYS_FLAG]), ("crc", crc)):
            self.parts[k].append(np.array(v, dtype=np.int64))
        self.rows += n

    def _add_keys(self, a: np.ndarray, rows: np.ndarray, tid: np.ndarray, picked: np.ndarray,
                  pairs: np.ndarray) -> None:
        """Index keys (formats.rules.index_keys): UNIQ_KEY, then each KEYS token, as topic#key."""
        names = list(self.topics)
        pre = np.array([self.keys.prefix(t.decode("utf-8")) for t in names], dtype=np.uint32)
        i = np.flatnonzero(picked[2] >= 0)
        j = picked[2][i]
        self.keys.add_states(rows[i], java_hash_ranges(a, pairs[2][j], pairs[3][j],
                                                       pre[tid[i]]))
        i = np.flatnonzero(picked[1] >= 0)
        j = picked[1][i]
        row, states = java_token_hashes(a, pairs[2][j], pairs[3][j], KEY_SEPARATOR,
                                        pre[tid[i]])
        self.keys.add_states(rows[i][row], states)

    def add_message(self, item: CommitLogMessage, ok: bool) -> None:
        """Add one record the walker decoded (the kernel refused it; none are known)."""
        raw = item.topic.encode("utf-8")
        t = self.topics.setdefault(raw, len(self.topics))
        tag = item.properties.get(PROPERTY_TAGS)
        if self.with_keys:
            self.keys.add(self.rows, item.topic, item.properties)
        for k, v in (("phy", item.physical_offset), ("size", item.total_size),
                     ("qid", item.queue_id), ("qoff", item.queue_offset), ("topic", t),
                     ("ts", item.store_timestamp), ("tags", tags_code_of(tag) if tag else 0),
                     ("sys", item.sys_flag), ("crc", 1 if ok else 0)):
            self.parts[k].append(np.array([v], dtype=np.int64))
        self.rows += 1

    def messages(self) -> Messages:
        def col(k: str) -> np.ndarray:
            p = self.parts.pop(k)
            return np.concatenate(p) if p else np.zeros(0, np.int64)

        return Messages(
            phy=col("phy"), size=col("size"), queue_id=col("qid"), queue_offset=col("qoff"),
            topic=col("topic"), store_ts=col("ts"), tags_code=col("tags"), sys_flag=col("sys"),
            crc_ok=col("crc").astype(bool),
            topics=[t.decode("utf-8") for t in self.topics],
            key_rows=self.keys.finish(),
        )
