"""The commitlog as a queue of mapped files: append with BLANK roll, read, truncate; the
chunk after the one being written is read into the page cache ahead, on a thread."""

from __future__ import annotations

import mmap
import os
import queue
import threading
from pathlib import Path
from typing import cast

from mqtool.formats.commitlog import (
    CommitLogMessage,
    parse_message,
)
from mqtool.formats.store_dirs import numbered_files, offset_name
from mqtool.refstore.mapped import (
    MappedFile,
    RefStoreError,
    populate,
    release,
)

END_FILE_MIN_BLANK_LENGTH = 8  # CommitLog.END_FILE_MIN_BLANK_LENGTH
POPULATE_CHUNK = 4 << 20  # commitlog bytes pre-faulted at a time
KEEP_MAPPED = 64 << 20  # bytes behind the write position kept in the resident set
READ_AHEAD_PIECE = 256 << 10  # bytes per read of the read-ahead thread


class ReadAhead:
    """Brings a file's next bytes into the page cache on a thread of its own.

    The first touch of a page-cache page costs the kernel a page to allocate and zero (on a
    virtual machine, often a fault in the host as well): milliseconds per chunk, paid by
    whichever request's write reaches the chunk first. The thread reads the chunk after the
    one being written (reads release the GIL), so that :func:`populate` later only maps pages
    that are there. Each request holds its own duplicate of the file's descriptor: a file
    closed or removed meanwhile is read harmlessly, or not at all.
    """

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[int, int, int] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.asked: list[tuple[int, int]] = []  # the last requests (start, length)

    def request(self, fd: int, start: int, length: int) -> None:
        """Read ``[start, start + length)`` of ``fd``'s file (a duplicate of ``fd`` is kept
        until it is done). An fd that cannot be duplicated is left alone: read-ahead is only
        ever a saving."""
        try:
            dup = os.dup(fd)
        except OSError:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mqtool-readahead",
                                            daemon=True)
            self._thread.start()
        self._work.put((dup, start, length))
        self.asked = [*self.asked[-7:], (start, length)]

    def _run(self) -> None:
        piece = bytearray(READ_AHEAD_PIECE)
        while (job := self._work.get()) is not None:
            fd, pos, length = job
            end = pos + length
            try:
                while pos < end:
                    n = os.preadv(fd, [memoryview(piece)[: min(len(piece), end - pos)]], pos)
                    if n <= 0:
                        break
                    pos += n
            except OSError:
                pass  # nothing is lost: the writer faults the pages in itself
            finally:
                os.close(fd)

    def close(self) -> None:
        """Stop the thread (after the reads asked for)."""
        if self._thread is not None:
            self._work.put(None)
            self._thread.join()
            self._thread = None



class CommitLogFiles:
    """The commitlog's files (``MappedFileQueue``); one writer."""

    def __init__(self, directory: Path, file_size: int) -> None:
        self.dir = directory
        self.file_size = file_size
        self.files: list[MappedFile] = []
        directory.mkdir(parents=True, exist_ok=True)
        paths = numbered_files(directory, strict=False)
        for i, path in enumerate(paths):
            size = path.stat().st_size
            if size < file_size and i == len(paths) - 1:
                path.unlink()  # killed while creating it (before it was sized): nothing in it
                break
            if size != file_size:
                raise RefStoreError(
                    f"{path}: {size} bytes, but the store's commitlog files are {file_size} "
                    "bytes (pass the matching StoreConfig)"
                )
            self.files.append(MappedFile(path, int(path.name), file_size, create=False))
        self.write_pos = self.files[0].file_from_offset if self.files else 0
        self._cur: MappedFile | None = None  # the file the last reserve() returned
        self._populated = 0  # bytes of _cur already pre-faulted
        self._dropped = 0  # bytes of _cur released from this process's mapping
        self.read_ahead = ReadAhead()

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    def file_at(self, offset: int) -> MappedFile | None:
        if not self.files:
            return None
        i = (offset - self.files[0].file_from_offset) // self.file_size
        if 0 <= i < len(self.files):
            mf = self.files[i]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        return None

    def _new_file(self, start: int) -> MappedFile:
        mf = MappedFile(self.dir / offset_name(start), start, self.file_size, create=True)
        self.files.append(mf)
        return mf

    def reserve(self, size: int) -> tuple[MappedFile, int]:
        """(file, position in file) for a record of ``size`` bytes, rolling with a BLANK."""
        cur = self._cur
        if cur is not None:
            pos = self.write_pos - cur.file_from_offset
            if 0 <= pos and pos + size + END_FILE_MIN_BLANK_LENGTH <= self.file_size:
                if pos + size > self._populated:
                    self._populate(cur, pos + size)
                return cur, pos
        prev = self._cur
        mf, pos = self._reserve_slow(size)
        if prev is not None and prev is not mf:
            release(prev.mm, 0, self.file_size)
        self._cur = mf
        self._populated = pos
        self._dropped = 0
        self._populate(mf, pos + size)
        return mf, pos

    def _populate(self, mf: MappedFile, upto: int) -> None:
        """Pre-fault the next chunk of the file in one call instead of a fault per page."""
        start = self._populated
        end = min(self.file_size, max(upto, start) + POPULATE_CHUNK)
        # blocks first (no room is an error, not SIGBUS); only what got them is pre-faulted
        end = min(end, mf.allocate(start, upto, end - upto))
        populate(mf.mm, start, end - start)
        self._populated = end
        if end < self.file_size:  # the next chunk, read while this one is written
            self.read_ahead.request(mf.fileno(), end, min(POPULATE_CHUNK, self.file_size - end))
        # drop our mapping of what lies well behind the write position: the data stays in the
        # page cache / file (shared mapping), the process's resident set stays bounded
        behind = start - KEEP_MAPPED
        if behind > self._dropped:
            release(mf.mm, self._dropped, behind - self._dropped)
            self._dropped = behind

    def _reserve_slow(self, size: int) -> tuple[MappedFile, int]:
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise RefStoreError(
                f"a {size}-byte record does not fit a {self.file_size}-byte commitlog file"
            )
        mf = self.file_at(self.write_pos) if self.files else None
        if mf is None:
            mf = self._new_file(self.write_pos - self.write_pos % self.file_size)
        pos = self.write_pos - mf.file_from_offset
        left = self.file_size - pos
        if size + END_FILE_MIN_BLANK_LENGTH > left:
            mf.allocate(pos, pos + 8)
            mm = mf.mm
            mm[pos + 4 : pos + 8] = B_BLANK_MAGIC
            mm[pos : pos + 4] = left.to_bytes(4, "big")
            self.write_pos = mf.file_from_offset + self.file_size
            mf = self._new_file(self.write_pos)
            pos = 0
        return mf, pos

    def write(self, mf: MappedFile, pos: int, record: bytes) -> None:
        """Copy the record in, TOTALSIZE last: a torn copy reads as the end of the data."""
        mm = mf.mm
        n = len(record)
        mm[pos + 4 : pos + n] = record[4:]
        mm[pos : pos + 4] = record[:4]
        self.write_pos = mf.file_from_offset + pos + n

    def read(self, offset: int) -> CommitLogMessage:
        mf = self.file_at(offset)
        if mf is None or offset >= self.write_pos:
            raise RefStoreError(f"no message at commitlog offset {offset}")
        rec = parse_message(
            buf(mf.mm), offset - mf.file_from_offset, file=str(mf.path),
            file_start=mf.file_from_offset,
        )
        if not isinstance(rec, CommitLogMessage):
            raise RefStoreError(f"commitlog offset {offset} is an end-of-file BLANK record")
        return rec

    def record_bytes(self, offset: int, size: int) -> bytes:
        """The ``size`` bytes of the record at ``offset`` as stored (what a pull response
        carries, ``transferMsgByHeap``), its TOTALSIZE checked against ``size``."""
        mf = self.file_at(offset)
        if mf is None or offset + size > self.write_pos:
            raise RefStoreError(f"no message of {size} bytes at commitlog offset {offset}")
        at = offset - mf.file_from_offset
        raw = mf.mm[at : at + size]
        if len(raw) != size or int.from_bytes(raw[:4], "big") != size:
            raise RefStoreError(
                f"{mf.path}: the record at commitlog offset {offset} is not the {size} bytes "
                "its consume queue unit says"
            )
        return raw

    def read_any(self, offset: int) -> CommitLogMessage:
        """The record at ``offset`` whatever the write position (used before it is known)."""
        mf = self.file_at(offset)
        if mf is None:
            raise RefStoreError(f"no commitlog file holds offset {offset}")
        rec = parse_message(
            buf(mf.mm), offset - mf.file_from_offset, file=str(mf.path),
            file_start=mf.file_from_offset,
        )
        if not isinstance(rec, CommitLogMessage):
            raise RefStoreError(f"commitlog offset {offset} is a BLANK record")
        return rec

    def truncate(self, end: int, zero_window: int) -> None:
        """Cut everything from absolute offset ``end`` on (zero the tail of its file)."""
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.file_from_offset > end or (mf.file_from_offset == end and keep):
                mf.remove()
            else:
                keep.append(mf)
        self.files = keep
        self._cur = None
        mf0 = self.file_at(end)
        if mf0 is not None:
            pos = end - mf0.file_from_offset
            stop = min(self.file_size, pos + zero_window)
            chunk = mf0.mm[pos:stop]
            if any(chunk):
                mf0.mm[pos:stop] = bytes(stop - pos)
        self.write_pos = end

    def flush_files(self) -> list[MappedFile]:
        """The files a flush makes durable (the last two: the one written and the one before)."""
        return self.files[-2:]

    def close(self) -> None:
        self.read_ahead.close()
        for mf in self.files:
            mf.close()
        self.files = []
        self._cur = None


B_BLANK_MAGIC = (0xCBD43194).to_bytes(4, "big")





def buf(mm: mmap.mmap) -> bytes:
    """An mmap where the formats API takes a buffer (it only slices and unpacks)."""
    return cast(bytes, mm)


