"""What ``mqtool verify`` read: per-file, per-queue and per-index scans and the report
(:mod:`mqtool.integrity.checks` builds them; the compact message table is
:class:`mqtool.store.facts.Messages`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mqtool.formats.consumequeue import CQ_DTYPE, CQ_STORE_UNIT_SIZE
from mqtool.formats.errors import Finding, Severity
from mqtool.formats.indexfile import INDEX_ENTRY_DTYPE
from mqtool.store.facts import Messages
from mqtool.store.files import CommitLogFile

if TYPE_CHECKING:
    from mqtool.formats.checkpoint import Checkpoint
    from mqtool.formats.config.load import ConfigLoad

ProgressFn = Callable[[int], None]
"""Called with the number of bytes just read (for a progress bar)."""



@dataclass
class FileScan:
    """How one commitlog file reads."""

    file: CommitLogFile
    messages: int = 0
    message_bytes: int = 0
    data_end: int = 0  # commitlog offset where its readable data ends (BLANK start or zeros)
    end_kind: str = "zeros"  # FileEnd kind
    first_break: int | None = None  # first commitlog offset where recovery would stop
    # first damage RocketMQ's recovery reads past (a torn-properties record: only the body CRC
    # is checked unless forceVerifyPropCRC, default false); repair still cuts there
    first_kept_damage: int | None = None
    unreadable_bytes: int = 0


QueueChunk = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Units of a queue: (logical offsets, commitlog offsets, sizes, tagsCodes), int64."""


@dataclass
class QueueScan:
    """One consume queue as read: where its written units are, and which are findings.

    The units themselves are read from the files when needed (:meth:`chunks`,
    :meth:`units_at`), a bounded number at a time; only ``verify(tables=True)`` (repair) keeps
    them all in ``offsets`` / ``phys`` / ``sizes`` / ``tags``."""

    topic: str
    queue_id: int
    files: list[tuple[str, int, int]]  # (rel name, base byte offset, size)
    units: int = 0
    min_offset: int = 0
    max_offset: int = 0  # next logical offset after the last written unit
    # logical offsets and values of the written units (only with verify(tables=True))
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    phys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sizes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    tags: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    bad: set[int] = field(default_factory=set)  # logical offsets of units that are findings
    file_size: int = 0  # the queue's mapped file size (bytes)
    # the written units, per file: (path, logical offset of the file's first unit, count)
    segments: list[tuple[Path, int, int]] = field(default_factory=list)
    # one bit per written unit (in queue order): already seen to point at its own message
    good: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))

    CHUNK = 1 << 14  # units read at a time

    @staticmethod
    def _read(path: Path, first: int, count: int) -> QueueChunk:
        u = np.fromfile(path, dtype=CQ_DTYPE, count=count, offset=first * CQ_STORE_UNIT_SIZE)
        return (np.zeros(0, np.int64), u["offset"].astype(np.int64),
                u["size"].astype(np.int64), u["tags"].astype(np.int64))

    def chunks(self, chunk: int = CHUNK) -> Iterator[QueueChunk]:
        """Every written unit in queue order, ``chunk`` at a time."""
        for path, lo, n in self.segments:
            for c in range(0, n, chunk):
                k = min(chunk, n - c)
                _, phys, sizes, tags = self._read(path, c, k)
                yield np.arange(lo + c, lo + c + k, dtype=np.int64), phys, sizes, tags

    def units_at(self, qoffs: np.ndarray) -> QueueChunk:
        """(place in queue order, commitlog offset, size, tagsCode) of the written unit at each
        logical offset (all -1 where no unit is written)."""
        where = np.full(len(qoffs), -1, np.int64)
        phys = np.full(len(qoffs), -1, np.int64)
        sizes = np.full(len(qoffs), -1, np.int64)
        tags = np.full(len(qoffs), -1, np.int64)
        before = 0
        for path, lo, n in self.segments:
            sel = np.flatnonzero((qoffs >= lo) & (qoffs < lo + n))
            if sel.size:
                rel = qoffs[sel] - lo
                a, b = int(rel.min()), int(rel.max()) + 1
                _, p, s, t = self._read(path, a, b - a)
                where[sel] = before + rel
                phys[sel] = p[rel - a]
                sizes[sel] = s[rel - a]
                tags[sel] = t[rel - a]
            before += n
        return where, phys, sizes, tags

    def mark_good(self, places: np.ndarray) -> None:
        """Note the units at ``places`` (in queue order) as pointing at their own message."""
        if len(self.good) * 8 < self.units:
            self.good = np.zeros((self.units + 7) // 8, np.uint8)
        np.bitwise_or.at(self.good, places >> 3, (1 << (places & 7)).astype(np.uint8))

    def good_at(self, first: int, count: int) -> np.ndarray:
        """Whether each of the ``count`` units from place ``first`` is marked good."""
        if not len(self.good):
            return np.zeros(count, bool)
        bits = np.unpackbits(self.good[first >> 3 : ((first + count + 7) >> 3)],
                             bitorder="little")
        off = first & 7
        return bits[off : off + count].astype(bool)

    def all_phys(self) -> np.ndarray:
        """The commitlog offsets of every written unit (read now, not kept)."""
        parts = [c[1] for c in self.chunks()]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def where(self, logical: int) -> tuple[str, int]:
        """(file, in-file byte offset) of the unit at ``logical``."""
        per_file = self.file_size // CQ_STORE_UNIT_SIZE if self.file_size else 0
        if per_file:
            fb = logical - logical % per_file
            for rel, base, _ in self.files:
                if base == fb * CQ_STORE_UNIT_SIZE:
                    return rel, (logical - fb) * CQ_STORE_UNIT_SIZE
        for rel, base, size in reversed(self.files):
            if base <= logical * CQ_STORE_UNIT_SIZE < base + size:
                return rel, logical * CQ_STORE_UNIT_SIZE - base
        return self.files[-1][0], 0


@dataclass
class IndexScan:
    """One index file as read: its header's counts and the entries that are findings."""

    rel: str
    entries: int = 0
    end_timestamp: int = 0
    begin_timestamp: int = 0
    hash_slot_num: int = 0
    index_num: int = 0
    bad_entries: list[int] = field(default_factory=list)  # entry numbers that are findings
    readable: bool = True
    # per entry 1.. (only with verify(tables=True); :meth:`phys_chunks` reads them)
    phys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    path: Path | None = None
    entry_start: int = 0  # byte offset of entry 1

    CHUNK = 1 << 14  # entries read at a time

    def phys_chunks(self, chunk: int = CHUNK) -> Iterator[np.ndarray]:
        """The commitlog offsets of the entries, ``chunk`` at a time (read now, not kept)."""
        if self.path is None:
            return
        for c in range(0, self.entries, chunk):
            e = np.fromfile(self.path, dtype=INDEX_ENTRY_DTYPE, count=min(chunk, self.entries - c),
                            offset=self.entry_start + c * INDEX_ENTRY_DTYPE.itemsize)
            yield e["p"].astype(np.int64)


@dataclass
class Report:
    """Everything verify read and found; the input of the restart-loss and repair steps."""

    root: Path
    findings: list[Finding]
    files: list[FileScan]
    messages: Messages
    queues: list[QueueScan]
    indexes: list[IndexScan]
    configs: dict[str, ConfigLoad]
    checkpoint: Checkpoint | None
    abort: bool
    lock: dict[str, Any]
    mapped_file_size: int | None
    data_end: int  # where the readable commitlog data ends (after the last readable record)
    bytes_read: int = 0
    check_crc: bool = True
    tables: bool = False  # messages, units and entries kept (verify(tables=True))
    last_store_ts: int = 0  # the latest store time of a readable message
    # the config files and databases the broker's start fails on (check_configs)
    configs_stop_start: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == Severity.ERROR]


class FindingSink:
    """Findings without duplicates: the same kind, file and offset, or for a finding without
    an offset (a key of a RocksDB, a config file) the same kind, file and detail."""

    def __init__(self) -> None:
        self.items: list[Finding] = []
        self._seen: set[tuple[str, str, int | str]] = set()

    def add(self, f: Finding) -> None:
        key = (f.kind, f.file, f.offset if f.offset is not None else f.detail)
        if key not in self._seen:
            self._seen.add(key)
            self.items.append(f)
