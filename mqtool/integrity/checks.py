"""Integrity checks of a store in one process, no JVM: what ``mqtool verify`` reports.

Reads the store through :class:`mqtool.store.Store` (read-only maps; the commitlog through its
record walk) and checks:

* the commitlog: the record chain of every file (magic, TOTALSIZE, PHYSICALOFFSET, fields adding
  up), body CRC (and the 5.x ``__CRC32#`` property CRC) when asked, BLANK ends, file sizes, gaps
  between files, zeros in the middle of the data versus a crash's pre-allocated tail;
* consume-queue units against the commitlog: impossible values, units past the valid data, units
  that point at no record or at another queue's record (topic, queueId, queueOffset, size) and
  tagsCodes that are not the record's tag hash; messages that have no unit;
* index headers and entries: entries past the valid data or at no record, key hashes that are
  none of the record's keys, time differences;
* the checkpoint against the data, ``delayOffset.json`` against the ``SCHEDULE_TOPIC_XXXX``
  queues, ``consumerOffset.json`` against the queues, empty or garbled config files and their
  ``.bak``, the abort and lock state.

The rules shared with the Spark audits (which units and messages are not findings) live in
:mod:`mqtool.integrity.rules`. Every finding names the file relative to the store root and the
byte offset inside that file (a commitlog position may follow as ``phy``).
"""

from __future__ import annotations

import mmap
import zlib
from array import array
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from mqtool.formats import kernel
from mqtool.formats.commitlog import (
    CRC32_RESERVED_LEN,
    PROPERTY_CRC32,
    PROPERTY_TAGS,
    BlankRecord,
    CommitLogMessage,
    FileEnd,
    parse_message,
)
from mqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE, MAX_ADDR, tags_code_of
from mqtool.formats.errors import Finding, FormatError, Severity
from mqtool.formats.indexfile import IndexReader, index_key_hash_of, index_key_hashes
from mqtool.formats.javacompat import (
    java_hash_ranges,
    java_hash_unsigned,
    java_token_hashes,
)
from mqtool.formats.kernelwalk import walk_fields
from mqtool.formats.rules import KEY_SEPARATOR
from mqtool.integrity import rules
from mqtool.integrity.meta import _check_checkpoint, _check_configs
from mqtool.integrity.model import (
    _ENTRY,
    _UNIT,
    FileScan,
    IndexScan,
    Messages,
    ProgressFn,
    QueueScan,
    Report,
    _Sink,
)
from mqtool.store import CommitLogFile, Store, map_readonly

__all__ = ["FileScan", "IndexScan", "Messages", "ProgressFn", "QueueScan", "Report", "verify"]


# --- commitlog ------------------------------------------------------------------------------
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


class _Columns:
    """The per-message facts of :class:`Messages`, gathered batch by batch."""

    NAMES = ("phy", "size", "qid", "qoff", "topic", "ts", "tags", "sys", "crc")

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in self.NAMES}
        self.rows = 0
        self.topics: dict[bytes, int] = {}
        self.tag_codes: dict[bytes, int] = {}
        self.keys = _KeyHashes()
        self.pairs = np.empty((4, 1 << 16), dtype=np.int64)

    def picked(self, a: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[
        np.ndarray, np.ndarray
    ]:
        """``string2messageProperties`` of each record (the kernel's split): the pair index of
        TAGS, KEYS and UNIQ_KEY per record (-1: none) and the pairs (key start, key length,
        value start, value length in ``a``)."""
        n = len(starts)
        map_off = np.empty(n + 1, dtype=np.int32)
        picked = np.empty((len(kernel.PICK_NAMES), n), dtype=np.int64)
        while kernel.split_properties(a, starts, lengths, kernel._PICK_BYTES, kernel._PICK_LENS,
                                      self.pairs, map_off, picked) < 0:
            self.pairs = np.empty((4, self.pairs.shape[1] * 2), dtype=np.int64)
        return picked, self.pairs

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
        tid = self.topic_ids(a, f[kernel.F_TOPIC_POS], f[kernel.F_TOPIC_LEN])
        picked, pairs = self.picked(a, f[kernel.F_PROPS_POS], f[kernel.F_PROPS_LEN])
        # tagsCode: the tag's String.hashCode (tags_code_of), 0 without a tag
        tags = np.zeros(n, np.int64)
        i = np.flatnonzero(picked[0] >= 0)
        j = picked[0][i]
        tags[i] = java_hash_ranges(a, pairs[2][j], pairs[3][j]).view(np.int32)
        # index keys (rules.index_keys): UNIQ_KEY, then each KEYS token, as topic#key
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
        crc = (f[kernel.F_CRC_OK] != 0) if check_crc else np.ones(n, bool)
        for k, v in (("phy", f[kernel.F_PHYS]), ("size", f[kernel.F_SIZE]),
                     ("qid", f[kernel.F_QUEUE_ID]), ("qoff", f[kernel.F_QUEUE_OFFSET]),
                     ("topic", tid), ("ts", f[kernel.F_STORE_TS]), ("tags", tags),
                     ("sys", f[kernel.F_SYS_FLAG]), ("crc", crc)):
            self.parts[k].append(np.array(v, dtype=np.int64))
        self.rows += n

    def add_message(self, item: CommitLogMessage, ok: bool) -> None:
        """Add one record the walker decoded (the kernel refused it; none are known)."""
        raw = item.topic.encode("utf-8")
        t = self.topics.setdefault(raw, len(self.topics))
        tag = item.properties.get(PROPERTY_TAGS)
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
    fs: FileScan, sink: _Sink,
) -> None:
    """The body CRC and 5.x ``__CRC32#`` findings of a kernel field table's records."""
    bad = np.flatnonzero(f[kernel.F_CRC_OK] == 0) if check_crc else np.zeros(0, np.int64)
    # the 5.x property CRC: records whose properties end in the reserved __CRC32# slot
    plen = f[kernel.F_PROPS_LEN]
    cand = np.flatnonzero(plen >= CRC32_RESERVED_LEN)
    if cand.size:
        at = (f[kernel.F_PROPS_POS][cand] + plen[cand] - CRC32_RESERVED_LEN)
        head = a[at[:, None] + np.arange(len(_CRC_TAIL))]
        cand = cand[(head == np.frombuffer(_CRC_TAIL, np.uint8)).all(axis=1)]
    for i in sorted(set(bad.tolist()) | set(cand.tolist())):
        pos = int(f[kernel.F_POS, i])
        item = parse_message(buf, pos, file=file.rel, file_start=file.start)
        assert isinstance(item, CommitLogMessage)
        _record_crc(item, file, check_crc, fs, sink)


def _record_crc(
    item: CommitLogMessage, f: CommitLogFile, check_crc: bool, fs: FileScan, sink: _Sink
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


def _scan_commitlog(
    store: Store, sink: _Sink, check_crc: bool, progress: ProgressFn | None
) -> tuple[list[FileScan], Messages]:
    scans: list[FileScan] = []
    cols = _Columns()
    mfs = store.mapped_file_size
    for f in store.commitlog_files:
        fs = FileScan(f, data_end=f.start)
        scans.append(fs)
        if mfs is not None and f.size != mfs:
            sink.add(Finding(
                "layout", f.rel, None,
                f"file size {f.size} differs from the other commitlog files ({mfs}): the broker "
                "refuses to load the commitlog", severity=Severity.ERROR,
                expected=str(mfs), found=str(f.size),
            ))
        buf = store.mapped(f)
        raw = kernel.as_bytes(buf)
        for item in walk_fields(buf, file=f.rel, file_start=f.start, check_crc=check_crc,
                                crc_findings=False):
            if isinstance(item, np.ndarray):
                k = item.shape[1]
                if not k:
                    continue
                _crc_findings(buf, raw, item, f, check_crc, fs, sink)
                cols.add_fields(raw, item, check_crc)
                fs.messages += k
                fs.message_bytes += int(item[kernel.F_SIZE].sum())
                fs.data_end = int(item[kernel.F_PHYS, k - 1] + item[kernel.F_SIZE, k - 1])
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
                if fs.first_break is None:
                    fs.first_break = phy
                sink.add(Finding(
                    item.kind, f.rel, phy - f.start, item.detail, severity=item.severity,
                    expected=item.expected, found=item.found, phy=phy,
                ))
            elif isinstance(item, FileEnd):
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
    return scans, cols.messages()


# --- consume queues -------------------------------------------------------------------------
def _units(path: Path) -> tuple[np.ndarray, int]:
    buf = map_readonly(path)
    try:
        n = len(buf) // CQ_STORE_UNIT_SIZE
        arr = np.frombuffer(buf, dtype=_UNIT, count=n).copy() if n else np.zeros(0, _UNIT)
        return arr, len(buf)
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()


def _scan_queue(
    store: Store, topic: str, qid: int, msgs: Messages, first_start: int, data_end: int,
    sink: _Sink, progress: ProgressFn | None,
) -> QueueScan:
    qdir = store.consumequeue_dir / topic / str(qid)
    names = sorted((p for p in qdir.iterdir() if p.is_file() and p.name.isdigit()
                    and len(p.name) == 20), key=lambda p: int(p.name))
    qs = QueueScan(topic, qid, [])
    sizes = Counter(p.stat().st_size for p in names)
    qs.file_size = sizes.most_common(1)[0][0] if sizes else 0
    offs: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    ended = False
    topic_idx = msgs.topics.index(topic) if topic in msgs.topics else -1
    for p in names:
        rel = f"consumequeue/{topic}/{qid}/{p.name}"
        base = int(p.name)
        arr, size = _units(p)
        qs.files.append((rel, base, size))
        if progress is not None:
            progress(size)
        if size == 0:
            sink.add(Finding("cq", rel, 0, "empty consume-queue file (0 bytes)"))
            continue
        if size % CQ_STORE_UNIT_SIZE:
            sink.add(Finding(
                "cq", rel, size - size % CQ_STORE_UNIT_SIZE,
                f"consume-queue file size {size} is not a multiple of {CQ_STORE_UNIT_SIZE}",
            ))
        if base % CQ_STORE_UNIT_SIZE:
            sink.add(Finding("layout", rel, None,
                             f"file name {base} is not a multiple of {CQ_STORE_UNIT_SIZE}"))
            continue
        if ended:
            written = (arr["offset"] != 0) | (arr["size"] != 0) | (arr["tags"] != 0)
            if written.any():
                i = int(np.flatnonzero(written)[0])
                sink.add(Finding(
                    "cq", rel, i * CQ_STORE_UNIT_SIZE,
                    "units after the end of the queue (an earlier file ends in zeros)",
                ))
            continue
        zero = (arr["offset"] == 0) & (arr["size"] == 0) & (arr["tags"] == 0)
        zi = np.flatnonzero(zero)
        n = int(zi[0]) if zi.size else len(arr)
        if n < len(arr) or size < qs.file_size:
            ended = True
        if n == 0:
            continue
        arr = arr[:n]
        logical = base // CQ_STORE_UNIT_SIZE + np.arange(n, dtype=np.int64)
        offs.append(logical)
        vals.append(arr)
    if offs:
        qs.offsets = np.concatenate(offs)
        allv = np.concatenate(vals)
        qs.phys = allv["offset"].astype(np.int64)
        qs.sizes = allv["size"].astype(np.int64)
        qs.tags = allv["tags"].astype(np.int64)
        qs.units = len(qs.offsets)
        qs.min_offset = int(qs.offsets[0])
        qs.max_offset = int(qs.offsets[-1]) + 1
    elif names:
        qs.min_offset = qs.max_offset = int(names[0].name) // CQ_STORE_UNIT_SIZE
    if not qs.units:
        return qs
    # where each unit lives (file rel, in-file offset)
    file_of = {base // CQ_STORE_UNIT_SIZE: rel for rel, base, _ in qs.files}
    per_file = qs.file_size // CQ_STORE_UNIT_SIZE if qs.file_size else 0

    def where(logical: int) -> tuple[str, int]:
        if per_file:
            fb = logical - logical % per_file
            rel = file_of.get(fb)
            if rel is not None:
                return rel, (logical - fb) * CQ_STORE_UNIT_SIZE
        for rel, base, size in reversed(qs.files):
            if base <= logical * CQ_STORE_UNIT_SIZE < base + size:
                return rel, logical * CQ_STORE_UNIT_SIZE - base
        return qs.files[-1][0], 0

    # vectorised classification of every unit
    impossible = (qs.phys < 0) | (qs.sizes <= 0)
    below = (~impossible) & (qs.phys < first_start)
    past = (~impossible) & (~below) & (qs.phys + qs.sizes > data_end)
    idx = np.searchsorted(msgs.phy, qs.phys) if len(msgs) else np.zeros(qs.units, np.int64)
    idx_c = np.minimum(idx, max(len(msgs) - 1, 0))
    hit = (len(msgs) > 0) & (msgs.phy[idx_c] == qs.phys) if len(msgs) else np.zeros(
        qs.units, bool)
    check = ~(impossible | below | past)
    dangling = check & ~hit
    matched = check & hit
    wrong = np.zeros(qs.units, bool)
    wrong_tags = np.zeros(qs.units, bool)
    if matched.any():
        same = (
            (msgs.topic[idx_c] == topic_idx) & (msgs.queue_id[idx_c] == qid)
            & (msgs.queue_offset[idx_c] == qs.offsets) & (msgs.size[idx_c] == qs.sizes)
        )
        wrong = matched & ~same
        if rules.tags_code_is_tag_hash(topic):
            wrong_tags = (matched & same & (qs.tags > MAX_ADDR)
                          & (msgs.tags_code[idx_c] != qs.tags))
    for i in np.flatnonzero(impossible | past | dangling | wrong | wrong_tags).tolist():
        lo = int(qs.offsets[i])
        rel, pos = where(lo)
        phy, size, tags = int(qs.phys[i]), int(qs.sizes[i]), int(qs.tags[i])
        qs.bad.add(lo)
        unit = f"unit {topic}/{qid}@{lo} -> commitlog offset {phy} size {size}"
        if impossible[i]:
            sink.add(Finding("bad-field", rel, pos, f"{unit}: impossible values (RocketMQ's "
                             "ConsumeQueue.recover stops at this unit)"))
        elif past[i]:
            sink.add(Finding("cq", rel, pos, f"{unit}: points past the valid commitlog data "
                             f"(ends at {data_end})", phy=phy))
        elif dangling[i]:
            sink.add(Finding("cq", rel, pos, f"{unit}: no readable message starts there",
                             phy=phy))
        elif wrong[i]:
            r = int(idx_c[i])
            sink.add(Finding(
                "cq", rel, pos,
                f"{unit}: the message there is {msgs.topics[int(msgs.topic[r])]}/"
                f"{int(msgs.queue_id[r])}@{int(msgs.queue_offset[r])} size {int(msgs.size[r])}",
                phy=phy,
            ))
        else:
            r = int(idx_c[i])
            sink.add(Finding(
                "cq", rel, pos, f"{unit}: tagsCode is not the message's tag hash",
                expected=str(int(msgs.tags_code[r])), found=str(tags), phy=phy,
            ))
    return qs


def _missing_units(
    msgs: Messages, queues: dict[tuple[str, int], QueueScan], files: list[FileScan],
    abort: bool, sink: _Sink,
) -> None:
    """Messages that must have a consume-queue unit and have none (rules.expected_in_cq)."""
    if not len(msgs):
        return
    starts = np.array([s.file.start for s in files], dtype=np.int64)
    for t_idx, topic in enumerate(msgs.topics):
        sel = np.flatnonzero(msgs.topic == t_idx)
        for qid in np.unique(msgs.queue_id[sel]).tolist():
            rows = sel[msgs.queue_id[sel] == qid]
            rows = rows[rules.expected_in_cq(msgs.sys_flag[rows])]
            if not rows.size:
                continue
            qs = queues.get((topic, qid))
            have = qs.phys if qs is not None else np.zeros(0, np.int64)
            qmin = qs.min_offset if qs is not None else 0
            qmax = qs.max_offset if qs is not None else 0
            rows = rows[msgs.queue_offset[rows] >= qmin]
            missing = rows[~np.isin(msgs.phy[rows], have)]
            for r in missing.tolist():
                phy = int(msgs.phy[r])
                fi = int(np.searchsorted(starts, phy, side="right")) - 1
                f = files[fi].file
                qoff = int(msgs.queue_offset[r])
                tail = qoff >= qmax
                sink.add(Finding(
                    "cq", f.rel, phy - f.start,
                    f"message {topic}/{qid}@{qoff} has no consume-queue unit"
                    + ("; not yet dispatched (RocketMQ's recovery rebuilds it)" if tail else ""),
                    severity=Severity.INFO if (tail and abort) else (
                        Severity.WARNING if tail else Severity.ERROR),
                    phy=phy,
                ))


# --- index ----------------------------------------------------------------------------------
_INDEX_CHUNK = 1 << 18  # index entries checked at a time
def _scan_index(
    store: Store, msgs: Messages, first_start: int, data_end: int, sink: _Sink,
    progress: ProgressFn | None,
) -> list[IndexScan]:
    out: list[IndexScan] = []
    d = store.index_dir
    if not d.is_dir():
        return out
    for p in sorted(d.iterdir()):
        if not p.is_file():
            continue
        rel = f"index/{p.name}"
        ix = IndexScan(rel)
        out.append(ix)
        buf = map_readonly(p)
        try:
            if progress is not None:
                progress(len(buf))
            try:
                reader = IndexReader(buf, file=rel)
            except FormatError as e:
                ix.readable = False
                sink.add(Finding("index", rel, e.offset, f"unreadable index file: {e.detail}"))
                continue
            h = reader.header
            g = reader.geometry
            for pr in reader.problems():  # the header and slot table (entries: checked below)
                if pr.offset is not None and pr.offset < g.entry_pos(0):
                    sink.add(Finding("index", rel, pr.offset, pr.detail))
            ix.entries = max(0, h.index_count - 1)
            ix.end_timestamp, ix.begin_timestamp = h.end_timestamp, h.begin_timestamp
            ix.hash_slot_num, ix.index_num = g.hash_slot_num, g.index_num
            if ix.entries == 0:
                continue
            ent = np.frombuffer(buf, dtype=_ENTRY, count=ix.entries, offset=g.entry_pos(1))
            ix.phys = ent["p"].astype(np.int64)
            for c0 in range(0, ix.entries, _INDEX_CHUNK):  # bounded temporaries per chunk
                c1 = min(ix.entries, c0 + _INDEX_CHUNK)
                part = ent[c0:c1]
                kh = part["h"].astype(np.int64)
                phys = ix.phys[c0:c1]
                tds = part["t"].astype(np.int64)
                prev = part["v"].astype(np.int64)
                del part
                nums = np.arange(c0 + 1, c1 + 1, dtype=np.int64)
                below = phys < first_start
                past = (~below) & (phys >= data_end)
                if len(msgs):
                    ii = np.minimum(np.searchsorted(msgs.phy, phys), len(msgs) - 1)
                    hit = msgs.phy[ii] == phys
                else:
                    ii = np.zeros(len(phys), np.int64)
                    hit = np.zeros(len(phys), bool)
                dangling = (~below) & (~past) & (~hit)
                bad_prev = (prev < 0) | (prev >= nums)
                for i in np.flatnonzero(past | dangling | bad_prev).tolist():
                    n = c0 + i + 1
                    pos = g.entry_pos(n)
                    ix.bad_entries.append(n)
                    what = (f"entry {n} (keyHash {int(kh[i])}) -> commitlog offset "
                            f"{int(phys[i])}")
                    if bad_prev[i] and not (past[i] or dangling[i]):
                        sink.add(Finding("index", rel, pos, f"{what}: prevIndex {int(prev[i])} "
                                         "does not name an earlier entry"))
                    elif past[i]:
                        sink.add(Finding("index", rel, pos, f"{what}: points past the valid "
                                         f"commitlog data (ends at {data_end})",
                                         phy=int(phys[i])))
                    else:
                        sink.add(Finding("index", rel, pos, f"{what}: no readable message "
                                         "starts there", phy=int(phys[i])))
                # key hash and time difference of entries that point at a message
                ok = hit & ~below & ~past & ~bad_prev
                rows = ii.astype(np.int64)
                pair = (rows << 31) | kh
                pos_k = np.searchsorted(msgs.key_rows, pair)
                known = (pos_k < len(msgs.key_rows)) & (
                    msgs.key_rows[np.minimum(pos_k, max(len(msgs.key_rows) - 1, 0))] == pair
                ) if len(msgs.key_rows) else np.zeros(len(pair), bool)
                bad_key = ok & ~known
                exp = rules.index_time_diffs(msgs.store_ts[ii] if len(msgs) else phys,
                                             h.begin_timestamp)
                bad_time = ok & known & (nums >= 2) & (h.begin_timestamp > 0) & (exp != tds)
                for i in np.flatnonzero(bad_key).tolist():
                    n = c0 + i + 1
                    ix.bad_entries.append(n)
                    sink.add(Finding(
                        "index", rel, g.entry_pos(n),
                        f"entry {n} -> commitlog offset {int(phys[i])}: keyHash {int(kh[i])} "
                        "is none of the message's index keys", phy=int(phys[i]),
                    ))
                for i in np.flatnonzero(bad_time).tolist():
                    n = c0 + i + 1
                    ix.bad_entries.append(n)
                    sink.add(Finding(
                        "index", rel, g.entry_pos(n),
                        f"entry {n} -> commitlog offset {int(phys[i])}: timeDiff {int(tds[i])} "
                        f"s, the message's store time gives {int(exp[i])} s",
                        expected=str(int(exp[i])), found=str(int(tds[i])), phy=int(phys[i]),
                    ))
            del ent
        finally:
            if isinstance(buf, mmap.mmap):
                try:
                    buf.close()
                except BufferError:  # pragma: no cover - views released above
                    pass
    return out


def verify(
    root: str | Path, *, check_crc: bool = True, progress: ProgressFn | None = None,
    delay_levels: str | None = None, broker_conf: str | Path | None = None,
) -> Report:
    """Check the store at ``root`` (read-only) and return what was read and found."""
    from mqtool.integrity.delay import check_delay_levels, delay_summary
    from mqtool.integrity.timer import check_timer

    sink = _Sink()
    with Store.open(root) as store:
        for f in store.findings:  # layout findings made while opening
            sink.add(f)
        levels = check_delay_levels(store, sink, delay_levels, broker_conf)
        abort = store.abort_exists
        lock = store.lock_state()
        scans, msgs = _scan_commitlog(store, sink, check_crc, progress)
        first_start = scans[0].file.start if scans else 0
        data_end = max((s.data_end for s in scans if s.messages), default=first_start)
        if abort:
            sink.add(Finding("layout", "abort", None, "abort file present: the broker did not "
                             "shut down cleanly; its next start runs the abnormal recovery",
                             severity=Severity.INFO))
        if lock.locked:
            sink.add(Finding("layout", "lock", None, f"the store is locked by pid "
                             f"{lock.holder_pid} (a running broker): what is read may change",
                             severity=Severity.WARNING))
        queues: dict[tuple[str, int], QueueScan] = {}
        for topic, qid in store.queue_ids():
            queues[(topic, qid)] = _scan_queue(
                store, topic, qid, msgs, first_start, data_end, sink, progress)
        _missing_units(msgs, queues, scans, abort, sink)
        indexes = _scan_index(store, msgs, first_start, data_end, sink, progress)
        cp = _check_checkpoint(store, msgs, data_end, abort, sink)
        configs = _check_configs(store, queues, sink)
        timer = check_timer(store, msgs, first_start, data_end, queues, sink)
        for f in store.findings:  # findings the store noted while reading
            if f.kind in ("layout",):
                sink.add(f)
        report = Report(
            Path(store.root), sink.items, scans, msgs, list(queues.values()), indexes, configs,
            cp, abort, {"exists": lock.exists, "locked": lock.locked, "pid": lock.holder_pid},
            store.mapped_file_size, data_end,
            bytes_read=sum(s.file.size for s in scans), check_crc=check_crc,
        )
    report.findings.sort(key=lambda f: (f.file, f.offset if f.offset is not None else -1))
    report.summary = summarize(report)
    report.summary["delayLevels"] = delay_summary(levels)
    if timer is not None:
        report.summary["timer"] = timer
    return report


def summarize(r: Report) -> dict[str, Any]:
    sev = Counter(str(f.severity) for f in r.findings)
    return {
        "store": str(r.root),
        "state": "crashed (abort file present)" if r.abort else "clean shutdown",
        "lock": r.lock,
        "commitlogFiles": len(r.files),
        "commitlogBytes": sum(s.file.size for s in r.files),
        "messages": len(r.messages),
        "messageBytes": int(r.messages.size.sum()) if len(r.messages) else 0,
        "dataEnd": r.data_end,
        "unreadableBytes": sum(s.unreadable_bytes for s in r.files),
        "crcChecked": r.check_crc,
        "consumeQueues": len(r.queues),
        "consumeQueueUnits": sum(q.units for q in r.queues),
        "indexFiles": len(r.indexes),
        "indexEntries": sum(i.entries for i in r.indexes),
        "configFiles": sorted(r.configs),
        "errors": sev.get("error", 0),
        "warnings": sev.get("warning", 0),
        "infos": sev.get("info", 0),
    }
