"""The RocksDB consume queue's keys and values (``storeType=defaultRocksDB``, RocketMQ 5.2+).

Mirrors ``org.apache.rocketmq.store.queue.RocksDBConsumeQueueTable`` (column family
``default``) and ``RocksDBConsumeQueueOffsetTable`` (column family ``offset``) of 5.3.3; the
database is at ``store/consumequeue/`` itself (``ConsumeQueueRocksDBStorage``). Byte order:
big-endian (Java ``ByteBuffer``). ``CTRL_1`` is the byte 0x01.

Unit key (``default``)::

    topicLen int32 | CTRL_1 | topic (UTF-8) | CTRL_1 | queueId int32 | CTRL_1 | cqOffset int64

Unit value (``CQ_UNIT_SIZE = 28``)::

    phyOffset int64 | size int32 | tagsCode int64 | storeTime int64

Offset key (``offset``)::

    topicLen int32 | CTRL_1 | topic | CTRL_1 | "max" or "min" | CTRL_1 | queueId int32

Offset value: ``phyOffset int64 | cqOffset int64``. The key of topic
``CHECKPOINT_TOPIC`` (``TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC``, "max", queue 0) holds
only ``phyOffset int64``: the highest commitlog offset the table has dispatched
(``RocksDBConsumeQueueOffsetTable#updateMaxPhyOffset``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mqtool.formats.errors import BadFieldError, BadSizeError

__all__ = [
    "CHECKPOINT_TOPIC",
    "CQ_UNIT_SIZE",
    "OFFSET_COLUMN_FAMILY",
    "OffsetKey",
    "RocksUnit",
    "UnitKey",
    "build_unit_key",
    "parse_checkpoint_value",
    "parse_offset_key",
    "parse_offset_value",
    "parse_unit_key",
    "parse_unit_value",
]

CTRL_1 = 0x01
CQ_UNIT_SIZE = 8 + 4 + 8 + 8  # 28
CQ_KEY_LENGTH_WITHOUT_TOPIC_BYTES = 4 + 1 + 1 + 4 + 1 + 8
OFFSET_KEY_LENGTH_WITHOUT_TOPIC_BYTES = 4 + 1 + 1 + 3 + 1 + 4
OFFSET_VALUE_LENGTH = 8 + 8
OFFSET_COLUMN_FAMILY = "offset"
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"  # TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC

_UNIT = struct.Struct(">qiqq")
_OFFSET = struct.Struct(">qq")


@dataclass(frozen=True, slots=True)
class UnitKey:
    topic: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True, slots=True)
class RocksUnit:
    phy_offset: int
    size: int
    tags_code: int
    store_time: int


@dataclass(frozen=True, slots=True)
class OffsetKey:
    topic: str
    queue_id: int
    which: str  # "max" or "min"


def _topic(key: bytes, fixed: int, what: str) -> tuple[str, int]:
    if len(key) < fixed:
        raise BadSizeError(None, None, f"{what} key of {len(key)} bytes, shorter than "
                           f"{fixed}", found=key.hex())
    n = int.from_bytes(key[:4], "big", signed=True)
    if n < 0 or len(key) != fixed + n or key[4] != CTRL_1 or key[5 + n] != CTRL_1:
        raise BadFieldError(None, None, f"{what} key does not have the layout topicLen|1|topic|"
                            f"1|...: topicLen {n}, key length {len(key)}", found=key.hex())
    try:
        return key[5:5 + n].decode("utf-8"), 5 + n + 1
    except UnicodeDecodeError as e:
        raise BadFieldError(None, None, f"{what} key's topic is not UTF-8",
                            found=key.hex()) from e


def parse_unit_key(key: bytes) -> UnitKey:
    topic, p = _topic(key, CQ_KEY_LENGTH_WITHOUT_TOPIC_BYTES, "consume-queue unit")
    qid = int.from_bytes(key[p:p + 4], "big", signed=True)
    if key[p + 4] != CTRL_1:
        raise BadFieldError(None, None, "consume-queue unit key lacks CTRL_1 before its "
                            "offset", found=key.hex())
    return UnitKey(topic, qid, int.from_bytes(key[p + 5:p + 13], "big", signed=True))


def build_unit_key(topic: str, queue_id: int, queue_offset: int) -> bytes:
    t = topic.encode("utf-8")
    return (len(t).to_bytes(4, "big") + bytes([CTRL_1]) + t + bytes([CTRL_1])
            + queue_id.to_bytes(4, "big", signed=True) + bytes([CTRL_1])
            + queue_offset.to_bytes(8, "big", signed=True))


def parse_unit_value(value: bytes) -> RocksUnit:
    if len(value) != CQ_UNIT_SIZE:
        raise BadSizeError(None, None, f"consume-queue unit value of {len(value)} bytes, "
                           f"expected {CQ_UNIT_SIZE}", expected=str(CQ_UNIT_SIZE),
                           found=str(len(value)))
    return RocksUnit(*_UNIT.unpack(value))


def parse_offset_key(key: bytes) -> OffsetKey:
    topic, p = _topic(key, OFFSET_KEY_LENGTH_WITHOUT_TOPIC_BYTES, "queue offset")
    which = key[p:p + 3].decode("ascii", "replace")
    if which not in ("max", "min") or key[p + 3] != CTRL_1:
        raise BadFieldError(None, None, f"queue offset key names {which!r}, not max or min",
                            found=key.hex())
    return OffsetKey(topic, int.from_bytes(key[p + 4:p + 8], "big", signed=True), which)


def parse_checkpoint_value(value: bytes) -> int:
    """The dispatched commitlog offset ``CHECKPOINT_TOPIC``'s key holds."""
    if len(value) != 8:
        raise BadSizeError(None, None, f"dispatch checkpoint value of {len(value)} bytes, "
                           "expected 8", expected="8", found=str(len(value)))
    return int.from_bytes(value, "big", signed=True)


def parse_offset_value(value: bytes) -> tuple[int, int]:
    """(phyOffset, cqOffset) of an offset-table value."""
    if len(value) != OFFSET_VALUE_LENGTH:
        raise BadSizeError(None, None, f"queue offset value of {len(value)} bytes, expected "
                           f"{OFFSET_VALUE_LENGTH}", expected=str(OFFSET_VALUE_LENGTH),
                           found=str(len(value)))
    a, b = _OFFSET.unpack(value)
    return int(a), int(b)
