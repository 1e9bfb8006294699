"""Timer message store files (RocketMQ 5.0.0+): timerlog, timerwheel, config/timercheck.

Read here; ``mqtool verify`` checks them in :mod:`mqtool.integrity.timer` (the same files, one
layer up).

Mirrors ``org.apache.rocketmq.store.timer.TimerLog`` / ``TimerMessageStore#doEnqueue`` (the
52-byte timerlog unit and its file-end blank), ``TimerWheel`` / ``Slot`` (the 32-byte wheel slot)
and ``TimerCheckpoint`` (``config/timercheck``). Byte order: big-endian everywhere (Java
``ByteBuffer``).

* ``store/timerlog/<20-digit offset>`` (``mappedFileSizeTimerLog``, 100 MiB by default): units
  ``size i32 (=52) | prevPos i64 | magic i32 | currWriteTimeMs i64 | delayedTime i32 (ms relative
  to currWriteTimeMs) | offsetPy i64 (commitlog) | sizePy i32 | hashTopic i32 | reserved i64``.
  ``prevPos`` chains the units of one wheel slot backwards (-1 ends the chain). When a unit does
  not fit, ``TimerLog#append`` writes a blank ``size i32 (bytes left) | 0 i64 | BLANK_MAGIC_CODE``
  and continues in the next file.
* ``store/timerwheel``: ``slotsTotal * 2`` slots (``TIMER_WHEEL_TTL_DAY`` 7 days of seconds,
  doubled), slot ``timeMs / precisionMs i64 | firstPos i64 | lastPos i64 | num i32 | magic i32``
  at index ``(timeMs / precisionMs) % (slotsTotal * 2)``.
* ``store/config/timercheck`` (4096 bytes): ``lastReadTimeMs | lastTimerLogFlushPos |
  lastTimerQueueOffset | masterTimerQueueOffset | dataVersion.stateVersion |
  dataVersion.timestamp | dataVersion.counter``, all int64.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mqtool.formats.buffers import Buffer
from mqtool.formats.errors import FormatError, TruncatedError
from mqtool.formats.reference import dtype_once, layout

if TYPE_CHECKING:  # numpy is imported by the vectorised scans that use it
    import numpy as np

    UNIT_DTYPE: np.dtype[Any]

__all__ = [
    "BLANK_MAGIC_CODE",
    "MAGIC_DEFAULT",
    "MAGIC_DELETE",
    "MAGIC_ROLL",
    "MIN_BLANK_LEN",
    "SLOT_SIZE",
    "TIMER_BLANK_SLOTS",
    "TIMER_CHECKPOINT_FILE_SIZE",
    "TIMER_WHEEL_SLOTS_TOTAL",
    "TIMER_WHEEL_TTL_DAY",
    "UNIT_DTYPE",
    "UNIT_SIZE",
    "TimerCheckpoint",
    "TimerLogBlank",
    "TimerLogEnd",
    "TimerLogUnit",
    "TimerSlot",
    "build_timer_checkpoint",
    "build_timerlog_blank",
    "build_timerlog_unit",
    "build_wheel_slot",
    "iter_timerlog",
    "is_magic_ok",
    "iter_wheel",
    "parse_timer_checkpoint",
    "parse_timerlog_unit",
    "parse_wheel_slot",
    "read_time_floor",
    "timer_wheel_file_size",
    "wheel_slot_index",
]

# TimerLog.java
UNIT_SIZE = 4 + 8 + 4 + 8 + 4 + 8 + 4 + 4 + 8  # 52
MIN_BLANK_LEN = 4 + 8 + 4  # 16
BLANK_MAGIC_CODE = -875286124  # 0xBBCCDDEE ^ 1880681586 + 8 = 0xCBD43194 (as CommitLog's)
# TimerMessageStore.java: unit magic bit flags
MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2
# TimerWheel.java / Slot.java
TIMER_WHEEL_TTL_DAY = 7
DAY_SECS = 24 * 3600
TIMER_WHEEL_SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS  # slotsTotal = 604800 at 1 s precision
SLOT_SIZE = 8 + 8 + 8 + 4 + 4  # Slot.SIZE = 32
TIMER_PRECISION_MS = 1000  # MessageStoreConfig.timerPrecisionMs
TIMER_BLANK_SLOTS = 60  # TimerMessageStore.TIMER_BLANK_SLOTS
# TimerCheckpoint.java
TIMER_CHECKPOINT_FILE_SIZE = 4096
TIMER_CHECKPOINT_HEADER_SIZE = 7 * 8


def _layouts() -> dict[str, Any]:
    import construct as cs

    return {
        # one 52-byte timerlog unit (TimerMessageStore#doEnqueue)
        "TIMER_LOG_UNIT": cs.Struct(
            "size" / cs.Const(UNIT_SIZE, cs.Int32sb),
            "prevPos" / cs.Int64sb,
            "magic" / cs.Int32sb,
            "currWriteTimeMs" / cs.Int64sb,
            "delayedTime" / cs.Int32sb,
            "offsetPy" / cs.Int64sb,
            "sizePy" / cs.Int32sb,
            "hashTopic" / cs.Int32sb,
            "reserved" / cs.Int64sb,
        ),
        # the 16 bytes TimerLog#append writes at the end of a file; size = bytes left
        "TIMER_LOG_BLANK": cs.Struct(
            "size" / cs.Int32sb,
            "zero" / cs.Const(0, cs.Int64sb),
            "magic" / cs.Const(BLANK_MAGIC_CODE, cs.Int32sb),
        ),
        # one 32-byte wheel slot (TimerWheel#putSlot)
        "TIMER_WHEEL_SLOT": cs.Struct(
            "timeSecs" / cs.Int64sb,  # timeMs / precisionMs
            "firstPos" / cs.Int64sb,
            "lastPos" / cs.Int64sb,
            "num" / cs.Int32sb,
            "magic" / cs.Int32sb,
        ),
        # the first 56 bytes of config/timercheck
        "TIMER_CHECKPOINT": cs.Struct(
            "lastReadTimeMs" / cs.Int64sb,
            "lastTimerLogFlushPos" / cs.Int64sb,
            "lastTimerQueueOffset" / cs.Int64sb,
            "masterTimerQueueOffset" / cs.Int64sb,
            "stateVersion" / cs.Int64sb,
            "timestamp" / cs.Int64sb,
            "counter" / cs.Int64sb,
        ),
    }


def _unit_dtype() -> np.dtype[Any]:
    dtype: np.dtype[Any] = dtype_once(globals(), "UNIT_DTYPE", [
        ("size", ">i4"), ("prevPos", ">i8"), ("magic", ">i4"), ("currWriteTimeMs", ">i8"),
        ("delayedTime", ">i4"), ("offsetPy", ">i8"), ("sizePy", ">i4"), ("hashTopic", ">i4"),
        ("reserved", ">i8"),
    ])
    return dtype


def __getattr__(name: str) -> Any:
    """``UNIT_DTYPE``: numpy's view of packed 52-byte timerlog units (vectorised scans, made on
    first use); ``TIMER_LOG_UNIT``, ``TIMER_LOG_BLANK``, ``TIMER_WHEEL_SLOT``,
    ``TIMER_CHECKPOINT``: the reference layouts (construct, :mod:`mqtool.formats.reference`)."""
    if name == "UNIT_DTYPE":
        return _unit_dtype()
    return layout(__name__, name, _layouts)

_UNIT = struct.Struct(">iqiqiqiiq")
_BLANK = struct.Struct(">iqi")
_SLOT = struct.Struct(">qqqii")
_I32 = struct.Struct(">i")



# --------------------------------------------------------------------------------------------
# timerlog


@dataclass(frozen=True, slots=True)
class TimerLogUnit:
    """One timerlog unit. ``position`` is its absolute offset in the timerlog (file start + pos).

    ``delayed_time`` is relative to ``curr_write_time_ms``; :attr:`deliver_time_ms` is absolute
    (epoch ms). ``offset_py``/``size_py`` locate the message in the commitlog.
    """

    position: int
    prev_pos: int
    magic: int
    curr_write_time_ms: int
    delayed_time: int
    offset_py: int
    size_py: int
    hash_topic: int
    reserved: int = 0

    @property
    def deliver_time_ms(self) -> int:
        """Absolute deliver time (epoch ms)."""
        return self.curr_write_time_ms + self.delayed_time

    @property
    def is_roll(self) -> bool:
        """MAGIC_ROLL: re-enqueued because the delay exceeded the wheel's span."""
        return bool(self.magic & MAGIC_ROLL)

    @property
    def is_delete(self) -> bool:
        """MAGIC_DELETE: a cancel marker for an earlier timer message."""
        return bool(self.magic & MAGIC_DELETE)


@dataclass(frozen=True, slots=True)
class TimerLogBlank:
    """The file-end blank: ``size`` bytes from ``position`` to the end of the file are unused."""

    position: int
    size: int


@dataclass(frozen=True, slots=True)
class TimerLogEnd:
    """Where a scan stopped: kind 'zeros' (unwritten tail), 'eof', 'blank' (after a blank),
    'torn' (a unit cut by the end of the buffer) or 'corrupt' (bad size/magic)."""

    position: int
    kind: str
    detail: str


def parse_timerlog_unit(
    buf: Buffer, pos: int = 0, *, file: str | None = None, file_start: int = 0
) -> TimerLogUnit:
    """Decode the 52-byte unit at ``buf[pos:]``; FormatError unless its size field is 52."""
    if pos < 0 or pos + UNIT_SIZE > len(buf):
        raise TruncatedError(
            file, file_start + pos, f"truncated timerlog unit: {len(buf) - pos} of 52 bytes"
        )
    size, prev, magic, wtime, delayed, opy, spy, htopic, reserved = _UNIT.unpack_from(buf, pos)
    if size != UNIT_SIZE:
        raise FormatError(
            file, file_start + pos, f"bad timerlog unit size: expected 52, found {size}"
        )
    return TimerLogUnit(file_start + pos, prev, magic, wtime, delayed, opy, spy, htopic, reserved)


def build_timerlog_unit(u: TimerLogUnit) -> bytes:
    """Encode ``u`` as ``TimerMessageStore#doEnqueue`` does (``position`` is not stored)."""
    import construct as cs

    try:
        data: bytes = __getattr__("TIMER_LOG_UNIT").build(
            {
                "prevPos": u.prev_pos,
                "magic": u.magic,
                "currWriteTimeMs": u.curr_write_time_ms,
                "delayedTime": u.delayed_time,
                "offsetPy": u.offset_py,
                "sizePy": u.size_py,
                "hashTopic": u.hash_topic,
                "reserved": u.reserved,
            }
        )
    except cs.ConstructError as e:
        raise FormatError(None, u.position, f"cannot encode timerlog unit: {e}") from e
    return data


def build_timerlog_blank(size: int) -> bytes:
    """The 16-byte blank for a file with ``size`` bytes left (the rest stays zero)."""
    if not MIN_BLANK_LEN <= size < 2**31:
        raise FormatError(None, None, f"timerlog blank needs {MIN_BLANK_LEN}..2^31-1 bytes: {size}")
    data: bytes = __getattr__("TIMER_LOG_BLANK").build({"size": size})
    return data


def iter_timerlog(
    buf: Buffer, *, file: str | None = None, file_start: int = 0
) -> Iterator[TimerLogUnit | TimerLogBlank | TimerLogEnd]:
    """Units of one timerlog file in order; the last item is always a :class:`TimerLogEnd`.

    Never raises on bad content: corruption ends the scan with kind 'corrupt' and a detail.
    """
    n = len(buf)
    pos = 0
    mv = memoryview(buf)
    while True:
        if pos >= n:
            yield TimerLogEnd(file_start + pos, "eof", "end of file")
            return
        if n - pos < 4:
            kind = "zeros" if not any(mv[pos:]) else "torn"
            yield TimerLogEnd(file_start + pos, kind, f"{n - pos} trailing bytes")
            return
        (size,) = _I32.unpack_from(buf, pos)
        if n - pos >= MIN_BLANK_LEN:
            _, zero, magic = _BLANK.unpack_from(buf, pos)
            if magic == BLANK_MAGIC_CODE and zero == 0:
                if size != n - pos:
                    yield TimerLogEnd(
                        file_start + pos,
                        "corrupt",
                        f"blank size {size} != {n - pos} bytes left in the file",
                    )
                    return
                yield TimerLogBlank(file_start + pos, size)
                yield TimerLogEnd(file_start + n, "blank", "file ended by a blank")
                return
        if size == 0:
            if not any(mv[pos:]):
                yield TimerLogEnd(file_start + pos, "zeros", "zero-filled (unwritten) tail")
            else:
                yield TimerLogEnd(
                    file_start + pos, "corrupt", "zero size field before non-zero bytes"
                )
            return
        if size != UNIT_SIZE:
            yield TimerLogEnd(
                file_start + pos, "corrupt", f"bad unit size: expected 52, found {size}"
            )
            return
        if n - pos < UNIT_SIZE:
            yield TimerLogEnd(file_start + pos, "torn", f"unit cut after {n - pos} of 52 bytes")
            return
        yield parse_timerlog_unit(buf, pos, file=file, file_start=file_start)
        pos += UNIT_SIZE


# --------------------------------------------------------------------------------------------
# timerwheel


def timer_wheel_file_size(ttl_day: int = TIMER_WHEEL_TTL_DAY) -> int:
    """``TimerWheel`` file size: ``slotsTotal * 2 * Slot.SIZE`` (38,707,200 by default).

    ``TimerMessageStore``: "TimerWheel contains the fixed number of slots regardless of
    precision": ``slotsTotal = TIMER_WHEEL_TTL_DAY * DAY_SECS`` whatever ``timerPrecisionMs``.
    """
    return ttl_day * DAY_SECS * 2 * SLOT_SIZE


def read_time_floor(now_ms: int, precision_ms: int = TIMER_PRECISION_MS) -> int:
    """The oldest read time ``TimerMessageStore#recover`` keeps when the broker starts at clock
    time ``now_ms``: the wheel holds ``slotsTotal`` slots, so a checkpoint's
    ``lastReadTimeMs`` before ``now - slotsTotal + TIMER_BLANK_SLOTS`` slots is raised to it,
    and the slots before it are never read (their units never delivered)."""
    return (now_ms // precision_ms * precision_ms
            - (TIMER_WHEEL_SLOTS_TOTAL - TIMER_BLANK_SLOTS) * precision_ms)


def is_magic_ok(magic: int) -> bool:
    """``TimerMessageStore#isMagicOK``: only the low four flag bits may be set."""
    return (magic | 0xF) == 0xF


def wheel_slot_index(
    time_ms: int,
    precision_ms: int = TIMER_PRECISION_MS,
    slots_total: int = TIMER_WHEEL_SLOTS_TOTAL,
) -> int:
    """``TimerWheel#getSlotIndex``: ``(timeMs / precisionMs) % (slotsTotal * 2)``."""
    return (time_ms // precision_ms) % (slots_total * 2)


@dataclass(frozen=True, slots=True)
class TimerSlot:
    """One wheel slot. ``time_secs`` is stored ``timeMs / precisionMs`` (seconds at 1000 ms).

    ``first_pos``/``last_pos`` are timerlog positions; walk ``prev_pos`` back from ``last_pos``.
    """

    index: int
    time_secs: int
    first_pos: int
    last_pos: int
    num: int
    magic: int

    def time_ms(self, precision_ms: int = TIMER_PRECISION_MS) -> int:
        """Slot time in epoch ms (``Slot.timeMs``)."""
        return self.time_secs * precision_ms


def parse_wheel_slot(buf: Buffer, index: int, *, file: str | None = None) -> TimerSlot:
    """Decode slot number ``index`` of a timerwheel buffer."""
    pos = index * SLOT_SIZE
    if index < 0 or pos + SLOT_SIZE > len(buf):
        raise TruncatedError(file, pos, f"slot {index} beyond the wheel ({len(buf)} bytes)")
    return TimerSlot(index, *_SLOT.unpack_from(buf, pos))


def build_wheel_slot(s: TimerSlot) -> bytes:
    """Encode one slot (its ``index`` only says where it goes: ``index * 32``)."""
    import construct as cs

    try:
        data: bytes = __getattr__("TIMER_WHEEL_SLOT").build(
            {
                "timeSecs": s.time_secs,
                "firstPos": s.first_pos,
                "lastPos": s.last_pos,
                "num": s.num,
                "magic": s.magic,
            }
        )
    except cs.ConstructError as e:
        raise FormatError(None, s.index * SLOT_SIZE, f"cannot encode wheel slot: {e}") from e
    return data


def iter_wheel(buf: Buffer, *, file: str | None = None) -> Iterator[TimerSlot]:
    """Every non-empty slot of a timerwheel file, by index (numpy scan of the 38 MB file)."""
    if len(buf) % SLOT_SIZE:
        raise FormatError(
            file,
            len(buf) - len(buf) % SLOT_SIZE,
            f"timerwheel size {len(buf)} is not a multiple of {SLOT_SIZE}",
        )
    import numpy as np

    words = np.frombuffer(buf, dtype=">u8").reshape(-1, SLOT_SIZE // 8)
    for index in np.flatnonzero(words.any(axis=1)).tolist():
        yield parse_wheel_slot(buf, index, file=file)


# --------------------------------------------------------------------------------------------
# config/timercheck


@dataclass(frozen=True, slots=True)
class TimerCheckpoint:
    """``config/timercheck``. Times epoch ms; ``last_timer_log_flush_pos`` a timerlog position;
    queue offsets are consume-queue offsets of ``rmq_sys_wheel_timer`` queue 0. The last three
    fields are the checkpoint's ``DataVersion``. ``trailer``: bytes after 56, trailing zeros
    stripped (``b""`` on real files)."""

    last_read_time_ms: int
    last_timer_log_flush_pos: int
    last_timer_queue_offset: int
    master_timer_queue_offset: int
    state_version: int
    timestamp: int
    counter: int
    file_size: int = TIMER_CHECKPOINT_FILE_SIZE
    trailer: bytes = b""


def parse_timer_checkpoint(buf: Buffer, *, file: str | None = None) -> TimerCheckpoint:
    """Decode ``config/timercheck`` bytes."""
    data = bytes(buf)
    if len(data) < TIMER_CHECKPOINT_HEADER_SIZE:
        raise TruncatedError(
            file,
            len(data),
            f"truncated timercheck: {len(data)} of {TIMER_CHECKPOINT_HEADER_SIZE} bytes",
        )
    c = __getattr__("TIMER_CHECKPOINT").parse(data[:TIMER_CHECKPOINT_HEADER_SIZE])
    return TimerCheckpoint(
        c.lastReadTimeMs,
        c.lastTimerLogFlushPos,
        c.lastTimerQueueOffset,
        c.masterTimerQueueOffset,
        c.stateVersion,
        c.timestamp,
        c.counter,
        file_size=len(data),
        trailer=data[TIMER_CHECKPOINT_HEADER_SIZE:].rstrip(b"\x00"),
    )


def build_timer_checkpoint(cp: TimerCheckpoint) -> bytes:
    """Encode ``cp`` as a whole ``timercheck`` file (``cp.file_size`` bytes)."""
    import construct as cs

    try:
        header: bytes = __getattr__("TIMER_CHECKPOINT").build(
            {
                "lastReadTimeMs": cp.last_read_time_ms,
                "lastTimerLogFlushPos": cp.last_timer_log_flush_pos,
                "lastTimerQueueOffset": cp.last_timer_queue_offset,
                "masterTimerQueueOffset": cp.master_timer_queue_offset,
                "stateVersion": cp.state_version,
                "timestamp": cp.timestamp,
                "counter": cp.counter,
            }
        )
    except cs.ConstructError as e:
        raise FormatError(None, None, f"cannot encode timercheck: {e}") from e
    body = header + cp.trailer
    if len(body) > cp.file_size:
        raise FormatError(None, None, f"timercheck content {len(body)} > file size {cp.file_size}")
    return body + bytes(cp.file_size - len(body))
