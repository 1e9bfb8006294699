"""How ``mqtool scan`` cuts store directories into units of work (no pyspark here).

- A commitlog file is cut into byte ranges (``split_size``). A range owns the records that
  *start* inside it; the decoder resynchronises at the range start on the first valid record
  (a record is self-identifying: its PHYSICALOFFSET equals its position) and reads past the
  range end to finish its last record. Records never cross files.
- Every consume-queue file and every index file is a split of its own.
- Splits are packed into partitions of about ``partition_bytes`` each, so that thousands of
  small consume-queue files do not become thousands of Spark tasks; by default one wave of
  tasks over the session's task slots (:func:`partition_size`).

Store roots are found by their layout: a directory with ``commitlog/`` (a broker store root),
or a directory holding such a root as ``store/`` (the fixtures' layout).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mqtool.formats.rules import is_lmq
from mqtool.formats.store_dirs import (
    BATCH_CQ,
    COMMITLOG_DIR,
    CQ_EXT,
    DLEDGER,
    LMQ,
    ROCKSDB_CQ,
    index_files,
    numbered_files,
    queue_dirs,
    special_parts,
)
from mqtool.spark.errors import SparkScanError

DEFAULT_SPLIT_SIZE = 128 * 1024 * 1024
DEFAULT_PARTITION_BYTES = 128 * 1024 * 1024
MAX_PARTITION_BYTES = 1024 * 1024 * 1024


def partition_size(total: int, slots: int) -> int:
    """The partition size for reading ``total`` bytes on ``slots`` task slots: one wave of
    tasks (``total / slots``), at least :data:`DEFAULT_PARTITION_BYTES` and at most
    :data:`MAX_PARTITION_BYTES`. Every task has a fixed cost, so a small store is read in few
    tasks; the cap keeps a large store in many tasks, for a cluster's executors and the
    progress bar."""
    per_slot = -(-max(total, 0) // max(slots, 1))
    return max(DEFAULT_PARTITION_BYTES, min(MAX_PARTITION_BYTES, per_slot))

KIND_COMMITLOG = "commitlog"
KIND_CONSUMEQUEUE = "consumequeue"
KIND_INDEX = "index"


@dataclass(frozen=True, slots=True)
class Split:
    """One unit of decoding work: a byte range of one store file.

    ``name`` is the file's path relative to the store root (``commitlog/000...``), ``path`` the
    absolute path executors open, ``base`` the commitlog offset of the file's first byte (for
    commitlog files) or its first byte's position in the queue (consume-queue files).
    """

    kind: str
    store: str
    path: str
    name: str
    base: int
    start: int
    end: int
    file_size: int
    topic: str = ""
    queue_id: int = -1
    chain: bool = False  # commitlog: a record must start at ``start`` (no resync there)

    @property
    def length(self) -> int:
        return self.end - self.start


def find_store_root(path: str | os.PathLike[str]) -> Path:
    """The broker store root at or directly under ``path`` (as :meth:`Store.open` finds it).

    Raises :class:`mqtool.store.StoreError` when ``path`` is not a store.
    """
    from mqtool.store import Store

    store = Store.open(path)
    try:
        return store.root
    finally:
        store.close()


def commitlog_splits(store: str, root: Path, split_size: int) -> list[Split]:
    """Byte-range splits of every commitlog file of ``root``."""
    out: list[Split] = []
    for f in numbered_files(root / COMMITLOG_DIR, strict=False):
        size = f.stat().st_size
        for start in range(0, max(size, 1), split_size):
            out.append(
                Split(
                    KIND_COMMITLOG, store, str(f.resolve()), f"commitlog/{f.name}",
                    int(f.name), start, min(start + split_size, size), size,
                )
            )
    return out


def consumequeue_splits(
    store: str, root: Path, topics: Collection[str] | None = None
) -> list[Split]:
    """One split per consume-queue file (``consumequeue/<topic>/<queueId>/<offset>``), of every
    topic or of ``topics`` only; LMQ queues (``%LMQ%<name>``) are left out."""
    out: list[Split] = []
    for topic, qid, queue_dir in queue_dirs(root / "consumequeue", topics=topics):
        if is_lmq(topic):  # not read: see :func:`unread_by_scan`
            continue
        for f in numbered_files(queue_dir, strict=False):
            size = f.stat().st_size
            out.append(
                Split(
                    KIND_CONSUMEQUEUE, store, str(f.resolve()),
                    f"consumequeue/{topic}/{queue_dir.name}/{f.name}",
                    int(f.name), 0, size, size, topic, qid,
                )
            )
    return out


#: The 5.x store parts (:func:`mqtool.formats.store_dirs.special_parts`) whose data the scan's
#: readers do not read (a DLedger commitlog, queues not in consumequeue/ files): a scan of a
#: store with one would report every message it holds as damage, so it is refused.
NOT_SCANNED = (ROCKSDB_CQ, DLEDGER, BATCH_CQ, CQ_EXT)


def unscannable(root: Path) -> list[str]:
    """What a store root holds that the scan cannot read (:data:`NOT_SCANNED`); a RocksDB
    consume queue with the file queues written beside it (``rocksdbCQDoubleWriteEnable``) is
    read from the files."""
    parts = special_parts(root)
    if ROCKSDB_CQ in parts and queue_dirs(root / "consumequeue"):
        del parts[ROCKSDB_CQ]
    return [what for key, what in parts.items() if key in NOT_SCANNED]


def unread_by_scan(root: Path) -> list[str]:
    """What the scan leaves out of a store it reads, to be said: LMQ queues (their units
    point at records of other topics, a rule of ``verify``'s) and the RocksDB consume queue
    of a store that writes the file queues beside it (the scan reads the files)."""
    parts = special_parts(root)
    out = []
    if LMQ in parts:
        out.append("LMQ queues (consumequeue/%LMQ%*, enableLmq) are not read by scan; "
                   "verify checks them")
    if ROCKSDB_CQ in parts:  # (a store of it alone is refused: unscannable)
        out.append("the RocksDB consume queue (consumequeue/*.sst, rocksdbCQDoubleWriteEnable) "
                   "is not read by scan, the file queues written beside it are; verify "
                   "checks both")
    return out


def index_splits(store: str, root: Path) -> list[Split]:
    """One split per index file (``index/<yyyyMMddHHmmssSSS>``)."""
    out: list[Split] = []
    for f in index_files(root / "index"):
        size = f.stat().st_size
        out.append(Split(KIND_INDEX, store, str(f.resolve()), f"index/{f.name}", 0, 0, size, size))
    return out


def plan_splits(
    stores: Sequence[str], kind: str, *, split_size: int = DEFAULT_SPLIT_SIZE,
    topics: Collection[str] | None = None,
) -> list[Split]:
    """All splits of one ``kind`` over the given store paths, in store and file order
    (consume queues: of ``topics`` only, when given)."""
    out: list[Split] = []
    for store in stores:
        root = find_store_root(store)
        if kind == KIND_COMMITLOG:
            out += commitlog_splits(store, root, split_size)
        elif kind == KIND_CONSUMEQUEUE:
            out += consumequeue_splits(store, root, topics)
        elif kind == KIND_INDEX:
            out += index_splits(store, root)
        else:
            raise SparkScanError(f"unknown split kind {kind!r}")
    return out


def data_end(path: str, size: int) -> int:
    """Where the data of a (possibly sparse) file ends: the end of its last extent that holds
    data (``SEEK_DATA``/``SEEK_HOLE``); ``size`` where the filesystem cannot say."""
    from mqtool.formats.walker import data_extents

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return size
    try:
        end = 0
        for _lo, hi in data_extents(fd, 0, size):
            end = hi
        return end
    finally:
        os.close(fd)


def pack_for(
    planned: Sequence[Split], partition_bytes: int | None, slots: int
) -> list[list[Split]]:
    """:func:`pack` into partitions of ``partition_bytes``, or (None) of
    :func:`partition_size` of the splits' bytes over ``slots`` task slots."""
    if partition_bytes is None:
        partition_bytes = partition_size(sum(s.length for s in planned), slots)
    return pack(planned, partition_bytes)


def pack(
    splits: Iterable[Split], partition_bytes: int = DEFAULT_PARTITION_BYTES
) -> list[list[Split]]:
    """Group consecutive splits into partitions of about ``partition_bytes`` (at least one)."""
    parts: list[list[Split]] = []
    current: list[Split] = []
    size = 0
    for s in splits:
        if current and size + s.length > partition_bytes:
            parts.append(current)
            current, size = [], 0
        current.append(s)
        size += s.length
    if current:
        parts.append(current)
    return parts
