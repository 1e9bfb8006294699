"""bench/resend: `dlq resend` throughput through the wire with the journal fsynced, as a ratio
to the same resend into a store, both measured in the same run.

Usage: .venv/bin/python bench/resend/run.py [--messages 3000] [--body 512] [--batch 64]
       [--dir bench/out/resend]

Source: a store whose %DLQ%g holds ``--messages`` records (``--body`` bytes, TAGS, KEYS, user
properties), written by the reference store. Cases, each on fresh targets and journals, timed
around :func:`mqtool.dlq.resend.resend` (records selected before the clock starts):

* ``store target`` (baseline): into a reference store (RefStoreTarget), journal fsynced;
* ``wire, journal fsynced``: into ``mqtool serve`` (its own process) over the remoting client
  (BrokerTarget: SEND_MESSAGE_V2, a batch in flight together), journal fsynced (group commit:
  two fdatasyncs per batch);
* ``wire, no journal``: the same messages through the same client (``send_many`` in batches of
  the same size), no journal: what the journal costs on the wire.

Writes bench/resend/last-run.json (commit, cores, load average, every case and its ratio).
The target: the wire case reaches at least 0.5 of the store-target rate.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mqtool.dlq.journal import ResendJournal
from mqtool.dlq.live import BrokerTarget
from mqtool.dlq.outgoing import build_outgoing
from mqtool.dlq.resend import resend
from mqtool.dlq.selection import DlqSelection, select_dlq
from mqtool.dlq.targets import RefStoreTarget, ResendTarget
from mqtool.refstore.engine import Message, RefStore
from mqtool.remoting.client import LiveClient, Outgoing
from mqtool.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from figures import run_meta, write_last_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GROUP = "g"


def make_source(root: Path, n: int, body: int) -> None:
    shutil.rmtree(root, ignore_errors=True)
    data = b"x" * body
    with RefStore.open(root) as rs:
        rs.create_topic(f"%DLQ%{GROUP}", 1)
        for i in range(n):
            rs.put(Message.create(
                f"%DLQ%{GROUP}", data, tags="T", keys=f"k{i} order-{i % 7}",
                properties={"RETRY_TOPIC": "Orders", "ORIGIN_MESSAGE_ID": f"{i:032X}",
                            "DELAY": "0", "REAL_TOPIC": f"%RETRY%{GROUP}", "REAL_QID": "0",
                            "user": f"u{i}"},
                wait_store_msg_ok=False, queue_id=0))


def serve(store: Path, log: Path) -> tuple[subprocess.Popen[str], str]:
    with open(log, "w", encoding="utf-8") as err:
        p = subprocess.Popen([sys.executable, "-m", "mqtool", "serve", str(store),
                              "--namesrv-port", "0", "--broker-port", "0"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
    line: list[str] = []
    t = threading.Thread(target=lambda: line.append(p.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    t.start()
    t.join(60)
    if not line or "ready" not in line[0]:
        p.kill()
        raise SystemExit(f"mqtool serve did not start: {line} {log.read_text()}")
    words = line[0].split()
    return p, words[words.index("namesrv") + 1]


def timed_resend(records: list[Any], target: ResendTarget, journal: Path, batch: int) -> float:
    jr = ResendJournal.open(journal)
    try:
        t0 = time.perf_counter()
        rep = resend(records, GROUP, target, jr, source="bench", batch=batch)
        secs = time.perf_counter() - t0
    finally:
        jr.close()
        target.close()
    sent = rep.count("sent")
    if sent != len(records) or not rep.ok:
        raise SystemExit(f"resend sent {sent} of {len(records)}: {rep.stopped}")
    return len(records) / secs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=3000)
    ap.add_argument("--body", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--dir", type=Path, default=ROOT / "bench" / "out" / "resend")
    a = ap.parse_args()
    meta = run_meta()
    work = a.dir
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    make_source(work / "source", a.messages, a.body)
    with Store.open(work / "source") as st:
        records = list(select_dlq(st, DlqSelection(GROUP)))

    store_rate = timed_resend(records, RefStoreTarget(work / "target"), work / "j-store.jsonl",
                              a.batch)
    print(f"store target: {store_rate:,.0f} msgs/s", file=sys.stderr)

    proc, ns = serve(work / "served", work / "serve.log")
    try:
        client = LiveClient(ns)
        client.write_queues(f"%RETRY%{GROUP}")  # route cached outside the timing
        wire_rate = timed_resend(records, BrokerTarget(client, GROUP), work / "j-wire.jsonl",
                                 a.batch)
        print(f"wire, journal fsynced: {wire_rate:,.0f} msgs/s", file=sys.stderr)
        outs = [build_outgoing(m, GROUP) for m in records]
        msgs = [Outgoing(o.topic, o.body, o.properties, o.flag, o.sys_flag, o.born_timestamp)
                for o in outs]
        t0 = time.perf_counter()
        for k in range(0, len(msgs), a.batch):
            res = client.send_many(msgs[k:k + a.batch])
            bad = [r for r in res if isinstance(r, Exception)]
            if bad:
                raise SystemExit(f"send failed: {bad[0]}")
        raw_rate = len(msgs) / (time.perf_counter() - t0)
        print(f"wire, no journal: {raw_rate:,.0f} msgs/s", file=sys.stderr)
        client.close()
    finally:
        proc.terminate()
        proc.wait(60)

    doc = {
        "size": "small",
        "params": {"messages": a.messages, "bodyBytes": a.body, "batch": a.batch},
        "baseline": "store target: resend into a reference store, journal fsynced, same "
                    "records, same run",
        "figures": [
            {"what": "store target (journal fsynced)", "value": round(store_rate),
             "unit": "msgs/s", "ratio": 1.0},
            {"what": "wire to mqtool serve (journal fsynced)", "value": round(wire_rate),
             "unit": "msgs/s", "ratio": round(wire_rate / store_rate, 3)},
            {"what": "wire to mqtool serve (no journal: client send_many only)",
             "value": round(raw_rate), "unit": "msgs/s",
             "ratio": round(raw_rate / store_rate, 3)},
        ],
        "journalCostOnWire": round(1 - wire_rate / raw_rate, 3),
        "target": "wire (journal fsynced) >= 0.5 of the store target",
        "targetMet": wire_rate / store_rate >= 0.5,
    }
    ratio = wire_rate / store_rate
    doc["notes"] = [
        f"{a.messages} DLQ records of {a.body} B, batch {a.batch}; mqtool serve in its own "
        "process on the same machine; the store target and the journal fsync (fdatasync)",
        f"the journal costs {doc['journalCostOnWire']:.0%} of the wire rate in this run "
        "(wire with journal vs wire without)",
        "target: the wire resend >= 0.5 of the store-target rate: "
        + (f"met in this run ({ratio:.3g})" if ratio >= 0.5
           else f"NOT met in this run ({ratio:.3g})"),
    ]
    write_last_run("resend", meta, doc)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
