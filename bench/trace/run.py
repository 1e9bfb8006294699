"""bench/trace: `mqtool trace` of a multi-hop journey, index path against scan path.

Usage (from the repo root):

    .venv/bin/python bench/trace/run.py                  # small: a 128 MiB demo store
    .venv/bin/python bench/trace/run.py --full           # full: a 1 GiB demo store
    .venv/bin/python bench/trace/run.py --store DIR      # an existing demo store

The store is built with ``mqtool demo DIR --size SIZE`` (the reference store, mqtool/refstore):
the demo's consumers fail, so its messages travel original topic -> SCHEDULE_TOPIC_XXXX ->
%RETRY%<group> -> ... -> %DLQ%<group>; ``--size`` then fills the commitlog with 1 KiB
BenchTopic messages, so the scan path has that many bytes to search. The message traced is the
dead-lettered one (from the first records of %DLQ%cg_orders) with the longest journey; the run
fails unless that journey has an original, schedule, retry and DLQ hop.

The index path is timed in-process after start-up (imports done, a fresh ``Store`` each run);
the scan path runs on a view of the same store without ``index/`` (symlinks in a temp dir).
Both must give the same hops. Ratios are against the index path of the same run. Prints a table
and writes ``bench/trace/last-run.json`` (see bench/figures.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from figures import run_meta, write_last_run  # noqa: E402

from mqtool.store import Store  # noqa: E402
from mqtool.trace import trace_id  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "out" / "trace"
SMALL, FULL = "128MiB", "1GiB"
DLQ_GROUP = "cg_orders"
NEEDED_KINDS = {"original", "schedule", "retry", "dlq"}


def _commitlog_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "commitlog").iterdir() if p.is_file())


def _pick_journey(st: Store, candidates: int) -> tuple[str, int, list[str]]:
    """UNIQ_KEY of the dead-lettered message with the most hops among the first DLQ records."""
    topic = f"%DLQ%{DLQ_GROUP}"
    best: tuple[str, int, list[str]] | None = None
    seen = 0
    for queue in sorted(q for t, q in st.queue_ids() if t == topic):
        for entry in st.queue_entries(topic, queue):
            m = st.try_message_at(entry.entry.commit_log_offset)
            if m is None or not m.uniq_key:
                continue
            tr = trace_id(st, m.uniq_key)
            kinds = [h.kind for h in tr.hops]
            if NEEDED_KINDS <= set(kinds) and (best is None or len(kinds) > best[1]):
                best = (m.uniq_key, len(kinds), kinds)
            seen += 1
            if seen >= candidates:
                break
    if best is None:
        raise SystemExit(f"no journey with hops {sorted(NEEDED_KINDS)} among the first "
                         f"{seen} records of {topic}")
    return best


def _no_index_view(root: Path, tmp: Path) -> Path:
    view = tmp / "store"
    view.mkdir()
    for name in os.listdir(root):
        if name != "index":
            (view / name).symlink_to(root.resolve() / name)
    return view


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help=f"build a {FULL} store (default {SMALL})")
    ap.add_argument("--size", help="commitlog size to build, e.g. 512MiB (overrides --full)")
    ap.add_argument("--store", type=Path, help="trace in this existing demo store (no build)")
    ap.add_argument("--keep", action="store_true", help="keep the built store (bench/out/trace)")
    ap.add_argument("--repeat", type=int, default=20, help="index-path repetitions")
    ap.add_argument("--scan-repeat", type=int, default=3, help="scan-path repetitions")
    ap.add_argument("--candidates", type=int, default=30, help="DLQ records to choose from")
    args = ap.parse_args()
    size = args.size or (FULL if args.full else SMALL)
    meta = run_meta()
    build_s = None
    root = args.store
    if root is None:
        root = OUT / "store"
        shutil.rmtree(OUT, ignore_errors=True)
        OUT.mkdir(parents=True)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "mqtool", "demo", str(root), "--size", size],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        build_s = time.perf_counter() - t
        print(f"built {root} ({size}) in {build_s:.1f}s", file=sys.stderr)
    try:
        with Store.open(root) as st:
            if not st.has_index:
                raise SystemExit(f"{root}: no index files: the index path cannot be measured")
            data = st.max_physical_offset()
            uniq, n_hops, kinds = _pick_journey(st, args.candidates)
        clog = _commitlog_bytes(root)

        idx_times = []
        first = None
        for i in range(args.repeat):
            t = time.perf_counter()
            with Store.open(root) as s:
                tr = trace_id(s, uniq)
            idx_times.append((time.perf_counter() - t) * 1000)
            if i == 0:
                first = tr
        assert first is not None and first.via == "index", first
        assert [h.kind for h in first.hops] == kinds

        scan_times = []
        with tempfile.TemporaryDirectory() as tmp:
            view = _no_index_view(root, Path(tmp))
            for _ in range(args.scan_repeat):
                t = time.perf_counter()
                with Store.open(view) as s:
                    sc = trace_id(s, uniq)
                scan_times.append((time.perf_counter() - t) * 1000)
        assert sc.via == "scan", sc.via
        same = [h.to_json() for h in sc.hops] == [h.to_json() for h in first.hops]
        if not same:
            raise SystemExit("index and scan paths disagree on the journey")
    finally:
        if args.store is None and not args.keep:
            shutil.rmtree(OUT, ignore_errors=True)

    idx_med = statistics.median(idx_times)
    scan_med = statistics.median(scan_times)
    journey = " -> ".join(kinds)
    figures = [
        {"what": "trace via the index (median; fresh Store each run)", "value": round(idx_med, 2),
         "unit": "ms", "ratio": 1.0},
        {"what": "trace via the index, first run", "value": round(idx_times[0], 2), "unit": "ms",
         "ratio": round(idx_times[0] / idx_med, 2)},
        {"what": "trace by scanning the commitlog (no index/; median)", "value": round(scan_med),
         "unit": "ms", "ratio": round(scan_med / idx_med, 1)},
    ]
    write_last_run("trace", meta, {
        "size": "full" if size == FULL else "small" if size == SMALL else size,
        "params": {"buildSize": size, "commitlogBytes": clog, "dataBytes": data,
                   "buildSeconds": round(build_s, 1) if build_s is not None else None,
                   "repeat": args.repeat, "scanRepeat": args.scan_repeat},
        "journey": {"uniqKey": uniq, "hops": n_hops, "kinds": kinds,
                    "verdict": first.verdict},
        "baseline": "trace via the index (median), same store, same run",
        "figures": figures,
        "indexMs": {"first": round(idx_times[0], 2), "median": round(idx_med, 2),
                    "min": round(min(idx_times), 2), "max": round(max(idx_times), 2),
                    "n": len(idx_times)},
        "scanMs": {"median": round(scan_med, 1), "min": round(min(scan_times), 1),
                   "n": len(scan_times)},
        "sameAnswer": same,
        "notes": [f"Journey traced: {n_hops} hops ({journey}); verdict: {first.verdict}. "
                  f"Store: {data / (1 << 20):.0f} MiB of data in {clog / (1 << 20):.0f} MiB "
                  f"of commitlog files. Both paths give the same hops."],
    })
    print(f"journey {uniq}: {n_hops} hops ({journey})")
    print(f"{'path':<56}{'ms':>10}{'x index':>10}")
    for f in figures:
        print(f"{f['what']:<56}{f['value']:>10}{f['ratio']:>10}")


if __name__ == "__main__":
    main()
