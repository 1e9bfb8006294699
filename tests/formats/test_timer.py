"""Timer store files against the 5.3.3 fixture (timerlog, timerwheel, config/timercheck)."""

from __future__ import annotations

import json
from pathlib import Path

import construct as cs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.formats.errors import FormatError, TruncatedError
from mqtool.formats.timer import (
    BLANK_MAGIC_CODE,
    MAGIC_DEFAULT,
    SLOT_SIZE,
    TIMER_CHECKPOINT_FILE_SIZE,
    TIMER_LOG_UNIT,
    TIMER_WHEEL_SLOTS_TOTAL,
    UNIT_SIZE,
    TimerCheckpoint,
    TimerLogBlank,
    TimerLogEnd,
    TimerLogUnit,
    TimerSlot,
    build_timer_checkpoint,
    build_timerlog_blank,
    build_timerlog_unit,
    build_wheel_slot,
    iter_timerlog,
    iter_wheel,
    parse_timer_checkpoint,
    parse_timerlog_unit,
    parse_wheel_slot,
    timer_wheel_file_size,
    wheel_slot_index,
)

STORE = Path(__file__).resolve().parents[2] / "fixtures" / "rocketmq-stores" / "5.3.3" / "plain"
TIMERLOG = STORE / "store" / "timerlog" / "00000000000000000000"
WHEEL = STORE / "store" / "timerwheel"
TIMERCHECK = STORE / "store" / "config" / "timercheck"
MANIFEST = json.loads((STORE / "manifest" / "timer.json").read_text(encoding="utf-8"))


def _units() -> list[TimerLogUnit]:
    items = list(iter_timerlog(TIMERLOG.read_bytes(), file="timerlog/00000000000000000000"))
    assert isinstance(items[-1], TimerLogEnd)
    return [u for u in items if isinstance(u, TimerLogUnit)]


def test_sizes_match_manifest() -> None:
    sizes = {f["file"]: f["size"] for f in MANIFEST["files"]}
    assert TIMERLOG.stat().st_size == sizes["timerlog/00000000000000000000"]
    assert WHEEL.stat().st_size == sizes["timerwheel"] == timer_wheel_file_size() == 38_707_200
    assert TIMERCHECK.stat().st_size == TIMER_CHECKPOINT_FILE_SIZE


def test_timercheck_matches_manifest_and_round_trips() -> None:
    raw = TIMERCHECK.read_bytes()
    cp = parse_timer_checkpoint(raw, file="config/timercheck")
    dv = json.loads(MANIFEST["dataVersion"])
    assert cp == TimerCheckpoint(
        last_read_time_ms=MANIFEST["lastReadTimeMs"],
        last_timer_log_flush_pos=MANIFEST["lastTimerLogFlushPos"],
        last_timer_queue_offset=MANIFEST["lastTimerQueueOffset"],
        master_timer_queue_offset=MANIFEST["masterTimerQueueOffset"],
        state_version=dv["stateVersion"],
        timestamp=dv["timestamp"],
        counter=dv["counter"],
    )
    assert build_timer_checkpoint(cp) == raw


def test_timerlog_real_file() -> None:
    raw = TIMERLOG.read_bytes()
    items = list(iter_timerlog(raw, file="timerlog/00000000000000000000"))
    units = [u for u in items if isinstance(u, TimerLogUnit)]
    end = items[-1]
    assert isinstance(end, TimerLogEnd) and end.kind == "zeros"
    # the flush position in timercheck is the end of the written units
    assert end.position == len(units) * UNIT_SIZE == MANIFEST["lastTimerLogFlushPos"]
    assert [u.position for u in units] == [i * UNIT_SIZE for i in range(len(units))]
    assert all(u.magic & MAGIC_DEFAULT for u in units)
    assert all(u.size_py > 0 and u.offset_py >= 0 for u in units)
    # build(parse(b)) == b over the whole file
    rebuilt = b"".join(build_timerlog_unit(u) for u in units)
    assert rebuilt + bytes(len(raw) - len(rebuilt)) == raw
    # construct reference agrees with the struct fast path
    for u in units:
        ref = TIMER_LOG_UNIT.parse(raw[u.position : u.position + UNIT_SIZE])
        assert (ref.prevPos, ref.offsetPy, ref.delayedTime) == (
            u.prev_pos,
            u.offset_py,
            u.delayed_time,
        )


def test_golden_first_unit_from_hex() -> None:
    # first 52 bytes of the fixture's timerlog/00000000000000000000 (xxd)
    raw = bytes.fromhex(
        "00000034ffffffffffffffff00000001000001a20002d3b800000bb8"
        "000000000000302a0000013c249c9dd00000000000000000"
    )
    u = parse_timerlog_unit(raw)
    assert u == TimerLogUnit(0, -1, 1, 1795296515000, 3000, 0x302A, 0x13C, 0x249C9DD0, 0)
    assert u.deliver_time_ms == 1795296518000
    assert build_timerlog_unit(u) == raw


def test_wheel_slots_chain_into_timerlog() -> None:
    wheel = WHEEL.read_bytes()
    raw = TIMERLOG.read_bytes()
    by_pos = {u.position: u for u in _units()}
    slots = list(iter_wheel(wheel, file="timerwheel"))
    assert slots and sum(s.num for s in slots) <= len(by_pos)
    for s in slots:
        assert s.index == wheel_slot_index(s.time_ms())
        assert build_wheel_slot(s) == wheel[s.index * SLOT_SIZE : (s.index + 1) * SLOT_SIZE]
        # walk the chain backwards from lastPos: num units, ending at firstPos
        chain = []
        pos = s.last_pos
        while pos != -1 and len(chain) < s.num:
            unit = by_pos[pos]
            chain.append(unit)
            pos = unit.prev_pos
        assert len(chain) == s.num
        assert chain[-1].position == s.first_pos
        for unit in chain:
            assert unit.deliver_time_ms // 1000 == s.time_secs
    assert len(raw) > 0


def test_blank_and_end_kinds() -> None:
    unit = build_timerlog_unit(TimerLogUnit(0, -1, 1, 10, 20, 30, 40, 50))
    blank = build_timerlog_blank(40)
    assert blank[:4] == (40).to_bytes(4, "big")
    assert blank[12:16] == (BLANK_MAGIC_CODE & 0xFFFFFFFF).to_bytes(4, "big") == b"\xcb\xd4\x31\x94"
    buf = unit + blank + bytes(24)
    items = list(iter_timerlog(buf, file_start=1000))
    assert items[0] == TimerLogUnit(1000, -1, 1, 10, 20, 30, 40, 50)
    assert items[1] == TimerLogBlank(1052, 40)
    assert items[2] == TimerLogEnd(1092, "blank", "file ended by a blank")
    assert list(iter_timerlog(unit))[-1].kind == "eof"  # type: ignore[union-attr]
    assert list(iter_timerlog(unit[:30]))[-1].kind == "torn"  # type: ignore[union-attr]
    assert list(iter_timerlog(unit + b"\x00\x00\x00\x07" + bytes(60)))[-1].kind == "corrupt"  # type: ignore[union-attr]
    assert list(iter_timerlog(bytes(4) + b"\x01"))[-1].kind == "corrupt"  # type: ignore[union-attr]
    assert list(iter_timerlog(b""))[-1].kind == "eof"  # type: ignore[union-attr]
    assert list(iter_timerlog(unit + blank))[-1].kind == "corrupt"  # type: ignore[union-attr]


@pytest.mark.parametrize("cut", [0, 1, 4, 51])
def test_truncated_inputs(cut: int) -> None:
    unit = build_timerlog_unit(TimerLogUnit(0, -1, 1, 10, 20, 30, 40, 50))
    with pytest.raises(TruncatedError):
        parse_timerlog_unit(unit[:cut], file="timerlog/x")
    with pytest.raises(TruncatedError):
        parse_timer_checkpoint(unit[:cut])
    with pytest.raises(TruncatedError):
        parse_wheel_slot(unit[:cut], 1)


def test_bad_inputs() -> None:
    with pytest.raises(FormatError) as info:
        parse_timerlog_unit(b"\x00\x00\x00\x35" + bytes(60), file="timerlog/x", file_start=64)
    assert info.value.offset == 64 and "52" in str(info.value)
    with pytest.raises(FormatError):
        build_timerlog_blank(15)
    with pytest.raises(FormatError):
        build_timerlog_unit(TimerLogUnit(0, 2**63, 1, 0, 0, 0, 0, 0))
    with pytest.raises(FormatError):
        build_wheel_slot(TimerSlot(0, 0, 0, 0, 2**31, 0))
    with pytest.raises(FormatError):
        build_timer_checkpoint(TimerCheckpoint(0, 0, 0, 0, 0, 0, -(2**64)))
    with pytest.raises(FormatError):
        list(iter_wheel(bytes(33)))


def test_wheel_geometry() -> None:
    assert TIMER_WHEEL_SLOTS_TOTAL == 604_800
    assert wheel_slot_index(1795296518_000) == 1795296518 % (2 * 604_800)


_i64 = st.integers(-(2**63), 2**63 - 1)
_i32 = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=200, deadline=None)
@given(_i64, _i32, _i64, _i32, _i64, _i32, _i32, _i64)
def test_hypothesis_unit(
    prev: int, magic: int, wt: int, dt: int, opy: int, spy: int, h: int, res: int
) -> None:
    u = TimerLogUnit(0, prev, magic, wt, dt, opy, spy, h, res)
    raw = build_timerlog_unit(u)
    assert len(raw) == UNIT_SIZE
    assert parse_timerlog_unit(raw) == u
    assert TIMER_LOG_UNIT.build(TIMER_LOG_UNIT.parse(raw)) == raw


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2000), _i64, _i64, _i64, _i32, _i32)
def test_hypothesis_slot(index: int, t: int, first: int, last: int, num: int, magic: int) -> None:
    s = TimerSlot(index, t, first, last, num, magic)
    buf = bytes(index * SLOT_SIZE) + build_wheel_slot(s)
    assert parse_wheel_slot(buf, index) == s


@settings(max_examples=100, deadline=None)
@given(st.lists(_i64, min_size=7, max_size=7), st.binary(max_size=16))
def test_hypothesis_timercheck(values: list[int], trailer: bytes) -> None:
    cp = TimerCheckpoint(*values, trailer=trailer.rstrip(b"\0"))
    assert parse_timer_checkpoint(build_timer_checkpoint(cp)) == cp


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_hypothesis_garbage_never_raises_other(raw: bytes) -> None:
    items = list(iter_timerlog(raw))
    assert isinstance(items[-1], TimerLogEnd)
    try:
        parse_timerlog_unit(raw)
    except FormatError:
        pass
    try:
        parse_timer_checkpoint(raw)
    except FormatError:
        pass
    try:
        list(iter_wheel(raw))
    except FormatError:
        pass


def test_construct_slot_rejects_nothing_silently() -> None:
    with pytest.raises(cs.ConstructError):
        TIMER_LOG_UNIT.parse(b"\x00\x00\x00\x01" + bytes(48))
