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


def queue_stats(msgs: DataFrame) -> DataFrame:
    """Per store/topic/queue: count, bytes, first/last store time, queue offset range."""
    return (
        msgs.groupBy("store", "topic", "queueId")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.sum("storeSize").alias("bytes"),
            F.min("storeTimestamp").alias("firstStoreTimestamp"),
            F.max("storeTimestamp").alias("lastStoreTimestamp"),
            F.min("queueOffset").alias("minQueueOffset"),
            F.max("queueOffset").alias("maxQueueOffset"),
        )
        .orderBy("store", "topic", "queueId")
    )


def message_rate(msgs: DataFrame, bucket_ms: int = 60_000) -> DataFrame:
    """Messages and bytes per topic per time bucket of ``bucket_ms`` (by store time)."""
    bucket = (F.floor(F.col("storeTimestamp") / F.lit(bucket_ms)) * F.lit(bucket_ms)).cast("long")
    return (
        msgs.groupBy("store", "topic", bucket.alias("bucketStart"))
        .agg(F.count(F.lit(1)).alias("count"), F.sum("storeSize").alias("bytes"))
        .withColumn("perSecond", F.col("count") / F.lit(bucket_ms / 1000.0))
        .orderBy("store", "topic", "bucketStart")
    )


def _original_topic(msgs: DataFrame) -> Column:
    # CONSUMER_SEND_MSG_BACK sets RETRY_TOPIC to the original topic before routing to DLQ.
    return F.coalesce(F.col("properties")["RETRY_TOPIC"], F.col("properties")["REAL_TOPIC"])


def dlq_by_group(msgs: DataFrame) -> DataFrame:
    """Dead-lettered messages per consumer group and original topic (RETRY_TOPIC)."""
    dlq = msgs.filter(F.col("topic").startswith(DLQ_PREFIX))
    return (
        dlq.select(
            "store",
            F.expr(f"substring(topic, {len(DLQ_PREFIX) + 1})").alias("group"),
            F.coalesce(_original_topic(msgs), F.lit("")).alias("originalTopic"),
            "storeTimestamp",
        )
        .groupBy("store", "group", "originalTopic")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.min("storeTimestamp").alias("firstStoreTimestamp"),
            F.max("storeTimestamp").alias("lastStoreTimestamp"),
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


def retry_depth(msgs: DataFrame) -> DataFrame:
    """Histogram of reconsumeTimes of the messages in each group's ``%RETRY%`` topic."""
    return (
        msgs.filter(F.col("topic").startswith(RETRY_PREFIX))
        .select(
            "store",
            F.expr(f"substring(topic, {len(RETRY_PREFIX) + 1})").alias("group"),
            "reconsumeTimes",
        )
        .groupBy("store", "group", "reconsumeTimes")
        .agg(F.count(F.lit(1)).alias("count"))
        .orderBy("store", "group", "reconsumeTimes")
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
