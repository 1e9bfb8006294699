"""StoreCheckpoint: real files of every fixture store against their manifests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.formats.checkpoint import (
    CHECKPOINT_FILE_SIZE,
    Checkpoint,
    build_checkpoint,
    parse_checkpoint,
)
from mqtool.formats.errors import FormatError, TruncatedError

STORES = Path(__file__).resolve().parents[2] / "fixtures" / "rocketmq-stores"
STORE_DIRS = sorted(p.parent for p in STORES.glob("*/*/store/checkpoint"))


def test_every_store_has_a_checkpoint() -> None:
    assert len(STORE_DIRS) == 12  # 3 of 4.9.7, 9 of 5.3.3


@pytest.mark.parametrize("store", STORE_DIRS, ids=lambda p: str(p.parent.relative_to(STORES)))
def test_real_checkpoint_matches_manifest_and_round_trips(store: Path) -> None:
    raw = (store / "checkpoint").read_bytes()
    manifest = json.loads((store.parent / "manifest/checkpoint.json").read_text(encoding="utf-8"))
    cp = parse_checkpoint(raw, file="checkpoint")
    assert len(raw) == manifest["fileSize"] == CHECKPOINT_FILE_SIZE == cp.file_size
    assert cp.physic_msg_timestamp == manifest["physicMsgTimestamp"]
    assert cp.logics_msg_timestamp == manifest["logicsMsgTimestamp"]
    assert cp.index_msg_timestamp == manifest["indexMsgTimestamp"]
    assert cp.min_timestamp == manifest["minTimestamp"]
    assert cp.min_timestamp_index == manifest["minTimestampIndex"]
    assert cp.master_flushed_offset == manifest.get("masterFlushedOffset", 0)
    assert cp.confirm_phy_offset == manifest.get("confirmPhyOffset", 0)
    assert cp.trailer == b""
    assert build_checkpoint(cp) == raw


def test_golden_bytes_from_hex() -> None:
    # first 24 bytes of 4.9.7/plain-crashed/store/checkpoint, padded like the broker does
    raw = bytes.fromhex("000001a1ffed03fb000001a1ffed04dd000001a1ffed04ca") + bytes(4072)
    cp = parse_checkpoint(raw)
    assert cp == Checkpoint(1795295085563, 1795295085789, 1795295085770)
    assert build_checkpoint(cp) == raw


def test_non_zero_trailer_and_odd_size_round_trip() -> None:
    raw = bytes(40) + b"\x01\x02" + bytes(10) + b"\xff" + bytes(3)
    cp = parse_checkpoint(raw)
    assert cp.trailer == b"\x01\x02" + bytes(10) + b"\xff"
    assert build_checkpoint(cp) == raw


@pytest.mark.parametrize("size", [0, 1, 8, 24, 39])
def test_truncated(size: int) -> None:
    with pytest.raises(TruncatedError) as info:
        parse_checkpoint(b"\x7f" * size, file="store/checkpoint")
    assert info.value.file == "store/checkpoint"
    assert info.value.offset == size


def test_unencodable_raises_format_error() -> None:
    with pytest.raises(FormatError):
        build_checkpoint(Checkpoint(2**63, 0, 0))
    with pytest.raises(FormatError):
        build_checkpoint(Checkpoint(0, 0, 0, file_size=41, trailer=b"\x01\x02"))


_i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(_i64, _i64, _i64, _i64, _i64, st.binary(max_size=64).map(lambda b: b.rstrip(b"\0")))
def test_hypothesis_round_trip(a: int, b: int, c: int, d: int, e: int, trailer: bytes) -> None:
    cp = Checkpoint(a, b, c, d, e, trailer=trailer)
    raw = build_checkpoint(cp)
    assert len(raw) == CHECKPOINT_FILE_SIZE
    assert parse_checkpoint(raw) == cp


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_hypothesis_garbage(raw: bytes) -> None:
    try:
        cp = parse_checkpoint(raw)
    except FormatError:
        assert len(raw) < 40
    else:
        assert build_checkpoint(cp) == raw
