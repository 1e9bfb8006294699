"""bench/verify: ``mqtool verify`` throughput as a ratio to a sequential read, in one run.

Usage::

    .venv/bin/python bench/verify/run.py [--full] [--store DIR] [--size SIZE] [--no-crc]

The default is a small run (a 128 MiB store); ``--full`` uses a 1 GiB store (the issue's size).
Builds the store once with the reference store (``mqtool demo DIR --size SIZE``: the demo's
business messages plus 1 KiB BenchTopic messages up to SIZE) unless DIR already holds one, then
measures on warm files, in this run:

* ``sequential read``: ``readinto`` (8 MiB buffer) of every file verify reads (commitlog,
  consume queues, index): the baseline, read twice (the first pass warms the page cache);
* ``verify``: :func:`mqtool.integrity.verify` in this process, body CRC of every message on
  (unless ``--no-crc``), then the restart-loss step; its ratio = read seconds / verify seconds
  (the fraction of a sequential read's throughput verify reaches);
* peak anonymous memory (``RssAnon`` high-water, sampled every 0.2 s) of this process during
  verify, against the store size: per-message facts are kept in numpy arrays (about 80 bytes
  per message plus 8 per index key), so memory grows with the message count, not the bytes.

The issue's target is 0.1 of the sequential read with a CRC over every body. Results go to
stdout and to ``bench/verify/last-run.json`` (bench/figures.py's schema: commit, core count, load
average, figures with ratios to the sequential read of the same run).
This is a benchmark, not a test: run it once, not in a loop, on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TARGET_RATIO = 0.1


def _files(store: Path) -> list[Path]:
    out: list[Path] = []
    for sub in ("commitlog", "consumequeue", "index"):
        d = store / sub
        if d.is_dir():
            out += sorted(p for p in d.rglob("*") if p.is_file())
    return out


def sequential_read(files: list[Path]) -> tuple[float, int]:
    buf = bytearray(8 << 20)
    view = memoryview(buf)
    total = 0
    t = time.perf_counter()
    for p in files:
        with open(p, "rb", buffering=0) as f:
            while True:
                n = f.readinto(view)
                if not n:
                    break
                total += n
    return time.perf_counter() - t, total


class PeakRss:
    """Peak ``RssAnon`` (heap, not mapped store pages) of this process, sampled."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def now() -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
        return 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.now())
            self._stop.wait(0.2)

    def __enter__(self) -> PeakRss:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self.now())


def build_store(store: Path, size: str) -> float | None:
    if (store / "commitlog").is_dir():
        return None
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "mqtool", "demo", str(store), "--size", size, "--json"],
        check=True, stdout=subprocess.DEVNULL, cwd=ROOT,
    )
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--full", action="store_true", help="a 1 GiB store (default: 128 MiB)")
    ap.add_argument("--store", type=Path, default=None)
    ap.add_argument("--size", default=None)
    ap.add_argument("--no-crc", action="store_true")
    a = ap.parse_args()
    size = a.size or ("1GiB" if a.full else "128MiB")
    store = a.store or Path(f"/tmp/mqtool-bench-verify-{size}")

    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(HERE.parent))
    from figures import run_meta, write_last_run

    from mqtool.integrity import verify
    from mqtool.integrity.recovery import restart_loss

    built = build_store(store, size)
    meta = run_meta()
    files = _files(store)
    sequential_read(files)  # warm the page cache
    read_s, nbytes = sequential_read(files)
    rss0 = PeakRss.now()
    with PeakRss() as peak:
        t = time.perf_counter()
        report = verify(store, check_crc=not a.no_crc)
        loss = restart_loss(report)
        verify_s = time.perf_counter() - t
    ratio = read_s / verify_s
    msgs = report.summary["messages"]
    crc = "" if a.no_crc else ", body CRC of every message"
    per_msg = (peak.peak - rss0) / max(msgs, 1)
    doc: dict[str, Any] = {
        "size": "full" if a.full else "small",
        "params": {"store": str(store), "storeSize": size, "bytes": nbytes, "files": len(files),
                   "messages": msgs, "crc": not a.no_crc, "storeBuiltSeconds": built},
        "baseline": "sequential read (8 MiB readinto, warm) of the same files, same run",
        "figures": [
            {"what": "sequential read of commitlog, consume queues, index (warm)",
             "value": round(nbytes / read_s / 2**20, 1), "unit": "MiB/s", "ratio": 1.0},
            {"what": f"mqtool verify in process (all checks{crc}, restart loss)",
             "value": round(nbytes / verify_s / 2**20, 1), "unit": "MiB/s",
             "ratio": round(ratio, 4)},
            {"what": "mqtool verify, messages", "value": round(msgs / verify_s),
             "unit": "msgs/s", "ratio": None},
            {"what": "verify peak RssAnon growth per message", "value": round(per_msg, 1),
             "unit": "bytes", "ratio": None},
        ],
        "notes": [
            f"Target (issue 10): verify at 0.1 of the sequential read with CRC; measured "
            f"{ratio:.3f}. {report.summary['errors']} error findings; restart would lose "
            f"{'nothing' if loss.nothing else 'something'}. Memory grows with the message "
            f"count (numpy per-message facts), not with bytes: peak RssAnon "
            f"{peak.peak / 2**20:.0f} MiB for {msgs:,} messages.",
        ],
    }
    print(f"store {store}: {nbytes / 2**20:,.0f} MiB in {len(files)} files, {msgs:,} messages")
    print(f"{'what':<20}{'seconds':>10}{'MiB/s':>10}{'ratio':>8}")
    print(f"{'sequential read':<20}{read_s:>10.2f}{nbytes / read_s / 2**20:>10.1f}{1.0:>8.3f}")
    print(f"{'verify' + (' (CRC)' if not a.no_crc else ''):<20}{verify_s:>10.2f}"
          f"{nbytes / verify_s / 2**20:>10.1f}{ratio:>8.3f}")
    print(f"target ratio {TARGET_RATIO}; peak RssAnon {peak.peak / 2**20:.0f} MiB "
          f"({per_msg:.0f} bytes per message); load average {meta['loadAverage']} on "
          f"{os.cpu_count()} cores")
    write_last_run("verify", meta, doc)


if __name__ == "__main__":
    main()
