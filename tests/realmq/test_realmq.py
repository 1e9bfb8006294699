"""The real RocketMQ harness (tests/realmq.py) against itself and mqtool: each version's name
server and broker from Maven Central, the official Java producer and push consumer, mqadmin;
then mqtool reads the store the real broker wrote. The same cluster then starts again on its
store, takes more messages and is killed (-9): mqtool reads the crashed store too."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import realmq

pytestmark = pytest.mark.slow

TOPIC = "TopicReal"
ADMIN_TOPIC = "TopicAdmin"
COUNT = 300
# small commitlog files: the 300 messages span several files
CONF = {"mappedFileSizeCommitLog": str(16 * 1024), "mappedFileSizeConsumeQueue": str(20 * 64)}


@dataclass
class Run:
    """What one version's cluster was asked and answered, in order, before and after its stop."""

    version: str
    store: Path
    namesrv: str = ""
    broker: str = ""
    cluster_list: subprocess.CompletedProcess[str] | None = None
    sent: list[dict[str, Any]] = field(default_factory=list)
    admin_send: subprocess.CompletedProcess[str] | None = None
    topic_list: subprocess.CompletedProcess[str] | None = None
    consumed: list[dict[str, Any]] = field(default_factory=list)
    stop_code: int | None = None
    abort_after_stop: bool = True
    clean: Path = Path()  # a copy of the store as the clean stop left it
    sent_after: list[dict[str, Any]] = field(default_factory=list)
    abort_after_kill: bool = False


def mqtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqtool", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def cluster_list(version: str, namesrv: str) -> subprocess.CompletedProcess[str]:
    """mqadmin clusterList once the broker's runtime figures are in it: mqadmin prints a
    broker's row without them when the broker answers late, as it can on a loaded machine."""
    want = "V" + version.replace(".", "_")
    for _ in range(5):
        res = realmq.mqadmin(version, namesrv, "clusterList")
        if res.returncode != 0 or want in res.stdout:
            return res
        time.sleep(2)
    return res


@pytest.fixture(scope="module", params=realmq.VERSIONS)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    version = str(request.param)
    work = tmp_path_factory.mktemp(f"realmq-{version}")
    r = Run(version, work / "store")
    cluster = realmq.Cluster(version, r.store, broker_conf=CONF)
    with cluster.start():
        r.namesrv, r.broker = cluster.namesrv_addr, cluster.broker_addr
        r.cluster_list = cluster_list(version, r.namesrv)
        r.sent = realmq.produce(version, r.namesrv, TOPIC, COUNT, prefix="k")
        r.admin_send = realmq.mqadmin(version, r.namesrv, "sendMessage", "-t", ADMIN_TOPIC,
                                      "-p", "from-mqadmin", "-k", "admin-key", "-c", "admin-tag")
        r.topic_list = realmq.mqadmin(version, r.namesrv, "topicList")
        r.consumed = realmq.consume_all(version, r.namesrv, TOPIC, "realmq_group", COUNT)
        r.stop_code = cluster.stop()
    r.abort_after_stop = (r.store / "abort").exists()
    r.clean = work / "clean-store"
    shutil.copytree(r.store, r.clean)
    cluster.start()
    try:
        r.sent_after = realmq.produce(version, cluster.namesrv_addr, TOPIC, 20, prefix="after")
    finally:
        cluster.kill()
    r.abort_after_kill = (r.store / "abort").exists()
    return r


def test_mqadmin_sees_the_cluster(run: Run) -> None:
    assert run.cluster_list is not None and run.topic_list is not None
    assert run.cluster_list.returncode == 0, run.cluster_list.stderr
    line = next(ln for ln in run.cluster_list.stdout.splitlines() if run.broker in ln)
    assert line.split()[:2] == ["DefaultCluster", "broker-a"]
    assert "V" + run.version.replace(".", "_") in line
    assert run.topic_list.returncode == 0, run.topic_list.stderr
    topics = set(run.topic_list.stdout.split())
    assert {TOPIC, ADMIN_TOPIC} <= topics


def test_java_producer_and_consumer(run: Run) -> None:
    assert [s["status"] for s in run.sent] == ["SEND_OK"] * COUNT
    assert len({(s["queueId"], s["queueOffset"]) for s in run.sent}) == COUNT
    by_key = {m["keys"]: m for m in run.consumed}
    assert sorted(by_key) == sorted(f"k-{i}" for i in range(COUNT))
    for s in run.sent:
        m = by_key[s["key"]]
        assert (m["msgId"], m["offsetMsgId"], m["queueId"], m["queueOffset"], m["body"]) == \
            (s["msgId"], s["offsetMsgId"], s["queueId"], s["queueOffset"], s["key"])


def test_stop_is_clean(run: Run) -> None:
    assert run.stop_code == 143  # SIGTERM, handled: the shutdown hook ran
    assert not run.abort_after_stop
    assert len(list((run.clean / "commitlog").iterdir())) > 1


def test_mqtool_verify_and_messages_agree(run: Run) -> None:
    res = mqtool("verify", run.clean, "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["findings"] == []
    res = mqtool("messages", run.clean, "--jsonl", "--body", "utf8")
    assert res.returncode == 0, res.stderr
    stored = [json.loads(line) for line in res.stdout.splitlines()]
    real = {m["offsetMsgId"]: m for m in stored if m["topic"] == TOPIC}
    assert sorted(real) == sorted(s["offsetMsgId"] for s in run.sent)
    for s in run.sent:
        m = real[s["offsetMsgId"]]
        assert (m["uniqKey"], m["keys"], m["tags"], m["body"], m["queueId"], m["queueOffset"]) \
            == (s["msgId"], s["key"], "t", s["key"], s["queueId"], s["queueOffset"])
    admin = [m for m in stored if m["topic"] == ADMIN_TOPIC]
    assert [(m["keys"], m["tags"], m["body"]) for m in admin] == \
        [("admin-key", "admin-tag", "from-mqadmin")]
    assert run.admin_send is not None and run.admin_send.returncode == 0
    assert admin[0]["uniqKey"] in run.admin_send.stdout


def test_killed_broker_leaves_a_crashed_store(run: Run) -> None:
    """After a restart on its own store and kill -9: the abort file stays, every message sent
    before and after the restart is in the commitlog, and verify finds no damage (a process
    kill loses nothing the broker acknowledged: its writes are in the page cache)."""
    assert run.abort_after_kill
    assert [s["status"] for s in run.sent_after] == ["SEND_OK"] * 20
    res = mqtool("verify", run.store, "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["summary"]["state"] == "crashed (abort file present)"
    assert {f["severity"] for f in doc["findings"]} == {"info"}
    res = mqtool("messages", run.store, "--jsonl", "--topic", TOPIC)
    assert res.returncode == 0, res.stderr
    stored = [json.loads(line)["offsetMsgId"] for line in res.stdout.splitlines()]
    assert sorted(stored) == sorted(s["offsetMsgId"] for s in run.sent + run.sent_after)
