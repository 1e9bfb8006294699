"""A resend of thousands of DLQ records, SIGKILLed at random points and re-run,
ends with every selected record resent exactly once (counted in the target)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from test_dlq_resend import make_dlq_source, make_target, resent_copies

from mqtool.dlq import DlqSelection, select_dlq
from mqtool.dlq.journal import ResendJournal, default_journal_path
from mqtool.dlq.outgoing import RESEND_ID_PROPERTY, resend_id
from mqtool.refstore.engine import RefStore
from mqtool.store import Store

ROOT = Path(__file__).resolve().parents[2]
N = 3000
KILLS = 4


def _cmd(src: Path, target: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "mqtool", "dlq", "resend", str(src), "--group", "g",
            "--target", str(target), "--rate", "5000", "--batch", "16", *extra]


def test_killed_resend_rerun_sends_each_record_exactly_once(tmp_path: Path) -> None:
    src = make_dlq_source(tmp_path / "src", N)
    target = make_target(tmp_path / "target")
    journal = default_journal_path(target)
    rnd = random.Random(int.from_bytes(os.urandom(4), "big"))
    kills = 0
    for _ in range(KILLS):
        before = journal.stat().st_size if journal.exists() else 0
        p = subprocess.Popen(_cmd(src, target), cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and p.poll() is None:  # wait until it is sending
            if journal.exists() and journal.stat().st_size > before:
                break
            time.sleep(0.005)
        time.sleep(rnd.uniform(0, 0.15))
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            kills += 1
        p.wait()
    assert kills >= KILLS - 1  # the run usually outlives every kill point
    done_before = len(ResendJournal.read(journal).done_ids())
    assert 0 < done_before < N

    final = subprocess.run(_cmd(src, target, "--json"), cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert final.returncode == 0, final.stderr
    rep = json.loads(final.stdout)
    assert rep["selected"] == N and rep["failed"] == 0
    assert rep["sent"] + rep["skipped"] == N and rep["skipped"] >= done_before

    with Store.open(src) as st:
        want = {resend_id(m) for m in select_dlq(st, DlqSelection("g"))}
    counted = Counter(m.properties[RESEND_ID_PROPERTY] for m in resent_copies(target))
    assert set(counted) == want and len(want) == N
    assert max(counted.values()) == 1
    assert ResendJournal.read(journal).done_ids() == want
    with RefStore.open(target) as rs:  # a consumer of the group sees each exactly once
        pulled = [m for q in rs.queue_ids("%RETRY%g")
                  for m in rs.pull("g", "%RETRY%g", q, max_nums=1 << 20).messages]
    assert sorted(m.properties[RESEND_ID_PROPERTY] for m in pulled) == sorted(want)
    # and once more: nothing left to send
    again = subprocess.run(_cmd(src, target, "--json"), cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert json.loads(again.stdout)["skipped"] == N


# Deterministic kill points (mqtool.dlq.journal.crash_point: the process SIGKILLs itself the
# n-th time it passes the named point): between the intents' fsync and the first put, after
# the first / a middle put of a batch, after the puts before the done lines, in the middle of a
# journal write (torn line), and between batches. A second kill may hit the rerun.
KILL_POINTS = [
    ["after-intent:3"], ["put:1"], ["put:37"], ["before-done:2"], ["journal-torn:4"],
    ["after-done:5"], ["after-intent:2", "put:3"],
]


@pytest.mark.parametrize("points", KILL_POINTS, ids=lambda p: "+".join(p))
def test_kill_at_each_point_then_rerun_loses_and_duplicates_nothing(
    tmp_path: Path, points: list[str], dlq_200: Path
) -> None:
    target = make_target(tmp_path / "target")
    journal = default_journal_path(target)
    cmd = [sys.executable, "-m", "mqtool", "dlq", "resend", str(dlq_200), "--group", "g",
           "--target", str(target), "--batch", "16"]
    for point in points:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "MQTOOL_CRASH_AT": point})
        assert p.returncode == -signal.SIGKILL, (point, p.stderr)
    if points[0].startswith("journal-torn"):
        assert not journal.read_bytes().endswith(b"\n")  # the kill tore the last line
    final = subprocess.run([*cmd, "--json"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert final.returncode == 0, final.stderr
    rep = json.loads(final.stdout)
    assert rep["selected"] == 200 and rep["failed"] == 0 and rep["sent"] < 200
    counted = Counter(m.properties[RESEND_ID_PROPERTY] for m in resent_copies(target))
    with Store.open(dlq_200) as st:
        want = {resend_id(m) for m in select_dlq(st, DlqSelection("g"))}
    assert set(counted) == want and max(counted.values()) == 1
    assert ResendJournal.read(journal).done_ids() == want


@pytest.fixture(scope="module")
def dlq_200(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dlq_source(tmp_path_factory.mktemp("src") / "src", 200)
