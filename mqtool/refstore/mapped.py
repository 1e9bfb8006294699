"""Writable memory-mapped store files: commitlog, consume queues, index files, checkpoint.

Mirrors RocketMQ's ``MappedFile`` / ``MappedFileQueue``: every file is created at its full
configured size (zero-filled, sparse where the file system allows), named by the 20-digit offset
of its first byte (index files: creation time ``yyyyMMddHHmmssSSS``), and written through a shared
mapping, so a killed process loses nothing it has copied in (the page cache survives it).
"""

from __future__ import annotations

import datetime as _dt
import mmap
import os
import struct
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import cast

import numpy as np

from mqtool.formats.checkpoint import (
    CHECKPOINT_FILE_SIZE,
    Checkpoint,
    build_checkpoint,
    parse_checkpoint,
)
from mqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
from mqtool.formats.consumequeue import CQ_UNIT_STRUCT as _CQ
from mqtool.formats.errors import FormatError, MqtoolError, environment
from mqtool.formats.indexfile import (
    HASH_SLOT_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_SIZE,
    INVALID_INDEX,
)
from mqtool.formats.indexfile import HASH_SLOT_STRUCT as _I32
from mqtool.formats.indexfile import INDEX_ENTRY_DTYPE as _ENTRY_DTYPE
from mqtool.formats.indexfile import INDEX_ENTRY_STRUCT as _IDX_ENTRY
from mqtool.formats.indexfile import INDEX_HEADER_STRUCT as _IDX_HEADER
from mqtool.formats.store_dirs import numbered_files, offset_name


class RefStoreError(MqtoolError):
    """A reference-store operation that cannot be done (locked store, bad geometry, ...)."""


MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)


def populate(mm: mmap.mmap, start: int, length: int) -> None:
    """Pre-fault a writable range in one call (``MADV_POPULATE_WRITE``, Linux 5.14+), so the
    hot path does not take one page fault per page; a no-op where unsupported."""
    page = mmap.PAGESIZE
    begin = start - start % page
    length = min(len(mm) - begin, length + (start - begin))
    if length <= 0:
        return
    try:
        mm.madvise(MADV_POPULATE_WRITE, begin, length)
    except (OSError, ValueError, AttributeError):
        pass


def release(mm: mmap.mmap, start: int, length: int) -> None:
    """``MADV_DONTNEED`` a range of a *shared* file mapping: the pages leave the process's
    resident set; their (dirty) contents stay in the page cache and reach the file."""
    page = mmap.PAGESIZE
    begin = start - start % page
    length = min(len(mm) - begin, length + (start - begin))
    if length <= 0:
        return
    try:
        mm.madvise(mmap.MADV_DONTNEED, begin, length)
    except (OSError, ValueError, AttributeError):
        pass


SMALL_FILE = 64 << 10
"""Files up to this size (the checkpoint, the schedule's progress file) get all their blocks
when they are opened; larger ones as they are written (:meth:`MappedFile.allocate`)."""


class MappedFile:
    """One fixed-size file mapped read-write.

    A store into a mapped page that the file system has no block for, and no room to make one,
    is SIGBUS: the process dies with "Bus error" and no word of why. So every writer gives the
    bytes it is about to write their blocks first (:meth:`allocate`, ``posix_fallocate``),
    which says ENOSPC instead; the file stays sparse beyond what was written (RocketMQ's files
    are sparse too: the same bytes, zeros where nothing was written).
    """

    __slots__ = ("path", "file_from_offset", "size", "mm", "_fd", "_lo", "_hi")

    def __init__(self, path: Path, file_from_offset: int, size: int, *, create: bool) -> None:
        self.path = path
        self.file_from_offset = file_from_offset
        self.size = size
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        self._fd = os.open(path, flags, 0o644)
        self._lo = self._hi = 0  # [lo, hi): bytes known to have their blocks
        st = os.fstat(self._fd)
        if st.st_size < size:
            os.ftruncate(self._fd, size)
        elif st.st_size > size:
            os.close(self._fd)
            raise RefStoreError(f"{path}: file is {st.st_size} bytes, the store expects {size}")
        self.mm = mmap.mmap(self._fd, size, access=mmap.ACCESS_WRITE)
        if size <= SMALL_FILE:
            try:
                self.allocate(0, size)
            except RefStoreError:
                if create and st.st_size == 0:  # made just now: a file of zeros is not left
                    self.remove()
                else:
                    self.close()
                raise

    def allocate(self, start: int, end: int, ahead: int = 0) -> int:
        """Make sure bytes ``[start, end)`` have their blocks before they are written through
        the mapping (see the class); raises :class:`RefStoreError` naming the file when the
        file system has no room (nothing is written then). ``ahead``: a sequential writer's
        next bytes, allocated in the same call when there is room for them, so its next
        writes cost a comparison. Returns where the bytes known to be allocated from ``start``
        on end (at least ``end``)."""
        if self._lo <= start and end <= self._hi:
            return self._hi
        end = min(end, self.size)
        if start >= end:
            return end
        want = min(self.size, end + ahead)
        try:
            os.posix_fallocate(self._fd, start, want - start)
        except OSError as e:
            if want == end:
                raise self._no_room(start, end, e) from None
            try:  # no room for the bytes ahead: what this write needs may still fit
                os.posix_fallocate(self._fd, start, end - start)
            except OSError as e2:
                raise self._no_room(start, end, e2) from None
            want = end
        if self._lo <= start <= self._hi:
            self._hi = max(self._hi, want)
        else:
            self._lo, self._hi = start, want
        return self._hi

    def has_room(self, start: int, end: int) -> bool:
        """Whether bytes ``[start, end)`` are known to have their blocks (:meth:`allocate`)."""
        return self._lo <= start and end <= self._hi

    def fileno(self) -> int:
        return self._fd

    def _no_room(self, start: int, end: int, e: OSError) -> RefStoreError:
        return environment(RefStoreError(  # a full disk or quota: exit status 3
            f"{self.path}: cannot write {end - start} bytes at offset {start}: "
            f"{e.strerror or e} (nothing was written there)"
        ))

    def flush(self) -> None:
        """msync the mapping (durability against power loss; not needed against kill -9)."""
        self.mm.flush()

    def close(self) -> None:
        try:
            self.mm.close()
        finally:
            os.close(self._fd)

    def remove(self) -> None:
        """Close the file and delete it."""
        self.close()
        self.path.unlink(missing_ok=True)


class PendingFlush:
    """A flush begun (``RefStore.flush_begin``): the data files to make durable, by their
    descriptors (duplicates when another thread syncs them: a file closed meanwhile is synced
    harmlessly), and the times the checkpoint may claim once they are."""

    def __init__(self, files: list[MappedFile], ts: int, index_ts: int, *, dup: bool) -> None:
        self.ts = ts  # physic and logics msg timestamp: the last record put
        self.index_ts = index_ts  # index msg timestamp: the last key written
        self._dup = dup
        self._fds: list[int] = []
        try:
            for mf in files:
                self._fds.append(os.dup(mf.fileno()) if dup else mf.fileno())
        except OSError:
            self.close()
            raise

    def sync(self) -> None:
        """Write the files' dirty pages to the disk (``fdatasync``: on Linux what ``msync`` of a
        shared mapping does, and it lets other threads run meanwhile); the duplicates are
        closed after."""
        try:
            for fd in self._fds:
                _datasync(fd)
        finally:
            self.close()

    def close(self) -> None:
        fds, self._fds = self._fds, []
        if self._dup:
            for fd in fds:
                os.close(fd)


_datasync = getattr(os, "fdatasync", os.fsync)  # macOS has only fsync


CQ_ALLOCATE_AHEAD = 64 << 10  # consume-queue bytes allocated at a time (3,276 units)
INDEX_ALLOCATE_AHEAD = 1 << 20  # index-entry bytes allocated at a time


@lru_cache(maxsize=64)
def _cq_run(n: int) -> struct.Struct:
    """``n`` consume queue units back to back."""
    fmt = _CQ.format.lstrip(">!")
    return struct.Struct(">" + fmt * n)


class ConsumeQueueFiles:
    """``ConsumeQueue``: 20-byte units in files of ``entries_per_file`` units."""

    def __init__(self, directory: Path, entries_per_file: int) -> None:
        self.dir = directory
        self.file_size = entries_per_file * CQ_STORE_UNIT_SIZE
        self.files: list[MappedFile] = []
        self.max_offset = 0  # logical: next unit to write
        self.max_physic_end = 0  # commitlog offset + size of the last unit
        self.min_offset = 0
        self._last: MappedFile | None = None  # the file the last put() wrote to
        self._load()

    def _load(self) -> None:
        if not self.dir.is_dir():
            return
        for path in numbered_files(self.dir, strict=False):
            self.files.append(MappedFile(path, int(path.name), self.file_size, create=False))
        if not self.files:
            return
        self.min_offset = self.files[0].file_from_offset // CQ_STORE_UNIT_SIZE
        # recover(): the written units end at the first unit that is not (offset>=0, size>0)
        end = self.files[0].file_from_offset
        for mf in self.files:
            mm = mf.mm
            pos = 0
            while pos < mf.size:
                off, size, _tags = _CQ.unpack_from(mm, pos)
                if off >= 0 and size > 0:
                    self.max_physic_end = off + size
                    pos += CQ_STORE_UNIT_SIZE
                else:
                    break
            end = mf.file_from_offset + pos
            if pos < mf.size:
                break
        self.max_offset = end // CQ_STORE_UNIT_SIZE
        self._drop_files_after(end)

    def _drop_files_after(self, end_byte: int) -> None:
        self._last = None
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.file_from_offset > end_byte:
                mf.remove()
            else:
                keep.append(mf)
        self.files = keep

    def _file_for(self, byte_pos: int) -> MappedFile:
        start = byte_pos - byte_pos % self.file_size
        if self.files and self.files[-1].file_from_offset == start:
            return self.files[-1]
        for mf in self.files:
            if mf.file_from_offset == start:
                return mf
        self.dir.mkdir(parents=True, exist_ok=True)
        mf = MappedFile(self.dir / offset_name(start), start, self.file_size, create=True)
        self.files.append(mf)
        self.files.sort(key=lambda m: m.file_from_offset)
        return mf

    def put(self, cq_offset: int, phy_offset: int, size: int, tags_code: int) -> None:
        """``putMessagePositionInfo``: write the unit for logical offset ``cq_offset``."""
        pos = cq_offset * CQ_STORE_UNIT_SIZE
        mf = self._unit_file(pos)
        at = pos - mf.file_from_offset
        mf.allocate(at, at + CQ_STORE_UNIT_SIZE, CQ_ALLOCATE_AHEAD)  # recovery's puts too
        _CQ.pack_into(mf.mm, at, phy_offset, size, tags_code)
        if cq_offset >= self.max_offset:
            self.max_offset = cq_offset + 1
            self.max_physic_end = phy_offset + size

    def put_run(self, first: int, units: Sequence[tuple[int, int, int]]) -> None:
        """:meth:`put` of ``units`` (commitlog offset, size, tagsCode) for the logical offsets
        ``first``, ``first + 1``, ..., one write per file."""
        if units:
            self.put_packed(first, _cq_run(len(units)).pack(*chain.from_iterable(units)),
                            units[-1][0] + units[-1][1])

    def put_packed(self, first: int, packed: bytes, end_phys: int) -> None:
        """:meth:`put_run` of units already packed (20 bytes each, ``CQ_DTYPE``); ``end_phys``:
        the last one's commitlog offset plus its size."""
        view = memoryview(packed)
        i, n = 0, len(packed) // CQ_STORE_UNIT_SIZE
        while i < n:
            pos = (first + i) * CQ_STORE_UNIT_SIZE
            mf = self._unit_file(pos)
            at = pos - mf.file_from_offset
            k = min(n - i, (self.file_size - at) // CQ_STORE_UNIT_SIZE)
            end = at + k * CQ_STORE_UNIT_SIZE
            mf.allocate(at, end, CQ_ALLOCATE_AHEAD)
            mf.mm[at:end] = view[i * CQ_STORE_UNIT_SIZE : (i + k) * CQ_STORE_UNIT_SIZE]
            i += k
        if n and first + n > self.max_offset:
            self.max_offset = first + n
            self.max_physic_end = end_phys

    def make_room(self, first: int, last: int) -> None:
        """Allocate the units of logical offsets ``first`` .. ``last`` ahead of :meth:`put`
        (the put path calls it before it writes the commitlog records, so a full disk stops
        the put before its records rather than leave them without their units). A file it
        created for them and could not give room is removed again: a queue's last file of
        zeros would be served as a phantom unit by RocketMQ's load."""
        pos = first * CQ_STORE_UNIT_SIZE
        end = (last + 1) * CQ_STORE_UNIT_SIZE
        mf = self._last
        if mf is not None and mf.file_from_offset <= pos and mf.has_room(
                pos - mf.file_from_offset, end - mf.file_from_offset):
            return  # the usual put: its unit's room was allocated ahead
        while pos < end:
            had = len(self.files)
            mf = self._unit_file(pos)
            at = pos - mf.file_from_offset
            stop = min(end - mf.file_from_offset, self.file_size)
            try:
                mf.allocate(at, stop, CQ_ALLOCATE_AHEAD)
            except RefStoreError:
                if len(self.files) > had:  # made just now, nothing in it
                    self.files.remove(mf)
                    self._last = None
                    mf.remove()
                raise
            pos = mf.file_from_offset + stop

    def _unit_file(self, pos: int) -> MappedFile:
        """The file holding byte ``pos`` of the queue, made when missing (the last one used
        is kept: a queue is written in order)."""
        mf = self._last
        if mf is None or not mf.file_from_offset <= pos < mf.file_from_offset + self.file_size:
            mf = self._last = self._file_for(pos)
        return mf

    def get(self, cq_offset: int) -> tuple[int, int, int] | None:
        """(commitlog offset, size, tagsCode) of one unit, None when not written."""
        if cq_offset < self.min_offset or cq_offset >= self.max_offset:
            return None
        pos = cq_offset * CQ_STORE_UNIT_SIZE
        mf = self._file_for(pos)
        return _CQ.unpack_from(mf.mm, pos - mf.file_from_offset)

    def truncate_dirty(self, phy_end: int) -> None:
        """``truncateDirtyLogicFiles``: drop units pointing at or past ``phy_end``."""
        while self.max_offset > self.min_offset:
            unit = self.get(self.max_offset - 1)
            assert unit is not None
            if unit[0] + unit[1] <= phy_end:
                break
            pos = (self.max_offset - 1) * CQ_STORE_UNIT_SIZE
            mf = self._file_for(pos)
            mf.mm[pos - mf.file_from_offset : pos - mf.file_from_offset + CQ_STORE_UNIT_SIZE] = (
                bytes(CQ_STORE_UNIT_SIZE)
            )
            self.max_offset -= 1
        last = self.get(self.max_offset - 1) if self.max_offset > self.min_offset else None
        self.max_physic_end = last[0] + last[1] if last else 0
        self._drop_files_after(self.max_offset * CQ_STORE_UNIT_SIZE)

    def flush_files(self) -> list[MappedFile]:
        """The files a flush makes durable (the last two)."""
        return self.files[-2:]

    def close(self) -> None:
        for mf in self.files:
            mf.close()
        self.files = []
        self._last = None

    def destroy(self) -> None:
        """``ConsumeQueue#destroy``: every file deleted, then the queue's directory."""
        for mf in self.files:
            mf.remove()
        self.files = []
        self._last = None
        self.max_offset = self.min_offset = self.max_physic_end = 0
        if self.dir.is_dir():
            self.dir.rmdir()


def index_file_name(ts_ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: ``yyyyMMddHHmmssSSS`` (UTC here)."""
    t = _dt.datetime.fromtimestamp(ts_ms / 1000.0, _dt.UTC)
    return t.strftime("%Y%m%d%H%M%S") + f"{ts_ms % 1000:03d}"


class IndexFileWriter:
    """``IndexFile``: header, hash slots, entries; :meth:`put_many` as RocketMQ's ``putKey``.

    Entries are added in batches: entries first, then the header (which counts them), then the
    slots, so a kill leaves at worst uncounted entries or counted entries whose slots still name
    their predecessors (repaired by :meth:`repair_slots` on reopen).
    """

    def __init__(
        self, path: Path, hash_slot_num: int, index_num: int, *, create: bool,
        end_phy_offset: int = 0, end_timestamp: int = 0,
    ) -> None:
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        size = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE
        self.mf = MappedFile(path, 0, size, create=create)
        self.path = path
        try:  # header and slots: written anywhere (a broker's file may have holes there)
            self.mf.allocate(0, INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE)
        except RefStoreError:
            if create:  # nothing in it: a file of zeros would read as an index file
                self.mf.remove()
            else:
                self.mf.close()
            raise
        if create:
            populate(self.mf.mm, 0, INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE)
            self.begin_timestamp = end_timestamp if end_timestamp > 0 else 0
            self.end_timestamp = self.begin_timestamp
            self.begin_phy_offset = end_phy_offset if end_phy_offset > 0 else 0
            self.end_phy_offset = self.begin_phy_offset
            self.hash_slot_count = 0
            self.index_count = 1
            self._write_header()
        else:
            (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
             self.end_phy_offset, self.hash_slot_count, self.index_count) = _IDX_HEADER.unpack_from(
                self.mf.mm, 0)
            if self.index_count < 1:
                self.index_count = 1

    def _write_header(self) -> None:
        _IDX_HEADER.pack_into(
            self.mf.mm, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
            self.end_phy_offset, self.hash_slot_count, self.index_count,
        )

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_many(
        self, hashes: list[int], offsets: list[int], stamps: list[int], start: int = 0
    ) -> int:
        """``putKey`` for ``hashes[start:]`` (commitlog offsets and store times alongside), in
        order, vectorised; returns how many fit (the caller rolls to a new file for the rest).

        Same bytes as one ``putKey`` after another: each entry's prev is the head of its slot
        at that moment (an earlier entry of the same batch, or the slot table's value); the
        timeDiff is relative to the header's beginTimestamp, which the first entry of a fresh
        file sets. Entries first, then the header (the commit point), then the slots.
        """
        k = min(self.index_num - self.index_count, len(hashes) - start)
        if k <= 0:
            return 0
        mm = self.mf.mm
        nslots = self.hash_slot_num
        count = self.index_count
        h = np.asarray(hashes[start : start + k], dtype=np.int64)
        off = np.asarray(offsets[start : start + k], dtype=np.int64)
        ts = np.asarray(stamps[start : start + k], dtype=np.int64)
        n = np.arange(count, count + k, dtype=np.int64)
        slot = h % nslots
        table = np.frombuffer(mm, dtype=">i4", count=nslots, offset=INDEX_HEADER_SIZE)
        # timeDiff: the first entry of a fresh file is measured against the old begin, then
        # becomes the begin itself
        begin = self.begin_timestamp
        diff = np.empty(k, dtype=np.int64)
        first = 0
        if count <= 1:
            diff[0] = 0 if begin <= 0 else max(0, min((int(ts[0]) - begin) // 1000, 0x7FFFFFFF))
            begin = int(ts[0])
            self.begin_timestamp = begin
            self.begin_phy_offset = int(off[0])
            first = 1
        if begin <= 0:
            diff[first:] = 0
        else:
            diff[first:] = np.clip((ts[first:] - begin) // 1000, 0, 0x7FFFFFFF)
        order = np.lexsort((n, slot))
        s_sorted = slot[order]
        n_sorted = n[order]
        head = np.ones(k, dtype=bool)
        head[1:] = s_sorted[1:] != s_sorted[:-1]
        old = table[s_sorted[head]].astype(np.int64)
        old[(old <= INVALID_INDEX) | (old > count)] = INVALID_INDEX
        prev_sorted = np.empty(k, dtype=np.int64)
        prev_sorted[1:] = n_sorted[:-1]
        prev_sorted[head] = old
        prev = np.empty(k, dtype=np.int64)
        prev[order] = prev_sorted
        entries = np.empty(k, dtype=_ENTRY_DTYPE)
        entries["h"] = h
        entries["p"] = off
        entries["t"] = diff
        entries["v"] = prev
        pos = INDEX_HEADER_SIZE + nslots * HASH_SLOT_SIZE + count * INDEX_SIZE
        self.mf.allocate(pos, pos + k * INDEX_SIZE, INDEX_ALLOCATE_AHEAD)
        mm[pos : pos + k * INDEX_SIZE] = entries.tobytes()
        self.hash_slot_count += int(np.count_nonzero(old == INVALID_INDEX))
        self.index_count = count + k
        self.end_phy_offset = int(off[-1])
        self.end_timestamp = int(ts[-1])
        self._write_header()
        last = np.ones(k, dtype=bool)
        last[:-1] = s_sorted[1:] != s_sorted[:-1]
        table[s_sorted[last]] = n_sorted[last]
        del table
        return k

    def repair_slots(self, window: int = 4096) -> None:
        """After a kill between the header and the slot writes: every recent entry must be
        (or precede) the head of its slot's chain."""
        mm = self.mf.mm
        for n in range(max(1, self.index_count - window), self.index_count):
            key_hash = self.entry(n)[0]
            abs_slot = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
            cur = _I32.unpack_from(mm, abs_slot)[0]
            if cur < n or cur >= self.index_count:
                _I32.pack_into(mm, abs_slot, n)

    def entry(self, n: int) -> tuple[int, int, int, int]:
        pos = INDEX_HEADER_SIZE + self.hash_slot_num * HASH_SLOT_SIZE + n * INDEX_SIZE
        return _IDX_ENTRY.unpack_from(self.mf.mm, pos)

    def keys_hashes_at(self, phy_offset: int) -> list[int]:
        """Key hashes of the trailing entries that point at ``phy_offset``."""
        out: list[int] = []
        n = self.index_count - 1
        while n >= 1:
            key_hash, off, _, _ = self.entry(n)
            if off != phy_offset:
                break
            out.append(key_hash)
            n -= 1
        return out

    def close(self) -> None:
        self.mf.close()


_CP3 = struct.Struct(">qqq")  # physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp


class CheckpointFile:
    """The ``checkpoint`` file (``StoreCheckpoint``), mapped: the physic and logics timestamps
    are written with every put, the whole file on flush and close."""

    def __init__(self, path: Path) -> None:
        self.mf = MappedFile(path, 0, CHECKPOINT_FILE_SIZE, create=True)
        try:
            self.stored = parse_checkpoint(cast(bytes, self.mf.mm), file=str(path))
        except FormatError:
            self.stored = Checkpoint(0, 0, 0)
        self.ts = 0  # store time of the last record written or recovered (0: none)

    def note_put(self, store_timestamp: int, index_timestamp: int) -> None:
        """A record was put at ``store_timestamp``."""
        self.ts = store_timestamp
        _CP3.pack_into(self.mf.mm, 0, store_timestamp, store_timestamp, index_timestamp)

    def write(self, index_timestamp: int, ts: int | None = None) -> None:
        """Write the whole checkpoint: records up to ``ts`` (default: the last put), index keys
        up to ``index_timestamp``."""
        ts = self.ts if ts is None else ts
        if ts:
            self.stored = replace(
                self.stored, physic_msg_timestamp=ts, logics_msg_timestamp=ts,
                index_msg_timestamp=index_timestamp,
            )
        data = build_checkpoint(self.stored)
        self.mf.mm[: len(data)] = data

    def flush(self) -> None:
        """msync the file."""
        self.mf.flush()

    def close(self) -> None:
        """Unmap the file."""
        self.mf.close()
