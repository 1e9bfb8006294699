"""What ``mqtool verify`` read: per-file, per-queue and per-index scans, the compact message
table and the report (split from :mod:`mqtool.integrity.checks`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mqtool.formats.checkpoint import Checkpoint
from mqtool.formats.errors import Finding, Severity
from mqtool.integrity.configs import ConfigLoad
from mqtool.store import CommitLogFile

ProgressFn = Callable[[int], None]
"""Called with the number of bytes just read (for a progress bar)."""

_UNIT = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags", ">i8")])
_ENTRY = np.dtype([("h", ">i4"), ("p", ">i8"), ("t", ">i4"), ("v", ">i4")])


@dataclass
class FileScan:
    """How one commitlog file reads."""

    file: CommitLogFile
    messages: int = 0
    message_bytes: int = 0
    data_end: int = 0  # commitlog offset where its readable data ends (BLANK start or zeros)
    end_kind: str = "zeros"  # FileEnd kind
    first_break: int | None = None  # first commitlog offset where recovery would stop
    unreadable_bytes: int = 0


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


@dataclass
class QueueScan:
    """One consume queue as read: its units (positions, values) and findings."""

    topic: str
    queue_id: int
    files: list[tuple[str, int, int]]  # (rel name, base byte offset, size)
    units: int = 0
    min_offset: int = 0
    max_offset: int = 0  # next logical offset after the last written unit
    # logical offsets and values of the written units (kept for recovery and repair)
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    phys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sizes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    tags: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    bad: set[int] = field(default_factory=set)  # logical offsets of units that are findings
    file_size: int = 0  # the queue's mapped file size (bytes)


@dataclass
class IndexScan:
    rel: str
    entries: int = 0
    end_timestamp: int = 0
    begin_timestamp: int = 0
    hash_slot_num: int = 0
    index_num: int = 0
    bad_entries: list[int] = field(default_factory=list)  # entry numbers that are findings
    readable: bool = True
    phys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # per entry 1..


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
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == Severity.ERROR]


class _Sink:
    """Findings without duplicates (same kind, file and offset)."""

    def __init__(self) -> None:
        self.items: list[Finding] = []
        self._seen: set[tuple[str, str, int | None]] = set()

    def add(self, f: Finding) -> None:
        key = (f.kind, f.file, f.offset)
        if key not in self._seen:
            self._seen.add(key)
            self.items.append(f)
