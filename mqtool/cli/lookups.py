"""The bodies and renderers of the quick look-ups: ``inspect``, ``msg``, ``trace``.

The typer commands (:mod:`.inspect_cmd`, :mod:`.read`, :mod:`.trace`) check their options and
call these; so does :mod:`mqtool.cli.quick` for the common forms, without typer. Nothing here
imports typer, and rich only when stdout or stderr is a terminal (:mod:`mqtool.cli.plain`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqtool.cli.exits import exit_on_findings, handle_errors, open_store
from mqtool.cli.output import err_line, isatty, out_console, print_json, print_notes, report_error
from mqtool.cli.plain import PlainOut, Table, Tree, line
from mqtool.formats.errors import EXIT_FINDINGS
from mqtool.timefmt import fmt_time

if TYPE_CHECKING:
    from rich.console import Console

    from mqtool.query import ProgressFn
    from mqtool.trace import ClientEvent, Hop, Trace


# --- inspect ---------------------------------------------------------------------------------
def run_inspect(store: Path, delay_levels: str | None, broker_conf: Path | None,
                json_: bool) -> None:
    """``mqtool inspect``: the overview of a store, as tables or ``--json``."""
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
        source = d.get("consumerOffsetsSource") or "config/consumerOffset.json"
        source = f"RocksDB {source}" if source.endswith("/") else source.removeprefix("config/")
        gt = Table(title=f"consumer groups ({source})")
        for c in ("group", "topic", "queue", "offset", "max", "lag"):
            gt.add_column(c)
        for g in d["consumerGroups"]:
            gt.add_row(g["group"], g["topic"], str(g["queueId"]), str(g["offset"]),
                       str(g["maxOffset"]), str(g["lag"]))
        con.print(gt)
    if d.get("popInFlight"):
        pt = Table(title="POP checkouts (rmq_sys_REVIVE_LOG)")
        for c in ("group", "topic", "queue", "popped", "acked", "changed", "in flight",
                  "invisible until", "revive due", "revived"):
            pt.add_column(c)
        for r in d["popInFlight"]:
            pt.add_row(r["group"], r["topic"], str(r["queueId"]), str(r["popped"]),
                       str(r["acked"]), str(r["invisibleChanged"]), str(r["inFlight"]),
                       fmt_time(r["invisibleUntil"]), str(r["reviveDue"]), str(r["revived"]))
        con.print(pt)
    tb = d.get("timerBacklog") or {}
    if tb.get("waiting"):
        lost = (f" ({tb['neverDelivered']} never delivered: the timer's read time is more "
                "than 7 days behind)") if tb.get("neverDelivered") else ""
        con.print(f"timer backlog: {tb['waiting']} waiting, {tb['overdue']} overdue{lost}, next "
                  f"due {fmt_time(tb['nextDue'])}; by real topic: " + ", ".join(
                      f"{t} ({n})" for t, n in tb["byTopic"].items()), highlight=False)
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


# --- msg -------------------------------------------------------------------------------------
def msg_by_offset(msg_id: str) -> bool | None:
    """How ``msg`` reads its ID|OFFSET argument: True a commitlog offset, False an id (an
    offsetMsgId or UNIQ_KEY), None neither (a usage error)."""
    from mqtool.formats.msgid import classify_id

    if msg_id.isdigit() and len(msg_id) < 20:
        return True
    return None if classify_id(msg_id) == "invalid" else False


def run_msg(store: Path, msg_id: str, by_offset: bool, body: str, json_: bool) -> None:
    """``mqtool msg``: every message an id or offset names (``body``: a checked --body mode)."""
    from mqtool.integrity.record_check import records_named
    from mqtool.jsonview import message_dict

    with handle_errors():
        st = open_store(store)
        found, how = records_named(st, msg_id, by_offset=by_offset)
        if json_:
            print_json([message_dict(m, body) for m in found])
        else:
            con = out_console()
            for m in found:
                t = Table(title=f"{m.topic} @ {m.physical_offset} (found by {how})",
                          show_header=False)
                t.add_column("field")
                t.add_column("value", overflow="fold")
                for k, v in message_dict(m, body).items():
                    if k == "properties":
                        for pk, pv in v.items():
                            t.add_row(f"  {pk}", pv)
                    else:
                        t.add_row(k, "-" if v is None else str(v))
                con.print(t)
        if not found:
            report_error(f"no message for {msg_id} in {st.root} ({how})")
        exit_on_findings(st)  # damage met on the way: one line each, exit 1
        if not found:
            raise SystemExit(EXIT_FINDINGS)


# --- trace -----------------------------------------------------------------------------------
_KIND_STYLE = {
    "original": "bold",
    "schedule": "yellow",
    "timer": "yellow",
    "retry": "cyan",
    "pop-retry": "cyan",
    "delivered": "green",
    "dlq": "bold red",
    "resend": "magenta",
    "half": "blue",
    "op": "blue",
    "commit": "green",
    "prepared": "blue",
    "rollback": "bold red",
    "discarded": "bold red",
}
_STATE_STYLE = {
    "pending": "yellow",
    "overdue": "bold yellow",
    "never-delivered": "bold red",
    "dead-lettered": "red",
    "not-consumed": "yellow",
    "consumed": "green",
    "delivered": "green",
    "committed": "green",
    "rolled-back": "red",
    "discarded": "red",
    "checked": "yellow",
    "in-flight": "yellow",
    "revive-due": "bold yellow",
}


def _fmt_ms(ms: int | None) -> str:
    from mqtool.trace import fmt_duration

    return "" if ms is None else ("+" if ms >= 0 else "") + fmt_duration(ms)


def _hop_node(n: int, h: Hop) -> Tree:
    from mqtool.formats.rules import fmt_delay
    from mqtool.trace import fmt_duration

    node = Tree(line(
        (f"{n}. ", "dim"),
        (f"{h.kind:<9}", _KIND_STYLE.get(h.kind, "")),
        " ",
        (f"{h.topic} q{h.queue_id}@{h.queue_offset}", "bold"),
        f"  {fmt_time(h.store_timestamp)}",
        (f"  ({_fmt_ms(h.since_previous_ms)})" if h.since_previous_ms is not None else "", "dim"),
    ))
    node.add(f"commitlog {h.commit_log_offset} · offsetMsgId {h.offset_msg_id} · "
             f"reconsumeTimes {h.reconsume_times}")
    bits = []
    if h.delay_level is not None and h.kind in ("schedule", "retry", "delivered", "pop-retry"):
        d = "" if h.delay_ms is None else f" ({fmt_delay(h.delay_ms)})"
        bits.append(f"delay level {h.delay_level}{d}")
    if h.deliver_timestamp is not None:
        bits.append(f"due {fmt_time(h.deliver_timestamp)}")
    if h.real_topic and h.kind in ("schedule", "timer", "half", "discarded"):
        bits.append(f"real topic {h.real_topic}")
    if bits:
        node.add(" · ".join(bits))
    if h.note:
        node.add(h.note)
    for c in h.checkouts:
        node.add(line((f"POP checkout by {c.group} at {fmt_time(c.pop_time)}, invisible "
                       f"{fmt_duration(c.invisible_time)}: {c.state}", "dim"),
                      f" · {c.detail} · checkpoint at commitlog {c.ck_record}"))
    node.add(line((h.state_detail, _STATE_STYLE.get(h.state, ""))))
    return node


def client_event_line(e: ClientEvent) -> str:
    """One client trace event in a line: when, what, who, how long, the outcome."""
    when = fmt_time(e.context.timestamp) if e.context.timestamp is not None else "-" * 23
    return f"{when}  {e.what:<9}  {e.summary}  · trace record at commitlog {e.record}"


def render_trace(tr: Trace, console: Console | PlainOut) -> None:
    """A trace for people: header lines, then the hops as a tree."""
    con = console
    con.print(line(("trace ", "bold"), tr.id,
                   f" · UNIQ_KEY {tr.uniq_key or '-'} · found via {tr.via}"), highlight=False)
    style = {"dead-lettered": "bold red", "consumed": "bold green", "waiting-retry": "bold yellow",
             "scheduled": "bold yellow", "rolled-back": "bold red", "discarded": "bold red",
             "lost": "bold red",
             "transaction-pending": "bold yellow"}.get(tr.verdict_kind, "bold")
    con.print(line(("verdict: ", "bold"), (tr.verdict, style)), highlight=False)
    if tr.resend_command:
        con.print(line(("resend:  ", "bold"), tr.resend_command), highlight=False,
                  soft_wrap=True)  # one line: copy and paste
    elif tr.resent_to:
        con.print(line(("resent:  ", "bold"), f"the copy is {tr.resent_to}"),
                  highlight=False, soft_wrap=True)
    src = "store's latest store time" if tr.now_source == "store" else "given"
    con.print(line(f"now:     {fmt_time(tr.now)} UTC ({src})"), highlight=False)
    for note in tr.notes:
        con.print(line((f"note:    {note}", "dim")), highlight=False)
    tree = Tree(f"journey: {len(tr.hops)} record{'s' if len(tr.hops) != 1 else ''}")
    for i, h in enumerate(tr.hops, 1):
        tree.children.append(_hop_node(i, h))
    con.print(tree, highlight=False)
    if tr.client:
        con.print(line(f"client trace: {len(tr.client)} event{'s' if len(tr.client) != 1 else ''}"
                       " reported by the clients (RMQ_SYS_TRACE_TOPIC; the clients' clocks)"),
                  highlight=False)
        for e in tr.client:
            con.print(line("  " + client_event_line(e)), highlight=False, soft_wrap=True)


@contextmanager
def _scan_progress() -> Iterator[ProgressFn]:
    """A rich progress bar on a terminal's stderr, shown only once a scan actually starts."""
    state: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        if not isatty(sys.stderr):  # a bar is drawn on a terminal only
            return
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        from mqtool.cli.output import err_console

        prog = state.get("p")
        if prog is None:
            prog = Progress(
                TextColumn("scanning commitlog (no index files)"), BarColumn(),
                DownloadColumn(), TimeRemainingColumn(),
                console=err_console(), transient=True,
            )
            prog.start()
            state["p"] = prog
            state["t"] = prog.add_task("scan", total=total)
        assert isinstance(prog, Progress)
        prog.update(state["t"], completed=done, total=total)

    try:
        yield update
    finally:
        prog = state.get("p")
        if prog is not None:
            prog.stop()


def run_trace(store: Path, msg_id: str | None, key: str | None, topic: str | None,
              delay_levels: str | None, broker_conf: Path | None, now_ms: int | None,
              json_: bool, html: Path | None) -> None:
    """``mqtool trace``: the journey of the message ``msg_id`` names, or of every message with
    the business key ``key`` (exactly one of them; options already checked)."""
    from mqtool.delaylevels import resolve_delay_levels
    from mqtool.trace import trace_id, trace_key

    with handle_errors():
        st = open_store(store)
        levels = resolve_delay_levels(st, delay_levels, broker_conf)
        with _scan_progress() as progress:
            if key is not None:
                kt = trace_key(st, key, topic=topic, delay_levels=levels.table, now=now_ms,
                               progress=progress, store_label=str(store))
                traces = kt.traces
            else:
                assert msg_id is not None
                traces = [trace_id(st, msg_id, delay_levels=levels.table, now=now_ms,
                                   progress=progress, store_label=str(store))]
        doc = kt.to_json() if key is not None else traces[0].to_json()
        doc["delayLevels"] = levels.to_json()
        if html is not None:
            from mqtool.report.timeline import trace_page, write_page

            write_page(html, trace_page(doc, problems=[str(f) for f in st.findings]))
            err_line(f"wrote {html}")
        if json_:
            print_json(doc)
        else:
            con = out_console()
            for i, tr in enumerate(traces):
                if i:
                    con.print()
                render_trace(tr, con)
            if any(h.delay_level is not None for tr in traces for h in tr.hops):
                con.print(f"delay levels from: {levels.summary()}", markup=False,
                          highlight=False)
        print_notes(levels.findings)
        exit_on_findings(st)

