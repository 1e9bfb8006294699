"""The mqtool command line (typer). Each command group lives in its own module."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="mqtool",
    help="Inspect, trace, verify, repair and audit Apache RocketMQ message stores offline; resend "
    "dead-lettered messages into a store directory or a live cluster.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _register_all() -> None:
    """Each command group module exposes ``register(app)``; optional groups may be absent."""
    import importlib

    for name in (
        "inspect_cmd", "read", "trace", "dlq", "verify", "repair", "store", "demo", "serve",
        "scan",
    ):
        try:
            mod = importlib.import_module(f"mqtool.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"mqtool.cli.{name}":
                raise
            continue
        mod.register(app)
    from mqtool.cli.common import tidy_help

    tidy_help(app)


_register_all()


def main() -> None:
    """Console-script entry point."""
    from mqtool.cli.common import mark_one_shot

    mark_one_shot()
    app()
