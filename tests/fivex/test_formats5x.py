"""The 5.x structures of formats/: DLedger entry headers, POP checkpoint and ack bodies, the
RocksDB consume queue's keys and values; round trips and bad input."""

from __future__ import annotations

import json
import zlib

import pytest

from mqtool.formats import dledger, pop, rocksdbcq
from mqtool.formats.errors import BadFieldError, FormatError


def _entry(index: int, term: int, pos: int, body: bytes, **kw: int) -> bytes:
    return dledger.build_entry_header(index=index, term=term, pos=pos, body_length=len(body),
                                      **kw) + body


def test_dledger_header_round_trip() -> None:
    body = b"x" * 91
    raw = _entry(7, 2, 4096, body)
    e = dledger.parse_entry_header(raw, 0)
    assert (e.magic, e.size, e.index, e.term, e.pos, e.body_length) == \
        (1, 48 + 91, 7, 2, 4096, 91)
    assert e.body_offset == 48
    assert dledger.build_entry_header(index=e.index, term=e.term, pos=e.pos,
                                      body_length=e.body_length) == raw[:48]


def test_dledger_entries_end_at_blank_and_zeros() -> None:
    a = _entry(0, 1, 0, b"a" * 100)
    b = _entry(1, 1, len(a), b"b" * 60)
    blank = (-1).to_bytes(4, "big", signed=True) + (64).to_bytes(4, "big") + bytes(56)
    items = list(dledger.iter_entries(a + b + blank))
    assert [type(i).__name__ for i in items] == ["DLedgerEntry", "DLedgerEntry", "DLedgerBlank"]
    assert [i.index for i in items[:2]] == [0, 1]  # type: ignore[union-attr]
    assert [type(i).__name__ for i in dledger.iter_entries(a + bytes(64))] == ["DLedgerEntry"]


def test_dledger_problems_bad_crc_pos_and_size() -> None:
    body = b"payload" * 20
    crc = zlib.crc32(body)
    good = _entry(0, 1, 0, body, body_crc=crc - (1 << 32) if crc >= 1 << 31 else crc)
    assert dledger.entry_problems(dledger.parse_entry_header(good, 0), good, 0) == []
    bad_crc = _entry(0, 1, 0, body, body_crc=12345)
    (p,) = dledger.entry_problems(dledger.parse_entry_header(bad_crc, 0), bad_crc, 0,
                                  file="dledger-n0/data/x")
    assert p.kind == "crc-mismatch" and p.offset == 0 and "bodyCrc 12345" in p.detail
    bad_pos = _entry(0, 1, 999, body)
    (p,) = dledger.entry_problems(dledger.parse_entry_header(bad_pos, 0), bad_pos, 0)
    assert p.kind == "bad-field" and "pos 999" in p.detail
    short = bytearray(_entry(0, 1, 0, body))
    short[4:8] = (10_000).to_bytes(4, "big")
    (p,) = dledger.entry_problems(dledger.parse_entry_header(bytes(short), 0), bytes(short), 0)
    assert p.kind == "bad-size"
    with pytest.raises(FormatError):
        dledger.parse_entry_header(good[:20], 0)


def test_dledger_index_units() -> None:
    import struct

    raw = struct.pack(">iqiqq", 1, 0, 139, 0, 1) + struct.pack(">iqiqq", 1, 139, 100, 1, 1)
    units = list(dledger.iter_index(raw + bytes(64)))
    assert [(u.pos, u.size, u.index, u.term) for u in units] == [(0, 139, 0, 1), (139, 100, 1, 1)]


CK = {"so": 10, "pt": 1795765313000, "it": 3000, "bm": 0, "n": 2, "q": 1, "t": "PopTopic",
      "c": "cg_pop", "ro": 5, "d": [0, 3], "bn": "broker-a", "rp": None}


def test_pop_checkpoint_and_acks() -> None:
    ck = pop.parse_revive_body("ck", json.dumps(CK).encode())
    assert isinstance(ck, pop.PopCheckPoint)
    assert ck.revive_time == 1795765316000 and ck.queue_offsets() == [10, 13]
    ack = pop.parse_revive_body("ack", json.dumps(
        {"ao": 11, "so": 10, "c": "cg_pop", "t": "PopTopic", "q": 1, "pt": 1,
         "bn": "broker-a"}).encode())
    assert isinstance(ack, pop.PopAck) and ack.ack_offsets == (11,) and not ack.batch
    back = pop.parse_revive_body("bAck", json.dumps(
        {"aol": [11, 12], "so": 10, "c": "cg_pop", "t": "PopTopic", "q": 1, "pt": 1}).encode())
    assert isinstance(back, pop.PopAck) and back.ack_offsets == (11, 12) and back.batch


@pytest.mark.parametrize("body", [b"{", b"[1,2]", b'{"so": "x"}', b"\xff\xfe",
                                  json.dumps({**CK, "d": ["a"]}).encode()])
def test_pop_malformed_bodies_name_the_record(body: bytes) -> None:
    with pytest.raises(BadFieldError) as ei:
        pop.parse_revive_body("ck", body, file="commitlog/00000000000000000000", offset=64,
                              phy=64)
    f = ei.value.finding()
    assert (f.file, f.offset, f.kind) == ("commitlog/00000000000000000000", 64, "bad-field")


def test_pop_retry_topic_names() -> None:
    assert pop.pop_retry_topic("cg", "T") == "%RETRY%cg_T"
    assert pop.pop_retry_topic("cg", "T", v2=True) == "%RETRY%cg+T"
    assert pop.split_pop_retry_topic("%RETRY%cg+T") == ("cg", "T")
    assert pop.split_pop_retry_topic("%RETRY%cg_pop_PopTopic", {"cg_pop"}) == ("cg_pop", "PopTopic")
    assert pop.split_pop_retry_topic("%RETRY%cg_pop_PopTopic", topics={"PopTopic"}) == \
        ("cg_pop", "PopTopic")
    assert pop.split_pop_retry_topic("%RETRY%cg") is None
    assert pop.split_pop_retry_topic("Topic") is None


def test_rocksdb_keys_round_trip_and_bad_keys() -> None:
    k = rocksdbcq.build_unit_key("RdbTopic", 3, 17)
    assert rocksdbcq.parse_unit_key(k) == rocksdbcq.UnitKey("RdbTopic", 3, 17)
    import struct

    v = struct.pack(">qiqq", 4096, 300, 77, 1795765313000)
    assert rocksdbcq.parse_unit_value(v) == rocksdbcq.RocksUnit(4096, 300, 77, 1795765313000)
    for bad in (k[:-3], b"\x00\x00\x00\x50" + k[4:], k[:4] + b"\x02" + k[5:]):
        with pytest.raises(FormatError):
            rocksdbcq.parse_unit_key(bad)
    with pytest.raises(FormatError):
        rocksdbcq.parse_unit_value(v[:20])
    ok = (8).to_bytes(4, "big") + b"\x01RdbTopic\x01max\x01" + (2).to_bytes(4, "big")
    assert rocksdbcq.parse_offset_key(ok) == rocksdbcq.OffsetKey("RdbTopic", 2, "max")
    with pytest.raises(FormatError):
        rocksdbcq.parse_offset_key(ok.replace(b"max", b"mid"))
