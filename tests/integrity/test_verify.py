"""``mqtool verify`` on the real fixture stores and on seeded damage: every damage is found at
its file and in-file offset, exit status 1; clean stores exit 0; nothing is ever written."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from integrity_damage import (
    FIXTURES,
    copy_store,
    manifest,
    messages,
    patch,
    put_i64,
    read_at,
    run,
    tree_digest,
    verify_json,
)

SCENARIOS = ["4.9.7/plain", "4.9.7/plain-crashed", "4.9.7/journey", "5.3.3/plain"]
JOURNEY = "4.9.7/journey"


def _errors(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in doc["findings"] if f["severity"] == "error"]


def _has(doc: dict[str, Any], file: str, offset: int, kind: str | None = None) -> bool:
    return any(
        f["file"] == file and f["offset"] == offset and (kind is None or f["kind"] == kind)
        for f in _errors(doc)
    )


@pytest.mark.parametrize("name", SCENARIOS)
def test_real_stores_have_no_errors_and_stay_byte_identical(name: str) -> None:
    store = FIXTURES / name / "store"
    before = tree_digest(store)
    rc, doc = verify_json(store)
    assert rc == 0, _errors(doc)
    assert _errors(doc) == []
    s = doc["summary"]
    assert s["messages"] == len(messages(name))
    assert s["consumeQueueUnits"] == len(manifest(name, "consumequeue.jsonl"))
    assert s["indexEntries"] == len(manifest(name, "index_entries.jsonl"))
    assert doc["restartWouldLose"]["lostMessages"] == 0
    assert tree_digest(store) == before


def test_crashed_store_is_info_not_error() -> None:
    rc, doc = verify_json(FIXTURES / "4.9.7/plain-crashed" / "store")
    assert rc == 0
    kinds = {(f["file"], f["severity"]) for f in doc["findings"]}
    assert ("abort", "info") in kinds
    assert ("commitlog/00000000000003407872", "info") in kinds  # pre-allocated, all zero
    assert doc["restartWouldLose"]["recovery"].startswith("abnormal")


def test_human_output_prints_summary_findings_and_restart_section(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    patch(store / "commitlog" / "00000000000000004096", 4, bytes(4))
    res = run("verify", store)
    assert res.returncode == 1
    assert "commitlog" in res.stdout and "messages" in res.stdout
    assert "commitlog/00000000000000004096 @ 0x0" in res.stdout
    assert "restart would lose" in res.stdout
    assert res.stderr.startswith("error:")


def test_torn_tail(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    last = messages(JOURNEY)[-1]
    path = store / "commitlog" / last["file"]
    # the writer died inside the last record: only TOTALSIZE, MAGICCODE and BODYCRC reached
    # the disk
    patch(path, last["fileOffset"] + 12, bytes(last["size"] - 12))
    before = tree_digest(store)
    rc, doc = verify_json(store)
    assert rc == 1
    assert _has(doc, f"commitlog/{last['file']}", last["fileOffset"])
    loss = doc["restartWouldLose"]
    assert loss["cutAt"] == last["phyOffset"]
    assert loss["cutFile"] == f"commitlog/{last['file']}"
    assert loss["cutFileOffset"] == last["fileOffset"]
    assert loss["lostMessages"] == 0  # the torn record was never readable
    assert loss["lostBytes"] > 0
    q = f"{last['topic']}/{last['queueId']}"
    assert loss["cqUnitsDropped"].get(q) == 1  # its unit points at the cut
    assert tree_digest(store) == before


def test_zeroed_magic_mid_file(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    first = next(m for m in messages(JOURNEY) if m["file"] == "00000000000000004096")
    patch(store / "commitlog" / first["file"], first["fileOffset"] + 4, bytes(4))
    rc, doc = verify_json(store)
    assert rc == 1
    assert _has(doc, "commitlog/00000000000000004096", first["fileOffset"])
    assert doc["summary"]["unreadableBytes"] > 0


def test_crc_flip(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    m = next(x for x in messages(JOURNEY) if x["bodyLength"] > 4 and x["file"] ==
             "00000000000000008192")
    path = store / "commitlog" / m["file"]
    # BODY comes before TOPICLEN (1 byte, V1) + TOPIC and PROPERTIESLEN (2) + PROPERTIES
    tail = 1 + len(m["topic"].encode()) + 2 + m["propertiesLength"]
    body_at = m["fileOffset"] + m["size"] - tail - m["bodyLength"]
    b = read_at(path, body_at, 1)
    patch(path, body_at, bytes([b[0] ^ 0xFF]))
    rc, doc = verify_json(store)
    assert rc == 1
    assert _has(doc, f"commitlog/{m['file']}", m["fileOffset"], "crc-mismatch")
    # RocketMQ recovers with checkCRCOnRecover: the normal recovery starts at the third-last
    # file and stops at the bad record
    assert doc["restartWouldLose"]["cutAt"] == m["phyOffset"]
    rc2, doc2 = verify_json(store, "--no-crc")
    assert not any(f["kind"] == "crc-mismatch" for f in doc2["findings"])


def test_cq_unit_past_data(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    units = [u for u in manifest(JOURNEY, "consumequeue.jsonl")
             if u["topic"] == "JourneyTopic" and u["queueId"] == 0]
    last = units[-1]
    path = store / "consumequeue" / "JourneyTopic" / "0" / last["file"]
    pos = last["fileOffset"] + 20
    assert pos < path.stat().st_size
    end = doc_end = verify_json(store)[1]["summary"]["dataEnd"]
    patch(path, pos, struct.pack(">qiq", end + 100, 200, 0))
    rc, doc = verify_json(store)
    assert rc == 1
    assert _has(doc, f"consumequeue/JourneyTopic/0/{last['file']}", pos, "cq")
    assert doc["restartWouldLose"]["cqUnitsDropped"] == {"JourneyTopic/0": 1}
    assert doc_end == doc["summary"]["dataEnd"]


def test_index_entry_damaged(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    entries = manifest(JOURNEY, "index_entries.jsonl")
    e = entries[5]
    path = store / "index" / e["file"]
    size = path.stat().st_size
    slots = (size - 40) // (4 + 4 * 20)  # RocketMQ's ratio: 4 entries per slot
    pos = 40 + slots * 4 + e["index"] * 20
    put_i64(path, pos + 4, e["phyOffset"] + 3)  # phyOffset now points inside a record
    rc, doc = verify_json(store)
    assert rc == 1
    assert _has(doc, f"index/{e['file']}", pos, "index")


def test_empty_config_with_bak(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    (store / "config" / "delayOffset.json").write_bytes(b"")
    rc, doc = verify_json(store)
    assert rc == 1
    assert _has(doc, "config/delayOffset.json", 0, "config")
    assert doc["restartWouldLose"]["configsFromBak"] == ["config/delayOffset.json.bak"]


def test_delay_offset_beyond_queue_max(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    p = store / "config" / "delayOffset.json"
    text = p.read_text("utf-8")
    assert "3:" in text
    p.write_text(text.replace("3:", "3:9", 1), "utf-8")  # level 3's offset grows a digit
    rc, doc = verify_json(store)
    assert rc == 1
    hit = [f for f in _errors(doc) if f["file"] == "config/delayOffset.json"]
    assert hit and "beyond the max offset" in hit[0]["detail"]
    assert hit[0]["offset"] == len(text[: text.index("3:")].encode())


def test_checkpoint_ahead_of_data(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    last_ts = max(m["storeTimestamp"] for m in messages(JOURNEY))
    put_i64(store / "checkpoint", 0, last_ts + 3_600_000)
    rc, doc = verify_json(store)
    assert rc == 1
    assert _has(doc, "checkpoint", 0, "checkpoint")


def test_not_a_store_is_one_line(tmp_path: Path) -> None:
    res = run("verify", tmp_path)
    assert res.returncode == 1
    assert res.stderr.startswith("error:") and "Traceback" not in res.stderr
