"""One run of a real RocketMQ cluster of each version, shared by the test files that read what
it answered and the store it wrote (tests/realmq/test_realmq.py, and
tests/integrity/test_repair_realbroker.py, which repairs a damaged copy of that store).

Each version's name server and broker (tests/realmq.py) start over a fresh store with small
commitlog files: mqadmin clusterList, 300 messages from the official Java producer, one from
mqadmin sendMessage, topicList, the official push consumer reading them all, then a clean stop
(SIGTERM), whose store is copied. The same cluster then starts again on its store, takes 20
more messages and is killed (-9).

The run is made once per version and pytest worker process (:func:`written`); the root
conftest.py schedules those test files onto one pytest-xdist worker. Tests only read the run's
stores, or copies of them.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import realmq

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


def _run(version: str, work: Path) -> Run:
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


_RUNS: dict[str, Run] = {}


def written(version: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The run of ``version``'s cluster, made on the first call in this process."""
    if version not in _RUNS:
        _RUNS[version] = _run(version, tmp_path_factory.mktemp(f"realmq-{version}"))
    return _RUNS[version]
