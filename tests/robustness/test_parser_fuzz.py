"""Property-based fuzzing of the format parsers: mutated real bytes raise FormatError or parse.

Every parser at the ``formats/`` boundary must turn bad input into :class:`FormatError` (never
``struct.error``, ``IndexError``, ``UnicodeDecodeError``, ``ValueError``, ``RecursionError``
...), and the scanners must end instead of raising. Inputs start from the real fixture bytes and
are mutated by hypothesis (bit flips, overwritten ranges with hostile integers, truncation,
zero fill, random garbage), so the fuzzing reaches deep into valid-looking structures.
"""

from __future__ import annotations

import struct
from functools import cache
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from robust_harness import STORES, fuzz_settings

from mqtool.formats.checkpoint import parse_checkpoint
from mqtool.formats.commitlog import (
    BlankRecord,
    CommitLogMessage,
    FileEnd,
    parse_message,
    parse_properties,
)
from mqtool.formats.config import (
    loads_fastjson,
    parse_consumer_offset,
    parse_delay_offset,
    parse_subscription_groups,
    parse_topics,
)
from mqtool.formats.consumequeue import iter_cq, parse_cq_entry
from mqtool.formats.errors import FormatError
from mqtool.formats.indexfile import IndexReader, index_geometry
from mqtool.formats.msgid import classify_id, decode_offset_msg_id, decode_uniq_key, decode_v5_id
from mqtool.formats.walker import scan_file

HOSTILE_INTS = [0, 1, -1, 2**31 - 1, -(2**31), 2**15 - 1, 0x7F, 0x80, 0xFF, 91, 20, 40]


@cache
def _records() -> list[bytes]:
    """Every real message record of the fixtures (bytes), V1/V2, IPv4/IPv6, compressed."""
    out = []
    for root in STORES.values():
        for p in sorted((root / "commitlog").iterdir()):
            data = p.read_bytes()
            for item in scan_file(data, file=p.name, file_start=int(p.name)):
                if isinstance(item, CommitLogMessage):
                    pos = item.physical_offset - int(p.name)
                    out.append(data[pos : pos + item.total_size])
    return out


@cache
def _files(pattern: str) -> list[bytes]:
    return [p.read_bytes() for root in STORES.values() for p in sorted(root.glob(pattern))
            if p.is_file()]


@st.composite
def mutated(draw: st.DrawFn, sources: list[bytes], max_len: int = 1 << 20) -> bytes:
    """One of ``sources`` with 1-4 mutations applied."""
    data = bytearray(draw(st.sampled_from(sources))[:max_len])
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        op = draw(st.sampled_from(["flip", "int32", "int16", "byte", "trunc", "zero", "junk"]))
        if op == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op in ("int32", "int16"):
            w = 4 if op == "int32" else 2
            v = draw(st.sampled_from(HOSTILE_INTS) | st.integers(-(2**31), 2**31 - 1))
            raw = struct.pack(">i", v)[-w:]
            data[i : i + w] = raw[: len(data) - i]
        elif op == "byte":
            data[i] = draw(st.integers(0, 255))
        elif op == "trunc":
            del data[i:]
        elif op == "zero":
            n = draw(st.integers(1, 512))
            data[i : i + n] = bytes(len(data[i : i + n]))
        else:
            junk = draw(st.binary(min_size=1, max_size=64))
            data[i : i + len(junk)] = junk[: len(data) - i]
    return bytes(data)


def _commitlog_buf(record: bytes, prefix: int) -> bytes:
    return bytes(prefix) + record


@fuzz_settings(1500)
@given(data=mutated(_records()), prefix=st.sampled_from([0, 4096]))
def test_parse_message_only_format_errors(data: bytes, prefix: int) -> None:
    buf = _commitlog_buf(data, prefix)
    try:
        rec = parse_message(buf, prefix, file="commitlog/x", file_start=1 << 30)
    except FormatError as e:
        assert e.file == "commitlog/x"
        # the offset inside the file, the commitlog position as phy
        assert e.offset is not None and e.offset >= prefix
        assert e.phy == (1 << 30) + e.offset
        return
    if isinstance(rec, CommitLogMessage):
        rec.properties  # noqa: B018 - derived fields must not raise either
        _ = (rec.tags, rec.keys, rec.uniq_key, rec.crc_ok, rec.offset_msg_id, rec.key_list)
        try:
            rec.decompressed_body(limit=1 << 20)
        except FormatError:
            pass
        rec.prop_crc()
    else:
        assert isinstance(rec, BlankRecord)


@fuzz_settings(400)
@given(data=mutated(_files("commitlog/*"), max_len=1 << 16))
def test_scan_file_never_raises_and_ends_with_file_end(data: bytes) -> None:
    items = list(scan_file(data, file="commitlog/x", file_start=0))
    assert isinstance(items[-1], FileEnd)
    assert all(not isinstance(i, FileEnd) for i in items[:-1])
    pos = 0
    for it in items[:-1]:
        assert it.physical_offset == pos  # physical order, no overlap
        pos += it.total_size


@fuzz_settings(300)
@given(data=mutated(_files("commitlog/*"), max_len=1 << 16))
def test_walk_never_raises_and_covers_the_data(data: bytes) -> None:
    """The resynchronising walker: records in order without overlap, damage regions between
    them, and a FileEnd last; every byte before the data end is a record or a region."""
    from mqtool.formats.errors import Finding
    from mqtool.formats.walker import Unreadable, walk

    items = list(walk(data, file="commitlog/x", file_start=0, check_crc=True))
    assert isinstance(items[-1], FileEnd)
    pos = 0
    for it in items[:-1]:
        if isinstance(it, Unreadable):
            assert it.offset == pos and it.length > 0 and it.phy == pos
            pos += it.length
        elif isinstance(it, Finding):
            assert it.kind == "crc-mismatch" and it.offset == pos
        else:
            assert it.physical_offset == pos
            pos += it.total_size
    end = items[-1]
    assert end.physical_offset <= pos <= len(data)


@fuzz_settings(300)
@given(data=st.binary(max_size=600), pos=st.integers(0, 700))
def test_parse_message_random_bytes(data: bytes, pos: int) -> None:
    try:
        parse_message(data, pos, file="f")
    except FormatError:
        pass
    list(scan_file(data))


@fuzz_settings(300)
@given(data=st.text(alphabet=st.sampled_from("ab\x01\x02=é😀 "), max_size=80))
def test_parse_properties_total(data: str) -> None:
    props = parse_properties(data)
    assert all(k and v for k, v in props.items())


@fuzz_settings(400)
@given(data=mutated(_files("consumequeue/*/*/*"), max_len=1 << 14), pos=st.integers(0, 100))
def test_consume_queue_only_format_errors(data: bytes, pos: int) -> None:
    try:
        for _ in iter_cq(data, file="cq"):
            pass
    except FormatError as e:
        assert e.offset == len(data) - len(data) % 20
    try:
        parse_cq_entry(data, pos, file="cq")
    except FormatError:
        pass


@fuzz_settings(400)
@given(
    data=mutated(_files("index/*"), max_len=1 << 20),
    hashes=st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=4),
)
def test_index_reader_and_lookups_only_format_errors(data: bytes, hashes: list[int]) -> None:
    try:
        reader = IndexReader(data, file="index/x")
    except FormatError:
        return
    for h in hashes:
        try:
            reader.lookup_hash(h)
        except FormatError:
            pass
    try:
        for _ in reader.entries():
            pass
    except FormatError:
        pass


@fuzz_settings(200)
@given(
    slots=st.lists(st.integers(-(2**31), 2**31 - 1) | st.sampled_from([1, 2, 3, 2047]),
                   min_size=1, max_size=8),
    prevs=st.lists(st.integers(-5, 3000), min_size=1, max_size=8),
)
def test_index_hostile_slots_and_prev_cycles(slots: list[int], prevs: list[int]) -> None:
    """Slots pointing anywhere, prev pointers forming cycles: lookups end, no other error."""
    buf = bytearray(_files("index/*")[0])
    g = index_geometry(len(buf), buf=bytes(buf))
    for i, v in enumerate(slots):
        struct.pack_into(">i", buf, g.slot_pos(i * 37 % g.hash_slot_num), v)
    for i, v in enumerate(prevs):
        n = 1 + i * 3
        struct.pack_into(">i", buf, g.entry_pos(n) + 16, v if v != -5 else n)  # -5: self loop
    try:
        reader = IndexReader(bytes(buf), file="index/x")
    except FormatError:
        return
    for i in range(len(slots)):
        try:
            hits = reader.lookup_hash(i * 37 % g.hash_slot_num)
        except FormatError:
            continue
        assert len(hits) <= reader.header.index_count


@fuzz_settings(150)
@given(size=st.integers(0, 1 << 22), data=st.binary(min_size=40, max_size=40))
def test_index_geometry_of_any_size(size: int, data: bytes) -> None:
    buf = data + bytes(max(0, size - 40))
    try:
        index_geometry(size, file="index/x", buf=buf[:size] if size < 40 else buf)
    except FormatError:
        pass


@fuzz_settings(600)
@given(text=mutated([*_files("config/*.json"), *[
    b'{"offsetTable":{"TopicA@g":{0:1,1:2}}}', b'{"topicConfigTable":{}}',
    b'{"subscriptionGroupTable":{"g":{"groupName":"g"}},"dataVersion":{"counter":1,'
    b'"timestamp":2}}',
]], max_len=4096))
def test_config_only_format_errors(text: bytes) -> None:
    s = text.decode("utf-8", errors="replace")
    for fn in (loads_fastjson, parse_delay_offset, parse_consumer_offset, parse_topics,
               parse_subscription_groups):
        try:
            fn(s, file="config/x.json")  # type: ignore[operator]
        except FormatError as e:
            assert e.file == "config/x.json"


@fuzz_settings(200)
@given(text=st.text(alphabet=st.sampled_from('{}[]:,"\\0123456789.eE-+tfnul \t\nab'),
                    max_size=200))
def test_fastjson_random_text(text: str) -> None:
    try:
        loads_fastjson(text, file="x.json")
    except FormatError:
        pass


def test_fastjson_deep_nesting_is_a_format_error() -> None:
    for text in ("[" * 100_000, '{"a":' * 50_000):
        try:
            loads_fastjson(text, file="x.json")
        except FormatError as e:
            assert e.file == "x.json"
        else:  # pragma: no cover
            raise AssertionError("unterminated nesting parsed")


@fuzz_settings(300)
@given(data=mutated(_files("checkpoint"), max_len=8192) | st.binary(max_size=64))
def test_checkpoint_only_format_errors(data: bytes) -> None:
    try:
        parse_checkpoint(data, file="checkpoint")
    except FormatError as e:
        assert e.file == "checkpoint"


@fuzz_settings(500)
@given(s=st.text(alphabet=st.sampled_from("0123456789ABCDEFabcdefgxyz-é 01"), max_size=60)
       | st.sampled_from(["C0A8010A00002A9F0000000000000000", "01" + "F" * 32, "0" * 56]))
def test_message_ids_only_format_errors(s: str) -> None:
    assert classify_id(s) in ("offsetMsgId|uniqKey", "v5", "invalid")
    for fn in (decode_offset_msg_id, decode_uniq_key, decode_v5_id):
        try:
            fn(s)
        except FormatError:
            pass


def test_inputs_are_real() -> None:
    assert len(_records()) > 2000
    assert _files("index/*") and _files("checkpoint") and _files("config/*.json")
    assert Path(STORES["4.9.7/plain"]).is_dir()
