"""Start ``mqtool serve`` in a subprocess on free 127.0.0.1 ports and run the real peers.

The peers (PyPI rocketmq 0.4.4 in build/peers/cpp, npm ali-ons 3.12.0 in build/peers/node)
are installed by ``make peers`` (a prerequisite of ``make test``); a missing peer fails the
test, it is never skipped.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqtool.remoting import frame
from mqtool.remoting.frame import RemotingCommand

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "build" / "peers"
CPP_PYTHON = PEERS / "cpp" / "bin" / "python"
NODE_MODULES = PEERS / "node" / "node_modules"
HERE = Path(__file__).resolve().parent
CPP_CLIENT = HERE / "peers" / "cpp_client.py"
JS_CLIENT = HERE / "peers" / "js_client.js"


def require_peers() -> None:
    missing = [str(p) for p in (CPP_PYTHON, NODE_MODULES / "ali-ons") if not p.exists()]
    if missing:
        pytest.fail(f"real peers not installed ({', '.join(missing)}): run `make peers`")


class Served:
    """One ``mqtool serve`` process."""

    def __init__(self, store: Path, log: Path, *args: str, nofile: int | None = None) -> None:
        self.store = store
        self.log_path = log
        self.args = args
        self.nofile = nofile  # RLIMIT_NOFILE of the serve process (None: inherited)
        self.proc: subprocess.Popen[str] | None = None
        self.ready = ""
        self.namesrv = ""
        self.broker = ""

    def start(self, timeout: float = 60) -> Served:
        self._log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mqtool",
                "serve",
                str(self.store),
                "--namesrv-port",
                "0",
                "--broker-port",
                "0",
                *self.args,
            ],
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            preexec_fn=self._limit if self.nofile is not None else None,
        )
        line: list[str] = []
        t = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()))  # type: ignore[union-attr]
        t.start()
        t.join(timeout)
        if not line or "ready" not in line[0]:
            self.proc.kill()
            raise AssertionError(f"serve did not get ready: {line} {self.stderr()}")
        self.ready = line[0].strip()
        words = self.ready.split()
        self.namesrv = words[words.index("namesrv") + 1]
        self.broker = words[words.index("broker") + 2]
        return self

    def _limit(self) -> None:
        assert self.nofile is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    def rss(self) -> int:
        """Resident set size of the serve process in bytes (``VmRSS`` of /proc/PID/status)."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self._log.close()
        return rc

    def stderr(self) -> str:
        return self.log_path.read_text(encoding="utf-8")


@pytest.fixture
def serve_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[Served] = []

    def make(store: Path, *args: str, nofile: int | None = None) -> Served:
        s = Served(store, tmp_path / f"serve-{len(started)}.log", *args, nofile=nofile).start()
        started.append(s)
        return s

    require_peers()
    yield make
    for s in started:
        if s.proc is not None and s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def run_cpp(home: Path, *args: str, timeout: float = 180) -> tuple[int, list[dict[str, Any]], str]:
    """Run the C++-core client in its own process (HOME isolated: it writes $HOME/logs)."""
    home.mkdir(exist_ok=True)
    env = dict(os.environ, HOME=str(home))
    p = subprocess.run(
        [str(CPP_PYTHON), str(CPP_CLIENT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    return p.returncode, _events(p.stdout), p.stderr


def run_js(home: Path, *args: str, timeout: float = 180) -> tuple[int, list[dict[str, Any]], str]:
    """Run the ali-ons client in its own node process."""
    home.mkdir(exist_ok=True)
    env = dict(os.environ, HOME=str(home), NODE_PATH=str(NODE_MODULES))
    p = subprocess.run(
        ["node", str(JS_CLIENT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(home),
    )
    return p.returncode, _events(p.stdout), p.stderr


def mqtool(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The mqtool CLI in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "mqtool", *args], capture_output=True, text=True, timeout=timeout
    )


def connect(addr: str) -> socket.socket:
    """A plain blocking socket to ``host:port``."""
    host, port = addr.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def call(s: socket.socket, cmd: RemotingCommand) -> RemotingCommand:
    """One request on an open connection; its answer (requests the server sends meanwhile,
    such as NOTIFY_CONSUMER_IDS_CHANGED to a consumer, are passed over)."""
    s.sendall(frame.encode(cmd))
    data = b""
    while True:
        while len(data) < 4 or len(data) < 4 + frame.length_of(data):
            chunk = s.recv(65536)
            assert chunk, f"connection closed after {len(data)} bytes"
            data += chunk
        end = 4 + frame.length_of(data)
        got = frame.decode(data[:end])
        data = data[end:]
        if got.is_response:
            assert not data, f"{len(data)} bytes after the answer"
            return got


def ask(addr: str, cmd: RemotingCommand) -> RemotingCommand:
    """One request on its own connection; its answer."""
    with connect(addr) as s:
        return call(s, cmd)


def create_topic(broker: str, topic: str, queues: int = 4) -> None:
    """``mqadmin updateTopic`` as one request (UPDATE_AND_CREATE_TOPIC): a client that cannot
    fall back to TBW102 (ali-ons) needs its topic before it sends, as with a real broker."""
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues,
           "writeQueueNums": queues, "perm": 6, "topicFilterType": "SINGLE_TAG",
           "topicSysFlag": 0, "order": "false"}
    r = ask(broker, RemotingCommand.request(17, ext))
    assert r.code == 0, r.remark
