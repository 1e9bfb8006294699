"""Where a store's files are: the store root, the files named by a number (commitlog,
consume-queue and timerlog files by the offset of their first byte, index files by a time) and
the consume-queue directories (``<topic>/<queueId>/``).

Every reader and writer of a store finds the root, lists numbered files, index files and queue
directories here; the standard library only, so the write engine and the Spark driver import it
for nothing. A lister's ``others`` gets what is there but is not what it lists (a stray file, a
name that is not a number): a caller that reports findings reports each of them.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from mqtool.formats.rules import is_lmq

COMMITLOG_DIR = "commitlog"
CONSUMEQUEUE_DIR = "consumequeue"
INDEX_DIR = "index"
ROCKSDB_MARKER = "CURRENT"  # every RocksDB directory names its current MANIFEST here


def offset_name(offset: int) -> str:
    """``UtilAll.offset2FileName``: the 20-digit zero-padded offset a file is named by."""
    return f"{offset:020d}"


def holds_commitlog(directory: Path) -> bool:
    """Whether ``directory`` holds a commitlog: ``commitlog/`` or a DLedger
    ``dledger-<id>/data/``."""
    return (directory / COMMITLOG_DIR).is_dir() or any(
        p.is_dir() for p in directory.glob("dledger-*/data"))


def store_root(given: Path) -> Path:
    """The store root ``given`` names: itself, or its ``store/`` when only that holds a
    commitlog (a broker's home directory given for its store)."""
    if not holds_commitlog(given) and holds_commitlog(given / "store"):
        return given / "store"
    return given


def root_above(given: Path) -> Path | None:
    """The store root ``given`` lies inside (``store/commitlog`` given for ``store``), None when
    no parent of it holds a commitlog."""
    return next((p for p in given.resolve().parents if holds_commitlog(p)), None)


def is_rocksdb_dir(path: Path) -> bool:
    """Whether ``path`` holds a RocksDB (rather than ``<topic>/<queueId>/`` directories)."""
    return (path / ROCKSDB_MARKER).is_file() or any(
        p.name.startswith("MANIFEST-") for p in path.iterdir()) if path.is_dir() else False


def is_numbered(name: str, *, strict: bool = True) -> bool:
    """Whether ``name`` is a numbered store file's.

    ``strict``: 20 digits, the offset of its first byte (``UtilAll.offset2FileName``): what a
    reader of a store takes as data, any other name being a stray file it reports. Not strict:
    any name of digits only, as ``MappedFileQueue#load`` parses every name as a number: what the
    write engine opens and appends after, and what a Spark scan splits.
    """
    if strict:
        return len(name) == 20 and name.isdigit()
    return name.isdigit()


def numbered_files(directory: Path, others: list[Path] | None = None, *,
                   strict: bool = True) -> list[Path]:
    """The regular files of ``directory`` named by a number (:func:`is_numbered`, ``strict`` as
    there), in number order; none when it is missing or not a directory. The other regular files
    are added to ``others`` (in name order) when it is given."""
    try:
        entries = sorted(directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    files = [p for p in entries if p.is_file()]
    if others is not None:
        others.extend(p for p in files if not is_numbered(p.name, strict=strict))
    return sorted((p for p in files if is_numbered(p.name, strict=strict)),
                  key=lambda p: int(p.name))


def index_files(directory: Path, others: list[Path] | None = None) -> list[Path]:
    """The index files of ``directory``, oldest first: named by the time they were made
    (``yyyyMMddHHmmssSSS``), any name of digits (:func:`numbered_files`, not strict); the other
    regular files are added to ``others`` when it is given."""
    return numbered_files(directory, others, strict=False)


def is_queue_id(name: str) -> bool:
    """Whether ``name`` is a consume-queue directory's: a queue id (an integer, in decimal)."""
    digits = name[1:] if name.startswith("-") else name
    return digits.isascii() and digits.isdigit()


def queue_id_dirs(topic_dir: Path, others: list[Path] | None = None) -> list[tuple[int, Path]]:
    """(queue id, directory) of the queue directories of ``topic_dir``, in queue-id order; none
    when it is missing (a topic deleted while the store is read) or not a directory. Whatever
    else is there (a file, a name that is no queue id) is added to ``others`` when given."""
    out: list[tuple[int, Path]] = []
    for q in _entries(topic_dir):
        if is_queue_id(q.name) and q.is_dir():
            out.append((int(q.name), topic_dir / q.name))
        elif others is not None and os.path.exists(q.path):
            others.append(topic_dir / q.name)
    return sorted(out)


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    """The entries of ``directory`` sorted by name (``os.scandir``: a directory's type comes
    with its entry, not from a stat), none when it is missing or not a directory."""
    try:
        with os.scandir(directory) as it:
            return sorted(it, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []


def queue_dirs(base: Path, others: list[Path] | None = None, *,
               topics: Collection[str] | None = None) -> list[tuple[str, int, Path]]:
    """(topic, queue id, directory) of every queue directory ``base/<topic>/<queueId>/`` (of
    ``consumequeue/`` or the batch queues' directory), in topic then queue-id order, of
    ``topics`` only when given; none when ``base`` is missing. A file among the topic
    directories, and what :func:`queue_id_dirs` leaves out, are added to ``others`` when
    given."""
    out: list[tuple[str, int, Path]] = []
    for t in _entries(base):
        if topics is not None and t.name not in topics:
            continue
        if t.is_dir():
            out.extend((t.name, qid, q) for qid, q in queue_id_dirs(base / t.name, others))
        elif others is not None and os.path.exists(t.path):
            others.append(base / t.name)
    return out


BATCH_DIR = "batchconsumequeue"  # StorePathConfigHelper.getStorePathBatchConsumeQueue
COMPACTION_DIR = "compaction"  # CompactionStore.COMPACTION_DIR (5.x compacted topics)

ROCKSDB_CQ, ROCKSDB_META, DLEDGER, BATCH_CQ, LMQ, CQ_EXT, COMPACTED = (
    "rocksdb-cq", "rocksdb-meta", "dledger", "batch-cq", "lmq", "cq-ext", "compacted")
"""The keys of :func:`special_parts`."""


def special_parts(root: Path) -> dict[str, str]:
    """The 5.x store options a store root shows that are not plain commitlog + file queues,
    each (a key above) with what it is and how the store shows it."""
    out = {}
    cq = root / CONSUMEQUEUE_DIR
    if cq.is_dir() and is_rocksdb_dir(cq):
        out[ROCKSDB_CQ] = ("a RocksDB consume queue (consumequeue/ is a RocksDB database, "
                           "storeType=defaultRocksDB)")
    for name in ("topics", "subscriptionGroups", "consumerOffsets"):
        if (root / "config" / name).is_dir():
            out[ROCKSDB_META] = f"RocksDB metadata (config/{name}/)"
            break
    if any(p.is_dir() for p in root.glob("dledger-*/data")):
        out[DLEDGER] = "a DLedger commitlog (dledger-<id>/data/, enableDLegerCommitLog)"
    if (root / BATCH_DIR).is_dir():
        out[BATCH_CQ] = f"batch consume queues ({BATCH_DIR}/, queue.type=BatchCQ)"
    if cq.is_dir() and any(is_lmq(p.name) for p in cq.iterdir()):
        out[LMQ] = "LMQ queues (consumequeue/%LMQ%*, enableLmq)"
    if (root / "consumequeue_ext").is_dir():
        out[CQ_EXT] = "consume-queue ext files (consumequeue_ext/, enableConsumeQueueExt)"
    if _compacted(root):
        out[COMPACTED] = f"compacted topics ({COMPACTION_DIR}/, cleanup.policy=COMPACTION)"
    return out


def _compacted(root: Path) -> bool:
    """Whether the compaction store holds a compacted topic's log or queue: every 5.x broker
    makes ``compaction/`` with its ``position-checkpoint``, topics or none."""
    return any(any(d.iterdir()) for d in (root / COMPACTION_DIR / "compactionLog",
                                          root / COMPACTION_DIR / "compactionCq") if d.is_dir())
