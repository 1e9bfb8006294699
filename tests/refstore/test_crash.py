"""SIGKILL a writing and ticking process at random points, reopen.

50 runs: 10 fresh stores, each killed and recovered 5 times (kills land during open/recovery
as well as during puts, send-backs, ticks and config writes). After every reopen, every put
that returned is present exactly once, no delayed message was delivered twice, and consume
queues and index files agree with the commitlog (see crashkit.verify). The long version is
bench/write/crash_soak.py.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from crashkit import run_once, verify


@pytest.mark.slow
@pytest.mark.parametrize("store_no", range(10))
def test_sigkill_at_random_points(tmp_path: Path, store_no: int) -> None:
    rnd = random.Random(1000 + store_no)
    root = tmp_path / "store"
    acked: set[str] = set()
    for run in range(5):
        seed = store_no * 100 + run
        kill_after = rnd.choice([-rnd.uniform(1, 40), rnd.uniform(0, 60), rnd.uniform(0, 15)])
        lines = run_once(root, seed, kill_after_ms=kill_after, max_ops=300)
        acked.update(line[2:] for line in lines if line.startswith("P "))
        if not root.exists():
            continue
        verify(root, acked)
