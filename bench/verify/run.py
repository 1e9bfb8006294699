"""bench/verify: ``mqtool verify`` throughput as a ratio to a sequential read, in one run.

Usage::

    .venv/bin/python bench/verify/run.py [--full] [--store DIR] [--size SIZE] [--no-crc]
        [--small-store DIR]

The default is a small run (a 128 MiB store, memory also on a 32 MiB one); ``--full`` uses a
1 GiB store (the size the target is set for) and a 256 MiB one for memory (4x apart).
Builds the stores once with the reference store (``mqtool demo DIR --size SIZE``: the demo's
business messages plus 1 KiB BenchTopic messages up to SIZE) unless DIR already holds one, then
measures on warm files, in this run:

* ``sequential read``: ``readinto`` (8 MiB buffer) of every file verify reads (commitlog,
  consume queues, index): the baseline, read twice (the first pass warms the page cache);
* ``verify``: :func:`mqtool.integrity.verify` in this process, body CRC of every message on
  (unless ``--no-crc``), then the restart-loss step; its ratio = read seconds / verify seconds
  (the fraction of a sequential read's throughput verify reaches);
* peak anonymous memory (``RssAnon`` high-water, sampled every 0.2 s; mapped store pages are
  not anonymous) of a fresh process running verify, on both stores (4x apart in size): verify
  walks the commitlog in windows and reads units and index entries in chunks, so the two peaks
  should be about the same (their ratio is printed and written to the notes);
* ``messages --topic``: :func:`mqtool.query.select_messages` (the kernel walk, only matching
  records decoded) against the walker's per-record walk (``Store.messages`` + the same filter)
  on the big store, same run.

The target is 0.1 of the sequential read with a CRC over every body. Results go to
stdout and to ``bench/verify/last-run.json`` (bench/figures.py's schema: commit, core count, load
average, figures with ratios to the sequential read of the same run).
This is a benchmark, not a test: run it once, not in a loop, on a shared machine.
"""

from __future__ import annotations

import argparse
import json
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
FLAT_RATIO = 1.25  # peak memory on a 4x larger store within 25%: flat


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


def child_verify(store: Path, crc: bool) -> dict[str, Any]:
    """verify (+ restart loss) in a fresh process: seconds and peak RssAnon."""
    code = (
        "import json, sys, time\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from run import PeakRss\n"
        "from mqtool.integrity import verify\n"
        "from mqtool.integrity.recovery import restart_loss\n"
        f"verify({str(ROOT / 'fixtures/rocketmq-stores/4.9.7/journey/store')!r})  # warm\n"
        "rss0 = PeakRss.now()\n"
        "with PeakRss() as peak:\n"
        "    t = time.perf_counter()\n"
        f"    r = verify({str(store)!r}, check_crc={crc!r})\n"
        "    loss = restart_loss(r)\n"
        "    s = time.perf_counter() - t\n"
        "print(json.dumps({'seconds': s, 'peak': peak.peak, 'rss0': rss0,\n"
        "    'messages': r.summary['messages'], 'errors': r.summary['errors'],\n"
        "    'nothingLost': loss.nothing}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, cwd=ROOT).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def messages_by_topic(store: Path, topic: str) -> tuple[float, float, int]:
    """Seconds of ``messages --topic`` selection: the kernel walk, then the walker's walk."""
    from mqtool.query import MessageFilter, select_messages
    from mqtool.store import Store

    flt = MessageFilter(topic=topic)
    with Store.open(store) as st:
        t = time.perf_counter()
        n = sum(1 for _ in select_messages(st, flt))
        kernel_s = time.perf_counter() - t
    with Store.open(store) as st:
        t = time.perf_counter()
        n_old = sum(1 for m in st.messages() if flt.matches(m))
        walker_s = time.perf_counter() - t
    assert n == n_old, (n, n_old)
    return kernel_s, walker_s, n


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
    ap.add_argument("--small-store", type=Path, default=None)
    ap.add_argument("--no-crc", action="store_true")
    a = ap.parse_args()
    size = a.size or ("1GiB" if a.full else "128MiB")
    small_size = "256MiB" if a.full else "32MiB"
    store = a.store or Path(f"/tmp/mqtool-bench-verify-{size}")
    small = a.small_store or Path(f"/tmp/mqtool-bench-verify-{small_size}")

    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(HERE.parent))
    from figures import run_meta, write_last_run

    built = build_store(store, size)
    build_store(small, small_size)
    meta = run_meta()
    files = _files(store)
    sequential_read(files)  # warm the page cache
    read_s, nbytes = sequential_read(files)
    big = child_verify(store, not a.no_crc)
    verify_s = big["seconds"]
    sequential_read(_files(small))
    little = child_verify(small, not a.no_crc)
    ratio = read_s / verify_s
    msgs = big["messages"]
    kernel_s, walker_s, n_topic = messages_by_topic(store, "OrderTopic")
    crc = "" if a.no_crc else ", body CRC of every message"

    def growth(r: dict[str, Any]) -> float:
        return float(r["peak"] - r["rss0"])

    mem_ratio = growth(big) / max(growth(little), 1.0)
    flat = ("flat: it does not grow with the store" if mem_ratio < FLAT_RATIO
            else "NOT flat: it grows with the store")

    doc: dict[str, Any] = {
        "size": "full" if a.full else "small",
        "params": {"store": str(store), "storeSize": size, "bytes": nbytes, "files": len(files),
                   "messages": msgs, "crc": not a.no_crc, "storeBuiltSeconds": built,
                   "smallStore": str(small), "smallStoreSize": small_size,
                   "smallStoreMessages": little["messages"]},
        "baseline": "sequential read (8 MiB readinto, warm) of the same files, same run",
        "figures": [
            {"what": "sequential read of commitlog, consume queues, index (warm)",
             "value": round(nbytes / read_s / 2**20, 1), "unit": "MiB/s", "ratio": 1.0},
            {"what": f"mqtool verify in process (all checks{crc}, restart loss)",
             "value": round(nbytes / verify_s / 2**20, 1), "unit": "MiB/s",
             "ratio": round(ratio, 4)},
            {"what": "mqtool verify, messages", "value": round(msgs / verify_s),
             "unit": "msgs/s", "ratio": None},
            {"what": f"verify peak RssAnon growth, {size} store ({msgs:,} messages)",
             "value": round(growth(big) / 2**20, 1), "unit": "MiB", "ratio": None},
            {"what": f"verify peak RssAnon growth, {small_size} store "
                     f"({little['messages']:,} messages)",
             "value": round(growth(little) / 2**20, 1), "unit": "MiB", "ratio": None},
            {"what": f"messages --topic OrderTopic ({n_topic:,} of {msgs:,}), kernel walk",
             "value": round(kernel_s, 2), "unit": "s", "ratio": None},
            {"what": "the same selection by the walker's per-record walk (Store.messages)",
             "value": round(walker_s, 2), "unit": "s", "ratio": None},
        ],
        "notes": [
            f"Target: verify at 0.1 of the sequential read with CRC; measured "
            f"{ratio:.3f} ({'met' if ratio >= TARGET_RATIO else 'NOT met'} in this run). "
            f"{big['errors']} error findings; restart would lose "
            f"{'nothing' if big['nothingLost'] else 'something'}. Memory: peak RssAnon growth "
            f"{growth(little) / 2**20:.1f} MiB on the {small_size} store, "
            f"{growth(big) / 2**20:.1f} MiB on the {size} store (4x the size): ratio "
            f"{growth(big) / max(growth(little), 1.0):.2f} ({flat}). "
            f"messages --topic: the kernel walk is {walker_s / kernel_s:.1f}x faster than the "
            f"walker's walk in this run.",
        ],
    }
    print(f"store {store}: {nbytes / 2**20:,.0f} MiB in {len(files)} files, {msgs:,} messages")
    print(f"{'what':<20}{'seconds':>10}{'MiB/s':>10}{'ratio':>8}")
    print(f"{'sequential read':<20}{read_s:>10.2f}{nbytes / read_s / 2**20:>10.1f}{1.0:>8.3f}")
    print(f"{'verify' + (' (CRC)' if not a.no_crc else ''):<20}{verify_s:>10.2f}"
          f"{nbytes / verify_s / 2**20:>10.1f}{ratio:>8.3f}")
    print(f"target ratio {TARGET_RATIO}; peak RssAnon growth {growth(big) / 2**20:.1f} MiB "
          f"({size}) vs {growth(little) / 2**20:.1f} MiB ({small_size}): ratio {mem_ratio:.2f}, "
          f"{flat}; messages --topic "
          f"{kernel_s:.2f} s kernel vs {walker_s:.2f} s walker; load average "
          f"{meta['loadAverage']} on {os.cpu_count()} cores")
    write_last_run("verify", meta, doc)


if __name__ == "__main__":
    main()
