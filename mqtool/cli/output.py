"""What a command prints: the consoles of stdout and stderr, JSON, error, warning and
note lines."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mqtool.cli.plain import Line, PlainOut, line, line_text
from mqtool.cli.stdout import stop_if_reader_gone

if TYPE_CHECKING:
    from rich.console import Console


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


def print_json(obj: Any) -> None:
    import json  # --json only

    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def print_jsonl(rows: Iterable[dict[str, Any]]) -> int:
    import json

    n = 0
    w = sys.stdout.write
    for r in rows:
        w(json.dumps(r, ensure_ascii=False) + "\n")
        n += 1
        stop_if_reader_gone()
    return n


def report_error(text: str) -> None:
    """One ``error: ...`` line on stderr (no markup interpretation of the text)."""
    err_line(line(("error: ", "bold red"), text))


def print_notes(notes: Iterable[Any]) -> None:
    """Warnings and info findings on stderr, one line each (they do not change the exit code)."""
    for f in notes:
        err_line(f"{f.severity}: {f}")


def say_live(pid: int | None) -> None:
    """The one note (stderr) that a running broker holds the store being read."""
    who = f"pid {pid}" if pid else "a running process"
    err_line(f"note: the store is live ({who} holds its lock): it is read as it is now, and "
             "what the broker is still writing is not damage")
