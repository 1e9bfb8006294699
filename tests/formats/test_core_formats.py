"""Round trips and fast-vs-construct equality on every real record, CQ unit and index entry."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, SCENARIOS, manifest_jsonl, store_dir
from mqtool.formats.commitlog import (
    MAGIC_V2,
    BlankRecord,
    CommitLogMessage,
    FileEnd,
    HostPort,
    build_blank,
    build_message,
    encode_properties,
    make_message,
    parse_message,
    parse_properties,
)
from mqtool.formats.commitlog_construct import build_message_construct, parse_message_construct
from mqtool.formats.consumequeue import build_cq_entry, cq_array, iter_cq, tags_code_of
from mqtool.formats.errors import BadMagicError, FormatError, TornPropertiesError
from mqtool.formats.indexfile import (
    IndexReader,
    build_entry,
    build_header,
    index_geometry,
    index_key_hash,
)
from mqtool.formats.javacompat import java_string_hash
from mqtool.formats.msgid import (
    classify_id,
    create_offset_msg_id,
    create_uniq_key,
    decode_offset_msg_id,
    decode_uniq_key,
)
from mqtool.formats.walker import scan_file


def _files(scenario: str, sub: str) -> list[Path]:
    d = store_dir(scenario) / sub
    return sorted(p for p in d.rglob("*") if p.is_file())


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_commitlog_record_round_trips_both_paths(scenario: str) -> None:
    n = 0
    blanks = 0
    for p in _files(scenario, "commitlog"):
        buf = p.read_bytes()
        start = int(p.name)
        for rec in scan_file(buf, file=p.name, file_start=start):
            if isinstance(rec, FileEnd):
                assert rec.clean
                continue
            pos = rec.physical_offset - start
            if isinstance(rec, BlankRecord):
                assert build_blank(rec.total_size) == buf[pos : pos + 8]
                assert rec.total_size == len(buf) - pos
                blanks += 1
                continue
            raw = buf[pos : pos + rec.total_size]
            assert build_message(rec) == raw
            assert build_message_construct(rec) == raw
            assert parse_message_construct(raw) == rec
            n += 1
    truth = manifest_jsonl(scenario, "commitlog.jsonl")
    assert n == sum(1 for r in truth if r["kind"] == "msg")
    assert blanks == sum(1 for r in truth if r["kind"] == "blank")


def test_v2_magic_and_ipv6_hosts_seen_in_real_stores() -> None:
    kinds = set()
    for scenario in ("4.9.7/plain", "5.3.3/plain"):
        for p in _files(scenario, "commitlog"):
            for rec in scan_file(p.read_bytes(), file=p.name, file_start=int(p.name)):
                if isinstance(rec, CommitLogMessage):
                    kinds.add(("v2", rec.magic == MAGIC_V2))
                    kinds.add(("born6", rec.born_host.is_v6))
                    kinds.add(("store6", rec.store_host.is_v6))
    assert {("v2", True), ("born6", True), ("store6", True)} <= kinds


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_cq_unit_round_trips(scenario: str) -> None:
    n = 0
    for p in _files(scenario, "consumequeue"):
        buf = p.read_bytes()
        units = list(iter_cq(buf, file=p.name))
        assert len(cq_array(buf)) == len(units)
        for pos, e in units:
            assert build_cq_entry(e) == buf[pos : pos + 20]
            n += 1
    assert n == len(manifest_jsonl(scenario, "consumequeue.jsonl"))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_index_entry_round_trips_and_geometry_is_proven(scenario: str) -> None:
    summary = {f["file"]: f for f in __import__("json").loads(
        (FIXTURES / scenario / "manifest" / "summary.json").read_text())["indexFiles"]}
    truth = {(r["file"], r["index"]): r for r in manifest_jsonl(scenario, "index_entries.jsonl")}
    for p in _files(scenario, "index"):
        buf = p.read_bytes()
        r = IndexReader(buf, file=p.name)
        want = summary[p.name]
        assert (r.geometry.hash_slot_num, r.geometry.index_num) == \
            (want["configHashSlotNum"], want["configIndexNum"])
        assert build_header(r.header) == buf[:40]
        for n, e in r.entries():
            pos = r.geometry.entry_pos(n)
            assert build_entry(e) == buf[pos : pos + 20]
            t = truth.pop((p.name, n))
            assert (e.key_hash, e.phy_offset, e.time_diff, e.prev_index) == \
                (t["keyHash"], t["phyOffset"], t["timeDiffSec"], t["prevIndex"])
            if t.get("key"):
                assert index_key_hash(t["key"]) == e.key_hash
    assert not truth


def test_tags_code_is_java_hashcode_including_non_ascii() -> None:
    truth = [r for r in manifest_jsonl("4.9.7/plain", "commitlog.jsonl") if r["kind"] == "msg"]
    for r in truth:
        assert tags_code_of(r["tags"]) == r["dispatchTagsCode"]
    assert java_string_hash("") == 0
    assert java_string_hash("🚀") == 0xD83D * 31 + 0xDE80


def test_ids_round_trip_on_real_records() -> None:
    for scenario in SCENARIOS:
        for r in manifest_jsonl(scenario, "commitlog.jsonl"):
            if r["kind"] != "msg":
                continue
            o = decode_offset_msg_id(r["offsetMsgId"])
            assert o.commit_log_offset == r["phyOffset"]
            assert create_offset_msg_id(o.ip, o.port, o.commit_log_offset) == r["offsetMsgId"]
            assert classify_id(r["offsetMsgId"]) == "offsetMsgId|uniqKey"
            if r.get("uniqKey") and len(r["uniqKey"]) in (32, 56):
                u = decode_uniq_key(r["uniqKey"])
                assert create_uniq_key(u.ip, u.pid, u.class_loader_hash, u.ms_in_month,
                                       u.counter) == r["uniqKey"]
                # the producer's clock: within a few seconds of the born time
                assert abs(u.timestamp(r["bornTimestamp"]) - r["bornTimestamp"]) < 60_000


# no U+0000: a properties string ending in a zero byte is a torn write (properties_torn)
_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02"),
                min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(
    topic=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=200)
    .filter(lambda t: len(t.encode()) <= 3000),
    body=st.binary(max_size=300),
    props=st.lists(st.tuples(_text, _text), max_size=6),
    v6=st.booleans(),
    trailing=st.booleans(),
    ints=st.tuples(st.integers(-2**31, 2**31 - 1), st.integers(0, 2**62), st.integers(0, 2**62)),
)
def test_build_parse_round_trip_property(
    topic: str, body: bytes, props: list[tuple[str, str]], v6: bool, trailing: bool,
    ints: tuple[int, int, int],
) -> None:
    host = HostPort("2001:db8::1", 10911) if v6 else HostPort("10.0.0.1", 10911)
    raw_props = encode_properties(props, trailing_separator=trailing)
    m = make_message(topic=topic, body=body, properties_raw=raw_props, queue_id=ints[0],
                     queue_offset=ints[1], physical_offset=ints[2], store_host=host,
                     born_host=host, born_timestamp=ints[1], store_timestamp=ints[2])
    b = build_message(m)
    assert b == build_message_construct(m)
    back = parse_message(b, 0, file_start=0)
    assert back == m
    assert build_message(back) == b
    assert parse_properties(raw_props) == dict(props)
    assert back.is_v2 == (len(topic.encode()) > 127)


@pytest.mark.parametrize("raw", ["TAGS\x01a\x02KEYS\x01k\x00", "TAGS\x01a\x02\x00\x00",
                                 "\x00"])
def test_properties_ending_in_zeros_are_torn(raw: str) -> None:
    """The torn-properties rule: a record whose properties end in a zero byte is refused with
    ``properties-torn`` at the record (RocketMQ never ends them so: a ``\\x02``, or the last
    value without it); ending in ``\\x02`` or in a value is a record."""
    for ok in ("TAGS\x01a\x02KEYS\x01k", "TAGS\x01a\x02KEYS\x01k\x02", ""):
        b = build_message(make_message(topic="T", properties_raw=ok, physical_offset=4096))
        assert parse_message(b + b"\0" * 8, 0, file_start=4096).properties_raw == ok
    b = build_message(make_message(topic="T", properties_raw=raw, physical_offset=4096))
    with pytest.raises(TornPropertiesError) as ei:
        parse_message(b"\0" * 16 + b, 16, file="commitlog/00000000000000004080", file_start=4080)
    assert ei.value.kind == "properties-torn"
    assert (ei.value.file, ei.value.offset, ei.value.phy) == (
        "commitlog/00000000000000004080", 16, 4096)
    assert "properties torn" in str(ei.value)


def test_errors_name_file_and_in_file_offset_with_phy() -> None:
    m = make_message(topic="T", body=b"x")
    b = bytearray(build_message(m))
    struct.pack_into(">I", b, 4, 0x12345678)
    with pytest.raises(FormatError) as ei:
        parse_message(bytes(b), 0, file="commitlog/00000000001073741824", file_start=1073741824)
    # one offset convention: FILE @ offset inside that file, then the commitlog position
    assert str(ei.value) == (
        "commitlog/00000000001073741824 @ 0x0 (phy 1073741824): bad magic: expected 0xdaa320a7 "
        "or 0xdaa320ab, found 0x12345678"
    )
    assert isinstance(ei.value, BadMagicError) and ei.value.kind == "bad-magic"
    ends = list(scan_file(b"\x00" * 64, file="f", file_start=0))
    assert ends == [FileEnd(0, "zeros")]
    torn = build_message(m)[:-3]
    assert list(scan_file(torn, file="f"))[-1].kind == "torn"


def test_index_geometry_defaults_and_errors() -> None:
    g = index_geometry(420_000_040)
    assert (g.hash_slot_num, g.index_num) == (5_000_000, 20_000_000)
    with pytest.raises(FormatError):
        index_geometry(41)


@pytest.mark.parametrize(("raw", "want"), [
    ("a\x01b\x02c\x01d", {"a": "b", "c": "d"}),
    ("a\x01b\x02c\x01d\x02", {"a": "b", "c": "d"}),
    ("a\x01b\x01c", {"a": "b\x01c"}),
    ("a\x01b\x02a\x01c", {"a": "c"}),
    ("a\x01\x02c\x01d", {"c": "d"}),
    ("\x01b\x02c\x01d", {"c": "d"}),
    ("a\x02\x02c\x01d", {"c": "d"}),
    ("ab\x02c\x01d", {"c": "d"}),
    ("", {}),
    ("\x02", {}),
])
def test_parse_properties_skips_what_rocketmq_skips(raw: str, want: dict[str, str]) -> None:
    """``string2messageProperties``: short segments, empty keys or values skipped, the last
    duplicate wins, a value keeps a later ``\\x01``; the keys in their first order."""
    got = parse_properties(raw)
    assert got == want and list(got) == list(want)
