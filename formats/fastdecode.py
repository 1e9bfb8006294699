"""Bulk decoding of whole commitlog files into columns (numpy), for scans, Spark and benches.

Mirrors the same ``CommitLog`` / ``MessageDecoder`` record layout as :mod:`.commitlog` (big-endian),
in two steps:

1. :func:`walk` follows the TOTALSIZE chain from a start position (the only inherently
   sequential part: one ``struct`` read per record, nothing else in the loop);
2. :func:`decode_records` gathers every fixed field of all those records at once with numpy,
   checks each record the way :func:`.commitlog.parse_message` does (magic, lengths adding up to
   TOTALSIZE as ``MessageExtEncoder#calMsgLength``, PHYSICALOFFSET, UTF-8 topic/properties),
   and cuts the variable parts (body, topic, properties) out as Arrow-style binary columns
   (``int64`` offsets into one ``bytes``), decoded to ``str`` only on request.

:func:`decode_file` combines both and ends a file exactly where :func:`.commitlog.scan_file`
does, with the same :class:`.commitlog.FileEnd` (the first record the vectorised checks reject
is handed to ``scan_file`` for the verdict). The columns are proven equal, field for field, to
``parse_message`` on every real record of the fixtures. numpy only: no pyarrow/pyspark here
(``pyarrow.Array.from_buffers`` takes the offsets and data as they are).
"""

from __future__ import annotations

import codecs
import mmap
import struct
from dataclasses import dataclass, field

import numpy as np

from mqtool.formats.commitlog import (
    BORNHOST_V6_FLAG,
    MAGIC_V1,
    MAGIC_V2,
    STOREHOSTADDRESS_V6_FLAG,
    CommitLogMessage,
    FileEnd,
    HostPort,
    scan_file,
)

MIN_RECORD_SIZE = 91  # calMsgLength(V1, IPv4 hosts, empty body/topic/properties)

HEAD_DTYPE = np.dtype(
    [
        ("total_size", ">i4"), ("magic", ">u4"), ("body_crc", ">i4"), ("queue_id", ">i4"),
        ("flag", ">i4"), ("queue_offset", ">i8"), ("physical_offset", ">i8"),
        ("sys_flag", ">i4"), ("born_timestamp", ">i8"),
    ]
)
"""The first 48 bytes of every record (TOTALSIZE .. BORNTIMESTAMP)."""

_HEAD_LEN = HEAD_DTYPE.itemsize
_I32 = struct.Struct(">i")
_AR = {16: np.arange(16, dtype=np.int64)}

Buffer = bytes | bytearray | memoryview


@dataclass
class Binary:
    """A binary column: item ``i`` is ``data[starts[i]:starts[i]+lengths[i]]``.

    :meth:`contiguous` gives Arrow's layout (``int64`` offsets into one buffer) for
    ``pyarrow.Array.from_buffers``; :meth:`strings` decodes every item.
    """

    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64
    data: bytes

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> bytes:
        s = int(self.starts[i])
        return self.data[s : s + int(self.lengths[i])]

    def to_pylist(self) -> list[bytes]:
        d = self.data
        s = self.starts.tolist()
        return [d[a:b] for a, b in zip(s, (self.starts + self.lengths).tolist(), strict=True)]

    def strings(self) -> list[str]:
        """Every item as ``str`` (the column was checked to be UTF-8 item by item)."""
        if self.data.isascii():  # byte offsets are character offsets: slice decoded text
            text = self.data.decode("ascii")
            s = self.starts.tolist()
            e = (self.starts + self.lengths).tolist()
            return [text[a:b] for a, b in zip(s, e, strict=True)]
        return [b.decode("utf-8") for b in self.to_pylist()]

    def contiguous(self) -> tuple[np.ndarray, bytes]:
        """(offsets, data) with item ``i`` at ``data[offsets[i]:offsets[i+1]]`` (Arrow)."""
        n = len(self.starts)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(self.lengths, out=offsets[1:])
        s = self.starts.tolist()
        e = (self.starts + self.lengths).tolist()
        d = self.data
        return offsets, b"".join([d[a:b] for a, b in zip(s, e, strict=True)])


def _empty_binary() -> Binary:
    return Binary(np.zeros(0, np.int64), np.zeros(0, np.int64), b"")


@dataclass
class Columns:
    """Decoded messages of one buffer as columns (one row per message, physical order).

    Integer columns are numpy arrays named like :class:`.commitlog.CommitLogMessage` fields;
    hosts are ``*_ip`` (``uint8`` n x 16: IPv4 in the first 4 bytes), ``*_v6`` (bool) and
    ``*_port``; ``position`` is the record's byte position in the buffer; body, topic and
    properties are :class:`Binary` columns.
    """

    arrays: dict[str, np.ndarray] = field(default_factory=lambda: _empty_arrays())
    topic: Binary = field(default_factory=_empty_binary)
    properties: Binary = field(default_factory=_empty_binary)
    buf: Buffer = b""  # the decoded buffer: bodies are cut from it on request

    def __len__(self) -> int:
        return len(self.topic)

    @property
    def body(self) -> Binary:
        """Bodies as stored (copied out of the buffer now: they are most of the bytes)."""
        pos, ln = self.arrays["body_position"], self.arrays["body_length"]
        offsets = np.zeros(len(pos) + 1, dtype=np.int64)
        np.cumsum(ln, out=offsets[1:])
        src = _sliceable(self.buf)
        data = b"".join([src[a:b] for a, b in zip(pos.tolist(), (pos + ln).tolist(), strict=True)])
        return Binary(offsets[:-1], ln, data)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def host(self, prefix: str, i: int) -> HostPort:
        raw = bytes(self.arrays[f"{prefix}_ip"][i])
        port = int(self.arrays[f"{prefix}_port"][i])
        if self.arrays[f"{prefix}_v6"][i]:
            import ipaddress

            return HostPort(str(ipaddress.IPv6Address(raw)), port)
        return HostPort(f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}", port)

    def message(self, i: int) -> CommitLogMessage:
        """Row ``i`` as a :class:`CommitLogMessage` (slow; for tests and spot checks)."""
        a = self.arrays
        return CommitLogMessage(
            int(a["total_size"][i]), int(a["magic"][i]), int(a["body_crc"][i]),
            int(a["queue_id"][i]), int(a["flag"][i]), int(a["queue_offset"][i]),
            int(a["physical_offset"][i]), int(a["sys_flag"][i]), int(a["born_timestamp"][i]),
            self.host("born", i), int(a["store_timestamp"][i]), self.host("store", i),
            int(a["reconsume_times"][i]), int(a["prepared_transaction_offset"][i]),
            self.body_at(i), self.topic[i].decode("utf-8"), self.properties[i].decode("utf-8"),
        )

    def body_at(self, i: int) -> bytes:
        p = int(self.arrays["body_position"][i])
        return bytes(memoryview(self.buf)[p : p + int(self.arrays["body_length"][i])])

    @classmethod
    def concat(cls, parts: list[Columns]) -> Columns:
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls()
        if len(parts) == 1:
            return parts[0]
        arrays = {k: np.concatenate([p.arrays[k] for p in parts]) for k in parts[0].arrays}

        def cat(bins: list[Binary]) -> Binary:
            starts = []
            base = 0
            for b in bins:
                starts.append(b.starts + base)
                base += len(b.data)
            return Binary(np.concatenate(starts), np.concatenate([b.lengths for b in bins]),
                          b"".join(b.data for b in bins))

        return cls(arrays, cat([p.topic for p in parts]), cat([p.properties for p in parts]),
                   parts[0].buf)


COLUMN_NAMES = (
    "position", "total_size", "magic", "body_crc", "queue_id", "flag", "queue_offset",
    "physical_offset", "sys_flag", "born_timestamp", "born_ip", "born_v6", "born_port",
    "store_timestamp", "store_ip", "store_v6", "store_port", "reconsume_times",
    "prepared_transaction_offset", "body_position", "body_length",
)


def _empty_arrays() -> dict[str, np.ndarray]:
    out = {k: np.zeros(0, dtype=np.int64) for k in COLUMN_NAMES}
    for k in ("born", "store"):
        out[f"{k}_ip"] = np.zeros((0, 16), dtype=np.uint8)
        out[f"{k}_v6"] = np.zeros(0, dtype=bool)
    return out


def walk(buf: Buffer, start: int = 0, stop: int | None = None) -> tuple[list[int], int]:
    """Positions of the records chained by TOTALSIZE from ``start``, and where the walk ended.

    The loop trusts TOTALSIZE (>= 91 and inside the buffer) and nothing else; everything else
    is checked afterwards, vectorised, by :func:`decode_records` (a bad record cuts the list
    there). The walk ends at ``stop`` (default: the end of ``buf``), at a TOTALSIZE that cannot
    be a message (zeros, a short BLANK, garbage) or one that runs past the end.
    """
    n = len(buf)
    end = n if stop is None else min(stop, n)
    last = n - 8
    unpack = _I32.unpack_from
    out: list[int] = []
    append = out.append
    p = start
    while p < end and p <= last:
        size = unpack(buf, p)[0]
        if size < MIN_RECORD_SIZE or p + size > n:
            break
        append(p)
        p += size
    return out, p


def _views(a: np.ndarray) -> dict[str, np.ndarray]:
    """Big-endian int views of ``a`` starting at every byte (stride 1): ``v[w][i]`` is the
    w-byte int at byte ``i``. A gather from them reads each field with one fancy index."""
    n = len(a)
    out = {}
    for code, w in (("i1", 1), ("i2", 2), ("i4", 4), ("i8", 8), ("u4", 4)):
        out[code] = np.ndarray(shape=(max(n - w + 1, 0),), dtype=f">{code}", buffer=a,
                               strides=(1,))
    return out


def _sliceable(buf: Buffer) -> bytes | bytearray | mmap.mmap:
    """Something whose slices are ``bytes`` (a memoryview's slices are views: slow to join)."""
    if isinstance(buf, bytes | bytearray | mmap.mmap):
        return buf
    return bytes(buf)


def _tails(
    buf: Buffer, topic_pos: np.ndarray, topic_len: np.ndarray, props_len: np.ndarray,
    ends: np.ndarray,
) -> tuple[Binary, Binary, int]:
    """Topic and properties columns from one slice per record (topic .. record end, the
    properties length field included), and the index of the first record whose topic or
    properties are not UTF-8 on their own (-1: none).

    UTF-8 is checked in bulk: with the two length bytes blanked, the joined tails must decode
    and no topic or properties may start with a continuation byte (so every boundary between
    items is a character boundary); only on failure are the records decoded one by one.
    """
    src = _sliceable(buf)
    tl = ends - topic_pos
    toff = np.zeros(len(tl), dtype=np.int64)
    np.cumsum(tl[:-1], out=toff[1:])
    data = b"".join([src[a:b] for a, b in zip(topic_pos.tolist(), ends.tolist(), strict=True)])
    topic = Binary(toff, topic_len, data)
    props = Binary(toff + topic_len + 2, props_len, data)
    bad = -1
    if len(data) and not data.isascii():
        arr = np.frombuffer(data, dtype=np.uint8).copy()
        arr[toff + topic_len] = 0x20  # the PROPERTIESLEN bytes are binary
        arr[toff + topic_len + 1] = 0x20
        try:
            codecs.utf_8_decode(arr.tobytes(), "strict", True)
            starts = np.concatenate([toff, props.starts])
            starts = starts[starts < len(arr)]
            ok = not ((arr[starts] & 0xC0) == 0x80).any()
        except UnicodeDecodeError:
            ok = False
        if not ok:
            for i, (t, p) in enumerate(zip(topic.to_pylist(), props.to_pylist(), strict=True)):
                try:
                    t.decode("utf-8")
                    p.decode("utf-8")
                except UnicodeDecodeError:
                    bad = i
                    break
    return topic, props, bad


def decode_records(
    buf: Buffer, positions: list[int] | np.ndarray, *, file_start: int = 0
) -> tuple[Columns, int]:
    """Decode the records at ``positions`` (from :func:`walk`) into columns, vectorised.

    Returns the columns of the leading run of records that ``parse_message`` would accept (and
    whose PHYSICALOFFSET is ``file_start`` + position, as ``scan_file`` requires), and how many
    that is: ``positions[good]`` is the first rejected record, if any.
    """
    pos = np.asarray(positions, dtype=np.int64)
    n_all = len(pos)
    if n_all == 0:
        return Columns(), 0
    a = np.frombuffer(buf, dtype=np.uint8)
    n = len(a)
    clip = n - 8

    v = _views(a)
    i4, i8 = v["i4"], v["i8"]

    def be4(at: np.ndarray) -> np.ndarray:
        out: np.ndarray = i4[at].astype(np.int64)
        return out

    size = be4(pos)
    magic = v["u4"][pos + 4].astype(np.int64)
    sys_flag = be4(pos + 36)
    phys = i8[pos + 28].astype(np.int64)
    born_len = np.where(sys_flag & BORNHOST_V6_FLAG, 16, 4)
    store_len = np.where(sys_flag & STOREHOSTADDRESS_V6_FLAG, 16, 4)
    born_pos = pos + 48
    store_ts_pos = born_pos + born_len + 4
    store_pos = store_ts_pos + 8
    recon_pos = store_pos + store_len + 4
    blen_pos = recon_pos + 12
    ends = pos + size
    v2 = magic == MAGIC_V2
    body_len = be4(np.minimum(blen_pos, clip))
    body_pos = blen_pos + 4
    tl_pos = np.clip(body_pos + body_len, 0, clip)
    topic_len = np.where(v2, v["i2"][tl_pos], v["i1"][tl_pos]).astype(np.int64)
    topic_pos = tl_pos + np.where(v2, 2, 1)
    pl_pos = np.clip(topic_pos + topic_len, 0, clip)
    props_len = v["i2"][pl_pos].astype(np.int64)
    props_pos = pl_pos + 2
    ok = (
        ((magic == MAGIC_V1) | v2)
        & (phys == file_start + pos)
        & (body_len >= 0) & (body_pos + body_len <= ends)
        & (topic_len >= 0) & (topic_pos + topic_len <= ends)
        & (props_len >= 0)
        & (props_pos + props_len == ends)  # == calMsgLength(...) == TOTALSIZE
        & (ends <= n)
    )
    bad = np.flatnonzero(~ok)
    good = int(bad[0]) if bad.size else n_all
    sel = slice(0, good)
    topic, props, first_bad = _tails(buf, topic_pos[sel], topic_len[sel], props_len[sel],
                                     ends[sel])
    if first_bad >= 0:
        return decode_records(buf, pos[:first_bad], file_start=file_start)[0], first_bad
    pos = pos[sel]
    born_v6 = (sys_flag[sel] & BORNHOST_V6_FLAG) != 0
    store_v6 = (sys_flag[sel] & STOREHOSTADDRESS_V6_FLAG) != 0

    def ip(at: np.ndarray, v6: np.ndarray) -> np.ndarray:
        raw = np.zeros((len(at), 16), dtype=np.uint8)
        raw[:, :4] = v["u4"][at].astype(">u4").view(np.uint8).reshape(-1, 4)
        if v6.any():  # rare: whole 16-byte addresses for those rows
            raw[v6] = a[at[v6][:, None] + _AR[16]]
        return raw

    arrays = {
        "position": pos,
        "total_size": size[sel],
        "magic": magic[sel],
        "body_crc": be4(pos + 8),
        "queue_id": be4(pos + 12),
        "flag": be4(pos + 16),
        "queue_offset": i8[pos + 20].astype(np.int64),
        "physical_offset": phys[sel],
        "sys_flag": sys_flag[sel],
        "born_timestamp": i8[pos + 40].astype(np.int64),
        "born_ip": ip(born_pos[sel], born_v6),
        "born_v6": born_v6,
        "born_port": be4(born_pos[sel] + born_len[sel]),
        "store_timestamp": i8[store_ts_pos[sel]].astype(np.int64),
        "store_ip": ip(store_pos[sel], store_v6),
        "store_v6": store_v6,
        "store_port": be4(store_pos[sel] + store_len[sel]),
        "reconsume_times": be4(recon_pos[sel]),
        "prepared_transaction_offset": i8[recon_pos[sel] + 4].astype(np.int64),
        "body_position": body_pos[sel],
        "body_length": body_len[sel],
    }
    return Columns(arrays, topic, props, buf), good


def decode_file(
    buf: Buffer, *, file: str | None = None, file_start: int = 0, batch: int = 1 << 20
) -> tuple[Columns, FileEnd]:
    """Every message of one commitlog file as columns, and how the file ends.

    Same records and same :class:`FileEnd` as :func:`.commitlog.scan_file` (which is asked for
    the verdict wherever the vectorised checks stop). ``batch`` bounds the records per
    vectorised step (memory).
    """
    parts: list[Columns] = []
    p = 0
    n = len(buf)
    while True:
        positions, q = walk(buf, p)
        done = 0
        while done < len(positions):
            chunk = positions[done : done + batch]
            cols, good = decode_records(buf, chunk, file_start=file_start)
            parts.append(cols)
            done += good
            if good < len(chunk):
                q = chunk[good]
                break
        if done == len(positions) and q >= n:
            return Columns.concat(parts), FileEnd(file_start + q, "eof")
        # let the reference scanner judge what is at q
        view = memoryview(buf)[q:]
        try:
            items = scan_file(view, file=file, file_start=file_start + q)
            first = next(items)
            if isinstance(first, FileEnd):
                return Columns.concat(parts), first
            if not isinstance(first, CommitLogMessage):  # a BLANK record: its FileEnd follows
                end = next(items)
                assert isinstance(end, FileEnd)
                return Columns.concat(parts), end
        finally:
            view.release()
        raise AssertionError(  # pragma: no cover - the vectorised checks match parse_message
            f"fast decode rejected a record scan_file accepts at {file_start + q}"
        )
