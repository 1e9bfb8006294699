"""Loading and recovery: checkpoint, index, commitlog recovery from the checkpoint (normal or
abnormal), clean-shutdown state, schedule reconciliation."""

from __future__ import annotations

import json
from dataclasses import replace

from mqtool.formats.checkpoint import CHECKPOINT_FILE_SIZE, Checkpoint, build_checkpoint
from mqtool.formats.checkpoint import parse_checkpoint as _parse_checkpoint
from mqtool.formats.commitlog import CommitLogMessage, FileEnd
from mqtool.formats.errors import FormatError
from mqtool.formats.walker import scan_file
from mqtool.refstore import broker as B
from mqtool.refstore.logfiles import (
    B_BLANK_MAGIC,
    CommitLogFiles,
)
from mqtool.refstore.logfiles import (
    buf as _buf,
)
from mqtool.refstore.mapped import (
    ConsumeQueueFiles,
    IndexFileWriter,
    MappedFile,
    RefStoreError,
)
from mqtool.refstore.persist import atomic_write as _atomic_write
from mqtool.refstore.schedule import ScheduleMixin
from mqtool.refstore.state import (
    CONFIG_FILE,
    STATE_FILE,
)


class RecoveryMixin(ScheduleMixin):
    """Load and recover an existing store."""


    # -- loading and recovery -----------------------------------------------------------------

    def _load(self) -> None:
        cfgdir = self.root / "config"
        cfgdir.mkdir(exist_ok=True)
        _atomic_write(cfgdir / CONFIG_FILE, json.dumps(self.config.to_json(), indent=1), bak=False)
        abort = self.root / "abort"
        self.recovered_abnormally = abort.exists()
        abort.touch()
        self._commitlog = CommitLogFiles(self.root / "commitlog", self.config.commitlog_file_size)
        cq_root = self.root / "consumequeue"
        if cq_root.is_dir():
            for tdir in sorted(cq_root.iterdir()):
                for qdir in sorted(tdir.iterdir()):
                    if qdir.name.isdigit():
                        self._cqs[(tdir.name, int(qdir.name))] = ConsumeQueueFiles(
                            qdir, self.config.cq_entries_per_file
                        )
        self._load_index()
        self._load_checkpoint()
        self._load_configs()
        self._load_progress()
        self._closed = False
        self._recover()

    def _load_checkpoint(self) -> None:
        path = self.root / "checkpoint"
        self._cp_mf = MappedFile(path, 0, CHECKPOINT_FILE_SIZE, create=True)
        try:
            self._cp = _parse_checkpoint(_buf(self._cp_mf.mm), file=str(path))
        except FormatError:
            self._cp = Checkpoint(0, 0, 0)

    def _write_checkpoint(self) -> None:
        if self._cp_ts:
            ts = self._cp_ts
            self._cp = replace(
                self._cp, physic_msg_timestamp=ts, logics_msg_timestamp=ts,
                index_msg_timestamp=self._index_ts,
            )
        if self._cp_mf is not None:
            data = build_checkpoint(self._cp)
            self._cp_mf.mm[: len(data)] = data

    def _load_index(self) -> None:
        d = self.root / "index"
        d.mkdir(exist_ok=True)
        names = sorted(p.name for p in d.iterdir() if p.name.isdigit())
        size = 40 + self.config.index_hash_slots * 4 + self.config.index_max_entries * 20
        opened: list[IndexFileWriter] = []
        if names and (d / names[-1]).stat().st_size < size:
            (d / names[-1]).unlink()  # killed while creating it: nothing was written to it
            names.pop()
        for name in names[-2:]:
            path = d / name
            if path.stat().st_size != size:
                raise RefStoreError(
                    f"{path}: {path.stat().st_size} bytes, the store's index files are {size} "
                    "bytes (pass the matching StoreConfig)"
                )
            opened.append(
                IndexFileWriter(
                    path, self.config.index_hash_slots, self.config.index_max_entries,
                    create=False,
                )
            )
        if opened and opened[-1].index_count <= 1 and opened[-1].end_phy_offset == 0:
            empty = opened.pop()  # created but never written (or killed before its header)
            empty.close()
            empty.path.unlink()
        if opened:
            self._index = opened[-1]
            self._index.repair_slots()
            self._prev_index = opened[-2] if len(opened) > 1 else None

    def _recovery_start_file(self) -> int:
        files = self._commitlog.files
        if not files:
            return 0
        cp = self._cp
        stamps = [cp.physic_msg_timestamp, cp.logics_msg_timestamp]
        if self.config.message_index_enable:
            stamps.append(cp.index_msg_timestamp)
        min_ts = max(0, min(stamps) - 3000)  # StoreCheckpoint#getMinTimestamp(Index)
        for i in range(len(files) - 1, -1, -1):
            mm = files[i].mm
            size, magic = int.from_bytes(mm[0:4], "big", signed=True), mm[4:8]
            if size <= 0 or magic == B_BLANK_MAGIC:
                continue
            store_ts = int.from_bytes(mm[56:64], "big", signed=True)  # IPv4 born host layout
            sys_flag = int.from_bytes(mm[36:40], "big", signed=True)
            if sys_flag & 0x10:
                store_ts = int.from_bytes(mm[68:76], "big", signed=True)
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
        if self.recovered_abnormally or not isinstance(state, dict):
            return False
        cl = self._commitlog
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
        self._queue_table = {k: cq.max_offset for k, cq in self._cqs.items()}
        self._cp_ts = ts
        if self._index_enable:
            self._index_ts = ts
        return True

    def _save_clean_state(self) -> None:
        state = {
            "writePosition": self._commitlog.write_pos,
            "lastRecord": self._last_record,
            "lastStoreTimestamp": self._cp_ts,
        }
        _atomic_write(self.root / "config" / STATE_FILE, json.dumps(state), bak=False)

    def _recover(self) -> None:
        if self._clean_state_ok():
            return
        cl = self._commitlog
        start = self._recovery_start_file()
        end = cl.min_offset
        dispatch_from = cl.files[start].file_from_offset if cl.files else 0
        last: CommitLogMessage | None = None
        for mf in cl.files[start:]:
            end = mf.file_from_offset
            stop: FileEnd | None = None
            for item in scan_file(_buf(mf.mm), file=str(mf.path), file_start=mf.file_from_offset,
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
        for cq in self._cqs.values():
            cq.truncate_dirty(end)
        self._queue_table = {k: cq.max_offset for k, cq in self._cqs.items()}
        if cl.files:
            for mf in cl.files[start:]:
                name, start_off = str(mf.path), mf.file_from_offset
                for item in scan_file(_buf(mf.mm), file=name, file_start=start_off,
                                      fd=mf.fileno()):
                    if not isinstance(item, CommitLogMessage):
                        break
                    if item.physical_offset >= dispatch_from:
                        self._dispatch(item, recovering=True)
        if last is not None and last.end_offset == end:
            self._reconcile_schedule(last)
        self._flush_index()
        if last is not None:
            self._cp_ts = last.store_timestamp
            self._last_record = last.physical_offset
            if self._index_enable:
                self._index_ts = last.store_timestamp
        self._write_checkpoint()

    def _reconcile_schedule(self, last: CommitLogMessage) -> None:
        """A kill between a delivery and its delayOffset.json write leaves the delivered copy
        as the last record and the offset one short: advance it (no duplicate delivery)."""
        props = last.properties
        if last.topic == B.SCHEDULE_TOPIC or props.get(B.PROPERTY_REAL_TOPIC) != last.topic:
            return
        level_s = props.get(B.PROPERTY_DELAY_TIME_LEVEL)
        if level_s is None or not level_s.lstrip("-").isdigit():
            return
        level = min(int(level_s), self.max_delay_level)
        cq = self._cqs.get((B.SCHEDULE_TOPIC, B.delay_level_to_queue_id(level)))
        if cq is None:
            return
        off = self.delay_offsets.get(level, 0)
        unit = cq.get(off)
        if unit is None:
            return
        try:
            sched = self._commitlog.read(unit[0])
        except (RefStoreError, FormatError):
            return
        if (
            sched.physical_offset < last.physical_offset
            and sched.uniq_key == last.uniq_key
            and sched.body_crc == last.body_crc
            and sched.reconsume_times == last.reconsume_times
        ):
            self.delay_offsets[level] = off + 1
            self._note_progress(level, off + 1)
            self._persist_delay_offsets()
