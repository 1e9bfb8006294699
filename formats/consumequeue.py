"""ConsumeQueue entries: ``org.apache.rocketmq.store.ConsumeQueue``.

Byte order: big-endian. ``consumequeue/<topic>/<queueId>/<20-digit start byte offset>`` holds
20-byte units ``commitlog offset i64 | size i32 | tagsCode i64``; the logical (queue) offset of
a unit is its absolute byte offset / 20. A zero-filled unit marks unwritten space. For
``SCHEDULE_TOPIC_XXXX`` the tagsCode is the deliver timestamp (epoch ms); a tagsCode at or below
``ConsumeQueueExt.MAX_ADDR`` is an address into ``consumequeue_ext`` (``enableConsumeQueueExt``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mqtool.formats.buffers import Buffer
from mqtool.formats.errors import FormatError
from mqtool.formats.reference import dtype_once, layout
from mqtool.formats.rules import LONG_MIN_VALUE, MAX_ADDR, SCHEDULE_TOPIC, is_ext_addr, tags_code_of

__all__ = [
    "CQ_DTYPE", "CQ_STORE_UNIT_SIZE", "CQ_UNIT_STRUCT", "LONG_MIN_VALUE", "MAX_ADDR",
    "MSG_TAG_OFFSET_INDEX", "SCHEDULE_TOPIC", "CqEntry", "build_cq_entry", "cq_array", "iter_cq",
    "parse_cq_entry", "tags_code_of",
]

CQ_STORE_UNIT_SIZE = 20
MSG_TAG_OFFSET_INDEX = 12

if TYPE_CHECKING:
    import numpy as np

    CQ_DTYPE: np.dtype[Any]
    """numpy dtype of a unit, for bulk reads (made on first use: numpy is imported by the
    reads that use it)."""

CQ_UNIT_STRUCT = struct.Struct(">qiq")
"""One 20-byte unit for ``struct`` reads and writes (``unpack_from``/``pack_into``): the one
struct every reader and writer of units uses."""


def _layouts() -> dict[str, Any]:
    import construct as cs

    return {"CQ_UNIT": cs.Struct(
        "commit_log_offset" / cs.Int64sb,
        "size" / cs.Int32sb,
        "tags_code" / cs.Int64sb,
    )}


def _cq_dtype() -> np.dtype[Any]:
    dtype: np.dtype[Any] = dtype_once(
        globals(), "CQ_DTYPE", [("offset", ">i8"), ("size", ">i4"), ("tags", ">i8")])
    return dtype


def __getattr__(name: str) -> Any:
    """``CQ_DTYPE``: numpy's dtype of a unit; ``CQ_UNIT``: the reference layout of one 20-byte
    unit (construct, :mod:`mqtool.formats.reference`)."""
    if name == "CQ_DTYPE":
        return _cq_dtype()
    return layout(__name__, name, _layouts)


@dataclass(frozen=True, slots=True)
class CqEntry:
    """One consume-queue unit. For SCHEDULE_TOPIC_XXXX ``tags_code`` is a deliver time (ms)."""

    commit_log_offset: int
    size: int
    tags_code: int

    @property
    def is_ext_address(self) -> bool:
        """True when tags_code is a ConsumeQueueExt address, not a tag hash."""
        return is_ext_addr(self.tags_code)

    @property
    def ext_offset(self) -> int:
        """Offset into consumequeue_ext (``ConsumeQueueExt#unDecorate``)."""
        return self.tags_code - LONG_MIN_VALUE  # rules.undecorate of an ext address


def parse_cq_entry(
    buf: Buffer, pos: int = 0, *, file: str | None = None,
    file_start: int = 0,
) -> CqEntry:
    """Decode the unit at ``buf[pos:pos+20]``."""
    if pos + CQ_STORE_UNIT_SIZE > len(buf):
        raise FormatError(
            file, file_start + pos,
            f"truncated consume-queue unit: {len(buf) - pos} of 20 bytes",
        )
    return CqEntry(*CQ_UNIT_STRUCT.unpack_from(buf, pos))


def build_cq_entry(e: CqEntry) -> bytes:
    """Encode one unit as ``ConsumeQueue#putMessagePositionInfo`` writes it."""
    return CQ_UNIT_STRUCT.pack(e.commit_log_offset, e.size, e.tags_code)


def iter_cq(
    buf: Buffer, *, file: str | None = None, file_start: int = 0
) -> Iterator[tuple[int, CqEntry]]:
    """``(byte position in buf, entry)`` for every written unit, stopping at the first zero one.

    A trailing partial unit (file size not a multiple of 20) raises FormatError after the
    complete units have been yielded.
    """
    n = len(buf) - len(buf) % CQ_STORE_UNIT_SIZE
    for pos in range(0, n, CQ_STORE_UNIT_SIZE):
        off, size, tags = CQ_UNIT_STRUCT.unpack_from(buf, pos)
        if off == 0 and size == 0 and tags == 0:
            return
        yield pos, CqEntry(off, size, tags)
    if n != len(buf):
        raise FormatError(
            file, file_start + n,
            f"consume-queue file size {len(buf)} is not a multiple of {CQ_STORE_UNIT_SIZE}",
        )


def cq_array(buf: Buffer) -> np.ndarray:
    """All written units of a file as a numpy structured array (zero tail cut)."""
    import numpy as np

    n = len(buf) // CQ_STORE_UNIT_SIZE
    arr = np.frombuffer(buf, dtype=_cq_dtype(), count=n)
    empty = (arr["offset"] == 0) & (arr["size"] == 0) & (arr["tags"] == 0)
    idx = np.flatnonzero(empty)
    return arr[: idx[0]] if idx.size else arr

