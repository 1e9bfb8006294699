"""The options before the command (``mqtool --version``, ``mqtool --no-color``)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from mqtool import __version__


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mqtool {__version__}")
        raise typer.Exit(0)


def root(
    version: Annotated[
        bool, typer.Option("--version", help="Print mqtool's version and exit.",
                           callback=_version, is_eager=True),
    ] = False,
    no_color: Annotated[
        bool, typer.Option("--no-color", help="No colour in any output (as NO_COLOR=1 does).",
                           show_default=False),
    ] = False,
) -> None:
    """The options before the command."""
    if no_color:
        os.environ["NO_COLOR"] = "1"
