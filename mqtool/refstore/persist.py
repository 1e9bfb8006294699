"""Config-file persistence (fastjson text, .bak, atomic) and settings inference for existing
stores."""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Any

from mqtool.formats.commitlog import CommitLogMessage, parse_message
from mqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE, CqEntry, iter_cq
from mqtool.formats.errors import FormatError
from mqtool.formats.indexfile import IndexReader
from mqtool.formats.rules import delay_written, fmt_delay, schedule_unit_delay
from mqtool.formats.store_dirs import (
    COMMITLOG_DIR,
    CONSUMEQUEUE_DIR,
    INDEX_DIR,
    index_files,
    numbered_files,
    queue_dirs,
    queue_id_dirs,
)
from mqtool.formats.walker import scan_file
from mqtool.refstore import redelivery
from mqtool.refstore.values import StoreConfig


def infer_config(root: str | os.PathLike[str]) -> StoreConfig | None:
    """Settings of an existing store that has no saved refstore settings (e.g. a broker's):
    commitlog file size, consume-queue units per file and index geometry from the files, the
    broker's address from its records, the dialect from the properties' trailing separator.
    None when there is no commitlog to learn from. Delay levels are broker configuration: the
    levels that have messages in SCHEDULE_TOPIC_XXXX are measured (tagsCode - store time), the
    others keep RocketMQ's default.
    """
    rootp = Path(root)
    logs = _commitlog_files(rootp)
    if not logs:
        return None
    sizes = [size for _, _, size in logs if size]
    if not sizes:
        return None
    kw: dict[str, Any] = {"commitlog_file_size": max(set(sizes), key=sizes.count)}
    first = _first_message(logs)
    if first is not None:
        kw["store_host"] = str(first.store_host)
        if first.properties_raw.endswith("\x02"):
            kw["dialect"] = "5.3.3"
        if "__CRC32#\x01" in first.properties_raw:
            kw["append_prop_crc"] = True
    cq_root = rootp / CONSUMEQUEUE_DIR
    cq_sizes = (f.stat().st_size for _, _, q in queue_dirs(cq_root)
                for f in numbered_files(q, strict=False))
    cq_size = next((n for n in cq_sizes if n % CQ_STORE_UNIT_SIZE == 0), None)
    if cq_size is not None:
        kw["cq_entries_per_file"] = cq_size // CQ_STORE_UNIT_SIZE
    geometry = _last_index_geometry(rootp / INDEX_DIR)
    if geometry is not None:
        kw["index_hash_slots"], kw["index_max_entries"] = geometry
    # delay levels: a SCHEDULE_TOPIC_XXXX unit's tagsCode is storeTime + the level's delay
    levels = redelivery.parse_delay_levels()
    seen = False
    sched = cq_root / redelivery.SCHEDULE_TOPIC
    for qid, qdir in queue_id_dirs(sched):
        last = _last_cq_entry(qdir)
        if last is None:
            continue
        sm = _message_at(logs, last.commit_log_offset)
        delay = None if sm is None else schedule_unit_delay(last.tags_code, sm.store_timestamp)
        if delay is not None and delay > 0 and delay_written(delay):
            levels[redelivery.queue_id_to_delay_level(qid)] = delay
            seen = True
    if seen:
        top = max(levels)
        kw["message_delay_level"] = " ".join(
            _level_text(levels.get(i, 1000)) for i in range(1, top + 1)
        )
    return StoreConfig(**kw)


# Reading an existing store with formats/ only (the write engine does not use mqtool.store).


def _map(path: Path) -> bytes | mmap.mmap:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b""


def _commitlog_files(root: Path) -> list[tuple[Path, int, int]]:
    """(path, start offset, size) of the commitlog files, in offset order."""
    return [(p, int(p.name), p.stat().st_size) for p in numbered_files(root / COMMITLOG_DIR)]


def _first_message(logs: list[tuple[Path, int, int]]) -> CommitLogMessage | None:
    for path, start, _ in logs:
        for item in scan_file(_map(path), file=f"commitlog/{path.name}", file_start=start):
            if isinstance(item, CommitLogMessage):
                return item
    return None


def _message_at(logs: list[tuple[Path, int, int]], offset: int) -> CommitLogMessage | None:
    for path, start, size in logs:
        if start <= offset < start + size:
            try:
                m = parse_message(_map(path), offset - start, file_start=start)
            except FormatError:
                return None
            return m if isinstance(m, CommitLogMessage) else None
    return None


def _last_cq_entry(queue_dir: Path) -> CqEntry | None:
    last = None
    for p in numbered_files(queue_dir, strict=False):
        try:
            for _, e in iter_cq(_map(p)):
                last = e
        except FormatError:
            pass  # a torn tail: the whole units before it count (settings inference only)
    return last


def _last_index_geometry(index_dir: Path) -> tuple[int, int] | None:
    for p in reversed(index_files(index_dir)):
        try:
            g = IndexReader(_map(p), file=f"index/{p.name}").geometry
        except FormatError:
            continue
        return g.hash_slot_num, g.index_num
    return None


def _level_text(ms: int) -> str:
    """A measured delay as a ``messageDelayLevel`` token (whole seconds at least)."""
    return fmt_delay(ms if ms % 1000 == 0 else max(1, round(ms / 1000)) * 1000)


def atomic_write(path: Path, text: str, *, bak: bool = True, fsync: bool = False) -> None:
    """``MixAll.string2File``, made atomic: tmp, previous content to ``.bak``, rename.

    A killed process leaves the old or the new file, never a torn one; ``fsync`` also makes the
    new content survive a power loss (RocketMQ itself never fsyncs these files).
    """
    tmp = path.with_name(path.name + ".tmp")
    data = text.encode("utf-8")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    if bak:
        try:
            prev = path.read_bytes()
        except FileNotFoundError:
            prev = None
        if prev is not None:
            btmp = path.with_name(path.name + ".bak.tmp")
            btmp.write_bytes(prev)
            os.replace(btmp, path.with_name(path.name + ".bak"))
    os.replace(tmp, path)


