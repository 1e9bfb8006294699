"""Index files in ``mqtool verify``: headers, slot tables and every entry against its record.

Each index file is mapped read-only; its header and slot table are checked by
:class:`mqtool.formats.indexfile.IndexReader`. Its entries are read :data:`IndexScan.CHUNK` at a
time and each is checked against the record at its commitlog offset, read in place
(:func:`mqtool.integrity.at.messages_at`, with the records' index key hashes): an entry past the
valid data or at no record, a prevIndex that names no earlier entry, a keyHash that is none of
the record's index keys (``IndexService#buildIndex``: UNIQ_KEY and each KEYS token, as
``topic#key``), a timeDiff that is not the record's store time minus the file's begin time.
Memory is one chunk, whatever the number of entries.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np

from mqtool.formats.errors import Finding, FormatError
from mqtool.formats.indexfile import IndexReader
from mqtool.integrity import rules
from mqtool.integrity.at import messages_at
from mqtool.integrity.model import _ENTRY, IndexScan, ProgressFn, _Sink
from mqtool.store import Store, map_readonly


def check_index(
    store: Store, first_start: int, data_end: int, sink: _Sink, progress: ProgressFn | None,
    keep: bool,
) -> list[IndexScan]:
    """Every index file of ``store``; ``keep``: also keep each entry's commitlog offset."""
    out: list[IndexScan] = []
    d = store.index_dir
    if not d.is_dir():
        return out
    for p in sorted(d.iterdir()):
        if not p.is_file():
            continue
        rel = f"index/{p.name}"
        ix = IndexScan(rel, path=p)
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
            _check_file(store, ix, reader, first_start, data_end, sink, keep)
        finally:
            if isinstance(buf, mmap.mmap):
                try:
                    buf.close()
                except BufferError:  # pragma: no cover - views released above
                    pass
    return out


def _check_file(
    store: Store, ix: IndexScan, reader: IndexReader, first_start: int, data_end: int,
    sink: _Sink, keep: bool,
) -> None:
    rel = ix.rel
    h = reader.header
    g = reader.geometry
    for pr in reader.problems(entries=False):  # header and slot table (entries: below)
        if pr.offset is not None and pr.offset < g.entry_pos(0):
            sink.add(Finding("index", rel, pr.offset, pr.detail))
    ix.entries = max(0, h.index_count - 1)
    ix.end_timestamp, ix.begin_timestamp = h.end_timestamp, h.begin_timestamp
    ix.hash_slot_num, ix.index_num = g.hash_slot_num, g.index_num
    ix.entry_start = g.entry_pos(1)
    if ix.entries == 0:
        return
    kept: list[np.ndarray] = []
    path = ix.path if ix.path is not None else Path(rel)
    for c0 in range(0, ix.entries, IndexScan.CHUNK):
        c1 = min(ix.entries, c0 + IndexScan.CHUNK)
        ent = np.fromfile(path, dtype=_ENTRY, count=c1 - c0,
                          offset=ix.entry_start + c0 * _ENTRY.itemsize)
        kh = ent["h"].astype(np.int64)
        phys = ent["p"].astype(np.int64)
        tds = ent["t"].astype(np.int64)
        prev = ent["v"].astype(np.int64)
        del ent
        if keep:
            kept.append(phys)
        nums = np.arange(c0 + 1, c1 + 1, dtype=np.int64)
        below = phys < first_start
        past = (~below) & (phys >= data_end)
        bad_prev = (prev < 0) | (prev >= nums)
        msgs = messages_at(store, phys[~below & ~past], keys=True)
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
        exp = rules.index_time_diffs(msgs.store_ts[ii] if len(msgs) else phys,
                                     h.begin_timestamp)
        bad_time = ok & known & (nums >= 2) & (h.begin_timestamp > 0) & (exp != tds)
        for i in np.flatnonzero(past | dangling | bad_prev | bad_key | bad_time).tolist():
            n = c0 + i + 1
            ix.bad_entries.append(n)
            sink.add(_entry_finding(
                rel, g.entry_pos(n), n, int(kh[i]), int(phys[i]), data_end,
                past=bool(past[i]), dangling=bool(dangling[i]), prev=int(prev[i]),
                bad_prev=bool(bad_prev[i]), bad_key=bool(bad_key[i]), td=int(tds[i]),
                exp=int(exp[i]),
            ))
    if keep:
        ix.phys = np.concatenate(kept)


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
