"""``mqtool demo``: build a realistic demo store with the reference store engine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from mqtool.cli.common import JsonOpt, err_console, handle_errors, out_console, print_json
from mqtool.cli.store import parse_size


def demo(
    directory: Annotated[
        Path,
        typer.Argument(help="Where to create the store (must not hold one), e.g. ./demo-store."),
    ] = Path("demo-store"),
    messages: Annotated[
        int, typer.Option("--messages", "-n", help="Business messages to produce, e.g. 3000.")
    ] = 3000,
    size: Annotated[
        str | None,
        typer.Option("--size", help="Also fill the commitlog with 1 KiB BenchTopic messages up "
                     "to this size (benchmark stores), e.g. 2GiB.", show_default=False),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed, e.g. 7.")] = 42,
    json_: JsonOpt = False,
) -> None:
    """Build a realistic demo store and print what is in it and what to try next.

    Topics OrderTopic, PaymentTopic, AuditTopic, NotifyTopic with groups cg_orders
    (maxReconsumeTimes 3), cg_payments (5), cg_audit, cg_notify; messages that succeed, fail
    once, fail twice, reach %DLQ%<group> after the max, go straight to the DLQ (delay level -1),
    delayed messages (delivered, and 1 h / 2 h ones still pending in SCHEDULE_TOPIC_XXXX), and
    retries not yet due. The store's history ends now.

    Example: mqtool demo ./demo-store --messages 5000
    """
    from mqtool.refstore.demo import build_demo

    def progress(done: int, total: int) -> None:
        err_console().print(f"  {done:,} / {total:,}", highlight=False)

    with handle_errors():
        summary = build_demo(
            directory, messages=messages, size_bytes=parse_size(size) if size else None,
            seed=seed, progress=progress if size else None,
        )
    d = summary.to_json()
    if json_:
        print_json(d)
        return
    con = out_console()
    t = Table(title=f"demo store {directory} ({summary.bytes:,} commitlog bytes, "
              f"{summary.seconds:.1f}s)")
    t.add_column("topic")
    t.add_column("records", justify="right")
    for topic, n in sorted(summary.topics.items()):
        t.add_row(topic, f"{n:,}")
    con.print(t)
    con.print("behaviours: " + ", ".join(f"{k} {v}" for k, v in summary.behaviors.items()))
    con.print(f"pending delayed (level: count): {summary.pending_delayed}")
    d_ = str(directory)
    tries = [
        f"mqtool inspect {d_}",
        f"mqtool messages {d_} --topic OrderTopic",
        f"mqtool dlq list {d_}",
        f"mqtool dlq show {d_} --group cg_orders",
    ]
    tries.append(f"mqtool trace {d_} --key demo-dlq-0")
    tries.append(f"mqtool trace {d_} --key demo-retry-twice-0")
    if summary.sample_dlq_uniq_key:
        tries.append(f"mqtool trace {d_} {summary.sample_dlq_uniq_key}")
    tries += [
        f"mqtool store tick {d_} --advance 2h",
        f"mqtool store consume {d_} -g cg_orders -t OrderTopic",
    ]
    con.print("\ntry next:")
    for c in tries:
        con.print(f"  {c}", highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
