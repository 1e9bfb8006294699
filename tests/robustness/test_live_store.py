"""Read commands on a store a broker is writing: no false findings, no tracebacks.

A real broker (RocketMQ 4.9.7 and 5.3.3 from Maven Central, tests/realmq.py) or ``mqtool serve``
takes sends from four real C++ clients (PyPI rocketmq 0.4.4, 25 a second each) while a push
consumer fails some messages once (the broker's send-back writes the schedule and retry topics).
Commitlog files of 1 MiB, small consume-queue and index files: files are made and filled all
along. Meanwhile every read command (inspect, messages, cq, msg, index, index --key, trace,
trace --key, verify, dlq list) runs from two threads, as separate processes, each thread running
every command once (starting at another command) while the broker is writing: each command runs
twice, at different points of the store's growth. Every run exits 0, prints no traceback, no
error line and says once that the store is live; verify reports no error and no warning but the
lock's. Production stops when the readers are done (at least ``MIN_PRODUCTION_S``). Then, the
broker still running, every command runs once more and reads clean; last, damage is made in the
live store behind the write point and ``messages`` and ``cq`` still exit 1 naming it.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import realmq
from robust_harness import ERROR_LINE
from serve.conftest import CPP_PYTHON, Served, require_peers

from mqtool.store import Store

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "peers" / "live_client.py"
TOPIC = "LiveTopic"
GROUP = "cg_live"
PRODUCERS = 4
RATE = 25  # sends a second per producer: the store grows, small enough for the reads
READERS = 2  # threads, each running every command once while the broker writes
MIN_PRODUCTION_S = 20
MAX_PRODUCTION_S = 900  # a bound for a machine so slow that the reads never end
CONF = {
    "mappedFileSizeCommitLog": str(1 << 20),
    "mappedFileSizeConsumeQueue": str(20 * 3000),
    "maxHashSlotNum": "20000",
    "maxIndexNum": "80000",
}


@dataclass
class Result:
    cmd: str
    code: int
    stdout: str
    stderr: str
    during: bool  # ended while the broker was still taking sends


@dataclass
class LiveRun:
    name: str
    store: Path
    results: list[Result] = field(default_factory=list)
    after: list[Result] = field(default_factory=list)  # once each when production stopped
    damaged: dict[str, tuple[Result, str, int]] = field(default_factory=dict)
    sent: int = 0
    messages_first: int = 0
    messages_last: int = 0
    cmds: list[list[str]] = field(default_factory=list)


def _mqtool(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "mqtool", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def _commands(store: Path, uniq: str, offset_id: str) -> list[list[str]]:
    s = str(store)
    return [
        ["inspect", s, "--json"], ["messages", s, "--jsonl"], ["cq", s, "--jsonl"],
        ["msg", s, offset_id, "--json"], ["index", s, "--json"],
        ["index", s, "--key", "P1-5", "--json"], ["trace", s, uniq, "--json"],
        ["trace", s, "--key", "P2-7", "--json"], ["verify", s, "--json"],
        ["dlq", "list", s, "--json"],
    ]


def _name(cmd: list[str]) -> str:
    return " ".join(a for a in cmd if not a.startswith("/")).split(" --json")[0]


def _count(store: Path) -> int:
    res = _mqtool("messages", store, "--jsonl", "--topic", TOPIC)
    return len(res.stdout.splitlines())


def _read_all(run: LiveRun, producing: threading.Event) -> None:
    """``READERS`` threads, each running every command once, starting at another command."""
    first = _mqtool("messages", run.store, "--jsonl", "--topic", TOPIC, "--limit", "1")
    m = json.loads(first.stdout.splitlines()[0])
    cmds = run.cmds = _commands(run.store, m["uniqKey"], m["offsetMsgId"])
    lock = threading.Lock()

    def reader(k: int) -> None:
        for c in cmds[k:] + cmds[:k]:
            res = _mqtool(*c)
            with lock:
                run.results.append(Result(_name(c), res.returncode, res.stdout, res.stderr,
                                          producing.is_set()))

    threads = [threading.Thread(target=reader, args=(k * len(cmds) // READERS,))
               for k in range(READERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _clients(namesrv: str, work: Path, stop: Path) -> Iterator[subprocess.Popen[str]]:
    for i in range(PRODUCERS):
        home = work / f"producer-{i}"
        home.mkdir()
        yield subprocess.Popen(
            [str(CPP_PYTHON), str(CLIENT), "produce", namesrv, TOPIC, f"P{i}",
             str(MAX_PRODUCTION_S), str(stop), str(RATE)],
            env=dict(os.environ, HOME=str(home)), stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True)


def _consumer(namesrv: str, work: Path, stop: Path) -> subprocess.Popen[str]:
    home = work / "consumer"
    home.mkdir()
    return subprocess.Popen(
        [str(CPP_PYTHON), str(CLIENT), "consume", namesrv, GROUP, TOPIC,
         str(MAX_PRODUCTION_S), str(stop), "7"],
        env=dict(os.environ, HOME=str(home)), stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)


def _drive(run: LiveRun, namesrv: str, work: Path) -> None:
    """Producers and the consumer on ``namesrv`` while the readers run."""
    stop = work / "stop"
    producers = list(_clients(namesrv, work, stop))
    consumer = None
    producing = threading.Event()
    try:
        deadline = time.monotonic() + 120
        while _count(run.store) < 200:  # the topic and its first messages exist
            assert time.monotonic() < deadline, "the producers sent nothing"
            assert all(p.poll() is None for p in producers), "a producer died"
            time.sleep(1)
        consumer = _consumer(namesrv, work, stop)
        producing.set()
        started = time.monotonic()
        run.messages_first = _count(run.store)
        _read_all(run, producing)
        time.sleep(max(0.0, MIN_PRODUCTION_S - (time.monotonic() - started)))
        run.messages_last = _count(run.store)
    finally:
        producing.clear()
        stop.touch()
        for p in [*producers, *([consumer] if consumer else [])]:
            try:
                out, _ = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            if p in producers and out.strip():
                run.sent += json.loads(out.strip().splitlines()[-1])["sent"]


def _after(run: LiveRun) -> None:
    """Production stopped, the broker still running: every command once more."""
    time.sleep(3)  # the consumer's last offsets and the broker's flush
    for c in run.cmds:
        res = _mqtool(*c)
        run.after.append(Result(_name(c), res.returncode, res.stdout, res.stderr, False))


def _damage(run: LiveRun) -> None:
    """Real damage in the live store, behind the broker's write point: the magic of the record
    of LiveTopic/2@0 (``messages`` must name it), and the unit LiveTopic/0@1 rewritten to point
    at the record of LiveTopic/1@0 (``cq`` must name it)."""
    with Store.open(run.store) as st:
        rec = st.queue_entry(TOPIC, 2, 0)
        unit = st.queue_entry(TOPIC, 0, 1)
        other = st.queue_entry(TOPIC, 1, 0)
        assert rec is not None and unit is not None and other is not None
        cl = st.file_for(rec.entry.commit_log_offset)
        assert cl is not None
        at = rec.entry.commit_log_offset - cl.start
    with open(cl.path, "r+b") as f:
        f.seek(at + 4)  # MAGICCODE
        f.write(b"\x00\x00\x00\x00")
    with open(run.store / unit.file, "r+b") as f:
        f.seek(unit.file_offset)
        f.write(struct.pack(">qiq", other.entry.commit_log_offset, other.entry.size,
                            other.entry.tags_code))
    for name, args, where in (
            ("messages", ["messages", run.store, "--jsonl"], (cl.rel, at)),
            ("cq", ["cq", run.store, TOPIC, "--jsonl"], (unit.file, unit.file_offset))):
        res = _mqtool(*args)
        run.damaged[name] = (Result(name, res.returncode, res.stdout, res.stderr, False), *where)


@pytest.fixture(scope="module", params=[*realmq.VERSIONS, "serve"])
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> LiveRun:
    require_peers()
    name = str(request.param)
    work = tmp_path_factory.mktemp(f"live-{name}")
    run = LiveRun(name, work / "store")
    if name == "serve":
        run.store.mkdir()
        served = Served(run.store, work / "serve.log").start()
        try:
            _drive(run, served.namesrv, work)
            _after(run)
            _damage(run)
        finally:
            assert served.stop() == 0, served.stderr()
    else:
        with realmq.Cluster(name, run.store, broker_conf=CONF) as cluster:
            _drive(run, cluster.namesrv_addr, work)
            _after(run)
            _damage(run)
    return run


def test_every_command_ran_while_the_broker_wrote(live: LiveRun) -> None:
    during = Counter(r.cmd for r in live.results if r.during)
    assert len(during) == 10, during
    assert min(during.values()) >= READERS, during
    assert live.messages_last > live.messages_first > 0  # the store grew under the reads
    assert live.sent >= live.messages_last


def test_no_traceback_and_no_false_finding(live: LiveRun) -> None:
    during = [r for r in live.results if r.during]
    print(f"{live.name}: {len(live.results)} runs ({len(during)} while the broker wrote), "
          f"{sum(r.code == 1 for r in live.results)} exited 1, "
          f"{sum('Traceback' in r.stderr for r in live.results)} tracebacks; "
          f"{live.messages_first} -> {live.messages_last} messages, {live.sent} sent")
    bad = [r for r in live.results if r.code != 0 or "Traceback" in r.stderr
           or "error:" in r.stderr]
    assert not bad, [(r.cmd, r.code, r.stderr[-2000:]) for r in bad[:5]]


def test_the_store_is_said_to_be_live_once(live: LiveRun) -> None:
    for r in live.results:
        assert r.stderr.count("note: the store is live") == 1, (r.cmd, r.stderr[-1000:])


def test_verify_finds_nothing_but_the_lock(live: LiveRun) -> None:
    for r in live.results:
        if r.cmd.startswith("verify") and r.during:
            doc = json.loads(r.stdout)
            kinds = {(f["severity"], f["file"]) for f in doc["findings"]
                     if f["severity"] != "info"}
            assert kinds <= {("warning", "lock")}, doc["findings"][:10]


def test_all_clean_when_production_stopped(live: LiveRun) -> None:
    assert len(live.after) == len(live.cmds) == 10
    bad = [r for r in live.after if r.code != 0 or "Traceback" in r.stderr
           or "error:" in r.stderr]
    assert not bad, [(r.cmd, r.code, r.stderr[-2000:]) for r in bad[:5]]


def test_damage_in_a_live_store_is_still_an_error(live: LiveRun) -> None:
    assert set(live.damaged) == {"messages", "cq"}
    for r, file, offset in live.damaged.values():
        assert r.code == 1, (r.cmd, r.code, r.stderr[-2000:])
        assert "Traceback" not in r.stderr, r.stderr[-2000:]
        named = [m for m in map(ERROR_LINE.match, r.stderr.splitlines())
                 if m and m["file"] == file and m["off"] is not None
                 and int(m["off"], 16) == offset]
        assert named, (r.cmd, file, hex(offset), r.stderr[-2000:])
