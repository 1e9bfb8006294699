"""``mqtool verify``: integrity checks of a store, and what the broker's next start would cut."""

from __future__ import annotations

import sys
from typing import Any

import typer

from mqtool.cli.arguments import now_value
from mqtool.cli.exits import handle_errors
from mqtool.cli.options import (
    BrokerConfOpt,
    CrcOpt,
    DelayLevelsOpt,
    JsonOpt,
    StartNowOpt,
    StoreArg,
)
from mqtool.cli.output import err_console, out_console, print_json, say_live
from mqtool.formats.errors import EXIT_FINDINGS, Severity


def _progress_bar(total: int) -> tuple[Any, Any]:
    """A rich progress bar on stderr for stores over 64 MiB (None on small ones / no tty)."""
    if total < (64 << 20) or not sys.stderr.isatty():
        return None, None
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    prog = Progress("verifying", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                    console=err_console(), transient=True)
    task = prog.add_task("verify", total=total)
    return prog, lambda n: prog.advance(task, n)


def _store_bytes(root: Any) -> int:
    from pathlib import Path

    total = 0
    from mqtool.formats.store_dirs import store_root

    r = store_root(Path(root))
    for sub in ("commitlog", "consumequeue", "index"):
        d = r / sub
        if d.is_dir():
            total += sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
    return total


def verify(
    store: StoreArg, json_: JsonOpt = False, crc: CrcOpt = True,
    delay_levels: DelayLevelsOpt = None, broker_conf: BrokerConfOpt = None,
    now: StartNowOpt = "wall",
) -> None:
    """Check a store's integrity; say what a restart would lose.

    Checks the commitlog record chain (magic, sizes, PHYSICALOFFSET, body CRC), consume-queue
    units and index entries against the commitlog, the checkpoint against the data, and the
    config files (offsets beyond queue max, empty files with a .bak). Prints what was read,
    one line per finding (FILE @ OFFSET, the byte offset inside that file), and what RocketMQ's
    recovery would cut at the broker's next start. Says where the delay levels come from
    (--delay-levels, --broker-conf, the store's evidence or the broker's default) and warns
    where the given levels contradict the store. The restart is judged at this machine's
    clock (--now: another time). Exits 1 when there is any error.

    Example: mqtool verify ~/store
    Example: mqtool verify ~/store --json --no-crc
    Example: mqtool verify ~/store --now 2026-12-01T08:00:00Z
    """
    from mqtool.integrity.checks import verify as run_verify
    from mqtool.integrity.recovery import restart_loss

    with handle_errors():
        start_ms = now_value(now)
        prog, advance = _progress_bar(_store_bytes(store))
        if prog is not None:
            with prog:
                report = run_verify(store, check_crc=crc, progress=advance,
                                    delay_levels=delay_levels, broker_conf=broker_conf)
        else:
            report = run_verify(store, check_crc=crc, delay_levels=delay_levels,
                                broker_conf=broker_conf)
        if report.lock["locked"]:
            say_live(report.lock["pid"])
        loss = restart_loss(report, start_ms if start_ms is not None
                            else report.last_store_ts or None)
        errors = report.errors
        if json_:
            print_json({
                "summary": report.summary,
                "findings": [f.to_json() for f in report.findings],
                "restartWouldLose": loss.to_json(),
            })
        else:
            _print_human(report, loss)
        if errors:
            raise typer.Exit(EXIT_FINDINGS)


def _print_human(report: Any, loss: Any) -> None:
    from rich.table import Table
    from rich.text import Text

    con = out_console()
    s = report.summary
    t = Table(title=f"verify {s['store']}", show_header=False)
    t.add_column("what")
    t.add_column("value")
    t.add_row("state", s["state"])
    t.add_row("commitlog", f"{s['commitlogFiles']} files, {s['commitlogBytes']:,} bytes; "
              f"{s['messages']:,} messages ({s['messageBytes']:,} bytes), data ends at "
              f"{s['dataEnd']:,}; {s['unreadableBytes']:,} unreadable bytes")
    t.add_row("body CRC", "checked" if s["crcChecked"] else "not checked (--no-crc)")
    t.add_row("consume queues", f"{s['consumeQueues']} queues, {s['consumeQueueUnits']:,} units")
    t.add_row("index", f"{s['indexFiles']} files, {s['indexEntries']:,} entries")
    t.add_row("configs", ", ".join(s["configFiles"]) or "-")
    if "delayLevels" in s:
        t.add_row("delay levels from", s["delayLevels"]["summary"])
    if "timer" in s:
        tm = s["timer"]
        t.add_row("timer (5.x)", f"{tm['timerlogFiles']} timerlog files, {tm['timerlogUnits']:,} "
                  f"units (data ends at {tm['timerlogEnd']:,}); timerwheel "
                  f"{tm.get('slots', 0)} slots in use, {tm.get('pendingSlots', 0)} pending")
    t.add_row("findings", f"{s['errors']} errors, {s['warnings']} warnings, {s['infos']} info")
    con.print(t)
    if report.findings:
        con.print(Text("findings (FILE @ byte offset inside that file)", style="bold"))
        for f in report.findings:
            con.print(f"  {f.severity}: {f}", markup=False, highlight=False, soft_wrap=True)
    con.print(Text("restart would lose", style="bold"))
    lj = loss.to_json()
    lines = [
        f"  recovery: {lj['recovery']}, from {lj['startFile'] or '-'}",
        f"  valid data ends at {lj['cutAt']:,}"
        + (f" ({lj['cutFile']} @ {lj['cutFileOffset']:#x})" if lj["cutFile"] else ""),
        f"  torn tail cut: {lj['lostMessages']} messages, {lj['lostBytes']:,} bytes",
    ]
    for q, n in lj["lostByQueue"].items():
        lines.append(f"    {q}: {n} messages")
    lines.append(f"  consume-queue units dropped: {lj['cqUnitsDroppedTotal']}"
                 + (f" (re-dispatched: {lj['cqUnitsRebuilt']})" if lj["cqUnitsRebuilt"] else ""))
    for q, n in lj["cqUnitsDropped"].items():
        lines.append(f"    {q}: {n} units")
    if lj["indexFilesDestroyed"]:
        lines.append(f"  index files destroyed: {', '.join(lj['indexFilesDestroyed'])} "
                     f"({lj['indexEntriesDestroyed']} entries; {lj['indexEntriesReindexed']} "
                     "re-indexed by the re-dispatch)")
    lines.append(f"  index entries left pointing past the cut: {lj['indexEntriesDangling']}")
    lines.extend(loss.timer_lines())
    lines.append("  configs loaded from .bak: " + (", ".join(lj["configsFromBak"]) or "none"))
    if lj["configsStopStart"]:
        lines.append("  configs the broker cannot load, so it does not start: "
                     + ", ".join(lj["configsStopStart"]))
    if loss.nothing:
        lines.append("  nothing: the broker would start on this store as it is")
    for line in lines:
        con.print(line, markup=False, highlight=False, soft_wrap=True)
    errors = [f for f in report.findings if f.severity == Severity.ERROR]
    if errors:
        sys.stdout.flush()
        err_console().print(Text.assemble(
            ("error: ", "bold red"), f"{len(errors)} error finding(s) in {report.root}, listed "
            "above"), highlight=False)


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)
