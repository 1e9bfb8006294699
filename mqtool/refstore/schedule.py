"""``ScheduleMessageService``: deliver due SCHEDULE_TOPIC_XXXX copies to their real topic."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from pathlib import Path

from mqtool.formats.commitlog import parse_properties
from mqtool.refstore import redelivery
from mqtool.refstore.configs import BrokerConfigs
from mqtool.refstore.dispatch import ConsumeQueues
from mqtool.refstore.logfiles import CommitLogFiles
from mqtool.refstore.mapped import ConsumeQueueFiles, MappedFile
from mqtool.refstore.put import RecordWriter
from mqtool.refstore.values import PutResult, StoreConfig

PROGRESS_FILE = "mqtool-delay-progress"  # per-level delivery progress, 8 bytes per level
PROGRESS_FILE_SIZE = 4096
_I64 = struct.Struct(">q")


class ScheduleService:
    """The schedule service (tick, pending_delayed, next_due) and its progress file."""

    def __init__(
        self, root: Path, config: StoreConfig, clock: Callable[[], int],
        delay_table: dict[int, int], configs: BrokerConfigs, queues: ConsumeQueues,
        writer: RecordWriter, commitlog: CommitLogFiles,
    ) -> None:
        self.root = root
        self.config = config
        self.clock = clock
        self.delay_table = delay_table
        self.configs = configs
        self.queues = queues
        self.writer = writer
        self.commitlog = commitlog
        self._progress: MappedFile | None = None

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
        if now is None:
            now = self.clock()
        out: list[PutResult] = []
        try:
            for level in sorted(levels) if levels is not None else sorted(self.delay_table):
                delay = self.delay_table.get(level)
                if delay is None:
                    continue
                cq = self.level_queue(level)
                if cq is None:
                    continue
                off = max(self.configs.delay_offsets.get(level, 0), cq.min_offset)
                while off < cq.max_offset:
                    if limit is not None and len(out) >= limit:
                        return out
                    unit = cq.get(off)
                    assert unit is not None
                    deliver = redelivery.correct_deliver_timestamp(now, unit[2], delay)
                    if deliver - now > 0:
                        break
                    out.append(self._deliver(unit[0], now))
                    off += 1
                    self.configs.delay_offsets[level] = off
                    self.note_progress(level, off)
        finally:
            if out:
                self.configs.persist_delay_offsets()
        return out

    def level_queue(self, level: int) -> ConsumeQueueFiles | None:
        """The ``SCHEDULE_TOPIC_XXXX`` queue of a delay level (None while it has none)."""
        return self.queues.get(redelivery.SCHEDULE_TOPIC, redelivery.delay_level_to_queue_id(level))

    def note_progress(self, level: int, offset: int) -> None:
        """Record that ``level`` is delivered up to ``offset`` (exclusive) in the side file."""
        if self._progress is None:
            path = self.root / "config" / PROGRESS_FILE
            self._progress = MappedFile(path, 0, PROGRESS_FILE_SIZE, create=True)
        if 0 < level < PROGRESS_FILE_SIZE // 8:
            _I64.pack_into(self._progress.mm, level * 8, offset + 1)

    def load_progress(self) -> None:
        """Advance the delay offsets to the side file's progress (a kill between a delivery
        and the next delayOffset.json write)."""
        path = self.root / "config" / PROGRESS_FILE
        if not path.exists():
            return
        self._progress = MappedFile(path, 0, PROGRESS_FILE_SIZE, create=True)
        for level in self.delay_table:
            if level < PROGRESS_FILE_SIZE // 8:
                v = _I64.unpack_from(self._progress.mm, level * 8)[0] - 1
                if v > self.configs.delay_offsets.get(level, -1):
                    self.configs.delay_offsets[level] = v

    def _deliver(self, phy: int, now: int) -> PutResult:
        ext = self.commitlog.read(phy)
        props = parse_properties(ext.properties_raw)
        up = redelivery.message_timeup(props)
        tc = self.configs.topics.get(up.topic)
        if tc is None:
            queues = max(self.config.default_queue_nums, up.queue_id + 1)
            self.configs.create_topic(up.topic, queues)
        return self.writer.put_fields(
            up.topic, up.queue_id, ext.body, up.properties, flag=ext.flag,
            sys_flag=ext.sys_flag & ~0x30, born_timestamp=ext.born_timestamp,
            born_host=ext.born_host, reconsume_times=ext.reconsume_times,
            store_timestamp=now, schedule=False,
        )

    def pending_delayed(self) -> dict[int, int]:
        """Level -> number of messages not yet delivered."""
        out: dict[int, int] = {}
        for level in sorted(self.delay_table):
            cq = self.level_queue(level)
            if cq is not None:
                n = cq.max_offset - max(self.configs.delay_offsets.get(level, 0), cq.min_offset)
                if n > 0:
                    out[level] = n
        return out

    def next_due(self) -> int | None:
        """Earliest deliver time (epoch ms) of a pending delayed message, None without any."""
        best: int | None = None
        for level in self.delay_table:
            cq = self.level_queue(level)
            if cq is None:
                continue
            unit = cq.get(max(self.configs.delay_offsets.get(level, 0), cq.min_offset))
            if unit is not None and (best is None or unit[2] < best):
                best = unit[2]
        return best

    def close(self) -> None:
        """Unmap the progress file."""
        if self._progress is not None:
            self._progress.close()
