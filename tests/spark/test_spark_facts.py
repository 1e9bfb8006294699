"""``FactsJob.java`` (the scan's aggregations in the Java reader's own Spark jobs, no SQL
plan) gives exactly the rows of the Spark SQL it stands for, over the same reader:
:func:`mqtool.spark.audits.message_facts` on every fixture store and on a damaged copy
(hand-overs, BODYCRC failures), with and without the integrity audit's tallies, with whole and
tiny splits; :func:`~mqtool.spark.audits.queue_facts` and
:func:`mqtool.spark.integrity.index_tallies` on every fixture store and on damaged consume
queues and index files; and ``mqtool scan`` takes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sparkfix import spark  # noqa: F401
from test_spark_java import _patch, aux_damaged, make_damaged  # noqa: F401

from conftest import SCENARIOS, store_dir

pytestmark = pytest.mark.slow

SPLITS = (1 << 27, 3000)


def _both(spark: Any, stores: list[str], split: int, bucket_ms: int,  # noqa: F811
          tallies: bool, fine_max: int | None = None) -> tuple[list[str], list[str]]:
    from mqtool.spark import audits as A
    from mqtool.spark import integrity as integ
    from mqtool.spark import source
    from mqtool.spark.scan import AUDIT_COLUMNS

    cols = [*AUDIT_COLUMNS[2:], "properties", *(integ.MESSAGE_TALLY_COLUMNS if tallies else ())]
    kw: dict[str, Any] = {"columns": cols, "properties_for": [A.DLQ_PREFIX],
                          "split_size": split, "partition_bytes": 1 << 20}
    spans = integ.index_spans(stores)
    rules = A.fact_rules(bucket_ms, integ.message_tally_rules(spans) if tallies else None)
    if fine_max is not None:  # a task folds its groups into the sets this often
        rules["fineMax"] = fine_max
    java = source.java_facts(spark.sparkContext, stores, rules, split_size=split,
                             partition_bytes=1 << 20)
    raw = source.java_records(spark, stores, **kw)
    assert java is not None and raw is not None
    sql = [r.asDict() for r in A.message_facts(
        raw, bucket_ms, integ.message_tallies(spans) if tallies else None).collect()]
    return sorted(map(_canon, java)), sorted(map(_canon, sql))


def _canon(row: dict[str, Any]) -> str:
    return repr(sorted(row.items()))


@pytest.mark.parametrize("split", SPLITS)
def test_java_facts_equal_sql_on_every_fixture_store(spark: Any, split: int) -> None:  # noqa: F811
    java, sql = _both(spark, [str(store_dir(s)) for s in SCENARIOS], split, 60_000, True)
    assert java == sql
    text = "\n".join(java)
    for seen in ("('dlqGroup', '", "('retryGroup', '", "('sum_ixN', ", "('xor_cq', "):
        assert seen in text  # dead letters, retries and both tallies are among the rows
    assert "('xKind', 'crc')" not in text


@pytest.mark.parametrize("fine_max", [1, 7])
def test_java_facts_equal_sql_when_a_task_folds_its_groups_early(
    spark: Any, crc_damaged: Path, fine_max: int  # noqa: F811
) -> None:
    """A task keeps at most ``fineMax`` groups by every key (then folds them into the sets):
    the rows are the same however often it folds."""
    stores = [*(str(store_dir(s)) for s in SCENARIOS), str(crc_damaged)]
    java, sql = _both(spark, stores, 1 << 27, 60_000, True, fine_max)
    assert java == sql


def test_java_facts_equal_sql_without_tallies_and_other_buckets(spark: Any) -> None:  # noqa: F811
    stores = [str(store_dir("4.9.7/journey"))]
    for bucket in (1_000, 3_600_000):
        java, sql = _both(spark, stores, 1 << 27, bucket, False)
        assert java == sql
        assert "sum_ixN" not in "\n".join(java)


@pytest.fixture(scope="module")
def crc_damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Java reader's damaged copy, and two records whose stored BODYCRC is wrong."""
    from mqtool.spark.decode import decode_commitlog_file_messages

    root = make_damaged(tmp_path_factory.mktemp("facts-damaged") / "store")
    first = sorted((root / "commitlog").iterdir())[0]
    offsets = decode_commitlog_file_messages(str(first))["fileOffset"].to_pylist()
    for off in offsets[2:4]:
        _patch(first, off + 8, b"\x01\x02\x03\x04")  # BODYCRC: the body no longer matches
    return root


@pytest.mark.parametrize("split", SPLITS)
def test_java_facts_equal_sql_on_a_damaged_store(
    spark: Any, crc_damaged: Path, split: int  # noqa: F811
) -> None:
    java, sql = _both(spark, [str(crc_damaged)], split, 60_000, True)
    assert java == sql
    first = sorted((crc_damaged / "commitlog").iterdir())[0].name
    crc = [r for r in java if "('xKind', 'crc')" in r]
    assert len([r for r in crc if f"('xFile', 'commitlog/{first}')" in r]) == 2  # the two patched
    assert len(crc) > 2  # and the random damage's
    assert sum("('xKind', 'deferred')" in r for r in java) >= 4  # the reader's hand-overs


def test_java_queue_facts_and_index_tallies_equal_sql(
    spark: Any, aux_damaged: Path  # noqa: F811
) -> None:
    from mqtool.formats.rules import SCHEDULE_TOPIC
    from mqtool.spark import audits as A
    from mqtool.spark import integrity as integ
    from mqtool.spark import source
    from mqtool.spark.scan import _commitlog_start, _rows, load_store_config

    stores = [*(str(store_dir(s)) for s in SCENARIOS), str(aux_damaged)]
    delay = {s: load_store_config(s).delay_offsets for s in stores}
    delay[stores[0]] = {**delay[stores[0]], 3: 1, 17: 2}  # levels with and without a queue
    starts = {s: _commitlog_start(s) for s in stores}
    # and stores whose commitlog starts later: their first units and entries are not counted
    later = {s: None if v is None else v + 5000 for s, v in starts.items()}
    later[stores[1]] = None
    overdue = set()
    for now in (0, 1 << 62, 1_795_295_040_000):
        for topics in (None, [SCHEDULE_TOPIC, "TopicTest"]):
            for cl in (starts, later, None):
                rules = A.queue_rules(delay, now, None if cl is None else
                                      integ.unit_tally_rules(cl))
                java = source.java_aux_facts(spark.sparkContext, stores, "consumequeue", rules,
                                             topics=topics, partition_bytes=1 << 16)
                cq = source.table(spark, stores, "consumequeue", topics=topics)
                sql = _rows(A.queue_facts(cq, delay, now,
                                          None if cl is None else integ.unit_tallies(cl)))
                assert sorted(map(_canon, java)) == sorted(map(_canon, sql))
                assert len(java) > (20 if topics is None else 5)
                assert sum(r["pending"] for r in java) > 0
                overdue.add(sum(r["overdue"] for r in java))
    assert len(overdue) == 3  # none, every one, some: the deliver times were compared
    index = source.table(spark, stores, "index")
    for cl in (starts, later):
        java_t = source.java_aux_facts(spark.sparkContext, stores, "index",
                                       integ.index_tally_rules(cl), partition_bytes=1 << 16)
        assert java_t == integ.index_tallies(index, cl)
        assert len(java_t) >= 3
    assert java_t != source.java_aux_facts(spark.sparkContext, stores, "index",
                                           integ.index_tally_rules(starts))


@pytest.mark.parametrize("partition_bytes", [None, 1 << 16])
def test_one_job_gives_each_sources_facts(
    spark: Any, crc_damaged: Path, aux_damaged: Path, partition_bytes: int | None  # noqa: F811
) -> None:
    """``FactsJob.scan`` (the scan's one job: every task folds its share of the commitlog
    splits, the consume-queue files and the index files) answers what the three jobs of their
    own answer, with one task or many sharing the sources; a source left out is not read."""
    from mqtool.formats.rules import SCHEDULE_TOPIC
    from mqtool.spark import audits as A
    from mqtool.spark import integrity as integ
    from mqtool.spark import source
    from mqtool.spark.scan import _commitlog_start, load_store_config

    sc = spark.sparkContext
    stores = [*(str(store_dir(s)) for s in SCENARIOS), str(crc_damaged), str(aux_damaged)]
    starts = {s: _commitlog_start(s) for s in stores}
    rules = A.fact_rules(60_000, integ.message_tally_rules(integ.index_spans(stores)))
    delay = {s: load_store_config(s).delay_offsets for s in stores}
    queue_rules = A.queue_rules(delay, 1_795_295_040_000, integ.unit_tally_rules(starts))
    index_rules = integ.index_tally_rules(starts)
    facts = source.java_facts(sc, stores, rules, split_size=3000, partition_bytes=1 << 20)
    assert facts is not None
    for topics in (None, [SCHEDULE_TOPIC]):
        plan = source.java_scan_plan(sc, stores, rules, queue_rules=queue_rules, topics=topics,
                                     index_rules=index_rules, split_size=3000,
                                     partition_bytes=partition_bytes)
        assert plan is not None and plan.sources == ("commitlog", "consumequeue", "index")
        got = source.java_scan_facts(sc, plan)
        assert sorted(map(_canon, got["facts"])) == sorted(map(_canon, facts))
        queues = source.java_aux_facts(sc, stores, "consumequeue", queue_rules, topics=topics)
        assert sorted(map(_canon, got["queues"])) == sorted(map(_canon, queues))
        assert got["index"] == source.java_aux_facts(sc, stores, "index", index_rules)
        assert len(got["queues"]) > 5 and len(got["index"]) >= 3
    alone = source.java_scan_plan(sc, stores, rules, split_size=3000)
    assert alone is not None and alone.sources == ("commitlog",)
    got = source.java_scan_facts(sc, alone)
    assert set(got) == {"facts"}
    assert sorted(map(_canon, got["facts"])) == sorted(map(_canon, facts))


def test_tasks_share_the_sources_by_cost() -> None:
    """The one job's partitions: costliest first into the cheapest partition, each in the
    splits' own order; one wave over the slots unless a partition size is given."""
    from mqtool.spark import splits
    from mqtool.spark.source import balanced

    def split(i: int) -> splits.Split:
        return splits.Split(splits.KIND_COMMITLOG, "s", f"/f{i}", f"f{i}", 0, 0, 1, 1)

    items = [(split(i), w) for i, w in enumerate([5, 1, 4, 3, 2, 3] + [0])]
    parts = balanced(items, None, 2)  # below the smallest partition size: one task
    assert [[s.path for s in p] for p in parts] == [[f"/f{i}" for i in range(7)]]
    parts = balanced(items, 9, 2)
    assert [[s.path for s in p] for p in parts] == [["/f0", "/f1", "/f5", "/f6"],
                                                    ["/f2", "/f3", "/f4"]]
    big = [(split(i), 300 << 20) for i in range(5)]
    assert [len(p) for p in balanced(big, None, 2)] == [3, 2]  # 1.5 GiB: two tasks
    assert balanced([], None, 2) == []


def test_scan_takes_the_java_facts(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A clean scan with the Java reader builds no SQL plan for its aggregations."""
    from mqtool.spark import audits as A
    from mqtool.spark import integrity as integ
    from mqtool.spark.scan import run_scan

    stores = [str(store_dir(s)) for s in SCENARIOS]
    before = run_scan(spark, stores, now_ms=0).summary

    def no_plan(*_: Any, **__: Any) -> Any:
        raise AssertionError("an aggregation planned in SQL on the Java path")

    for module, name in ((A, "message_facts"), (A, "queue_facts"), (integ, "index_tallies")):
        monkeypatch.setattr(module, name, no_plan)
    after = run_scan(spark, stores, now_ms=0).summary
    before.pop("elapsedSeconds"), after.pop("elapsedSeconds")
    assert after == before
    assert after["totals"]["messages"] > 0 and after["dlq"] and after["retry"]


def test_which_records_get_a_unit_is_the_integrity_rule(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    """The Spark side's "which records get a consume-queue unit" is
    :func:`mqtool.integrity.dispatch_rules.expected_in_cq`: the SQL form
    (:func:`mqtool.spark.integrity.gets_unit`) on every sysFlag value, and ``FactsJob.java``'s
    reading of :func:`~mqtool.spark.integrity.unit_rule` on a store whose records carry every
    transaction type (its unit tally counts what the rule says, and equals the SQL's)."""
    import shutil

    import numpy as np
    from pyspark.sql import functions as F

    from mqtool.formats.commitlog_layout import SYSFLAG_AT
    from mqtool.formats.rules import (
        TRANSACTION_COMMIT_TYPE,
        TRANSACTION_NOT_TYPE,
        TRANSACTION_PREPARED_TYPE,
        TRANSACTION_ROLLBACK_TYPE,
        TRANSACTION_TYPE_MASK,
    )
    from mqtool.integrity.dispatch_rules import expected_in_cq
    from mqtool.spark import audits as A
    from mqtool.spark import integrity as integ
    from mqtool.spark import source
    from mqtool.spark.decode import decode_commitlog_file_messages

    flags = spark.createDataFrame([(f,) for f in range(256)], "sysFlag int")
    got = dict(flags.select("sysFlag", integ.gets_unit(F.col("sysFlag"))).collect())
    assert [got[f] for f in range(256)] == list(expected_in_cq(np.arange(256)))

    root = tmp_path / "store"
    shutil.copytree(store_dir("4.9.7/journey"), root)
    first = sorted((root / "commitlog").iterdir())[0]
    t = decode_commitlog_file_messages(str(first))
    types = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE, TRANSACTION_COMMIT_TYPE,
             TRANSACTION_NOT_TYPE) * 2
    for (off, flag), txn in zip(zip(t["fileOffset"].to_pylist(), t["sysFlag"].to_pylist(),
                                    strict=False), types, strict=False):
        _patch(first, off + SYSFLAG_AT,  # not under the BODYCRC
               (flag & ~TRANSACTION_TYPE_MASK | txn).to_bytes(4, "big"))
    sys_flags = np.concatenate([
        decode_commitlog_file_messages(str(f))["sysFlag"].to_numpy()
        for f in sorted((root / "commitlog").iterdir())])
    assert {int(f) & TRANSACTION_TYPE_MASK for f in sys_flags} >= set(types)
    stores = [str(root)]
    rules = A.fact_rules(60_000, integ.message_tally_rules(integ.index_spans(stores)))
    java = source.java_facts(spark.sparkContext, stores, rules)
    assert java is not None
    units = integ.message_tally_rules({})["tallyNames"][0]
    tallies = A.fact_tables(java)["tallies"]
    assert [r[units] for r in tallies] == [int(expected_in_cq(sys_flags).sum())]
    assert int(expected_in_cq(sys_flags).sum()) < len(sys_flags)
    java_rows, sql_rows = _both(spark, stores, 1 << 27, 60_000, True)
    assert java_rows == sql_rows
