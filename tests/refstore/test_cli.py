"""``mqtool store ...`` and ``mqtool demo``: real stores, read back through the reader."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mqtool.cli import app
from mqtool.refstore.engine import RefStore
from mqtool.refstore.ops import status
from mqtool.store import Store

runner = CliRunner()


def _run(*args: str, code: int = 0, stdin: str | None = None) -> str:
    r = runner.invoke(app, list(args), input=stdin)
    assert r.exit_code == code, (args, r.output, r.exception)
    return r.stdout


def test_store_commands_end_to_end(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    init = json.loads(_run("store", "init", root, "--commitlog-file-size", "64KiB",
                           "--cq-entries", "10", "--index-slots", "64", "--index-entries",
                           "256", "--delay-levels", "1s 2s 3s 4s 5s", "--json"))
    assert init["commitlog_file_size"] == 65536
    lines = "\n".join(
        json.dumps({"topic": "T", "body": f"m{i}", "tags": "B" if i % 2 else "A",
                    "keys": [f"k{i}"], "properties": {"behavior": "x"}})
        for i in range(6)
    )
    put = [json.loads(x) for x in
           _run("store", "produce", root, "-f", "-", "--jsonl", "--now", "1795294973000",
                stdin=lines).splitlines()]
    assert [p["topic"] for p in put] == ["T"] * 6
    counts = json.loads(_run("store", "consume", root, "-g", "cg", "-t", "T", "--fail-tag", "B",
                             "--max-reconsume-times", "1", "--json",
                             "--now", "1795294974000"))
    assert counts == {"ok": 3, "retried": 3, "dlq": 0}
    ticked = json.loads(_run("store", "tick", root, "--advance", "10s", "--json"))
    assert len(ticked["delivered"]) == 3
    assert all(d["topic"] == "%RETRY%cg" for d in ticked["delivered"])
    counts = json.loads(_run("store", "consume", root, "-g", "cg", "-t", "T", "--fail-tag", "B",
                             "--json"))
    assert counts == {"ok": 0, "retried": 0, "dlq": 3}
    sb = json.loads(_run("store", "send-back", root, "-g", "cg", "--offset",
                         str(put[0]["physicalOffset"]), "--delay-level", "-1", "--json"))
    assert sb["topic"] == "%DLQ%cg"
    st = json.loads(_run("store", "status", root, "--json"))
    with RefStore.open(root) as s:
        assert st == status(s)  # the CLI's JSON is the library's result
    assert {"topic": "%DLQ%cg", "queueId": 0, "maxOffset": 4} in st["queues"]
    with Store.open(root) as reader:
        assert not reader.findings
        assert sum(1 for _ in reader.messages()) == 6 + 3 + 3 + 3 + 1


def test_second_writer_refused_by_cli(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with RefStore.open(root):
        # same process: refused by the in-process registry (other processes: fcntl lock,
        # see test_engine); the message is one line, exit status 3 (environment)
        r = runner.invoke(app, ["store", "produce", str(root), "-t", "T"])
        assert r.exit_code == 3
        assert "already open for writing" in r.output
        # read commands still work on the locked store
        r = runner.invoke(app, ["messages", str(root)])
        assert r.exit_code == 0, r.output


def test_demo_builds_a_realistic_store(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    out = json.loads(_run("demo", str(root), "--messages", "600", "--json"))
    topics = out["topics"]
    assert topics["%DLQ%cg_orders"] > 0 and topics["%RETRY%cg_orders"] > 0
    assert out["pendingDelayed"]  # still pending in SCHEDULE_TOPIC_XXXX
    assert {"OK", "FAIL_ONCE", "FAIL_TWICE", "FAIL_ALWAYS", "DLQ_DIRECT"} <= set(out["behaviors"])
    with Store.open(root) as st:
        msgs = list(st.messages())
        assert not st.findings
        dlq = [m for m in msgs if m.topic.startswith("%DLQ%")]
        assert {m.properties["behavior"] for m in dlq} <= {"FAIL_ALWAYS", "DLQ_DIRECT"}
        direct = [m for m in dlq if m.properties["behavior"] == "DLQ_DIRECT"]
        assert direct and all(m.reconsume_times == 1 for m in direct)
        maxed = [m for m in dlq if m.topic == "%DLQ%cg_orders"
                 and m.properties["behavior"] == "FAIL_ALWAYS"]
        assert maxed and all(m.reconsume_times == 4 for m in maxed)  # 3 retries, then DLQ
        twice = {m.uniq_key for m in msgs if m.properties.get("behavior") == "FAIL_TWICE"
                 and m.topic.startswith("%RETRY%") and m.reconsume_times == 2}
        assert twice
    text = _run("demo", str(tmp_path / "demo2"), "--messages", "200")
    assert "try next:" in text and "mqtool dlq list" in text
    r = runner.invoke(app, ["demo", str(root)])
    assert r.exit_code == 2  # refuses to overwrite a store
