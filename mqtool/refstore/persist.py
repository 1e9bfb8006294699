"""Config-file persistence (fastjson text, .bak, atomic) and settings inference for existing
stores."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqtool.formats.errors import FormatError
from mqtool.formats.rules import fmt_delay
from mqtool.refstore import broker as B
from mqtool.refstore.model import StoreConfig


def infer_config(root: str | os.PathLike[str]) -> StoreConfig | None:
    """Settings of an existing store that has no saved refstore settings (e.g. a broker's):
    commitlog file size, consume-queue units per file and index geometry from the files, the
    broker's address from its records, the dialect from the properties' trailing separator.
    None when there is no commitlog to learn from. Delay levels are broker configuration: the
    levels that have messages in SCHEDULE_TOPIC_XXXX are measured (tagsCode - store time), the
    others keep RocketMQ's default.
    """
    from mqtool.store import Store

    rootp = Path(root)
    if not (rootp / "commitlog").is_dir():
        return None
    with Store.open(rootp) as st:
        size = st.mapped_file_size
        if size is None:
            return None
        kw: dict[str, Any] = {"commitlog_file_size": size}
        for m in st.messages():
            kw["store_host"] = str(m.store_host)
            if m.properties_raw.endswith("\x02"):
                kw["dialect"] = "5.3.3"
            if "__CRC32#\x01" in m.properties_raw:
                kw["append_prop_crc"] = True
            break
        cq_root = rootp / "consumequeue"
        if cq_root.is_dir():
            for f in sorted(cq_root.glob("*/*/*")):
                if f.is_file() and f.name.isdigit() and f.stat().st_size % 20 == 0:
                    kw["cq_entries_per_file"] = f.stat().st_size // 20
                    break
        ix = st.index_files()
        if ix:
            g = ix[-1][1].geometry
            kw["index_hash_slots"], kw["index_max_entries"] = g.hash_slot_num, g.index_num
        # delay levels: a SCHEDULE_TOPIC_XXXX unit's tagsCode is storeTime + the level's delay
        levels = B.parse_delay_levels()
        seen = False
        for topic, qid in st.queue_ids():
            if topic != B.SCHEDULE_TOPIC:
                continue
            last = None
            for e in st.queue_entries(topic, qid):
                last = e
            if last is None:
                continue
            sm = st.try_message_at(last.entry.commit_log_offset)
            if sm is not None and last.entry.tags_code > sm.store_timestamp:
                levels[B.queue_id_to_delay_level(qid)] = last.entry.tags_code - sm.store_timestamp
                seen = True
        if seen:
            top = max(levels)
            kw["message_delay_level"] = " ".join(
                _level_text(levels.get(i, 1000)) for i in range(1, top + 1)
            )
        return StoreConfig(**kw)


def _level_text(ms: int) -> str:
    """A measured delay as a ``messageDelayLevel`` token (whole seconds at least)."""
    return fmt_delay(ms if ms % 1000 == 0 else max(1, round(ms / 1000)) * 1000)


def read_config(path: Path, parse: Callable[..., Any]) -> Any:
    """ConfigManager#load: the file, or its .bak when the file is missing/garbled."""
    for p in (path, path.with_name(path.name + ".bak")):
        try:
            text = p.read_text("utf-8")
        except FileNotFoundError:
            continue
        if not text.strip():
            continue
        try:
            return parse(text, file=str(p))
        except FormatError:
            continue
    return None


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


