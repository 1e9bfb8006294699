"""Live DLQ resend into a real RocketMQ 4.9.7 name server and broker (Maven Central): the
official Java consumer reads every copy exactly once with the dead letter's keys, tags, body and
user properties, and kill -9 at the journal's crash points, then a rerun, loses and duplicates
nothing on the real broker either."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import realmq
from live_helpers import KILL_POINTS, killed_then_rerun, mqtool
from test_dlq_resend import make_dlq_source

from mqtool.dlq import DlqSelection, select_dlq
from mqtool.dlq.outgoing import RESEND_ID_PROPERTY, resend_id
from mqtool.formats.commitlog import CommitLogMessage
from mqtool.store import Store

pytestmark = pytest.mark.slow

VERSION = "4.9.7"
N = 24


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[realmq.Cluster]:
    c = realmq.Cluster(VERSION, tmp_path_factory.mktemp("realbroker") / "store")
    with c.start():
        yield c


def dead_letters(source: Path, group: str) -> dict[str, CommitLogMessage]:
    with Store.open(source) as st:
        return {resend_id(m): m for m in select_dlq(st, DlqSelection(group))}


def test_copies_reach_the_official_consumer_exactly_once_and_unchanged(
    cluster: realmq.Cluster, tmp_path: Path
) -> None:
    """Source: a store on disk, target: the real broker, ``--to original``."""
    group, topic = "gorig", "Orders"
    source = make_dlq_source(tmp_path / "src", N, group)
    made = realmq.mqadmin(VERSION, cluster.namesrv_addr, "updateTopic", "-b",
                          cluster.broker_addr, "-t", topic)
    assert made.returncode == 0, made.stdout + made.stderr
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    res = mqtool("dlq", "resend", str(source), "-g", group, "--namesrv", cluster.namesrv_addr,
                 "--to", "original", "--json", env=env)
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert (rep["selected"], rep["sent"], rep["failed"]) == (N, N, 0)

    got = realmq.consume_all(VERSION, cluster.namesrv_addr, topic, "cid-realbroker", N,
                             timeout=300, home=tmp_path / "consumer")
    props_of = [e["properties"] for e in got]
    assert all(isinstance(p, dict) for p in props_of)
    by_id = Counter(str(p[RESEND_ID_PROPERTY]) for p in props_of)
    originals = dead_letters(source, group)
    assert set(by_id) == set(originals) and max(by_id.values()) == 1
    for e in got:
        props = e["properties"]
        assert isinstance(props, dict)
        m = originals[props[RESEND_ID_PROPERTY]]
        assert e["topic"] == topic and e["reconsumeTimes"] == 0
        assert e["keys"] == m.keys
        assert e["tags"] == m.tags == "T"
        assert e["body"] == m.body.decode()
        assert props["user"] == m.properties["user"]
        assert props["UNIQ_KEY"] == m.uniq_key


def copies_on_the_broker(cluster: realmq.Cluster, topic: str) -> Counter[str]:
    """Resend ids of the copies the real broker stored in ``topic``, counted (its store read
    by mqtool while it runs: every acknowledged send is in its commitlog)."""
    with Store.open(cluster.store) as st:
        return Counter(m.properties[RESEND_ID_PROPERTY] for m in st.messages()
                       if m.topic == topic and RESEND_ID_PROPERTY in m.properties)


@pytest.mark.parametrize("points", KILL_POINTS, ids=lambda p: "+".join(p))
def test_killed_resend_rerun_loses_and_duplicates_nothing(
    cluster: realmq.Cluster, tmp_path: Path, points: list[str]
) -> None:
    """kill -9 at fixed points of the journal; the rerun asks the real broker (QUERY_MESSAGE by
    resend id) about what the kill left pending."""
    group = "gk" + "".join(ch for ch in "-".join(points) if ch.isalnum())
    source = make_dlq_source(tmp_path / "src", N, group)
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    args = ["dlq", "resend", str(source), "-g", group, "--namesrv", cluster.namesrv_addr,
            "--batch", "8"]
    killed_then_rerun(args, points, env, N)
    want = Counter(dict.fromkeys(dead_letters(source, group), 1))
    assert copies_on_the_broker(cluster, f"%RETRY%{group}") == want
