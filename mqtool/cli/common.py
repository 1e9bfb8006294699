"""Shared CLI plumbing: options defined once, output helpers, the one error handler."""

from __future__ import annotations

import errno
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

from mqtool.formats.errors import MqtoolError, failed_path

if TYPE_CHECKING:
    from mqtool.store import Store

StoreArg = Annotated[
    Path,
    typer.Argument(
        help="Broker store root (the directory holding commitlog/, consumequeue/, index/), "
        "e.g. ~/store", show_default=False,
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
                 "e.g. 2026-11-21T21:00:00Z."),
]
UntilOpt = Annotated[
    str | None,
    typer.Option(help="Only messages stored before this time (epoch ms or ISO-8601)."),
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


# Width of stdout when it is not a terminal and COLUMNS is unset: wide enough that no table
# cell is ever wrapped, so piped output keeps ids and topic names whole on one line.
_PROCESS = {"one_shot": False}


def mark_one_shot() -> None:
    """This process is the command line itself (``main``): it ends when the command does."""
    _PROCESS["one_shot"] = True


def one_shot() -> bool:
    """Whether this process ends with the command (not a test's in-process run)."""
    return _PROCESS["one_shot"]


PIPE_WIDTH = 100_000


def out_console() -> Console:
    """Console for data on stdout (tables); no colour when NO_COLOR or not a terminal.

    On a terminal, tables fit its width. When stdout is a pipe or a file, lines are not
    wrapped at all (unless COLUMNS says otherwise): ids, offsets and topic names stay whole.
    """
    width = None
    if "COLUMNS" not in os.environ and not _isatty(sys.stdout):
        width = PIPE_WIDTH
    return Console(no_color=bool(os.environ.get("NO_COLOR")) or None, soft_wrap=False,
                   width=width)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


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


_NO_ROOM = {errno.ENOSPC, errno.EDQUOT}
"""The errors of a full disk or quota, which a command reports in one line (handle_errors)."""


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn mqtool's own errors into one line on stderr and exit status 1, and a full disk
    (or quota) too.

    Anything else is a bug and keeps its traceback. A closed stdout (``| head``) ends quietly.
    """
    first = len(_OPENED)
    try:
        yield
    except MqtoolError as e:
        sys.stdout.flush()
        for st in _OPENED[first:]:  # damage met before the error is not hidden by it
            for f in st.findings:
                if f.kind != "layout" and str(f) != str(e):
                    report_error(str(f))
        report_error(str(e))
        raise typer.Exit(1) from None
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(0) from None
    except OSError as e:
        if e.errno not in _NO_ROOM:
            raise
        sys.stdout.flush()  # a full disk is not a bug: one line, as mqtool's own errors
        where = failed_path(e)
        report_error(f"{where}: {e.strerror}" if where else str(e.strerror or e))
        raise typer.Exit(1) from None
    finally:
        del _OPENED[first:]


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


def print_notes(notes: Iterable[Any]) -> None:
    """Warnings and info findings on stderr, one line each (they do not change the exit code)."""
    for f in notes:
        err_console().print(f"{f.severity}: {f}", markup=False, highlight=False)


_OPENED: list[Store] = []  # stores opened inside handle_errors (their findings are printed)


def open_store(root: Path) -> Store:
    from mqtool.store import Store

    st = Store.open(root)
    _OPENED.append(st)
    if st.live:
        say_live(st.lock.holder_pid)
    return st


def say_live(pid: int | None) -> None:
    """The one note (stderr) that a running broker holds the store being read."""
    who = f"pid {pid}" if pid else "a running process"
    err_console().print(f"note: the store is live ({who} holds its lock): it is read as it is "
                        "now, and what the broker is still writing is not damage",
                        markup=False, highlight=False)


def check_body_mode(mode: str) -> str:
    from mqtool.jsonview import BODY_MODES

    if mode not in BODY_MODES:
        raise typer.BadParameter(f"--body must be one of {', '.join(BODY_MODES)}, not {mode!r}")
    return mode


# --- argument rules shared by the commands (issue 9: say what is wrong, accept nothing silly) ---
def require_with(value: object, needed: object, flag: str, needs: str) -> None:
    """``flag`` only makes sense together with ``needs`` (e.g. --queue with --topic)."""
    if value is not None and needed is None:
        raise typer.BadParameter(f"{flag} needs {needs} (a queue id alone names no queue)"
                                 if flag == "--queue" else f"{flag} needs {needs}")


def exactly_one(what: str, given: dict[str, object]) -> None:
    """Exactly one of ``given`` (name -> value) must be set; ``what`` says what they identify.

    ``exactly_one("the message to trace", {"ID": msg_id, "--key": key})``
    """
    options = " or ".join(given)
    n = sum(v is not None for v in given.values())
    if n == 0:
        raise typer.BadParameter(f"give {what}: {options}")
    if n > 1:
        raise typer.BadParameter(f"give {options}, not both")


# --- help text: flags show no value placeholder; docstrings reflow instead of wrapping twice ---
def _patch_flag_placeholders() -> None:
    """typer's rich help prints a type placeholder after every option, flags included
    (``--json <bool>``), as if they took a value. Flags take none: show nothing there."""
    from typer.core import TyperOption

    if getattr(TyperOption, "_mqtool_flags_plain", False):
        return
    original = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        if self.is_flag or self.count:
            return None
        return original(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
    TyperOption._mqtool_flags_plain = True  # type: ignore[attr-defined]


_patch_flag_placeholders()


def reflow(text: str) -> str:
    """A docstring as help text: each paragraph on one line (the terminal wraps it once, at
    its own width), except lines that start a list item (``- ``), an example (``Example``) or
    are indented."""
    import inspect

    paragraphs = []
    for para in inspect.cleandoc(text).split("\n\n"):
        lines = para.split("\n")
        out = [lines[0]]
        for ln in lines[1:]:
            if ln.startswith(("- ", "* ", " ", "\b", "Example")) or out[-1].startswith("\b"):
                out.append(ln)
            else:
                out[-1] = f"{out[-1]} {ln.strip()}"
        paragraphs.append("\n".join(out))
    return "\n\n".join(paragraphs)


def tidy_help(app: typer.Typer) -> None:
    """Reflow the help of every registered command and group (see :func:`reflow`)."""
    import inspect

    for cmd in app.registered_commands:
        doc = cmd.help or (inspect.getdoc(cmd.callback) if cmd.callback else None)
        if doc:
            cmd.help = reflow(doc)
    for grp in app.registered_groups:
        sub = grp.typer_instance
        if sub is None:
            continue
        info = sub.info
        doc = grp.help if isinstance(grp.help, str) else None
        if doc:
            grp.help = reflow(doc)
        elif isinstance(info.help, str) and info.help:
            info.help = reflow(info.help)
        tidy_help(sub)
