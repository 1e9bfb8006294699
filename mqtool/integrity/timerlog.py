"""The RocketMQ 5.x timer files as ``mqtool verify`` and ``mqtool repair`` read them: the
timerlog's readable units (:func:`read_timerlog`), a unit's deliver time, the wheel's precision
and the timer metrics with the broker's recount (formats in :mod:`mqtool.formats.timer`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mqtool.formats.buffers import close_map
from mqtool.formats.config.fastjson import loads_fastjson
from mqtool.formats.errors import TIMER, Finding
from mqtool.formats.javacompat import java_string_hash
from mqtool.formats.store_dirs import numbered_files
from mqtool.formats.timer import (
    MAGIC_DELETE,
    TIMER_PRECISION_MS,
    UNIT_DTYPE,
    UNIT_SIZE,
    TimerLogBlank,
    TimerLogEnd,
    iter_timerlog,
)
from mqtool.integrity.verify_report import FindingSink
from mqtool.store.files import map_readonly

TIMER_METRIC_SMALL_THRESHOLD = 1_000_000  # MessageStoreConfig.timerMetricSmallThreshold
TIMER_METRICS = "config/timermetrics"
PRECISIONS = (1000, 500, 250, 200, 100, 50, 20, 10, 5, 2, 1)


@dataclass
class TimerLog:
    """Every readable timerlog unit (absolute positions) and where the data ends."""

    files: list[tuple[str, int, int]] = field(default_factory=list)  # (rel, start, size)
    pos: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    units: np.ndarray = field(default_factory=lambda: np.zeros(0, UNIT_DTYPE))
    start: int = 0
    end: int = 0  # after the last readable unit
    # where ``recoverAndRevise`` stops walking (the first spot that is neither a unit nor a
    # blank: a zero, torn or bad unit), and "file @ offset" when that spot is damage
    stop: int | None = None
    broken: str | None = None
    hidden: int = 0  # well-formed units after a bad one in the same file (not in ``units``)

    def where(self, pos: int) -> tuple[str, int]:
        for rel, start, size in self.files:
            if start <= pos < start + size:
                return rel, pos - start
        return (self.files[-1][0], pos - self.files[-1][1]) if self.files else ("timerlog", pos)

    def row(self, pos: int) -> int | None:
        i = int(np.searchsorted(self.pos, pos))
        return i if i < len(self.pos) and int(self.pos[i]) == pos else None


def read_timerlog(d: Path, sink: FindingSink) -> TimerLog:
    log = TimerLog()
    others: list[Path] = []
    names = numbered_files(d, others)
    for p in others:
        sink.add(Finding(TIMER, f"timerlog/{p.name}", None, "not a timerlog file name (20-digit "
                         "offset): the broker's MappedFileQueue cannot load it"))
    sizes = [p.stat().st_size for p in names]
    common = max(set(sizes), key=sizes.count) if sizes else 0
    positions: list[np.ndarray] = []
    units: list[np.ndarray] = []
    ended_at: str | None = None
    for i, p in enumerate(names):
        rel = f"timerlog/{p.name}"
        start = int(p.name)
        size = sizes[i]
        log.files.append((rel, start, size))
        if i == 0:
            log.start = log.end = start
        elif log.files[i - 1][1] + log.files[i - 1][2] != start:
            sink.add(Finding(TIMER, rel, 0, f"timerlog file starts at {start} but the previous "
                             f"one ends at {log.files[i - 1][1] + log.files[i - 1][2]}"))
        if size != common:
            sink.add(Finding(TIMER, rel, None, f"file size {size} differs from the other timerlog "
                             f"files ({common})", expected=str(common), found=str(size)))
        if size == 0:
            continue
        buf = map_readonly(p)
        try:
            n = size // UNIT_SIZE
            arr = np.frombuffer(buf, dtype=UNIT_DTYPE, count=n).copy() if n else np.zeros(
                0, UNIT_DTYPE)
            good = (arr["size"] == UNIT_SIZE) & ((arr["magic"] | 0xF) == 0xF)
            bad = np.flatnonzero(~good)
            k = int(bad[0]) if bad.size else n
            if k and ended_at is not None:
                sink.add(Finding(TIMER, rel, 0, f"timerlog units after the end of the data "
                                 f"({ended_at}): the broker's recovery never reads them"))
            positions.append(start + np.arange(k, dtype=np.int64) * UNIT_SIZE)
            units.append(arr[:k])
            if k:
                log.end = start + k * UNIT_SIZE
            pos = k * UNIT_SIZE
            log.hidden += int(np.count_nonzero(good[k + 1:])) if k < n else 0
            if k < n and arr["size"][k] == UNIT_SIZE:
                sink.add(Finding(
                    TIMER, rel, pos, f"timerlog unit with magic {int(arr['magic'][k]):#x}: not "
                    "a timer unit (the broker's recovery truncates the timerlog here)",
                    expected="magic with only bits 0-3", found=f"{int(arr['magic'][k]):#x}"))
                ended_at = f"{rel} @ {pos:#x}"
                if log.stop is None:
                    log.stop, log.broken = start + pos, ended_at
                continue
            view = memoryview(buf)[pos:]
            try:
                first = next(iter_timerlog(view, file=rel, file_start=pos))
            finally:
                view.release()
            if isinstance(first, TimerLogBlank):
                log.end = start + size  # the file is full; the next one continues
            elif isinstance(first, TimerLogEnd):
                if first.kind in ("torn", "corrupt"):
                    sink.add(Finding(TIMER, rel, first.position, f"unreadable timerlog: "
                                     f"{first.detail} (the broker's recovery truncates here)"))
                    ended_at = f"{rel} @ {first.position:#x}"
                    if log.stop is None:
                        log.broken = ended_at
                elif first.kind == "zeros":
                    ended_at = f"{rel} @ {first.position:#x}"
                if first.kind in ("torn", "corrupt", "zeros") and log.stop is None:
                    log.stop = start + first.position
        finally:
            close_map(buf)
    if positions:
        log.pos = np.concatenate(positions)
        log.units = np.concatenate(units)
    return log


def deliver_ms(u: np.ndarray) -> np.ndarray:
    return u["currWriteTimeMs"].astype(np.int64) + u["delayedTime"].astype(np.int64)


def timer_precision(slots: list[Any], log: TimerLog) -> int:
    """``timerPrecisionMs``: the one under which the slots' last units fall in their slots."""
    votes: dict[int, int] = {}
    for s in slots[:1000]:
        r = log.row(s.last_pos)
        if r is None or s.time_secs <= 0:
            continue
        d = int(deliver_ms(log.units[r:r + 1])[0])
        for p in PRECISIONS:
            if d // p == s.time_secs:
                votes[p] = votes.get(p, 0) + 1
                break
    return max(votes, key=lambda p: (votes[p], p)) if votes else TIMER_PRECISION_MS


# * ``TimerMetrics`` (``config/timermetrics``, fastjson) counts pending timer messages per real
#   topic (``addMetric`` +1 at enqueue, -1 at delivery; a delete marker -1);
#   ``checkAndReviseMetrics`` recounts small topics from the timerlog units due after the read
#   time, matching them by the unit's ``hashTopic`` (``String.hashCode`` of the real topic).
#
def metrics_recount(
    text: str, units: np.ndarray, read_ms: int | None,
) -> tuple[Any, list[tuple[str, int, int]]]:
    """``checkAndReviseMetrics`` on ``config/timermetrics``: the parsed document and, for each
    topic whose count is below the small threshold and differs from the recount, (topic,
    count, recount). The recount is the topic's units (matched by ``hashTopic``) due at or
    after ``read_ms``, delete markers -1; topics whose hash another topic shares are left out
    (the broker reads their records, or drops them from the recount)."""
    doc = loads_fastjson(text, file=TIMER_METRICS)
    counts = doc["timingCount"]
    small = {str(t): int(v["count"]) for t, v in counts.items()
             if int(v["count"]) < TIMER_METRIC_SMALL_THRESHOLD}
    by_hash: dict[int, list[str]] = {}
    for t in counts:
        by_hash.setdefault(java_string_hash(str(t)), []).append(str(t))
    if read_ms is not None and len(units):
        units = units[deliver_ms(units) >= read_ms]
    pending: dict[int, int] = {}
    for h, m in zip(units["hashTopic"].tolist(), units["magic"].tolist(), strict=True):
        pending[int(h)] = pending.get(int(h), 0) + (-1 if int(m) & MAGIC_DELETE else 1)
    diffs = []
    for h, ts in by_hash.items():
        if len(ts) == 1 and ts[0] in small and small[ts[0]] != pending.get(h, 0):
            diffs.append((ts[0], small[ts[0]], pending.get(h, 0)))
    return doc, sorted(diffs)


def read_metrics(root: Path) -> str | None:
    path = root / TIMER_METRICS
    return path.read_text("utf-8") if path.exists() else None


