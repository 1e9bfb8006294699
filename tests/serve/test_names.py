"""Hostile topic and group names against a real ``mqtool serve`` process: refused with the
broker's codes and remarks (``TopicValidator``, ``AbstractSendMessageProcessor#msgCheck``, the
name server's answer for a topic it has no route for), never a file outside the store or a
config entry the broker would not make, never a server path in an answer."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import realmq

from mqtool.remoting import bodies
from mqtool.remoting.codes import RequestCode, ResponseCode
from mqtool.remoting.frame import RemotingCommand
from tests.serve.conftest import ask, mqtool

ILLEGAL = "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
BLANK = "The specified topic is blank."
TOO_LONG = "The specified topic is longer than topic max length."
FAQ_4 = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def forbidden(topic: str) -> str:
    return f"Sending message to topic[{topic}] is forbidden."


#: (topic, code, remark) a RocketMQ 4.9.7 broker answers a SEND_MESSAGE with (``None``: stored).
SEND_CASES: list[tuple[str, int, str | None]] = [
    ("", ResponseCode.SYSTEM_ERROR, BLANK),
    ("   ", ResponseCode.SYSTEM_ERROR, BLANK),
    ("T" * 5000, ResponseCode.SYSTEM_ERROR, TOO_LONG),
    ("T" * 128, ResponseCode.SYSTEM_ERROR, TOO_LONG),
    ("a b", ResponseCode.SYSTEM_ERROR, ILLEGAL),
    ("a.b", ResponseCode.SYSTEM_ERROR, ILLEGAL),
    ("..", ResponseCode.SYSTEM_ERROR, ILLEGAL),
    ("a/b", ResponseCode.SYSTEM_ERROR, ILLEGAL),
    ("caf\u00e9", ResponseCode.SYSTEM_ERROR, ILLEGAL),
    ("T@G", ResponseCode.SYSTEM_ERROR, ILLEGAL),
    ("SCHEDULE_TOPIC_XXXX", ResponseCode.NO_PERMISSION, forbidden("SCHEDULE_TOPIC_XXXX")),
    ("RMQ_SYS_TRANS_HALF_TOPIC", ResponseCode.NO_PERMISSION, forbidden("RMQ_SYS_TRANS_HALF_TOPIC")),
    ("RMQ_SYS_TRANS_OP_HALF_TOPIC", ResponseCode.NO_PERMISSION,
     forbidden("RMQ_SYS_TRANS_OP_HALF_TOPIC")),
    ("TRANS_CHECK_MAX_TIME_TOPIC", ResponseCode.NO_PERMISSION,
     forbidden("TRANS_CHECK_MAX_TIME_TOPIC")),
    ("SELF_TEST_TOPIC", ResponseCode.NO_PERMISSION, forbidden("SELF_TEST_TOPIC")),
    ("OFFSET_MOVED_EVENT", ResponseCode.NO_PERMISSION, forbidden("OFFSET_MOVED_EVENT")),
    ("T" * 127, ResponseCode.SUCCESS, None),
    ("Ok-Topic|x%1_", ResponseCode.SUCCESS, None),
    ("%RETRY%GID_names", ResponseCode.SUCCESS, None),
]


def send_ext(topic: str, queue: int = 0) -> dict[str, object]:
    return {"producerGroup": "PID_names", "topic": topic, "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4, "queueId": queue, "sysFlag": 0, "bornTimestamp": 1,
            "flag": 0, "properties": "KEYS\x01k\x02"}


def batch_send(topic: str) -> RemotingCommand:
    """A batch as SEND_MESSAGE with ``batch=true`` (the long header names)."""
    body = bodies.encode_batch([bodies.BatchMessage(0, b"b", "")])
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, {**send_ext(topic), "batch": "true"},
                                   body)


def send_answers(broker: str, topics: list[str]) -> list[tuple[int, str | None]]:
    """(code, remark) of a SEND_MESSAGE to each topic."""
    out = []
    for t in topics:
        r = ask(broker, RemotingCommand.request(RequestCode.SEND_MESSAGE, send_ext(t), b"body"))
        out.append((r.code, r.remark if r.code != ResponseCode.SUCCESS else None))
    return out


def _files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def test_serve_refuses_topic_names_as_the_broker_does(tmp_path: Path, serve_factory: Any) -> None:
    store = tmp_path / "deep" / "down" / "store"
    store.mkdir(parents=True)
    outside = tmp_path / "outside"
    srv = serve_factory(store)
    before = _files_under(tmp_path) - _files_under(store)
    escape = os.path.relpath(outside, store / "consumequeue")  # ../../../../outside
    topics = [t for t, _, _ in SEND_CASES]
    answers = send_answers(srv.broker, [escape, *topics])
    assert answers[0] == (ResponseCode.SYSTEM_ERROR, ILLEGAL)
    assert answers[1:] == [(code, remark) for _, code, remark in SEND_CASES]
    # SEND_MESSAGE_V2 (the Java client's) and a batch (SEND_MESSAGE, batch=true) the same way
    v2 = {"a": "PID_names", "b": escape, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0,
          "i": ""}
    r = ask(srv.broker, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, v2, b"x"))
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, ILLEGAL)
    r = ask(srv.broker, batch_send("SCHEDULE_TOPIC_XXXX"))
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, forbidden("SCHEDULE_TOPIC_XXXX"))
    # the name server creates no topic it would refuse a send to, and answers as for any topic
    # it has no route for
    for t in ("../../x", "", "T" * 5000, "a b", "RMQ_SYS_TRANS_HALF_TOPIC", "%DLQ%GID_x"):
        r = ask(srv.namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                     {"topic": t}))
        want = "No topic route info in name server for the topic: " + t + FAQ_4
        assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, want), t[:40]
    # nor one a client may send to: the broker creates it on the first send, from TBW102
    r = ask(srv.namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                 {"topic": "NewTopic"}))
    assert (r.code, r.remark) == (
        ResponseCode.TOPIC_NOT_EXIST,
        "No topic route info in name server for the topic: NewTopic" + FAQ_4)
    assert srv.stop() == 0, srv.stderr()
    assert "Traceback" not in srv.stderr()
    assert _files_under(tmp_path) - _files_under(store) == before  # nothing outside the store
    topics_json = json.loads((store / "config" / "topics.json").read_text())
    created = set(topics_json["topicConfigTable"])
    want_created = {"T" * 127, "Ok-Topic|x%1_", "%RETRY%GID_names"}
    assert want_created <= created and "NewTopic" not in created
    for name in created:  # every topic in the store is one the broker accepts
        assert name and len(name) <= 127 and set(name) <= set(
            "%|-_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        ), name
    assert {p.name for p in (store / "consumequeue").iterdir()} == {
        "T" * 127, "Ok-Topic|x%1_", "%RETRY%GID_names"}
    p = mqtool("verify", str(store))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]


def test_serve_refuses_group_names_it_cannot_hold(tmp_path: Path, serve_factory: Any) -> None:
    """Groups as 5.3.3's broker treats a name ``Validators#checkGroup`` refuses: no group config
    (``findSubscriptionGroupConfig`` gives null), so no ``%RETRY%`` topic, no offsets key."""
    store = tmp_path / "store"
    srv = serve_factory(store)
    r = ask(srv.broker, RemotingCommand.request(RequestCode.SEND_MESSAGE, send_ext("GoodTopic"),
                                                b"x"))
    assert r.code == ResponseCode.SUCCESS
    offset = int(r.ext_fields["msgId"][-16:], 16)
    # the last: a legal name whose %RETRY% topic (257 characters) no file system can hold
    bad_groups = ["../../g", "", "a b", "g" * 256, "T@G", "g" * 250]
    hb = bodies.build_heartbeat(bodies.HeartbeatData("cid-names", ("../p",), tuple(
        bodies.ConsumerData(g, subscriptions=(bodies.Subscription("GoodTopic"),))
        for g in [*bad_groups, "GID_ok"])))
    beat = ask(srv.broker, RemotingCommand.request(RequestCode.HEART_BEAT, {}, hb))
    assert beat.code == ResponseCode.SUCCESS
    for g in bad_groups:
        r = ask(srv.broker, RemotingCommand.request(
            RequestCode.CONSUMER_SEND_MSG_BACK, {"group": g, "offset": offset, "delayLevel": 0,
                                       "originMsgId": "x", "originTopic": "GoodTopic"}))
        assert (r.code, r.remark) == (
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {g} {FAQ_4}")
        pull = {"consumerGroup": g, "topic": "GoodTopic", "queueId": 0, "queueOffset": 0,
                "maxMsgNums": 32, "sysFlag": 1, "commitOffset": 0, "suspendTimeoutMillis": 0,
                "subscription": "*", "subVersion": 0}
        r = ask(srv.broker, RemotingCommand.request(RequestCode.PULL_MESSAGE, pull))
        assert (r.code, r.remark) == (
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            f"subscription group [{g}] does not exist, {FAQ_4}")
        r = ask(srv.broker, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": g, "topic": "GoodTopic", "queueId": 0, "commitOffset": 1}))
        assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                      f"Group {g} not exist!")
    r = ask(srv.broker, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": "GID_ok", "topic": "../../t", "queueId": 0, "commitOffset": 1}))
    assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "Topic ../../t not exist!")
    r = ask(srv.broker, RemotingCommand.request(
        RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "GID_ok", "offset": offset, "delayLevel": 0}))
    assert r.code == ResponseCode.SUCCESS
    assert srv.stop() == 0, srv.stderr()
    groups = json.loads((store / "config" / "subscriptionGroup.json").read_text())
    assert set(groups["subscriptionGroupTable"]) == {"GID_ok"}
    topics = set(json.loads((store / "config" / "topics.json").read_text())["topicConfigTable"])
    assert {t for t in topics if t.startswith("%")} == {"%RETRY%GID_ok"}
    offsets = (store / "config" / "consumerOffset.json")
    assert not offsets.exists() or "../" not in offsets.read_text()
    # the sent-back message waits in SCHEDULE_TOPIC_XXXX for its delay
    assert sorted(p.name for p in (store / "consumequeue").iterdir()) == [
        "GoodTopic", "SCHEDULE_TOPIC_XXXX"]


def test_no_server_path_in_any_answer(tmp_path: Path, serve_factory: Any) -> None:
    """Answers that come from a store error name ``<store>``, not the server's path."""
    store = tmp_path / "store"
    srv = serve_factory(store)
    for cmd in (
        RemotingCommand.request(RequestCode.SEND_MESSAGE, send_ext("PathTopic", queue=99), b"x"),
        RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": 12345}),
        RemotingCommand.request(RequestCode.SEND_MESSAGE, send_ext("T" * 5000), b"x"),
        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "x" * 300}),
    ):
        addr = srv.namesrv if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC else srv.broker
        r = ask(addr, cmd)
        assert r.code != ResponseCode.SUCCESS
        assert str(tmp_path) not in (r.remark or ""), r.remark
    assert srv.stop() == 0


# -- the real broker is the judge ----------------------------------------------------------------

HOSTILE_ROUTES = ["../../x", "", "T" * 5000, "T" * 128, "a b", "%DLQ%GID_x"]
BAD_GROUPS = ["../../g", "a b", "g" * 256, "T@G"]


@pytest.fixture(scope="module", params=realmq.VERSIONS)
def real(request: pytest.FixtureRequest,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[realmq.Cluster]:
    """A real name server and broker of each version, once for this module."""
    with realmq.Cluster(request.param, tmp_path_factory.mktemp("real") / "store") as c:
        yield c


def _served_like(real: realmq.Cluster, tmp_path: Path, serve_factory: Any) -> Any:
    """``mqtool serve`` over a fresh store of the real broker's version."""
    store = tmp_path / "store"
    p = mqtool("store", "init", str(store), "--dialect", real.version)
    assert p.returncode == 0, p.stderr
    return serve_factory(store)


@pytest.mark.slow
def test_serve_answers_hostile_names_as_the_real_broker(
    real: realmq.Cluster, tmp_path: Path, serve_factory: Any
) -> None:
    """Topics: every version. Groups: 5.3.3, which refuses a group ``Validators#checkGroup``
    refuses as one it does not have; 4.9.7 makes any group (and files from its name), serve
    answers as 5.3.3 in both dialects."""
    srv = _served_like(real, tmp_path, serve_factory)
    topics = ["../../../../outside", *(t for t, _, _ in SEND_CASES)]
    theirs = send_answers(real.broker_addr, topics)
    assert send_answers(srv.broker, topics) == theirs
    want = [(ResponseCode.SYSTEM_ERROR, ILLEGAL),
            *((code, remark) for _, code, remark in SEND_CASES)]
    if real.version == "5.3.3":  # the same remarks, INVALID_PARAMETER for validateTopic's
        want = [(ResponseCode.INVALID_PARAMETER if c == ResponseCode.SYSTEM_ERROR else c, r) for c,
                r in want]
    assert theirs == want
    for topic in ("a/b", "SELF_TEST_TOPIC"):
        real_answer = ask(real.broker_addr, batch_send(topic))
        ours = ask(srv.broker, batch_send(topic))
        assert (ours.code, ours.remark) == (real_answer.code, real_answer.remark), topic
    for topic in HOSTILE_ROUTES:
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        real_answer, ours = ask(real.namesrv_addr, cmd), ask(srv.namesrv, cmd)
        assert (ours.code, ours.remark) == (real_answer.code, real_answer.remark), topic[:40]
    if real.version == "5.3.3":
        assert group_answers(srv.broker) == group_answers(real.broker_addr)
    assert srv.stop() == 0


def group_answers(broker: str) -> list[tuple[int, str | None]]:
    """A heartbeat with bad groups, then a send-back and an offset update for each."""
    r = ask(broker, RemotingCommand.request(RequestCode.SEND_MESSAGE, send_ext("GroupTopic"), b"x"))
    assert r.code == ResponseCode.SUCCESS, r.remark
    offset = int(r.ext_fields["msgId"][-16:], 16)
    hb = bodies.build_heartbeat(bodies.HeartbeatData("cid-names", (), tuple(
        bodies.ConsumerData(g, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                            (bodies.Subscription("GroupTopic"),)) for g in BAD_GROUPS)))
    out: list[tuple[int, str | None]] = [
        (ask(broker, RemotingCommand.request(RequestCode.HEART_BEAT, {}, hb)).code, None)]
    for g in BAD_GROUPS:
        for cmd in (
            RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {
                "group": g, "offset": offset, "delayLevel": 0, "originMsgId": "x",
                "originTopic": "GroupTopic"}),
            RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": g, "topic": "GroupTopic", "queueId": 0, "commitOffset": 1}),
        ):
            r = ask(broker, cmd)
            out.append((r.code, r.remark))
    return out
