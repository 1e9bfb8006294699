"""A real RocketMQ consumer (PyPI rocketmq 0.4.4, C++ core librocketmq 1.0.1) for the live DLQ
tests. Runs in the peer venv (build/peers/cpp); prints {"started": true} once started, then one
JSON line per message (topic, tags, keys, body, msg id, reconsume count and the properties the
tests look at), then {"done": ...}.

  cpp_consume.py NS GROUP TOPIC EXPECT TIMEOUT_S

Exits 0 once EXPECT distinct MQTOOL_RESEND_ID values were received, 1 on timeout.
"""

import json
import sys
import threading
import time

from rocketmq.client import PushConsumer

_OUT = threading.Lock()
PROPS = ("MQTOOL_RESEND_ID", "MQTOOL_DLQ_TOPIC", "MQTOOL_DLQ_MSG_ID", "UNIQ_KEY", "user",
         "RETRY_TOPIC", "ORIGIN_MESSAGE_ID")


def out(**kw):
    with _OUT:
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()


def text(v):
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def main(ns, group, topic, expect, timeout):
    seen = set()

    def cb(m):
        props = {p: text(m.get_property(p)) for p in PROPS}
        out(topic=m.topic, tags=text(m.tags), keys=text(m.keys), body=text(m.body), id=m.id,
            reconsume=m.reconsume_times, props=props)
        if props["MQTOOL_RESEND_ID"]:
            seen.add(props["MQTOOL_RESEND_ID"])

    c = PushConsumer(group)
    c.set_namesrv_addr(ns)
    c.subscribe(topic, cb, "*")
    c.start()
    out(started=True)
    t0 = time.time()
    while time.time() - t0 < timeout and len(seen) < expect:
        time.sleep(0.1)
    time.sleep(1)  # duplicates, if any, would arrive now
    c.shutdown()
    out(done=len(seen) >= expect, distinct=len(seen))
    return 0 if len(seen) >= expect else 1


if __name__ == "__main__":
    a = sys.argv[1:]
    sys.exit(main(a[0], a[1], a[2], int(a[3]), float(a[4])))
