"""Where each commitlog file belongs, as its records say: the first thing ``mqtool repair``
puts right (a file with a wrong name, a duplicate, a file cut short, a stray file).

What RocketMQ does with the files (apache/rocketmq ``store``, 4.9.7 and 5.3.3 alike unless
said):

* ``MappedFileQueue.load`` (``doLoad``) sorts the files by name and refuses the whole store
  (``CommitLog.load`` and so ``DefaultMessageStore.load`` return false, the broker does not
  start) when one file's length is not ``mappedFileSizeCommitLog``, whatever its place; 5.3.3
  first deletes an empty last file. A name that is not a number fails the load too (``MappedFile``
  parses it).
* ``MappedFileQueue.checkSelf`` only logs when neighbouring names are not one file size apart:
  a store with a missing, misnamed or extra file loads.
* ``CommitLog.recoverNormally`` / ``recoverAbnormally`` walk the records with
  ``checkMessageAndReturnSize``, which never compares a record's PHYSICALOFFSET with its place,
  and go on to the next file in name order at each BLANK end: a missing or misnamed file does
  not stop the walk. ``processOffset`` is the name of the file the walk ends in plus the bytes
  walked in it; ``truncateDirtyFiles`` deletes the files named after it. The units the
  recovery dispatches (abnormal recovery; 5.x also past the queues' end after a clean stop) and
  those the reput service dispatches carry each record's own PHYSICALOFFSET.
* ``MappedFileQueue.findMappedFileByOffset`` finds a file by name (the index ``offset / size -
  first / size``, then a search of the names): a misnamed file's bytes are served only for the
  offsets its name covers, read at ``offset % size``, so part of its records are never served;
  an offset no name covers is served by nothing (``getMessage`` skips such a unit:
  ``rollNextFile``), and the reput service stops there for good, so that
  ``DefaultMessageStore.start`` waits forever for the dispatch to catch up when it must cross
  one (the repaired copy of a store with a wrong name must not need that).

So the records say where they belong and repair puts them there (:func:`plan_layout`):

* a file whose records start elsewhere (the PHYSICALOFFSET of its first whole record, minus
  that record's place) is renamed there;
* of two files with the same records, the one whose name is wrong is left out (a copy); when
  the records differ repair cannot tell which is the store's and refuses;
* a file cut short that is the last one holding data is padded with zeros to the file size
  (RocketMQ's recovery then ends the log after its last whole record, as the rest of repair
  does), and the records it lost are reported when units point at them (:class:`Layout`
  ``lost``); one before other data gets a BLANK end record after its last whole record when no
  consume-queue unit points into the part it lost, else repair refuses (a copy RocketMQ loads
  would serve zeros for those units);
* an empty file, and an entry of ``commitlog/`` that is not a file named by an offset, are left
  out; a file longer than the others is cut to the file size when the bytes past it are zeros
  (else repair refuses);
* a missing file stays missing: RocketMQ keeps the units that point into it, skips them when it
  serves, and so does the copy (:class:`Layout` ``gaps``).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mqtool.formats.buffers import close_map
from mqtool.formats.commitlog import MAGIC_BLANK, MAGIC_V1, MAGIC_V2, FileEnd
from mqtool.formats.commitlog_layout import PHYSICALOFFSET_AT
from mqtool.formats.consumequeue import CQ_DTYPE
from mqtool.formats.store_dirs import CONSUMEQUEUE_DIR, numbered_files, offset_name, queue_dirs
from mqtool.formats.walker import looks_like_record_at, nonzero_end, walk
from mqtool.store.files import map_readonly
from mqtool.store.reader import Store

_SIZE_MAGIC = struct.Struct(">iI")
_PHY = struct.Struct(">q")
_MAGIC_PREFIX = b"\xda\xa3\x20"  # V1 and V2 message magics share these three bytes
_MAX_CANDIDATES = 4096  # magic-looking places tried per file before its records say nothing
_COMPARE_CHUNK = 16 << 20


@dataclass(frozen=True)
class Placement:
    """A commitlog file as the copy holds it."""

    path: Path  # the file as found
    start: int  # its commitlog offset in the copy (the copy's name)
    size: int  # its size as found
    blank_at: int | None = None  # in-file place of the BLANK end record the copy adds
    pad_to: int | None = None  # the size the copy gives it (zeros after its bytes)
    cut_to: int | None = None  # the size the copy cuts it to (the bytes past it are zeros)

    @property
    def rel(self) -> str:
        return f"commitlog/{offset_name(self.start)}"

    @property
    def source_rel(self) -> str:
        return f"commitlog/{self.path.name}"

    @property
    def copied_as_is(self) -> bool:
        return self.pad_to is None and self.cut_to is None


@dataclass
class Layout:
    """The commitlog files of a store as repair's copy holds them (see the module doc)."""

    file_size: int | None
    files: list[Placement] = field(default_factory=list)  # in commitlog order
    changes: list[tuple[str, str, str]] = field(default_factory=list)  # (file, before, after)
    refusals: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # records the damage destroyed (not repaired)
    gaps: list[tuple[int, int]] = field(default_factory=list)  # [start, end) no file holds

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    @property
    def refusal(self) -> str | None:
        """The one line saying why no copy is written (None: a copy can be written)."""
        if not self.refusals:
            return None
        more = len(self.refusals) - 1
        return self.refusals[0] + (f" (and {more} more such problem{'s' * (more > 1)})"
                                   if more else "")

    def gap_of(self, phy: int) -> tuple[int, int] | None:
        """The gap (missing files) ``phy`` falls in, if any."""
        for lo, hi in self.gaps:
            if lo <= phy < hi:
                return lo, hi
        return None


@dataclass
class _Found:
    path: Path
    name_start: int
    size: int
    records_start: int | None  # where its records say it starts (None: they say nothing)
    data_end: int  # one past its last non-zero byte


def records_start(buf: bytes | mmap.mmap, file_size: int | None) -> int | None:
    """Where the records of a commitlog file say it starts: the PHYSICALOFFSET of its first
    whole, self-consistent record minus that record's place in the file (None when no such
    record is found, or they name no file start)."""
    n = len(buf)
    c = 0
    for _ in range(_MAX_CANDIDATES):
        if c + PHYSICALOFFSET_AT + 8 <= n:
            magic = _SIZE_MAGIC.unpack_from(buf, c)[1]
            if magic in (MAGIC_V1, MAGIC_V2):
                start = _PHY.unpack_from(buf, c + PHYSICALOFFSET_AT)[0] - c
                if start >= 0 and (file_size is None or start % file_size == 0) and (
                        looks_like_record_at(buf, c, start)):
                    return int(start)
        i = buf.find(_MAGIC_PREFIX, c + 5)  # the next record-looking place: its magic
        if i < 0:
            return None
        c = i - 4
    return None


def _found(path: Path, size: int, file_size: int | None) -> _Found:
    buf = map_readonly(path)
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            end = nonzero_end(buf, 0, fd=fd) if len(buf) else 0
        finally:
            os.close(fd)
        start = records_start(buf, file_size) if end else None
    finally:
        if not isinstance(buf, bytes):
            close_map(buf)
    return _Found(path, int(path.name), size, start, end)


def _same_records(a: _Found, b: _Found) -> bool:
    """Whether two files hold the same records (one's written data is the start of the
    other's: a copy, perhaps taken while the broker was still writing)."""
    n = min(a.data_end, b.data_end)
    with open(a.path, "rb") as fa, open(b.path, "rb") as fb:
        done = 0
        while done < n:
            k = min(_COMPARE_CHUNK, n - done)
            if fa.read(k) != fb.read(k):
                return False
            done += k
    return True


def _units_into(root: Path, lo: int, hi: int) -> int:
    """How many consume-queue units point into commitlog ``[lo, hi)``."""
    n = 0
    for _, _, q in queue_dirs(root / CONSUMEQUEUE_DIR):
        for p in numbered_files(q, strict=False):
            if p.stat().st_size:
                u = np.fromfile(p, dtype=CQ_DTYPE)
                phy = u["offset"].astype(np.int64)
                n += int(np.count_nonzero((phy >= lo) & (phy < hi) & (u["size"] > 0)))
    return n


def _whole_records_end(path: Path, start: int) -> int:
    """In-file place where the whole records at the start of a (short) file end."""
    buf = map_readonly(path)
    try:
        end = 0
        for item in walk(buf, file_start=start, decode=False, resync=False):
            if isinstance(item, FileEnd):
                end = item.physical_offset - start
        return end
    finally:
        if not isinstance(buf, bytes):
            close_map(buf)


def plan_layout(store: Store) -> Layout:
    """Where the copy puts each commitlog file of ``store`` (see the module doc)."""
    root = Path(store.root)
    size = store.mapped_file_size
    lay = Layout(size)
    cl = store.commitlog_dir
    named = {f.path.name for f in store.commitlog_files}
    for p in sorted(cl.iterdir()):
        if p.name not in named:
            what = "a directory" if p.is_dir() else (
                "not a regular file" if not p.is_file() else "not named by a commitlog offset")
            lay.changes.append((f"commitlog/{p.name}", f"{what} (RocketMQ's MappedFileQueue.load "
                                "fails on it: the broker does not start)", "left out"))
    found: list[_Found] = []
    for f in store.commitlog_files:
        if f.size == 0:
            lay.changes.append((f.rel, "empty file (0 bytes; MappedFileQueue.load refuses it, "
                                "5.x deletes an empty last file)", "left out"))
            continue
        found.append(_found(f.path, f.size, size))
    # each file at the start its records name (its own name when they name none)
    by_start: dict[int, list[_Found]] = {}
    for x in found:
        by_start.setdefault(x.name_start if x.records_start is None else x.records_start,
                            []).append(x)
    kept: list[_Found] = []
    starts: dict[int, int] = {}  # id of a kept file -> its start in the copy
    for start, group in sorted(by_start.items()):
        best = max(group, key=lambda x: (x.data_end, x.name_start == start))
        for other in group:
            if other is best:
                continue
            if not _same_records(best, other):
                lay.refusals.append(
                    f"commitlog/{best.path.name} and commitlog/{other.path.name} both hold the "
                    f"records of commitlog offset {start:,} and they differ: repair cannot tell "
                    "which one the broker wrote; nothing written")
                continue
            lay.changes.append((
                f"commitlog/{other.path.name}",
                f"a copy of the records of commitlog/{best.path.name} (commitlog offset "
                f"{start:,} on)", "left out"))
        if best.name_start != start:
            lay.changes.append((
                f"commitlog/{best.path.name}",
                f"named {best.name_start:,} but its records start at commitlog offset "
                f"{start:,} (their PHYSICALOFFSET)", f"renamed commitlog/{offset_name(start)}"))
        kept.append(best)
        starts[id(best)] = start
    last_data = max((i for i, x in enumerate(kept) if x.records_start is not None), default=-1)
    for i, x in enumerate(kept):
        start = starts[id(x)]
        rel = f"commitlog/{x.path.name}"
        place = Placement(x.path, start, x.size)
        if size is not None and x.size > size:
            if x.data_end > size:
                lay.refusals.append(
                    f"{rel} is {x.size:,} bytes where the other commitlog files have {size:,}, "
                    f"and holds data past {size:,}: repair cannot tell the broker's file size "
                    "(RocketMQ refuses to load the store); nothing written")
            else:
                place = Placement(x.path, start, x.size, cut_to=size)
                lay.changes.append((rel, f"{x.size:,} bytes, zeros past {size:,}",
                                    f"cut to {size:,} bytes (the other files' size)"))
        elif size is not None and x.size < size:
            whole = _whole_records_end(x.path, start)
            lost = _units_into(root, start + whole, start + size)
            if i >= last_data:
                place = Placement(x.path, start, x.size, pad_to=size)
                lay.changes.append((
                    rel, f"{x.size:,} bytes where the other commitlog files have {size:,} "
                    "(cut short; RocketMQ refuses to load the store)",
                    f"padded with zeros to {size:,} bytes (recovery ends the log after its "
                    "last whole record)"))
                if lost:
                    lay.lost.append(
                        f"{rel}: cut short at {x.size:,} bytes, and {lost:,} consume-queue "
                        f"unit{'s' * (lost != 1)} point past its last whole record (commitlog "
                        f"offset {start + whole:,} on): those records are lost (a slave or a "
                        "backup may hold the file); the copy ends the log at its last whole "
                        "record, as RocketMQ's recovery would")
            elif lost:
                lay.refusals.append(
                    f"{rel} is {x.size:,} bytes where the other commitlog files have "
                    f"{size:,} (cut short; RocketMQ refuses to load the store) and {lost:,} "
                    f"consume-queue units point into its missing part (commitlog offset "
                    f"{start + whole:,} to {start + size:,}): a copy RocketMQ would load "
                    "would serve zeros for them; restore the file (a slave or a backup "
                    "holds it); nothing written")
            else:
                place = Placement(x.path, start, x.size, blank_at=whole, pad_to=size)
                lay.changes.append((
                    rel, f"{x.size:,} bytes where the other commitlog files have {size:,} "
                    "(cut short; RocketMQ refuses to load the store); no unit points into "
                    "its missing part",
                    f"a BLANK end record at {whole:#x}, padded with zeros to {size:,} "
                    "bytes"))
        lay.files.append(place)
    if size is not None:
        for a, b in zip(lay.files, lay.files[1:], strict=False):
            if a.start + size < b.start:
                lay.gaps.append((a.start + size, b.start))
    return lay


def blank_record(size: int) -> bytes:
    """The 8 bytes of a BLANK end record of ``size`` bytes (TOTALSIZE, BLANK magic)."""
    return struct.pack(">iI", size, MAGIC_BLANK)


def missing_names(lo: int, hi: int, size: int) -> Iterator[str]:
    """The names of the files that would hold commitlog ``[lo, hi)``."""
    for s in range(lo, hi, size):
        yield f"commitlog/{offset_name(s)}"
