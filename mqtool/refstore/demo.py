"""A realistic demo store: producers, consumers that fail, the schedule service, DLQs.

``mqtool demo`` (:mod:`mqtool.cli.demo`) is its command line.

:func:`build_demo` writes the same store on every run (same records, ids and offsets): its
clock is a manual one, its history ends at :data:`DEMO_END` unless told otherwise, and every
random choice comes from ``seed``:

* ``OrderTopic`` (4 queues, group ``cg_orders``, maxReconsumeTimes 3),
  ``PaymentTopic`` (2 queues, group ``cg_payments``, maxReconsumeTimes 5),
  ``AuditTopic`` (1 queue, group ``cg_audit``, default 16, never fails) and ``NotifyTopic``
  (delayed messages, group ``cg_notify``);
* messages whose consumers succeed, fail once, fail twice, fail until the DLQ, send them
  straight to the DLQ (delay level -1), and delayed messages: delivered ones and ones still
  pending in ``SCHEDULE_TOPIC_XXXX`` (1 h / 2 h levels, and retries that are not due yet);
* named messages to try first: KEYS ``demo-ok-0``, ``demo-retry-once-0``,
  ``demo-retry-twice-0``, ``demo-dlq-0`` (DLQ after 3 retries), ``demo-dlq-direct-0`` (level -1)
  and ``demo-pending-0`` (a 1 h delayed message still in the schedule topic);
* with ``size_bytes``, bulk ``BenchTopic`` traffic (1 KiB bodies) until the commitlog holds that
  many bytes.

The schedule service runs until the traffic ends: what is still pending at the end is due after
it (the retries of the last failures, the 1 h / 2 h notifications); the demo's clock stops
there, so nothing is overdue against the store's own time.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.errors import usage
from mqtool.formats.rules import topic_kind
from mqtool.refstore.engine import ManualClock, Message, RefStore, StoreConfig
from mqtool.refstore.ops import tick_until

DEMO_END = 1795296900000
"""2026-11-21 21:35:00 UTC: where the demo store's history ends by default."""

LAST_PUTS_BEFORE_END = 5_000
"""The last puts (the pending notifications and fresh failures) start this many ms before the
end: a failure's first retry (10 s later) is due after it."""

BEHAVIORS = ("OK", "FAIL_ONCE", "FAIL_TWICE", "FAIL_ALWAYS", "DLQ_DIRECT")
_WEIGHTS = (70, 10, 8, 7, 5)
GROUPS = {
    "OrderTopic": ("cg_orders", 3, 4),
    "PaymentTopic": ("cg_payments", 5, 2),
    "AuditTopic": ("cg_audit", 16, 1),
    "NotifyTopic": ("cg_notify", 16, 2),
}


@dataclass
class DemoSummary:
    """What :func:`build_demo` wrote."""

    root: str
    messages: int = 0
    records: int = 0
    bytes: int = 0
    behaviors: dict[str, int] = field(default_factory=dict)
    topics: dict[str, int] = field(default_factory=dict)
    pending_delayed: dict[int, int] = field(default_factory=dict)
    dlq: dict[str, int] = field(default_factory=dict)
    sample_dlq_uniq_key: str | None = None
    sample_retried_uniq_key: str | None = None
    end_time: int = 0  # epoch ms: where the demo's clock stopped
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root, "messages": self.messages, "records": self.records,
            "bytes": self.bytes, "behaviors": self.behaviors, "topics": self.topics,
            "pendingDelayed": {str(k): v for k, v in self.pending_delayed.items()},
            "dlq": self.dlq, "sampleDlqUniqKey": self.sample_dlq_uniq_key,
            "sampleRetriedUniqKey": self.sample_retried_uniq_key, "endTime": self.end_time,
            "seconds": self.seconds,
        }


def _verdict(m: CommitLogMessage) -> bool | int:
    b = m.properties.get("behavior", "OK")
    rt = m.reconsume_times
    if b == "FAIL_ONCE":
        return rt >= 1
    if b == "FAIL_TWICE":
        return rt >= 2
    if b == "FAIL_ALWAYS":
        return False
    if b == "DLQ_DIRECT":
        return -1 if rt == 0 else True
    return True


def build_demo(
    root: str | Path,
    *,
    messages: int = 3000,
    size_bytes: int | None = None,
    seed: int = 42,
    config: StoreConfig | None = None,
    end_time: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> DemoSummary:
    """Build the demo store at ``root`` (which must not hold a store yet)."""
    t0 = time.perf_counter()
    rootp = Path(root)
    if (rootp / "commitlog").exists():
        from mqtool.refstore.engine import RefStoreError

        raise usage(RefStoreError(f"{rootp} already holds a store; pick an empty directory"))
    rnd = random.Random(seed)
    end = end_time if end_time is not None else DEMO_END
    span = 30 * 60 * 1000  # the traffic happens over the last half hour
    clock = ManualClock(end - span)
    cfg = config or StoreConfig(store_host="192.168.0.10:10911", broker_name="broker-demo")
    summary = DemoSummary(str(rootp), end_time=end)
    behaviors: Counter[str] = Counter()
    with RefStore.open(rootp, cfg, clock=clock, seed=seed) as s:
        for topic, (group, max_times, queues) in GROUPS.items():
            s.create_topic(topic, queues)
            s.create_group(group, retry_max_times=max_times)
        step = max(1, span // max(1, messages)) // 2
        # named messages the README and `make demo` point at (trace --key demo-dlq-0, ...)
        for name, behavior in (
            ("demo-ok-0", "OK"), ("demo-retry-once-0", "FAIL_ONCE"),
            ("demo-retry-twice-0", "FAIL_TWICE"), ("demo-dlq-0", "FAIL_ALWAYS"),
            ("demo-dlq-direct-0", "DLQ_DIRECT"),
        ):
            clock.advance(5)
            behaviors[behavior] += 1
            s.put(Message.create(
                "OrderTopic", f'{{"order":"{name}"}}', tags="created", keys=[name],
                properties={"behavior": behavior, "source": "mqtool-demo"},
                born_host="192.168.0.20:51000",
            ))
        names = ["张三", "Alice", "Bob", "Zoë", "李四"]
        for i in range(messages):
            clock.advance(rnd.randint(1, 2 * step))
            topic = rnd.choices(("OrderTopic", "PaymentTopic", "AuditTopic", "NotifyTopic"),
                                (55, 25, 12, 8))[0]
            behavior = "OK" if topic == "AuditTopic" else rnd.choices(BEHAVIORS, _WEIGHTS)[0]
            delay = 0
            if topic == "NotifyTopic":
                behavior = "OK"
                delay = rnd.choice([2, 3, 5, 9])
            behaviors[behavior] += 1
            order = f"ORD-{100000 + i}"
            s.put(Message.create(
                topic, f'{{"order":"{order}","amount":{rnd.randint(1, 99999) / 100},'
                       f'"customer":"{rnd.choice(names)}"}}',
                tags=rnd.choice(["created", "paid", "shipped"]) if topic != "NotifyTopic"
                else "notify",
                keys=[order, f"cust-{rnd.randint(1, 500)}"],
                properties={"behavior": behavior, "source": "mqtool-demo"},
                delay_level=delay,
                born_host=f"192.168.0.{20 + i % 5}:5{1000 + i % 7}",
            ))
            if i % 25 == 24:
                _consume_all(s)
                tick_until(s, clock.now)
                if progress:
                    progress(i + 1, messages)
        # let the retries run their course (levels 3.. = 10s, 30s, 1m, 2m ...), consuming,
        # until the last puts below, shortly before the end
        last = end - LAST_PUTS_BEFORE_END
        _consume_all(s)
        while (due := s.next_due()) is not None and due <= last:
            clock.set(max(clock.now, due))
            tick_until(s, clock.now)
            _consume_all(s)
        # still pending at the end: 1 h / 2 h delayed notifications and fresh failures (their
        # first retry, delay level 3 = 10 s, is due after the end)
        clock.set(max(clock.now, last))
        for i in range(max(2, messages // 500)):
            clock.advance(100)
            s.put(Message.create(
                "NotifyTopic", f'{{"reminder":{i}}}', tags="notify",
                keys=[f"remind-{i}"] + (["demo-pending-0"] if i == 0 else []),
                delay_level=17 + i % 2, properties={"behavior": "OK", "source": "mqtool-demo"},
            ))
        for i in range(max(2, messages // 500)):
            clock.advance(100)
            r = s.put(Message.create(
                "OrderTopic", f'{{"order":"LATE-{i}"}}', tags="created", keys=f"LATE-{i}",
                properties={"behavior": "FAIL_ONCE", "source": "mqtool-demo"},
            ))
            s.send_back("cg_orders", r.physical_offset)
            behaviors["FAIL_ONCE"] += 1
        summary.messages = 5 + messages + 2 * max(2, messages // 500)
        if size_bytes:
            _fill(s, clock, size_bytes, rnd, progress)
        clock.set(max(clock.now, end))
        tick_until(s, clock.now)  # the clock stops here: nothing due by then is undelivered
        s.flush()
        summary.pending_delayed = s.pending_delayed()
        summary.bytes = s.write_position
        for t in s.queue_topics():
            n = sum(s.max_offset(t, q) for q in s.queue_ids(t))
            summary.topics[t] = n
            summary.records += n
            if topic_kind(t) == "dlq":
                summary.dlq[t] = n
                if summary.sample_dlq_uniq_key is None:
                    for _, m in s.iter_queue(t, 0):
                        summary.sample_dlq_uniq_key = m.uniq_key
                        break
        for t in s.queue_topics():
            if topic_kind(t) == "retry" and summary.sample_retried_uniq_key is None:
                for _, m in s.iter_queue(t, 0):
                    if m.properties.get("behavior") == "FAIL_TWICE":
                        summary.sample_retried_uniq_key = m.uniq_key
                        break
    summary.behaviors = dict(behaviors)
    summary.seconds = round(time.perf_counter() - t0, 3)
    return summary


def _consume_all(s: RefStore) -> None:
    for topic, (group, _, _) in GROUPS.items():
        s.consume(group, topic, _verdict)


def _fill(
    s: RefStore, clock: ManualClock, size_bytes: int, rnd: random.Random,
    progress: Callable[[int, int], None] | None,
) -> None:
    s.create_topic("BenchTopic", 8)
    body = bytes(rnd.getrandbits(8) for _ in range(1024))
    base = [Message.create("BenchTopic", body, tags=f"tag{i % 4}", keys=f"bench-{i}")
            for i in range(64)]
    i = 0
    start = s.write_position
    while s.write_position < size_bytes:
        if i % 64 == 0:
            clock.advance(1)
        s.put(base[i % 64])
        i += 1
        if progress and i % 100_000 == 0:
            progress(s.write_position - start, size_bytes - start)
