"""Recovery at open: the commitlog from the checkpoint (normal or abnormal), consume queues
and index re-dispatched past it, the clean-shutdown state, schedule reconciliation.

RocketMQ's recovery at two layers: this module performs it on a store the reference store
opens; :mod:`mqtool.integrity.recovery` says what it would cut on a store that is only read.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from mqtool.formats import commitlog_layout as layout
from mqtool.formats.commitlog import CommitLogMessage, FileEnd
from mqtool.formats.errors import FormatError
from mqtool.formats.walker import scan_file
from mqtool.refstore import redelivery
from mqtool.refstore.configs import BrokerConfigs
from mqtool.refstore.dispatch import ConsumeQueues
from mqtool.refstore.index import IndexBuilder
from mqtool.refstore.logfiles import B_BLANK_MAGIC, CommitLogFiles, buf
from mqtool.refstore.mapped import CheckpointFile, RefStoreError
from mqtool.refstore.persist import atomic_write
from mqtool.refstore.put import RecordWriter
from mqtool.refstore.schedule import ScheduleService
from mqtool.refstore.values import StoreConfig

STATE_FILE = "mqtool-refstore-state.json"  # written on clean close, consumed on open
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Recovery:
    """Brings the parts of an opened store to the state RocketMQ's recovery would."""

    def __init__(
        self, root: Path, config: StoreConfig, *, abnormal: bool, commitlog: CommitLogFiles,
        queues: ConsumeQueues, index: IndexBuilder, checkpoint: CheckpointFile,
        configs: BrokerConfigs, schedule: ScheduleService, writer: RecordWriter,
    ) -> None:
        self.root = root
        self.config = config
        self.abnormal = abnormal  # ``abort`` was there: the last run did not close cleanly
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.checkpoint = checkpoint
        self.configs = configs
        self.schedule = schedule
        self.writer = writer

    def _recovery_start_file(self) -> int:
        files = self.commitlog.files
        if not files:
            return 0
        cp = self.checkpoint.stored
        stamps = [cp.physic_msg_timestamp, cp.logics_msg_timestamp]
        if self.config.message_index_enable:
            stamps.append(cp.index_msg_timestamp)
        min_ts = max(0, min(stamps) - 3000)  # StoreCheckpoint#getMinTimestamp(Index)
        for i in range(len(files) - 1, -1, -1):
            mm = files[i].mm
            size = _I32.unpack_from(mm, layout.TOTALSIZE_AT)[0]
            if size <= 0 or mm[layout.MAGIC_AT : layout.MAGIC_AT + 4] == B_BLANK_MAGIC:
                continue
            sys_flag = _I32.unpack_from(mm, layout.SYSFLAG_AT)[0]
            born = layout.IPV6_WIDTH if sys_flag & layout.BORNHOST_V6_FLAG else layout.IPV4_WIDTH
            store_ts = _I64.unpack_from(mm, layout.BORNHOST_AT + born + layout.PORT_WIDTH)[0]
            if store_ts <= min_ts:
                return i
        return 0

    def _clean_state_ok(self) -> bool:
        """After a clean close by this engine: the saved end is still the end (nobody wrote
        since), so the commitlog need not be scanned and nothing needs re-dispatching."""
        path = self.root / "config" / STATE_FILE
        try:
            state = json.loads(path.read_text("utf-8"))
            path.unlink()
        except (OSError, ValueError):
            return False
        if self.abnormal or not isinstance(state, dict):
            return False
        cl = self.commitlog
        try:
            end, last, ts = int(state["writePosition"]), int(state["lastRecord"]), int(
                state["lastStoreTimestamp"])
        except (KeyError, TypeError, ValueError):
            return False
        if not cl.files:
            return end == 0
        tail = cl.files[-1]
        if not tail.file_from_offset <= end <= tail.file_from_offset + cl.file_size:
            return False
        pos = end - tail.file_from_offset
        if pos + 8 <= cl.file_size and tail.mm[pos : pos + 8] != bytes(8):
            return False  # someone (a broker) wrote after us
        if last >= 0:
            try:
                m = cl.read_any(last)
            except (RefStoreError, FormatError):
                return False
            if m.end_offset != end or m.store_timestamp != ts:
                return False
        cl.write_pos = end
        self.queues.offsets_from_files()
        self.checkpoint.ts = ts
        if self.config.message_index_enable:
            self.index.written_ts = ts
        return True

    def save_clean_state(self) -> None:
        """Note the end for the next open (a clean close)."""
        state = {
            "writePosition": self.commitlog.write_pos,
            "lastRecord": self.writer.last_record,
            "lastStoreTimestamp": self.checkpoint.ts,
        }
        atomic_write(self.root / "config" / STATE_FILE, json.dumps(state), bak=False)

    def run(self) -> None:
        """Recover the commitlog, the consume queues and the index as RocketMQ does."""
        if self._clean_state_ok():
            return
        cl = self.commitlog
        start = self._recovery_start_file()
        end = cl.min_offset
        dispatch_from = cl.files[start].file_from_offset if cl.files else 0
        last: CommitLogMessage | None = None
        for mf in cl.files[start:]:
            end = mf.file_from_offset
            stop: FileEnd | None = None
            for item in scan_file(buf(mf.mm), file=str(mf.path), file_start=mf.file_from_offset,
                                  fd=mf.fileno()):  # the file's holes are not read
                if isinstance(item, CommitLogMessage):
                    if not item.crc_ok:  # checkCRCOnRecover
                        stop = FileEnd(item.physical_offset, "corrupt", "body CRC mismatch")
                        break
                    end = item.end_offset
                    last = item
                elif isinstance(item, FileEnd):
                    stop = item
                    break
            if stop is None or stop.kind != "blank":
                if stop is not None:
                    end = stop.physical_offset
                break
            end = mf.file_from_offset + cl.file_size
        cl.truncate(end, self.config.max_message_size + 64)
        # consume queues: drop units past the valid end, then re-dispatch past the checkpoint
        for cq in self.queues.files.values():
            cq.truncate_dirty(end)
        self.queues.offsets_from_files()
        if cl.files:
            for mf in cl.files[start:]:
                name, start_off = str(mf.path), mf.file_from_offset
                for item in scan_file(buf(mf.mm), file=name, file_start=start_off,
                                      fd=mf.fileno()):
                    if not isinstance(item, CommitLogMessage):
                        break
                    if item.physical_offset >= dispatch_from:
                        self.queues.dispatch(item, recovering=True)
        if last is not None and last.end_offset == end:
            self._reconcile_schedule(last)
        self.index.write_buffered()
        if last is not None:
            self.checkpoint.ts = last.store_timestamp
            self.writer.last_record = last.physical_offset
            if self.config.message_index_enable:
                self.index.written_ts = last.store_timestamp
        self.checkpoint.write(self.index.written_ts)

    def _reconcile_schedule(self, last: CommitLogMessage) -> None:
        """A kill between a delivery and its delayOffset.json write leaves the delivered copy
        as the last record and the offset one short: advance it (no duplicate delivery)."""
        props = last.properties
        if (last.topic == redelivery.SCHEDULE_TOPIC
                or props.get(redelivery.PROPERTY_REAL_TOPIC) != last.topic):
            return
        level_s = props.get(redelivery.PROPERTY_DELAY_TIME_LEVEL)
        if level_s is None or not level_s.lstrip("-").isdigit():
            return
        level = min(int(level_s), self.queues.max_delay_level)
        cq = self.schedule.level_queue(level)
        if cq is None:
            return
        off = self.configs.delay_offsets.get(level, 0)
        unit = cq.get(off)
        if unit is None:
            return
        try:
            sched = self.commitlog.read(unit[0])
        except (RefStoreError, FormatError):
            return
        if (
            sched.physical_offset < last.physical_offset
            and sched.uniq_key == last.uniq_key
            and sched.body_crc == last.body_crc
            and sched.reconsume_times == last.reconsume_times
        ):
            self.configs.delay_offsets[level] = off + 1
            self.schedule.note_progress(level, off + 1)
            self.configs.persist_delay_offsets()
