"""A deliberately damaged copy of the journey store: each damage is found with file and offset.

Also: the CLI's ``--json`` equals the library's result, and ``--out``/``--sql`` errors.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from sparkfix import NOW_MS, spark  # noqa: F401
from typer.testing import CliRunner

from conftest import manifest_jsonl, store_dir
from mqtool.cli import app
from mqtool.formats.errors import FINDING_KINDS
from mqtool.formats.indexfile import index_geometry

pytestmark = pytest.mark.slow

SCENARIO = "4.9.7/journey"


def _msg(topic: str, queue_id: int, queue_offset: int) -> dict[str, Any]:
    for m in manifest_jsonl(SCENARIO, "commitlog.jsonl"):
        if m["kind"] == "msg" and (m["topic"], m["queueId"], m["queueOffset"]) == (
            topic, queue_id, queue_offset
        ):
            return m
    raise AssertionError((topic, queue_id, queue_offset))


def _unit(topic: str, queue_id: int, index: int) -> dict[str, Any]:
    for u in manifest_jsonl(SCENARIO, "consumequeue.jsonl"):
        if (u["topic"], u["queueId"], u["index"]) == (topic, queue_id, index):
            return u
    raise AssertionError((topic, queue_id, index))


def _patch(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[tuple[str, str, int]]]:
    """(store root, the findings each damage must produce: kind, file, offset)."""
    import shutil

    root = tmp_path_factory.mktemp("damaged") / "store"
    shutil.copytree(store_dir(SCENARIO), root)
    cl = root / "commitlog"
    expected: set[tuple[str, str, int]] = set()

    # 1. a flipped body byte: CRC failure
    a = _msg("JourneyTopic", 0, 0)
    body_pos = a["fileOffset"] + 88  # IPv4 hosts: BODYLEN at 84, body at 88
    with open(cl / a["file"], "r+b") as f:
        f.seek(body_pos)
        byte = f.read(1)
        f.seek(body_pos)
        f.write(bytes([byte[0] ^ 0xFF]))
    expected.add(("crc-mismatch", f"commitlog/{a['file']}", a["fileOffset"]))

    # 2. a destroyed magic: an unreadable region; its CQ unit and index entries now dangle
    b = _msg("%RETRY%cg_journey", 0, 0)
    _patch(cl / b["file"], b["fileOffset"] + 4, b"\x00\x11\x22\x33")
    expected.add(("unreadable", f"commitlog/{b['file']}", b["fileOffset"]))
    ub = _unit("%RETRY%cg_journey", 0, 0)
    expected.add(("cq-dangling", f"consumequeue/%RETRY%cg_journey/0/{ub['file']}",
                  ub["fileOffset"]))

    # 3. a CQ unit pointing one byte off: dangling unit, and its message has no unit
    c = _msg("DelayTopic", 0, 0)
    uc = _unit("DelayTopic", 0, 0)
    cq_c = root / "consumequeue" / "DelayTopic" / "0" / uc["file"]
    _patch(cq_c, uc["fileOffset"], struct.pack(">q", c["phyOffset"] + 1))
    expected.add(("cq-dangling", f"consumequeue/DelayTopic/0/{uc['file']}", uc["fileOffset"]))
    expected.add(("cq-missing", f"commitlog/{c['file']}", c["fileOffset"]))

    # 4. a CQ unit pointing at another queue's message (same size): wrong message
    d = _msg("JourneyTopic", 1, 0)
    other = _msg("JourneyTopic", 0, 0)
    ud = _unit("JourneyTopic", 1, 0)
    _patch(root / "consumequeue" / "JourneyTopic" / "1" / ud["file"], ud["fileOffset"],
           struct.pack(">q", other["phyOffset"]))
    expected.add(("cq-mismatch", f"consumequeue/JourneyTopic/1/{ud['file']}", ud["fileOffset"]))
    expected.add(("cq-missing", f"commitlog/{d['file']}", d["fileOffset"]))

    # 5. an index entry pointing into the middle of a record
    index_file = next((root / "index").iterdir())
    geo = index_geometry(index_file.stat().st_size, buf=index_file.read_bytes())
    _patch(index_file, geo.entry_pos(1) + 4, struct.pack(">q", 5))
    expected.add(("index-dangling", f"index/{index_file.name}", geo.entry_pos(1)))
    for e in manifest_jsonl(SCENARIO, "index_entries.jsonl"):
        if e["phyOffset"] == b["phyOffset"]:
            expected.add(("index-dangling", f"index/{e['file']}", geo.entry_pos(e["index"])))

    # 6. garbage after the last record of the last file (a torn write)
    last = sorted(cl.iterdir())[-1]
    data_end = max(
        m["fileOffset"] + m["size"] for m in manifest_jsonl(SCENARIO, "commitlog.jsonl")
        if m["kind"] == "msg" and m["file"] == last.name
    )
    _patch(last, data_end, b"\x01" * 12)
    expected.add(("unreadable", f"commitlog/{last.name}", data_end))

    # 7. a consume-queue file that is not whole units (a torn append)
    cq_file = root / "consumequeue" / "DelayTopic" / "1" / "00000000000000000000"
    whole = cq_file.stat().st_size
    with open(cq_file, "ab") as f:
        f.write(b"\x07" * 7)
    expected.add(("cq", "consumequeue/DelayTopic/1/00000000000000000000", whole))

    # 8. delayOffset.json beyond the queue's max; a consumerOffset.json for the lag audit
    (root / "config" / "delayOffset.json").write_text(
        '{\n\t"offsetTable":{2:99,3:6,4:4,5:3,16:1\n\t}\n}', encoding="utf-8"
    )
    (root / "config" / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"JourneyTopic@cg_journey":{0:3,1:5}\n\t}\n}', encoding="utf-8"
    )
    return root, expected


@pytest.fixture(scope="module")
def damaged_scan(spark, damaged) -> Any:  # noqa: F811
    from mqtool.spark.scan import run_scan

    return run_scan(spark, [str(damaged[0])], now_ms=NOW_MS, split_size=1000)


def test_each_damage_is_found_with_file_and_offset(damaged, damaged_scan) -> None:
    found = {(f["kind"], f["file"], f["offset"]) for f in damaged_scan.summary["integrity"]}
    assert found == damaged[1]
    # every row is the one Finding type, and converts back to it
    for store, f in damaged_scan.findings():
        assert store == str(damaged[0]) and f.kind in FINDING_KINDS and f.offset is not None
        assert str(f).startswith(f"{f.file} @ {f.offset:#x}")
    for f in damaged_scan.summary["integrity"]:
        assert f["detail"] and f["store"] == str(damaged[0])
    torn = [f for f in damaged_scan.summary["integrity"] if f["file"].endswith("16384")]
    assert torn[0]["detail"].startswith("12 bytes")


def test_exact_check_over_every_row_agrees(spark, damaged, damaged_scan,  # noqa: F811
                                          monkeypatch) -> None:
    """The cross-file check sends only suspect offsets to the exact grouping; with no room for
    suspects it groups every row: both give the same findings."""
    from mqtool.spark import integrity
    from mqtool.spark.scan import run_scan

    monkeypatch.setattr(integrity, "SUSPECTS_MAX", 0)
    every = run_scan(spark, [str(damaged[0])], now_ms=NOW_MS, split_size=1000,
                     audits=["integrity"])
    assert every.summary["integrity"] == damaged_scan.summary["integrity"]
    assert len(every.summary["integrity"]) >= len(damaged[1]) > 0


def test_suspects_partitions_grow_with_the_offsets() -> None:
    from mqtool.spark.integrity import GROUPS_PER_TASK, suspects_partitions

    assert suspects_partitions(0, 4) == 4
    assert suspects_partitions(4 * GROUPS_PER_TASK, 4) == 4
    assert suspects_partitions(4 * GROUPS_PER_TASK + 1, 4) == 5
    assert suspects_partitions(54 * GROUPS_PER_TASK, 4) == 54
    assert suspects_partitions(10, 200) == 200  # the session's own setting is the floor


def test_suspects_aggregation_runs_in_partitions_of_bounded_size(
    spark, damaged, damaged_scan, monkeypatch,  # noqa: F811
) -> None:
    """The suspects' aggregation gets a shuffle partition per GROUPS_PER_TASK offsets (so no
    reduce task's hash map grows with the store), not merged back by adaptive execution; the
    findings do not change."""
    from mqtool.spark import integrity
    from mqtool.spark.scan import run_scan

    monkeypatch.setattr(integrity, "GROUPS_PER_TASK", 1)  # a partition per offset
    sc = spark.sparkContext
    sc.setJobGroup("suspects-partitions", "test")
    try:
        again = run_scan(spark, [str(damaged[0])], now_ms=NOW_MS, split_size=1000,
                         audits=["integrity"])
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert again.summary["integrity"] == damaged_scan.summary["integrity"]
    tracker = sc.statusTracker()
    tasks = [tracker.getStageInfo(stage).numTasks
             for job in tracker.getJobIdsForGroup("suspects-partitions")
             for stage in tracker.getJobInfo(job).stageIds if tracker.getStageInfo(stage)]
    messages = damaged_scan.summary["totals"]["messages"]
    assert messages > 2 and max(tasks) >= messages, (messages, tasks)
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"  # put back


def test_delay_offset_beyond_max_and_consumer_lag(damaged_scan) -> None:
    level2 = [r for r in damaged_scan.summary["schedule"] if r["delayLevel"] == 2][0]
    assert (level2["delayOffset"], level2["maxOffset"], level2["beyondMax"], level2["pending"]) == (
        99, 1, True, 0
    )
    assert [r for r in damaged_scan.summary["schedule"] if r["beyondMax"]] == [level2]
    lag = {(r["group"], r["topic"], r["queueId"]): (r["consumerOffset"], r["maxOffset"], r["lag"])
           for r in damaged_scan.summary["lag"]}
    assert lag == {
        ("cg_journey", "JourneyTopic", 0): (3, 7, 4),
        ("cg_journey", "JourneyTopic", 1): (5, 5, 0),
    }


def test_cli_json_equals_the_library_result(spark, damaged, damaged_scan) -> None:  # noqa: F811
    res = CliRunner().invoke(
        app,
        ["scan", str(damaged[0]), "--master", "local[2]", "--now", str(NOW_MS), "--json",
         "--split-mib", "1"],
    )
    assert res.exit_code == 1, res.output  # integrity findings set the exit status
    doc = json.loads(res.stdout)
    lib = json.loads(json.dumps(damaged_scan.summary))
    for d in (doc, lib):
        d.pop("elapsedSeconds")
    # where the time went (the Spark context was the test's: no start-up of its own)
    timings = doc.pop("timings")
    assert {"python", "pyspark", "plan", "jobs", "fold", "scan", "answered", "output",
            "total"} <= set(timings), timings
    assert "jvm" not in timings and "commitlog+consumequeue+index" in timings["jobs"]
    assert doc == lib


def test_cli_reports_bad_sql_and_bad_stores_in_one_line(spark, damaged, tmp_path: Path) -> None:  # noqa: F811
    res = CliRunner().invoke(
        app, ["scan", str(damaged[0]), "--audit", "queues", "--sql", "select nope from nowhere"]
    )
    assert res.exit_code == 2 and "error: --sql" in res.stderr
    res = CliRunner().invoke(app, ["scan", str(tmp_path)])
    assert res.exit_code == 2 and "not a RocketMQ store root" in res.stderr  # usage
    res = CliRunner().invoke(app, ["scan", str(damaged[0]), "--audit", "bogus"])
    assert res.exit_code == 2
    res = CliRunner().invoke(app, ["scan", str(damaged[0]), "--conf", "novalue"])
    assert res.exit_code == 2 and "key=value" in res.stderr  # a bad value: usage


def test_cli_reports_a_spark_failure_in_one_line(damaged) -> None:
    """A setting Spark refuses fails the scan in a fresh process (the session of this test
    run would ignore it) with one line naming the setting and the driver's log, exit 3 (the
    environment: Spark failed)."""
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", "mqtool", "scan", str(damaged[0]), "--audit", "queues",
         "--conf", "spark.sql.shuffle.partitions=many"],
        capture_output=True, text=True, timeout=600,
    )
    assert res.returncode == 3, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "spark.sql.shuffle.partitions" in errors[0] and "'many'" in errors[0]
    assert "driver log: " in errors[0] and res.stdout == ""


def test_failure_message_names_the_innermost_cause() -> None:
    from mqtool.spark.session import failure_message

    java = RuntimeError(
        "An error occurred while calling o52.collect.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: lost\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(x.scala:1)\n"
        "Caused by: java.io.FileNotFoundException: /store/commitlog/00000000000000000000 "
        "(No such file or directory)\n"
        "\tat java.base/java.io.RandomAccessFile.open0(Native Method)\n")
    assert failure_message(java) == (
        "/store/commitlog/00000000000000000000 (No such file or directory)")
    python = RuntimeError(
        "Job aborted: org.apache.spark.api.python.PythonException: Traceback (most recent "
        "call last):\n  File \"/x/source.py\", line 9, in read\n    raise StoreError(m)\n"
        "mqtool.formats.errors.StoreError: commitlog/0: truncated at 0x10\n\n"
        "\tat org.apache.spark.api.python.BasePythonRunner.handle(x.scala:1)\n")
    assert failure_message(python) == (
        "mqtool.formats.errors.StoreError: commitlog/0: truncated at 0x10")
    assert failure_message(RuntimeError(": org.apache.spark.SparkException: gone")) == "gone"
    assert failure_message(RuntimeError("")) == "RuntimeError"


def test_a_context_spark_stopped_is_reported_with_its_reason(tmp_path: Path, monkeypatch) -> None:
    """A standalone master that never answers: Spark stops the context after its own retries
    (60 s, measured: `--master spark://127.0.0.1:1` exits 1 with this line after 64 s) and
    the session fails on a stopped context; the reason is in the driver's log."""
    from py4j.protocol import Py4JError

    from mqtool.spark import session
    from mqtool.spark.errors import SparkScanError

    log = tmp_path / "driver.log"
    log.write_text("26/11/26 17:15:45 ERROR StandaloneSchedulerBackend: Application has been "
                   "killed. Reason: All masters are unresponsive! Giving up.\n")
    monkeypatch.setattr(session, "spark_log_path", lambda: log)
    with pytest.raises(SparkScanError) as e, session.spark_failures("spark://127.0.0.1:1"):
        raise Py4JError("An error occurred while calling None.SparkSession.\n"
                        ": java.lang.IllegalStateException: Cannot call methods on a stopped "
                        "SparkContext.\nThis stopped SparkContext was created at:\n")
    assert str(e.value) == ("Spark (--master spark://127.0.0.1:1) failed: All masters are "
                            f"unresponsive! Giving up. (driver log: {log})")


def test_cli_out_json_tables(spark, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app,
        ["scan", str(store_dir(SCENARIO)), "--audit", "queues,dlq", "--out", str(out),
         "--format", "json", "--now", str(NOW_MS)],
    )
    assert res.exit_code == 0, res.output
    assert "cg_journey" in res.stdout and "integrity" not in res.stdout
    lines = [json.loads(line) for f in sorted((out / "messages").glob("*.json"))
             for line in f.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == sum(
        1 for m in manifest_jsonl(SCENARIO, "commitlog.jsonl") if m["kind"] == "msg"
    )
    dlq = [json.loads(line) for f in sorted((out / "dlq").glob("*.json"))
           for line in f.read_text(encoding="utf-8").splitlines()]
    assert [(d["group"], d["count"]) for d in dlq] == [("cg_journey", 4)]
    assert "wrote messages" in res.stderr


def test_stage_progress_follows_a_job_and_writes_nothing_to_stdout(spark, capsys) -> None:  # noqa: F811
    from mqtool.spark.session import stage_progress

    with stage_progress(spark, "test", enabled=True):
        assert spark.range(0, 200_000, numPartitions=4).selectExpr("sum(id)").first()[0] == sum(
            range(200_000)
        )
    assert capsys.readouterr().out == ""


# --- the tallies: a clean store's cross-file check without a shuffle --------------------------
@pytest.mark.parametrize("scenario", ["4.9.7/journey", "4.9.7/plain", "4.9.7/plain-crashed",
                                      "5.3.3/plain"])
def test_real_clean_stores_are_settled_by_their_tallies(spark, scenario: str) -> None:  # noqa: F811
    """RocketMQ's own stores: the messages' tallies equal the units' and the index entries'
    (the rules for which message gets a unit and how many index keys hold as RocketMQ wrote
    them), so no offset check runs; it would find nothing either."""
    from mqtool.spark import integrity
    from mqtool.spark.scan import run_scan

    store = str(store_dir(scenario))
    got = run_scan(spark, [store], now_ms=NOW_MS, split_size=1000, audits=["integrity"])
    assert got.settled == {store: integrity.Settled(True, True, True)}
    assert got.summary["integrity"] == []


def _damaged_copy(tmp_path: Path, damage: str) -> tuple[Path, set[tuple[str, str, int]]]:
    """A copy of the journey store with one damage to one side of the cross-file check, and
    the findings it must produce."""
    import shutil

    root = tmp_path / "store"
    shutil.copytree(store_dir(SCENARIO), root)
    u = _unit("JourneyTopic", 0, 1)
    m = _msg("JourneyTopic", 0, 1)
    cq_file = root / "consumequeue" / "JourneyTopic" / "0" / u["file"]
    cq_rel = f"consumequeue/JourneyTopic/0/{u['file']}"
    if damage == "unit-offset":  # a unit one byte off: it dangles, its message lacks it
        _patch(cq_file, u["fileOffset"], struct.pack(">q", m["phyOffset"] + 1))
        return root, {("cq-dangling", cq_rel, u["fileOffset"]),
                      ("cq-missing", f"commitlog/{m['file']}", m["fileOffset"])}
    if damage == "unit-twice":  # the queue's last unit written again after it: a unit at
        # queue offset n + 1 for the message at n
        units = [x for x in manifest_jsonl(SCENARIO, "consumequeue.jsonl")
                 if (x["topic"], x["queueId"]) == ("JourneyTopic", 0)]
        last = max(units, key=lambda x: x["index"])
        with open(cq_file, "r+b") as f:
            f.seek(last["fileOffset"])
            unit = f.read(20)
            f.seek(last["fileOffset"] + 20)
            f.write(unit)
        return root, {("cq-mismatch", cq_rel, last["fileOffset"] + 20)}
    if damage in ("unit-tag", "deliver-ms", "deliver-s"):
        # a unit whose tagsCode is not its message's tag hash (a consumer filtering by tag
        # would skip the message); a schedule unit's deliver time 1 ms off (no delay level
        # gives it) or 1 s off (a level's delay changed: no damage)
        if damage != "unit-tag":
            u = _unit("SCHEDULE_TOPIC_XXXX", 2, 1)
            cq_rel = f"consumequeue/SCHEDULE_TOPIC_XXXX/2/{u['file']}"
            cq_file = root / cq_rel
        with open(cq_file, "r+b") as f:
            f.seek(u["fileOffset"] + 12)
            (tag,) = struct.unpack(">q", f.read(8))
            f.seek(u["fileOffset"] + 12)
            f.write(struct.pack(">q", tag + (1000 if damage == "deliver-s" else 1)))
        return root, set() if damage == "deliver-s" else {("cq-mismatch", cq_rel,
                                                           u["fileOffset"])}
    index_file = next((root / "index").iterdir())
    geo = index_geometry(index_file.stat().st_size, buf=index_file.read_bytes())
    at = geo.entry_pos(3)
    (kh,) = struct.unpack(">i", index_file.read_bytes()[at : at + 4])
    slot_at = geo.slot_pos(kh % geo.hash_slot_num)  # entry 3 heads its slot's chain
    if damage == "entry-key":  # an entry's keyHash that none of its message's keys has: and
        # so its slot's head has a keyHash of another slot
        _patch(index_file, at, struct.pack(">i", kh ^ 0x10))
        return root, {("index-mismatch", f"index/{index_file.name}", at),
                      ("index", f"index/{index_file.name}", slot_at)}
    if damage == "slot":  # a slot that points past the entries (lookups by its keys miss)
        _patch(index_file, slot_at, struct.pack(">i", geo.index_num + 5))
        return root, {("index", f"index/{index_file.name}", slot_at)}
    if damage == "entry-time":  # a timeDiff a second off its message's store time
        (td,) = struct.unpack(">i", index_file.read_bytes()[at + 12 : at + 16])
        _patch(index_file, at + 12, struct.pack(">i", td + 1))
        return root, {("index-mismatch", f"index/{index_file.name}", at)}
    if damage == "entry-prev":  # a prevIndex that names no earlier entry (itself)
        _patch(index_file, at + 16, struct.pack(">i", 3))
        return root, {("index-mismatch", f"index/{index_file.name}", at)}
    assert damage == "index-entry"  # an index entry into the middle of a record
    _patch(index_file, at + 4, struct.pack(">q", m["phyOffset"] + 8))
    return root, {("index-dangling", f"index/{index_file.name}", at)}


@pytest.mark.parametrize(("damage", "units", "index"), [
    ("unit-offset", False, True), ("unit-twice", False, True), ("unit-tag", False, True),
    ("deliver-ms", False, True), ("index-entry", True, False), ("entry-key", True, False),
    ("entry-prev", True, False), ("entry-time", True, False)])
def test_tallies_tell_each_damaged_side_from_a_clean_one(
    spark, tmp_path: Path, damage: str, units: bool, index: bool,  # noqa: F811
) -> None:
    """One damage to one side: that side's tallies differ (so the offset check runs for it and
    finds exactly the damage), the other side's still settle."""
    from mqtool.spark import integrity
    from mqtool.spark.scan import run_scan

    root, expected = _damaged_copy(tmp_path, damage)
    got = run_scan(spark, [str(root)], now_ms=NOW_MS, split_size=1000, audits=["integrity"])
    assert got.settled == {str(root): integrity.Settled(units, index, False)}
    assert {(f["kind"], f["file"], f["offset"]) for f in got.summary["integrity"]} == expected


@pytest.mark.parametrize("damage", [None, "index-entry", "unit-tag", "deliver-ms",
                                    "entry-key", "entry-prev", "entry-time"])
def test_tallies_of_the_python_data_source(spark, tmp_path: Path, monkeypatch,  # noqa: F811
                                          damage: str | None) -> None:
    """Without the Java reader (a machine with no JDK) the same tallies settle the same sides:
    the Python data source gives the keys, uniqKey, tags and key columns alike."""
    from mqtool.spark import integrity, source
    from mqtool.spark.scan import run_scan

    monkeypatch.setattr(source, "java_reader_on", lambda _spark: False)
    if damage is None:
        root, expected, want = store_dir(SCENARIO), set(), integrity.Settled(True, True, True)
    else:
        root, expected = _damaged_copy(tmp_path, damage)
        on_index = damage.startswith(("index", "entry"))
        want = integrity.Settled(on_index, not on_index, False)
    got = run_scan(spark, [str(root)], now_ms=NOW_MS, split_size=1000, audits=["integrity"])
    assert got.settled == {str(root): want}
    assert {(f["kind"], f["file"], f["offset"]) for f in got.summary["integrity"]} == expected


@pytest.mark.parametrize("damage", ["unit-tag", "deliver-ms", "deliver-s"])
def test_a_unit_tagscode_finding_is_verifys(spark, tmp_path: Path,  # noqa: F811
                                            damage: str) -> None:
    """scan and verify judge a unit's tagsCode alike (verify's unit rule): a tag hash that is
    not the message's, a schedule unit's deliver time no delay level gives (each the same
    unit, the same values), a deliver time a changed level gives (neither)."""
    from mqtool.integrity.checks import verify
    from mqtool.spark.scan import run_scan

    root, expected = _damaged_copy(tmp_path, damage)
    got = run_scan(spark, [str(root)], now_ms=NOW_MS, split_size=1000, audits=["integrity"])
    errors = verify(root).errors
    assert {(f["kind"], f["file"], f["offset"]) for f in got.summary["integrity"]} == expected
    assert {(f.file, f.offset) for f in errors} == {(f, o) for _, f, o in expected}
    for scan_f, verify_f in zip(got.summary["integrity"], errors, strict=True):
        assert (scan_f["expected"], scan_f["found"]) == (verify_f.expected, verify_f.found)
        assert f"tagsCode {verify_f.found}" in scan_f["detail"]
        assert ("tag hash" if damage == "unit-tag" else "1001 ms after") in scan_f["detail"]


@pytest.mark.parametrize("damage", ["entry-key", "entry-prev", "entry-time", "slot"])
def test_an_index_finding_is_verifys(spark, tmp_path: Path,  # noqa: F811
                                     damage: str) -> None:
    """scan finds the entry whose keyHash is none of its message's keys, or whose prevIndex
    names no earlier entry, and a slot that points past the entries or at an entry of another
    slot, where verify finds each, and says what verify says."""
    from mqtool.integrity.checks import verify
    from mqtool.spark.scan import run_scan

    root, expected = _damaged_copy(tmp_path, damage)
    got = run_scan(spark, [str(root)], now_ms=NOW_MS, split_size=1000, audits=["integrity"])
    assert {(f["kind"], f["file"], f["offset"]) for f in got.summary["integrity"]} == expected
    errors = verify(root).errors
    assert {(f.file, f.offset) for f in errors} == {(f, o) for _, f, o in expected}
    scan = {(f["file"], f["offset"]): f for f in got.summary["integrity"]}
    for f in errors:
        said = scan[f.file, f.offset]
        if said["kind"] == "index":  # the header and slot table: verify's own check
            assert (said["detail"], said["severity"]) == (f.detail, f.severity.value)
        else:
            assert f.detail.split(": ", 1)[1] in said["detail"]
            assert (said["expected"], said["found"]) == (f.expected, f.found)


@pytest.fixture(scope="module")
def split_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reference store whose index files fill up in the middle of a message's keys (6
    entries a file; one to four keys a message, store times 1.7 s apart): the rest of that
    message's keys begin the next file, as ``IndexService#buildIndex`` goes on."""
    from mqtool.refstore.engine import ManualClock, Message, RefStore, StoreConfig

    root = tmp_path_factory.mktemp("split-index") / "store"
    cfg = StoreConfig(commitlog_file_size=1 << 16, cq_entries_per_file=16, index_hash_slots=4,
                      index_max_entries=7)
    clock = ManualClock(1_795_000_000_000)
    with RefStore.open(root, cfg, clock=clock, seed=5) as s:
        s.create_topic("Split", 1)
        for i in range(30):
            keys = " ".join(f"k{i}-{j}" for j in range(i % 4))
            s.put(Message.create("Split", b"x" * 10, keys=keys or None))
            clock.advance(1700)
    return root


def _split_entry(root: Path) -> tuple[Path, int]:
    """An index file of ``root`` that begins with the rest of a message's keys, and the
    position of its second entry (the first the broker measures against its begin time)."""
    from mqtool.spark import integrity

    (span,) = integrity.index_spans([str(root)]).values()
    assert span is not None
    n = next(i for i, f in enumerate(span.files) if f[3])  # a message split across two files
    path = sorted((root / "index").iterdir())[n]
    geo = index_geometry(path.stat().st_size, buf=path.read_bytes())
    return path, geo.entry_pos(2)


@pytest.mark.parametrize("java", [True, False])
def test_index_files_that_split_a_message_settle(spark, split_index: Path,  # noqa: F811
                                                 monkeypatch, java: bool) -> None:
    """Keys of one message in two index files: each entry's timeDiff is judged against its own
    file's begin time (the first entry of a file against none), so a clean store settles by
    its tallies, on the Java reader's path and the Python data source's alike, as verify
    finds nothing."""
    from mqtool.integrity.checks import verify
    from mqtool.spark import integrity, source
    from mqtool.spark.scan import run_scan

    assert not verify(split_index).errors
    _split_entry(split_index)
    if not java:
        monkeypatch.setattr(source, "java_reader_on", lambda _spark: False)
    got = run_scan(spark, [str(split_index)], now_ms=NOW_MS, split_size=1000,
                   audits=["integrity"])
    assert got.settled == {str(split_index): integrity.Settled(True, True, True)}
    assert got.summary["integrity"] == []


def test_a_timediff_finding_in_a_split_file_is_verifys(spark, split_index: Path,  # noqa: F811
                                                       tmp_path: Path) -> None:
    """A timeDiff a second off in a file that begins with a message's other keys: scan and
    verify find the same entry, with the same values."""
    import shutil

    from mqtool.integrity.checks import verify
    from mqtool.spark.scan import run_scan

    root = tmp_path / "store"
    shutil.copytree(split_index, root)
    path, at = _split_entry(root)
    (td,) = struct.unpack(">i", path.read_bytes()[at + 12 : at + 16])
    _patch(path, at + 12, struct.pack(">i", td + 1))
    got = run_scan(spark, [str(root)], now_ms=NOW_MS, split_size=1000, audits=["integrity"])
    (f,) = verify(root).errors
    assert [(r["kind"], r["file"], r["offset"], r["expected"], r["found"])
            for r in got.summary["integrity"]] == [
        ("index-mismatch", f.file, f.offset, f.expected, f.found)]
    assert (f.file, f.offset) == (f"index/{path.name}", at)


def test_java_string_hash_is_tags_code_of(spark) -> None:  # noqa: F811
    """The Spark column of a tag's hash equals the broker's rule (String#hashCode over UTF-16
    code units) on ASCII, accented, CJK and astral-plane text, the empty string and null."""
    from pyspark.sql import functions as F

    from mqtool.formats.rules import tags_code_of
    from mqtool.spark.integrity import java_string_hash

    cases = ["TagA", "a", "", None, "ünïcødé", "\U0001F600x", "标签", "x" * 200, "\x00",
             "A || B", "ZZZZZZZZ"]
    df = spark.createDataFrame([(c,) for c in cases], "tags string")
    got = [r[0] for r in df.select(java_string_hash(F.col("tags"))).collect()]
    assert got == [tags_code_of(c) for c in cases]
    assert got[0] == 2598919 and got[2] == got[3] == 0


def test_index_time_diff_is_verifys_rule(spark) -> None:  # noqa: F811
    """The Spark column of an entry's timeDiff equals verify's rule (whole seconds, truncated,
    clamped to 0..Integer.MAX_VALUE) before, at and after the begin time and past 68 years."""
    from pyspark.sql import functions as F

    from mqtool.integrity.dispatch_rules import index_time_diffs
    from mqtool.spark.integrity import index_time_diff

    begin = 1_795_000_000_000
    cases = [begin - 5000, begin - 1, begin, begin + 1, begin + 999, begin + 1000,
             begin + 1999, begin + 86_400_123, begin + (1 << 31) * 1000 + 5000]
    df = spark.createDataFrame([(c, begin) for c in cases], "ts long, begin long")
    got = [r[0] for r in df.select(index_time_diff(F.col("ts"), F.col("begin"))).collect()]
    assert got == index_time_diffs(cases, begin).tolist()
    assert got[:7] == [0, 0, 0, 0, 0, 1, 1] and got[-1] == 0x7FFFFFFF


def test_index_key_count_is_the_rule_of_index_keys(spark) -> None:  # noqa: F811
    """The Spark count of a message's index keys equals len(rules.index_keys(...)) on tricky
    KEYS texts (empty, spaces only, doubled and trailing separators) and UNIQ_KEY values."""
    from mqtool.formats.rules import index_keys
    from mqtool.spark.integrity import index_key_count

    cases = [(None, None), ("", None), (" ", None), ("a", None), ("a  b ", None),
             ("  x y  z", "u"), ("k", ""), (None, "u"), ("a\tb c", None)]
    df = spark.createDataFrame(cases, "keys string, uniqKey string")
    got = [r[0] for r in df.select(index_key_count()).collect()]
    want = [len(index_keys("T", {k: v for k, v in (("KEYS", keys), ("UNIQ_KEY", uniq))
                                 if v is not None})) for keys, uniq in cases]
    assert got == want
    assert want == [0, 0, 0, 1, 2, 4, 2, 1, 2]


def test_fold_tallies_sums_and_xors_by_name() -> None:
    from mqtool.spark.audits import fold_tallies

    rows = [{"store": "a", "sum_n": 2, "xor_h": 5, "other": 9},
            {"store": "a", "sum_n": 3, "xor_h": 6}, {"store": "a", "sum_n": None, "xor_h": None},
            {"store": "b", "sum_n": 1, "xor_h": 7}]
    assert fold_tallies(rows) == {"a": {"sum_n": 5, "xor_h": 3}, "b": {"sum_n": 1, "xor_h": 7}}


@pytest.mark.parametrize("java", [True, False])
def test_every_job_of_a_scan_carries_the_callers_job_group(
    spark, monkeypatch: pytest.MonkeyPatch, java: bool  # noqa: F811
) -> None:
    """A job group set by the caller (to follow or cancel a scan) holds every job of the scan:
    the Java reader's one job, or on the Python data source's path the consume queue's and
    the index's jobs, which run from threads of their own beside the commitlog's and inherit
    the caller's local properties."""
    from mqtool.spark import source
    from mqtool.spark.scan import run_scan

    if not java:
        monkeypatch.setattr(source, "java_reads", lambda *_, **__: False)
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    group = f"whole-scan-{java}"
    sc.setJobGroup(group, "test")
    try:
        run_scan(spark, [str(store_dir(SCENARIO))], now_ms=NOW_MS, split_size=1000)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert set(tracker.getJobIdsForGroup(None)) == before
    jobs = len(tracker.getJobIdsForGroup(group))
    assert jobs >= 3 if not java else jobs >= 1  # commitlog, queues, index: one job or three
