"""The small value types of a store root and how its files are opened (split from
:mod:`mqtool.store`, which re-exports them): read-only maps, commitlog file names, queue places
and the ``lock`` file's holder."""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from mqtool.formats.consumequeue import CqEntry
from mqtool.formats.errors import MqtoolError


class StoreError(MqtoolError):
    """A store root that cannot be used as asked (missing, not a store, bad argument)."""


def map_readonly(path: Path) -> bytes | mmap.mmap:
    """The file's bytes, mapped read-only (an empty file gives ``b""``)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return b""
        return mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class CommitLogFile:
    path: Path
    start: int  # commitlog offset of the first byte (from the name)
    size: int

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def rel(self) -> str:
        return f"commitlog/{self.path.name}"


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
    topic: str
    queue_id: int
    files: list[Path]
    min_offset: int = 0
    max_offset: int = 0  # next offset to be written (count = max - min)
    last_commit_log_offset: int | None = None


@dataclass(slots=True)
class LockState:
    exists: bool
    locked: bool
    holder_pid: int | None = None


def _lock_holder(path: Path) -> tuple[bool, int | None]:
    """Ask the kernel (fcntl F_GETLK) whether another process holds a write lock on ``path``."""
    import fcntl

    fd = os.open(path, os.O_RDONLY)
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
