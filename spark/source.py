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

import dataclasses
import json
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqtool.spark import auxfiles, splits
from mqtool.spark.schema import (
    CQ_SCHEMA,
    INDEX_SCHEMA,
    RECORD_SCHEMA,
    record_schema,
    spark_schema,
)

if TYPE_CHECKING:
    from pyspark import SparkContext
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
    # the commitlog decoder's kernel is compiled code (numba): loaded where a split is decoded,
    # not by every driver that plans a scan (the Java reader's scans never load it)
    from mqtool.spark import decode

    names = record_schema(columns).names
    for s in parts:
        if table == "records":
            batches = decode.decode_commitlog_range(
                s.path, store=s.store, name=s.name, file_start=s.base, start=s.start,
                end=s.end, check_crc=check_crc, columns=columns, properties_for=properties_for,
                chain=s.chain or s.start == 0,
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

    def __init__(self, given: dict[str, str]) -> None:
        # Spark hands data source options over with lower-cased keys: read them as such
        options = {k.lower(): v for k, v in given.items()}
        self.table = options.get("table", "records")
        self.stores: list[str] = json.loads(options["stores"])
        self.split_size = int(options.get("splitsize", splits.DEFAULT_SPLIT_SIZE))
        given_bytes = int(options.get("partitionbytes", 0))  # 0: one wave over the slots
        self.partition_bytes = given_bytes or None
        self.slots = int(options.get("slots", 1))
        self.check_crc = options.get("checkcrc", "true").lower() == "true"
        cols = options.get("columns", "")
        self.columns = frozenset(c for c in cols.split(",") if c) if cols else None
        self.properties_for = tuple(p for p in options.get("propertiesfor", "").split(",") if p)
        topics = options.get("topics")
        self.topics = None if topics is None else frozenset(json.loads(topics))
        ranges = options.get("ranges")
        self.ranges = None if ranges is None else [splits.Split(**r) for r in json.loads(ranges)]

    def partitions(self) -> list[SplitsPartition]:
        if self.ranges is not None:  # ranges the Java reader handed over
            packed_ranges = splits.pack_for(self.ranges, self.partition_bytes, self.slots)
            return [SplitsPartition(p) for p in packed_ranges] or [SplitsPartition([])]
        kind = TABLES[self.table][1]
        planned = splits.plan_splits(
            self.stores, kind, split_size=self.split_size, topics=self.topics
        )
        packed = splits.pack_for(planned, self.partition_bytes, self.slots)
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
    partition_bytes: int | None = None,
    check_crc: bool = True,
    columns: Sequence[str] | None = None,
    properties_for: Sequence[str] = (),
    topics: Sequence[str] | None = None,
    ranges: Sequence[splits.Split] | None = None,
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
        "partitionBytes": str(partition_bytes or 0),
        "slots": str(spark.sparkContext.defaultParallelism),
        "checkCrc": "true" if check_crc else "false",
        "columns": ",".join(columns or ()),
        "propertiesFor": ",".join(properties_for),
    }
    if topics is not None:
        options["topics"] = json.dumps(sorted(set(topics)))
    if ranges is not None:
        options["ranges"] = json.dumps([dataclasses.asdict(r) for r in ranges])
    return spark.read.format(SOURCE_NAME).options(**options).load()


# --- the commitlog through the Java reader ------------------------------------------------------
JAVA_SOURCE = "mqtool.spark.CommitlogSource"
"""The DataSource V2 class of ``spark/java`` (jar built by ``make dev``, put on the session by
:func:`mqtool.spark.session.get_session`)."""


def java_reader_on(sc: SparkContext) -> bool:
    """Whether this context's JVM has mqtool's Java commitlog reader (its jar is on
    ``spark.jars``)."""
    from mqtool.spark.session import java_reader_jar

    jar = java_reader_jar()
    if jar is None:
        return False
    return str(jar) in sc.getConf().get("spark.jars", "")


def _commitlog_planned(stores: Sequence[str], split_size: int
                       ) -> tuple[list[splits.Split], dict[str, int]]:
    """The commitlog splits of ``stores`` the Java reader reads (those in a file's empty tail
    hold nothing) and each file's data end (:func:`mqtool.spark.splits.data_end`)."""
    planned = splits.plan_splits(stores, splits.KIND_COMMITLOG, split_size=split_size)
    ends: dict[str, int] = {}
    kept = []
    for s in planned:
        if s.path not in ends:
            ends[s.path] = splits.data_end(s.path, s.file_size)
        if s.start == 0 or s.start < ends[s.path]:  # splits in a file's empty tail hold nothing
            kept.append(s)
    return kept, ends


def _commitlog_lines(sc: SparkContext, stores: Sequence[str], split_size: int,
                     partition_bytes: int | None) -> str | None:
    """The Java reader's "splits" option for the commitlog of ``stores`` (None when the names
    cannot be handed over)."""
    kept, ends = _commitlog_planned(stores, split_size)
    return _split_lines(
        splits.pack_for(kept, partition_bytes, sc.defaultParallelism),
        lambda s: (s.path, s.store, s.name, s.base, s.start, s.end, ends[s.path]),
    )


def java_reads(sc: SparkContext, stores: Sequence[str],
               split_size: int = splits.DEFAULT_SPLIT_SIZE,
               partition_bytes: int | None = None) -> bool:
    """Whether the Java reader reads the commitlog of ``stores`` (:func:`java_records`,
    :func:`java_facts`): the context has it and the store names can be handed over."""
    return java_reader_on(sc) and _commitlog_lines(
        sc, stores, split_size, partition_bytes) is not None


def java_records(
    spark: SparkSession, stores: Sequence[str], *, columns: Sequence[str] | None = None,
    check_crc: bool = True, properties_for: Sequence[str] = (),
    split_size: int = splits.DEFAULT_SPLIT_SIZE,
    partition_bytes: int | None = None,
) -> DataFrame | None:
    """The Java reader's own output for the commitlog of ``stores``, ``deferred`` rows
    included (None when the names cannot be handed over). :func:`records` hands the deferred
    ranges to the Python decoder; a caller that finds them itself passes them as ``handed``."""
    lines = _commitlog_lines(spark.sparkContext, stores, split_size, partition_bytes)
    if lines is None:
        return None  # names the line format cannot carry: the Python source reads it
    schema = spark_schema(record_schema(frozenset(columns) if columns else None))
    return (
        spark.read.format(JAVA_SOURCE)
        .option("schema", schema.json())
        .option("splits", lines)
        .option("checkCrc", "true" if check_crc else "false")
        .option("propertiesFor", ",".join(properties_for))
        .load()
    )


def java_facts(
    sc: SparkContext, stores: Sequence[str], rules: Mapping[str, Any], *,
    check_crc: bool = True, split_size: int = splits.DEFAULT_SPLIT_SIZE,
    partition_bytes: int | None = None,
) -> list[dict[str, Any]] | None:
    """:func:`mqtool.spark.audits.message_facts`' rows over the commitlog of ``stores`` (what
    :func:`java_records` reads), computed by ``FactsJob.java`` in one Spark job with no SQL
    plan: the reader folds each record as it accepts it (``rules``:
    :func:`mqtool.spark.audits.fact_rules`). None when the names cannot be handed over."""
    from mqtool.spark.audits import java_fact_rows

    lines = _commitlog_lines(sc, stores, split_size, partition_bytes)
    if lines is None:
        return None
    reader = {"checkCrc": "true" if check_crc else "false"}
    answer = _facts_job(sc).run(
        sc._jsc, lines,  # noqa: SLF001 - the JavaSparkContext
        json.dumps(reader), json.dumps(dict(rules)))
    return java_fact_rows(answer)


def _split_lines(parts: list[list[splits.Split]], fields_of: Any) -> str | None:
    """The Java reader's "splits" option: one tab-separated line per split, partition first
    (None when a name holds a tab or a newline: the Python source reads those stores)."""
    lines: list[str] = []
    for i, part in enumerate(parts):
        for s in part:
            fields = (str(i), *map(str, fields_of(s)))
            if any("\t" in f or "\n" in f for f in fields):
                return None
            lines.append("\t".join(fields))
    return "\n".join(lines)


def _aux_planned(stores: Sequence[str], table: str, topics: Collection[str] | None
                 ) -> tuple[list[splits.Split], Any]:
    """The splits of ``table`` (``consumequeue`` or ``index``) of ``stores`` as the driver
    plans them, and the fields of each one's line in the Java reader's "splits" option.

    Consume-queue files are read whole, index files as the span of their used entries
    (:func:`~mqtool.spark.auxfiles.index_span`, the header and geometry read here); the JVM
    reads the fixed 20-byte units."""
    kind = TABLES[table][1]
    planned = splits.plan_splits(stores, kind, topics=topics)
    if table == "index":
        spans = []
        for s in planned:
            span = auxfiles.index_span(s.path, s.name)
            if span is not None:
                start, end, begin = span
                spans.append(dataclasses.replace(s, start=start, end=end, base=begin))

        def index_fields(s: splits.Split) -> tuple[Any, ...]:
            return (s.path, s.store, s.name, 0, s.start, s.end, s.base)
        return spans, index_fields

    def queue_fields(s: splits.Split) -> tuple[Any, ...]:
        return (s.path, s.store, s.name, s.base, s.start, s.end, s.queue_id, s.topic)
    return planned, queue_fields


def _aux_lines(sc: SparkContext, stores: Sequence[str], table: str,
               topics: Collection[str] | None, partition_bytes: int | None) -> str | None:
    """The Java reader's "splits" option for ``table`` (``consumequeue`` or ``index``) of
    ``stores`` (None when the names cannot be handed over): :func:`_aux_planned`'s splits."""
    planned, fields_of = _aux_planned(stores, table, topics)
    return _split_lines(
        splits.pack_for(planned, partition_bytes, sc.defaultParallelism),
        fields_of,
    )


def java_aux(
    spark: SparkSession, stores: Sequence[str], table: str, *,
    topics: Collection[str] | None = None,
    partition_bytes: int | None = None,
) -> DataFrame | None:
    """``table`` (``consumequeue`` or ``index``) through the Java reader, the same rows as
    :func:`load` (None when the names cannot be handed over: use :func:`load`)."""
    lines = _aux_lines(spark.sparkContext, stores, table, topics, partition_bytes)
    if lines is None:
        return None
    return (
        spark.read.format(JAVA_SOURCE)
        .option("schema", spark_schema(TABLES[table][0]).json())
        .option("table", table)
        .option("splits", lines)
        .option("batchRows", "16384")
        .load()
    )


def java_aux_facts(
    sc: SparkContext, stores: Sequence[str], table: str, rules: Mapping[str, Any], *,
    topics: Collection[str] | None = None, partition_bytes: int | None = None,
) -> Any:
    """The consume queue's facts (``table`` "consumequeue": the rows of
    :func:`mqtool.spark.audits.queue_facts`, ``rules``: :func:`~mqtool.spark.audits.
    queue_rules`) or the index's tallies ("index": :func:`mqtool.spark.integrity.
    index_tallies`' answer, ``rules``: :func:`~mqtool.spark.integrity.index_tally_rules`),
    computed by ``FactsJob.java`` in one Spark job over the Java reader with no SQL plan.
    None when the names cannot be handed over."""
    lines = _aux_lines(sc, stores, table, topics, partition_bytes)
    if lines is None:
        return None
    job = _facts_job(sc)
    jsc = sc._jsc  # noqa: SLF001 - pyspark's handle on the JavaSparkContext
    if table == "index":
        return json.loads(job.index(jsc, lines, json.dumps(dict(rules))))
    return _queue_rows(json.loads(job.queues(jsc, lines, json.dumps(dict(rules)))))


COST_PER_BYTE = {splits.KIND_COMMITLOG: 1, splits.KIND_CONSUMEQUEUE: 4, splits.KIND_INDEX: 2}
"""What a byte of each kind of file costs a task of :func:`java_scan_facts`, in commitlog
bytes (a consume-queue unit or index entry is hashed whole; a commitlog record's body is only
checksummed): how its tasks are balanced (bench/scan's store: its consume queue takes about 4
times, its index 2 times the CPU per byte of its commitlog)."""


def balanced(items: Sequence[tuple[splits.Split, int]], partition_bytes: int | None,
             slots: int) -> list[list[splits.Split]]:
    """``items`` (a split and its cost) in partitions of about ``partition_bytes`` of cost each
    (None: :func:`mqtool.spark.splits.partition_size` of the whole cost over ``slots``: one
    wave of tasks), the costliest first into the partition that costs least so far (so the
    tasks end together); each partition's splits in ``items``' order."""
    total = sum(w for _, w in items)
    size = partition_bytes or splits.partition_size(total, slots)
    n = max(1, -(-total // max(size, 1)))
    load = [0] * n
    member: list[list[int]] = [[] for _ in range(n)]
    for i in sorted(range(len(items)), key=lambda i: -items[i][1]):
        k = load.index(min(load))
        load[k] += items[i][1]
        member[k].append(i)
    return [[items[i][0] for i in sorted(m)] for m in member if m]


@dataclasses.dataclass(frozen=True)
class ScanPlan:
    """What :func:`java_scan_facts` hands ``FactsJob.java``: each source's "splits" lines
    (the partitions of one job) and rules (JSON; "" leaves the source out), and ``sources``:
    those with a file to read, in commitlog, consumequeue, index order."""

    commitlog: str
    reader: str
    rules: str
    queues: str
    queue_rules: str
    index: str
    index_rules: str
    sources: tuple[str, ...]


def java_scan_plan(
    sc: SparkContext, stores: Sequence[str], rules: Mapping[str, Any], *,
    check_crc: bool = True, queue_rules: Mapping[str, Any] | None = None,
    topics: Collection[str] | None = None, index_rules: Mapping[str, Any] | None = None,
    split_size: int = splits.DEFAULT_SPLIT_SIZE, partition_bytes: int | None = None,
) -> ScanPlan | None:
    """The plan of :func:`java_scan_facts` (no Spark job): the commitlog's splits with
    ``rules`` (:func:`java_facts`), with ``queue_rules`` the consume queue's (of ``topics``
    only when given; :func:`java_aux_facts`), with ``index_rules`` the index's, shared by the
    tasks of one job by their cost (:data:`COST_PER_BYTE`, :func:`balanced`). None when the
    names cannot be handed over."""
    kept, ends = _commitlog_planned(stores, split_size)
    fields: dict[str, Any] = {splits.KIND_COMMITLOG: lambda s: (
        s.path, s.store, s.name, s.base, s.start, s.end, ends[s.path])}
    items = [(s, max(0, min(s.end, ends[s.path]) - s.start)) for s in kept]
    for table, wanted in (("consumequeue", queue_rules), ("index", index_rules)):
        if wanted is not None:
            planned, fields[TABLES[table][1]] = _aux_planned(
                stores, table, topics if table == "consumequeue" else None)
            items += [(s, _held(s) * COST_PER_BYTE[s.kind]) for s in planned]
    parts = balanced(items, partition_bytes, sc.defaultParallelism)
    lines: dict[str, str] = {}
    for kind, fields_of in fields.items():
        got = _split_lines([[s for s in p if s.kind == kind] for p in parts], fields_of)
        if got is None:
            return None  # names the line format cannot carry: the Python source reads them
        lines[kind] = got

    def text(r: Mapping[str, Any] | None) -> str:
        return "" if r is None else json.dumps(dict(r))
    return ScanPlan(
        lines[splits.KIND_COMMITLOG], json.dumps({"checkCrc": "true" if check_crc else "false"}),
        text(rules), lines.get(splits.KIND_CONSUMEQUEUE, ""), text(queue_rules),
        lines.get(splits.KIND_INDEX, ""), text(index_rules),
        tuple(k for k in fields if any(s.kind == k for s, _ in items)))


def _held(s: splits.Split) -> int:
    """The bytes of split ``s`` its file really holds: a consume-queue file is sparse past its
    written units on most filesystems (the broker sizes it, writes it as it goes)."""
    if s.kind != splits.KIND_CONSUMEQUEUE:
        return s.length
    try:
        blocks = os.stat(s.path).st_blocks
    except OSError:
        return s.length  # sizing only: a file that vanished is the reader's to report
    return min(s.length, blocks * 512) if blocks else s.length


def java_scan_facts(sc: SparkContext, plan: ScanPlan) -> dict[str, Any]:
    """:func:`java_facts` (``facts``), and as ``plan`` says :func:`java_aux_facts` of the
    consume queue (``queues``) and of the index (``index``), in **one** Spark job of
    ``FactsJob.java``: every task folds its share of the commitlog splits, the consume-queue
    files and the index files (:func:`java_scan_plan`)."""
    from mqtool.spark.audits import java_fact_rows

    answer = json.loads(_facts_job(sc).scan(
        sc._jsc,  # noqa: SLF001 - the JavaSparkContext
        plan.commitlog, plan.reader, plan.rules, plan.queues, plan.queue_rules, plan.index,
        plan.index_rules))
    out: dict[str, Any] = {"facts": java_fact_rows(answer["facts"])}
    if "queues" in answer:
        out["queues"] = _queue_rows(answer["queues"])
    if "index" in answer:
        out["index"] = answer["index"]
    return out


def _queue_rows(answer: list[Any]) -> list[dict[str, Any]]:
    """``FactsJob.java``'s queues (``[[[store, topic, queueId], {aggregates}], ...]``) as the
    rows :func:`mqtool.spark.audits.queue_facts` collects."""
    return [{"store": k[0], "topic": k[1], "queueId": k[2], **aggregates}
            for k, aggregates in answer]


def _facts_job(sc: SparkContext) -> Any:
    """``mqtool.spark.FactsJob`` of the context's JVM (its jar is on ``spark.jars``)."""
    jvm: Any = sc._jvm  # noqa: SLF001 - pyspark's gateway to the driver JVM
    return jvm.mqtool.spark.FactsJob


def table(
    spark: SparkSession, stores: Sequence[str], name: str, *,
    topics: Collection[str] | None = None,
    split_size: int = splits.DEFAULT_SPLIT_SIZE,
    partition_bytes: int | None = None,
    java: bool | None = None,
) -> DataFrame:
    """The ``consumequeue`` or ``index`` table of ``stores``: through the Java reader when the
    session has it (``java``: None = when available), else the Python data source."""
    if java is not False and (java or java_reader_on(spark.sparkContext)):
        df = java_aux(spark, stores, name, topics=topics, partition_bytes=partition_bytes)
        if df is not None:
            return df
    return load(spark, stores, name, topics=topics, split_size=split_size,
                partition_bytes=partition_bytes)


def deferred_ranges(handed: Sequence[Any]) -> list[splits.Split]:
    """The byte ranges of the Java reader's ``deferred`` rows, as splits for the Python
    decoder (``chain``: a record must start at the range's first byte)."""
    ranges = []
    roots = {st: splits.find_store_root(st) for st in {r["store"] for r in handed}}
    for r in handed:
        path = str((roots[r["store"]] / r["file"]).resolve())
        size = os.path.getsize(path)
        start = int(r["fileOffset"])
        ranges.append(splits.Split(
            splits.KIND_COMMITLOG, r["store"], path, r["file"], int(r["file"].split("/")[-1]),
            start, start + int(r["storeSize"]), size, chain=r["detail"] == "chain",
        ))
    return ranges


def records(
    spark: SparkSession,
    stores: Sequence[str],
    *,
    columns: Sequence[str] | None = None,
    check_crc: bool = True,
    properties_for: Sequence[str] = (),
    split_size: int = splits.DEFAULT_SPLIT_SIZE,
    partition_bytes: int | None = None,
    persist: Any = None,
    java: bool | None = None,
    handed: Sequence[Any] | None = None,
) -> tuple[DataFrame, list[DataFrame]]:
    """The ``records`` table of ``stores`` (as :func:`load`), through the Java reader when the
    session has it (``java``: None = when available), and the DataFrames it persisted.

    The Java reader decodes every record it accepts (the checks of the record kernel) and hands
    every other byte range to the Python decoder (``deferred`` rows: one extra small job over
    those ranges; the damage rule stays in :mod:`mqtool.formats.walker`). ``persist``: a
    ``StorageLevel`` for the Java reader's output (then the deferred ranges are found without a
    second decode pass); the caller unpersists the returned DataFrames. ``handed``: the
    deferred rows (``store``, ``file``, ``fileOffset``, ``storeSize``, ``detail``) when the
    caller found them already (no job to find them).
    """
    from pyspark.sql import functions as F

    from mqtool.spark.schema import RECORD_KIND_DEFERRED

    kw: dict[str, Any] = {
        "check_crc": check_crc, "columns": columns, "properties_for": properties_for,
        "split_size": split_size, "partition_bytes": partition_bytes,
    }
    jdf = None
    if java is not False and (java or java_reader_on(spark.sparkContext)):
        jdf = java_records(spark, stores, **kw)
    if jdf is None:
        df = load(spark, stores, "records", **kw)
        if persist is not None:
            df = df.persist(persist)
            return df, [df]
        return df, []
    cached: list[DataFrame] = []
    if persist is not None:
        jdf = jdf.persist(persist)
        cached.append(jdf)
    kind = F.col("recordType")
    if handed is None:
        handed = jdf.filter(kind == RECORD_KIND_DEFERRED).select(
            "store", "file", "fileOffset", "storeSize", "detail"
        ).collect()
    clean = jdf.filter(kind != RECORD_KIND_DEFERRED)
    if not handed:
        return clean, cached
    ranges = deferred_ranges(handed)
    py = load(spark, stores, "records", ranges=ranges, **kw)
    if persist is not None:
        py = py.persist(persist)
        cached.append(py)
    return clean.unionByName(py), cached
