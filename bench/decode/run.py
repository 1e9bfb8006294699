"""bench/decode: full-decode throughput of a commitlog of 1 KiB messages.

Usage: ``.venv/bin/python bench/decode/run.py [--full] [--mib 64] [--keep]``

The default is a small run (one 64 MiB commitlog file, well under a minute); ``--full`` decodes
one 1 GiB file, RocketMQ's default commitlog file size.

Builds ``bench/out/decode/commitlog/00000000000000000000`` (``--mib`` MiB) of
1,024-byte records with :func:`mqtool.formats.commitlog.make_message` / ``build_message`` (8
templates: 4 topics, TAGS/KEYS/UNIQ_KEY properties, the physical and queue offsets patched per
record), then measures, on that same file in the same run:

- ``sequential read``: a warm read of the file in 1 MiB chunks (read once before timing, so the
  page cache holds it; no root needed to drop caches: every path below reads warm too);
- ``construct``: the construct reference ``parse_message_construct`` on a sample of records
  (extrapolated: it is too slow for the whole file; the table says so);
- ``parse_message``: ``scan_file`` over the mmap (precompiled struct, one object per record);
- ``fastdecode``: ``formats.fastdecode.decode_file`` (TOTALSIZE walk + numpy gathers; topic and
  properties cut out and UTF-8-checked in bulk, bodies left in the map) and, as a part of it,
  the walk alone.

Prints a table and writes ``bench/decode/last-run.json`` (commit, cores, load average, msgs/s,
MB/s, ratio to the sequential read measured in the same run; see bench/figures.py). The data is
deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from figures import run_meta, write_last_run  # noqa: E402

from mqtool.formats import fastdecode  # noqa: E402
from mqtool.formats.buffers import close_map  # noqa: E402
from mqtool.formats.commitlog import (  # noqa: E402
    CommitLogMessage,
    HostPort,
    build_blank,
    build_message,
    encode_properties,
    make_message,
    parse_message_construct,
    scan_file,
)

FULL_MIB = 1024  # mappedFileSizeCommitLog: 1 GiB
SMALL_MIB = 64
RECORD = 1024
OUT = Path(__file__).resolve().parents[1] / "out" / "decode"
CHUNK = 1 << 20


def templates() -> list[bytes]:
    """8 distinct 1,024-byte records (bodies padded to the exact size)."""
    out = []
    for i in range(8):
        topic = f"BenchTopic{i % 4}"
        props = encode_properties([
            ("TAGS", f"Tag{i}"), ("KEYS", f"order-{i} user-{i}"),
            ("UNIQ_KEY", f"C0A8010A00002A9F00000000000{i:05d}"), ("WAIT", "true"),
        ])
        base = make_message(topic=topic, properties_raw=props, body=b"", queue_id=i % 4,
                            born_timestamp=1_795_294_972_000 + i,
                            store_timestamp=1_795_294_972_100 + i,
                            born_host=HostPort("192.168.1.10", 50000 + i))
        body = bytes((j * 7 + i) % 251 for j in range(RECORD - base.total_size))
        m = make_message(topic=topic, properties_raw=props, body=body, queue_id=i % 4,
                         born_timestamp=base.born_timestamp, store_timestamp=base.store_timestamp,
                         born_host=base.born_host)
        raw = build_message(m)
        assert len(raw) == RECORD
        out.append(raw)
    return out


def build_file(path: Path, size: int) -> int:
    """Write ``size`` bytes of records (BLANK at the end); returns the message count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tpl = np.frombuffer(b"".join(templates()), dtype=np.uint8).reshape(8, RECORD)
    n = size // RECORD - 1  # the last 1 KiB is a BLANK record, as RocketMQ ends a file
    batch = 65536
    with open(path, "wb") as f:
        for lo in range(0, n, batch):
            k = min(batch, n - lo)
            idx = np.arange(lo, lo + k, dtype=np.int64)
            recs = tpl[idx % 8].copy()
            recs[:, 20:28] = (idx // 8).astype(">i8").view(np.uint8).reshape(k, 8)  # QUEUEOFFSET
            recs[:, 28:36] = (idx * RECORD).astype(">i8").view(np.uint8).reshape(k, 8)  # PHY
            f.write(recs.tobytes())
        f.write(build_blank(size - n * RECORD))
        f.truncate(size)
    return n


def timed(fn):  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t


def sequential_read(path: Path) -> float:
    buf = bytearray(CHUNK)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--full", action="store_true",
                    help=f"full size: one {FULL_MIB} MiB commitlog file (default {SMALL_MIB} MiB)")
    ap.add_argument("--mib", type=int, help="commitlog file size in MiB (overrides --full)")
    ap.add_argument("--sample", type=int, default=20000, help="records for the construct path")
    ap.add_argument("--keep", action="store_true", help="keep bench/out/decode afterwards")
    args = ap.parse_args()
    mib = args.mib or (FULL_MIB if args.full else SMALL_MIB)
    file_size = mib << 20
    meta = run_meta()
    files = []
    n_total = 0
    try:
        p = OUT / "commitlog" / f"{0:020d}"
        print(f"building {p} ({mib} MiB) ...", file=sys.stderr)
        n_total += build_file(p, file_size)
        files.append(p)
        size = sum(p.stat().st_size for p in files)
        results: dict[str, dict[str, float | int | str]] = {}

        def row(name: str, secs: float, msgs: int, note: str = "") -> None:
            results[name] = {"seconds": round(secs, 3), "msgs": msgs,
                             "msgs_per_s": round(msgs / secs), "MB_per_s":
                             round(size / secs / 1e6, 1), "note": note}

        for p in files:  # warm the page cache
            sequential_read(p)
        _, secs = timed(lambda: [sequential_read(p) for p in files])
        row("sequential read (1 MiB chunks)", secs, n_total, "warm page cache")

        fd = os.open(files[0], os.O_RDONLY)
        mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        os.close(fd)

        # construct reference: a sample, extrapolated
        step = max(1, n_total // args.sample)
        offs = [i * RECORD for i in range(0, n_total, step)][: args.sample]

        def construct_sample() -> int:
            for o in offs:
                parse_message_construct(mm[o : o + RECORD])
            return len(offs)

        k, secs = timed(construct_sample)
        row("construct (parse_message_construct)", secs * n_total / k, n_total,
            f"extrapolated from {k} records")

        def struct_path() -> int:
            c = 0
            for item in scan_file(mm, file="commitlog/0", file_start=0):
                c += isinstance(item, CommitLogMessage)
            return c

        c, secs = timed(struct_path)
        assert c == n_total, c
        row("parse_message (scan_file, struct)", secs, c, "one CommitLogMessage per record")

        (positions, _), secs = timed(lambda: fastdecode.walk(mm))
        row("fastdecode: TOTALSIZE walk only", secs, len(positions) - 1, "part of the next row")
        del positions

        # the first call may compile kernels (JIT): timed apart, then the warm call is the figure
        (cols, end), first_secs = timed(lambda: fastdecode.decode_file(mm, file="commitlog/0"))
        del cols
        (cols, end), secs = timed(lambda: fastdecode.decode_file(mm, file="commitlog/0"))
        assert len(cols) == n_total and end.kind == "blank", (len(cols), end)
        row("fastdecode.decode_file (numpy)", secs, len(cols),
            "all fields; topic/props cut + UTF-8 checked; bodies left in the map; "
            f"second call (the first, with any JIT compile, took {first_secs:.2f} s)")
        spot = [0, n_total // 2, n_total - 1]
        for i in spot:
            assert cols.message(i) == parse_message_construct(
                mm[i * RECORD : (i + 1) * RECORD])
        del cols

        ts, secs = timed(lambda: fastdecode.decode_file(mm, file="commitlog/0")[0]
                              .topic.strings())
        row("fastdecode + topic strings", secs, n_total, "topics materialised as str")
        del ts
        close_map(mm)

        seq = float(results["sequential read (1 MiB chunks)"]["MB_per_s"])
        for r in results.values():
            r["ratio_to_sequential_read"] = round(float(r["MB_per_s"]) / seq, 4)
        print(f"\ncommitlog: {size:,} bytes, {n_total:,} messages of {RECORD} bytes\n")
        print(f"{'path':40} {'seconds':>9} {'msgs/s':>12} {'MB/s':>9} {'x seq':>7}  note")
        for name, r in results.items():
            print(f"{name:40} {r['seconds']:>9} {r['msgs_per_s']:>12,} {r['MB_per_s']:>9} "
                  f"{r['ratio_to_sequential_read']:>7}  {r['note']}")
        print()
        write_last_run("decode", meta, {
            "size": "full" if mib == FULL_MIB else "small" if mib == SMALL_MIB else f"{mib} MiB",
            "params": {"fileMiB": mib, "bytes": size, "messages": n_total, "recordSize": RECORD,
                       "constructSample": args.sample},
            "baseline": "sequential read (1 MiB chunks, warm), same file, same run",
            "figures": [
                {"what": name + (f" ({r['note']})" if r["note"] else ""),
                 "value": r["msgs_per_s"], "unit": "msgs/s",
                 "ratio": r["ratio_to_sequential_read"]}
                for name, r in results.items()
            ],
            "results": results,
        })
    finally:
        if not args.keep:
            shutil.rmtree(OUT, ignore_errors=True)


if __name__ == "__main__":
    main()
