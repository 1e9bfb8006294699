"""The one commitlog record encoder (``MessageExtEncoder`` / ``CommitLog#doAppend``).

:func:`pack_record_into` writes one record straight into a buffer or a mapping, without building
a record object or an intermediate buffer, with TOTALSIZE written last so that a torn copy reads
as the end of the data (5.2+ ``__CRC32#`` property filled in place, :func:`fill_prop_crc`).
Every writer uses it: the reference store's put path (:mod:`mqtool.refstore`) and
:func:`mqtool.formats.commitlog.build_message`. Offsets and widths come from the layout table,
:mod:`mqtool.formats.commitlog_layout`.

The readable reference of the layout is the construct definition
:data:`mqtool.formats.commitlog_construct.COMMITLOG_RECORD` (``build_message_construct``);
tests prove the two give the same bytes on the real stores' records and on every variant
(V1/V2, IPv4/IPv6 hosts, empty and large parts, property CRC).
"""

from __future__ import annotations

import struct
import zlib
from mmap import mmap

from mqtool.formats import commitlog_layout as layout
from mqtool.formats.commitlog_layout import (
    CRC32_RESERVED_LEN,
    MAGIC_V1,
    MAGIC_V2,
    PROPERTY_CRC32,
    cal_msg_length,
)

__all__ = [
    "CRC32_PLACEHOLDER", "CRC32_RESERVED_LEN", "PROPERTY_CRC32", "fill_prop_crc", "magic_for",
    "pack_record_into", "record_size", "topic_header", "write_total_size",
]

CRC32_PLACEHOLDER = PROPERTY_CRC32 + "\x01" + "0" * 10 + "\x02"

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_FIXED: dict[tuple[int, int], struct.Struct] = {}


def _fixed_struct(born_len: int, store_len: int) -> struct.Struct:
    s = _FIXED.get((born_len, store_len))
    if s is None:
        # TOTALSIZE(placeholder) MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG
        # BORNTIMESTAMP BORNHOST(ip+port) STORETIMESTAMP STOREHOST(ip+port) RECONSUMETIMES
        # PREPAREDTRANSACTIONOFFSET BODYLEN
        s = struct.Struct(f">iIiiiqqiq{born_len}siq{store_len}siiqi")
        assert s.size == layout.FIXED_WIDTH - layout.PROPERTIESLEN_WIDTH + born_len + store_len
        _FIXED[(born_len, store_len)] = s
    return s


def magic_for(topic_len: int) -> int:
    """V2 (2-byte topic length) only when the topic does not fit V1's one byte."""
    return MAGIC_V2 if topic_len > 127 else MAGIC_V1


def record_size(sys_flag: int, body_len: int, topic_len: int, props_len: int) -> int:
    """``calMsgLength`` for the magic :func:`magic_for` picks."""
    return cal_msg_length(magic_for(topic_len), sys_flag, body_len, topic_len, props_len)


def topic_header(topic_b: bytes, magic: int | None = None) -> bytes:
    """TOPICLEN (1 byte V1, 2 bytes V2; V2 by length unless ``magic`` says) + topic bytes."""
    n = len(topic_b)
    v2 = n > 127 if magic is None else (magic & 0xFFFFFFFF) == MAGIC_V2
    return (_I16.pack(n) if v2 else bytes((n,))) + topic_b  # TOPICLEN_V2_WIDTH / _V1_WIDTH


def pack_record_into(
    mm: mmap | bytearray,
    pos: int,
    size: int,
    magic: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_ip: bytes,
    born_port: int,
    store_timestamp: int,
    store_ip: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    topic_hdr: bytes,
    props_b: bytes,
    prop_crc: bool = False,
    write_size: bool = True,
    body_crc: int | None = None,
) -> int:
    """Write one record at ``mm[pos:pos+size]``; returns its BODYCRC (computed from ``body``
    unless ``body_crc`` is given)."""
    crc = zlib.crc32(body) & 0x7FFFFFFF if body_crc is None else body_crc
    fixed = _FIXED.get((len(born_ip), len(store_ip))) or _fixed_struct(len(born_ip), len(store_ip))
    fixed.pack_into(
        mm, pos, 0, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
        born_timestamp, born_ip, born_port, store_timestamp, store_ip, store_port,
        reconsume_times, prepared_transaction_offset, len(body),
    )
    p = pos + fixed.size
    nb = len(body)
    mm[p : p + nb] = body
    p += nb
    nt = len(topic_hdr)
    mm[p : p + nt] = topic_hdr
    p += nt
    _I16.pack_into(mm, p, len(props_b))
    p += 2
    mm[p : p + len(props_b)] = props_b
    if prop_crc:
        fill_prop_crc(mm, pos, size)
    if write_size:
        _I32.pack_into(mm, pos + layout.TOTALSIZE_AT, size)  # TOTALSIZE last
    return crc


def write_total_size(mm: mmap | bytearray, pos: int, size: int) -> None:
    """Write a record's TOTALSIZE (the commit point of a record written with
    ``write_size=False``)."""
    _I32.pack_into(mm, pos + layout.TOTALSIZE_AT, size)


def fill_prop_crc(mm: mmap | bytearray, pos: int, size: int) -> None:
    """5.2+ ``enabledAppendPropCRC``: the record's last 20 bytes (a ``__CRC32#`` placeholder)
    get the CRC32 (& 0x7FFFFFFF) of everything before them, 10 digits least significant first
    (``MessageDecoder#createCrc32``). TOTALSIZE is counted with its final value."""
    crc = zlib.crc32(_I32.pack(size))
    after_size = pos + layout.MAGIC_AT
    crc = zlib.crc32(memoryview(mm)[after_size : pos + size - CRC32_RESERVED_LEN], crc) & 0x7FFFFFFF
    digits = bytearray(10)
    for i in range(10):
        digits[i] = 48 + crc % 10
        crc //= 10
    start = pos + size - 11
    mm[start : start + 10] = bytes(digits)
