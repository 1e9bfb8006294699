"""``run_scan`` on the real stores: every audit equals what the manifests imply."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from sparkfix import NOW_MS, fixture_scan, rows_for, spark, store_of  # noqa: F401
from test_spark_decode import expected_row

from conftest import FIXTURES, SCENARIOS, manifest_jsonl, store_dir
from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.config import loads_fastjson
from mqtool.formats.walker import scan_file

pytestmark = pytest.mark.slow


def _messages(scenario: str) -> list[dict[str, Any]]:
    return [r for r in manifest_jsonl(scenario, "commitlog.jsonl") if r["kind"] == "msg"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_queue_counts_bytes_and_times_match_the_manifest(fixture_scan, scenario: str) -> None:  # noqa: F811
    expected: dict[tuple[str, int], dict[str, Any]] = {}
    for m in _messages(scenario):
        e = expected.setdefault(
            (m["topic"], m["queueId"]),
            {"count": 0, "bytes": 0, "first": m["storeTimestamp"], "last": m["storeTimestamp"]},
        )
        e["count"] += 1
        e["bytes"] += m["size"]
        e["first"] = min(e["first"], m["storeTimestamp"])
        e["last"] = max(e["last"], m["storeTimestamp"])
    got = {
        (r["topic"], r["queueId"]): {
            "count": r["count"], "bytes": r["bytes"], "first": r["firstStoreTimestamp"],
            "last": r["lastStoreTimestamp"],
        }
        for r in rows_for(fixture_scan.summary, "queues", scenario)
    }
    assert got == expected


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_dlq_per_group_with_original_topics_matches_the_manifest(fixture_scan, scenario: str) -> None:  # noqa: F811,E501
    by_group: dict[str, Counter[str]] = defaultdict(Counter)
    for m in _messages(scenario):
        if m["topic"].startswith("%DLQ%"):
            by_group[m["topic"][len("%DLQ%"):]][m["properties"]["RETRY_TOPIC"]] += 1
    got = rows_for(fixture_scan.summary, "dlq", scenario)
    assert {r["group"]: r["byOriginalTopic"] for r in got} == {
        g: dict(c) for g, c in by_group.items()
    }
    for r in got:
        assert r["count"] == sum(by_group[r["group"]].values())
        assert r["originalTopics"] == sorted(by_group[r["group"]])
    if scenario == "4.9.7/journey":  # the scenario's own account: 4 messages in the DLQ
        assert [(r["group"], r["count"], r["originalTopics"]) for r in got] == [
            ("cg_journey", 4, ["JourneyTopic"])
        ]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_retry_depth_matches_the_manifest(fixture_scan, scenario: str) -> None:  # noqa: F811
    expected = Counter(
        (m["topic"][len("%RETRY%"):], m["reconsumeTimes"])
        for m in _messages(scenario) if m["topic"].startswith("%RETRY%")
    )
    got = {
        (r["group"], r["reconsumeTimes"]): r["count"]
        for r in rows_for(fixture_scan.summary, "retry", scenario)
    }
    assert got == dict(expected)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_schedule_backlog_matches_the_manifest(fixture_scan, scenario: str) -> None:  # noqa: F811
    text = (FIXTURES / scenario / "manifest" / "delayOffset.json").read_text(encoding="utf-8")
    offsets = {int(k): int(v) for k, v in loads_fastjson(text)["offsetTable"].items()}
    units: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for u in manifest_jsonl(scenario, "consumequeue.jsonl"):
        if u["topic"] == "SCHEDULE_TOPIC_XXXX":
            units[u["queueId"] + 1].append(u)
    expected = {}
    for level in set(units) | set(offsets):
        off = offsets.get(level, 0)
        pending = [u for u in units.get(level, []) if u["index"] >= off]
        expected[level] = {
            "pending": len(pending),
            "overdue": sum(1 for u in pending if u["tagsCode"] < NOW_MS),
            "delayOffset": offsets.get(level),
            "maxOffset": max((u["index"] + 1 for u in units.get(level, [])), default=0),
            "beyondMax": False,
        }
    got = {
        r["delayLevel"]: {k: r[k] for k in ("pending", "overdue", "delayOffset", "maxOffset",
                                            "beyondMax")}
        for r in rows_for(fixture_scan.summary, "schedule", scenario)
    }
    assert got == expected
    total_pending = sum(e["pending"] for e in expected.values())
    assert total_pending == {"4.9.7/journey": 4, "5.3.3/plain": 1}.get(scenario, total_pending)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_real_stores_have_no_integrity_findings(fixture_scan, scenario: str) -> None:  # noqa: F811
    assert rows_for(fixture_scan.summary, "integrity", scenario) == []


def test_totals_and_sql_view(fixture_scan) -> None:  # noqa: F811
    manifest_total = sum(len(_messages(s)) for s in SCENARIOS)
    assert fixture_scan.summary["totals"]["messages"] == manifest_total
    assert fixture_scan.summary["totals"]["unreadableRegions"] == 0
    assert fixture_scan.summary["totals"]["consumeQueueUnits"] == sum(
        len(manifest_jsonl(s, "consumequeue.jsonl")) for s in SCENARIOS
    )
    got = {(r["store"], r["topic"]): r["n"] for r in fixture_scan.sql_rows}
    expected = {
        (store_of(s), t): n for s in SCENARIOS
        for t, n in Counter(m["topic"] for m in _messages(s)).items()
    }
    assert got == expected
    assert fixture_scan.sql_columns == ["store", "topic", "n"]


def test_summary_is_plain_json(fixture_scan) -> None:  # noqa: F811
    text = json.dumps(fixture_scan.summary)
    assert json.loads(text) == fixture_scan.summary
    for key in ("queues", "dlq", "schedule", "integrity"):
        assert key in fixture_scan.summary


def test_parquet_messages_round_trip_to_the_single_process_decoder(fixture_scan) -> None:  # noqa: F811
    table = pq.read_table(Path(fixture_scan.outputs["messages"]))
    rows = {(r["store"], r["commitLogOffset"]): r for r in table.to_pylist()}
    n = 0
    for scenario in SCENARIOS:
        for path in sorted((store_dir(scenario) / "commitlog").iterdir()):
            base = int(path.name)
            for rec in scan_file(path.read_bytes(), file_start=base):
                if not isinstance(rec, CommitLogMessage):
                    continue
                row = dict(rows.pop((store_of(scenario), rec.physical_offset)))
                row["properties"] = dict(row["properties"])
                exp = expected_row(rec, f"commitlog/{path.name}", base)
                assert {k: row[k] for k in exp} == exp
                assert set(row) == set(exp) | {"store"}
                n += 1
    assert not rows and n == fixture_scan.summary["totals"]["messages"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rate_per_minute_matches_the_manifest(fixture_scan, scenario: str) -> None:  # noqa: F811
    expected = Counter(
        (m["topic"], m["storeTimestamp"] // 60_000 * 60_000) for m in _messages(scenario)
    )
    got = {
        (r["topic"], r["bucketStart"]): r["count"]
        for r in rows_for(fixture_scan.summary, "rate", scenario)
    }
    assert got == dict(expected)


def test_session_defaults_and_conf() -> None:
    from mqtool.spark.errors import SparkScanError
    from mqtool.spark.session import LOG4J2_PROPERTIES, default_conf, parse_conf

    conf = default_conf("local[2]")
    assert conf["spark.ui.enabled"] == "false"
    assert str(LOG4J2_PROPERTIES) in conf["spark.driver.extraJavaOptions"]
    assert LOG4J2_PROPERTIES.is_file()
    assert "spark.driver.host" not in default_conf("spark://10.0.0.5:7077")
    assert parse_conf(["a=b", "c.d=e=f"]) == {"a": "b", "c.d": "e=f"}
    with pytest.raises(SparkScanError):
        parse_conf(["novalue"])


def test_the_session_runs_this_interpreter(spark) -> None:  # noqa: F811
    import os
    import sys

    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert spark.conf.get("spark.ui.enabled") == "false"
    assert spark.sparkContext.master == "local[2]"


def test_audits_selects_what_runs_and_what_is_read(spark, fixture_scan) -> None:  # noqa: F811
    """Only the chosen audits appear; without integrity the consume queues of other topics
    are not read (no unit count), and the chosen tables equal those of the full scan."""
    from typer.testing import CliRunner

    from mqtool.cli import app
    from mqtool.spark.scan import run_scan

    store = store_of("4.9.7/journey")
    part = run_scan(spark, [store], audits=["schedule", "dlq"], now_ms=NOW_MS)
    audit_keys = {"queues", "rate", "dlq", "retry", "schedule", "integrity", "lag"}
    assert audit_keys & set(part.summary) == {"schedule", "dlq"}
    assert part.summary["audits"] == ["schedule", "dlq"]
    assert "consumeQueueUnits" not in part.summary["totals"]
    for name in ("schedule", "dlq"):
        assert part.summary[name] == rows_for(fixture_scan.summary, name, "4.9.7/journey")
    res = CliRunner().invoke(app, ["scan", store, "--audits", "retry", "--json",
                                   "--master", "local[2]"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert audit_keys & set(doc) == {"retry"}
    # one notion of "now": with no --now, scan judges against the store's own time, as trace does
    from mqtool.overview import store_time
    from mqtool.store import Store

    with Store.open(store) as st:
        assert doc["now"] == store_time(st) > 0
    assert "the stores' own time" in res.stderr
    assert doc["retry"] == rows_for(fixture_scan.summary, "retry", "4.9.7/journey")
    bad = CliRunner().invoke(app, ["scan", store, "--audits", "queues,nope"])
    assert bad.exit_code == 2 and "nope" in bad.output


def _jobs_of(spark: Any, group: str) -> Counter[str]:  # noqa: F811
    """The Spark jobs of job group ``group``, counted by their description."""
    sc = spark.sparkContext
    store = sc._jsc.sc().statusStore()  # noqa: SLF001 - the JVM's own record of the jobs
    out: Counter[str] = Counter()
    for job_id in sc.statusTracker().getJobIdsForGroup(group):
        said = store.job(job_id).description()
        out[said.get() if said.isDefined() else ""] += 1
    return out


@pytest.mark.parametrize(("audits", "job"), [
    (["dlq"], "commitlog"),
    (["queues", "rate", "retry"], "commitlog"),
    (["schedule"], "commitlog+consumequeue"),
    (["lag"], "commitlog"),  # no consumerOffset.json: no queue to read
    (["integrity"], "commitlog+consumequeue+index"),
])
def test_an_audit_reads_only_the_sources_it_needs(spark, audits: list[str], job: str) -> None:  # noqa: F811,E501
    """One Spark job reads every source an audit needs, once (its description says which, the
    caller's job group holds it): the commitlog for every audit (the totals), the consume
    queue for schedule, lag (the queues of committed offsets) and integrity, the index for
    integrity alone."""
    from mqtool.spark.scan import run_scan

    sc = spark.sparkContext
    group = f"test-audits-{'-'.join(audits)}"
    sc.setJobGroup(group, "the caller's")
    try:
        result = run_scan(spark, [store_of("4.9.7/journey")], audits=audits, now_ms=NOW_MS)
        assert sc.getLocalProperty("spark.job.description") == "the caller's"  # given back
    finally:
        sc._jsc.clearJobGroup()  # noqa: SLF001 - pyspark has no clearJobGroup
    assert _jobs_of(spark, group) == Counter([f"mqtool scan: {job}"])
    assert job in result.timings["jobs"]  # timed


def test_a_clean_scan_on_a_context_makes_no_session(spark, monkeypatch) -> None:  # noqa: F811
    """Given a SparkContext alone, a clean scan by the Java reader makes no SparkSession (what
    the command line does: the JVM's SQL set-up costs more than a small store's scan); --sql
    makes one on that context."""
    from pyspark.sql import SparkSession

    from mqtool.spark.scan import run_scan

    store = store_of("4.9.7/journey")

    def no_session(*_: Any, **__: Any) -> Any:
        raise AssertionError("a SparkSession was made")

    with monkeypatch.context() as m:
        m.setattr(SparkSession.Builder, "getOrCreate", no_session)
        clean = run_scan(spark.sparkContext, [store], now_ms=NOW_MS)
    assert clean.summary["totals"] == rows_for_totals(spark, store)
    asked = run_scan(spark.sparkContext, [store], now_ms=NOW_MS, audits=["queues"],
                     sql="select count(*) as n from messages")
    assert asked.sql_rows == [{"n": clean.summary["totals"]["messages"]}]


def rows_for_totals(spark: Any, store: str) -> dict[str, Any]:  # noqa: F811
    from mqtool.spark.scan import run_scan

    return dict(run_scan(spark, [store], now_ms=NOW_MS).summary["totals"])


def test_spark_memory_and_jit_are_sized_to_the_job(tmp_path: Path) -> None:
    from mqtool.spark.session import job_conf, merge_conf

    c1 = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}
    small = [store_of(s) for s in SCENARIOS]
    assert job_conf("local[2]", small) == {"spark.driver.memory": "512m", **c1}
    assert job_conf("spark://127.0.0.1:7077", small) == {}  # the cluster's business
    big = tmp_path / "store" / "commitlog"
    big.mkdir(parents=True)
    (big / "00000000000000000000").write_bytes(b"\1" * 65536)  # written data, not a hole
    (big / "00000000000000065536").write_bytes(b"")
    store = [str(tmp_path / "store")]
    assert job_conf("local[*]", store, small=65535) == {"spark.driver.memory": "1g", **c1}
    assert job_conf("local[*]", store, small=65536) == {"spark.driver.memory": "512m", **c1}
    assert job_conf("local[*]", store, short=65535) == {"spark.driver.memory": "512m"}
    # the user's options come after (the later wins in a JVM), their jars beside mqtool's
    got = merge_conf({**c1, "spark.jars": "a.jar"}, {
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=4", "spark.jars": "b.jar",
        "spark.driver.memory": "3g"})
    assert got == {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 "
                   "-XX:TieredStopAtLevel=4", "spark.jars": "a.jar,b.jar",
                   "spark.driver.memory": "3g"}


def _processes_naming(text: str) -> list[int]:
    """Pids whose command line holds ``text``."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text in (proc / "cmdline").read_bytes().decode(
                    "utf-8", "replace"):
                pids.append(int(proc.name))
        except OSError:  # a process that ended while listed: not one of ours
            pass
    return pids


def test_the_cli_leaves_sparks_stop_to_the_jvms_exit(tmp_path: Path) -> None:
    """The command line's scan prints and exits without ``spark.stop()``: the driver JVM exits
    with it (Spark's shutdown hooks stop it): no JVM left, nothing left in its local dir."""
    import subprocess
    import sys
    import time

    local = tmp_path / "spark-local"
    local.mkdir()
    res = subprocess.run(
        [sys.executable, "-m", "mqtool", "scan", store_of("4.9.7/plain"), "--master",
         "local[2]", "--json", "--conf", f"spark.local.dir={local}"],
        capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["totals"]["messages"] > 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (_processes_naming(str(local)) or any(local.iterdir())):
        time.sleep(0.2)
    assert _processes_naming(str(local)) == []  # the JVM is gone
    assert list(local.iterdir()) == []  # nothing left in its local directory


@pytest.mark.parametrize("kind,says", [
    ("rocksdb", "a RocksDB consume queue"), ("batchcq", "batch consume queues"),
    ("dledger", "a DLedger commitlog"),
])
def test_a_store_scan_cannot_read_is_refused_before_spark(kind: str, says: str) -> None:
    """Read by verify and the read commands, but not by the scan's readers: refused with a
    usage error (exit 2) before a JVM starts, instead of a finding for every message."""
    from typer.testing import CliRunner

    from mqtool.cli import app

    store = store_dir(f"5.3.3/{kind}")
    res = CliRunner().invoke(app, ["scan", str(store)])
    assert res.exit_code == 2, res.output
    assert f"error: {store}: scan does not read {says}" in res.stderr
    assert "overdue judged" not in res.stderr  # said before anything else


def test_lmq_and_double_written_rocksdb_stores_scan_clean(spark) -> None:  # noqa: F811
    """The LMQ queues are left out with a warning (their units point at other topics' records,
    verify's rule); the double-written RocksDB store is read from its file queues, and says
    that its RocksDB queue is not read."""
    from mqtool.spark.scan import run_scan

    names = ["5.3.3/lmq", "5.3.3/rocksdb-double"]
    result = run_scan(spark, [str(store_dir(n)) for n in names], now_ms=NOW_MS)
    findings = sorted(result.findings(), key=lambda x: x[0])
    assert [str(f.severity) for _, f in findings] == ["warning", "warning"]
    (lmq, f), (double, g) = findings
    assert lmq == str(store_dir("5.3.3/lmq")) and "LMQ queues" in f.detail
    assert double == str(store_dir("5.3.3/rocksdb-double"))
    assert "RocksDB consume queue" in g.detail and "verify checks both" in g.detail
    assert result.summary["totals"]["messages"] == sum(len(_messages(n)) for n in names)
    units = sum(len(q["units"]) for n in names for q in manifest_jsonl(n, "queues.jsonl")
                if not q["topic"].startswith("%LMQ%"))
    assert result.summary["totals"]["consumeQueueUnits"] == units
