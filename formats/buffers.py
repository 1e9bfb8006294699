"""The byte buffers format readers accept: bytes, bytearray, memoryview and read-only mmaps."""

from __future__ import annotations

import mmap

Buffer = bytes | bytearray | memoryview | mmap.mmap
"""Anything ``struct.unpack_from`` and slicing accept; read-only maps included."""
