"""``mqtool dlq``: list, show, export and resend dead-lettered messages."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from mqtool.cli.arguments import as_bad_parameter, check_body_mode, parse_time
from mqtool.cli.exits import exit_on_findings, handle_errors, open_store
from mqtool.cli.options import (
    AccessKeyOpt,
    BodyOpt,
    GroupOpt,
    JsonlOpt,
    JsonOpt,
    KeyOpt,
    LimitOpt,
    MsgIdOpt,
    NamesrvOpt,
    ProgressOpt,
    SecretKeyOpt,
    SinceOpt,
    SourceArg,
    TimeoutOpt,
    TopicOpt,
    UntilOpt,
)
from mqtool.cli.output import err_console, out_console, print_json, print_jsonl, report_error
from mqtool.cli.stdout import stop_if_reader_gone
from mqtool.formats.errors import EXIT_ENVIRONMENT, EXIT_FINDINGS, MqtoolError, environment
from mqtool.timefmt import fmt_time

if TYPE_CHECKING:
    from mqtool.dlq import DlqSelection
    from mqtool.dlq.resend import Outcome
    from mqtool.query import ProgressFn
    from mqtool.remoting.acl import AclCredentials

JOURNAL_HELP = (
    "Resend journals live in each target store at config/mqtool-resend/journal.jsonl; for a "
    "live cluster under $XDG_STATE_HOME/mqtool/resend/<name servers>/<group>.jsonl "
    "(~/.local/state when unset); --journal chooses another place."
)

DLQ_HELP = ("Dead-letter queues: list, show, export and resend their records.\n\nEach group's "
            "dead letters are in %DLQ%<group>. " + JOURNAL_HELP)


def _acl(access_key: str | None, secret_key: str | None) -> AclCredentials | None:
    """The ACL credentials of --access-key and --secret-key (both or neither)."""
    from mqtool.remoting.acl import AclCredentials

    if (access_key is None) != (secret_key is None):
        raise typer.BadParameter("--access-key and --secret-key go together")
    return AclCredentials(access_key, secret_key) if access_key and secret_key else None


def _source(store: Path | None, namesrv: str | None, access_key: str | None,
            secret_key: str | None) -> tuple[str | None, AclCredentials | None]:
    """The live name servers (None: STORE is read) and, live, the ACL credentials."""
    from mqtool.dlq.actions import dlq_source

    ns = as_bad_parameter(dlq_source, store, namesrv)
    return ns, _acl(access_key, secret_key) if ns is not None else None


def _selection(group: str, since: str | None, until: str | None, topic: str | None,
               msg_id: str | None, key: str | None, limit: int | None) -> DlqSelection:
    from mqtool.dlq import DlqSelection

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
    store: SourceArg = None,
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
    namesrv: NamesrvOpt = None,
    access_key: AccessKeyOpt = None,
    secret_key: SecretKeyOpt = None,
    timeout: TimeoutOpt = 3.0,
    json_: JsonOpt = False,
    progress: ProgressOpt = True,
) -> None:
    """Every %DLQ%<group>: count, time range, original topics, resent.

    Every %DLQ%<group>: record count, store-time range, original topics (RETRY_TOPIC) and
    how many were already resent (per the journals of STORE itself and every --target; for a
    live cluster, per its default journals and every --journal).

    Example: mqtool dlq list ~/store --target /data/replay-store --json
    Example: mqtool dlq list --namesrv 127.0.0.1:9876 --json
    """
    from mqtool.dlq.actions import list_dlq

    ns, acl = _source(store, namesrv, access_key, secret_key)
    with handle_errors():
        with _progress(progress and ns is None, "scanning commitlog") as pg:
            listing = list_dlq(store, ns, targets=target or [], journals=journal or [],
                               open_store=open_store, acl=acl, timeout=timeout, progress=pg)
        groups, st = listing.groups, listing.store
        if json_:
            print_json([g.to_dict() for g in groups])
        else:
            from rich.table import Table

            t = Table(title=f"dead-letter queues in {listing.where}")
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
        if st is not None:
            exit_on_findings(st)


def show(
    group: GroupOpt,
    store: SourceArg = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    topic: TopicOpt = None,
    msg_id: MsgIdOpt = None,
    key: KeyOpt = None,
    limit: LimitOpt = None,
    body: BodyOpt = "utf8",
    json_: JsonOpt = False,
    jsonl: JsonlOpt = False,
    namesrv: NamesrvOpt = None,
    access_key: AccessKeyOpt = None,
    secret_key: SecretKeyOpt = None,
    timeout: TimeoutOpt = 3.0,
) -> None:
    """The DLQ records of a group, one table each.

    Show the DLQ records of a group: original topic and msgId, reconsume count, hosts,
    times, properties and body. Live (--namesrv), the %DLQ% queues are read between their
    min and max offsets; no consumer offset is committed.

    Example: mqtool dlq show ~/store --group cg_journey --topic JourneyTopic --limit 10
    Example: mqtool dlq show --namesrv 127.0.0.1:9876 --group cg_journey --json
    """
    from mqtool.dlq import export_dict, origin_msg_id, original_topic
    from mqtool.dlq.actions import dlq_records

    check_body_mode(body)
    sel = _selection(group, since, until, topic, msg_id, key, limit)
    ns, acl = _source(store, namesrv, access_key, secret_key)
    with handle_errors(), dlq_records(store, ns, sel, open_store=open_store, acl=acl,
                                      timeout=timeout) as (rows, st):
        if json_:
            print_json([export_dict(m, body) for m in rows])
        elif jsonl:
            print_jsonl(export_dict(m, body) for m in rows)
        else:
            from rich.table import Table

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
        if st is not None:
            exit_on_findings(st)


def export(
    group: GroupOpt,
    store: SourceArg = None,
    format_: Annotated[
        str, typer.Option("--format", help="jsonl (the `mqtool messages` fields plus "
                          "originalTopic, originMsgId) or csv (the Dashboard's columns and "
                          "more), e.g. --format csv."),
    ] = "jsonl",
    output: Annotated[
        Path | None,
        typer.Option("--out", "--output", "-o", help="Write to this file instead of stdout, "
                     "e.g. --out dlq.csv.", metavar="FILE"),
    ] = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    topic: TopicOpt = None,
    msg_id: MsgIdOpt = None,
    key: KeyOpt = None,
    limit: LimitOpt = None,
    body: BodyOpt = "utf8",
    progress: ProgressOpt = True,
    namesrv: NamesrvOpt = None,
    access_key: AccessKeyOpt = None,
    secret_key: SecretKeyOpt = None,
    timeout: TimeoutOpt = 3.0,
) -> None:
    """Export DLQ records as JSON lines or CSV.

    Export DLQ records as JSON lines or CSV, streaming (constant memory), from STORE or a
    live cluster (--namesrv; no consumer offset is committed).

    Example: mqtool dlq export ~/store --group cg_journey --format csv -o dlq.csv
    Example: mqtool dlq export --namesrv 127.0.0.1:9876 --group cg_journey -o dlq.jsonl
    """
    from mqtool.dlq.actions import dlq_records

    check_body_mode(body)
    if format_ not in ("jsonl", "csv"):
        raise typer.BadParameter(f"--format must be jsonl or csv, not {format_!r}")
    sel = _selection(group, since, until, topic, msg_id, key, limit)
    ns, acl = _source(store, namesrv, access_key, secret_key)
    with handle_errors(), _progress(progress, f"exporting {sel.dlq_topic}") as pg, \
            dlq_records(store, ns, sel, open_store=open_store, acl=acl, timeout=timeout,
                        progress=pg) as (rows, st):
        n = [0]
        try:
            out = open(output, "w", encoding="utf-8", newline="") if output else sys.stdout
            try:
                _write_export(rows, out, format_, body, n)
            finally:
                if output:
                    out.close()
        except OSError as e:  # e.g. a full disk: one line, and no partial file left behind
            if not output or isinstance(e, BrokenPipeError):
                raise
            Path(output).unlink(missing_ok=True)
            raise environment(MqtoolError(
                f"{output}: cannot write the export: {e.strerror or e} (after {n[0]} "
                "records); the partial file was removed"
            )) from None
        if output:
            err_console().print(f"{n[0]} records written to {output}", highlight=False)
        if st is not None:
            exit_on_findings(st)


def _write_export(rows: Iterable[Any], out: TextIO, format_: str, body: str,
                  n: list[int]) -> None:
    """The export's rows to ``out``, counted in ``n[0]`` as they are written; to stdout, it
    stops when the reader is gone (``| head``)."""
    import json

    from mqtool.dlq import csv_header, csv_row, export_dict

    if format_ == "csv":
        out.write(csv_header())
    for m in rows:
        out.write(csv_row(m, body) if format_ == "csv"
                  else json.dumps(export_dict(m, body), ensure_ascii=False) + "\n")
        n[0] += 1
        if out is sys.stdout:
            stop_if_reader_gone()


def resend_cmd(
    group: GroupOpt,
    store: Annotated[
        Path | None,
        typer.Argument(help="Store to read the DLQ records from (e.g. a dead broker's disk, "
                       "~/store); left out: the live %DLQ%<group> of the --namesrv cluster.",
                       show_default=False),
    ] = None,
    target: Annotated[
        Path | None,
        typer.Option("--target", help="A store to resend into (a reference store; created "
                     "when missing or empty, geometry taken from its files when it is a "
                     "broker's store; any other existing directory is refused), e.g. "
                     "/data/replay-store. Leave it out to resend into the --namesrv cluster.",
                     show_default=False),
    ] = None,
    namesrv: NamesrvOpt = None,
    to: Annotated[
        str,
        typer.Option("--to", help="retry (default): %RETRY%<group> (a POP group's own POP "
                     "retry topic, %RETRY%<group>_<topic> or +<topic>), consumed again only by "
                     "the group that failed; original: the topic in RETRY_TOPIC (of a POP "
                     "retry topic, its topic part), which EVERY group subscribed to it "
                     "receives again, not only the failed one; any other value: that topic, "
                     "which must exist, e.g. --to OrderTopicRepair."),
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
                     "<target>/config/mqtool-resend/journal.jsonl; live: $XDG_STATE_HOME/"
                     "mqtool/resend/<name servers>/<group>.jsonl), e.g. ./resend.jsonl."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print exactly what would be sent, after the "
                           "same checks of the target as a real run; write nothing anywhere "
                           "(not even the journal)."),
    ] = False,
    rate: Annotated[
        float | None, typer.Option("--rate", help="At most this many messages per second, "
                                   "e.g. 200."),
    ] = None,
    batch: Annotated[
        int, typer.Option("--batch", help="Group commit: journal fsyncs once per this many "
                          "sends (in flight together to a live cluster; a kill leaves at most "
                          "one batch to resolve), e.g. 16.", min=1),
    ] = 64,
    commit: Annotated[
        bool, typer.Option("--commit", help="Live source only: after the run, commit the "
                           "group's consumer offset on %DLQ%<group> up to the first record not "
                           "resent (without it no offset is committed)."),
    ] = False,
    access_key: AccessKeyOpt = None,
    secret_key: SecretKeyOpt = None,
    timeout: TimeoutOpt = 3.0,
    body: BodyOpt = "utf8",
    json_: JsonOpt = False,
) -> None:
    """Resend DLQ records to a cluster or a store, once per record.

    Resend DLQ records into a live cluster or a store, exactly once per record and target.

    Each resent copy keeps body, tags, keys, user properties and UNIQ_KEY, has its reconsume
    count reset, and carries MQTOOL_DLQ_TOPIC, MQTOOL_DLQ_MSG_ID and MQTOOL_RESEND_ID (also
    added to KEYS, so the broker indexes it). A journal records every resend (write-ahead
    intent, send, done; group-committed fsyncs): running the same command again sends nothing
    twice, and a killed run can simply be run again (a send whose outcome a crash left unknown
    is looked up on the broker, QUERY_MESSAGE by the resend id, before it is sent again).
    With one error line, exit status 1 when any record failed, 3 when the run stopped (the
    cluster could not be reached or refused).

    Example: mqtool dlq resend --namesrv 127.0.0.1:9876 --group cg_journey --rate 100
    Example: mqtool dlq resend ~/dead-broker/store --group cg_journey --namesrv 10.0.0.5:9876
    Example: mqtool dlq resend ~/store --group cg_journey --target /data/replay --dry-run
    """
    from mqtool.dlq.actions import plan_resend, run_resend

    check_body_mode(body)
    sel = _selection(group, since, until, topic, msg_id, key, limit)
    plan = as_bad_parameter(plan_resend, group, store, target, namesrv, journal, commit=commit)
    acl = _acl(access_key, secret_key) if plan.namesrv is not None else None
    with handle_errors():
        run = run_resend(plan, sel, open_store=open_store, acl=acl, timeout=timeout, to=to,
                         dry_run=dry_run, rate=rate, batch=batch,
                         on_outcome=None if json_ else partial(_print_outcome, body))
        d = run.to_dict(body)
        if json_:
            print_json(d)
        _resend_outcome(run.report, d, run.committed, f"; journal {plan.journal}", dry_run,
                        json_)
        if run.store is not None:
            exit_on_findings(run.store)


def _print_outcome(body: str, o: Outcome) -> None:
    """One line per resent record (and the copy with --dry-run)."""
    where = ""
    if o.result is not None:
        where = f" {o.result.msg_id} q{o.result.queue_id}#{o.result.queue_offset}"
    line = f"{o.status:10} {o.dlq_msg_id} -> {o.topic or '-'}{where}"
    if o.reason:
        line += f"  ({o.reason})"
    sys.stdout.write(line + "\n")
    if o.message is not None:
        print_json(o.message.to_dict(body))


def _resend_outcome(report: Any, d: dict[str, Any], committed: Any, tail: str, dry_run: bool,
                    json_: bool) -> None:
    """The last line of a resend: why it stopped (exit 3: the cluster could not be reached or
    refused), how many records failed (exit 1), or what it did."""
    if report.stopped is not None:
        report_error(
            f"{report.stopped} (sent {d['sent']}, failed {d['failed']}, not reached "
            f"{d['notSent']}{tail}; run the same command again to go on)")
        raise typer.Exit(EXIT_ENVIRONMENT)
    if not report.ok:
        first = next(o for o in report.outcomes if o.status == "failed")
        report_error(
            f"{d['failed']} of {d['selected']} records not resent (first: {first.reason}); "
            f"sent {d['sent']}, skipped {d['skipped']}{tail}; run the same command again "
            "to retry them")
        raise typer.Exit(EXIT_FINDINGS)
    if not json_:
        err_console().print(
            f"selected {d['selected']}: sent {d['sent']}, skipped {d['skipped']}, "
            f"failed {d['failed']}" + (f", would send {d['wouldSend']} (dry run)"
                                       if dry_run else "")
            + (f", committed {committed}" if committed else "")
            + tail, highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``dlq`` command group."""
    dlq_app = typer.Typer(name="dlq", help=DLQ_HELP, no_args_is_help=True, rich_markup_mode=None)
    dlq_app.command("list")(list_cmd)
    dlq_app.command("show")(show)
    dlq_app.command("export")(export)
    dlq_app.command("resend")(resend_cmd)
    app.add_typer(dlq_app, name="dlq")
