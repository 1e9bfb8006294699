"""BatchConsumeQueue and ConsumeQueueExt units.

No fixture store has these files, so the golden bytes below are written out by hand from the
Java layout (``BatchConsumeQueue#putBatchMessagePositionInfo`` puts, in order: putLong(offset),
putInt(size), putLong(tagsCode), putLong(storeTime), putLong(msgBaseOffset),
putShort(batchSize), putInt(compactedOffset), putInt(0); ``CqExtUnit#write`` puts
putShort(size), putLong(tagsCode), putLong(msgStoreTime), putShort(bitMapSize), put(bitMap)),
all big-endian, independently of the structs under test.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.formats.batchcq import (
    BATCH_CQ_UNIT,
    CQ_EXT_UNIT,
    CQ_STORE_UNIT_SIZE,
    INVALID_POS,
    MAX_ADDR,
    MAX_REAL_OFFSET,
    BatchCqEntry,
    CqExtUnit,
    build_batch_cq_entry,
    build_cq_ext_unit,
    decorate,
    is_ext_addr,
    iter_batch_cq,
    iter_cq_ext,
    parse_batch_cq_entry,
    parse_cq_ext_unit,
    undecorate,
)
from mqtool.formats.errors import FormatError, TruncatedError

# phyOffset 0x1000, size 0x200, tagsCode 0x5C7D8F (hash), storeTime 1795296515000 (0x1a20002d3b8),
# msgBaseOffset 96, batchSize 32, compactedOffset -1 (INVALID_POS), reserved 0
GOLDEN_BATCH = bytes.fromhex(
    "0000000000001000"  # phyOffset
    "00000200"  # size
    "00000000005c7d8f"  # tagsCode
    "000001a20002d3b8"  # storeTime
    "0000000000000060"  # msgBaseOffset
    "0020"  # batchSize
    "ffffffff"  # compactedOffset = INVALID_POS
    "00000000"  # reserved
)
# size 28 (20 + 8), tagsCode -1, msgStoreTime 1795296515000, bitMapSize 8, bitmap 0x0102..08
GOLDEN_EXT = bytes.fromhex("001cffffffffffffffff000001a20002d3b800080102030405060708")


def test_golden_batch_unit() -> None:
    assert len(GOLDEN_BATCH) == CQ_STORE_UNIT_SIZE == 46
    e = parse_batch_cq_entry(GOLDEN_BATCH)
    assert e == BatchCqEntry(0x1000, 0x200, 0x5C7D8F, 1795296515000, 96, 32, INVALID_POS, 0)
    assert build_batch_cq_entry(e) == GOLDEN_BATCH
    ref = BATCH_CQ_UNIT.parse(GOLDEN_BATCH)
    assert (ref.msgBaseOffset, ref.batchSize, ref.compactedOffset) == (96, 32, -1)


def test_golden_ext_unit() -> None:
    u = parse_cq_ext_unit(GOLDEN_EXT)
    assert u == CqExtUnit(-1, 1795296515000, bytes(range(1, 9)))
    assert u.size == 28
    assert build_cq_ext_unit(u) == GOLDEN_EXT
    assert CQ_EXT_UNIT.build(CQ_EXT_UNIT.parse(GOLDEN_EXT)) == GOLDEN_EXT


def test_ext_address_decoding() -> None:
    assert MAX_ADDR == -2147483649
    assert is_ext_addr(MAX_ADDR) and not is_ext_addr(MAX_ADDR + 1)
    assert not is_ext_addr(-(2**31))  # Integer.MIN_VALUE is still a tag hash
    assert decorate(0) == -(2**63)
    assert undecorate(-(2**63)) == 0
    assert undecorate(decorate(12345)) == 12345
    assert decorate(MAX_REAL_OFFSET) == MAX_ADDR
    assert undecorate(42) == 42  # a plain tag hash is left alone
    with pytest.raises(FormatError):
        decorate(MAX_REAL_OFFSET + 1)
    with pytest.raises(FormatError):
        decorate(-1)


def test_iter_batch_cq() -> None:
    second = build_batch_cq_entry(BatchCqEntry(0x1200, 10, 0, 1, 128, 1))
    buf = GOLDEN_BATCH + second + bytes(46) + GOLDEN_BATCH
    items = list(iter_batch_cq(buf, file_start=46 * 300000))
    assert [p for p, _ in items] == [46 * 300000, 46 * 300001]
    assert items[1][1].compacted_offset == INVALID_POS
    assert list(iter_batch_cq(GOLDEN_BATCH[:45])) == []


def test_iter_cq_ext_stops_at_marker() -> None:
    u2 = build_cq_ext_unit(CqExtUnit(7, 8))
    buf = GOLDEN_EXT + u2 + b"\xff\xff" + bytes(10)
    items = list(iter_cq_ext(buf, file_start=48 * 1024 * 1024))
    assert [undecorate(a) for a, _ in items] == [48 * 1024 * 1024, 48 * 1024 * 1024 + 28]
    assert [u for _, u in items] == [parse_cq_ext_unit(GOLDEN_EXT), CqExtUnit(7, 8)]
    assert list(iter_cq_ext(bytes(100))) == []


@pytest.mark.parametrize("cut", [0, 1, 19, 20, 27])
def test_truncated(cut: int) -> None:
    with pytest.raises(TruncatedError):
        parse_cq_ext_unit(GOLDEN_EXT[:cut], file="consumequeue_ext/t/0/x")
    with pytest.raises(TruncatedError):
        parse_batch_cq_entry(GOLDEN_BATCH[:cut], file="batchconsumequeue/t/0/x")


def test_bad_ext_units() -> None:
    with pytest.raises(FormatError) as info:
        parse_cq_ext_unit(b"\x00\x13" + bytes(30), file="f", file_start=100)
    assert info.value.offset == 100
    with pytest.raises(FormatError):
        parse_cq_ext_unit(b"\x00\x15" + bytes(16) + b"\x00\x02" + bytes(10))  # 21 != 20 + 2
    with pytest.raises(FormatError):
        list(iter_cq_ext(b"\x00\x05" + bytes(30)))
    with pytest.raises(FormatError):
        build_cq_ext_unit(CqExtUnit(0, 0, bytes(32767)))
    with pytest.raises(FormatError):
        build_batch_cq_entry(BatchCqEntry(0, 0, 0, 0, 0, 2**15))


_i64 = st.integers(-(2**63), 2**63 - 1)
_i32 = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=200, deadline=None)
@given(_i64, _i32, _i64, _i64, _i64, st.integers(-(2**15), 2**15 - 1), _i32, _i32)
def test_hypothesis_batch(a: int, b: int, c: int, d: int, e: int, f: int, g: int, h: int) -> None:
    entry = BatchCqEntry(a, b, c, d, e, f, g, h)
    raw = build_batch_cq_entry(entry)
    assert parse_batch_cq_entry(raw) == entry
    assert BATCH_CQ_UNIT.build(BATCH_CQ_UNIT.parse(raw)) == raw


@settings(max_examples=200, deadline=None)
@given(_i64, _i64, st.binary(max_size=64))
def test_hypothesis_ext(tags: int, t: int, bitmap: bytes) -> None:
    u = CqExtUnit(tags, t, bitmap)
    raw = build_cq_ext_unit(u)
    assert len(raw) == u.size
    assert parse_cq_ext_unit(raw) == u


@settings(max_examples=200, deadline=None)
@given(st.integers(0, MAX_REAL_OFFSET))
def test_hypothesis_address(offset: int) -> None:
    addr = decorate(offset)
    assert is_ext_addr(addr)
    assert undecorate(addr) == offset


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_hypothesis_garbage(raw: bytes) -> None:
    for fn in (parse_cq_ext_unit, parse_batch_cq_entry):
        try:
            fn(raw)
        except FormatError:
            pass
    try:
        list(iter_cq_ext(raw))
    except FormatError:
        pass
    list(iter_batch_cq(raw))
