"""What a new user meets in the first hour: the demo, piped tables, and the small errors."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqtool.cli import app

REPO = Path(__file__).resolve().parents[2]
JOURNEY = REPO / "fixtures" / "rocketmq-stores" / "4.9.7" / "journey" / "store"
BOX = set("│┃━─┏┗┡╇╭╰┌└")


def _digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo") / "demo-store"
    res = CliRunner().invoke(app, ["demo", str(root), "--messages", "400"])
    assert res.exit_code == 0, res.output
    assert "the demo's clock stopped at 2026-11-21 21:35:00.000 UTC" in res.stdout
    return root


def test_the_demo_writes_the_same_store_every_run(demo: Path, tmp_path: Path) -> None:
    """Same ids, offsets, times and bytes: the README's ids can be pasted."""
    again = tmp_path / "demo-store"
    res = CliRunner().invoke(app, ["demo", str(again), "--messages", "400"])
    assert res.exit_code == 0, res.output
    assert _digest(again) == _digest(demo)
    later = tmp_path / "later"
    res = CliRunner().invoke(app, ["demo", str(later), "--messages", "400", "--now",
                                   "2026-11-22T00:00:00Z"])
    assert res.exit_code == 0 and _digest(later) != _digest(demo)


def test_nothing_in_the_demo_is_overdue_at_its_own_time(demo: Path) -> None:
    """Its schedule service ran to the end: every entry still scheduled is due after it."""
    from mqtool.overview import inspect_store, store_time
    from mqtool.store import Store

    with Store.open(demo) as st:
        now = store_time(st)
        levels = inspect_store(st, None).data["delayLevels"]
        pending = {lv["level"]: lv["pending"] for lv in levels if lv["pending"]}
        assert pending and set(pending) <= {3, 17, 18}, pending
        for t, q in st.queue_ids():
            if t == "SCHEDULE_TOPIC_XXXX":
                lv = next(x for x in levels if x["queueId"] == q)
                for e in st.queue_entries(t, q):
                    if e.queue_offset >= lv["delayOffset"]:
                        assert e.entry.tags_code > now, (q, e)


def test_the_report_gives_a_sparse_commitlogs_bytes_on_disk(demo: Path) -> None:
    from mqtool.report.scan_report import store_facts

    g = store_facts(str(demo))["geometry"]
    assert g["commitlogBytes"] == 1 << 30  # its length: RocketMQ's file size
    assert 0 < g["commitlogDiskBytes"] < 16 << 20  # what it takes: the data written


def test_piped_tables_are_plain_rows() -> None:
    """No boxes when stdout is not a terminal: a title, then columns two spaces apart."""
    env = {"COLUMNS": None, "NO_COLOR": "1"}
    for args in (["dlq", "show", str(JOURNEY), "--group", "cg_journey", "--limit", "2"],
                 ["dlq", "list", str(JOURNEY)], ["inspect", str(JOURNEY)],
                 ["messages", str(JOURNEY), "--limit", "3"]):
        res = CliRunner().invoke(app, args, env=env)
        assert res.exit_code == 0, res.output
        assert not set(res.stdout) & BOX, (args, res.stdout[:500])
        assert not any(ln != ln.rstrip() for ln in res.stdout.splitlines()), args
    res = CliRunner().invoke(app, ["dlq", "list", str(JOURNEY)], env=env)
    assert res.stdout.splitlines()[:2] == [
        f"dead-letter queues in {JOURNEY}",
        "group       count  first stored (UTC)       last stored (UTC)        "
        "original topics   resent"]


def test_an_unknown_topic_names_the_topics_there() -> None:
    res = CliRunner().invoke(app, ["messages", str(JOURNEY), "--topic", "NoSuchTopic"])
    assert res.exit_code == 1
    assert re.search(r"error: no topic 'NoSuchTopic' in .*; its topics: %DLQ%cg_journey, "
                     r"%RETRY%cg_journey, DelayTopic, JourneyTopic, SCHEDULE_TOPIC_XXXX",
                     res.stderr), res.stderr
    res = CliRunner().invoke(app, ["cq", str(JOURNEY), "NoSuchTopic"])
    assert res.exit_code == 1 and "it has %DLQ%cg_journey" in res.stderr
    res = CliRunner().invoke(app, ["messages", str(JOURNEY), "--topic", "JourneyTopic",
                                   "--queue", "9"])
    assert res.exit_code == 1
    assert re.search(r"error: no queue 9 of topic 'JourneyTopic' in .*; its queues: 0, 1",
                     res.stderr), res.stderr


def test_a_path_inside_a_store_names_its_root() -> None:
    for inside in ("store/commitlog", "store/consumequeue/JourneyTopic",
                   "store/commitlog/00000000000000000000"):
        run = subprocess.run([sys.executable, "-m", "mqtool", "inspect", inside],
                             cwd=JOURNEY.parent, capture_output=True, text=True,
                             env={**os.environ, "NO_COLOR": "1"})
        assert run.returncode == 2, run.stderr
        assert run.stderr.strip().endswith("not its root: give store"), run.stderr


def test_msg_says_what_it_searched() -> None:
    res = CliRunner().invoke(app, ["msg", str(JOURNEY), "C000020247AB5FFD2B276B8300000000"])
    assert res.exit_code == 1
    assert res.stderr.strip().endswith("(searched by index)"), res.stderr
    res = CliRunner().invoke(app, ["msg", str(JOURNEY), "nothex"])
    assert res.exit_code == 2 and "is not an offsetMsgId" in res.output


def test_scan_summarises_the_rate_per_topic() -> None:
    from mqtool.cli.scan import rate_by_topic

    minute = 60_000
    rows = [{"topic": "A", "bucketStart": 1795295100000 + i * minute, "count": 60 * (i + 1),
             "perSecond": float(i + 1)} for i in range(3)]
    rows.append({"topic": "B", "bucketStart": 1795295100000, "count": 6, "perSecond": 0.1})
    assert [r["row"] for r in rate_by_topic(rows)] == [
        ["A", "2026-11-21 21:05:00.000", "2026-11-21 21:07:00.000", 3, 360, "2.00", "3.00"],
        ["B", "2026-11-21 21:05:00.000", "2026-11-21 21:05:00.000", 1, 6, "0.10", "0.10"],
    ]


def test_a_repaired_copy_keeps_the_stores_holes(demo: Path, tmp_path: Path) -> None:
    """`repair --out` of a sparse store takes about what the store takes on disk, not its length."""

    def on_disk(root: Path) -> tuple[int, int]:
        files = [p for p in root.rglob("*") if p.is_file()]
        return sum(p.stat().st_blocks * 512 for p in files), sum(p.stat().st_size for p in files)

    used, length = on_disk(demo)
    assert used * 8 < length  # the demo's commitlog and queues are pre-sized and sparse
    out = tmp_path / "fixed"
    res = subprocess.run([sys.executable, "-m", "mqtool", "repair", str(demo), "--out", str(out)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    copy_used, copy_length = on_disk(out)
    assert copy_length == length
    assert copy_used <= used + (1 << 20), (copy_used, used)
    assert _digest(out) == _digest(demo)
