"""bench/write: reference-store put throughput, as a ratio to a sequential write of the same bytes.

Usage: .venv/bin/python bench/write/run.py [--full] [--messages N] [--dir bench/out/write]

The default is a small run (50,000 messages per case, best of 2); ``--full`` puts 200,000
messages per case, best of 3.

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

Each case is the best of ``--repeat`` runs (the machines are shared). The only ratio is against
the sequential write measured in the same run. Numbers go to stdout as a table (``--json`` for
JSON) and to ``bench/write/last-run.json`` (see bench/figures.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from figures import run_meta, write_last_run  # noqa: E402

from mqtool.refstore.engine import Message, RefStore, StoreConfig  # noqa: E402

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
    ap.add_argument("--full", action="store_true",
                    help="full size: 200,000 messages per case, best of 3")
    ap.add_argument("--messages", type=int, help="messages per case (default 50,000; --full "
                    "200,000)")
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--dir", type=Path, default=HERE.parent / "out" / "write")
    ap.add_argument("--repeat", type=int, help="best of N runs per case (default 2; --full 3)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    n = args.messages or (200_000 if args.full else 50_000)
    repeat = args.repeat or (3 if args.full else 2)
    meta = run_meta()
    args.dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, delay, index, keys in (
        ("put", False, True, True), ("put+delay", True, True, True),
        ("put, no KEYS", False, True, False), ("put, no index", False, False, True),
    ):
        runs = [
            bench_put(args.dir / "store", n, args.body_size, delay=delay, index=index, keys=keys)
            for _ in range(repeat)
        ]
        r = min(runs, key=lambda x: x["seconds"])  # best of --repeat (least disturbed)
        base = min(
            bench_sequential(args.dir / "sequential.bin", int(r["bytes"]))
            for _ in range(repeat)
        )
        rows.append({
            "case": name,
            "messages": n,
            "msgs_per_s": n / r["seconds"],
            "msgs_per_cpu_s": n / r["cpu_seconds"],
            "MB_per_s": r["bytes"] / r["seconds"] / 1e6,
            "baseline_MB_per_s": r["bytes"] / base / 1e6,
            "ratio_to_sequential_write": base / r["seconds"],
        })
    shutil.rmtree(args.dir, ignore_errors=True)
    default = (n, repeat) == (50_000, 2) and args.body_size == 1024
    full = (n, repeat) == (200_000, 3) and args.body_size == 1024
    write_last_run("write", meta, {
        "size": "full" if full else "small" if default else f"{n} messages, best of {repeat}",
        "params": {"messagesPerCase": n, "bodySize": args.body_size, "repeat": repeat},
        "baseline": "sequential write of the same bytes (1 MiB writes), same directory, same run",
        "figures": [
            {"what": f"{r['case']} ({r['MB_per_s']:.1f} MB/s; sequential write "
                     f"{r['baseline_MB_per_s']:.1f} MB/s)",
             "value": round(r["msgs_per_s"]), "unit": "msgs/s",
             "ratio": round(r["ratio_to_sequential_write"], 3)}
            for r in rows
        ],
        "rows": rows,
        "notes": ["ratio = sequential-write time / put time for the same bytes (1.0 = the "
                  "disk's sequential speed)."],
    })
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'case':<16}{'msgs/s':>10}{'msgs/cpu-s':>12}{'MB/s':>8}{'seq MB/s':>10}"
          f"{'ratio':>8}")
    for r in rows:
        print(f"{r['case']:<16}{r['msgs_per_s']:>10,.0f}{r['msgs_per_cpu_s']:>12,.0f}"
              f"{r['MB_per_s']:>8.1f}{r['baseline_MB_per_s']:>10.1f}"
              f"{r['ratio_to_sequential_write']:>8.2f}")
    print("ratio = sequential-write time / put time for the same bytes (1.0 = disk speed).")


if __name__ == "__main__":
    main()
