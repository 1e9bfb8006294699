"""The common forms of the quick look-ups, run without typer.

``mqtool inspect STORE``, ``mqtool msg STORE ID|OFFSET`` and ``mqtool trace STORE ID``, each
with or without ``--json``, are what an operator types most, many times in a row; typer alone
takes several times as long to import as Python takes to start. These exact forms call the
commands' own bodies and renderers (:mod:`mqtool.cli.lookups`) with the options' defaults, so
their output and exit status are the typer command's. Any other word or option (``--help``, a
second ``--json``, ``--key``, ``--``), an argument the command would refuse, shell completion,
or ``MQTOOL_NO_QUICK`` set in the environment: typer parses the command line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

NO_QUICK = "MQTOOL_NO_QUICK"
"""Environment variable: when set (to anything but empty), every command line goes to typer."""


def run(args: list[str]) -> bool:
    """Run ``args`` (the words after ``mqtool``) when they are one of the forms above and
    return True; False when typer must parse them."""
    if os.environ.get(NO_QUICK) or any(k.startswith("_MQTOOL_COMPLETE") for k in os.environ):
        return False
    words = list(args)
    json_ = "--json" in words
    if json_:
        words.remove("--json")
    if any(w.startswith("-") or not w for w in words):
        return False
    from mqtool.cli import lookups
    from mqtool.cli.arguments import now_value
    from mqtool.cli.exits import mark_one_shot

    call: Callable[[], None]
    match words:
        case ["inspect", store]:
            def call() -> None:
                lookups.run_inspect(Path(store), None, None, json_)
        case ["msg", store, msg_id] if lookups.msg_by_offset(msg_id) is not None:
            def call() -> None:
                lookups.run_msg(Path(store), msg_id, bool(lookups.msg_by_offset(msg_id)), "utf8",
                                json_)
        case ["trace", store, msg_id]:
            def call() -> None:
                lookups.run_trace(Path(store), msg_id, None, None, None, None, now_value("store"),
                                  json_, None)
        case _:
            return False
    # numpy's OpenBLAS starts a thread per core when numpy is imported; these commands do no
    # linear algebra: one thread does, and starting the others only costs start-up time.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    mark_one_shot()
    try:
        call()
    except (EOFError, KeyboardInterrupt):  # as click ends a command
        sys.stderr.write("\nAborted!\n")
        raise SystemExit(1) from None
    return True
