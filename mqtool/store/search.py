"""Finding records by UNIQ_KEY, ORIGIN_MESSAGE_ID and KEYS: the one search ``msg``, ``index``
and ``trace`` share (:class:`Finder`, :func:`find_by_key`, :func:`find_id`, :func:`search`).

Through the index files when they are usable (``topic#key`` in every topic, then the commitlog
written after the last indexed record, which the index may lag); otherwise by one pass over the
commitlog that looks for the property bytes with ``mmap.find`` (in C) and decodes only the
records that hold them. Either way the commitlog is read by the one walker
(:mod:`mqtool.formats.walker`): records past damage are found, and every unreadable region met is
a finding of the store. When an index file is damaged the search reads the commitlog instead
and says so (``via``).
"""

from __future__ import annotations

import bisect
import mmap
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, cast

from mqtool.formats.commitlog import CommitLogMessage, parse_message
from mqtool.formats.errors import INDEX_DANGLING, Finding, FormatError
from mqtool.formats.indexfile import build_key, index_key_hash
from mqtool.formats.rules import (
    DLQ_GROUP_TOPIC_PREFIX,
    PROPERTY_ORIGIN_MESSAGE_ID,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    index_keys,
)
from mqtool.formats.rules import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX as PROPERTY_UNIQ_KEY
from mqtool.formats.walker import Unreadable

if TYPE_CHECKING:
    from mqtool.store.reader import Store

ProgressFn = Callable[[int, int], None]  # (bytes done, bytes total); same as mqtool.query's


_SCAN_CHUNK = 64 << 20  # bytes searched between progress reports


def _hits(buf: bytes | mmap.mmap, pats: list[bytes], first: int, size: int,
          report: Callable[[int], None] | None) -> set[int]:
    hits: set[int] = set()
    pos = first
    while pos < size:
        end = min(size, pos + _SCAN_CHUNK)
        for p in pats:
            lim = min(size, end + len(p) - 1)
            i = buf.find(p, pos, lim)
            while i != -1 and i < end:
                hits.add(i)
                i = buf.find(p, i + 1, lim)
        if report:
            report(end - first)
        pos = end
    return hits


def search(
    store: Store,
    patterns: Iterable[bytes],
    *,
    start_offset: int = 0,
    progress: ProgressFn | None = None,
) -> list[CommitLogMessage]:
    """Messages whose bytes contain any of ``patterns`` (candidates: callers filter by field),
    in commitlog order, from commitlog ``start_offset`` on.

    Every file in range is walked by record headers (cheap), so damage anywhere in the range is
    noted in ``store.findings``; only records that hold a hit are decoded. A hit inside an
    unreadable region is named by that region's finding.
    """
    pats = [p for p in dict.fromkeys(patterns) if p]
    files = [f for f in store.commitlog_files if f.start + f.size > start_offset]
    total = sum(f.size for f in files)
    done = 0
    found: dict[int, CommitLogMessage] = {}
    if progress:
        progress(0, total)
    for f in files:
        if f.size == 0:
            continue
        first = max(0, start_offset - f.start)
        buf = store.mapped(f)

        def report(n: int, base: int = done) -> None:
            if progress:
                progress(base + n, total)

        hits = sorted(_hits(buf, pats, first, f.size, report)) if pats else []
        done += f.size - first
        starts = [i for i in store.walk_commitlog_file(f, decode=False) if isinstance(i, int)]
        # a hit belongs to the last record that starts at or before it, if it lies inside it
        holding: dict[int, list[int]] = {}
        for h in hits:
            k = bisect.bisect_right(starts, h) - 1
            if k >= 0 and f.start + starts[k] >= start_offset:
                holding.setdefault(starts[k], []).append(h)
        for pos, at in sorted(holding.items()):
            try:
                rec = parse_message(cast(bytes, buf), pos, file=f.rel, file_start=f.start)
            except FormatError as e:
                store.note(Unreadable(
                    e.kind, f.rel, pos, f"record does not decode: {e.detail}",
                    phy=f.start + pos, length=int.from_bytes(buf[pos:pos + 4], "big"),
                ))
                continue
            if isinstance(rec, CommitLogMessage) and at[0] < pos + rec.total_size:
                found[rec.physical_offset] = rec
    if progress:
        progress(total, total)
    return [found[k] for k in sorted(found)]


def walk_from(store: Store, offset: int) -> list[CommitLogMessage]:
    """Every readable message from commitlog ``offset`` to the end of the data (walker)."""
    out: list[CommitLogMessage] = []
    for f in store.commitlog_files:
        if f.start + f.size <= offset:
            continue
        # start at ``offset`` (a record boundary) inside its file, not at the file's start
        for item in store.scan_commitlog_file(f, start=max(offset - f.start, 0)):
            if isinstance(item, CommitLogMessage) and item.physical_offset >= offset:
                out.append(item)
    return out


class Finder:
    """Looks records up by UNIQ_KEY, ORIGIN_MESSAGE_ID and KEYS, by index or by scan.

    ``via`` says how: ``index``, ``scan`` (no index files) or ``scan (index damaged)``.
    """

    def __init__(self, store: Store, progress: ProgressFn | None = None) -> None:
        self.store = store
        self.progress = progress
        if store.index_usable:
            self.via = "index"
        elif store.index_damaged:
            self.via = "scan (index damaged)"
        else:
            self.via = "scan"
        self._tail: list[CommitLogMessage] | None = None
        self.tail_bytes = 0
        self.walked: list[CommitLogMessage] = []  # records read as candidates (collisions too)

    @property
    def by_index(self) -> bool:
        return self.via == "index"

    def tail(self) -> list[CommitLogMessage]:
        """Messages written after the last indexed one (the index may lag the commitlog)."""
        if self._tail is None:
            last = max((r.header.end_phy_offset
                        for _, r in self.store.index_files(entries=False)), default=0)
            tail = walk_from(self.store, last)
            if tail and tail[0].physical_offset == last:
                tail = tail[1:]  # endPhyOffset is the start of the last indexed record
            self._tail = tail
            if tail:
                self.tail_bytes = tail[-1].end_offset - tail[0].physical_offset
        return self._tail

    def _indexed(self, topics: Iterable[str], key: str) -> list[CommitLogMessage]:
        entries: dict[int, tuple[str, int, int]] = {}  # phy -> (index file, entry pos, number)
        for t in topics:
            h = index_key_hash(build_key(t, key))
            for rel, reader in self.store.index_files(entries=False):
                bad: list[FormatError] = []
                for n, e in reader.lookup_hash_at(h, bad=bad):
                    entries.setdefault(e.phy_offset, (rel, reader.geometry.entry_pos(n), n))
                for pr in bad:  # the chain is cut there: keys behind it may be missed
                    self.store.note(Finding("index", rel, pr.offset, f"{pr.detail} "
                                            "(index damaged: the lookup reads the commitlog "
                                            "instead)"))
                    self.store.mark_index_damaged()
        out = []
        for off in sorted(entries):
            m = self.store.try_message_at(off)
            if m is not None:
                out.append(m)
            else:
                self.unresolved(off, *entries[off])
        self.walked.extend(out)
        return out

    def not_carrying(self, key: str) -> list[CommitLogMessage]:
        """Records the index named for ``key`` (read by a lookup) that neither carry ``key``
        nor any index key of the same hash: the record's key does not match its entry."""
        out = []
        for m in self.walked:
            h = index_key_hash(build_key(m.topic, key))
            own = index_keys(m.topic, m.properties)
            if build_key(m.topic, key) not in own and all(index_key_hash(k) != h for k in own):
                out.append(m)
        return out

    def unresolved(self, off: int, rel: str, pos: int, n: int) -> None:
        """An index entry whose commitlog offset holds no readable message: damage in the
        commitlog there (the walker names it), else the entry is wrong and the index cannot be
        trusted (a finding at the entry; the lookup then reads the commitlog)."""
        store = self.store
        if store.live and off >= store.listed_end():
            return  # a record written after the store was opened
        f = store.file_for(off)
        if f is not None:
            for item in store.walk_commitlog_file(f, decode=False):
                if isinstance(item, Unreadable) and item.phy == off:
                    return  # noted by the walk
                if isinstance(item, int) and item == off - f.start:
                    try:  # the header holds, the rest does not decode
                        store.message_at(off)
                    except FormatError as e:
                        store.note(Unreadable(
                            e.kind, f.rel, item, f"record does not decode: {e.detail}",
                            phy=off, length=int.from_bytes(
                                store.mapped(f)[item:item + 4], "big"),
                        ))
                    return
        store.note(Finding(
            INDEX_DANGLING, rel, pos, f"entry {n} -> commitlog offset {off}: no message starts "
            "there (index damaged: the lookup reads the commitlog instead)", phy=off,
        ))
        store.mark_index_damaged()

    def find(
        self, uniq_keys: set[str], origin_ids: set[str], keys: set[str], topic: str | None = None
    ) -> list[CommitLogMessage]:
        """Records whose UNIQ_KEY is in ``uniq_keys``, ORIGIN_MESSAGE_ID in ``origin_ids`` or
        one KEYS token in ``keys`` (restricted to ``topic`` when given, KEYS only)."""
        origin_up = {o.upper() for o in origin_ids}

        def wanted(m: CommitLogMessage) -> bool:
            p = m.properties
            if p.get(PROPERTY_UNIQ_KEY) in uniq_keys:
                return True
            o = p.get(PROPERTY_ORIGIN_MESSAGE_ID)
            if o is not None and o.upper() in origin_up:
                return True
            return bool(keys) and (topic is None or m.topic == topic) and any(
                k in keys for k in m.key_list
            )

        if self.by_index:
            cands = self._by_index(uniq_keys, origin_ids, keys, topic)
            if self.store.index_damaged:  # an entry led nowhere: the index cannot be trusted
                self.via = "scan (index damaged)"
        if not self.by_index:
            pats = [f"{PROPERTY_UNIQ_KEY}\x01{u}".encode() for u in uniq_keys]
            pats += [f"{PROPERTY_ORIGIN_MESSAGE_ID}\x01{o}".encode() for o in origin_ids]
            pats += [k.encode() for k in keys]
            cands = search(self.store, pats, progress=self.progress)
        seen: dict[int, CommitLogMessage] = {}
        for m in cands:
            if wanted(m):
                seen[m.physical_offset] = m
        return [seen[k] for k in sorted(seen)]

    def _by_index(
        self, uniq_keys: set[str], origin_ids: set[str], keys: set[str], topic: str | None
    ) -> list[CommitLogMessage]:
        """Candidates through the index files (plus the commitlog they lag)."""
        topics = self.store.topics()
        cands: list[CommitLogMessage] = []
        for u in uniq_keys:
            cands += self._indexed(topics, u)
        for k in keys:
            cands += self._indexed([topic] if topic else topics, k)
        if origin_ids:
            # copies of a message without UNIQ_KEY: ORIGIN_MESSAGE_ID is not indexed, but
            # the copies keep the original's KEYS; look those up in the copy topics
            copy_topics = [t for t in topics if t == SCHEDULE_TOPIC or t.startswith(
                (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))]
            for o in origin_ids:
                m = self.store.find_by_offset_msg_id(o)
                for k in m.key_list if m else []:
                    cands += self._indexed(copy_topics, k)
        cands += self.tail()
        return cands


def find_by_key(
    store: Store, key: str, *, topic: str | None = None, uniq: bool = False,
    progress: ProgressFn | None = None,
) -> tuple[list[CommitLogMessage], str]:
    """Messages whose UNIQ_KEY (``uniq``) or one KEYS token equals ``key``, and how they were
    found (``via`` of :class:`Finder`).

    Uses the index files when they are usable (every topic tried when none is given; hash
    collisions filtered by reading each record; the commitlog written after the last indexed
    record read too), else one search of the commitlog. The messages come in commitlog order.
    """
    finder = Finder(store, progress)
    if uniq:
        found = finder.find({key}, set(), set())
    else:
        found = finder.find(set(), set(), {key}, topic)

    def matches(m: CommitLogMessage) -> bool:
        if topic is not None and m.topic != topic:
            return False
        return m.uniq_key == key if uniq else key in m.key_list

    return [m for m in found if matches(m)], finder.via


def find_id(store: Store, msg_id: str) -> tuple[list[CommitLogMessage], str]:
    """Every message an offsetMsgId or UNIQ_KEY names, and how it was found."""
    out: dict[int, CommitLogMessage] = {}
    how = []
    m = store.find_by_offset_msg_id(msg_id)
    if m is not None and m.offset_msg_id.upper() == msg_id.upper():
        out[m.physical_offset] = m
        how.append("offsetMsgId")
    found, via = find_by_key(store, msg_id.upper(), uniq=True)
    if not found and msg_id.upper() != msg_id:
        found, via = find_by_key(store, msg_id, uniq=True)
    if found:
        how.append(f"UNIQ_KEY via {via}")
    for f in found:
        out[f.physical_offset] = f
    if not out and m is not None:  # offset names a record, stored under another host
        out[m.physical_offset] = m
        how.append("offsetMsgId (store host differs)")
    return [out[k] for k in sorted(out)], ", ".join(how) or f"searched by {via}"
