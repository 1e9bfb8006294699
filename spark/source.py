"""Spark Python data sources over store directories (imports pyspark: import lazily).

``spark.read.format("mqtool").option("table", ...).option("stores", json).load()`` gives:

- ``table=records``: every commitlog record (:data:`~mqtool.spark.schema.RECORD_SCHEMA`):
  messages, BLANK records and unreadable regions; :func:`messages` keeps the messages.
- ``table=consumequeue``: every written consume-queue unit (``CQ_SCHEMA``).
- ``table=index``: every used index entry (``INDEX_SCHEMA``).

The planner (:meth:`MqtoolReader.partitions`) cuts the stores into splits
(:mod:`mqtool.spark.splits`); executors decode them with the module-level functions of
:mod:`mqtool.spark.decode` and hand Arrow record batches straight to Spark. Executors open the
store files by path: on a cluster the stores must be on a filesystem every executor sees at
the same path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqtool.spark import auxfiles, decode, splits
from mqtool.spark.schema import (
    CQ_SCHEMA,
    INDEX_SCHEMA,
    RECORD_SCHEMA,
    record_schema,
    spark_schema,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

SOURCE_NAME = "mqtool"
TABLES = {
    "records": (RECORD_SCHEMA, splits.KIND_COMMITLOG),
    "consumequeue": (CQ_SCHEMA, splits.KIND_CONSUMEQUEUE),
    "index": (INDEX_SCHEMA, splits.KIND_INDEX),
}


class SplitsPartition(InputPartition):
    """One Spark partition: a list of splits decoded one after the other."""

    def __init__(self, value: list[splits.Split]) -> None:
        super().__init__(value)
        self.value = value


def read_splits(
    table: str,
    parts: Sequence[splits.Split],
    *,
    check_crc: bool = True,
    columns: frozenset[str] | None = None,
    properties_for: tuple[str, ...] = (),
) -> Iterator[pa.RecordBatch]:
    """Decode ``parts`` into record batches of ``table``'s schema (runs in executors)."""
    names = record_schema(columns).names
    for s in parts:
        if table == "records":
            batches = decode.decode_commitlog_range(
                s.path, store=s.store, name=s.name, file_start=s.base, start=s.start,
                end=s.end, check_crc=check_crc, columns=columns, properties_for=properties_for,
            )
            if columns is None:
                yield from batches
            else:
                for b in batches:
                    yield b.select(names)
        elif table == "consumequeue":
            yield from auxfiles.decode_cq_file(
                s.path, store=s.store, name=s.name, topic=s.topic, queue_id=s.queue_id,
                base=s.base,
            )
        else:
            yield from auxfiles.decode_index_file(s.path, store=s.store, name=s.name)


class MqtoolReader(DataSourceReader):
    """Plans splits on the driver side, decodes them in executors."""

    def __init__(self, options: dict[str, str]) -> None:
        self.table = options.get("table", "records")
        self.stores: list[str] = json.loads(options["stores"])
        self.split_size = int(options.get("splitSize", splits.DEFAULT_SPLIT_SIZE))
        self.partition_bytes = int(options.get("partitionBytes", splits.DEFAULT_PARTITION_BYTES))
        self.check_crc = options.get("checkCrc", "true").lower() == "true"
        cols = options.get("columns", "")
        self.columns = frozenset(c for c in cols.split(",") if c) if cols else None
        self.properties_for = tuple(p for p in options.get("propertiesFor", "").split(",") if p)
        topics = options.get("topics")
        self.topics = None if topics is None else frozenset(json.loads(topics))

    def partitions(self) -> list[SplitsPartition]:
        kind = TABLES[self.table][1]
        planned = splits.plan_splits(
            self.stores, kind, split_size=self.split_size, topics=self.topics
        )
        packed = splits.pack(planned, self.partition_bytes)
        return [SplitsPartition(p) for p in packed] or [SplitsPartition([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SplitsPartition)
        yield from read_splits(
            self.table, partition.value, check_crc=self.check_crc, columns=self.columns,
            properties_for=self.properties_for,
        )


class MqtoolDataSource(DataSource):
    """``format("mqtool")``: records, consume-queue units or index entries of store roots."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        table = str(self.options.get("table", "records"))
        cols = str(self.options.get("columns", ""))
        if table == "records" and cols:
            return spark_schema(record_schema(frozenset(c for c in cols.split(",") if c)))
        return spark_schema(TABLES[table][0])

    def reader(self, schema: StructType) -> MqtoolReader:
        return MqtoolReader(dict(self.options))


def register(spark: SparkSession) -> None:
    """Make ``format("mqtool")`` known to this session (idempotent)."""
    spark.dataSource.register(MqtoolDataSource)


def load(
    spark: SparkSession,
    stores: Sequence[str],
    table: str,
    *,
    split_size: int = splits.DEFAULT_SPLIT_SIZE,
    partition_bytes: int = splits.DEFAULT_PARTITION_BYTES,
    check_crc: bool = True,
    columns: Sequence[str] | None = None,
    properties_for: Sequence[str] = (),
    topics: Sequence[str] | None = None,
) -> DataFrame:
    """The DataFrame of ``table`` (``records``, ``consumequeue``, ``index``) over ``stores``.

    For ``records``, ``columns`` limits the message columns the executors compute and hand
    over (the schema is RECORD_SCHEMA projected on them, see
    :func:`~mqtool.spark.schema.record_schema`) and ``properties_for`` computes
    ``properties`` only for topics with those prefixes: a narrow, faster pass for the audits.
    For ``consumequeue``, ``topics`` reads the queues of those topics only.
    """
    register(spark)
    options: dict[str, Any] = {
        "table": table,
        "stores": json.dumps([str(s) for s in stores]),
        "splitSize": str(split_size),
        "partitionBytes": str(partition_bytes),
        "checkCrc": "true" if check_crc else "false",
        "columns": ",".join(columns or ()),
        "propertiesFor": ",".join(properties_for),
    }
    if topics is not None:
        options["topics"] = json.dumps(sorted(set(topics)))
    return spark.read.format(SOURCE_NAME).options(**options).load()
