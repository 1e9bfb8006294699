"""``mqtool store``: create and feed a reference store (produce, consume/fail, tick, status).

The command line of :mod:`mqtool.refstore` (the same concept, one layer up).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from mqtool.cli.arguments import as_bad_parameter, parse_time
from mqtool.cli.exits import handle_errors
from mqtool.cli.options import (
    BrokerConfOpt,
    ClockOpt,
    CommitlogSizeOpt,
    CqEntriesOpt,
    DialectOpt,
    IndexEntriesOpt,
    IndexSlotsOpt,
    JsonlOpt,
    JsonOpt,
    PropCrcOpt,
    StoreArg,
    WriteDelayLevelsOpt,
)
from mqtool.cli.output import err_console, out_console, print_json, print_jsonl
from mqtool.timefmt import fmt_time

if TYPE_CHECKING:
    from mqtool.refstore.engine import RefStore, StoreConfig

STORE_HELP = (
    "Create and feed a reference store: produce, consume, tick.\n\nA reference store is written "
    "by mqtool's own RocketMQ-compatible store engine: produce, consume with failures, advance "
    "the schedule clock. Writes lock the store; a store locked by a running broker is refused."
)



def parse_size(text: str) -> int:
    """``64MiB``, ``1GiB``, ``4096`` to bytes."""
    t = text.strip().lower().replace(" ", "")
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
             "kb": 1000, "mb": 10**6, "gb": 10**9, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30,
             "b": 1}
    for u in sorted(units, key=len, reverse=True):
        if t.endswith(u):
            num = t[: -len(u)]
            try:
                return int(float(num) * units[u])
            except ValueError:
                break
    try:
        return int(t)
    except ValueError as e:
        raise typer.BadParameter(f"bad size {text!r} (e.g. 64MiB, 2GiB)") from e


def _geometry(root: Path, commitlog_file_size: str | None = None, cq_entries: int | None = None,
              index_slots: int | None = None, index_entries: int | None = None,
              delay_levels: str | None = None, dialect: str | None = None,
              prop_crc: bool = False) -> StoreConfig | None:
    """The settings a new store is created with, from the geometry options."""
    from mqtool.refstore.ops import new_store_config

    return as_bad_parameter(new_store_config, root, {
        "commitlog_file_size": parse_size(commitlog_file_size) if commitlog_file_size else None,
        "cq_entries_per_file": cq_entries, "index_hash_slots": index_slots,
        "index_max_entries": index_entries, "message_delay_level": delay_levels,
        "dialect": dialect, "append_prop_crc": True if prop_crc else None,
    })


def _open(root: Path, now: str | None = None,
          config: StoreConfig | None = None) -> AbstractContextManager[RefStore]:
    from mqtool.refstore.ops import opened

    return opened(root, config, parse_time(now, "--now"))


@contextmanager
def _lines(file: Path | None) -> Iterator[TextIO | None]:
    """The lines of --file (stdin for ``-``), None without it."""
    if file is None:
        yield None
    elif str(file) == "-":
        yield sys.stdin
    else:
        with open(file, encoding="utf-8") as fh:
            yield fh


def init(
    store: StoreArg,
    commitlog_file_size: CommitlogSizeOpt = None,
    cq_entries: CqEntriesOpt = None,
    index_slots: IndexSlotsOpt = None,
    index_entries: IndexEntriesOpt = None,
    delay_levels: WriteDelayLevelsOpt = None,
    broker_conf: BrokerConfOpt = None,
    dialect: DialectOpt = None,
    prop_crc: PropCrcOpt = False,
    json_: JsonOpt = False,
) -> None:
    """Create an empty store (or open one) and print its settings.

    Example: mqtool store init /tmp/store --commitlog-file-size 64MiB --cq-entries 1000
    """
    from mqtool.delaylevels import levels_to_write
    from mqtool.refstore.ops import status

    with handle_errors():
        levels = levels_to_write(delay_levels, broker_conf)
    config = _geometry(store, commitlog_file_size, cq_entries, index_slots, index_entries,
                       levels, dialect, prop_crc)
    with handle_errors(), _open(store, config=config) as s:
        d = s.config.to_json()
        d["status"] = status(s)
    if json_:
        print_json(d)
    else:
        from rich.table import Table

        t = Table(title=f"store {store}", show_header=False)
        for k, v in d.items():
            if k != "status":
                t.add_row(k, str(v))
        out_console().print(t)


def produce(
    store: StoreArg,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="JSON lines, one message each: {\"topic\", \"body\" "
                     "(or \"bodyBase64\"), \"tags\", \"keys\", \"properties\", \"delayLevel\", "
                     "\"queueId\"}; - for stdin, e.g. -f msgs.jsonl.", show_default=False),
    ] = None,
    topic: Annotated[
        str | None,
        typer.Option("--topic", "-t", help="Topic (default for JSON lines without one), "
                     "e.g. OrderTopic.", show_default=False),
    ] = None,
    body: Annotated[
        str, typer.Option("--body", help="Body text when not reading --file, e.g. hello.")
    ] = "hello",
    count: Annotated[
        int, typer.Option("--count", min=1, help="How many copies of --body to put, e.g. 10.")
    ] = 1,
    tags: Annotated[
        str | None, typer.Option("--tags", help="TAGS of --body messages, e.g. TagA.",
                                 show_default=False)
    ] = None,
    keys: Annotated[
        str | None, typer.Option("--keys", help="KEYS (space separated), e.g. 'order-1 c-7'.",
                                 show_default=False)
    ] = None,
    delay_level: Annotated[
        int, typer.Option("--delay-level", help="Delay level of --body messages, e.g. 3.")
    ] = 0,
    now: ClockOpt = None,
    json_: JsonOpt = False,
    jsonl: JsonlOpt = False,
) -> None:
    """Put messages from a JSON-lines file, or --count of --body.

    Prints each put's msgId (offsetMsgId), UNIQ_KEY, topic, queue and offsets.

    Example: mqtool store produce /tmp/store -f msgs.jsonl --jsonl
    """
    from mqtool.refstore.ops import produce as put
    from mqtool.refstore.ops import put_result_dict

    with handle_errors():
        if file is None and topic is None:
            raise typer.BadParameter("give --file or --topic")
        with _open(store, now) as s, _lines(file) as lines:
            results = put(s, lines, topic, body=body, count=count, tags=tags, keys=keys,
                          delay_level=delay_level)
        rows = [put_result_dict(r) for r in results]
        if jsonl:  # (stops, if stdout is closed, as a streaming listing does)
            print_jsonl(rows)
            return
    if json_:
        print_json(rows)
    else:
        from rich.table import Table

        t = Table(title=f"{len(rows)} messages put")
        for col in ("msgId", "uniqKey", "topic", "queueId", "queueOffset", "physicalOffset"):
            t.add_column(col)
        for r in rows:
            t.add_row(*(str(r[c]) for c in ("msgId", "uniqKey", "topic", "queueId",
                                              "queueOffset", "physicalOffset")))
        out_console().print(t)


def consume(
    store: StoreArg,
    group: Annotated[str, typer.Option("--group", "-g", help="Consumer group, e.g. cg_orders.",
                                       show_default=False)],
    topic: Annotated[str, typer.Option("--topic", "-t", help="Topic, e.g. OrderTopic.",
                                       show_default=False)],
    fail_keys: Annotated[
        list[str] | None,
        typer.Option("--fail-key", help="Fail messages with this KEYS token (repeatable), "
                     "e.g. --fail-key order-1.", show_default=False),
    ] = None,
    fail_tags: Annotated[
        list[str] | None,
        typer.Option("--fail-tag", help="Fail messages with this tag (repeatable), e.g. TagB.",
                     show_default=False),
    ] = None,
    dlq_keys: Annotated[
        list[str] | None,
        typer.Option("--dlq-key", help="Send messages with this KEYS token straight to the "
                     "DLQ (delay level -1), e.g. --dlq-key order-9.", show_default=False),
    ] = None,
    fail_all: Annotated[bool, typer.Option("--fail-all", help="Fail every message.")] = False,
    fail_times: Annotated[
        int | None,
        typer.Option("--fail-times", help="Fail a message only while its reconsume times are "
                     "below this, e.g. 2 (default: always).", show_default=False),
    ] = None,
    max_reconsume_times: Annotated[
        int | None,
        typer.Option("--max-reconsume-times", help="Set the group's retryMaxTimes first, "
                     "e.g. 3.", show_default=False),
    ] = None,
    max_messages: Annotated[
        int | None,
        typer.Option("--max", help="Consume at most this many messages, e.g. 100.",
                     show_default=False),
    ] = None,
    now: ClockOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Consume a topic and its retries once, failing as told.

    Consume TOPIC and %RETRY%<group> once, failing what the options say (send-back).

    Failed messages go through SCHEDULE_TOPIC_XXXX to %RETRY%<group> (delay level 3 +
    reconsume times) or, past the group's retryMaxTimes, to %DLQ%<group>. A "behavior"
    property (OK, FAIL_ONCE, FAIL_TWICE, FAIL_ALWAYS, DLQ_DIRECT, as the demo writes) is
    honoured. Offsets are committed to config/consumerOffset.json.

    Example: mqtool store consume /tmp/store -g cg_orders -t OrderTopic --fail-tag TagB
    """
    from mqtool.refstore.ops import FailurePolicy
    from mqtool.refstore.ops import consume as run

    policy = FailurePolicy(
        frozenset(fail_keys or ()), frozenset(fail_tags or ()), frozenset(dlq_keys or ()),
        fail_all, fail_times,
    )
    with handle_errors(), _open(store, now) as s:
        counts = run(s, group, topic, policy, max_messages=max_messages,
                     retry_max_times=max_reconsume_times)
    if json_:
        print_json(counts)
    else:
        out_console().print(
            f"consumed {counts['ok']}, sent back for retry {counts['retried']}, "
            f"to the DLQ {counts['dlq']}"
        )


def send_back(
    store: StoreArg,
    group: Annotated[str, typer.Option("--group", "-g", help="Consumer group, e.g. cg_orders.",
                                       show_default=False)],
    offset: Annotated[int, typer.Option("--offset", help="Commitlog offset of the message the "
                                        "consumer failed, e.g. 2631.", show_default=False)],
    delay_level: Annotated[
        int, typer.Option("--delay-level", help="Client delay level: 0 = broker's choice "
                          "(3 + reconsume times), -1 = straight to the DLQ, e.g. 0.")
    ] = 0,
    max_reconsume_times: Annotated[
        int | None,
        typer.Option("--max-reconsume-times", help="Client's maxReconsumeTimes header "
                     "(default: the group's retryMaxTimes), e.g. 16.", show_default=False),
    ] = None,
    now: ClockOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Send one message back (CONSUMER_SEND_MSG_BACK): retry or DLQ.

    Example: mqtool store send-back /tmp/store -g cg_orders --offset 2631 --delay-level -1
    """
    from mqtool.refstore.ops import put_result_dict

    with handle_errors(), _open(store, now) as s:
        r = put_result_dict(s.send_back(group, offset, delay_level=delay_level,
                                        max_reconsume_times=max_reconsume_times))
    if json_:
        print_json(r)
    else:
        out_console().print(
            f"{r['topic']} queue {r['queueId']} offset {r['queueOffset']} "
            f"(commitlog {r['physicalOffset']}, msgId {r['msgId']})"
        )


def tick(
    store: StoreArg,
    advance: Annotated[
        str | None,
        typer.Option("--advance", help="Move the schedule clock this far past the store's last "
                     "record first, e.g. 30s, 5m, 2h.", show_default=False),
    ] = None,
    now: ClockOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Run the schedule service: deliver what is due by now.

    Delivered copies go to their REAL_TOPIC/REAL_QID (retries to %RETRY%<group>);
    config/delayOffset.json records the progress.

    Example: mqtool store tick /tmp/store --advance 1m
    """
    from mqtool.refstore.ops import tick as run

    with handle_errors(), _open(store, now) as s:
        d = run(s, advance)
    if json_:
        print_json(d)
    else:
        out_console().print(
            f"delivered {len(d['delivered'])}; still pending {sum(d['pending'].values())}"
            + (f", next due {fmt_time(d['nextDue'])}" if d["nextDue"] else "")
        )


def status(store: StoreArg, json_: JsonOpt = False) -> None:
    """Queues, pending delayed messages, groups and offsets.

    Opens the store for writing (recovering it if needed); use `mqtool inspect` on a store a
    broker holds.

    Example: mqtool store status /tmp/store --json
    """
    from mqtool.refstore.ops import status as get_status

    with handle_errors(), _open(store) as s:
        d = get_status(s)
    if json_:
        print_json(d)
        return
    from rich.table import Table

    con = out_console()
    t = Table(title=f"queues of {store}")
    for c in ("topic", "queueId", "maxOffset"):
        t.add_column(c)
    for q in d["queues"]:
        t.add_row(q["topic"], str(q["queueId"]), str(q["maxOffset"]))
    con.print(t)
    pend = d["pendingDelayed"]
    con.print(f"pending delayed: {pend or 'none'}; next due {fmt_time(d['nextDue'])}")
    err_console().print("(for a broker-held store use: mqtool inspect)", style="dim")


def register(app: typer.Typer) -> None:
    store_app = typer.Typer(name="store", help=STORE_HELP, no_args_is_help=True,
                            rich_markup_mode=None)
    store_app.command("init")(init)
    store_app.command("produce")(produce)
    store_app.command("consume")(consume)
    store_app.command("send-back")(send_back)
    store_app.command("tick")(tick)
    store_app.command("status")(status)
    app.add_typer(store_app, name="store")
