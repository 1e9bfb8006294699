"""Help text: command docstrings as click prints them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer


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
