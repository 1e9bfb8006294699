"""The reference store engine: RocketMQ's ``DefaultMessageStore`` and the broker around it.

One :class:`RefStore` owns one store root while it is open: it holds the broker's ``lock`` file
(POSIX record lock on byte 0, as ``FileChannel.tryLock(0, 1, false)``), keeps ``abort`` present
until a clean :meth:`RefStore.close`, and writes

* ``commitlog/`` records byte for byte as :func:`mqtool.formats.commitlog.build_message` builds
  them (written by :func:`mqtool.formats.encoder.pack_record_into` straight into the mapping;
  a test proves the two agree): V1, V2 for long topics, IPv4/IPv6 hosts; files roll with a BLANK
  end-of-file record when a record plus 8 bytes does not fit
  (``CommitLog.DefaultAppendMessageCallback#doAppend``);
* ``consumequeue/`` units synchronously (tagsCode = ``String.hashCode`` of TAGS, the deliver
  time for ``SCHEDULE_TOPIC_XXXX``) and ``index/`` entries (UNIQ_KEY and every KEYS token) in
  vectorised batches of 1,024 keys (RocketMQ dispatches asynchronously too), then the
  ``checkpoint`` timestamps: physic/logics per put, index per written batch;
* ``config/delayOffset.json``, ``consumerOffset.json``, ``topics.json``,
  ``subscriptionGroup.json`` in fastjson's dialect, with a ``.bak`` of the previous content,
  atomically (temporary file + rename; fsync with ``StoreConfig.fsync_configs``).

Reopening recovers as RocketMQ does: the commitlog is scanned from the file the checkpoint
points at (``recoverAbnormally`` / ``isMappedFileMatchedRecover``), the torn tail is cut
(TOTALSIZE is written last, so a torn record reads as end of data), consume-queue units past the
valid end are dropped, and consume queues and index are re-dispatched past the checkpoint; a kill
between an index batch's header and slot writes is repaired. Schedule progress is recorded per
delivery in ``config/mqtool-delay-progress`` (delayOffset.json is rewritten per tick), so a kill
neither loses nor repeats a delivery. After a clean close the saved end
(``config/mqtool-refstore-state.json``) makes reopening O(1) when the files still agree.

Time comes from an injectable clock (epoch ms), so journeys replay deterministically.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mqtool.formats.checkpoint import CHECKPOINT_FILE_SIZE, Checkpoint, build_checkpoint
from mqtool.formats.checkpoint import parse_checkpoint as _parse_checkpoint
from mqtool.formats.commitlog import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    CommitLogMessage,
    FileEnd,
    HostPort,
    parse_properties,
    scan_file,
)
from mqtool.formats.config import (
    CONSUMER_OFFSET_TABLE_CAPACITY,
    SUBSCRIPTION_GROUP_TABLE_CAPACITY,
    TOPIC_CONFIG_TABLE_CAPACITY,
    ConsumerOffsets,
    DataVersion,
    SubscriptionGroupConfig,
    SubscriptionGroups,
    TopicConfig,
    TopicConfigs,
    build_consumer_offset,
    build_delay_offset,
    build_subscription_groups,
    build_topics,
    chm_order,
    default_subscription_group_fields,
    load_config,
)
from mqtool.formats.encoder import (
    CRC32_PLACEHOLDER,
    magic_for,
    pack_record_into,
    packed_ip,
    record_size,
    topic_header,
    write_total_size,
)
from mqtool.formats.errors import Finding, FormatError
from mqtool.formats.javacompat import hashmap_key_order
from mqtool.refstore import broker as B
from mqtool.refstore.fastpath import JavaHashCache, index_hashes, java_hash_unsigned
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
    index_file_name,
)
from mqtool.refstore.model import (
    ManualClock,
    Message,
    PullResult,
    PutResult,
    StoreConfig,
    StoreLockedError,
    system_clock,
)
from mqtool.refstore.persist import atomic_write as _atomic_write
from mqtool.refstore.persist import infer_config
from mqtool.refstore.uniqkey import UniqKeyGenerator

__all__ = [  # the public API (model types re-exported from mqtool.refstore.model)
    "CONFIG_FILE",
    "ManualClock",
    "Message",
    "PullResult",
    "PutResult",
    "RefStore",
    "RefStoreError",
    "StoreConfig",
    "StoreLockedError",
    "infer_config",
    "system_clock",
]

_CP3 = struct.Struct(">qqq")  # physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp
_I64 = struct.Struct(">q")
PROGRESS_FILE = "mqtool-delay-progress"  # per-level delivery progress, 8 bytes per level
PROGRESS_FILE_SIZE = 4096
INDEX_BATCH = 1024  # index keys buffered before a vectorised write
STATE_FILE = "mqtool-refstore-state.json"  # written on clean close, consumed on open
CONFIG_FILE = "mqtool-refstore.json"  # our own settings, beside the broker's config files
_LOCKED_ROOTS: set[str] = set()  # POSIX locks do not conflict inside one process

# ---------------------------------------------------------------------------------------------
# the store


class RefStore:
    """A writable RocketMQ store with the broker's delay, retry and DLQ behaviour.

    Use :meth:`open` (or ``with RefStore.open(root) as s:``). Not thread-safe: one writer.
    """

    def __init__(
        self,
        root: Path,
        config: StoreConfig,
        clock: Callable[[], int],
        uniq: UniqKeyGenerator,
        seed: int | None,
    ) -> None:
        self.root = root
        self.config = config
        self.clock = clock
        self.uniq = uniq
        self._rnd = random.Random(seed)
        self._closed = True
        self._lock_fd: int | None = None
        self._store_host = HostPort.parse(config.store_host)
        self._delay_table = B.parse_delay_levels(config.message_delay_level)
        self.max_delay_level = max(self._delay_table)
        self._cqs: dict[tuple[str, int], ConsumeQueueFiles] = {}
        self._queue_table: dict[tuple[str, int], int] = {}
        self._rr: dict[str, int] = {}
        self._index: IndexFileWriter | None = None
        self._prev_index: IndexFileWriter | None = None
        self.delay_offsets: dict[int, int] = {}
        self.consumer_offsets: dict[str, dict[int, int]] = {}
        self.topics: dict[str, TopicConfig] = {}
        self.groups: dict[str, SubscriptionGroupConfig] = {}
        self._versions: dict[str, int] = {}
        self._offsets_dirty = False
        self._cp_mf: MappedFile | None = None
        self._progress_mf: MappedFile | None = None
        self._cp_ts = 0
        self._index_ts = 0
        self._ix_pre: list[int] = []  # unsigned Java hash of "topic#" per buffered key
        self._ix_key: list[str] = []
        self._ix_off: list[int] = []
        self._ix_ts: list[int] = []
        self._last_record = -1
        self._store_ip = packed_ip(self._store_host)
        self._store_v6 = len(self._store_ip) == 16
        self._msg_id_prefix = (
            self._store_ip + self._store_host.port.to_bytes(4, "big", signed=True)
        ).hex().upper()
        self._topic_hdrs: dict[str, tuple[bytes, int, int]] = {}
        self._max_body = config.max_message_size
        self._store_port = self._store_host.port
        self._hashes = JavaHashCache()
        self._topic_pre: dict[str, int] = {}
        self._prop_orders: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._props_capacity = config.properties_capacity
        self._trailing_sep = config.v5
        self._born_hosts: dict[str, HostPort] = {}
        self._cluster = config.cluster_name
        self._prop_crc = config.append_prop_crc
        self._index_enable = config.message_index_enable
        self._cp = Checkpoint(0, 0, 0)
        self.recovered_abnormally = False

    # -- lifecycle ----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        root: str | os.PathLike[str],
        config: StoreConfig | None = None,
        *,
        clock: Callable[[], int] | None = None,
        uniq: UniqKeyGenerator | None = None,
        seed: int | None = None,
        create: bool = True,
    ) -> RefStore:
        """Lock, load and recover the store at ``root`` (created when missing and ``create``).

        ``config`` defaults to the one saved in ``config/mqtool-refstore.json``, else to what
        :func:`infer_config` reads from an existing (broker-written) store, else RocketMQ's
        defaults; it is saved there. Raises :class:`StoreLockedError` when another
        process holds the store's lock.
        """
        rootp = Path(root)
        if not rootp.exists():
            if not create:
                raise RefStoreError(f"{rootp}: no such store")
            rootp.mkdir(parents=True)
        saved = rootp / "config" / CONFIG_FILE
        if config is None:
            if saved.exists():
                try:
                    config = StoreConfig.from_json(json.loads(saved.read_text("utf-8")))
                except (ValueError, TypeError) as e:
                    raise RefStoreError(f"{saved}: unreadable refstore settings: {e}") from e
            else:
                config = infer_config(rootp) or StoreConfig()
        clk = clock or system_clock
        if uniq is None:
            uniq = UniqKeyGenerator("127.0.0.1", clock=clk, seed=seed)
        store = cls(rootp, config, clk, uniq, seed)
        try:
            store._lock()
        except OSError as e:
            raise RefStoreError(f"{rootp}: cannot open the lock file: {e.strerror}") from e
        try:
            store._load()
        except OSError as e:
            store._release(abort_file=True)
            raise RefStoreError(f"{rootp}: {e.strerror}: {e.filename}") from e
        except BaseException:
            store._release(abort_file=True)
            raise
        return store

    def __enter__(self) -> RefStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _lock(self) -> None:
        key = str(self.root.resolve())
        if key in _LOCKED_ROOTS:  # checked first: closing any fd of the file would drop the lock
            raise StoreLockedError(
                f"{self.root}: store is already open for writing in this process"
            )
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError as e:
            os.close(fd)
            raise StoreLockedError(
                f"{self.root}: store is locked by another process (a running broker or "
                "another mqtool writer); stop it first, read-only commands still work"
            ) from e
        self._lock_fd = fd
        _LOCKED_ROOTS.add(key)

    def _release(self, *, abort_file: bool) -> None:
        if not abort_file:
            try:
                (self.root / "abort").unlink()
            except FileNotFoundError:
                pass
        if self._lock_fd is not None:
            try:
                fcntl.lockf(self._lock_fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None
                _LOCKED_ROOTS.discard(str(self.root.resolve()))

    def close(self) -> None:
        """Flush, persist configs, write the checkpoint, remove ``abort``, unlock."""
        if self._closed:
            return
        self.flush()
        self._save_clean_state()
        self._commitlog.close()
        for cq in self._cqs.values():
            cq.close()
        for ix in (self._index, self._prev_index):
            if ix is not None:
                ix.close()
        if self._cp_mf is not None:
            self._cp_mf.close()
        if self._progress_mf is not None:
            self._progress_mf.close()
        self._closed = True
        self._release(abort_file=False)

    def flush(self) -> None:
        """msync data files, persist dirty offsets and the checkpoint."""
        self._check_open()
        self._flush_index()
        self._commitlog.flush()
        for cq in self._cqs.values():
            cq.flush()
        if self._index is not None:
            self._index.flush()
        self._write_checkpoint()
        if self._cp_mf is not None:
            self._cp_mf.flush()
        if self._offsets_dirty:
            self._persist_consumer_offsets()

    def _check_open(self) -> None:
        if self._closed:
            raise RefStoreError(f"{self.root}: store is closed")

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
            for item in scan_file(_buf(mf.mm), file=str(mf.path), file_start=mf.file_from_offset):
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
                for item in scan_file(_buf(mf.mm), file=name, file_start=start_off):
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

    # -- config files -------------------------------------------------------------------------

    def _data_version(self, name: str) -> DataVersion:
        counter = self._versions.get(name, 0)
        return DataVersion(counter, self.clock(), 0 if self.config.v5 else None)

    def _read_config(self, name: str) -> Any:
        """``ConfigManager#load`` (``.bak`` fallback): the model or None; what went wrong is
        kept in :attr:`config_findings`."""
        loaded = load_config(self.root, name)
        self.config_findings.extend(loaded.findings)
        return loaded.value

    def _load_configs(self) -> None:
        self.config_findings: list[Finding] = []
        delay = self._read_config("delayOffset.json")
        if delay is not None:
            self.delay_offsets = dict(delay.offset_table)
        offsets = self._read_config("consumerOffset.json")
        if offsets is not None:
            self.consumer_offsets = {k: dict(v) for k, v in offsets.offset_table.items()}
            if offsets.data_version is not None:
                self._versions["consumerOffset"] = offsets.data_version.counter
        topics = self._read_config("topics.json")
        if topics is not None:
            self.topics = dict(topics.topic_config_table)
            if topics.data_version is not None:
                self._versions["topics"] = topics.data_version.counter
        else:
            self._create_system_topics()
        groups = self._read_config("subscriptionGroup.json")
        if groups is not None:
            self.groups = dict(groups.subscription_group_table)
            if groups.data_version is not None:
                self._versions["subscriptionGroup"] = groups.data_version.counter

    def _create_system_topics(self) -> None:
        # TopicConfigManager's constructor (the ones a store-only broker needs)
        for name, qn, perm in (
            ("SELF_TEST_TOPIC", 1, 6),
            ("TBW102", 8, 7),
            ("OFFSET_MOVED_EVENT", 1, 6),
            (B.SCHEDULE_TOPIC, 18, 6),
        ):
            self.topics[name] = TopicConfig(
                name, qn, qn, perm, attributes={} if self.config.v5 else None
            )
        self._persist_topics()

    def _persist_delay_offsets(self) -> None:
        dv = self._data_version("delayOffset") if self.config.v5 else None
        _atomic_write(
            self.root / "config" / "delayOffset.json",
            build_delay_offset(self.delay_offsets, dv), fsync=self.config.fsync_configs,
        )

    def _persist_consumer_offsets(self) -> None:
        self._versions["consumerOffset"] = self._versions.get("consumerOffset", 0) + 1
        keys = [str(k) for k in chm_order(self.consumer_offsets, CONSUMER_OFFSET_TABLE_CAPACITY)]
        table = {k: self.consumer_offsets[k] for k in keys}
        if self.config.v5:
            text = build_consumer_offset(
                ConsumerOffsets(table, self._data_version("consumerOffset"), None, {}),
                derive_group_topic_map=True,
            )
        else:
            text = build_consumer_offset(ConsumerOffsets(table))
        _atomic_write(
            self.root / "config" / "consumerOffset.json", text, fsync=self.config.fsync_configs
        )
        self._offsets_dirty = False

    def _persist_topics(self) -> None:
        self._versions["topics"] = self._versions.get("topics", 0) + 1
        names = [str(k) for k in chm_order(self.topics, TOPIC_CONFIG_TABLE_CAPACITY)]
        text = build_topics(
            TopicConfigs({n: self.topics[n] for n in names}, self._data_version("topics"))
        )
        _atomic_write(self.root / "config" / "topics.json", text, fsync=self.config.fsync_configs)

    def _persist_groups(self) -> None:
        self._versions["subscriptionGroup"] = self._versions.get("subscriptionGroup", 0) + 1
        names = [str(k) for k in chm_order(self.groups, SUBSCRIPTION_GROUP_TABLE_CAPACITY)]
        text = build_subscription_groups(
            SubscriptionGroups(
                {n: self.groups[n] for n in names},
                self._data_version("subscriptionGroup"),
                {} if self.config.v5 else None,
            )
        )
        _atomic_write(
            self.root / "config" / "subscriptionGroup.json", text, fsync=self.config.fsync_configs
        )

    # -- topics and groups --------------------------------------------------------------------

    def create_topic(
        self, topic: str, queue_nums: int | None = None, *, perm: int = 6, persist: bool = True
    ) -> TopicConfig:
        """Create (or return) a topic config as ``TopicConfigManager`` does."""
        self._check_open()
        tc = self.topics.get(topic)
        if tc is None:
            n = queue_nums or self.config.default_queue_nums
            tc = TopicConfig(topic, n, n, perm, attributes={} if self.config.v5 else None)
            self.topics[topic] = tc
            if persist:
                self._persist_topics()
        return tc

    def create_group(
        self, group: str, *, retry_max_times: int | None = None, retry_queue_nums: int = 1,
        consume_orderly: bool = False,
    ) -> SubscriptionGroupConfig:
        """Create or update a consumer group (``subscriptionGroup.json``)."""
        self._check_open()
        cur = self.groups.get(group)
        fields: dict[str, Any]
        if cur is None:
            fields = default_subscription_group_fields(group)
            if not self.config.v5:  # 4.9.x SubscriptionGroupConfig has 9 bean fields
                for k in ("attributes", "groupRetryPolicy", "consumeTimeoutMinute",
                          "consumeMessageOrderly", "groupSysFlag"):
                    fields.pop(k, None)
            fields["retryMaxTimes"] = self.config.default_max_reconsume_times
        else:
            fields = dict(cur.fields)
        if retry_max_times is not None:
            fields["retryMaxTimes"] = retry_max_times
        fields["retryQueueNums"] = retry_queue_nums
        if self.config.v5 or "consumeMessageOrderly" in fields:
            fields["consumeMessageOrderly"] = consume_orderly
        cfg = SubscriptionGroupConfig(fields)
        if cur is None or dict(cur.fields) != fields:
            self.groups[group] = cfg
            self._persist_groups()
        return cfg

    def _group(self, group: str) -> SubscriptionGroupConfig:
        cfg = self.groups.get(group)
        if cfg is None:  # autoCreateSubscriptionGroup=true
            cfg = self.create_group(group)
        return cfg

    # -- the write path -----------------------------------------------------------------------

    def put(self, msg: Message) -> PutResult:
        """Put one message (``SendMessageProcessor`` + ``DefaultMessageStore#putMessage``)."""
        if self._closed:
            self._check_open()
        tc = self.topics.get(msg.topic) or self.create_topic(msg.topic)
        qid = msg.queue_id
        if qid is None:
            n = self._rr.get(msg.topic, -1) + 1
            self._rr[msg.topic] = n
            qid = n % max(1, tc.write_queue_nums)
        elif qid < 0 or (qid >= tc.write_queue_nums and msg.topic != B.SCHEDULE_TOPIC):
            raise RefStoreError(
                f"queue {qid} of topic {msg.topic} does not exist "
                f"(writeQueueNums {tc.write_queue_nums})"
            )
        props: dict[str, str] = dict(msg.properties)
        if _UNIQ not in props:
            uniq = self.uniq
            t, c = uniq.next_parts()
            props[_UNIQ] = uniq.fix_string + t + c
        if self._cluster:
            props[B.PROPERTY_CLUSTER] = self._cluster
        now = self.clock()
        born = _DEFAULT_BORN
        if msg.born_host:
            born = self._born_hosts.get(msg.born_host) or HostPort.parse(msg.born_host)
            if len(self._born_hosts) < 1024:
                self._born_hosts[msg.born_host] = born
        return self._put_inner(
            msg.topic, qid, msg.body, props, msg.flag, msg.sys_flag,
            msg.born_timestamp if msg.born_timestamp is not None else now, born,
            msg.reconsume_times, now, True, 0,
        )

    def put_batch(
        self,
        msgs: Sequence[Message],
        *,
        queue_id: int | None = None,
        batch_properties: Iterable[tuple[str, str]] = (("WAIT", "true"),),
    ) -> list[PutResult]:
        """A client ``MessageBatch`` (one topic, one queue), as 4.9.7 stores it.

        Every message becomes its own record, written contiguously (never across a file end);
        a record's properties are the message's own string + ``\x02`` + the batch message's
        properties (``WAIT`` and the broker's ``CLUSTER``), hence ``WAIT`` twice, as the real
        stores show (``CommitLog.MessageExtBatchEncoder``). Delayed batches are refused
        (MESSAGE_ILLEGAL), like RocketMQ.
        """
        self._check_open()
        if not msgs:
            return []
        topic = msgs[0].topic
        if any(m.topic != topic for m in msgs):
            raise RefStoreError("a batch holds messages of one topic")
        tc = self.topics.get(topic) or self.create_topic(topic)
        qid = queue_id if queue_id is not None else msgs[0].queue_id
        if qid is None:
            n = self._rr.get(topic, -1) + 1
            self._rr[topic] = n
            qid = n % max(1, tc.write_queue_nums)
        elif qid < 0 or qid >= tc.write_queue_nums:
            raise RefStoreError(f"queue {qid} of topic {topic} does not exist")
        bprops = dict(batch_properties)
        if self._cluster:
            bprops[B.PROPERTY_CLUSTER] = self._cluster
        batch_raw = self._encode_props(bprops)
        now = self.clock()
        topic_hdr, topic_len, magic = self._topic_header(topic)
        records = []
        total = 0
        for m in msgs:
            props = dict(m.properties)
            if B.delay_level_of(props) > 0:
                raise RefStoreError("MessageBatch does not support delayed messages")
            if B.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in props:
                props[B.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self.uniq.create()
            own = self._encode_props(props)
            sep = "\x02" if own and batch_raw and not own.endswith("\x02") else ""
            raw = own + sep + batch_raw
            props_b = raw.encode("utf-8")
            born = HostPort.parse(m.born_host) if m.born_host else _DEFAULT_BORN
            born_ip = packed_ip(born)
            sf = (m.sys_flag | 0x10) if len(born_ip) == 16 else (m.sys_flag & ~0x10)
            sf = (sf | 0x20) if self._store_v6 else (sf & ~0x20)
            size = record_size(sf, len(m.body), topic_len, len(props_b))
            records.append((m, raw, props_b, born, born_ip, sf, size))
            total += size
        cl = self._commitlog
        mf, pos = cl.reserve(total)
        out: list[PutResult] = []
        sizes: list[tuple[int, int]] = []
        key = (topic, qid)
        for m, raw, props_b, born, born_ip, sf, size in records:
            phys = mf.file_from_offset + pos
            qoff = self._queue_table.get(key, 0)
            born_ts = m.born_timestamp if m.born_timestamp is not None else now
            pack_record_into(
                mf.mm, pos, size, magic, qid, m.flag, qoff, phys, sf, born_ts, born_ip,
                born.port, now, self._store_ip, self._store_port, m.reconsume_times, 0,
                m.body, topic_hdr, props_b, False, False,
            )
            sizes.append((pos, size))
            cl.write_pos = phys + size
            self._last_record = phys
            self._queue_table[key] = qoff + 1
            props = parse_properties(raw)
            self._dispatch_fast(
                topic, qid, qoff, phys, size, self._tags_code(topic, props, now), props, now,
                m.sys_flag & TRANSACTION_ROLLBACK_TYPE, False,
            )
            out.append(PutResult(
                phys, size, topic, qid, qoff, now, f"{self._msg_id_prefix}{phys:016X}",
                props.get(B.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            ))
            pos += size
        # the batch's commit point: TOTALSIZE fields last to first, so a kill anywhere before
        # the first one leaves no record of the batch (recovery cuts it and its CQ units)
        for p, size in reversed(sizes):
            write_total_size(mf.mm, p, size)
        self._cp_ts = now
        if self._cp_mf is not None:
            _CP3.pack_into(self._cp_mf.mm, 0, now, now, self._index_ts)
        return out

    def _encode_props(self, props: Mapping[str, str]) -> str:
        """``messageProperties2String`` of a map filled in ``props``' order (Java order)."""
        keys = tuple(props)
        ordered = self._prop_orders.get(keys)
        if ordered is None:
            order = hashmap_key_order(keys, self._props_capacity)
            ordered = tuple(keys[i] for i in order)
            if len(self._prop_orders) > 10_000:
                self._prop_orders.clear()
            self._prop_orders[keys] = ordered
        text = "\x02".join([k + "\x01" + props[k] for k in ordered])  # encode_properties
        return text + "\x02" if self._trailing_sep and text else text

    def _topic_header(self, topic: str) -> tuple[bytes, int, int]:
        hit = self._topic_hdrs.get(topic)
        if hit is None:
            tb = topic.encode("utf-8")
            if len(tb) > 32767:
                raise RefStoreError(f"topic of {len(tb)} bytes is too long")
            hit = (topic_header(tb), len(tb), magic_for(len(tb)))
            self._topic_hdrs[topic] = hit
        return hit

    def _put_inner(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        props: dict[str, str],
        flag: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: HostPort,
        reconsume_times: int,
        store_timestamp: int,
        schedule: bool = True,
        prepared_transaction_offset: int = 0,
    ) -> PutResult:
        tran = sys_flag & TRANSACTION_ROLLBACK_TYPE
        normal = tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE
        if (
            schedule
            and normal
            and B.PROPERTY_DELAY_TIME_LEVEL in props
            and B.delay_level_of(props) > 0
        ):
            topic, queue_id = B.rewrite_for_schedule(
                props, topic=topic, queue_id=queue_id, max_delay_level=self.max_delay_level
            )
        if _CRC_KEY in props:  # a copy of a 5.x record: its CRC belongs to the old record
            del props[_CRC_KEY]
        props_b = self._encode_props(props).encode("utf-8")
        if self._prop_crc:
            props_b += _CRC_PLACEHOLDER
        if len(props_b) > 32767:
            raise RefStoreError(f"properties of {len(props_b)} bytes exceed 32767")
        if len(body) > self._max_body:
            raise RefStoreError(
                f"message body of {len(body)} bytes exceeds maxMessageSize {self._max_body}"
            )
        topic_hdr, topic_len, magic = self._topic_header(topic)
        born_ip = packed_ip(born_host)
        sf = (sys_flag | 0x10) if len(born_ip) == 16 else (sys_flag & ~0x10)
        sf = (sf | 0x20) if self._store_v6 else (sf & ~0x20)
        size = record_size(sf, len(body), topic_len, len(props_b))
        key = (topic, queue_id)
        queue_offset = self._queue_table.get(key, 0) if normal else 0
        cl = self._commitlog
        mf, pos = cl.reserve(size)
        phys = mf.file_from_offset + pos
        pack_record_into(
            mf.mm, pos, size, magic, queue_id, flag, queue_offset, phys, sf,
            born_timestamp, born_ip, born_host.port, store_timestamp, self._store_ip,
            self._store_port, reconsume_times, prepared_transaction_offset, body,
            topic_hdr, props_b, self._prop_crc,
        )
        cl.write_pos = phys + size
        self._last_record = phys
        if normal:
            self._queue_table[key] = queue_offset + 1
        tags_code = self._tags_code(topic, props, store_timestamp)
        self._dispatch_fast(
            topic, queue_id, queue_offset, phys, size, tags_code, props, store_timestamp, tran,
            False,
        )
        self._cp_ts = store_timestamp
        if self._cp_mf is not None:
            _CP3.pack_into(
                self._cp_mf.mm, 0, store_timestamp, store_timestamp, self._index_ts,
            )
        return PutResult(
            phys, size, topic, queue_id, queue_offset, store_timestamp,
            f"{self._msg_id_prefix}{phys:016X}",
            props.get(B.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        )

    # -- dispatch (CommitLogDispatcherBuildConsumeQueue / BuildIndex) ---------------------------

    def _cq(self, topic: str, queue_id: int) -> ConsumeQueueFiles:
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            cq = ConsumeQueueFiles(
                self.root / "consumequeue" / topic / str(queue_id), self.config.cq_entries_per_file
            )
            self._cqs[(topic, queue_id)] = cq
        return cq

    def _tags_code(self, topic: str, props: Mapping[str, str], store_timestamp: int) -> int:
        if topic == B.SCHEDULE_TOPIC:
            t = props.get(B.PROPERTY_DELAY_TIME_LEVEL)
            if t is not None:
                level = min(int(t), self.max_delay_level)
                if level > 0:
                    return B.compute_deliver_timestamp(self._delay_table, level, store_timestamp)
        return self._hashes.tags_code(props.get(B.PROPERTY_TAGS))

    def _dispatch(self, msg: CommitLogMessage, *, recovering: bool) -> None:
        props = msg.properties
        self._dispatch_fast(
            msg.topic, msg.queue_id, msg.queue_offset, msg.physical_offset, msg.total_size,
            self._tags_code(msg.topic, props, msg.store_timestamp), props, msg.store_timestamp,
            msg.sys_flag & TRANSACTION_ROLLBACK_TYPE, recovering,
        )

    def _dispatch_fast(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        phys: int,
        size: int,
        tags_code: int,
        props: Mapping[str, str],
        store_timestamp: int,
        tran: int,
        recovering: bool,
    ) -> None:
        if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
            cq = self._cqs.get((topic, queue_id)) or self._cq(topic, queue_id)
            if not recovering or queue_offset >= cq.max_offset:
                cq.put(queue_offset, phys, size, tags_code)
                if recovering:
                    key = (topic, queue_id)
                    self._queue_table[key] = max(self._queue_table.get(key, 0), queue_offset + 1)
        if not self._index_enable or tran == TRANSACTION_ROLLBACK_TYPE:
            return
        keys: list[str] = []
        uniq = props.get(_UNIQ)
        if uniq is not None:
            keys.append(uniq)
        kv = props.get(B.PROPERTY_KEYS)
        if kv:
            keys.extend(k for k in kv.split(" ") if k)
        if not keys:
            return
        ix = self._index
        if recovering and ix is not None:
            if phys < ix.end_phy_offset:
                return
            if phys == ix.end_phy_offset and ix.index_count > 1:
                have = ix.keys_hashes_at(phys)
                if self._prev_index is not None and len(have) == ix.index_count - 1:
                    have += self._prev_index.keys_hashes_at(phys)
                missing: list[str] = []
                for k in keys:
                    h = self._hashes.index_hash(topic, k)
                    if h in have:
                        have.remove(h)
                    else:
                        missing.append(k)
                keys = missing
        pre = self._topic_pre.get(topic)
        if pre is None:
            pre = self._topic_pre[topic] = java_hash_unsigned(topic + "#")
        for k in keys:
            self._ix_pre.append(pre)
            self._ix_key.append(k)
            self._ix_off.append(phys)
            self._ix_ts.append(store_timestamp)
        if len(self._ix_key) >= INDEX_BATCH:
            self._flush_index()

    def _flush_index(self) -> None:
        """Write the buffered index keys (``IndexService#buildIndex``, batched like RocketMQ's
        asynchronous dispatch; the checkpoint's indexMsgTimestamp only covers written ones, so
        recovery re-indexes whatever a kill lost). Key hashes are computed vectorised."""
        keys, off, ts = self._ix_key, self._ix_off, self._ix_ts
        if not keys:
            return
        h = index_hashes(self._ix_pre, keys)
        start = 0
        while start < len(h):
            ix = self._index
            if ix is None or ix.index_count >= ix.index_num:
                ix = self._index_file(off[start], ts[start])
            start += ix.put_many(h, off, ts, start)
        self._index_ts = ts[-1]
        self._ix_pre, self._ix_key, self._ix_off, self._ix_ts = [], [], [], []

    def _index_file(self, end_phy: int, end_ts: int) -> IndexFileWriter:
        ix = self._index
        if ix is None or ix.is_full:
            if ix is not None:
                end_phy, end_ts = ix.end_phy_offset, ix.end_timestamp
                if self._prev_index is not None:
                    self._prev_index.close()
                self._prev_index = ix
            ts = self.clock()
            d = self.root / "index"
            name = index_file_name(ts)
            while (d / name).exists():
                ts += 1
                name = index_file_name(ts)
            ix = IndexFileWriter(
                d / name, self.config.index_hash_slots, self.config.index_max_entries,
                create=True, end_phy_offset=end_phy, end_timestamp=end_ts,
            )
            self._index = ix
        return ix

    # -- reading ------------------------------------------------------------------------------

    def read_message(self, commit_log_offset: int) -> CommitLogMessage:
        """``lookMessageByOffset``: the record at a commitlog offset."""
        self._check_open()
        return self._commitlog.read(commit_log_offset)

    def queue_topics(self) -> list[str]:
        """Topics that have consume queues, sorted."""
        return sorted({t for t, _ in self._cqs})

    def queue_ids(self, topic: str) -> list[int]:
        """Queue ids of ``topic`` that have a consume queue."""
        return sorted(q for (t, q) in self._cqs if t == topic)

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Next logical offset of a queue (0 when it has none)."""
        return self._queue_table.get((topic, queue_id), 0)

    def iter_queue(
        self, topic: str, queue_id: int, offset: int = 0
    ) -> Iterator[tuple[int, CommitLogMessage]]:
        """``(queue offset, message)`` from ``offset`` to the end of one queue."""
        self._check_open()
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            return
        for off in range(max(offset, cq.min_offset), cq.max_offset):
            unit = cq.get(off)
            if unit is None:
                break
            yield off, self._commitlog.read(unit[0])

    @property
    def last_store_timestamp(self) -> int:
        """Store time (epoch ms) of the last record written or recovered (0 when empty)."""
        return self._cp_ts

    @property
    def write_position(self) -> int:
        """Absolute commitlog offset where the next record goes."""
        return self._commitlog.write_pos

    # -- schedule service ---------------------------------------------------------------------

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

    # -- consumers ----------------------------------------------------------------------------

    def send_back(
        self,
        group: str,
        commit_log_offset: int,
        *,
        delay_level: int = 0,
        max_reconsume_times: int | None = None,
    ) -> PutResult:
        """``CONSUMER_SEND_MSG_BACK``: a consumer of ``group`` failed the message at
        ``commit_log_offset``; store the retry copy (via the schedule topic) or the DLQ copy.

        ``max_reconsume_times`` is the client's header value (None: the group's retryMaxTimes).
        """
        self._check_open()
        cfg = self._group(group)
        ext = self._commitlog.read(commit_log_offset)
        props = parse_properties(ext.properties_raw)
        max_times = cfg.retry_max_times if max_reconsume_times is None else max_reconsume_times
        decision = B.apply_send_back(
            props, topic=ext.topic, group=group, reconsume_times=ext.reconsume_times,
            delay_level=delay_level, max_reconsume_times=max_times,
            offset_msg_id=ext.offset_msg_id,
        )
        if decision.to_dlq:
            self.create_topic(decision.topic, B.DLQ_NUMS_PER_GROUP, perm=6)
            qid = self._rnd.randrange(99999999) % B.DLQ_NUMS_PER_GROUP
        else:
            rq = max(1, cfg.retry_queue_nums)
            self.create_topic(decision.topic, rq, perm=6)
            qid = self._rnd.randrange(99999999) % rq
        now = self.clock()
        return self._put_inner(
            decision.topic, qid, ext.body, props, flag=ext.flag, sys_flag=ext.sys_flag & ~0x30,
            born_timestamp=ext.born_timestamp, born_host=ext.born_host,
            reconsume_times=ext.reconsume_times + 1, store_timestamp=now,
        )

    def send_back_orderly(
        self,
        group: str,
        commit_log_offset: int,
        *,
        max_reconsume_times: int | None = None,
        consume_start_time: int | None = None,
        client_host: str = "127.0.0.1:50001",
    ) -> PutResult:
        """The orderly consumer's path: after its own local retries reach the max, the client
        re-sends the message to ``%RETRY%<group>`` (``ConsumeMessageOrderlyService
        #sendMessageBack``) and the broker dead-letters it when ``reconsumeTimes >=
        maxReconsumeTimes`` (``SendMessageProcessor#handleRetryAndDLQ``).

        As the Java client does: the new message takes the consumed message's property map
        (which the pull added MIN_OFFSET/MAX_OFFSET and the orderly service CONSUME_START_TIME
        to), RETRY_TOPIC, RECONSUME_TIME, MAX_RECONSUME_TIMES and DELAY = 3 + reconsumeTimes;
        it is stored with the consumed reconsumeTimes (not + 1), born at the client. The body
        and compression flag are kept as stored (the Java client would re-compress bodies over
        4 KiB itself).
        """
        self._check_open()
        cfg = self._group(group)
        ext = self._commitlog.read(commit_log_offset)
        props = parse_properties(ext.properties_raw)
        cq = self._cqs.get((ext.topic, ext.queue_id))
        props["MIN_OFFSET"] = str(cq.min_offset if cq else 0)
        props["MAX_OFFSET"] = str(cq.max_offset if cq else 0)
        now = self.clock()
        props["CONSUME_START_TIME"] = str(consume_start_time if consume_start_time else now)
        topic = ext.topic
        if topic == B.retry_topic(group) and B.PROPERTY_RETRY_TOPIC in props:
            topic = props[B.PROPERTY_RETRY_TOPIC]  # resetRetryAndNamespace
        max_times = cfg.retry_max_times if max_reconsume_times is None else max_reconsume_times
        rt = ext.reconsume_times
        props[B.PROPERTY_RECONSUME_TIME] = str(rt)  # checkReconsumeTimes
        props[B.PROPERTY_RETRY_TOPIC] = topic
        props[B.PROPERTY_MAX_RECONSUME_TIMES] = str(max_times)
        props.pop("TRAN_MSG", None)
        props[B.PROPERTY_DELAY_TIME_LEVEL] = str(3 + rt)
        # the producer sends messageProperties2String(map); the broker decodes a fresh map
        wire = parse_properties(self._encode_props(props))
        if self._cluster:
            wire[B.PROPERTY_CLUSTER] = self._cluster
        retry = B.retry_topic(group)
        if rt >= max_times:
            new_topic = B.dlq_topic(group)
            self.create_topic(new_topic, B.DLQ_NUMS_PER_GROUP, perm=6)
            qid = self._rnd.randrange(99999999) % B.DLQ_NUMS_PER_GROUP
            wire[B.PROPERTY_DELAY_TIME_LEVEL] = "0"
        else:
            new_topic = retry
            tc = self.create_topic(retry, max(1, cfg.retry_queue_nums), perm=6)
            qid = self._rnd.randrange(max(1, tc.write_queue_nums))
        born = HostPort.parse(client_host)
        return self._put_inner(
            new_topic, qid, ext.body, wire, ext.flag, ext.sys_flag & ~0x30, now, born, rt, now,
        )

    def get_consumer_offset(self, group: str, topic: str, queue_id: int) -> int:
        """Committed offset of a group on a queue (-1 when none)."""
        return self.consumer_offsets.get(f"{topic}@{group}", {}).get(queue_id, -1)

    def commit_offset(
        self, group: str, topic: str, queue_id: int, offset: int, *, persist: bool = False
    ) -> None:
        """``ConsumerOffsetManager#commitOffset`` (persisted on flush/close, or now)."""
        self._check_open()
        self.consumer_offsets.setdefault(f"{topic}@{group}", {})[queue_id] = offset
        self._offsets_dirty = True
        if persist:
            self._persist_consumer_offsets()

    def pull(
        self,
        group: str,
        topic: str,
        queue_id: int,
        *,
        offset: int | None = None,
        max_nums: int = 32,
    ) -> PullResult:
        """``PULL_MESSAGE``: up to ``max_nums`` messages from ``offset`` (default: the group's
        committed offset, else the queue's min offset). Does not commit."""
        self._check_open()
        cq = self._cqs.get((topic, queue_id))
        max_off = cq.max_offset if cq else 0
        if offset is None:
            offset = self.get_consumer_offset(group, topic, queue_id)
            if offset < 0:
                offset = cq.min_offset if cq else 0
        msgs: list[CommitLogMessage] = []
        nxt = offset
        if cq is not None:
            for off, m in self.iter_queue(topic, queue_id, offset):
                if len(msgs) >= max_nums:
                    break
                msgs.append(m)
                nxt = off + 1
        return PullResult(topic, queue_id, offset, nxt, max_off, msgs)

    def consume(
        self,
        group: str,
        topic: str,
        handler: Callable[[CommitLogMessage], bool | int],
        *,
        max_nums: int | None = None,
        include_retry: bool = True,
    ) -> dict[str, int]:
        """Run a push-style consumer once over everything available.

        ``handler`` returns True (CONSUME_SUCCESS), False (RECONSUME_LATER: send back with level
        0) or an int (send back with that delay level; negative = straight to the DLQ). Offsets
        are committed. Returns counts: ``ok``, ``retried``, ``dlq``.
        """
        self._group(group)
        counts = {"ok": 0, "retried": 0, "dlq": 0}
        topics = [topic] + ([B.retry_topic(group)] if include_retry else [])
        done = 0
        for t in topics:
            for qid in self.queue_ids(t):
                start = self.get_consumer_offset(group, t, qid)
                for _, m in self.iter_queue(t, qid, max(start, 0)):  # streaming
                    if max_nums is not None and done >= max_nums:
                        break
                    verdict = handler(m)
                    if verdict is True:
                        counts["ok"] += 1
                    else:
                        level = 0 if verdict is False else int(verdict)
                        r = self.send_back(group, m.physical_offset, delay_level=level)
                        to_dlq = r.topic.startswith(B.DLQ_GROUP_TOPIC_PREFIX)
                        counts["dlq" if to_dlq else "retried"] += 1
                    done += 1
                    self.commit_offset(group, t, qid, m.queue_offset + 1)
        return counts



_DEFAULT_BORN = HostPort("127.0.0.1", 50000)
_UNIQ = B.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_CRC_PLACEHOLDER = CRC32_PLACEHOLDER.encode("ascii")
_CRC_KEY = "__CRC32#"
