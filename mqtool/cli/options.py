"""The options and arguments several commands share: one name, one meaning, one help text.

Only typer is imported here (every command module imports this one, and ``mqtool --help``
imports every command module).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

StoreArg = Annotated[
    Path,
    typer.Argument(
        help="Broker store root (the directory holding commitlog/, consumequeue/, index/), "
        "e.g. ~/store", show_default=False, metavar="STORE",
    ),
]
LimitOpt = Annotated[
    int | None,
    typer.Option("--limit", min=1, help="Stop after this many records (1 or more), e.g. 100."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout.")]
JsonlOpt = Annotated[
    bool, typer.Option("--jsonl", help="Print one JSON object per line (streaming) to stdout.")
]
BodyOpt = Annotated[
    str,
    typer.Option(
        "--body", help="Include message bodies: none|utf8|hex|base64 (utf8 inflates compressed).",
        metavar="MODE",
    ),
]
SinceOpt = Annotated[
    str | None,
    typer.Option(help="Only messages stored at or after this time: epoch ms or ISO-8601, "
                 "e.g. 2026-11-21T21:00:00Z.", metavar="TIME"),
]
UntilOpt = Annotated[
    str | None,
    typer.Option(help="Only messages stored before this time (epoch ms or ISO-8601).",
                 metavar="TIME"),
]

DelayLevelsOpt = Annotated[
    str | None,
    typer.Option(
        "--delay-levels",
        help="The broker's messageDelayLevel, e.g. \"1s 5s 10s 30s 1m ... 2h\". Default: what "
        "the store shows (schedule units' deliver time - store time) and the broker's default "
        "for levels it does not show. A contradiction with the store is a warning.",
        metavar="LEVELS",
    ),
]
BrokerConfOpt = Annotated[
    Path | None,
    typer.Option(
        "--broker-conf",
        help="Read messageDelayLevel from the broker's config file (Java properties, the "
        "broker's -c file), e.g. conf/broker.conf.",
        metavar="FILE",
    ),
]
HtmlOpt = Annotated[
    Path | None,
    typer.Option(
        "--html", "--report",
        help="Also write the result as one self-contained HTML page (trace: the journey on a "
        "time axis; scan: the audit with charts; no network needed to view it), "
        "e.g. --html page.html.",
        metavar="FILE",
    ),
]
CrcOpt = Annotated[
    bool,
    typer.Option("--crc/--no-crc", help="Check the body CRC of every message (and the 5.x "
                 "__CRC32# property). On by default; --no-crc reads faster."),
]
NowOpt = Annotated[
    str,
    typer.Option(
        help="The time pending and overdue copies are judged against: 'store' (the store's "
        "latest store time, default), 'wall' (this machine's clock), or epoch ms / ISO-8601, "
        "e.g. 2026-11-21T22:00:00Z.", metavar="TIME",
    ),
]

StartNowOpt = Annotated[
    str,
    typer.Option(
        "--now", help="The broker's clock at its next start, for what its recovery would do (a "
        "5.x timer wheel read more than 7 days before it skips the messages due in between): "
        "'wall' (this machine's clock, default), 'store' (the store's latest store time), or "
        "epoch ms / ISO-8601, e.g. 2026-11-21T22:00:00Z.", metavar="TIME",
    ),
]

# -- dlq: where dead letters are read from and resent to -----------------------------------
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
SourceArg = Annotated[
    Path | None,
    typer.Argument(help="Broker store root (the directory holding commitlog/, consumequeue/, "
                   "index/), e.g. ~/store; leave it out to read a live cluster (--namesrv).",
                   show_default=False),
]
NamesrvOpt = Annotated[
    str | None,
    typer.Option("--namesrv", "-n", help="Name servers of a live cluster, host:port;host:port "
                 "(default: $NAMESRV_ADDR), e.g. 127.0.0.1:9876.", show_default=False),
]
AccessKeyOpt = Annotated[
    str | None, typer.Option("--access-key", help="ACL access key: requests are signed as "
                             "the Java AclClientRPCHook signs them, e.g. rocketmq2."),
]
SecretKeyOpt = Annotated[
    str | None, typer.Option("--secret-key", help="ACL secret key (with --access-key), "
                             "e.g. 12345678."),
]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", help="Seconds to wait for each answer of a live "
                        "cluster, e.g. 3.", min=0.1),
]
ProgressOpt = Annotated[
    bool,
    typer.Option("--progress/--no-progress",
                 help="Progress bar on stderr (shown only when stderr is a terminal)."),
]

# -- store, serve: a store that is written ----------------------------------------------------
CommitlogSizeOpt = Annotated[
    str | None,
    typer.Option("--commitlog-file-size", help="Commitlog file size for a new store "
                 "(RocketMQ default 1GiB), e.g. 64MiB.", show_default=False),
]
CqEntriesOpt = Annotated[
    int | None,
    typer.Option("--cq-entries", help="Consume-queue units per file for a new store "
                 "(default 300000), e.g. 1000.", show_default=False),
]
IndexSlotsOpt = Annotated[
    int | None,
    typer.Option("--index-slots", help="Index hash slots for a new store (default 5000000), "
                 "e.g. 5000.", show_default=False),
]
IndexEntriesOpt = Annotated[
    int | None,
    typer.Option("--index-entries", help="Index entries per file for a new store "
                 "(default 20000000), e.g. 20000.", show_default=False),
]
WriteDelayLevelsOpt = Annotated[
    str | None,
    typer.Option("--delay-levels", help="The broker's messageDelayLevel the store is written "
                 'with (delayed messages and retries), e.g. "1s 2s 3s" (default: '
                 "--broker-conf's, else the store's, else RocketMQ's \"1s 5s 10s 30s 1m ... "
                 '2h").', show_default=False, metavar="LEVELS"),
]
DialectOpt = Annotated[
    str | None,
    typer.Option("--dialect", help="Write as RocketMQ 4.9.7 (default) or 5.3.3, e.g. 5.3.3.",
                 show_default=False),
]
PropCrcOpt = Annotated[
    bool,
    typer.Option("--prop-crc", help="Append the 5.2+ __CRC32# property to every record of a new "
                 "store (enabledAppendPropCRC), e.g. with --dialect 5.3.3."),
]
ClockOpt = Annotated[
    str | None,
    typer.Option("--now", help="Broker clock for this command: epoch ms or ISO-8601 "
                 "(default: wall clock, or later than the store's last record), "
                 "e.g. 2026-11-21T21:00:00Z.", show_default=False),
]

# -- repair ---------------------------------------------------------------------------------
OutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Directory for the repaired copy; must not exist or be empty "
                 "(required unless --dry-run).", show_default=False),
]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Only list the changes; write nothing."),
]
