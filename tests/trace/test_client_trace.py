"""Client trace records (RMQ_SYS_TRACE_TOPIC) as the real 5.3.3 Java client wrote them: read
whole, and shown as what the clients reported in `trace`.

The store is fixtures/rocketmq-stores/5.3.3/trace (real broker, real producers and consumers
with trace on, transactions committed, rolled back and checked back; scenario-log.txt is what
the clients did).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from mqtool.formats.clienttrace import parse_trace_body
from mqtool.formats.rules import TRACE_TOPIC
from mqtool.store import Store

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "fixtures" / "rocketmq-stores" / "5.3.3" / "trace"
STORE = TRACE / "store"


def _scenario() -> list[list[str]]:
    return [line.split() for line in (TRACE / "scenario-log.txt").read_text().splitlines()]


def _mqtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqtool", *args], capture_output=True,
                          text=True, check=False)


def test_every_trace_record_reads_and_names_what_the_clients_did() -> None:
    events = []
    with Store.open(STORE) as s:
        for m in s.messages():
            if m.topic == TRACE_TOPIC:
                events += parse_trace_body(m.decompressed_body())
    kinds = Counter(e.type for e in events)
    sent = {w[3]: w[2] for w in _scenario() if w[1] == "send"}  # msgId -> key
    # a Pub for every send, an EndTransaction for every transactional one (and its checks)
    pubs = {e.msg_id: e for e in events if e.type == "Pub"}
    assert set(pubs) == set(sent)
    assert all(pubs[i].keys == k and pubs[i].success for i, k in sent.items())
    assert kinds["SubBefore"] == kinds["SubAfter"] > 0
    ends = [e for e in events if e.type == "EndTransaction"]
    first = {w[3]: w[4] for w in _scenario() if w[1] == "send" and len(w) > 4}
    for msg_id, state in first.items():
        own = [dict(e.detail) for e in ends if e.msg_id == msg_id]
        assert own and own[0]["transactionState"] == state, (msg_id, own)
        assert own[0]["fromTransactionCheck"] == "false"
        assert all(d["fromTransactionCheck"] == "true" for d in own[1:])


def test_trace_shows_the_send_and_the_consume_the_clients_reported() -> None:
    consumed = {w[2] for w in _scenario() if w[1] == "consumed"}
    sends = [w for w in _scenario() if w[1] == "send" and w[2] in consumed and len(w) == 4]
    key, msg_id = sends[0][2], sends[0][3]
    res = _mqtool("trace", str(STORE), msg_id, "--json")
    assert res.returncode == 0, res.stderr
    events = json.loads(res.stdout)["clientTrace"]
    types = [e["type"] for e in events]
    assert types[0] == "Pub" and "SubBefore" in types and "SubAfter" in types, types
    pub = events[0]
    assert (pub["group"], pub["topic"], pub["keys"], pub["success"]) == (
        "pg_trace", "TraceTopic", key, True)
    after = next(e for e in events if e["type"] == "SubAfter")
    assert after["group"] == "cg_trace" and after["success"] is True
    assert after["detail"]["contextCode"] == "SUCCESS"
    text = _mqtool("trace", str(STORE), msg_id)
    assert text.returncode == 0, text.stderr
    assert "client trace: " in text.stdout and "sent       by pg_trace" in text.stdout


def test_the_journey_page_lists_what_the_clients_reported(tmp_path: Path) -> None:
    msg_id = next(w[3] for w in _scenario() if w[1] == "send" and w[2] == "trace-3")
    page = tmp_path / "journey.html"
    res = _mqtool("trace", str(STORE), msg_id, "--html", str(page))
    assert res.returncode == 0, res.stderr
    html = page.read_text()
    assert "What the clients reported (3 events" in html
    assert "by pg_trace" in html and "by cg_trace" in html


def test_a_checked_transaction_shows_the_clients_answers() -> None:
    unknown = next(w[3] for w in _scenario() if w[1] == "send" and w[-1] == "UNKNOW")
    res = _mqtool("trace", str(STORE), unknown, "--json")
    assert res.returncode == 0, res.stderr
    ends = [e for e in json.loads(res.stdout)["clientTrace"] if e["type"] == "EndTransaction"]
    assert ends[0]["detail"]["transactionState"] == "UNKNOW"
    assert ends[0]["detail"]["fromTransactionCheck"] == "false"
    assert any(e["detail"]["fromTransactionCheck"] == "true" for e in ends[1:]), ends


def test_a_trace_record_that_does_not_read_is_named_and_exit_1(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(STORE, store)
    first = sorted((store / "commitlog").iterdir())[0]
    msg_id, = (w[3] for w in _scenario() if w[1] == "send" and w[2] == "trace-0")
    data = bytearray(first.read_bytes())
    at = data.index(f"{msg_id}\x01".encode())
    pub = data.rindex(b"Pub\x01", 0, at)
    data[pub + 4] = ord("x")  # the Pub's timestamp is no longer a number
    first.write_bytes(data)
    res = _mqtool("trace", str(store), msg_id)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "sent " not in res.stdout  # the damaged context only: the others still read
    other = next(w[3] for w in _scenario() if w[1] == "send" and w[2] == "trace-1")
    res1 = _mqtool("trace", str(store), other)
    assert res1.returncode == 1 and "sent       by pg_trace" in res1.stdout, res1.stdout
    assert "commitlog/00000000000000000000 @ " in res.stderr
    assert "Pub timestamp 'x" in res.stderr
