"""mqtool against stores the real RocketMQ 5.3.3 broker wrote with 5.x options (POP, timer,
RocksDB queues, LMQ, BatchCQ, DLedger, trace and transactions): every record, unit and index
answer as the broker's own readers gave them (fixtures/make-5x-stores), and ``verify`` says
nothing is wrong where nothing is."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, MSG_FIELDS, manifest_json, manifest_jsonl, store_dir
from mqtool.cli import app
from mqtool.integrity import verify
from mqtool.jsonview import message_dict
from mqtool.overview import inspect_store
from mqtool.store import Store
from mqtool.store.search import find_by_key

STORES = sorted(p.parent.parent.name for p in (FIXTURES / "5.3.3").glob("*/manifest/queues.jsonl"))
NAMES = [f"5.3.3/{n}" for n in STORES]



def _msgs(name: str) -> list[dict[str, Any]]:
    return [r for r in manifest_jsonl(name, "commitlog.jsonl") if r["kind"] == "msg"]


def test_every_configuration_is_there() -> None:
    assert set(STORES) >= {"lmq"}


@pytest.mark.parametrize("name", NAMES)
def test_records_as_rocketmq_decodes_them(name: str) -> None:
    truth = _msgs(name)
    with Store.open(store_dir(name)) as st:
        got = {m.physical_offset: m for m in st.messages()}
        assert not st.findings, [str(f) for f in st.findings]
    assert sorted(got) == [r["phyOffset"] for r in truth]
    for want in truth:
        m = got[want["phyOffset"]]
        mine = message_dict(m)
        for mf, of in MSG_FIELDS.items():
            w, g = want.get(mf), mine[of]
            if w in (None, "") and g in (None, ""):
                continue
            assert g == w, (name, want["phyOffset"], of)
        assert m.properties_raw == want["propertiesRaw"]
        assert hashlib.sha256(m.body).hexdigest() == want["bodySha256"]


@pytest.mark.parametrize("name", NAMES)
def test_units_as_the_broker_serves_them(name: str) -> None:
    """Every queue the live broker served (QUERY_CONSUME_QUEUE over its ConsumeQueueInterface:
    file, RocksDB, batch and LMQ queues alike), unit for unit, and its min and max offset."""
    want = {(q["topic"], q["queueId"]): q for q in manifest_jsonl(name, "queues.jsonl")}
    with Store.open(store_dir(name)) as st:
        mine = {tq: [(e.entry.commit_log_offset, e.entry.size, e.entry.tags_code)
                     for e in st.queue_entries(*tq)] for tq in st.queue_ids()}
        infos = {tq: st.queue_info(*tq) for tq in want}
        assert not st.findings, [str(f) for f in st.findings]
    for tq, q in want.items():
        assert [tuple(u) for u in q["units"]] == mine.get(tq), tq
        assert (infos[tq].min_offset, infos[tq].max_offset) == (q["minOffset"], q["maxOffset"]), tq
    assert {tq for tq, us in mine.items() if us} <= set(want)


@pytest.mark.parametrize("name", NAMES)
def test_index_answers_as_query_message(name: str) -> None:
    queries = manifest_jsonl(name, "index_queries.jsonl")
    assert queries
    with Store.open(store_dir(name)) as st:
        for q in queries:
            found, via = find_by_key(st, q["key"], topic=q["topic"], uniq=q["uniq"])
            assert via == "index"
            assert {m.physical_offset for m in found} == set(q["queryMessagePhyOffsets"]), q


@pytest.mark.parametrize("name", NAMES)
def test_verify_finds_nothing_wrong(name: str) -> None:
    r = verify(store_dir(name))
    bad = [str(f) for f in r.findings if str(f.severity) in ("error", "warning")]
    assert not bad
    summary = manifest_json(name, "summary.json")
    assert r.summary["messages"] == summary["messages"]
    res = CliRunner().invoke(app, ["verify", str(store_dir(name)), "--json"])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("name", NAMES)
def test_inspect_and_cq_show_every_queue(name: str) -> None:
    want = {(q["topic"], q["queueId"]): q for q in manifest_jsonl(name, "queues.jsonl")}
    with Store.open(store_dir(name)) as st:
        d = inspect_store(st).data
    queues = {(t["topic"], q["queueId"]): q for t in d["topics"] for q in t["queues"]}
    for tq, q in want.items():
        assert (queues[tq]["minOffset"], queues[tq]["maxOffset"]) == \
            (q["minOffset"], q["maxOffset"]), tq
    res = CliRunner().invoke(app, ["cq", str(store_dir(name)), "--jsonl"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    assert len(rows) == sum(len(q["units"]) for q in want.values())


def test_store_bytes_are_the_brokers() -> None:
    """The committed stores are byte for byte what the broker left (summary.json's digests)."""
    for name in NAMES:
        files = manifest_json(name, "summary.json")["files"]
        root = Path(store_dir(name))
        for rel, f in files.items():
            p = root / rel
            assert hashlib.sha256(p.read_bytes()).hexdigest() == f["sha256"], (name, rel)
        # and nothing beside them: reading (RocksDB included) writes no file into a store
        assert {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} == set(files)
