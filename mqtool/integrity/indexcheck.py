"""Index files in ``mqtool verify``: headers, slot tables and every entry against its record.

Each index file's header and slot table are checked by
:class:`mqtool.formats.indexfile.IndexReader` when verify starts. Its entries are then checked
against the records at their commitlog offsets: an entry past the valid data or at no record, a
prevIndex that names no earlier entry, a keyHash that is none of the record's index keys
(``IndexService#buildIndex``: UNIQ_KEY and each KEYS token, as ``topic#key``), a timeDiff that
is not the record's store time minus the file's begin time.

The broker writes entries in commitlog order, so :class:`IndexCheck` joins each file's entries
to the windows of the commitlog pass (:meth:`IndexCheck.window`, a cursor per file): entries
that point into the window are checked against its records. An entry behind the window (out of
order) is checked against the record read in place at its offset
(:func:`mqtool.store.records_at.messages_at`), and so is every entry no window took
(:meth:`IndexCheck.finish`, once the valid data end is known). Memory is one block of entries
per file, whatever the number of entries.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mqtool.formats.errors import Finding, FormatError
from mqtool.formats.indexfile import INDEX_ENTRY_DTYPE, IndexGeometry, IndexReader
from mqtool.integrity import dispatch_rules
from mqtool.integrity.verify_report import FindingSink, IndexScan, ProgressFn
from mqtool.store.facts import Messages
from mqtool.store.files import map_readonly
from mqtool.store.indexfiles import listed_index_files
from mqtool.store.reader import Store
from mqtool.store.records_at import messages_at

_Block = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # keyHash, phy, timeDiff, prev


@dataclass
class _File:
    """An index file with entries, and how far :class:`IndexCheck` has checked them."""

    ix: IndexScan
    geometry: IndexGeometry
    cursor: int = 0  # entries before it (0-based) are checked
    block: _Block | None = None  # entries read from the cursor on, not yet checked
    block_at: int = 0


def map_index_file(p: Path, store_live: bool) -> bytes | mmap.mmap | None:
    """An index file's bytes to check, mapped read-only; None for a file deleted since the
    listing (a running broker's cleanup) or, in a store a running broker holds
    (``store_live``), an empty file (one it is making: no entries yet)."""
    try:
        buf = map_readonly(p)
    except FileNotFoundError:
        return None
    if not buf and store_live:
        return None
    return buf


def index_file_findings(
    buf: bytes | mmap.mmap, rel: str, *, live: bool = False
) -> tuple[IndexReader | None, list[Finding]]:
    """An index file's header and slot table as verify checks them, before its entries: the
    reader, or None when the header or the geometry cannot be read; and the findings (``rel``:
    the file's name under the store, ``live``: a running broker writes it). ``mqtool scan``
    checks each index file with this too."""
    try:
        reader = IndexReader(buf, file=rel, live=live)
    except FormatError as e:
        return None, [Finding("index", rel, e.offset, f"unreadable index file: {e.detail}")]
    first_entry = reader.geometry.entry_pos(0)
    return reader, [Finding("index", rel, pr.offset, pr.detail)
                    for pr in reader.problems(entries=False)  # header and slot table
                    if pr.offset is not None and pr.offset < first_entry]


class IndexCheck:
    """Every index file of a store, checked along the commitlog pass (see the module doc)."""

    BLOCK = IndexScan.CHUNK

    def __init__(
        self, store: Store, first_start: int, sink: FindingSink, progress: ProgressFn | None,
        keep: bool, *, open_files: bool = True,
    ) -> None:
        self.store, self.first_start, self.sink, self.keep = store, first_start, sink, keep
        self.indexes: list[IndexScan] = []
        self.files: list[_File] = []
        if not open_files:
            return
        names = listed_index_files(store.index_dir, sink.add)
        for p in names:  # a running broker writes its newest file only
            self._open(p, progress, store.live and p == names[-1])

    def _open(self, p: Path, progress: ProgressFn | None, live: bool) -> None:
        rel = f"index/{p.name}"
        buf = map_index_file(p, self.store.live)
        if buf is None:
            return
        try:
            if progress is not None:
                progress(len(buf))
            reader, found = index_file_findings(buf, rel, live=live)
            for f in found:
                self.sink.add(f)
            if reader is None:
                self.indexes.append(IndexScan(rel, path=p, readable=False))
                return
            self._add(rel, p, reader)
            del reader
        finally:
            if isinstance(buf, mmap.mmap):
                try:
                    buf.close()
                except BufferError:  # pragma: no cover - views released above
                    pass

    def _add(self, rel: str, path: Path, reader: IndexReader) -> None:
        """The scan of an index file that opened (its header as ``reader`` read it)."""
        h, g = reader.header, reader.geometry
        ix = IndexScan(rel, path=path)
        ix.entries = max(0, h.index_count - 1)
        ix.end_timestamp, ix.begin_timestamp = h.end_timestamp, h.begin_timestamp
        ix.hash_slot_num, ix.index_num = g.hash_slot_num, g.index_num
        ix.entry_start = g.entry_pos(1)
        self.indexes.append(ix)
        if ix.entries:
            self.files.append(_File(ix, g))

    @classmethod
    def of_store(cls, store: Store, sink: FindingSink) -> IndexCheck:
        """The index files as the store's key lookups opened them
        (:meth:`Store.index_files`: their header and slot table checked, damaged ones left
        out), for :meth:`records`."""
        first = store.commitlog_files[0].start if store.commitlog_files else 0
        check = cls(store, first, sink, None, False, open_files=False)
        for rel, reader in store.index_files(entries=False):
            check._add(rel, store.root / rel, reader)
        return check

    def records(self, msgs: Messages) -> None:
        """Check the entries that point at the records ``msgs`` (any records of the store,
        with their index keys): each file's entries are in commitlog order, so those from
        the first record to the last are found by a binary search and read together."""
        if not len(msgs):
            return
        lo, hi = int(msgs.phy[0]), int(msgs.phy[-1])
        for f in self.files:
            a, b = self._first_at(f, lo), self._first_at(f, hi + 1)
            if a < b:
                block = self._read(f, a, b - a)
                self._check(f, a, block, msgs, np.isin(block[1], msgs.phy))

    def _first_at(self, f: _File, phy: int) -> int:
        """The first entry (0-based) whose commitlog offset is ``phy`` or more."""
        a, b = 0, f.ix.entries
        while a < b:
            mid = (a + b) // 2
            if int(self._read(f, mid, 1)[1][0]) < phy:
                a = mid + 1
            else:
                b = mid
        return a

    def _read(self, f: _File, first: int, count: int) -> _Block:
        assert f.ix.path is not None
        e = np.fromfile(f.ix.path, dtype=INDEX_ENTRY_DTYPE, count=count,
                        offset=f.ix.entry_start + first * INDEX_ENTRY_DTYPE.itemsize)
        return (e["h"].astype(np.int64), e["p"].astype(np.int64), e["t"].astype(np.int64),
                e["v"].astype(np.int64))

    def window(self, msgs: Messages) -> None:
        """Check the entries that point into this window of the commitlog pass (``msgs``:
        its records with their index keys)."""
        if not len(msgs):
            return
        lo = int(msgs.phy[0])
        hi = int(msgs.phy[-1] + msgs.size[-1])
        for f in self.files:
            while f.cursor < f.ix.entries:
                if f.block is None or f.block_at != f.cursor:
                    f.block = self._read(f, f.cursor, min(self.BLOCK, f.ix.entries - f.cursor))
                    f.block_at = f.cursor
                phys = f.block[1]
                later = np.flatnonzero(phys >= hi)
                k = int(later[0]) if later.size else len(phys)
                if k == 0:
                    break  # the next entry points after this window
                part = tuple(a[:k] for a in f.block)
                behind = part[1] < lo
                if behind.any():  # out of commitlog order: read their records in place
                    self._check(f, f.cursor, part, None, behind)
                self._check(f, f.cursor, part, msgs, ~behind)
                f.cursor += k
                b = f.block
                f.block = (b[0][k:], b[1][k:], b[2][k:], b[3][k:]) if k < len(phys) else None
                f.block_at = f.cursor
                if k < len(phys):
                    break

    def finish(self, data_end: int) -> list[IndexScan]:
        """Check the entries no window took (their records read in place) and return the
        scans."""
        for f in self.files:
            while f.cursor < f.ix.entries:
                n = min(self.BLOCK, f.ix.entries - f.cursor)
                part = self._read(f, f.cursor, n)
                self._check(f, f.cursor, part, None, np.ones(n, bool), data_end)
                f.cursor += n
            f.block = None
            if self.keep:
                parts = [self._read(f, c, min(self.BLOCK, f.ix.entries - c))[1]
                         for c in range(0, f.ix.entries, self.BLOCK)]
                f.ix.phys = np.concatenate(parts)
        return self.indexes

    def _check(
        self, f: _File, c0: int, block: tuple[np.ndarray, ...], msgs: Messages | None,
        sel: np.ndarray, data_end: int | None = None,
    ) -> None:
        """Check entries ``c0 + i`` for ``i`` in ``sel`` of ``block`` against ``msgs`` (the
        window they point into), or against the records read in place when ``msgs`` is None.
        Without ``data_end`` the entries are known to point before the data end."""
        idx = np.flatnonzero(sel)
        if not idx.size:
            return
        if self.store.live:  # entries of records written since the pass: read in place
            idx = idx[block[1][idx] < self.store.listed_end()]
            data_end = None
        kh, phys, tds, prev = (a[idx] for a in block)
        nums = c0 + idx + 1
        below = phys < self.first_start
        past = (~below) & (phys >= data_end) if data_end is not None else np.zeros(
            len(phys), bool)
        if msgs is None:
            msgs = messages_at(self.store, phys[~below & ~past], keys=True)
        self._findings(f, nums, kh, phys, tds, prev, below, past, msgs, data_end)

    def _findings(
        self, f: _File, nums: np.ndarray, kh: np.ndarray, phys: np.ndarray, tds: np.ndarray,
        prev: np.ndarray, below: np.ndarray, past: np.ndarray, msgs: Messages,
        data_end: int | None,
    ) -> None:
        ix, g = f.ix, f.geometry
        bad_prev = dispatch_rules.prev_index_bad(prev, nums)
        if len(msgs):
            ii = np.minimum(np.searchsorted(msgs.phy, phys), len(msgs) - 1)
            hit = msgs.phy[ii] == phys
        else:
            ii = np.zeros(len(phys), np.int64)
            hit = np.zeros(len(phys), bool)
        dangling = (~below) & (~past) & (~hit)
        # key hash and time difference of entries that point at a message
        ok = hit & ~below & ~past & ~bad_prev
        pair = (ii.astype(np.int64) << 31) | kh
        kr = msgs.key_rows
        pos_k = np.searchsorted(kr, pair)
        known = (pos_k < len(kr)) & (kr[np.minimum(pos_k, max(len(kr) - 1, 0))] == pair) if (
            len(kr)) else np.zeros(len(pair), bool)
        bad_key = ok & ~known
        exp = dispatch_rules.index_time_diffs(msgs.store_ts[ii] if len(msgs) else phys,
                                     ix.begin_timestamp)
        bad_time = ok & known & (nums >= 2) & (ix.begin_timestamp > 0) & (exp != tds)
        for i in np.flatnonzero(past | dangling | bad_prev | bad_key | bad_time).tolist():
            n = int(nums[i])
            ix.bad_entries.append(n)
            self.sink.add(_entry_finding(
                ix.rel, g.entry_pos(n), n, int(kh[i]), int(phys[i]), data_end or 0,
                past=bool(past[i]), dangling=bool(dangling[i]), prev=int(prev[i]),
                bad_prev=bool(bad_prev[i]), bad_key=bool(bad_key[i]), td=int(tds[i]),
                exp=int(exp[i]),
            ))


def _entry_finding(
    rel: str, pos: int, n: int, kh: int, phy: int, data_end: int, *, past: bool,
    dangling: bool, prev: int, bad_prev: bool, bad_key: bool, td: int, exp: int,
) -> Finding:
    """The one finding of a damaged entry ``n`` (at ``pos`` in ``rel``), most basic first: it
    points past the data or at no record, its prevIndex, its keyHash, its timeDiff."""
    what = f"entry {n} (keyHash {kh}) -> commitlog offset {phy}"
    if past:
        return Finding("index", rel, pos, f"{what}: points past the valid commitlog data "
                       f"(ends at {data_end})", phy=phy)
    if dangling:
        return Finding("index", rel, pos, f"{what}: no readable message starts there", phy=phy)
    if bad_prev:
        return Finding("index", rel, pos, f"{what}: prevIndex {prev} does not name an earlier "
                       "entry")
    if bad_key:
        return Finding("index", rel, pos, f"entry {n} -> commitlog offset {phy}: keyHash {kh} "
                       "is none of the message's index keys", phy=phy)
    return Finding("index", rel, pos, f"entry {n} -> commitlog offset {phy}: timeDiff {td} s, "
                   f"the message's store time gives {exp} s", expected=str(exp), found=str(td),
                   phy=phy)
