"""``mqtool scan`` of the real 5.3.3 POP and timer stores: the pop and timer audits (what the
broker still owes: POP checkouts not acked, messages waiting in the timer) equal what the
stores' manifests and the scenario logs say, in the JSON, the text and the HTML report, which
headless Chromium renders."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from report_browser import render, shot_path

from conftest import manifest_jsonl, store_dir
from mqtool.report.page import read_page_data

pytestmark = pytest.mark.slow

POP, TIMER = "5.3.3/pop", "5.3.3/timer"


def _mqtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqtool", *args], capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """ONE scan of both stores, --json and --html."""
    page = tmp_path_factory.mktemp("scan-pop") / "report.html"
    stores = [str(store_dir(POP)), str(store_dir(TIMER))]
    res = _mqtool("scan", *stores, "--master", "local[2]", "--audits", "pop,timer,dlq",
                  "--json", "--html", str(page))
    assert res.returncode == 0, res.stderr
    text = _mqtool("scan", stores[0], "--master", "local[1]", "--audits", "pop,timer")
    assert text.returncode == 0, text.stderr
    return {"doc": json.loads(res.stdout), "page": page, "stores": stores,
            "text": text.stdout}


def _pop_expected() -> dict[tuple[str, str, int], Counter[str]]:
    """From the scenario log (what the POP client did): per (group, topic, queue) the
    checkouts (each pop, and each invisible-time change: a new checkpoint), the acks, the
    changes and the messages held (in flight at the stop)."""
    log = (store_dir(POP).parent / "scenario-log.txt").read_text(encoding="utf-8")
    where: dict[str, tuple[str, str, int]] = {}
    out: dict[tuple[str, str, int], Counter[str]] = {}
    for ln in log.splitlines():
        p = ln.split()
        key = next((w for w in p if w.startswith("PopTopic")), None)
        if key is None or p[1] == "send":
            continue
        if p[1] == "popped":  # popped KEY from TOPIC rt=N ck=.. pt it .. .. broker queue offset
            held = p[2] == "and"
            topic = key.split("-")[0]
            group = "cg_pop" if topic == "PopTopic" else "cg_pop2"
            rt = "rt=0" if held else p[5]
            if rt != "rt=0":
                topic = f"%RETRY%{group}_{topic}" if group == "cg_pop" else \
                    f"%RETRY%{group}+{topic}"
            where[key] = (group, topic, int(p[-2]))
            c = out.setdefault(where[key], Counter())
            c["popped"] += 1
            if held:
                c["inFlight"] += 1
        elif p[1] == "ack" and p[-1] == "OK":
            out[where[key]]["acked"] += 1
        elif p[1] == "change" and p[-1] == "OK":
            out[where[key]]["invisibleChanged"] += 1
            out[where[key]]["popped"] += 1  # changeInvisibleTime writes a new checkpoint
    return out


def _every_timed_out_pop_came_back() -> bool:
    """In the scenario log, every pop that was neither acked before the message's next pop
    nor held is followed by a pop of the message with one more reconsume time: the revive
    service revived it (a changed invisible time ends in a revive too)."""
    log = (store_dir(POP).parent / "scenario-log.txt").read_text(encoding="utf-8")
    popped: set[tuple[str, int]] = set()
    unacked: list[tuple[str, int]] = []
    last: dict[str, tuple[str, int]] = {}
    held: set[str] = set()
    for ln in log.splitlines():
        p = ln.split()
        key = next((w for w in p if w.startswith("PopTopic")), None)
        if key is None:
            continue
        if "held for an hour" in ln:
            held.add(key)
        elif p[1] == "popped":
            if key in last:
                unacked.append(last[key])
            last[key] = (key, int(p[5].removeprefix("rt=")))
            popped.add(last[key])
        elif p[1] == "ack" and p[-1] == "OK":
            last.pop(key, None)
    unacked += [v for k, v in last.items() if k not in held]
    return bool(unacked) and all((k, rt + 1) in popped for k, rt in unacked)


def test_pop_audit_equals_the_scenario(scanned: dict[str, Any]) -> None:
    got = {(r["group"], r["topic"], r["queueId"]): r for r in scanned["doc"]["pop"]
           if r["store"] == scanned["stores"][0]}
    expected = _pop_expected()
    assert set(got) == set(expected)
    for k, c in expected.items():
        r = got[k]
        assert {n: r[n] for n in ("popped", "acked", "invisibleChanged", "inFlight")} == \
            {n: c[n] for n in ("popped", "acked", "invisibleChanged", "inFlight")}, k
        # the rest was not acked: revived (every one came back one reconsume time later,
        # as the log shows below), none left due for revive
        assert r["revived"] == \
            c["popped"] - c["acked"] - c["invisibleChanged"] - c["inFlight"], k
        assert r["reviveDue"] == 0, k
    assert _every_timed_out_pop_came_back()
    held = [ln.split() for ln in (store_dir(POP).parent / "scenario-log.txt").read_text(
        encoding="utf-8").splitlines() if "held for an hour" in ln]
    for p in held:  # ... KEY ck=N popTime invisibleTime ... broker queue offset
        i = next(i for i, w in enumerate(p) if w.startswith("PopTopic"))
        topic = p[i].split("-")[0]
        row = got[("cg_pop" if topic == "PopTopic" else "cg_pop2", topic, int(p[-2]))]
        assert row["invisibleUntil"] == int(p[i + 2]) + int(p[i + 3])
    assert held
    assert not [r for r in scanned["doc"]["pop"] if r["store"] == scanned["stores"][1]]


def _timer_expected(name: str) -> tuple[Counter[str], list[int]]:
    """From the manifest: timer records (rmq_sys_wheel_timer) whose message has no later copy
    in its real topic are waiting; their real topics and due times (TIMER_OUT_MS)."""
    msgs = [r for r in manifest_jsonl(name, "commitlog.jsonl") if r["kind"] == "msg"]
    waiting: Counter[str] = Counter()
    due = []
    for i, r in enumerate(msgs):
        p = r["properties"]
        if r["topic"] != "rmq_sys_wheel_timer":
            continue
        delivered = any(x["topic"] == p["REAL_TOPIC"] and x["bodySha256"] == r["bodySha256"]
                        and x["properties"].get("TAGS") == p.get("TAGS") for x in msgs[i + 1:])
        if not delivered:
            waiting[p["REAL_TOPIC"]] += 1
            due.append(int(p["TIMER_OUT_MS"]))
    return waiting, due


def test_timer_audit_equals_the_manifests(scanned: dict[str, Any]) -> None:
    rows = {r["store"]: r for r in scanned["doc"]["timer"]}
    for name, store in zip((POP, TIMER), scanned["stores"], strict=True):
        waiting, due = _timer_expected(name)
        r = rows[store]
        assert r["byTopic"] == dict(waiting) and r["waiting"] == len(due)
        assert r["nextDue"] == min(due)
        assert sum(b["count"] for b in r["byDueMinute"]) == len(due)
        assert r["overdue"] == sum(d <= scanned["doc"]["now"] for d in due)
        assert r["neverDelivered"] == 0  # judged at the stores' own time: the read time kept
    # the timer scenario's own account: 5 delivery-time messages waiting an hour or more
    assert rows[scanned["stores"][1]]["byTopic"] == {"TimerTopic": 5}


def test_dlq_original_topic_of_pop_dead_letters(scanned: dict[str, Any]) -> None:
    got = {r["group"]: r["byOriginalTopic"] for r in scanned["doc"]["dlq"]}
    # %DLQ%<group> records whose RETRY_TOPIC is %RETRY%<group>_<topic> or %RETRY%<group>+<topic>
    want: dict[str, Counter[str]] = {}
    for r in manifest_jsonl(POP, "commitlog.jsonl"):
        if r["kind"] == "msg" and r["topic"].startswith("%DLQ%"):
            g = r["topic"][len("%DLQ%"):]
            rest = r["properties"]["RETRY_TOPIC"][len("%RETRY%") + len(g) + 1:]
            want.setdefault(g, Counter())[rest] += 1
    assert got == {g: dict(c) for g, c in want.items()}


def test_text_and_report_show_pop_and_timer(scanned: dict[str, Any], tmp_path: Path) -> None:
    assert "POP checkouts" in scanned["text"] and "timer backlog" in scanned["text"]
    html = scanned["page"].read_text(encoding="utf-8")
    data = read_page_data(html)
    assert data["scan"]["pop"] == scanned["doc"]["pop"]
    assert data["scan"]["timer"] == scanned["doc"]["timer"]
    png = shot_path(tmp_path, "scan-pop-timer.png")
    seen = render(scanned["page"], png, sort_table="table.pop", sort_column=3)
    assert seen.page_errors == []
    assert [c for c in seen.console if c[0] in ("error", "warning")] == []
    popped = sorted((r["popped"] for r in scanned["doc"]["pop"]), reverse=True)
    assert seen.sorted_column == [str(n) for n in popped]  # numeric order, in the browser
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
