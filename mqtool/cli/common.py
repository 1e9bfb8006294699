"""Shared CLI plumbing: output helpers, argument rules, the one error handler.

Imports only the standard library at start-up: typer when an argument rule refuses a value,
rich when a command prints on a terminal (:mod:`mqtool.cli.plain`); the options several
commands share are in :mod:`mqtool.cli.options`. A command ends with an exit status by
raising ``SystemExit`` (typer and click let it through, as they do their own ``Exit``).
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from mqtool.cli.plain import Line, PlainOut, line, line_text
from mqtool.formats.errors import (
    EXIT_ENVIRONMENT,
    EXIT_FINDINGS,
    Finding,
    MqtoolError,
    Severity,
    failed_path,
)
from mqtool.timefmt import fmt_time as fmt_time

if TYPE_CHECKING:
    import typer
    from rich.console import Console

    from mqtool.store import Store

_PROCESS = {"one_shot": False}


def mark_one_shot() -> None:
    """This process is the command line itself (``main``): it ends when the command does."""
    _PROCESS["one_shot"] = True


def one_shot() -> bool:
    """Whether this process ends with the command (not a test's in-process run)."""
    return _PROCESS["one_shot"]


def out_console() -> Console | PlainOut:
    """Console for data on stdout (tables, trees, lines: :mod:`mqtool.cli.plain`).

    On a terminal, rich: colour (none with NO_COLOR or --no-color), tables fit its width
    (so with COLUMNS set, in a pipe too). When stdout is a pipe or a file and COLUMNS is
    unset, :class:`~mqtool.cli.plain.PlainOut`: a table becomes plain rows (its title, then
    its header and rows in columns two spaces apart, no box, nothing wrapped: ids, offsets and
    topic names stay whole, for ``grep`` and ``awk``), and rich is not imported unless a
    command prints a rich object.
    """
    if "COLUMNS" not in os.environ and not isatty(sys.stdout):
        out = PlainOut(_plain_rich)
        return out.rich() if os.environ.get("FORCE_COLOR") else out  # colour, plain rows
    from mqtool.cli.richout import terminal_console

    return terminal_console()


def _plain_rich(out: PlainOut) -> Console:
    from mqtool.cli.richout import plain_rich_console

    return plain_rich_console(out)


def isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def err_console() -> Console:
    """Console for progress, warnings and errors on stderr (NO_COLOR honoured)."""
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)


def err_line(text: Line | str) -> None:
    """One line on stderr: through rich on a terminal or with FORCE_COLOR (its styles), else
    as it is."""
    if isatty(sys.stderr) or os.environ.get("FORCE_COLOR"):
        from mqtool.cli.plain import to_rich

        err_console().print(to_rich(text), markup=False, highlight=False)
    else:
        sys.stderr.write(line_text(text) + "\n")


def parse_time(text: str | None, what: str = "time") -> int | None:
    """Epoch ms from ``1795294972389`` or ``2026-11-21T21:00:00Z`` (UTC when no zone)."""
    if text is None:
        return None
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    from datetime import UTC, datetime

    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError as e:
        import typer

        raise typer.BadParameter(f"{what}: {text!r} is neither epoch ms nor ISO-8601") from e
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def now_value(now: str) -> int | None:
    """``--now``: None for ``store`` (the store's own time, judged by the command), this
    machine's clock for ``wall``, else epoch ms or ISO-8601."""
    if now == "store":
        return None
    if now == "wall":
        import time

        return int(time.time() * 1000)
    return parse_time(now, "--now")


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
R = TypeVar("R")


_OUTSIDE = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS}
"""The OSErrors of a full disk or quota, or of a file mqtool may not read or write: a command
reports them in one line and exits 3 (environment), as mqtool's own errors (handle_errors)."""


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn mqtool's own errors into one line on stderr and their exit status
    (:attr:`MqtoolError.exit_status`: 1 findings, 2 usage, 3 environment); a full disk, a
    quota or a permission refused: one line and exit 3.

    Anything else is a bug and keeps its traceback. A closed stdout (``| head``) ends quietly.
    """
    first = len(_OPENED)
    try:
        yield
    except MqtoolError as e:
        sys.stdout.flush()
        for st in _OPENED[first:]:  # damage met before the error is not hidden by it
            for f in st.findings:
                if is_damage(f) and str(f) != str(e):
                    report_error(str(f))
        report_error(str(e))
        raise SystemExit(e.exit_status) from None
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(0) from None
    except OSError as e:
        if e.errno not in _OUTSIDE:
            raise
        sys.stdout.flush()  # not a bug: one line, as mqtool's own errors
        where = failed_path(e)
        report_error(f"{where}: {e.strerror}" if where else str(e.strerror or e))
        raise SystemExit(EXIT_ENVIRONMENT) from None
    finally:
        del _OPENED[first:]


def report_error(text: str) -> None:
    """One ``error: ...`` line on stderr (no markup interpretation of the text)."""
    err_line(line(("error: ", "bold red"), text))


def is_damage(f: Finding) -> bool:
    """Whether a store finding is damage (an error line, exit 1); the others are layout notes
    and warnings (a warning line) or information."""
    return f.severity == Severity.ERROR


def exit_on_findings(store: Store) -> None:
    """After a read: damage found in the store is an error (one line each), exit 1; layout
    notes and warnings are one ``warning:`` line each (info findings are not printed)."""
    bad = [f for f in store.findings if is_damage(f)]
    for f in store.findings:
        if not is_damage(f) and (f.kind == "layout" or f.severity == Severity.WARNING):
            err_line(f"warning: {f}")
    if bad:
        sys.stdout.flush()
        for f in bad:
            report_error(str(f))
        raise SystemExit(EXIT_FINDINGS)


def print_notes(notes: Iterable[Any]) -> None:
    """Warnings and info findings on stderr, one line each (they do not change the exit code)."""
    for f in notes:
        err_line(f"{f.severity}: {f}")


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
    err_line(f"note: the store is live ({who} holds its lock): it is read as it is now, and "
             "what the broker is still writing is not damage")


def check_body_mode(mode: str) -> str:
    from mqtool.jsonview import BODY_MODES

    if mode not in BODY_MODES:
        import typer

        raise typer.BadParameter(f"--body must be one of {', '.join(BODY_MODES)}, not {mode!r}")
    return mode


# --- argument rules shared by the commands: say what is wrong, accept nothing silly ----------
def require_with(value: object, needed: object, flag: str, needs: str) -> None:
    """``flag`` only makes sense together with ``needs`` (e.g. --queue with --topic)."""
    if value is not None and needed is None:
        import typer

        raise typer.BadParameter(f"{flag} needs {needs} (a queue id alone names no queue)"
                                 if flag == "--queue" else f"{flag} needs {needs}")


def as_bad_parameter(fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """``fn(*args, **kwargs)``, a usage error it raises (exit 2: the arguments contradict each
    other) said as typer says a bad parameter."""
    from mqtool.formats.errors import EXIT_USAGE

    try:
        return fn(*args, **kwargs)
    except MqtoolError as e:
        if e.exit_status != EXIT_USAGE:
            raise
        import typer

        raise typer.BadParameter(str(e)) from None


def exactly_one(what: str, given: dict[str, object]) -> None:
    """Exactly one of ``given`` (name -> value) must be set; ``what`` says what they identify.

    ``exactly_one("the message to trace", {"ID": msg_id, "--key": key})``
    """
    options = " or ".join(given)
    n = sum(v is not None for v in given.values())
    if n == 1:
        return
    import typer

    if n == 0:
        raise typer.BadParameter(f"give {what}: {options}")
    if n > 1:
        raise typer.BadParameter(f"give {options}, not both")


# --- help text: docstrings as click's plain help ------------------------------------------------
def reflow(text: str) -> str:
    """A docstring as help text. Click wraps every paragraph to the terminal, joining its
    lines; a paragraph whose lines are separate things (list items ``- ``, examples
    ``Example``, indented lines) is marked ``\\b`` so that click prints it line by line, each
    example whole, to be copied."""
    import inspect
    import re

    example = re.compile(r"Examples?:")
    paragraphs = []
    for para in inspect.cleandoc(text).split("\n\n"):
        lines = para.split("\n")
        keep = para.startswith("\b") or bool(example.match(para)) or any(
            ln.startswith(("- ", "* ", " ")) or example.match(ln) for ln in lines[1:])
        if keep and not para.startswith("\b"):
            para = "\b\n" + para
        elif not keep:
            para = " ".join(ln.strip() for ln in lines)
        paragraphs.append(para)
    return "\n\n".join(paragraphs)


def tidy_help(app: typer.Typer) -> None:
    """The help of every registered command and group through :func:`reflow`."""
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
