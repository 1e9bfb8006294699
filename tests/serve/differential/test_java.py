"""The official Java client against ``mqtool serve`` and against the real broker of the same
version, flow by flow (``Flow.java``), and the C++ client's batch send; then the two stores
through mqtool's read commands.

Each side is started once for the module, on 127.0.0.1, over a fresh store, with the same
broker.conf (:data:`harness.BROKER_CONF`). Every flow uses topics and groups of its own.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqtool.remoting import bodies
from mqtool.store import Store
from tests.serve.conftest import run_cpp
from tests.serve.differential import harness

pytestmark = pytest.mark.slow

Obs = dict[str, list[dict[str, Any]]]
CPP_BATCH_TOPIC = "CppBatch"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"

# the transaction flow's checks whether and how often a busy machine makes them
TIMING_CHECKS = ("check.ended", "check.again")
# the transaction flow's messages and the journey trace must give each (its consumer
# consumes what was committed)
TX_VERDICTS = {"tx-commit": "consumed", "tx-rollback": "rolled-back",
               "tx-unknown-commit": "consumed", "tx-unknown-rollback": "rolled-back"}


@pytest.fixture(scope="module", params=["4.9.7"])
def sides(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Sides]:
    s = harness.Sides(str(request.param), tmp_path_factory.mktemp(f"diff-{request.param}"))
    s.start()
    try:
        yield s
    finally:
        s.kill()


def steps(obs: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    return [o for o in obs if o["step"] in names]


def test_produce(sides: harness.Sides) -> None:
    """Sync, async, oneway, batch, orderly, delayed and oversize sends; a route lookup of an
    unknown topic; a send that creates its topic."""
    obs = sides.flow("produce", "P")
    harness.compare_flow("produce", obs)
    for side in obs.values():  # what the flow is about holds on both sides
        batch = steps(side, "batch")
        assert [b["status"] for b in batch] == ["SEND_OK"] and batch[0]["msgIds"] == 8
        # the body as sent (compressed) over maxMessageSize: 13 (once: the client does not
        # retry it); the record may be larger than maxMessageSize
        assert [o["code"] for o in steps(side, "oversize", "oversize.record")] == [13, 13]
        assert [o["status"] for o in steps(side, "oversize.plain", "fits.plain")] == [
            "SEND_OK", "SEND_OK"]
        # the name server knows no unknown topic; a send creates one from TBW102
        assert [o["error"] for o in steps(side, "route.unknown")] == ["MQClientException"]
        assert [o["queues"] for o in steps(side, "route.autocreated")] == [4]


def test_transaction(sides: harness.Sides) -> None:
    """Commit and rollback (END_TRANSACTION), unknown then checked back
    (CHECK_TRANSACTION_STATE) and committed or rolled back: the same checks, the same
    deliveries."""
    obs = sides.flow("transaction", "X")
    # a check of a transaction already ended, or a second check before the broker had the
    # first answer, is timing (a busy machine; 5.x writes op records in batches)
    harness.compare_flow("transaction", {side: [o for o in got if o["step"] not in TIMING_CHECKS]
                                         for side, got in obs.items()})
    for side in obs.values():
        assert sorted(o["key"] for o in steps(side, "check")) == [
            "tx-unknown-commit", "tx-unknown-rollback"]
        assert {o["key"] for o in steps(side, "check.again")} <= {
            "tx-unknown-commit", "tx-unknown-rollback"}
        assert sorted(o["m"]["keys"] for o in steps(side, "deliver")) == [
            "tx-commit", "tx-unknown-commit"]
        assert [o["both"] for o in steps(side, "checked", "delivered")] == [True, True]


def test_transaction_producer_dies(sides: harness.Sides) -> None:
    """A producer that dies before it answers a check: its half message stays prepared and
    is checked again until a new producer of its group answers COMMIT; then delivered."""
    died = sides.flow("txdies", "D")
    for side in died.values():
        assert [o["state"] for o in steps(side, "send")] == ["UNKNOW"]
        assert steps(side, "check.dead") == []
    obs = sides.flow("txrevive", "D")
    for side in obs.values():
        # how many checks ran before the new producer was there depends on timing
        for o in steps(side, "check", "deliver"):
            o["m"]["properties"].pop("TRANSACTION_CHECK_TIMES", None)
    harness.compare_flow("txrevive", obs)
    for name, side in obs.items():
        assert [o["key"] for o in steps(side, "check")] == ["tx-dies"], name
        assert [o["ok"] for o in steps(side, "checked", "delivered")] == [True, True], name
        assert [o["m"]["keys"] for o in steps(side, "deliver")] == ["tx-dies"], name


def test_cpp_send_batch(sides: harness.Sides, tmp_path: Path) -> None:
    """The C++ client's send_batch (code 10, batch "1"): both brokers answer SEND_OK; what
    each stored is compared in test_stores_agree."""
    for side, ns in sides.namesrv.items():
        rc, ev, err = run_cpp(tmp_path / side, "produce", ns, CPP_BATCH_TOPIC, "cb",
                              "1", "0", "0", "0", "4")
        assert rc == 0, (side, err)
        assert [(e["mode"], e["status"]) for e in ev if "status" in e] == [
            ("sync", 0), ("batch", 0)], (side, ev)


def stored_cpp_batch(store: Path) -> list[str]:
    """The C++ topic's records: keys, property names, and the messages a body holds when it
    is an encoded batch."""
    out = []
    with Store.open(store) as st:
        for m in st.messages():
            if m.topic != CPP_BATCH_TOPIC:
                continue
            body = zlib.decompress(m.body) if m.compressed else m.body
            inner = [x.body.decode() for x in bodies.decode_batch(body)] if not m.keys else []
            out.append(json.dumps([m.keys, sorted(m.properties), inner]))
    return sorted(out)


def test_rebalance(sides: harness.Sides) -> None:
    """Consumers join and leave a group (NOTIFY_CONSUMER_IDS_CHANGED): the queues each holds
    after each change."""
    obs = sides.flow("rebalance", "R")
    # which consumer got which message is timing: the deliveries are counted, not compared
    harness.compare_flow("rebalance", {side: [o for o in got if o["step"] != "deliver"]
                                 for side, got in obs.items()})
    for side in obs.values():
        assert [o["got"] for o in steps(side, "first", "all")] == [True, True]
        assert [o["queues"] for o in steps(side, "held")] == [[4], [2, 2], [4]]
        assert {o["m"]["keys"] for o in steps(side, "deliver")} == {f"rb-{i}" for i in range(8)}


def half_records(store: Path) -> tuple[list[str], int]:
    """The half messages of the transaction topics but the dead producer's (their topic and
    keys, sorted), and how many half records the dead producer's message has."""
    others, dead = [], 0
    with Store.open(store) as st:
        for m in st.messages():
            if m.topic != HALF_TOPIC:
                continue
            if m.properties.get("REAL_TOPIC") == "DTxDies":
                dead += 1
            else:
                others.append(f"{m.properties.get('REAL_TOPIC')} {m.keys}")
    return sorted(others), dead


def test_stores_agree(sides: harness.Sides) -> None:
    """After every flow: the same topics with the same message counts, the same DLQs, the
    same transaction journeys."""
    codes = sides.stop()
    assert codes["serve"] == 0, sides.serve.stderr()
    real, serve = sides.stores["real"], sides.stores["serve"]
    # a half message of the producer that died is put back at each check that finds no
    # producer: how many times depends on timing, so the half topic is compared without them
    views = {side: [t for t in harness.topics_view(store) if HALF_TOPIC not in t]
             for side, store in (("real", real), ("serve", serve))}
    harness.assert_same("topics (inspect)", views["real"], views["serve"])
    halves = {side: half_records(store) for side, store in (("real", real), ("serve", serve))}
    harness.assert_same(f"{HALF_TOPIC} records", halves["real"][0], halves["serve"][0])
    assert halves["real"][1] >= 1 and halves["serve"][1] >= 1, halves
    harness.assert_same("dead letters (dlq list)", harness.dlq_view(real), harness.dlq_view(serve))
    # the transaction flow's journeys, with their verdicts, as trace reads each store
    for key in TX_VERDICTS:
        real_tx = harness.trace_view(real, key, once=True)
        serve_tx = harness.trace_view(serve, key, once=True)
        harness.assert_same(f"trace --key {key}", real_tx, serve_tx)
        verdicts = [json.loads(t)["verdict"] for t in real_tx]
        assert verdicts == [TX_VERDICTS[key]], (key, real_tx)
    harness.assert_same("the C++ send_batch's records", stored_cpp_batch(real),
                        stored_cpp_batch(serve))
    assert len(stored_cpp_batch(real)) == 2  # the sync send, and the batch as one message
    # the dead producer's transaction: how often it was put back depends on timing
    dies = {side: [json.loads(t)["verdict"] for t in harness.trace_view(store, "tx-dies")]
            for side, store in (("real", real), ("serve", serve))}
    assert dies == {"real": ["consumed"], "serve": ["consumed"]}, dies
