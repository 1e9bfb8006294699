"""``mqtool scan`` as a library call: decode stores with Spark, run the audits, summarise.
``mqtool scan`` (:mod:`mqtool.cli.scan`) is its command line.

:func:`run_scan` is what the CLI calls; it returns a :class:`ScanResult` whose ``summary`` is
the JSON contract of ``mqtool scan --json``::

    {"queues": [{"store", "topic", "queueId", "count", "bytes", "firstStoreTimestamp",
                 "lastStoreTimestamp", ...}],
     "dlq": [{"store", "group", "count", "originalTopics", "byOriginalTopic"}],
     "retry": [{"store", "group", "reconsumeTimes", "count"}],
     "schedule": [{"store", "delayLevel", "queueId", "pending", "overdue", "delayOffset",
                   "maxOffset", "minOffset", "beyondMax", "nextDeliverTimestamp"}],
     "integrity": [{"store", "kind", "file", "offset", "detail"}],
     "lag": [{"store", "group", "topic", "queueId", "consumerOffset", "maxOffset", "lag"}],
     "pop": [{"store", "group", "topic", "queueId", "popped", "acked", "invisibleChanged",
              "inFlight", "reviveDue", "revived", "invisibleUntil"}],
     "timer": [{"store", "waiting", "byTopic", "nextDue", "overdue", "neverDelivered",
                "byDueMinute", "lastReadTimeMs"}],
     "rate": [{"store", "topic", "bucketStart", "count", "bytes", "perSecond"}],
     "totals": {...}, "stores": [...], "audits": [...], "now": <epoch ms>}

``mqtool scan --json`` adds ``"timings"``: where the command's time went
(:func:`scan_with_spark`; not part of the summary an HTML report embeds).

How the work is shared: one decode pass of the commitlog (the audits' columns only) feeds one
aggregation that makes every per-message audit at once (:func:`mqtool.spark.audits.message_facts`:
small, collected once; the tables are folded from it on the driver, no Spark query per table;
no message row is cached); one aggregation of the consume queue (:func:`~mqtool.spark.audits.
queue_facts`) serves schedule, lag and the integrity audit's queue bounds. The integrity
audit's cross-file check (:func:`mqtool.spark.integrity.cross_file`) is settled by tallies
counted in those two aggregations and in one small aggregation of the index; only a store
whose tallies differ has the commitlog's key columns read again for a shuffle with its units
and index entries. The consume queues and the index are read (by the Java reader when the
session has it) only for the audits that need them. With the Java reader the three
aggregations are one job of ``FactsJob.java`` with no SQL plan, each task folding its share of
the three sources (:func:`mqtool.spark.source.java_scan_facts`; the SQL forms above stay the
rules' definition and the Python data source's path): a clean scan runs 1 Spark job. The POP and
timer audits are no Spark job: the driver reads the revive and timer queues' records, what
``inspect`` reads (:func:`mqtool.backlog.backlogs`), beside the jobs. ``--out``
writes the full ``messages`` table in a further pass; ``--sql`` runs over views of the full
tables (``messages``, ``records``, ``consumequeue``, ``index``) and of every audit result.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from mqtool.formats.errors import Finding, Severity, usage
from mqtool.formats.rules import SCHEDULE_TOPIC
from mqtool.spark import AUDITS, splits
from mqtool.spark.errors import SparkScanError

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession

T = TypeVar("T")

FORMATS = ("parquet", "json")

# The columns of the commitlog the audits need (the cached projection).
AUDIT_COLUMNS = (
    "recordType", "detail", "store", "file", "fileOffset", "commitLogOffset", "storeSize",
    "topic", "queueId", "queueOffset", "sysFlag", "bodyCRC", "bodyLength", "storeTimestamp",
    "reconsumeTimes", "crcOk",
)


@dataclass
class ScanResult:
    """What :func:`run_scan` found: the summary (JSON contract), SQL rows, written paths."""

    summary: dict[str, Any]
    sql_columns: list[str] = field(default_factory=list)
    sql_rows: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    settled: dict[str, Any] = field(default_factory=dict)
    """store -> what the integrity audit's tallies settled without a shuffle
    (:class:`mqtool.spark.integrity.Settled`; empty when the audit did not run)."""
    timings: dict[str, Any] = field(default_factory=dict)
    """Where the audits' time went, in seconds: ``plan`` (the stores' configs, the splits and
    the rules, before the commitlog's job), ``jobs`` (each job from its planning to its
    answer, named by the sources it reads: the Java reader's one job, e.g.
    ``commitlog+consumequeue+index``; on the Python data source's path ``commitlog``,
    ``consumequeue`` and ``index``, run at once; ``backlog``: the POP and timer audits on the
    driver), ``fold`` (after the last job: the tables folded on the driver, the integrity
    audit's checks), ``scan`` (all of it, as ``elapsedSeconds``), ``session`` (a SparkSession
    made on a SparkContext the scan was given, when it needed one). ``--out`` and ``--sql``
    come after.
    :func:`scan_with_spark` adds the start-up's parts."""

    def findings(self) -> list[tuple[str, Finding]]:
        """The integrity audit's findings as ``(store, Finding)`` (empty when it did not run)."""
        from mqtool.spark.schema import finding_of

        return [(r["store"], finding_of(r)) for r in self.summary.get("integrity", [])]


@dataclass
class StoreConfig:
    """The config JSONs of one store the audits use, and what went wrong reading them."""

    delay_offsets: dict[int, int] = field(default_factory=dict)
    consumer_offsets: list[tuple[str, str, int, int]] = field(default_factory=list)
    has_consumer_offsets: bool = False
    findings: list[tuple[str, Finding]] = field(default_factory=list)


def check_scannable(store: str) -> None:
    """A usage error for a path that is no store (:class:`mqtool.store.StoreError`) or a store
    the scan cannot read (:func:`mqtool.spark.splits.unscannable`)."""
    cannot = splits.unscannable(splits.find_store_root(store))
    if cannot:
        raise usage(SparkScanError(
            f"{store}: scan does not read {'; '.join(cannot)}; verify, inspect, cq and "
            "messages read this store"))


def layout_findings(store: str) -> list[tuple[str, Finding]]:
    """Damage visible from names and sizes alone (the driver checks these, no Spark job).

    Unexpected names in commitlog/ (:meth:`mqtool.store.Store.open`), commitlog files that do
    not follow each other (a file missing in the middle), index files whose header, geometry
    or slot table is damaged (verify's check: :func:`index_file_findings`), consume-queue files
    that are empty or not whole 20-byte units.
    """
    from mqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
    from mqtool.store import Store
    from mqtool.store.queue_sources import unread_parts

    out: list[tuple[str, Finding]] = []
    with Store.open(store) as st:
        root, live = st.root, st.live
        out += [(store, f) for f in st.findings]
    out += [(store, f) for f in unread_parts(root)]
    out += [(store, Finding("layout", "consumequeue/", None, what, severity=Severity.WARNING))
            for what in splits.unread_by_scan(root)]
    for a, b in commitlog_gaps(store):
        out.append((store, Finding(
            "layout", b.name, 0,
            f"file starts at {b.base} but the previous one ends at {a.base + a.file_size}",
            phy=b.base,
        )))
    index = splits.index_splits(store, root)
    for s in index:  # a running broker writes its newest file only
        out += [(store, f) for f in index_file_findings(s.path, s.name, live,
                                                        live and s is index[-1])]
    for s in splits.consumequeue_splits(store, root):
        if s.file_size == 0:
            out.append((store, Finding("cq", s.name, 0, "empty consume-queue file (0 bytes)")))
        elif s.file_size % CQ_STORE_UNIT_SIZE:
            whole = s.file_size - s.file_size % CQ_STORE_UNIT_SIZE
            out.append((store, Finding(
                "cq", s.name, whole,
                f"consume-queue file size {s.file_size} is not a multiple of "
                f"{CQ_STORE_UNIT_SIZE}",
            )))
    return out


def index_file_findings(path: str, name: str, store_live: bool, live: bool) -> list[Finding]:
    """Verify's findings of an index file's header and slot table
    (:func:`mqtool.integrity.indexcheck.index_file_findings`; ``live``: the file a running
    broker writes), none for a file verify leaves alone
    (:func:`mqtool.integrity.indexcheck.map_index_file`)."""
    from mqtool.formats.buffers import close_map
    from mqtool.integrity import indexcheck

    buf = indexcheck.map_index_file(Path(path), store_live)
    if buf is None:
        return []
    try:
        reader, found = indexcheck.index_file_findings(buf, name, live=live)
        del reader
        return found
    finally:
        close_map(buf)


def commitlog_gaps(store: str) -> list[tuple[splits.Split, splits.Split]]:
    """Each pair of commitlog files where the second does not start where the first ends (a
    file missing in the middle, or overlapping files): none means every commitlog offset is
    in one file only."""
    files = splits.commitlog_splits(store, splits.find_store_root(store), 1 << 62)
    return [(a, b) for a, b in zip(files, files[1:], strict=False)
            if a.base + a.file_size != b.base]


def load_store_config(store: str) -> StoreConfig:
    """delayOffset.json and the consumer offsets of a store as the broker loads them (``.bak``
    fallback: :func:`mqtool.formats.config.load_config`; the offsets from wherever the broker
    keeps them: :func:`mqtool.store.consumer_offsets.load_consumer_offsets`), findings for
    damaged files."""
    from mqtool.formats.config import load_config
    from mqtool.store.consumer_offsets import load_consumer_offsets

    root = splits.find_store_root(store)
    cfg = StoreConfig(findings=layout_findings(store))
    delay = load_config(root, "delayOffset.json")
    offsets = load_consumer_offsets(Path(root))
    for f in delay.findings + offsets.findings:
        cfg.findings.append((store, f))
    if delay.value is not None:
        cfg.delay_offsets = dict(delay.value.offset_table)
    if offsets.table is not None:
        cfg.has_consumer_offsets = True
        for (topic, group), queues in offsets.table.items():
            if "@" in group:  # "topic@group@broadcast"-style extra keys: not a group offset
                continue
            cfg.consumer_offsets += [(group, topic, q, o) for q, o in queues.items()]
    return cfg


def store_backlogs(stores: Sequence[str], configs: dict[str, StoreConfig], now_ms: int, *,
                   pop: bool, timer: bool) -> dict[str, Any]:
    """The POP and timer audits, on the driver: each store's :func:`mqtool.backlog.backlogs`
    (what ``inspect`` shows) as ``pop`` and ``timer`` rows, and ``findings`` (store, Finding):
    the damage those reads met."""
    from mqtool.backlog import backlogs, revive_offsets
    from mqtool.store import Store

    out: dict[str, Any] = {"findings": []}
    if pop:
        out["pop"] = []
    if timer:
        out["timer"] = []
    for s in stores:
        c = configs[s]
        with Store.open(s) as st:
            known = set(st.findings)  # the layout's, already among the config findings
            b = backlogs(st, revive_offsets(c.consumer_offsets) if c.has_consumer_offsets
                         else None, now_ms, pop=pop, timer=timer)
            out["findings"] += [(s, f) for f in st.findings if f not in known]
        if pop:
            out["pop"] += [{"store": s, **r} for r in b["popInFlight"]]
        if timer:
            out["timer"].append({"store": s, **b["timerBacklog"]})
    return out


def timed_driver(jobs: dict[str, tuple[float, float]], clock: Callable[[], float], name: str,
                 run: Callable[[], T]) -> Callable[[], T]:
    """``run`` with its time kept in ``jobs`` as ``name`` (driver work, no Spark job)."""
    def timed() -> T:
        t = clock()
        try:
            return run()
        finally:
            jobs[name] = (t, clock())
    return timed


def _commitlog_start(store: str) -> int | None:
    """The commitlog offset of the store's first commitlog file (None: no file)."""
    files = splits.commitlog_splits(store, splits.find_store_root(store), 1 << 62)
    return files[0].base if files else None


def _rounded(timings: dict[str, Any]) -> dict[str, Any]:
    return {k: _rounded(v) if isinstance(v, dict) else round(v, 3) for k, v in timings.items()}


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def _write(df: DataFrame, path: Path, fmt: str) -> str:
    df.write.mode("overwrite").format(fmt).save(str(path))
    return str(path)


def run_scan(
    spark: SparkSession | SparkContext,
    stores: Sequence[str],
    *,
    audits: Sequence[str] = AUDITS,
    out: str | Path | None = None,
    fmt: str = "parquet",
    sql: str | None = None,
    now_ms: int | None = None,
    check_crc: bool = True,
    split_size: int = splits.DEFAULT_SPLIT_SIZE,
    partition_bytes: int | None = None,
    rate_bucket_ms: int = 60_000,
    sql_limit: int = 1000,
) -> ScanResult:
    """Decode ``stores`` with ``spark`` and run ``audits``; see the module docstring.

    ``spark``: a SparkSession, or a SparkContext alone: a SparkSession is then made on it only
    for what needs one (``--out``, ``--sql``, the Python data source, a store whose integrity
    tallies differ), and a clean scan by the Java reader makes none."""
    from pyspark import SparkContext, StorageLevel
    from pyspark.errors import AnalysisException
    from pyspark.sql import SparkSession

    from mqtool.spark import audits as A
    from mqtool.spark import integrity as integ
    from mqtool.spark import source
    from mqtool.spark.schema import (
        RECORD_KIND_DEFERRED,
        RECORD_KIND_MESSAGE,
        RECORD_KIND_UNREADABLE,
    )

    sc = spark if isinstance(spark, SparkContext) else spark.sparkContext
    made: list[SparkSession] = []
    made_in: list[float] = []  # seconds
    made_lock = threading.Lock()

    def session() -> SparkSession:
        """The caller's SparkSession, or one made on its SparkContext when first needed."""
        if isinstance(spark, SparkSession):
            return spark
        with made_lock:
            if not made:
                t = clock()
                made.append(SparkSession.builder.getOrCreate())
                made_in.append(clock() - t)
            return made[0]

    unknown = [a for a in audits if a not in AUDITS]
    if unknown:
        raise usage(SparkScanError(
            f"unknown audit(s) {', '.join(unknown)}; known: {', '.join(AUDITS)}"))
    if fmt not in FORMATS:
        raise usage(SparkScanError(f"unknown output format {fmt!r}; use parquet or json"))
    if not stores:
        raise usage(SparkScanError("no store given"))
    stores = [str(s) for s in stores]
    for s in stores:
        check_scannable(s)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    started = time.monotonic()
    clock = time.perf_counter
    t0 = clock()
    jobs: dict[str, tuple[float, float]] = {}  # name -> (start, end)

    @contextmanager
    def job(name: str) -> Iterator[None]:
        """The block's Spark jobs described as ``mqtool scan: <name>`` (the caller's
        description back after it), its time kept."""
        before = sc.getLocalProperty("spark.job.description")
        sc.setJobDescription(f"mqtool scan: {name}")
        t = clock()
        try:
            yield
        finally:
            jobs[name] = (t, clock())
            sc.setJobDescription(before)  # type: ignore[arg-type]  # None: no description

    def timed(name: str, run: Callable[[], T]) -> Callable[[], T]:
        def described() -> T:
            with job(name):
                return run()
        return described

    configs = {s: load_store_config(s) for s in stores}

    opts = {"split_size": split_size, "partition_bytes": partition_bytes}
    want = set(audits)
    # The whole consume queue and the index are read only for the integrity audit (and for
    # --out / --sql); schedule and lag read the queues of the topics they concern.
    full_cq = "integrity" in want or out is not None or sql is not None
    cq_topics: set[str] | None = None
    if not full_cq:
        cq_topics = set()
        if "schedule" in want:
            cq_topics.add(SCHEDULE_TOPIC)
        if "lag" in want:
            cq_topics |= {t for c in configs.values() for _, t, _, _ in c.consumer_offsets}
    # One decode pass for every per-message audit: only the columns they need are computed
    # (the properties only of dead-lettered messages: the DLQ audit reads RETRY_TOPIC), and
    # one aggregation (grouping sets) makes every count of them at once: nothing per message
    # is cached. The integrity audit's cross-file check reads the key columns in a pass of its
    # own (a join needs every key; caching them would make memory grow with the store).
    narrow_cols = [*AUDIT_COLUMNS[2:], "properties"]
    # the integrity audit's tallies settle a clean store's cross-file check without a shuffle
    # (integrity.settle): the messages' side is counted in the same aggregation
    cl_starts = {s: _commitlog_start(s) for s in stores}
    spans = None
    if "integrity" in want:
        narrow_cols += integ.MESSAGE_TALLY_COLUMNS
        spans = integ.index_spans(stores)
    # BODYCRC failures are the integrity audit's findings: no other audit pays for the check
    audit_crc = check_crc and "integrity" in want
    narrow_kw: dict[str, Any] = {
        "check_crc": audit_crc, "columns": narrow_cols, "properties_for": [A.DLQ_PREFIX], **opts,
    }
    cached: list[DataFrame] = []
    # With the Java reader the three aggregations are FactsJob.java's one job (no SQL plan); the
    # DataFrames of the consume queue, the index and the records' key columns are made only
    # for what needs them: a store the tallies do not settle, --out, --sql, a fallback.
    java = source.java_reads(sc, stores, **opts)
    lock = threading.Lock()
    built: dict[str, DataFrame | None] = {}

    def frame(name: str) -> DataFrame | None:
        with lock:
            if name not in built:
                df: DataFrame | None = None
                if name == "consumequeue":  # through the Java reader when the session has it
                    df = source.table(session(), stores, name, topics=cq_topics, **opts)
                    if not java:  # the Python data source alone: its workers read it once
                        df = df.persist(StorageLevel.MEMORY_AND_DISK)
                        cached.append(df)
                elif "integrity" in want or sql:
                    df = source.table(session(), stores, name, **opts)
                built[name] = df
            return built[name]

    if not java:
        frame("consumequeue")
    # Without the Java reader's one job (the Python data source, names it cannot be handed),
    # the consume queue's aggregation (schedule, lag, integrity's bounds and tallies) and the
    # index's tallies are jobs of their own, run beside the commitlog's from two more threads
    # (Spark takes jobs from several; they inherit the caller's job group and other local
    # properties): their planning and their tasks fill the time and the cores the commitlog's
    # job leaves idle. The POP and timer audits run on the driver beside the jobs.
    pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="mqtool-scan")

    def inherit(run: Callable[[], T]) -> Callable[[], T]:
        # the caller's local properties (job group, ...), a copy for each job (that a job's
        # description stays its own)
        jsc = sc._jsc.sc()  # noqa: SLF001 - the JVM's SparkContext
        properties = jsc.getLocalProperties().clone()

        def inherited() -> T:
            jsc.setLocalProperties(properties)
            return run()
        return inherited
    try:
        backlog_job = None
        if want & {"pop", "timer"}:
            backlog_job = pool.submit(timed_driver(jobs, clock, "backlog", lambda: store_backlogs(
                stores, configs, now_ms, pop="pop" in want, timer="timer" in want)))
        cq_delay = {s: c.delay_offsets for s, c in configs.items()}
        unit_rules = integ.unit_tally_rules(cl_starts) if "integrity" in want else None
        # schedule, lag, integrity: the consume queue's facts (none when no queue concerns them)
        read_queues = bool(want & {"schedule", "lag", "integrity"} or full_cq) and (
            cq_topics is None or bool(cq_topics))
        rules = A.fact_rules(rate_bucket_ms,
                             None if spans is None else integ.message_tally_rules(spans))
        # With the Java reader the three aggregations are one job of FactsJob.java (no SQL
        # plan): every task folds its share of the commitlog, the consume queue and the index.
        plan = None if not java else source.java_scan_plan(
            sc, stores, rules, check_crc=audit_crc,
            queue_rules=A.queue_rules(cq_delay, now_ms, unit_rules) if read_queues else None,
            topics=cq_topics,
            index_rules=integ.index_tally_rules(cl_starts) if "integrity" in want else None,
            **opts)
        queues_job = index_job = None
        if plan is None and read_queues:  # the queue's aggregation in a job of its own

            def queue_rows() -> list[dict[str, Any]]:
                if java:  # FactsJob.java: no SQL plan
                    got = source.java_aux_facts(
                        sc, stores, "consumequeue", A.queue_rules(cq_delay, now_ms, unit_rules),
                        topics=cq_topics, partition_bytes=partition_bytes)
                    if got is not None:
                        return list(got)
                unit_t = integ.unit_tallies(cl_starts) if "integrity" in want else None
                return _rows(A.queue_facts(frame("consumequeue"), cq_delay, now_ms, unit_t))

            queues_job = pool.submit(inherit(timed("consumequeue", queue_rows)))
        if plan is None and "integrity" in want:

            def index_tallies() -> dict[str, dict[str, Any]]:
                if java:
                    got = source.java_aux_facts(sc, stores, "index",
                                                integ.index_tally_rules(cl_starts),
                                                partition_bytes=partition_bytes)
                    if got is not None:
                        return dict(got)
                index = frame("index")
                assert index is not None
                return integ.index_tallies(index, cl_starts)

            index_job = pool.submit(inherit(timed("index", index_tallies)))
        t_commitlog = clock()
        combined: dict[str, Any] = {}
        with job("+".join(plan.sources) or "commitlog" if plan is not None else "commitlog"):
            java_facts = None
            if plan is not None:
                combined = source.java_scan_facts(sc, plan)
                java_facts = combined["facts"]
            elif java:  # the facts in the Java reader's own job (no SQL plan: FactsJob.java)
                java_facts = source.java_facts(sc, stores, rules, check_crc=audit_crc, **opts)

            def tallies() -> dict[str, Any] | None:
                return None if spans is None else integ.message_tallies(spans)

            handed: list[dict[str, Any]] = []
            lean: DataFrame | None = None
            if java_facts is None:  # decode once, keep the projection
                lean, more = source.records(session(), stores, java=False,
                                            persist=StorageLevel.MEMORY_AND_DISK, **narrow_kw)
                cached += more
                fact_list = _rows(A.message_facts(lean, rate_bucket_ms, tallies()))
            else:
                fact_list = java_facts
                handed = [r for r in A.fact_tables(fact_list, rate_bucket_ms)["rows"]
                          if r["recordType"] == RECORD_KIND_DEFERRED]
                if handed:  # byte ranges the Java reader does not accept: the Python decoder's
                    py = source.load(session(), stores, "records",
                                     ranges=source.deferred_ranges(handed), **narrow_kw)
                    fact_list += _rows(A.message_facts(py, rate_bucket_ms, tallies()))

        def records_keys() -> DataFrame:  # the records' key columns (integrity: cross_file)
            if lean is not None:
                return lean
            return source.records(session(), stores, handed=handed, java=True, **narrow_kw)[0]
        # every per-message table is folded on the driver from the collected facts
        facts = A.fact_tables(fact_list, rate_bucket_ms)
        tables: dict[str, list[dict[str, Any]]] = {}
        for name in ("queues", "rate", "retry"):
            if name in want:
                tables[name] = facts[name]
        if "dlq" in want:
            tables["dlqByTopic"], tables["dlq"] = facts["dlqByTopic"], facts["dlq"]
        # one aggregation of the consume queue for schedule, lag, the integrity audit's queue
        # bounds and the unit count
        queues: list[dict[str, Any]] = (
            combined.get("queues", []) if plan is not None
            else queues_job.result() if queues_job else [])
        if "schedule" in want:
            tables["schedule"] = A.schedule_rows(
                queues, {s: c.delay_offsets for s, c in configs.items()})
        if "lag" in want:
            tables["lagByQueue"] = tables["lag"] = A.lag_rows(
                queues, {s: c.consumer_offsets for s, c in configs.items()})
        backlog: dict[str, Any] = backlog_job.result() if backlog_job else {}
        for name in ("pop", "timer"):
            if name in backlog:
                tables[name] = backlog[name]
        settled: dict[str, Any] = {}
        if "integrity" in want:
            settled = integ.settle(
                stores, {r["store"]: r for r in facts["tallies"]}, A.fold_tallies(queues),
                combined["index"] if index_job is None else index_job.result(),
                {s: not commitlog_gaps(s) for s in stores})
            check = not all(settled[s].messages for s in stores)  # else no cross-file query
            tables["integrity"] = integ.integrity(
                facts["rows"], records_keys() if check else None, cl_starts,
                frame("consumequeue") if check else None, frame("index") if check else None,
                integ.queue_mins(session(), queues) if check else None,
                [f for c in configs.values() for f in c.findings],
                offsets=max(sum(r["count"] or 0 for r in facts["totals"]),
                            sum(q["entries"] or 0 for q in queues)),
                settled=settled, spans=spans,
            )

        summary: dict[str, Any] = {"stores": stores, "audits": list(audits), "now": now_ms}
        kinds: dict[str, dict[str, int]] = {}
        for r in facts["totals"]:
            k = kinds.setdefault(r["kind"], {"count": 0, "bytes": 0})
            k["count"] += r["count"] or 0
            k["bytes"] += r["bytes"] or 0
        summary["totals"] = {
            "messages": kinds.get(RECORD_KIND_MESSAGE, {}).get("count", 0),
            "bytes": kinds.get(RECORD_KIND_MESSAGE, {}).get("bytes", 0),
            "unreadableRegions": kinds.get(RECORD_KIND_UNREADABLE, {}).get("count", 0),
        }
        if full_cq:
            summary["totals"]["consumeQueueUnits"] = sum(q["entries"] for q in queues)
        if backlog.get("findings"):  # what the integrity audit did not say already
            from mqtool.spark.schema import finding_row

            rows = tables.setdefault("integrity", [])
            said = {(r["store"], r["file"], r["offset"]) for r in rows}
            rows += [finding_row(st, f) for st, f in backlog["findings"]
                     if (st, f.file, f.offset) not in said]
        for name in ("queues", "rate", "retry", "schedule", "integrity", "lag", "pop", "timer"):
            if name in tables:
                summary[name] = tables[name]
        if "dlq" in tables:
            per_topic: dict[tuple[str, str], dict[str, int]] = {}
            for r in tables["dlqByTopic"]:
                per_topic.setdefault((r["store"], r["group"]), {})[r["originalTopic"]] = r["count"]
            summary["dlq"] = [
                {**r, "byOriginalTopic": per_topic.get((r["store"], r["group"]), {})}
                for r in tables["dlq"]
            ]
        summary["elapsedSeconds"] = round(time.monotonic() - started, 3)
        end = clock()
        timings = {"plan": t_commitlog - t0,
                   "jobs": {name: b - a for name, (a, b) in sorted(jobs.items())},
                   "fold": end - max(b for _, b in jobs.values()), "scan": end - t0,
                   **({"session": made_in[0]} if made_in else {})}
        result = ScanResult(summary, settled=settled, timings=_rounded(timings))

        if out is None and sql is None:
            return result
        # the full tables: a second decode pass, all columns
        records, more_cached = source.records(session(), stores, check_crc=check_crc, **opts)
        cached += more_cached
        full_msgs = A.messages(records)
        frames = {name: integ.findings_table(session(), rows) if name == "integrity"
                  else A.table_df(session(), name, rows) for name, rows in tables.items()}
        if out is not None:
            out_dir = Path(out)
            out_dir.mkdir(parents=True, exist_ok=True)
            result.outputs["messages"] = _write(full_msgs, out_dir / "messages", fmt)
            cq = frame("consumequeue")
            assert cq is not None
            result.outputs["consumequeue"] = _write(cq, out_dir / "consumequeue", fmt)
            for name, df in frames.items():
                result.outputs[name] = _write(df, out_dir / name, fmt)
        if sql is not None:
            views = {"messages": full_msgs, "records": records,
                     "consumequeue": frame("consumequeue"), "index": frame("index"), **frames}
            for name, df in views.items():
                df.createOrReplaceTempView(name)
            try:
                answer = session().sql(sql)
                result.sql_columns = list(answer.columns)
                if out is not None:
                    result.outputs["sql"] = _write(answer, Path(out) / "sql", fmt)
                result.sql_rows = _rows(answer.limit(sql_limit))
            except AnalysisException as e:
                from mqtool.spark.session import failure_message

                raise usage(SparkScanError(f"--sql: {failure_message(e)}")) from e
        return result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for df in cached:
            df.unpersist()


def scan_with_spark(
    stores: Sequence[str], *, master: str, conf: Sequence[str] = (), at_exit: bool = False,
    **scan_kw: Any,
) -> ScanResult:
    """:func:`run_scan` (``scan_kw``: its keywords) on a SparkContext started for the job
    (:func:`mqtool.spark.session.job_conf` for ``stores``; ``conf``: ``--conf`` pairs, which
    win), with a progress bar on a terminal; what the command line calls. ``at_exit``: the
    process ends with the scan (:func:`mqtool.spark.session.session_scope`).

    ``result.timings`` then also says where the time before the scan went, in seconds:
    ``python`` (from the process's start to this call: the interpreter, mqtool's imports, the
    arguments, the stores' own time), ``pyspark`` (its import), ``jvm`` (the driver JVM's
    launch) and ``context`` (the SparkContext), when this call started them; ``answered``:
    from the process's start to the scan's answer (the Spark context still running: with
    ``at_exit`` it stops as the process exits)."""
    from mqtool.spark.session import (
        context_scope,
        job_conf,
        merge_conf,
        parse_conf,
        process_seconds,
        spark_failures,
        stage_progress,
        start_seconds,
    )

    timings: dict[str, Any] = {"python": process_seconds()}
    settings = merge_conf(job_conf(master, list(stores)), parse_conf(list(conf)))
    t = time.perf_counter()
    import pyspark  # its import, timed on its own

    timings["pyspark"] = round(time.perf_counter() - t, 3)
    started = pyspark.SparkContext._active_spark_context is None  # noqa: SLF001
    with spark_failures(master), \
            context_scope(master, settings, at_exit=at_exit) as sc, \
            stage_progress(sc, "scan"):
        if started:
            timings.update(start_seconds())
        result = run_scan(sc, stores, **scan_kw)  # a SparkSession only if it needs one
    result.timings = {**timings, **result.timings, "answered": process_seconds()}
    return result
