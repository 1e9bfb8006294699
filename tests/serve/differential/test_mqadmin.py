"""``mqadmin`` (the real 4.9.7 tools artifact) against ``mqtool serve`` and against the real
broker: the same commands after the same sends, outputs compared where they say the same thing
(addresses, times, client ids and paths differ by nature and are left out).

Each side is started once for the module, on 127.0.0.1, over a fresh store, with the same
broker.conf (:data:`harness.BROKER_CONF`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import re
import threading
import time
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
            SHELLS[side] = realmq.AdminShell(VERSION, s.namesrv[side], s.work / f"admin-{side}")
            realmq.produce(VERSION, s.namesrv[side], "AdmT", 5, home=s.work / f"p-{side}")
        yield s
    finally:
        for shell in SHELLS.values():
            shell.close()
        SHELLS.clear()
        s.kill()


def attempts(seconds: float = 120) -> Iterator[int]:
    """Numbers for a loop that asks again until it is satisfied (it breaks), for at most
    ``seconds``, half a second apart."""
    deadline = time.monotonic() + seconds
    n = 0
    while True:
        yield n
        if time.monotonic() >= deadline:
            return
        n += 1
        time.sleep(0.5)


#: Each side's mqadmin (one JVM of the real tools per side, for the module).
SHELLS: dict[str, realmq.AdminShell] = {}


def admin(s: harness.Sides, side: str, *args: str) -> str:
    """``mqadmin`` against one side: what it printed (stdout, then stderr)."""
    res = SHELLS[side](*args)
    return res.stdout + res.stderr


def both(s: harness.Sides, *args: str) -> dict[str, str]:
    """The same command against both sides, at the same time (each side has its own JVM)."""
    with concurrent.futures.ThreadPoolExecutor(len(SIDES)) as pool:
        said = {side: pool.submit(admin, s, side, *args) for side in SIDES}
        return {side: f.result() for side, f in said.items()}


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
    for side in SIDES:
        realmq.produce(VERSION, sides.namesrv[side], "AdmT2", 2, prefix="d",
                       home=sides.work / f"p-{side}")
    assert queue_files(sides, "AdmT2") == {side: ["0", "0/00000000000000000000", "1",
                                                  "1/00000000000000000000"] for side in SIDES}
    out = both(sides, "deleteTopic", "-c", "DefaultCluster", "-t", "AdmT2")
    for text in out.values():
        assert "delete topic [AdmT2] from NameServer success." in text, out
    out = both(sides, "topicRoute", "-t", "AdmT2")
    assert error_code(out["real"]) == error_code(out["serve"]) == "17", out
    files = queue_files(sides, "AdmT2")
    assert files["real"] == files["serve"], files
    for side, store in sides.stores.items():
        assert '"AdmT2"' not in (store / "config" / "topics.json").read_text(), side


def queue_files(s: harness.Sides, topic: str) -> dict[str, list[str]]:
    """What each store holds under ``consumequeue/<topic>`` (paths relative to it)."""
    out = {}
    for side, store in s.stores.items():
        root = store / "consumequeue" / topic
        out[side] = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    return out


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
    with contextlib.ExitStack() as online:
        for side in SIDES:
            online.enter_context(realmq.running_java(
                VERSION, "mqtool.realmq.ConsumeAll", sides.namesrv[side], "AdmT", "AdmCg", "6",
                "180000", class_dir=realmq.programs(VERSION), home=tmp_path / f"c-{side}"))
        conn: dict[str, list[str]] = {}
        for side in SIDES:
            for _ in attempts():  # until the consumer has registered (its heartbeat)
                text = admin(sides, side, "consumerConnection", "-g", "AdmCg")
                if "CONSUME_PASSIVELY" in text:
                    break
            # a connection row: client id, address (machine's), language, version; then the
            # subscriptions (topic, expression) and how the group consumes
            words = [ln.split() for ln in text.splitlines()
                     if ln.strip() and not ln.startswith("#")]
            conn[side] = sorted(" ".join(w[-2:] if len(w) == 4 else w) for w in words)
        assert conn["real"] == conn["serve"] and len(conn["serve"]) >= 4, conn
        progress: dict[str, list[tuple[int, int]]] = {}
        for side in SIDES:
            for _ in attempts():  # until the consumer's offsets reached the broker
                text = admin(sides, side, "consumerProgress", "-g", "AdmCg")
                got = sorted((int(r[3]), int(r[4])) for r in rows(text)
                             if len(r) > 4 and r[0] == "AdmT" and r[3].isdigit())
                if got and all(b == c for b, c in got):
                    break
            progress[side] = got
        assert progress["real"] == progress["serve"], progress
        assert sum(b for b, _ in progress["serve"]) == 5


def _offset_rows(text: str) -> list[tuple[int, ...]]:
    """A reset's table (brokerOffset, consumerOffset, timestampOffset, rollbackOffset) per
    queue, without the queue (placement differs between the two brokers)."""
    return sorted(tuple(int(x) for x in r[2:6]) for r in rows(text)
                  if len(r) >= 6 and r[0] == "broker-a")


def _consumed(s: harness.Sides, side: str, group: str, until: int | None = None) -> int:
    """The group's consumer offsets on AdmT, summed; with ``until``, asked again (for up to
    two minutes) until they reach it (a consumer's last offsets are sent oneway as it stops)."""
    for _ in (attempts() if until is not None else range(1)):
        text = admin(s, side, "consumerProgress", "-g", group)
        got = sum(int(r[4]) for r in rows(text) if len(r) > 4 and r[0] == "AdmT"
                  and r[4].isdigit())
        if got == until:
            break
    return got


def test_query_by_key_and_offset(sides: harness.Sides) -> None:
    """queryMsgByKey, then queryMsgByOffset at the queue it names (with who consumed it)."""
    found = {side: rows(admin(sides, side, "queryMsgByKey", "-t", "AdmT", "-k", "m-0"))
             for side in SIDES}
    assert [len(r) for r in found["real"]] == [len(r) for r in found["serve"]] == [3], found
    shown: dict[str, list[str]] = {}
    for side in SIDES:
        qid = found[side][0][1]
        text = admin(sides, side, "queryMsgByOffset", "-t", "AdmT", "-b", "broker-a", "-i",
                     qid, "-o", "0")
        shown[side] = [ln for ln in text.splitlines() if ln.startswith(
            ("Topic:", "Tags:", "Keys:", "Queue Offset:", "Reconsume Times:", "System Flag:",
             "MessageTrack", "WARN"))]
    assert shown["real"] == shown["serve"] and any("m-0" in ln for ln in shown["serve"]), shown


def test_delete_sub_group(sides: harness.Sides) -> None:
    for group in ("AdmG3", "AdmNoSuchGroup"):
        if group == "AdmG3":
            both(sides, "updateSubGroup", "-c", "DefaultCluster", "-g", group)
        out = both(sides, "deleteSubGroup", "-c", "DefaultCluster", "-g", group)
        said = {side: [re.sub(r"\d+\.\d+\.\d+\.\d+:\d+", "ADDR", ln)
                       for ln in text.splitlines() if ln.startswith("delete")]
                for side, text in out.items()}
        assert said["real"] == said["serve"] and len(said["serve"]) == 5, out
    assert "AdmG3" not in (sides.serve.store / "config" / "subscriptionGroup.json").read_text()


def test_update_broker_config(sides: harness.Sides) -> None:
    """A key the broker takes at once: getBrokerConfig shows it; set back afterwards."""
    try:
        for value in ("false", "true"):
            got = {}
            for side in SIDES:
                out = admin(sides, side, "updateBrokerConfig", "-b", broker_addr(sides, side),
                            "-k", "notifyConsumerIdsChangedEnable", "-v", value)
                assert "update broker config success" in out, out
                got[side] = table(admin(sides, side, "getBrokerConfig", "-b",
                                        broker_addr(sides, side)))
                assert got[side]["notifyConsumerIdsChangedEnable"] == value, (side, got[side])
    finally:
        for side in SIDES:
            admin(sides, side, "updateBrokerConfig", "-b", broker_addr(sides, side),
                  "-k", "notifyConsumerIdsChangedEnable", "-v", "true")


def test_reset_offsets_of_an_offline_group(sides: harness.Sides, tmp_path: Path) -> None:
    """resetOffsetByTime and skipAccumulatedMessage of a group that consumed all five and is
    gone: the broker answers CONSUMER_NOT_ONLINE and the tool sets the offsets itself."""
    for side in SIDES:
        realmq.java(VERSION, "mqtool.realmq.ConsumeAll", sides.namesrv[side], "AdmT", "AdmG5",
                    "5", "60000", class_dir=realmq.programs(VERSION), timeout=180,
                    home=tmp_path / f"c-{side}")
    got5 = {side: _consumed(sides, side, "AdmG5", until=5) for side in SIDES}
    assert got5 == {"real": 5, "serve": 5}
    out = both(sides, "resetOffsetByTime", "-g", "AdmG5", "-t", "AdmT", "-s", "0")
    got = {side: _offset_rows(text) for side, text in out.items()}
    assert got["real"] == got["serve"] and len(got["serve"]) == 4, out
    assert {side: _consumed(sides, side, "AdmG5") for side in SIDES} == {"real": 0, "serve": 0}
    out = both(sides, "skipAccumulatedMessage", "-g", "AdmG5", "-t", "AdmT")
    got = {side: _offset_rows(text) for side, text in out.items()}
    assert got["real"] == got["serve"], out
    assert {side: _consumed(sides, side, "AdmG5") for side in SIDES} == {"real": 5, "serve": 5}
    out = both(sides, "resetOffsetByTime", "-g", "AdmNoSuchG", "-t", "AdmT", "-s", "0")
    assert error_code(out["real"]) == error_code(out["serve"]) == "1", out


def test_reset_offsets_of_an_online_group(sides: harness.Sides, tmp_path: Path) -> None:
    """resetOffsetByTime of a group with a push consumer online: the broker computes the
    offsets, passes them to the consumer (RESET_CONSUMER_CLIENT_OFFSET) and answers them."""
    with contextlib.ExitStack() as online:
        for side in SIDES:  # each waits for a sixth message that never comes
            online.enter_context(realmq.running_java(
                VERSION, "mqtool.realmq.ConsumeAll", sides.namesrv[side], "AdmT", "AdmG6", "6",
                "180000", class_dir=realmq.programs(VERSION), home=tmp_path / f"c-{side}"))
        for side in SIDES:
            _consumed(sides, side, "AdmG6", until=5)  # it consumed all five
        out = both(sides, "resetOffsetByTime", "-g", "AdmG6", "-t", "AdmT", "-s", "0")
    said = {side: [" ".join(ln.split()[2:]) for ln in text.splitlines()
                   if ln.startswith("broker-a") or ln.startswith("rollback")]
            for side, text in out.items()}
    assert sorted(said["real"]) == sorted(said["serve"]) and len(said["serve"]) == 5, out


#: What a printed message (``MessageExt#toString``) says that names a place or an instant.
_PLACES = re.compile(r"(MSGID: \S+ |queueId=\d+|\w+Timestamp=\d+|\w+Host=\S+|msgId=\w+"
                     r"|commitLogOffset=\d+|UNIQ_KEY=\w+|spentTimeMills=\d+)")


def printed(text: str) -> list[str]:
    """What ``printMsg``, ``consumeMessage`` and the query commands print, each line without
    what names a place or an instant, sorted (queues are placed differently)."""
    return sorted(_PLACES.sub("", ln) for ln in text.splitlines()
                  if ln.strip() and not ln.startswith(("\t", "Message Body Path", "Born Host",
                                                        "Store Host", "Queue ID", "CommitLog",
                                                        "Born Timestamp", "Store Timestamp")))


def test_query_by_unique_key(sides: harness.Sides) -> None:
    """queryMsgByUniqueKey of m-1 (its id from queryMsgByKey), and of an id nothing has."""
    shown: dict[str, list[str]] = {}
    for side in SIDES:
        found = rows(admin(sides, side, "queryMsgByKey", "-t", "AdmT", "-k", "m-1"))
        assert len(found) == 1, (side, found)
        shown[side] = printed(admin(sides, side, "queryMsgByUniqueKey", "-t", "AdmT", "-i",
                                    found[0][0]))
    assert shown["real"] == shown["serve"] and any("[m-1]" in ln for ln in shown["serve"]), shown
    out = both(sides, "queryMsgByUniqueKey", "-t", "AdmT", "-i", "0A0B0C0D0E0F")
    assert error_code(out["real"]) == error_code(out["serve"]) == "208", out


def test_print_msg_and_consume_message(sides: harness.Sides) -> None:
    """printMsg and consumeMessage (a pull consumer of the tools) print every message of AdmT."""
    for args in (("printMsg", "-t", "AdmT"), ("printMsg", "-t", "AdmT", "-d", "true"),
                 ("consumeMessage", "-t", "AdmT")):
        out = {side: printed(text) for side, text in both(sides, *args).items()}
        assert out["real"] == out["serve"], (args, out)
        assert sum(ln.startswith("MessageExt") for ln in out["serve"]) == 5, (args, out)


def test_consumer_status_and_direct_consume(sides: harness.Sides, tmp_path: Path) -> None:
    """A push consumer of group AdmCs on AdmS online: consumerStatus asks the consumer itself
    for its running info through the broker (GET_CONSUMER_RUNNING_INFO); queryMsgById and
    queryMsgByUniqueKey with ``-g -d`` have the broker hand it a message to consume
    (CONSUME_MESSAGE_DIRECTLY). A third message sent at the end lets the consumer finish."""
    sent = {side: realmq.produce(VERSION, sides.namesrv[side], "AdmS", 2, prefix="s",
                                 home=sides.work / f"p-{side}") for side in SIDES}
    # The group's retry topic exists before the consumer starts, so its first route lookup
    # finds it: otherwise its retry queue waits for the next 30 s route poll and rebalance.
    made = both(sides, "updateTopic", "-c", "DefaultCluster", "-t", "%RETRY%AdmCs", "-r", "1",
                "-w", "1")
    assert all("success" in text for text in made.values()), made
    got: dict[str, str] = {}

    def consume(side: str) -> None:
        res = realmq.java(VERSION, "mqtool.realmq.ConsumeAll", sides.namesrv[side], "AdmS",
                          "AdmCs", "3", "150000", class_dir=realmq.programs(VERSION),
                          timeout=240, home=tmp_path / f"c-{side}")
        got[side] = res.stdout if res.returncode == 0 else f"exit {res.returncode}"

    threads = [threading.Thread(target=consume, args=(side,), daemon=True) for side in SIDES]
    for t in threads:
        t.start()
    client: dict[str, str] = {}
    status: dict[str, list[str]] = {}
    direct: dict[str, list[str]] = {}
    for side in SIDES:
        for _ in attempts():  # until the consumer registered and its offsets reached the broker
            text = admin(sides, side, "consumerProgress", "-g", "AdmCs")
            if sum(int(r[4]) for r in rows(text) if len(r) > 4 and r[0] == "AdmS"
                   and r[4].isdigit()) == 2:
                break
        ids = re.findall(r"^(\S+@\S+)\s", admin(sides, side, "consumerConnection", "-g",
                                                  "AdmCs"), re.M)
        assert len(ids) == 1, (side, ids)
        client[side] = ids[0]
        for _ in attempts():  # until its rebalance took the group's retry queue too
            info = admin(sides, side, "consumerStatus", "-g", "AdmCs", "-i", client[side])
            if "%RETRY%AdmCs" in info.partition("#Consumer Offset#")[2]:
                break
        listed = admin(sides, side, "consumerStatus", "-g", "AdmCs")
        status[side] = _status_lines(listed, info, client[side])
        direct[side] = [
            admin(sides, side, "queryMsgById", "-i", sent[side][0]["offsetMsgId"], "-g",
                  "AdmCs", "-d", client[side]),
            admin(sides, side, "queryMsgByUniqueKey", "-t", "AdmS", "-i", sent[side][1]["msgId"],
                  "-g", "AdmCs", "-d", client[side]),
            admin(sides, side, "consumerStatus", "-g", "AdmCs", "-i", "nobody@1"),
            admin(sides, side, "queryMsgById", "-i", sent[side][0]["offsetMsgId"], "-g",
                  "AdmCs", "-d", "nobody@1"),
        ]
    assert status["real"] == status["serve"] and len(status["serve"]) > 40, status
    said = {side: [_said(text) for text in texts] for side, texts in direct.items()}
    assert said["real"] == said["serve"], direct
    assert said["serve"][:2] == ["ConsumeMessageDirectlyResult [order=false, autoCommit=true, "
                                 "consumeResult=CR_SUCCESS, remark=null, ]"] * 2, direct
    assert said["serve"][2:] == ["CODE: 1  DESC: The Consumer <AdmCs> <nobody@1> not online"] * 2
    for side in SIDES:
        realmq.produce(VERSION, sides.namesrv[side], "AdmS", 1, prefix="t",
                       home=sides.work / f"p-{side}")
    for t in threads:
        t.join(240)
    seen = {side: sorted(json.dumps({k: v for k, v in json.loads(ln).items() if k in (
        "topic", "tags", "keys", "body", "reconsumeTimes")}, sort_keys=True)
        for ln in text.splitlines() if ln.startswith("{")) for side, text in got.items()}
    assert seen["real"] == seen["serve"] and len(seen["serve"]) == 5, got


def _said(text: str) -> str:
    """The line a command printed, or the broker's code and remark it failed with."""
    m = re.search(r"CODE: \d+\s+DESC: [^\n]*", text)
    return m.group(0) if m else _PLACES.sub("", text.strip())


#: Running-info properties whose values are the same for the same client code and settings.
_STABLE_PROPERTIES = ("consumerGroup", "messageModel", "consumeFromWhere", "PROP_CONSUME_TYPE",
                      "PROP_CONSUMEORDERLY", "PROP_CLIENT_VERSION", "pullBatchSize",
                      "consumeThreadMin", "maxReconsumeTimes", "unitMode")


def _status_lines(listed: str, info: str, client: str) -> list[str]:
    """consumerStatus as comparable lines: the list of clients (client id, time and path
    left out) with its verdicts; of one client's running info every section's heading, the
    names of its properties and the values of the stable ones, its subscriptions, and its
    queues' consumer offsets without the queue."""
    out = [" ".join(w for w in ln.replace(client, "CLIENT").split() if not w[0].isdigit())
           for ln in listed.splitlines() if ln.strip()]
    section = ""
    for ln in info.splitlines():
        if ln.startswith("#") and ln.endswith("#"):
            section = ln
            out.append(ln)
        elif section == "#Consumer Properties#" and ":" in ln:
            key, _, value = (p.strip() for p in ln.partition(":"))
            out.append(f"{key}: {value}" if key in _STABLE_PROPERTIES else key)
        elif section == "#Consumer Subscription#" and ln.strip():
            out.append(ln)
        elif section == "#Consumer Offset#" and ln.strip() and not ln.startswith("#"):
            w = ln.split()
            out.append(f"offset {w[0]} {w[1]} {w[3]}")
    return sorted(out)
