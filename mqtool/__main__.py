"""``mqtool`` (the installed command) and ``python -m mqtool``.

``mqtool --version``, ``mqtool --help`` (``-h``) and ``mqtool`` alone are answered here without
importing typer: the top-level help is :data:`mqtool.tophelp.TOP_HELP`, the text typer prints
on a terminal 80 columns wide or wider (a test keeps the two equal). So are the common forms
of ``inspect``, ``msg`` and ``trace`` (:mod:`mqtool.cli.quick`). Anything else, a narrower
terminal, or shell completion (``_MQTOOL_COMPLETE``) goes to the typer app.
"""

from __future__ import annotations

import os
import sys


def _columns() -> int:
    """The terminal width click formats help for (``shutil.get_terminal_size``'s rule)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def main() -> None:
    """Console-script entry point."""
    from mqtool.cli.stdout import guard

    guard()  # a closed stdout (| head) is dropped, not an error: see mqtool.cli.stdout
    _main(sys.argv[1:])


def _main(args: list[str]) -> None:
    if (not args or args in (["--help"], ["-h"], ["--version"])) \
            and "_MQTOOL_COMPLETE" not in os.environ:
        from mqtool import __version__

        if args == ["--version"]:
            print(f"mqtool {__version__}")
            return
        if _columns() >= 80:
            from mqtool.tophelp import TOP_HELP

            if args:
                sys.stdout.write(TOP_HELP)
                return
            sys.stderr.write(TOP_HELP)  # no command: the help, as a usage error
            sys.exit(2)
    from mqtool.cli import quick

    if quick.run(args):
        return
    from mqtool.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
