"""bench/broker: ``mqtool serve`` against the real RocketMQ 4.9.7 broker, the same clients in
the same run; every ratio is serve's figure over the real broker's.

Usage: .venv/bin/python bench/broker/run.py [--full] [--dir bench/out/broker]
       (needs ``make peers`` for the C++ client; RocketMQ comes from Maven Central)

Both servers run at once on 127.0.0.1, each over a fresh store: ``mqtool serve`` (name server
and broker in one process) and the real 4.9.7 name server and broker (two JVMs, the broker with
tests/realmq.py's configuration: async flush, 2 send threads as on this 2-core machine). Each
case runs against serve, then against the real broker, back to back, so that a load change on
the shared machine falls on both alike. Every message has a 1 KiB body, a tag and a key.

* ``C++ sync, 8 producers``: 8 processes of the C++-core client (PyPI rocketmq 0.4.4), sync
  sends one at a time to a topic made beforehand (``mqadmin updateTopic``, 4 queues); the
  rate over the send window (first send to last SEND_OK);
* ``Java sync, 8 threads``: the official 4.9.7 Java client, one producer shared by 8 threads;
* ``Java batch 32``: one thread sending batches of 32 messages;
* ``Java push consumer``: a concurrent push consumer draining what the batch case stored,
  from its first offset;
* the time from a consumer's start to its first message: ``FIRST_STARTS`` consumers of new
  groups on each side (one JVM each, the sides alternating, the other side paused), each
  from the first offset of what the batch case stored until its first message; the median of
  each side (one start of a client JVM is too noisy a sample to compare two servers by).

Each case runs ``REPEATS`` times on each side, the sides alternating (who goes first
alternates too), and each side's median run is reported with every run's rate in the notes.
Before each run both servers are let go quiet (each under 2% of a core over half a second, at
most 20 s), and the server not under test is paused (SIGSTOP, SIGCONT after) while the other
runs: the broker JVM goes on compiling and collecting for seconds after a load, and that is
its own work, not a load on serve's runs (serve does none).

For each case: msgs/s on both sides and the ratio; the server's CPU per 1,000 messages (the
broker JVM's, or serve's process) and the clients' own CPU per 1,000 messages (which bounds
both sides alike). Serve's and the broker's anonymous RSS (heap and buffers, without the mapped
store files) are sampled during the 8-producer case.

Writes bench/broker/last-run.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "serve"))
sys.path.insert(0, str(ROOT / "tests"))
import realmq  # noqa: E402
import run as serve_bench  # noqa: E402  (bench/serve/run.py: serve's process, the C++ clients)
from figures import run_meta, write_last_run  # noqa: E402

VERSION = "4.9.7"
SIZES = {  # (per C++ producer, per Java thread, messages drained)
    "small": (2000, 1000, 20_000),
    "full": (5000, 5000, 100_000),
}
PRODUCERS = 8
FIRST_STARTS = 9
# runs of each case per side, the sides alternating; the median run is reported. On this
# 2-core virtual machine one run's rate moves by 10-15% from run to run with the code and the
# load unchanged (serve against serve alike), so a median of 3 decides little.
REPEATS = 5
BODY = 1024
QUIET_WINDOW = 0.5  # s
QUIET_CPU = 0.02  # CPU-seconds per second: "quiet" below this
QUIET_MAX = 20.0  # s
BATCH = 32
CPP_TOPIC = "BenchCpp"


class Side:
    """One server under test: its name server address and the process that does the work."""

    def __init__(self, name: str, namesrv: str, proc: serve_bench.Proc, work: Path) -> None:
        self.name, self.namesrv, self.proc, self.work = name, namesrv, proc, work

    # bench/serve's producers() reads these from its server
    def rss_kib(self) -> int:
        return self.proc.rss_kib()

    def cpu(self) -> tuple[float, float]:
        return self.proc.cpu()


def java_load(side: Side, classes: Path, *args: str) -> dict[str, Any]:
    """One JVM of bench/broker/java Load against ``side``: its JSON line, plus the server's
    CPU seconds over the client's whole run."""
    u0, s0 = side.cpu()
    res = realmq.java(VERSION, "mqtool.bench.Load", *args[:1], side.namesrv, *args[1:],
                      class_dir=classes, timeout=1800, home=side.work / "client-home")
    u1, s1 = side.cpu()
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        raise SystemExit(f"Load {' '.join(args)} against {side.name} exit {res.returncode}:\n"
                         f"{res.stdout[-2000:]}{res.stderr[-4000:]}")
    got: dict[str, Any] = json.loads(lines[-1])
    got["server_cpu"] = (u1 - u0) + (s1 - s0)
    return got


def wait_for_route(side: Side, topic: str) -> None:
    """Until the name server gives ``topic``'s route (the real broker registers a topic
    ``updateTopic`` made with its name server in the background: a C++ producer that looks
    it up before then fails with "No route info of this topic")."""
    from mqtool.remoting.client import LiveClient

    with LiveClient(side.namesrv) as client:
        for _ in range(120):
            if client.route(topic, refresh=True) is not None:
                return
            time.sleep(0.25)
    raise SystemExit(f"{side.name}: the name server has no route of {topic} after 30 s")


def quiesce(sides: list[Side]) -> float:
    """Wait until neither server works in the background (each under QUIET_CPU of CPU per
    QUIET_WINDOW: the broker JVM goes on compiling and collecting for a while after a load,
    which would fall on the other side's run), at most QUIET_MAX seconds; returns the wait."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < QUIET_MAX:
        before = [sum(side.cpu()) for side in sides]
        time.sleep(QUIET_WINDOW)
        if all(sum(side.cpu()) - b <= QUIET_CPU * QUIET_WINDOW
               for side, b in zip(sides, before, strict=True)):
            break
    return round(time.monotonic() - t0, 2)


def run_quietly(sides: list[Side], side: Side, step: Any) -> dict[str, Any]:
    """``step(side)`` once both servers are quiet, with the other server paused (SIGSTOP,
    SIGCONT after: its own background work, the broker JVM's compiling and collecting after
    a load, falls on its own runs, not on the other side's); the wait is noted with the
    figures (``quiet_wait_s``)."""
    waited = quiesce(sides)
    others = [o for o in sides if o is not side]
    for o in others:
        os.kill(o.proc.pid, signal.SIGSTOP)
    try:
        got: dict[str, Any] = step(side)
    finally:
        for o in others:
            os.kill(o.proc.pid, signal.SIGCONT)
    got["quiet_wait_s"] = waited
    return got


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median rate of a side's repeats (its CPU figures with it), and every
    repeat's rate (``rates``)."""
    ranked = sorted(runs, key=lambda r: r["msgs_per_s"])
    return {**ranked[len(ranked) // 2], "rates": [r["msgs_per_s"] for r in runs]}


def figures_of(got: dict[str, Any]) -> dict[str, Any]:
    n = got["messages"]
    return {"msgs_per_s": round(n / got["seconds"]),
            "server_cpu_ms_per_1000": round(got["server_cpu"] / n * 1e6, 1),
            "clients_cpu_ms_per_1000": round(got["cpu"] / n * 1e6, 1),
            **({"first_message_ms": got["firstMs"]} if got.get("firstMs", -1) >= 0 else {})}


def cpp_producers(side: Side, per: int) -> dict[str, Any]:
    got = serve_bench.producers(side, side.work, PRODUCERS, per, BODY, CPP_TOPIC)
    us = got["server_cpu_us_per_msg"]
    return {"msgs_per_s": got["msgs_per_s"],
            "server_cpu_ms_per_1000": round(us["user"] + us["system"], 1),
            "clients_cpu_ms_per_1000": got["clients_cpu_us_per_msg"],
            "rss_kib": got["rss_kib"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true",
                    help="5,000 messages per producer and thread, 100,000 drained")
    ap.add_argument("--dir", type=Path, default=ROOT / "bench" / "out" / "broker")
    args = ap.parse_args()
    if not serve_bench.CPP_PYTHON.exists():
        raise SystemExit("the C++ client is not installed: run `make peers`")
    size = "full" if args.full else "small"
    per_cpp, per_thread, drain = SIZES[size]
    meta = run_meta()
    work = args.dir
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    classes = realmq.compile_java(VERSION, sorted((HERE / "java").rglob("*.java")),
                                  *realmq.DEFAULT_ARTIFACTS)

    serve = serve_bench.Server(work / "serve" / "store")
    cluster = realmq.Cluster(VERSION, work / "broker" / "store")
    cases: dict[str, dict[str, dict[str, Any]]] = {}
    firsts: dict[str, list[int]] = {"serve": [], "broker": []}
    try:
        cluster.start()
        assert cluster.broker is not None
        proc = serve_bench.Proc
        sides = [Side("serve", serve.namesrv, proc(serve.proc.pid), work / "serve"),
                 Side("broker", cluster.namesrv_addr, proc(cluster.broker.pid), work / "broker")]
        for side in sides:
            # the C++ producers' topic exists before they start (4 queues, what sending
            # creates): eight clients that all look a new topic up at once sometimes fail with
            # "No route info of this topic", against either server
            made = realmq.mqadmin(VERSION, side.namesrv, "updateTopic", "-c", "DefaultCluster",
                                  "-t", CPP_TOPIC, "-r", "4", "-w", "4",
                                  home=side.work / "admin-home")
            if made.returncode != 0 or "success" not in made.stdout:
                raise SystemExit(f"updateTopic {CPP_TOPIC} against {side.name}: exit "
                                 f"{made.returncode}\n{made.stdout[-2000:]}{made.stderr[-2000:]}")
            wait_for_route(side, CPP_TOPIC)
        steps: list[tuple[str, Any]] = [
            (f"C++ sync, {PRODUCERS} producers", lambda s, r: cpp_producers(s, per_cpp)),
            (f"Java sync, {PRODUCERS} threads",
             lambda s, r: figures_of(java_load(s, classes, "produce", "BenchSync",
                                               str(PRODUCERS), str(per_thread), str(BODY), "1"))),
            (f"Java batch {BATCH}",
             lambda s, r: figures_of(java_load(s, classes, "produce", "BenchDrain", "1",
                                               str(drain), str(BODY), str(BATCH)))),
            ("Java push consumer",  # a new group each repeat: each drains from the first offset
             lambda s, r: figures_of(java_load(s, classes, "consume", f"CID-BENCH-DRAIN-{r}",
                                               "BenchDrain", str(drain)))),
        ]
        for name, step in steps:
            runs: dict[str, list[dict[str, Any]]] = {side.name: [] for side in sides}
            for r in range(REPEATS):
                for side in sides if r % 2 == 0 else sides[::-1]:  # who goes first alternates
                    print(f"{name} ({r + 1}/{REPEATS}): {side.name} ...", file=sys.stderr,
                          flush=True)
                    runs[side.name].append(
                        run_quietly(sides, side, lambda s, r=r, step=step: step(s, r)))
            cases[name] = {side: median_run(got) for side, got in runs.items()}
        for i in range(FIRST_STARTS):
            for side in sides if i % 2 == 0 else sides[::-1]:
                print(f"first message {i + 1}/{FIRST_STARTS}: {side.name} ...", file=sys.stderr,
                      flush=True)
                got = run_quietly(sides, side, lambda s, i=i: java_load(
                    s, classes, "consume", f"CID-BENCH-FIRST-{i}", "BenchDrain", "1"))
                firsts[side.name].append(got["firstMs"])
    finally:
        serve_rc = serve.stop()
        broker_rc = cluster.stop()

    figures: list[dict[str, Any]] = []
    notes: list[str] = []
    for name, c in cases.items():
        s, b = c["serve"], c["broker"]
        c["ratio"] = round(s["msgs_per_s"] / b["msgs_per_s"], 3)
        figures.append({"what": f"{name}: real broker", "value": b["msgs_per_s"],
                        "unit": "msgs/s", "ratio": 1.0})
        figures.append({"what": f"{name}: mqtool serve", "value": s["msgs_per_s"],
                        "unit": "msgs/s", "ratio": c["ratio"]})
        notes.append(f"{name}: server CPU per 1,000 messages: serve "
                     f"{s['server_cpu_ms_per_1000']} ms, broker {b['server_cpu_ms_per_1000']} ms; "
                     f"the clients' own {s['clients_cpu_ms_per_1000']} ms (against serve) and "
                     f"{b['clients_cpu_ms_per_1000']} ms (against the broker); each side's "
                     f"rate in its {REPEATS} runs (msgs/s): serve {s['rates']}, broker "
                     f"{b['rates']}")
    first = {side: statistics.median(ms) for side, ms in firsts.items()}
    for side in ("broker", "serve"):
        figures.append({"what": f"consumer start to first message: "
                                f"{'real broker' if side == 'broker' else 'mqtool serve'}",
                        "value": round(first[side]), "unit": "ms",
                        "ratio": round(first[side] / max(1, first["broker"]), 3)})
    notes.append(f"consumer start to first message (ms, median of {FIRST_STARTS} starts, each a "
                 f"new group's client JVM, the sides alternating): serve {firsts['serve']}, "
                 f"broker {firsts['broker']}; target (serve's median at most the broker's) "
                 f"{'met' if first['serve'] <= first['broker'] else 'not met'} in this run")
    notes.append("Java push consumer: its rate counts from the consumer's start, so its first "
                 "rebalance and the first message's wait are inside it")
    notes.append("flushing: the broker runs ASYNC_FLUSH (its commitlog flushed every 500 ms, "
                 "consume queues every 1 s); serve syncs its store's files every 5 s, on a "
                 "thread of its own; both answer a send once the records are in the page cache")
    cpp = cases[f"C++ sync, {PRODUCERS} producers"]
    notes.append(f"anonymous RSS during the C++ case (KiB, first / last / peak): serve "
                 f"{cpp['serve']['rss_kib']['first']} / {cpp['serve']['rss_kib']['last']} / "
                 f"{cpp['serve']['rss_kib']['max']}, broker JVM "
                 f"{cpp['broker']['rss_kib']['first']} / {cpp['broker']['rss_kib']['last']} / "
                 f"{cpp['broker']['rss_kib']['max']} (its heap is capped at "
                 f"{realmq.SERVER_HEAP[-1][4:]})")
    met = [n for n, c in cases.items() if c["ratio"] >= 1.0
           and c["serve"]["server_cpu_ms_per_1000"] <= c["broker"]["server_cpu_ms_per_1000"]]
    notes.append("target: serve at least 1.0x the real broker's rate and at most its server "
                 f"CPU per message in each case; met in this run by: {', '.join(met) or 'none'}")
    write_last_run("broker", meta, {
        "size": size,
        "params": {"perCppProducer": per_cpp, "perJavaThread": per_thread, "drained": drain,
                   "producers": PRODUCERS, "bodyBytes": BODY, "batch": BATCH,
                   "rocketmq": VERSION},
        "baseline": f"the real RocketMQ {VERSION} name server and broker (Maven Central), the "
                    "same clients and messages, the same run",
        "figures": figures,
        "cases": cases,
        "exit": {"serve": serve_rc, "broker": broker_rc},
        "notes": notes,
    })
    print("| case | real broker msgs/s | serve msgs/s | ratio |\n|---|---:|---:|---:|")
    for name, c in cases.items():
        print(f"| {name} | {c['broker']['msgs_per_s']} | {c['serve']['msgs_per_s']} | "
              f"{c['ratio']} |")
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
