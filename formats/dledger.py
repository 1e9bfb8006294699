"""DLedger entries: the commitlog of a broker with ``enableDLegerCommitLog`` (RocketMQ 5.x).

Mirrors ``io.openmessaging.storage.dledger.entry.DLedgerEntry`` / ``DLedgerEntryCoder`` and the
file store ``DLedgerMmapFileStore`` of openmessaging DLedger 0.3.1.2 (the version RocketMQ 5.3.3
ships). Data files are ``store/dledger-<selfId>/data/<20-digit start offset>`` (size
``mappedFileSizeCommitLog``); entry index files ``store/dledger-<selfId>/index/<20-digit>``.
Byte order: big-endian (Java ``ByteBuffer``).

Entry (``HEADER_SIZE = 44``, ``BODY_OFFSET = 48``)::

    @0  magic     int32   CURRENT_MAGIC = 1; BLANK_MAGIC_CODE = -1 fills a file's end
    @4  size      int32   the whole entry: 48 + body length
    @8  index     int64   the entry's index in the log (0, 1, 2, ...)
    @16 term      int64   the leader's term when it was appended
    @24 pos       int64   POS_OFFSET: the entry's own log position (file start + offset)
    @32 channel   int32   reserved
    @36 chainCrc  int32   unused in 0.3.x: written as 0
    @40 bodyCrc   int32   unused in 0.3.x: written as 0
    @44 bodyLen   int32
    @48 body      a RocketMQ commitlog record whose PHYSICALOFFSET is ``pos + 48``

Index unit (``INDEX_UNIT_SIZE = 32``, ``DLedgerEntryCoder#encodeIndex``)::

    magic int32 | pos int64 | size int32 | index int64 | term int64

A data file ends at an entry of magic ``BLANK_MAGIC_CODE`` whose size runs to the file's end
(``MmapFileList#preAppend``), or at zeros (unwritten).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from mqtool.formats.buffers import Buffer
from mqtool.formats.errors import BadFieldError, BadMagicError, BadSizeError, FormatError

__all__ = [
    "BLANK_MAGIC_CODE",
    "BODY_OFFSET",
    "CURRENT_MAGIC",
    "HEADER_SIZE",
    "INDEX_UNIT_SIZE",
    "DLedgerBlank",
    "DLedgerEntry",
    "DLedgerIndexUnit",
    "build_entry_header",
    "entry_problems",
    "iter_entries",
    "iter_index",
    "parse_entry_header",
]

POS_OFFSET = 4 + 4 + 8 + 8  # 24
HEADER_SIZE = POS_OFFSET + 8 + 4 + 4 + 4  # 44
BODY_OFFSET = HEADER_SIZE + 4  # 48
CURRENT_MAGIC = 1  # DLedgerEntry MAGIC_1
BLANK_MAGIC_CODE = -1  # MmapFileList.BLANK_MAGIC_CODE
MIN_BLANK_LEN = 8
INDEX_UNIT_SIZE = 32

_HEADER = struct.Struct(">iiqqqiiii")
_INDEX = struct.Struct(">iqiqq")


@dataclass(frozen=True, slots=True)
class DLedgerEntry:
    """One entry header; the body (a commitlog record) starts at ``offset + BODY_OFFSET``."""

    offset: int  # in-file byte offset of the entry
    magic: int
    size: int  # the whole entry (header + body)
    index: int
    term: int
    pos: int  # the entry's log position as written
    channel: int
    chain_crc: int
    body_crc: int
    body_length: int

    @property
    def body_offset(self) -> int:
        return self.offset + BODY_OFFSET


@dataclass(frozen=True, slots=True)
class DLedgerBlank:
    """The BLANK entry that fills a data file's end."""

    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class DLedgerIndexUnit:
    offset: int  # in-file byte offset of the unit
    magic: int
    pos: int
    size: int
    index: int
    term: int


def parse_entry_header(buf: Buffer, offset: int, *, file: str | None = None) -> DLedgerEntry:
    """The entry header at ``offset`` (TruncatedError past the buffer)."""
    if offset + BODY_OFFSET > len(buf):
        from mqtool.formats.errors import TruncatedError

        raise TruncatedError(file, offset, f"DLedger entry header needs {BODY_OFFSET} bytes, "
                             f"{len(buf) - offset} left")
    f = _HEADER.unpack_from(buf, offset)
    return DLedgerEntry(offset, *f)


def build_entry_header(
    *, index: int, term: int, pos: int, body_length: int, magic: int = CURRENT_MAGIC,
    channel: int = 0, chain_crc: int = 0, body_crc: int = 0,
) -> bytes:
    """The 48 bytes DLedgerEntryCoder#encode writes before a body of ``body_length``."""
    return _HEADER.pack(magic, BODY_OFFSET + body_length, index, term, pos, channel, chain_crc,
                        body_crc, body_length)


def entry_problems(e: DLedgerEntry, buf: Buffer, file_start: int, *,
                   file: str | None = None) -> list[FormatError]:
    """What DLedger's recovery (``DLedgerMmapFileStore#recover``) would reject in an entry, and
    a bodyCrc that is set but is not the body's CRC32 (0.3.x leaves it 0)."""
    out: list[FormatError] = []
    where = file_start + e.offset
    if e.magic != CURRENT_MAGIC:
        out.append(BadMagicError(file, e.offset, f"DLedger entry magic {e.magic}, expected "
                                 f"{CURRENT_MAGIC}", expected=str(CURRENT_MAGIC),
                                 found=str(e.magic)))
        return out
    if e.size != BODY_OFFSET + e.body_length or e.body_length < 0 \
            or e.offset + e.size > len(buf):
        out.append(BadSizeError(file, e.offset, f"DLedger entry size {e.size} with body length "
                                f"{e.body_length} (expected {BODY_OFFSET} + body length, within "
                                f"the file)", expected=str(BODY_OFFSET + e.body_length),
                                found=str(e.size)))
        return out
    if e.pos != where:
        out.append(BadFieldError(file, e.offset, f"DLedger entry pos {e.pos}, but it is at log "
                                 f"position {where}", expected=str(where), found=str(e.pos)))
    if e.body_crc:
        body = bytes(buf[e.body_offset:e.body_offset + e.body_length])
        crc = zlib.crc32(body)
        if crc not in (e.body_crc & 0xFFFFFFFF, e.body_crc & 0x7FFFFFFF):
            from mqtool.formats.errors import CrcMismatchError

            out.append(CrcMismatchError(file, e.offset, f"DLedger entry bodyCrc {e.body_crc} is "
                                        f"not the body's CRC32 {crc}", expected=str(crc),
                                        found=str(e.body_crc)))
    return out


def iter_entries(
    buf: Buffer, *, file: str | None = None, start: int = 0,
) -> Iterator[DLedgerEntry | DLedgerBlank | FormatError]:
    """Entries of one data file in order from ``start``: each header (whatever it holds; check it
    with :func:`entry_problems`), the BLANK end, or a FormatError where no entry can be read
    (after which the walk stops: an entry's size is the only way to the next one)."""
    pos = start
    n = len(buf)
    while pos + MIN_BLANK_LEN <= n:
        magic, size = struct.unpack_from(">ii", buf, pos)
        if magic == 0 and size == 0:
            return
        if magic == BLANK_MAGIC_CODE:
            yield DLedgerBlank(pos, size)
            return
        try:
            e = parse_entry_header(buf, pos, file=file)
        except FormatError as err:
            yield err
            return
        yield e
        if e.size < BODY_OFFSET or pos + e.size > n:
            return
        pos += e.size


def iter_index(buf: Buffer, *, start: int = 0) -> Iterator[DLedgerIndexUnit]:
    """Written units of an entry index file (an all-zero unit ends it)."""
    for off in range(start, len(buf) - INDEX_UNIT_SIZE + 1, INDEX_UNIT_SIZE):
        u = _INDEX.unpack_from(buf, off)
        if not any(u):
            return
        yield DLedgerIndexUnit(off, *u)
