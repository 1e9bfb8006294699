"""``mqtool repair`` on a RocketMQ 5.3.3 store whose commitlog is cut where timer messages are:
the timerlog is truncated at the first unit whose ``rmq_sys_wheel_timer`` record is past the
cut, wheel slots leading into the dropped part are rebuilt, ``config/timercheck`` and
``config/timermetrics`` follow, and the copy verifies clean. ``verify``'s "restart would lose"
names the units the broker itself would keep although their record is gone.

The store is the real 5.3.3 one (fixtures/rocketmq-stores/5.3.3/plain, see PROVENANCE.md): five
timer units, ``timerlog`` positions 0, 52, 104 (due in 3 s: slot 250118, delivered), 156 (due in
1 h: slot 253715, pending) and 208 (due in 4 s: slot 250119, delivered), pointing at the
``rmq_sys_wheel_timer`` records at commitlog offsets 12330, 12646, 12962, 13278 and 13767."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from integrity_damage import (
    FIXTURES,
    copy_store,
    patch,
    read_at,
    run,
    tree_digest,
    verify_json,
)

from mqtool.formats.config.fastjson import loads_fastjson
from mqtool.formats.timer import (
    SLOT_SIZE,
    TimerLogUnit,
    iter_timerlog,
    iter_wheel,
    parse_timer_checkpoint,
)

V5 = "5.3.3/plain"
COMMITLOG = "commitlog/00000000000000000000"
TIMERLOG = "timerlog/00000000000000000000"
TIMER_FILES = {TIMERLOG, "timerwheel", "config/timercheck"}
TIMER_RECORDS = [(12330, 316), (12646, 316), (12962, 316), (13278, 489), (13767, 477)]
LONG_TOPIC = "LongTopic-" + "abcdefghij" * 14  # the pending timer message's real topic
FIXTURE = FIXTURES / V5 / "store"  # only read
READ_MS = 1795296521000  # config/timercheck's lastReadTimeMs
LAST_STORE_MS = 1795296520019  # the latest store time of a message (verify --now store)


def _torn_tail(store: Path, phy: int, size: int) -> None:
    """A crash while the record at ``phy`` was written: its second half and everything after
    it never reached the disk (the timer files had already been written)."""
    path = store / COMMITLOG
    end = path.stat().st_size
    patch(path, phy + size // 2, bytes(end - phy - size // 2))


def _damaged_body(store: Path, phy: int, size: int) -> None:
    """One byte of the record's body flipped (a body CRC mismatch; the records after it stay
    readable): RocketMQ's recovery (checkCRCOnRecover) stops there."""
    at = phy + size - 60  # inside the body: the properties are at the end, after the body
    patch(store / COMMITLOG, at, bytes([read_at(store / COMMITLOG, at, 1)[0] ^ 0xFF]))


def _units(store: Path) -> list[TimerLogUnit]:
    return [u for u in iter_timerlog((store / TIMERLOG).read_bytes())
            if isinstance(u, TimerLogUnit)]


def _slots(store: Path) -> dict[int, tuple[int, int, int]]:
    return {s.index: (s.first_pos, s.last_pos, s.num)
            for s in iter_wheel((store / "timerwheel").read_bytes())}


def _metric(store: Path, topic: str) -> int:
    doc = loads_fastjson((store / "config" / "timermetrics").read_text("utf-8"))
    return int(doc["timingCount"][topic]["count"])


def _repair(src: Path, out: Path) -> dict[str, Any]:
    before = tree_digest(src)
    dry = run("repair", src, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert not out.exists()
    res = run("repair", src, "--out", out, "--json")
    assert res.returncode == 0, res.stderr
    assert tree_digest(src) == before  # the source is only read
    doc: dict[str, Any] = json.loads(res.stdout)
    assert json.loads(dry.stdout)["changes"] == doc["changes"]  # --dry-run lists the same
    return doc


def _assert_clean(out: Path) -> dict[str, Any]:
    rc, doc = verify_json(out, "--now", "store")  # a start at the store's own time
    bad = [f for f in doc["findings"] if f["severity"] in ("error", "warning")]
    assert rc == 0 and bad == [], bad
    loss = doc["restartWouldLose"]
    assert loss["timer"]["timerUnitsDangling"] == 0 and loss["timer"]["timerlogCutAt"] is None
    assert loss["lostMessages"] == 0 and loss["cqUnitsDroppedTotal"] == 0
    return doc


# (damage, record index, units kept, slots after, timercheck after, LongTopic metric after)
CASES = {
    # the last timer record torn: its (delivered) unit 208 goes, slot 250119 with it
    "torn-tail-last-timer-record": (
        _torn_tail, 4, 4,
        {250118: (0, 104, 3), 253715: (156, 156, 1)}, (208, 4, 4), 1),
    # torn at the pending timer record: units 156 and 208 go, the pending slot empties, and the
    # metrics no longer count the pending message
    "torn-tail-pending-timer-record": (
        _torn_tail, 3, 3, {250118: (0, 104, 3)}, (156, 3, 3), 0),
    # a damaged record in the middle of the timer records: units 104.. go; slot 250118 keeps
    # its first two units
    "damaged-record-in-the-middle": (
        _damaged_body, 2, 2, {250118: (0, 52, 2)}, (104, 2, 2), 0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_repair_truncates_timer_files_and_the_copy_verifies_clean(
        case: str, tmp_path: Path) -> None:
    damage, rec, kept, slots, (flush, last, master), metric = CASES[case]
    src = copy_store(V5, tmp_path)
    phy, size = TIMER_RECORDS[rec]
    damage(src, phy, size)
    # the damaged store: verify reports the dangling units; a restart would keep them
    rc, vdoc = verify_json(src)
    assert rc == 1
    dangling = [f for f in vdoc["findings"] if f["kind"] == "timer" and f["file"] == TIMERLOG]
    # a torn tail: every unit from the torn record on points past the data; a damaged record:
    # only its own unit (the records after it are readable), but a restart cuts there
    want = range(rec, 5) if damage is _torn_tail else [rec]
    assert [f["offset"] for f in dangling] == [52 * i for i in want], dangling
    t = vdoc["restartWouldLose"]["timer"]
    assert (t["timerUnitsKept"], t["timerUnitsDangling"]) == (5, 5 - rec)
    assert t["timerUnitsDanglingPending"] == (1 if rec <= 3 else 0)

    out = tmp_path / "repaired"
    doc = _repair(src, out)
    changes = doc["changes"]
    named = {c["file"] for c in changes}
    assert TIMER_FILES <= named, changes
    assert any(c["file"] == TIMERLOG and c["offset"] == 52 * rec and c["after"].startswith(
        "zeroed") for c in changes), changes
    assert ("config/timermetrics" in named) == (metric == 0)

    vclean = _assert_clean(out)
    assert vclean["summary"]["timer"]["timerlogUnits"] == kept
    units = _units(out)
    assert [u.position for u in units] == [52 * i for i in range(kept)]
    assert all(u.offset_py + u.size_py <= phy for u in units)
    assert read_at(out / TIMERLOG, 52 * kept, 52 * (5 - kept)) == bytes(52 * (5 - kept))
    assert _slots(out) == slots
    cp = parse_timer_checkpoint((out / "config" / "timercheck").read_bytes())
    assert (cp.last_timer_log_flush_pos, cp.last_timer_queue_offset,
            cp.master_timer_queue_offset) == (flush, last, master)
    assert _metric(out, LONG_TOPIC) == metric
    # what stays: the read time, and the wheel file's size
    assert cp.last_read_time_ms == parse_timer_checkpoint(
        (src / "config" / "timercheck").read_bytes()).last_read_time_ms
    assert (out / "timerwheel").stat().st_size == (src / "timerwheel").stat().st_size


def test_human_output_lists_every_timer_change(tmp_path: Path) -> None:
    src = copy_store(V5, tmp_path)
    _damaged_body(src, *TIMER_RECORDS[2])
    res = run("repair", src, "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "dry run, nothing written" in res.stdout
    for line in (f"{TIMERLOG} @ 0x68: ", f"timerwheel @ {250118 * SLOT_SIZE:#x}: ",
                 "config/timercheck @ 0x8: lastTimerLogFlushPos 260 -> 104",
                 "config/timercheck @ 0x10: lastTimerQueueOffset 5 -> 2",
                 "config/timercheck @ 0x18: masterTimerQueueOffset 5 -> 2",
                 f"config/timermetrics: timingCount {LONG_TOPIC} count 1 -> 0"):
        assert line in res.stdout, res.stdout
    assert not any(p.name.startswith(".") for p in (tmp_path / "5.3.3_plain").iterdir())
    v = run("verify", src)
    assert v.returncode == 1
    assert "kept although their record is past the cut: 3 (1 not yet delivered" in v.stdout


def test_undamaged_store_timer_files_are_not_changed(tmp_path: Path) -> None:
    src = copy_store(V5, tmp_path)
    out = tmp_path / "repaired"
    res = run("repair", src, "--out", out, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["changes"] == []
    want, got = tree_digest(src), tree_digest(out)
    assert got == want  # the timer files included
    assert {TIMERLOG, "timerwheel", "config/timercheck", "config/timermetrics"} <= set(got)
    doc = _assert_clean(out)
    assert doc["restartWouldLose"]["timer"] == {
        "timerlogCutAt": None, "timerUnitsTruncated": 0, "timerUnitsKept": 5,
        "timerUnitsDangling": 0, "timerUnitsDanglingPending": 0,
        "startedAt": LAST_STORE_MS, "readTimeMs": READ_MS, "readTimeRaisedTo": None,
        "timerUnitsSkipped": 0}


WHEEL_MS = (604800 - 60) * 1000  # the read time recovery keeps: now - slotsTotal + 60 slots
PENDING_DUE_MS = 1795300115000  # unit 156's deliver time


@pytest.mark.parametrize(("now", "raised", "skipped"), [
    ("store", None, 0),
    (str(READ_MS + WHEEL_MS + 999), None, 0),  # the floor is the read time: kept
    (str(READ_MS + WHEEL_MS + 1000), READ_MS + 1000, 0),
    (str(PENDING_DUE_MS + WHEEL_MS), PENDING_DUE_MS, 0),  # unit 156's slot is still read
    (str(PENDING_DUE_MS + WHEEL_MS + 1000), PENDING_DUE_MS + 1000, 1),
])
def test_start_after_the_wheels_span_skips_the_units_due_before_it(
        now: str, raised: int | None, skipped: int) -> None:
    """A start more than the wheel's 7 days after the read time: recovery raises the read time
    and the pending units due before it are never delivered (judged against RocketMQ's own
    recovery in test_timer_rocketmq.py); verify says so, and says it in its human report."""
    rc, doc = verify_json(FIXTURE, "--now", now)
    assert rc == 0
    t = doc["restartWouldLose"]["timer"]
    assert (t["readTimeMs"], t["readTimeRaisedTo"], t["timerUnitsSkipped"]) == (
        READ_MS, raised, skipped)
    human = run("verify", FIXTURE, "--now", now)
    assert human.returncode == 0, human.stderr
    said = "pending timer messages due before it, never delivered: " in human.stdout
    assert said == (raised is not None), human.stdout
    assert ("nothing: the broker would start" in human.stdout) == (skipped == 0)


def test_damaged_timerlog_unit_is_where_the_copy_ends(tmp_path: Path) -> None:
    """A unit with a bad magic: the broker's recoverAndRevise truncates the timerlog there;
    the copy does the same (and the commitlog is untouched)."""
    src = copy_store(V5, tmp_path)
    patch(src / TIMERLOG, 3 * 52 + 12, struct.pack(">i", 0x100))
    rc, vdoc = verify_json(src)
    assert rc == 1
    t = vdoc["restartWouldLose"]["timer"]
    assert t["timerlogCutAt"] == f"{TIMERLOG} @ 0x9c" and t["timerUnitsKept"] == 3
    assert t["timerUnitsTruncated"] == 1  # unit 208, after the bad one
    out = tmp_path / "repaired"
    doc = _repair(src, out)
    # the pending unit 156 is gone: the metrics are recounted from the kept units
    assert {c["file"] for c in doc["changes"]} == TIMER_FILES | {"config/timermetrics"}
    assert _metric(out, LONG_TOPIC) == 0
    assert any("damage at" in c["before"] for c in doc["changes"]), doc["changes"]
    _assert_clean(out)
    assert [u.position for u in _units(out)] == [0, 52, 104]
    assert _slots(out) == {250118: (0, 104, 3)}


def _split_timerlog(store: Path, file_size: int) -> dict[int, int]:
    """Rewrite the store's timerlog in files of ``file_size`` bytes as ``TimerLog#append``
    would have written it (a blank ends a file when a unit and a blank no longer fit), with
    the units' ``prevPos`` and the wheel's slots moved along. Returns old -> new positions."""
    from dataclasses import replace

    from mqtool.formats.timer import (
        MIN_BLANK_LEN,
        UNIT_SIZE,
        build_timerlog_blank,
        build_timerlog_unit,
        build_wheel_slot,
    )

    units = _units(store)
    moved: dict[int, int] = {-1: -1}
    files: list[bytearray] = [bytearray(file_size)]
    at = 0
    for u in units:
        if UNIT_SIZE + MIN_BLANK_LEN > file_size - at:
            files[-1][at:at + MIN_BLANK_LEN] = build_timerlog_blank(file_size - at)
            files.append(bytearray(file_size))
            at = 0
        moved[u.position] = (len(files) - 1) * file_size + at
        files[-1][at:at + UNIT_SIZE] = build_timerlog_unit(
            replace(u, prev_pos=moved[u.prev_pos]))
        at += UNIT_SIZE
    (store / TIMERLOG).unlink()
    for i, data in enumerate(files):
        (store / "timerlog" / f"{i * file_size:020d}").write_bytes(bytes(data))
    with open(store / "timerwheel", "r+b") as f:
        for s in iter_wheel((store / "timerwheel").read_bytes()):
            f.seek(s.index * SLOT_SIZE)
            f.write(build_wheel_slot(replace(s, first_pos=moved[s.first_pos],
                                             last_pos=moved[s.last_pos])))
    return moved


def test_truncation_across_timerlog_files(tmp_path: Path) -> None:
    """Timerlog files of 128 bytes (two units and a blank each): units at 0, 52 | 128, 180 |
    256. A torn tail at the pending timer record (unit 180) zeroes the second file from 52 on
    (its blank too: the broker appends there again) and leaves the third file out."""
    src = copy_store(V5, tmp_path)
    moved = _split_timerlog(src, 128)
    assert [moved[p] for p in (0, 52, 104, 156, 208)] == [0, 52, 128, 180, 256]
    rc, vdoc = verify_json(src)  # the rewritten store is a clean one
    assert rc == 0 and [f for f in vdoc["findings"] if f["kind"] == "timer"] == []
    assert vdoc["summary"]["timer"]["timerlogFiles"] == 3
    _torn_tail(src, *TIMER_RECORDS[3])
    out = tmp_path / "repaired"
    doc = _repair(src, out)
    by_file = {(c["file"], c["offset"]): c["after"] for c in doc["changes"]}
    assert by_file[("timerlog/00000000000000000128", 52)].startswith("zeroed")
    assert by_file[("timerlog/00000000000000000256", None)].startswith("left out")
    assert ("timerlog/00000000000000000000", 0) not in by_file
    _assert_clean(out)
    assert sorted(p.name for p in (out / "timerlog").iterdir()) == [
        "00000000000000000000", "00000000000000000128"]
    assert read_at(out / "timerlog/00000000000000000128", 52, 76) == bytes(76)
    assert _slots(out) == {250118: (0, 128, 3)}
    cp = parse_timer_checkpoint((out / "config" / "timercheck").read_bytes())
    assert (cp.last_timer_log_flush_pos, cp.last_timer_queue_offset) == (180, 3)


def test_timer_metrics_recounted_as_the_broker_does(tmp_path: Path) -> None:
    """``config/timermetrics`` counts pending timer messages per real topic; a count the
    timerlog does not bear out is a warning at the topic's entry, and repair recounts it as
    ``checkAndReviseMetrics`` does (the commitlog and other timer files untouched)."""
    src = copy_store(V5, tmp_path)
    path = src / "config" / "timermetrics"
    text = path.read_text("utf-8")
    assert '"V5Topic":{"count":0,' in text
    path.write_text(text.replace('"V5Topic":{"count":0,', '"V5Topic":{"count":7,'), "utf-8")
    rc, vdoc = verify_json(src)
    assert rc == 0  # a warning
    found = [(f["file"], f["offset"], f["severity"], f["expected"], f["found"])
             for f in vdoc["findings"]]
    assert found == [("config/timermetrics", text.index('"V5Topic"'), "warning", "0", "7")]
    out = tmp_path / "repaired"
    doc = _repair(src, out)
    assert [(c["file"], c["before"], c["after"]) for c in doc["changes"]] == [
        ("config/timermetrics", "timingCount V5Topic count 7", "0 (pending units kept)")]
    assert (out / "config" / "timermetrics").read_text("utf-8") == text
    _assert_clean(out)
