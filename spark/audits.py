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

from collections.abc import Iterable, Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

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
# The grouping sets of :func:`message_facts`: name -> the grouping columns besides ``store``.
FACT_SETS: dict[str, tuple[str, ...]] = {
    "totals": ("kind",),
    "queues": ("qTopic", "qQueueId"),
    "rate": ("rTopic", "bucketStart"),
    "dlq": ("dlqGroup", "originalTopic"),
    "retry": ("retryGroup", "reconsumeTimes"),
    # rows the integrity audit reports one by one (unreadable regions, BODYCRC failures) and
    # the byte ranges the Java reader handed over ("deferred"): rare, each its own group
    "rows": ("xKind", "xFile", "xFileOffset", "xCommitLogOffset", "xStoreSize", "xDetail",
             "xTopic", "xQueueId", "xQueueOffset", "xBodyCRC", "xBodyLength"),
}
_FACT_KEYS = [c for cols in FACT_SETS.values() for c in cols]
CRC_ROW = "crc"
"""``recordType`` of a BODYCRC failure among :func:`fact_rows`."""


def fact_set(name: str) -> Column:
    """True on the rows of :func:`message_facts` that belong to grouping set ``name``."""
    gid = sum(1 << (len(_FACT_KEYS) - 1 - i) for i, c in enumerate(_FACT_KEYS)
              if c not in FACT_SETS[name])
    return F.col("gid") == F.lit(gid)


def message_facts(records: DataFrame, bucket_ms: int = 60_000) -> DataFrame:
    """Every per-message audit of a ``records`` projection in **one** aggregation (grouping
    sets, :data:`FACT_SETS`): counts, bytes, store-time and queue-offset ranges per queue, per
    topic and time bucket of ``bucket_ms``, per dead-letter group and original topic, per retry
    group and reconsumeTimes, per record kind; and the rows that are findings (unreadable
    regions, BODYCRC failures) or hand-overs (``deferred``) as groups of their own.

    The result is small (queues x buckets, plus the rare rows): :func:`queue_stats`,
    :func:`message_rate`, :func:`dlq_by_group`, :func:`retry_depth` and the totals read it,
    re-aggregating (so facts of several passes may be unioned). Nothing per message is kept.
    """
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
        x_kind.alias("xKind"), when_rare("file").alias("xFile"),
        when_rare("fileOffset").alias("xFileOffset"),
        when_rare("commitLogOffset").alias("xCommitLogOffset"),
        when_rare("storeSize").alias("xStoreSize"), when_rare("detail").alias("xDetail"),
        when_rare("topic").alias("xTopic"), when_rare("queueId").alias("xQueueId"),
        when_rare("queueOffset").alias("xQueueOffset"), when_rare("bodyCRC").alias("xBodyCRC"),
        when_rare("bodyLength").alias("xBodyLength"),
        F.when(is_msg, F.col("storeSize")).alias("size"), "storeTimestamp", "queueOffset",
    )
    sets = [[F.col("store"), *map(F.col, cols)] for cols in FACT_SETS.values()]
    return keyed.groupingSets(sets, "store", *_FACT_KEYS).agg(
        F.grouping_id().alias("gid"),  # store (in every set) is its highest bit: 0
        F.count(F.lit(1)).alias("count"),
        F.sum("size").alias("bytes"),
        F.min("storeTimestamp").alias("minStoreTimestamp"),
        F.max("storeTimestamp").alias("maxStoreTimestamp"),
        F.min("queueOffset").alias("minQueueOffset"),
        F.max("queueOffset").alias("maxQueueOffset"),
    )


def queue_stats(facts: DataFrame) -> DataFrame:
    """Per store/topic/queue: count, bytes, first/last store time, queue offset range."""
    return (
        facts.filter(fact_set("queues"))
        .groupBy("store", F.col("qTopic").alias("topic"), F.col("qQueueId").alias("queueId"))
        .agg(
            F.sum("count").alias("count"),
            F.sum("bytes").alias("bytes"),
            F.min("minStoreTimestamp").alias("firstStoreTimestamp"),
            F.max("maxStoreTimestamp").alias("lastStoreTimestamp"),
            F.min("minQueueOffset").alias("minQueueOffset"),
            F.max("maxQueueOffset").alias("maxQueueOffset"),
        )
        .filter(F.col("topic").isNotNull())
        .orderBy("store", "topic", "queueId")
    )


def message_rate(facts: DataFrame, bucket_ms: int = 60_000) -> DataFrame:
    """Messages and bytes per topic per time bucket (``bucket_ms``, the one
    :func:`message_facts` was made with; by store time)."""
    return (
        facts.filter(fact_set("rate") & F.col("rTopic").isNotNull())
        .groupBy("store", F.col("rTopic").alias("topic"), "bucketStart")
        .agg(F.sum("count").alias("count"), F.sum("bytes").alias("bytes"))
        .withColumn("perSecond", F.col("count") / F.lit(bucket_ms / 1000.0))
        .orderBy("store", "topic", "bucketStart")
    )


def _original_topic() -> Column:
    # CONSUMER_SEND_MSG_BACK sets RETRY_TOPIC to the original topic before routing to DLQ.
    return F.coalesce(F.col("properties")["RETRY_TOPIC"], F.col("properties")["REAL_TOPIC"])


def dlq_by_group(facts: DataFrame) -> DataFrame:
    """Dead-lettered messages per consumer group and original topic (RETRY_TOPIC)."""
    return (
        facts.filter(fact_set("dlq") & F.col("dlqGroup").isNotNull())
        .groupBy("store", F.col("dlqGroup").alias("group"), "originalTopic")
        .agg(
            F.sum("count").alias("count"),
            F.min("minStoreTimestamp").alias("firstStoreTimestamp"),
            F.max("maxStoreTimestamp").alias("lastStoreTimestamp"),
        )
        .orderBy("store", "group", "originalTopic")
    )


def dlq_summary(by_topic: DataFrame) -> DataFrame:
    """:func:`dlq_by_group` folded per group: count and the sorted original topics."""
    return (
        by_topic.groupBy("store", "group")
        .agg(
            F.sum("count").alias("count"),
            F.array_sort(F.collect_set("originalTopic")).alias("originalTopics"),
        )
        .orderBy("store", "group")
    )


def retry_depth(facts: DataFrame) -> DataFrame:
    """Histogram of reconsumeTimes of the messages in each group's ``%RETRY%`` topic."""
    return (
        facts.filter(fact_set("retry") & F.col("retryGroup").isNotNull())
        .groupBy("store", F.col("retryGroup").alias("group"), "reconsumeTimes")
        .agg(F.sum("count").alias("count"))
        .orderBy("store", "group", "reconsumeTimes")
    )


def fact_totals(facts: DataFrame) -> DataFrame:
    """Per store and record kind: count and bytes (of messages)."""
    return (facts.filter(fact_set("totals")).groupBy("store", "kind")
            .agg(F.sum("count").alias("count"), F.sum("bytes").alias("bytes")))


def fact_rows(facts: DataFrame) -> DataFrame:
    """The rare rows of :func:`message_facts` (unreadable regions, BODYCRC failures, deferred
    ranges) with the ``records`` column names (``recordType`` "crc" for a BODYCRC failure)."""
    return facts.filter(fact_set("rows") & F.col("xKind").isNotNull()).select(
        "store", F.col("xKind").alias("recordType"), F.col("xFile").alias("file"),
        F.col("xFileOffset").alias("fileOffset"),
        F.col("xCommitLogOffset").alias("commitLogOffset"),
        F.col("xStoreSize").alias("storeSize"), F.col("xDetail").alias("detail"),
        F.col("xTopic").alias("topic"), F.col("xQueueId").alias("queueId"),
        F.col("xQueueOffset").alias("queueOffset"), F.col("xBodyCRC").alias("bodyCRC"),
        F.col("xBodyLength").alias("bodyLength"),
    )


# --- consume queues ---------------------------------------------------------------------------
def queue_offsets(cq: DataFrame) -> DataFrame:
    """Per store/topic/queue: minOffset and maxOffset (next offset) from the consume queue."""
    return cq.groupBy("store", "topic", "queueId").agg(
        F.min("queueOffset").alias("minOffset"),
        (F.max("queueOffset") + 1).alias("maxOffset"),
        F.count(F.lit(1)).alias("entries"),
    )


DELAY_OFFSET_SCHEMA = StructType(
    [
        StructField("store", StringType(), False),
        StructField("delayLevel", IntegerType(), False),
        StructField("delayOffset", LongType(), False),
    ]
)


def delay_offsets_df(spark: SparkSession, tables: Mapping[str, Mapping[int, int]]) -> DataFrame:
    """``delayOffset.json`` offset tables (store -> {level: offset}) as a DataFrame."""
    rows = [(store, int(lvl), int(off)) for store, t in tables.items() for lvl, off in t.items()]
    return spark.createDataFrame(rows, DELAY_OFFSET_SCHEMA)


def schedule_backlog(cq: DataFrame, delay_offsets: DataFrame, now_ms: int) -> DataFrame:
    """Backlog of ``SCHEDULE_TOPIC_XXXX`` per delay level (= queueId + 1).

    ``pending``: entries at or beyond the level's delayOffset.json offset (0 when the level has
    none); ``overdue``: pending entries whose deliver time (the CQ tagsCode) is before
    ``now_ms``; ``beyondMax``: a delayOffset larger than the queue's max offset (the schedule
    service would skip or stall, apache/rocketmq #1869, #7077, #1472).
    """
    sched = cq.filter(F.col("topic") == SCHEDULE_TOPIC).withColumn(
        "delayLevel", F.col("queueId") + 1
    )
    levels = sched.select("store", "delayLevel").distinct().unionByName(
        delay_offsets.select("store", "delayLevel")
    ).distinct()
    withoff = sched.join(delay_offsets, ["store", "delayLevel"], "left").withColumn(
        "effOffset", F.coalesce(F.col("delayOffset"), F.lit(0))
    )
    is_pending = F.col("queueOffset") >= F.col("effOffset")
    per_level = withoff.groupBy("store", "delayLevel").agg(
        F.sum(is_pending.cast("long")).alias("pending"),
        F.sum((is_pending & (F.col("tagsCode") < F.lit(now_ms))).cast("long")).alias("overdue"),
        F.min("queueOffset").alias("minOffset"),
        (F.max("queueOffset") + 1).alias("maxOffset"),
        F.min(F.when(is_pending, F.col("tagsCode"))).alias("nextDeliverTimestamp"),
    )
    out = (
        levels.join(per_level, ["store", "delayLevel"], "left")
        .join(delay_offsets, ["store", "delayLevel"], "left")
        .select(
            "store",
            "delayLevel",
            (F.col("delayLevel") - 1).alias("queueId"),
            F.coalesce("pending", F.lit(0)).alias("pending"),
            F.coalesce("overdue", F.lit(0)).alias("overdue"),
            "delayOffset",
            F.coalesce("minOffset", F.lit(0)).alias("minOffset"),
            F.coalesce("maxOffset", F.lit(0)).alias("maxOffset"),
            "nextDeliverTimestamp",
        )
        .withColumn(
            "beyondMax", F.coalesce(F.col("delayOffset") > F.col("maxOffset"), F.lit(False))
        )
    )
    return out.orderBy("store", "delayLevel")


CONSUMER_OFFSET_SCHEMA = StructType(
    [
        StructField("store", StringType(), False),
        StructField("group", StringType(), False),
        StructField("topic", StringType(), False),
        StructField("queueId", IntegerType(), False),
        StructField("consumerOffset", LongType(), False),
    ]
)


def consumer_offsets_df(
    spark: SparkSession, tables: Mapping[str, Iterable[tuple[str, str, int, int]]]
) -> DataFrame:
    """consumerOffset.json rows (store -> [(group, topic, queueId, offset)]) as a DataFrame."""
    rows = [(store, g, t, int(q), int(o)) for store, rs in tables.items() for g, t, q, o in rs]
    return spark.createDataFrame(rows, CONSUMER_OFFSET_SCHEMA)


def consumer_lag(cq: DataFrame, offsets: DataFrame) -> DataFrame:
    """Per group/topic/queue: committed offset, the queue's max offset and the lag."""
    q = queue_offsets(cq)
    return (
        offsets.join(q, ["store", "topic", "queueId"], "left")
        .select(
            "store", "group", "topic", "queueId", "consumerOffset",
            F.coalesce("maxOffset", F.lit(0)).alias("maxOffset"),
        )
        .withColumn(
            "lag", F.greatest(F.col("maxOffset") - F.col("consumerOffset"), F.lit(0)).cast("long")
        )
        .orderBy("store", "group", "topic", "queueId")
    )


def lag_summary(lag: DataFrame) -> DataFrame:
    """:func:`consumer_lag` summed per group and topic."""
    return (
        lag.groupBy("store", "group", "topic")
        .agg(F.sum("lag").alias("lag"), F.count(F.lit(1)).alias("queues"))
        .orderBy("store", "group", "topic")
    )
