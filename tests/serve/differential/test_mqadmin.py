"""``mqadmin`` (the real 4.9.7 tools artifact) against ``mqtool serve`` and against the real
broker: the same commands after the same sends, outputs compared where they say the same thing
(addresses, times, client ids and paths differ by nature and are left out).

Each side is started once for the module, on 127.0.0.1, over a fresh store, with the same
broker.conf (:data:`harness.BROKER_CONF`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import realmq

from tests.serve.differential import harness

pytestmark = pytest.mark.slow

VERSION = "4.9.7"
SIDES = ("real", "serve")
#: getBrokerConfig keys whose values name this machine's paths and ports.
PLACES = frozenset({"storePathRootDir", "storePathCommitLog", "listenPort"})


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Sides]:
    s = harness.Sides(VERSION, tmp_path_factory.mktemp("admin"))
    s.start()
    try:
        for side in SIDES:
            realmq.produce(VERSION, s.namesrv[side], "AdmT", 5, home=s.work / f"p-{side}")
        yield s
    finally:
        s.kill()


def admin(s: harness.Sides, side: str, *args: str) -> str:
    """``mqadmin`` against one side: what it printed (stdout, then stderr)."""
    res = realmq.mqadmin(VERSION, s.namesrv[side], *args, home=s.work / f"admin-{side}")
    return res.stdout + res.stderr


def both(s: harness.Sides, *args: str) -> dict[str, str]:
    return {side: admin(s, side, *args) for side in SIDES}


def broker_addr(s: harness.Sides, side: str) -> str:
    return s.real.broker_addr if side == "real" else s.serve.broker


def table(text: str) -> dict[str, str]:
    """``key : value`` / ``key = value`` lines as a dict."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s*[:=]\s+(.*?)\s*$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def rows(text: str) -> list[list[str]]:
    """The data rows of a ``#Header`` table (whitespace separated), header excluded."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if ln.startswith("#")), len(lines))
    return [ln.split() for ln in lines[start + 1:] if not ln.startswith(("\t", " "))
            and "Exception" not in ln]


def error_code(text: str) -> str | None:
    m = re.search(r"CODE: (\d+)", text)
    return m.group(1) if m else None


def test_cluster_list(sides: harness.Sides) -> None:
    out = both(sides, "clusterList")
    got = {side: [r[:3] + [r[4]] for r in rows(text)] for side, text in out.items()}
    assert got["real"] == got["serve"] == [["DefaultCluster", "broker-a", "0", "V4_9_7"]], out


def test_broker_status(sides: harness.Sides) -> None:
    got = {side: table(admin(sides, side, "brokerStatus", "-b", broker_addr(sides, side)))
           for side in SIDES}
    missing = set(got["serve"]) - set(got["real"])
    assert not missing, f"serve says keys the broker does not: {sorted(missing)}"
    for key in ("brokerVersionDesc", "brokerVersion", "msgPutTotalTodayNow",
                "commitLogMinOffset"):
        assert got["real"][key] == got["serve"][key], (key, got)


def test_broker_config(sides: harness.Sides) -> None:
    got = {side: table(admin(sides, side, "getBrokerConfig", "-b", broker_addr(sides, side)))
           for side in SIDES}
    assert len(got["serve"]) > 10, got["serve"]
    differ = {k: (got["real"].get(k), v) for k, v in got["serve"].items()
              if k not in PLACES and got["real"].get(k) != v}
    assert not differ, f"getBrokerConfig (real, serve): {differ}"


def test_topic_status(sides: harness.Sides) -> None:
    out = both(sides, "topicStatus", "-t", "AdmT")
    got = {side: sorted((int(r[2]), int(r[3])) for r in rows(text)) for side, text in out.items()}
    assert got["real"] == got["serve"] and sum(hi for _, hi in got["serve"]) == 5, out
    out = both(sides, "topicStatus", "-t", "Nope")
    assert error_code(out["real"]) == error_code(out["serve"]) == "17", out


def test_update_and_delete_topic(sides: harness.Sides) -> None:
    out = both(sides, "updateTopic", "-c", "DefaultCluster", "-t", "AdmT2", "-r", "2", "-w", "2")
    said = {side: [ln for ln in text.splitlines() if ln.startswith("TopicConfig")]
            for side, text in out.items()}
    assert said["real"] == said["serve"] and len(said["serve"]) == 1, out
    out = both(sides, "topicRoute", "-t", "AdmT2")
    for text in out.values():
        assert '"readQueueNums":2' in text.replace(" ", ""), out
    out = both(sides, "deleteTopic", "-c", "DefaultCluster", "-t", "AdmT2")
    for text in out.values():
        assert "delete topic [AdmT2] from NameServer success." in text, out
    out = both(sides, "topicRoute", "-t", "AdmT2")
    assert error_code(out["real"]) == error_code(out["serve"]) == "17", out


def test_update_sub_group(sides: harness.Sides) -> None:
    out = both(sides, "updateSubGroup", "-c", "DefaultCluster", "-g", "AdmG2")
    said = {side: [re.sub(r"\d+\.\d+\.\d+\.\d+:\d+", "ADDR", ln) for ln in text.splitlines()
                   if "subscription group" in ln or ln.startswith("SubscriptionGroupConfig")]
            for side, text in out.items()}
    assert said["real"] == said["serve"] and len(said["serve"]) == 2, out


def test_producer_connection_of_no_group(sides: harness.Sides) -> None:
    out = both(sides, "producerConnection", "-g", "AdmPx", "-t", "AdmT")
    assert error_code(out["real"]) == error_code(out["serve"]) == "1", out


def test_consumer_connection_and_progress(sides: harness.Sides, tmp_path: Path) -> None:
    """A push consumer of group AdmCg online (it waits for a sixth message that never comes):
    its connection and subscription, then the group's progress once it consumed all five."""
    threads = []
    for side in SIDES:
        t = threading.Thread(target=realmq.java, args=(
            VERSION, "mqtool.realmq.ConsumeAll", sides.namesrv[side], "AdmT", "AdmCg", "6",
            "60000"), kwargs={"class_dir": realmq.programs(VERSION), "timeout": 180,
                              "home": tmp_path / f"c-{side}"}, daemon=True)
        t.start()
        threads.append(t)
    conn: dict[str, list[str]] = {}
    for side in SIDES:
        for _ in range(30):  # until the consumer has registered (its heartbeat)
            text = admin(sides, side, "consumerConnection", "-g", "AdmCg")
            if "CONSUME_PASSIVELY" in text:
                break
        # a connection row: client id, address (machine's), language, version; then the
        # subscriptions (topic, expression) and how the group consumes
        words = [ln.split() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
        conn[side] = sorted(" ".join(w[-2:] if len(w) == 4 else w) for w in words)
    assert conn["real"] == conn["serve"] and len(conn["serve"]) >= 4, conn
    progress: dict[str, list[tuple[int, int]]] = {}
    for side in SIDES:
        for _ in range(30):  # until the consumer's offsets reached the broker
            text = admin(sides, side, "consumerProgress", "-g", "AdmCg")
            got = sorted((int(r[3]), int(r[4])) for r in rows(text)
                         if len(r) > 4 and r[0] == "AdmT" and r[3].isdigit())
            if got and all(b == c for b, c in got):
                break
        progress[side] = got
    assert progress["real"] == progress["serve"], progress
    assert sum(b for b, _ in progress["serve"]) == 5
    for t in threads:
        t.join(200)
