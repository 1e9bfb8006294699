"""A real RocketMQ client (PyPI rocketmq 0.4.4, C++ core librocketmq 1.0.1) driven by the serve
tests. Runs in the peer venv (build/peers/cpp), never in mqtool's; prints one JSON line per event.

  cpp_client.py produce NS TOPIC PREFIX SYNC ONEWAY ORDERLY ORDER_QUEUE BATCH
  cpp_client.py consume NS GROUP TOPIC EXPECT_OK TIMEOUT_S [FAIL_PREFIX FAIL_DELIVERIES]

produce: SYNC send_sync, ONEWAY send_oneway, ORDERLY send_orderly to queue ORDER_QUEUE, one
send_batch of BATCH; keys PREFIX-<mode>-<n>. Exit 0 when every synchronous send is OK.
consume: a push consumer; messages whose key starts with FAIL_PREFIX raise (RECONSUME_LATER);
exits 0 once EXPECT_OK distinct keys were consumed and every failing key was delivered
FAIL_DELIVERIES times, then waits 3 s for the last send-backs; exit 1 on timeout.
"""

import json
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer

_OUT = threading.Lock()


def out(**kw):
    line = json.dumps(kw) + "\n"
    with _OUT:  # consumer callbacks run on several threads
        sys.stdout.write(line)
        sys.stdout.flush()


def msg(topic, key, body):
    m = Message(topic)
    m.set_keys(key)
    m.set_tags("TagA")
    m.set_body(body)
    return m


def produce(ns, topic, prefix, n_sync, n_oneway, n_orderly, order_queue, n_batch):
    p = Producer("PID-" + prefix)
    p.set_namesrv_addr(ns)
    p.start()
    ok = True
    for i in range(n_sync):
        k = f"{prefix}-sync-{i}"
        r = p.send_sync(msg(topic, k, "body of " + k))
        out(mode="sync", key=k, status=int(r.status), msg_id=r.msg_id, offset=r.offset)
        ok &= int(r.status) == 0
    for i in range(n_oneway):
        k = f"{prefix}-oneway-{i}"
        p.send_oneway(msg(topic, k, "body of " + k))
        out(mode="oneway", key=k)
    for i in range(n_orderly):
        k = f"{prefix}-orderly-{i}"
        r = p.send_orderly(msg(topic, k, "body of " + k), order_queue)
        out(mode="orderly", key=k, status=int(r.status), msg_id=r.msg_id, offset=r.offset)
        ok &= int(r.status) == 0
    if n_batch:
        keys = [f"{prefix}-batch-{i}" for i in range(n_batch)]
        # 2 KiB bodies: a batch over 4 KiB goes out zlib-compressed (sysFlag bit 0)
        batch = [msg(topic, k, ("body of " + k).ljust(2048, ".")) for k in keys]
        # A topic the sync sends created on the real broker reaches its name server a moment
        # later (the broker registers it in the background): until then the client finds "No
        # route info" for it and sends nothing; look again, as an application would.
        for waited in range(10):
            try:
                r = p.send_batch(batch)
                break
            except Exception as e:  # the client's own exception types
                if "No route info" not in str(e) or waited == 9:
                    raise
                time.sleep(0.5)
        out(mode="batch", keys=keys, status=int(r.status), msg_id=r.msg_id, offset=r.offset,
            route_waits=waited)
        ok &= int(r.status) == 0
    time.sleep(0.5)  # let the oneway frames leave before shutdown
    p.shutdown()
    return 0 if ok else 1


def consume(ns, group, topic, expect_ok, timeout, fail_prefix=None, fail_deliveries=0):
    ok_keys = set()
    fails = {}

    def cb(m):
        key = m.keys.decode() if isinstance(m.keys, bytes) else m.keys
        failing = bool(fail_prefix) and key.startswith(fail_prefix)
        out(
            key=key,
            topic=m.topic,
            reconsume=m.reconsume_times,
            queue=m.queue_id,
            body=m.body.decode("utf-8", "replace"),
            fail=failing,
        )
        if failing:
            fails[key] = fails.get(key, 0) + 1
            raise RuntimeError("chosen to fail: " + key)
        ok_keys.add(key)

    c = PushConsumer(group)
    c.set_namesrv_addr(ns)
    c.subscribe(topic, cb, "*")
    c.start()
    t0 = time.time()
    done = False
    while time.time() - t0 < timeout:
        n_fail_keys = len([k for k, n in fails.items() if n >= fail_deliveries])
        if len(ok_keys) >= expect_ok and (
            not fail_prefix or (fails and n_fail_keys == len(fails) and n_fail_keys > 0)
        ):
            done = True
            break
        time.sleep(0.1)
    if done and fail_prefix:
        time.sleep(3)
    c.shutdown()
    out(done=done, ok=len(ok_keys), fails=fails)
    return 0 if done else 1


def main(argv):
    if argv[0] == "produce":
        ns, topic, prefix = argv[1:4]
        return produce(ns, topic, prefix, *map(int, argv[4:9]))
    if argv[0] == "consume":
        ns, group, topic = argv[1:4]
        expect_ok, timeout = int(argv[4]), float(argv[5])
        if len(argv) > 6:
            return consume(ns, group, topic, expect_ok, timeout, argv[6], int(argv[7]))
        return consume(ns, group, topic, expect_ok, timeout)
    raise SystemExit("usage: see the module docstring")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
