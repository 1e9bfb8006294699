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

from mqtool.formats.errors import (
    CQ_DANGLING,
    CQ_MISMATCH,
    CQ_MISSING,
    FINDING_KINDS,
    INDEX_DANGLING,
    UNREADABLE,
    CrcMismatchError,
    Finding,
    Severity,
)
from mqtool.formats.rules import DLQ_GROUP_TOPIC_PREFIX as DLQ_PREFIX
from mqtool.formats.rules import RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX
from mqtool.formats.rules import SCHEDULE_TOPIC
from mqtool.integrity.rules import NOT_IN_CONSUME_QUEUE, TRANSACTION_TYPE_MASK
from mqtool.spark.schema import (
    FINDING_SCHEMA,
    RECORD_KIND_MESSAGE,
    RECORD_KIND_UNREADABLE,
    finding_row,
    spark_schema,
)

FINDING_COLUMNS = FINDING_SCHEMA.names


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


# --- integrity -------------------------------------------------------------------------------
def _finding(
    kind: str, file: Column, offset: Column, detail: Column, phy: Column | None = None
) -> list[Column]:
    """The FINDING_SCHEMA columns of a :class:`~mqtool.formats.errors.Finding` of ``kind``
    (a registered name: checked here, on the driver)."""
    if kind not in FINDING_KINDS:
        raise ValueError(f"unknown finding kind {kind!r}")
    return [
        F.col("store"),
        F.lit(str(Severity.ERROR)).alias("severity"),
        F.lit(kind).alias("kind"),
        file.alias("file"),
        offset.cast("long").alias("offset"),
        detail.alias("detail"),
        F.lit(None).cast("string").alias("expected"),
        F.lit(None).cast("string").alias("found"),
        (F.lit(None) if phy is None else phy).cast("long").alias("phy"),
    ]


def unreadable_regions(records: DataFrame) -> DataFrame:
    """Findings for commitlog regions that hold no record (corrupt or torn bytes)."""
    return records.filter(F.col("recordType") == RECORD_KIND_UNREADABLE).select(
        *_finding(
            UNREADABLE, F.col("file"), F.col("fileOffset"),
            F.format_string("%d bytes: %s", F.col("storeSize"), F.col("detail")),
            F.col("commitLogOffset"),
        )
    )


def crc_failures(msgs: DataFrame) -> DataFrame:
    """Findings for messages whose BODYCRC does not match the stored body."""
    return msgs.filter(F.col("crcOk") == F.lit(False)).select(
        *_finding(
            CrcMismatchError.kind, F.col("file"), F.col("fileOffset"),
            F.format_string(
                "BODYCRC %d does not match the %d-byte body (%s/%d@%d)", F.col("bodyCRC"),
                F.col("bodyLength"), F.col("topic"), F.col("queueId"), F.col("queueOffset"),
            ),
            F.col("commitLogOffset"),
        )
    )


def commitlog_extent(records: DataFrame) -> DataFrame:
    """Per store: the commitlog offsets covered by files (min file start, max data end).

    One row per store, marked for broadcast: joining on ``store`` alone must not shuffle
    everything into one partition.
    """
    return F.broadcast(
        records.groupBy("store").agg(
            F.min(F.col("commitLogOffset") - F.col("fileOffset")).alias("clMin"),
            F.max(F.col("commitLogOffset") + F.col("storeSize")).alias("clMax"),
        )
    )


def _targets(msgs: DataFrame) -> DataFrame:
    """The message side of every integrity join (one projection: one shuffle, reused)."""
    return msgs.select(
        "store", "commitLogOffset", "topic", "queueId", "queueOffset", "storeSize", "sysFlag",
        "file", "fileOffset",
    )


def _units(cq: DataFrame) -> DataFrame:
    """The consume-queue side of the integrity joins (one projection, reused)."""
    return cq.select(
        "store", "commitLogOffset", F.col("topic").alias("uTopic"),
        F.col("queueId").alias("uQueueId"), F.col("queueOffset").alias("uQueueOffset"),
        F.col("storeSize").alias("uSize"), F.col("file").alias("uFile"),
        F.col("fileOffset").alias("uFileOffset"),
    )


_KEYS = ["store", "commitLogOffset"]


def _in_commitlog(df: DataFrame, records: DataFrame) -> DataFrame:
    """Rows whose commitLogOffset is not below the store's first commitlog file."""
    return df.join(commitlog_extent(records), "store", "left").filter(
        F.col("clMin").isNull() | (F.col("commitLogOffset") >= F.col("clMin"))
    )


def cq_problems(records: DataFrame, msgs: DataFrame, cq: DataFrame) -> DataFrame:
    """Consume-queue units pointing at nothing, or at another message than their own.

    Units below the first commitlog file are not findings (RocketMQ deletes commitlog files
    before the consume queues that point into them).
    """
    joined = _in_commitlog(_units(cq).join(_targets(msgs), _KEYS, "left"), records)
    where = F.format_string(
        "%s/%d@%d -> commitlog offset %d", F.col("uTopic"), F.col("uQueueId"),
        F.col("uQueueOffset"), F.col("commitLogOffset"),
    )
    dangling = joined.filter(F.col("topic").isNull()).select(
        *_finding(
            CQ_DANGLING, F.col("uFile"), F.col("uFileOffset"),
            F.concat(where, F.lit(": no message starts there")), F.col("commitLogOffset"),
        )
    )
    wrong = joined.filter(
        F.col("topic").isNotNull()
        & (
            (F.col("topic") != F.col("uTopic"))
            | (F.col("queueId") != F.col("uQueueId"))
            | (F.col("queueOffset") != F.col("uQueueOffset"))
            | (F.col("storeSize") != F.col("uSize"))
        )
    ).select(
        *_finding(
            CQ_MISMATCH, F.col("uFile"), F.col("uFileOffset"),
            F.concat(
                where,
                F.format_string(
                    " (size %d): the message there is %s/%d@%d (size %d)", F.col("uSize"),
                    F.col("topic"), F.col("queueId"), F.col("queueOffset"), F.col("storeSize"),
                ),
            ),
            F.col("commitLogOffset"),
        )
    )
    return dangling.unionByName(wrong)


def missing_from_cq(msgs: DataFrame, cq: DataFrame) -> DataFrame:
    """Messages that have no unit in their consume queue.

    Not expected in a consume queue (so never findings): transaction PREPARED and ROLLBACK
    records, and messages below the queue's first unit (consume-queue files deleted).
    """
    exact = (
        (F.col("uTopic") == F.col("topic"))
        & (F.col("uQueueId") == F.col("queueId"))
        & (F.col("uQueueOffset") == F.col("queueOffset"))
    )
    per_message = (
        _targets(msgs)
        .join(_units(cq), _KEYS, "left")
        .groupBy(*_targets(msgs).columns)
        .agg(F.max(F.coalesce(exact, F.lit(False))).alias("hit"))
    )
    qmin = F.broadcast(queue_offsets(cq).select("store", "topic", "queueId", "minOffset"))
    return (
        per_message.filter(~F.col("hit"))
        .filter(
            ~(F.col("sysFlag").bitwiseAND(TRANSACTION_TYPE_MASK)).isin(*NOT_IN_CONSUME_QUEUE)
        )
        .join(qmin, ["store", "topic", "queueId"], "left")
        .filter(F.col("minOffset").isNull() | (F.col("queueOffset") >= F.col("minOffset")))
        .select(
            *_finding(
                CQ_MISSING, F.col("file"), F.col("fileOffset"),
                F.format_string(
                    "message %s/%d@%d (%d bytes) has no consume-queue unit", F.col("topic"),
                    F.col("queueId"), F.col("queueOffset"), F.col("storeSize"),
                ),
                F.col("commitLogOffset"),
            )
        )
    )


def index_dangling(records: DataFrame, msgs: DataFrame, index: DataFrame) -> DataFrame:
    """Index entries whose phyOffset (within the commitlog's files) is not a message start."""
    entries = index.select(
        "store", "commitLogOffset", F.col("file").alias("iFile"),
        F.col("fileOffset").alias("iFileOffset"), "entry", "keyHash",
    )
    joined = _in_commitlog(entries.join(_targets(msgs), _KEYS, "left"), records)
    return joined.filter(F.col("topic").isNull()).select(
        *_finding(
            INDEX_DANGLING, F.col("iFile"), F.col("iFileOffset"),
            F.format_string(
                "entry %d (keyHash %d) -> commitlog offset %d: no message starts there",
                F.col("entry"), F.col("keyHash"), F.col("commitLogOffset"),
            ),
            F.col("commitLogOffset"),
        )
    )


def integrity(
    records: DataFrame,
    cq: DataFrame | None = None,
    index: DataFrame | None = None,
    extra: DataFrame | None = None,
) -> DataFrame:
    """All integrity findings (FINDING_SCHEMA), ordered by store, file and offset."""
    msgs = messages(records)
    parts = [unreadable_regions(records), crc_failures(msgs)]
    if cq is not None:
        parts += [cq_problems(records, msgs, cq), missing_from_cq(msgs, cq)]
    if index is not None:
        parts.append(index_dangling(records, msgs, index))
    if extra is not None:
        parts.append(extra.select(*FINDING_COLUMNS))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out.orderBy("store", "file", "offset", "kind")


def findings_df(spark: SparkSession, findings: Iterable[tuple[str, Finding]]) -> DataFrame:
    """Findings made on the driver (layout, config files), ``(store, finding)`` pairs, as a
    FINDING_SCHEMA DataFrame."""
    rows = [finding_row(store, f) for store, f in findings]
    return spark.createDataFrame(
        [tuple(r[k] for k in FINDING_COLUMNS) for r in rows], spark_schema(FINDING_SCHEMA)
    )
