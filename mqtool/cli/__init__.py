"""The mqtool command line (typer). Each command group lives in its own module."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="mqtool",
    help="Inspect, trace, repair and audit Apache RocketMQ message stores offline.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def main() -> None:
    """Console-script entry point."""
    app()
