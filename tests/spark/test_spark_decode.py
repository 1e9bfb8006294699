"""The bulk decoders (no Spark): equal to the single-process decoder and to the manifests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SCENARIOS, manifest_jsonl, store_dir
from mqtool.formats.commitlog import CommitLogMessage, parse_properties
from mqtool.formats.walker import scan_file
from mqtool.jsonview import message_dict
from mqtool.spark import auxfiles, decode, splits
from mqtool.spark.schema import CQ_SCHEMA, INDEX_SCHEMA, MESSAGE_SCHEMA, RECORD_SCHEMA


def _commitlog_files(scenario: str) -> list[Path]:
    return sorted((store_dir(scenario) / "commitlog").iterdir())


def _records(path: Path, start: int = 0, end: int | None = None) -> list[dict[str, Any]]:
    size = path.stat().st_size
    batches = decode.decode_commitlog_range(
        str(path), store="s", name=f"commitlog/{path.name}", file_start=int(path.name),
        start=start, end=size if end is None else end,
    )
    return pa.Table.from_batches(list(batches), schema=RECORD_SCHEMA).to_pylist()


def expected_row(m: CommitLogMessage, file: str, file_start: int) -> dict[str, Any]:
    """What the messages table must hold for a record of the single-process decoder."""
    d = message_dict(m)
    d.update(
        file=file, fileOffset=m.physical_offset - file_start, propertiesRaw=m.properties_raw
    )
    return d


def test_schema_is_the_json_contract() -> None:
    assert RECORD_SCHEMA.names[2:] == MESSAGE_SCHEMA.names
    assert {"commitLogOffset", "storeSize", "tagsCode", "queueOffset"} <= set(CQ_SCHEMA.names)
    assert {"keyHash", "commitLogOffset", "prevIndex"} <= set(INDEX_SCHEMA.names)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_vectorised_decoder_equals_parse_message(scenario: str) -> None:
    n = 0
    for path in _commitlog_files(scenario):
        base = int(path.name)
        ref = [
            r for r in scan_file(path.read_bytes(), file=path.name, file_start=base)
            if isinstance(r, CommitLogMessage)
        ]
        table = decode.decode_commitlog_file_messages(str(path), store="s")
        assert table.schema == MESSAGE_SCHEMA
        rows = table.to_pylist()
        assert len(rows) == len(ref)
        for row, m in zip(rows, ref, strict=True):
            row["properties"] = dict(row["properties"])
            exp = expected_row(m, f"commitlog/{path.name}", base)
            assert {k: row[k] for k in exp} == exp
            n += 1
    assert n == sum(1 for r in manifest_jsonl(scenario, "commitlog.jsonl") if r["kind"] == "msg")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_decoder_matches_the_manifest(scenario: str) -> None:
    """Independent truth: RocketMQ's own MessageDecoder output for every record."""
    got: dict[tuple[str, int], dict[str, Any]] = {}
    for path in _commitlog_files(scenario):
        for r in _records(path):
            got[(path.name, r["fileOffset"])] = r
    manifest = manifest_jsonl(scenario, "commitlog.jsonl")
    assert len(got) == len(manifest)
    for m in manifest:
        r = got[(m["file"], m["fileOffset"])]
        if m["kind"] == "blank":
            assert (r["recordType"], r["storeSize"]) == ("blank", m["totalSize"])
            continue
        assert r["recordType"] == "msg"
        assert dict(r["properties"]) == m["properties"]
        for ours, theirs in [
            ("commitLogOffset", "phyOffset"), ("storeSize", "size"), ("magic", "magic"),
            ("bodyCRC", "bodyCRC"), ("topic", "topic"), ("queueId", "queueId"),
            ("flag", "flag"), ("queueOffset", "queueOffset"), ("sysFlag", "sysFlag"),
            ("bornTimestamp", "bornTimestamp"), ("storeTimestamp", "storeTimestamp"),
            ("reconsumeTimes", "reconsumeTimes"),
            ("preparedTransactionOffset", "preparedTransactionOffset"),
            ("bodyLength", "bodyLength"), ("propertiesRaw", "propertiesRaw"), ("tags", "tags"),
            ("keys", "keys"), ("uniqKey", "uniqKey"), ("offsetMsgId", "offsetMsgId"),
            ("crcOk", "crcOk"),
        ]:
            assert r[ours] == m[theirs], (m["file"], m["fileOffset"], ours)
        assert r["storeHost"].endswith(f":{m['storeHostPort']}")


@pytest.mark.parametrize("split", [97, 1000, 4096, 65536 + 13])
def test_any_split_size_yields_every_record_once(split: int) -> None:
    for path in _commitlog_files("4.9.7/plain"):
        whole = [(r["recordType"], r["fileOffset"]) for r in _records(path)]
        size = path.stat().st_size
        pieces = []
        for start in range(0, size, split):
            pieces += [
                (r["recordType"], r["fileOffset"]) for r in _records(path, start, start + split)
            ]
        assert pieces == whole


def test_split_plan_covers_each_file_exactly() -> None:
    planned = splits.plan_splits([str(store_dir("4.9.7/plain"))], "commitlog", split_size=100_000)
    by_file: dict[str, list[tuple[int, int]]] = {}
    for s in planned:
        by_file.setdefault(s.name, []).append((s.start, s.end))
    for name, ranges in by_file.items():
        size = (store_dir("4.9.7/plain") / name).stat().st_size
        assert ranges[0][0] == 0 and ranges[-1][1] == size
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    packed = splits.pack(planned, 300_000)
    assert [s for p in packed for s in p] == planned


def test_partitions_are_one_wave_over_the_slots_within_bounds() -> None:
    mib, gib = 1 << 20, 1 << 30
    assert splits.partition_size(2 * gib, 2) == gib  # one task per core
    assert splits.partition_size(512 * mib, 2) == 256 * mib
    assert splits.partition_size(10 * mib, 8) == splits.DEFAULT_PARTITION_BYTES  # at least
    assert splits.partition_size(32 * gib, 2) == splits.MAX_PARTITION_BYTES  # many tasks
    assert splits.partition_size(0, 0) == splits.DEFAULT_PARTITION_BYTES
    planned = [splits.Split("commitlog", "s", f"/f{i}", f"f{i}", 0, 0, 128 * mib, 128 * mib)
               for i in range(17)]
    packed = splits.pack_for(planned, None, 2)  # 17 x 128 MiB on 2 slots, 1 GiB at most
    assert [len(p) for p in packed] == [8, 8, 1]
    assert [len(p) for p in splits.pack_for(planned[:8], None, 2)] == [4, 4]
    assert [s for p in packed for s in p] == planned
    assert len(splits.pack_for(planned, 128 * mib, 2)) == 17  # a given size wins


@pytest.mark.parametrize(
    "raw",
    [
        "", "a\x01b", "a\x01b\x02", "\x01b\x02a\x01", "ab\x02a\x01b\x01c",
        "WAIT\x01true\x02K\x01v\x02WAIT\x01false", "k\x01\x02x\x01y", "é\x01ü\x02😀\x01🚀",
        "\x02\x02\x02", "ab", "k\x01v\nw\x02x\x01\x01y",
    ],
)
def test_property_maps_follow_string2messageProperties(raw: str) -> None:
    maps, picked = decode.property_maps(pa.array([raw, "TAGS\x01t\x02KEYS\x01a b"], pa.string()))
    assert dict(maps.to_pylist()[0]) == parse_properties(raw)
    assert picked["TAGS"].to_pylist()[1] == "t" and picked["KEYS"].to_pylist()[1] == "a b"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_consume_queue_units_match_the_manifest(scenario: str) -> None:
    rows = []
    for s in splits.plan_splits([str(store_dir(scenario))], "consumequeue"):
        for b in auxfiles.decode_cq_file(
            s.path, store=s.store, name=s.name, topic=s.topic, queue_id=s.queue_id, base=s.base
        ):
            rows += b.to_pylist()
    got = {(r["topic"], r["queueId"], r["queueOffset"]): r for r in rows}
    manifest = manifest_jsonl(scenario, "consumequeue.jsonl")
    assert len(got) == len(rows) == len(manifest)
    for m in manifest:
        r = got[(m["topic"], m["queueId"], m["index"])]
        assert (r["commitLogOffset"], r["storeSize"], r["tagsCode"]) == (
            m["phyOffset"], m["size"], m["tagsCode"]
        )
        assert r["file"].endswith(m["file"]) and r["fileOffset"] == m["fileOffset"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_index_entries_match_the_manifest(scenario: str) -> None:
    rows = []
    for s in splits.plan_splits([str(store_dir(scenario))], "index"):
        for b in auxfiles.decode_index_file(s.path, store=s.store, name=s.name):
            rows += b.to_pylist()
    got = {(r["file"], r["entry"]): r for r in rows}
    manifest = manifest_jsonl(scenario, "index_entries.jsonl")
    assert len(got) == len(manifest)
    for m in manifest:
        r = got[(f"index/{m['file']}", m["index"])]
        assert (r["keyHash"], r["commitLogOffset"], r["timeDiff"], r["prevIndex"]) == (
            m["keyHash"], m["phyOffset"], m["timeDiffSec"], m["prevIndex"]
        )


def test_damage_becomes_unreadable_regions_and_decoding_goes_on(tmp_path: Path) -> None:
    src = store_dir("4.9.7/journey") / "commitlog" / "00000000000000004096"
    data = bytearray(src.read_bytes())
    ref = [
        r for r in scan_file(bytes(data), file_start=4096) if isinstance(r, CommitLogMessage)
    ]
    second, fourth = ref[1], ref[3]
    p2, p4 = second.physical_offset - 4096, fourth.physical_offset - 4096
    data[p2 + 4 : p2 + 8] = b"\xde\xad\xbe\xef"  # bad magic
    data[p4 : p4 + 40] = bytes(40)  # a hole of zeros over a header
    path = tmp_path / "00000000000000004096"
    path.write_bytes(bytes(data))
    os.sync()
    rows = _records(path)
    bad = [
        (r["fileOffset"], r["storeSize"], r["detail"])
        for r in rows if r["recordType"] == "unreadable"
    ]
    assert [b[:2] for b in bad] == [(p2, second.total_size), (p4, fourth.total_size)]
    assert "bad magic" in bad[0][2] and "zero" in bad[1][2]
    msgs = [r["fileOffset"] for r in rows if r["recordType"] == "msg"]
    assert msgs == [m.physical_offset - 4096 for m in ref if m not in (second, fourth)]


def test_pruned_columns_equal_the_full_decode() -> None:
    """The audits' narrow pass: same values in the asked columns, nulls elsewhere."""
    cols = frozenset({"fileOffset", "topic", "queueId", "storeSize", "crcOk", "properties"})
    for path in _commitlog_files("4.9.7/journey"):
        full = _records(path)
        batches = decode.decode_commitlog_range(
            str(path), store="s", name=f"commitlog/{path.name}", file_start=int(path.name),
            start=0, end=path.stat().st_size, columns=cols, properties_for=("%DLQ%",),
        )
        narrow = pa.Table.from_batches(list(batches), schema=RECORD_SCHEMA).to_pylist()
        assert len(narrow) == len(full)
        for f, n in zip(full, narrow, strict=True):
            assert (n["recordType"], n["fileOffset"]) == (f["recordType"], f["fileOffset"])
            if f["recordType"] != "msg":
                continue
            for c in cols - {"properties"}:
                assert n[c] == f[c]
            assert n["uniqKey"] is None and n["bornHost"] is None
            if f["topic"].startswith("%DLQ%"):
                assert dict(n["properties"]) == dict(f["properties"])
            else:
                assert n["properties"] is None


@given(st.lists(st.text(alphabet="ab\x01\x02é😀 ", max_size=12), min_size=1, max_size=20))
@settings(max_examples=300, deadline=None)
def test_property_maps_equal_parse_properties_on_any_text(raws: list[str]) -> None:
    maps, picked = decode.property_maps(pa.array(raws, pa.string()))
    for raw, got in zip(raws, maps.to_pylist(), strict=True):
        assert dict(got) == parse_properties(raw)


def test_records_that_lie_about_themselves_are_unreadable(tmp_path: Path) -> None:
    """Magic and TOTALSIZE fine, but PHYSICALOFFSET or the field lengths wrong."""
    src = store_dir("4.9.7/journey") / "commitlog" / "00000000000000008192"
    data = bytearray(src.read_bytes())
    ref = [r for r in scan_file(bytes(data), file_start=8192) if isinstance(r, CommitLogMessage)]
    p1, p3 = ref[1].physical_offset - 8192, ref[3].physical_offset - 8192
    data[p1 + 28 : p1 + 36] = (ref[1].physical_offset + 1).to_bytes(8, "big")  # PHYSICALOFFSET
    data[p3 + 84 : p3 + 88] = (ref[3].body_length + 1).to_bytes(4, "big")  # BODYLEN
    path = tmp_path / "00000000000000008192"
    path.write_bytes(bytes(data))
    rows = _records(path)
    bad = [(r["fileOffset"], r["storeSize"]) for r in rows if r["recordType"] == "unreadable"]
    assert bad == [(p1, ref[1].total_size), (p3, ref[3].total_size)]
    details = [r["detail"] for r in rows if r["recordType"] == "unreadable"]
    assert "PHYSICALOFFSET" in details[0] and details[1].startswith("bad ")
    msgs = [r["fileOffset"] for r in rows if r["recordType"] == "msg"]
    assert msgs == [m.physical_offset - 8192 for m in ref if m not in (ref[1], ref[3])]


def test_a_record_whose_topic_is_not_utf8_is_unreadable(tmp_path: Path) -> None:
    src = store_dir("4.9.7/journey") / "commitlog" / "00000000000000000000"
    data = bytearray(src.read_bytes())
    ref = [r for r in scan_file(bytes(data), file_start=0) if isinstance(r, CommitLogMessage)]
    victim = ref[2]
    topic_at = victim.physical_offset + 88 + victim.body_length + 1  # V1: 1-byte length
    assert data[topic_at : topic_at + len(victim.topic)] == victim.topic.encode()
    data[topic_at] = 0xFF
    path = tmp_path / "00000000000000000000"
    path.write_bytes(bytes(data))
    rows = _records(path)
    bad = [r for r in rows if r["recordType"] == "unreadable"]
    assert [(r["fileOffset"], r["storeSize"]) for r in bad] == [
        (victim.physical_offset, victim.total_size)
    ]
    assert "UTF-8" in bad[0]["detail"]
    assert len([r for r in rows if r["recordType"] == "msg"]) == len(ref) - 1


def test_an_unreadable_index_file_gives_no_rows_and_a_finding(tmp_path: Path) -> None:
    from mqtool.spark.scan import layout_findings

    root = tmp_path / "store"
    shutil.copytree(store_dir("4.9.7/journey"), root)
    index_file = next((root / "index").iterdir())
    data = bytearray(index_file.read_bytes())
    data[36:40] = (10**9).to_bytes(4, "big")  # indexCount far beyond the file
    index_file.write_bytes(bytes(data))
    rows = list(auxfiles.decode_index_file(str(index_file), store="s", name="index/x"))
    assert rows == []
    found = layout_findings(str(root))
    assert [(store, f.kind, f.file) for store, f in found] == [
        (str(root), "index", f"index/{index_file.name}")
    ]
