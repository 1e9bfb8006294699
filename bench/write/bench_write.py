"""bench/write: reference-store put throughput, as a ratio to a sequential write of the same bytes.

Usage: .venv/bin/python bench/write/bench_write.py [--messages 200000] [--dir bench/out/write]

For 1 KiB bodies (TAGS, KEYS and the client's UNIQ_KEY, like a Java producer's messages) it
measures, single-threaded and in the same run:

* ``baseline``: writing the same number of bytes sequentially (1 MiB ``write()`` calls) to a
  file in the same directory: the ceiling for any store on this disk;
* ``put``: ``RefStore.put`` of plain messages (commitlog + consume queue + 2 index entries +
  checkpoint per message, RocketMQ's default 1 GiB commitlog files, 300,000-unit CQ files and
  5,000,000-slot index files);
* ``put+delay``: the same with a random delay level 1..18 on every message (SCHEDULE_TOPIC_XXXX,
  REAL_TOPIC/REAL_QID, deliver-time tagsCodes);
* ``put, no KEYS``: only the UNIQ_KEY is indexed (1 index entry per message);
* ``put, no index``: ``messageIndexEnable=false``.

Reference: RocketMQ's Java store puts about 180k msgs/s single-threaded on these machines; the
target is at least half of that. Each case is the best of ``--repeat`` runs (default 3; the
machines are shared). Numbers go to stdout as a table (``--json`` for JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import time
from pathlib import Path

from mqtool.refstore.engine import Message, RefStore, StoreConfig

HERE = Path(__file__).resolve().parent


def _messages(
    n_distinct: int, body_size: int, delay: bool, seed: int, keys: bool = True
) -> list[Message]:
    rnd = random.Random(seed)
    body = rnd.randbytes(body_size)
    return [
        Message.create(
            "BenchTopic", body, tags=f"Tag{i % 4}", keys=f"order-{i}" if keys else None,
            delay_level=rnd.randint(1, 18) if delay else 0,
        )
        for i in range(n_distinct)
    ]


def bench_put(
    root: Path, n: int, body_size: int, *, delay: bool, index: bool, keys: bool = True
) -> dict[str, float]:
    shutil.rmtree(root, ignore_errors=True)
    os.sync()  # start every case without the previous one's dirty pages in flight
    msgs = _messages(256, body_size, delay, 1, keys)
    cfg = StoreConfig(message_index_enable=index)
    s = RefStore.open(root, cfg, seed=1)
    put = s.put
    m = len(msgs)
    t0 = time.perf_counter()
    c0 = time.process_time()
    for i in range(n):
        put(msgs[i % m])
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    nbytes = s.write_position
    s.close()
    return {"seconds": wall, "cpu_seconds": cpu, "bytes": nbytes}


def bench_sequential(path: Path, nbytes: int) -> float:
    chunk = os.urandom(1 << 20)
    os.sync()
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        left = nbytes
        while left > 0:
            f.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
    wall = time.perf_counter() - t0
    path.unlink()
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--dir", type=Path, default=HERE.parent / "out" / "write")
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs per case")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    n = args.messages
    rows = []
    for name, delay, index, keys in (
        ("put", False, True, True), ("put+delay", True, True, True),
        ("put, no KEYS", False, True, False), ("put, no index", False, False, True),
    ):
        runs = [
            bench_put(args.dir / "store", n, args.body_size, delay=delay, index=index, keys=keys)
            for _ in range(args.repeat)
        ]
        r = min(runs, key=lambda x: x["seconds"])  # best of --repeat (least disturbed)
        base = min(
            bench_sequential(args.dir / "sequential.bin", int(r["bytes"]))
            for _ in range(args.repeat)
        )
        rows.append({
            "case": name,
            "messages": n,
            "msgs_per_s": n / r["seconds"],
            "msgs_per_cpu_s": n / r["cpu_seconds"],
            "MB_per_s": r["bytes"] / r["seconds"] / 1e6,
            "baseline_MB_per_s": r["bytes"] / base / 1e6,
            "ratio_to_sequential_write": base / r["seconds"],
            "target_ratio_90k": (n / r["seconds"]) / 90_000,
        })
    shutil.rmtree(args.dir / "store", ignore_errors=True)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'case':<16}{'msgs/s':>10}{'msgs/cpu-s':>12}{'MB/s':>8}{'seq MB/s':>10}"
          f"{'ratio':>8}{'vs 90k':>8}")
    for r in rows:
        print(f"{r['case']:<16}{r['msgs_per_s']:>10,.0f}{r['msgs_per_cpu_s']:>12,.0f}"
              f"{r['MB_per_s']:>8.1f}{r['baseline_MB_per_s']:>10.1f}"
              f"{r['ratio_to_sequential_write']:>8.2f}{r['target_ratio_90k']:>8.2f}")
    print("ratio = sequential-write time / put time for the same bytes (1.0 = disk speed); "
          "vs 90k = msgs/s / 90,000 (half of RocketMQ's Java store).")


if __name__ == "__main__":
    main()
