"""Real clients in real processes against ``mqtool serve``: produce, consume, retry, DLQ."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.config import parse_consumer_offset
from mqtool.remoting import bodies
from tests.serve.conftest import create_topic, mqtool, run_cpp, run_js

DELAYS = "1s 1s 1s 1s 1s 1s"


def _store_messages(store: Path, topic: str) -> list[CommitLogMessage]:
    from mqtool.store import Store

    with Store.open(store) as st:
        return [m for m in st.messages() if m.topic == topic]


def _store_keys(store: Path, topic: str) -> list[str]:
    return [m.keys or "" for m in _store_messages(store, topic)]


def test_cpp_client_produces_and_consumes(tmp_path: Path, serve_factory: Any) -> None:
    store = tmp_path / "store"
    srv = serve_factory(store)
    rc, ev, err = run_cpp(
        tmp_path / "home", "produce", srv.namesrv, "TopicCpp", "c", "5", "2", "3", "1", "4"
    )
    assert rc == 0, err
    sent = [e for e in ev if e.get("status") is not None]
    assert [e["mode"] for e in sent] == ["sync"] * 5 + ["orderly"] * 3 + ["batch"]
    assert all(e["status"] == 0 for e in sent)
    # the C++ batch travels as code 10 with batch "1", which the broker reads as false
    # (Boolean.parseBoolean): it is stored as one message without keys, its body the batch
    keys = (
        {f"c-sync-{i}" for i in range(5)}
        | {f"c-oneway-{i}" for i in range(2)}
        | {f"c-orderly-{i}" for i in range(3)}
        | {""}
    )
    rc, ev, err = run_cpp(
        tmp_path / "home", "consume", srv.namesrv, "CID-CPP", "TopicCpp", str(len(keys)), "60"
    )
    assert rc == 0, err
    got = [e for e in ev if "key" in e]
    assert {e["key"] for e in got} == keys
    assert {e["queue"] for e in got if e["key"].startswith("c-orderly")} == {1}
    assert srv.stop() == 0, srv.stderr()
    assert not (store / "abort").exists()
    stored = _store_keys(store, "TopicCpp")
    assert sorted(stored) == sorted(keys)  # every message once
    [batch] = [m for m in _store_messages(store, "TopicCpp") if not m.keys]
    inner = bodies.decode_batch(zlib.decompress(batch.body) if batch.sys_flag & 1 else batch.body)
    assert [m.body for m in inner] == [f"body of c-batch-{i}".ljust(2048, ".").encode()
                                       for i in range(4)]
    offsets = parse_consumer_offset((store / "config" / "consumerOffset.json").read_text())
    assert sum(offsets.offset_table["TopicCpp@CID-CPP"].values()) == len(keys)


def test_js_client_produces_and_consumes(tmp_path: Path, serve_factory: Any) -> None:
    store = tmp_path / "store"
    srv = serve_factory(store)
    create_topic(srv.broker, "TopicJs")
    rc, ev, err = run_js(tmp_path / "home", "produce", srv.namesrv, "TopicJs", "j",
                         "6", "3", "2", "1")
    assert rc == 0, err
    assert [e["mode"] for e in ev] == ["sync"] * 6 + ["orderly"] * 3 + ["big"]
    assert {e["status"] for e in ev} == {"SEND_OK"}
    assert {int(e["queue"]) for e in ev if e["mode"] == "orderly"} == {2}
    keys = {e["key"] for e in ev}
    rc, ev, err = run_js(tmp_path / "home", "consume", srv.namesrv, "CID-JS", "TopicJs",
                         str(len(keys)), "60")
    assert rc == 0, err
    got = {e["key"]: e for e in ev if "key" in e}
    assert set(got) == keys
    assert got["j-big-0"]["body"] == "body of j-big-0".ljust(6000, ".")  # sent compressed
    assert {got[k]["queue"] for k in keys if "orderly" in k} == {2}
    assert srv.stop() == 0, srv.stderr()
    assert sorted(_store_keys(store, "TopicJs")) == sorted(keys)


def _journey_checks(store: Path, group: str, bad_key: str, topic: str) -> None:
    dl = mqtool("dlq", "list", str(store), "--json")
    assert dl.returncode == 0, dl.stderr
    groups = {g["group"]: g for g in json.loads(dl.stdout)}
    assert groups[group]["count"] == 1 and groups[group]["originalTopics"] == {topic: 1}
    tr = mqtool("trace", str(store), "--key", bad_key, "--delay-levels", DELAYS, "--json")
    assert tr.returncode == 0, tr.stderr
    traces = json.loads(tr.stdout)["traces"]
    assert [t["verdictKind"] for t in traces] == ["dead-lettered"]
    hops = [h["topic"] for h in traces[0]["hops"]]
    retry, dlq = f"%RETRY%{group}", f"%DLQ%{group}"
    sched = "SCHEDULE_TOPIC_XXXX"
    assert hops == [topic, sched, retry, sched, retry, dlq], hops


def test_cpp_consumer_failures_go_through_retry_to_dlq(tmp_path: Path, serve_factory: Any) -> None:
    store = tmp_path / "store"
    srv = serve_factory(store, "--delay-levels", DELAYS, "--max-reconsume-times", "2")
    home = tmp_path / "home"
    # each in a queue of its own: librocketmq sends back a whole failed pull
    assert run_cpp(home, "produce", srv.namesrv, "TopicDlq", "ok", "0", "0", "1", "0", "0")[0] == 0
    assert run_cpp(home, "produce", srv.namesrv, "TopicDlq", "bad", "0", "0", "1", "1", "0")[0] == 0
    rc, ev, err = run_cpp(
        home, "consume", srv.namesrv, "CID-DLQ", "TopicDlq", "1", "90", "bad", "3"
    )
    assert rc == 0, err + srv.stderr()
    bad = [e for e in ev if e.get("key") == "bad-orderly-0"]
    assert [e["reconsume"] for e in bad] == [0, 1, 2]
    assert srv.stop() == 0, srv.stderr()
    _journey_checks(store, "CID-DLQ", "bad-orderly-0", "TopicDlq")


def test_js_consumer_failures_go_through_retry_to_dlq(tmp_path: Path, serve_factory: Any) -> None:
    store = tmp_path / "store"
    srv = serve_factory(store, "--delay-levels", DELAYS)
    home = tmp_path / "home"
    create_topic(srv.broker, "TopicJsDlq")
    assert run_js(home, "produce", srv.namesrv, "TopicJsDlq", "bad", "1")[0] == 0
    # the client's maxReconsumeTimes header (2) wins over the group's default (16)
    rc, ev, err = run_js(
        home, "consume", srv.namesrv, "CID-JSDLQ", "TopicJsDlq", "0", "90", "bad", "2"
    )
    assert rc == 0, err + srv.stderr()
    assert [e["reconsume"] for e in ev if e.get("key") == "bad-sync-0"] == [0, 1, 2]
    assert srv.stop() == 0, srv.stderr()
    _journey_checks(store, "CID-JSDLQ", "bad-sync-0", "TopicJsDlq")
