"""``mqtool inspect``: the overview an operator wants first, as data."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqtool.formats.config.load import load_config
from mqtool.formats.errors import Finding, FormatError, MqtoolError
from mqtool.formats.rules import (
    DEFAULT_MESSAGE_DELAY_LEVEL,
    SCHEDULE_TOPIC,
    fmt_delay,
    topic_kind,
)
from mqtool.store.reader import Store

if TYPE_CHECKING:  # loaded when a command reads the offsets
    from mqtool.store.consumer_offsets import ConsumerOffsetsLoad

DEFAULT_DELAY_LEVELS = DEFAULT_MESSAGE_DELAY_LEVEL


@dataclass
class Overview:
    """``inspect``'s document, with the findings and notes met while making it."""

    data: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)  # warnings/info: no exit 1


def load_store_config(store: Store, name: str) -> Any:
    """``config/<name>`` as the broker loads it (``.bak`` fallback, :func:`load_config`): the
    parsed model or None; what went wrong becomes findings of ``store``."""
    loaded = load_config(store.root, name)
    for f in loaded.findings:
        if f not in store.findings:
            store.findings.append(f)
    return loaded.value


def load_delay_offsets(store: Store) -> dict[int, int] | None:
    """delayOffset.json's table (level -> next offset), None when nothing loads."""
    parsed = load_store_config(store, "delayOffset.json")
    return None if parsed is None else dict(parsed.offset_table)


def consumer_offsets_of(store: Store) -> ConsumerOffsetsLoad:
    """The store's consumer offsets as its broker would load them, and where from
    (:func:`mqtool.store.consumer_offsets.load_consumer_offsets`: consumerOffset.json,
    lmqConsumerOffset.json or the RocksDB config/consumerOffsets/); what went wrong becomes
    findings of ``store``."""
    from mqtool.store.consumer_offsets import load_consumer_offsets as load

    loaded = load(store.root)
    for f in loaded.findings:
        if f not in store.findings:
            store.findings.append(f)
    return loaded


def load_consumer_offsets(store: Store) -> dict[tuple[str, str], dict[int, int]] | None:
    """:func:`consumer_offsets_of`'s table, (topic, group) -> {queueId: offset}; None when
    nothing loads."""
    return consumer_offsets_of(store).table


def store_time(store: Store) -> int:
    """The store's own "now": the latest store time it recorded (checkpoint, index headers).

    The one notion of "now" for judging pending and overdue (trace and scan default to it, so a
    copy read days later gives the answers the broker would have given when it stopped);
    0 when the store recorded none.
    """
    try:
        cp = read_checkpoint(store)
    except MqtoolError:
        cp = None
    cands = [cp["physicMsgTimestamp"], cp["logicsMsgTimestamp"]] if cp else []
    # the headers only: the slot and entry checks read the tables (the entries' grow with the
    # index, 250 MiB of a 2 GiB store's), and whoever reports index damage runs them itself
    cands += [h.end_timestamp for h in store.index_headers()]
    return max(cands, default=0)


def read_checkpoint(store: Store) -> dict[str, Any] | None:
    from mqtool.formats.checkpoint import parse_checkpoint

    p = store.root / "checkpoint"
    if not p.exists():
        return None
    cp = parse_checkpoint(p.read_bytes(), file="checkpoint")
    d = {
        "physicMsgTimestamp": cp.physic_msg_timestamp,
        "logicsMsgTimestamp": cp.logics_msg_timestamp,
        "indexMsgTimestamp": cp.index_msg_timestamp,
    }
    for attr, key in (("master_flushed_offset", "masterFlushedOffset"),
                      ("confirm_phy_offset", "confirmPhyOffset")):
        v = getattr(cp, attr, None)
        if v is not None:
            d[key] = v
    return d


def backlogs(store: Store, offsets: dict[tuple[str, str], dict[int, int]] | None
             ) -> dict[str, Any]:
    """POP messages in flight and the timer backlog (:mod:`mqtool.backlog`)."""
    from mqtool.backlog import backlogs as measure
    from mqtool.backlog import revive_offsets

    revive = None if offsets is None else revive_offsets(
        (g, t, q, o) for (t, g), table in offsets.items() for q, o in table.items())
    return measure(store, revive, store_time(store))


def inspect_store(
    store: Store, delay_levels: str | None = None, *, broker_conf: str | Path | None = None,
) -> Overview:
    """Everything ``mqtool inspect`` shows, as JSON-ready data (library call, no printing).

    ``delay_levels`` (a ``messageDelayLevel`` string) or ``broker_conf`` (the broker's
    properties file) say which delay levels the broker has; without either they come from the
    store's evidence and the broker's default (:mod:`mqtool.delaylevels`)."""
    from mqtool.delaylevels import resolve_delay_levels

    resolved = resolve_delay_levels(store, delay_levels, broker_conf)
    levels = resolved.table
    lock = store.lock_state()
    data: dict[str, Any] = {"root": str(store.root)}
    data["abort"] = store.abort_exists
    data["state"] = "abort (unclean shutdown or broker running)" if store.abort_exists else "clean"
    data["abortBak"] = (store.root / "abort.bak").exists()
    data["lock"] = {"exists": lock.exists, "locked": lock.locked, "holderPid": lock.holder_pid}
    try:
        data["checkpoint"] = read_checkpoint(store)
    except FormatError as e:
        store.findings.append(Finding("checkpoint", "checkpoint", e.offset, e.detail))
        data["checkpoint"] = None

    files = []
    total = 0
    max_off = 0
    for f, end, count in store.file_ends():
        data_end = end.physical_offset + (
            (f.start + f.size - end.physical_offset) if end.kind == "blank" else 0
        )
        files.append({
            "file": f.rel, "startOffset": f.start, "size": f.size,
            "dataEnd": end.physical_offset - f.start, "end": end.kind, "messages": count,
        })
        total += count
        if count or end.kind == "blank":
            max_off = max(max_off, data_end)
    data["commitlog"] = {
        "files": files,
        "messages": total,
        "minOffset": store.commitlog_files[0].start if store.commitlog_files else 0,
        "maxOffset": max_off,
        "mappedFileSize": store.mapped_file_size,
    }

    topics: dict[str, dict[str, Any]] = {}
    queue_max: dict[tuple[str, int], int] = {}
    for t, q in store.queue_ids():
        info = store.queue_info(t, q)
        queue_max[(t, q)] = info.max_offset
        tk = topics.setdefault(t, {"topic": t, "kind": topic_kind(t), "queues": [], "messages": 0})
        queues: list[dict[str, Any]] = tk["queues"]
        queues.append({
            "queueId": q, "store": store.queue_kind(t, q), "minOffset": info.min_offset,
            "maxOffset": info.max_offset,
            "count": info.max_offset - info.min_offset, "files": len(info.files),
            "lastCommitLogOffset": info.last_commit_log_offset,
        })
        tk["messages"] += info.max_offset - info.min_offset
    data["topics"] = list(topics.values())

    delay = load_delay_offsets(store)
    data["delayOffset"] = {str(k): v for k, v in sorted((delay or {}).items())}
    sched = []
    sched_levels = {q + 1 for t, q in queue_max if t == SCHEDULE_TOPIC} | set(delay or {})
    for level in sorted(sched_levels):
        mx = queue_max.get((SCHEDULE_TOPIC, level - 1), 0)
        done = (delay or {}).get(level, 0)
        if done > mx and store.live:  # a live broker's queue grew since it was read
            mx = store.queue_info(SCHEDULE_TOPIC, level - 1).max_offset
        sched.append({
            "level": level,
            "delay": fmt_delay(levels[level]) if level in levels else None,
            "source": resolved.source_of(level),
            "queueId": level - 1, "delayOffset": done, "maxOffset": mx,
            "pending": max(0, mx - done), "beyondMax": done > mx,
        })
        if done > mx:  # the schedule service cannot have delivered units that do not exist
            store.note(Finding(
                "config", "config/delayOffset.json", None,
                f"delay level {level}: offset {done} is beyond the max offset {mx} of "
                f"{SCHEDULE_TOPIC} queue {level - 1}", expected=f"<= {mx}", found=str(done),
            ))
    data["delayLevels"] = sched
    data["delayLevelSource"] = resolved.to_json()

    loaded = consumer_offsets_of(store)
    offsets = loaded.table
    groups = []
    for (topic, group), table in sorted((offsets or {}).items()):
        for qid, off in sorted(table.items()):
            qmax = queue_max.get((topic, qid))
            groups.append({
                "group": group, "topic": topic, "queueId": qid, "offset": off,
                "maxOffset": qmax, "lag": None if qmax is None else max(0, qmax - off),
            })
    data["consumerGroups"] = groups
    data["consumerOffsetsSource"] = loaded.source
    data.update(backlogs(store, offsets))

    cfg = []
    cdir = store.root / "config"
    if cdir.is_dir():
        for p in sorted(cdir.iterdir()):
            if p.is_file() and not p.name.endswith(".bak"):
                cfg.append({"file": f"config/{p.name}", "size": p.stat().st_size,
                            "bak": (cdir / (p.name + ".bak")).exists()})
    data["configFiles"] = cfg

    idx = []
    for rel, r in store.index_files():
        h = r.header
        idx.append({"file": rel, "beginTimestamp": h.begin_timestamp,
                    "endTimestamp": h.end_timestamp, "beginPhyOffset": h.begin_phy_offset,
                    "endPhyOffset": h.end_phy_offset, "entries": max(0, h.index_count - 1),
                    "hashSlotNum": r.geometry.hash_slot_num, "indexNum": r.geometry.index_num})
    data["index"] = idx
    from mqtool.store.queue_sources import unread_parts

    for unread in unread_parts(store.root):
        store.note(unread)
    data["findings"] = [
        {"kind": f.kind, "file": f.file, "offset": f.offset, "detail": f.detail}
        for f in store.findings
    ]
    return Overview(data, list(store.findings), resolved.findings)

