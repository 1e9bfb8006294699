"""``mqtool demo``: build a realistic demo store with the reference store engine.

The command line of :mod:`mqtool.refstore.demo` (the same concept, one layer up).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mqtool.cli.arguments import parse_time
from mqtool.cli.exits import handle_errors
from mqtool.cli.options import JsonOpt
from mqtool.cli.output import err_console, out_console, print_json
from mqtool.cli.refstore import parse_size
from mqtool.timefmt import fmt_time

if TYPE_CHECKING:
    from mqtool.refstore.demo import DemoSummary


def demo(
    directory: Annotated[
        Path,
        typer.Argument(help="Where to create the store (must not hold one), e.g. ./demo-store.",
                       metavar="DIR"),
    ] = Path("demo-store"),
    messages: Annotated[
        int, typer.Option("--messages", min=0, help="Business messages to produce besides the "
                          "showcase journeys, e.g. 3000.")
    ] = 3000,
    size: Annotated[
        str | None,
        typer.Option("--size", help="Also fill the commitlog with 1 KiB BenchTopic messages up "
                     "to this size (benchmark stores), e.g. 2GiB.", show_default=False),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed, e.g. 7.")] = 42,
    now: Annotated[
        str | None,
        typer.Option("--now", help="The broker's clock where the demo's history ends: epoch ms "
                     "or ISO-8601 (default 2026-11-21T21:35:00Z, the same store every run), "
                     "e.g. 2026-11-21T22:00:00Z.", show_default=False, metavar="TIME"),
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """Build a demo store with retries and DLQs; say what to try next.

    Topics OrderTopic, PaymentTopic, AuditTopic, NotifyTopic with groups cg_orders
    (maxReconsumeTimes 3), cg_payments (5), cg_audit, cg_notify; messages that succeed, fail
    once, fail twice, reach %DLQ%<group> after the max, go straight to the DLQ (delay level -1),
    delayed messages (delivered, and 1 h / 2 h ones still pending in SCHEDULE_TOPIC_XXXX), and
    retries not yet due. Every run with the same options writes the same store (same message
    ids, offsets and times): its history ends at --now, where the demo's clock stops.

    Example: mqtool demo ./demo-store --messages 5000
    """
    from mqtool.refstore.demo import DEMO_END, build_demo

    def progress(done: int, total: int) -> None:
        err_console().print(f"  {done:,} / {total:,}", highlight=False)

    given = parse_time(now, "--now")
    end = DEMO_END if given is None else given
    with handle_errors():
        summary = build_demo(
            directory, messages=messages, size_bytes=parse_size(size) if size else None,
            seed=seed, progress=progress if size else None, end_time=end,
        )
    if json_:
        print_json(summary.to_json())
    else:
        _render(summary, str(directory), end)
    err_console().print(f"built in {summary.seconds:.1f} s", highlight=False)


def _render(summary: DemoSummary, d_: str, end: int) -> None:
    from rich.table import Table

    con = out_console()
    t = Table(title=f"demo store {d_} ({summary.bytes:,} commitlog bytes)")
    t.add_column("topic")
    t.add_column("records", justify="right")
    for topic, n in sorted(summary.topics.items()):
        t.add_row(topic, f"{n:,}")
    con.print(t)
    con.print("behaviours: " + ", ".join(f"{k} {v}" for k, v in summary.behaviors.items()),
              highlight=False)
    con.print(f"the demo's clock stopped at {fmt_time(end)} UTC; still scheduled then, due "
              f"after it (delay level: count): {summary.pending_delayed}", highlight=False)
    tries = [
        f"mqtool inspect {d_}",
        f"mqtool messages {d_} --topic OrderTopic --limit 20",
        f"mqtool dlq list {d_}",
        f"mqtool dlq show {d_} --group cg_orders --limit 5",
        f"mqtool trace {d_} --key demo-dlq-0",
        f"mqtool trace {d_} --key demo-retry-twice-0",
    ]
    if summary.sample_dlq_uniq_key:
        tries.append(f"mqtool trace {d_} {summary.sample_dlq_uniq_key}")
    tries += [
        f"mqtool store tick {d_} --advance 2h   # the demo's clock goes on: due ones delivered",
        f"mqtool store consume {d_} -g cg_orders -t OrderTopic",
    ]
    con.print("\ntry next:")
    for c in tries:
        con.print(f"  {c}", highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
