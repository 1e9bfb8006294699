"""formats.commitlog_columns equals formats.commitlog field for field, on every real record and on
damaged files (same records, same FileEnd as scan_file)."""

from __future__ import annotations

import random
import struct

import pytest

from conftest import SCENARIOS, store_dir
from mqtool.formats import commitlog_columns
from mqtool.formats.commitlog import CommitLogMessage, FileEnd, parse_message
from mqtool.formats.walker import scan_file


def _files(name: str) -> list[tuple[str, int, bytes]]:
    return [(f"commitlog/{p.name}", int(p.name), p.read_bytes())
            for p in sorted((store_dir(name) / "commitlog").iterdir())]


def _reference(data: bytes, rel: str, start: int) -> tuple[list[CommitLogMessage], FileEnd]:
    items = list(scan_file(data, file=rel, file_start=start))
    end = items[-1]
    assert isinstance(end, FileEnd)
    return [i for i in items if isinstance(i, CommitLogMessage)], end


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_real_record_equals_parse_message(name: str) -> None:
    total = 0
    for rel, start, data in _files(name):
        want, want_end = _reference(data, rel, start)
        cols, end = commitlog_columns.decode_file(data, file=rel, file_start=start)
        assert end == want_end
        assert len(cols) == len(want)
        for i, m in enumerate(want):
            got = cols.message(i)
            assert got == m, (rel, i)
            assert got.body == m.body and got.properties_raw == m.properties_raw
            assert parse_message(data, int(cols["position"][i]), file_start=start) == m
        assert cols.topic.strings() == [m.topic for m in want]
        assert cols.properties.strings() == [m.properties_raw for m in want]
        assert cols["body_length"].tolist() == [len(m.body) for m in want]
        total += len(want)
    assert total > 0


def test_columns_cover_v2_ipv6_and_compressed_records() -> None:
    seen = {"v2": 0, "born6": 0, "store6": 0, "compressed": 0}
    for name in SCENARIOS:
        for rel, start, data in _files(name):
            cols, _ = commitlog_columns.decode_file(data, file=rel, file_start=start)
            if not len(cols):
                continue
            seen["v2"] += int((cols["magic"] == 0xDAA320AB).sum())
            seen["born6"] += int(cols["born_v6"].sum())
            seen["store6"] += int(cols["store_v6"].sum())
            seen["compressed"] += int((cols["sys_flag"] & 1).sum())
    assert all(seen.values()), seen


def _damage(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    i = rng.randrange(len(b))
    op = rng.randrange(5)
    if op == 0:
        b[i] ^= 1 << rng.randrange(8)
    elif op == 1:
        b[i : i + 4] = struct.pack(">i", rng.choice([0, -1, 91, 2**31 - 1, 300]))[: len(b) - i]
    elif op == 2:
        del b[i:]
    elif op == 3:
        b[i : i + 300] = bytes(len(b[i : i + 300]))
    else:
        b[i : i + 2] = b"\xff\xfe"[: len(b) - i]
    return bytes(b)


def test_damaged_files_end_like_scan_file() -> None:
    rng = random.Random(7)
    files = [f for name in SCENARIOS for f in _files(name)]
    for _ in range(300):
        rel, start, data = rng.choice(files)
        bad = _damage(rng, data)
        want, want_end = _reference(bad, rel, start)
        cols, end = commitlog_columns.decode_file(bad, file=rel, file_start=start)
        assert end == want_end
        assert [cols.message(i) for i in range(len(cols))] == want


def test_walk_stops_at_zeros_and_batches_agree() -> None:
    rel, start, data = _files("4.9.7/plain")[0]
    positions, q = commitlog_columns.walk(data)
    want, end = _reference(data, rel, start)
    assert positions[: len(want)] == [m.physical_offset - start for m in want]
    small, _ = commitlog_columns.decode_file(data, file=rel, file_start=start, batch=7)
    assert [small.message(i) for i in range(len(small))] == want
    assert q >= end.physical_offset - start
