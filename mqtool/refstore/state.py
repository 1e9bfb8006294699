"""The reference store's state: settings, open files and tables, shared by the engine's
parts (:mod:`mqtool.refstore.engine` assembles them)."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from pathlib import Path

from mqtool.formats.checkpoint import Checkpoint
from mqtool.formats.commitlog import (
    HostPort,
    packed_ip,
)
from mqtool.formats.config import (
    SubscriptionGroupConfig,
    TopicConfig,
)
from mqtool.formats.encoder import CRC32_PLACEHOLDER
from mqtool.refstore import broker as B
from mqtool.refstore.fastpath import JavaHashCache
from mqtool.refstore.logfiles import CommitLogFiles
from mqtool.refstore.mapped import (
    ConsumeQueueFiles,
    IndexFileWriter,
    MappedFile,
    RefStoreError,
)
from mqtool.refstore.model import (
    StoreConfig,
)
from mqtool.refstore.uniqkey import UniqKeyGenerator

_CP3 = struct.Struct(">qqq")  # physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp
_I64 = struct.Struct(">q")
PROGRESS_FILE = "mqtool-delay-progress"  # per-level delivery progress, 8 bytes per level
PROGRESS_FILE_SIZE = 4096
INDEX_BATCH = 1024  # index keys buffered before a vectorised write
STATE_FILE = "mqtool-refstore-state.json"  # written on clean close, consumed on open
CONFIG_FILE = "mqtool-refstore.json"  # our own settings, beside the broker's config files
_LOCKED_ROOTS: set[str] = set()  # POSIX locks do not conflict inside one process
_DEFAULT_BORN = HostPort("127.0.0.1", 50000)
_UNIQ = B.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_CRC_PLACEHOLDER = CRC32_PLACEHOLDER.encode("ascii")
_CRC_KEY = "__CRC32#"


class _State:
    """Every attribute of a :class:`~mqtool.refstore.engine.RefStore`, set up once."""

    _commitlog: CommitLogFiles  # set when the store is loaded (RecoveryMixin._load)

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


    def _check_open(self) -> None:
        if self._closed:
            raise RefStoreError(f"{self.root}: store is closed")
