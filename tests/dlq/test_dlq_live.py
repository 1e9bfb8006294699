"""Live-cluster DLQ end to end against `mqtool serve` (a subprocess on free 127.0.0.1 ports):
live reads give the offline shapes, resent messages reach real consumers (rocketmq 0.4.4 and
ali-ons 3.12.0) with their keys, tags and bodies, kill -9 and rerun lose and duplicate nothing,
and the client's frames have the real peers' shape."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from live_helpers import (  # noqa: F401 - cluster and source are fixtures
    GROUP,
    KILL_POINTS,
    Consumer,
    FaultProxy,
    N,
    Served,
    cluster_fixture,
    killed_then_rerun,
    mqtool,
    one_line_error,
    source_fixture,
)

from mqtool.dlq import DlqSelection, select_dlq
from mqtool.dlq.journal import ResendJournal, live_journal_path
from mqtool.dlq.outgoing import RESEND_ID_PROPERTY, resend_id
from mqtool.remoting.frame import decode
from mqtool.store import Store
from tests.serve.conftest import create_topic

FRAMES = json.loads((Path(__file__).parent / "fixtures" / "peer_frames.json").read_text())["frames"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path / "state")}


def copies(store: Path, topic: str | None = None) -> Counter[str]:
    """Resend ids of the copies in a store, counted."""
    with Store.open(store) as st:
        return Counter(m.properties[RESEND_ID_PROPERTY] for m in st.messages()
                       if RESEND_ID_PROPERTY in m.properties and (topic is None
                                                                  or m.topic == topic))


def want_ids(source: Path) -> set[str]:
    with Store.open(source) as st:
        return {resend_id(m) for m in select_dlq(st, DlqSelection(GROUP))}


def test_live_reads_give_the_offline_shapes(cluster: Served, env: dict[str, str]) -> None:
    ns = cluster.namesrv
    for args in (["list", "--json"], ["show", "-g", GROUP, "--json"],
                 ["show", "-g", GROUP, "--key", "order-3", "--json", "--body", "base64"],
                 ["export", "-g", GROUP], ["export", "-g", GROUP, "--format", "csv"]):
        live = mqtool("dlq", *args, "--namesrv", ns, env=env)
        offline = mqtool("dlq", *args[:1], str(cluster.store), *args[1:], env=env)
        assert live.returncode == 0 and offline.returncode == 0, (live.stderr, offline.stderr)
        assert live.stdout == offline.stdout and live.stdout.strip(), args
    rows = json.loads(mqtool("dlq", "show", "-g", GROUP, "--json", "--namesrv", ns,
                             env=env).stdout)
    assert len(rows) == N and rows[0]["originalTopic"] == "Orders"
    # NAMESRV_ADDR instead of --namesrv; an unknown group is one error line
    res = mqtool("dlq", "list", "--json", env={**env, "NAMESRV_ADDR": ns})
    assert json.loads(res.stdout)[0]["count"] == N
    one_line_error(mqtool("dlq", "show", "-g", "nope", "--namesrv", ns, env=env),
                   "unknown consumer group 'nope'", code=1)


def test_resend_reaches_a_real_cpp_consumer_exactly_once(
    cluster: Served, env: dict[str, str], tmp_path: Path, source: Path
) -> None:
    ns = cluster.namesrv
    consumer = Consumer("cpp", tmp_path / "home-cpp", ns, GROUP, "Orders", N)
    res = mqtool("dlq", "resend", "-g", GROUP, "--namesrv", ns, "--json", env=env)
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert (rep["selected"], rep["sent"], rep["failed"]) == (N, N, 0)
    rc, events = consumer.result()
    assert rc == 0, events[-3:]
    got = [e for e in events if "props" in e]
    by_id = Counter(e["props"]["MQTOOL_RESEND_ID"] for e in got)
    assert set(by_id) == want_ids(source) and max(by_id.values()) == 1
    with Store.open(source) as st:
        originals = {resend_id(m): m for m in select_dlq(st, DlqSelection(GROUP))}
    for e in got:
        m = originals[e["props"]["MQTOOL_RESEND_ID"]]
        assert e["body"] == m.body.decode() and e["tags"] == m.tags == "T"
        assert e["keys"] == m.keys  # exactly the dead letter's keys, as the consumer reads them
        assert e["props"]["user"] == m.properties["user"]
        assert e["props"]["UNIQ_KEY"] == m.uniq_key
        assert e["props"]["MQTOOL_DLQ_TOPIC"] == "%DLQ%g"
        assert e["props"]["MQTOOL_DLQ_MSG_ID"] == m.offset_msg_id
        assert e["reconsume"] == 0
    # the journal lives in the state dir, keyed by cluster and group; a rerun sends nothing
    journal = live_journal_path(ns, GROUP)  # this process's state dir: only the key is used
    jpath = Path(env["XDG_STATE_HOME"]) / "mqtool" / "resend" / journal.parent.name / "g.jsonl"
    assert ResendJournal.read(jpath).done_ids() == set(by_id)
    again = json.loads(mqtool("dlq", "resend", "-g", GROUP, "--namesrv", ns, "--json",
                              env=env).stdout)
    assert (again["sent"], again["skipped"]) == (0, N)
    assert copies(cluster.store, "%RETRY%g") == Counter(dict.fromkeys(by_id, 1))
    assert committed_offset(ns) in (None, 0)  # no --commit: nothing marked consumed


def committed_offset(ns: str) -> int | None:
    """The group's consumer offset on %DLQ%g queue 0 (QUERY_CONSUMER_OFFSET), None if none."""
    from mqtool.remoting.client import LiveClient

    with LiveClient(ns) as c:
        q = (c.read_queues("%DLQ%g") or [])[0]
        resp = c.run(c.invoke(q.addr, 14, {"consumerGroup": GROUP, "topic": "%DLQ%g",
                                           "queueId": "0"}))
    return int(resp.ext_fields["offset"]) if resp.code == 0 else None


def test_commit_marks_the_resent_records_consumed(cluster: Served, env: dict[str, str]) -> None:
    ns = cluster.namesrv
    res = mqtool("dlq", "resend", "-g", GROUP, "--namesrv", ns, "--limit", "5", "--commit",
                 "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["committedOffsets"] == {"0": 5}
    assert committed_offset(ns) == 5
    res = mqtool("dlq", "resend", "-g", GROUP, "--namesrv", ns, "--commit", env=env)
    assert res.returncode == 0, res.stderr
    assert committed_offset(ns) == N


def test_resend_from_a_store_to_a_real_ali_ons_consumer(
    cluster: Served, env: dict[str, str], tmp_path: Path, source: Path
) -> None:
    """Source: a store on disk (a dead broker's), target: the live cluster, --to original."""
    ns = cluster.namesrv
    create_topic(cluster.broker, "Orders")  # --to original: the topic exists, as on a cluster
    consumer = Consumer("js", tmp_path / "home-js", ns, "cid-js", "Orders", N)
    res = mqtool("dlq", "resend", str(source), "-g", GROUP, "--namesrv", ns, "--to",
                 "original", "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["sent"] == N
    rc, events = consumer.result()
    assert rc == 0, events[-3:]
    got = [e for e in events if "props" in e]
    by_id = Counter(e["props"]["MQTOOL_RESEND_ID"] for e in got)
    assert set(by_id) == want_ids(source) and max(by_id.values()) == 1
    with Store.open(source) as st:
        originals = {resend_id(m): m for m in select_dlq(st, DlqSelection(GROUP))}
    for e in got:
        assert e["topic"] == "Orders" and e["tags"] == "T"
        keys = e["keys"] if isinstance(e["keys"], list) else e["keys"].split()
        # exactly the dead letter's keys
        assert " ".join(keys) == originals[e["props"]["MQTOOL_RESEND_ID"]].keys
        assert e["body"].startswith("body ") and e["props"]["user"].startswith("u")


@pytest.mark.parametrize("points", KILL_POINTS, ids=lambda p: "+".join(p))
def test_killed_live_resend_rerun_loses_and_duplicates_nothing(
    cluster: Served, env: dict[str, str], source: Path, points: list[str]
) -> None:
    """kill -9 at fixed points (mqtool.dlq.journal.crash_point); the rerun resolves what the
    kill left pending by asking the broker (QUERY_MESSAGE by resend id)."""
    args = ["dlq", "resend", "-g", GROUP, "--namesrv", cluster.namesrv, "--batch", "8"]
    killed_then_rerun(args, points, env, N)
    assert copies(cluster.store) == Counter(dict.fromkeys(want_ids(source), 1))


def test_client_frames_have_the_real_peers_shape(cluster: Served, env: dict[str, str]) -> None:
    """SEND_MESSAGE_V2 and PULL_MESSAGE as mqtool sends them, field by field against ali-ons."""
    proxy = FaultProxy(cluster)
    try:
        res = mqtool("dlq", "resend", "-g", GROUP, "--namesrv", proxy.namesrv, "--limit", "1",
                     env=env)
        assert res.returncode == 0, res.stderr
        mine = {c.code: c for c in proxy.seen}
    finally:
        proxy.close()
    for code, name in ((310, "code 310"), (11, "code 11 PULL")):
        ref = decode(bytes.fromhex(next(v for k, v in FRAMES.items()
                                        if k.startswith("ali-ons") and name in k)))
        got = mine[code]
        assert got.serialize_type == ref.serialize_type and got.flag == ref.flag == 0
        assert set(got.ext_fields) == set(ref.ext_fields), code
        for k, v in ref.ext_fields.items():
            g = got.ext_fields[k]
            assert g.lstrip("-").isdigit() == v.lstrip("-").isdigit(), (code, k, g, v)
            if v in ("true", "false"):
                assert g in ("true", "false"), (code, k, g)
    send = mine[310].ext_fields
    assert (send["b"], send["c"], send["d"], send["j"], send["k"]) == ("%RETRY%g", "TBW102",
                                                                      "4", "0", "false")
    pull = mine[11].ext_fields
    assert pull["topic"] == "%DLQ%g" and int(pull["sysFlag"]) & 1 == 0  # no offset commit
