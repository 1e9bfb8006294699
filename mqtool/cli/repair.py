"""``mqtool repair``: write a repaired copy of a store (the source is never written).

The command line of :mod:`mqtool.integrity.repair` (the same concept, one layer up).
"""

from __future__ import annotations

import typer

from mqtool.cli.exits import handle_errors
from mqtool.cli.options import (
    DryRunOpt,
    JsonOpt,
    OutOpt,
    StoreArg,
)
from mqtool.cli.output import err_console, out_console, print_json
from mqtool.formats.errors import EXIT_FINDINGS


def repair(
    store: StoreArg, out: OutOpt = None, dry_run: DryRunOpt = False, json_: JsonOpt = False
) -> None:
    """Write a repaired copy: what RocketMQ's recovery would leave.

    The copy keeps every record and unit RocketMQ keeps of the store. Its commitlog files are
    first put where their records say they belong (a misnamed file renamed, a duplicate or
    stray file left out, a file cut short padded); its commitlog ends at the last record
    RocketMQ's recovery accepts (the torn tail is zeroed, later files left out), consume queues
    are cut to valid units (missing ones re-dispatched), damaged index files are rebuilt, empty
    configs come from their .bak, offsets beyond a queue's max are clamped, and the checkpoint
    matches the data. On a 5.x store the timerlog ends before the first timer unit whose record
    is past the cut, and the timerwheel slots, config/timercheck and config/timermetrics follow
    it. What RocketMQ keeps although it is damaged (a unit whose tagsCode or an index entry
    whose key hash disagrees with the record's properties, units pointing into a missing file)
    is kept and listed as not repaired (exit 1), as are the records a file cut short lost.
    When no copy RocketMQ would start on can be written, one error line says why and nothing
    is written. STORE is only read; the copy is written to a temporary directory, fsynced,
    then renamed to --out (sparse: holes and zero runs take no space). Every change is printed
    (file, offset, before -> after).

    Example: mqtool repair ~/store --out ~/store-repaired
    Example: mqtool repair ~/store --dry-run
    """
    from mqtool.integrity.repair import repair as run_repair

    if out is None and not dry_run:
        raise typer.BadParameter("give --out DIR for the repaired copy (or --dry-run)",
                                 param_hint="--out")
    with handle_errors():
        res = run_repair(store, out, dry_run=dry_run)
        if json_:
            print_json(res.to_json())
        else:
            con = out_console()
            where = "dry run, nothing written" if res.out is None else f"copy written to {res.out}"
            con.print(f"repair of {res.source}: {where}", markup=False, highlight=False)
            con.print(f"valid commitlog data ends at {res.cut_at:,}", markup=False)
            if not res.changes:
                con.print("no changes: the store is what RocketMQ's recovery would leave",
                          markup=False)
            for c in res.changes:
                con.print(f"  {c}", markup=False, highlight=False, soft_wrap=True)
            from rich.text import Text

            for n in res.not_repaired:
                err_console().print(Text.assemble(("not repaired: ", "bold yellow"), n),
                                    highlight=False)
        if res.not_repaired:
            raise typer.Exit(EXIT_FINDINGS)


def register(app: typer.Typer) -> None:
    app.command("repair")(repair)
