"""``ScheduleMessageService``: deliver due SCHEDULE_TOPIC_XXXX copies to their real topic."""

from __future__ import annotations

from collections.abc import Iterable

from mqtool.formats.commitlog import (
    parse_properties,
)
from mqtool.refstore import broker as B
from mqtool.refstore.mapped import (
    MappedFile,
)
from mqtool.refstore.model import (
    PutResult,
)
from mqtool.refstore.put import PutMixin
from mqtool.refstore.state import (
    _I64,
    PROGRESS_FILE,
    PROGRESS_FILE_SIZE,
)


class ScheduleMixin(PutMixin):
    """The schedule service (tick, pending_delayed, next_due)."""


    def tick(
        self,
        now: int | None = None,
        *,
        levels: Iterable[int] | None = None,
        limit: int | None = None,
    ) -> list[PutResult]:
        """Deliver due delayed messages (``ScheduleMessageService``), level by level.

        ``now`` defaults to the clock. ``levels`` restricts the levels run, ``limit`` the number
        delivered. Progress is recorded after every delivery in a small mapped side file
        (``config/mqtool-delay-progress``, no syscall) and ``delayOffset.json`` is rewritten at
        the end, so a kill at any point neither loses nor repeats a delivery.
        """
        self._check_open()
        if now is None:
            now = self.clock()
        out: list[PutResult] = []
        try:
            for level in sorted(levels) if levels is not None else sorted(self._delay_table):
                delay = self._delay_table.get(level)
                if delay is None:
                    continue
                cq = self._cqs.get((B.SCHEDULE_TOPIC, B.delay_level_to_queue_id(level)))
                if cq is None:
                    continue
                off = max(self.delay_offsets.get(level, 0), cq.min_offset)
                while off < cq.max_offset:
                    if limit is not None and len(out) >= limit:
                        return out
                    unit = cq.get(off)
                    assert unit is not None
                    deliver = B.correct_deliver_timestamp(now, unit[2], delay)
                    if deliver - now > 0:
                        break
                    out.append(self._deliver(unit[0], now))
                    off += 1
                    self.delay_offsets[level] = off
                    self._note_progress(level, off)
        finally:
            if out:
                self._persist_delay_offsets()
        return out

    def _note_progress(self, level: int, offset: int) -> None:
        if self._progress_mf is None:
            path = self.root / "config" / PROGRESS_FILE
            self._progress_mf = MappedFile(path, 0, PROGRESS_FILE_SIZE, create=True)
        if 0 < level < PROGRESS_FILE_SIZE // 8:
            _I64.pack_into(self._progress_mf.mm, level * 8, offset + 1)

    def _load_progress(self) -> None:
        path = self.root / "config" / PROGRESS_FILE
        if not path.exists():
            return
        self._progress_mf = MappedFile(path, 0, PROGRESS_FILE_SIZE, create=True)
        for level in self._delay_table:
            if level < PROGRESS_FILE_SIZE // 8:
                v = _I64.unpack_from(self._progress_mf.mm, level * 8)[0] - 1
                if v > self.delay_offsets.get(level, -1):
                    self.delay_offsets[level] = v

    def _deliver(self, phy: int, now: int) -> PutResult:
        ext = self._commitlog.read(phy)
        props = parse_properties(ext.properties_raw)
        up = B.message_timeup(props)
        tc = self.topics.get(up.topic)
        if tc is None:
            self.create_topic(up.topic, max(self.config.default_queue_nums, up.queue_id + 1))
        return self._put_inner(
            up.topic, up.queue_id, ext.body, up.properties, flag=ext.flag,
            sys_flag=ext.sys_flag & ~0x30, born_timestamp=ext.born_timestamp,
            born_host=ext.born_host, reconsume_times=ext.reconsume_times,
            store_timestamp=now, schedule=False,
        )

    def pending_delayed(self) -> dict[int, int]:
        """Level -> number of messages not yet delivered."""
        out: dict[int, int] = {}
        for level in sorted(self._delay_table):
            cq = self._cqs.get((B.SCHEDULE_TOPIC, B.delay_level_to_queue_id(level)))
            if cq is not None:
                n = cq.max_offset - max(self.delay_offsets.get(level, 0), cq.min_offset)
                if n > 0:
                    out[level] = n
        return out

    def next_due(self) -> int | None:
        """Earliest deliver time (epoch ms) of a pending delayed message, None without any."""
        best: int | None = None
        for level in self._delay_table:
            cq = self._cqs.get((B.SCHEDULE_TOPIC, B.delay_level_to_queue_id(level)))
            if cq is None:
                continue
            unit = cq.get(max(self.delay_offsets.get(level, 0), cq.min_offset))
            if unit is not None and (best is None or unit[2] < best):
                best = unit[2]
        return best
