"""Crash soak for the reference store: many SIGKILLs at random points, verify after each.

Usage: .venv/bin/python bench/write/crash_soak.py [--runs 1000] [--per-store 20] [--dir DIR]

Same harness as tests/refstore/test_crash.py (tests/refstore/crashkit.py), longer: every
``--per-store`` kills a fresh store is started; each run forks a writer (puts, send-backs,
schedule ticks), kills it with SIGKILL after a random delay (sometimes during open/recovery),
reopens the store and checks that every acknowledged put is present exactly once, nothing was
delivered twice and consume queues and index files agree with the commitlog. Stops at the first
failure, leaving the store behind for inspection.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "refstore"))

from crashkit import run_once, verify  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--per-store", type=int, default=20)
    ap.add_argument("--max-ops", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="refstore-soak-"))
    rnd = random.Random(args.seed)
    t0 = time.monotonic()
    acked: set[str] = set()
    root = base / "store-0"
    totals = {"runs": 0, "acked": 0, "messages": 0}
    for run in range(args.runs):
        if run % args.per_store == 0:
            if root.exists():
                shutil.rmtree(root)
            root = base / f"store-{run // args.per_store}"
            acked = set()
        kill_after = rnd.choice([-rnd.uniform(1, 60), rnd.uniform(0, 200), rnd.uniform(0, 20)])
        seed = args.seed * 10_000 + run
        try:
            lines = run_once(root, seed, kill_after_ms=kill_after, max_ops=args.max_ops)
            acked.update(line[2:] for line in lines if line.startswith("P "))
            counts = verify(root, acked) if root.exists() else {"messages": 0}
        except AssertionError as e:
            print(f"FAILED at run {run} (seed {seed}, kill after {kill_after:.1f} ms): {e}")
            print(f"store left at {root}")
            return 1
        totals["runs"] += 1
        totals["acked"] = len(acked)
        totals["messages"] = counts["messages"]
        if run % 50 == 49:
            print(f"{run + 1} runs, {time.monotonic() - t0:.0f}s, store {root.name}: "
                  f"{counts['messages']} records, {len(acked)} acknowledged puts", flush=True)
    shutil.rmtree(base, ignore_errors=True)
    print(f"OK: {totals['runs']} kills survived in {time.monotonic() - t0:.0f}s (seed {args.seed})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
