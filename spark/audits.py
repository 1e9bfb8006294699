"""The audits of ``mqtool scan``: DataFrame -> DataFrame functions (imports pyspark).

Inputs are the tables of :mod:`mqtool.spark.source` (``records``, ``consumequeue``,
``index``) and small DataFrames made from the store's config JSONs
(:func:`delay_offsets_df`, :func:`consumer_offsets_df`). Every function is pure: it takes
DataFrames and returns one, so each can be tested on its own and composed freely.

Integrity findings are rows of the one :class:`mqtool.formats.errors.Finding` type
(:data:`~mqtool.spark.schema.FINDING_SCHEMA`, converted back with
:func:`~mqtool.spark.schema.finding_of`): ``file`` relative to the store root, ``offset`` the
byte offset inside that file, ``phy`` the commitlog position concerned.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from mqtool.formats.pop import dead_letter_original_topic
from mqtool.formats.rules import DLQ_GROUP_TOPIC_PREFIX as DLQ_PREFIX
from mqtool.formats.rules import RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX
from mqtool.formats.rules import SCHEDULE_TOPIC
from mqtool.spark.schema import RECORD_KIND_MESSAGE


# --- messages -------------------------------------------------------------------------------
def messages(records: DataFrame) -> DataFrame:
    """The message rows of a ``records`` table (or of a projection of it).

    On the full ``records`` table the result has exactly the messages-table columns
    (:data:`~mqtool.spark.schema.MESSAGE_SCHEMA`).
    """
    return records.filter(F.col("recordType") == RECORD_KIND_MESSAGE).drop("recordType", "detail")


# --- one aggregation for every per-message audit --------------------------------------------
RARE_COLUMNS = ("file", "fileOffset", "commitLogOffset", "storeSize", "detail", "topic",
                "queueId", "queueOffset", "bodyCRC", "bodyLength")
"""The ``records`` columns a rare row of :func:`message_facts` keeps (as ``x<Column>``)."""
ORIGINAL_TOPIC_PROPERTIES = ("RETRY_TOPIC", "REAL_TOPIC")
"""Where a dead letter's original topic is, the first present wins: CONSUMER_SEND_MSG_BACK
sets RETRY_TOPIC to the original topic before routing to the DLQ (a POP consumer's: its POP
retry topic, folded to the original on the driver by
:func:`mqtool.formats.pop.dead_letter_original_topic`)."""


def _x(column: str) -> str:
    return f"x{column[0].upper()}{column[1:]}"


# The grouping sets of :func:`message_facts`: name -> the grouping columns besides ``store``.
FACT_SETS: dict[str, tuple[str, ...]] = {
    "totals": ("kind",),
    "queues": ("qTopic", "qQueueId"),
    "rate": ("rTopic", "bucketStart"),
    "dlq": ("dlqGroup", "originalTopic"),
    "retry": ("retryGroup", "reconsumeTimes"),
    # rows the integrity audit reports one by one (unreadable regions, BODYCRC failures) and
    # the byte ranges the Java reader handed over ("deferred"): rare, each its own group
    "rows": ("xKind", *map(_x, RARE_COLUMNS)),
}
_FACT_KEYS = [c for cols in FACT_SETS.values() for c in cols]
CRC_ROW = "crc"
"""``recordType`` of a BODYCRC failure among :func:`fact_rows`."""
TALLY_SUM, TALLY_XOR = "sum_", "xor_"
"""How a tally column (``tallies`` of :func:`message_facts` and :func:`queue_facts`) is
aggregated, by its name's prefix: summed or XORed (its rows folded per store by
:func:`fold_tallies`)."""


def _tally_aggs(names: Iterable[str]) -> list[Column]:
    return [(F.sum if n.startswith(TALLY_SUM) else F.bit_xor)(n).alias(n) for n in names]


def fold_tallies(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """store -> every tally column of ``rows`` folded (summed or XORed by its prefix; nulls
    left out): the rows of one grouping of the store's records or units, e.g. per queue."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        got = out.setdefault(r["store"], {})
        for name, value in r.items():
            if value is None or not name.startswith((TALLY_SUM, TALLY_XOR)):
                continue
            if name not in got:
                got[name] = value
            elif name.startswith(TALLY_SUM):
                got[name] += value
            else:
                got[name] ^= value
    return out


def fact_gid(name: str) -> int:
    """The ``gid`` (grouping id) of the rows of :func:`message_facts` that belong to grouping
    set ``name``."""
    return sum(1 << (len(_FACT_KEYS) - 1 - i) for i, c in enumerate(_FACT_KEYS)
               if c not in FACT_SETS[name])


def _original_topic() -> Column:
    return F.coalesce(*[F.col("properties")[p] for p in ORIGINAL_TOPIC_PROPERTIES])


def message_facts(records: DataFrame, bucket_ms: int = 60_000,
                  tallies: Mapping[str, Column] | None = None) -> DataFrame:
    """Every per-message audit of a ``records`` projection in **one** aggregation (grouping
    sets, :data:`FACT_SETS`): counts, bytes, store-time and queue-offset ranges per queue, per
    topic and time bucket of ``bucket_ms``, per dead-letter group and original topic, per retry
    group and reconsumeTimes, per record kind; and the rows that are findings (unreadable
    regions, BODYCRC failures) or hand-overs (``deferred``) as groups of their own.

    The result is small (queues x buckets, plus the rare rows): it is collected once and
    :func:`fact_tables` folds every table from it on the driver, re-aggregating (so facts of
    several passes may be combined). Nothing per message is kept.

    ``tallies``: name -> a column over ``records``, aggregated as its name says
    (:data:`TALLY_SUM`, :data:`TALLY_XOR`; :func:`mqtool.spark.integrity.message_tallies`).
    """
    tallies = tallies or {}
    from mqtool.spark.schema import RECORD_KIND_DEFERRED, RECORD_KIND_UNREADABLE

    kind = F.col("recordType")
    is_msg = kind == RECORD_KIND_MESSAGE
    topic = F.col("topic")
    dlq = is_msg & topic.startswith(DLQ_PREFIX)
    retry = is_msg & topic.startswith(RETRY_PREFIX)
    crc_bad = is_msg & (F.col("crcOk") == F.lit(False))
    x_kind = (F.when(kind.isin(RECORD_KIND_UNREADABLE, RECORD_KIND_DEFERRED), kind)
              .when(crc_bad, F.lit(CRC_ROW)))
    rare = x_kind.isNotNull()
    bucket = (F.floor(F.col("storeTimestamp") / F.lit(bucket_ms)) * F.lit(bucket_ms)).cast("long")

    def when_rare(c: str) -> Column:
        return F.when(rare, F.col(c))

    keyed = records.select(
        "store", kind.alias("kind"),
        F.when(is_msg, topic).alias("qTopic"), F.when(is_msg, F.col("queueId")).alias("qQueueId"),
        F.when(is_msg, topic).alias("rTopic"), F.when(is_msg, bucket).alias("bucketStart"),
        F.when(dlq, F.expr(f"substring(topic, {len(DLQ_PREFIX) + 1})")).alias("dlqGroup"),
        F.when(dlq, F.coalesce(_original_topic(), F.lit(""))).alias("originalTopic"),
        F.when(retry, F.expr(f"substring(topic, {len(RETRY_PREFIX) + 1})")).alias("retryGroup"),
        F.when(retry, F.col("reconsumeTimes")).alias("reconsumeTimes"),
        x_kind.alias("xKind"), *[when_rare(c).alias(_x(c)) for c in RARE_COLUMNS],
        F.when(is_msg, F.col("storeSize")).alias("size"), "storeTimestamp", "queueOffset",
        *[c.alias(n) for n, c in tallies.items()],
    )
    # first every key at once (a plain hash aggregation, partial on each task: a split's
    # messages fall into a few queues x minutes), then the grouping sets over those few rows:
    # the sets' expansion (a row per set) is paid per group, not per message
    fine = keyed.groupBy("store", *_FACT_KEYS).agg(
        F.count(F.lit(1)).alias("count"),
        F.sum("size").alias("bytes"),
        F.min("storeTimestamp").alias("minStoreTimestamp"),
        F.max("storeTimestamp").alias("maxStoreTimestamp"),
        F.min("queueOffset").alias("minQueueOffset"),
        F.max("queueOffset").alias("maxQueueOffset"),
        *_tally_aggs(tallies),
    )
    sets = [[F.col("store"), *map(F.col, cols)] for cols in FACT_SETS.values()]
    return fine.groupingSets(sets, "store", *_FACT_KEYS).agg(
        F.grouping_id().alias("gid"),  # store (in every set) is its highest bit: 0
        F.sum("count").alias("count"),
        F.sum("bytes").alias("bytes"),
        F.min("minStoreTimestamp").alias("minStoreTimestamp"),
        F.max("maxStoreTimestamp").alias("maxStoreTimestamp"),
        F.min("minQueueOffset").alias("minQueueOffset"),
        F.max("maxQueueOffset").alias("maxQueueOffset"),
        *_tally_aggs(tallies),
    )


def fact_rules(bucket_ms: int = 60_000,
               tallies: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What ``FactsJob.java`` (:func:`mqtool.spark.source.java_facts`) computes
    :func:`message_facts`' rows by: this module's constants, and for the integrity audit's
    tallies :func:`mqtool.spark.integrity.message_tally_rules` (None: no tallies)."""
    from mqtool.spark.schema import RECORD_KIND_DEFERRED, RECORD_KIND_UNREADABLE

    return {
        "kindMessage": RECORD_KIND_MESSAGE, "kindUnreadable": RECORD_KIND_UNREADABLE,
        "kindDeferred": RECORD_KIND_DEFERRED, "crcRow": CRC_ROW, "dlqPrefix": DLQ_PREFIX,
        "retryPrefix": RETRY_PREFIX, "originalTopicFrom": list(ORIGINAL_TOPIC_PROPERTIES),
        "rareColumns": list(RARE_COLUMNS), "bucketMs": bucket_ms, **(tallies or {}),
    }


def java_fact_rows(answer: str | list[Any]) -> list[dict[str, Any]]:
    """``FactsJob.java``'s answer (``[[set name, [store, *keys], {aggregates}], ...]``, as JSON
    text or parsed) as the rows :func:`message_facts` collects: every key column (None outside
    the row's set) and ``gid``."""
    rows = []
    for name, keys, aggregates in json.loads(answer) if isinstance(answer, str) else answer:
        row: dict[str, Any] = {"store": keys[0], **dict.fromkeys(_FACT_KEYS),
                               "gid": fact_gid(name)}
        row.update(zip(FACT_SETS[name], keys[1:], strict=True))
        row.update(aggregates)
        rows.append(row)
    return rows


# --- the small tables, folded on the driver from the collected facts --------------------------
# :func:`message_facts` is collected once (it is small); every table below is folded from those
# rows in plain Python: no Spark query, job or sort per table. Rows are dicts in column order;
# sorting puts None first, as Spark's ascending orderBy does.
Row = dict[str, Any]

TABLE_SCHEMAS: dict[str, str] = {
    "queues": "store string, topic string, queueId int, count long, bytes long, "
              "firstStoreTimestamp long, lastStoreTimestamp long, minQueueOffset long, "
              "maxQueueOffset long",
    "rate": "store string, topic string, bucketStart long, count long, bytes long, "
            "perSecond double",
    "dlqByTopic": "store string, group string, originalTopic string, count long, "
                  "firstStoreTimestamp long, lastStoreTimestamp long",
    "dlq": "store string, group string, count long, originalTopics array<string>",
    "retry": "store string, group string, reconsumeTimes int, count long",
    "schedule": "store string, delayLevel int, queueId int, pending long, overdue long, "
                "delayOffset long, minOffset long, maxOffset long, nextDeliverTimestamp long, "
                "beyondMax boolean",
    "lag": "store string, group string, topic string, queueId int, consumerOffset long, "
           "maxOffset long, lag long",
    "pop": "store string, group string, topic string, queueId int, popped long, acked long, "
           "invisibleChanged long, inFlight long, reviveDue long, revived long, "
           "invisibleUntil long",
    "timer": "store string, waiting long, byTopic map<string,long>, nextDue long, "
             "overdue long, neverDelivered long, "
             "byDueMinute array<struct<dueStart:long,count:long>>, lastReadTimeMs long",
}
"""The Spark schema (DDL) of each audit table, for ``--out`` and ``--sql``
(:func:`table_df`)."""


def table_df(spark: SparkSession, name: str, rows: list[Row]) -> DataFrame:
    """An audit table's rows as a DataFrame of :data:`TABLE_SCHEMAS` (``lagByQueue`` is
    ``lag``'s)."""
    ddl = TABLE_SCHEMAS["lag" if name == "lagByQueue" else name]
    names, depth, start = [], 0, 0
    for i, ch in enumerate(ddl + ","):  # the top-level fields (a nested type holds commas)
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            names.append(ddl[start:i].strip().split(" ")[0])
            start = i + 1
    return spark.createDataFrame([tuple(r[n] for n in names) for r in rows], ddl)


def _order(*values: Any) -> tuple[tuple[bool, Any], ...]:
    return tuple((v is not None, v) for v in values)


def _sum(values: Iterable[Any]) -> Any:
    got = [v for v in values if v is not None]
    return sum(got) if got else None


def _min(values: Iterable[Any]) -> Any:
    got = [v for v in values if v is not None]
    return min(got) if got else None


def _max(values: Iterable[Any]) -> Any:
    got = [v for v in values if v is not None]
    return max(got) if got else None


def _groups(rows: Iterable[Row], keys: tuple[str, ...]) -> dict[tuple[Any, ...], list[Row]]:
    out: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def _set_rows(facts: Iterable[Row], name: str) -> list[Row]:
    gid = fact_gid(name)
    return [r for r in facts if r["gid"] == gid]


def fact_tables(facts: list[Row], bucket_ms: int = 60_000) -> dict[str, list[Row]]:
    """Every per-message table from the collected rows of :func:`message_facts` (of one or
    more passes: rows are re-aggregated): ``totals`` (per store and record kind), ``queues``,
    ``rate`` (per ``bucket_ms``), ``dlqByTopic``, ``dlq``, ``retry``, ``rows`` (the rare
    rows with the ``records`` column names, ``recordType`` "crc" for a BODYCRC failure) and
    ``tallies`` (one row per store: its tally columns folded, :func:`fold_tallies`)."""
    out: dict[str, list[Row]] = {}
    sets = {name: _set_rows(facts, name) for name in FACT_SETS}
    out["tallies"] = [{"store": s, **t} for s, t in fold_tallies(sets["totals"]).items()]
    out["totals"] = [
        {"store": s, "kind": k, "count": _sum(r["count"] for r in g),
         "bytes": _sum(r["bytes"] for r in g)}
        for (s, k), g in _groups(sets["totals"], ("store", "kind")).items()
    ]
    out["queues"] = sorted((
        {"store": s, "topic": t, "queueId": q, "count": _sum(r["count"] for r in g),
         "bytes": _sum(r["bytes"] for r in g),
         "firstStoreTimestamp": _min(r["minStoreTimestamp"] for r in g),
         "lastStoreTimestamp": _max(r["maxStoreTimestamp"] for r in g),
         "minQueueOffset": _min(r["minQueueOffset"] for r in g),
         "maxQueueOffset": _max(r["maxQueueOffset"] for r in g)}
        for (s, t, q), g in _groups(sets["queues"], ("store", "qTopic", "qQueueId")).items()
        if t is not None
    ), key=lambda r: _order(r["store"], r["topic"], r["queueId"]))
    rate = []
    for (s, t, b), g in _groups(sets["rate"], ("store", "rTopic", "bucketStart")).items():
        if t is None:
            continue
        n = _sum(r["count"] for r in g)
        rate.append({"store": s, "topic": t, "bucketStart": b, "count": n,
                     "bytes": _sum(r["bytes"] for r in g),
                     "perSecond": None if n is None else n / (bucket_ms / 1000.0)})
    out["rate"] = sorted(rate, key=lambda r: _order(r["store"], r["topic"], r["bucketStart"]))
    out["dlqByTopic"] = sorted((
        {"store": s, "group": grp, "originalTopic": t, "count": _sum(r["count"] for r in g),
         "firstStoreTimestamp": _min(r["minStoreTimestamp"] for r in g),
         "lastStoreTimestamp": _max(r["maxStoreTimestamp"] for r in g)}
        for (s, grp, t), g in _groups(
            [{**r, "originalTopic": dead_letter_original_topic(r["originalTopic"], r["dlqGroup"])
              if r["originalTopic"] is not None and r["dlqGroup"] is not None
              else r["originalTopic"]} for r in sets["dlq"]],
            ("store", "dlqGroup", "originalTopic")).items()
        if grp is not None
    ), key=lambda r: _order(r["store"], r["group"], r["originalTopic"]))
    out["dlq"] = sorted((
        {"store": s, "group": grp, "count": _sum(r["count"] for r in g),
         "originalTopics": sorted({r["originalTopic"] for r in g} - {None})}
        for (s, grp), g in _groups(out["dlqByTopic"], ("store", "group")).items()
    ), key=lambda r: _order(r["store"], r["group"]))
    out["retry"] = sorted((
        {"store": s, "group": grp, "reconsumeTimes": n, "count": _sum(r["count"] for r in g)}
        for (s, grp, n), g in _groups(sets["retry"],
                                      ("store", "retryGroup", "reconsumeTimes")).items()
        if grp is not None
    ), key=lambda r: _order(r["store"], r["group"], r["reconsumeTimes"]))
    out["rows"] = [
        {"store": r["store"], "recordType": r["xKind"], "file": r["xFile"],
         "fileOffset": r["xFileOffset"], "commitLogOffset": r["xCommitLogOffset"],
         "storeSize": r["xStoreSize"], "detail": r["xDetail"], "topic": r["xTopic"],
         "queueId": r["xQueueId"], "queueOffset": r["xQueueOffset"], "bodyCRC": r["xBodyCRC"],
         "bodyLength": r["xBodyLength"]}
        for r in sets["rows"] if r["xKind"] is not None
    ]
    return out


# --- consume queues ---------------------------------------------------------------------------
def queue_facts(cq: DataFrame, delay_offsets: Mapping[str, Mapping[int, int]],
                now_ms: int, tallies: Mapping[str, Column] | None = None) -> DataFrame:
    """Per store/topic/queue of a ``consumequeue`` table, in **one** aggregation: minOffset,
    maxOffset (the next offset), entries, and for ``SCHEDULE_TOPIC_XXXX`` the backlog against
    ``delay_offsets`` (store -> {delay level: offset}, delayOffset.json; level = queueId + 1,
    offset 0 when the level has none): ``pending`` entries at or past that offset, of them
    ``overdue`` (deliver time, the unit's tagsCode, before ``now_ms``) and the earliest deliver
    time ``nextDeliverTimestamp``. Small (one row per queue): collect it and fold
    :func:`schedule_rows`, :func:`lag_rows` on the driver. ``tallies``: as
    :func:`message_facts`' (:func:`mqtool.spark.integrity.unit_tallies`), per queue."""
    eff: Column = F.lit(0).cast("long")
    for store, table in delay_offsets.items():
        for level, offset in table.items():
            eff = F.when((F.col("store") == F.lit(store))
                         & (F.col("queueId") == F.lit(int(level) - 1)),
                         F.lit(int(offset)).cast("long")).otherwise(eff)
    pending = (F.col("topic") == F.lit(SCHEDULE_TOPIC)) & (F.col("queueOffset") >= eff)
    tallies = tallies or {}
    if tallies:
        cq = cq.select("*", *[c.alias(n) for n, c in tallies.items()])
    return cq.groupBy("store", "topic", "queueId").agg(
        F.min("queueOffset").alias("minOffset"),
        (F.max("queueOffset") + 1).alias("maxOffset"),
        F.count(F.lit(1)).alias("entries"),
        F.sum(pending.cast("long")).alias("pending"),
        F.sum((pending & (F.col("tagsCode") < F.lit(now_ms))).cast("long")).alias("overdue"),
        F.min(F.when(pending, F.col("tagsCode"))).alias("nextDeliverTimestamp"),
        *_tally_aggs(tallies),
    )


def queue_rules(delay_offsets: Mapping[str, Mapping[int, int]], now_ms: int,
                tallies: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """:func:`queue_facts` as ``FactsJob.java`` is told it
    (:func:`mqtool.spark.source.java_aux_facts`): the schedule topic, ``delay_offsets`` by
    queue id (level - 1), ``now_ms``; ``tallies``: :func:`mqtool.spark.integrity.
    unit_tally_rules` (None: no tallies)."""
    return {"scheduleTopic": SCHEDULE_TOPIC, "nowMs": now_ms,
            "delayOffsets": {s: {str(int(level) - 1): int(offset) for level, offset in t.items()}
                             for s, t in delay_offsets.items()},
            **(tallies or {})}


def schedule_rows(queues: list[Row], delay_offsets: Mapping[str, Mapping[int, int]]) -> list[Row]:
    """Backlog of ``SCHEDULE_TOPIC_XXXX`` per store and delay level (= queueId + 1), from the
    collected :func:`queue_facts`: every level that has a queue or a delayOffset.json entry.

    ``pending``/``overdue``/``nextDeliverTimestamp``: see :func:`queue_facts` (0, 0, None for
    a level with no queue); ``beyondMax``: a delayOffset larger than the queue's max offset (the
    schedule service would skip or stall, apache/rocketmq #1869, #7077, #1472).
    """
    sched = {(r["store"], r["queueId"] + 1): r for r in queues if r["topic"] == SCHEDULE_TOPIC}
    levels = set(sched) | {(s, int(lvl)) for s, t in delay_offsets.items() for lvl in t}
    out = []
    for store, level in sorted(levels, key=lambda k: _order(*k)):
        q = sched.get((store, level), {})
        offset = delay_offsets.get(store, {}).get(level)
        delay = None if offset is None else int(offset)
        max_offset = q.get("maxOffset") or 0
        out.append({
            "store": store, "delayLevel": level, "queueId": level - 1,
            "pending": q.get("pending") or 0, "overdue": q.get("overdue") or 0,
            "delayOffset": delay, "minOffset": q.get("minOffset") or 0, "maxOffset": max_offset,
            "nextDeliverTimestamp": q.get("nextDeliverTimestamp"),
            "beyondMax": delay is not None and delay > max_offset,
        })
    return out


CONSUMER_OFFSET = tuple[str, str, int, int]
"""A consumerOffset.json entry: (group, topic, queueId, offset)."""


def lag_rows(queues: list[Row], offsets: Mapping[str, Iterable[CONSUMER_OFFSET]]) -> list[Row]:
    """Per store/group/topic/queue: the committed offset (consumerOffset.json, store ->
    [(group, topic, queueId, offset)]), the queue's max offset (0 when the store has no such
    queue) and the lag, from the collected :func:`queue_facts`."""
    max_of = {(r["store"], r["topic"], r["queueId"]): r["maxOffset"] for r in queues}
    out = []
    for store, entries in offsets.items():
        for group, topic, queue_id, offset in entries:
            m = max_of.get((store, topic, int(queue_id))) or 0
            out.append({"store": store, "group": group, "topic": topic,
                        "queueId": int(queue_id), "consumerOffset": int(offset),
                        "maxOffset": m, "lag": max(m - int(offset), 0)})
    return sorted(out, key=lambda r: _order(r["store"], r["group"], r["topic"], r["queueId"]))
