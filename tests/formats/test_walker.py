"""formats.walker: the one commitlog walker, on the real stores and on seeded damage.

Damage is seeded into copies of the fixture files' bytes (never the fixtures themselves); the
manifests (RocketMQ's own reading of each store) say where every record is.
"""

from __future__ import annotations

import random
import struct
from collections import defaultdict
from typing import Any

import pytest

from conftest import SCENARIOS, manifest_jsonl, store_dir
from mqtool.formats.commitlog import BlankRecord, CommitLogMessage, FileEnd, parse_message
from mqtool.formats.commitlog_layout import MIN_RECORD_SIZE
from mqtool.formats.errors import FINDING_KINDS, Finding
from mqtool.formats.walker import Unreadable, looks_like_record_at, next_record, scan_file, walk

JOURNEY = "4.9.7/journey"


def _file(name: str, file: str) -> tuple[str, int, bytes]:
    p = store_dir(name) / "commitlog" / file
    return f"commitlog/{file}", int(file), p.read_bytes()


def _manifest_by_file(name: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in manifest_jsonl(name, "commitlog.jsonl"):
        if r["kind"] == "msg":
            out[r["file"]].append(r)
    return out


def _blank_filler(name: str) -> dict[str, int]:
    """Per file, where the BLANK record's filler starts (bytes nobody reads, as in RocketMQ)."""
    return {r["file"]: r["fileOffset"] + 8 for r in manifest_jsonl(name, "commitlog.jsonl")
            if r["kind"] == "blank"}


def _walk(data: bytes, rel: str, start: int, **kw: Any) -> tuple[
    list[CommitLogMessage], list[Finding], FileEnd
]:
    items = list(walk(data, file=rel, file_start=start, **kw))
    end = items[-1]
    assert isinstance(end, FileEnd)
    assert not any(isinstance(i, FileEnd) for i in items[:-1])
    msgs = [i for i in items if isinstance(i, CommitLogMessage)]
    return msgs, [i for i in items if isinstance(i, Finding)], end


@pytest.mark.parametrize("name", SCENARIOS)
def test_real_stores_walk_to_the_manifest_without_findings(name: str) -> None:
    by_file = _manifest_by_file(name)
    for p in sorted((store_dir(name) / "commitlog").iterdir()):
        rel, start, data = _file(name, p.name)
        msgs, findings, end = _walk(data, rel, start, check_crc=True)
        assert findings == []
        want = [r["phyOffset"] for r in by_file.get(p.name, [])]
        assert [m.physical_offset for m in msgs] == want
        assert end.clean
        for r in by_file.get(p.name, []):
            assert looks_like_record_at(data, r["fileOffset"], start)
            assert not looks_like_record_at(data, r["fileOffset"] + 1, start)
            assert not looks_like_record_at(data, r["fileOffset"], start + 1)  # PHYSICALOFFSET


def test_blank_and_zero_tails_end_cleanly() -> None:
    rel, start, data = _file(JOURNEY, "00000000000000000000")
    _, findings, end = _walk(data, rel, start)
    assert end.kind == "blank" and findings == []
    items = list(walk(data, file=rel, file_start=start))
    assert isinstance(items[-2], BlankRecord) and items[-2].total_size == len(data) - 3854 + start
    rel, start, data = _file(JOURNEY, "00000000000000016384")
    msgs, findings, end = _walk(data, rel, start)
    assert (end.kind, findings) == ("zeros", []) and len(msgs) == 8
    assert list(walk(bytes(4096), file="commitlog/x")) == [FileEnd(0, "zeros")]


def test_zero_tail_is_the_data_end_without_a_magic_search(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (trace via the index took 1.4 s on a 1 GiB pre-allocated file): the zeros
    after the data are recognised as its end, never searched byte by byte for a magic; a
    non-zero byte after them is still damage, and a sparse file's hole is skipped."""
    import mmap
    import os

    from mqtool.formats import walker

    rel, start, data = _file(JOURNEY, "00000000000000016384")
    searched: list[tuple[int, int]] = []
    real_find = walker._find

    def spy(buf: Any, sub: bytes, lo: int, hi: int) -> int:
        searched.append((lo, hi))
        return real_find(buf, sub, lo, hi)

    monkeypatch.setattr(walker, "_find", spy)
    tail = 8 << 20
    p = tmp_path / "sparse"
    with open(p, "wb") as f:
        f.write(data)
        f.truncate(len(data) + tail)  # a hole: pre-allocated, never written
    fd = os.open(p, os.O_RDONLY)
    try:
        with open(p, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            items = list(walk(mm, file=rel, file_start=start, fd=fd))
        finally:
            mm.close()
    finally:
        os.close(fd)
    end = items[-1]
    assert isinstance(end, FileEnd) and end.kind == "zeros"
    assert not [i for i in items if isinstance(i, Finding)]
    data_end = end.physical_offset - start
    assert all(hi <= data_end + 8 for _, hi in searched), searched
    # dense zeros (a copy that lost the holes): same answer, no search either
    searched.clear()
    dense = data + bytes(tail)
    msgs, findings, end = _walk(dense, rel, start)
    assert (end.kind, findings, searched) == ("zeros", [], [])
    # one stray byte far in the tail is damage, named where the zeros begin
    bad = bytearray(dense)
    bad[len(data) + tail // 2] = 7
    _, findings, end = _walk(bytes(bad), rel, start)
    assert end.kind == "corrupt" and [f.offset for f in findings] == [data_end]
    assert getattr(findings[0], "length", 0) == len(data) + tail // 2 + 1 - data_end


def test_zeroed_magic_is_one_region_and_the_rest_of_the_file_is_read() -> None:
    """The issue's reproduction at the format level: zero the magic of the first record of
    commitlog/00000000000000004096."""
    rel, start, data = _file(JOURNEY, "00000000000000004096")
    want = _manifest_by_file(JOURNEY)["00000000000000004096"]
    bad = bytearray(data)
    bad[4:8] = bytes(4)
    msgs, findings, end = _walk(bytes(bad), rel, start)
    assert [m.physical_offset for m in msgs] == [r["phyOffset"] for r in want[1:]]
    assert end.kind == "blank"
    [f] = findings
    assert isinstance(f, Unreadable)
    assert (f.kind, f.file, f.offset, f.phy, f.length) == (
        "bad-magic", rel, 0, start, want[0]["size"])
    assert str(f).startswith(f"{rel} @ 0x0 (phy {start}): {want[0]['size']} unreadable bytes")
    assert f.to_json()["length"] == want[0]["size"]
    # the recovery view stops there, as RocketMQ's does
    items = list(scan_file(bytes(bad), file=rel, file_start=start))
    assert items == [FileEnd(start, "corrupt", f.detail)]


def test_zeroed_records_in_the_middle_are_unexpected_zeros() -> None:
    rel, start, data = _file(JOURNEY, "00000000000000004096")
    want = _manifest_by_file(JOURNEY)["00000000000000004096"]
    a, b = want[2]["fileOffset"], want[5]["fileOffset"]
    bad = bytearray(data)
    bad[a:b] = bytes(b - a)
    msgs, findings, _ = _walk(bytes(bad), rel, start)
    assert [m.physical_offset for m in msgs] == [r["phyOffset"] for r in want[:2] + want[5:]]
    assert [(f.kind, f.offset, getattr(f, "length", None)) for f in findings] == [
        ("unexpected-zeros", a, b - a)]


def test_torn_tail_and_crc_mismatch() -> None:
    rel, start, data = _file(JOURNEY, "00000000000000016384")
    want = _manifest_by_file(JOURNEY)["00000000000000016384"]
    last = want[-1]
    bad = bytearray(data)
    cut = last["fileOffset"] + 60
    bad[cut:] = bytes(len(bad) - cut)
    msgs, findings, end = _walk(bytes(bad), rel, start)
    assert len(msgs) == len(want) - 1
    assert [(f.kind, f.offset) for f in findings] == [("torn-record", last["fileOffset"])]
    assert (end.kind, end.physical_offset) == ("torn", last["phyOffset"])
    # a flipped body byte: the record is read, its CRC mismatch is a finding at its offset
    r = next(x for x in want if x["bodyLength"] > 4)
    m = parse_message(data, r["fileOffset"], file_start=start)
    assert isinstance(m, CommitLogMessage)
    topic_len = len(m.topic.encode()) + (2 if m.is_v2 else 1)
    body_pos = r["fileOffset"] + m.total_size - 2 - len(m.properties_raw.encode()) - topic_len \
        - len(m.body)
    assert data[body_pos:body_pos + len(m.body)] == m.body
    flip = bytearray(data)
    flip[body_pos] ^= 0x55
    msgs, findings, _ = _walk(bytes(flip), rel, start, check_crc=True)
    assert len(msgs) == len(want)
    assert [(f.kind, f.offset, f.phy) for f in findings] == [
        ("crc-mismatch", r["fileOffset"], r["phyOffset"])]
    assert _walk(bytes(flip), rel, start)[1] == []  # without check_crc: not looked at


def test_ranges_partition_the_file() -> None:
    rel, start, data = _file("4.9.7/plain", "00000000000000262144")
    whole, _, _ = _walk(data, rel, start)
    for step in (1000, 4096, 65536):
        got: list[int] = []
        for lo in range(0, len(data), step):
            got += [i.physical_offset for i in walk(data, file=rel, file_start=start, start=lo,
                                                    stop=lo + step)
                    if isinstance(i, CommitLogMessage)]
        assert got == [m.physical_offset for m in whole]
    positions = [i for i in walk(data, file=rel, file_start=start, decode=False)
                 if isinstance(i, int)]
    assert [start + p for p in positions] == [m.physical_offset for m in whole]
    assert next_record(data, 1, start) == whole[1].physical_offset - start


@pytest.mark.parametrize("seed", range(6))
def test_random_damage_is_never_hidden(seed: int) -> None:
    """Every record left intact is read; every damaged byte lies in a record that still reads
    (its CRC mismatch reported) or in a reported unreadable region."""
    rng = random.Random(seed)
    by_file = _manifest_by_file("4.9.7/plain")
    filler = _blank_filler("4.9.7/plain")
    names = sorted(by_file)
    for _ in range(20):
        fname = rng.choice(names)
        rel, start, data = _file("4.9.7/plain", fname)
        bad = bytearray(data)
        spans = []
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(0, len(bad) - 64)
            n = rng.choice([1, 4, 8, 40, 300, 2000])
            fill = rng.choice([b"\x00", b"\xff", None])
            chunk = bytes(rng.randrange(256) for _ in range(n)) if fill is None else fill * n
            bad[at:at + n] = chunk[: len(bad) - at]
            spans.append((at, min(len(bad), at + n)))
        changed = [i for a, b in spans for i in range(a, b)
                   if bad[i] != data[i] and i < filler.get(fname, len(data))]
        msgs, findings, _ = _walk(bytes(bad), rel, start, check_crc=True)
        got = {m.physical_offset - start for m in msgs}
        regions = [(f.offset, f.offset + f.length) for f in findings if isinstance(f, Unreadable)]
        crc = {f.offset for f in findings if f.kind == "crc-mismatch"}
        for r in by_file[fname]:
            a, b = r["fileOffset"], r["fileOffset"] + r["size"]
            touched = any(a <= i < b for i in changed)
            if not touched:
                assert a in got, (seed, fname, a)
        for i in changed:
            rec = next((r["fileOffset"] for r in by_file[fname]
                        if r["fileOffset"] <= i < r["fileOffset"] + r["size"]), None)
            in_region = any(a <= i < b for a, b in regions)
            assert in_region or rec in got, (seed, fname, i)
            if rec in got and not in_region:  # read despite a changed byte: header/body only
                assert rec in crc or _same_fields_changed(data, bad, rec), (seed, fname, i)
        for f in findings:
            assert f.kind in FINDING_KINDS and f.file == rel and f.phy == start + (f.offset or 0)


def _same_fields_changed(data: bytes, bad: bytearray, pos: int) -> bool:
    """A changed byte in a record that still reads and whose CRC matches: a field no rule
    checks (a timestamp, queue id, flag, host ...): the walker cannot know."""
    size = struct.unpack_from(">i", data, pos)[0]
    return size >= MIN_RECORD_SIZE


@pytest.mark.parametrize("name", ["4.9.7/journey", "5.3.3/plain"])
def test_position_walk_follows_the_same_rule_as_the_decoding_walk(name: str) -> None:
    """A TOTALSIZE bent to land inside a later record (magic, size and PHYSICALOFFSET still
    fine) is damage for the position-only walk (decode=False) too, at the same offset, and
    both walks resume at the same record (the mutation harness found the two disagreeing)."""
    rel, start, data = _file(name, "00000000000000000000")
    positions = [p for p in walk(data, file=rel, file_start=start, decode=False)
                 if isinstance(p, int)]
    victim, after = positions[3], positions[8]
    bad = bytearray(data)
    struct.pack_into(">i", bad, victim, after - victim)
    fast = [x if isinstance(x, int) else (type(x).__name__, x.offset)
            for x in walk(bytes(bad), file=rel, file_start=start, decode=False)
            if isinstance(x, int | Finding)]
    full = [x.physical_offset - start if isinstance(x, CommitLogMessage)
            else (type(x).__name__, x.offset)
            for x in walk(bytes(bad), file=rel, file_start=start)
            if isinstance(x, CommitLogMessage | Finding)]
    assert fast == full
    assert ("Unreadable", victim) in fast
