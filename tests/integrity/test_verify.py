"""``mqtool verify`` on the real fixture stores and on seeded damage: every damage is found at
its file and in-file offset, exit status 1; clean stores exit 0; nothing is ever written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from integrity_damage import (
    FIXTURES,
    JOURNEY,
    SEEDS,
    copy_store,
    cq_unit_past_data,
    crc_flip,
    delay_offset_beyond_max,
    empty_config_with_bak,
    manifest,
    messages,
    patch,
    run,
    torn_tail,
    tree_digest,
    verify_json,
    zeroed_magic,
)

SCENARIOS = ["4.9.7/plain", "4.9.7/plain-crashed", "4.9.7/journey", "5.3.3/plain"]


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


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_seeded_damage_is_found_at_its_file_and_offset(seed: str, tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    want = SEEDS[seed](store)
    before = tree_digest(store)
    rc, doc = verify_json(store)
    assert rc == 1
    assert _has(doc, want["file"], want["offset"], want.get("kind")), _errors(doc)
    assert tree_digest(store) == before  # verify is read-only


def test_torn_tail_restart_loss(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    last = torn_tail(store)["msg"]
    loss = verify_json(store)[1]["restartWouldLose"]
    assert loss["cutAt"] == last["phyOffset"]
    assert loss["cutFile"] == f"commitlog/{last['file']}"
    assert loss["cutFileOffset"] == last["fileOffset"]
    assert loss["lostMessages"] == 0  # the torn record was never readable
    assert loss["lostBytes"] > 0
    assert loss["cqUnitsDropped"] == {f"{last['topic']}/{last['queueId']}": 1}


def test_zeroed_magic_counts_unreadable_bytes(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    zeroed_magic(store)
    assert verify_json(store)[1]["summary"]["unreadableBytes"] > 0


def test_crc_flip_stops_rocketmq_recovery(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    m = crc_flip(store)["msg"]
    doc = verify_json(store)[1]
    # checkCRCOnRecover: the normal recovery (last three files) stops at the bad record and
    # drops every record after it
    loss = doc["restartWouldLose"]
    assert loss["cutAt"] == m["phyOffset"]
    after = [x for x in messages(JOURNEY) if x["phyOffset"] > m["phyOffset"]]
    assert loss["lostMessages"] == len(after) + 1
    rc2, doc2 = verify_json(store, "--no-crc")
    assert not any(f["kind"] == "crc-mismatch" for f in doc2["findings"])


def test_cq_unit_past_data_is_dropped_at_restart(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    cq_unit_past_data(store)
    assert verify_json(store)[1]["restartWouldLose"]["cqUnitsDropped"] == {"JourneyTopic/0": 1}


def test_empty_config_falls_back_to_bak_at_restart(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    empty_config_with_bak(store)
    loss = verify_json(store)[1]["restartWouldLose"]
    assert loss["configsFromBak"] == ["config/delayOffset.json.bak"]
    assert loss["configsStopStart"] == []


def test_a_start_config_neither_it_nor_its_bak_loads_stops_the_start(tmp_path: Path) -> None:
    """ConfigManager#load fails when the .bak does not decode either, and the broker's start
    with it (judged by RocketMQ in tests/judge/test_judge_configs.py)."""
    store = copy_store(JOURNEY, tmp_path)
    for name in ("delayOffset.json", "delayOffset.json.bak"):
        (store / "config" / name).write_text("{not json")
    rc, doc = verify_json(store)
    assert rc == 1
    loss = doc["restartWouldLose"]
    assert loss["configsStopStart"] == ["config/delayOffset.json"]
    assert loss["configsFromBak"] == []
    (f,) = [f for f in _errors(doc) if f["file"] == "config/delayOffset.json.bak"]
    assert f["detail"].endswith("cannot be parsed either (unexpected character 'n': expected "
                                "an object key): the broker does not start")


def test_delay_offset_finding_names_the_level(tmp_path: Path) -> None:
    store = copy_store(JOURNEY, tmp_path)
    delay_offset_beyond_max(store)
    hit = [f for f in _errors(verify_json(store)[1]) if f["file"] == "config/delayOffset.json"]
    assert hit and "delay level 3" in hit[0]["detail"]


def test_not_a_store_is_one_line(tmp_path: Path) -> None:
    res = run("verify", tmp_path)
    assert res.returncode == 2
    assert res.stderr.startswith("error:") and "Traceback" not in res.stderr
