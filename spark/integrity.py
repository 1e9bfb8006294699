"""The integrity audit of ``mqtool scan`` (imports pyspark): damage inside each file and
between the files of a store.

Within a file: unreadable commitlog regions and BODYCRC failures (from the commitlog pass).
Between files, in **one shuffle**: the messages, the consume-queue units and the index entries
are tagged, unioned and grouped by (store, commitLogOffset); each group then says at once
whether units or index entries point at no message (``cq-dangling``, ``index-dangling``), at
another message than their own (``cq-mismatch``), and whether a message lacks its unit
(``cq-missing``). The small sides (where each store's commitlog starts, each queue's first
offset) are broadcast. Findings are rows of the one
:class:`~mqtool.formats.errors.Finding` type (:data:`~mqtool.spark.schema.FINDING_SCHEMA`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

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
from mqtool.integrity.rules import NOT_IN_CONSUME_QUEUE, TRANSACTION_TYPE_MASK
from mqtool.spark.audits import messages, queue_offsets
from mqtool.spark.schema import (
    FINDING_SCHEMA,
    RECORD_KIND_UNREADABLE,
    finding_row,
    spark_schema,
)

FINDING_COLUMNS = FINDING_SCHEMA.names
_KEYS = ["store", "commitLogOffset"]


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


def _cross(kind: str, file: Column, offset: Column, detail: Column, phy: Column,
           topic: Column | None = None, queue_id: Column | None = None,
           queue_offset: Column | None = None) -> Column:
    """One cross-file finding as a struct (inside the grouped pass)."""
    if kind not in FINDING_KINDS:
        raise ValueError(f"unknown finding kind {kind!r}")
    return F.struct(
        F.lit(kind).alias("kind"), file.alias("file"), offset.cast("long").alias("offset"),
        detail.alias("detail"), phy.cast("long").alias("phy"),
        (topic if topic is not None else F.lit(None).cast("string")).alias("qTopic"),
        (queue_id if queue_id is not None else F.lit(None).cast("int")).alias("qQueueId"),
        (queue_offset if queue_offset is not None else F.lit(None).cast("long"))
        .alias("qQueueOffset"),
    )


def cross_file(
    msgs: DataFrame, cq: DataFrame | None, index: DataFrame | None, cl_start: DataFrame,
) -> DataFrame:
    """Consume-queue and index findings, from one grouping of messages, units and entries.

    ``cl_start`` (store, clMin): where each store's commitlog starts; units and entries below
    it are not findings (RocketMQ deletes commitlog files before the consume queues and index
    files that point into them). Not expected in a consume queue (so never ``cq-missing``):
    transaction PREPARED and ROLLBACK records, and messages below their queue's first unit.
    """
    m_type = StructType([
        StructField("topic", StringType()), StructField("queueId", LongType()),
        StructField("queueOffset", LongType()), StructField("storeSize", LongType()),
        StructField("sysFlag", LongType()), StructField("file", StringType()),
        StructField("fileOffset", LongType()),
    ])
    u_type = StructType([
        StructField("topic", StringType()), StructField("queueId", LongType()),
        StructField("queueOffset", LongType()), StructField("size", LongType()),
        StructField("file", StringType()), StructField("fileOffset", LongType()),
    ])
    i_type = StructType([
        StructField("file", StringType()), StructField("fileOffset", LongType()),
        StructField("entry", LongType()), StructField("keyHash", LongType()),
    ])
    null_m = F.lit(None).cast(m_type).alias("m")
    null_u = F.lit(None).cast(u_type).alias("u")
    null_i = F.lit(None).cast(i_type).alias("i")
    parts = [msgs.select(
        *_KEYS, F.struct(*(F.col(c).cast(m_type[c].dataType).alias(c) for c in m_type.names))
        .alias("m"), null_u, null_i,
    )]
    if cq is not None:
        parts.append(cq.select(
            *_KEYS, null_m, F.struct(
                F.col("topic"), F.col("queueId").cast("long").alias("queueId"),
                F.col("queueOffset"), F.col("storeSize").cast("long").alias("size"),
                F.col("file"), F.col("fileOffset"),
            ).alias("u"), null_i,
        ))
    if index is not None:
        parts.append(index.select(
            *_KEYS, null_m, null_u, F.struct(
                F.col("file"), F.col("fileOffset"), F.col("entry").cast("long").alias("entry"),
                F.col("keyHash").cast("long").alias("keyHash"),
            ).alias("i"),
        ))
    tagged = parts[0]
    for p in parts[1:]:
        tagged = tagged.unionByName(p)
    g = tagged.groupBy(*_KEYS).agg(
        F.max("m").alias("m"), F.collect_list("u").alias("us"), F.collect_list("i").alias("is"),
    ).join(F.broadcast(cl_start), "store", "left")
    m = F.col("m")
    here = F.col("commitLogOffset")
    # inside the commitlog files, or impossible (a negative offset is never history)
    known = F.col("clMin").isNull() | (here >= F.col("clMin")) | (here < 0)

    def where(u: Column) -> Column:
        return F.format_string("%s/%d@%d -> commitlog offset %d", u["topic"], u["queueId"],
                               u["queueOffset"], here)

    def exact(u: Column) -> Column:
        return ((u["topic"] == m["topic"]) & (u["queueId"] == m["queueId"])
                & (u["queueOffset"] == m["queueOffset"]))

    dangling = F.transform("us", lambda u: _cross(
        CQ_DANGLING, u["file"], u["fileOffset"],
        F.concat(where(u), F.lit(": no message starts there")), here))
    mismatch = F.transform(
        F.filter("us", lambda u: ~exact(u) | (u["size"] != m["storeSize"])),
        lambda u: _cross(
            CQ_MISMATCH, u["file"], u["fileOffset"],
            F.concat(where(u), F.format_string(
                " (size %d): the message there is %s/%d@%d (size %d)", u["size"],
                m["topic"], m["queueId"], m["queueOffset"], m["storeSize"])), here))
    index_dangling = F.transform("is", lambda i: _cross(
        INDEX_DANGLING, i["file"], i["fileOffset"],
        F.format_string("entry %d (keyHash %d) -> commitlog offset %d: no message starts "
                        "there", i["entry"], i["keyHash"], here), here))
    txn = m["sysFlag"].bitwiseAND(TRANSACTION_TYPE_MASK)
    missing = F.array(_cross(
        CQ_MISSING, m["file"], m["fileOffset"],
        F.format_string("message %s/%d@%d (%d bytes) has no consume-queue unit", m["topic"],
                        m["queueId"], m["queueOffset"], m["storeSize"]),
        here, m["topic"], m["queueId"].cast("int"), m["queueOffset"]))
    empty = F.array().cast(
        "array<struct<kind:string,file:string,offset:bigint,detail:string,phy:bigint,"
        "qTopic:string,qQueueId:int,qQueueOffset:bigint>>"
    )
    lacks_unit = (~F.exists("us", exact)
                  & ~txn.isin(*NOT_IN_CONSUME_QUEUE))
    found = F.when(m.isNull(), F.when(known, F.concat(dangling, index_dangling)).otherwise(empty))
    if cq is not None:
        found = found.otherwise(F.concat(mismatch, F.when(lacks_unit, missing).otherwise(empty)))
    else:
        found = found.otherwise(empty)
    rows = g.select("store", F.explode(found).alias("f")).select("store", "f.*")
    if cq is not None:  # a message below its queue's first unit: the queue was cut, not lost
        qmin = F.broadcast(queue_offsets(cq).select(
            "store", F.col("topic").alias("qTopic"), F.col("queueId").alias("qQueueId"),
            "minOffset"))
        rows = rows.join(qmin, ["store", "qTopic", "qQueueId"], "left").filter(
            (F.col("kind") != CQ_MISSING) | F.col("minOffset").isNull()
            | (F.col("qQueueOffset") >= F.col("minOffset"))
        )
    return rows.select(
        "store", F.lit(str(Severity.ERROR)).alias("severity"), "kind", "file", "offset",
        "detail", F.lit(None).cast("string").alias("expected"),
        F.lit(None).cast("string").alias("found"), "phy",
    )


def commitlog_starts(spark: SparkSession, starts: Mapping[str, int | None]) -> DataFrame:
    """(store, clMin): the commitlog offset of each store's first commitlog file."""
    schema = StructType([StructField("store", StringType(), False),
                         StructField("clMin", LongType(), True)])
    return spark.createDataFrame([(s, v) for s, v in starts.items()], schema)


def integrity(
    records: DataFrame,
    cl_start: DataFrame,
    cq: DataFrame | None = None,
    index: DataFrame | None = None,
    extra: DataFrame | None = None,
) -> DataFrame:
    """All integrity findings (FINDING_SCHEMA), ordered by store, file and offset."""
    msgs = messages(records)
    parts = [unreadable_regions(records), crc_failures(msgs)]
    if cq is not None or index is not None:
        parts.append(cross_file(msgs, cq, index, cl_start))
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
