"""Read-only access to a RocketMQ store root (a broker's ``store/`` directory).

Every file is opened ``O_RDONLY`` and mapped ``ACCESS_READ``: nothing here can change a byte.
Layout (``StorePathConfigHelper``): ``commitlog/<20-digit offset>``,
``consumequeue/<topic>/<queueId>/<20-digit byte offset>``, ``index/<yyyyMMddHHmmssSSS>``,
``checkpoint``, ``abort``, ``lock``, ``config/*.json`` (+ ``.bak``).

Damage never raises out of iteration: the commitlog is read by the one walker
(:mod:`mqtool.formats.walker`), which goes on past damage at the next self-identifying record;
every unreadable region, CRC mismatch, impossible or dangling consume-queue unit and damaged
index file becomes a :class:`Finding` in ``Store.findings`` (file relative to the store root,
byte offset inside that file, ``phy`` the commitlog position where it applies), and the caller
decides what to do (read commands print them and exit 1).

A store a running broker holds (its ``lock`` file locked: :attr:`Store.live`) is read as it is
while it changes: each commitlog file is mapped at the size it had when the store was opened,
and what the broker is still writing is not damage. The commitlog bytes where a walk found the
data to break off are the broker's write point when a record starts there by the time they are
looked at again, or when nothing readable follows them (:meth:`Store.still_written`); a
consume-queue unit names a record the broker wrote after the walk when that record is there now.
Such findings go to ``Store.in_progress``, not ``Store.findings``. Files deleted between the
listing and their opening (a broker's cleanup) are left out.
"""

from __future__ import annotations

import bisect
import mmap
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqtool.formats.buffers import close_map
from mqtool.formats.commitlog import (
    BlankRecord,
    CommitLogMessage,
    FileEnd,
    parse_message,
)
from mqtool.formats.commitlog_layout import MIN_RECORD_SIZE
from mqtool.formats.consumequeue import (
    CQ_STORE_UNIT_SIZE,
    CQ_UNIT_STRUCT,
    CqEntry,
)
from mqtool.formats.errors import (
    BadFieldError,
    Finding,
    FormatError,
    MqtoolError,
    Severity,
    usage,
)
from mqtool.formats.indexfile import IndexReader
from mqtool.formats.store_dirs import (
    CONSUMEQUEUE_DIR,
    numbered_files,
    queue_dirs,
    root_above,
    store_root,
)
from mqtool.formats.walker import (
    crc_findings,
    header_ok,
    looks_like_record_at,
    next_record,
    walk,
)
from mqtool.store.files import (
    CommitLogFile,
    LockState,
    QueueEntry,
    QueueInfo,
    StoreError,
    disk_bytes,
    lock_state,
    map_readonly,
    misnamed,
    queue_stray,
    read_unit,
)
from mqtool.store.indexfiles import IndexFiles
from mqtool.store.queue_sources import QueueSources
from mqtool.store.records_at import KERNEL_MIN_UNITS

if TYPE_CHECKING:
    from mqtool.store.unit_check import Ints

ProgressFn = Callable[[int, int], None]  # (bytes done, bytes total)


KERNEL_MIN_BYTES = 8 << 20
"""Commitlog files holding more than this on disk are walked by the compiled kernel; smaller
ones by the Python walker, which reads them sooner than numba and the kernel load (about 0.3 s
on an idle machine; the walker takes about 6 us per record)."""
# names at a store root that, when present, must be a directory (True) or a file (False)
_ROOT_ENTRIES = (
    ("consumequeue", True), ("index", True), ("config", True), ("checkpoint", False),
    ("abort", False), ("lock", False),
)


def _outside_root(given: Path, what: str) -> StoreError | None:
    """The error for a path inside a store (``store/commitlog``): it names the root to give;
    None when no parent of ``given`` is a store root."""
    root = root_above(given)
    if root is None:
        return None
    shown = _shown(given, root)
    return usage(StoreError(f"{given}: a {what} inside the store {shown}, not its root: "
                            f"give {shown}"))


def _shown(given: Path, store: Path) -> str:
    """``store`` (an ancestor of ``given``) as the user would type it: relative when
    ``given`` was."""
    if given.is_absolute():
        return str(store)
    up = len(given.resolve().relative_to(store).parts)
    shown = given
    for _ in range(up):
        shown = shown.parent
    return str(shown) if str(shown) != "." else "."


SETTLE_TRIES = 5
"""How many times (10 ms apart) a live store's write point is looked at again before the bytes
there count as damage (a record is copied in microseconds)."""

# the kinds a walk gives where a commitlog's data breaks off or ends (the write point of a live
# store looks like one of them while a record is being copied in)
_BREAK_KINDS = frozenset({
    "truncated", "bad-magic", "bad-size", "torn-record", "properties-torn", "unexpected-zeros",
    "bad-field", "corrupt", "zeros", "torn", "unreadable",
})


def _size_now(p: Path) -> int | None:
    """The file's size, None when it is gone (deleted since the listing)."""
    try:
        return p.stat().st_size
    except FileNotFoundError:
        return None


def _units(p: Path, first: int, count: int, arrays: bool) -> tuple[Ints, Ints, Ints]:
    """(commitlog offsets, sizes, tagsCodes) of the units of consume-queue file ``p`` from
    unit ``first``, at most ``count``: numpy int64 arrays when ``arrays``, else lists (numpy
    is not imported). FileNotFoundError when the file is gone."""
    if arrays:
        import numpy as np

        from mqtool.formats.consumequeue import CQ_DTYPE

        u = np.fromfile(p, dtype=CQ_DTYPE, count=count, offset=first * CQ_STORE_UNIT_SIZE)
        return u["offset"].astype(np.int64), u["size"].astype(np.int64), \
            u["tags"].astype(np.int64)
    with open(p, "rb") as fh:
        fh.seek(first * CQ_STORE_UNIT_SIZE)
        raw = fh.read(count * CQ_STORE_UNIT_SIZE)
    units = list(CQ_UNIT_STRUCT.iter_unpack(raw[: len(raw) - len(raw) % CQ_STORE_UNIT_SIZE]))
    return [u[0] for u in units], [u[1] for u in units], [u[2] for u in units]


def _written(offs: Ints, sizes: Ints, tags: Ints) -> tuple[Ints, Ints, Ints, Ints]:
    """The written units (not all zeros) of :func:`_units`' columns: their in-file byte
    positions, commitlog offsets, sizes and tagsCodes."""
    if isinstance(offs, list):
        idx = [j for j, u in enumerate(zip(offs, sizes, tags, strict=True)) if any(u)]
        return ([j * CQ_STORE_UNIT_SIZE for j in idx], [offs[j] for j in idx],
                [sizes[j] for j in idx], [tags[j] for j in idx])
    import numpy as np

    o, s, t = np.asarray(offs), np.asarray(sizes), np.asarray(tags)
    w = np.flatnonzero((o != 0) | (s != 0) | (t != 0))
    return w * CQ_STORE_UNIT_SIZE, o[w], s[w], t[w]


@dataclass
class Store(IndexFiles):
    """A store root opened read-only. Use :meth:`open`."""

    root: Path
    commitlog_dir: Path
    commitlog_files: list[CommitLogFile]
    findings: list[Finding] = field(default_factory=list)
    _maps: dict[Path, bytes | mmap.mmap] = field(default_factory=dict, repr=False)
    _starts: list[int] = field(default_factory=list, repr=False)
    _index: list[tuple[str, IndexReader]] | None = field(default=None, repr=False)
    _index_damaged: bool = field(default=False, repr=False)
    _index_entries_checked: bool = field(default=False, repr=False)
    _data_end: int | None = field(default=None, repr=False)
    # how each commitlog file's data ends, as a caller's whole-file walk found it (verify)
    walked_ends: dict[Path, FileEnd] = field(default_factory=dict, repr=False)
    check_crc: bool = True  # walks check every BODYCRC (a mismatch is a finding)
    # a process (a running broker) holds the store's lock: it is read as it is (module doc)
    live: bool = False
    lock: LockState = field(default_factory=lambda: LockState(False, False))
    # what a live store's broker was still writing where it was read (not damage)
    in_progress: list[Finding] = field(default_factory=list)
    # a DLedger commitlog (dledger-<id>/data): records behind entry headers (.dledger_log)
    dledger: bool = False
    dledger_last: dict[Path, tuple[int, int]] = field(default_factory=dict, repr=False)
    _queues: QueueSources | None = field(default=None, repr=False)

    # --- opening --------------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> Store:
        """Open a store root read-only; ``root`` may also be the parent of ``store/``."""
        r = Path(root)
        if not r.exists():
            raise usage(StoreError(f"{r}: no such directory"))
        if not r.is_dir():
            raise _outside_root(r, "file") or usage(
                StoreError(f"{r}: not a directory (give the broker's store root)"))
        r = store_root(r)
        cl = r / "commitlog"
        dledger = sorted(p for p in r.glob("dledger-*/data") if p.is_dir())
        if dledger and not numbered_files(cl):
            cl = dledger[0]
        if not cl.is_dir():
            raise _outside_root(r, "directory") or usage(StoreError(
                f"{r}: not a RocketMQ store root (no commitlog/ directory; "
                "expected commitlog/, consumequeue/, index/, checkpoint, config/)"
            ))
        for name, want_dir in _ROOT_ENTRIES:
            p = r / name
            if p.exists() and p.is_dir() != want_dir:
                raise StoreError(
                    f"{p}: expected a {'directory' if want_dir else 'file'}, found a "
                    f"{'directory' if p.is_dir() else 'file'}"
                )
        files: list[CommitLogFile] = []
        findings: list[Finding] = []
        lock = lock_state(r)
        others: list[Path] = []
        for p in numbered_files(cl, others):
            size = _size_now(p)
            if size is not None:
                files.append(CommitLogFile(p, int(p.name), size, str(cl.relative_to(r))))
        findings.extend(misnamed(f"{cl.relative_to(r)}/{p.name}",
                                 "a commitlog file name (20 digits)") for p in others)
        store = cls(r, cl, files, findings, live=lock.locked, lock=lock,
                    dledger=cl.name == "data")
        while store.live and files and files[-1].size == 0:  # a file the broker is making
            store.in_progress.append(Finding(
                "layout", files[-1].rel, 0, "new commitlog file, still being made (0 bytes)"))
            files.pop()
        store._starts = [f.start for f in files]
        findings.extend(store._size_findings())
        return store

    def close(self) -> None:
        for m in self._maps.values():
            if isinstance(m, mmap.mmap):
                close_map(m)
        self._maps.clear()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _map(self, path: Path, size: int | None = None) -> bytes | mmap.mmap:
        m = self._maps.get(path)
        if m is None:
            try:
                m = map_readonly(path, size)
            except FileNotFoundError:
                if not self.live:
                    raise StoreError(f"{path}: deleted while the store was read") from None
                m = b""  # deleted by the broker since the listing (its cleanup)
                self.in_progress.append(Finding(
                    "layout", str(path.relative_to(self.root)), None,
                    "deleted by the running broker while the store was read"))
            self._maps[path] = m
        return m

    def mapped(self, f: CommitLogFile) -> bytes | mmap.mmap:
        """The bytes of a commitlog file as long as it was when the store was opened (mapped
        read-only once, until :meth:`close`)."""
        return self._map(f.path, f.size)

    def note(self, f: Finding) -> None:
        """Add a finding (once); on a live store, what the broker is still writing goes to
        ``in_progress`` instead (:meth:`still_written`)."""
        if self.written_since(f):
            if f not in self.in_progress:
                self.in_progress.append(f)
        elif f not in self.findings:
            self.findings.append(f)

    _note = note

    # --- a live store ---------------------------------------------------------------------
    def written_since(self, f: Finding) -> bool:
        """Whether the commitlog finding ``f`` (a walk's: the data breaks off or ends there,
        or a body CRC) is about bytes a live store's broker is still writing."""
        if (not self.live or f.severity == Severity.INFO or not f.file.startswith("commitlog/")
                or f.offset is None):
            return False
        cf = next((c for c in self.commitlog_files if c.rel == f.file), None)
        if cf is None:
            return False
        if f.kind == "crc-mismatch":  # a record whose body was being copied in
            for _ in range(SETTLE_TRIES):
                rec = self.try_message_at(cf.start + f.offset, note=False)
                if rec is not None and not crc_findings(rec, cf.rel, f.offset, cf.start):
                    return True
                time.sleep(0.01)
            return False
        return f.kind in _BREAK_KINDS and self.still_written(cf, f.offset)

    def still_written(self, f: CommitLogFile, pos: int) -> bool:
        """Whether in-file ``pos`` of ``f``, where a walk found the data to break off or end,
        is a live store's write point: a record (or the BLANK) starts there by now, or no
        record follows it in this file and no later file begins with one (the bytes past the
        broker's write point are not data yet). False when the store is not live."""
        if not self.live:
            return False
        buf = self.mapped(f)
        if looks_like_record_at(buf, pos, f.start):
            return True
        later = [g for g in self.commitlog_files if g.start > f.start]
        try:  # the descriptor lets the search skip the holes of a sparse (pre-allocated) file
            fd: int | None = os.open(f.path, os.O_RDONLY)
        except OSError:
            fd = None
        try:
            if next_record(buf, pos + 1, f.start, fd=fd) is None and not any(
                    looks_like_record_at(self.mapped(g), 0, g.start) for g in later):
                return True
        finally:
            if fd is not None:
                os.close(fd)
        for _ in range(SETTLE_TRIES):
            time.sleep(0.01)
            if looks_like_record_at(buf, pos, f.start):
                return True
        return False

    # --- commitlog ------------------------------------------------------------------------
    @property
    def mapped_file_size(self) -> int | None:
        """The commitlog file size (``mappedFileSizeCommitLog``), from the files present: the
        most common size, the larger of equally common ones (files are cut short, not grown)."""
        sizes = Counter(f.size for f in self.commitlog_files if f.size)
        return max(sizes, key=lambda s: (sizes[s], s)) if sizes else None

    def _size_findings(self) -> list[Finding]:
        """Commitlog files whose size is not the others' (``MappedFileQueue.load`` refuses a
        store with one, except 5.x an empty last file, which it deletes)."""
        mfs = self.mapped_file_size
        out = []
        for f in self.commitlog_files:
            if mfs is None or f.size == mfs:
                continue
            if f.size == 0 and f is self.commitlog_files[-1]:
                out.append(Finding(
                    "layout", f.rel, None, "empty last commitlog file (0 bytes): RocketMQ 5.x "
                    "deletes it when it loads the store, 4.9.7 refuses to load the store",
                    severity=Severity.WARNING))
                continue
            out.append(Finding(
                "layout", f.rel, None,
                f"{f.size:,} bytes where the other commitlog files have {mfs:,} "
                f"({'cut short' if f.size < mfs else 'too long'}): RocketMQ refuses to load "
                "the store (MappedFileQueue.load)", expected=str(mfs), found=str(f.size)))
        return out

    def file_for(self, offset: int) -> CommitLogFile | None:
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        f = self.commitlog_files[i]
        return f if offset < f.start + f.size else None

    def walk_dledger(self, f: CommitLogFile, *, crc: bool
                     ) -> Iterator[CommitLogMessage | BlankRecord | Finding | FileEnd | int]:
        """The DLedger walk of one data file (:func:`mqtool.store.dledger_log.walk_dledger_file`),
        CRCs checked when ``crc``; findings are not noted."""
        from mqtool.store.dledger_log import walk_dledger_file

        return walk_dledger_file(self._map(f.path), f, self.commitlog_files, self.dledger_last,
                                 check=crc)

    def walk_fields(self, f: CommitLogFile, *, check_crc: bool = False, fd: int | None = None,
                    crc_findings: bool = True) -> Iterator[Any]:
        """:func:`mqtool.formats.field_walker.walk_fields` over one file (field tables of good
        records, the walker's items elsewhere); a DLedger file gives the DLedger walk's items
        (records, findings, its FileEnd), which every caller of the kernel walk handles."""
        if self.dledger:
            return self.walk_dledger(f, crc=check_crc and crc_findings)
        from mqtool.formats.field_walker import walk_fields

        return walk_fields(self._map(f.path), file=f.rel, file_start=f.start, check_crc=check_crc,
                           crc_findings=crc_findings, fd=fd)

    def walk_commitlog_file(
        self, f: CommitLogFile, *, decode: bool = True, start: int = 0
    ) -> Iterator[CommitLogMessage | BlankRecord | Finding | FileEnd | int]:
        """:func:`mqtool.formats.walker.walk` over one file from in-file ``start`` (a record
        boundary): records, findings (also noted in ``findings``) and last its FileEnd;
        ``decode=False`` gives record positions."""
        if self.dledger:
            from mqtool.store.dledger_log import walk_dledger_file

            for item in walk_dledger_file(self._map(f.path), f, self.commitlog_files,
                                          self.dledger_last, decode=decode, start=start,
                                          check=self.check_crc):
                if isinstance(item, Finding):
                    self._note(item)
                yield item
            return
        buf = self._map(f.path)
        try:  # the descriptor lets the walker skip the holes of a sparse (pre-allocated) file
            fd: int | None = os.open(f.path, os.O_RDONLY) if len(buf) else None
        except OSError:
            fd = None
        try:
            for item in walk(buf, file=f.rel, file_start=f.start, start=start, fd=fd,
                             check_crc=self.check_crc and decode, decode=decode):
                if isinstance(item, Finding):
                    self._note(item)
                yield item
        finally:
            if fd is not None:
                os.close(fd)

    def scan_commitlog_file(
        self, f: CommitLogFile, start: int = 0
    ) -> Iterator[CommitLogMessage | BlankRecord | Finding | FileEnd]:
        """Records of one file past any damage, the walker's findings (unreadable regions,
        CRC mismatches; also noted in ``findings``) where they occur, and last its FileEnd."""
        for item in self.walk_commitlog_file(f, start=start):
            if not isinstance(item, int):
                yield item

    def file_ends(self) -> list[tuple[CommitLogFile, FileEnd, int]]:
        """For each commitlog file: how its data ends and how many messages it holds."""
        out = []
        for f in self.commitlog_files:
            count = 0
            end: FileEnd | None = None
            for item in self.scan_commitlog_file(f):
                if isinstance(item, CommitLogMessage):
                    count += 1
                elif isinstance(item, FileEnd):
                    end = item
            assert end is not None
            out.append((f, end, count))
        self._check_early_end(out)
        return out

    def _check_early_end(self, ends: list[tuple[CommitLogFile, FileEnd, int]]) -> None:
        """Zeros are the normal end of data, but only if no later file holds messages; a file
        that ends cleanly must be followed by one starting where it ends (no gap)."""
        for (a, end, _), (b, _, _) in zip(ends, ends[1:], strict=False):
            if a.start + a.size != b.start and end.clean:
                self._note(Finding(
                    "gap", b.rel, 0,
                    f"file starts at {b.start} but the previous one ends at {a.start + a.size}"
                    " (commitlog data missing)", phy=a.start + a.size,
                ))
        for i, (f, end, _) in enumerate(ends[:-1]):
            if end.kind == "zeros" and any(c for _, _, c in ends[i + 1 :]):
                self._note(Finding(
                    "zeros", f.rel, end.physical_offset - f.start,
                    "data ends in zeros but a later commitlog file holds messages "
                    "(zero-filled region)", phy=end.physical_offset,
                ))

    def messages(
        self, start_offset: int = 0, *, since: int | None = None
    ) -> Iterator[CommitLogMessage]:
        """Every message in physical (commitlog) order from ``start_offset``.

        ``since`` (epoch ms) skips whole files whose next file starts before that store time.
        """
        files = self.commitlog_files
        first = 0
        if start_offset:
            first = max(0, bisect.bisect_right(self._starts, start_offset) - 1)
        if since is not None:
            first = max(first, self._first_file_since(since))
        ends: list[tuple[CommitLogFile, FileEnd, int]] = []
        for f in files[first:]:
            count = 0
            for item in self.scan_commitlog_file(f):
                if isinstance(item, CommitLogMessage):
                    count += 1
                    if item.physical_offset >= start_offset:
                        yield item
                elif isinstance(item, FileEnd):
                    ends.append((f, item, count))
        self._check_early_end(ends)

    def _first_time(self, f: CommitLogFile) -> int | None:
        try:
            rec = parse_message(self._map(f.path), 0, file=f.rel, file_start=f.start)
        except FormatError:
            return None
        return rec.store_timestamp if isinstance(rec, CommitLogMessage) else None

    def _first_file_since(self, since: int) -> int:
        lo, hi = 0, len(self.commitlog_files) - 1
        best = 0
        while lo <= hi:  # last file whose first record is stored at or before `since`
            mid = (lo + hi) // 2
            t = self._first_time(self.commitlog_files[mid])
            if t is None:
                return best
            if t <= since:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        return best

    def message_at(self, offset: int, *, note: bool = True) -> CommitLogMessage:
        """The message record starting at commitlog ``offset`` (FormatError/StoreError if none);
        ``note``: a wrong CRC is a finding."""
        f = self.file_for(offset)
        if f is None:
            raise StoreError(f"commitlog offset {offset} is outside every commitlog file")
        pos = offset - f.start
        rec = parse_message(self._map(f.path), pos, file=f.rel, file_start=f.start)
        if not isinstance(rec, CommitLogMessage):
            raise FormatError(f.rel, pos, "a BLANK end-of-file record, not a message", phy=offset)
        if rec.physical_offset != offset:
            raise BadFieldError(
                f.rel, pos, f"record's PHYSICALOFFSET says {rec.physical_offset}", phy=offset,
            )
        if self.check_crc and note:  # the record is still returned; a wrong CRC is a finding
            for crc in crc_findings(rec, f.rel, pos, f.start):
                self._note(crc)
        return rec

    def try_message_at(self, offset: int, *, note: bool = True) -> CommitLogMessage | None:
        try:
            return self.message_at(offset, note=note)
        except MqtoolError:
            return None

    def max_physical_offset(self) -> int:
        """Where written data ends (the commitlog's max offset; cached)."""
        if self._data_end is None:
            self._data_end = self._find_data_end()
        return self._data_end

    def _find_data_end(self) -> int:
        for f in reversed(self.commitlog_files):
            end = self.walked_ends.get(f.path) or self._file_end(f)
            if end.kind == "blank":
                return f.start + f.size
            if end.physical_offset > f.start or f is self.commitlog_files[0]:
                return end.physical_offset
        return 0

    def _file_end(self, f: CommitLogFile) -> FileEnd:
        """How commitlog file ``f``'s data ends (the walk's findings noted): by the walker over
        a file holding up to :data:`KERNEL_MIN_BYTES` on disk, else by :meth:`walk_fields`
        (the compiled kernel's walk, which gives the walker's answers but costs loading numba
        first; a DLedger file's own walk)."""
        buf = self.mapped(f)
        try:  # the descriptor lets the walker skip the holes of a sparse (pre-allocated) file
            fd: int | None = os.open(f.path, os.O_RDONLY) if len(buf) else None
        except OSError:
            fd = None
        end: FileEnd | None = None
        try:
            if self.dledger or disk_bytes(f.path) > KERNEL_MIN_BYTES:
                items: Iterator[object] = self.walk_fields(f, fd=fd)
            else:
                items = walk(buf, file=f.rel, file_start=f.start, fd=fd)
            for item in items:
                if isinstance(item, Finding):
                    self.note(item)
                elif isinstance(item, FileEnd):
                    end = item
        finally:
            if fd is not None:
                os.close(fd)
        if end is None:  # pragma: no cover - every walk ends a file with its FileEnd
            raise MqtoolError(f"{f.rel}: the walk gave no end of the data")
        return end

    # --- consume queues -------------------------------------------------------------------
    @property
    def consumequeue_dir(self) -> Path:
        return self.root / CONSUMEQUEUE_DIR

    @property
    def queue_sources(self) -> QueueSources:
        """The store's RocksDB and batch consume queues (:mod:`mqtool.store.queue_sources`)."""
        if self._queues is None:
            self._queues = QueueSources.of(self.root)
            for f in self._queues.findings:
                self._note(f)
        return self._queues

    def queue_kind(self, topic: str, queue_id: int) -> str:
        """``file``, ``rocksdb`` or ``batch``: where a queue's units are."""
        return self.queue_sources.kind(topic, queue_id)

    def queue_ids(self) -> list[tuple[str, int]]:
        """Every (topic, queueId) with a consume queue (files, RocksDB or batch), sorted."""
        out: set[tuple[str, int]] = set(self.queue_sources.ids())
        base = self.consumequeue_dir
        others: list[Path] = []
        out.update((topic, qid) for topic, qid, _ in queue_dirs(base, others))
        for p in others:
            if p.parent != base or not self.queue_sources.is_rocks_file(p.name):
                self._note(queue_stray(self.root, base, p))
        return sorted(out)

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.queue_ids()})

    def _cq_files(self, topic: str, queue_id: int) -> list[Path]:
        return numbered_files(self.consumequeue_dir / topic / str(queue_id))

    def unit_at(self, topic: str, queue_id: int, queue_offset: int) -> CqEntry | None:
        """The unit of file queue ``topic``/``queue_id`` at ``queue_offset`` as it is on disk,
        read with one pread and not checked against its record (None: no file holds it, or it
        is not written: all zeros)."""
        pos = queue_offset * CQ_STORE_UNIT_SIZE
        for p in reversed(self._cq_files(topic, queue_id)):
            if int(p.name) <= pos:
                unit = read_unit(p, pos - int(p.name))
                return None if unit is None or unit == CqEntry(0, 0, 0) else unit
        return None

    def queue_entries(
        self, topic: str, queue_id: int, start: int = 0
    ) -> Iterator[QueueEntry]:
        """Consume-queue units of one queue in queue order from logical offset ``start`` (each
        file's up to its first all-zero unit), each checked against its record by verify's
        unit rule (:meth:`units_ok`: the findings are noted)."""
        if self.queue_kind(topic, queue_id) != "file":
            for qe in self.queue_sources.entries(topic, queue_id, start):
                if qe.file_offset >= 0:
                    self._check_unit(qe.file, qe.file_offset, qe.entry)
                else:
                    key = self.queue_sources.rocks_key(topic, queue_id, qe.queue_offset)
                    self._check_unit(f"{qe.file} (RocksDB key {key})", None, qe.entry)
                yield qe
            return
        for p in self._cq_files(topic, queue_id):
            rel = f"consumequeue/{topic}/{queue_id}/{p.name}"
            base = int(p.name)
            size = _size_now(p)
            if size is None:
                continue  # deleted since the listing (the broker's cleanup)
            self._check_cq_size(rel, size)
            units = size // CQ_STORE_UNIT_SIZE
            first = max(0, start * CQ_STORE_UNIT_SIZE - base) // CQ_STORE_UNIT_SIZE
            chunk = 64  # a lookup of one unit reads few; a listing reads more at a time
            while first < units:
                k = min(chunk, units - first)
                try:
                    offs, sizes, tags = _units(p, first, k, arrays=False)
                except FileNotFoundError:
                    break  # deleted since the listing
                n = next((j for j, u in enumerate(zip(offs, sizes, tags, strict=True))
                          if not any(u)), len(offs))
                pos = [(first + j) * CQ_STORE_UNIT_SIZE for j in range(n)]
                self.units_ok(topic, queue_id, rel, base, pos, offs[:n], sizes[:n], tags[:n])
                for j in range(n):
                    at = pos[j]
                    yield QueueEntry(topic, queue_id, (base + at) // CQ_STORE_UNIT_SIZE,
                                     CqEntry(offs[j], sizes[j], tags[j]), rel, at)
                if n < len(offs):
                    break  # the file's written units end here
                first += k
                chunk = min(chunk * 4, 1 << 14)

    def units_ok(
        self, topic: str, queue_id: int, rel: str, base: int, pos: Ints, offs: Ints,
        sizes: Ints, tags: Ints,
    ) -> set[int]:
        """Verify's unit rule (:func:`mqtool.store.unit_check.unit_findings`) for units of
        consume-queue file ``rel`` (named ``base``) at in-file byte positions ``pos`` (lists,
        or numpy arrays for many units): their findings are noted (on a live store, a unit read
        while the broker wrote it is read again). Returns the indices of the units that are
        findings."""
        from mqtool.store.unit_check import unit_findings

        bad: set[int] = set()
        if not len(pos):
            return bad
        first = self.commitlog_files[0].start if self.commitlog_files else 0

        def where(logical: int) -> tuple[str, int]:
            return rel, logical * CQ_STORE_UNIT_SIZE - base

        data_end = self.max_physical_offset()
        logical: Ints
        if isinstance(pos, list):
            logical = [(base + p) // CQ_STORE_UNIT_SIZE for p in pos]
        else:
            import numpy as np

            logical = (base + np.asarray(pos)) // CQ_STORE_UNIT_SIZE
        for i, f in unit_findings(self, topic, queue_id, logical, offs, sizes, tags, where,
                                  first, data_end):
            if self.live and self._unit_settled(
                    topic, queue_id, rel, base, int(pos[i]),
                    CqEntry(int(offs[i]), int(sizes[i]), int(tags[i]))):
                continue
            bad.add(i)
            self.note(f)
        return bad

    def _unit_settled(
        self, topic: str, queue_id: int, rel: str, base: int, pos: int, unit: CqEntry
    ) -> bool:
        """On a live store: whether a unit that is a finding was read while the broker wrote
        it (read again, it is another unit, and that one is no finding)."""
        from mqtool.store.unit_check import unit_findings

        first = self.commitlog_files[0].start if self.commitlog_files else 0
        for _ in range(SETTLE_TRIES):
            now = read_unit(self.root / rel, pos)
            if now is not None and now != unit:
                return not unit_findings(
                    self, topic, queue_id, [(base + pos) // CQ_STORE_UNIT_SIZE],
                    [now.commit_log_offset], [now.size], [now.tags_code],
                    lambda _: (rel, pos), first, self.max_physical_offset())
            time.sleep(0.01)
        return False

    def unit_problem(self, e: CqEntry) -> str | None:
        """Why a consume-queue unit cannot name a record: impossible values (RocketMQ never
        writes a negative offset or a size below the smallest record) or a record past the
        commitlog's written data (dangling). None when it may; on a live store, also when its
        record lies past the files the store was opened with (written since)."""
        if e.commit_log_offset < 0 or e.size < MIN_RECORD_SIZE:
            return f"impossible unit: commitlog offset {e.commit_log_offset}, size {e.size}"
        end = self.max_physical_offset()
        if e.commit_log_offset + e.size > end:
            if self.live and e.commit_log_offset >= self.listed_end():
                return None  # in a file made after the store was opened
            if not self.live:  # (live: the record may be there by now, read below)
                return (f"unit points past the commitlog data (record {e.commit_log_offset}+"
                        f"{e.size}, data ends at {end})")
        f = self.file_for(e.commit_log_offset)
        pos = e.commit_log_offset - f.start if f is not None else -1
        buf = self.mapped(f) if f is not None else b""
        if not header_ok(buf, pos, f.start if f else 0) or int.from_bytes(
                buf[pos:pos + 4], "big") != e.size:
            return (f"unit names no record: no message of {e.size} bytes starts at commitlog "
                    f"offset {e.commit_log_offset}")
        return None

    def listed_end(self) -> int:
        """Where the commitlog files the store was opened with end."""
        last = self.commitlog_files[-1] if self.commitlog_files else None
        return last.start + last.size if last is not None else 0

    def _check_unit(self, rel: str, pos: int | None, e: CqEntry) -> bool:
        """Note a finding for a unit that cannot name a record; True when it may. On a live
        store a unit read while the broker wrote it is read again."""
        why = self.unit_problem(e)
        if why is not None and self.live and pos is not None:
            for _ in range(SETTLE_TRIES):
                now = read_unit(self.root / rel, pos)
                if now is not None and now != e:
                    e = now
                    why = self.unit_problem(e)
                    break
                time.sleep(0.01)
        if why is None:
            return True
        phy = e.commit_log_offset if e.commit_log_offset >= 0 else None
        self._note(Finding("cq", rel, pos, why, phy=phy))
        return False

    def _check_cq_size(self, rel: str, size: int) -> None:
        """An empty consume-queue file, or one that is not whole units, is damage (on a live
        store an empty file is one the broker is making)."""
        if size == 0:
            if not self.live:
                self._note(Finding("cq", rel, 0, "empty consume-queue file (0 bytes)"))
        elif size % CQ_STORE_UNIT_SIZE:
            self._note(Finding(
                "cq", rel, size - size % CQ_STORE_UNIT_SIZE,
                f"consume-queue file size {size} is not a multiple of {CQ_STORE_UNIT_SIZE}",
            ))

    def queue_info(self, topic: str, queue_id: int) -> QueueInfo:
        """Min/max logical offsets of a queue (max = after the last written unit that is no
        finding of verify's unit rule, :meth:`units_ok`; the findings are noted)."""
        if self.queue_kind(topic, queue_id) != "file":
            info = QueueInfo(topic, queue_id, [])
            info.min_offset, info.max_offset, info.last_commit_log_offset = \
                self.queue_sources.span(topic, queue_id)
            return info
        files = self._cq_files(topic, queue_id)
        info = QueueInfo(topic, queue_id, files)
        first_seen = False
        # min: the first written unit of the first file; max: after the last written unit
        for p in files:
            base = int(p.name) // CQ_STORE_UNIT_SIZE
            rel = f"consumequeue/{topic}/{queue_id}/{p.name}"
            size = _size_now(p)
            try:
                if size is None:
                    raise FileNotFoundError(p)
                count = size // CQ_STORE_UNIT_SIZE
                pos, offs, sizes, tags = _written(
                    *_units(p, 0, count, arrays=count >= KERNEL_MIN_UNITS))
            except FileNotFoundError:
                continue  # deleted since the listing (the broker's cleanup)
            self._check_cq_size(rel, size)
            if not len(pos):
                continue
            if not first_seen:
                info.min_offset = base + int(pos[0]) // CQ_STORE_UNIT_SIZE
                first_seen = True
            bad = self.units_ok(topic, queue_id, rel, int(p.name), pos, offs, sizes, tags)
            last = len(pos) - 1
            while last >= 0 and last in bad:
                last -= 1
            if last >= 0:
                info.max_offset = base + int(pos[last]) // CQ_STORE_UNIT_SIZE + 1
                info.last_commit_log_offset = int(offs[last])
        if not first_seen and files:
            info.min_offset = info.max_offset = int(files[0].name) // CQ_STORE_UNIT_SIZE
        return info

    def queue_entry(self, topic: str, queue_id: int, queue_offset: int) -> QueueEntry | None:
        for qe in self.queue_entries(topic, queue_id, queue_offset):
            return qe if qe.queue_offset == queue_offset else None
        return None

    def offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """First queue offset whose message was stored at or after ``timestamp`` (binary search
        over the queue, reading store times from the commitlog, like getOffsetInQueueByTime)."""
        entries = list(self.queue_entries(topic, queue_id))
        lo, hi = 0, len(entries)
        while lo < hi:
            mid = (lo + hi) // 2
            m = self.try_message_at(entries[mid].entry.commit_log_offset)
            if m is not None and m.store_timestamp < timestamp:
                lo = mid + 1
            else:
                hi = mid
        return entries[lo].queue_offset if lo < len(entries) else (
            entries[-1].queue_offset + 1 if entries else 0
        )

    def find_by_offset_msg_id(self, msg_id: str) -> CommitLogMessage | None:
        """The message an offsetMsgId names (by its commitlog offset; the host may differ)."""
        from mqtool.formats.msgid import decode_offset_msg_id

        try:
            off = decode_offset_msg_id(msg_id).commit_log_offset
        except FormatError:
            return None
        if off < 0:
            return None
        return self.try_message_at(off)

    # --- other root files -----------------------------------------------------------------
    @property
    def abort_exists(self) -> bool:
        return (self.root / "abort").exists()

    def lock_state(self) -> LockState:
        """Whether a process (a running broker) held the ``lock`` file's lock when the store
        was opened."""
        return self.lock

    def config_path(self, name: str) -> Path:
        return self.root / "config" / name
