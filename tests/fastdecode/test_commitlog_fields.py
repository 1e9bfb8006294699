"""The compiled record scan (formats.commitlog_fields) equals the reference decoder, piece by
piece: the scan's table, the property split, the UTF-8 check, the CRC and the offsetMsgIds."""

from __future__ import annotations

import random
import zlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SCENARIOS, store_dir
from mqtool.formats import commitlog_fields as fields
from mqtool.formats import jit
from mqtool.formats.commitlog import CommitLogMessage, FileEnd, body_crc32, parse_properties
from mqtool.formats.walker import scan_file


def _files() -> list[tuple[str, int, bytes]]:
    return [(f"commitlog/{p.name}", int(p.name), p.read_bytes())
            for name in SCENARIOS for p in sorted((store_dir(name) / "commitlog").iterdir())]


def _reference(data: bytes, start: int) -> tuple[list[CommitLogMessage], FileEnd]:
    items = list(scan_file(data, file_start=start))
    end = items[-1]
    assert isinstance(end, FileEnd)
    return [i for i in items if isinstance(i, CommitLogMessage)], end


def test_scan_fields_equal_parse_message_and_stop_where_scan_file_stops() -> None:
    total = 0
    for _rel, start, data in _files():
        want, end = _reference(data, start)
        table, pos, status = fields.scan_buffer(data, file_start=start, check_crc=True,
                                            cap=len(data) // 91 + 1)
        assert table.shape[1] == len(want)
        # the kernel stops exactly where the reference's clean records end
        assert start + pos == end.physical_offset
        assert status == (fields.STOP_END if end.kind == "eof" else fields.STOP_ANOMALY)
        for i, m in enumerate(want):
            f = table[:, i]
            assert (f[fields.F_SIZE], f[fields.F_MAGIC], f[fields.F_BODY_CRC],
                    f[fields.F_QUEUE_ID], f[fields.F_FLAG], f[fields.F_QUEUE_OFFSET],
                    f[fields.F_PHYS], f[fields.F_SYS_FLAG], f[fields.F_BORN_TS],
                    f[fields.F_BORN_PORT], f[fields.F_STORE_TS], f[fields.F_STORE_PORT],
                    f[fields.F_RECONSUME], f[fields.F_PREPARED]) == (
                m.total_size, m.magic, m.body_crc, m.queue_id, m.flag, m.queue_offset,
                m.physical_offset, m.sys_flag, m.born_timestamp, m.born_host.port,
                m.store_timestamp, m.store_host.port, m.reconsume_times,
                m.prepared_transaction_offset)
            b, t, p = f[fields.F_BODY_POS], f[fields.F_TOPIC_POS], f[fields.F_PROPS_POS]
            assert data[b : b + f[fields.F_BODY_LEN]] == m.body
            assert data[t : t + f[fields.F_TOPIC_LEN]].decode() == m.topic
            assert data[p : p + f[fields.F_PROPS_LEN]].decode() == m.properties_raw
            assert f[fields.F_CRC_OK] == int(body_crc32(m.body) == m.body_crc)
        total += len(want)
    assert total > 0


def test_crc_off_is_marked_unchecked() -> None:
    _rel, start, data = _files()[0]
    table, _, _ = fields.scan_buffer(data, file_start=start, check_crc=False)
    assert table.shape[1] and (table[fields.F_CRC_OK] == -1).all()


def test_split_properties_equals_parse_properties_on_real_records() -> None:
    raws: list[str] = []
    for _rel, start, data in _files():
        raws += [m.properties_raw for m in _reference(data, start)[0]]
    _check_split(raws)


def _check_split(raws: list[str]) -> None:
    enc = [r.encode() for r in raws]
    buf = np.frombuffer(b"".join(enc) or b"\0", dtype=np.uint8)
    lengths = np.array([len(e) for e in enc], dtype=np.int64)
    starts = np.zeros(len(enc), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    splitter = fields.PropertySplitter(2)  # tiny: the scratch must grow
    map_off, k_off, k_data, v_off, v_data, picked = splitter.split(buf, starts, lengths)
    keys, values = bytes(k_data), bytes(v_data)
    for i, raw in enumerate(raws):
        want = parse_properties(raw)
        got = {}
        for j in range(map_off[i], map_off[i + 1]):
            k = keys[k_off[j] : k_off[j + 1]].decode()
            got[k] = values[v_off[j] : v_off[j + 1]].decode()
        assert got == want, raw
        for t, name in enumerate(fields.PICK_NAMES):
            j = picked[t, i]
            assert (values[v_off[j] : v_off[j + 1]].decode() if j >= 0 else None) == want.get(
                name
            )


_PROP_TEXT = st.lists(
    st.sampled_from(list("ab\x01\x02é€") + ["TAGS", "KEYS", "UNIQ_KEY"]), max_size=12
).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PROP_TEXT, max_size=6))
def test_split_properties_equals_parse_properties_on_any_text(raws: list[str]) -> None:
    _check_split(raws)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=12))
def test_utf8_check_equals_python(raw: bytes) -> None:
    try:
        raw.decode("utf-8")
        ok = True
    except UnicodeDecodeError:
        ok = False
    a = np.frombuffer(b"\x00" + raw + b"\xc3", dtype=np.uint8)  # bytes around the range
    assert jit.utf8_ok(a, 1, len(raw)) == ok


def test_utf8_check_on_tricky_sequences() -> None:
    for raw in (b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xe0\x80\xaf",
                b"\xf0\x9f\x98\x80", b"\xe2\x82\xac", b"\xc3", b"\xe2\x82"):
        try:
            raw.decode("utf-8")
            ok = True
        except UnicodeDecodeError:
            ok = False
        assert jit.utf8_ok(np.frombuffer(raw, dtype=np.uint8), 0, len(raw)) == ok, raw


def test_crc32_equals_zlib() -> None:
    rng = random.Random(3)
    for n in (0, 1, 7, 8, 9, 63, 64, 1000, 4097):
        data = bytes(rng.randrange(256) for _ in range(n))
        a = np.frombuffer(b"xyz" + data, dtype=np.uint8)
        assert jit.crc32(a, 3, n, jit.CRC_TABLES) == zlib.crc32(data)


def test_offset_msg_ids_equal_create_message_id() -> None:
    for _rel, start, data in _files():
        want, _ = _reference(data, start)
        if not want:
            continue
        table, _, _ = fields.scan_buffer(data, file_start=start, cap=len(want))
        v6 = (table[fields.F_SYS_FLAG] & 0x20) != 0
        off, text = fields.msg_ids_of(data, table[fields.F_STORE_IP_POS], v6,
                                      table[fields.F_STORE_PORT], table[fields.F_PHYS])
        got = [bytes(text[off[i] : off[i + 1]]).decode() for i in range(len(want))]
        assert got == [m.offset_msg_id for m in want]
