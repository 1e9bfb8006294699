"""The official 5.3.3 Java client against ``mqtool serve --dialect 5.3.3`` and against the
real 5.3.3 broker (``Flow.java``): the producer, transaction and rebalance flows of
:mod:`test_java`, with their checks; the SQL92 filters only 5.x knows (CONTAINS, STARTSWITH,
ENDSWITH and their NOT forms), both sides with ``enablePropertyFilter``; ``deleteTopic``
through the real 5.3.3 ``mqadmin``; and, after every flow, the transaction journeys as
``mqtool trace`` reads each store.

A 5.3.3 broker writes the op records of ended transactions in batches
(``transactionOpBatchInterval``, 3 s); serve writes each at once. With a
``transactionTimeOut`` or a ``transactionCheckInterval`` under that interval the real broker
checks back transactions already ended (committed or rolled back, or checked once and answered)
and, answered UNKNOW, puts their half messages back at each check until it discards them to
``TRANS_CHECK_MAX_TIME_TOPIC``, which serve's store does not show. Both sides therefore run
with a 10 s timeout and a 5 s check interval here (:data:`CONF`); a check of an ended
transaction that a busy machine still causes is answered UNKNOW and left out of the
comparison of what the clients saw, as in :mod:`test_java`.

Each side is started once for the module, on 127.0.0.1, over a fresh store, with the same
broker.conf (:data:`harness.BROKER_CONF`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
import realmq

from tests.serve.differential import harness
from tests.serve.differential.test_java import (
    TX_VERDICTS,
    test_produce,
    test_rebalance,
    test_transaction,
)

pytestmark = pytest.mark.slow

__all__ = ["test_produce", "test_rebalance", "test_transaction"]

VERSION = "5.3.3"
SIDES = ("real", "serve")
#: The harness's broker.conf with the 5.3.3 broker's op record batches (3 s) written well
#: before a transaction is checked back, and again.
CONF = {**harness.BROKER_CONF, "transactionTimeOut": "10000",
        "transactionCheckInterval": "5000"}


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Sides]:
    s = harness.Sides(VERSION, tmp_path_factory.mktemp("diff-5.3.3"), CONF)
    s.start()
    try:
        yield s
    finally:
        s.kill()


def test_sql92_filters_of_5x(sides: harness.Sides) -> None:
    harness.compare_flow("filter5", sides.flow("filter5", "F5"))


def admin(s: harness.Sides, side: str, *args: str) -> str:
    """The real 5.3.3 ``mqadmin`` against one side: what it printed (stdout, then stderr)."""
    home = s.work / f"admin-{side}"
    home.mkdir(exist_ok=True)
    res = realmq.mqadmin(VERSION, s.namesrv[side], *args, home=home, cwd=home)
    return res.stdout + res.stderr


def test_delete_topic(sides: harness.Sides) -> None:
    """deleteTopic of a topic with messages and a group that consumed them: the same output,
    then no route (17), no topic config, no consume queue files, on both sides."""
    for side in SIDES:
        realmq.produce(VERSION, sides.namesrv[side], "DelT5", 3, prefix="d",
                       home=sides.work / f"p-{side}")
        realmq.consume_all(VERSION, sides.namesrv[side], "DelT5", "DelG5", 3,
                           home=sides.work / f"c-{side}")
    out = {side: admin(sides, side, "deleteTopic", "-c", "DefaultCluster", "-t", "DelT5")
           for side in SIDES}
    said = {side: [ln for ln in text.splitlines() if "delete topic" in ln]
            for side, text in out.items()}
    assert said["real"] == said["serve"] and len(said["serve"]) == 2, out
    out = {side: admin(sides, side, "topicRoute", "-t", "DelT5") for side in SIDES}
    codes = {side: re.findall(r"CODE: (\d+)", text)[:1] for side, text in out.items()}
    assert codes == {"real": ["17"], "serve": ["17"]}, out
    for side, store in sides.stores.items():
        assert '"DelT5"' not in (store / "config" / "topics.json").read_text(), side
        cq = store / "consumequeue" / "DelT5"
        assert not cq.exists() or not any(cq.rglob("*")), (side, sorted(cq.rglob("*")))


def test_stores_agree(sides: harness.Sides) -> None:
    """After every flow: the transaction flow's journeys, with the same verdicts, as trace
    reads each store (a half message put back at each check, counted once)."""
    codes = sides.stop()
    assert codes["serve"] == 0, sides.serve.stderr()
    real, serve = sides.stores["real"], sides.stores["serve"]
    for key, verdict in TX_VERDICTS.items():
        real_tx = harness.trace_view(real, key, once=True)
        serve_tx = harness.trace_view(serve, key, once=True)
        harness.assert_same(f"trace --key {key}", real_tx, serve_tx)
        assert [json.loads(t)["verdict"] for t in real_tx] == [verdict], (key, real_tx)
