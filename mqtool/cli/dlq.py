"""``mqtool dlq``: list, show, export and resend dead-lettered messages."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from mqtool.cli.common import (
    BodyOpt,
    JsonlOpt,
    JsonOpt,
    SinceOpt,
    StoreArg,
    UntilOpt,
    check_body_mode,
    err_console,
    exit_on_findings,
    fmt_time,
    handle_errors,
    open_store,
    out_console,
    parse_time,
    print_json,
    print_jsonl,
    report_error,
)
from mqtool.dlq import (
    DlqSelection,
    csv_header,
    csv_row,
    export_dict,
    list_groups,
    origin_msg_id,
    original_topic,
    require_group,
    select_dlq,
)
from mqtool.query import ProgressFn

JOURNAL_HELP = (
    "Resend journals live in each target store at config/mqtool-resend/journal.jsonl "
    "(or where --journal says)."
)

dlq_app = typer.Typer(
    name="dlq",
    help="Dead-letter queues (%DLQ%<group>): list, show, export and resend their messages. "
    + JOURNAL_HELP,
    no_args_is_help=True,
)

GroupOpt = Annotated[
    str, typer.Option("--group", "-g", help="Consumer group whose %DLQ%<group> to read, "
                      "e.g. cg_journey.", show_default=False),
]
TopicOpt = Annotated[
    str | None,
    typer.Option("--topic", help="Only records whose original topic (RETRY_TOPIC) is this, "
                 "e.g. JourneyTopic."),
]
MsgIdOpt = Annotated[
    str | None,
    typer.Option("--msg-id", help="Only the record with this offsetMsgId, UNIQ_KEY or "
                 "ORIGIN_MESSAGE_ID, e.g. C000020247AB5FFD2B276B8361EB0006."),
]
KeyOpt = Annotated[
    str | None, typer.Option("--key", help="Only records with this KEYS token, e.g. order-42."),
]
LimitOpt = Annotated[
    int | None, typer.Option("--limit", help="Stop after this many records, e.g. 100."),
]
ProgressOpt = Annotated[
    bool,
    typer.Option("--progress/--no-progress",
                 help="Progress bar on stderr (shown only when stderr is a terminal)."),
]


def _selection(group: str, since: str | None, until: str | None, topic: str | None,
               msg_id: str | None, key: str | None, limit: int | None) -> DlqSelection:
    return DlqSelection(
        group=group, since=parse_time(since, "--since"), until=parse_time(until, "--until"),
        topic=topic, msg_id=msg_id, key=key, limit=limit,
    )


@contextmanager
def _progress(enabled: bool, what: str) -> Iterator[ProgressFn | None]:
    """A rich progress bar over commitlog bytes on stderr, or None (not a TTY / disabled)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn(what), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                  console=err_console(), transient=True) as bar:
        task = bar.add_task(what, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def list_cmd(
    store: StoreArg,
    target: Annotated[
        list[Path] | None,
        typer.Option("--target", help="A store resent into: count records done in its "
                     "journal (repeatable), e.g. /data/target-store. " + JOURNAL_HELP),
    ] = None,
    journal: Annotated[
        list[Path] | None,
        typer.Option("--journal", help="A resend journal file to count from (repeatable), "
                     "e.g. ./resend.jsonl."),
    ] = None,
    json_: JsonOpt = False,
    progress: ProgressOpt = True,
) -> None:
    """Every %DLQ%<group>: record count, store-time range, original topics (RETRY_TOPIC) and
    how many were already resent (per the journals of STORE itself and every --target).

    Example: mqtool dlq list ~/store --target /data/replay-store --json
    """
    from mqtool.dlq.journal import default_journal_path, resent_checker

    with handle_errors():
        st = open_store(store)
        paths = [default_journal_path(st.root)]
        paths += [default_journal_path(t) for t in target or []]
        paths += list(journal or [])
        with _progress(progress, "scanning commitlog") as pg:
            groups = list_groups(st, resent_ids=resent_checker(paths), progress=pg)
        if json_:
            print_json([g.to_dict() for g in groups])
        else:
            t = Table(title=f"dead-letter queues in {st.root}")
            for c in ("group", "count", "first stored (UTC)", "last stored (UTC)",
                      "original topics", "resent"):
                t.add_column(c, overflow="fold")
            for g in groups:
                t.add_row(g.group, str(g.count), fmt_time(g.first_store_timestamp),
                          fmt_time(g.last_store_timestamp),
                          ", ".join(f"{k} ({v})" for k, v in sorted(g.original_topics.items())),
                          str(g.resent))
            t.caption = f"{len(groups)} groups"
            out_console().print(t)
        exit_on_findings(st)


def show(
    store: StoreArg,
    group: GroupOpt,
    since: SinceOpt = None,
    until: UntilOpt = None,
    topic: TopicOpt = None,
    msg_id: MsgIdOpt = None,
    key: KeyOpt = None,
    limit: LimitOpt = None,
    body: BodyOpt = "utf8",
    json_: JsonOpt = False,
    jsonl: JsonlOpt = False,
) -> None:
    """Show the DLQ records of a group: original topic and msgId, reconsume count, hosts,
    times, properties and body.

    Example: mqtool dlq show ~/store --group cg_journey --topic JourneyTopic --limit 10
    """
    check_body_mode(body)
    sel = _selection(group, since, until, topic, msg_id, key, limit)
    with handle_errors():
        st = open_store(store)
        require_group(st, group)
        rows = select_dlq(st, sel)
        if json_:
            print_json([export_dict(m, body) for m in rows])
        elif jsonl:
            print_jsonl(export_dict(m, body) for m in rows)
        else:
            con = out_console()
            n = 0
            for m in rows:
                n += 1
                t = Table(show_header=False, title=f"{m.topic} #{m.queue_offset}",
                          title_justify="left")
                t.add_column("field", style="bold")
                t.add_column("value", overflow="fold")
                t.add_row("offsetMsgId", m.offset_msg_id)
                t.add_row("msgId (UNIQ_KEY)", m.uniq_key or "-")
                t.add_row("original topic", original_topic(m) or "-")
                t.add_row("original msgId", origin_msg_id(m) or "-")
                t.add_row("reconsumeTimes", str(m.reconsume_times))
                t.add_row("tags / keys", f"{m.tags or '-'} / {m.keys or '-'}")
                t.add_row("born", f"{fmt_time(m.born_timestamp)} from {m.born_host}")
                t.add_row("stored", f"{fmt_time(m.store_timestamp)} on {m.store_host}")
                t.add_row("properties", ", ".join(f"{k}={v}" for k, v in m.properties.items()))
                if body != "none":
                    from mqtool.jsonview import body_value

                    t.add_row(f"body ({m.body_length} B)", body_value(m, body) or "")
                con.print(t)
            con.print(f"{n} DLQ records of {sel.dlq_topic}", highlight=False)
        exit_on_findings(st)


def export(
    store: StoreArg,
    group: GroupOpt,
    format_: Annotated[
        str, typer.Option("--format", help="jsonl (the `mqtool messages` fields plus "
                          "originalTopic, originMsgId) or csv (the Dashboard's columns and "
                          "more), e.g. --format csv."),
    ] = "jsonl",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write to this file instead of stdout, "
                     "e.g. -o dlq.csv."),
    ] = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    topic: TopicOpt = None,
    msg_id: MsgIdOpt = None,
    key: KeyOpt = None,
    limit: LimitOpt = None,
    body: BodyOpt = "utf8",
    progress: ProgressOpt = True,
) -> None:
    """Export DLQ records as JSON lines or CSV, streaming (constant memory).

    Example: mqtool dlq export ~/store --group cg_journey --format csv -o dlq.csv
    """
    check_body_mode(body)
    if format_ not in ("jsonl", "csv"):
        raise typer.BadParameter(f"--format must be jsonl or csv, not {format_!r}")
    sel = _selection(group, since, until, topic, msg_id, key, limit)
    import json

    with handle_errors():
        st = open_store(store)
        require_group(st, group)
        out = open(output, "w", encoding="utf-8", newline="") if output else sys.stdout
        n = 0
        try:
            with _progress(progress, f"exporting {sel.dlq_topic}") as pg:
                if format_ == "csv":
                    out.write(csv_header())
                for m in select_dlq(st, sel, progress=pg):
                    if format_ == "csv":
                        out.write(csv_row(m, body))
                    else:
                        out.write(json.dumps(export_dict(m, body), ensure_ascii=False) + "\n")
                    n += 1
        finally:
            if output:
                out.close()
        if output:
            err_console().print(f"{n} records written to {output}", highlight=False)
        exit_on_findings(st)


def resend_cmd(
    store: StoreArg,
    group: GroupOpt,
    target: Annotated[
        Path, typer.Option("--target", help="The store to resend into (a reference store; "
                           "created when missing, geometry taken from its files when it is a "
                           "broker's store), e.g. /data/replay-store.", show_default=False),
    ],
    to: Annotated[
        str,
        typer.Option("--to", help="retry (default): %RETRY%<group>, consumed again only by the "
                     "group that failed; original: the topic in RETRY_TOPIC, which EVERY "
                     "group subscribed to it receives again, not only the failed one; any "
                     "other value: that topic, e.g. --to OrderTopicRepair."),
    ] = "retry",
    since: SinceOpt = None,
    until: UntilOpt = None,
    topic: TopicOpt = None,
    msg_id: MsgIdOpt = None,
    key: KeyOpt = None,
    limit: LimitOpt = None,
    journal: Annotated[
        Path | None,
        typer.Option("--journal", help="Resend journal file (default: "
                     "<target>/config/mqtool-resend/journal.jsonl), e.g. ./resend.jsonl."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print exactly what would be sent; write nothing "
                           "anywhere (not even the journal)."),
    ] = False,
    rate: Annotated[
        float | None, typer.Option("--rate", help="At most this many messages per second, "
                                   "e.g. 200."),
    ] = None,
    batch: Annotated[
        int, typer.Option("--batch", help="Group commit: journal fsyncs once per this many "
                          "puts (a kill leaves at most one batch to resolve), e.g. 16."),
    ] = 64,
    body: BodyOpt = "utf8",
    json_: JsonOpt = False,
) -> None:
    """Resend DLQ records into a store, exactly once per record and target.

    Each resent copy keeps body, tags, keys, user properties and UNIQ_KEY, has its reconsume
    count reset, and carries MQTOOL_DLQ_TOPIC, MQTOOL_DLQ_MSG_ID and MQTOOL_RESEND_ID. A
    journal in the target records every resend (write-ahead intent, put, done, each fsynced):
    running the same command again sends nothing twice, and a killed run can simply be re-run.
    Exit status 1 when any record failed.

    Example: mqtool dlq resend ~/store --group cg_journey --target /data/replay --rate 100
    """
    from mqtool.dlq.journal import ResendJournal, default_journal_path
    from mqtool.dlq.resend import Outcome, resend
    from mqtool.dlq.targets import RefStoreTarget

    check_body_mode(body)
    sel = _selection(group, since, until, topic, msg_id, key, limit)
    jpath = journal or default_journal_path(target)
    def show_outcome(o: Outcome) -> None:
        if json_:
            return
        where = ""
        if o.result is not None:
            where = f" {o.result.msg_id} q{o.result.queue_id}#{o.result.queue_offset}"
        line = f"{o.status:10} {o.dlq_msg_id} -> {o.topic or '-'}{where}"
        if o.reason:
            line += f"  ({o.reason})"
        sys.stdout.write(line + "\n")
        if o.message is not None:
            print_json(o.message.to_dict(body))

    with handle_errors():
        st = open_store(store)
        require_group(st, group)
        tgt = RefStoreTarget(target, read_only=dry_run)
        jr = ResendJournal.read(jpath) if dry_run else ResendJournal.open(jpath)
        try:
            records = select_dlq(st, sel)
            report = resend(records, group, tgt, jr, source=str(st.root), to=to,
                            dry_run=dry_run, rate=rate, batch=batch, on_outcome=show_outcome)
        finally:
            jr.close()
            tgt.close()
        d = report.to_dict(body)
        if json_:
            print_json(d)
        if report.stopped is not None:
            report_error(
                f"{report.stopped} (sent {d['sent']}, failed {d['failed']}, not reached "
                f"{d['notSent']}; journal {jpath}; run the same command again to go on)")
            raise typer.Exit(1)
        if not json_:
            err_console().print(
                f"selected {d['selected']}: sent {d['sent']}, skipped {d['skipped']}, "
                f"failed {d['failed']}" + (f", would send {d['wouldSend']} (dry run)"
                                           if dry_run else "")
                + f"; journal {jpath}", highlight=False)
        exit_on_findings(st)
        if not report.ok:
            raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``dlq`` command group."""
    dlq_app.command("list")(list_cmd)
    dlq_app.command("show")(show)
    dlq_app.command("export")(export)
    dlq_app.command("resend")(resend_cmd)
    app.add_typer(dlq_app, name="dlq")
