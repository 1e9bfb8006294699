"""Whole commitlog files as columns (numpy), for scans, Spark and benches.

The per-record work runs in the compiled kernel (:mod:`.commitlog_fields`): one pass follows
TOTALSIZE, checks each record the way :func:`.commitlog.parse_message` does (magic, lengths adding
up to TOTALSIZE as ``MessageExtEncoder#calMsgLength``, PHYSICALOFFSET, UTF-8 topic/properties) and
gathers every fixed field; topic and properties are cut out as Arrow-style binary columns (offsets
into one ``bytes``), decoded to ``str`` only on request.

:func:`decode_file` ends a file exactly where :func:`.walker.scan_file` does, with the same
:class:`.commitlog.FileEnd`: the kernel never judges damage, the first record it does not
accept is handed to ``scan_file`` for the verdict. The columns are proven equal, field for
field, to ``parse_message`` on every real record of the fixtures and on damaged copies.
numpy only: no pyarrow/pyspark here (``pyarrow.Array.from_buffers`` takes the offsets and data
as they are).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mqtool.formats import commitlog_arrow as arrow
from mqtool.formats import commitlog_fields as fields
from mqtool.formats import commitlog_layout as layout
from mqtool.formats import jit
from mqtool.formats.commitlog import (
    COMPRESSED_FLAG,
    COMPRESSION_NAMES,
    CommitLogMessage,
    FileEnd,
    HostPort,
)
from mqtool.formats.commitlog_layout import (
    BORNHOST_V6_FLAG,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    STOREHOSTADDRESS_V6_FLAG,
)
from mqtool.formats.walker import scan_file

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
        off, data = fields.gather(fields.as_bytes(self.buf), pos, ln)
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


def columns_of(buf: Buffer, table: np.ndarray) -> Columns:
    """:class:`Columns` of the records the kernel accepted (``table``: its field table)."""
    a = fields.as_bytes(buf)
    f = table
    sys_flag = f[fields.F_SYS_FLAG]
    born_v6 = (sys_flag & BORNHOST_V6_FLAG) != 0
    store_v6 = (sys_flag & STOREHOSTADDRESS_V6_FLAG) != 0
    t_off, t_data = fields.gather(a, f[fields.F_TOPIC_POS], f[fields.F_TOPIC_LEN])
    p_off, p_data = fields.gather(a, f[fields.F_PROPS_POS], f[fields.F_PROPS_LEN])
    arrays = {
        "position": f[fields.F_POS].copy(),
        "total_size": f[fields.F_SIZE].copy(),
        "magic": f[fields.F_MAGIC].copy(),
        "body_crc": f[fields.F_BODY_CRC].copy(),
        "queue_id": f[fields.F_QUEUE_ID].copy(),
        "flag": f[fields.F_FLAG].copy(),
        "queue_offset": f[fields.F_QUEUE_OFFSET].copy(),
        "physical_offset": f[fields.F_PHYS].copy(),
        "sys_flag": sys_flag.copy(),
        "born_timestamp": f[fields.F_BORN_TS].copy(),
        "born_ip": _ips(a, f[fields.F_BORN_IP4], born_v6, f[fields.F_POS] + layout.BORNHOST_AT),
        "born_v6": born_v6,
        "born_port": f[fields.F_BORN_PORT].copy(),
        "store_timestamp": f[fields.F_STORE_TS].copy(),
        "store_ip": _ips(a, f[fields.F_STORE_IP4], store_v6, f[fields.F_STORE_IP_POS]),
        "store_v6": store_v6,
        "store_port": f[fields.F_STORE_PORT].copy(),
        "reconsume_times": f[fields.F_RECONSUME].copy(),
        "prepared_transaction_offset": f[fields.F_PREPARED].copy(),
        "body_position": f[fields.F_BODY_POS].copy(),
        "body_length": f[fields.F_BODY_LEN].copy(),
    }
    topic = Binary(t_off[:-1].astype(np.int64), f[fields.F_TOPIC_LEN].copy(), t_data.tobytes())
    props = Binary(p_off[:-1].astype(np.int64), f[fields.F_PROPS_LEN].copy(), p_data.tobytes())
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
    accepted, _, _ = fields.scan_buffer(
        buf, int(pos[0]), int(pos[-1]) + 1, file_start=file_start, cap=len(pos)
    )
    good = accepted.shape[1]
    # the kernel follows TOTALSIZE: its records are ``positions`` for as long as both agree
    same = np.flatnonzero(accepted[fields.F_POS] != pos[:good])
    if same.size:
        good = int(same[0])
        accepted = accepted[:, :good]
    return columns_of(buf, accepted), good


def _verdict(buf: Buffer, q: int, *, file: str | None, file_start: int) -> FileEnd:
    """How a file ends where the kernel stopped at ``q``: the reference scanner's (a view of
    :mod:`.walker`) :class:`FileEnd` for what is there."""
    if q >= len(buf):
        return FileEnd(file_start + q, "eof")
    view = memoryview(buf)[q:]
    try:
        items = scan_file(view, file=file, file_start=file_start + q)
        first = next(items)
        if isinstance(first, FileEnd):
            return first
        if not isinstance(first, CommitLogMessage):  # a BLANK record: its FileEnd follows
            end = next(items)
            assert isinstance(end, FileEnd)
            return end
    finally:
        view.release()
    raise AssertionError(  # pragma: no cover - the kernel's checks match parse_message
        f"kernel rejected a record scan_file accepts at {file_start + q}"
    )


def decode_file(
    buf: Buffer, *, file: str | None = None, file_start: int = 0, batch: int = 1 << 20
) -> tuple[Columns, FileEnd]:
    """Every message of one commitlog file as columns, and how the file ends.

    Same records and same :class:`FileEnd` as :func:`.walker.scan_file` (which is asked for
    the verdict wherever the kernel stops). ``batch`` bounds the records per kernel call.
    """
    parts: list[Columns] = []
    p = 0
    n = len(buf)
    table = fields.field_table(max(1, min(batch, n // MIN_RECORD_SIZE + 1)))
    while True:
        accepted, q, status = fields.scan_buffer(buf, p, n, file_start=file_start, out=table)
        if accepted.shape[1]:
            parts.append(columns_of(buf, accepted))
        if status == fields.STOP_FULL:
            p = q
            continue
        return Columns.concat(parts), _verdict(buf, q, file=file, file_start=file_start)


# --- every column, window by window (the fused kernel) ---------------------------------------

INT64_COLUMNS = {
    "fileOffset": arrow.L_POS, "commitLogOffset": arrow.L_PHYS,
    "queueOffset": arrow.L_QUEUE_OFFSET, "bornTimestamp": arrow.L_BORN_TS,
    "storeTimestamp": arrow.L_STORE_TS, "preparedTransactionOffset": arrow.L_PREPARED,
}
"""int64 columns of :class:`Window`, by their ``mqtool messages --json`` name."""
INT32_COLUMNS = {
    "storeSize": arrow.I_SIZE, "queueId": arrow.I_QUEUE_ID, "flag": arrow.I_FLAG,
    "sysFlag": arrow.I_SYS_FLAG, "bodyCRC": arrow.I_BODY_CRC,
    "reconsumeTimes": arrow.I_RECONSUME, "bodyLength": arrow.I_BODY_LEN,
}
"""int32 columns of :class:`Window`."""
STRING_COLUMNS = {
    "topic": arrow.S_TOPIC, "propertiesRaw": arrow.S_PROPS, "tags": arrow.S_TAGS,
    "keys": arrow.S_KEYS, "uniqKey": arrow.S_UNIQ, "offsetMsgId": arrow.S_MSGID,
    "bornHost": arrow.S_BORN, "storeHost": arrow.S_STORE, "magic": arrow.S_MAGIC,
}
"""String columns of :class:`Window` (tags, keys and uniqKey have a validity mask)."""
MAGIC_NAMES = (f"{MAGIC_V1:#010x}", f"{MAGIC_V2:#010x}")
"""The ``magic`` column's text (as ``mqtool messages --json`` shows it), by MAGIC_V2."""


@dataclass
class Window:
    """The records of one window, every column in Arrow's memory layout (numpy arrays).

    Fixed columns (:meth:`int64`, :meth:`int32`), string columns (:meth:`string`: int32
    offsets of n + 1 and the data; :meth:`valid` for tags / keys / uniqKey), the property map
    (:meth:`properties`). When the :class:`Decoder` reuses its buffers (the default) a window
    is valid until the decoder's next window: copy what you keep (:meth:`to_arrow` wraps the
    buffers without copying).
    """

    n: int
    buf: np.ndarray  # the decoded bytes (bodies are ``buf[body_position:+bodyLength]``)
    o64: np.ndarray
    o32: np.ndarray
    offs: np.ndarray
    data: np.ndarray
    map_off: np.ndarray
    valid_bytes: np.ndarray
    used: np.ndarray
    checked_crc: bool

    def __len__(self) -> int:
        return self.n

    def int64(self, name: str) -> np.ndarray:
        return self.o64[INT64_COLUMNS[name], : self.n]

    def int32(self, name: str) -> np.ndarray:
        return self.o32[INT32_COLUMNS[name], : self.n]

    @property
    def body_position(self) -> np.ndarray:
        return self.o64[arrow.L_BODY_POS, : self.n]

    @property
    def magic_v2(self) -> np.ndarray:
        """1 where the record is MAGIC_V2 (2-byte topic length), 0 for MAGIC_V1 (int32)."""
        return self.o32[arrow.I_MAGIC_V2, : self.n]

    @property
    def crc_ok(self) -> np.ndarray | None:
        """BODYCRC matches (bool), or None when the CRC was not checked."""
        return self.o32[arrow.I_CRC_OK, : self.n] == 1 if self.checked_crc else None

    def _raw(self, s: int, items: int) -> tuple[np.ndarray, np.ndarray]:
        off = self.offs[s, : items + 1]
        return off, self.data[s, : int(off[items])]

    def string(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(int32 offsets, uint8 data) of a string column: row ``i`` is
        ``data[offsets[i]:offsets[i + 1]]``."""
        s = STRING_COLUMNS[name]
        if s in (arrow.S_BORN, arrow.S_STORE) and self.used[arrow.U_V6_HOSTS]:
            return self._hosts_v6(s)
        return self._raw(s, self.n)

    def valid(self, name: str) -> np.ndarray:
        """Whether the row has the property (tags, keys, uniqKey), as bool."""
        t = STRING_COLUMNS[name] - arrow.S_TAGS
        return self.valid_bytes[t, : self.n].view(np.bool_)

    def properties(self) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray],
                                  tuple[np.ndarray, np.ndarray]]:
        """The property maps: (int32 map offsets of n + 1, key strings, value strings); row
        ``i``'s pairs are ``map_offsets[i]:map_offsets[i + 1]``."""
        m = int(self.used[arrow.U_PAIRS])
        return (self.map_off[: self.n + 1], self._raw(arrow.S_KEY, m),
                self._raw(arrow.S_VALUE, m))

    def _hosts_v6(self, s: int) -> tuple[np.ndarray, np.ndarray]:
        """A host column with its IPv6 rows formatted as :class:`HostPort` prints them."""
        import ipaddress

        off, text = self._raw(s, self.n)
        flag = BORNHOST_V6_FLAG if s == arrow.S_BORN else STOREHOSTADDRESS_V6_FLAG
        sys_flag = self.o32[arrow.I_SYS_FLAG, : self.n]
        port = self.o32[arrow.I_BORN_PORT if s == arrow.S_BORN else arrow.I_STORE_PORT]
        pos = self.o64[arrow.L_POS, : self.n]
        out: list[bytes] = []
        raw = bytes(text)
        for i in range(self.n):
            if sys_flag[i] & flag:
                a = int(pos[i]) + layout.BORNHOST_AT
                if s != arrow.S_BORN:  # the store address follows born host, port, store time
                    v6 = sys_flag[i] & BORNHOST_V6_FLAG
                    a += layout.IPV6_WIDTH if v6 else layout.IPV4_WIDTH
                    a += layout.PORT_WIDTH + layout.STORETIMESTAMP_WIDTH
                ip = ipaddress.IPv6Address(bytes(self.buf[a : a + layout.IPV6_WIDTH]))
                out.append(str(HostPort(str(ip), int(port[i]))).encode())
            else:
                out.append(raw[off[i] : off[i + 1]])
        lengths = np.array([len(x) for x in out], dtype=np.int32)
        offsets = np.zeros(self.n + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        return offsets, np.frombuffer(b"".join(out), dtype=np.uint8)

    def to_arrow(self, *, store: str | None = None, file: str | None = None) -> dict[str, Any]:
        """Every column as a pyarrow array (named as ``mqtool messages --json`` and the
        ``messages`` table of ``mqtool scan``), over these buffers without copying them:
        fixed columns, strings, ``properties`` (map), ``magic``, ``crcOk`` (null when not
        checked), ``compressionType`` (null when not compressed); ``store`` / ``file`` when
        given. pyarrow is imported here, not by the module."""
        import pyarrow as pa

        n = self.n
        out: dict[str, Any] = {}
        for name in INT64_COLUMNS:
            out[name] = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self.int64(name))])
        for name in INT32_COLUMNS:
            out[name] = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(self.int32(name))])

        def text(off: np.ndarray, data: np.ndarray, items: int, mask: Any = None) -> Any:
            return pa.Array.from_buffers(pa.string(), items,
                                         [mask, pa.py_buffer(off), pa.py_buffer(data)])

        for name in STRING_COLUMNS:
            mask = None
            if name in ("tags", "keys", "uniqKey"):
                mask = pa.py_buffer(np.packbits(self.valid_bytes[
                    STRING_COLUMNS[name] - arrow.S_TAGS, :n], bitorder="little"))
            out[name] = text(*self.string(name), n, mask)
        map_off, (k_off, k_data), (v_off, v_data) = self.properties()
        m = len(k_off) - 1
        out["properties"] = pa.MapArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(map_off)]),
            text(k_off, k_data, m), text(v_off, v_data, m))
        ok = self.crc_ok
        out["crcOk"] = pa.nulls(n, pa.bool_()) if ok is None else pa.array(ok)
        sys_flag = self.o32[arrow.I_SYS_FLAG, :n]
        compressed = (sys_flag & COMPRESSED_FLAG) != 0
        if compressed.any():
            names = pa.array([COMPRESSION_NAMES.get(i, "ZLIB") for i in range(8)], pa.string())
            out["compressionType"] = names.take(pa.array((sys_flag >> 8) & 7, mask=~compressed))
        else:
            out["compressionType"] = pa.nulls(n, pa.string())
        if store is not None:
            out["store"] = _repeated(store, n)
        if file is not None:
            out["file"] = _repeated(file, n)
        return out


_REPEATED: dict[str, Any] = {}


def _repeated(text: str, n: int) -> Any:
    """``pa.repeat(text, n)``, as a zero-copy slice of one array kept per text (the store and
    file columns are the same text on every row of every window)."""
    import pyarrow as pa

    arr = _REPEATED.get(text)
    if arr is None or len(arr) < n:
        if len(_REPEATED) > 16:
            _REPEATED.clear()
        arr = _REPEATED[text] = pa.repeat(text, max(n, 1 << 16))
    return arr.slice(0, n)


class Decoder:
    """The one-pass decode (:func:`.commitlog_arrow.decode`) with its buffers: every column of a
    window of up to ``records`` records per call.

    ``reuse`` (default): the buffers are reused by the next call (no page faults for fresh
    memory on every window; a :class:`Window` is then valid until the next call). Without it
    every window gets fresh buffers, so windows can be kept. ``native_crc``: BODYCRC by the
    machine's libdeflate or zlib (:func:`.jit.native_crc32`) when there is one, else by the
    kernel's own slicing-by-8 (the same value).
    """

    def __init__(self, records: int = 1 << 16, *, reuse: bool = True,
                 data_bytes: int | None = None, native_crc: bool = True) -> None:
        self.records = max(1, records)
        self.data_bytes = data_bytes or 256 * self.records
        self.pairs = 8 * self.records
        self.reuse = reuse
        self.crc_fn = jit.native_crc32() if native_crc else (0, 0)
        self._bufs: tuple[np.ndarray, ...] | None = None

    def _buffers(self) -> tuple[np.ndarray, ...]:
        if self._bufs is None or not self.reuse:
            cap = self.records
            self._bufs = (
                np.empty((arrow.N64, cap), dtype=np.int64),
                np.empty((arrow.N32, cap), dtype=np.int32),
                np.empty((arrow.NS, self.pairs + 1), dtype=np.int32),
                np.empty((arrow.NS, self.data_bytes), dtype=np.uint8),
                np.empty(cap + 1, dtype=np.int32),
                np.empty((3, cap), dtype=np.uint8),
                np.zeros(arrow.N_USED, dtype=np.int64),
                np.empty((3, max(64, self.data_bytes // 64)), dtype=np.int64),
            )
        return self._bufs

    def _grow(self) -> None:
        self.data_bytes *= 2
        self.pairs *= 2
        self._bufs = None

    def window(self, buf: np.ndarray, start: int, stop: int, *, file_start: int = 0,
               check_crc: bool = False) -> tuple[Window, int, int]:
        """Decode from ``start`` (records starting before ``stop``): (the window, where the
        next record starts or the kernel stopped, status as :func:`.commitlog_fields.scan`)."""
        while True:
            o64, o32, offs, data, map_off, valid, used, scratch = self._buffers()
            n, q, status = arrow.decode(
                buf, start, stop, file_start, check_crc, jit.CRC_TABLES, o64, o32, offs,
                data, map_off, valid, used, scratch, arrow.PICK_BYTES, arrow.PICK_LENS,
                arrow.PICK_WORDS, arrow.MAGIC_TEXT, arrow.AHEAD, *self.crc_fn,
            )
            if n == 0 and status == fields.STOP_FULL and self.records > 0:
                self._grow()  # one record does not fit the string buffers: make them bigger
                continue
            return Window(n, buf, o64, o32, offs, data, map_off, valid, used, check_crc), q, status

    def file(self, buf: Buffer, *, file: str | None = None, file_start: int = 0,
             check_crc: bool = False) -> Iterator[Window]:
        """Every message of one commitlog file, window by window; afterwards :attr:`end` is
        how the file ends (the same :class:`FileEnd` as :func:`.walker.scan_file`, asked
        wherever the kernel stops)."""
        a = fields.as_bytes(buf)
        n = len(a)
        p = 0
        while True:
            w, q, status = self.window(a, p, n, file_start=file_start, check_crc=check_crc)
            if w.n:
                yield w
            if status == fields.STOP_FULL:
                p = q
                continue
            self.end = _verdict(buf, q, file=file, file_start=file_start)
            return
