"""The byte buffers format readers accept: bytes, bytearray, memoryview and read-only mmaps."""

from __future__ import annotations

import mmap

Buffer = bytes | bytearray | memoryview | mmap.mmap
"""Anything ``struct.unpack_from`` and slicing accept; read-only maps included."""


def close_map(mm: Buffer) -> None:
    """Close a read-only map now (other buffers, such as the ``b""`` of an empty file, need no
    closing), or, while zero-copy views of it are still alive (numpy or
    Arrow arrays handed to a caller), when the last of them is freed: ``mmap.close`` refuses
    with BufferError then, and the map object closes itself when it is collected. Nothing is
    lost either way: the map is read-only and its file descriptor is closed separately."""
    if not isinstance(mm, mmap.mmap):
        return
    try:
        mm.close()
    except BufferError:
        return  # views still alive: garbage collection closes the map after the last one
