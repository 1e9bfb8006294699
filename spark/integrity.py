"""The integrity audit of ``mqtool scan`` (imports pyspark): damage inside each file and
between the files of a store.

Within a file: unreadable commitlog regions and BODYCRC failures (from the commitlog pass).
Between files, by equi-joins on (store, commitLogOffset) of the messages' key columns with the
consume-queue units and the index entries: units or index entries that point at no message
(``cq-dangling``, ``index-dangling``: anti-joins), at another message than their own
(``cq-mismatch``), and messages that lack their unit (``cq-missing``: an anti-join on the
queue position too). The small sides (where each store's commitlog starts, each queue's first
offset) are broadcast. (A grouping of tagged whole rows with collected lists, the previous plan,
took 40-70 s on 224k messages where the joins take a few.) Findings are rows of the one
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
from mqtool.spark.audits import CRC_ROW, messages, queue_offsets
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


def crc_failures(rows: DataFrame) -> DataFrame:
    """Findings for messages whose BODYCRC does not match the stored body (the ``crc`` rows
    of :func:`mqtool.spark.audits.fact_rows`)."""
    return rows.filter(F.col("recordType") == F.lit(CRC_ROW)).select(
        *_finding(
            CrcMismatchError.kind, F.col("file"), F.col("fileOffset"),
            F.format_string(
                "BODYCRC %d does not match the %d-byte body (%s/%d@%d)", F.col("bodyCRC"),
                F.col("bodyLength"), F.col("topic"), F.col("queueId"), F.col("queueOffset"),
            ),
            F.col("commitLogOffset"),
        )
    )


def cross_file(
    msgs: DataFrame, cq: DataFrame | None, index: DataFrame | None, cl_start: DataFrame,
) -> DataFrame:
    """Consume-queue and index findings: units and entries joined with the messages on
    (store, commitLogOffset), plain equi-joins (no grouping of whole rows).

    ``cl_start`` (store, clMin): where each store's commitlog starts; units and entries below
    it are not findings (RocketMQ deletes commitlog files before the consume queues and index
    files that point into them). Not expected in a consume queue (so never ``cq-missing``):
    transaction PREPARED and ROLLBACK records, and messages below their queue's first unit.
    """
    m = msgs.select(*_KEYS, "topic", "queueId", "queueOffset", "storeSize", "sysFlag", "file",
                    "fileOffset")
    here = F.col("commitLogOffset")
    starts = F.broadcast(cl_start)
    # inside the commitlog files, or impossible (a negative offset is never history)
    known = F.col("clMin").isNull() | (here >= F.col("clMin")) | (here < 0)
    parts: list[DataFrame] = []
    if cq is not None:
        u = cq.select(
            *_KEYS, F.col("topic").alias("uTopic"), F.col("queueId").alias("uQueueId"),
            F.col("queueOffset").alias("uQueueOffset"), F.col("storeSize").alias("uSize"),
            F.col("file").alias("uFile"), F.col("fileOffset").alias("uFileOffset"),
        )
        where = F.format_string("%s/%d@%d -> commitlog offset %d", F.col("uTopic"),
                                F.col("uQueueId"), F.col("uQueueOffset"), here)
        at = m.select(*_KEYS, F.lit(True).alias("hasM"), F.col("topic").alias("mTopic"),
                      F.col("queueId").alias("mQueueId"),
                      F.col("queueOffset").alias("mQueueOffset"),
                      F.col("storeSize").alias("mSize"))
        um = u.join(at, _KEYS, "left")
        exact = ((F.col("uTopic") == F.col("mTopic")) & (F.col("uQueueId") == F.col("mQueueId"))
                 & (F.col("uQueueOffset") == F.col("mQueueOffset")))
        parts.append(um.filter(F.col("hasM").isNull()).join(starts, "store", "left")
                     .filter(known).select(*_finding(
                         CQ_DANGLING, F.col("uFile"), F.col("uFileOffset"),
                         F.concat(where, F.lit(": no message starts there")), here)))
        parts.append(um.filter(F.col("hasM") & (~exact | (F.col("uSize") != F.col("mSize"))))
                     .select(*_finding(
                         CQ_MISMATCH, F.col("uFile"), F.col("uFileOffset"),
                         F.concat(where, F.format_string(
                             " (size %d): the message there is %s/%d@%d (size %d)",
                             F.col("uSize"), F.col("mTopic"), F.col("mQueueId"),
                             F.col("mQueueOffset"), F.col("mSize"))), here)))
        # a message below its queue's first unit: the queue was cut, not lost
        qmin = F.broadcast(queue_offsets(cq).select("store", "topic", "queueId", "minOffset"))
        units = u.select(*_KEYS, F.col("uTopic").alias("topic"),
                         F.col("uQueueId").alias("queueId"),
                         F.col("uQueueOffset").alias("queueOffset"))
        txn = F.col("sysFlag").bitwiseAND(TRANSACTION_TYPE_MASK)
        lacking = (m.filter(~txn.isin(*NOT_IN_CONSUME_QUEUE))
                   .join(units, [*_KEYS, "topic", "queueId", "queueOffset"], "left_anti")
                   .join(qmin, ["store", "topic", "queueId"], "left")
                   .filter(F.col("minOffset").isNull()
                           | (F.col("queueOffset") >= F.col("minOffset"))))
        parts.append(lacking.select(*_finding(
            CQ_MISSING, F.col("file"), F.col("fileOffset"),
            F.format_string("message %s/%d@%d (%d bytes) has no consume-queue unit",
                            F.col("topic"), F.col("queueId"), F.col("queueOffset"),
                            F.col("storeSize")), here)))
    if index is not None:
        entries = index.select(*_KEYS, "file", "fileOffset", "entry", "keyHash")
        parts.append(entries.join(m.select(*_KEYS), _KEYS, "left_anti")
                     .join(starts, "store", "left").filter(known).select(*_finding(
                         INDEX_DANGLING, F.col("file"), F.col("fileOffset"),
                         F.format_string("entry %d (keyHash %d) -> commitlog offset %d: no "
                                         "message starts there", F.col("entry"),
                                         F.col("keyHash"), here), here)))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def commitlog_starts(spark: SparkSession, starts: Mapping[str, int | None]) -> DataFrame:
    """(store, clMin): the commitlog offset of each store's first commitlog file."""
    schema = StructType([StructField("store", StringType(), False),
                         StructField("clMin", LongType(), True)])
    return spark.createDataFrame([(s, v) for s, v in starts.items()], schema)


def integrity(
    rows: DataFrame,
    records: DataFrame,
    cl_start: DataFrame,
    cq: DataFrame | None = None,
    index: DataFrame | None = None,
    extra: DataFrame | None = None,
) -> DataFrame:
    """All integrity findings (FINDING_SCHEMA), ordered by store, file and offset.

    ``rows``: the rare rows of the commitlog pass (:func:`mqtool.spark.audits.fact_rows`:
    unreadable regions, BODYCRC failures); ``records``: the commitlog's records (their key
    columns: the cross-file check's own pass, nothing cached)."""
    parts = [unreadable_regions(rows), crc_failures(rows)]
    if cq is not None or index is not None:
        parts.append(cross_file(messages(records), cq, index, cl_start))
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
