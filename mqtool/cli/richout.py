"""The rich consoles behind :func:`mqtool.cli.output.out_console` (imported when used)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from mqtool.cli.plain import PlainOut, plain_rows, to_rich
from mqtool.cli.plain import Table as PlainTable

PIPE_WIDTH = 100_000
"""Width of a piped stdout: nothing is wrapped, ids and names stay whole."""


class TerminalConsole(Console):
    """stdout on a terminal: mqtool's :mod:`~mqtool.cli.plain` objects as rich draws them."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(to_rich(o) for o in objects), **kwargs)


class PlainRows(Console):
    """The rich console of a :class:`PlainOut` (a pipe or a file; with FORCE_COLOR, the
    console itself): a table as plain rows (:func:`mqtool.cli.plain.plain_rows`), anything
    else as rich writes it, unwrapped."""

    def __init__(self, out: PlainOut) -> None:
        super().__init__(soft_wrap=False, width=PIPE_WIDTH, file=out.file)
        self.plain_out = out

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if len(objects) == 1 and isinstance(objects[0], Table):
            self._rows(objects[0])
        elif len(objects) == 1 and isinstance(objects[0], PlainTable):
            self.plain_out.print(objects[0])
        else:
            super().print(*(to_rich(o) for o in objects), **kwargs)

    def _rows(self, table: Table) -> None:
        def plain(cell: Any) -> str:
            return cell.plain if isinstance(cell, Text) else str(cell)

        cols = table.columns
        self.plain_out.table_lines(plain_rows(
            plain(table.title) if table.title else None,
            [plain(c.header) for c in cols] if table.show_header else None,
            [list(r) for r in zip(*([plain(v) for v in c.cells] for c in cols), strict=True)],
            [c.justify == "right" for c in cols],
            plain(table.caption) if table.caption else None))


def plain_rich_console(out: PlainOut) -> Console:
    return PlainRows(out)


def terminal_console() -> Console:
    return TerminalConsole(soft_wrap=False)
