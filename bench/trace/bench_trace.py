"""bench/trace: `mqtool trace` by UNIQ_KEY, index path vs scan path, on a big reference store.

Usage (from the repo root):

    .venv/bin/python bench/trace/bench_trace.py --build /tmp/bench-store --size 1GiB
    .venv/bin/python bench/trace/bench_trace.py --store /tmp/bench-store     # reuse a store

``--build`` runs ``mqtool demo DIR --size SIZE`` (the reference store, mqtool/refstore) once.
The message traced is the one named by the middle entry of the newest index file (a UNIQ_KEY or
KEYS entry: its record's UNIQ_KEY is used). The index path is timed in-process after start-up
(imports done, store opened fresh each time); the scan path runs on a view of the same store
without index/ (symlinks to commitlog/, consumequeue/, config/, checkpoint in a temp dir).
Prints a Markdown table and writes bench/trace/last-run.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mqtool.store import Store
from mqtool.trace import trace_id

HERE = Path(__file__).resolve().parent


def _du(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "commitlog").iterdir() if p.is_file())


def _pick_uniq(st: Store) -> str:
    rel, reader = st.index_files()[-1]
    n = max(1, reader.header.index_count // 2)
    for k in range(n, reader.header.index_count):
        m = st.try_message_at(reader.entry(k).phy_offset)
        if m is not None and m.uniq_key:
            return m.uniq_key
    raise SystemExit(f"no UNIQ_KEY found through {rel}")


def _parse_size(text: str) -> int:
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "K": 1 << 10, "M": 1 << 20,
             "G": 1 << 30}
    for u, f in sorted(units.items(), key=lambda kv: -len(kv[0])):
        if text.endswith(u):
            return int(float(text[: -len(u)]) * f)
    return int(text)


def _build_refstore(root: Path, size: int) -> None:
    """Plain messages (1 KiB bodies, one KEYS each) through mqtool.refstore until the
    commitlog holds ``size`` bytes; UNIQ_KEYs and index entries as the broker writes them."""
    from mqtool.refstore.engine import Message, RefStore

    body = bytes(range(256)) * 4
    n = 0
    with RefStore.open(root, seed=7) as rs:
        while rs.write_position < size:
            batch = [Message.create("BenchTopic", body, tags="t", keys=f"bench-{n + i}")
                     for i in range(1000)]
            rs.put_batch(batch)
            n += len(batch)
        rs.flush()


def _no_index_view(root: Path, tmp: Path) -> Path:
    view = tmp / "store"
    view.mkdir()
    for name in os.listdir(root):
        if name != "index":
            (view / name).symlink_to(root.resolve() / name)
    return view


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, help="existing store root")
    ap.add_argument("--build", type=Path, help="build a reference store here first")
    ap.add_argument("--size", default="1GiB", help="with --build: commitlog size, e.g. 1GiB")
    ap.add_argument("--repeat", type=int, default=20, help="index-path repetitions")
    ap.add_argument("--scan-repeat", type=int, default=2, help="scan-path repetitions")
    ap.add_argument("--uniq", help="UNIQ_KEY to trace (default: picked from the index)")
    args = ap.parse_args()
    if args.build:
        if not (args.build / "commitlog").is_dir() and not (args.build / "store").is_dir():
            t = time.perf_counter()
            demo = subprocess.run([sys.executable, "-m", "mqtool", "demo", "--help"],
                                  capture_output=True)
            if demo.returncode == 0:
                subprocess.run([sys.executable, "-m", "mqtool", "demo", str(args.build),
                                "--size", args.size], check=True)
            else:  # `mqtool demo` not there yet: fill a reference store directly
                _build_refstore(args.build, _parse_size(args.size))
            print(f"built {args.build} in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        args.store = args.build
    if args.store is None:
        ap.error("give --store or --build")
    st = Store.open(args.store)
    root = st.root
    if not st.has_index:
        raise SystemExit(f"{root}: no index files: the index path cannot be measured")
    size = _du(root)
    data = st.max_physical_offset()
    uniq = args.uniq or _pick_uniq(st)
    st.close()

    idx_times = []
    first = None
    for i in range(args.repeat):
        t = time.perf_counter()
        with Store.open(root) as s:
            tr = trace_id(s, uniq)
        dt = (time.perf_counter() - t) * 1000
        if i == 0:
            first = tr
        idx_times.append(dt)
    assert first is not None and first.via == "index"

    scan_times = []
    with tempfile.TemporaryDirectory() as tmp:
        view = _no_index_view(root, Path(tmp))
        for _ in range(args.scan_repeat):
            t = time.perf_counter()
            with Store.open(view) as s:
                sc = trace_id(s, uniq)
            scan_times.append((time.perf_counter() - t) * 1000)
    assert sc.via == "scan"
    same = [h.to_json() for h in sc.hops] == [h.to_json() for h in first.hops]

    res = {
        "store": str(root), "commitlogBytes": size, "dataBytes": data, "uniqKey": uniq,
        "hops": len(first.hops),
        "verdict": first.verdict, "sameAnswer": same,
        "indexMs": {"first": round(idx_times[0], 2),
                    "median": round(statistics.median(idx_times), 2),
                    "min": round(min(idx_times), 2), "max": round(max(idx_times), 2),
                    "n": len(idx_times)},
        "scanMs": {"median": round(statistics.median(scan_times), 1),
                   "min": round(min(scan_times), 1), "n": len(scan_times)},
    }
    res["ratio"] = round(res["scanMs"]["median"] / res["indexMs"]["median"], 1)
    res["scanGiBps"] = round(size / (1 << 30) / (res["scanMs"]["median"] / 1000), 2)
    (HERE / "last-run.json").write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    print(f"| store | commitlog files / data | hops | index first / median / max (ms) "
          f"| scan median (ms) | scan/index | same answer |\n|---|---|---|---|---|---|---|\n"
          f"| {root} | {size / (1 << 30):.2f} / {data / (1 << 30):.2f} GiB | {len(first.hops)} | "
          f"{res['indexMs']['first']} / {res['indexMs']['median']} / {res['indexMs']['max']} | "
          f"{res['scanMs']['median']} | {res['ratio']}x | {same} |")


if __name__ == "__main__":
    main()
