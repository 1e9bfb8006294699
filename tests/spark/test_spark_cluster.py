"""``mqtool scan --master spark://...`` against a real standalone cluster on 127.0.0.1.

The test starts a Spark master and one worker (``spark-class``, bounded waits), runs the CLI
in a subprocess (a process has one SparkContext; the other tests hold a local one), and stops
both daemons by their process ids.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import manifest_jsonl, store_dir

pytestmark = pytest.mark.slow

SCENARIO = "4.9.7/journey"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _wait_for(predicate, timeout: float, what: str, logs: list[Path]) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    tails = "\n".join(p.read_text(errors="replace")[-2000:] for p in logs if p.exists())
    raise AssertionError(f"timed out waiting for {what}\n{tails}")


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    port, ui, wui = _free_port(), _free_port(), _free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
           "PYSPARK_PYTHON": sys.executable}
    master_log, worker_log = tmp_path / "master.log", tmp_path / "worker.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with open(master_log, "wb") as log:
            procs.append(subprocess.Popen(
                [_spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(ui)],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            ))
        _wait_for(lambda: _port_open(port), 90, "the Spark master", [master_log])
        url = f"spark://127.0.0.1:{port}"
        with open(worker_log, "wb") as log:
            procs.append(subprocess.Popen(
                [_spark_class(), "org.apache.spark.deploy.worker.Worker", url, "--host",
                 "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port", str(wui),
                 "--work-dir", str(tmp_path / "work")],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            ))
        _wait_for(
            lambda: "Registering worker" in master_log.read_text(errors="replace"), 90,
            "the worker to register", [master_log, worker_log],
        )
        yield url
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


def test_scan_on_a_standalone_cluster(cluster: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", "mqtool", "scan", str(store_dir(SCENARIO)), "--master", cluster,
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.executor.memory=512m",
         "--conf", "spark.cores.max=1", "--conf", "spark.sql.shuffle.partitions=2",
         "--audit", "queues,dlq,integrity", "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=420,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    msgs = [m for m in manifest_jsonl(SCENARIO, "commitlog.jsonl") if m["kind"] == "msg"]
    assert doc["totals"]["messages"] == len(msgs)
    assert {(q["topic"], q["queueId"]): q["count"] for q in doc["queues"]} == dict(
        Counter((m["topic"], m["queueId"]) for m in msgs)
    )
    assert [(d["group"], d["count"], d["originalTopics"]) for d in doc["dlq"]] == [
        ("cg_journey", 4, ["JourneyTopic"])
    ]
    assert doc["integrity"] == []
    assert res.stdout.lstrip().startswith("{")  # stdout holds the JSON only, no Spark noise
    assert "log4j" not in res.stderr and " WARN " not in res.stderr, res.stderr[-2000:]
    assert (out / "messages").is_dir()
