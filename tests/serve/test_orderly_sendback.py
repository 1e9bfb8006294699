"""An orderly consumer's send-back: ``mqtool serve`` and the reference store follow ONE rule.

An orderly consumer retries locally; at its max its client sends the message to
``%RETRY%<group>`` itself (``ConsumeMessageOrderlyService#sendMessageBack``) and the broker's
``SendMessageProcessor#handleRetryAndDLQ`` dead-letters it. 4.9.7 keeps the client's DELAY, so
the DLQ copy waits in SCHEDULE_TOPIC_XXXX first (apache/rocketmq #2724); 5.3.3 stores DELAY=-1
and dead-letters at once while the group holds a queue lock. The rule lives in
``mqtool.refstore.redelivery.handle_retry_and_dlq``; both the served broker and
``RefStore.send_back_orderly`` must call it (a private copy on either side fails
:func:`test_serve_and_refstore_write_the_same_orderly_send_back`).

In the first test the client's send goes over the wire through mqtool's own remoting
connection, built by the reference store's client half (``orderly_resend_properties``) from the
message the test pulled from the server; the last test runs the same journey with a real client
(ali-ons, tests/serve/peers/js_client.js ``orderly``) in its own process.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from mqtool.formats.commitlog import CommitLogMessage, encode_properties, parse_message
from mqtool.refstore import redelivery
from mqtool.refstore.consumer import orderly_resend_properties
from mqtool.refstore.engine import ManualClock, Message, RefStore, StoreConfig
from mqtool.remoting import bodies
from mqtool.remoting.codes import RequestCode, ResponseCode
from mqtool.remoting.connection import Connection
from mqtool.remoting.frame import RemotingCommand
from mqtool.serve.config import BrokerSettings
from mqtool.serve.service import Service
from mqtool.store import Store
from tests.serve.inprocess import serve_in_process

DELAYS = "1s 1s 1s 1s 1s 1s"
MAX = 2  # the group's and the client's maxReconsumeTimes; 3 + MAX stays within the levels
GROUP = "og"
TOPIC = "Ordered"
KEY = "ord-1"
#: the properties that say where a copy goes and how often it failed (the rest is time,
#: offsets and hosts, which differ between two runs)
RULE_PROPS = ("DELAY", "REAL_TOPIC", "REAL_QID", "RETRY_TOPIC", "RECONSUME_TIME",
              "MAX_RECONSUME_TIMES", "KEYS", "TAGS", "CLUSTER")


def _config(dialect: str) -> StoreConfig:
    return StoreConfig(commitlog_file_size=1 << 20, cq_entries_per_file=1000,
                       index_hash_slots=100, index_max_entries=400,
                       message_delay_level=DELAYS, dialect=dialect)


def _records(root: Path) -> list[CommitLogMessage]:
    with Store.open(root) as st:
        return list(st.messages())


def _shape(records: list[CommitLogMessage]) -> list[dict[str, Any]]:
    """The records from the original on, as the rule decides them; UNIQ_KEY and
    ORIGIN_MESSAGE_ID relative to the original's (its UNIQ_KEY, or its offsetMsgId when the
    client sent none, as the broker's send-back takes it)."""
    first = next(i for i, m in enumerate(records) if m.topic == TOPIC)
    orig = records[first]
    origin_id = orig.uniq_key or orig.offset_msg_id
    out = []
    for m in records[first:]:
        p = m.properties
        out.append({
            "topic": m.topic, "queue": m.queue_id, "reconsumeTimes": m.reconsume_times,
            "body": m.body, "flag": m.flag, "sysFlag": m.sys_flag & ~0x30,
            "keys": sorted(p), "rule": {k: p.get(k) for k in RULE_PROPS},
            "sameUniq": p.get("UNIQ_KEY") == orig.uniq_key,
            "origin": None if "ORIGIN_MESSAGE_ID" not in p
            else p["ORIGIN_MESSAGE_ID"] == origin_id,
        })
    return out


def _sent(dialect: str) -> dict[str, str]:
    """What the broker's send processor adds to a client's properties before it stores them:
    5.x its ``regionId`` and ``traceOn`` (``buildMsgContext``), 4.x nothing."""
    if not dialect.startswith("5"):
        return {}
    s = BrokerSettings()
    return {"MSG_REGION": s.regionId, "TRACE_ON": "true" if s.traceOn else "false"}


def _refstore_side(root: Path, dialect: str) -> None:
    clock = ManualClock(1_795_000_000_000)
    with RefStore.open(root, _config(dialect), clock=clock, seed=1) as s:
        s.create_group(GROUP, retry_max_times=MAX, consume_orderly=True)
        s.create_topic(TOPIC, 1)
        # the broker's send processor stores the client's message: 4.x without WAIT
        v5 = dialect.startswith("5")
        m = s.put(Message.create(TOPIC, b"ordered", tags="O", keys=KEY, queue_id=0,
                                 wait_store_msg_ok=True if v5 else None,
                                 properties=_sent(dialect)), as_sent=True)
        # MAX + 1 failed attempts: MAX local retries, then the client sends it back
        s.send_back_orderly(GROUP, m.physical_offset, reconsume_times=MAX,
                            max_reconsume_times=MAX)
        clock.advance(5000)
        s.tick()


async def _invoke(br: Connection, code: int, ext: dict[str, object],
                  body: bytes = b"") -> RemotingCommand:
    r = await br.invoke(RemotingCommand.request(code, ext, body))
    assert r.code == ResponseCode.SUCCESS, (code, r.code, r.remark)
    return r


_SEND = {"producerGroup": "PID", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
         "sysFlag": 0, "bornTimestamp": 1, "flag": 0}


def _serve(root: Path, body: Callable[[Service, Connection], Awaitable[None]]) -> None:
    """Serve ``root`` in this process and run ``body`` with a connection to the broker."""
    serve_in_process(root, body, delay_levels=DELAYS)


def _serve_side(root: Path, dialect: str) -> None:
    with RefStore.open(root, _config(dialect)) as s:  # a store that emulates ``dialect``
        s.create_group(GROUP, retry_max_times=MAX, consume_orderly=True)
        s.create_topic(TOPIC, 1)

    async def body(svc: Service, br: Connection) -> None:
        props = encode_properties([("KEYS", KEY), ("TAGS", "O"), ("WAIT", "true")])
        await _invoke(br, RequestCode.SEND_MESSAGE,
                      {**_SEND, "topic": TOPIC, "queueId": 0, "properties": props},
                      b"ordered")
        # the orderly consumer locks its queue, pulls, fails MAX + 1 times locally
        mq = {"topic": TOPIC, "brokerName": "broker-a", "queueId": 0}
        lock = {"consumerGroup": GROUP, "clientId": "c1", "mqSet": [mq]}
        r = await _invoke(br, RequestCode.LOCK_BATCH_MQ, {}, bodies.json_body(lock))
        assert json.loads(r.body)["lockOKMQSet"] == [mq]
        r = await _invoke(br, RequestCode.PULL_MESSAGE, {
            "consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "queueOffset": 0,
            "maxMsgNums": 32, "sysFlag": 0, "commitOffset": 0,
            "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0})
        got = parse_message(r.body, 0)
        consumed = dict(got.properties)
        consumed["MIN_OFFSET"] = r.ext_fields["minOffset"]
        consumed["MAX_OFFSET"] = r.ext_fields["maxOffset"]
        consumed["CONSUME_START_TIME"] = "1795000000000"
        sent = orderly_resend_properties(
            consumed, consumed_topic=got.topic, group=GROUP, local_count=MAX,
            max_times=MAX, msg_id=got.uniq_key or got.offset_msg_id,
            client_v5=dialect.startswith("5"))
        await _invoke(br, RequestCode.SEND_MESSAGE, {
            **_SEND, "topic": redelivery.retry_topic(GROUP), "queueId": 0,
            "properties": encode_properties(consumed.items()),
            "reconsumeTimes": sent, "maxReconsumeTimes": MAX}, got.body)
        store = svc.store
        assert store is not None
        for _ in range(300):  # the schedule service delivers the parked copy (1 s level)
            if store.max_offset(redelivery.dlq_topic(GROUP), 0):
                break
            await asyncio.sleep(0.05)

    _serve(root, body)


def _trace(root: Path, key: str = KEY) -> dict[str, Any]:
    r = subprocess.run([sys.executable, "-m", "mqtool", "trace", str(root), "--key", key,
                        "--delay-levels", DELAYS, "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    (tr,) = json.loads(r.stdout)["traces"]
    return dict(tr)


@pytest.mark.parametrize("dialect", ["4.9.7", "5.3.3"])
def test_serve_and_refstore_write_the_same_orderly_send_back(
    tmp_path: Path, dialect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    callers: list[str] = []
    rule = redelivery.handle_retry_and_dlq

    def spy(*args: Any, **kw: Any) -> redelivery.RetrySendDecision:
        callers.append(Path(inspect.stack()[1].filename).as_posix())
        return rule(*args, **kw)

    monkeypatch.setattr(redelivery, "handle_retry_and_dlq", spy)
    ref, srv = tmp_path / "ref", tmp_path / "srv"
    _refstore_side(ref, dialect)
    _serve_side(srv, dialect)
    # one rule, called by both (a copy of it on either side would not be)
    assert [c.rsplit("/mqtool/", 1)[-1] for c in callers] == [
        "refstore/consumer.py", "serve/broker.py"]

    ref_shape, srv_shape = _shape(_records(ref)), _shape(_records(srv))
    assert srv_shape == ref_shape
    dlq = redelivery.dlq_topic(GROUP)
    if dialect == "4.9.7":  # the client's DELAY survives: parked, then delivered to the DLQ
        assert [s["topic"] for s in ref_shape] == [TOPIC, redelivery.SCHEDULE_TOPIC, dlq]
        assert ref_shape[1]["rule"]["DELAY"] == str(3 + MAX)
        assert ref_shape[1]["rule"]["REAL_TOPIC"] == dlq
        assert ref_shape[2]["reconsumeTimes"] == MAX  # the local count, not + 1
    else:  # a locked group: DLQ at once, DELAY=-1, the client's count + 1
        assert [s["topic"] for s in ref_shape] == [TOPIC, dlq]
        assert ref_shape[1]["rule"]["DELAY"] == "-1"
        assert ref_shape[1]["reconsumeTimes"] == MAX + 1
    assert ref_shape[-1]["origin"] is True and ref_shape[-1]["sameUniq"] is True

    # trace counts the failed attempts the same way on both stores
    for root in (ref, srv):
        tr = _trace(root)
        assert tr["verdictKind"] == "dead-lettered", tr
        v = tr["verdict"]
        assert f"after {MAX} retries (" in v and f"; {MAX + 1} failed attempts" in v, v
        assert [h["topic"] for h in tr["hops"]] == [s["topic"] for s in ref_shape]


@pytest.mark.parametrize(
    ("dialect", "sent", "locked", "to_dlq", "delay"),
    [
        ("4.9.7", 2, False, True, "5"),  # >= max: DLQ, the client's DELAY kept (#2724)
        ("4.9.7", 2, True, True, "5"),
        ("4.9.7", 1, True, False, "5"),  # below max: the retry topic, via the schedule topic
        ("5.3.3", 3, False, True, "-1"),  # > max
        ("5.3.3", 2, False, False, "5"),  # == max without a lock: still a retry
        ("5.3.3", 1, True, True, "-1"),  # an orderly consumer's lock: DLQ at once
    ],
)
def test_retry_send_rule(dialect: str, sent: int, locked: bool, to_dlq: bool,
                         delay: str) -> None:
    props = {"DELAY": "5", "RECONSUME_TIME": str(sent)}
    d = redelivery.handle_retry_and_dlq(props, group="g", reconsume_times=sent,
                                        max_reconsume_times=2,
                               dialect=dialect, group_locked=locked)
    assert d.to_dlq is to_dlq and props["DELAY"] == delay
    assert (d.topic, d.queue_id) == (("%DLQ%g", 0) if to_dlq else ("%RETRY%g", None))


def test_serve_5x_without_a_lock_retries_below_the_max(tmp_path: Path) -> None:
    """The served 5.3.3 broker asks its own lock table: with no lock held, a send at the max
    goes to the retry topic (parked in the schedule topic by the client's DELAY)."""
    root = tmp_path / "s"
    with RefStore.open(root, _config("5.3.3")) as s:
        s.create_group(GROUP, retry_max_times=MAX)
    async def body(svc: Service, br: Connection) -> None:
        props = encode_properties([("RECONSUME_TIME", str(MAX)), ("DELAY", "4")])
        await _invoke(br, RequestCode.SEND_MESSAGE, {
            **_SEND, "topic": redelivery.retry_topic(GROUP), "queueId": 0, "properties": props,
            "reconsumeTimes": MAX, "maxReconsumeTimes": MAX}, b"x")

    _serve(root, body)
    (m,) = [m for m in _records(root) if m.body == b"x"]
    assert m.topic == redelivery.SCHEDULE_TOPIC
    assert m.properties["REAL_TOPIC"] == redelivery.retry_topic(GROUP)
    assert m.properties["DELAY"] == "4"


@pytest.mark.parametrize("dialect", ["4.9.7", "5.3.3"])
def test_real_client_orderly_send_back_matches_the_reference_store(
    tmp_path: Path, serve_factory: Any, dialect: str
) -> None:
    """A real client (ali-ons in its own node process) produces, pulls, fails the message
    MAX + 1 times locally and sends it to %RETRY%<group> as the Java orderly consumer does;
    the served store holds what the reference store writes for that send-back, and trace
    counts the client's failed attempts."""
    from tests.serve.conftest import run_js

    srv = tmp_path / "srv"
    with RefStore.open(srv, _config(dialect)) as s:  # a store that emulates ``dialect``
        s.create_topic(TOPIC)  # ali-ons needs a route: the topic exists, as on a real broker
    served = serve_factory(srv, "--delay-levels", DELAYS, "--max-reconsume-times", str(MAX))
    home = tmp_path / "home"
    rc, ev, err = run_js(home, "produce", served.namesrv, TOPIC, "ord", "1")
    assert rc == 0, err
    key = ev[0]["key"]
    rc, ev, err = run_js(home, "orderly", served.namesrv, GROUP, TOPIC, str(MAX),
                         "1" if dialect.startswith("5") else "0", "60")
    assert rc == 0, err + served.stderr()
    (back,) = [e for e in ev if e.get("key") == key]
    assert back["attempts"] == MAX + 1 and back["status"] == "SEND_OK"
    time.sleep(3)  # a 4.9.7 copy waits one 1 s delay level in the schedule topic
    assert served.stop() == 0, served.stderr()

    ref = tmp_path / "ref"
    clock = ManualClock(1_795_000_000_000)
    with RefStore.open(ref, _config(dialect), clock=clock, seed=1) as s:
        s.create_group(GROUP, retry_max_times=MAX, consume_orderly=True)
        m = s.put(Message.create(TOPIC, f"body of {key}".encode(), tags="TagA", keys=key,
                                 wait_store_msg_ok=None,  # ali-ons sends no WAIT
                                 properties=_sent(dialect)),  # nor a UNIQ_KEY
                  as_sent=True)
        s.send_back_orderly(GROUP, m.physical_offset, reconsume_times=MAX,
                            max_reconsume_times=MAX)
        clock.advance(5000)
        s.tick()

    def same(shape: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in rec.items() if (k, i) != ("queue", 0)}  # the client's pick
                for i, rec in enumerate(shape)]

    srv_shape, ref_shape = same(_shape(_records(srv))), same(_shape(_records(ref)))
    assert srv_shape == ref_shape
    dlq = redelivery.dlq_topic(GROUP)
    hops = [redelivery.SCHEDULE_TOPIC, dlq] if dialect == "4.9.7" else [dlq]
    assert [r["topic"] for r in srv_shape] == [TOPIC, *hops]
    tr = _trace(srv, key)
    v = tr["verdict"]
    assert tr["verdictKind"] == "dead-lettered", tr
    assert f"after {MAX} retries (" in v and f"; {back['attempts']} failed attempts" in v, v
