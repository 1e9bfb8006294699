"""The one-pass decode (formats.commitlog_arrow through commitlog_columns.Decoder) equals the
reference decoder column for column: every fixed field, topic, raw properties, the property map
(parse_properties), TAGS / KEYS / UNIQ_KEY, offsetMsgId, both hosts (IPv4 and IPv6), CRC; it
stops where scan_file stops (real files, 300 damaged copies) and survives tiny buffers."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_commitlog_columns import _damage

from conftest import SCENARIOS, store_dir
from mqtool.formats import commitlog_arrow as arrow
from mqtool.formats import commitlog_columns, jit
from mqtool.formats import commitlog_fields as fields
from mqtool.formats.commitlog import (
    MAGIC_V2,
    CommitLogMessage,
    FileEnd,
    body_crc32,
    parse_properties,
)
from mqtool.formats.walker import scan_file


def _files(name: str) -> list[tuple[str, int, bytes]]:
    return [(f"commitlog/{p.name}", int(p.name), p.read_bytes())
            for p in sorted((store_dir(name) / "commitlog").iterdir())]


def _reference(data: bytes, rel: str, start: int) -> tuple[list[CommitLogMessage], FileEnd]:
    items = list(scan_file(data, file=rel, file_start=start))
    end = items[-1]
    assert isinstance(end, FileEnd)
    return [i for i in items if isinstance(i, CommitLogMessage)], end


def _strings(w: commitlog_columns.Window, name: str) -> list[str | None]:
    off, data = w.string(name)
    raw = bytes(data)
    out: list[str | None] = [raw[off[i] : off[i + 1]].decode() for i in range(w.n)]
    if name in ("tags", "keys", "uniqKey"):
        ok = w.valid(name)
        out = [v if ok[i] else None for i, v in enumerate(out)]
    return out


def _maps(w: commitlog_columns.Window) -> list[dict[str, str]]:
    map_off, (k_off, k_data), (v_off, v_data) = w.properties()
    keys, values = bytes(k_data), bytes(v_data)
    out = []
    for i in range(w.n):
        row: dict[str, str] = {}
        for j in range(map_off[i], map_off[i + 1]):
            k = keys[k_off[j] : k_off[j + 1]].decode()
            assert k not in row  # one pair per key: the last duplicate won in the kernel
            row[k] = values[v_off[j] : v_off[j + 1]].decode()
        out.append(row)
    return out


def _rows(w: commitlog_columns.Window) -> list[tuple[object, ...]]:
    """Every column of every row, in the reference's terms."""
    ints = {k: w.int64(k).tolist() for k in commitlog_columns.INT64_COLUMNS}
    ints |= {k: w.int32(k).tolist() for k in commitlog_columns.INT32_COLUMNS}
    strs = {k: _strings(w, k) for k in commitlog_columns.STRING_COLUMNS}
    maps = _maps(w)
    crc = w.crc_ok
    body = w.body_position.tolist()
    return [
        (ints["fileOffset"][i], ints["commitLogOffset"][i], ints["storeSize"][i],
         strs["magic"][i], strs["topic"][i], ints["queueId"][i],
         ints["queueOffset"][i], ints["flag"][i], ints["sysFlag"][i], ints["bodyCRC"][i],
         ints["bornTimestamp"][i], strs["bornHost"][i], ints["storeTimestamp"][i],
         strs["storeHost"][i], ints["reconsumeTimes"][i],
         ints["preparedTransactionOffset"][i], ints["bodyLength"][i],
         bytes(w.buf[body[i] : body[i] + ints["bodyLength"][i]]), strs["propertiesRaw"][i],
         maps[i], strs["tags"][i], strs["keys"][i], strs["uniqKey"][i], strs["offsetMsgId"][i],
         None if crc is None else bool(crc[i]), int(w.magic_v2[i]))
        for i in range(w.n)
    ]


def _want(m: CommitLogMessage, start: int, crc: bool) -> tuple[object, ...]:
    props = parse_properties(m.properties_raw)
    return (m.physical_offset - start, m.physical_offset, m.total_size, f"{m.magic:#010x}",
            m.topic, m.queue_id, m.queue_offset, m.flag, m.sys_flag, m.body_crc,
            m.born_timestamp, str(m.born_host), m.store_timestamp, str(m.store_host),
            m.reconsume_times, m.prepared_transaction_offset, len(m.body), m.body,
            m.properties_raw, props, props.get("TAGS"), props.get("KEYS"),
            props.get("UNIQ_KEY"), m.offset_msg_id,
            (body_crc32(m.body) == m.body_crc) if crc else None, int(m.magic == MAGIC_V2))


def _decode(data: bytes, rel: str, start: int, *, crc: bool, records: int = 1 << 15,
            data_bytes: int | None = None, native_crc: bool = True,
            ) -> tuple[list[tuple[object, ...]], FileEnd]:
    dec = commitlog_columns.Decoder(records, data_bytes=data_bytes, native_crc=native_crc)
    rows: list[tuple[object, ...]] = []
    for w in dec.file(data, file=rel, file_start=start, check_crc=crc):
        rows += _rows(w)  # read before the next window reuses the buffers
    return rows, dec.end


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_column_of_every_real_record_equals_the_reference(name: str) -> None:
    total = 0
    for rel, start, data in _files(name):
        want, want_end = _reference(data, rel, start)
        for crc, native in ((False, True), (True, True), (True, False)):
            rows, end = _decode(data, rel, start, crc=crc, native_crc=native)
            assert end == want_end
            assert rows == [_want(m, start, crc) for m in want], rel
        total += len(want)
    assert total > 0


def test_fixtures_hold_ipv6_v2_compressed_and_duplicate_properties() -> None:
    """The equality above covers the rare shapes: the fixtures contain them."""
    seen = {"v2": 0, "born6": 0, "store6": 0, "compressed": 0, "picked": 0}
    for name in SCENARIOS:
        for rel, start, data in _files(name):
            for m in _reference(data, rel, start)[0]:
                seen["v2"] += m.magic == 0xDAA320AB
                seen["born6"] += ":" in m.born_host.ip
                seen["store6"] += ":" in m.store_host.ip
                seen["compressed"] += m.sys_flag & 1
                seen["picked"] += "TAGS" in parse_properties(m.properties_raw)
    assert all(seen.values()), seen


def test_tiny_windows_and_buffers_give_the_same_rows() -> None:
    rel, start, data = _files("4.9.7/journey")[0]
    want, want_end = _reference(data, rel, start)
    rows, end = _decode(data, rel, start, crc=False, records=3, data_bytes=16)
    assert end == want_end
    assert rows == [_want(m, start, False) for m in want]


def test_damaged_files_end_like_scan_file() -> None:
    rng = random.Random(11)
    files = [f for name in SCENARIOS for f in _files(name)]
    for _ in range(300):
        rel, start, data = rng.choice(files)
        bad = _damage(rng, data)
        want, want_end = _reference(bad, rel, start)
        rows, end = _decode(bad, rel, start, crc=True, records=64)
        assert end == want_end
        assert rows == [_want(m, start, True) for m in want]


def test_window_stops_where_scan_stops() -> None:
    """Same records, same stop position and status as fields.scan, window by window."""
    for name in SCENARIOS:
        for _rel, start, data in _files(name):
            a = fields.as_bytes(data)
            table, pos, status = fields.scan_buffer(data, file_start=start, cap=len(data) // 91 + 1)
            w, q, st_ = commitlog_columns.Decoder(len(data) // 91 + 1).window(
                a, 0, len(a), file_start=start)
            assert (w.n, q, st_) == (table.shape[1], pos, status)
            assert w.int64("fileOffset").tolist() == table[fields.F_POS].tolist()


_PROP_TEXT = st.lists(
    st.sampled_from(list("ab\x01\x02é€") + ["TAGS", "KEYS", "UNIQ_KEY"]), max_size=12
).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PROP_TEXT, min_size=1, max_size=6))
def test_property_split_equals_parse_properties_on_any_text(raws: list[str]) -> None:
    from mqtool.formats.commitlog import build_message, make_message

    recs, p = [], 0
    for i, raw in enumerate(raws):
        m = make_message(topic=f"T{i}", properties_raw=raw, body=b"x" * i, physical_offset=p)
        recs.append(build_message(m))
        p += len(recs[-1])
    data = b"".join(recs)
    dec = commitlog_columns.Decoder(8, data_bytes=8)  # tiny: windows end early, buffers grow
    maps: list[dict[str, str]] = []
    picks: dict[str, list[str | None]] = {"tags": [], "keys": [], "uniqKey": []}
    for w in dec.file(data):
        maps += _maps(w)
        for name, got in picks.items():
            got += _strings(w, name)
    assert dec.end.kind == "eof"
    assert maps == [parse_properties(r) for r in raws]
    for name, key in (("tags", "TAGS"), ("keys", "KEYS"), ("uniqKey", "UNIQ_KEY")):
        assert picks[name] == [parse_properties(r).get(key) for r in raws]


def test_to_arrow_gives_every_messages_column() -> None:
    pa = pytest.importorskip("pyarrow")
    rel, start, data = _files("4.9.7/journey")[0]
    want, _ = _reference(data, rel, start)
    dec = commitlog_columns.Decoder()
    cols = next(iter(dec.file(data, file=rel, file_start=start))).to_arrow(store="s", file=rel)
    assert cols["topic"].to_pylist()[: len(want)] == [m.topic for m in want]
    assert cols["properties"].type == pa.map_(pa.string(), pa.string())
    assert cols["crcOk"].null_count == len(cols["crcOk"])
    assert cols["magic"].to_pylist()[0] == f"{want[0].magic:#010x}"
    assert cols["store"].to_pylist()[0] == "s"
    assert set(cols) >= {"fileOffset", "offsetMsgId", "bornHost", "compressionType", "tags"}


def test_host_text_of_any_ipv4_and_port() -> None:
    rng = random.Random(5)
    d = np.zeros(64, dtype=np.uint8)
    for _ in range(2000):
        ip = bytes(rng.randrange(256) for _ in range(4))
        port = rng.choice([0, 9, 10, 99, 100, 65535, 2**31 - 1, -1, -(2**31),
                           rng.randrange(-(2**31), 2**31)])
        n = arrow._host4(d, 3, np.frombuffer(ip, dtype=np.uint8), 0, port)
        assert bytes(d[3 : 3 + n]).decode() == f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}:{port}"


def test_native_crc32_equals_zlib() -> None:
    """The machine's CRC-32 the kernel calls (libdeflate or zlib) gives zlib's value, and a
    damaged body is caught by it."""
    import zlib

    from mqtool.formats.commitlog import build_message, make_message

    fn, kind = jit.native_crc32()
    assert kind in (0, 1, 2) and (fn != 0) == (kind != 0)
    rng = random.Random(9)
    recs, p = [], 0
    for n in (0, 1, 7, 8, 9, 63, 64, 1000, 4097, 70000):
        body = bytes(rng.randrange(256) for _ in range(n))
        m = make_message(topic="T", body=body, physical_offset=p)
        assert m.body_crc == zlib.crc32(body) & 0x7FFFFFFF
        recs.append(build_message(m))
        p += len(recs[-1])
    data = bytearray(b"".join(recs))
    for native in (True, False):
        dec = commitlog_columns.Decoder(native_crc=native)
        oks = [bool(x) for w in dec.file(bytes(data), check_crc=True) for x in w.crc_ok]
        assert oks == [True] * len(recs)
    data[p - 5] ^= 1  # a byte of the last (70000-byte) body
    oks = [bool(x) for w in commitlog_columns.Decoder().file(bytes(data), check_crc=True)
           for x in w.crc_ok]
    assert oks == [True] * (len(recs) - 1) + [False]
