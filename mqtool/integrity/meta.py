"""Checks of the store's small files: the checkpoint against the data and the config files
against the queues (run by :func:`mqtool.integrity.checks.verify`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqtool.formats.checkpoint import Checkpoint, parse_checkpoint
from mqtool.formats.config import parse_consumer_offset, parse_delay_offset
from mqtool.formats.config.load import START_CONFIGS, ConfigLoad, load_config
from mqtool.formats.errors import Finding, FormatError, Severity
from mqtool.formats.rules import SCHEDULE_TOPIC
from mqtool.integrity.verify_report import FindingSink, QueueScan
from mqtool.store.reader import Store


# --- checkpoint, configs, root files -------------------------------------------------------
def check_checkpoint(
    store: Store, messages: int, last_ts: int, data_end: int, abort: bool, sink: FindingSink
) -> Checkpoint | None:
    """The checkpoint against the data (``messages`` readable, the latest stored at
    ``last_ts``; a live store's broker flushes its checkpoint after the data was read, so
    there it may be ahead)."""
    p = store.root / "checkpoint"
    if not p.exists():
        if messages:
            sink.add(Finding("checkpoint", "checkpoint", None,
                             "no checkpoint file: the broker recovers as after a clean stop",
                             severity=Severity.WARNING))
        return None
    try:
        cp = parse_checkpoint(p.read_bytes(), file="checkpoint")
    except FormatError as e:
        sink.add(Finding("checkpoint", "checkpoint", e.offset, e.detail))
        return None
    for pos, name, ts in ((0, "physicMsgTimestamp", cp.physic_msg_timestamp),
                          (8, "logicsMsgTimestamp", cp.logics_msg_timestamp),
                          (16, "indexMsgTimestamp", cp.index_msg_timestamp)):
        if messages and ts > last_ts and not store.live:
            sink.add(Finding(
                "checkpoint", "checkpoint", pos,
                f"{name} {ts} is after the last readable message's store time {last_ts}: "
                "the checkpoint claims data that is not there",
                expected=f"<= {last_ts}", found=str(ts),
            ))
        elif messages and abort and name != "indexMsgTimestamp" and ts < last_ts:
            sink.add(Finding(
                "checkpoint", "checkpoint", pos,
                f"{name} is {last_ts - ts} ms behind the last message (crash state: recovery "
                "re-dispatches from the checkpoint)", severity=Severity.INFO,
            ))
    for pos, name, off in ((24, "masterFlushedOffset", cp.master_flushed_offset),
                           (32, "confirmPhyOffset", cp.confirm_phy_offset)):
        if off > data_end and not store.live:
            sink.add(Finding(
                "checkpoint", "checkpoint", pos,
                f"{name} {off} is past the end of the valid commitlog data ({data_end})",
                expected=f"<= {data_end}", found=str(off),
            ))
    if cp.file_size != 4096:
        sink.add(Finding("checkpoint", "checkpoint", None,
                         f"checkpoint is {cp.file_size} bytes, RocketMQ writes 4096",
                         severity=Severity.WARNING))
    return cp


def _key_pos(text: str | None, key: str) -> int | None:
    """Byte offset of ``key`` (a JSON key, quoted or not) in a config text, when found."""
    if not text:
        return None
    for needle in (f'"{key}"', f"{key}:"):
        i = text.find(needle)
        if i >= 0:
            return len(text[:i].encode("utf-8"))
    return None


def check_configs(
    store: Store, queues: dict[tuple[str, int], QueueScan], sink: FindingSink,
    max_now: Callable[[str, int], int] | None = None,
) -> tuple[dict[str, ConfigLoad], list[str]]:
    """The config files, and their offsets against the queues; ``max_now`` (a live store):
    a queue's max offset measured again, for an offset beyond the one read before. Also the
    config files and databases the broker's start fails on."""
    out: dict[str, ConfigLoad] = {}
    cdir = store.root / "config"
    if not cdir.is_dir():
        return out, []
    parsers: dict[str, Callable[..., Any]] = {
        "delayOffset.json": parse_delay_offset,
        "consumerOffset.json": parse_consumer_offset,
        "lmqConsumerOffset.json": parse_consumer_offset,
    }
    names = sorted({p.name[:-4] if p.name.endswith(".bak") else p.name
                    for p in cdir.iterdir()  # a directory in a file's place is a finding
                    if p.name.endswith(".json") or p.name.endswith(".json.bak")})
    for name in names:
        parse = parsers.get(name)
        if parse is None:
            from mqtool.formats.config import loads_fastjson
            parse = loads_fastjson
        cl = load_config(store.root, name, parse)
        out[name] = cl
        for f in cl.findings:
            sink.add(f)
    delay = out.get("delayOffset.json")
    if delay is not None and delay.value is not None and delay.source is not None:
        for level, off in sorted(delay.value.offset_table.items()):
            qs = queues.get((SCHEDULE_TOPIC, level - 1))
            mx = qs.max_offset if qs is not None else 0
            if off > mx and max_now is not None:
                mx = max_now(SCHEDULE_TOPIC, level - 1)
            if off > mx:
                sink.add(Finding(
                    "config", delay.source, _key_pos(delay.text, str(level)),
                    f"delay level {level}: offset {off} is beyond the max offset {mx} of "
                    f"{SCHEDULE_TOPIC}/{level - 1} (the schedule service would skip messages)",
                    expected=f"<= {mx}", found=str(off),
                ))
    from mqtool.store.consumer_offsets import load_consumer_offsets

    rocks = rocksdb_config_findings(store.root)
    co = load_consumer_offsets(store.root)
    for f in rocks + co.findings:  # (the sink says a JSON file's own findings once)
        sink.add(f)
    # what the broker's start fails on: a start config neither it nor its .bak decodes, the
    # consumer offsets wherever kept, a RocksDB config database that does not open or decode
    stop_start = {f"config/{name}" for name, c in out.items()
                  if c.unloadable and name in START_CONFIGS}
    if co.json is None:  # from RocksDB: a database or value that does not load
        stop_start |= {f.file for f in co.findings if f.severity == Severity.ERROR}
    elif co.json.unloadable:
        stop_start.add(f"config/{co.json.name}")
    stop_start |= {f.file for f in rocks}
    text = co.json.text if co.json is not None else None
    for (topic, group), table in sorted((co.table or {}).items()):
        if "@" in group or co.source is None:
            continue
        key = f"{topic}@{group}"
        for qid, off in sorted(table.items()):
            qs = queues.get((topic, qid))
            if qs is None:
                continue
            mx = qs.max_offset
            if off > mx and max_now is not None:
                mx = max_now(topic, qid)
            if off > mx:
                sink.add(Finding(
                    "config", co.source, _key_pos(text, key),
                    f"group {group} on {topic}/{qid}: offset {off} is beyond the queue's max "
                    f"offset {mx}", expected=f"<= {mx}", found=str(off),
                ))
            elif off < qs.min_offset:
                sink.add(Finding(
                    "config", co.source, _key_pos(text, key),
                    f"group {group} on {topic}/{qid}: offset {off} is below the queue's min "
                    f"offset {qs.min_offset} (the broker corrects it)",
                    severity=Severity.WARNING,
                ))
    return out, sorted(stop_start)


ROCKSDB_CONFIGS = {"topics": "topic configs", "subscriptionGroups": "subscription groups"}
"""The RocksDB config databases of ``storeType=defaultRocksDB`` (``RocksDBTopicConfigManager``,
``RocksDBSubscriptionGroupManager``) under ``config/``; the consumer offsets' are read by
:mod:`mqtool.store.consumer_offsets`."""


def rocksdb_config_findings(root: Path) -> list[Finding]:
    """What stops a broker loading the RocksDB config databases of ``root``: a database
    RocksDB cannot open read-only, or a value of its ``default`` column family that is not a
    JSON object (the broker decodes each with fastjson at start and fails on an exception)."""
    from mqtool.formats.config import loads_fastjson
    from mqtool.store.rocksdb_queue import RocksOpenError, read_only

    out: list[Finding] = []
    for name, what in ROCKSDB_CONFIGS.items():
        path = root / "config" / name
        if not path.is_dir():
            continue
        rel = f"config/{name}/"
        try:
            with read_only(path) as (db, _cfs):
                for key, value in db.items():
                    try:
                        obj = loads_fastjson(bytes(value).decode("utf-8"), file=rel)
                        if not isinstance(obj, dict):
                            raise FormatError(rel, None, "not a JSON object")
                    except (FormatError, UnicodeDecodeError) as e:
                        detail = e.detail if isinstance(e, FormatError) else "not UTF-8"
                        k = bytes(key).decode("utf-8", "replace")
                        out.append(Finding(
                            "config", rel, None, f"{what[:-1]} {k!r} cannot be read: {detail} "
                            "(the broker fails to start on it)", found=bytes(value)[:64].hex()))
        except RocksOpenError as e:
            out.append(Finding("config", rel, None,
                               f"RocksDB {what} cannot be opened read-only: {e}"))
    return out
