"""bench/scan: ``mqtool scan`` throughput and memory, as ratios to a sequential read, one run.

Usage::

    .venv/bin/python bench/scan/bench_scan.py [--store DIR] [--size 2GiB] [--cores 2]
    .venv/bin/python bench/scan/bench_scan.py --store DIR --no-spark     # single process only
    .venv/bin/python bench/scan/bench_scan.py --store DIR --small-store S --large-store L \
        --larger-store XL --cluster --cluster-store large                # what issue 13 asks

Builds the store once with the reference store (``mqtool demo DIR --size SIZE``: the demo's
business messages plus 1 KiB BenchTopic messages up to SIZE), then measures on warm files, in
one run (a benchmark, not a test; do not loop it on a shared machine):

* ``sequential read``: ``readinto`` of every commitlog file (8 MiB buffer): the baseline every
  ratio is taken against (its record rate: the store's messages at that byte rate);
* the hot-loop prototypes of issue 13 (TOTALSIZE walk, record checks, field gather, property
  split, optionally BODYCRC): the numba kernel (:mod:`mqtool.formats.commitlog_fields`) and a plain
  Java loop (``proto/HotLoop.java``, compiled with ``javac`` when a JDK is there);
* single process, every column: the fused kernel (:class:`mqtool.formats.commitlog_columns.Decoder`,
  every window as one record batch of the ``messages`` table) with the CRC check off (as
  ``MessageDecoder.decode``) and on; the struct-based reference decoder on the first 300,000
  records; with ``--python-decode`` also the Python data source's decode
  (:func:`mqtool.spark.decode.decode_commitlog_range`, audit columns);
* the single-process decode and the Spark decode pass: best of 3 warm runs each;
* ``spark local[N]``: Spark's start-up on its own (the session as the CLI starts it for the
  store, with the CLI's job-sized settings, ``mqtool.spark.session.job_conf``: in fresh
  processes, median of 3; then the Python workers: one task that does nothing per task slot,
  in this process's session), the decode pass with every column (the Java reader's
  columnar batches; into rows; with ``--python-decode`` through the Python data source too)
  and with the audits' columns, and the
  ``mqtool scan`` CLI with every audit in a fresh process (wall time, its own ``run_scan``
  time, wall time less the start-up, and less the session's start-up alone: on a clean store
  the CLI starts no Python worker), and Spark's floor in the same session (a job that does
  nothing; one shuffle of 3 synthetic rows per message, what the integrity audit groups at least);
* with ``--small-store DIR`` / ``--large-store DIR`` / ``--larger-store DIR``: the CLI on a
  store 4x smaller / 4x larger / 16x larger (built there once): memory at several sizes.
  ``mqtool scan`` sizes the local heap to the data (512 MiB up to 512 MiB of commitlog data,
  1 GiB above: ``job_conf``); the JVM's resident size grows until G1 has touched the whole
  heap, then stays: the 4x and 16x stores compare two sizes 4x apart past that point;
* with ``--cluster``: the CLI on a standalone cluster on 127.0.0.1 started with pyspark's
  ``sbin/spark-daemon.sh`` (1-core workers), 1 worker against 2, on the main store by default
  (``--cluster-store small`` / ``large``: the other stores). Each worker is pinned to a core
  of its own with ``taskset`` (its executor inherits it), as a 1-core worker on a machine of
  its own: unpinned, a "1-core" executor's JIT and GC threads use the other core as well.
  Scaling shows in the work that grows with the data; on a small store the driver's fixed cost
  (planning, JIT: each executor is a cold JVM of its own), which shares this machine's cores
  with the workers, dominates;
* peak anonymous RSS (``RssAnon``: heap, not mapped store pages) of the driver (this Python
  process and its JVM) and of the Python workers (sampled from /proc every 0.2 s).

Everything goes to stdout and to ``bench/scan/last-run.json`` with the commit, the CPU count
and the load average it ran with.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


# --- memory sampling -------------------------------------------------------------------------
def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


RSS_FIELD = "RssAnon:"  # anonymous memory: what the process really holds
# (mapped store pages, RssFile, are page cache the kernel can drop at any time)


def _rss(pid: int, field: str = RSS_FIELD) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class MemorySampler:
    """Peak anonymous RSS of a process tree by role: driver python, JVM(s), python workers."""

    def __init__(self, root_pid: int, executors: bool = False) -> None:
        self.root = root_pid
        self.peak = {"driverPython": 0, "jvm": 0, "workersTotal": 0, "workerMax": 0}
        # a standalone cluster's executors are the workers' children, not the driver's: any
        # process of this machine that runs Spark's executor backend
        self.executors = executors
        if executors:
            self.peak.update(executorsTotal=0, executorMax=0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        kids = _children()
        tree, todo = [], [self.root]
        while todo:
            p = todo.pop()
            tree.append(p)
            todo += kids.get(p, [])
        jvm = workers = wmax = 0
        for p in tree:
            cmd, rss = _cmdline(p), _rss(p)
            if p == self.root:
                self.peak["driverPython"] = max(self.peak["driverPython"], rss)
            elif "java" in cmd.split(" ")[0]:
                jvm += rss
            elif "pyspark.daemon" in cmd or "pyspark.worker" in cmd or "pyspark/daemon" in cmd:
                workers += rss
                wmax = max(wmax, rss)
            elif p != self.root and "python" in cmd and "-m mqtool" in cmd:
                self.peak["driverPython"] = max(self.peak["driverPython"], rss)
        self.peak["jvm"] = max(self.peak["jvm"], jvm)
        self.peak["workersTotal"] = max(self.peak["workersTotal"], workers)
        self.peak["workerMax"] = max(self.peak["workerMax"], wmax)
        if self.executors:
            execs = [_rss(p) for ps in kids.values() for p in ps
                     if "CoarseGrainedExecutorBackend" in _cmdline(p)]
            self.peak["executorsTotal"] = max(self.peak["executorsTotal"], sum(execs))
            self.peak["executorMax"] = max(self.peak["executorMax"], max(execs, default=0))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(0.2)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def mib(self) -> dict[str, float]:
        return {k: round(v / 2**20, 1) for k, v in self.peak.items()}


# --- helpers ---------------------------------------------------------------------------------
def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    r = fn()
    return time.perf_counter() - t, r


def _parse_size(text: str) -> int:
    units = {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "K": 2**10, "M": 2**20, "G": 2**30}
    t = text.strip().upper()
    for u, f in sorted(units.items(), key=lambda kv: -len(kv[0])):
        if t.endswith(u):
            return int(float(t[: -len(u)]) * f)
    return int(t)


def build_store(store: Path, size: str) -> float | None:
    """``mqtool demo STORE --size SIZE`` unless the store is there already (seconds or None)."""
    if (store / "commitlog").is_dir():
        return None
    store.parent.mkdir(parents=True, exist_ok=True)
    t, _ = _timed(lambda: subprocess.run(
        [sys.executable, "-m", "mqtool", "demo", str(store), "--size", size, "--json"],
        check=True, stdout=subprocess.DEVNULL,
    ))
    return t


def commitlog_files(store: Path) -> list[Path]:
    return sorted((store / "commitlog").iterdir(), key=lambda p: int(p.name))


def warm(files: list[Path]) -> bool:
    """Read ``files`` once into the page cache when they fit in half of the memory the kernel
    has available (``MemAvailable``); whether they did. A store scanned cold reads the disk
    (the 8 GiB CLI scan: 11.5 s cold, 8.3-8.4 s warm), so each store's time is on warm files
    where the machine can hold them."""
    available = 0
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    if sum(f.stat().st_size for f in files) > available // 2:
        return False
    sequential_read(files)
    return True


def sequential_read(files: list[Path]) -> tuple[float, int]:
    buf = bytearray(8 * 2**20)
    mv = memoryview(buf)
    total = 0
    t = time.perf_counter()
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while True:
                n = fh.readinto(mv)
                if not n:
                    break
                total += n
    return time.perf_counter() - t, total


def reference_decode(files: list[Path], limit: int) -> tuple[float, int, int]:
    import mmap

    from mqtool.formats.commitlog import CommitLogMessage
    from mqtool.formats.walker import scan_file

    n = nbytes = 0
    t = time.perf_counter()
    for f in files:
        with open(f, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            for rec in scan_file(mm, file_start=int(f.name)):
                if isinstance(rec, CommitLogMessage):
                    n += 1
                    nbytes += rec.total_size
                    if n >= limit:
                        return time.perf_counter() - t, n, nbytes
    return time.perf_counter() - t, n, nbytes


def vectorised_decode(
    files: list[Path], columns: frozenset[str] | None, props_for: tuple[str, ...],
    check_crc: bool = True,
) -> tuple[float, int, int]:
    """:func:`decode_commitlog_range` (the Python data source's decode) over every file:
    (seconds, messages, their bytes)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mqtool.spark.decode import decode_commitlog_range

    n = nbytes = 0
    t = time.perf_counter()
    for f in files:
        for b in decode_commitlog_range(
            str(f), store="s", name=f.name, file_start=int(f.name), start=0,
            end=f.stat().st_size, columns=columns, properties_for=props_for, check_crc=check_crc,
        ):
            is_msg = pc.equal(b.column(0), "msg")
            n += int(pc.sum(pc.cast(is_msg, pa.int64())).as_py() or 0)
            nbytes += int(pc.sum(pc.filter(b.column("storeSize"), is_msg)).as_py() or 0)
    return time.perf_counter() - t, n, nbytes


def fused_decode(files: list[Path], check_crc: bool) -> tuple[float, int, int]:
    """The single-process full decode: the fused kernel
    (:class:`mqtool.formats.commitlog_columns.Decoder`), every window as one record batch of every
    column of the ``messages`` table (``MESSAGE_SCHEMA``): (seconds, messages, their bytes)."""
    import mmap

    import pyarrow as pa

    from mqtool.formats.buffers import close_map
    from mqtool.formats.commitlog_columns import Decoder
    from mqtool.spark.schema import MESSAGE_SCHEMA

    names = MESSAGE_SCHEMA.names
    dec = Decoder()
    n = nbytes = 0
    t = time.perf_counter()
    for f in files:
        rel = f"commitlog/{f.name}"
        with open(f, "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        for w in dec.file(mm, file=rel, file_start=int(f.name), check_crc=check_crc):
            cols = w.to_arrow(store="s", file=rel)
            batch = pa.RecordBatch.from_arrays([cols[k] for k in names], schema=MESSAGE_SCHEMA)
            n += batch.num_rows
            nbytes += int(w.int32("storeSize").sum())
            del batch, cols
        del w
        assert dec.end.kind in ("blank", "eof", "zeros"), dec.end  # no damage in the store
        close_map(mm)
    return time.perf_counter() - t, n, nbytes


def kernel_hot_loop(files: list[Path], check_crc: bool) -> tuple[float, int]:
    """The numba hot loop alone: scan (walk, checks, field gather, CRC) + property split."""
    import mmap

    import numpy as np

    from mqtool.formats import commitlog_fields as fields
    from mqtool.formats import jit
    from mqtool.formats.buffers import close_map

    table = fields.field_table(8192)
    splitter = fields.PropertySplitter()
    n = 0
    t = time.perf_counter()
    for f in files:
        with open(f, "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        a = np.frombuffer(mm, dtype=np.uint8)
        w = fields.words_of(a)
        p = 0
        while True:
            c, p, status = fields.scan(a, w, p, len(a), int(f.name), check_crc, table,
                                  jit.CRC_TABLES)
            splitter.split(a, table[fields.F_PROPS_POS, :c], table[fields.F_PROPS_LEN, :c])
            n += c
            if status != fields.STOP_FULL:
                break
        del a, w
        close_map(mm)  # (numba's first compile may still hold a view: then the GC closes it)
    return time.perf_counter() - t, n


def java_hot_loop(files: list[Path], check_crc: bool) -> tuple[float, int] | None:
    """``proto/HotLoop.java`` (compiled now with javac), in-JVM seconds and records."""
    import shutil

    if not shutil.which("javac") or not shutil.which("java"):
        return None
    out = ROOT / "bench" / "out" / "scan" / "javac"
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["javac", "-d", str(out), str(HERE / "proto" / "HotLoop.java")], check=True)
    cmd = ["java", "-cp", str(out), "HotLoop", *(["--crc"] if check_crc else []),
           *map(str, files)]
    records, seconds, _ = subprocess.run(cmd, check=True, capture_output=True,
                                         text=True).stdout.split()
    return float(seconds), int(records)


def cli_session_start(master: str, store: Path, runs: int = 3) -> float:
    """Seconds ``get_session`` takes in a fresh process with the settings the CLI gives a scan
    of ``store`` (:func:`mqtool.spark.session.job_conf`): median of ``runs``."""
    code = ("import sys, time\n"
            "from mqtool.spark.session import get_session, job_conf\n"
            "t = time.perf_counter()\n"
            "get_session(sys.argv[1], job_conf(sys.argv[1], [sys.argv[2]]))\n"
            "print(time.perf_counter() - t)\n")
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code, master, str(store)], check=True,
                             capture_output=True, text=True).stdout
        times.append(float(out.split()[-1]))
    return sorted(times)[len(times) // 2]


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", type=Path, default=ROOT / "bench" / "out" / "scan" / "store")
    ap.add_argument("--size", default="2GiB")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--no-spark", action="store_true", help="single-process figures only")
    ap.add_argument("--small-store", type=Path, default=None,
                    help="also scan a store 4x smaller (built there once) with the CLI: memory "
                    "at two sizes")
    ap.add_argument("--large-store", type=Path, default=None,
                    help="also scan a store 4x larger (built there once) with the CLI: memory "
                    "at two sizes above the heap step of job_conf (512 MiB of data)")
    ap.add_argument("--larger-store", type=Path, default=None,
                    help="also scan a store 16x larger (built there once) with the CLI: memory "
                    "at 4x and 16x, both past the point where the JVM has touched its whole heap")
    ap.add_argument("--json", action="store_true", help="print the results as JSON only")
    ap.add_argument("--python-decode", action="store_true",
                    help="also time the Python data source's decode (1 process and Spark)")
    ap.add_argument("--cluster", action="store_true",
                    help="also scan on a standalone cluster on 127.0.0.1 (pyspark's "
                    "sbin/spark-daemon.sh): 1 worker of 1 core against 2")
    ap.add_argument("--cluster-store", choices=("main", "small", "large", "larger"),
                    default="main",
                    help="the store the cluster scans: --store (default), --small-store, "
                    "--large-store or --larger-store (then also --large-store, 4x smaller)")
    args = ap.parse_args()
    master = f"local[{args.cores}]"
    sys.path.insert(0, str(HERE.parent))
    from figures import render, run_meta, write_last_run

    meta = run_meta()
    res: dict[str, Any] = {"store": str(args.store), "master": master}
    res["buildSeconds"] = build_store(args.store, args.size)
    files = commitlog_files(args.store)
    res["commitlogBytes"] = sum(f.stat().st_size for f in files)

    sequential_read(files)  # warm the page cache: every figure below is on warm files
    t_read, nread = sequential_read(files)
    kernel_hot_loop(files[:1], False)  # compile (or load) the kernels before timing

    from mqtool.spark.scan import AUDIT_COLUMNS

    narrow = frozenset([*AUDIT_COLUMNS[2:], "properties"])
    fused_decode(files[:1], False)  # compile (or load) the fused kernel before timing
    # best of 3, as the Spark decode pass below (both warm; noise on a shared machine only
    # ever adds time)
    runs = [fused_decode(files, check_crc=False) for _ in range(BEST_OF)]
    t_full, n_msgs, data_bytes = min(runs)
    runs_crc = [fused_decode(files, check_crc=True) for _ in range(BEST_OF)]
    t_full_crc, n1, _ = min(runs_crc)
    assert n1 == n_msgs, (n1, n_msgs)
    if args.python_decode:
        t_narrow, n2, _ = vectorised_decode(files, narrow, ("%DLQ%",))
        assert n2 == n_msgs, (n2, n_msgs)
    t_k, n_k = kernel_hot_loop(files, False)
    t_k_crc, _ = kernel_hot_loop(files, True)
    java = java_hot_loop(files, False)
    java_crc = java_hot_loop(files, True)
    t_ref, n_ref, _ = reference_decode(files, 300_000)
    read_bps = nread / t_read
    # the read rate in messages: reading the bytes that hold the messages at that rate
    read_mps = n_msgs / (data_bytes / read_bps)
    res.update(messages=n_msgs, dataBytes=data_bytes, avgRecordBytes=round(data_bytes / n_msgs, 1))

    rows: list[tuple[str, str, float, float]] = []  # (key, what, seconds, msgs/s)

    def add(key: str, what: str, seconds: float, msgs: int) -> None:
        rows.append((key, what, seconds, msgs / seconds))

    add("read", "sequential read (warm)", data_bytes / read_bps, n_msgs)
    add("kernelHotLoop", "hot loop prototype: numba kernel, CRC off", t_k, n_k)
    add("kernelHotLoopCrc", "hot loop prototype: numba kernel, CRC on", t_k_crc, n_k)
    if java is not None and java_crc is not None:
        add("javaHotLoop", "hot loop prototype: plain Java (javac), CRC off", *java)
        add("javaHotLoopCrc", "hot loop prototype: plain Java (javac), CRC on", *java_crc)
    add("singleFull", "1 process, every column, CRC off (fused kernel + Arrow batches)",
        t_full, n_msgs)
    add("singleFullCrc", "1 process, every column, CRC on (fused kernel + Arrow batches)",
        t_full_crc, n_msgs)
    if args.python_decode:
        add("singleAudit", "1 process, audit columns, CRC on (the Python data source's "
            "decode)", t_narrow, n_msgs)
    add("reference", "reference decoder, 1 process (scan_file, 300k records)", t_ref, n_ref)

    if not args.no_spark:
        _spark_figures(args, master, res, n_msgs, narrow, add)
        if args.cluster:
            other = {"small": ("smallStore", args.small_store),
                     "large": ("largeStore", args.large_store),
                     "larger": ("largerStore", args.larger_store)}.get(args.cluster_store)
            c_store, c_msgs = args.store, n_msgs
            also: tuple[Path, int] | None = None  # the executors' memory at a second size
            if other is not None and other[0] in res:
                c_store, c_msgs = other[1], res[other[0]]["messages"]
                also = (args.store, n_msgs)
                if args.cluster_store == "larger" and "largeStore" in res:
                    also = (args.large_store, res["largeStore"]["messages"])
            elif "largeStore" in res:
                also = (args.large_store, res["largeStore"]["messages"])
            # warm files for both runs (a larger store scanned since may have pushed these
            # out of the page cache: the 1-worker run would read the disk, the 2-worker run not)
            sequential_read(commitlog_files(c_store))
            if also is not None:
                sequential_read(commitlog_files(also[0]))
            try:
                res["cluster"] = cluster_scaling(c_store, c_msgs, also)
            except (RuntimeError, OSError, AssertionError, subprocess.CalledProcessError,
                    json.JSONDecodeError) as e:  # the run's other figures are kept, and this
                res["cluster"] = {"error": f"{type(e).__name__}: {e}"}
            res["cluster"]["store"] = str(c_store)

    res["loadAverageAtScans"] = LOADS
    rates = {k: r for k, _, _, r in rows}
    res["readGBps"] = round(read_bps / 1e9, 2)
    figures: list[dict[str, Any]] = [
        {"what": w, "value": round(r), "unit": "msgs/s", "ratio": round(r / read_mps, 4),
         "seconds": round(s, 2), "key": k}
        for k, w, s, r in rows
    ]
    targets: dict[str, Any] = {
        "singleFullOfRead": round(rates["singleFull"] / read_mps, 4),  # issue 13: >= 0.25
    }
    if "sparkFull" in rates:
        targets["sparkFullOverSingle"] = round(rates["sparkFull"] / rates["singleFull"], 3)
        start = res["sparkStartSeconds"] + res["pythonWorkersStartSeconds"]
        targets["scanBudgetSeconds"] = round(start + 2 * t_full, 2)  # start-up + 2 x single
        targets["cliWallSeconds"] = res["cliWallSeconds"]
        targets["cliAfterStartupSeconds"] = round(res["cliWallSeconds"] - start, 2)
        # the CLI starts no Python worker when the Java reader reads every byte (a clean store):
        # its own start-up is the session's, and what follows it is set against 2 x single
        targets["cliAfterSessionStartSeconds"] = round(
            res["cliWallSeconds"] - res["sparkStartSeconds"], 2)
        targets["twiceSingleSeconds"] = round(2 * t_full, 2)
        targets["cliScanSeconds"] = res.get("cliScanSeconds")
        flat = res.get("memoryFlat", {})
        for role, key in (("driverPython", "driverMemory4xOver1x"), ("jvm", "jvmMemory4xOver1x"),
                          ("heapAfterGcMiB", "heapAfterGc4xOver1x")):
            if "ratio4xOver1x" in flat.get(role, {}):
                targets[key] = flat[role]["ratio4xOver1x"]
        above = res.get("memoryFlatAbove", {})
        for role, key in (("jvm", "jvmMemory16xOver4x"),
                          ("heapAfterGcMiB", "heapAfterGc16xOver4x")):
            if "ratio16xOver4x" in above.get(role, {}):
                targets[key] = above[role]["ratio16xOver4x"]
        if "cluster" in res and "speedup2over1" in res["cluster"]:
            targets["clusterSpeedup2over1"] = res["cluster"]["speedup2over1"]
        if "alsoSpeedup2over1" in res.get("cluster", {}):  # the same at the second size
            targets["clusterSpeedup2over1AtSecondSize"] = res["cluster"]["alsoSpeedup2over1"]
        if "executorMax4xOver1x" in res.get("cluster", {}):  # one executor, stores 4x apart
            targets["clusterExecutorMemory4xOver1x"] = res["cluster"]["executorMax4xOver1x"]
        figures += [
            {"what": "Spark start-up on its own (session + Python workers)", "value": start,
             "unit": "s", "ratio": None},
            {"what": f"mqtool scan CLI {master}, every audit: wall time", "value":
             res["cliWallSeconds"], "unit": "s", "ratio": None},
            {"what": f"mqtool scan CLI {master}: wall time less the start-up", "value":
             targets["cliAfterStartupSeconds"], "unit": "s", "ratio": None},
            {"what": "issue 13 budget for the CLI: start-up + 2 x single-process decode (every "
             "column, CRC off)", "value": targets["scanBudgetSeconds"], "unit": "s",
             "ratio": None},
            {"what": f"mqtool scan CLI {master}: wall time less the session's start-up alone "
             "(the CLI starts no Python worker on a clean store)",
             "value": targets["cliAfterSessionStartSeconds"], "unit": "s", "ratio": None},
            {"what": "2 x single-process decode (every column, CRC off)",
             "value": targets["twiceSingleSeconds"], "unit": "s", "ratio": None},
            {"what": "Spark floor: one job that does nothing (warm, median of 5)",
             "value": res["sparkTrivialJobSeconds"], "unit": "s", "ratio": None},
            {"what": "Spark floor: one shuffle of 3 x messages synthetic rows (group-by, warm)",
             "value": res["sparkShuffleFloorSeconds"], "unit": "s", "ratio": None},
        ]
    doc = {
        "size": args.size,
        "params": res,
        "baseline": "sequential read (warm) of the same commitlog bytes, same run, as a record "
                    "rate",
        "figures": figures,
        "targets": targets,
        "notes": [
            f"Store: {n_msgs:,} messages, {data_bytes:,} bytes of records (average "
            f"{res['avgRecordBytes']} B), {len(files)} commitlog files; sequential read "
            f"{res['readGBps']} GB/s. Targets (issue 13): {json.dumps(targets)}. Peak "
            f"anonymous RSS (MiB): in-process {res.get('inProcessPeakMiB', 'not run')}, CLI "
            f"{res.get('cliPeakMiB', 'not run')}; CLI on a store 4x smaller: "
            f"{res.get('smallStore', 'not run')}; CLI on a store 4x larger: "
            f"{res.get('largeStore', 'not run')}; CLI on a store 16x larger: "
            f"{res.get('largerStore', 'not run')}. Memory at the main store and the 4x "
            f"larger one, {MEMORY_RUNS} CLI runs each (median, range; heapAfterGcMiB: the "
            f"JVM's largest heap after a collection): {json.dumps(res.get('memoryFlat'))}; "
            f"at the 4x and the 16x store, both past job_conf's C1 bound (4 GiB): "
            f"{json.dumps(res.get('memoryFlatAbove'))}.",
            f"Standalone cluster (1-core workers, scanSeconds = run_scan's time in the CLI): "
            f"{json.dumps(res.get('cluster', 'not run'))}.",
        ],
    }
    path = write_last_run("scan", meta, doc)
    _copy_to_spark_readme(render("scan", json.loads(path.read_text(encoding="utf-8"))))
    if args.json:
        print(path.read_text(encoding="utf-8"))
        return
    print(f"{'what':66} {'seconds':>8} {'msgs/s':>12} {'x read':>8}")
    for k, w, sec, r in rows:
        print(f"{w:66} {sec:8.2f} {round(r):12,} {r / read_mps:8.4f}  ({k})")
    print(json.dumps(targets))


SPARK_README = ROOT / "spark" / "README.md"


def _copy_to_spark_readme(block: str) -> None:
    """The figures block (as bench/figures.py renders it) between spark/README.md's markers."""
    start, end = "<!-- bench:scan:start -->", "<!-- bench:scan:end -->"
    text = SPARK_README.read_text(encoding="utf-8")
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        SPARK_README.write_text(f"{head}{start}\n{block}\n{end}{tail}", encoding="utf-8")


def _spark_figures(
    args: argparse.Namespace, master: str, res: dict[str, Any], n_msgs: int,
    narrow: frozenset[str], add: Callable[[str, str, float, int], None],
) -> None:
    from pyspark.sql import functions as F

    from mqtool.spark import source, splits
    from mqtool.spark.session import get_session

    store = [str(args.store)]
    with MemorySampler(os.getpid()) as mem:
        t_start, spark = _timed(lambda: get_session(master))
        # start the Python workers: one task that does nothing per task slot (until session 8
        # this read the whole consume queue through the Python data source, one task per file:
        # decode work counted as start-up, 12.3 s on 2 GiB)
        slots = spark.sparkContext.defaultParallelism
        t_workers, _ = _timed(lambda: spark.sparkContext.parallelize(range(slots), slots)
                              .map(lambda x: x).count())

        def count(df: Any) -> int:
            return int(df.filter(F.col("recordType") == "msg").agg(F.count(F.lit(1)))
                       .collect()[0][0])

        def columnar(df: Any) -> int:
            """Run the scan of ``df`` alone, as columnar batches: every column decoded into
            Spark's column vectors, nothing converted to rows (returns the batch count)."""
            leaf = df._jdf.queryExecution().executedPlan().collectLeaves().head()
            return int(leaf.executeColumnar().count())

        java = source.java_reader_on(spark)
        res["javaReader"] = java
        if java:
            def full_pass() -> int:
                df = source.java_records(  # the reader alone, no hand-over
                    spark, store, columns=None, check_crc=False, properties_for=(),
                    split_size=splits.DEFAULT_SPLIT_SIZE,  # partitions: as the CLI's
                )
                return columnar(df)

            full_pass()  # the JIT's first pass: the passes below are warm
            t_full, batches = min(_timed(full_pass) for _ in range(BEST_OF))
            assert batches > 0  # (the rows are checked by tests/spark/test_spark_java.py)
            t_rows, _ = _timed(lambda: source.records(spark, store, check_crc=False)[0]
                               .write.format("noop").mode("overwrite").save())
            add("sparkFullRows", f"spark {master}: decode pass, every column, CRC off, into "
                "rows (Java reader, noop write)", t_rows, n_msgs)
        if args.python_decode or not java:
            t_py, got = _timed(lambda: count(source.records(spark, store, check_crc=False,
                                                            java=False)[0]))
            assert got == n_msgs, (got, n_msgs)
            add("sparkFullPython", f"spark {master}: decode pass, every column, CRC off "
                "(Python data source: filter + count)", t_py, n_msgs)
            if not java:
                t_full = t_py
        t_pass, got = _timed(lambda: count(source.records(
            spark, store, columns=sorted(narrow), properties_for=["%DLQ%"],
        )[0]))
        assert got == n_msgs, (got, n_msgs)
        # Spark's own floor on this machine, same session, warm: a job that does nothing, and
        # one shuffle of as many rows as the integrity audit's cross-file check groups at least
        # (a message, its consume-queue unit, one index key: 3 per message), synthetic rows
        trivial = [_timed(lambda: spark.range(1).count())[0] for _ in range(6)][1:]
        res["sparkTrivialJobSeconds"] = round(sorted(trivial)[len(trivial) // 2], 3)

        def shuffle() -> int:
            return int(spark.range(3 * n_msgs).groupBy((F.col("id") % n_msgs).alias("k"))
                       .count().count())

        shuffle()
        t_shuffle, groups = _timed(shuffle)
        assert groups == n_msgs
        res["sparkShuffleFloorSeconds"] = round(t_shuffle, 2)
        spark.stop()
    # the session this process used for the passes above has Spark's defaults for the JIT;
    # the CLI sizes its JVM to the store (job_conf): its start-up is measured as it starts
    res["sparkStartInProcessSeconds"] = round(t_start, 2)
    res["sparkStartSeconds"] = round(cli_session_start(master, args.store), 2)
    res["pythonWorkersStartSeconds"] = round(t_workers, 2)
    res["inProcessPeakMiB"] = mem.mib()
    add("sparkFull", f"spark {master}: decode pass, every column, CRC off"
        + (" (Java reader, columnar batches)" if res["javaReader"] else ""), t_full, n_msgs)
    add("sparkAudit", f"spark {master}: decode pass, audit columns, CRC on (filter + count)",
        t_pass, n_msgs)

    t_cli, cli_doc, cli_peak = _cli_scan(args.store, master)
    assert cli_doc["totals"]["messages"] == n_msgs
    add("cli", f"mqtool scan CLI {master}: wall time incl. start-up", t_cli, n_msgs)
    add("runScan", f"mqtool scan CLI {master}: the scan itself (run_scan, every audit, after "
        "start-up)", float(cli_doc["elapsedSeconds"]), n_msgs)
    res["integrityFindings"] = len(cli_doc["integrity"])
    res["cliWallSeconds"] = round(t_cli, 2)
    res["cliScanSeconds"] = cli_doc.get("elapsedSeconds")  # run_scan's own time in the CLI
    res["cliPeakMiB"] = cli_peak
    # the JVM's peak RSS moves by 30 % and more between runs of one store (how far G1 grows
    # its heap): the main store and the 4x larger one are scanned MEMORY_RUNS times
    res["cliMemoryRuns"] = _memory_runs(args.store, master, cli_peak)
    # memory flat as the store grows: the CLI on stores 4x smaller, 4x and 16x larger
    for key, other, size in (("smallStore", args.small_store, _parse_size(args.size) // 4),
                             ("largeStore", args.large_store, _parse_size(args.size) * 4),
                             ("largerStore", args.larger_store, _parse_size(args.size) * 16)):
        if other is None:
            continue
        build_store(other, f"{size}")
        warmed = warm(commitlog_files(other))
        t_other, other_doc, other_peak = _cli_scan(other, master)
        res[key] = {
            "store": str(other), "messages": other_doc["totals"]["messages"], "warm": warmed,
            "cliWallSeconds": round(t_other, 2), "cliScanSeconds": other_doc.get("elapsedSeconds"),
            "cliPeakMiB": other_peak,
        }
        if key in ("largeStore", "largerStore"):
            res[key]["cliMemoryRuns"] = _memory_runs(other, master, other_peak)
    res["memoryFlat"] = _memory_flat(
        "1x", res.get("cliMemoryRuns"), "4x", res.get("largeStore", {}).get("cliMemoryRuns"))
    # the CLI's JVM compiles with C1 alone up to 4 GiB of data (job_conf), with C2 above: a JIT
    # of its own size. 4x against 16x compares two sizes 4x apart both past that bound.
    res["memoryFlatAbove"] = _memory_flat(
        "4x", res.get("largeStore", {}).get("cliMemoryRuns"),
        "16x", res.get("largerStore", {}).get("cliMemoryRuns"))


MEMORY_RUNS = 3
"""CLI scans of the main store, the 4x and the 16x larger ones whose peak memory is
recorded."""


def _memory_runs(store: Path, master: str, first: dict[str, float]) -> list[dict[str, float]]:
    """The peak memory of ``first`` (a CLI run of ``store`` already made) and of
    :data:`MEMORY_RUNS` - 1 more."""
    return [first] + [_cli_scan(store, master)[2] for _ in range(MEMORY_RUNS - 1)]


def _memory_flat(small: str, small_runs: list[dict[str, float]] | None, big: str,
                 big_runs: list[dict[str, float]] | None) -> dict[str, Any]:
    """The memory figures at two stores (``small`` and ``big`` name their sizes): per role,
    the median and the range of the runs (:data:`MEMORY_RUNS`), and the ratio of the medians
    (big / small)."""
    from statistics import median

    out: dict[str, Any] = {}
    runs = {small: small_runs, big: big_runs}
    for role in ("driverPython", "jvm", "heapAfterGcMiB"):
        row: dict[str, Any] = {}
        for size, peaks in runs.items():
            values = [p[role] for p in peaks or [] if role in p]
            if values:
                row[size] = {"median": median(values), "min": min(values), "max": max(values)}
        if len(row) == 2:
            row[f"ratio{big}Over{small}"] = round(row[big]["median"] / row[small]["median"], 3)
        out[role] = row
    return out


BEST_OF = 3
"""The single-process decode and the Spark decode pass are each timed as the best of this many
warm runs (the same for both)."""

LOADS: list[dict[str, Any]] = []
"""The load average as each CLI scan starts (written to last-run.json)."""


def _cli_scan(store: Path, master: str, extra: tuple[str, ...] = (),
              executors: bool = False) -> tuple[float, dict[str, Any], dict[str, float]]:
    """``mqtool scan STORE --json`` in a fresh process: wall seconds, its JSON, peak RSS (and,
    in local mode, ``heapAfterGcMiB``: the JVM's largest heap after a collection, from its GC
    log); ``executors``: also the peak of a standalone cluster's executors
    (:class:`MemorySampler`)."""
    import tempfile

    cli = [sys.executable, "-m", "mqtool", "scan", str(store), "--master", master, "--json",
           *extra]
    LOADS.append({"at": f"mqtool scan {store.name} --master {master}",
                  "loadAverage": [round(x, 2) for x in os.getloadavg()]})
    with tempfile.TemporaryDirectory(prefix="bench-scan-gc-") as gc_dir:
        env = dict(os.environ)
        if master.startswith("local"):  # every JVM of the run logs its collections (%p: pid)
            env["JDK_JAVA_OPTIONS"] = f"-Xlog:gc:file={gc_dir}/gc-%p.log"
        proc = subprocess.Popen(cli, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        t0 = time.perf_counter()
        with MemorySampler(proc.pid, executors) as cli_mem:
            stdout, _ = proc.communicate()
        wall = time.perf_counter() - t0
        peak = cli_mem.mib()
        heap = _heap_after_gc(Path(gc_dir))
        if heap is not None:
            peak["heapAfterGcMiB"] = heap
    return wall, json.loads(stdout), peak


def _heap_after_gc(gc_dir: Path) -> float | None:
    """The largest heap after a collection (``-Xlog:gc``'s ``A->B(C)``: B) in the GC logs of
    ``gc_dir`` (the driver's: the launcher's JVM collects nothing)."""
    import re

    after = [float(m.group(1)) for f in gc_dir.glob("gc-*.log*")
             for m in re.finditer(r"\d+M->(\d+)M\(\d+M\)", f.read_text(errors="replace"))]
    return max(after) if after else None


# --- a standalone cluster: 1 worker against 2 ----------------------------------------------------
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise RuntimeError(f"timed out waiting for {what}")


def cluster_scaling(store: Path, n_msgs: int,
                    also: tuple[Path, int] | None = None) -> dict[str, Any]:
    """``mqtool scan`` on a standalone cluster on 127.0.0.1 started with pyspark's own
    ``sbin/spark-daemon.sh`` (master, then workers of 1 core each): 1 worker against 2; with
    ``also`` (a store 4x apart and its message count), that store with 1 and 2 workers too
    (the speed-up at a second size, and the executors' memory at two sizes). Each run records
    the executors' peak memory.

    The daemons are stopped (by their pid files, ``spark-daemon.sh stop``) whatever happens.
    """
    import shutil

    import pyspark

    home = Path(pyspark.__file__).parent
    daemon = str(home / "sbin" / "spark-daemon.sh")
    work = ROOT / "bench" / "out" / "scan" / "cluster"
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_PID_DIR": str(work / "pid"), "SPARK_LOG_DIR": str(work / "logs"),
           "SPARK_IDENT_STRING": "mqtool-bench", "PYSPARK_PYTHON": sys.executable}
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    # each worker (and the executor it starts) pinned to a core of its own (taskset), as a
    # 1-core worker on its own machine: unpinned, a "1-core" executor's JIT and GC threads run
    # on the other core too, and 1 worker against 2 would compare ~1.5 cores with 2
    pin = shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2
    out: dict[str, Any] = {"master": url, "workerCores": 1, "pinnedToOneCpuEach": pin,
                           "runs": [], "also": []}

    def master_log() -> str:
        logs = list((work / "logs").glob(f"*{MASTER_CLASS}-1-*.out"))
        return logs[0].read_text(errors="replace") if logs else ""

    def daemon_cmd(*args: str, cpu: int | None = None) -> None:
        taskset = ["taskset", "-c", str(cpu)] if cpu is not None else []
        subprocess.run([*taskset, daemon, *args], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    shutil.rmtree(work, ignore_errors=True)
    started: list[tuple[str, str]] = []
    try:
        daemon_cmd("start", MASTER_CLASS, "1", "--host", "127.0.0.1", "--port", str(port),
                   "--webui-port", str(_free_port()))
        started.append((MASTER_CLASS, "1"))
        _wait(lambda: "Starting Spark master" in master_log() and "ALIVE" in master_log(),
              120, "the Spark master")
        for n in (1, 2):
            daemon_cmd("start", WORKER_CLASS, str(n), url, "--host", "127.0.0.1", "--cores", "1",
                       "--memory", "1g", "--webui-port", str(_free_port()),
                       "--work-dir", str(work / f"worker{n}"),
                       cpu=n - 1 if pin else None)
            started.append((WORKER_CLASS, str(n)))
            _wait(lambda n=n: master_log().count("Registering worker") >= n, 120,  # type: ignore[misc]
                  f"worker {n} to register")
            todo = [(store, n_msgs)] + ([also] if also else [])
            for i, (run_store, run_msgs) in enumerate(todo):
                t, doc, peak = _cli_scan(run_store, url, (
                    "--conf", "spark.driver.host=127.0.0.1", "--conf", f"spark.cores.max={n}",
                    "--conf", "spark.executor.cores=1", "--conf", "spark.executor.memory=1g",
                ), executors=True)
                assert doc["totals"]["messages"] == run_msgs
                out["also" if i else "runs"].append({
                    "workers": n, "store": str(run_store), "cliWallSeconds": round(t, 2),
                    "scanSeconds": doc.get("elapsedSeconds"), "peakMiB": peak})
    finally:
        for cls, inst in reversed(started):
            subprocess.run([daemon, "stop", cls, inst], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
    runs, also_runs = out["runs"], out["also"]
    for key, pair in (("speedup2over1", runs), ("alsoSpeedup2over1", also_runs)):
        if len(pair) == 2 and pair[1]["scanSeconds"]:  # 1 worker's time over 2 workers'
            out[key] = round(pair[0]["scanSeconds"] / pair[1]["scanSeconds"], 2)
    if len(runs) == 2 and len(also_runs) == 2 and also:  # 2 workers: one executor's peak at
        # the two sizes (the store with more messages over the other)
        peaks = {r["store"]: r["peakMiB"]["executorMax"] for r in (runs[1], also_runs[1])}
        out["executorMaxMiB"] = peaks
        big, small = (str(store), str(also[0])) if n_msgs > also[1] else (str(also[0]),
                                                                          str(store))
        if peaks[big] and peaks[small]:
            out["executorMax4xOver1x"] = round(peaks[big] / peaks[small], 3)
    return out


if __name__ == "__main__":
    main()
