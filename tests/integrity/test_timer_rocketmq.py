"""RocketMQ 5.3.3's own ``TimerMessageStore`` (rocketmq-store 5.3.3 from Maven Central, the
class path of tests/judge/rocketmq_judge.py) recovers ``mqtool repair``'s
copies in a real JVM: the timerlog is not cut, the timer checkpoint and queue offset come out
as repair wrote them, no wheel slot points past the timerlog. On a damaged timerlog, repair
writes what RocketMQ's own recovery computes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from integrity_damage import FIXTURES, ROOT, copy_store, patch, run

sys.path.insert(0, str(ROOT / "tests" / "judge"))
from rocketmq_judge import JVM_FLAGS, classpath  # noqa: E402

PROBE = Path(__file__).parent / "java" / "TimerProbe.java"
NONE = 2**63 - 1  # checkPhyPos: no slot past the end


@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("timerprobe")
    res = subprocess.run(["javac", "-cp", classpath("5.3.3"), "-d", str(out), str(PROBE)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return out


def _recover(store: Path, probe_dir: Path) -> dict[str, list[str]]:
    """RocketMQ's timer recovery on ``store`` (fixture geometry: 64 KiB commitlog and
    timerlog files, 30-unit consume-queue files, 100 index slots)."""
    res = subprocess.run(
        ["java", *JVM_FLAGS, "-cp", f"{classpath('5.3.3')}:{probe_dir}", "TimerProbe",
         str(store), "65536", "600", "65536", "100"],
        capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out: dict[str, list[str]] = {}
    for line in res.stdout.splitlines():
        key, _, rest = line.partition(" ")
        if key == "metric":
            count, _, topic = rest.partition(" ")
            out[f"metric {topic}"] = [count]
        elif key:
            out[key] = rest.split()
    return out


def _tear(store: Path) -> None:
    path = store / "commitlog" / "00000000000000000000"
    start = 13278 + 489 // 2  # inside the pending timer record
    patch(path, start, bytes(path.stat().st_size - start))


def _bad_unit(store: Path) -> None:
    patch(store / "timerlog" / "00000000000000000000", 156 + 12, (0x100).to_bytes(4, "big"))


def _assert_recovery_kept(got: dict[str, list[str]]) -> None:
    """Recovery changes nothing in timercheck, but for the one rule that depends on the clock:
    a read time older than the wheel's 7 days is raised to the oldest it keeps (``readFloor``,
    taken just before and after recovery ran)."""
    assert got["after"][1:4] == got["before"][1:4]
    read = int(got["before"][0])
    lo, hi = (int(v) for v in got["readFloor"])
    assert max(read, lo) <= int(got["after"][0]) <= max(read, hi)


@pytest.mark.parametrize(("seed", "before", "src_end"), [
    # (flush, q, master) that repair writes; where RocketMQ's recovery of the damaged source
    # leaves the timerlog
    ("torn-tail", ["156", "3", "3"], "260"),  # the broker keeps the units past the cut
    ("bad-unit", ["156", "3", "5"], "156"),  # the broker cuts at the bad unit, as repair does
])
def test_rocketmq_timer_recovery_accepts_the_repaired_copy(
        seed: str, before: list[str], src_end: str, tmp_path: Path,
        probe_dir: Path) -> None:
    src = copy_store("5.3.3/plain", tmp_path)
    {"torn-tail": _tear, "bad-unit": _bad_unit}[seed](src)
    out = tmp_path / "repaired"
    res = run("repair", src, "--out", out)
    assert res.returncode == 0, res.stderr
    got = _recover(out, probe_dir)
    assert got["storeLoad"] == ["true"] and got["timerLoad"] == ["true"]
    assert got["before"][1:] == before
    _assert_recovery_kept(got)
    assert got["after"][4] == before[1]  # the enqueue resumes where repair says
    assert got["timerlog"] == [before[0], before[0]]  # nothing cut
    assert got["minFirstPastEnd"] == [str(NONE)]
    assert got["metric " + "LongTopic-" + "abcdefghij" * 14] == ["0"]
    damaged = _recover(src, probe_dir)
    assert damaged["timerlog"][0] == src_end
    if seed == "bad-unit":  # repair's timercheck is RocketMQ's own result
        assert damaged["after"][1:4] == before


def test_verify_names_the_read_time_rocketmq_raises_at_a_late_start(
        tmp_path: Path, probe_dir: Path) -> None:
    """The fixture's timer read time is more than the wheel's 7 days old: RocketMQ's recovery
    raises it, and ``verify --now T`` names the time it raises it to at a start at ``T`` (T
    taken just before and just after RocketMQ's recovery ran), and the one pending unit (due an
    hour after the read time) as skipped."""
    src = copy_store("5.3.3/plain", tmp_path)
    t0 = int(time.time() * 1000)
    got = _recover(src, probe_dir)
    t1 = int(time.time() * 1000)
    read, raised = int(got["before"][0]), int(got["after"][0])
    assert raised > read  # the fixture was written more than 7 days ago

    def verify_at(now: int) -> dict[str, int]:
        res = run("verify", FIXTURES / "5.3.3" / "plain" / "store", "--json", "--now", str(now))
        assert res.returncode == 0, res.stderr
        timer: dict[str, int] = json.loads(res.stdout)["restartWouldLose"]["timer"]
        return timer

    lo, hi = verify_at(t0), verify_at(t1)
    assert lo["readTimeMs"] == hi["readTimeMs"] == read
    assert lo["readTimeRaisedTo"] <= raised <= hi["readTimeRaisedTo"]
    assert lo["timerUnitsSkipped"] == hi["timerUnitsSkipped"] == 1
