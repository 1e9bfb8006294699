"""Read commands: ``messages``, ``cq``, ``msg``, ``index``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mqtool.cli.arguments import check_body_mode, parse_time, require_with
from mqtool.cli.exits import exit_on_findings, handle_errors, open_store
from mqtool.cli.options import (
    BodyOpt,
    JsonlOpt,
    JsonOpt,
    LimitOpt,
    SinceOpt,
    StoreArg,
    UntilOpt,
)
from mqtool.cli.output import out_console, print_json, print_jsonl, report_error
from mqtool.formats.errors import EXIT_FINDINGS
from mqtool.timefmt import fmt_time

if TYPE_CHECKING:
    from mqtool.store import Store


def _short(s: str | None, n: int = 40) -> str:
    if not s:
        return "-"
    return s if len(s) <= n else s[: n - 1] + "…"


def messages(
    store: StoreArg,
    topic: Annotated[str | None, typer.Option(help="Only this topic, e.g. TopicA.")] = None,
    queue: Annotated[int | None, typer.Option(help="Only this queue id (with --topic).")] = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    tag: Annotated[str | None, typer.Option(help="Only messages with this TAGS value.")] = None,
    key: Annotated[str | None, typer.Option(help="Only messages with this KEYS token.")] = None,
    offset: Annotated[
        int, typer.Option(help="Start at this commitlog offset (physical order).")
    ] = 0,
    limit: LimitOpt = None,
    body: BodyOpt = "none",
    json_: JsonOpt = False,
    jsonl: JsonlOpt = False,
) -> None:
    """List messages in commitlog (physical) order, with filters.

    Example: mqtool messages ~/store --topic TopicA --since 2026-11-21T21:00:00Z --jsonl
    """
    from mqtool.query import MessageFilter, select_messages

    check_body_mode(body)
    require_with(queue, topic, "--queue", "--topic")
    flt = MessageFilter(
        topic=topic, queue_id=queue, since=parse_time(since, "--since"),
        until=parse_time(until, "--until"), tag=tag, key=key, start_offset=offset, limit=limit,
    )
    with handle_errors():
        st = open_store(store)
        rows = select_messages(st, flt)
        if jsonl or json_:
            from mqtool.jsonview import message_dict

            dicts = (message_dict(m, body) for m in rows)
            if jsonl:
                n = print_jsonl(dicts)
            else:
                listed = list(dicts)
                print_json(listed)
                n = len(listed)
        else:
            n = _message_table(st, rows, body)
        exit_on_findings(st)
        if topic is not None and n == 0:
            _no_such_topic(st, topic, queue)


def _message_table(st: Store, rows: Iterable[Any], body: str) -> int:
    """The messages as a table on stdout; how many."""
    from rich.table import Table

    from mqtool.jsonview import body_value

    t = Table(title=f"messages in {st.root}", show_lines=False)
    for c in ("offset", "topic", "q", "qOffset", "stored (UTC)", "tags", "keys", "uniqKey",
              "size", "rc"):
        t.add_column(c, overflow="fold")
    if body != "none":
        t.add_column("body", overflow="fold")
    n = 0
    for m in rows:
        cells = [str(m.physical_offset), m.topic, str(m.queue_id), str(m.queue_offset),
                 fmt_time(m.store_timestamp), _short(m.tags, 20), _short(m.keys, 30),
                 m.uniq_key or "-", str(m.total_size), str(m.reconsume_times)]
        if body != "none":
            cells.append(_short(body_value(m, body), 60))
        t.add_row(*cells)
        n += 1
    t.caption = f"{n} messages"
    out_console().print(t)
    return n


def _no_such_topic(st: Store, topic: str, queue: int | None = None) -> None:
    """Nothing of ``topic`` (``queue``) was read: when the store has no consume queue of it
    either, say which topics (or queues of the topic) it has (exit 1: what was asked for is
    not there)."""
    ids = st.queue_ids()
    topics = sorted({t for t, _ in ids})
    if topic not in topics:
        report_error(
            f"no topic {topic!r} in {st.root}; its topics: {', '.join(topics) or 'none'}")
        raise typer.Exit(EXIT_FINDINGS)
    queues = sorted(q for t, q in ids if t == topic)
    if queue is not None and queue not in queues:
        report_error(f"no queue {queue} of topic {topic!r} in {st.root}; its queues: "
                     f"{', '.join(map(str, queues))}")
        raise typer.Exit(EXIT_FINDINGS)


def cq(
    store: StoreArg,
    topic: Annotated[str | None, typer.Argument(help="Topic (all topics when omitted).")] = None,
    queue: Annotated[int | None, typer.Argument(help="Queue id (all queues when omitted).")] = None,
    json_: JsonOpt = False,
    jsonl: JsonlOpt = False,
) -> None:
    """Consume-queue units (20 bytes each) of every queue, or of one.

    Example: mqtool cq ~/store SCHEDULE_TOPIC_XXXX 2 --jsonl
    """
    from mqtool.jsonview import cq_dict

    with handle_errors():
        st = open_store(store)
        queues = [(t, q) for t, q in st.queue_ids()
                  if (topic is None or t == topic) and (queue is None or q == queue)]
        if topic is not None and not queues:
            from mqtool.store import StoreError

            have = sorted({t for t, _ in st.queue_ids()} if queue is None else
                          {f"{t}/{q}" for t, q in st.queue_ids() if t == topic})
            raise StoreError(f"{st.root}: no consume queue {topic}"
                             + (f"/{queue}" if queue is not None else "")
                             + f"; it has {', '.join(have) or 'none'}")

        def rows() -> Iterator[dict[str, Any]]:
            for t, q in queues:
                for qe in st.queue_entries(t, q):
                    yield cq_dict(qe)

        if jsonl:
            print_jsonl(rows())
        elif json_:
            print_json(list(rows()))
        else:
            from rich.table import Table

            tb = Table(title=f"consume queues in {st.root}")
            for c in ("topic", "queue", "qOffset", "commitLogOffset", "size", "tagsCode"):
                tb.add_column(c)
            n = 0
            for r in rows():
                tb.add_row(r["topic"], str(r["queueId"]), str(r["queueOffset"]),
                           str(r["commitLogOffset"]), str(r["storeSize"]), str(r["tagsCode"]))
                n += 1
            tb.caption = f"{n} entries"
            out_console().print(tb)
        exit_on_findings(st)


def msg(
    store: StoreArg,
    msg_id: Annotated[
        str, typer.Argument(metavar="ID|OFFSET",
                            help="offsetMsgId or UNIQ_KEY (32/56 hex), or a commitlog offset.")
    ],
    body: BodyOpt = "utf8",
    json_: JsonOpt = False,
) -> None:
    """Every message an offsetMsgId, UNIQ_KEY or offset names.

    Example: mqtool msg ~/store C0A8010A00002A9F0000000000000000 --json
    """
    from mqtool.cli.lookups import msg_by_offset, run_msg

    check_body_mode(body)
    by_offset = msg_by_offset(msg_id)
    if by_offset is None:
        raise typer.BadParameter(f"{msg_id!r} is not an offsetMsgId, UNIQ_KEY (32 or 56 hex "
                                 "characters) or commitlog offset", param_hint="ID|OFFSET")
    run_msg(store, msg_id, by_offset, body, json_)


def index(
    store: StoreArg,
    key: Annotated[
        str | None, typer.Option(help="Look up this key (UNIQ_KEY or a KEYS token).")
    ] = None,
    topic: Annotated[
        str | None, typer.Option(help="Topic of the key (all topics when omitted).")
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """Index files: headers, or the messages a key finds.

    Hash collisions are filtered out: only messages whose key is the one asked for. A key
    no message has is said on stderr, exit 1 (as msg and trace do).

    Example: mqtool index ~/store
    Example: mqtool index ~/store --key order-0 --topic TopicA --json
    """
    with handle_errors():
        st = open_store(store)
        if key is None:
            _index_files(st, json_)
            exit_on_findings(st)
            return
        from mqtool.integrity.record_check import records_keyed

        found, via = records_keyed(st, key, topic)
        _key_messages(key, topic, via, found, json_)
        if not found:
            where = f" in topic {topic}" if topic is not None else ""
            report_error(f"no message with key {key!r}{where} in {st.root} (searched by {via})")
        exit_on_findings(st)  # damage met on the way: one line each, exit 1
        if not found:
            raise SystemExit(EXIT_FINDINGS)


def _index_files(st: Store, json_: bool) -> None:
    rows: list[dict[str, Any]] = []
    for rel, r in st.index_files():
        h = r.header
        rows.append({
            "file": rel, "beginTimestamp": h.begin_timestamp,
            "endTimestamp": h.end_timestamp, "beginPhyOffset": h.begin_phy_offset,
            "endPhyOffset": h.end_phy_offset, "hashSlotCount": h.hash_slot_count,
            "indexCount": h.index_count, "hashSlotNum": r.geometry.hash_slot_num,
            "indexNum": r.geometry.index_num,
        })
    if json_:
        print_json(rows)
        return
    from rich.table import Table

    t = Table(title=f"index files in {st.root}")
    for c in ("file", "begin (UTC)", "end (UTC)", "phy range", "slots used", "entries",
              "geometry"):
        t.add_column(c)
    for r2 in rows:
        t.add_row(r2["file"], fmt_time(r2["beginTimestamp"]), fmt_time(r2["endTimestamp"]),
                  f"{r2['beginPhyOffset']}..{r2['endPhyOffset']}",
                  f"{r2['hashSlotCount']}/{r2['hashSlotNum']}",
                  f"{r2['indexCount'] - 1}/{r2['indexNum']}",
                  f"{r2['hashSlotNum']} slots x {r2['indexNum']}")
    out_console().print(t)


def _key_messages(key: str, topic: str | None, via: str, found: list[Any], json_: bool) -> None:
    if json_:
        from mqtool.jsonview import message_dict

        print_json({"key": key, "topic": topic, "via": via,
                    "messages": [message_dict(m) for m in found]})
    else:
        from rich.table import Table

        t = Table(title=f"{key!r}: {len(found)} messages (via {via})")
        for c in ("offset", "topic", "q", "qOffset", "stored (UTC)", "keys", "uniqKey"):
            t.add_column(c)
        for m in found:
            t.add_row(str(m.physical_offset), m.topic, str(m.queue_id),
                      str(m.queue_offset), fmt_time(m.store_timestamp), m.keys or "-",
                      m.uniq_key or "-")
        out_console().print(t)


def register(app: typer.Typer) -> None:
    app.command("messages")(messages)
    app.command("cq")(cq)
    app.command("msg")(msg)
    app.command("index")(index)
