"""The real RocketMQ harness (tests/realmq.py) against itself and mqtool: each version's name
server and broker from Maven Central, the official Java producer and push consumer, mqadmin;
then mqtool reads the store the real broker wrote. The same cluster then starts again on its
store, takes more messages and is killed (-9): mqtool reads the crashed store too. The run
(tests/realmq_run.py) is made once per version for this file and
tests/integrity/test_repair_realbroker.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import realmq
from realmq_run import ADMIN_TOPIC, COUNT, TOPIC, Run, written

pytestmark = pytest.mark.slow


def mqtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqtool", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module", params=realmq.VERSIONS)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Each version's cluster run (tests/realmq_run.py)."""
    return written(str(request.param), tmp_path_factory)


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
