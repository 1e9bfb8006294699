"""What commands print, without rich: tables, outlines and styled lines, and the plain writer.

A command builds its output from :class:`Table`, :class:`Tree` and :data:`Line` (text with a
style per part) and prints them on :func:`mqtool.cli.output.out_console`. On a terminal, and
with COLUMNS set, that is a rich console (boxes, colour, tables fitted to the width:
:func:`to_rich`). When stdout is a pipe or a file it is :class:`PlainOut`, which writes them as
plain text and imports nothing: a table is its title, then its header and rows in columns two
spaces apart (no box, nothing wrapped: ids, offsets and topic names stay whole for ``grep`` and
``awk``); a tree is its lines under guides (``├── ``). Anything else a command prints on it (a
rich object) goes through rich, in the same layout.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

Line = tuple[tuple[str, str], ...]
"""One line of text as (text, style) parts; the style is rich's (``"bold red"``, ``""``)."""


def line(*parts: str | tuple[str, str]) -> Line:
    """A :data:`Line` from plain strings and (text, style) pairs."""
    return tuple((p, "") if isinstance(p, str) else p for p in parts)


def line_text(ln: Line | str) -> str:
    return ln if isinstance(ln, str) else "".join(t for t, _ in ln)


@dataclass
class Column:
    """A column of a :class:`Table` (rich's ``add_column`` arguments that mqtool uses)."""

    header: str
    justify: str = "left"
    overflow: str = "ellipsis"


@dataclass
class Table:
    """A table as data (rich's ``Table`` arguments that mqtool uses)."""

    title: str | None = None
    show_header: bool = True
    caption: str | None = None
    columns: list[Column] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)

    def add_column(self, header: str, justify: str = "left", overflow: str = "ellipsis") -> None:
        self.columns.append(Column(header, justify, overflow))

    def add_row(self, *cells: str) -> None:
        self.rows.append(list(cells))


@dataclass
class Tree:
    """A tree of lines (rich's ``Tree``)."""

    label: Line | str
    children: list[Tree] = field(default_factory=list)

    def add(self, label: Line | str) -> Tree:
        node = Tree(label)
        self.children.append(node)
        return node


def cell_len(text: str) -> int:
    """Terminal cells of ``text``: wide East Asian characters take two, combining marks and
    control characters none."""
    if text.isascii():
        if text.isprintable():  # ASCII printable: " " .. "~", one cell each
            return len(text)
        return sum(1 for c in text if " " <= c < "\x7f")
    n = 0
    for c in text:
        o = ord(c)
        if o < 32 or 0x7F <= o < 0xA0 or unicodedata.combining(c) or o == 0x200B:
            continue
        n += 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1
    return n


def plain_rows(title: str | None, headers: Sequence[str] | None, rows: Sequence[Sequence[str]],
               right: Sequence[bool], caption: str | None = None) -> list[str]:
    """A table as plain lines (see the module doc); ``headers`` None: no header row."""
    def flat(v: str) -> str:
        return v.replace("\n", " ")

    body = ([[flat(h) for h in headers]] if headers is not None else []) + [
        [flat(v) for v in r] for r in rows]
    widths = [max((cell_len(r[i]) for r in body), default=0) for i in range(len(right))]
    lines = ["  ".join((" " * (w - cell_len(v)) + v) if r else (v + " " * (w - cell_len(v)))
                       for v, w, r in zip(row, widths, right, strict=True)).rstrip()
             for row in body]
    return ([flat(title)] if title else []) + lines + ([flat(caption)] if caption else [])


def tree_lines(tree: Tree) -> list[str]:
    """A tree as lines under rich's guides (``├── ``, ``│   ``, ``└── ``)."""
    out = [line_text(tree.label)]

    def walk(node: Tree, prefix: str) -> None:
        for i, child in enumerate(node.children):
            last = i == len(node.children) - 1
            out.append(prefix + ("└── " if last else "├── ") + line_text(child.label))
            walk(child, prefix + ("    " if last else "│   "))

    walk(tree, "")
    return out


class PlainOut:
    """stdout that is not a terminal: :class:`Table`, :class:`Tree`, :data:`Line` and strings
    as plain text (see the module doc); a blank line between tables. Other objects go to a
    rich console that writes them in the same layout (:func:`mqtool.cli.output.out_console`)."""

    def __init__(self, rich: Callable[[PlainOut], Console], file: TextIO | None = None) -> None:
        self._file = file
        self.tables = 0
        self._make_rich = rich
        self._rich: Console | None = None

    @property
    def file(self) -> TextIO:
        return self._file or sys.stdout

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", **kwargs: Any) -> None:
        if len(objects) == 1 and isinstance(objects[0], Table):
            t = objects[0]
            self.table_lines(plain_rows(
                t.title, [c.header for c in t.columns] if t.show_header else None, t.rows,
                [c.justify == "right" for c in t.columns], t.caption))
        elif len(objects) == 1 and isinstance(objects[0], Tree):
            self.file.write("\n".join(tree_lines(objects[0])) + "\n")
        elif all(isinstance(o, tuple) or (isinstance(o, str) and kwargs.get("markup") is False)
                 for o in objects):
            self.file.write(sep.join(line_text(o) for o in objects) + end)
        else:
            self.rich().print(*objects, sep=sep, end=end, **kwargs)

    def table_lines(self, lines: list[str]) -> None:
        """One table's lines, after a blank line when a table came before."""
        if self.tables:
            lines = ["", *lines]
        self.tables += 1
        self.file.write("\n".join(lines) + "\n")

    def rich(self) -> Console:
        """The rich console for what is not plain here (tables become plain rows too)."""
        if self._rich is None:
            self._rich = self._make_rich(self)
        return self._rich


def to_rich(obj: Any) -> RenderableType:
    """:class:`Table`, :class:`Tree` or :data:`Line` as the rich object (anything else as it
    is)."""
    from rich.table import Table as RichTable
    from rich.text import Text
    from rich.tree import Tree as RichTree

    def text(ln: Line | str) -> Text:
        return Text(ln) if isinstance(ln, str) else Text.assemble(*ln)

    if isinstance(obj, Table):
        t = RichTable(title=obj.title, show_header=obj.show_header, caption=obj.caption)
        for c in obj.columns:
            t.add_column(c.header, justify=c.justify, overflow=c.overflow)  # type: ignore[arg-type]
        for r in obj.rows:
            t.add_row(*r)
        return t
    if isinstance(obj, Tree):
        def build(node: Tree, into: RichTree) -> None:
            for child in node.children:
                build(child, into.add(text(child.label)))

        root = RichTree(text(obj.label))
        build(obj, root)
        return root
    if isinstance(obj, tuple):
        return text(obj)
    return obj  # type: ignore[no-any-return]
