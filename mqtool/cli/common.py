"""Shared CLI plumbing: options defined once, output helpers, the one error handler."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

from mqtool.formats.errors import MqtoolError

if TYPE_CHECKING:
    from mqtool.store import Store

StoreArg = Annotated[
    Path,
    typer.Argument(
        help="Broker store root (the directory holding commitlog/, consumequeue/, index/), "
        "e.g. ~/store", show_default=False,
    ),
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
                 "e.g. 2026-11-21T21:00:00Z."),
]
UntilOpt = Annotated[
    str | None,
    typer.Option(help="Only messages stored before this time (epoch ms or ISO-8601)."),
]


def out_console() -> Console:
    """Console for data on stdout (tables); no colour when NO_COLOR or not a terminal."""
    return Console(no_color=bool(os.environ.get("NO_COLOR")) or None, soft_wrap=False)


def err_console() -> Console:
    return Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")) or None, soft_wrap=True)


def parse_time(text: str | None, what: str = "time") -> int | None:
    """Epoch ms from ``1795294972389`` or ``2026-11-21T21:00:00Z`` (UTC when no zone)."""
    if text is None:
        return None
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError as e:
        raise typer.BadParameter(f"{what}: {text!r} is neither epoch ms nor ISO-8601") from e
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def fmt_time(ms: int | None) -> str:
    """Epoch ms as ``2026-11-21 21:02:52.375`` (UTC)."""
    if ms is None or ms <= 0:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):
        return str(ms)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def print_jsonl(rows: Iterable[dict[str, Any]]) -> int:
    n = 0
    w = sys.stdout.write
    for r in rows:
        w(json.dumps(r, ensure_ascii=False) + "\n")
        n += 1
    return n


F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn mqtool's own errors into one line on stderr and exit status 1.

    Anything else is a bug and keeps its traceback. A closed stdout (``| head``) ends quietly.
    """
    try:
        yield
    except MqtoolError as e:
        sys.stdout.flush()
        report_error(str(e))
        raise typer.Exit(1) from None
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(0) from None


def report_error(text: str) -> None:
    """One ``error: ...`` line on stderr (no markup interpretation of the text)."""
    from rich.text import Text

    err_console().print(Text.assemble(("error: ", "bold red"), text), highlight=False)


def exit_on_findings(store: Store) -> None:
    """After a read: damage found in the store is an error (one line each), exit 1."""
    bad = [f for f in store.findings if f.kind != "layout"]
    for f in store.findings:
        if f.kind == "layout":
            err_console().print(f"warning: {f}", markup=False, highlight=False)
    if bad:
        sys.stdout.flush()
        for f in bad:
            report_error(str(f))
        raise typer.Exit(1)


def open_store(root: Path) -> Store:
    from mqtool.store import Store

    return Store.open(root)


def check_body_mode(mode: str) -> str:
    from mqtool.jsonview import BODY_MODES

    if mode not in BODY_MODES:
        raise typer.BadParameter(f"--body must be one of {', '.join(BODY_MODES)}, not {mode!r}")
    return mode
