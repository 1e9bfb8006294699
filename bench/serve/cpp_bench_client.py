"""Timed load from the real C++-core client (PyPI rocketmq 0.4.4), run in build/peers/cpp.

  cpp_bench_client.py sync NS TOPIC N BODY_BYTES
  cpp_bench_client.py batch NS TOPIC N BODY_BYTES BATCH
  cpp_bench_client.py consume NS GROUP TOPIC N

Prints one JSON line: {"mode", "messages", "seconds", "failed", "start", "end", "cpu"}
(seconds from the first send or the consumer start to the last acknowledged send or the N-th
message received; start/end as epoch seconds, so that concurrent clients' send windows can be
combined; cpu = this process's CPU seconds, all threads, user + system, in that window).
"""

import json
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer


def _msg(topic, i, body):
    m = Message(topic)
    m.set_keys(f"bench-{i}")
    m.set_tags("TagA")
    m.set_body(body)
    return m


def produce(ns, topic, n, size, batch):
    p = Producer(f"PID-BENCH-{topic}")
    p.set_namesrv_addr(ns)
    p.start()
    body = b"x" * size
    # route lookup and connection outside the timing; a lookup that finds no route yet (a
    # topic the real broker registers with its name server in the background, or a slow
    # first answer) is tried again, as an application would
    for waited in range(20):
        try:
            p.send_sync(_msg(topic, -1, body))
            break
        except Exception as e:  # the client's own exception types
            if "No route info" not in str(e) or waited == 19:
                raise
            time.sleep(0.5)
    failed = 0
    start, c0 = time.time(), time.process_time()
    t0 = time.perf_counter()
    if batch:
        for start in range(0, n, batch):
            r = p.send_batch([_msg(topic, i, body) for i in range(start, min(n, start + batch))])
            failed += int(r.status) != 0
    else:
        for i in range(n):
            failed += int(p.send_sync(_msg(topic, i, body)).status) != 0
    secs = time.perf_counter() - t0
    end, cpu = time.time(), time.process_time() - c0
    p.shutdown()
    return {"mode": "batch" if batch else "sync", "messages": n, "seconds": secs, "failed": failed,
            "start": start, "end": end, "cpu": cpu}


def consume(ns, group, topic, n):
    count = [0]
    done = threading.Event()
    lock = threading.Lock()

    def cb(m):
        with lock:
            count[0] += 1
            if count[0] >= n:
                done.set()

    c = PushConsumer(group)
    c.set_namesrv_addr(ns)
    c.subscribe(topic, cb, "*")
    t0 = time.perf_counter()
    c.start()
    ok = done.wait(600)
    secs = time.perf_counter() - t0
    c.shutdown()
    return {"mode": "consume", "messages": count[0], "seconds": secs, "failed": 0 if ok else 1}


def main(a):
    if a[0] == "consume":
        res = consume(a[1], a[2], a[3], int(a[4]))
    else:
        res = produce(a[1], a[2], int(a[3]), int(a[4]), int(a[5]) if a[0] == "batch" else 0)
    print(json.dumps(res), flush=True)
    return 0 if res["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
