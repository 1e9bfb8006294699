"""The commitlog message record's layout: one table of its fields (``MessageExtEncoder#encode``,
``MessageDecoder#decode``), big-endian.

:data:`FIELDS` lists every field in the order RocketMQ writes it: its name as in the Java
source, where it starts (a fixed offset from the record's first byte, or right after the field
before it) and its width in bytes (or the field or flag that gives it). The constants below are
read from that table; every reader and writer of records uses them: the struct reader
(:mod:`.commitlog`), the walker (:mod:`.walker`), the encoder (:mod:`.encoder`), the compiled
kernels (:mod:`.commitlog_fields`, :mod:`.commitlog_arrow`), the column decoder
(:mod:`.commitlog_columns`) and the Spark reader in Java, whose ``RecordLayout.java`` is
generated from this module (``make spark-layout``; a test checks that it is current).

Only the fields up to BORNHOST sit at fixed offsets: a host address is 4 bytes (IPv4) or 16
(IPv6, by a SYSFLAG bit), and BODY, TOPIC and PROPERTIES are as long as their length fields say
(TOPICLEN is 1 byte in a V1 record, 2 in a V2 one). So from BORNHOST on, a field's position is
the previous field's position plus the previous field's width:

- STORETIMESTAMP = BORNHOST + born address + PORT_WIDTH
- STOREHOST = STORETIMESTAMP + STORETIMESTAMP_WIDTH
- RECONSUMETIMES = STOREHOST + store address + PORT_WIDTH
- PREPAREDTRANSACTIONOFFSET = RECONSUMETIMES + RECONSUMETIMES_WIDTH
- BODYLEN = PREPAREDTRANSACTIONOFFSET + PREPAREDTRANSACTIONOFFSET_WIDTH, BODY = BODYLEN + 4
- TOPICLEN = BODY + BODYLEN, TOPIC = TOPICLEN + 1 (V1) or 2 (V2)
- PROPERTIESLEN = TOPIC + TOPICLEN, PROPERTIES = PROPERTIESLEN + 2, ending at TOTALSIZE
"""

from __future__ import annotations

from typing import NamedTuple


class Field(NamedTuple):
    """One field of a message record."""

    name: str  # as in MessageDecoder / MessageExtEncoder
    offset: int | None  # from the record's first byte; None: right after the field before
    width: int | None  # bytes; None: variable, see ``width_from``
    width_from: str = ""  # what gives a variable width


FIELDS: tuple[Field, ...] = (
    Field("TOTALSIZE", 0, 4),
    Field("MAGICCODE", 4, 4),
    Field("BODYCRC", 8, 4),
    Field("QUEUEID", 12, 4),
    Field("FLAG", 16, 4),
    Field("QUEUEOFFSET", 20, 8),
    Field("PHYSICALOFFSET", 28, 8),
    Field("SYSFLAG", 36, 4),
    Field("BORNTIMESTAMP", 40, 8),
    Field("BORNHOST", 48, None, "4 (IPv4) or 16 (SYSFLAG & BORNHOST_V6_FLAG)"),
    Field("BORNPORT", None, 4),
    Field("STORETIMESTAMP", None, 8),
    Field("STOREHOSTADDRESS", None, None, "4 (IPv4) or 16 (SYSFLAG & STOREHOSTADDRESS_V6_FLAG)"),
    Field("STOREPORT", None, 4),
    Field("RECONSUMETIMES", None, 4),
    Field("PREPAREDTRANSACTIONOFFSET", None, 8),
    Field("BODYLEN", None, 4),
    Field("BODY", None, None, "BODYLEN"),
    Field("TOPICLEN", None, None, "1 (MAGICCODE V1) or 2 (V2)"),
    Field("TOPIC", None, None, "TOPICLEN"),
    Field("PROPERTIESLEN", None, 2),
    Field("PROPERTIES", None, None, "PROPERTIESLEN"),
)

_BY_NAME = {f.name: f for f in FIELDS}


def _at(name: str) -> int:
    offset = _BY_NAME[name].offset
    assert offset is not None, name
    return offset


def _width(name: str) -> int:
    width = _BY_NAME[name].width
    assert width is not None, name
    return width


# --- fixed offsets from the record's first byte -----------------------------------------------
TOTALSIZE_AT = _at("TOTALSIZE")
MAGIC_AT = _at("MAGICCODE")
BODYCRC_AT = _at("BODYCRC")
QUEUEID_AT = _at("QUEUEID")
FLAG_AT = _at("FLAG")
QUEUEOFFSET_AT = _at("QUEUEOFFSET")  # MessageDecoder.QUEUE_OFFSET_POSITION
PHYSICALOFFSET_AT = _at("PHYSICALOFFSET")  # MessageDecoder.PHY_POS_POSITION
SYSFLAG_AT = _at("SYSFLAG")  # MessageDecoder.SYSFLAG_POSITION
BORNTIMESTAMP_AT = _at("BORNTIMESTAMP")
BORNHOST_AT = _at("BORNHOST")

# --- widths of the fields that follow a host address ------------------------------------------
IPV4_WIDTH = 4
IPV6_WIDTH = 16
PORT_WIDTH = _width("BORNPORT")
STORETIMESTAMP_WIDTH = _width("STORETIMESTAMP")
RECONSUMETIMES_WIDTH = _width("RECONSUMETIMES")
PREPAREDTRANSACTIONOFFSET_WIDTH = _width("PREPAREDTRANSACTIONOFFSET")
BODYLEN_WIDTH = _width("BODYLEN")
TOPICLEN_V1_WIDTH = 1
TOPICLEN_V2_WIDTH = 2
PROPERTIESLEN_WIDTH = _width("PROPERTIESLEN")

FIXED_WIDTH = sum(f.width for f in FIELDS if f.width is not None)
"""Bytes of every fixed-width field: a record is this plus its two host addresses, TOPICLEN,
BODY, TOPIC and PROPERTIES."""

# --- the values that decide the layout ----------------------------------------------------------
MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7, MessageDecoder.MESSAGE_MAGIC_CODE (V1)
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB, V2: 2-byte topic length (5.1.0+)
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194, CommitLog.BLANK_MAGIC_CODE
MAGIC_V1 = MESSAGE_MAGIC_CODE & 0xFFFFFFFF
MAGIC_V2 = MESSAGE_MAGIC_CODE_V2 & 0xFFFFFFFF
MAGIC_BLANK = BLANK_MAGIC_CODE & 0xFFFFFFFF
END_FILE_MIN_BLANK_LENGTH = _width("TOTALSIZE") + _width("MAGICCODE")
"""A BLANK record: TOTALSIZE (the bytes to the end of the file) and MAGICCODE only."""

BORNHOST_V6_FLAG = 0x1 << 4  # MessageSysFlag: a 16-byte BORNHOST
STOREHOSTADDRESS_V6_FLAG = 0x1 << 5  # MessageSysFlag: a 16-byte STOREHOSTADDRESS

PROPERTY_CRC32 = "__CRC32#"
CRC32_RESERVED_LEN = len(PROPERTY_CRC32) + 1 + 10 + 1  # "__CRC32#" \x01 10 digits \x02
"""5.2+ ``enabledAppendPropCRC``: the last bytes of PROPERTIES, and so of the record."""


def cal_msg_length(
    magic: int, sys_flag: int, body_length: int, topic_length: int, properties_length: int
) -> int:
    """``MessageExtEncoder#calMsgLength``: the TOTALSIZE a record of these parts must have."""
    born = IPV6_WIDTH if sys_flag & BORNHOST_V6_FLAG else IPV4_WIDTH
    store = IPV6_WIDTH if sys_flag & STOREHOSTADDRESS_V6_FLAG else IPV4_WIDTH
    topic_len_width = TOPICLEN_V2_WIDTH if (magic & 0xFFFFFFFF) == MAGIC_V2 else TOPICLEN_V1_WIDTH
    return (FIXED_WIDTH + born + store + topic_len_width
            + body_length + topic_length + properties_length)


MIN_RECORD_SIZE = cal_msg_length(MAGIC_V1, 0, 0, 0, 0)
"""The smallest TOTALSIZE a message record can have (91: V1, IPv4 hosts, nothing else; one more
for V2)."""


def java_constants() -> list[tuple[str, int]]:
    """The constants a reader in another language needs, as (name, value): the fixed offsets,
    the widths, the magic codes and flags, the smallest record."""
    names = (
        "TOTALSIZE_AT", "MAGIC_AT", "BODYCRC_AT", "QUEUEID_AT", "FLAG_AT", "QUEUEOFFSET_AT",
        "PHYSICALOFFSET_AT", "SYSFLAG_AT", "BORNTIMESTAMP_AT", "BORNHOST_AT",
        "IPV4_WIDTH", "IPV6_WIDTH", "PORT_WIDTH", "STORETIMESTAMP_WIDTH", "RECONSUMETIMES_WIDTH",
        "PREPAREDTRANSACTIONOFFSET_WIDTH", "BODYLEN_WIDTH", "TOPICLEN_V1_WIDTH",
        "TOPICLEN_V2_WIDTH", "PROPERTIESLEN_WIDTH", "FIXED_WIDTH", "MIN_RECORD_SIZE",
        "MESSAGE_MAGIC_CODE", "MESSAGE_MAGIC_CODE_V2", "BLANK_MAGIC_CODE",
        "END_FILE_MIN_BLANK_LENGTH", "BORNHOST_V6_FLAG", "STOREHOSTADDRESS_V6_FLAG",
    )
    values = globals()
    return [(n, int(values[n])) for n in names]
