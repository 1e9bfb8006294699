"""``mqtool scan``: Spark-backed bulk audits over one or more stores.

The command line of :mod:`mqtool.spark.scan` (the same concept, one layer up).

The command parses options, makes one library call (:func:`mqtool.spark.scan.run_scan`) and
renders the summary. pyspark is imported only when the command runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mqtool.cli.arguments import now_value
from mqtool.cli.exits import handle_errors, one_shot
from mqtool.cli.options import CrcOpt, HtmlOpt, JsonOpt, NowOpt
from mqtool.cli.output import err_console, out_console, print_json, report_error
from mqtool.formats.errors import EXIT_FINDINGS
from mqtool.spark import AUDITS
from mqtool.timefmt import fmt_time

if TYPE_CHECKING:
    from rich.table import Table

    from mqtool.spark.scan import ScanResult

MAX_TABLE_ROWS = 200


def _audits(values: list[str] | None) -> list[str]:
    if not values:
        return list(AUDITS)
    out: list[str] = []
    for v in values:
        for name in v.split(","):
            name = name.strip()
            if name and name not in out:
                out.append(name)
    bad = [a for a in out if a not in AUDITS]
    if bad:
        raise typer.BadParameter(
            f"unknown audit {', '.join(bad)}; choose from {', '.join(AUDITS)}",
            param_hint="--audits",
        )
    return out


def scan(
    stores: Annotated[
        list[Path],
        typer.Argument(
            help="One or more broker store roots (directories holding commitlog/), "
            "e.g. /data/broker-a/store /data/broker-b/store. On a cluster every executor must "
            "see them at the same path (a shared filesystem).",
            show_default=False,
        ),
    ],
    master: Annotated[
        str,
        typer.Option(
            help="Spark master: local[*] (embedded, default), local[2], spark://host:7077, "
            "yarn, ...",
        ),
    ] = "local[*]",
    conf: Annotated[
        list[str] | None,
        typer.Option(
            "--conf",
            help="Extra Spark setting key=value, repeatable, e.g. --conf spark.executor.memory=4g",
            metavar="K=V",
        ),
    ] = None,
    audit: Annotated[
        list[str] | None,
        typer.Option(
            "--audits",
            "--audit",
            help="Audits to run (repeatable or comma-separated; default all): "
            f"{','.join(AUDITS)}, e.g. --audits dlq,schedule. The "
            "consume-queue and index passes run only for integrity (schedule and lag read "
            "only the queues they concern)",
            metavar="NAME",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Write the full tables (messages, consumequeue and every audit) under this "
            "directory, e.g. --out /tmp/scan-out",
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format", help="Format of --out tables: parquet or json, e.g. --format json"
        ),
    ] = "parquet",
    sql: Annotated[
        str | None,
        typer.Option(
            help="Spark SQL over the views messages, records, consumequeue, index and the "
            "audit tables, e.g. --sql \"select topic, count(*) from messages group by topic\"",
            metavar="QUERY",
        ),
    ] = None,
    now: NowOpt = "store",
    crc: CrcOpt = True,
    split_mib: Annotated[
        int,
        typer.Option(
            "--split-mib", help="Commitlog split size in MiB (the unit a task resynchronises "
            "on; splits are packed into one wave of tasks over the cores, at most 1 GiB "
            "each), e.g. 64",
            min=1,
        ),
    ] = 128,
    json_: JsonOpt = False,
    report: HtmlOpt = None,
) -> None:
    """Audit whole stores with Spark: queues, DLQs, retries, lag, POP, timer.

    Runs an embedded local Spark by default (--master for a cluster). Prints a summary (the
    per-minute rates as one row per topic); --out, --json and --html have every row. Exits 1
    when an integrity finding is damage (an error); warnings are printed and exit 0. Needs
    Java 17+. No --delay-levels: the schedule audit reads each
    delayed message's due time from its consume-queue unit, whatever the levels.

    Example: mqtool scan ~/store --audits dlq,schedule --json
    Example: mqtool scan /data/broker-a/store /data/broker-b/store --html report.html
    """
    chosen = _audits(audit)
    if fmt not in ("parquet", "json"):
        raise typer.BadParameter("must be parquet or json", param_hint="--format")
    now_ms = now_value(now)
    with handle_errors():
        if report is not None:
            from mqtool.report.page import check_target

            check_target(report)  # before the long run, not after
        paths = [str(s) for s in stores]
        from mqtool.spark.scan import check_scannable, scan_with_spark

        for path in paths:
            check_scannable(path)

        result = scan_with_spark(
            paths, master=master, conf=conf or [], at_exit=one_shot(), audits=chosen, out=out,
            fmt=fmt, sql=sql, now_ms=_judged_now(paths, now_ms), check_crc=crc,
            split_size=split_mib * 1024 * 1024,
        )
        _show(result, report, json_, sql is not None)


def _judged_now(stores: list[str], now_ms: int | None) -> int:
    """``--now``, else the stores' own time (else the wall clock), said on stderr."""
    now_source = "given"
    if now_ms is None:
        now_ms, now_source = _stores_time(stores), "store"
        if now_ms == 0:  # the stores recorded no time at all
            now_ms, now_source = now_value("wall"), "wall clock"
    assert now_ms is not None
    err_console().print(
        f"overdue judged against {fmt_time(now_ms)} ("
        + {"given": "--now", "store": "the stores' own time; --now to change",
           "wall clock": "the stores recorded no time: wall clock"}[now_source]
        + ")", highlight=False, markup=False,
    )
    return now_ms


def _show(result: ScanResult, report: Path | None, json_: bool, sql: bool) -> None:
    """The scan's summary: the HTML report, then JSON or tables on stdout; with integrity
    findings one line per problem on stderr and exit 1."""
    if report is not None:
        from mqtool.report.scan_report import write_scan_report

        write_scan_report(report, result.summary)
        err_console().print(f"wrote {report}", highlight=False, markup=False)
    if json_:
        doc = dict(result.summary)
        if sql:
            doc["sql"] = {"columns": result.sql_columns, "rows": result.sql_rows}
        if result.outputs:
            doc["outputs"] = result.outputs
        print_json({**doc, "timings": _finished(result.timings)})
    else:
        render(result.summary, result.sql_columns, result.sql_rows, result.outputs)
    if result.summary.get("integrity"):
        # the README's contract: one line per problem on stderr, naming file and offset
        # (the table above is capped at MAX_TABLE_ROWS), then exit 1 if one is damage
        sys.stdout.flush()
        damage = False
        for store, f in result.findings():
            line = f"{store}: {f}"
            if f.severity == "error":
                damage = True
                report_error(line)
            else:
                err_console().print(f"{f.severity}: {line}", markup=False, highlight=False)
        if damage:
            raise typer.Exit(EXIT_FINDINGS)


def _finished(timings: dict[str, Any]) -> dict[str, Any]:
    """``timings`` (:func:`mqtool.spark.scan.scan_with_spark`) with ``output`` (from the
    scan's answer to now: the summary made ready to print) and ``total`` (from the process's
    start to now, as ``answered``)."""
    from mqtool.spark.session import process_seconds

    now, answered = process_seconds(), timings.get("answered")
    out = dict(timings)
    if now is not None and answered is not None:
        out["output"] = round(now - answered, 3)
    out["total"] = now
    return out


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows[:MAX_TABLE_ROWS]:
        t.add_row(*("-" if v is None else str(v) for v in r))
    if len(rows) > MAX_TABLE_ROWS:
        t.caption = f"{len(rows) - MAX_TABLE_ROWS} more rows: use --out or --json"
    return t


def render(
    summary: dict[str, Any], sql_columns: list[str], sql_rows: list[dict[str, Any]],
    outputs: dict[str, str],
) -> None:
    """Rich tables of a scan summary on stdout."""
    console = out_console()
    multi = len(summary.get("stores", [])) > 1

    def cols(*names: str) -> list[str]:
        return (["store"] if multi else []) + list(names)

    def pick(r: dict[str, Any], *names: str) -> list[Any]:
        return ([r["store"]] if multi else []) + [r.get(n) for n in names]

    tot = summary.get("totals", {})
    console.print(
        f"{tot.get('messages', 0)} messages, {tot.get('bytes', 0)} bytes"
        + (f", {tot['consumeQueueUnits']} consume-queue units" if "consumeQueueUnits" in tot
           else "")
        + " in "
        f"{len(summary.get('stores', []))} store(s); {summary.get('elapsedSeconds')} s",
        highlight=False,
    )
    if "queues" in summary:
        console.print(_table(
            "queues", cols("topic", "queue", "count", "bytes", "first stored", "last stored"),
            [pick(r, "topic", "queueId", "count", "bytes") + [
                fmt_time(r["firstStoreTimestamp"]), fmt_time(r["lastStoreTimestamp"])]
             for r in summary["queues"]],
        ))
    if "rate" in summary:
        t = _table(
            "rate (per minute of store time; every minute: --out, --json or --html)",
            cols("topic", "from (UTC)", "to (UTC)", "minutes", "messages", "mean msg/s",
                 "peak msg/s"),
            [([r["store"]] if multi else []) + r["row"] for r in rate_by_topic(summary["rate"])],
        )
        console.print(t)
    if "dlq" in summary:
        console.print(_table(
            "dead-letter queues", cols("group", "count", "original topics"),
            [pick(r, "group", "count") + [", ".join(
                f"{t} ({n})" for t, n in sorted(r["byOriginalTopic"].items()))]
             for r in summary["dlq"]],
        ))
    if "retry" in summary:
        console.print(_table(
            "retry depth (reconsumeTimes in %RETRY%<group>)",
            cols("group", "reconsumeTimes", "count"),
            [pick(r, "group", "reconsumeTimes", "count") for r in summary["retry"]],
        ))
    if "schedule" in summary:
        console.print(_table(
            "schedule backlog (SCHEDULE_TOPIC_XXXX)",
            cols("level", "pending", "overdue", "delayOffset", "maxOffset", "beyond max",
                 "next delivery"),
            [pick(r, "delayLevel", "pending", "overdue", "delayOffset", "maxOffset") + [
                "YES" if r["beyondMax"] else "", fmt_time(r["nextDeliverTimestamp"])]
             for r in summary["schedule"]],
        ))
    if any(r.get("overdue") for r in summary.get("schedule", [])):
        err_console().print(
            "note: overdue = due before the stores' own time (their latest record) and not "
            "delivered yet: no schedule service has run on the store since (a stopped broker, "
            "a copy, a demo whose clock stopped); --now judges at another time, and `mqtool "
            "store tick` runs the service on a reference store", highlight=False, markup=False)
    if "lag" in summary:
        console.print(_table(
            "consumer lag (the consumer offsets)",
            cols("group", "topic", "queue", "offset", "max", "lag"),
            [pick(r, "group", "topic", "queueId", "consumerOffset", "maxOffset", "lag")
             for r in summary["lag"]],
        ))
    if "pop" in summary:
        console.print(_table(
            "POP checkouts (rmq_sys_REVIVE_LOG: checkpoints and acks)",
            cols("group", "topic", "queue", "popped", "acked", "invisible changed",
                 "in flight", "invisible until", "revive due", "revived"),
            [pick(r, "group", "topic", "queueId", "popped", "acked", "invisibleChanged",
                  "inFlight") + [fmt_time(r["invisibleUntil"]), r["reviveDue"], r["revived"]]
             for r in summary["pop"]],
        ))
    if "timer" in summary:
        console.print(_table(
            "timer backlog (rmq_sys_wheel_timer)",
            cols("waiting", "overdue", "never delivered", "next due", "timer read up to",
                 "by real topic"),
            [pick(r, "waiting", "overdue", "neverDelivered") + [
                fmt_time(r["nextDue"]), fmt_time(r["lastReadTimeMs"]),
                ", ".join(f"{t} ({n})" for t, n in r["byTopic"].items())]
             for r in summary["timer"]],
        ))
    if "integrity" in summary:
        findings = summary["integrity"]
        if findings:
            console.print(_table(
                f"integrity: {len(findings)} finding(s)", cols("kind", "file", "offset", "detail"),
                [pick(r, "kind", "file")
                 + ["-" if r["offset"] is None else hex(r["offset"]), r["detail"]]
                 for r in findings],
            ))
        else:
            console.print("integrity: no findings", highlight=False)
    if sql_columns:
        console.print(_table(
            "sql", sql_columns, [[r.get(c) for c in sql_columns] for r in sql_rows]
        ))
    for name, path in outputs.items():
        err_console().print(f"wrote {name}: {path}", highlight=False, markup=False)
    sys.stdout.flush()


def rate_by_topic(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-minute rate rows of a scan summary as one row per store and topic: first and
    last minute, minutes with messages, messages, mean and peak msg/s over those minutes."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r.get("store", ""), r["topic"]), []).append(r)
    out = []
    for (store, topic), rs in sorted(by.items()):
        n = sum(r["count"] for r in rs)
        out.append({"store": store, "row": [
            topic, fmt_time(min(r["bucketStart"] for r in rs)),
            fmt_time(max(r["bucketStart"] for r in rs)), len(rs), n,
            f"{n / (60 * len(rs)):.2f}", f"{max(r['perSecond'] for r in rs):.2f}"]})
    return out


def register(app: typer.Typer) -> None:
    app.command("scan")(scan)


def _stores_time(stores: list[str]) -> int:
    """The latest of the stores' own times (:func:`mqtool.overview.store_time`), the one
    notion of "now" trace uses too."""
    from mqtool.overview import store_time
    from mqtool.store import Store

    best = 0
    for s in stores:
        with Store.open(s) as st:
            best = max(best, store_time(st))
    return best
