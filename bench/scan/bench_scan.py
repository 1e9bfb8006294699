"""bench/scan: ``mqtool scan`` against RocketMQ's own decoder and a sequential read, one run.

Usage::

    .venv/bin/python bench/scan/bench_scan.py                  # builds bench/out/scan/store1g once
    .venv/bin/python bench/scan/bench_scan.py --rounds 5 \\
        --memory-store bench/out/scan/store2g=2GiB --memory-store bench/out/scan/store8g=8GiB

The store is ``mqtool demo DIR --size 1GiB`` (the demo's topics, retries, schedule and DLQ
messages, filled with BenchTopic traffic: RocketMQ's 1 GiB commitlog files), built once. Every
figure is on warm files (the commitlog is read into the page cache first) and comes from this
run. Each round runs, one after the other:

* a sequential read (``readinto``, 8 MiB buffer) of the store's commitlog;
* RocketMQ's own decoder: ``baseline/RocketMQDecode.java``, compiled against rocketmq-common
  4.9.7 from Maven Central (``tests/realmq.py``), one thread, ``MessageDecoder.decode`` over
  every record of the same commitlog files, :data:`PASSES` passes in one JVM (each maps the
  files again on its clock, so its pages are faulted in as the scan's are, and unmaps them
  after); the round's time is the median of the passes after the first (the JIT's);
* a bare local Spark session in a fresh Python, as ``bench/cli`` starts one
  (``SparkSession.builder.master(MASTER).getOrCreate()``, one tiny job: its ``BARE_SESSION``);
* ``mqtool scan STORE --json`` (every audit, the same master) in a fresh process on the tiny store
  (the 4.9.7 journey fixture: what any scan costs before it reads), on the 1 GiB store, and on
  the 1 GiB store and the tiny store with each audit alone (``--audits NAME``).

A process's wall time runs until it exits (the driver JVM the CLI leaves to exit on its own
does so after); its CPU time is that of the whole process tree, the JVMs included, until the
last of them has exited (this process reaps them: ``PR_SET_CHILD_SUBREAPER``). Every figure is
the median over the rounds of that round's value; a ratio is taken within each round (the
marginal time: the 1 GiB scan less the tiny store's, both of that round) and its median
reported, so a machine whose load drifts still compares runs made side by side. The target's
marginal time takes each scan's wall time less its :data:`START_UP` phases first (see
bench/scan/README.md); the plain difference of the wall times is reported too. The CLI's
``--json`` says where its time went (``timings``): those are reported for the tiny and the
1 GiB store (medians).

With ``--memory-store DIR=SIZE`` (repeatable; built there once): the CLI on each store
:data:`MEMORY_RUNS` times, peak anonymous RSS (``RssAnon``) of the CLI's Python and of its JVM,
and the JVM's largest heap after a collection (``-Xlog:gc``), against the main store's.

Everything goes to stdout and to ``bench/scan/last-run.json`` with the commit, the core count
and the load average (at the start, at each round, at the end); ``bench/figures.py`` copies the
table into the README, and this script into ``spark/README.md``. A benchmark, not a test: do
not loop it on a shared machine.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import median
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TINY_STORE = ROOT / "fixtures" / "rocketmq-stores" / "4.9.7" / "journey" / "store"
ROCKETMQ = "4.9.7"
PASSES = 4
"""Passes of RocketMQ's decoder over the commitlog in one JVM (the first is the JIT's)."""
MEMORY_RUNS = 3
"""CLI scans of each store whose peak memory is recorded."""
AUDITS = ("queues", "rate", "dlq", "retry", "schedule", "integrity", "lag")



# --- processes: wall, CPU of the whole tree, peak memory ---------------------------------------
def _subreaper() -> bool:
    """Make this process the reaper of its orphans (a JVM outliving the CLI): Linux only."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


REAPER = _subreaper()


def _reap(timeout: float = 60.0) -> None:
    """Wait for every orphan this process adopted (their CPU then counts as its children's)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


RSS_FIELD = "RssAnon:"  # what a process really holds (mapped store pages are page cache)


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
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(RSS_FIELD):
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
    """Peak anonymous RSS of a process tree: the root (the CLI's Python) and its JVMs."""

    def __init__(self, root_pid: int) -> None:
        self.root = root_pid
        self.peak = {"driverPython": 0, "jvm": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        kids = _children()
        tree, todo = [], [self.root]
        while todo:
            p = todo.pop()
            tree.append(p)
            todo += kids.get(p, [])
        jvm = 0
        for p in tree:
            if p == self.root:
                self.peak["driverPython"] = max(self.peak["driverPython"], _rss(p))
            elif "java" in _cmdline(p).split(" ")[0]:
                jvm += _rss(p)
        self.peak["jvm"] = max(self.peak["jvm"], jvm)

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


def run_process(cmd: Sequence[str], env: dict[str, str] | None = None,
                memory: bool = False) -> dict[str, Any]:
    """Run ``cmd``: its wall seconds (to its exit), the CPU seconds of its whole tree (None
    where orphans cannot be reaped), its stdout; with ``memory`` its peak memory."""
    _reap(0)
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    sampler = MemorySampler(proc.pid) if memory else None
    if sampler is not None:
        sampler.__enter__()
    try:
        out, err = proc.communicate()
    finally:
        if sampler is not None:
            sampler.__exit__()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: "
                           f"{err.decode(errors='replace')[-2000:]}")
    _reap()
    got: dict[str, Any] = {"wall": wall, "cpu": _children_cpu() - cpu0 if REAPER else None,
                           "stdout": out.decode()}
    if sampler is not None:
        got["peakMiB"] = sampler.mib()
    return got


# --- the store, its files, the baselines --------------------------------------------------------
def build_store(store: Path, size: str) -> float | None:
    """``mqtool demo STORE --size SIZE`` unless the store is there already (seconds or None)."""
    if (store / "commitlog").is_dir():
        return None
    store.parent.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mqtool", "demo", str(store), "--size", size, "--json"],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def commitlog_files(store: Path) -> list[Path]:
    return sorted((store / "commitlog").iterdir(), key=lambda p: int(p.name))


def sequential_read(files: list[Path]) -> tuple[float, int]:
    buf = bytearray(8 * 2**20)
    mv = memoryview(buf)
    total = 0
    t = time.perf_counter()
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while n := fh.readinto(mv):
                total += n
    return time.perf_counter() - t, total


def warm(files: list[Path]) -> bool:
    """Read ``files`` into the page cache when they fit in half of ``MemAvailable``."""
    available = 0
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    if sum(f.stat().st_size for f in files) > available // 2:
        return False
    sequential_read(files)
    return True


def _by_path(name: str, path: Path) -> ModuleType:
    """The module at ``path`` (a script of this repository, not a package), loaded by path."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _realmq() -> ModuleType:
    """tests/realmq.py: RocketMQ's artifacts from Maven Central (``mvn``, ``~/.m2``)."""
    return _by_path("realmq", ROOT / "tests" / "realmq.py")


CLI_BENCH = _by_path("bench_cli", HERE.parent / "cli" / "run.py")
"""bench/cli: its bare Spark session (``BARE_SESSION``) and master (``MASTER``)."""


def rocketmq_decoder() -> list[str]:
    """The command that runs ``baseline/RocketMQDecode.java`` against rocketmq-common."""
    realmq = _realmq()
    classes = realmq.compile_java(ROCKETMQ, [HERE / "baseline" / "RocketMQDecode.java"], "common")
    cp = f"{classes}:{realmq.classpath(ROCKETMQ, 'common')}"
    return ["java", "-cp", cp, "RocketMQDecode", str(PASSES)]


def rocketmq_decode(cmd: list[str], files: list[Path]) -> dict[str, Any]:
    """One JVM of RocketMQ's decoder over ``files``: records, bytes, each pass's seconds and
    CPU seconds (its thread's)."""
    out = subprocess.run([*cmd, *map(str, files)], check=True, capture_output=True,
                         text=True).stdout
    lines = [line.split() for line in out.splitlines()]
    passes = [p for p in lines if p[:1] == ["pass"]]
    rewalks = [p for p in lines if p[:1] == ["rewalk"]]
    return {"records": int(passes[0][2]), "bytes": int(passes[0][3]),
            "seconds": [float(p[4]) for p in passes], "cpu": [float(p[5]) for p in passes],
            "rewalkSeconds": [float(p[4]) for p in rewalks]}


def cli_scan(store: Path, *extra: str, memory: bool = False) -> dict[str, Any]:
    """``mqtool scan STORE --json`` in a fresh process; with ``memory`` the peak RSS and the
    JVM's largest heap after a collection (its GC log)."""
    import tempfile

    cmd = [sys.executable, "-m", "mqtool", "scan", str(store), "--json", "--master",
           CLI_BENCH.MASTER, *extra]
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="bench-scan-gc-") as gc_dir:
        if memory:  # every JVM of the run logs its collections (%p: its pid)
            env["JDK_JAVA_OPTIONS"] = f"-Xlog:gc:file={gc_dir}/gc-%p.log"
        got = run_process(cmd, env, memory=memory)
        if memory:
            heap = _heap_after_gc(Path(gc_dir))
            if heap is not None:
                got["peakMiB"]["heapAfterGcMiB"] = heap
    got["doc"] = json.loads(got.pop("stdout"))
    return got


def _heap_after_gc(gc_dir: Path) -> float | None:
    """The largest heap after a collection (``-Xlog:gc``'s ``A->B(C)``: B) in the logs."""
    import re

    after = [float(m.group(1)) for f in gc_dir.glob("gc-*.log*")
             for m in re.finditer(r"\d+M->(\d+)M\(\d+M\)", f.read_text(errors="replace"))]
    return max(after) if after else None


# --- one round -----------------------------------------------------------------------------------
def one_round(store: Path, files: list[Path], decoder: list[str],
              each_audit: bool = True) -> dict[str, Any]:
    """Every measurement of a round, each once, side by side."""
    r: dict[str, Any] = {"loadAverage": [round(x, 2) for x in os.getloadavg()]}
    r["readSeconds"], r["readBytes"] = sequential_read(files)
    r["rocketmq"] = rocketmq_decode(decoder, files)
    bare = run_process([sys.executable, "-c", CLI_BENCH.BARE_SESSION])
    r["bare"] = {"wall": bare["wall"], "cpu": bare["cpu"]}
    for key, target in (("tiny", TINY_STORE), ("main", store)):
        got = cli_scan(target)
        r[key] = {"wall": got["wall"], "cpu": got["cpu"], "timings": got["doc"].get("timings"),
                  "messages": got["doc"]["totals"]["messages"]}
    for audit in AUDITS if each_audit else ():
        for key, target in (("tiny", TINY_STORE), ("main", store)):
            got = cli_scan(target, "--audits", audit)
            r.setdefault("audits", {}).setdefault(audit, {})[key] = {
                "wall": got["wall"], "cpu": got["cpu"], "timings": got["doc"].get("timings")}
    return r


def _med(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return round(median(got), 4) if got else None


def _timings(rounds: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The median of each of the CLI's timings over the rounds."""
    docs = [r[key]["timings"] for r in rounds if r[key].get("timings")]
    out: dict[str, Any] = {}
    for name in docs[0] if docs else {}:
        if isinstance(docs[0][name], dict):
            out[name] = {k: _med([d[name].get(k) for d in docs]) for k in docs[0][name]}
        else:
            out[name] = _med([d.get(name) for d in docs])
    return out


START_UP = ("pyspark", "jvm", "context")
"""The CLI's start-up phases (its ``--json`` ``timings``) that do not depend on the store:
importing pyspark, launching the driver JVM, creating the SparkContext. They vary by tenths of a
second from one process to the next, as much as the 1 GiB store's margin over the tiny one."""


def after_start_up(x: dict[str, Any]) -> float | None:
    """A scan's wall time less its :data:`START_UP` phases (None: it reported no timings)."""
    t = x.get("timings") or {}
    if any(not isinstance(t.get(k), (int, float)) for k in START_UP):
        return None
    return float(x["wall"] - sum(t[k] for k in START_UP))


def summarise(rounds: list[dict[str, Any]], messages: int, data_bytes: int) -> dict[str, Any]:
    """The run's figures: medians over the rounds of each round's values and ratios."""

    def per_round(fn: Callable[[dict[str, Any]], float | None]) -> float | None:
        return _med([fn(r) for r in rounds])

    def steady(r: dict[str, Any], what: str) -> float:
        return float(median(r["rocketmq"][what][1:] or r["rocketmq"][what]))

    def marginal(r: dict[str, Any], what: str) -> float:
        return float(r["main"][what] - r["tiny"][what])

    def margin_after_start_up(r: dict[str, Any]) -> float | None:
        main, tiny = after_start_up(r["main"]), after_start_up(r["tiny"])
        return None if main is None or tiny is None else main - tiny

    def ratio_after_start_up(r: dict[str, Any]) -> float | None:
        m = margin_after_start_up(r)
        return None if m is None else steady(r, "seconds") / m

    read_rate = per_round(lambda r: messages * (r["readBytes"] / r["readSeconds"]) / data_bytes)
    java_rate = per_round(lambda r: messages / steady(r, "seconds"))
    scan_rate = per_round(lambda r: messages / marginal(r, "wall"))
    s: dict[str, Any] = {
        "readMsgsPerSecond": read_rate,
        "rocketmqMsgsPerSecond": java_rate,
        "rocketmqFirstPassMsgsPerSecond": per_round(
            lambda r: messages / r["rocketmq"]["seconds"][0]),
        "rocketmqCpuSeconds": per_round(lambda r: steady(r, "cpu")),
        "tinyWallSeconds": per_round(lambda r: r["tiny"]["wall"]),
        "mainWallSeconds": per_round(lambda r: r["main"]["wall"]),
        "marginalSeconds": per_round(lambda r: marginal(r, "wall")),
        "marginalMsgsPerSecond": scan_rate,
        "marginalOverRocketmq": per_round(
            lambda r: steady(r, "seconds") / marginal(r, "wall")),
        "marginalAfterStartUpSeconds": per_round(margin_after_start_up),
        "marginalAfterStartUpOverRocketmq": per_round(ratio_after_start_up),
        "rocketmqRewalkMsgsPerSecond": per_round(
            lambda r: messages / median(r["rocketmq"]["rewalkSeconds"])),
        "marginalOverRocketmqRewalk": per_round(
            lambda r: median(r["rocketmq"]["rewalkSeconds"]) / marginal(r, "wall")),
        "marginalOverRead": per_round(
            lambda r: (data_bytes / (r["readBytes"] / r["readSeconds"])) / marginal(r, "wall")),
        "bareSessionWallSeconds": per_round(lambda r: r["bare"]["wall"]),
        "tinyOverBareSeconds": per_round(lambda r: r["tiny"]["wall"] - r["bare"]["wall"]),
        "tinyCpuSeconds": per_round(lambda r: r["tiny"]["cpu"]),
        "mainCpuSeconds": per_round(lambda r: r["main"]["cpu"]),
        "bareSessionCpuSeconds": per_round(lambda r: r["bare"]["cpu"]),
        "marginalCpuSeconds": per_round(
            lambda r: None if r["main"]["cpu"] is None else marginal(r, "cpu")),
        "marginalCpuOverRocketmqCpu": per_round(
            lambda r: None if r["main"]["cpu"] is None
            else steady(r, "cpu") / marginal(r, "cpu")),
        "timings": {"tiny": _timings(rounds, "tiny"), "main": _timings(rounds, "main")},
        "audits": {},
    }
    for audit in AUDITS if "audits" in rounds[0] else ():
        a = {k: [r["audits"][audit][k] for r in rounds] for k in ("tiny", "main")}
        s["audits"][audit] = {
            "tinyWallSeconds": _med([x["wall"] for x in a["tiny"]]),
            "mainWallSeconds": _med([x["wall"] for x in a["main"]]),
            "marginalSeconds": per_round(lambda r, audit=audit: r["audits"][audit]["main"]["wall"]
                                         - r["audits"][audit]["tiny"]["wall"]),
            "marginalCpuSeconds": per_round(
                lambda r, audit=audit: None if r["audits"][audit]["main"]["cpu"] is None
                else r["audits"][audit]["main"]["cpu"] - r["audits"][audit]["tiny"]["cpu"]),
            "mainTimings": _timings([r["audits"][audit] for r in rounds], "main"),
        }
    return s


# --- memory at several sizes ---------------------------------------------------------------------
def memory_runs(store: Path) -> dict[str, Any]:
    """:data:`MEMORY_RUNS` CLI scans of ``store``: peak memory of each, and their medians."""
    runs = []
    for _ in range(MEMORY_RUNS):
        got = cli_scan(store, memory=True)
        runs.append({"wall": round(got["wall"], 2), "messages": got["doc"]["totals"]["messages"],
                     **got["peakMiB"]})
    out: dict[str, Any] = {"store": str(store), "messages": runs[0]["messages"], "runs": runs}
    for role in ("driverPython", "jvm", "heapAfterGcMiB"):
        values = [x[role] for x in runs if role in x]
        if values:
            out[role] = {"median": median(values), "min": min(values), "max": max(values)}
    return out


# --- the result file -----------------------------------------------------------------------------
def _num(v: float | None, digits: int = 2) -> float | None:
    return None if v is None else round(v, digits)


def figures(s: dict[str, Any], messages: int) -> list[dict[str, Any]]:
    """The README table: rates with their ratios to both baselines, then CPU and wall times.

    A scan's marginal rate is the store's messages over its 1 GiB scan less its tiny store's,
    in wall time and in CPU time of the whole process tree (against the CPU time of
    RocketMQ's decoder: one thread, so its wall and CPU rates differ only by the load)."""
    java, read = s["rocketmqMsgsPerSecond"], s["readMsgsPerSecond"]
    java_cpu = messages / s["rocketmqCpuSeconds"]

    def rate(what: str, value: float | None, java_rate: float = java) -> dict[str, Any]:
        if value is None or value <= 0:  # the difference was lost in the machine's noise
            return {"what": what + " (not measurable in this run)", "value": None,
                    "unit": "msgs/s"}
        return {"what": what, "value": round(value), "unit": "msgs/s",
                "ratios": {"rocketmq": _num(value / java_rate, 3), "read": _num(value / read, 4)}}

    def per(seconds: float | None) -> float | None:
        return None if not seconds or seconds <= 0 else messages / seconds

    def secs(what: str, value: float | None) -> dict[str, Any]:
        return {"what": what, "value": _num(value), "unit": "s"}

    rows = [
        rate("sequential read of the commitlog (warm, readinto, 8 MiB buffer)", read),
        rate(f"RocketMQ {ROCKETMQ} MessageDecoder.decode, 1 thread (steady passes), wall", java),
        rate(f"RocketMQ {ROCKETMQ} MessageDecoder.decode, 1 thread, first pass of its JVM, wall",
             s["rocketmqFirstPassMsgsPerSecond"]),
        rate(f"RocketMQ {ROCKETMQ} MessageDecoder.decode, 1 thread, the last mapping walked "
             "again (pages already faulted in: not the baseline), wall",
             s["rocketmqRewalkMsgsPerSecond"]),
        rate("mqtool scan, every audit: marginal rate, wall (1 GiB scan less the tiny store's; "
             "ratio: median of the rounds' ratios)",
             java * s["marginalOverRocketmq"] if s["marginalOverRocketmq"] else None),
        rate("mqtool scan, every audit: marginal rate after start-up, wall (each scan's wall "
             "time less its pyspark import, JVM launch and SparkContext; 1 GiB less tiny; "
             "ratio: median of the rounds' ratios; the target's figure)",
             java * s["marginalAfterStartUpOverRocketmq"]
             if s["marginalAfterStartUpOverRocketmq"] else None),
        rate(f"RocketMQ {ROCKETMQ} MessageDecoder.decode, 1 thread (steady passes), per CPU-s",
             java_cpu, java_cpu),
        rate("mqtool scan, every audit: marginal rate per CPU-s of its process tree",
             per(s["marginalCpuSeconds"]), java_cpu),
    ]
    for audit in s["audits"]:
        rows.append(rate(f"mqtool scan --audits {audit}: marginal rate per CPU-s",
                         per(s["audits"][audit]["marginalCpuSeconds"]), java_cpu))
    rows += [
        secs("mqtool scan, every audit, 1 GiB store: wall", s["mainWallSeconds"]),
        secs("mqtool scan, every audit, tiny store (what any scan costs before it reads): wall",
             s["tinyWallSeconds"]),
        secs("bare local Spark session, fresh Python (getOrCreate, one tiny job): wall",
             s["bareSessionWallSeconds"]),
        secs("tiny store scan less the bare session (target: at most 1 s)",
             s["tinyOverBareSeconds"]),
        secs("mqtool scan, every audit: marginal CPU-s (1 GiB less tiny)",
             s["marginalCpuSeconds"]),
        secs(f"RocketMQ {ROCKETMQ} MessageDecoder.decode: CPU-s per steady pass",
             s["rocketmqCpuSeconds"]),
    ]
    for audit in s["audits"]:
        rows.append(secs(f"mqtool scan --audits {audit}: marginal CPU-s",
                         s["audits"][audit]["marginalCpuSeconds"]))
    return rows


def memory_at_sizes(args: argparse.Namespace) -> dict[str, Any]:
    """With ``--memory-store``: the memory runs of the main store and of each of those."""
    memory: dict[str, Any] = {}
    if args.memory_store:
        memory["1x"] = memory_runs(args.store)
        for spec in args.memory_store:
            path, _, size = spec.partition("=")
            store = Path(path)
            build_store(store, size or "8GiB")
            memory[size or store.name] = {"warm": warm(commitlog_files(store)),
                                          **memory_runs(store)}
        for size, m in memory.items():
            for role in ("driverPython", "jvm", "heapAfterGcMiB"):
                if size != "1x" and role in m and role in memory["1x"]:
                    m[role]["ratioToMain"] = round(m[role]["median"]
                                                   / memory["1x"][role]["median"], 3)
    return memory


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]],
                                              dict[str, Any]]:
    """The run's rounds (and memory runs): its parameters, the rounds, the memory runs."""
    res: dict[str, Any] = {"store": str(args.store), "size": args.size, "rounds": args.rounds,
                           "tinyStore": str(TINY_STORE.relative_to(ROOT)),
                           "rocketmq": ROCKETMQ, "passes": PASSES, "reaper": REAPER}
    res["buildSeconds"] = build_store(args.store, args.size)
    files = commitlog_files(args.store)
    decoder = rocketmq_decoder()
    sequential_read(files)  # warm: every figure below is on warm files
    rounds = []
    for i in range(args.rounds):
        rounds.append(one_round(args.store, files, decoder, not args.no_each_audit))
        main_wall = rounds[-1]["main"]["wall"]
        print(f"round {i + 1}/{args.rounds}: load {rounds[-1]['loadAverage']}, scan "
              f"{main_wall:.2f} s, tiny {rounds[-1]['tiny']['wall']:.2f} s, bare "
              f"{rounds[-1]['bare']['wall']:.2f} s, RocketMQ "
              f"{rounds[-1]['rocketmq']['seconds']}", file=sys.stderr, flush=True)
    messages = rounds[0]["main"]["messages"]
    assert all(r["rocketmq"]["records"] == messages for r in rounds), "the decoders disagree"
    data_bytes = rounds[0]["rocketmq"]["bytes"]
    res.update(messages=messages, dataBytes=data_bytes, avgRecordBytes=round(data_bytes / messages,
                                                                              1))
    return res, rounds, memory_at_sizes(args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", type=Path, default=ROOT / "bench" / "out" / "scan" / "store1g")
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-each-audit", action="store_true",
                    help="skip the scans with each audit alone (a shorter run)")
    ap.add_argument("--resummarise", action="store_true",
                    help="measure no round: summarise again the rounds of "
                    "bench/scan/last-run.json (after a change to this script's summary); with "
                    "--memory-store, measure the memory runs alone")
    ap.add_argument("--memory-store", action="append", default=[], metavar="DIR=SIZE",
                    help="also scan this store (built there once with mqtool demo --size SIZE) "
                    f"{MEMORY_RUNS} times: memory against the main store's")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE.parent))
    from figures import render, run_meta, write_last_run

    last = HERE / "last-run.json"
    if args.resummarise:  # the measurements of the last run, summarised by this script
        old = json.loads(last.read_text(encoding="utf-8"))
        meta = {k: old[k] for k in ("commit", "dirty", "cpuCount", "loadAverage",
                                    "cpuCalibrationMs", "startedUtc") if k in old}
        res, rounds, memory = old["params"], old["rounds"], old["memory"]
        meta["resummarisedUtc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if args.memory_store:  # measured now, beside the last run's rounds
            meta["memoryRun"] = run_meta()
            memory = memory_at_sizes(args)
    else:
        meta = run_meta()
        res, rounds, memory = measure(args)
    messages = res["messages"]
    s = summarise(rounds, messages, res["dataBytes"])
    targets = {
        "marginalAfterStartUpOverRocketmq": {"value": s["marginalAfterStartUpOverRocketmq"],
                                             "atLeast": 1.0},
        "tinyOverBareSeconds": {"value": s["tinyOverBareSeconds"], "atMost": 1.0},
    }
    for t in targets.values():
        v = t["value"]
        t["holds"] = v is not None and (v >= t["atLeast"] if "atLeast" in t else v <= t["atMost"])
    doc = {
        "params": res, "rounds": rounds, "summary": s, "memory": memory, "targets": targets,
        "baselines": {"rocketmq": f"RocketMQ {ROCKETMQ} MessageDecoder.decode, 1 thread, same "
                      "run", "read": "sequential read of the same commitlog, same run"},
        "figures": figures(s, messages),
        "notes": notes(res, s, memory, targets),
    }
    if args.resummarise:
        ends = {k: old[k] for k in ("loadAverageAtEnd", "cpuCalibrationMsAtEnd") if k in old}
        last.write_text(json.dumps({"bench": "scan", **meta, **doc, **ends},
                                   indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        path = last
    else:
        path = write_last_run("scan", meta, doc)
    copy_to_spark_readme(render("scan", json.loads(path.read_text(encoding="utf-8"))))
    print(json.dumps({"summary": s, "targets": targets}, indent=2))


SPARK_README = ROOT / "spark" / "README.md"


def copy_to_spark_readme(block: str) -> None:
    """The figures block (as bench/figures.py renders it) between spark/README.md's markers."""
    start, end = "<!-- bench:scan:start -->", "<!-- bench:scan:end -->"
    text = SPARK_README.read_text(encoding="utf-8")
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        SPARK_README.write_text(f"{head}{start}\n{block}\n{end}{tail}", encoding="utf-8")


def notes(res: dict[str, Any], s: dict[str, Any], memory: dict[str, Any],
          targets: dict[str, Any]) -> list[str]:
    """The lines under the README table."""
    t, m = s["timings"]["tiny"], s["timings"]["main"]
    out = [
        f"Store: `mqtool demo --size {res['size']}`, {res['messages']:,} messages, "
        f"{res['dataBytes']:,} bytes of records (average {res['avgRecordBytes']} B); tiny store: "
        f"`{res['tinyStore']}`. Medians of {res['rounds']} rounds; each ratio is taken within a "
        f"round. RocketMQ's decoder: {s['rocketmqCpuSeconds']} CPU-s per pass.",
        "Targets: marginal rate after start-up at least 1.0x RocketMQ's decoder: "
        f"{s['marginalAfterStartUpOverRocketmq']}x "
        f"({_holds(targets['marginalAfterStartUpOverRocketmq'])}; the whole wall times' margin: "
        f"{s['marginalOverRocketmq']}x); tiny store "
        f"scan at most the bare session + 1 s: {s['tinyOverBareSeconds']} s over "
        f"({_holds(targets['tinyOverBareSeconds'])}).",
        "RocketMQ's decoder maps the files in each timed pass, as any reading of a store does "
        "(the scan's included); walking its last mapping again, pages already faulted in, it "
        f"runs at {s['rocketmqRewalkMsgsPerSecond']:,.0f} msgs/s, against which the marginal "
        f"rate of the whole wall times is {s['marginalOverRocketmqRewalk']}x (not the target's "
        "baseline).",
        f"CPU seconds of the whole process tree (JVMs included): tiny store {s['tinyCpuSeconds']}, "
        f"1 GiB {s['mainCpuSeconds']}, marginal {s['marginalCpuSeconds']} (RocketMQ's decoder "
        f"{s['rocketmqCpuSeconds']}: {s['marginalCpuOverRocketmqCpu']}x); bare session "
        f"{s['bareSessionCpuSeconds']}.",
        "Where the CLI's time goes (its `--json` `timings`, seconds, tiny store / 1 GiB): "
        + "; ".join(f"{k} {_fmt(t.get(k))} / {_fmt(m.get(k))}" for k in m),
    ]
    if memory:
        out.append("Memory (peak RssAnon MiB of the CLI's Python and JVM, the JVM's largest heap "
                   "after a collection; median of "
                   f"{MEMORY_RUNS} runs): " + "; ".join(
                       f"{size} ({m['messages']:,} messages): python "
                       f"{m['driverPython']['median']}, JVM {m['jvm']['median']}, heap "
                       f"{m.get('heapAfterGcMiB', {}).get('median')}"
                       + (f", JVM {m['jvm'].get('ratioToMain')}x the 1 GiB store's" if size != "1x"
                          else "") for size, m in memory.items()))
    return out


def _holds(target: dict[str, Any]) -> str:
    return "holds" if target["holds"] else "does not hold"


def _fmt(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} {_fmt(x)}" for k, x in v.items()) + "}"
    return str(v)


if __name__ == "__main__":
    main()
