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

A store is composed of parts, each one responsibility: the lock (:mod:`.lock`), the config
files (:mod:`.configs`), the consume queues and dispatch (:mod:`.dispatch`), the index
(:mod:`.index`), the put path (:mod:`.put`), the schedule service (:mod:`.schedule`), recovery
(:mod:`.recovery`) and the consumer side (:mod:`.consumer`). :class:`RefStore` builds them at
open and is the one public face over them.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.config import SubscriptionGroupConfig, TopicConfig
from mqtool.formats.config.consumer_offset import split_offset_key
from mqtool.formats.errors import Finding, environment, failed_path, usage
from mqtool.formats.store_dirs import special_parts
from mqtool.refstore import redelivery
from mqtool.refstore.configs import BrokerConfigs
from mqtool.refstore.consumer import Consumers
from mqtool.refstore.dispatch import ConsumeQueues
from mqtool.refstore.index import IndexBuilder
from mqtool.refstore.key_hashes import JavaHashCache
from mqtool.refstore.lock import StoreLock
from mqtool.refstore.logfiles import CommitLogFiles
from mqtool.refstore.mapped import CheckpointFile, PendingFlush, RefStoreError
from mqtool.refstore.persist import atomic_write, infer_config
from mqtool.refstore.put import RecordWriter
from mqtool.refstore.recovery import Recovery
from mqtool.refstore.schedule import ScheduleService
from mqtool.refstore.uniqkey import UniqKeyGenerator
from mqtool.refstore.values import (
    BatchItem,
    ManualClock,
    Message,
    PullResult,
    PutResult,
    StoreConfig,
    StoreLockedError,
    system_clock,
)

__all__ = [  # the public API (value types re-exported from mqtool.refstore.values)
    "BatchItem",
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

CONFIG_FILE = "mqtool-refstore.json"  # our own settings, beside the broker's config files



def refuse_special(root: Path) -> None:
    """A usage error for a store with 5.x options this engine does not write
    (:func:`mqtool.formats.store_dirs.special_parts`: RocksDB queues or metadata, DLedger, batch
    or LMQ queues, CQ ext, compacted topics): a broker with them keeps rules beyond the plain
    commitlog and consume-queue files written here, and may not load what it would leave."""
    special = special_parts(root)
    if special:
        raise usage(RefStoreError(
            f"{root}: a store with {'; '.join(special.values())}: mqtool writes only plain "
            "commitlog and consume-queue files, which a broker with these options may not "
            "load; nothing was written"))

class RefStore:
    """A writable RocketMQ store with the broker's delay, retry and DLQ behaviour.

    Use :meth:`open` (or ``with RefStore.open(root) as s:``). Not thread-safe: one writer.
    """

    # the parts, made when the store is opened (_load)
    commitlog: CommitLogFiles
    configs: BrokerConfigs
    index: IndexBuilder
    queues: ConsumeQueues
    checkpoint: CheckpointFile
    writer: RecordWriter
    schedule: ScheduleService
    consumers: Consumers
    _recovery: Recovery

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
        self._lock = StoreLock(root)
        self._delay_table = redelivery.parse_delay_levels(config.message_delay_level)
        self.max_delay_level = max(self._delay_table)
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
        refuse_special(rootp)
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
            store._lock.acquire()
        except OSError as e:
            raise environment(RefStoreError(
                f"{rootp}: cannot open the lock file: {e.strerror}")) from e
        try:
            store._load()
        except OSError as e:
            store._lock.release(abort_file=True)
            where = failed_path(e)
            raise environment(RefStoreError(  # a disk that is full, read-only, refused
                f"{rootp}: {e.strerror or e}" + (f": {where}" if where else "")
            )) from e
        except BaseException:
            store._lock.release(abort_file=True)
            raise
        return store

    def __enter__(self) -> RefStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _load(self) -> None:
        root, config, clock = self.root, self.config, self.clock
        cfgdir = root / "config"
        cfgdir.mkdir(exist_ok=True)
        atomic_write(cfgdir / CONFIG_FILE, json.dumps(config.to_json(), indent=1), bak=False)
        abort = root / "abort"
        self.recovered_abnormally = abort.exists()
        abort.touch()
        hashes = JavaHashCache()
        self.commitlog = CommitLogFiles(root / "commitlog", config.commitlog_file_size)
        self.index = IndexBuilder(root, config, clock, hashes)
        self.queues = ConsumeQueues(root, config, self._delay_table, hashes, self.index)
        self.queues.open_existing()
        self.index.load()
        self.checkpoint = CheckpointFile(root / "checkpoint")
        self.configs = BrokerConfigs(root, config, clock)
        self.configs.load()
        self.writer = RecordWriter(
            config, clock, self.uniq, self._rnd, self.commitlog, self.configs, self.queues,
            self.checkpoint,
        )
        self.schedule = ScheduleService(
            root, config, clock, self._delay_table, self.configs, self.queues, self.writer,
            self.commitlog,
        )
        self.schedule.load_progress()
        self.consumers = Consumers(
            config, clock, self.commitlog, self.configs, self.queues, self.writer
        )
        self._recovery = Recovery(
            root, config, abnormal=self.recovered_abnormally, commitlog=self.commitlog,
            queues=self.queues, index=self.index, checkpoint=self.checkpoint,
            configs=self.configs, schedule=self.schedule, writer=self.writer,
        )
        self._closed = False
        self._recovery.run()

    def close(self) -> None:
        """Flush, persist configs, write the checkpoint, remove ``abort``, unlock."""
        if self._closed:
            return
        self.flush()
        self._recovery.save_clean_state()
        self.commitlog.close()
        self.queues.close()
        self.index.close()
        self.checkpoint.close()
        self.schedule.close()
        self._closed = True
        self._lock.release(abort_file=False)

    def flush(self) -> None:
        """Make the data files durable, then write the checkpoint and the dirty offsets."""
        pending = self.flush_begin()
        pending.sync()
        self.flush_end(pending)

    def flush_begin(self, *, dup: bool = False) -> PendingFlush:
        """:meth:`flush`'s first step: the buffered index keys written, and what is to be made
        durable as of now. With ``dup``, its :meth:`~PendingFlush.sync` may run on another
        thread while puts go on; :meth:`flush_end` follows it on this one."""
        self.check_open()
        self.index.write_buffered()
        files = [*self.commitlog.flush_files(), *self.queues.flush_files(),
                 *self.index.flush_files()]
        return PendingFlush(files, self.checkpoint.ts, self.index.written_ts, dup=dup)

    def flush_end(self, pending: PendingFlush) -> None:
        """:meth:`flush`'s last step, once ``pending`` is synced: the checkpoint, claiming what
        was synced (not the puts since), and the dirty offsets."""
        self.check_open()
        self.checkpoint.write(pending.index_ts, pending.ts)
        self.checkpoint.flush()
        if self.configs.offsets_dirty:
            self.configs.persist_consumer_offsets()

    def check_open(self) -> None:
        """:class:`RefStoreError` when the store is closed."""
        if self._closed:
            raise RefStoreError(f"{self.root}: store is closed")

    # -- the broker's tables --------------------------------------------------------------------

    @property
    def topics(self) -> dict[str, TopicConfig]:
        """``topics.json``'s table."""
        return self.configs.topics

    @property
    def groups(self) -> dict[str, SubscriptionGroupConfig]:
        """``subscriptionGroup.json``'s table."""
        return self.configs.groups

    @property
    def delay_offsets(self) -> dict[int, int]:
        """``delayOffset.json``'s table: delay level -> next schedule queue offset."""
        return self.configs.delay_offsets

    @property
    def consumer_offsets(self) -> dict[str, dict[int, int]]:
        """``consumerOffset.json``'s table: ``topic@group`` -> queue id -> offset."""
        return self.configs.consumer_offsets

    @property
    def config_findings(self) -> list[Finding]:
        """What went wrong loading the config files (a ``.bak`` used, a file unreadable)."""
        return self.configs.findings

    @property
    def last_store_timestamp(self) -> int:
        """Store time (epoch ms) of the last record written or recovered (0 when empty)."""
        return self.checkpoint.ts

    @property
    def write_position(self) -> int:
        """Absolute commitlog offset where the next record goes."""
        return self.commitlog.write_pos

    def create_topic(
        self, topic: str, queue_nums: int | None = None, *, perm: int = 6, persist: bool = True
    ) -> TopicConfig:
        """Create (or return) a topic config as ``TopicConfigManager`` does; RefStoreError for
        a name the store cannot hold (:func:`~mqtool.formats.rules.store_name_refusal`)."""
        self.check_open()
        return self.configs.create_topic(topic, queue_nums, perm=perm, persist=persist)

    def delete_topic(self, topic: str) -> None:
        """``deleteTopic`` as the broker does it: the topic's config removed (persisted) and its
        consume queues deleted; 5.3.3 also removes the consumer offsets on it. Its records stay
        in the commitlog and the index."""
        self.check_open()
        if self.configs.topics.pop(topic, None) is not None:
            self.configs.persist_topics()
        self.queues.destroy_topic(topic)
        if self.config.v5:
            offsets = self.configs.consumer_offsets
            gone = [k for k in offsets if split_offset_key(k)[0] == topic]
            for key in gone:
                del offsets[key]
            if gone:
                self.configs.persist_consumer_offsets()

    def create_group(
        self, group: str, *, retry_max_times: int | None = None, retry_queue_nums: int = 1,
        consume_orderly: bool = False,
    ) -> SubscriptionGroupConfig:
        """Create or update a consumer group (``subscriptionGroup.json``); RefStoreError for a
        name the store cannot hold."""
        self.check_open()
        return self.configs.create_group(
            group, retry_max_times=retry_max_times, retry_queue_nums=retry_queue_nums,
            consume_orderly=consume_orderly,
        )

    # -- puts and the schedule service ----------------------------------------------------------

    def put(self, msg: Message, *, as_sent: bool = False) -> PutResult:
        """Put one message (``SendMessageProcessor`` + ``DefaultMessageStore#putMessage``).
        A message without a UNIQ_KEY gets one, as a client gives it; ``as_sent`` stores its
        properties as a client sent them to a broker, which adds none."""
        if self._closed:
            self.check_open()
        return self.writer.put(msg, as_sent=as_sent)

    def put_batch(
        self,
        msgs: Sequence[Message],
        *,
        queue_id: int | None = None,
        batch_properties: Iterable[tuple[str, str]] = (("WAIT", "true"),),
    ) -> list[PutResult]:
        """A client ``MessageBatch`` (one topic, one queue): see :meth:`.RecordWriter.put_batch`."""
        self.check_open()
        return self.writer.put_batch(msgs, queue_id=queue_id, batch_properties=batch_properties)

    def put_batch_items(
        self, topic: str, queue_id: int | None, items: Sequence[BatchItem],
        batch_properties: Iterable[tuple[str, str]],
    ) -> list[PutResult]:
        """:meth:`put_batch` of messages as :class:`.BatchItem`: see
        :meth:`.RecordWriter.put_batch_items`."""
        self.check_open()
        return self.writer.put_batch_items(topic, queue_id, items, batch_properties)

    def put_raw_batch(
        self, topic: str, queue_id: int | None, body: bytes, sys_flag: int,
        born_timestamp: int | None, born_host: str | None, reconsume_times: int,
        batch_properties: Iterable[tuple[str, str]],
        later: list[Callable[[], None]] | None = None,
    ) -> list[PutResult] | None:
        """A batch body as a client sent it, by the compiled batch encoder, or None; with
        ``later``, its dispatch is left there: see :meth:`.RecordWriter.put_raw_batch`."""
        self.check_open()
        return self.writer.put_raw_batch(topic, queue_id, body, sys_flag, born_timestamp,
                                         born_host, reconsume_times, batch_properties, later)

    def tick(
        self,
        now: int | None = None,
        *,
        levels: Iterable[int] | None = None,
        limit: int | None = None,
    ) -> list[PutResult]:
        """Deliver due delayed messages: see :meth:`.ScheduleService.tick`."""
        self.check_open()
        return self.schedule.tick(now, levels=levels, limit=limit)

    def pending_delayed(self) -> dict[int, int]:
        """Level -> number of messages not yet delivered."""
        return self.schedule.pending_delayed()

    def next_due(self) -> int | None:
        """Earliest deliver time (epoch ms) of a pending delayed message, None without any."""
        return self.schedule.next_due()

    # -- reads and consumers --------------------------------------------------------------------

    def read_message(self, commit_log_offset: int) -> CommitLogMessage:
        """``lookMessageByOffset``: the record at a commitlog offset."""
        self.check_open()
        return self.consumers.read_message(commit_log_offset)

    def queue_topics(self) -> list[str]:
        """Topics that have consume queues, sorted."""
        return self.consumers.queue_topics()

    def queue_ids(self, topic: str) -> list[int]:
        """Queue ids of ``topic`` that have a consume queue."""
        return self.consumers.queue_ids(topic)

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Next logical offset of a queue (0 when it has none)."""
        return self.consumers.max_offset(topic, queue_id)

    def iter_queue(
        self, topic: str, queue_id: int, offset: int = 0
    ) -> Iterator[tuple[int, CommitLogMessage]]:
        """``(queue offset, message)`` from ``offset`` to the end of one queue."""
        self.check_open()
        yield from self.consumers.iter_queue(topic, queue_id, offset)

    def queue_units(
        self, topic: str, queue_id: int, offset: int = 0
    ) -> Iterator[tuple[int, int, int, int]]:
        """``(queue offset, commitlog offset, size, tagsCode)`` from ``offset`` to the end of one
        queue: see :meth:`.Consumers.queue_units`."""
        self.check_open()
        yield from self.consumers.queue_units(topic, queue_id, offset)

    def record_bytes(self, commit_log_offset: int, size: int) -> bytes:
        """The stored bytes of the record a unit points at: see
        :meth:`.CommitLogFiles.record_bytes`."""
        self.check_open()
        return self.commitlog.record_bytes(commit_log_offset, size)

    def send_back(
        self,
        group: str,
        commit_log_offset: int,
        *,
        delay_level: int = 0,
        max_reconsume_times: int | None = None,
    ) -> PutResult:
        """``CONSUMER_SEND_MSG_BACK``: see :meth:`.Consumers.send_back`."""
        self.check_open()
        return self.consumers.send_back(
            group, commit_log_offset, delay_level=delay_level,
            max_reconsume_times=max_reconsume_times,
        )

    def send_back_orderly(
        self,
        group: str,
        commit_log_offset: int,
        *,
        max_reconsume_times: int | None = None,
        consume_start_time: int | None = None,
        client_host: str = "127.0.0.1:50001",
        reconsume_times: int | None = None,
        group_locked: bool = True,
    ) -> PutResult:
        """The orderly consumer's send-back: see :meth:`.Consumers.send_back_orderly`."""
        self.check_open()
        return self.consumers.send_back_orderly(
            group, commit_log_offset, max_reconsume_times=max_reconsume_times,
            consume_start_time=consume_start_time, client_host=client_host,
            reconsume_times=reconsume_times, group_locked=group_locked,
        )

    def get_consumer_offset(self, group: str, topic: str, queue_id: int) -> int:
        """Committed offset of a group on a queue (-1 when none)."""
        return self.consumers.get_consumer_offset(group, topic, queue_id)

    def commit_offset(
        self, group: str, topic: str, queue_id: int, offset: int, *, persist: bool = False
    ) -> None:
        """``ConsumerOffsetManager#commitOffset`` (persisted on flush/close, or now)."""
        self.check_open()
        self.consumers.commit_offset(group, topic, queue_id, offset, persist=persist)

    def pull(
        self,
        group: str,
        topic: str,
        queue_id: int,
        *,
        offset: int | None = None,
        max_nums: int = 32,
    ) -> PullResult:
        """``PULL_MESSAGE``: see :meth:`.Consumers.pull`. Does not commit."""
        self.check_open()
        return self.consumers.pull(group, topic, queue_id, offset=offset, max_nums=max_nums)

    def consume(
        self,
        group: str,
        topic: str,
        handler: Callable[[CommitLogMessage], bool | int],
        *,
        max_nums: int | None = None,
        include_retry: bool = True,
    ) -> dict[str, int]:
        """Run a push-style consumer once over everything available: see
        :meth:`.Consumers.consume`."""
        self.check_open()
        return self.consumers.consume(
            group, topic, handler, max_nums=max_nums, include_retry=include_retry
        )
