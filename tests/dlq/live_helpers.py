"""Helpers of the live-cluster DLQ tests: `mqtool serve` in a subprocess on free 127.0.0.1
ports, the real consumer peers (PyPI rocketmq 0.4.4 in build/peers/cpp, npm ali-ons 3.12.0 in
build/peers/node; `make peers`), and a fault proxy in front of the served name server and
broker that can answer sends with the broker's error codes or check ACL signatures."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mqtool.remoting import bodies
from mqtool.remoting.connection import Connection
from mqtool.remoting.frame import RemotingCommand
from mqtool.remoting.server import Peer, RemotingServer

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PEERS = ROOT / "build" / "peers"
CPP_PYTHON = PEERS / "cpp" / "bin" / "python"
NODE_MODULES = PEERS / "node" / "node_modules"


def require_peers() -> None:
    missing = [str(p) for p in (CPP_PYTHON, NODE_MODULES / "ali-ons") if not p.exists()]
    if missing:
        pytest.fail(f"real peers not installed ({', '.join(missing)}): run `make peers`")


class Served:
    """One `mqtool serve STORE` process on free ports (or the given ones)."""

    def __init__(self, store: Path, log: Path, ns_port: int = 0, broker_port: int = 0) -> None:
        self.store = store
        self.log = log
        self.ns_port = ns_port
        self.broker_port = broker_port
        self.proc: subprocess.Popen[str] | None = None
        self.namesrv = ""
        self.broker = ""

    def start(self, timeout: float = 60) -> Served:
        with open(self.log, "a", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mqtool", "serve", str(self.store), "--namesrv-port",
                 str(self.ns_port), "--broker-port", str(self.broker_port)],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
        line: list[str] = []
        assert self.proc.stdout is not None
        t = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()),  # type: ignore[union-attr]
                             daemon=True)
        t.start()
        t.join(timeout)
        if not line or "ready" not in line[0]:
            self.proc.kill()
            raise AssertionError(f"serve did not get ready: {line} {self.log.read_text()}")
        words = line[0].split()
        self.namesrv = words[words.index("namesrv") + 1]
        self.broker = words[words.index("broker") + 2]
        self.ns_port = int(self.namesrv.rsplit(":", 1)[1])
        self.broker_port = int(self.broker.rsplit(":", 1)[1])
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


def mqtool(*args: str, env: dict[str, str] | None = None,
           timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqtool", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


KILL_POINTS = [["after-intent:1"], ["put:2"], ["before-done:1"], ["after-done:1", "put:1"]]
"""Crash points of the resend journal (``mqtool.dlq.journal.crash_point``), one list per run."""


def killed_then_rerun(args: list[str], points: list[str], env: dict[str, str],
                      selected: int) -> None:
    """``mqtool *args`` killed (-9) at each of ``points`` in turn, then run to the end: every
    one of the ``selected`` records is sent or skipped, none fails; after a kill between the
    send and the journal's done record, the rerun finds the batch's 8 copies on the broker
    instead of sending them again."""
    for p in points:
        res = mqtool(*args, env={**env, "MQTOOL_CRASH_AT": p})
        assert res.returncode == -9, (p, res.stdout, res.stderr)
    final = mqtool(*args, "--json", env=env)
    assert final.returncode == 0, final.stderr
    rep = json.loads(final.stdout)
    assert rep["failed"] == 0 and rep["sent"] + rep["skipped"] == selected
    if points == ["before-done:1"]:
        found = [o for o in rep["outcomes"] if "interrupted" in (o["reason"] or "")]
        assert len(found) == 8


def one_line_error(res: subprocess.CompletedProcess[str], *words: str, code: int) -> str:
    """One ``error:`` line with ``words``, and exit status ``code`` (1 findings, 2 usage,
    3 environment)."""
    assert res.returncode == code, (res.returncode, res.stdout[-2000:], res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


# -- real consumer peers ------------------------------------------------------------------------

CPP_CONSUMER = HERE / "peers" / "cpp_consume.py"
JS_CONSUMER = HERE / "peers" / "js_consume.js"


class Consumer:
    """A real consumer process printing one JSON line per received message."""

    def __init__(self, kind: str, home: Path, ns: str, group: str, topic: str, expect: int,
                 timeout: float = 90) -> None:
        require_peers()
        home.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, HOME=str(home))
        if kind == "cpp":
            cmd = [str(CPP_PYTHON), str(CPP_CONSUMER)]
        else:
            cmd = ["node", str(JS_CONSUMER)]
            env["NODE_PATH"] = str(NODE_MODULES)
        self.proc = subprocess.Popen([*cmd, ns, group, topic, str(expect), str(timeout)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env, cwd=str(home))
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        assert '"started"' in first, (first, self.proc.stderr.read() if self.proc.stderr else "")

    def result(self, timeout: float = 150) -> tuple[int, list[dict[str, Any]]]:
        out, err = self.proc.communicate(timeout=timeout)
        events = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        return self.proc.returncode, events


# -- fault proxy --------------------------------------------------------------------------------

Rule = Callable[[RemotingCommand], RemotingCommand | None]


class FaultProxy:
    """A name server + broker front for a served cluster, on its own event loop thread.

    Routes and cluster info it answers point to the proxy's broker port. Every request passes
    through ``rule(request)`` first: a command returned is the answer (the request never reaches the
    broker), None forwards it. ``after(request, response)`` may replace a forwarded answer.
    Requests seen are kept in ``seen``.
    """

    def __init__(self, served: Served) -> None:
        self.served = served
        self.rule: Rule = lambda cmd: None
        self.after: Callable[[RemotingCommand, RemotingCommand], RemotingCommand] = \
            lambda req, resp: resp
        self.seen: list[RemotingCommand] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.ns_port, self.broker_port = self._call(self._start())
        self.namesrv = f"127.0.0.1:{self.ns_port}"

    def _call(self, coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self) -> tuple[int, int]:
        self._ns = RemotingServer(lambda c, p: self._handle(c, p, self.served.namesrv, True),
                                  name="proxy-ns", log=lambda m: None)
        self._br = RemotingServer(lambda c, p: self._handle(c, p, self.served.broker, False),
                                  name="proxy-broker", log=lambda m: None)
        self._up: dict[str, Connection] = {}
        return await self._ns.start("127.0.0.1", 0), await self._br.start("127.0.0.1", 0)

    async def _upstream(self, addr: str) -> Connection:
        c = self._up.get(addr)
        if c is None or c._error is not None:
            host, port = addr.rsplit(":", 1)
            c = self._up[addr] = await Connection.open(host, int(port))
        return c

    async def _handle(self, cmd: RemotingCommand, peer: Peer, addr: str,
                      ns: bool) -> RemotingCommand | None:
        self.seen.append(cmd)
        answer = self.rule(cmd)
        if answer is not None:
            return answer
        opaque = cmd.opaque
        fwd = RemotingCommand(cmd.code, 0, cmd.flag, cmd.language, cmd.version, cmd.remark,
                              dict(cmd.ext_fields), cmd.body, cmd.serialize_type)
        resp = await (await self._upstream(addr)).invoke(fwd, 10.0)
        resp.opaque = opaque
        if ns and cmd.code == 105 and resp.code == 0:
            route = bodies.parse_route(resp.body)
            brokers = [bodies.BrokerData(b.cluster, b.broker_name,
                                         {k: f"127.0.0.1:{self.broker_port}"
                                          for k in b.addrs}) for b in route.broker_datas]
            resp.body = bodies.build_route(bodies.TopicRouteData(route.queue_datas, brokers))
        if ns and cmd.code == 106 and resp.code == 0:  # a %RETRY% topic no broker has yet
            brokers = [bodies.BrokerData(b.cluster, b.broker_name,
                                         {k: f"127.0.0.1:{self.broker_port}"
                                          for k in b.addrs})
                       for b in bodies.parse_cluster_info(resp.body)]
            resp.body = bodies.build_cluster_info(brokers[0].cluster, brokers)
        return self.after(cmd, resp)

    def close(self) -> None:
        async def _close() -> None:
            await self._ns.close()
            await self._br.close()
            for c in self._up.values():
                await c.close()

        with contextlib.suppress(Exception):
            self._call(_close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


N = 24
GROUP = "g"


@pytest.fixture(scope="module", name="source")
def source_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store whose %DLQ%g holds N records (tags T, keys k<i> order-<i%7>, property user)."""
    from test_dlq_resend import make_dlq_source

    return make_dlq_source(tmp_path_factory.mktemp("src") / "src", N, GROUP)


@pytest.fixture(name="cluster")
def cluster_fixture(source: Path, tmp_path: Path) -> Iterator[Served]:
    """`mqtool serve` over a copy of the source store (its %DLQ%g is the live DLQ)."""
    store = tmp_path / "served"
    shutil.copytree(source, store)
    s = Served(store, tmp_path / "serve.log").start()
    yield s
    s.kill()


def wait_for(pred: Callable[[], bool], timeout: float = 30) -> None:
    t0 = time.monotonic()
    while not pred():
        if time.monotonic() - t0 > timeout:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)
