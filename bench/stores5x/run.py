"""bench/stores5x: reading a RocksDB consume queue and a DLedger commitlog, per unit, against the
file forms, on the real RocketMQ 5.3.3 stores in ``fixtures/``.

Usage (from the repo root):

    .venv/bin/python bench/stores5x/run.py               # 31 rounds
    .venv/bin/python bench/stores5x/run.py --rounds 101

Timed, interleaved (one of each per round, medians over the rounds), each store opened once
before the rounds (a command opens it once too):

- every unit of the RocksDB queue (``rocksdb``: ``storeType=defaultRocksDB``) and of the file
  queues (``rocksdb-double``: the file queues the broker wrote beside its RocksDB queue), each
  through ``Store.queue_entries``, which checks every unit against its record as every read
  command does; per unit;
- ``dledger`` against ``plain``: a walk of the whole commitlog (``Store.messages``), each
  record decoded; per record.

Figures: microseconds per unit or record; ratio against the file form measured in the same
round. Target: a ratio of at most 1 (no more per unit than the file form). Writes
``bench/stores5x/last-run.json`` (see bench/figures.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from figures import run_meta, write_last_run  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
STORES = REPO / "fixtures" / "rocketmq-stores" / "5.3.3"


def _timed(run: Callable[[], int]) -> tuple[float, int]:
    t = time.perf_counter()
    n = run()
    return time.perf_counter() - t, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=31)
    args = ap.parse_args()
    from mqtool.store import Store

    meta = run_meta()
    rocksdb = Store.open(STORES / "rocksdb" / "store")
    rq = [tq for tq in rocksdb.queue_ids() if rocksdb.queue_kind(*tq) == "rocksdb"]
    double = Store.open(STORES / "rocksdb-double" / "store")
    fq = [tq for tq in double.queue_ids() if double.queue_kind(*tq) == "file"]
    dledger = Store.open(STORES / "dledger" / "store")
    plain = Store.open(STORES / "plain" / "store")

    def units(st: Store, queues: list[tuple[str, int]]) -> Callable[[], int]:
        return lambda: sum(1 for t, q in queues for _ in st.queue_entries(t, q))

    def walk(st: Store) -> Callable[[], int]:
        return lambda: sum(1 for _ in st.messages())

    runs = {"rocksdb": units(rocksdb, rq), "file queue": units(double, fq),
            "dledger": walk(dledger),
            "plain commitlog": walk(plain)}
    for f in runs.values():  # warm: page cache, the RocksDB handle, numba's kernels
        f()
    per: dict[str, list[float]] = {k: [] for k in runs}
    ratios: dict[str, list[float]] = {"rocksdb": [], "dledger": []}
    counts: dict[str, int] = {}
    for _ in range(args.rounds):
        got = {}
        for k, f in runs.items():
            secs, n = _timed(f)
            counts[k] = n
            got[k] = secs / max(n, 1) * 1e6
            per[k].append(got[k])
        ratios["rocksdb"].append(got["rocksdb"] / got["file queue"])
        ratios["dledger"].append(got["dledger"] / got["plain commitlog"])
    med = {k: statistics.median(v) for k, v in per.items()}
    figures = [
        {"what": f"RocksDB queue, {counts['rocksdb']} units of {len(rq)} queues (rocksdb)",
         "value": round(med["rocksdb"], 2), "unit": "µs/unit",
         "ratios": {"file": round(statistics.median(ratios["rocksdb"]), 3)}},
        {"what": f"file queue, {counts['file queue']} units of {len(fq)} queues "
                 "(rocksdb-double)", "value":
         round(med["file queue"], 2), "unit": "µs/unit", "ratios": {"file": 1.0}},
        {"what": f"DLedger commitlog walk, {counts['dledger']} records (dledger)",
         "value": round(med["dledger"], 2), "unit": "µs/record",
         "ratios": {"plain": round(statistics.median(ratios["dledger"]), 3)}},
        {"what": f"plain commitlog walk, {counts['plain commitlog']} records (plain)",
         "value": round(med["plain commitlog"], 2), "unit": "µs/record",
         "ratios": {"plain": 1.0}},
    ]
    for st in (rocksdb, double, dledger, plain):
        st.close()
    doc = {
        "size": "small", "params": {"rounds": args.rounds},
        "baselines": {"file": "the file queue's units, the same queues, same round",
                      "plain": "the plain commitlog's walk per record, same round"},
        "figures": figures,
        "notes": ["medians over the rounds of each round's ratio; target: at most 1"],
    }
    for f in figures:
        print(f"{f['what']:<78} {f['value']:>8} {f['unit']}  {f['ratios']}")
    write_last_run("stores5x", meta, doc)


if __name__ == "__main__":
    main()
