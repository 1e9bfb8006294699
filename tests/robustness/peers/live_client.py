"""A real RocketMQ client (PyPI rocketmq 0.4.4, C++ core) that keeps a broker writing while the
live-store tests read its store. Runs in the peer venv (build/peers/cpp), never in mqtool's;
prints one JSON line when it ends.

  live_client.py produce NS TOPIC PREFIX SECONDS STOP_FILE RATE
  live_client.py consume NS GROUP TOPIC SECONDS STOP_FILE FAIL_EVERY

produce: synchronous sends, at most RATE a second, until SECONDS seconds passed or STOP_FILE
exists; keys PREFIX-<n>, tags TagA..TagC, bodies of 100-2,000 bytes; prints how many were
SEND_OK.
consume: a push consumer, as long; every FAIL_EVERY-th distinct key fails once
(RECONSUME_LATER: the broker's send-back writes the schedule and retry topics).
"""

import json
import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer


def produce(ns, topic, prefix, seconds, stop_file, rate):
    p = Producer("PID-" + prefix)
    p.set_namesrv_addr(ns)
    p.start()
    sent = failed = 0
    t0 = time.time()
    t_end = t0 + seconds
    while time.time() < t_end and not os.path.exists(stop_file):
        ahead = (sent + failed) / rate - (time.time() - t0)
        if ahead > 0:
            time.sleep(ahead)
        k = f"{prefix}-{sent + failed}"
        m = Message(topic)
        m.set_keys(k)
        m.set_tags("Tag" + "ABC"[(sent + failed) % 3])
        m.set_body(("body of " + k).ljust(100 + ((sent + failed) * 37) % 1900, "."))
        try:
            r = p.send_sync(m)
            if int(r.status) == 0:
                sent += 1
            else:
                failed += 1
        except Exception:  # noqa: BLE001 - counted: a send the broker did not take
            failed += 1
    p.shutdown()
    print(json.dumps({"sent": sent, "failed": failed}), flush=True)
    return 0 if failed == 0 else 1


def consume(ns, group, topic, seconds, stop_file, fail_every):
    seen = set()
    lock = threading.Lock()
    counts = {"ok": 0, "failed": 0}

    def cb(m):
        key = m.keys.decode() if isinstance(m.keys, bytes) else m.keys
        with lock:
            first = key not in seen
            seen.add(key)
            fail = first and fail_every > 0 and len(seen) % fail_every == 0
            counts["failed" if fail else "ok"] += 1
        if fail:
            raise RuntimeError("chosen to fail once: " + key)

    c = PushConsumer(group)
    c.set_namesrv_addr(ns)
    c.subscribe(topic, cb, "*")
    c.start()
    t_end = time.time() + seconds
    while time.time() < t_end and not os.path.exists(stop_file):
        time.sleep(0.2)
    c.shutdown()
    print(json.dumps(counts), flush=True)
    return 0


def main(argv):
    if argv[0] == "produce":
        return produce(argv[1], argv[2], argv[3], float(argv[4]), argv[5], float(argv[6]))
    if argv[0] == "consume":
        return consume(argv[1], argv[2], argv[3], float(argv[4]), argv[5], int(argv[6]))
    raise SystemExit("usage: see the module docstring")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
