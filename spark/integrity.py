"""The integrity audit of ``mqtool scan`` (imports pyspark): damage inside each file and
between the files of a store.

Within a file: unreadable commitlog regions and BODYCRC failures (from the commitlog pass).
Between files, by two joins on (store, commitLogOffset) of the messages' key columns with the
consume-queue units and the index entries (:func:`cross_file`): units or index entries that
point at no message (``cq-dangling``, ``index-dangling``), at another message than their own
(``cq-mismatch``), and messages that lack their unit (``cq-missing``). The small sides (where
each store's commitlog starts, each queue's first offset) are broadcast. Findings are rows of
the one
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
    kind: str, file: Column, offset: Column, detail: Column, phy: Column | None = None,
    kind_col: Column | None = None,
) -> list[Column]:
    """The FINDING_SCHEMA columns of a :class:`~mqtool.formats.errors.Finding` of ``kind``
    (a registered name: checked here, on the driver; ``kind_col``: a column holding one of
    the registered names, ``kind`` or others the caller checked)."""
    if kind not in FINDING_KINDS:
        raise ValueError(f"unknown finding kind {kind!r}")
    return [
        F.col("store"),
        F.lit(str(Severity.ERROR)).alias("severity"),
        (F.lit(kind) if kind_col is None else kind_col).alias("kind"),
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
    """Consume-queue and index findings from two joins of the messages' key columns.

    The units and the index entries ("pointers") are unioned and left-joined with the messages
    on (store, commitLogOffset): a pointer with no message there is ``cq-dangling`` or
    ``index-dangling``, a unit at another message than its own is ``cq-mismatch``; the units
    that match their message exactly are anti-joined with the messages: a message left over
    lacks its unit (``cq-missing``). (Spark's sort-merge joins, which spill: a shuffled hash
    join built on the messages ran out of memory on a 2 GiB store in a 1 GiB heap.)

    ``cl_start`` (store, clMin): where each store's commitlog starts; units and entries below
    it are not findings (RocketMQ deletes commitlog files before the consume queues and index
    files that point into them). Not expected in a consume queue (so never ``cq-missing``):
    transaction PREPARED and ROLLBACK records, and messages below their queue's first unit.
    """
    m = msgs.select(*_KEYS, "topic", "queueId", "queueOffset", "storeSize", "sysFlag", "file",
                    "fileOffset")
    here = F.col("commitLogOffset")
    # inside the commitlog files, or impossible (a negative offset is never history)
    known = F.col("clMin").isNull() | (here >= F.col("clMin")) | (here < 0)
    pointers: list[DataFrame] = []
    if cq is not None:
        pointers.append(cq.select(
            *_KEYS, F.lit(CQ_DANGLING).alias("pKind"), F.col("file").alias("pFile"),
            F.col("fileOffset").alias("pFileOffset"), F.col("topic").alias("pTopic"),
            F.col("queueId").alias("pQueueId"), F.col("queueOffset").alias("pQueueOffset"),
            F.col("storeSize").alias("pSize"), F.lit(None).cast("int").alias("pEntry"),
            F.lit(None).cast("int").alias("pKeyHash"),
        ))
    if index is not None:
        pointers.append(index.select(
            *_KEYS, F.lit(INDEX_DANGLING).alias("pKind"), F.col("file").alias("pFile"),
            F.col("fileOffset").alias("pFileOffset"), F.lit(None).cast("string").alias("pTopic"),
            F.lit(None).cast("int").alias("pQueueId"),
            F.lit(None).cast("long").alias("pQueueOffset"), F.lit(None).cast("int").alias("pSize"),
            F.col("entry").alias("pEntry"), F.col("keyHash").alias("pKeyHash"),
        ))
    pts = pointers[0]
    for p in pointers[1:]:
        pts = pts.unionByName(p)
    pm = pts.join(m, _KEYS, "left")
    is_unit = F.col("pKind") == F.lit(CQ_DANGLING)
    has_m = F.col("file").isNotNull()  # (every message has its file)
    exact = ((F.col("pTopic") == F.col("topic")) & (F.col("pQueueId") == F.col("queueId"))
             & (F.col("pQueueOffset") == F.col("queueOffset")))
    where = F.format_string("%s/%d@%d -> commitlog offset %d", F.col("pTopic"),
                            F.col("pQueueId"), F.col("pQueueOffset"), here)
    dangling_detail = F.when(
        is_unit, F.concat(where, F.lit(": no message starts there"))
    ).otherwise(F.format_string("entry %d (keyHash %d) -> commitlog offset %d: no message "
                                "starts there", F.col("pEntry"), F.col("pKeyHash"), here))
    parts = [pm.filter(~has_m).join(F.broadcast(cl_start), "store", "left").filter(known)
             .select(*_finding(CQ_DANGLING, F.col("pFile"), F.col("pFileOffset"),
                               dangling_detail, here, kind_col=F.col("pKind")))]
    if cq is not None:
        parts.append(pm.filter(is_unit & has_m & (~exact | (F.col("pSize") != F.col("storeSize"))))
                     .select(*_finding(
                         CQ_MISMATCH, F.col("pFile"), F.col("pFileOffset"),
                         F.concat(where, F.format_string(
                             " (size %d): the message there is %s/%d@%d (size %d)",
                             F.col("pSize"), F.col("topic"), F.col("queueId"),
                             F.col("queueOffset"), F.col("storeSize"))), here)))
        # a message below its queue's first unit: the queue was cut, not lost
        qmin = F.broadcast(queue_offsets(cq).select("store", "topic", "queueId", "minOffset"))
        matched = pm.filter(is_unit & has_m & exact).select(*_KEYS)
        txn = F.col("sysFlag").bitwiseAND(TRANSACTION_TYPE_MASK)
        lacking = (m.join(matched, _KEYS, "left_anti")
                   .filter(~txn.isin(*NOT_IN_CONSUME_QUEUE))
                   .join(qmin, ["store", "topic", "queueId"], "left")
                   .filter(F.col("minOffset").isNull()
                           | (F.col("queueOffset") >= F.col("minOffset"))))
        parts.append(lacking.select(*_finding(
            CQ_MISSING, F.col("file"), F.col("fileOffset"),
            F.format_string("message %s/%d@%d (%d bytes) has no consume-queue unit",
                            F.col("topic"), F.col("queueId"), F.col("queueOffset"),
                            F.col("storeSize")), here)))
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
