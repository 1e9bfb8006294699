"""``mqtool verify``'s check of the RocketMQ 5.x timer files against each other and the
commitlog: ``timerlog/``, ``timerwheel`` and ``config/timercheck``. The checks over the timer
files that :mod:`mqtool.formats.timer` reads.

Facts (apache/rocketmq ``TimerMessageStore``, ``TimerLog``, ``TimerWheel``, ``TimerCheckpoint``):

* ``TimerMessageStore#doEnqueue`` appends a 52-byte unit per timer message: ``prevPos`` is the
  slot's ``lastPos`` before (-1 when the slot is new), ``delayedTime`` is relative to
  ``currWriteTimeMs``, ``offsetPy``/``sizePy`` point at the message's record in the commitlog
  (topic ``rmq_sys_wheel_timer``). Then ``TimerWheel#putSlot`` writes the slot of the deliver
  time: ``timeMs / precisionMs``, ``firstPos`` (kept), ``lastPos`` = the new unit, ``num`` +1
  (-1 for a delete marker).
* ``recoverAndRevise`` walks the timerlog in 52-byte steps and stops at a unit whose size is not
  52 or whose magic fails ``isMagicOK`` (``(magic | 0xF) == 0xF``), or at a blank
  (``BLANK_MAGIC_CODE``); the timerlog is truncated there.
* The wheel file must be ``slotsTotal * 2 * 32`` bytes (``slotsTotal`` = 7 days of seconds,
  whatever the precision) or the broker refuses to start; slot ``i`` holds a time ``t`` with
  ``t % (slotsTotal * 2) == i``.
* ``TimerCheckpoint``: ``lastTimerLogFlushPos`` is the timerlog's flushed position,
  ``lastTimerQueueOffset`` the next ``rmq_sys_wheel_timer`` queue-0 offset to enqueue
  (``min(commitQueueOffset, masterTimerQueueOffset)``), ``lastReadTimeMs`` the wheel time read up
  to (slots before it are delivered). At start ``recover`` clamps the queue offset into the
  queue's min..max with a warning.

Findings name the file relative to the store root and the byte offset inside that file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mqtool.formats.buffers import close_map
from mqtool.formats.errors import TIMER, Finding, FormatError, Severity
from mqtool.formats.rules import TIMER_TOPIC
from mqtool.formats.timer import (
    MAGIC_DELETE,
    SLOT_SIZE,
    TIMER_BLANK_SLOTS,
    TIMER_PRECISION_MS,
    TIMER_WHEEL_SLOTS_TOTAL,
    TimerCheckpoint,
    iter_wheel,
    parse_timer_checkpoint,
    read_time_floor,
    timer_wheel_file_size,
)
from mqtool.integrity.timerlog import (
    TIMER_METRICS,
    TimerLog,
    deliver_ms,
    metrics_recount,
    read_metrics,
    read_timerlog,
    timer_precision,
)
from mqtool.integrity.verify_report import FindingSink, QueueScan
from mqtool.store.files import map_readonly
from mqtool.store.reader import Store
from mqtool.store.records_at import messages_at


def _check_units(
    store: Store, log: TimerLog, first_start: int, data_end: int, read_ms: int | None,
    sink: FindingSink,
) -> None:
    """Every timerlog unit points at its ``rmq_sys_wheel_timer`` record inside valid data
    (the records read in place at the units' offsets)."""
    if not len(log.pos):
        return
    opy = log.units["offsetPy"].astype(np.int64)
    spy = log.units["sizePy"].astype(np.int64)
    deliver = deliver_ms(log.units)
    below = opy < first_start
    past = ~below & (opy + spy > data_end)
    msgs = messages_at(store, opy[~below & ~past], tags=False)
    ii, hit = msgs.lookup(opy)
    check = ~below & ~past
    timer_idx = msgs.topics.index(TIMER_TOPIC) if TIMER_TOPIC in msgs.topics else -1
    wrong_size = check & hit & (msgs.size[ii] != spy) if len(msgs) else np.zeros(len(opy), bool)
    wrong_topic = check & hit & ~wrong_size & (msgs.topic[ii] != timer_idx) if len(
        msgs) else np.zeros(len(opy), bool)
    for i in np.flatnonzero(below | past | (check & ~hit) | wrong_size | wrong_topic).tolist():
        pos = int(log.pos[i])
        rel, at = log.where(pos)
        o, s = int(opy[i]), int(spy[i])
        unit = f"timer unit -> commitlog offset {o} size {s}"
        if below[i]:
            done = read_ms is not None and int(deliver[i]) < read_ms
            sink.add(Finding(
                TIMER, rel, at, f"{unit}: before the first commitlog file ({first_start}); the "
                + ("message was delivered before its commitlog file was deleted" if done else
                   "message is not yet delivered and its record is gone"),
                severity=Severity.INFO if done else Severity.ERROR, phy=o))
        elif past[i]:
            sink.add(Finding(TIMER, rel, at, f"{unit}: points past the valid commitlog data "
                             f"(ends at {data_end})", phy=o))
        elif not hit[i]:
            sink.add(Finding(TIMER, rel, at, f"{unit}: no readable message starts there", phy=o))
        elif wrong_size[i]:
            sink.add(Finding(TIMER, rel, at, f"{unit}: the message there is "
                             f"{int(msgs.size[ii[i]])} bytes", expected=str(s),
                             found=str(int(msgs.size[ii[i]])), phy=o))
        else:
            t = msgs.topics[int(msgs.topic[ii[i]])]
            sink.add(Finding(TIMER, rel, at, f"{unit}: the message there is in topic {t}, not "
                             f"{TIMER_TOPIC}", expected=TIMER_TOPIC, found=t, phy=o))


def _check_wheel(
    path: Path, log: TimerLog, cp: TimerCheckpoint | None, sink: FindingSink,
) -> dict[str, Any]:
    rel = "timerwheel"
    size = path.stat().st_size
    want = timer_wheel_file_size()
    out: dict[str, Any] = {"slots": 0, "pendingSlots": 0, "precisionMs": TIMER_PRECISION_MS}
    if size not in (0, want):
        sink.add(Finding(TIMER, rel, None, f"timerwheel is {size} bytes; the broker refuses to "
                         f"start unless it is {want} (\"Timer wheel length\")",
                         expected=str(want), found=str(size)))
        return out
    if size == 0:
        return out
    buf = map_readonly(path)
    try:
        slots = list(iter_wheel(buf, file=rel))
    except FormatError as e:
        sink.add(e.finding())
        return out
    finally:
        close_map(buf)
    precision = timer_precision(slots, log)
    out["precisionMs"] = precision
    out["slots"] = len(slots)
    read_secs = cp.last_read_time_ms // precision if cp is not None else None
    units = log.units
    deliver_slot = deliver_ms(units) // precision if len(units) else np.zeros(0, np.int64)
    on_chain = np.zeros(len(units), bool)
    wheel_len = TIMER_WHEEL_SLOTS_TOTAL * 2
    for s in slots:
        at = s.index * SLOT_SIZE
        pending = read_secs is None or s.time_secs >= read_secs
        out["pendingSlots"] += int(pending)
        what = f"slot {s.index} (time {s.time_secs * precision} ms)"
        if s.time_secs % wheel_len != s.index:
            sink.add(Finding(TIMER, rel, at, f"{what}: a slot for this time is at index "
                             f"{s.time_secs % wheel_len}", expected=str(s.time_secs % wheel_len),
                             found=str(s.index)))
            continue
        if s.last_pos < 0 and s.first_pos < 0:
            continue
        seen: set[int] = set()
        count = 0
        p = s.last_pos
        ok = True
        while p != -1:
            if p in seen:
                sink.add(Finding(TIMER, rel, at, f"{what}: the prevPos chain loops at timerlog "
                                 f"position {p}"))
                ok = False
                break
            seen.add(p)
            r = log.row(p)
            if r is None:
                if p < log.start and not pending:
                    break  # delivered, and its timerlog file has since been deleted
                where = ("past the timerlog data (ends at "
                         f"{log.end})" if p >= log.end else "at no timerlog unit")
                sink.add(Finding(
                    TIMER, rel, at, f"{what}: {'lastPos' if p == s.last_pos else 'chain'} "
                    f"points {where}: timerlog position {p}",
                    severity=Severity.ERROR if pending else Severity.WARNING))
                ok = False
                break
            if int(deliver_slot[r]) != s.time_secs:
                urel, uat = log.where(p)
                sink.add(Finding(
                    TIMER, urel, uat, f"timer unit on the chain of {rel} {what} is due at "
                    f"{int(deliver_ms(units[r:r + 1])[0])} ms, another slot",
                    severity=Severity.ERROR if pending else Severity.WARNING))
                ok = False
                break
            on_chain[r] = True
            count += -1 if int(units["magic"][r]) & MAGIC_DELETE else 1
            if p == s.first_pos:
                break
            p = int(units["prevPos"][r])
        if ok and s.first_pos not in seen:
            sink.add(Finding(TIMER, rel, at, f"{what}: firstPos {s.first_pos} is not on the "
                             f"chain from lastPos {s.last_pos}", severity=Severity.WARNING))
        elif ok and count != s.num:
            sink.add(Finding(TIMER, rel, at, f"{what}: num {s.num} but its chain holds {count} "
                             "timer units (delete markers count -1)", expected=str(count),
                             found=str(s.num), severity=Severity.WARNING))
    # pending units the wheel does not lead to: the timer service would never deliver them
    flushed = cp.last_timer_log_flush_pos if cp is not None else log.end
    if len(units) and read_secs is not None:
        lost = (~on_chain) & (deliver_slot >= read_secs)
        for r in np.flatnonzero(lost).tolist():
            p = int(log.pos[r])
            urel, uat = log.where(p)
            after = p >= flushed
            sink.add(Finding(
                TIMER, urel, uat, "pending timer unit that no timerwheel slot leads to"
                + ("; after the checkpoint's flush position, so the broker's recovery re-adds "
                   "it" if after else ""),
                severity=Severity.INFO if after else Severity.WARNING))
    return out


def store_timer_precision(store_root: Path) -> int:
    """The store's ``timerPrecisionMs``, as :func:`check_timer` infers it from the wheel's
    slots and their units (the broker's default without a wheel or timerlog to tell, or with
    a wheel it cannot read: damage in these files is :func:`check_timer`'s to report)."""
    wheel, logdir = store_root / "timerwheel", store_root / "timerlog"
    if not (logdir.is_dir() and wheel.is_file()) or wheel.stat().st_size == 0:
        return TIMER_PRECISION_MS
    log = read_timerlog(logdir, FindingSink())
    buf = map_readonly(wheel)
    try:
        slots = list(iter_wheel(buf))
    except FormatError:
        return TIMER_PRECISION_MS
    finally:
        close_map(buf)
    return timer_precision(slots, log)


def raised_read_time(
    store_root: Path, read_ms: int | None, now_ms: int, precision_ms: int | None = None,
) -> int | None:
    """The read time the timer's recovery raises the checkpoint's ``read_ms`` to when the
    broker starts at ``now_ms`` (:func:`mqtool.formats.timer.read_time_floor` at
    ``precision_ms``, else the store's: :func:`store_timer_precision`), None when it keeps it
    (or there is no read time)."""
    if read_ms is None or now_ms - read_ms < TIMER_WHEEL_SLOTS_TOTAL - TIMER_BLANK_SLOTS:
        return None  # kept at any precision (1 ms and up)
    if precision_ms is None:
        precision_ms = store_timer_precision(store_root)
    floor = read_time_floor(now_ms, precision_ms)
    return floor if read_ms < floor else None


def _check_checkpoint(
    cp: TimerCheckpoint, log: TimerLog, queues: dict[tuple[str, int], QueueScan], sink: FindingSink,
) -> None:
    rel = "config/timercheck"
    if log.files and cp.last_timer_log_flush_pos > log.end:
        sink.add(Finding(TIMER, rel, 8, f"lastTimerLogFlushPos {cp.last_timer_log_flush_pos} is "
                         f"past the timerlog data (ends at {log.end}): flushed units are gone",
                         expected=f"<= {log.end}", found=str(cp.last_timer_log_flush_pos)))
    q = queues.get((TIMER_TOPIC, 0))
    qmin, qmax = (q.min_offset, q.max_offset) if q is not None else (0, 0)
    off = cp.last_timer_queue_offset
    if off > qmax or off < qmin:
        sink.add(Finding(
            TIMER, rel, 16, f"lastTimerQueueOffset {off} is outside {TIMER_TOPIC} queue 0 "
            f"({qmin}..{qmax}); the broker's recovery clamps it", severity=Severity.WARNING,
            expected=f"{qmin}..{qmax}", found=str(off)))
    if off > cp.master_timer_queue_offset:
        sink.add(Finding(
            TIMER, rel, 16, f"lastTimerQueueOffset {off} is beyond masterTimerQueueOffset "
            f"{cp.master_timer_queue_offset} (the broker writes min of the two)",
            severity=Severity.WARNING))
    if cp.file_size < 4096:
        sink.add(Finding(TIMER, rel, None, f"timercheck is {cp.file_size} bytes (the broker maps "
                         "4096)", severity=Severity.WARNING))


def check_timer(
    store: Store, first_start: int, data_end: int,
    queues: dict[tuple[str, int], QueueScan], sink: FindingSink,
) -> dict[str, Any] | None:
    """Check the timer files of ``store`` (None when it has none: a 4.x store)."""
    root = Path(store.root)
    wheel, logdir, check = root / "timerwheel", root / "timerlog", root / "config" / "timercheck"
    if not (wheel.exists() or logdir.is_dir() or check.exists()):
        return None
    cp: TimerCheckpoint | None = None
    if check.exists():
        try:
            cp = parse_timer_checkpoint(check.read_bytes(), file="config/timercheck")
        except FormatError as e:
            sink.add(Finding(TIMER, "config/timercheck", e.offset, e.detail))
    log = read_timerlog(logdir, sink) if logdir.is_dir() else TimerLog()
    read_ms = cp.last_read_time_ms if cp is not None else None
    _check_units(store, log, first_start, data_end, read_ms, sink)
    _check_metrics(root, log, read_ms, sink)
    summary: dict[str, Any] = {
        "timerlogFiles": len(log.files), "timerlogUnits": int(len(log.pos)),
        "timerlogStart": log.start, "timerlogEnd": log.end,
    }
    if wheel.exists():
        summary.update(_check_wheel(wheel, log, cp, sink))
    elif len(log.pos):
        sink.add(Finding(TIMER, "timerwheel", None, "timerlog units but no timerwheel file: "
                         "the broker starts with an empty wheel and re-adds only the units "
                         "after the checkpoint", severity=Severity.WARNING))
    if cp is not None:
        _check_checkpoint(cp, log, queues, sink)
        summary["checkpoint"] = {
            "lastReadTimeMs": cp.last_read_time_ms,
            "lastTimerLogFlushPos": cp.last_timer_log_flush_pos,
            "lastTimerQueueOffset": cp.last_timer_queue_offset,
            "masterTimerQueueOffset": cp.master_timer_queue_offset,
        }
    return summary


# --------------------------------------------------------------------------------------------
# repair and restart loss
#
# Facts (apache/rocketmq 5.3.3 ``TimerMessageStore``):
# * ``doEnqueue`` is the only writer of timerlog units, and only the enqueue service calls it,
#   reading ``rmq_sys_wheel_timer`` queue 0 in queue order; so units follow the queue's (and
#   the commitlog's) order, and the timerlog is append-only.
# * ``recover`` -> ``recoverAndRevise(lastTimerLogFlushPos - one file, check=true)`` walks the
#   units, stops at the first whose size is not 52 or whose magic fails ``isMagicOK`` (a zero
#   unit included), ``truncateDirtyFiles`` there, and for each unit walked ``reviseSlot``
#   points its slot's ``lastPos`` at it (``num`` is not revised). It never looks at the
#   commitlog: a unit whose record is past the commitlog's end is kept, and at delivery
#   ``getMessageByCommitOffset`` misses it (``dequeue_get_msg_miss``: dropped without a word),
#   or, once new records are written past the cut, reads whatever record is there.
# * ``reviseQueueOffset`` then reads the last unit's record and restarts the enqueue after its
#   queue offset (``-1`` when the record cannot be read: the checkpoint's
#   ``lastTimerQueueOffset``), capped by ``masterTimerQueueOffset`` and clamped into the
#   queue's min..max; ``prepareTimerCheckPoint`` writes that back (a master also sets
#   ``masterTimerQueueOffset`` to it).
# * ``recover`` then sets ``currReadTimeMs`` to the checkpoint's ``lastReadTimeMs``, raised to
#   ``now - slotsTotal + TIMER_BLANK_SLOTS`` slots when older (the wheel holds ``slotsTotal``
#   slots); the dequeue reads slots from there on, so units due before it are never delivered.
def _check_metrics(root: Path, log: TimerLog, read_ms: int | None, sink: FindingSink) -> None:
    try:
        text = read_metrics(root)
        if text is None:
            return
        kept = log.units[log.pos < (log.end if log.stop is None else min(log.stop, log.end))]
        _doc, diffs = metrics_recount(text, kept, read_ms)
    except (FormatError, UnicodeDecodeError, OSError, KeyError, TypeError, ValueError) as e:
        sink.add(Finding(TIMER, TIMER_METRICS, None, f"cannot be read ({e}); the broker "
                         "starts with the .bak or empty timer metrics",
                         severity=Severity.WARNING))
        return
    raw = text.encode("utf-8")
    for t, count, want in diffs:
        at = raw.find(f'"{t}"'.encode())
        sink.add(Finding(
            TIMER, TIMER_METRICS, at if at >= 0 else None, f"timingCount {t}: count {count}, "
            f"but the timerlog holds {want} pending units of that topic (the broker's "
            "checkAndReviseMetrics recounts it)", expected=str(want), found=str(count),
            severity=Severity.WARNING))


def timer_restart_loss(
    store_root: Path, cut: int, now_ms: int, precision_ms: int = TIMER_PRECISION_MS,
) -> dict[str, Any] | None:
    """What the broker's timer recovery does at a start at clock time ``now_ms`` when the
    commitlog ends at ``cut`` (None for a 4.x store): the units it truncates (after damage in
    the timerlog), the units it keeps although their record is past the cut (never delivered:
    dropped at delivery time without a word, or read from whatever record is later written
    there), and, when the checkpoint's read time is older than the wheel holds
    (:func:`mqtool.formats.timer.read_time_floor`), the pending units due before the raised
    read time (never delivered: their slots are never read)."""
    logdir = store_root / "timerlog"
    if not logdir.is_dir():
        return None
    log = read_timerlog(logdir, FindingSink())
    check = store_root / "config" / "timercheck"
    read_ms = None
    if check.exists():
        try:
            read_ms = parse_timer_checkpoint(check.read_bytes()).last_read_time_ms
        except FormatError:
            read_ms = None
    stop = log.end if log.stop is None else min(log.stop, log.end)
    keep = log.pos < stop
    u = log.units
    due = deliver_ms(u)
    dangling = keep & (u["offsetPy"].astype(np.int64) + u["sizePy"].astype(np.int64) > cut)
    pending = dangling if read_ms is None else dangling & (due >= read_ms)
    raised = raised_read_time(store_root, read_ms, now_ms, precision_ms)
    skipped = 0
    if read_ms is not None and raised is not None:  # units due in [read time, raised)
        skipped = int(np.count_nonzero(
            keep & (due >= read_ms) & (due < raised)
            & (u["magic"].astype(np.int64) & MAGIC_DELETE == 0)))  # delete marks not counted
    return {
        "timerlogCutAt": log.broken,
        "timerUnitsTruncated": int(np.count_nonzero(~keep)) + log.hidden,
        "timerUnitsKept": int(np.count_nonzero(keep)),
        "timerUnitsDangling": int(np.count_nonzero(dangling)),
        "timerUnitsDanglingPending": int(np.count_nonzero(pending)),
        "startedAt": now_ms,
        "readTimeMs": read_ms,
        "readTimeRaisedTo": raised,
        "timerUnitsSkipped": skipped,
    }
