"""The commitlog's read-ahead thread: the next chunk is in the page cache before the writer
reaches it, nothing of the file changes, and the thread ends with the store."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import threading
from pathlib import Path

from mqtool.refstore.engine import RefStore
from mqtool.refstore.logfiles import POPULATE_CHUNK, ReadAhead
from mqtool.refstore.values import Message

PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def resident(path: Path, start: int, length: int) -> int:
    """Pages of ``path`` in ``[start, start + length)`` that are in the page cache
    (``mincore`` over a read-only mapping of the file, which faults nothing in)."""
    size = start + length
    libc = _libc
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    finally:
        os.close(fd)
    assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
    vec = (ctypes.c_ubyte * ((size + PAGE - 1) // PAGE))()
    try:
        assert libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
    finally:
        libc.munmap(addr, size)
    return sum(v & 1 for v in vec[start // PAGE :])


def sparse(path: Path, size: int) -> Path:
    with path.open("wb") as f:
        f.truncate(size)
    return path


def test_a_request_brings_its_range_into_the_page_cache(tmp_path: Path) -> None:
    path = sparse(tmp_path / "f", 8 << 20)
    assert resident(path, 0, 8 << 20) == 0  # nothing read yet
    ahead = ReadAhead()
    fd = os.open(path, os.O_RDONLY)
    try:
        ahead.request(fd, 1 << 20, 2 << 20)
        ahead.close()  # after the reads asked for
    finally:
        os.close(fd)
    assert resident(path, 1 << 20, 2 << 20) == (2 << 20) // PAGE
    st = path.stat()
    assert (st.st_size, st.st_blocks) == (8 << 20, 0)  # read only: no byte, no block
    assert not [t for t in threading.enumerate() if t.name == "mqtool-readahead"]


def test_a_descriptor_closed_or_bad_is_harmless(tmp_path: Path) -> None:
    path = sparse(tmp_path / "f", 1 << 20)
    ahead = ReadAhead()
    fd = os.open(path, os.O_RDONLY)
    ahead.request(fd, 0, 1 << 20)
    os.close(fd)  # the request holds a duplicate of its own
    ahead.request(fd, 0, 1 << 20)  # closed: nothing to duplicate, nothing asked
    ahead.request(-1, 0, 1 << 20)
    ahead.close()
    ahead.close()  # twice: nothing left to stop


def test_the_writer_reads_its_next_chunk_ahead(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with RefStore.open(root) as store:
        for i in range(64):
            store.put(Message("ReadAhead", b"x" * 1000, (("KEYS", f"k-{i}"),)))
        end = store.commitlog.write_pos
        asked = store.commitlog.read_ahead.asked
    assert end < POPULATE_CHUNK
    # the first chunk was faulted in with the first record; the one after it was asked for
    ((start, length),) = asked
    assert length == POPULATE_CHUNK and POPULATE_CHUNK <= start < POPULATE_CHUNK + PAGE
    path = sorted((root / "commitlog").iterdir())[0]
    assert resident(path, start, length) >= length // PAGE
    assert not [t for t in threading.enumerate() if t.name == "mqtool-readahead"]
