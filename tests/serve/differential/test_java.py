"""The official Java client against ``mqtool serve`` and against the real broker of the same
version, flow by flow (``Flow.java``), then the two stores through mqtool's read commands.

Each side is started once for the module, on 127.0.0.1, over a fresh store, with the same
broker.conf (:data:`harness.BROKER_CONF`). Every flow uses topics and groups of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.serve.differential import harness

pytestmark = pytest.mark.slow

Obs = dict[str, list[dict[str, Any]]]

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
    harness.compare_flow("transaction", obs)
    for side in obs.values():
        assert sorted(o["key"] for o in steps(side, "check")) == [
            "tx-unknown-commit", "tx-unknown-rollback"]
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
    checks: dict[str, list[int]] = {}
    for name, side in obs.items():
        # how many checks found no producer depends on timing: compared by presence
        props = [o["m"]["properties"] for o in steps(side, "check")]
        checks[name] = [int(p.pop("TRANSACTION_CHECK_TIMES", "0")) for p in props]
    harness.compare_flow("txrevive", obs)
    for name, side in obs.items():
        assert [o["key"] for o in steps(side, "check")] == ["tx-dies"], name
        assert [o["ok"] for o in steps(side, "checked", "delivered")] == [True, True], name
        assert [o["m"]["keys"] for o in steps(side, "deliver")] == ["tx-dies"], name
    assert all(c and c[0] >= 1 for c in checks.values()), checks


def test_rebalance(sides: harness.Sides) -> None:
    """Consumers join and leave a group (NOTIFY_CONSUMER_IDS_CHANGED): the queues each holds
    after each change."""
    obs = sides.flow("rebalance", "R")
    # which consumer got which message is timing: the deliveries are counted, not compared
    harness.compare_flow("rebalance", {side: [o for o in got if o["step"] != "deliver"]
                                 for side, got in obs.items()})
    for side in obs.values():
        assert [o["got"] for o in steps(side, "first")] == [True]
        assert [o["queues"] for o in steps(side, "held")] == [[4], [2, 2], [4]]
        assert {o["m"]["keys"] for o in steps(side, "deliver")} == {f"rb-{i}" for i in range(8)}


def test_stores_agree(sides: harness.Sides) -> None:
    """After every flow: the same topics with the same message counts, the same DLQs, the
    same transaction journeys."""
    codes = sides.stop()
    assert codes["serve"] == 0, sides.serve.stderr()
    real, serve = sides.stores["real"], sides.stores["serve"]
    harness.assert_same("topics (inspect)", harness.topics_view(real), harness.topics_view(serve))
    harness.assert_same("dead letters (dlq list)", harness.dlq_view(real), harness.dlq_view(serve))
    # the transaction flow's journeys, with their verdicts, as trace reads each store
    for key in TX_VERDICTS:
        real_tx, serve_tx = harness.trace_view(real, key), harness.trace_view(serve, key)
        harness.assert_same(f"trace --key {key}", real_tx, serve_tx)
        verdicts = [json.loads(t)["verdict"] for t in real_tx]
        assert verdicts == [TX_VERDICTS[key]], (key, real_tx)
    # the dead producer's transaction: how often it was put back depends on timing
    dies = {side: [json.loads(t)["verdict"] for t in harness.trace_view(store, "tx-dies")]
            for side, store in (("real", real), ("serve", serve))}
    assert dies == {"real": ["consumed"], "serve": ["consumed"]}, dies
