"""``dlq resend`` from a dead broker's store into a fresh real RocketMQ 4.9.7 cluster, which has
never seen the group: ``%RETRY%<group>`` does not exist there yet. The broker creates it on the
first send, as it does on a consumer's send-back (``autoCreateTopicEnable=false``: TBW102 cannot
be inherited, ``createTopicInSendMessageBackMethod`` makes it with one queue), and the group's
real push consumer then gets every record once."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import realmq
from test_dlq_resend import make_dlq_source

from mqtool.remoting import frame
from mqtool.remoting.codes import RequestCode, ResponseCode
from mqtool.remoting.frame import RemotingCommand

pytestmark = pytest.mark.slow

N = 24
GROUP = "GID_fresh"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[realmq.Cluster]:
    store = tmp_path_factory.mktemp("fresh") / "store"
    with realmq.Cluster("4.9.7", store, broker_conf={"autoCreateTopicEnable": "false"}) as c:
        yield c


def resend(src: Path, ns: str, state: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqtool", "dlq", "resend", str(src), "-g", GROUP, "--namesrv",
         ns, "--json", *extra],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, XDG_STATE_HOME=str(state)),
    )


def route(ns: str, topic: str) -> RemotingCommand:
    host, port = ns.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(frame.encode(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                       {"topic": topic})))
        data = b""
        while len(data) < 4 or len(data) < 4 + frame.length_of(data):
            data += s.recv(65536)
    return frame.decode(data)


def test_resend_to_retry_on_a_cluster_that_never_saw_the_group(
    fresh: realmq.Cluster, tmp_path: Path
) -> None:
    src = make_dlq_source(tmp_path / "src", N, GROUP)
    ns = fresh.namesrv_addr
    assert route(ns, f"%RETRY%{GROUP}").code == ResponseCode.TOPIC_NOT_EXIST
    dry = resend(src, ns, tmp_path / "state", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    res = resend(src, ns, tmp_path / "state")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rep = json.loads(res.stdout)
    assert (rep["selected"], rep["sent"], rep["failed"]) == (N, N, 0)
    assert route(ns, f"%RETRY%{GROUP}").code == ResponseCode.SUCCESS  # the broker made it
    again = resend(src, ns, tmp_path / "state")  # the journal: nothing is sent twice
    assert again.returncode == 0 and json.loads(again.stdout)["sent"] == 0, again.stderr
    got = realmq.consume_all("4.9.7", ns, "Orders", GROUP, N, timeout=120,
                             home=tmp_path / "consumer")
    keys = Counter(str(g["keys"]).split()[0] for g in got)
    assert keys == Counter(f"k{i}" for i in range(N))  # each record once
    # a consumer's getKeys() is exactly the dead letter's KEYS (the resend id is a property)
    assert {g["keys"] for g in got} == {f"k{i} order-{i % 7}" for i in range(N)}
    assert {g["body"] for g in got} == {f"body {i}" for i in range(N)}
    assert {g["topic"] for g in got} == {"Orders"} and {g["reconsumeTimes"] for g in got} == {0}
