"""``mqtool scan --report``: the audit page of two real stores, one of them damaged.

One scan run (Spark is slow) makes both the ``--json`` document and the ``--report`` page; every
test here reads those two. The page's embedded ``scan`` data must equal the JSON, the store facts
read without Spark must agree with the scan (pending per delay level) and with the stores'
provenance (file sizes), and headless Chromium must render the page with no console error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from report_browser import assert_self_contained, render, shot_path

from conftest import manifest_jsonl, store_dir
from mqtool.report.page import read_page_data

NOW = "2026-11-21T21:53:20Z"  # between the journey's level-16 and level-17 due times
PLAIN = store_dir("4.9.7/plain")


def _mqtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqtool", *args], capture_output=True,
                          text=True, timeout=1500, env={**os.environ, "NO_COLOR": "1"})


def _damaged_journey(root: Path) -> tuple[Path, set[tuple[str, int]]]:
    """A copy of the journey store with two kinds of damage and a consumerOffset.json."""
    shutil.copytree(store_dir("4.9.7/journey"), root)
    expected: set[tuple[str, int]] = set()  # (file, offset in the file) of each finding
    # a body byte flipped: a CRC finding at the record's commitlog offset
    msg = next(m for m in manifest_jsonl("4.9.7/journey", "commitlog.jsonl")
               if m["kind"] == "msg" and m["topic"] == "JourneyTopic" and m["queueId"] == 0
               and m["queueOffset"] == 0)
    path = root / "commitlog" / msg["file"]
    data = bytearray(path.read_bytes())
    data[msg["fileOffset"] + 88] ^= 0xFF  # IPv4 hosts: the body starts at byte 88
    path.write_bytes(bytes(data))
    expected.add((f"commitlog/{msg['file']}", msg["fileOffset"]))
    # a torn consume-queue append: a file that is not whole 20-byte units
    cq = root / "consumequeue" / "DelayTopic" / "1" / "00000000000000000000"
    whole = cq.stat().st_size
    with open(cq, "ab") as f:
        f.write(b"\x07" * 7)
    expected.add(("consumequeue/DelayTopic/1/00000000000000000000", whole))
    # the broker's own format (fastjson: integer keys unquoted) for the lag audit
    (root / "config" / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"JourneyTopic@cg_journey":{0:3,1:5},'
        '\n\t\t"%RETRY%cg_journey@cg_journey":{0:10}\n\t}\n}', encoding="utf-8")
    return root, expected


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """ONE scan of both stores with --json and --report."""
    tmp = tmp_path_factory.mktemp("scan-report")
    journey, expected = _damaged_journey(tmp / "journey" / "store")
    page = tmp / "report.html"
    res = _mqtool("scan", str(journey), str(PLAIN), "--master", "local[2]",
                  "--conf", "spark.sql.shuffle.partitions=2", "--now", NOW,
                  "--json", "--report", str(page))
    assert res.returncode == 1, res.stderr  # integrity findings: exit 1, page still written
    assert f"wrote {page}" in res.stderr
    text = page.read_text(encoding="utf-8")
    return {"doc": json.loads(res.stdout), "page": page, "text": text,
            "data": read_page_data(text), "journey": str(journey), "expected": expected}


def test_page_numbers_equal_the_scan_json(scanned: dict[str, Any]) -> None:
    data, doc = scanned["data"], scanned["doc"]
    assert data["scan"] == {k: v for k, v in doc.items() if k != "timings"}  # not the page's
    assert [f["store"] for f in data["stores"]] == doc["stores"] == [scanned["journey"],
                                                                    str(PLAIN)]
    found = {(f["file"], f["offset"]) for f in doc["integrity"]}
    assert scanned["expected"] <= found


def test_due_times_agree_with_the_schedule_audit(scanned: dict[str, Any]) -> None:
    doc = scanned["doc"]
    for facts in scanned["data"]["stores"]:
        pending = {r["delayLevel"]: r["pending"] for r in doc["schedule"]
                   if r["store"] == facts["store"]}
        due = {d["delayLevel"]: d["dueTimestamps"] for d in facts["scheduleDue"]}
        assert {lvl: len(t) for lvl, t in due.items() if t} == {
            lvl: n for lvl, n in pending.items() if n}
        nxt = {r["delayLevel"]: r["nextDeliverTimestamp"] for r in doc["schedule"]
               if r["store"] == facts["store"] and r["pending"]}
        assert {lvl: min(t) for lvl, t in due.items() if t} == nxt
    journey = scanned["data"]["stores"][0]
    assert sum(len(d["dueTimestamps"]) for d in journey["scheduleDue"]) == 4  # PROVENANCE.md


def test_geometry_matches_the_stores(scanned: dict[str, Any]) -> None:
    # fixtures/PROVENANCE.md: journey has 5 commitlog files of 4 KiB, plain 13 of 256 KiB
    journey, plain = (f["geometry"] for f in scanned["data"]["stores"])
    assert (journey["commitlogFiles"], journey["mappedFileSize"]) == (5, 4096)
    assert (plain["commitlogFiles"], plain["mappedFileSize"]) == (13, 256 * 1024)
    assert journey["consumeQueueUnitSize"] == 20 and plain["indexFiles"] == 3


def test_page_shows_every_store_and_every_finding(scanned: dict[str, Any]) -> None:
    text, doc = scanned["text"], scanned["doc"]
    assert_self_contained(text)
    for i, s in enumerate(doc["stores"], 1):
        assert f'id="store-{i}">Store {i}: {s}</h2>' in text
    for f in doc["integrity"]:
        assert f">{hex(f['offset'])}</td>" in text and f"<td>{f['file']}</td>" in text
    for r in doc["lag"]:
        assert f"{r['group']} · {r['topic']} q{r['queueId']}" in text
    # journey: rate, DLQ, retry depth, schedule, lag; plain has messages only: rate
    assert text.count("<svg") == 6


def test_page_renders_in_chromium_and_sorts(scanned: dict[str, Any], tmp_path: Path) -> None:
    png = shot_path(tmp_path, "scan-report.png")
    shutil.copy(scanned["page"], png.with_suffix(".html"))  # kept beside it for the README
    seen = render(scanned["page"], png, sort_table="table.findings", sort_column=3)
    assert seen.page_errors == []
    assert [c for c in seen.console if c[0] in ("error", "warning")] == []
    assert seen.requests == [scanned["page"].resolve().as_uri()]
    assert seen.title == "mqtool scan report"
    offsets = sorted((f["offset"] for f in scanned["doc"]["integrity"]
                      if f["store"] == scanned["journey"]), reverse=True)
    assert seen.sorted_column == [hex(o) for o in offsets]  # numeric, not text, order
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 50_000


def test_bad_report_path_fails_before_spark(tmp_path: Path) -> None:
    res = _mqtool("scan", str(PLAIN), "--report", str(tmp_path / "missing" / "r.html"))
    assert res.returncode == 2
    assert res.stderr.startswith("error: ") and "does not exist" in res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""
