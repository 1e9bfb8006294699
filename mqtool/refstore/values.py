"""Reference-store settings and value types: StoreConfig, ManualClock, Message, BatchItem,
PutResult, PullResult."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from mqtool.formats.commitlog import (
    CommitLogMessage,
)
from mqtool.formats.errors import EXIT_ENVIRONMENT
from mqtool.refstore import redelivery
from mqtool.refstore.mapped import (
    RefStoreError,
)


class StoreLockedError(RefStoreError):
    """The store's ``lock`` file is held by another writer (a running broker or refstore):
    a command it ends exits 3 (environment)."""

    exit_status = EXIT_ENVIRONMENT


# ---------------------------------------------------------------------------------------------
# configuration, clock, messages


@dataclass(frozen=True)
class StoreConfig:
    """Store geometry and broker settings. Defaults are RocketMQ's (``MessageStoreConfig``).

    ``dialect``: ``"4.9.7"`` (property map ``new HashMap<>()``, no trailing ``\\x02``, 4.x config
    JSON) or ``"5.3.3"`` (``HashMap(128)``, trailing ``\\x02``, ``dataVersion`` everywhere).
    """

    commitlog_file_size: int = 1024 * 1024 * 1024
    cq_entries_per_file: int = 300_000
    index_hash_slots: int = 5_000_000
    index_max_entries: int = 5_000_000 * 4
    message_index_enable: bool = True
    message_delay_level: str = redelivery.DEFAULT_MESSAGE_DELAY_LEVEL
    max_message_size: int = 4 * 1024 * 1024
    store_host: str = "127.0.0.1:10911"
    cluster_name: str | None = "DefaultCluster"
    broker_name: str = "broker-a"
    default_queue_nums: int = 4
    default_max_reconsume_times: int = redelivery.DEFAULT_MAX_RECONSUME_TIMES
    dialect: str = "4.9.7"
    fsync_configs: bool = False
    append_prop_crc: bool = False  # 5.2+ enabledAppendPropCRC: a __CRC32# property per record

    def __post_init__(self) -> None:
        if self.dialect not in ("4.9.7", "5.3.3"):
            raise RefStoreError(f"unknown dialect {self.dialect!r} (4.9.7 or 5.3.3)")
        if self.commitlog_file_size < 256:
            raise RefStoreError("commitlog_file_size must be at least 256 bytes")
        if self.cq_entries_per_file < 1 or self.index_hash_slots < 1 or self.index_max_entries < 2:
            raise RefStoreError("consume-queue and index sizes must be positive")
        redelivery.parse_delay_levels(self.message_delay_level)

    @property
    def v5(self) -> bool:
        return self.dialect.startswith("5")

    @property
    def properties_capacity(self) -> int | None:
        """Initial capacity of the property HashMap RocketMQ encodes from."""
        return 128 if self.v5 else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> StoreConfig:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in obj.items() if k in known})


class ManualClock:
    """A clock for tests and replays: epoch ms, moved only by :meth:`set` / :meth:`advance`."""

    def __init__(self, now_ms: int = 1_795_294_972_000) -> None:
        self.now = now_ms

    def __call__(self) -> int:
        return self.now

    def set(self, now_ms: int) -> None:
        self.now = now_ms

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


def system_clock() -> int:
    """Wall-clock epoch ms."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Message:
    """A message to put, as a producer hands it to the broker.

    ``properties`` are the property map's puts *in insertion order* (it decides RocketMQ's byte
    order for colliding keys); use :meth:`create` for the Java client's order. The broker adds
    UNIQ_KEY (when absent, as the client does) and CLUSTER.
    """

    topic: str
    body: bytes = b""
    properties: tuple[tuple[str, str], ...] = ()
    queue_id: int | None = None
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int | None = None
    born_host: str | None = None
    reconsume_times: int = 0

    @classmethod
    def create(
        cls,
        topic: str,
        body: bytes | str = b"",
        *,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        delay_level: int = 0,
        wait_store_msg_ok: bool | None = True,
        uniq_key: str | None = None,
        queue_id: int | None = None,
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp: int | None = None,
        born_host: str | None = None,
    ) -> Message:
        """The puts ``new Message(topic, tags, keys, body)`` + user properties + delay make."""
        pairs: list[tuple[str, str]] = []
        if tags:
            pairs.append((redelivery.PROPERTY_TAGS, tags))
        if keys:
            joined = keys if isinstance(keys, str) else " ".join(keys)
            pairs.append((redelivery.PROPERTY_KEYS, joined))
        if wait_store_msg_ok is not None:
            wait = "true" if wait_store_msg_ok else "false"
            pairs.append((redelivery.PROPERTY_WAIT_STORE_MSG_OK, wait))
        items = properties.items() if isinstance(properties, Mapping) else properties
        pairs.extend((str(k), str(v)) for k, v in items)
        if delay_level:
            pairs.append((redelivery.PROPERTY_DELAY_TIME_LEVEL, str(delay_level)))
        if uniq_key:
            pairs.append((redelivery.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq_key))
        return cls(
            topic, body.encode("utf-8") if isinstance(body, str) else body, tuple(pairs),
            queue_id, flag, sys_flag, born_timestamp, born_host,
        )


class PutResult(NamedTuple):
    """Where a put landed. ``topic``/``queue_id`` are the stored ones (SCHEDULE_TOPIC_XXXX for
    a delayed message); ``msg_id`` is the offsetMsgId. (A NamedTuple: cheap on the hot path.)"""

    physical_offset: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    store_timestamp: int
    msg_id: str
    uniq_key: str | None


class BatchItem(NamedTuple):
    """One message of a client batch as the put path takes it."""

    flag: int
    body: bytes
    props: dict[str, str]
    sys_flag: int
    born_timestamp: int | None
    born_host: str | None
    reconsume_times: int
    raw: str | None = None
    """The properties as the client sent them (``props`` parsed from them), stored as they are
    when their order is the one the store writes, like ``MessageExtBatchEncoder`` copies them."""


@dataclass(frozen=True, slots=True)
class PullResult:
    """Messages of one queue from ``offset``; ``next_offset`` is where the next pull starts."""

    topic: str
    queue_id: int
    offset: int
    next_offset: int
    max_offset: int
    messages: list[CommitLogMessage] = field(default_factory=list)


