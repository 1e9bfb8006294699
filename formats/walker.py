"""The one commitlog record walker: records, BLANK ends, zero tails and unreadable regions.

Every read path walks commitlog files through here (``Store`` iteration, ``msg``/``trace``
search, the reference store's recovery, the bulk kernels), so that on the same damaged store they
all give the same records and name the same damage.

A record identifies itself: its MAGICCODE is V1 (``0xDAA320A7``) or V2 (``0xDAA320AB``), its
TOTALSIZE is at least the smallest record (91 bytes) and fits in the file, its PHYSICALOFFSET
equals its own commitlog position (file start + position in the file), and its fields add up to
TOTALSIZE (``MessageExtEncoder#calMsgLength``), its properties do not end in a zero byte (a
torn write: :func:`.commitlog.properties_torn`); optionally its BODYCRC matches the body. The
file's BLANK end record (``0xCBD43194``) identifies itself by a TOTALSIZE equal to the bytes left
in the file. :func:`looks_like_record_at` is that rule; everything that resynchronises after
damage (here, :mod:`.commitlog_columns`, the Spark executors) uses it.

:func:`walk` follows the TOTALSIZE chain. Where it breaks, the bytes up to the next
self-identifying record (found by :func:`next_record`) are one unreadable region, yielded as an
:class:`Unreadable` finding (kind, file relative to the store root, offset *inside the file*,
``length``, ``phy`` = commitlog position), and the walk goes on from that record. Zeros to the end
of the file are the normal end of the written data (pre-allocated space); whether that is right
for this file (no later file may hold data) is for the caller, who sees every file. A file
always ends with a :class:`.commitlog.FileEnd` saying where its valid data ends and why.

A record whose properties are torn is not yielded: its header may be intact, but its last
field (TAGS, KEYS, UNIQ_KEY, ...) was never written, so it is an :class:`Unreadable` region of
kind ``properties-torn`` at the record's own offset (file end ``torn`` when nothing readable
follows). RocketMQ 4.9.7's recovery would keep such a record (it checks no property bytes);
5.2+ with ``__CRC32#`` properties and ``checkCRCOnRecover`` stops at it.
"""

from __future__ import annotations

import errno
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mqtool.formats import commitlog_layout as layout
from mqtool.formats.buffers import Buffer
from mqtool.formats.commitlog import (
    BlankRecord,
    CommitLogMessage,
    FileEnd,
    parse_message,
    properties_torn,
)
from mqtool.formats.commitlog_layout import (
    BORNHOST_V6_FLAG,
    END_FILE_MIN_BLANK_LENGTH,
    MAGIC_AT,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    PHYSICALOFFSET_AT,
    PROPERTY_CRC32,
    STOREHOSTADDRESS_V6_FLAG,
    cal_msg_length,
)
from mqtool.formats.errors import (
    BadFieldError,
    BadMagicError,
    BadSizeError,
    CrcMismatchError,
    Finding,
    FormatError,
    TornPropertiesError,
    TornRecordError,
    TruncatedError,
    UnexpectedZerosError,
)

_BODYLEN_AT_IPV0 = (  # BODYLEN's offset less the two host addresses
    layout.BORNHOST_AT + layout.PORT_WIDTH + layout.STORETIMESTAMP_WIDTH + layout.PORT_WIDTH
    + layout.RECONSUMETIMES_WIDTH + layout.PREPAREDTRANSACTIONOFFSET_WIDTH
)
_SIZE_MAGIC = struct.Struct(">iI")
_PHY = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I8 = struct.Struct(">b")
_MAGIC_PREFIX = b"\xda\xa3\x20"  # V1 0xDAA320A7 and V2 0xDAA320AB share these three bytes
_MAGIC_LAST = (MAGIC_V1 & 0xFF, MAGIC_V2 & 0xFF)
_BLANK_BYTES = struct.pack(">I", MAGIC_BLANK)
_FIND_CHUNK = 16 << 20  # bytes copied per find() on buffers without one (memoryview)

Item = CommitLogMessage | BlankRecord | Finding | FileEnd
"""What :func:`walk` yields."""


@dataclass(frozen=True, slots=True)
class Unreadable(Finding):
    """A region of a commitlog file that holds no readable record: a :class:`Finding` with the
    region's ``length`` (``offset`` is where it starts inside ``file``, ``phy`` its commitlog
    position)."""

    length: int = 0

    def to_json(self) -> dict[str, Any]:
        out = Finding.to_json(self)
        out["length"] = self.length
        return out


# --- the rule: does a record start here? ------------------------------------------------------
def header_ok(buf: Buffer, pos: int, file_start: int) -> bool:
    """The cheap part of the rule: a message MAGICCODE, a TOTALSIZE of at least 91 bytes that
    fits in ``buf``, and a PHYSICALOFFSET equal to ``file_start + pos``."""
    n = len(buf)
    if pos < 0 or pos + PHYSICALOFFSET_AT + _PHY.size > n:
        return False
    size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        return False
    if size < MIN_RECORD_SIZE or pos + size > n:
        return False
    return bool(_PHY.unpack_from(buf, pos + PHYSICALOFFSET_AT)[0] == file_start + pos)


def lengths_ok(buf: Buffer, pos: int, size: int, magic: int) -> bool:
    """Whether the record at ``pos`` (header already :func:`header_ok`) has fields that add up
    to its TOTALSIZE ``size`` (``MessageExtEncoder#calMsgLength``) and properties that are not
    torn (:func:`.commitlog.properties_torn`), without decoding it: the structural part of the
    rule, for walks that only want record positions."""
    sys_flag = _I32.unpack_from(buf, pos + layout.SYSFLAG_AT)[0]
    born = layout.IPV6_WIDTH if sys_flag & BORNHOST_V6_FLAG else layout.IPV4_WIDTH
    store = layout.IPV6_WIDTH if sys_flag & STOREHOSTADDRESS_V6_FLAG else layout.IPV4_WIDTH
    p = pos + _BODYLEN_AT_IPV0 + born + store
    end = pos + size
    if p + layout.BODYLEN_WIDTH > end:
        return False
    body = _I32.unpack_from(buf, p)[0]
    if body < 0:
        return False
    p += layout.BODYLEN_WIDTH + body
    tl_w = layout.TOPICLEN_V2_WIDTH if magic == MAGIC_V2 else layout.TOPICLEN_V1_WIDTH
    if p + tl_w > end:
        return False
    topic = (_I16 if tl_w == 2 else _I8).unpack_from(buf, p)[0]  # signed, as Java
    p += tl_w + topic
    if topic < 0 or p + layout.PROPERTIESLEN_WIDTH > end:
        return False
    props = _I16.unpack_from(buf, p)[0]
    return (props >= 0 and cal_msg_length(magic, sys_flag, body, topic, props) == size
            and not properties_torn(buf, end, props))


def blank_at(buf: Buffer, pos: int) -> bool:
    """Whether the file's BLANK end record starts at ``pos`` (TOTALSIZE = bytes left)."""
    if pos < 0 or pos + END_FILE_MIN_BLANK_LENGTH > len(buf):
        return False
    size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    return bool(magic == MAGIC_BLANK and size == len(buf) - pos)


def record_at(
    buf: Buffer, pos: int, file_start: int = 0, *, file: str | None = None,
    check_crc: bool = False,
) -> CommitLogMessage | BlankRecord | None:
    """The self-identifying record (or the file's BLANK) that starts at ``pos``, else None.

    ``buf`` is the whole file (the BLANK rule needs its end); ``file_start`` its commitlog
    offset. With ``check_crc`` a message whose BODYCRC does not match its body is not one.
    """
    if blank_at(buf, pos):
        size = _SIZE_MAGIC.unpack_from(buf, pos)[0]
        return BlankRecord(file_start + pos, size)
    if not header_ok(buf, pos, file_start):
        return None
    try:
        rec = parse_message(buf, pos, file=file, file_start=file_start)
    except FormatError:
        return None
    if not isinstance(rec, CommitLogMessage):
        return None
    if check_crc and rec.body_crc != zlib.crc32(rec.body) & 0x7FFFFFFF:
        return None
    return rec


def looks_like_record_at(
    buf: Buffer, pos: int, file_start: int = 0, *, check_crc: bool = False
) -> bool:
    """Whether a complete, self-consistent record or the file's BLANK starts at ``pos``.

    This is the one validity rule every walker and kernel resynchronises with.
    """
    return record_at(buf, pos, file_start, check_crc=check_crc) is not None


def crc_findings(
    rec: CommitLogMessage, file: str | None, pos: int, file_start: int = 0
) -> list[Finding]:
    """``crc-mismatch`` findings for the message ``rec`` at ``pos`` in ``file``: its BODYCRC
    against the body and, for 5.x records that carry one, the ``__CRC32#`` property against
    the record (``MessageExtEncoder``'s CRC over the record minus the reserved property)."""
    out = []
    crc = zlib.crc32(rec.body) & 0x7FFFFFFF
    if crc != rec.body_crc:
        out.append(CrcMismatchError(
            file, pos, "body CRC mismatch", expected=f"{rec.body_crc:#x}", found=f"{crc:#x}",
            phy=file_start + pos,
        ).finding())
    if PROPERTY_CRC32 in rec.properties_raw:
        got = rec.prop_crc()
        if got is not None and got[0] != got[1]:
            out.append(CrcMismatchError(
                file, pos, "5.x __CRC32# property does not match the record",
                expected=str(got[0]), found=str(got[1]), phy=file_start + pos,
            ).finding())
    return out


# --- searching forward ------------------------------------------------------------------------
def data_extents(fd: int | None, start: int, stop: int) -> Iterator[tuple[int, int]]:
    """The parts of ``[start, stop)`` of the file ``fd`` that hold data (holes of a sparse file
    are zeros and need no reading); one extent when ``fd`` is None or SEEK_DATA is missing."""
    if fd is None or not hasattr(os, "SEEK_DATA"):
        if start < stop:
            yield start, stop
        return
    pos = start
    while pos < stop:
        try:
            d = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno != errno.ENXIO:  # no SEEK_DATA support: read everything
                yield pos, stop
            return  # ENXIO: only a hole is left
        if d >= stop:
            return
        try:
            h = os.lseek(fd, d, os.SEEK_HOLE)
        except OSError:
            h = stop
        yield d, min(h, stop)
        pos = h


def _find(buf: Buffer, sub: bytes, start: int, stop: int) -> int:
    """``buf.find(sub, start, stop)`` for any buffer (a memoryview has no find)."""
    if start >= stop:
        return -1
    finder = getattr(buf, "find", None)
    if finder is not None:
        return int(finder(sub, start, stop))
    pos = start
    while pos < stop:
        hi = min(stop, pos + _FIND_CHUNK + len(sub) - 1)
        i = bytes(buf[pos:hi]).find(sub)
        if i >= 0:
            return pos + i
        pos += _FIND_CHUNK
    return -1


def next_record(
    buf: Buffer, start: int, file_start: int = 0, *, stop: int | None = None,
    fd: int | None = None, check_crc: bool = False,
) -> int | None:
    """The first position in ``[start, stop)`` where :func:`looks_like_record_at` holds.

    Candidates are found by searching for the magic bytes (fast over zeros and garbage; holes of
    a sparse file are skipped when its ``fd`` is given) and then checked with the full rule.
    """
    n = len(buf)
    end = n if stop is None else min(stop, n)
    # a record's magic is non-zero: none starts within 4 bytes of the last non-zero byte (a
    # zero or sparse tail is never searched, byte by byte, for a magic)
    end = min(end, nonzero_end(buf, max(start, 0), n, fd=fd) - MAGIC_AT)
    if end <= start:
        return None
    for lo, hi in data_extents(fd, max(start, 0), n):
        if lo >= end:
            return None
        q = max(start, lo)
        while q < end:
            # a record at c has its magic at c + MAGIC_AT, inside this extent's data
            i = _find(buf, _MAGIC_PREFIX, q + MAGIC_AT, min(hi, end + MAGIC_AT + 3))
            bound = i if i >= 0 else min(hi, end + MAGIC_AT + 4)
            j = _find(buf, _BLANK_BYTES, q + MAGIC_AT, bound + 4)  # a BLANK before that candidate
            if j >= 0 and (i < 0 or j < i):
                c = j - MAGIC_AT
                if c >= end:
                    break
                if blank_at(buf, c):
                    return c
                q = c + 1
                continue
            if i < 0:
                break
            c = i - MAGIC_AT
            if c >= end:
                break
            if i + 3 < n and buf[i + 3] in _MAGIC_LAST and looks_like_record_at(
                buf, c, file_start, check_crc=check_crc
            ):
                return c
            q = c + 1
    return None


def nonzero_end(buf: Buffer, start: int, stop: int | None = None, *,
                fd: int | None = None, chunk: int = 16 << 20) -> int:
    """One past the last non-zero byte in ``[start, stop)`` (``start`` if all are zero).

    Reads backwards from ``stop`` in chunks that grow from 4 KiB to ``chunk`` (a file that ends
    in data costs one small read), and skips the holes of a sparse file when its ``fd`` is
    given.
    """
    n = len(buf) if stop is None else min(stop, len(buf))
    step = 4096
    for lo, hi0 in reversed(list(data_extents(fd, start, n))):
        hi = hi0
        while hi > lo:
            c_lo = max(lo, hi - step)
            step = min(step * 4, chunk)
            end = _last_nonzero(buf, c_lo, hi)
            if end is not None:
                return end
            hi = c_lo
    return start


_PIECE = 1 << 20
_ZERO_PIECE = bytes(_PIECE)


def _all_zero(buf: Buffer, lo: int, hi: int) -> bool:
    """Whether ``buf[lo:hi]`` (at most :data:`_PIECE` bytes) is all zeros: one copy and one
    ``memcmp``, where ``rstrip`` of a zero megabyte walks it byte by byte."""
    n = hi - lo
    return bytes(buf[lo:hi]) == (_ZERO_PIECE if n == _PIECE else bytes(n))


def _last_nonzero(buf: Buffer, lo: int, hi: int) -> int | None:
    """One past the last non-zero byte of ``buf[lo:hi]``, None when all are zero. Pieces of
    :data:`_PIECE` bytes are compared with zeros from the top; in the first that is not all
    zero, halving finds the last 4 KiB with a non-zero byte, which is stripped."""
    y = hi
    while y > lo:
        x = max(lo, y - _PIECE)
        if not _all_zero(buf, x, y):
            while y - x > 4096:  # [x, y) holds a non-zero byte, [y, ...) none
                mid = (x + y) // 2
                if _all_zero(buf, mid, y):
                    y = mid
                else:
                    x = mid
            return x + len(bytes(buf[x:y]).rstrip(b"\0"))
        y = x
    return None


# --- what is wrong at a position --------------------------------------------------------------
def _problem(
    buf: Buffer, q: int, file: str | None, file_start: int, resume: int | None, end: int
) -> type[FormatError] | tuple[type[FormatError], str]:
    """The error class (and what was found) for the record chain breaking at ``q``; ``end`` is
    where the unreadable region ends, ``resume`` the next record (None: nothing follows)."""
    n = len(buf)
    if q + _SIZE_MAGIC.size > n:
        return TruncatedError, f"{n - q} stray bytes at the end of the file"
    size, magic = _SIZE_MAGIC.unpack_from(buf, q)
    if size == 0 and magic == 0:
        if nonzero_end(buf, q, end) <= q:
            return UnexpectedZerosError, f"{end - q} zero bytes where a record must start"
        return BadSizeError, "TOTALSIZE 0 and no magic, then non-zero bytes"
    if magic == MAGIC_BLANK:
        return BadSizeError, f"BLANK record with TOTALSIZE {size}, {n - q} bytes left in the file"
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        return BadMagicError, (
            f"bad magic: expected 0xdaa320a7 or 0xdaa320ab, found {magic:#010x}"
        )
    if size < MIN_RECORD_SIZE:
        return BadSizeError, f"bad TOTALSIZE {size}"
    if q + size > n:
        if resume is None:
            return TornRecordError, (
                f"record with TOTALSIZE {size} runs past the end of the file ({n - q} bytes left)"
            )
        return BadSizeError, f"TOTALSIZE {size} runs past the end of the file"
    try:
        rec = parse_message(buf, q, file=file, file_start=file_start)
    except TornPropertiesError as e:  # zeros at the record's end: torn, wherever it is
        return type(e), e.detail
    except FormatError as e:
        if resume is None and nonzero_end(buf, q, n) < q + size:
            return TornRecordError, f"record cut short (zeros from its middle on): {e.detail}"
        return type(e), e.detail
    phy = getattr(rec, "physical_offset", None)
    if phy != file_start + q:
        return BadFieldError, f"PHYSICALOFFSET field says {phy}, record sits at {file_start + q}"
    return FormatError, "record does not decode"


def _region(
    buf: Buffer, q: int, end: int, resume: int | None, file: str | None, file_start: int
) -> Unreadable:
    got = _problem(buf, q, file, file_start, resume, end)
    cls, what = got if isinstance(got, tuple) else (got, "")
    then = (f"; records again at phy {file_start + resume}" if resume is not None
            else "; no record after it in this file")
    return Unreadable(
        cls.kind, file or "<bytes>", q, f"{end - q} unreadable bytes: {what}{then}",
        phy=file_start + q, length=end - q,
    )


# --- the walker -------------------------------------------------------------------------------
def walk(
    buf: Buffer,
    *,
    file: str | None = None,
    file_start: int = 0,
    start: int = 0,
    stop: int | None = None,
    check_crc: bool = False,
    decode: bool = True,
    resync: bool = True,
    fd: int | None = None,
    chained: bool = False,
) -> Iterator[Item | int]:
    """Walk the commitlog file ``buf`` (``file``: its name relative to the store root;
    ``file_start``: the commitlog offset of its first byte) in physical order.

    Yields :class:`CommitLogMessage` (or, with ``decode=False``, the ``int`` position of each
    record whose header identifies itself, for callers that decode only some records), a
    :class:`BlankRecord`, an :class:`Unreadable` finding for each damaged region (the walk
    resumes at the next self-identifying record; with ``resync=False`` it ends there, as
    RocketMQ's recovery does), a ``crc-mismatch`` :class:`Finding` before a message whose
    BODYCRC (or 5.x ``__CRC32#`` property) is wrong (``check_crc``; the message is still
    yielded), and last a
    :class:`FileEnd` giving where the file's valid data ends and why (``blank``, ``eof``,
    ``zeros``: clean; ``torn``, ``corrupt``: the walk stopped at unreadable bytes).

    ``start``/``stop`` (positions in ``buf``) restrict the walk to the records that start in
    that range; a walk that does not start at 0 begins at the first self-identifying record at
    or after ``start`` (the bytes before it belong to the range before; nothing is yielded when
    there is none), and one stopped by ``stop`` yields no FileEnd. ``chained``: the record
    chain reached ``start`` (the bytes there are judged as the walk would judge them, not
    skipped). ``fd`` (the file's descriptor) lets the search after damage skip the holes of a
    sparse file.
    """
    n = len(buf)
    end = n if stop is None else min(stop, n)
    q: int | None = start
    if start > 0 and not chained and not looks_like_record_at(buf, start, file_start):
        q = next_record(buf, start, file_start, stop=end, fd=fd)
    while q is not None and q < end:
        if q + _SIZE_MAGIC.size <= n:
            size, magic = _SIZE_MAGIC.unpack_from(buf, q)
            if magic == MAGIC_BLANK and size == n - q:
                yield BlankRecord(file_start + q, size)
                yield FileEnd(file_start + q, "blank")
                return
            if header_ok(buf, q, file_start):
                if not decode and lengths_ok(buf, q, size, magic):
                    yield q
                    q += size
                    continue
                try:
                    rec = parse_message(buf, q, file=file, file_start=file_start)
                except FormatError:
                    rec = None
                if isinstance(rec, CommitLogMessage):
                    if check_crc:
                        yield from crc_findings(rec, file, q, file_start)
                    yield rec
                    q += size
                    continue
        # the chain breaks at q: zeros to the end are the end of data (checked first, without
        # searching them for a magic), anything else is damage
        data_end = nonzero_end(buf, q, n, fd=fd)
        if data_end <= q:
            yield FileEnd(file_start + q, "zeros")
            return
        after = next_record(buf, q + 1, file_start, stop=data_end, fd=fd)
        if after is None:
            tail = max(data_end, min(q + _SIZE_MAGIC.size, n))
            region = _region(buf, q, tail, None, file, file_start)
        else:
            region = _region(buf, q, after, after, file, file_start)
        yield region
        if after is None or not resync:
            torn = after is None and region.kind == TornPropertiesError.kind
            kind = "torn" if region.kind == TornRecordError.kind or torn else "corrupt"
            yield FileEnd(file_start + q, kind, region.detail)
            return
        q = after
    if q is not None and q >= n:
        yield FileEnd(file_start + q, "eof")


def records(
    buf: Buffer, *, file: str | None = None, file_start: int = 0, check_crc: bool = False
) -> Iterator[CommitLogMessage]:
    """Only the readable messages of a file (damage is skipped: use :func:`walk` to see it)."""
    for item in walk(buf, file=file, file_start=file_start, check_crc=check_crc):
        if isinstance(item, CommitLogMessage):
            yield item


def scan_file(
    buf: Buffer, *, file: str | None = None, file_start: int = 0, fd: int | None = None
) -> Iterator[CommitLogMessage | BlankRecord | FileEnd]:
    """Records of one commitlog file in physical order up to the first damage; the last item is
    always a FileEnd (``torn``/``corrupt`` at the first unreadable byte).

    A view of :func:`walk` (``resync=False``): what RocketMQ's recovery sees. Never raises on
    bad data. Readers that must go on past damage, and see it as findings, use ``walk`` itself.
    """
    for item in walk(buf, file=file, file_start=file_start, resync=False, fd=fd):
        if isinstance(item, CommitLogMessage | BlankRecord | FileEnd):
            yield item
