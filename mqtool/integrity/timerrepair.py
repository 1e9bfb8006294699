"""``mqtool repair``'s part for the RocketMQ 5.x timer files: ``timerlog/``, ``timerwheel``,
``config/timercheck`` and ``config/timermetrics`` of a copy whose commitlog is cut (the broker's
facts are in :mod:`mqtool.integrity.timer`, which also checks these files for ``verify``)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from mqtool.formats.buffers import close_map
from mqtool.formats.config.fastjson import dumps_fastjson
from mqtool.formats.errors import FormatError
from mqtool.formats.timer import (
    MAGIC_DELETE,
    SLOT_SIZE,
    TimerCheckpoint,
    build_timer_checkpoint,
    build_wheel_slot,
    iter_wheel,
    parse_timer_checkpoint,
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
from mqtool.integrity.verify_report import FindingSink
from mqtool.store.files import map_readonly

# So a repaired copy truncates the timerlog at the first unit whose record (offsetPy + sizePy)
# is past the commitlog cut (or where the broker's own walk stops, if earlier): the units after
# it were enqueued later, from later queue offsets, and ``reviseQueueOffset`` makes the broker
# re-enqueue whatever the cut consume queue still holds after the last kept unit. Dropping only
# the dangling units would leave a hole in an append-only file, a layout the broker never
# writes. The wheel slots that lead into the dropped part are rebuilt from the kept units (what
# ``reviseSlot`` cannot do: it never lowers ``lastPos`` or ``num``), the checkpoint is set to
# the truncated timerlog and the cut queue, and the metrics lose the dropped pending units.


@dataclass
class TimerRepair:
    """What a repaired copy changes in the timer files (paths relative to the store root)."""

    notes: list[tuple[str, int | None, str, str]] = field(default_factory=list)
    # (rel, offset, data); offset None: data is the whole file
    writes: list[tuple[str, int | None, bytes]] = field(default_factory=list)
    zeros: list[tuple[str, int, int]] = field(default_factory=list)  # (rel, start, end)
    leave_out: list[str] = field(default_factory=list)
    not_repaired: list[str] = field(default_factory=list)


def _nonzero(path: Path, start: int, end: int) -> bool:
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        while left > 0:
            chunk = f.read(min(left, 1 << 20))
            if not chunk:
                return False
            if chunk.count(0) != len(chunk):
                return True
            left -= len(chunk)
    return False


def _slot_text(s: Any, precision: int) -> str:
    return (f"slot {s.index} (time {s.time_secs * precision} ms): firstPos {s.first_pos} "
            f"lastPos {s.last_pos} num {s.num}")


def _revise_slot(s: Any, log: TimerLog, trunc: int, precision: int) -> Any | None:
    """The slot ``s`` leads into the dropped part (positions >= ``trunc``): its chain without
    the dropped units (None: no unit of the slot is kept)."""
    units = log.units
    p = s.last_pos
    dropped = 0
    while p != -1 and p >= trunc:
        r = log.row(p)
        if r is None:  # the chain runs through bytes that are no unit: the kept units decide
            kept = np.flatnonzero((log.pos < trunc) & (log.pos >= s.first_pos)
                                  & (deliver_ms(units) // precision == s.time_secs))
            p = int(log.pos[kept[-1]]) if kept.size else -1
            dropped = -1
            break
        dropped += -1 if int(units["magic"][r]) & MAGIC_DELETE else 1
        p = int(units["prevPos"][r])
    if p == -1 or s.first_pos >= trunc or p < s.first_pos:
        return None
    # num: count the kept chain when it can be walked to firstPos, else take the dropped off
    num, q, seen, walked = 0, p, set(), False
    while q != -1 and q not in seen:
        seen.add(q)
        r = log.row(q)
        if r is None:
            break
        num += -1 if int(units["magic"][r]) & MAGIC_DELETE else 1
        if q == s.first_pos:
            walked = True
            break
        q = int(units["prevPos"][r])
    if not walked and dropped >= 0:
        num = s.num - dropped
    return replace(s, last_pos=p, num=num)




def _metrics(root: Path, kept: np.ndarray, read_ms: int | None, fix: TimerRepair) -> None:
    """``config/timermetrics`` recounted from the kept units, as ``checkAndReviseMetrics``."""
    try:
        text = read_metrics(root)
        if text is None:
            return
        doc, diffs = metrics_recount(text, kept, read_ms)
    except (FormatError, UnicodeDecodeError, OSError, KeyError, TypeError, ValueError) as e:
        fix.not_repaired.append(f"{TIMER_METRICS}: cannot be read ({e})")
        return
    for t, count, want in diffs:
        doc["timingCount"][t]["count"] = want
        fix.notes.append((TIMER_METRICS, None, f"timingCount {t} count {count}",
                          f"{want} (pending units kept)"))
    if diffs:
        fix.writes.append((TIMER_METRICS, None, dumps_fastjson(doc).encode("utf-8")))


def plan_timer_repair(
    root: Path, cut: int, queue: tuple[int, list[tuple[int, int, int]]] | None,
) -> TimerRepair | None:
    """The timer files of a copy whose commitlog ends at ``cut`` (None for a 4.x store).

    ``queue``: ``rmq_sys_wheel_timer`` queue 0 of the copy (its min offset and units
    ``(phy, size, tagsCode)``), None when the copy has no such queue."""
    wheel, logdir = root / "timerwheel", root / "timerlog"
    check = root / "config" / "timercheck"
    if not (wheel.exists() or logdir.is_dir() or check.exists()):
        return None
    fix = TimerRepair()
    log = read_timerlog(logdir, FindingSink()) if logdir.is_dir() else TimerLog()
    stop = log.end if log.stop is None else min(log.stop, log.end)
    units = log.units
    keep = log.pos < stop
    past = keep & (units["offsetPy"].astype(np.int64) + units["sizePy"].astype(np.int64) > cut)
    first_past = np.flatnonzero(past)
    trunc = int(log.pos[first_past[0]]) if first_past.size else stop
    kept = int(np.count_nonzero(log.pos < trunc))
    # timerlog: zero from the truncation on, leave later files out
    for rel, start, size in log.files:
        if start + size <= trunc:
            continue
        if start > trunc or (start == trunc and start != log.start):
            fix.leave_out.append(rel)
            fix.notes.append((rel, None, f"timerlog file of {size} bytes after the kept units",
                              "left out (truncateDirtyFiles deletes it)"))
            continue
        at = trunc - start
        if _nonzero(logdir / rel.split("/", 1)[1], at, size):
            n_past = int(np.count_nonzero(past))
            n_after = int(np.count_nonzero(log.pos >= trunc)) - n_past
            why = (f"{n_past} units pointing past the valid commitlog end ({cut}), {n_after} "
                   "readable units after them" if n_past else
                   f"damage at {log.broken} (the broker's recoverAndRevise truncates there)"
                   if log.broken else "bytes after the last unit")
            fix.notes.append((rel, at, f"{size - at} bytes from here: {why}",
                              "zeroed (the timerlog ends here; recoverAndRevise stops at a zero "
                              "unit)"))
            fix.zeros.append((rel, at, size))
    cp: TimerCheckpoint | None = None
    if check.exists():
        try:
            cp = parse_timer_checkpoint(check.read_bytes(), file="config/timercheck")
        except FormatError as e:
            fix.not_repaired.append(f"config/timercheck: {e.detail}")
    # the wheel: slots that lead into the dropped part
    if wheel.exists():
        size = wheel.stat().st_size
        if size != timer_wheel_file_size():
            if size:
                fix.not_repaired.append(f"timerwheel: {size} bytes, not "
                                        f"{timer_wheel_file_size()}; the broker refuses it")
        else:
            buf = map_readonly(wheel)
            try:
                slots = list(iter_wheel(buf, file="timerwheel"))
            finally:
                close_map(buf)
            precision = timer_precision(slots, log)
            for s in slots:
                if (s.last_pos < trunc and s.first_pos < trunc) or (
                        s.last_pos < 0 and s.first_pos < 0):
                    continue
                new = _revise_slot(s, log, trunc, precision)
                before = _slot_text(s, precision)
                if new is None:
                    fix.notes.append(("timerwheel", s.index * SLOT_SIZE, before,
                                      "empty (none of its units is kept)"))
                    fix.writes.append(("timerwheel", s.index * SLOT_SIZE, bytes(SLOT_SIZE)))
                else:
                    fix.notes.append(("timerwheel", s.index * SLOT_SIZE, before,
                                      _slot_text(new, precision)))
                    fix.writes.append(("timerwheel", s.index * SLOT_SIZE,
                                       build_wheel_slot(new)))
    if cp is not None:
        _checkpoint_fix(cp, log, kept, trunc, queue, fix)
    _metrics(root, units[log.pos < trunc] if len(units) else units,
             None if cp is None else cp.last_read_time_ms, fix)
    return fix


def _checkpoint_fix(
    cp: TimerCheckpoint, log: TimerLog, kept: int, trunc: int,
    queue: tuple[int, list[tuple[int, int, int]]] | None, fix: TimerRepair,
) -> None:
    """``config/timercheck`` as ``recover`` + ``prepareTimerCheckPoint`` would write it for the
    truncated timerlog and the cut queue (so a restart changes nothing)."""
    # lastReadTimeMs stays: ``recover`` takes it as it is (only raised to now - 7 days), and
    # the slots before it were read whatever the cut dropped; rolling it back would deliver
    # every kept message of those slots again
    flush = min(cp.last_timer_log_flush_pos, trunc)
    master, last = cp.master_timer_queue_offset, cp.last_timer_queue_offset
    if queue is not None:
        qmin, qunits = queue
        qmax = qmin + len(qunits)
        master = min(master, qmax)
        revised = None  # reviseQueueOffset: the queue offset after the last kept unit's record
        if kept:
            u = log.units[kept - 1]
            opy, spy = int(u["offsetPy"]), int(u["sizePy"])
            for j in range(len(qunits) - 1, -1, -1):
                if qunits[j][0] == opy and qunits[j][1] == spy:
                    revised = qmin + j + 1
                    break
        last = min(last if revised is None else revised, master)
        last = min(max(last, qmin), qmax)
    new = replace(cp, last_timer_log_flush_pos=flush, last_timer_queue_offset=last,
                  master_timer_queue_offset=master)
    if new == cp:
        return
    rel = "config/timercheck"
    for pos, name, a, b in (
        (8, "lastTimerLogFlushPos", cp.last_timer_log_flush_pos, flush),
        (16, "lastTimerQueueOffset", cp.last_timer_queue_offset, last),
        (24, "masterTimerQueueOffset", cp.master_timer_queue_offset, master),
    ):
        if a != b:
            fix.notes.append((rel, pos, f"{name} {a}", str(b)))
    fix.writes.append((rel, 0, build_timer_checkpoint(new)))
