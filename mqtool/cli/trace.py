"""``mqtool trace``: one message's journey (original, schedule, retry, DLQ, resend copies)."""

from __future__ import annotations

from typing import Annotated

import typer

from mqtool.cli.arguments import exactly_one, now_value
from mqtool.cli.lookups import run_trace
from mqtool.cli.options import BrokerConfOpt, DelayLevelsOpt, HtmlOpt, JsonOpt, NowOpt, StoreArg


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
    exactly_one("the message to trace", {"ID": msg_id, "--key KEY": key})
    if topic is not None and key is None:
        raise typer.BadParameter("--topic goes with --key")
    run_trace(store, msg_id, key, topic, delay_levels, broker_conf, now_value(now), json_, html)


def register(app: typer.Typer) -> None:
    app.command("trace")(trace)
