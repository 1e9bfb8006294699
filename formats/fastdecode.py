"""Bulk decoding of whole commitlog files into columns (numpy), for scans, Spark and benches.

The per-record work runs in the compiled kernel (:mod:`.kernel`): one pass follows TOTALSIZE,
checks each record the way :func:`.commitlog.parse_message` does (magic, lengths adding up to
TOTALSIZE as ``MessageExtEncoder#calMsgLength``, PHYSICALOFFSET, UTF-8 topic/properties) and
gathers every fixed field; topic and properties are cut out as Arrow-style binary columns
(offsets into one ``bytes``), decoded to ``str`` only on request.

:func:`decode_file` ends a file exactly where :func:`.commitlog.scan_file` does, with the same
:class:`.commitlog.FileEnd`: the kernel never judges damage, the first record it does not
accept is handed to ``scan_file`` for the verdict. The columns are proven equal, field for
field, to ``parse_message`` on every real record of the fixtures and on damaged copies.
numpy only: no pyarrow/pyspark here (``pyarrow.Array.from_buffers`` takes the offsets and data
as they are).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from mqtool.formats import kernel
from mqtool.formats.commitlog import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    CommitLogMessage,
    FileEnd,
    HostPort,
    scan_file,
)

MIN_RECORD_SIZE = 91  # calMsgLength(V1, IPv4 hosts, empty body/topic/properties)

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
        off, data = kernel.gather(kernel.as_bytes(self.buf), pos, ln)
        return Binary(off[:-1].astype(np.int64), ln, data.tobytes())

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

    The loop trusts TOTALSIZE (>= 91 and inside the buffer) and nothing else (a bench figure:
    the bare walk in Python). The walk ends at ``stop`` (default: the end of ``buf``), at a
    TOTALSIZE that cannot be a message (zeros, a short BLANK, garbage) or one that runs past
    the end.
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


def _ips(a: np.ndarray, ip4: np.ndarray, v6: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """n x 16 address bytes (IPv4 in the first 4; IPv6 rows read 16 bytes at ``pos``)."""
    raw = np.zeros((len(ip4), 16), dtype=np.uint8)
    raw[:, :4] = ip4.astype(">u4").view(np.uint8).reshape(-1, 4)
    if v6.any():
        raw[v6] = a[pos[v6][:, None] + _AR[16]]
    return raw


def columns_of(buf: Buffer, fields: np.ndarray) -> Columns:
    """:class:`Columns` of the records the kernel accepted (``fields``: its field table)."""
    a = kernel.as_bytes(buf)
    f = fields
    sys_flag = f[kernel.F_SYS_FLAG]
    born_v6 = (sys_flag & BORNHOST_V6_FLAG) != 0
    store_v6 = (sys_flag & STOREHOSTADDRESS_V6_FLAG) != 0
    t_off, t_data = kernel.gather(a, f[kernel.F_TOPIC_POS], f[kernel.F_TOPIC_LEN])
    p_off, p_data = kernel.gather(a, f[kernel.F_PROPS_POS], f[kernel.F_PROPS_LEN])
    arrays = {
        "position": f[kernel.F_POS].copy(),
        "total_size": f[kernel.F_SIZE].copy(),
        "magic": f[kernel.F_MAGIC].copy(),
        "body_crc": f[kernel.F_BODY_CRC].copy(),
        "queue_id": f[kernel.F_QUEUE_ID].copy(),
        "flag": f[kernel.F_FLAG].copy(),
        "queue_offset": f[kernel.F_QUEUE_OFFSET].copy(),
        "physical_offset": f[kernel.F_PHYS].copy(),
        "sys_flag": sys_flag.copy(),
        "born_timestamp": f[kernel.F_BORN_TS].copy(),
        "born_ip": _ips(a, f[kernel.F_BORN_IP4], born_v6, f[kernel.F_POS] + 48),
        "born_v6": born_v6,
        "born_port": f[kernel.F_BORN_PORT].copy(),
        "store_timestamp": f[kernel.F_STORE_TS].copy(),
        "store_ip": _ips(a, f[kernel.F_STORE_IP4], store_v6, f[kernel.F_STORE_IP_POS]),
        "store_v6": store_v6,
        "store_port": f[kernel.F_STORE_PORT].copy(),
        "reconsume_times": f[kernel.F_RECONSUME].copy(),
        "prepared_transaction_offset": f[kernel.F_PREPARED].copy(),
        "body_position": f[kernel.F_BODY_POS].copy(),
        "body_length": f[kernel.F_BODY_LEN].copy(),
    }
    topic = Binary(t_off[:-1].astype(np.int64), f[kernel.F_TOPIC_LEN].copy(), t_data.tobytes())
    props = Binary(p_off[:-1].astype(np.int64), f[kernel.F_PROPS_LEN].copy(), p_data.tobytes())
    return Columns(arrays, topic, props, buf)


def decode_records(
    buf: Buffer, positions: list[int] | np.ndarray, *, file_start: int = 0
) -> tuple[Columns, int]:
    """Decode the records chained from ``positions[0]`` (from :func:`walk`) into columns.

    Returns the columns of the leading run of records that ``parse_message`` would accept (and
    whose PHYSICALOFFSET is ``file_start`` + position, as ``scan_file`` requires), and how many
    that is: ``positions[good]`` is the first rejected record, if any.
    """
    pos = np.asarray(positions, dtype=np.int64)
    if len(pos) == 0:
        return Columns(), 0
    fields, _, _ = kernel.scan_buffer(
        buf, int(pos[0]), int(pos[-1]) + 1, file_start=file_start, cap=len(pos)
    )
    good = fields.shape[1]
    # the kernel follows TOTALSIZE: its records are ``positions`` for as long as both agree
    same = np.flatnonzero(fields[kernel.F_POS] != pos[:good])
    if same.size:
        good = int(same[0])
        fields = fields[:, :good]
    return columns_of(buf, fields), good


def decode_file(
    buf: Buffer, *, file: str | None = None, file_start: int = 0, batch: int = 1 << 20
) -> tuple[Columns, FileEnd]:
    """Every message of one commitlog file as columns, and how the file ends.

    Same records and same :class:`FileEnd` as :func:`.commitlog.scan_file` (which is asked for
    the verdict wherever the kernel stops). ``batch`` bounds the records per kernel call.
    """
    parts: list[Columns] = []
    p = 0
    n = len(buf)
    table = kernel.field_table(max(1, min(batch, n // MIN_RECORD_SIZE + 1)))
    while True:
        fields, q, status = kernel.scan_buffer(buf, p, n, file_start=file_start, out=table)
        if fields.shape[1]:
            parts.append(columns_of(buf, fields))
        if status == kernel.STOP_FULL:
            p = q
            continue
        if q >= n:
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
        raise AssertionError(  # pragma: no cover - the kernel's checks match parse_message
            f"kernel rejected a record scan_file accepts at {file_start + q}"
        )
