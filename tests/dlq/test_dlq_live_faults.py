"""Faults of a live resend: each gives one error line and exit 1, leaves the
journal consistent, and a rerun after the fault loses nothing and duplicates nothing.

The cluster is `mqtool serve`; broker answers no healthy broker gives on demand (SEND_FAILED,
flush timeout, slave not available, an ACL refusal) come from a proxy in front of it
(live_helpers.FaultProxy) that rewrites or answers the client's requests."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_helpers import (  # noqa: F401 - cluster and source are fixtures
    ROOT,
    FaultProxy,
    Served,
    cluster_fixture,
    mqtool,
    one_line_error,
    source_fixture,
    wait_for,
)
from test_dlq_live import GROUP, N, copies, want_ids

from mqtool.dlq.journal import ResendJournal
from mqtool.remoting.acl import signature
from mqtool.remoting.frame import RemotingCommand


@pytest.fixture
def proxy(cluster: Served) -> Iterator[FaultProxy]:
    p = FaultProxy(cluster)
    yield p
    p.close()


def resend(ns: str, journal: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return mqtool("dlq", "resend", "-g", GROUP, "--namesrv", ns, "--journal", str(journal),
                  "--timeout", "2", *extra)


def journal_consistent(path: Path) -> ResendJournal:
    """Every line whole, every id's last state intent/done/failed (ResendJournal.read raises
    on a damaged line)."""
    data = path.read_bytes() if path.exists() else b""
    assert data == b"" or data.endswith(b"\n")
    return ResendJournal.read(path)


def exactly_once(cluster: Served, source: Path, journal: Path) -> None:
    res = resend(cluster.namesrv, journal, "--json")
    assert res.returncode == 0, res.stderr
    assert copies(cluster.store) == Counter(dict.fromkeys(want_ids(source), 1))
    assert journal_consistent(journal).done_ids() == want_ids(source)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_name_server(tmp_path: Path, source: Path) -> None:
    ns = f"127.0.0.1:{free_port()};127.0.0.1:{free_port()}"
    j = tmp_path / "j.jsonl"
    for args in (["list"], ["show", "-g", GROUP], ["export", "-g", GROUP]):
        one_line_error(mqtool("dlq", *args, "--namesrv", ns), "no name server reachable",
                       code=3)
    one_line_error(resend(ns, j), "no name server reachable", code=3)
    res = mqtool("dlq", "resend", str(source), "-g", GROUP, "--namesrv", ns, "--journal",
                 str(j))
    one_line_error(res, "no name server reachable", f"failed {N}", code=3)
    assert not journal_consistent(j).done_ids()
    one_line_error(mqtool("dlq", "list", "--namesrv", "nohost"), "not host:port", code=2)


def test_topic_that_does_not_exist(cluster: Served, tmp_path: Path) -> None:
    j = tmp_path / "j.jsonl"
    one_line_error(resend(cluster.namesrv, j, "--to", "NoSuchTopic", "--dry-run"),
                   "NoSuchTopic does not exist", code=3)
    assert not j.exists()
    one_line_error(resend(cluster.namesrv, j, "--to", "NoSuchTopic"),
                   "NoSuchTopic does not exist", code=3)
    assert not journal_consistent(j).done_ids()
    assert not copies(cluster.store)


def test_send_failed_answers_are_retried_then_reported(
    cluster: Served, proxy: FaultProxy, source: Path, tmp_path: Path
) -> None:
    j = tmp_path / "j.jsonl"
    tried: Counter[str] = Counter()

    def first_attempt_fails(cmd: RemotingCommand) -> RemotingCommand | None:
        if cmd.code != 310:
            return None
        tried[cmd.ext_fields["i"]] += 1
        return cmd.response(1, "[store error] SEND_FAILED") if tried[cmd.ext_fields["i"]] == 1 \
            else None

    proxy.rule = first_attempt_fails  # each message: one failure, then a retry that works
    res = resend(proxy.namesrv, j, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["sent"] == N
    assert len(tried) == N and set(tried.values()) == {2}
    assert copies(cluster.store) == Counter(dict.fromkeys(want_ids(source), 1))

    j2 = tmp_path / "j2.jsonl"
    proxy.rule = lambda c: c.response(1, "[store error] SEND_FAILED") if c.code == 310 else None
    res = resend(proxy.namesrv, j2)  # a fresh journal: every record is tried again
    line = one_line_error(res, f"{N} of {N} records not resent", "SEND_FAILED", "failed 3 times",
                          code=1)
    assert str(j2) in line
    assert not journal_consistent(j2).done_ids()
    assert copies(cluster.store) == Counter(dict.fromkeys(want_ids(source), 1))  # none stored


@pytest.mark.parametrize("code,name", [(10, "FLUSH_DISK_TIMEOUT"), (11, "SLAVE_NOT_AVAILABLE"),
                                       (12, "FLUSH_SLAVE_TIMEOUT")])
def test_stored_but_not_durable_answers_are_resolved_on_the_broker(
    cluster: Served, proxy: FaultProxy, source: Path, tmp_path: Path, code: int, name: str
) -> None:
    """The master stored the message but did not flush / replicate it in time: not retried
    (that would duplicate it), left unresolved; the rerun finds it on the broker."""
    j = tmp_path / "j.jsonl"

    def not_durable(req: RemotingCommand, resp: RemotingCommand) -> RemotingCommand:
        if req.code == 310 and resp.code == 0:
            resp.code = code
        return resp

    proxy.after = not_durable
    one_line_error(resend(proxy.namesrv, j), f"{N} of {N} records not resent", name, code=1)
    assert not journal_consistent(j).done_ids()
    assert copies(cluster.store) == Counter(dict.fromkeys(want_ids(source), 1))  # stored once
    proxy.after = lambda req, resp: resp
    res = resend(proxy.namesrv, j, "--json")
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert (rep["sent"], rep["skipped"]) == (0, N)  # all found on the broker, none resent
    exactly_once(cluster, source, j)


def test_acl_refusal_and_signed_requests(
    cluster: Served, proxy: FaultProxy, source: Path, tmp_path: Path
) -> None:
    def check(cmd: RemotingCommand) -> RemotingCommand | None:
        f = cmd.ext_fields
        ok = f.get("AccessKey") == "rocketmq2" and f.get("Signature") == signature(
            {k: v for k, v in f.items() if k != "Signature"}, cmd.body, "12345678")
        if ok:
            return None
        return cmd.response(1, "[10015:signature-failed] check signature failed for "
                            f"accessKey={f.get('AccessKey')}")

    proxy.rule = check
    j = tmp_path / "j.jsonl"
    one_line_error(resend(proxy.namesrv, j), "refused the request (ACL)", "signature", code=3)
    one_line_error(resend(proxy.namesrv, j, "--access-key", "rocketmq2", "--secret-key",
                          "wrong"), "refused the request (ACL)", code=3)
    one_line_error(mqtool("dlq", "show", "-g", GROUP, "--namesrv", proxy.namesrv),
                   "refused the request (ACL)", code=3)
    assert not copies(cluster.store)
    res = resend(proxy.namesrv, j, "--access-key", "rocketmq2", "--secret-key", "12345678",
                 "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["sent"] == N
    assert {c.ext_fields.get("AccessKey") for c in proxy.seen[-5:]} == {"rocketmq2"}
    assert copies(cluster.store) == Counter(dict.fromkeys(want_ids(source), 1))


def test_broker_dying_mid_run(cluster: Served, source: Path, tmp_path: Path) -> None:
    """kill -9 of the whole cluster while a rate-limited resend runs: one error line, exit 3;
    after a restart on the same store and ports the rerun completes, exactly once."""
    j = tmp_path / "j.jsonl"
    p = subprocess.Popen(
        [sys.executable, "-m", "mqtool", "dlq", "resend", "-g", GROUP, "--namesrv",
         cluster.namesrv, "--journal", str(j), "--rate", "12", "--batch", "4", "--timeout", "2"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: len(ResendJournal.read(j).done_ids()) >= 4 if j.exists() else False, 60)
    cluster.kill()
    out, err = p.communicate(timeout=60)
    one_line_error(subprocess.CompletedProcess(p.args, p.returncode, out, err),
                   "run the same command again", code=3)
    journal_consistent(j)
    restarted = Served(cluster.store, tmp_path / "serve2.log", cluster.ns_port,
                       cluster.broker_port).start()
    try:
        exactly_once(restarted, source, j)
    finally:
        restarted.kill()
