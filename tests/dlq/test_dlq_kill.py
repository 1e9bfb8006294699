"""Acceptance 3: a resend of thousands of DLQ records, SIGKILLed at random points and re-run,
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
