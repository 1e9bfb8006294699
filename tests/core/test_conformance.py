"""The JSON contract agrees with the ground-truth manifests of the real RocketMQ stores.

This pins, inside the test suite, what ../shared/conformance/check verifies: every message
field, every consume-queue unit, checkpoint and delayOffset, lookups by offsetMsgId/UNIQ_KEY,
and every index query of manifest/index_queries.jsonl.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re

import pytest
from typer.testing import CliRunner

from conftest import MSG_FIELDS, manifest_json, manifest_jsonl, scenario_dir, store_dir
from mqtool.cli import app
from mqtool.jsonview import cq_dict, message_dict
from mqtool.overview import inspect_store
from mqtool.store import Store
from mqtool.store.search import find_by_key


def _host(v: str) -> tuple[object, int]:
    ip, _, port = v.rpartition(":")
    return ipaddress.ip_address(ip.strip("[]")), int(port)


def test_messages_agree_with_manifest(scenario: str) -> None:
    truth = [r for r in manifest_jsonl(scenario, "commitlog.jsonl") if r["kind"] == "msg"]
    with Store.open(store_dir(scenario)) as st:
        got = {m.physical_offset: message_dict(m) for m in st.messages()}
        assert not [f for f in st.findings if f.kind != "layout"]
    assert len(got) == len(truth)
    for want in truth:
        mine = got[want["phyOffset"]]
        for mf, of in MSG_FIELDS.items():
            w, g = want.get(mf), mine[of]
            if w in (None, "") and g in (None, ""):
                continue
            assert g == w, (want["phyOffset"], of)
        assert _host(mine["bornHost"]) == _host(want["bornHost"])
        assert _host(mine["storeHost"]) == _host(want["storeHost"])


def test_bodies_and_decompression(scenario: str) -> None:
    truth = {r["phyOffset"]: r for r in manifest_jsonl(scenario, "commitlog.jsonl")
             if r["kind"] == "msg"}
    compressed = 0
    with Store.open(store_dir(scenario)) as st:
        for m in st.messages():
            want = truth[m.physical_offset]
            assert hashlib.sha256(m.body).hexdigest() == want["bodySha256"]
            assert m.properties_raw == want["propertiesRaw"]
            if want.get("compressed"):
                compressed += 1
                assert m.compression_type == want["compressionType"]
                assert hashlib.sha256(m.decompressed_body()).hexdigest() == \
                    want["uncompressedSha256"]
            crc = m.prop_crc()
            if crc is not None:  # 5.x __CRC32# property
                assert crc[0] == crc[1]
    if scenario.endswith("4.9.7/plain"):
        assert compressed > 0


def test_cq_agrees_with_manifest(scenario: str) -> None:
    truth = manifest_jsonl(scenario, "consumequeue.jsonl")
    with Store.open(store_dir(scenario)) as st:
        got = {
            (d["topic"], d["queueId"], d["queueOffset"]): d
            for t, q in st.queue_ids() for d in map(cq_dict, st.queue_entries(t, q))
        }
    assert len(got) == len(truth)
    for w in truth:
        d = got[(w["topic"], w["queueId"], w["index"])]
        assert (d["commitLogOffset"], d["storeSize"], d["tagsCode"]) == \
            (w["phyOffset"], w["size"], w["tagsCode"])


def test_inspect_checkpoint_delay_offset_and_queues(scenario: str) -> None:
    with Store.open(store_dir(scenario)) as st:
        d = inspect_store(st).data
    cp = manifest_json(scenario, "checkpoint.json")
    for k in ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp"):
        assert d["checkpoint"][k] == cp[k]
    raw = (scenario_dir(scenario) / "manifest" / "delayOffset.json").read_text()
    table = re.search(r'"offsetTable":(\{[^}]*\})', raw)
    assert table
    want = json.loads(re.sub(r"([{,\s])(-?\d+):", r'\1"\2":', table.group(1)))
    assert d["delayOffset"] == {str(k): v for k, v in want.items()}
    summary = manifest_json(scenario, "summary.json")
    assert d["abort"] == summary["abortFilePresent"]
    assert d["commitlog"]["messages"] == summary["messages"]
    queues = {(t["topic"], q["queueId"]): q for t in d["topics"] for q in t["queues"]}
    for q in summary["consumeQueues"]:
        mine = queues[(q["topic"], q["queueId"])]
        assert (mine["minOffset"], mine["maxOffset"]) == (q["minOffset"], q["maxOffset"])
    assert "commitlogFiles" in summary
    ends = {f["file"].split("/")[-1]: f for f in d["commitlog"]["files"]}
    assert sorted(ends) == sorted(f["file"] for f in summary["commitlogFiles"])
    blanks = {r["file"]: r for r in manifest_jsonl(scenario, "commitlog.jsonl")
              if r["kind"] == "blank"}
    for f in summary["commitlogFiles"]:
        mine = ends[f["file"]]
        assert (mine["messages"], mine["end"], mine["size"]) == \
            (f["messages"], f["end"], f["fileSize"]), f["file"]
        if f["end"] == "blank":
            # RocketMQ's data end of a file closed by a BLANK record is the file's end (the
            # BLANK fills it); mqtool's dataEnd is where the BLANK record starts. Both must
            # agree with the manifest's BLANK record: its offset, and its size up to the end.
            blank = blanks[f["file"]]
            assert mine["dataEnd"] == blank["fileOffset"], f["file"]
            assert mine["dataEnd"] + blank["totalSize"] == f["dataEnd"] == f["fileSize"], f["file"]
        else:
            assert f["file"] not in blanks
            assert mine["dataEnd"] == f["dataEnd"], f["file"]
    assert sum(f["end"] == "blank" for f in summary["commitlogFiles"]) == len(blanks)
    assert d["commitlog"]["maxOffset"] == summary["maxPhyOffset"]
    assert sum(f["end"] == "blank" for f in summary["commitlogFiles"]) == summary["blanks"]


def test_index_queries_all_found(scenario: str) -> None:
    """Every queryMessage(topic, key) RocketMQ answered is answered the same through the index."""
    queries = manifest_jsonl(scenario, "index_queries.jsonl")
    with Store.open(store_dir(scenario)) as st:
        assert st.has_index
        for q in queries:
            offsets = set(st.query_index(q["topic"], q["key"]))
            assert set(q["expectedPhyOffsets"]) <= offsets
        # collisions are filtered by reading the record: KEYS and UNIQ_KEY lookups are exact
        for q in queries[:: max(1, len(queries) // 150)]:
            found, via = find_by_key(st, q["key"], topic=q["topic"])
            uniq, _ = find_by_key(st, q["key"], topic=q["topic"], uniq=True)
            assert via == "index"
            assert {m.physical_offset for m in found + uniq} == set(q["expectedPhyOffsets"])


def test_lookup_by_ids_via_cli(scenario: str) -> None:
    truth = [r for r in manifest_jsonl(scenario, "commitlog.jsonl") if r["kind"] == "msg"]
    by_uniq: dict[str, set[int]] = {}
    for r in truth:
        if r.get("uniqKey"):
            by_uniq.setdefault(r["uniqKey"], set()).add(r["phyOffset"])
    runner = CliRunner()
    for r in truth[:: max(1, len(truth) // 12)]:
        res = runner.invoke(app, ["msg", str(store_dir(scenario)), r["offsetMsgId"], "--json"])
        assert res.exit_code == 0, res.output
        assert {m["commitLogOffset"] for m in json.loads(res.stdout)} == {r["phyOffset"]}
        if r.get("uniqKey"):
            res = runner.invoke(app, ["msg", str(store_dir(scenario)), r["uniqKey"], "--json"])
            assert res.exit_code == 0, res.output
            assert {m["commitLogOffset"] for m in json.loads(res.stdout)} == \
                by_uniq[r["uniqKey"]]


def test_uniq_key_lookup_without_index_scans(store_copy) -> None:  # type: ignore[no-untyped-def]
    root = store_copy("4.9.7/journey")
    for p in (root / "index").iterdir():
        p.unlink()
    truth = [r for r in manifest_jsonl("4.9.7/journey", "commitlog.jsonl") if r["kind"] == "msg"]
    key = truth[6]["uniqKey"]
    want = {r["phyOffset"] for r in truth if r.get("uniqKey") == key}
    with Store.open(root) as st:
        found, via = find_by_key(st, key, uniq=True)
    assert via == "scan"
    assert {m.physical_offset for m in found} == want
    assert len(want) > 5  # j-always-0: original, schedule and retry copies, DLQ


@pytest.mark.parametrize("cmd", [["messages", "--jsonl"], ["cq", "--jsonl"], ["inspect", "--json"]])
def test_cli_json_equals_library(cmd: list[str]) -> None:
    root = store_dir("4.9.7/journey")
    res = CliRunner().invoke(app, [cmd[0], str(root), *cmd[1:]])
    assert res.exit_code == 0, res.output
    with Store.open(root) as st:
        if cmd[0] == "messages":
            lib = [message_dict(m) for m in st.messages()]
            assert [json.loads(x) for x in res.stdout.splitlines()] == lib
        elif cmd[0] == "cq":
            lib = [cq_dict(e) for t, q in st.queue_ids() for e in st.queue_entries(t, q)]
            assert [json.loads(x) for x in res.stdout.splitlines()] == lib
        else:
            assert json.loads(res.stdout) == json.loads(json.dumps(inspect_store(st).data))


def test_scenario_dirs_have_manifests() -> None:
    for name in ("4.9.7/plain", "4.9.7/journey", "5.3.3/plain"):
        assert (scenario_dir(name) / "manifest" / "commitlog.jsonl").exists()
