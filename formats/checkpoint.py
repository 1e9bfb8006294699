"""Store checkpoint file ``store/checkpoint``: ``org.apache.rocketmq.store.StoreCheckpoint``.

Byte order: big-endian (Java ``MappedByteBuffer``). The file is one OS page (4096 bytes,
``UtilAll.OS_PAGE_SIZE``), mmapped and flushed in place::

    @0  physicMsgTimestamp   int64  epoch ms of the last flushed commitlog message (4.0+)
    @8  logicsMsgTimestamp   int64  epoch ms of the last flushed consume-queue entry (4.0+)
    @16 indexMsgTimestamp    int64  epoch ms of the last flushed index file (4.0+)
    @24 masterFlushedOffset  int64  commitlog offset flushed on the master (5.0.0+)
    @32 confirmPhyOffset     int64  confirmed commitlog offset (5.1.1+)

Brokers before 5.0 leave bytes 24..40 zero, so one layout serves every version: a 4.x file
parses with ``master_flushed_offset == confirm_phy_offset == 0`` and builds back identically.
Bytes after offset 40 are kept verbatim (``trailer``) so ``build(parse(b)) == b`` for any file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from mqtool.formats.buffers import Buffer
from mqtool.formats.errors import FormatError, TruncatedError
from mqtool.formats.reference import layout

__all__ = [
    "CHECKPOINT_FILE_SIZE",
    "CHECKPOINT_HEADER_SIZE",
    "CHECKPOINT_STRUCT",
    "Checkpoint",
    "build_checkpoint",
    "parse_checkpoint",
]

CHECKPOINT_FILE_SIZE = 4096  # UtilAll.OS_PAGE_SIZE
CHECKPOINT_HEADER_SIZE = 40

CHECKPOINT_STRUCT = struct.Struct(">qqqqq")
"""The first 40 bytes for ``struct`` reads and writes (the layout of ``CHECKPOINT_HEADER``)."""


def _layouts() -> dict[str, Any]:
    import construct as cs

    return {"CHECKPOINT_HEADER": cs.Struct(
        "physicMsgTimestamp" / cs.Int64sb,
        "logicsMsgTimestamp" / cs.Int64sb,
        "indexMsgTimestamp" / cs.Int64sb,
        "masterFlushedOffset" / cs.Int64sb,
        "confirmPhyOffset" / cs.Int64sb,
    )}


def __getattr__(name: str) -> Any:
    """``CHECKPOINT_HEADER``: the reference layout of the first 40 bytes (construct, field
    names as in ``StoreCheckpoint.java``; :mod:`mqtool.formats.reference`)."""
    return layout(__name__, name, _layouts)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Decoded ``store/checkpoint``. Timestamps are epoch ms, offsets commitlog bytes.

    ``file_size`` is the file's length (4096 for every real broker); ``trailer`` holds the
    bytes after offset 40 with trailing zero bytes stripped (``b""`` for real files).
    """

    physic_msg_timestamp: int
    logics_msg_timestamp: int
    index_msg_timestamp: int
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0
    file_size: int = CHECKPOINT_FILE_SIZE
    trailer: bytes = b""

    @property
    def min_timestamp_index(self) -> int:
        """``StoreCheckpoint#getMinTimestampIndex``: min(physic, logics, index) (epoch ms)."""
        return min(self.min_timestamp, self.index_msg_timestamp)

    @property
    def min_timestamp(self) -> int:
        """``StoreCheckpoint#getMinTimestamp``: min(physic, logics) minus 3 s, floored at 0."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)


def parse_checkpoint(buf: Buffer, *, file: str | None = None) -> Checkpoint:
    """Decode a checkpoint file's bytes; raises :class:`FormatError` on short input."""
    data = bytes(buf)
    if len(data) < CHECKPOINT_HEADER_SIZE:
        raise TruncatedError(
            file,
            len(data),
            f"truncated checkpoint: {len(data)} of {CHECKPOINT_HEADER_SIZE} header bytes "
            f"(file should be {CHECKPOINT_FILE_SIZE} bytes)",
        )
    physic, logics, index, flushed, confirm = CHECKPOINT_STRUCT.unpack_from(data, 0)
    return Checkpoint(
        physic_msg_timestamp=physic,
        logics_msg_timestamp=logics,
        index_msg_timestamp=index,
        master_flushed_offset=flushed,
        confirm_phy_offset=confirm,
        file_size=len(data),
        trailer=data[CHECKPOINT_HEADER_SIZE:].rstrip(b"\x00"),
    )


def build_checkpoint(cp: Checkpoint) -> bytes:
    """Encode ``cp`` as a whole file (``cp.file_size`` bytes, zero padded).

    A 4.x broker never writes bytes 24..40; leave ``master_flushed_offset`` and
    ``confirm_phy_offset`` at 0 for a 4.x store and the output matches what it wrote.
    """
    try:
        header = CHECKPOINT_STRUCT.pack(
            cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp,
            cp.master_flushed_offset, cp.confirm_phy_offset)
    except struct.error as e:
        raise FormatError(None, None, f"cannot encode checkpoint {cp}: {e}") from e
    body = header + cp.trailer
    if len(body) > cp.file_size:
        raise FormatError(None, None, f"checkpoint content {len(body)} > file size {cp.file_size}")
    return body + bytes(cp.file_size - len(body))
