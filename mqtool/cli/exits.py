"""How a command ends: mqtool's errors as one line and their exit status (1 findings, 2 usage,
3 environment), damage in the stores it opened said before it exits, and whether the process
ends with the command.

A command ends with an exit status by raising ``SystemExit`` (typer and click let it through, as
they do their own ``Exit``).
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from mqtool.cli.output import err_line, report_error, say_live
from mqtool.cli.stdout import drop_stdout
from mqtool.formats.errors import (
    EXIT_ENVIRONMENT,
    EXIT_FINDINGS,
    Finding,
    MqtoolError,
    Severity,
    failed_path,
)

if TYPE_CHECKING:
    from mqtool.store import Store


_PROCESS = {"one_shot": False}


def mark_one_shot() -> None:
    """This process is the command line itself (``main``): it ends when the command does."""
    _PROCESS["one_shot"] = True


def one_shot() -> bool:
    """Whether this process ends with the command (not a test's in-process run)."""
    return _PROCESS["one_shot"]


_OUTSIDE = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS}
"""The OSErrors of a full disk or quota, or of a file mqtool may not read or write: a command
reports them in one line and exits 3 (environment), as mqtool's own errors (handle_errors)."""


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn mqtool's own errors into one line on stderr and their exit status
    (:attr:`MqtoolError.exit_status`: 1 findings, 2 usage, 3 environment); a full disk, a
    quota or a permission refused: one line and exit 3.

    Anything else is a bug and keeps its traceback. A closed stdout (``| head``) that stops a
    command (a streaming listing, a write of bytes past :mod:`mqtool.cli.stdout`'s guard)
    ends it quietly: the damage met until then is said, exit 1, else exit 0.
    """
    first = len(_OPENED)
    try:
        yield
    except MqtoolError as e:
        sys.stdout.flush()
        _say_damage_met(first, but=str(e))  # not hidden by the error
        report_error(str(e))
        raise SystemExit(e.exit_status) from None
    except BrokenPipeError:
        drop_stdout()
        raise SystemExit(EXIT_FINDINGS if _say_damage_met(first) else 0) from None
    except OSError as e:
        if e.errno not in _OUTSIDE:
            raise
        sys.stdout.flush()  # not a bug: one line, as mqtool's own errors
        where = failed_path(e)
        report_error(f"{where}: {e.strerror}" if where else str(e.strerror or e))
        raise SystemExit(EXIT_ENVIRONMENT) from None
    finally:
        del _OPENED[first:]


def _say_damage_met(first: int, but: str | None = None) -> bool:
    """One error line per damage finding of the stores opened since ``_OPENED[first]`` (all
    but the text ``but``); whether there was any."""
    bad = [str(f) for st in _OPENED[first:] for f in st.findings if is_damage(f)]
    for text in bad:
        if text != but:
            report_error(text)
    return bool(bad)


def is_damage(f: Finding) -> bool:
    """Whether a store finding is damage (an error line, exit 1); the others are layout notes
    and warnings (a warning line) or information."""
    return f.severity == Severity.ERROR


def exit_on_findings(store: Store) -> None:
    """After a read: damage found in the store is an error (one line each), exit 1; layout
    notes and warnings are one ``warning:`` line each (info findings are not printed)."""
    bad = [f for f in store.findings if is_damage(f)]
    for f in store.findings:
        if not is_damage(f) and (f.kind == "layout" or f.severity == Severity.WARNING):
            err_line(f"warning: {f}")
    if bad:
        sys.stdout.flush()
        for f in bad:
            report_error(str(f))
        raise SystemExit(EXIT_FINDINGS)


_OPENED: list[Store] = []  # stores opened inside handle_errors (their findings are printed)


def open_store(root: Path) -> Store:
    from mqtool.store import Store

    st = Store.open(root)
    _OPENED.append(st)
    if st.live:
        say_live(st.lock.holder_pid)
    return st
