"""The one commitlog record encoder (``MessageExtEncoder`` / ``CommitLog#doAppend``).

:func:`pack_records_into` writes records back to back into a buffer or a mapping (a client
batch, or one record: :func:`pack_record_into`), without building record objects: their bytes
are joined in one buffer and copied in one go, with the first record's TOTALSIZE written last so
that a torn copy reads as the end of the data (5.2+ ``__CRC32#`` property filled in,
:func:`fill_prop_crc`). Every writer uses it: the reference store's put path
(:mod:`mqtool.refstore`) and :func:`mqtool.formats.commitlog.build_message`. Its compiled form
for client batches, :mod:`.batch_encoder`, writes the head this module packs
(:func:`record_head`) and the rest at the layout's offsets; tests give both the same batches
and compare the stores byte for byte. Offsets and
widths come from the layout table, :mod:`mqtool.formats.commitlog_layout`.

The readable reference of the layout is the construct definition
:data:`mqtool.formats.commitlog_construct.COMMITLOG_RECORD` (``build_message_construct``);
tests prove the two give the same bytes on the real stores' records and on every variant
(V1/V2, IPv4/IPv6 hosts, empty and large parts, property CRC).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
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
    "CRC32_PLACEHOLDER", "CRC32_RESERVED_LEN", "PROPERTY_CRC32", "RecordFields", "fill_prop_crc",
    "magic_for", "pack_record_into", "pack_records_into", "record_head", "record_size",
    "topic_header", "write_total_size",
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


def record_head(
    magic: int, queue_id: int, sys_flag: int, born_timestamp: int, born_ip: bytes,
    born_port: int, store_timestamp: int, store_ip: bytes, store_port: int,
    reconsume_times: int, prepared_transaction_offset: int = 0,
) -> bytes:
    """A record's fields from TOTALSIZE to BODYLEN, with TOTALSIZE, BODYCRC, FLAG, QUEUEOFFSET,
    PHYSICALOFFSET and BODYLEN 0: the part a batch's records share, for the compiled batch
    form (:mod:`.batch_encoder`), which fills in the rest per record."""
    return _fixed_struct(len(born_ip), len(store_ip)).pack(
        0, magic, 0, queue_id, 0, 0, 0, sys_flag, born_timestamp, born_ip, born_port,
        store_timestamp, store_ip, store_port, reconsume_times, prepared_transaction_offset, 0,
    )


#: One record's own fields for :func:`pack_records_into`: TOTALSIZE, FLAG, SYSFLAG,
#: BORNTIMESTAMP, born ip (packed), born port, RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODY,
#: PROPERTIES (encoded), BODYCRC (None: computed from the body).
RecordFields = tuple[int, int, int, int, bytes, int, int, int, bytes, bytes, int | None]


def pack_records_into(
    mm: mmap | bytearray, pos: int, records: Iterable[RecordFields], magic: int, queue_id: int,
    queue_offset: int, physical_offset: int, store_timestamp: int, store_ip: bytes,
    store_port: int, topic_hdr: bytes, prop_crc: bool = False, write_size: bool = True,
) -> None:
    """Write records back to back from ``mm[pos]``: the ``i``-th at commitlog offset
    ``physical_offset`` plus the sizes before it, with QUEUEOFFSET ``queue_offset + i``; the
    fields they share (one topic, queue, store time and host) given once.

    The records are built in one buffer and copied in one go; the first record's TOTALSIZE
    is the commit point of them all: it is 0 while the rest is copied and written last (with
    ``write_size=False`` it stays 0 for the caller's :func:`write_total_size`). Recovery reads
    records from the first, so a copy torn anywhere reads as the end of the data.
    """
    store_len = len(store_ip)
    born_len = -1
    fixed = _I32
    i16 = _I16.pack
    crc32 = zlib.crc32
    parts: list[bytes] = []
    sizes: list[int] = []
    phys, qoff = physical_offset, queue_offset
    for (size, flag, sys_flag, born_timestamp, born_ip, born_port, reconsume_times,
         prepared_transaction_offset, body, props_b, body_crc) in records:
        if len(born_ip) != born_len:
            born_len = len(born_ip)
            fixed = _FIXED.get((born_len, store_len)) or _fixed_struct(born_len, store_len)
        parts += (
            fixed.pack(
                size, magic, crc32(body) & 0x7FFFFFFF if body_crc is None else body_crc,
                queue_id, flag, qoff, phys, sys_flag, born_timestamp, born_ip, born_port,
                store_timestamp, store_ip, store_port, reconsume_times,
                prepared_transaction_offset, len(body),
            ),
            body, topic_hdr, i16(len(props_b)), props_b,
        )
        sizes.append(size)
        phys += size
        qoff += 1
    if not sizes:
        return
    buf: bytes | bytearray = b"".join(parts)
    n = len(buf)
    if n != phys - physical_offset:
        raise ValueError(f"records of {n} bytes given TOTALSIZEs that sum to "
                         f"{phys - physical_offset}")
    if prop_crc:
        buf = bytearray(buf)
        start = 0
        for size in sizes:
            fill_prop_crc(buf, start, size)
            start += size
    _I32.pack_into(mm, pos + layout.TOTALSIZE_AT, 0)
    mm[pos + 4 : pos + n] = memoryview(buf)[4:]  # TOTALSIZE_WIDTH
    if write_size:
        _I32.pack_into(mm, pos + layout.TOTALSIZE_AT, sizes[0])  # the commit point, last


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
    """Write one record at ``mm[pos:pos+size]`` (:func:`pack_records_into` of one); returns its
    BODYCRC (computed from ``body`` unless ``body_crc`` is given)."""
    crc = zlib.crc32(body) & 0x7FFFFFFF if body_crc is None else body_crc
    pack_records_into(
        mm, pos,
        ((size, flag, sys_flag, born_timestamp, born_ip, born_port, reconsume_times,
          prepared_transaction_offset, body, props_b, crc),),
        magic, queue_id, queue_offset, physical_offset, store_timestamp, store_ip, store_port,
        topic_hdr, prop_crc, write_size,
    )
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
