"""``mqtool serve`` as a process: hostile sockets, a locked store, kill -9, many producers."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.serve.conftest import (
    CPP_CLIENT,
    CPP_PYTHON,
    JS_CLIENT,
    NODE_MODULES,
    call,
    connect,
    create_topic,
    mqtool,
    run_cpp,
)


def _store_keys(store: Path, topic: str) -> list[str]:
    from mqtool.store import Store

    st = Store.open(store)
    return [m.keys or "" for m in st.messages() if m.topic == topic]


def _garbage(addr: str, data: bytes) -> bytes:
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks)


def test_hostile_sockets_do_not_stop_serving(tmp_path: Path, serve_factory: Any) -> None:
    srv = serve_factory(tmp_path / "store")
    for addr in (srv.namesrv, srv.broker):
        assert _garbage(addr, os.urandom(64) + b"\xff" * 8) == b""  # random + huge length
        assert _garbage(addr, struct.pack(">i", 2**31 - 1)) == b""
        assert _garbage(addr, struct.pack(">i", -7) + b"\x00" * 8) == b""
        assert _garbage(addr, struct.pack(">iI", 12, 900) + b"\x00" * 8) == b""
        assert _garbage(addr, struct.pack(">iI", 9, 5) + b'{"cod') == b""
        assert _garbage(addr, struct.pack(">iI", 100, 10) + b"{}") == b""  # vanishes mid-frame
    unknown = json.dumps({"code": 9999, "flag": 0, "opaque": 5}).encode()
    reply = _garbage(srv.broker, struct.pack(">iI", 4 + len(unknown), len(unknown)) + unknown)
    from mqtool.remoting import frame

    r = frame.decode(reply)
    assert (r.code, r.opaque, r.is_response) == (3, 5, True)  # REQUEST_CODE_NOT_SUPPORTED
    rc, ev, err = run_cpp(
        tmp_path / "home", "produce", srv.namesrv, "TopicH", "h", "3", "0", "0", "0", "0"
    )
    assert rc == 0, err
    assert srv.stop() == 0
    log = srv.stderr()
    assert log.count("bad frame") == 12 and "Traceback" not in log, log


def test_locked_store_is_refused(tmp_path: Path, serve_factory: Any) -> None:
    store = tmp_path / "store"
    srv = serve_factory(store)
    p = mqtool("serve", str(store), "--namesrv-port", "0", "--broker-port", "0", timeout=60)
    assert p.returncode == 3  # environment: a store another process holds
    assert "locked by another process" in p.stderr and "Traceback" not in p.stderr
    assert srv.stop(signal.SIGINT) == 0  # Ctrl-C stops it as cleanly as SIGTERM
    assert "Traceback" not in srv.stderr()
    assert not (store / "abort").exists() and (store / "lock").exists()


def _reader(stream: Any, sink: list[dict[str, Any]]) -> None:
    for line in stream:
        if line.startswith("{"):
            sink.append(json.loads(line))


def test_kill9_mid_run_loses_no_acknowledged_message(tmp_path: Path, serve_factory: Any) -> None:
    store = tmp_path / "store"
    srv = serve_factory(store)
    home = tmp_path / "home"
    home.mkdir()
    prod = subprocess.Popen(
        [
            str(CPP_PYTHON),
            str(CPP_CLIENT),
            "produce",
            srv.namesrv,
            "TopicK",
            "k",
            "5000",
            "0",
            "0",
            "0",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ, HOME=str(home)),
    )
    events: list[dict[str, Any]] = []
    t = threading.Thread(target=_reader, args=(prod.stdout, events))
    t.start()
    deadline = time.time() + 60
    while len(events) < 200 and time.time() < deadline:
        time.sleep(0.05)
    assert srv.stop(signal.SIGKILL) == -signal.SIGKILL
    acked = {e["key"] for e in events if e.get("status") == 0}
    assert len(acked) >= 200
    assert (store / "abort").exists()  # an unclean stop
    try:
        prod.wait(60)
    except subprocess.TimeoutExpired:
        prod.kill()
        prod.wait()
    t.join(10)
    acked = {e["key"] for e in events if e.get("status") == 0}
    again = serve_factory(store)
    assert again.stop() == 0, again.stderr()
    stored = Counter(_store_keys(store, "TopicK"))
    assert acked <= set(stored), sorted(acked - set(stored))[:5]
    assert max(stored.values()) == 1  # nothing stored twice


def test_eight_producers_both_clients(tmp_path: Path, serve_factory: Any) -> None:
    n = int(os.environ.get("MQTOOL_SERVE_LOAD_N", "10000"))
    store = tmp_path / "store"
    srv = serve_factory(store)
    create_topic(srv.broker, "TopicLoad")  # ali-ons needs its route before it sends
    procs = []
    for i in range(8):
        home = tmp_path / f"home{i}"
        home.mkdir()
        if i % 2 == 0:
            cmd = [
                str(CPP_PYTHON),
                str(CPP_CLIENT),
                "produce",
                srv.namesrv,
                "TopicLoad",
                f"p{i}",
                str(n),
                "0",
                "0",
                "0",
                "0",
            ]
        else:
            cmd = ["node", str(JS_CLIENT), "produce", srv.namesrv, "TopicLoad", f"p{i}", str(n)]
        procs.append(
            subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=str(home),
                env=dict(os.environ, HOME=str(home), NODE_PATH=str(NODE_MODULES)),
            )
        )
    acked: set[str] = set()
    for p in procs:
        out, err = p.communicate(timeout=1800)
        assert p.returncode == 0, err[-2000:]
        for line in out.splitlines():
            if line.startswith("{"):
                e = json.loads(line)
                if e.get("status") in (0, "SEND_OK"):
                    acked.add(e["key"])
    assert len(acked) == 8 * n
    assert srv.stop() == 0, srv.stderr()
    stored = Counter(_store_keys(store, "TopicLoad"))
    assert set(stored) == acked  # 0 lost
    assert sum(stored.values()) == 8 * n  # 0 duplicated


def test_bad_delay_levels_refused_before_the_store_is_touched(tmp_path: Path) -> None:
    store = tmp_path / "never"
    p = mqtool(
        "serve",
        str(store),
        "--namesrv-port",
        "0",
        "--broker-port",
        "0",
        "--delay-levels",
        "1s 2x",
        timeout=60,
    )
    assert p.returncode == 2  # usage: a value that is wrong
    assert p.stderr.count("\n") == 1 and "bad delay level" in p.stderr, p.stderr
    assert not store.exists()


def _max_offset(addr: str, topic: str) -> int:
    from mqtool.remoting.codes import RequestCode
    from mqtool.remoting.frame import RemotingCommand

    with connect(addr) as s:
        r = call(s, RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                             {"topic": topic, "queueId": 0}))
    return int(r.ext_fields["offset"])


def test_deeply_nested_json_header_is_refused(tmp_path: Path, serve_factory: Any) -> None:
    srv = serve_factory(tmp_path / "store")
    header = b"[" * 100_000 + b"]" * 100_000
    for addr in (srv.namesrv, srv.broker):
        assert _garbage(addr, struct.pack(">iI", 4 + len(header), len(header)) + header) == b""
    deep_ext = b'{"code":30,"opaque":1,"extFields":{"topic":"T","queueId":"0","x":' + (
        b'{"a":' * 40 + b"1" + b"}" * 40) + b"}}"
    assert _garbage(srv.broker, struct.pack(">iI", 4 + len(deep_ext), len(deep_ext)) + deep_ext) \
        == b""
    assert _max_offset(srv.broker, "T") == 0  # still serving
    assert srv.stop() == 0
    log = srv.stderr()
    assert log.count("JSON header nests deeper than 32 levels") == 3, log
    assert "Traceback" not in log and "RecursionError" not in log, log


@pytest.mark.slow
def test_partial_frames_are_capped_across_connections(tmp_path: Path, serve_factory: Any) -> None:
    """40 connections each send 15 MiB of a 16 MiB frame: the server holds at most its cap
    (128 MiB) of incomplete frames, closes the connections that would pass it, and gives the
    memory back when they close."""
    cap = 128 << 20
    srv = serve_factory(tmp_path / "store")
    assert _max_offset(srv.broker, "Warm") == 0
    before = srv.rss()
    conns, refused = [], 0
    chunk = b"\x00" * (1 << 20)
    for _ in range(40):
        s = connect(srv.broker)
        conns.append(s)
        try:
            s.sendall(struct.pack(">iI", (16 << 20) - 8, 100))
            for _ in range(15):
                s.sendall(chunk)
        except OSError:  # the server closed this one: it would have passed the cap
            refused += 1
    assert _max_offset(srv.broker, "Warm") == 0  # served while the others hold their bytes
    held = srv.rss()
    for s in conns:
        s.close()
    deadline = time.time() + 30
    while srv.stderr().count("closing the connection") < 40 and time.time() < deadline:
        time.sleep(0.2)
    assert _max_offset(srv.broker, "Warm") == 0
    after = srv.rss()
    assert 40 - cap // (15 << 20) - 1 <= refused < 40, refused
    # bounded by the cap (plus a read buffer per connection), not by 40 x 15 MiB = 600 MiB
    assert held - before < cap + (64 << 20), (before >> 20, held >> 20)
    assert after - before < 48 << 20, (before >> 20, after >> 20)  # given back
    assert srv.stop() == 0
    log = srv.stderr()
    assert log.count("would pass the 128 MiB cap") >= refused, log
    assert "Traceback" not in log, log


@pytest.mark.slow
def test_out_of_file_descriptors(tmp_path: Path, serve_factory: Any) -> None:
    """RLIMIT_NOFILE 256 and 400 connections: one line per listener, no spinning; a client
    connected before keeps being answered (a send that needs a new file gets SYSTEM_ERROR with
    the reason, no path); SIGTERM exits 0 and leaves a clean store with the offsets committed
    while out of descriptors."""
    from mqtool.remoting.codes import RequestCode, ResponseCode
    from mqtool.remoting.frame import RemotingCommand

    store = tmp_path / "store"
    srv = serve_factory(store, nofile=256)

    def send(s: socket.socket, topic: str) -> Any:
        ext = {"producerGroup": "P", "topic": topic, "defaultTopic": "TBW102",
               "defaultTopicQueueNums": 1, "queueId": 0, "sysFlag": 0, "bornTimestamp": 1,
               "flag": 0, "properties": ""}
        return call(s, RemotingCommand.request(RequestCode.SEND_MESSAGE, ext, b"x"))

    early = connect(srv.broker)
    assert send(early, "Before").code == ResponseCode.SUCCESS
    idle = []
    for i in range(400):
        try:
            idle.append(connect(srv.namesrv if i % 2 else srv.broker))
        except OSError:
            break
    time.sleep(5)  # out of descriptors for a while: accept keeps failing
    r = send(early, "NeedsNewFiles")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "Too many open files"), r
    assert send(early, "Before").code == ResponseCode.SUCCESS  # no new file needed
    r = call(early, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": "G", "topic": "Before", "queueId": 0, "commitOffset": 2}))
    assert r.code == ResponseCode.SUCCESS
    time.sleep(6)  # a flush round (5 s) fails too: said once
    log = srv.stderr()
    assert "cannot accept connections: Too many open files" in log, log
    assert len(log.splitlines()) < 10 and "Traceback" not in log, log
    assert srv.stop() == 0, srv.stderr()
    for s in [early, *idle]:
        s.close()
    log = srv.stderr()
    # said once per listener and episode, not once per attempt: an episode ends whenever a
    # descriptor comes free and a waiting connection takes it (serve's own come and go: a
    # read-ahead's, a flush round's), and the next attempt begins another
    assert log.count("cannot accept connections") <= 6 and "Traceback" not in log, log
    assert not (store / "abort").exists()
    from mqtool.formats.config import load_config

    offsets = load_config(store, "consumerOffset.json").value
    assert offsets.offset_table["Before@G"] == {0: 2}
    p = mqtool("verify", str(store))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert sorted(_store_keys(store, "Before")) == ["", ""]
