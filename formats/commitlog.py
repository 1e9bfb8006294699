"""CommitLog records: ``org.apache.rocketmq.store.CommitLog`` / ``MessageExtEncoder`` /
``common.message.MessageDecoder``.

Byte order: big-endian (Java ``ByteBuffer``). One file ``commitlog/<20-digit start offset>`` holds
records back to back; a record never crosses a file; a BLANK record (magic ``0xCBD43194``, only
TOTALSIZE and MAGIC written) fills the rest of a file; a zero TOTALSIZE marks pre-allocated,
never-written space.

The record's fields, offsets and widths are one table, :mod:`mqtool.formats.commitlog_layout`
(its values are re-exported here). The walk over a file's records is :mod:`.walker`
(``scan_file``, ``walk``).

``COMMITLOG_RECORD`` (construct, in :mod:`mqtool.formats.commitlog_construct`) is the readable
reference and is proven equal to the fast ``struct`` path (``parse_message`` /
``build_message``) on every real record in the tests.
"""

from __future__ import annotations

import functools
import ipaddress
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from mqtool.formats import commitlog_layout as layout
from mqtool.formats.buffers import Buffer
from mqtool.formats.commitlog_layout import (  # the layout's values, re-exported
    BLANK_MAGIC_CODE as BLANK_MAGIC_CODE,
)
from mqtool.formats.commitlog_layout import BORNHOST_V6_FLAG as BORNHOST_V6_FLAG
from mqtool.formats.commitlog_layout import CRC32_RESERVED_LEN as CRC32_RESERVED_LEN
from mqtool.formats.commitlog_layout import END_FILE_MIN_BLANK_LENGTH as END_FILE_MIN_BLANK_LENGTH
from mqtool.formats.commitlog_layout import MAGIC_BLANK as MAGIC_BLANK
from mqtool.formats.commitlog_layout import MAGIC_V1 as MAGIC_V1
from mqtool.formats.commitlog_layout import MAGIC_V2 as MAGIC_V2
from mqtool.formats.commitlog_layout import MESSAGE_MAGIC_CODE as MESSAGE_MAGIC_CODE
from mqtool.formats.commitlog_layout import MESSAGE_MAGIC_CODE_V2 as MESSAGE_MAGIC_CODE_V2
from mqtool.formats.commitlog_layout import MIN_RECORD_SIZE as MIN_RECORD_SIZE
from mqtool.formats.commitlog_layout import PROPERTY_CRC32 as PROPERTY_CRC32
from mqtool.formats.commitlog_layout import STOREHOSTADDRESS_V6_FLAG as STOREHOSTADDRESS_V6_FLAG
from mqtool.formats.commitlog_layout import cal_msg_length as cal_msg_length
from mqtool.formats.encoder import pack_record_into, topic_header
from mqtool.formats.errors import (
    BadMagicError,
    BadSizeError,
    FormatError,
    TornPropertiesError,
    TruncatedError,
)
from mqtool.formats.rules import (  # MessageConst names, re-exported (one home: formats/rules.py)
    PROPERTY_DELAY_TIME_LEVEL as PROPERTY_DELAY_TIME_LEVEL,
)
from mqtool.formats.rules import PROPERTY_KEYS as PROPERTY_KEYS
from mqtool.formats.rules import PROPERTY_ORIGIN_MESSAGE_ID as PROPERTY_ORIGIN_MESSAGE_ID
from mqtool.formats.rules import PROPERTY_REAL_QUEUE_ID as PROPERTY_REAL_QUEUE_ID
from mqtool.formats.rules import PROPERTY_REAL_TOPIC as PROPERTY_REAL_TOPIC
from mqtool.formats.rules import PROPERTY_RETRY_TOPIC as PROPERTY_RETRY_TOPIC
from mqtool.formats.rules import PROPERTY_TAGS as PROPERTY_TAGS
from mqtool.formats.rules import (
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX as PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from mqtool.formats.rules import TRANSACTION_COMMIT_TYPE as TRANSACTION_COMMIT_TYPE
from mqtool.formats.rules import TRANSACTION_NOT_TYPE as TRANSACTION_NOT_TYPE
from mqtool.formats.rules import TRANSACTION_PREPARED_TYPE as TRANSACTION_PREPARED_TYPE
from mqtool.formats.rules import TRANSACTION_ROLLBACK_TYPE as TRANSACTION_ROLLBACK_TYPE

# MessageSysFlag (the host bits, which change the layout, are in formats/commitlog_layout.py)
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x1 << 1
# TRANSACTION_*_TYPE (bits 2-3): formats/rules.py, with the dispatch rules (imported above)
NEED_UNWRAP_FLAG = 0x1 << 6
INNER_BATCH_FLAG = 0x1 << 7
COMPRESSION_TYPE_COMPARATOR = 0x7 << 8
COMPRESSION_LZ4_TYPE = 0x1 << 8
COMPRESSION_ZSTD_TYPE = 0x2 << 8
COMPRESSION_ZLIB_TYPE = 0x3 << 8

# MessageDecoder separators
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

COMPRESSION_NAMES = {0: "ZLIB", 1: "LZ4", 2: "ZSTD", 3: "ZLIB"}
MAX_PROPERTIES_LENGTH = 32767  # Short.MAX_VALUE
MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024  # refuse bodies that inflate past this (bombs)

_HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP, up to BORNHOST
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
_MID = struct.Struct(">iq")  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET
assert _HEAD.size == layout.BORNHOST_AT
assert _MID.size == layout.RECONSUMETIMES_WIDTH + layout.PREPAREDTRANSACTIONOFFSET_WIDTH


@functools.lru_cache(maxsize=1024)
def _packed_ip(ip: str) -> bytes:
    """An IP address's 4 or 16 bytes (a store has few hosts; each is parsed once)."""
    return ipaddress.ip_address(ip).packed


class HostPort(NamedTuple):
    """A socket address as stored in a record: IP (v4 or v6 text) and port."""

    ip: str
    port: int

    def __str__(self) -> str:
        return f"[{self.ip}]:{self.port}" if ":" in self.ip else f"{self.ip}:{self.port}"

    @property
    def packed(self) -> bytes:
        """The 4- or 16-byte address as RocketMQ stores it."""
        return _packed_ip(self.ip)

    @property
    def is_v6(self) -> bool:
        return ":" in self.ip

    @classmethod
    def parse(cls, text: str) -> HostPort:
        """``"1.2.3.4:10911"`` or ``"[::1]:10911"`` to a HostPort."""
        ip, _, port = text.rpartition(":")
        return cls(str(ipaddress.ip_address(ip.strip("[]"))), int(port))

    @classmethod
    def from_packed(cls, raw: bytes, port: int) -> HostPort:
        """The HostPort of a stored 4- or 16-byte address and its port."""
        if len(raw) == layout.IPV4_WIDTH:
            return cls(f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}", port)
        return cls(str(ipaddress.IPv6Address(raw)), port)


_PACKED: dict[HostPort, bytes] = {}


def packed_ip(h: HostPort) -> bytes:
    """``h.packed``, cached (ipaddress parsing is slow; writers pack the same hosts again and
    again)."""
    b = _PACKED.get(h)
    if b is None:
        b = h.packed
        if len(_PACKED) < 65536:
            _PACKED[h] = b
    return b


def parse_properties(raw: str) -> dict[str, str]:
    """``MessageDecoder#string2messageProperties``: ``k\\x01v`` pairs split on ``\\x02``.

    Segments shorter than 3 characters and pairs with an empty key or value are skipped; the
    last duplicate wins. Both separator styles (trailing ``\\x02`` or not) are accepted.
    """
    segs = raw.split(PROPERTY_SEPARATOR)
    if not segs[-1]:
        segs.pop()
    try:  # the usual text (every segment a pair, no duplicate, nothing empty) in one call
        out = dict([seg.split(NAME_VALUE_SEPARATOR, 1) for seg in segs])
    except ValueError:
        pass
    else:
        if len(out) == len(segs) and "" not in out and "" not in out.values():
            return out
    out = {}
    for seg in segs:
        if len(seg) >= 3:
            k, sep, v = seg.partition(NAME_VALUE_SEPARATOR)
            if k and v:
                out[k] = v
    return out


def encode_properties(pairs: Iterable[tuple[str, str]], trailing_separator: bool = False) -> str:
    """``MessageDecoder#messageProperties2String``.

    4.x joins the pairs with ``\\x02`` (no trailing separator); 5.x terminates every pair.
    """
    text = PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in pairs)
    if trailing_separator and text:
        text += PROPERTY_SEPARATOR
    return text


def body_crc32(body: bytes) -> int:
    """``UtilAll.crc32``: CRC32 of the body as stored, masked to a non-negative int."""
    return zlib.crc32(body) & 0x7FFFFFFF


def properties_torn(buf: Buffer, end: int, properties_length: int) -> bool:
    """The torn-properties rule: a record (ending at ``end``) whose non-empty properties, its
    last field, end in a zero byte had its tail never written (a torn write: the lengths still
    add up, and 4.9.7 has no CRC over the properties).

    RocketMQ never ends a properties string with a zero byte: ``MessageDecoder
    #messageProperties2String`` writes ``name\\x01value\\x02`` per pair, and 4.9.1 to 5.1
    drop the last ``\\x02`` (the string ends with the last value); 5.2+ keep it, and
    ``MessageExtEncoder`` appends the ``__CRC32#`` property ending in ``\\x02``. Only a
    property value that itself ends in U+0000 (the gRPC proxy refuses control characters; a
    remoting client could send one) would be taken for a torn write. The kernels
    (:mod:`.commitlog_fields`, :mod:`.commitlog_arrow`, spark/java) apply the same test to the
    same byte."""
    return properties_length > 0 and buf[end - 1] == 0


@dataclass(frozen=True, slots=True)
class CommitLogMessage:
    """One message record of a commitlog file. Timestamps are epoch milliseconds."""

    total_size: int
    magic: int  # unsigned: 0xDAA320A7 (V1) or 0xDAA320AB (V2)
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int  # logical offset in the consume queue (CQ units)
    physical_offset: int  # absolute commitlog offset, as stored in PHYSICALOFFSET
    sys_flag: int
    born_timestamp: int
    born_host: HostPort
    store_timestamp: int
    store_host: HostPort
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes  # as stored (compressed if sys_flag & COMPRESSED_FLAG)
    topic: str
    properties_raw: str  # the exact stored properties string
    _props: dict[str, str] | None = field(default=None, repr=False, compare=False, hash=False)

    @property
    def properties(self) -> dict[str, str]:
        """RocketMQ's property map (last duplicate wins)."""
        if self._props is None:
            object.__setattr__(self, "_props", parse_properties(self.properties_raw))
        assert self._props is not None
        return self._props

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    @property
    def key_list(self) -> list[str]:
        """The KEYS property split on spaces, as IndexService indexes them."""
        return [k for k in (self.keys or "").split(" ") if k]

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def offset_msg_id(self) -> str:
        """``MessageDecoder#createMessageId``: store host + port + commitlog offset, upper hex."""
        return (
            self.store_host.packed + struct.pack(">iq", self.store_host.port, self.physical_offset)
        ).hex().upper()

    @property
    def crc_ok(self) -> bool:
        """Whether BODYCRC matches the stored body."""
        return self.body_crc == body_crc32(self.body)

    @property
    def body_length(self) -> int:
        return len(self.body)

    @property
    def is_v2(self) -> bool:
        return self.magic == MAGIC_V2

    @property
    def compressed(self) -> bool:
        return bool(self.sys_flag & COMPRESSED_FLAG)

    @property
    def compression_type(self) -> str | None:
        """``ZLIB``, ``LZ4`` or ``ZSTD`` for a compressed body, else None."""
        if not self.compressed:
            return None
        return COMPRESSION_NAMES.get((self.sys_flag & COMPRESSION_TYPE_COMPARATOR) >> 8, "ZLIB")

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & TRANSACTION_ROLLBACK_TYPE

    @property
    def end_offset(self) -> int:
        return self.physical_offset + self.total_size

    def decompressed_body(self, limit: int = MAX_DECOMPRESSED_SIZE) -> bytes:
        """The body, inflated when compressed (``FormatError`` on a bad or oversized stream)."""
        if not self.compressed:
            return self.body
        return decompress(self.body, self.compression_type or "ZLIB", limit, self.physical_offset)

    def prop_crc(self) -> tuple[int, int] | None:
        """5.x ``__CRC32#`` property: (stored, recomputed) CRC over the record, or None."""
        raw = self.properties_raw
        tail = raw[-CRC32_RESERVED_LEN:]
        if len(raw) < CRC32_RESERVED_LEN or not tail.startswith(PROPERTY_CRC32 + "\x01"):
            return None
        digits = tail[len(PROPERTY_CRC32) + 1 : len(PROPERTY_CRC32) + 11]
        if not digits.isdigit():
            return None
        stored = int(digits[::-1])
        record = build_message(self)
        return stored, zlib.crc32(record[: len(record) - CRC32_RESERVED_LEN]) & 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class BlankRecord:
    """End-of-file filler: TOTALSIZE = bytes to the end of the file, then BLANK_MAGIC_CODE."""

    physical_offset: int
    total_size: int


@dataclass(frozen=True, slots=True)
class FileEnd:
    """Where and why the data of one commitlog file ends.

    ``kind``: ``blank`` (BLANK record), ``eof`` (records fill the file exactly), ``zeros``
    (pre-allocated zero space follows), ``torn`` (a record runs past the end of the file) or
    ``corrupt`` (bytes that are no record); ``detail`` says what was found for the last two.
    """

    physical_offset: int
    kind: str
    detail: str = ""

    @property
    def clean(self) -> bool:
        return self.kind in ("blank", "eof", "zeros")


def decompress(data: bytes, kind: str, limit: int, offset: int | None = None) -> bytes:
    """Inflate a ZLIB / LZ4 (frame) / ZSTD (frame) body, refusing output beyond ``limit``."""
    try:
        if kind == "ZLIB":
            d = zlib.decompressobj()
            out = d.decompress(data, limit + 1)
        elif kind == "LZ4":
            import lz4.frame

            lz = lz4.frame.LZ4FrameDecompressor()
            out = lz.decompress(data, max_length=limit + 1)
        elif kind == "ZSTD":
            import io

            import zstandard

            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))
            out = reader.read(limit + 1)
        else:
            raise FormatError(None, offset, f"unknown compression type {kind}")
    except FormatError:
        raise
    except Exception as e:  # zlib.error, RuntimeError (lz4), ZstdError: all "bad stream"
        raise FormatError(None, offset, f"cannot inflate {kind} body: {e}") from e
    if len(out) > limit:
        raise FormatError(None, offset, f"{kind} body inflates past {limit} bytes")
    return bytes(out)


def _err(
    file: str | None, file_start: int, pos: int, detail: str,
    cls: type[FormatError] = FormatError,
) -> FormatError:
    """An error at ``pos`` inside the file (the commitlog position follows as ``phy``)."""
    return cls(file, pos, detail, phy=file_start + pos)


def parse_message(
    buf: Buffer,
    pos: int = 0,
    *,
    file: str | None = None,
    file_start: int = 0,
) -> CommitLogMessage | BlankRecord:
    """Decode the record at ``buf[pos:]`` (fast ``struct`` path).

    ``file`` and ``file_start`` (the commitlog offset of ``buf[0]``) only name the place in
    errors. Raises :class:`FormatError` for anything that is not a complete, self-consistent
    record.
    """
    n = len(buf)
    if pos + END_FILE_MIN_BLANK_LENGTH > n:
        raise _err(
            file, file_start, pos, f"truncated record header: {n - pos} bytes left",
            TruncatedError,
        )
    total_size, magic = struct.unpack_from(">iI", buf, pos)
    if magic == MAGIC_BLANK:
        return BlankRecord(file_start + pos, total_size)
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        raise _err(
            file, file_start, pos,
            f"bad magic: expected 0xdaa320a7 or 0xdaa320ab, found {magic:#010x}", BadMagicError,
        )
    if total_size < cal_msg_length(magic, 0, 0, 0, 0):
        raise _err(file, file_start, pos, f"bad TOTALSIZE {total_size}", BadSizeError)
    if pos + total_size > n:
        raise _err(
            file, file_start, pos,
            f"truncated record: TOTALSIZE {total_size} but {n - pos} bytes left", TruncatedError,
        )
    end = pos + total_size
    try:
        (_, _, body_crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts) = _HEAD.unpack_from(
            buf, pos
        )
        p = pos + layout.BORNHOST_AT
        alen = layout.IPV6_WIDTH if sys_flag & BORNHOST_V6_FLAG else layout.IPV4_WIDTH
        born_host = HostPort.from_packed(
            bytes(buf[p : p + alen]), _I32.unpack_from(buf, p + alen)[0]
        )
        p += alen + layout.PORT_WIDTH
        (store_ts,) = _I64.unpack_from(buf, p)
        p += layout.STORETIMESTAMP_WIDTH
        alen = layout.IPV6_WIDTH if sys_flag & STOREHOSTADDRESS_V6_FLAG else layout.IPV4_WIDTH
        store_host = HostPort.from_packed(
            bytes(buf[p : p + alen]), _I32.unpack_from(buf, p + alen)[0]
        )
        p += alen + layout.PORT_WIDTH
        reconsume, prepared = _MID.unpack_from(buf, p)
        p += _MID.size
        (body_len,) = _I32.unpack_from(buf, p)
        p += layout.BODYLEN_WIDTH
        if body_len < 0 or p + body_len > end:
            raise _err(
                file, file_start, p - layout.BODYLEN_WIDTH, f"bad BODYLEN {body_len}",
                BadSizeError,
            )
        body = bytes(buf[p : p + body_len])
        p += body_len
        if magic == MAGIC_V2:
            if p + layout.TOPICLEN_V2_WIDTH > end:
                raise _err(file, file_start, p, "truncated topic length")
            (topic_len,) = _I16.unpack_from(buf, p)
            p += layout.TOPICLEN_V2_WIDTH
        else:
            if p + layout.TOPICLEN_V1_WIDTH > end:
                raise _err(file, file_start, p, "truncated topic length")
            topic_len = buf[p] - 256 if buf[p] > 127 else buf[p]
            p += layout.TOPICLEN_V1_WIDTH
        if topic_len < 0 or p + topic_len > end:
            raise _err(file, file_start, p, f"bad TOPICLEN {topic_len}", BadSizeError)
        topic_bytes = bytes(buf[p : p + topic_len])
        p += topic_len
        if p + layout.PROPERTIESLEN_WIDTH > end:
            raise _err(file, file_start, p, "truncated properties length")
        (props_len,) = _I16.unpack_from(buf, p)
        p += layout.PROPERTIESLEN_WIDTH
        if props_len < 0 or p + props_len > end:
            raise _err(
                file, file_start, p - layout.PROPERTIESLEN_WIDTH,
                f"bad PROPERTIESLEN {props_len}", BadSizeError,
            )
        props_bytes = bytes(buf[p : p + props_len])
        p += props_len
    except struct.error as e:  # pragma: no cover - lengths are checked above
        raise _err(file, file_start, pos, f"truncated record: {e}") from e
    expected = cal_msg_length(magic, sys_flag, body_len, topic_len, props_len)
    if expected != total_size:
        raise _err(
            file, file_start, pos,
            f"record length mismatch: TOTALSIZE {total_size}, fields add up to {expected}",
            BadSizeError,
        )
    if properties_torn(buf, end, props_len):
        zeros = len(props_bytes) - len(props_bytes.rstrip(b"\0"))
        raise _err(
            file, file_start, pos,
            f"properties torn: the record's last {zeros} of {props_len} property bytes are "
            "zeros (its tail was never written)", TornPropertiesError,
        )
    try:
        topic = topic_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _err(file, file_start, pos, f"topic is not UTF-8: {topic_bytes[:40]!r}") from e
    try:
        props = props_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _err(file, file_start, pos, f"properties are not UTF-8 (byte {e.start})") from e
    return CommitLogMessage(
        total_size, magic, body_crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts,
        born_host, store_ts, store_host, reconsume, prepared, body, topic, props,
    )


def build_message(msg: CommitLogMessage) -> bytes:
    """Encode ``msg`` as RocketMQ writes it (``MessageExtEncoder``), through the one encoder,
    :func:`mqtool.formats.encoder.pack_record_into` (proven equal to the construct reference).

    TOTALSIZE and the length fields are derived from the content; a V1 magic is upgraded to V2
    when the topic is longer than 127 bytes (V1 cannot hold it); the host flags follow the
    addresses. BODYCRC and a ``__CRC32#`` property are taken as given.
    """
    topic_b = msg.topic.encode("utf-8")
    props_b = msg.properties_raw.encode("utf-8")
    if len(props_b) > MAX_PROPERTIES_LENGTH:
        raise FormatError(None, msg.physical_offset, f"properties too long: {len(props_b)} bytes")
    magic = msg.magic & 0xFFFFFFFF
    if magic == MAGIC_V1 and len(topic_b) > 127:
        magic = MAGIC_V2
    born_ip = packed_ip(msg.born_host)
    store_ip = packed_ip(msg.store_host)
    sys_flag = msg.sys_flag
    sys_flag = sys_flag | BORNHOST_V6_FLAG if len(born_ip) == 16 else sys_flag & ~BORNHOST_V6_FLAG
    sys_flag = (
        sys_flag | STOREHOSTADDRESS_V6_FLAG
        if len(store_ip) == 16
        else sys_flag & ~STOREHOSTADDRESS_V6_FLAG
    )
    total = cal_msg_length(magic, sys_flag, len(msg.body), len(topic_b), len(props_b))
    buf = bytearray(total)
    pack_record_into(
        buf, 0, total, magic, msg.queue_id, msg.flag, msg.queue_offset, msg.physical_offset,
        sys_flag, msg.born_timestamp, born_ip, msg.born_host.port, msg.store_timestamp,
        store_ip, msg.store_host.port, msg.reconsume_times, msg.prepared_transaction_offset,
        msg.body, topic_header(topic_b, magic), props_b, body_crc=msg.body_crc,
    )
    return bytes(buf)


_LOCAL_BORN = HostPort("127.0.0.1", 0)
_LOCAL_STORE = HostPort("127.0.0.1", 10911)


def make_message(
    *,
    topic: str,
    body: bytes = b"",
    properties_raw: str = "",
    queue_id: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    flag: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: HostPort = _LOCAL_BORN,
    store_timestamp: int = 0,
    store_host: HostPort = _LOCAL_STORE,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    magic: int = MAGIC_V1,
) -> CommitLogMessage:
    """A message with BODYCRC, TOTALSIZE, magic version and host flags filled in."""
    if len(topic.encode("utf-8")) > 127:
        magic = MAGIC_V2
    if born_host.is_v6:
        sys_flag |= BORNHOST_V6_FLAG
    if store_host.is_v6:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    total = cal_msg_length(
        magic, sys_flag, len(body), len(topic.encode("utf-8")), len(properties_raw.encode("utf-8"))
    )
    return CommitLogMessage(
        total, magic, body_crc32(body), queue_id, flag, queue_offset, physical_offset, sys_flag,
        born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
        prepared_transaction_offset, body, topic, properties_raw,
    )


def build_blank(total_size: int) -> bytes:
    """The 8 bytes RocketMQ writes for an end-of-file BLANK record."""
    return struct.pack(">ii", total_size, BLANK_MAGIC_CODE)
