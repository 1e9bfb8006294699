"""The commitlog pass of ``mqtool verify``: every file walked once, in windows.

Each commitlog file is walked by :func:`mqtool.formats.field_walker.walk_fields` (the compiled
kernel over good records, the one walker wherever it stops). Per file it records how the data
reads (:class:`FileScan`: messages, data end, first break, unreadable bytes) and adds the
walker's findings, the body-CRC and 5.x ``__CRC32#`` findings, gaps between files and zeros in
the middle of the data. The records come in windows (one kernel field table, at most
:data:`mqtool.formats.field_walker.BATCH` records): each window's compact facts
(:class:`Messages`) are handed to a callback and then dropped, so the pass needs memory for one
window, whatever the store's size.

:class:`MessagesBuilder` builds those facts from kernel field tables (topic ids, tagsCode, index key
hashes); :func:`mqtool.integrity.at.messages_at` builds the same facts for records read at given
offsets (consume-queue units, index entries).
"""

from __future__ import annotations

import os
import zlib
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from mqtool.formats import commitlog_fields as fields
from mqtool.formats.commitlog import (
    CRC32_RESERVED_LEN,
    PROPERTY_CRC32,
    PROPERTY_TAGS,
    BlankRecord,
    CommitLogMessage,
    FileEnd,
    parse_message,
)
from mqtool.formats.consumequeue import tags_code_of
from mqtool.formats.errors import Finding, Severity, TornPropertiesError
from mqtool.formats.indexfile import index_key_hash_of, index_key_hashes
from mqtool.formats.javacompat import (
    java_hash_ranges,
    java_hash_unsigned,
    java_token_hashes,
)
from mqtool.formats.rules import KEY_SEPARATOR
from mqtool.integrity import rules
from mqtool.integrity.model import FileScan, FindingSink, Messages, ProgressFn
from mqtool.store import CommitLogFile, Store

WindowFn = Callable[[Messages], None]
"""Called with the facts of each window of records, in commitlog order."""


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
        ks = rules.index_key_suffixes(props)
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
        """Index keys (rules.index_keys): UNIQ_KEY, then each KEYS token, as topic#key."""
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


_CRC_TAIL = (PROPERTY_CRC32 + "\x01").encode("ascii")


def _crc_findings(
    buf: Any, a: np.ndarray, f: np.ndarray, file: CommitLogFile, check_crc: bool,
    fs: FileScan, sink: FindingSink,
) -> None:
    """The body CRC and 5.x ``__CRC32#`` findings of a kernel field table's records."""
    bad = np.flatnonzero(f[fields.F_CRC_OK] == 0) if check_crc else np.zeros(0, np.int64)
    # the 5.x property CRC: records whose properties end in the reserved __CRC32# slot
    plen = f[fields.F_PROPS_LEN]
    cand = np.flatnonzero(plen >= CRC32_RESERVED_LEN)
    if cand.size:
        at = (f[fields.F_PROPS_POS][cand] + plen[cand] - CRC32_RESERVED_LEN)
        head = a[at[:, None] + np.arange(len(_CRC_TAIL))]
        cand = cand[(head == np.frombuffer(_CRC_TAIL, np.uint8)).all(axis=1)]
    for i in sorted(set(bad.tolist()) | set(cand.tolist())):
        pos = int(f[fields.F_POS, i])
        item = parse_message(buf, pos, file=file.rel, file_start=file.start)
        assert isinstance(item, CommitLogMessage)
        _record_crc(item, file, check_crc, fs, sink)


def _record_crc(
    item: CommitLogMessage, f: CommitLogFile, check_crc: bool, fs: FileScan, sink: FindingSink
) -> bool:
    """Check one record's body CRC and 5.x property CRC; whether the body CRC is good."""
    phy = item.physical_offset
    ok = True
    if check_crc:
        ok = item.body_crc == (zlib.crc32(item.body) & 0x7FFFFFFF)
        if not ok:
            sink.add(Finding(
                "crc-mismatch", f.rel, phy - f.start,
                f"body CRC mismatch ({item.topic}/{item.queue_id}@"
                f"{item.queue_offset})", expected=f"{item.body_crc:#010x}",
                found=f"{zlib.crc32(item.body) & 0x7FFFFFFF:#010x}", phy=phy,
            ))
            if fs.first_break is None:
                fs.first_break = phy  # checkCRCOnRecover stops there
        if PROPERTY_CRC32 in item.properties_raw:
            got = item.prop_crc()
            if got is not None and got[0] != got[1]:
                sink.add(Finding(
                    "crc-mismatch", f.rel, phy - f.start,
                    "5.x __CRC32# property does not match the record",
                    expected=str(got[0]), found=str(got[1]), phy=phy,
                ))
    return ok


def scan_commitlog(
    store: Store, sink: FindingSink, check_crc: bool, progress: ProgressFn | None,
    on_window: WindowFn,
) -> list[FileScan]:
    """Walk every commitlog file (see the module doc); ``on_window`` gets each window's
    facts (with tagsCodes and index key hashes)."""
    scans: list[FileScan] = []
    cols = MessagesBuilder()

    def flush() -> None:
        nonlocal cols
        if cols.rows:
            on_window(cols.messages())
            cols = MessagesBuilder()

    for f in store.commitlog_files:  # (a file of the wrong size is a finding of Store.open)
        fs = FileScan(f, data_end=f.start)
        scans.append(fs)
        buf = store.mapped(f)
        raw = fields.as_bytes(buf)
        try:  # the descriptor lets the walker skip the holes of a sparse (pre-allocated) file
            fd: int | None = os.open(f.path, os.O_RDONLY) if len(buf) else None
        except OSError:
            fd = None
        try:
            for item in store.walk_fields(f, check_crc=check_crc, crc_findings=False, fd=fd):
                if isinstance(item, np.ndarray):
                    k = item.shape[1]
                    if not k:
                        continue
                    _crc_findings(buf, raw, item, f, check_crc, fs, sink)
                    cols.add_fields(raw, item, check_crc)
                    flush()
                    fs.messages += k
                    fs.message_bytes += int(item[fields.F_SIZE].sum())
                    fs.data_end = int(item[fields.F_PHYS, k - 1] + item[fields.F_SIZE, k - 1])
                elif isinstance(item, CommitLogMessage):
                    ok = _record_crc(item, f, check_crc, fs, sink)
                    cols.add_message(item, ok)
                    fs.messages += 1
                    fs.message_bytes += item.total_size
                    fs.data_end = item.end_offset
                elif isinstance(item, BlankRecord):
                    fs.data_end = item.physical_offset
                elif isinstance(item, Finding):  # the walker's unreadable regions
                    pos = item.offset if item.offset is not None else 0
                    phy = item.phy if item.phy is not None else f.start + pos
                    fs.unreadable_bytes += int(getattr(item, "length", 0) or 0)
                    if item.kind == TornPropertiesError.kind:  # recovery keeps the record
                        if fs.first_kept_damage is None:
                            fs.first_kept_damage = phy
                    elif fs.first_break is None:
                        fs.first_break = phy
                    sink.add(Finding(
                        item.kind, f.rel, phy - f.start, item.detail, severity=item.severity,
                        expected=item.expected, found=item.found, phy=phy,
                    ))
                elif isinstance(item, FileEnd):
                    store.walked_ends[f.path] = item
                    fs.end_kind = item.kind
                    if item.kind in ("torn", "corrupt"):
                        pos = item.physical_offset - f.start
                        if fs.first_break is None or item.physical_offset < fs.first_break:
                            fs.first_break = item.physical_offset
                        if fs.unreadable_bytes == 0:
                            fs.unreadable_bytes = f.size - pos
                        sink.add(Finding(
                            "torn-record" if item.kind == "torn" else "corrupt", f.rel, pos,
                            item.detail or "unreadable bytes", phy=item.physical_offset,
                        ))
                    elif item.kind == "zeros" and fs.first_break is None:
                        fs.first_break = item.physical_offset
                        if fs.data_end < item.physical_offset:
                            fs.data_end = item.physical_offset
        finally:
            if fd is not None:
                os.close(fd)
        flush()
        del raw
        if progress is not None:
            progress(f.size)
    # layout across files: gaps, zeros before data
    for a, b in zip(scans, scans[1:], strict=False):
        if a.file.start + a.file.size != b.file.start:
            sink.add(Finding(
                "gap", b.file.rel, 0,
                f"file starts at {b.file.start} but the previous one ends at "
                f"{a.file.start + a.file.size} (commitlog data missing)",
            ))
    last_data = max((i for i, s in enumerate(scans) if s.messages), default=-1)
    for i, s in enumerate(scans):
        if s.end_kind == "zeros" and i < last_data:
            sink.add(Finding(
                "unexpected-zeros", s.file.rel, s.data_end - s.file.start,
                "the data of this file ends in zeros but a later commitlog file holds messages",
                phy=s.data_end,
            ))
        elif s.end_kind == "zeros" and i > last_data and s.messages == 0 and i > 0:
            sink.add(Finding(
                "zeros", s.file.rel, 0,
                "pre-allocated commitlog file, never written (normal after a crash or while the "
                "broker runs)", severity=Severity.INFO,
            ))
    return scans



def message_windows(store: Store, lo: int, hi: int | None = None) -> Iterator[Messages]:
    """The facts of the readable messages with ``lo <= phy < hi``, in commitlog order, one
    window at a time (a walk like :func:`scan_commitlog`'s, without CRC and findings)."""
    for f in store.commitlog_files:
        if f.start + f.size <= lo or (hi is not None and f.start >= hi):
            continue
        buf = store.mapped(f)
        raw = fields.as_bytes(buf)
        cols = MessagesBuilder(keys=False, tags=False)
        for item in store.walk_fields(f):
            if isinstance(item, np.ndarray):
                ph = item[fields.F_PHYS]
                sel = (ph >= lo) if hi is None else ((ph >= lo) & (ph < hi))
                if sel.any():
                    cols.add_fields(raw, np.ascontiguousarray(item[:, sel]), False)
                    yield cols.messages()
                    cols = MessagesBuilder(keys=False, tags=False)
            elif isinstance(item, CommitLogMessage) and item.physical_offset >= lo and (
                    hi is None or item.physical_offset < hi):
                cols.add_message(item, True)
        if cols.rows:
            yield cols.messages()
        del raw
