"""The mqtool command line (typer). Each command group lives in its own module.

A run builds the app with only the module of the command it runs (:func:`build_app`): typer
builds every command it is given, each option through pydantic, before it parses a word. The
command imports what it uses (numpy, numba, pyspark, matplotlib, the remoting stack) when it
runs. ``app`` (every command) is built on first use, for tests and tools. Help is typer's plain
(click) help; the top-level help is printed without typer at all (:mod:`mqtool.__main__`), and
so are the common forms of the quick look-ups (:mod:`mqtool.cli.quick`). This package imports
neither typer nor rich until a command needs them.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    import typer

HELP = ("Inspect, trace, verify, repair and audit Apache RocketMQ message stores offline; resend "
        "dead-lettered messages into a store directory or a live cluster.")
EPILOG = ("Exit status: 0 ok; 1 findings (damage, or what was asked for is not there); 2 usage "
          "(a bad option, value or path); 3 environment (no Java, a cluster that cannot be "
          "reached, a store a broker holds, a full disk).")
CONTEXT = {"help_option_names": ["-h", "--help"]}
"""Every command: ``-h`` is ``--help``."""

COMMANDS = {
    "inspect": "inspect_cmd", "messages": "read", "cq": "read", "msg": "read", "index": "read",
    "trace": "trace", "dlq": "dlq", "verify": "verify", "repair": "repair", "store": "refstore",
    "demo": "demo", "serve": "serve", "scan": "scan",
}
"""Each command (or group) and its module in ``mqtool.cli``; a module has ``register(app)``.
Modules are registered in this order (their commands are listed in it)."""


def build_app(command: str | None = None) -> typer.Typer:
    """The app with the module of ``command`` only (one of :data:`COMMANDS`), or with every
    command (``None``, or a word that names none: click then says so)."""
    import importlib

    import typer

    from mqtool.cli.helptext import tidy_help
    from mqtool.cli.root import root

    app = typer.Typer(
        name="mqtool", help=HELP, epilog=EPILOG, no_args_is_help=True,
        pretty_exceptions_enable=False, rich_markup_mode=None, context_settings=CONTEXT,
    )
    app.callback()(root)
    modules = [COMMANDS[command]] if command in COMMANDS else dict.fromkeys(COMMANDS.values())
    for name in modules:
        importlib.import_module(f"mqtool.cli.{name}").register(app)
    tidy_help(app)
    return app


def command_paths(app: typer.Typer) -> list[list[str]]:
    """Every command of ``app`` as the words that run it (``["dlq", "list"]``, ...)."""
    from typer.main import get_command

    out: list[list[str]] = []

    def walk(cmd: object, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        else:
            out.append(path)

    walk(get_command(app), [])
    return out


def command_of(args: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is not an option."""
    return next((a for a in args if not a.startswith("-")), None)


_APP: dict[str, typer.Typer] = {}


def __getattr__(name: str) -> Any:
    """``mqtool.cli.app``: the app with every command (built once, on first use)."""
    if name == "app":
        if "app" not in _APP:
            _APP["app"] = build_app()
        return _APP["app"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Run the command line (:func:`mqtool.__main__.main` is the installed entry point)."""
    from mqtool.cli.exits import mark_one_shot

    mark_one_shot()
    complete = any(k.startswith("_MQTOOL_COMPLETE") for k in os.environ)
    build_app(None if complete else command_of(sys.argv[1:]))(prog_name="mqtool")
