"""``mqtool inspect``: store overview."""

from __future__ import annotations

from typing import Any

import typer

from mqtool.cli.common import (
    exit_on_findings,
    fmt_time,
    handle_errors,
    open_store,
    out_console,
    print_json,
    print_notes,
)
from mqtool.cli.options import BrokerConfOpt, DelayLevelsOpt, JsonOpt, StoreArg


def inspect(
    store: StoreArg,
    delay_levels: DelayLevelsOpt = None,
    broker_conf: BrokerConfOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Overview of a store: state, files, queues, delay levels, groups.

    Shows clean/abort state, lock, checkpoint times, commitlog files with their data ends,
    topics and queues (retry/DLQ/schedule marked), delay-level progress, consumer lag, config
    and index files. Never changes a byte. The delay levels come from --delay-levels,
    --broker-conf, or the store itself (see "delay levels from"); a level the given levels
    contradict is a warning on stderr.

    Example: mqtool inspect ~/store --json

    Example: mqtool inspect ~/store --broker-conf conf/broker.conf
    """
    from mqtool.overview import inspect_store

    with handle_errors():
        st = open_store(store)
        ov = inspect_store(st, delay_levels, broker_conf=broker_conf)
        if json_:
            print_json(ov.data)
        else:
            render_overview(ov.data)
        print_notes(ov.notes)
        exit_on_findings(st)


def render_overview(d: dict[str, Any]) -> None:
    """The overview (``inspect --json``'s document) as tables on stdout."""
    from rich.table import Table

    con = out_console()
    lock = d["lock"]
    lock_txt = ("locked by pid " + str(lock["holderPid"])) if lock["locked"] else (
        "present, not locked (no broker running)" if lock["exists"] else "absent")
    cp = d["checkpoint"] or {}
    t = Table(title=f"store {d['root']}", show_header=False)
    t.add_column("what")
    t.add_column("value")
    t.add_row("state", d["state"])
    t.add_row("lock", lock_txt)
    for k in ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp"):
        t.add_row(f"checkpoint.{k}", fmt_time(cp.get(k)))
    cl = d["commitlog"]
    t.add_row("messages", str(cl["messages"]))
    t.add_row("commitlog range", f"{cl['minOffset']} .. {cl['maxOffset']}")
    t.add_row("delay levels from", d["delayLevelSource"]["summary"])
    con.print(t)

    ft = Table(title="commitlog files")
    for c in ("file", "size", "data end", "ends with", "messages"):
        ft.add_column(c)
    for f in cl["files"]:
        ft.add_row(f["file"], str(f["size"]), str(f["dataEnd"]), f["end"], str(f["messages"]))
    con.print(ft)

    qt = Table(title="topics and queues")
    for c in ("topic", "kind", "queue", "min", "max", "count"):
        qt.add_column(c)
    for tp in d["topics"]:
        for q in tp["queues"]:
            qt.add_row(tp["topic"], tp["kind"], str(q["queueId"]), str(q["minOffset"]),
                       str(q["maxOffset"]), str(q["count"]))
    con.print(qt)

    if d["delayLevels"]:
        dt = Table(title="delay levels (SCHEDULE_TOPIC_XXXX)")
        for c in ("level", "delay", "from", "queue", "delayOffset", "max", "pending"):
            dt.add_column(c)
        for lv in d["delayLevels"]:
            warn = " (beyond max!)" if lv["beyondMax"] else ""
            dt.add_row(str(lv["level"]), lv["delay"] or "?", lv["source"] or "-",
                       str(lv["queueId"]), str(lv["delayOffset"]) + warn, str(lv["maxOffset"]),
                       str(lv["pending"]))
        con.print(dt)
    if d["consumerGroups"]:
        gt = Table(title="consumer groups (consumerOffset.json)")
        for c in ("group", "topic", "queue", "offset", "max", "lag"):
            gt.add_column(c)
        for g in d["consumerGroups"]:
            gt.add_row(g["group"], g["topic"], str(g["queueId"]), str(g["offset"]),
                       str(g["maxOffset"]), str(g["lag"]))
        con.print(gt)
    if d["configFiles"] or d["index"]:
        ot = Table(title="config and index files")
        for c in ("file", "size / entries", "note"):
            ot.add_column(c)
        for c2 in d["configFiles"]:
            ot.add_row(c2["file"], str(c2["size"]), ".bak present" if c2["bak"] else "")
        for ix in d["index"]:
            span = f"{fmt_time(ix['beginTimestamp'])} .. {fmt_time(ix['endTimestamp'])}"
            ot.add_row(ix["file"], str(ix["entries"]), span)
        con.print(ot)


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect)
