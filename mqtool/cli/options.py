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
