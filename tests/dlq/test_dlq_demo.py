"""`mqtool dlq` on a demo store (reference store with failing consumers), resent in place."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mqtool.cli import app
from mqtool.dlq.outgoing import RESEND_ID_PROPERTY
from mqtool.refstore.demo import build_demo
from mqtool.refstore.engine import RefStore, StoreConfig
from mqtool.store import Store
from mqtool.trace import trace_id

SMALL = StoreConfig(commitlog_file_size=1 << 20, cq_entries_per_file=1000, index_hash_slots=1000,
                    index_max_entries=4000, store_host="192.168.0.10:10911")
runner = CliRunner()


def test_demo_store_list_export_and_resend_in_place(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    summary = build_demo(root, messages=300, config=SMALL, end_time=1_795_296_000_000)
    assert summary.dlq
    res = runner.invoke(app, ["dlq", "list", str(root), "--json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.stdout)
    assert {g["dlqTopic"]: g["count"] for g in listed} == summary.dlq
    for g in listed:
        res = runner.invoke(app, ["dlq", "export", str(root), "-g", g["group"]])
        rows = [json.loads(x) for x in res.stdout.splitlines()]
        assert len(rows) == g["count"]
        assert {r["originalTopic"] for r in rows} == set(g["originalTopics"])
        with Store.open(root) as st:
            for r in rows:  # ORIGIN_MESSAGE_ID names the first copy, in the original topic
                first = st.find_by_offset_msg_id(r["originMsgId"])
                assert first is not None and first.topic == r["originalTopic"]
                assert first.uniq_key == r["uniqKey"]

    group = listed[0]["group"]
    retry = f"%RETRY%{group}"
    with RefStore.open(root) as rs:
        before = {q: rs.max_offset(retry, q) for q in rs.queue_ids(retry)}
    res = runner.invoke(app, ["dlq", "resend", str(root), "-g", group, "--target", str(root),
                              "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["sent"] == listed[0]["count"]
    res = runner.invoke(app, ["dlq", "list", str(root), "--json"])
    assert json.loads(res.stdout)[0]["resent"] == listed[0]["count"]
    # a consumer pulling the retry topic from where it stood sees exactly the resent copies
    with RefStore.open(root) as rs:
        pulled = [m for q in rs.queue_ids(retry)
                  for m in rs.pull(group, retry, q, offset=before.get(q, 0),
                                   max_nums=1000).messages]
    assert sorted(m.properties[RESEND_ID_PROPERTY] for m in pulled) == sorted(
        o["resendId"] for o in rep["outcomes"])
    with Store.open(root) as st:
        t = trace_id(st, rep["outcomes"][0]["uniqKey"])
        assert [h.kind for h in t.hops][-2:] == ["dlq", "resend"]
        assert t.hops[-1].offset_msg_id == rep["outcomes"][0]["msgId"]
