"""``mqtool trace``: one message's journey (original, schedule, retry, DLQ, resend copies)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from mqtool.cli.common import (
    err_console,
    exactly_one,
    exit_on_findings,
    fmt_time,
    handle_errors,
    now_value,
    open_store,
    out_console,
    print_json,
    print_notes,
)
from mqtool.cli.options import BrokerConfOpt, DelayLevelsOpt, HtmlOpt, JsonOpt, NowOpt, StoreArg

if TYPE_CHECKING:
    from rich.console import Console
    from rich.tree import Tree

    from mqtool.query import ProgressFn
    from mqtool.trace import ClientEvent, Hop, Trace

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
    "dead-lettered": "red",
    "not-consumed": "yellow",
    "consumed": "green",
    "delivered": "green",
    "committed": "green",
    "rolled-back": "red",
    "discarded": "red",
    "checked": "yellow",
}


def _fmt_ms(ms: int | None) -> str:
    from mqtool.trace import fmt_duration

    return "" if ms is None else ("+" if ms >= 0 else "") + fmt_duration(ms)


def _hop_node(n: int, h: Hop) -> Tree:
    from rich.text import Text
    from rich.tree import Tree

    from mqtool.formats.rules import fmt_delay

    head = Text.assemble(
        (f"{n}. ", "dim"),
        (f"{h.kind:<9}", _KIND_STYLE.get(h.kind, "")),
        " ",
        (f"{h.topic} q{h.queue_id}@{h.queue_offset}", "bold"),
        f"  {fmt_time(h.store_timestamp)}",
        (f"  ({_fmt_ms(h.since_previous_ms)})" if h.since_previous_ms is not None else "", "dim"),
    )
    node = Tree(head)
    node.add(Text(
        f"commitlog {h.commit_log_offset} · offsetMsgId {h.offset_msg_id} · "
        f"reconsumeTimes {h.reconsume_times}"
    ))
    bits = []
    if h.delay_level is not None and h.kind in ("schedule", "retry", "delivered", "pop-retry"):
        d = "" if h.delay_ms is None else f" ({fmt_delay(h.delay_ms)})"
        bits.append(f"delay level {h.delay_level}{d}")
    if h.deliver_timestamp is not None:
        bits.append(f"due {fmt_time(h.deliver_timestamp)}")
    if h.real_topic and h.kind in ("schedule", "timer", "half", "discarded"):
        bits.append(f"real topic {h.real_topic}")
    if bits:
        node.add(Text(" · ".join(bits)))
    if h.note:
        node.add(Text(h.note))
    node.add(Text(h.state_detail, style=_STATE_STYLE.get(h.state, "")))
    return node


def client_event_line(e: ClientEvent) -> str:
    """One client trace event in a line: when, what, who, how long, the outcome."""
    when = fmt_time(e.context.timestamp) if e.context.timestamp is not None else "-" * 23
    return f"{when}  {e.what:<9}  {e.summary}  · trace record at commitlog {e.record}"


def render_trace(tr: Trace, console: Console) -> None:
    """A trace for people: header lines, then the hops as a tree."""
    from rich.text import Text
    from rich.tree import Tree

    con = console
    con.print(Text.assemble(
        ("trace ", "bold"), tr.id,
        f" · UNIQ_KEY {tr.uniq_key or '-'} · found via {tr.via}",
    ), highlight=False)
    style = {"dead-lettered": "bold red", "consumed": "bold green", "waiting-retry": "bold yellow",
             "scheduled": "bold yellow", "rolled-back": "bold red", "discarded": "bold red",
             "transaction-pending": "bold yellow"}.get(tr.verdict_kind, "bold")
    con.print(Text.assemble(("verdict: ", "bold"), (tr.verdict, style)), highlight=False)
    if tr.resend_command:
        con.print(Text.assemble(("resend:  ", "bold"), tr.resend_command), highlight=False,
                  soft_wrap=True)  # one line: copy and paste
    elif tr.resent_to:
        con.print(Text.assemble(("resent:  ", "bold"), f"the copy is {tr.resent_to}"),
                  highlight=False, soft_wrap=True)
    src = "store's latest store time" if tr.now_source == "store" else "given"
    con.print(Text(f"now:     {fmt_time(tr.now)} UTC ({src})"), highlight=False)
    for note in tr.notes:
        con.print(Text(f"note:    {note}", style="dim"), highlight=False)
    tree = Tree(Text(f"journey: {len(tr.hops)} record{'s' if len(tr.hops) != 1 else ''}"))
    for i, h in enumerate(tr.hops, 1):
        tree.add(_hop_node(i, h))
    con.print(tree, highlight=False)
    if tr.client:
        con.print(Text(f"client trace: {len(tr.client)} event{'s' if len(tr.client) != 1 else ''}"
                       " reported by the clients (RMQ_SYS_TRACE_TOPIC; the clients' clocks)"),
                  highlight=False)
        for e in tr.client:
            con.print(Text("  " + client_event_line(e)), highlight=False, soft_wrap=True)


@contextmanager
def _scan_progress() -> Iterator[ProgressFn]:
    """A rich progress bar on stderr, shown only once a scan actually starts."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    state: dict[str, object] = {}

    def update(done: int, total: int) -> None:
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
        prog.update(state["t"], completed=done, total=total)  # type: ignore[arg-type]

    try:
        yield update
    finally:
        prog = state.get("p")
        if isinstance(prog, Progress):
            prog.stop()


def trace(
    store: StoreArg,
    msg_id: Annotated[
        str | None,
        typer.Argument(
            metavar="ID",
            help="offsetMsgId of any copy (32/56 hex), UNIQ_KEY (32/56 hex) or 5.x id (01...), "
            "e.g. C000020247AB5FFD2B276B8361EB0006.",
            show_default=False,
        ),
    ] = None,
    key: Annotated[
        str | None,
        typer.Option("--key", help="Trace by business key (KEYS) instead of an id, e.g. order-42."),
    ] = None,
    topic: Annotated[
        str | None,
        typer.Option(help="With --key: only messages with a record in this topic, e.g. TopicA."),
    ] = None,
    delay_levels: DelayLevelsOpt = None,
    broker_conf: BrokerConfOpt = None,
    now: NowOpt = "store",
    json_: JsonOpt = False,
    html: HtmlOpt = None,
) -> None:
    """One message's journey: original, schedule, retry, DLQ, resend.

    Joins the copies by UNIQ_KEY (and ORIGIN_MESSAGE_ID / REAL_TOPIC / RETRY_TOPIC), using the
    index files when there are any, else one scan of the commitlog (progress on stderr). Says
    per copy whether the schedule service delivered it and which consumer groups consumed it,
    and gives a verdict; for a dead-lettered message, the `mqtool dlq resend` command.
    Transactions: the half record, the broker's check re-puts, the committed copy and the op
    record (RMQ_SYS_TRANS_OP_HALF_TOPIC), or before 4.3 the PREPARED/COMMIT/ROLLBACK records;
    the verdict says committed, rolled back, discarded or in doubt. An orderly consumer's
    local retries (no record each) are counted in the dead-letter verdict.
    With --json: {"id", "uniqKey", "verdict", "via", "hops": [...], "delayLevels"} (--key:
    {"key", "traces", "delayLevels"}); "delayLevels" says where each level's delay came from
    (--delay-levels, --broker-conf, the store's evidence or the broker's default).

    Example: mqtool trace ~/store C000020247AB5FFD2B276B8361EB0006 --delay-levels "1s 5s 10s"
    Example: mqtool trace ~/store --key ORD-100006 --html journey.html
    """
    from mqtool.delaylevels import resolve_delay_levels
    from mqtool.trace import trace_id, trace_key

    exactly_one("the message to trace", {"ID": msg_id, "--key KEY": key})
    if topic is not None and key is None:
        raise typer.BadParameter("--topic goes with --key")
    now_ms = now_value(now)
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
            err_console().print(f"wrote {html}", highlight=False, markup=False)
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


def register(app: typer.Typer) -> None:
    app.command("trace")(trace)
