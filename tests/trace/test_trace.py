"""``mqtool trace`` against the real journey store written by RocketMQ 4.9.7 (and 5.3.3 timers).

The expected journeys come from ``journey-log.txt`` (what the consumer did) and the manifest
(what RocketMQ's own readers found in the store), never from the code under test.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import ROOT, manifest_jsonl, store_dir
from mqtool.backlog import backlogs
from mqtool.cli import app
from mqtool.store import Store
from mqtool.trace import Trace, TraceError, scan_for, trace_id, trace_key

JOURNEY = "4.9.7/journey"
LEVELS = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 10s 1h 2h"
GOLDEN = Path(__file__).parent / "golden"
REL_STORE = "fixtures/rocketmq-stores/4.9.7/journey/store"

S, R = "SCHEDULE_TOPIC_XXXX", "%RETRY%cg_journey"
ORIG = ("original", "JourneyTopic")
RETRY = [("schedule", S), ("retry", R)]
# message (KEYS) -> (hops as (kind, topic), verdict kind, verdict text) from journey-log.txt
EXPECTED: dict[str, tuple[list[tuple[str, str]], str, str]] = {
    "j-ok-0": ([ORIG], "delivered", "delivered; consumption unknown (no consumerOffset.json)"),
    "j-ok-1": ([ORIG], "delivered", "delivered; consumption unknown (no consumerOffset.json)"),
    "j-ok-2": ([ORIG], "delivered", "delivered; consumption unknown (no consumerOffset.json)"),
    "j-once-0": ([ORIG, *RETRY], "delivered", "delivered after 1 retry; "
                 "consumption unknown (no consumerOffset.json)"),
    "j-once-1": ([ORIG, *RETRY], "delivered", "delivered after 1 retry; "
                 "consumption unknown (no consumerOffset.json)"),
    "j-twice-0": ([ORIG, *RETRY, *RETRY], "delivered", "delivered after 2 retries; "
                  "consumption unknown (no consumerOffset.json)"),
    **{
        f"j-always-{i}": ([ORIG, *RETRY, *RETRY, *RETRY, ("dlq", "%DLQ%cg_journey")],
                          "dead-lettered", "dead-lettered after 3 retries (group cg_journey)")
        for i in range(3)
    },
    "j-long-0": ([ORIG, ("schedule", S)], "waiting-retry",
                 "waiting for retry 1 at 2026-11-21 22:02:52.491, in 59m 47s "
                 "(group cg_journey, delay level 17)"),
    "j-dlq-0": ([ORIG, ("dlq", "%DLQ%cg_journey")], "dead-lettered",
                "dead-lettered after 0 retries (group cg_journey)"),
    "d-level2": ([("schedule", S), ("delivered", "DelayTopic")], "delivered",
                 "delivered; consumption unknown (no consumerOffset.json)"),
    "d-level16-early": ([("schedule", S), ("delivered", "DelayTopic")], "delivered",
                        "delivered; consumption unknown (no consumerOffset.json)"),
    "d-level16-pending": ([("schedule", S)], "scheduled",
                          "still scheduled: delay level 16 due at 2026-11-21 21:03:14.546, "
                          "in 9.943s"),
    "d-level18-pending": ([("schedule", S)], "scheduled",
                          "still scheduled: delay level 18 due at 2026-11-21 23:03:04.547, "
                          "in 1h 59m 59s"),
    "j-late-0": ([ORIG, ("schedule", S)], "waiting-retry",
                 "waiting for retry 1 at 2026-11-21 21:03:14.603, in 10s "
                 "(group cg_journey, delay level 16)"),
}


def _log_names() -> set[str]:
    text = (ROOT / "fixtures/rocketmq-stores/4.9.7/journey/journey-log.txt").read_text("utf-8")
    names = set()
    for word in text.replace(",", " ").split():
        if word.startswith(("j-", "d-")):
            names.add(word)
    return names


def _manifest_records() -> list[dict[str, Any]]:
    return [r for r in manifest_jsonl(JOURNEY, "commitlog.jsonl") if r["kind"] == "msg"]


def _records_of(name: str) -> list[dict[str, Any]]:
    """The manifest's records of one message: its uniqKey's records, in commitlog order."""
    recs = _manifest_records()
    uniq = {r["uniqKey"] for r in recs if r["keys"] == name}
    assert len(uniq) == 1
    return [r for r in recs if r["uniqKey"] in uniq]


def _same(tr: Trace) -> dict[str, Any]:
    d = tr.to_json()
    del d["id"]
    return d


@pytest.fixture(scope="module")
def journey() -> Store:
    return Store.open(store_dir(JOURNEY))


def test_every_message_of_the_log_is_covered() -> None:
    assert _log_names() == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_journey_by_uniq_key_and_by_every_hop_offset_msg_id(journey: Store, name: str) -> None:
    hops, vkind, verdict = EXPECTED[name]
    recs = _records_of(name)
    uniq = recs[0]["uniqKey"]
    tr = trace_id(journey, uniq, delay_levels=LEVELS)
    assert tr.via == "index"
    assert tr.uniq_key == uniq
    assert [(h.kind, h.topic) for h in tr.hops] == hops
    assert [h.commit_log_offset for h in tr.hops] == [r["phyOffset"] for r in recs]
    for h, r in zip(tr.hops, recs, strict=True):
        assert (h.queue_id, h.queue_offset, h.store_timestamp, h.reconsume_times) == (
            r["queueId"], r["queueOffset"], r["storeTimestamp"], r["reconsumeTimes"])
        assert h.offset_msg_id == r["offsetMsgId"]
        if h.topic == S:
            assert h.deliver_timestamp == r["dispatchTagsCode"]  # the CQ's deliver time
            assert h.delay_level == r["queueId"] + 1 == int(r["properties"]["DELAY"])
    assert (tr.verdict_kind, tr.verdict) == (vkind, verdict)
    expected = _same(tr)
    for r in recs:  # the offsetMsgId of any hop gives the same answer
        assert _same(trace_id(journey, r["offsetMsgId"], delay_levels=LEVELS)) == expected
    assert _same(trace_id(journey, uniq.lower(), delay_levels=LEVELS)) == expected


def test_schedule_states_follow_delay_offsets(journey: Store) -> None:
    """delayOffset.json {2:1,3:6,4:4,5:3,16:1}: level 17 never ran, level 16 delivered 1."""
    long = trace_id(journey, _records_of("j-long-0")[0]["uniqKey"], delay_levels=LEVELS)
    sched = long.hops[1]
    assert (sched.state, sched.delay_level, sched.delay_ms) == ("pending", 17, 3_600_000)
    assert sched.deliver_timestamp == 1795298572491
    assert sched.state_detail == "pending for 12.112s, due in 59m 47s (delayOffset 17:0)"
    early = trace_id(journey, _records_of("d-level16-early")[0]["uniqKey"], delay_levels=LEVELS)
    assert early.hops[0].state == "delivered"  # queue offset 0 < delayOffset 16:1
    late = trace_id(journey, _records_of("j-late-0")[0]["uniqKey"], delay_levels=LEVELS)
    assert late.hops[1].queue_offset == 2 and late.hops[1].state == "pending"


def test_now_moves_pending_to_overdue(journey: Store) -> None:
    uniq = _records_of("j-long-0")[0]["uniqKey"]
    tr = trace_id(journey, uniq, delay_levels=LEVELS, now=1795298572491 + 5000)
    assert tr.now_source == "given"
    assert tr.hops[1].state == "overdue"
    assert tr.verdict.startswith("waiting for retry 1 at 2026-11-21 22:02:52.491, overdue by 5s")


def test_dlq_trace_gives_the_resend_command(journey: Store) -> None:
    recs = _records_of("j-always-0")
    tr = trace_id(journey, recs[-1]["offsetMsgId"], delay_levels=LEVELS, store_label="/s t/store")
    assert tr.dlq_group == "cg_journey"
    assert tr.resend_command == (
        f"mqtool dlq resend '/s t/store' --group cg_journey --msg-id {recs[-1]['offsetMsgId']} "
        "--target TARGET_STORE"
    )


def test_resent_copy_is_a_resend_hop(store_copy: Callable[[str], Path]) -> None:
    """`mqtool dlq resend` into a copy of the store; the trace shows the resent copy."""
    root = store_copy(JOURNEY)
    recs = _records_of("j-always-0")
    before = trace_id(Store.open(root), recs[0]["uniqKey"], delay_levels=LEVELS)
    cmd = before.resend_command
    assert cmd is not None
    args = cmd.split()[1:]
    args[args.index("TARGET_STORE")] = str(root)
    res = _cli(args)
    assert res.exit_code == 0, res.output
    after = trace_id(Store.open(root), recs[0]["offsetMsgId"], delay_levels=LEVELS)
    assert [h.kind for h in after.hops] == [h.kind for h in before.hops] + ["resend"]
    hop = after.hops[-1]
    assert (hop.topic, hop.reconsume_times, hop.group) == (R, 0, "cg_journey")
    assert hop.message.properties["MQTOOL_DLQ_MSG_ID"] == recs[-1]["offsetMsgId"]
    assert hop.note == f"resent from DLQ record {recs[-1]['offsetMsgId']}"
    assert after.verdict.startswith("resent from %DLQ%cg_journey at ")
    # where the copy went, instead of the command that would resend it again
    assert after.resend_command is None
    assert after.resent_to is not None and after.resent_to.startswith(
        f"{R} q{hop.queue_id}@{hop.queue_offset} at ")
    assert after.resent_to.endswith(f"(offsetMsgId {hop.offset_msg_id})")
    assert after.verdict.endswith("; delivered; consumption unknown (no consumerOffset.json)")
    assert after.via == "index"


def test_default_delay_levels_change_only_the_delay_text(journey: Store) -> None:
    uniq = _records_of("j-once-0")[0]["uniqKey"]
    tr = trace_id(journey, uniq)
    assert tr.hops[1].delay_level == 3 and tr.hops[1].delay_ms == 10_000  # RocketMQ's 3rd: 10s
    assert tr.hops[1].deliver_timestamp == 1795294973490  # from the consume queue, not levels


def test_trace_key_groups_copies_by_message(journey: Store) -> None:
    kt = trace_key(journey, "j-twice-0", delay_levels=LEVELS)
    assert kt.via == "index" and len(kt.traces) == 1
    assert len(kt.traces[0].hops) == 5
    only = trace_key(journey, "j-twice-0", topic=R, delay_levels=LEVELS)
    assert _same(only.traces[0]) == _same(kt.traces[0])


def test_bad_and_unknown_ids(journey: Store) -> None:
    with pytest.raises(TraceError, match="not a message id"):
        trace_id(journey, "xyz")
    with pytest.raises(TraceError, match="no record"):
        trace_id(journey, "C000020247AB5FFD2B276B8300000000")
    with pytest.raises(TraceError, match="no record with key"):
        trace_key(journey, "no-such-key")


def test_without_index_files_same_answer_by_scan(
    journey: Store, store_copy: Callable[[str], Path]
) -> None:
    root = store_copy(JOURNEY)
    shutil.rmtree(root / "index")
    bare = Store.open(root)
    assert not bare.has_index
    seen: list[tuple[int, int]] = []
    for name in sorted(EXPECTED):
        recs = _records_of(name)
        a = trace_id(journey, recs[0]["uniqKey"], delay_levels=LEVELS)
        b = trace_id(bare, recs[0]["uniqKey"], delay_levels=LEVELS,
                     progress=lambda d, t: seen.append((d, t)))
        c = trace_id(bare, recs[-1]["offsetMsgId"], delay_levels=LEVELS)
        assert b.via == c.via == "scan"
        for x in (b, c):
            dx, da = _same(x), _same(a)
            for d in (dx, da):
                d.pop("via"), d.pop("resendCommand"), d.pop("notes")
            assert dx == da
    total = sum(f.size for f in bare.commitlog_files)
    assert seen and seen[-1] == (total, total)
    res = CliRunner().invoke(app, ["trace", str(root), recs[0]["uniqKey"], "--delay-levels",
                                   LEVELS], env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert res.exit_code == 0, res.output
    assert "found via scan" in res.stdout


def test_scan_and_index_agree_on_the_plain_store() -> None:
    plain = Store.open(store_dir("4.9.7/plain"))
    recs = [r for r in manifest_jsonl("4.9.7/plain", "commitlog.jsonl") if r["kind"] == "msg"]
    sample = recs[:: max(1, len(recs) // 25)]
    pats = [f"UNIQ_KEY\x01{r['uniqKey']}".encode() for r in sample]
    found = {m.physical_offset for m in scan_for(plain, pats) if m.uniq_key in
             {r["uniqKey"] for r in sample}}
    want = {r["phyOffset"] for r in recs if r["uniqKey"] in {s["uniqKey"] for s in sample}}
    assert found == want
    for r in sample[:5]:
        tr = trace_id(plain, r["uniqKey"])
        assert r["phyOffset"] in [h.commit_log_offset for h in tr.hops]


def test_timer_messages_on_5_3_3() -> None:
    st = Store.open(store_dir("5.3.3/plain"))
    recs = [r for r in manifest_jsonl("5.3.3/plain", "commitlog.jsonl") if r["kind"] == "msg"]
    timer = [r for r in recs if r["topic"] == "rmq_sys_wheel_timer"]
    delivered = {r["uniqKey"] for r in recs if r["topic"] != "rmq_sys_wheel_timer"}
    for r in timer:
        tr = trace_id(st, r["uniqKey"], delay_levels="1s 2s 3s " * 5 + "30m 1h 2h")
        assert tr.hops[0].kind == "timer"
        assert tr.hops[0].deliver_timestamp == int(r["properties"]["TIMER_OUT_MS"])
        if r["uniqKey"] in delivered:
            assert [h.kind for h in tr.hops] == ["timer", "delivered"]
            assert tr.hops[0].state == "delivered"
        else:
            assert [h.kind for h in tr.hops] == ["timer"]
            assert tr.verdict_kind == "scheduled"
            assert tr.verdict.startswith("still scheduled: timer due at")


PENDING_TIMER = "C000020276E15FFD2B276B9AEBEE0035"  # due 1795300115000, an hour after its store
WHEEL_MS = (604800 - 60) * 1000  # a start this long after a read time keeps it (1 s precision)


@pytest.mark.parametrize(("now", "kind", "state"), [
    (1795300115000 + WHEEL_MS, "scheduled", "overdue"),  # its slot is the oldest one kept
    (1795300115000 + WHEEL_MS + 1000, "lost", "never-delivered"),
])
def test_a_start_more_than_7_days_late_never_delivers_the_timer_message(
        now: int, kind: str, state: str) -> None:
    """RocketMQ's timer recovery raises a read time older than the wheel's 7 days (see
    tests/integrity/test_timer_rocketmq.py); the slots before it are never read."""
    with Store.open(store_dir("5.3.3/plain")) as st:
        tr = trace_id(st, PENDING_TIMER, now=now)
    assert (tr.verdict_kind, tr.hops[0].state) == (kind, state)
    if kind == "lost":
        assert tr.verdict.startswith("lost: timer due at 2026-11-21 22:28:35.000 is before")
        assert "raises the timer's read time (2026-11-21 21:28:41.000" in tr.hops[0].state_detail
    res = _cli(["trace", str(store_dir("5.3.3/plain")), PENDING_TIMER, "--now", str(now),
                "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["verdictKind"] == kind
    with Store.open(store_dir("5.3.3/plain")) as st:  # inspect's and scan's timer backlog
        tb = backlogs(st, None, now, pop=False)["timerBacklog"]
    assert (tb["waiting"], tb["overdue"], tb["neverDelivered"]) == (1, 1, int(kind == "lost"))


def _cli(args: list[str]) -> Any:
    return CliRunner().invoke(app, args, env={"COLUMNS": "120", "NO_COLOR": "1"})


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_golden_console_output(
    journey: Store, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    uniq = _records_of(name)[0]["uniqKey"]
    res = _cli(["trace", REL_STORE, uniq, "--delay-levels", LEVELS])
    assert res.exit_code == 0, res.output
    golden = GOLDEN / f"{name}.txt"
    if os.environ.get("MQTOOL_UPDATE_GOLDEN"):
        golden.write_text(res.stdout, encoding="utf-8")
    assert res.stdout == golden.read_text(encoding="utf-8")


def test_cli_json_equals_library(journey: Store) -> None:
    recs = _records_of("j-always-1")
    res = _cli(["trace", str(journey.root), recs[2]["offsetMsgId"], "--delay-levels", LEVELS,
                "--json"])
    assert res.exit_code == 0, res.output
    lib = trace_id(journey, recs[2]["offsetMsgId"], delay_levels=LEVELS,
                   store_label=str(journey.root))
    doc = json.loads(res.stdout)
    assert doc.pop("delayLevels")["origin"] == "--delay-levels"  # the CLI says where from
    assert doc == lib.to_json()
    for k in ("id", "uniqKey", "verdict", "via", "hops"):
        assert k in doc
    for k in ("topic", "queueId", "queueOffset", "commitLogOffset", "storeTimestamp",
              "reconsumeTimes", "delayLevel", "deliverTimestamp", "state"):
        assert k in doc["hops"][0]
    res = _cli(["trace", str(journey.root), "--key", "j-always-1", "--delay-levels", LEVELS,
                "--json"])
    doc = json.loads(res.stdout)
    assert doc.pop("delayLevels")["origin"] == "--delay-levels"
    assert doc == trace_key(
        journey, "j-always-1", delay_levels=LEVELS, store_label=str(journey.root)).to_json()


def test_cli_errors(journey: Store) -> None:
    res = _cli(["trace", str(journey.root), "nothex"])
    assert res.exit_code == 2 and "error: 'nothex' is not a message id" in res.stderr
    assert res.stdout == ""
    res = _cli(["trace", str(journey.root)])
    assert res.exit_code == 2
    res = _cli(["trace", str(journey.root), "--key", "j-ok-0", "--now", "wall"])
    assert res.exit_code == 0 and "(given)" in res.stdout
