"""bench/decode: full-decode throughput of a commitlog of 1 KiB messages, against a sequential
read of the same bytes in the same run.

Usage: ``.venv/bin/python bench/decode/run.py [--full] [--gib 2] [--mib 64] [--store DIR]
[--keep]``

The default is a small run (one 64 MiB commitlog file, well under a minute); ``--full`` decodes
a 2 GiB commitlog (two 1 GiB files, RocketMQ's default file size; ``--gib N`` for another size).
``--store DIR`` reuses the commitlog files of an existing store (bench/scan's) or the files a
``--keep`` run left (nothing is built then).

Builds ``bench/out/decode/commitlog/<offset>`` of 1,024-byte records with
:func:`mqtool.formats.commitlog.make_message` / ``build_message`` (8 templates: 4 topics,
TAGS/KEYS/UNIQ_KEY properties, the physical and queue offsets patched per record; each file
ends in a BLANK record), then measures on those files in one run, every path on warm pages:

- ``sequential read``: ``readinto`` of every file in 8 MiB chunks (the baseline; read once
  before timing so the page cache holds the files; taken three times between the other
  paths, the fastest counts);
- ``full decode, every column``: :class:`mqtool.formats.commitlog_columns.Decoder` (the fused kernel
  :mod:`mqtool.formats.commitlog_arrow`: TOTALSIZE walk, every ``parse_message`` check, every field,
  topic, properties, the property map, TAGS/KEYS/UNIQ_KEY, offsetMsgId and hosts in one
  compiled pass per window) and, per window, every column of the ``messages`` table of
  ``mqtool scan`` as one Arrow record batch of ``MESSAGE_SCHEMA`` (schema-checked), CRC off
  (as ``MessageDecoder.decode``) and on; the same without the Arrow step (the kernel's
  buffers only);
- the previous full decode (``mqtool.spark.decode.decode_commitlog_range``: the scan kernel,
  then one kernel or Arrow call per column), ``commitlog_columns.decode_file`` (numpy columns, no
  property map), ``parse_message`` (``scan_file``: one object per record) and the construct
  reference (the last two on the first records of the first file).

Each decode path is timed twice, the faster run counts. Wall clock and this process's CPU time
(``time.process_time``) are both recorded: on a shared machine a short read may get a whole
core while a longer decode shares one, so the rows "..., CPU time" (both paths
single-threaded, CPU seconds of each) give the ratio that does not depend on the load.

Prints a table and writes ``bench/decode/last-run.json`` (commit, cores, load average at the
start and the end, msgs/s, ratio to the sequential read of the same run; see bench/figures.py).
The data is deleted afterwards unless ``--keep`` (or ``--store``).
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

from mqtool.formats import commitlog_columns  # noqa: E402
from mqtool.formats.buffers import close_map  # noqa: E402
from mqtool.formats.commitlog import (
    CommitLogMessage,
    HostPort,
    build_blank,
    build_message,
    encode_properties,
    make_message,
)
from mqtool.formats.commitlog_construct import parse_message_construct
from mqtool.formats.walker import scan_file

FILE_MIB = 1024  # mappedFileSizeCommitLog: 1 GiB
FULL_GIB = 2
SMALL_MIB = 64
RECORD = 1024
REF_RECORDS = 200_000  # parse_message on the first records only (one object per record)
OUT = Path(__file__).resolve().parents[1] / "out" / "decode"
CHUNK = 8 << 20
FULL = "full decode, every column, CRC off"
FULL_CRC = "full decode, every column, CRC on"


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


def build_file(path: Path, size: int, file_start: int = 0) -> int:
    """Write ``size`` bytes of records (BLANK at the end) for a file starting at commitlog
    offset ``file_start``; returns the message count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tpl = np.frombuffer(b"".join(templates()), dtype=np.uint8).reshape(8, RECORD)
    n = size // RECORD - 1  # the last 1 KiB is a BLANK record, as RocketMQ ends a file
    batch = 65536
    with open(path, "wb") as f:
        for lo in range(0, n, batch):
            k = min(batch, n - lo)
            idx = np.arange(lo, lo + k, dtype=np.int64)
            recs = tpl[idx % 8].copy()
            queue_offset = (file_start // RECORD + idx) // 8
            recs[:, 20:28] = queue_offset.astype(">i8").view(np.uint8).reshape(k, 8)
            phys = file_start + idx * RECORD  # PHYSICALOFFSET
            recs[:, 28:36] = phys.astype(">i8").view(np.uint8).reshape(k, 8)
            f.write(recs.tobytes())
        f.write(build_blank(size - n * RECORD))
        f.truncate(size)
    return n


def timed(fn):  # type: ignore[no-untyped-def]
    """``(result, wall seconds, CPU seconds of this process)`` of one call."""
    t, c = time.perf_counter(), time.process_time()
    r = fn()
    return r, time.perf_counter() - t, time.process_time() - c


def sequential_read(paths: list[Path]) -> int:
    buf = bytearray(CHUNK)
    total = 0
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while k := f.readinto(buf):
                total += k
    return total


def mapped(path: Path) -> mmap.mmap:
    fd = os.open(path, os.O_RDONLY)
    try:
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


def full_decode(paths: list[Path], *, check_crc: bool, arrow: bool) -> int:
    """Every message of every file through the fused kernel; with ``arrow``, every window as
    one ``MESSAGE_SCHEMA`` record batch (all columns)."""
    import pyarrow as pa

    from mqtool.spark.schema import MESSAGE_SCHEMA

    names = MESSAGE_SCHEMA.names
    dec = commitlog_columns.Decoder()
    n = 0
    for path in paths:
        mm = mapped(path)
        rel = f"commitlog/{path.name}"
        for w in dec.file(mm, file=rel, file_start=int(path.name), check_crc=check_crc):
            if arrow:
                cols = w.to_arrow(store="store", file=rel)
                batch = pa.RecordBatch.from_arrays([cols[k] for k in names],
                                                   schema=MESSAGE_SCHEMA)
                n += batch.num_rows
                del batch, cols
            else:
                n += w.n
        del w
        assert dec.end.kind in ("blank", "eof"), dec.end
        close_map(mm)
    return n


def previous_full_decode(paths: list[Path]) -> int:
    """The decode ``mqtool scan`` used until now (every column, CRC off)."""
    from mqtool.spark.decode import decode_commitlog_range
    from mqtool.spark.schema import RECORD_KIND_MESSAGE

    n = 0
    for path in paths:
        size = path.stat().st_size
        for b in decode_commitlog_range(str(path), store="store", name=f"commitlog/{path.name}",
                                        file_start=int(path.name), start=0, end=size,
                                        check_crc=False):
            if b.num_rows and b.column(0)[0].as_py() == RECORD_KIND_MESSAGE:
                n += b.num_rows
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--full", action="store_true",
                    help=f"full size: {FULL_GIB} GiB in 1 GiB commitlog files (default "
                    f"{SMALL_MIB} MiB)")
    ap.add_argument("--gib", type=int, help="commitlog size in GiB, 1 GiB files (implies --full)")
    ap.add_argument("--mib", type=int, help="one commitlog file of this many MiB")
    ap.add_argument("--store", type=Path, help="decode this store's commitlog (built if empty)")
    ap.add_argument("--sample", type=int, default=20000, help="records for the construct path")
    ap.add_argument("--keep", action="store_true", help="keep bench/out/decode afterwards")
    args = ap.parse_args()
    if args.mib:
        sizes = [args.mib << 20]
    elif args.gib or args.full:
        sizes = [FILE_MIB << 20] * (args.gib or FULL_GIB)
    else:
        sizes = [SMALL_MIB << 20]
    meta = run_meta()
    root = args.store or OUT
    try:
        cl = root / "commitlog"
        files = sorted(cl.iterdir()) if cl.is_dir() else []
        if not files:
            off = 0
            for size in sizes:
                p = cl / f"{off:020d}"
                print(f"building {p} ({size >> 20} MiB) ...", file=sys.stderr)
                build_file(p, size, off)
                files.append(p)
                off += size
        size = sum(p.stat().st_size for p in files)
        results: dict[str, dict[str, float | int | str]] = {}

        def row(name: str, secs: float, msgs: int, note: str = "",
                cpu: float | None = None) -> None:
            results[name] = {"seconds": round(secs, 3), "msgs": msgs,
                             "msgs_per_s": round(msgs / secs), "note": note}
            if cpu is not None:
                results[name]["cpu_seconds"] = round(cpu, 3)
                results[name]["msgs_per_cpu_s"] = round(msgs / cpu)

        def best(fn, runs: int = 2):  # type: ignore[no-untyped-def]
            out = [timed(fn) for _ in range(runs)]
            return out[0][0], min(t for _, t, _ in out), min(c for _, _, c in out)

        read_secs: list[float] = []
        read_cpu: list[float] = []

        def read() -> None:
            _, secs, cpu = timed(lambda: sequential_read(files))
            read_secs.append(secs)
            read_cpu.append(cpu)

        sequential_read(files)  # warm the page cache
        read()
        full_decode(files[:1], check_crc=True, arrow=True)  # compile (or load) the kernels
        n_total, secs, cpu = best(lambda: full_decode(files, check_crc=False, arrow=True))
        row(FULL, secs, n_total, "all MESSAGE_SCHEMA columns as Arrow record batches", cpu)
        n, secs, cpu = best(lambda: full_decode(files, check_crc=True, arrow=True))
        assert n == n_total
        row(FULL_CRC, secs, n, "as above, BODYCRC checked", cpu)
        read()
        n, secs, cpu = best(lambda: full_decode(files, check_crc=False, arrow=False))
        row("fused kernel only, CRC off", secs, n, "the kernel's buffers, no Arrow arrays", cpu)
        n, secs, _ = best(lambda: previous_full_decode(files), 1)
        assert n == n_total, (n, n_total)
        row("previous full decode (spark.decode, every column), CRC off", secs, n,
            "scan kernel, then a kernel or Arrow call per column")

        def old_numpy() -> int:
            c = 0
            for p in files:
                mm = mapped(p)
                cols, _ = commitlog_columns.decode_file(mm, file=f"commitlog/{p.name}",
                                                 file_start=int(p.name))
                c += len(cols)
                del cols
                close_map(mm)
            return c

        n, secs, _ = best(old_numpy, 1)
        row("commitlog_columns.decode_file (numpy)", secs, n, "fields, topic, properties string")
        read()
        row("sequential read (8 MiB chunks)", min(read_secs), n_total,
            f"warm page cache; fastest of {len(read_secs)}", min(read_cpu))

        mm = mapped(files[0])
        first = int(files[0].name)
        k_ref = min(REF_RECORDS, n_total)

        def struct_path() -> int:
            c = 0
            for item in scan_file(mm, file=f"commitlog/{files[0].name}", file_start=first):
                c += isinstance(item, CommitLogMessage)
                if c >= k_ref:
                    break
            return c

        c, secs, _ = timed(struct_path)
        row("parse_message (scan_file, struct)", secs, c,
            f"one CommitLogMessage per record; first {c:,} records")
        step = max(1, k_ref // args.sample)
        offs = [i * RECORD for i in range(0, k_ref, step)][: args.sample]

        def construct_sample() -> int:
            for o in offs:
                parse_message_construct(mm[o : o + RECORD])
            return len(offs)

        k, secs, _ = timed(construct_sample)
        row("construct (parse_message_construct)", secs, k, f"{k:,} records")
        close_map(mm)

        seq = float(results["sequential read (8 MiB chunks)"]["msgs_per_s"])
        order = ["sequential read (8 MiB chunks)", *[k for k in results
                                                    if not k.startswith("sequential")]]
        seq_cpu = float(results["sequential read (8 MiB chunks)"]["msgs_per_cpu_s"])
        for r in results.values():
            r["ratio_to_sequential_read"] = round(float(r["msgs_per_s"]) / seq, 4)
            if "msgs_per_cpu_s" in r:
                r["cpu_ratio_to_sequential_read"] = round(float(r["msgs_per_cpu_s"]) / seq_cpu, 4)
        cpu_rows = [k for k in order if "msgs_per_cpu_s" in results[k]]
        print(f"\ncommitlog: {size:,} bytes in {len(files)} files, {n_total:,} messages of "
              f"{RECORD} bytes\n")
        print(f"{'path':62} {'seconds':>9} {'msgs/s':>12} {'x read':>7}  note")
        for name in order:
            r = results[name]
            print(f"{name:62} {r['seconds']:>9} {r['msgs_per_s']:>12,} "
                  f"{r['ratio_to_sequential_read']:>7}  {r['note']}")
        print(f"\nCPU time of this process (load-independent view: both paths single-threaded)\n"
              f"{'path':62} {'CPU s':>9} {'msgs/CPU-s':>12} {'x read':>7}")
        for name in cpu_rows:
            r = results[name]
            print(f"{name:62} {r['cpu_seconds']:>9} {r['msgs_per_cpu_s']:>12,} "
                  f"{r['cpu_ratio_to_sequential_read']:>7}")
        target = results[FULL]["ratio_to_sequential_read"]
        target_cpu = results[FULL]["cpu_ratio_to_sequential_read"]
        print(f"\ntarget: full decode, every column, CRC off >= 0.25 of the read: "
              f"{target} (wall clock), {target_cpu} (CPU time)\n")
        label = (f"{len(files)} x {sizes[0] >> 20} MiB" if not args.store
                 else f"{size >> 20} MiB store")
        write_last_run("decode", meta, {
            "size": "full" if size >= FULL_GIB << 30 else "small" if size <= SMALL_MIB << 20
            else label,
            "params": {"files": len(files), "bytes": size, "messages": n_total,
                       "recordSize": RECORD, "constructSample": args.sample,
                       "store": str(root)},
            "baseline": "sequential read (8 MiB chunks, warm), same files, same run",
            "figures": [
                {"what": name + (f" ({results[name]['note']})" if results[name]["note"] else ""),
                 "value": results[name]["msgs_per_s"], "unit": "msgs/s",
                 "ratio": results[name]["ratio_to_sequential_read"]}
                for name in order
            ] + [
                {"what": f"{name}, CPU time (msgs per CPU-second of this process)",
                 "value": results[name]["msgs_per_cpu_s"], "unit": "msgs/CPU-s",
                 "ratio": results[name]["cpu_ratio_to_sequential_read"]}
                for name in cpu_rows
            ],
            "targets": {"fullDecodeCrcOffOfRead": target, "fullDecodeCrcOffOfReadCpu": target_cpu,
                        "goal": 0.25},
            "results": results,
        })
    finally:
        if not args.keep and not args.store:
            shutil.rmtree(OUT, ignore_errors=True)


if __name__ == "__main__":
    main()
