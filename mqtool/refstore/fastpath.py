"""Hot-path helpers of the write path: record encoding straight into a mapping, Java hashes.

:func:`pack_record_into` writes exactly the bytes of
:func:`mqtool.formats.commitlog.build_message` (the reference encoder; a test proves the two
agree on every variant: V1/V2, IPv4/IPv6 hosts, empty and large parts) without building a
record object or an intermediate buffer, with TOTALSIZE written last so that a torn copy reads as
the end of the data (5.2+ ``__CRC32#`` property filled in place). :func:`index_hashes`
computes ``String.hashCode`` of many ``topic#key`` index keys at once (Horner's rule continued
from the topic prefix's hash, vectorised per key length); :class:`JavaHashCache` does single
keys and caches tag hashes.
"""

from __future__ import annotations

import struct
import zlib
from mmap import mmap

import numpy as np

from mqtool.formats.commitlog import HostPort
from mqtool.formats.javacompat import java_hash_continue_many, java_hash_unsigned, to_int32

__all__ = [
    "CRC32_PLACEHOLDER", "CRC32_RESERVED_LEN", "JavaHashCache", "fill_prop_crc", "index_hashes",
    "java_hash_unsigned", "magic_for", "pack_record_into", "packed_ip", "record_size",
    "topic_header", "write_total_size",
]

_MAGIC_V1 = 0xDAA320A7
_MAGIC_V2 = 0xDAA320AB
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
        _FIXED[(born_len, store_len)] = s
    return s


_PACKED: dict[HostPort, bytes] = {}


def packed_ip(h: HostPort) -> bytes:
    """``h.packed`` cached (ipaddress parsing is slow)."""
    b = _PACKED.get(h)
    if b is None:
        b = h.packed
        if len(_PACKED) < 65536:
            _PACKED[h] = b
    return b


def record_size(
    sys_flag: int, body_len: int, topic_len: int, props_len: int
) -> int:
    """``calMsgLength`` for the magic this encoder picks (V2 iff topic > 127 bytes)."""
    born = 20 if sys_flag & 0x10 else 8
    store = 20 if sys_flag & 0x20 else 8
    tl = 2 if topic_len > 127 else 1
    return 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born + 8 + store + 4 + 8 + 4 + body_len + tl + \
        topic_len + 2 + props_len


def magic_for(topic_len: int) -> int:
    """V2 (2-byte topic length) only when the topic does not fit V1's one byte."""
    return _MAGIC_V2 if topic_len > 127 else _MAGIC_V1


def topic_header(topic_b: bytes) -> bytes:
    """TOPICLEN (1 byte V1, 2 bytes V2) + topic bytes."""
    n = len(topic_b)
    return (_I16.pack(n) if n > 127 else bytes((n,))) + topic_b


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
) -> int:
    """Write one record at ``mm[pos:pos+size]``; returns its BODYCRC."""
    crc = zlib.crc32(body) & 0x7FFFFFFF
    fixed = _fixed_struct(len(born_ip), len(store_ip))
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
        _I32.pack_into(mm, pos, size)  # TOTALSIZE last
    return crc


PROPERTY_CRC32 = "__CRC32#"
CRC32_RESERVED_LEN = len(PROPERTY_CRC32) + 1 + 10 + 1  # CommitLog.CRC32_RESERVED_LEN = 20
CRC32_PLACEHOLDER = PROPERTY_CRC32 + "\x01" + "0" * 10 + "\x02"


def write_total_size(mm: mmap | bytearray, pos: int, size: int) -> None:
    """Write a record's TOTALSIZE (the commit point of a record written with
    ``write_size=False``)."""
    _I32.pack_into(mm, pos, size)


def fill_prop_crc(mm: mmap | bytearray, pos: int, size: int) -> None:
    """5.2+ ``enabledAppendPropCRC``: the record's last 20 bytes (a ``__CRC32#`` placeholder)
    get the CRC32 (& 0x7FFFFFFF) of everything before them, 10 digits least significant first
    (``MessageDecoder#createCrc32``). TOTALSIZE is counted with its final value."""
    crc = zlib.crc32(_I32.pack(size))
    crc = zlib.crc32(memoryview(mm)[pos + 4 : pos + size - CRC32_RESERVED_LEN], crc) & 0x7FFFFFFF
    digits = bytearray(10)
    for i in range(10):
        digits[i] = 48 + crc % 10
        crc //= 10
    start = pos + size - 11
    mm[start : start + 10] = bytes(digits)


class JavaHashCache:
    """Incremental Java hashes for index keys (``topic#key``) and tags."""

    def __init__(self) -> None:
        self._tags: dict[str, int] = {}
        self._topic_prefix: dict[str, int] = {}

    def tags_code(self, tags: str | None) -> int:
        """``tagsString2tagsCode`` (signed)."""
        if not tags:
            return 0
        h = self._tags.get(tags)
        if h is None:
            h = to_int32(java_hash_unsigned(tags))
            if len(self._tags) < 100_000:
                self._tags[tags] = h
        return h

    def index_hash(self, topic: str, key: str) -> int:
        """``indexKeyHashMethod(topic + "#" + key)``: abs of the signed hash, MIN -> 0."""
        h = self._topic_prefix.get(topic)
        if h is None:
            h = java_hash_unsigned(topic + "#")
            self._topic_prefix[topic] = h
        return _abs32(java_hash_unsigned(key, h))



def _abs32(u: int) -> int:
    if u & 0x80000000:
        if u == 0x80000000:
            return 0
        return (1 << 32) - u
    return u


def index_hashes(prefixes: list[int], keys: list[str]) -> list[int]:
    """``indexKeyHashMethod(topic + "#" + key)`` for many keys at once.

    ``prefixes[i]`` is the unsigned Java hash of ``topic#`` for ``keys[i]``; the hash is continued
    vectorised (:func:`~mqtool.formats.javacompat.java_hash_continue_many`), then made
    non-negative as ``indexKeyHashMethod`` does (abs, ``Integer.MIN_VALUE`` -> 0).
    """
    signed = java_hash_continue_many(prefixes, keys).view(np.int32).astype(np.int64)
    res = np.abs(signed)
    res[signed == -(2**31)] = 0
    return list(res.tolist())
