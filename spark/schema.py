"""The tables ``mqtool scan`` produces, defined once (as Arrow schemas).

The executors build Arrow record batches of exactly these schemas; the Spark schemas are
derived from them (:func:`spark_schema`), so the two can never drift apart. Field names and value
shapes are those of the JSON contracts of ``mqtool messages --jsonl`` and ``mqtool cq --jsonl``
(:mod:`mqtool.jsonview`), plus where each row comes from (``store``, ``file``, ``fileOffset``).

``MESSAGE_FIELDS`` mirrors :class:`mqtool.formats.commitlog.CommitLogMessage` (plus its derived
properties ``properties``, ``tags``, ``keys``, ``uniq_key``, ``offset_msg_id``, ``crc_ok`` and
the place of the record: ``store``, ``file``, ``fileOffset``). The body itself is not a column
(``bodyLength`` and ``bodyCRC`` are); ``propertiesRaw`` keeps the exact stored string.

Importing this module needs pyarrow only, never pyspark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from mqtool.formats.errors import Finding

# --- commitlog records ----------------------------------------------------------------------
MESSAGE_FIELDS: list[pa.Field] = [
    pa.field("store", pa.string(), False),  # store root as given to the scan
    pa.field("file", pa.string(), False),  # "commitlog/<20-digit start offset>"
    pa.field("fileOffset", pa.int64(), False),  # byte position of the record in its file
    pa.field("commitLogOffset", pa.int64(), False),  # PHYSICALOFFSET (= file start + fileOffset)
    pa.field("storeSize", pa.int32(), False),  # TOTALSIZE
    pa.field("magic", pa.string(), False),  # "0xdaa320a7" (V1) / "0xdaa320ab" (V2)
    pa.field("topic", pa.string(), False),
    pa.field("queueId", pa.int32(), False),
    pa.field("queueOffset", pa.int64(), False),
    pa.field("flag", pa.int32(), False),
    pa.field("sysFlag", pa.int32(), False),
    pa.field("bodyCRC", pa.int32(), False),
    pa.field("bornTimestamp", pa.int64(), False),  # epoch ms
    pa.field("bornHost", pa.string(), False),  # "1.2.3.4:port" or "[v6]:port"
    pa.field("storeTimestamp", pa.int64(), False),  # epoch ms
    pa.field("storeHost", pa.string(), False),
    pa.field("reconsumeTimes", pa.int32(), False),
    pa.field("preparedTransactionOffset", pa.int64(), False),
    pa.field("bodyLength", pa.int32(), False),  # as stored (compressed length if compressed)
    pa.field("propertiesRaw", pa.string(), False),  # the exact stored string
    pa.field("properties", pa.map_(pa.string(), pa.string()), False),  # last duplicate wins
    pa.field("tags", pa.string(), True),
    pa.field("keys", pa.string(), True),
    pa.field("uniqKey", pa.string(), True),
    pa.field("offsetMsgId", pa.string(), False),
    pa.field("crcOk", pa.bool_(), True),  # null when the scan was told not to check CRCs
    pa.field("compressionType", pa.string(), True),  # ZLIB / LZ4 / ZSTD, null if not compressed
]
MESSAGE_SCHEMA = pa.schema(MESSAGE_FIELDS)
"""One row per message record (the ``messages`` table and view)."""

RECORD_KIND_MESSAGE = "msg"
RECORD_KIND_BLANK = "blank"
RECORD_KIND_UNREADABLE = "unreadable"
RECORD_KIND_DEFERRED = "deferred"
"""Only inside the Java reader's output (never in a table mqtool shows): a byte range the
Java record loop did not accept, handed to the Python decoder (:mod:`mqtool.spark.source`)."""

RECORD_SCHEMA = pa.schema(
    [
        pa.field("recordType", pa.string(), False),  # msg | blank | unreadable
        pa.field("detail", pa.string(), True),  # what was found, for non-msg rows
        *(f.with_nullable(True) for f in MESSAGE_FIELDS),
    ]
)
"""What the commitlog decoder emits: messages plus BLANK records and unreadable regions.

For a ``blank`` row ``commitLogOffset``/``fileOffset`` are the BLANK record's place and
``storeSize`` its TOTALSIZE; for an ``unreadable`` row they are the start of the region and
its length; the message columns are null.
"""



def record_schema(columns: frozenset[str] | None = None) -> pa.Schema:
    """RECORD_SCHEMA, or its projection on ``columns`` (recordType and detail always kept)."""
    if columns is None:
        return RECORD_SCHEMA
    return pa.schema(
        [f for f in RECORD_SCHEMA if f.name in ("recordType", "detail") or f.name in columns]
    )


# --- consume queues -------------------------------------------------------------------------
CQ_SCHEMA = pa.schema(
    [
        pa.field("store", pa.string(), False),
        pa.field("file", pa.string(), False),  # "consumequeue/<topic>/<qid>/<20 digits>"
        pa.field("fileOffset", pa.int64(), False),
        pa.field("topic", pa.string(), False),
        pa.field("queueId", pa.int32(), False),
        pa.field("queueOffset", pa.int64(), False),  # logical offset = absolute byte pos / 20
        pa.field("commitLogOffset", pa.int64(), False),
        pa.field("storeSize", pa.int32(), False),
        pa.field("tagsCode", pa.int64(), False),  # deliver time (ms) in SCHEDULE_TOPIC_XXXX
    ]
)
"""One row per written consume-queue unit (:class:`mqtool.formats.consumequeue.CqEntry`)."""

# --- index files ----------------------------------------------------------------------------
INDEX_SCHEMA = pa.schema(
    [
        pa.field("store", pa.string(), False),
        pa.field("file", pa.string(), False),  # "index/<yyyyMMddHHmmssSSS>"
        pa.field("fileOffset", pa.int64(), False),
        pa.field("entry", pa.int32(), False),  # entry number (1 .. indexCount-1)
        pa.field("keyHash", pa.int32(), False),
        pa.field("commitLogOffset", pa.int64(), False),  # phyOffset
        pa.field("timeDiff", pa.int32(), False),  # seconds since beginTimestamp
        pa.field("prevIndex", pa.int32(), False),
        pa.field("beginTimestamp", pa.int64(), False),  # of the file's header (epoch ms)
    ]
)
"""One row per used index entry (:class:`mqtool.formats.indexfile.IndexEntry`)."""

# --- integrity findings ---------------------------------------------------------------------
FINDING_SCHEMA = pa.schema(
    [
        pa.field("store", pa.string(), False),
        pa.field("severity", pa.string(), False),  # error / warning / info
        pa.field("kind", pa.string(), False),  # a name in formats.errors.FINDING_KINDS
        pa.field("file", pa.string(), False),  # relative to the store root
        pa.field("offset", pa.int64(), True),  # byte offset inside ``file``
        pa.field("detail", pa.string(), False),
        pa.field("expected", pa.string(), True),
        pa.field("found", pa.string(), True),
        pa.field("phy", pa.int64(), True),  # the commitlog position concerned, if any
    ]
)
"""One row per integrity finding (the ``integrity`` audit): the fields of
:class:`mqtool.formats.errors.Finding` plus the store (:func:`finding_row`,
:func:`finding_of`)."""


def finding_row(store: str, finding: Finding) -> dict[str, Any]:
    """A :class:`~mqtool.formats.errors.Finding` of ``store`` as a FINDING_SCHEMA row."""
    return {"store": store, **{k: finding.to_json()[k] for k in FINDING_SCHEMA.names[1:]}}


def finding_of(row: Mapping[str, Any]) -> Finding:
    """The :class:`~mqtool.formats.errors.Finding` a FINDING_SCHEMA row carries."""
    from mqtool.formats.errors import Finding, Severity

    return Finding(
        row["kind"], row["file"], row["offset"], row["detail"],
        severity=Severity(row["severity"]), expected=row["expected"], found=row["found"],
        phy=row["phy"],
    )


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark ``StructType`` of an Arrow schema above (imports pyspark)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    result: StructType = from_arrow_schema(schema)
    return result
