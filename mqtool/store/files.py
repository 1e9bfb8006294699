"""The small value types of a store root and how its files are opened: read-only maps, one
consume-queue unit as it is on disk, queue places and the ``lock`` file's holder (where the root
and the numbered files are: :mod:`mqtool.formats.store_dirs`)."""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from mqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE, CQ_UNIT_STRUCT, CqEntry
from mqtool.formats.errors import Finding, MqtoolError, Severity
from mqtool.formats.store_dirs import is_queue_id


class StoreError(MqtoolError):
    """A store root that cannot be used as asked (missing, not a store, bad argument)."""


def misnamed(rel: str, name: str) -> Finding:
    """A file (or directory) among a store's listed files whose name is not ``name`` (what its
    name must be): left out by every reader, said as a warning."""
    return Finding("layout", rel, None, f"not {name}; skipped", severity=Severity.WARNING)


def queue_stray(root: Path, base: Path, path: Path) -> Finding:
    """What ``path`` is, listed among the queue directories of ``base`` (``consumequeue/`` or
    the batch queues') and left out by :func:`mqtool.formats.store_dirs.queue_dirs`."""
    rel = path.relative_to(root).as_posix()
    if path.parent == base:
        return Finding("cq", rel, None, "expected a topic directory, found a file")
    if is_queue_id(path.name):
        return Finding("cq", rel, None, "expected a queue directory, found a file")
    return misnamed(rel, "a queue directory name (a queue id)")


def read_unit(path: Path, pos: int) -> CqEntry | None:
    """The consume-queue unit at byte ``pos`` of ``path`` as it is now, read with one pread
    (None: the file is gone or ends before it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        raw = os.pread(fd, CQ_STORE_UNIT_SIZE, pos)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(raw) < CQ_STORE_UNIT_SIZE:
        return None
    return CqEntry(*CQ_UNIT_STRUCT.unpack(raw))


def disk_bytes(path: Path) -> int:
    """What ``path`` takes on disk (``st_blocks`` x 512, at most its length): a sparse file's
    holes take none, so a pre-allocated 1 GiB commitlog with 3 MiB written takes about 3 MiB."""
    st = path.stat()
    blocks = getattr(st, "st_blocks", None)  # not on every platform
    return st.st_size if blocks is None else min(st.st_size, int(blocks) * 512)


def map_readonly(path: Path, size: int | None = None) -> bytes | mmap.mmap:
    """The file's bytes, mapped read-only (an empty file gives ``b""``).

    ``size``: map that many bytes (the size the file had when it was listed; a file a broker
    makes grows from 0 to its full size), at most the file's size now."""
    fd = os.open(path, os.O_RDONLY)
    try:
        now = os.fstat(fd).st_size
        size = now if size is None else min(size, now)
        if size == 0:
            return b""
        return mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class CommitLogFile:
    """One commitlog file: its path, the commitlog offset of its first byte, its size."""

    path: Path
    start: int  # commitlog offset of the first byte (from the name)
    size: int
    dir: str = "commitlog"  # its directory relative to the store root (DLedger: dledger-<id>/data)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def rel(self) -> str:
        return f"{self.dir}/{self.path.name}"


@dataclass(frozen=True, slots=True)
class QueueEntry:
    """A consume-queue unit with its place: topic, queue id and logical queue offset."""

    topic: str
    queue_id: int
    queue_offset: int
    entry: CqEntry
    file: str
    file_offset: int


@dataclass(slots=True)
class QueueInfo:
    """One consume queue: its files and its offsets."""

    topic: str
    queue_id: int
    files: list[Path]
    min_offset: int = 0
    max_offset: int = 0  # next offset to be written (count = max - min)
    last_commit_log_offset: int | None = None


@dataclass(slots=True)
class LockState:
    """The store's ``lock`` file: whether it exists and whether a process holds it."""

    exists: bool
    locked: bool
    holder_pid: int | None = None


def lock_state(root: Path) -> LockState:
    """Whether a process (a running broker) holds the lock of the ``lock`` file at ``root``."""
    p = root / "lock"
    if not p.exists():
        return LockState(False, False)
    return LockState(True, *_lock_holder(p))


def _lock_holder(path: Path) -> tuple[bool, int | None]:
    """Ask the kernel (fcntl F_GETLK) whether another process holds a write lock on ``path``."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False, None
    try:
        # struct flock: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
        req = struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0)
        res = fcntl.fcntl(fd, fcntl.F_GETLK, req)
        l_type, _, _, _, pid = struct.unpack("hhqqi4x", res)
        if l_type == fcntl.F_UNLCK:
            return False, None
        return True, pid
    except OSError:
        return False, None
    finally:
        os.close(fd)
