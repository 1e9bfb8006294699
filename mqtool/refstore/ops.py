"""Operator-level actions on a reference store (what ``mqtool store ...`` calls).

Each function takes an open :class:`~mqtool.refstore.engine.RefStore` and returns plain data.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.errors import usage
from mqtool.refstore.engine import (
    ManualClock,
    Message,
    PutResult,
    RefStore,
    RefStoreError,
    StoreConfig,
    system_clock,
)

_DURATION = re.compile(r"^\s*(-?\d+)\s*(ms|s|m|h|d)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1}


def new_store_config(root: Path, geometry: Mapping[str, Any]) -> StoreConfig | None:
    """The settings of a store about to be created: RocketMQ's defaults with ``geometry``
    (:class:`StoreConfig` fields; None values ignored) over them; None when nothing is given.
    A usage error when the store already has commitlog files (its geometry is fixed)."""
    given = {k: v for k, v in geometry.items() if v is not None}
    if not given:
        return None
    if (root / "commitlog").is_dir() and any((root / "commitlog").iterdir()):
        raise usage(RefStoreError("geometry options only apply to a new store"))
    return replace(StoreConfig(), **given)


@contextmanager
def opened(root: Path, config: StoreConfig | None = None,
           now: int | None = None) -> Iterator[RefStore]:
    """The store at ``root`` open for one command, closed after it. Its clock is ``now``
    (epoch ms) when given, else the wall clock, or just after the store's last record when
    that is later than the wall clock (a store written with a clock ahead of this machine)."""
    clock = ManualClock(now) if now is not None else None
    s = RefStore.open(root, config, clock=clock or system_clock)
    try:
        if clock is None and s.last_store_timestamp > system_clock():
            s.clock = ManualClock(s.last_store_timestamp + 1)
        yield s
    finally:
        s.close()


def parse_duration(text: str) -> int:
    """``"10s"``, ``"2m"``, ``"1h"``, ``"500ms"`` or plain ms to milliseconds."""
    m = _DURATION.match(text)
    if not m:
        raise RefStoreError(f"bad duration {text!r} (e.g. 500ms, 10s, 2m, 1h)")
    return int(m.group(1)) * _UNIT_MS[m.group(2)]


def message_from_json(obj: Mapping[str, Any], default_topic: str | None = None) -> Message:
    """One JSONL line of ``mqtool store produce`` to a :class:`Message`.

    Keys: ``topic``, ``body`` (text) or ``bodyBase64``, ``tags``, ``keys`` (string or list),
    ``properties`` (object, insertion order kept), ``delayLevel``, ``queueId``, ``flag``,
    ``bornHost``, ``bornTimestamp``, ``uniqKey``.
    """
    topic = obj.get("topic") or default_topic
    if not isinstance(topic, str) or not topic:
        raise RefStoreError(f"message without a topic: {json.dumps(obj)[:200]}")
    if "bodyBase64" in obj:
        body = base64.b64decode(str(obj["bodyBase64"]))
    else:
        raw = obj.get("body", "")
        body = raw.encode("utf-8") if isinstance(raw, str) else json.dumps(raw).encode("utf-8")
    props = obj.get("properties") or {}
    if not isinstance(props, Mapping):
        raise RefStoreError("properties must be an object")
    keys = obj.get("keys")
    try:
        return Message.create(
            topic, body, tags=obj.get("tags"), keys=keys,
            properties={str(k): str(v) for k, v in props.items()},
            delay_level=int(obj.get("delayLevel", 0)),
            queue_id=None if obj.get("queueId") is None else int(obj["queueId"]),
            flag=int(obj.get("flag", 0)), born_host=obj.get("bornHost"),
            born_timestamp=obj.get("bornTimestamp"), uniq_key=obj.get("uniqKey"),
        )
    except (TypeError, ValueError) as e:
        raise RefStoreError(f"bad message {json.dumps(obj)[:200]}: {e}") from e


def produce_lines(
    store: RefStore, lines: Iterable[str], default_topic: str | None = None
) -> list[PutResult]:
    """Put one message per non-empty JSONL line."""
    out: list[PutResult] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise RefStoreError(f"line {n}: not JSON: {e}") from e
        if not isinstance(obj, dict):
            raise RefStoreError(f"line {n}: expected a JSON object")
        out.append(store.put(message_from_json(obj, default_topic)))
    return out


def produce(
    store: RefStore,
    lines: Iterable[str] | None,
    topic: str | None,
    *,
    body: str = "hello",
    count: int = 1,
    tags: str | None = None,
    keys: str | None = None,
    delay_level: int = 0,
) -> list[PutResult]:
    """``mqtool store produce``: the JSON lines of ``lines`` (``topic`` for a line without
    one), or ``count`` copies of ``body`` to ``topic`` when ``lines`` is None."""
    if lines is not None:
        return produce_lines(store, lines, topic)
    if topic is None:
        raise usage(RefStoreError("give --file or --topic"))
    msg = Message.create(topic, body, tags=tags, keys=keys, delay_level=delay_level)
    return [store.put(msg) for _ in range(count)]


def put_result_dict(r: PutResult) -> dict[str, Any]:
    """A PutResult as the CLI's JSON (camelCase, like RocketMQ's SendResult)."""
    d = r._asdict()
    return {
        "msgId": d["msg_id"], "uniqKey": d["uniq_key"], "topic": d["topic"],
        "queueId": d["queue_id"], "queueOffset": d["queue_offset"],
        "physicalOffset": d["physical_offset"], "size": d["size"],
        "storeTimestamp": d["store_timestamp"],
    }


@dataclass(frozen=True, slots=True)
class FailurePolicy:
    """Which messages a simulated consumer fails (``mqtool store consume``).

    A message fails when one of its KEYS is in ``fail_keys`` or its tag is in ``fail_tags`` (or
    ``fail_all``) while its reconsume times are below ``fail_times`` (None: always);
    ``dlq_keys`` are sent back with delay level -1 (straight to the DLQ). A ``behavior``
    property (``OK``, ``FAIL_ONCE``, ``FAIL_TWICE``, ``FAIL_ALWAYS``, ``DLQ_DIRECT``) is honoured
    when ``honour_behavior``.
    """

    fail_keys: frozenset[str] = frozenset()
    fail_tags: frozenset[str] = frozenset()
    dlq_keys: frozenset[str] = frozenset()
    fail_all: bool = False
    fail_times: int | None = None
    honour_behavior: bool = True

    def verdict(self, m: CommitLogMessage) -> bool | int:
        """True (consumed), False (retry later) or -1 (to the DLQ)."""
        keys = set(m.key_list)
        if keys & self.dlq_keys:
            return -1
        behavior = m.properties.get("behavior") if self.honour_behavior else None
        rt = m.reconsume_times
        if behavior == "OK":
            return True
        if behavior == "FAIL_ONCE":
            return rt >= 1
        if behavior == "FAIL_TWICE":
            return rt >= 2
        if behavior == "FAIL_ALWAYS":
            return False
        if behavior == "DLQ_DIRECT":
            return -1 if rt == 0 else True
        hit = self.fail_all or bool(keys & self.fail_keys) or (m.tags in self.fail_tags)
        if hit and (self.fail_times is None or m.reconsume_times < self.fail_times):
            return False
        return True


def consume(
    store: RefStore, group: str, topic: str, policy: FailurePolicy, *, max_messages: int | None,
    retry_max_times: int | None = None,
) -> dict[str, int]:
    """One pass of a push consumer over ``topic`` and ``%RETRY%<group>`` with ``policy``; the
    group's ``retryMaxTimes`` is set first when ``retry_max_times`` is given."""
    if retry_max_times is not None:
        store.create_group(group, retry_max_times=retry_max_times)
    return store.consume(group, topic, policy.verdict, max_nums=max_messages)


def status(store: RefStore) -> dict[str, Any]:
    """Queues, pending delayed messages, consumer offsets and groups of a store."""
    queues = []
    for topic in store.queue_topics():
        for qid in store.queue_ids(topic):
            queues.append(
                {"topic": topic, "queueId": qid, "maxOffset": store.max_offset(topic, qid)}
            )
    return {
        "root": str(store.root),
        "writePosition": store.write_position,
        "lastStoreTimestamp": store.last_store_timestamp,
        "delayLevels": store.config.message_delay_level,
        "pendingDelayed": {str(k): v for k, v in store.pending_delayed().items()},
        "nextDue": store.next_due(),
        "delayOffsets": {str(k): v for k, v in sorted(store.delay_offsets.items())},
        "queues": queues,
        "groups": {
            g: {"retryMaxTimes": c.retry_max_times, "retryQueueNums": c.retry_queue_nums}
            for g, c in sorted(store.groups.items())
        },
        "consumerOffsets": {
            k: {str(q): o for q, o in sorted(v.items())}
            for k, v in sorted(store.consumer_offsets.items())
        },
    }


def tick_until(store: RefStore, until: int, *, step_ms: int = 100) -> list[PutResult]:
    """Advance schedule time to ``until`` as the broker's timer tasks would (due messages are
    delivered in deliver-time order, each at its own due time)."""
    out: list[PutResult] = []
    while True:
        due = store.next_due()
        if due is None or due > until:
            break
        out.extend(store.tick(max(due, store.last_store_timestamp)))
    out.extend(store.tick(until))
    return out


__all__ = [
    "FailurePolicy",
    "consume",
    "message_from_json",
    "parse_duration",
    "produce_lines",
    "put_result_dict",
    "status",
    "tick_until",
]


def tick(store: RefStore, advance: str | None = None) -> dict[str, Any]:
    """``mqtool store tick``: deliver what is due by the store's clock, or by ``advance`` (a
    duration) past the store's last record when that is later; what was delivered, what is
    still pending per delay level, and when the next one is due."""
    until = store.clock()
    if advance is not None:
        until = max(until, store.last_store_timestamp) + parse_duration(advance)
        store.clock = ManualClock(until)
    rows = [put_result_dict(r) for r in tick_until(store, until)]
    return {"delivered": rows,
            "pending": {str(k): v for k, v in store.pending_delayed().items()},
            "nextDue": store.next_due()}
