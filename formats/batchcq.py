"""BatchConsumeQueue units and ConsumeQueueExt units/addresses (RocketMQ store, 5.x).

Mirrors ``org.apache.rocketmq.store.queue.BatchConsumeQueue`` (46-byte units in
``store/batchconsumequeue/<topic>/<queueId>/``, also the compaction queue
``store/compaction/compactionCq``) and ``org.apache.rocketmq.store.ConsumeQueueExt`` /
``ConsumeQueueExt.CqExtUnit`` (``store/consumequeue_ext/<topic>/<queueId>/``, 48 MiB files).
Byte order: big-endian (Java ``ByteBuffer``).

BatchConsumeQueue unit (``CQ_STORE_UNIT_SIZE = 46``)::

    @0  phyOffset        int64   commitlog offset of the (batch) message
    @8  size             int32   its size in the commitlog
    @12 tagsCode         int64   MSG_TAG_OFFSET_INDEX
    @20 storeTime        int64   MSG_STORE_TIME_OFFSET_INDEX (epoch ms)
    @28 msgBaseOffset    int64   MSG_BASE_OFFSET_INDEX: queue offset of the batch's first message
    @36 batchSize        int16   MSG_BATCH_SIZE_INDEX: messages in the batch
    @38 compactedOffset  int32   MSG_COMPACT_OFFSET_INDEX (INVALID_POS = -1 when not compacted)
    @42 reserved         int32

ConsumeQueueExt unit (``CqExtUnit``, ``MIN_EXT_UNIT_SIZE = 20``)::

    size int16 | tagsCode int64 | msgStoreTime int64 | bitMapSize int16 | filterBitMap[bitMapSize]

``size`` is the whole unit (20 + bitMapSize); a ``size < 1`` ends a file (0 = unwritten,
``-1`` = the end marker ``ConsumeQueueExt#fullFillToEnd`` leaves when a unit does not fit).
A consume-queue tagsCode ``<= MAX_ADDR`` (``Integer.MIN_VALUE - 1``) is a *decorated* ext
address: the ext queue's byte offset plus ``Long.MIN_VALUE`` (``ConsumeQueueExt#decorate`` /
``#unDecorate``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mqtool.formats.buffers import Buffer
from mqtool.formats.errors import FormatError, TruncatedError
from mqtool.formats.reference import layout
from mqtool.formats.rules import (  # ConsumeQueueExt addresses: one home, formats/rules.py
    MAX_ADDR,
    MAX_REAL_OFFSET,
    decorate,
    is_ext_addr,
    undecorate,
)

__all__ = [
    "CQ_STORE_UNIT_SIZE",
    "INVALID_POS",
    "MAX_ADDR",
    "MAX_REAL_OFFSET",
    "MIN_EXT_UNIT_SIZE",
    "BatchCqEntry",
    "CqExtUnit",
    "build_batch_cq_entry",
    "build_cq_ext_unit",
    "decorate",
    "is_ext_addr",
    "iter_batch_cq",
    "iter_cq_ext",
    "parse_batch_cq_entry",
    "parse_cq_ext_unit",
    "undecorate",
]

# BatchConsumeQueue.java
CQ_STORE_UNIT_SIZE = 8 + 4 + 8 + 8 + 8 + 2 + 4 + 4  # 46
MSG_TAG_OFFSET_INDEX = 12
MSG_STORE_TIME_OFFSET_INDEX = 20
MSG_BASE_OFFSET_INDEX = 28
MSG_BATCH_SIZE_INDEX = 36
MSG_COMPACT_OFFSET_INDEX = 38
INVALID_POS = -1
MAPPED_FILE_SIZE_BATCH_CQ = 300000 * CQ_STORE_UNIT_SIZE  # mapperFileSizeBatchConsumeQueue

# ConsumeQueueExt.java
MIN_EXT_UNIT_SIZE = 2 * 1 + 8 * 2 + 2  # 20
MAX_EXT_UNIT_SIZE = 32767  # Short.MAX_VALUE
END_BLANK_DATA_LENGTH = 4
MAPPED_FILE_SIZE_CQ_EXT = 48 * 1024 * 1024  # mappedFileSizeConsumeQueueExt


def _layouts() -> dict[str, Any]:
    import construct as cs

    return {
        # one 46-byte BatchConsumeQueue unit
        "BATCH_CQ_UNIT": cs.Struct(
            "phyOffset" / cs.Int64sb,
            "size" / cs.Int32sb,
            "tagsCode" / cs.Int64sb,
            "storeTime" / cs.Int64sb,
            "msgBaseOffset" / cs.Int64sb,
            "batchSize" / cs.Int16sb,
            "compactedOffset" / cs.Int32sb,
            "reserved" / cs.Int32sb,
        ),
        # one ConsumeQueueExt unit (CqExtUnit#write); sizes are derived
        "CQ_EXT_UNIT": cs.Struct(
            "size" / cs.Rebuild(cs.Int16sb,
                                lambda ctx: MIN_EXT_UNIT_SIZE + len(ctx.filterBitMap)),
            "tagsCode" / cs.Int64sb,
            "msgStoreTime" / cs.Int64sb,
            "bitMapSize" / cs.Rebuild(cs.Int16sb, cs.len_(cs.this.filterBitMap)),
            "filterBitMap" / cs.Bytes(cs.this.bitMapSize),
        ),
    }


def __getattr__(name: str) -> Any:
    """``BATCH_CQ_UNIT``, ``CQ_EXT_UNIT``: the reference layouts (construct,
    :mod:`mqtool.formats.reference`)."""
    return layout(__name__, name, _layouts)


_BATCH = struct.Struct(">qiqqqhii")
_EXT_HEAD = struct.Struct(">hqqh")
_I16 = struct.Struct(">h")



@dataclass(frozen=True, slots=True)
class BatchCqEntry:
    """One BatchConsumeQueue unit. ``store_time`` epoch ms; ``msg_base_offset`` is the queue
    offset of the batch's first message (messages ``msg_base_offset .. + batch_size - 1``)."""

    phy_offset: int
    size: int
    tags_code: int
    store_time: int
    msg_base_offset: int
    batch_size: int
    compacted_offset: int = INVALID_POS
    reserved: int = 0


def parse_batch_cq_entry(
    buf: Buffer, pos: int = 0, *, file: str | None = None, file_start: int = 0
) -> BatchCqEntry:
    """Decode the 46-byte unit at ``buf[pos:]``."""
    if pos < 0 or pos + CQ_STORE_UNIT_SIZE > len(buf):
        raise TruncatedError(
            file,
            file_start + pos,
            f"truncated batch consume-queue unit: {len(buf) - pos} of {CQ_STORE_UNIT_SIZE} bytes",
        )
    return BatchCqEntry(*_BATCH.unpack_from(buf, pos))


def build_batch_cq_entry(e: BatchCqEntry) -> bytes:
    """Encode one unit as ``BatchConsumeQueue#putBatchMessagePositionInfo`` writes it."""
    import construct as cs

    try:
        data: bytes = __getattr__("BATCH_CQ_UNIT").build(
            {
                "phyOffset": e.phy_offset,
                "size": e.size,
                "tagsCode": e.tags_code,
                "storeTime": e.store_time,
                "msgBaseOffset": e.msg_base_offset,
                "batchSize": e.batch_size,
                "compactedOffset": e.compacted_offset,
                "reserved": e.reserved,
            }
        )
    except cs.ConstructError as ex:
        raise FormatError(None, None, f"cannot encode batch consume-queue unit {e}: {ex}") from ex
    return data


def iter_batch_cq(
    buf: Buffer, *, file: str | None = None, file_start: int = 0
) -> Iterator[tuple[int, BatchCqEntry]]:
    """``(absolute position, entry)`` for each written unit; stops at the first all-zero unit
    or at a partial unit at the end of the buffer."""
    mv = memoryview(buf)
    for pos in range(0, len(buf) - CQ_STORE_UNIT_SIZE + 1, CQ_STORE_UNIT_SIZE):
        if not any(mv[pos : pos + CQ_STORE_UNIT_SIZE]):
            return
        yield file_start + pos, BatchCqEntry(*_BATCH.unpack_from(buf, pos))


# --------------------------------------------------------------------------------------------
# ConsumeQueueExt


@dataclass(frozen=True, slots=True)
class CqExtUnit:
    """One ConsumeQueueExt unit: real tagsCode, store time (epoch ms) and the filter bitmap."""

    tags_code: int
    msg_store_time: int
    filter_bit_map: bytes = b""

    @property
    def size(self) -> int:
        """Encoded size (``CqExtUnit#calcUnitSize``)."""
        return MIN_EXT_UNIT_SIZE + len(self.filter_bit_map)


def parse_cq_ext_unit(
    buf: Buffer, pos: int = 0, *, file: str | None = None, file_start: int = 0
) -> CqExtUnit:
    """Decode the ext unit at ``buf[pos:]``; FormatError on a bad size or short buffer."""
    where = file_start + pos
    if pos < 0 or pos + MIN_EXT_UNIT_SIZE > len(buf):
        raise TruncatedError(
            file, where, f"truncated ext unit: {len(buf) - pos} of {MIN_EXT_UNIT_SIZE} bytes"
        )
    size, tags_code, store_time, bitmap_size = _EXT_HEAD.unpack_from(buf, pos)
    if size < MIN_EXT_UNIT_SIZE or bitmap_size < 0 or size != MIN_EXT_UNIT_SIZE + bitmap_size:
        raise FormatError(
            file,
            where,
            f"bad ext unit: size {size} must be {MIN_EXT_UNIT_SIZE} + bitMapSize {bitmap_size}",
        )
    if pos + size > len(buf):
        raise TruncatedError(file, where, f"truncated ext unit: {len(buf) - pos} of {size} bytes")
    start = pos + MIN_EXT_UNIT_SIZE
    return CqExtUnit(tags_code, store_time, bytes(buf[start : start + bitmap_size]))


def build_cq_ext_unit(u: CqExtUnit) -> bytes:
    """Encode ``u`` (size and bitMapSize derived)."""
    if u.size > MAX_EXT_UNIT_SIZE:
        raise FormatError(None, None, f"ext unit of {u.size} bytes > {MAX_EXT_UNIT_SIZE}")
    import construct as cs

    try:
        data: bytes = __getattr__("CQ_EXT_UNIT").build(
            {
                "tagsCode": u.tags_code,
                "msgStoreTime": u.msg_store_time,
                "filterBitMap": u.filter_bit_map,
            }
        )
    except cs.ConstructError as e:
        raise FormatError(None, None, f"cannot encode ext unit: {e}") from e
    return data


def iter_cq_ext(
    buf: Buffer, *, file: str | None = None, file_start: int = 0
) -> Iterator[tuple[int, CqExtUnit]]:
    """``(decorated address, unit)`` for each unit of one ext file, stopping at ``size < 1``.

    ``file_start`` is the file's start offset in the ext queue (its name). Raises FormatError
    on a malformed unit.
    """
    pos = 0
    n = len(buf)
    while pos + 2 <= n:
        (size,) = _I16.unpack_from(buf, pos)
        if size < 1:
            return
        unit = parse_cq_ext_unit(buf, pos, file=file, file_start=file_start)
        yield decorate(file_start + pos), unit
        pos += size
