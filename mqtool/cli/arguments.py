"""Argument rules the commands share: times, body modes, options that go together, usage
errors of the library said as typer says a bad parameter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from mqtool.formats.errors import MqtoolError


def parse_time(text: str | None, what: str = "time") -> int | None:
    """Epoch ms from ``1795294972389`` or ``2026-11-21T21:00:00Z`` (UTC when no zone)."""
    if text is None:
        return None
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    from datetime import UTC, datetime

    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError as e:
        import typer

        raise typer.BadParameter(f"{what}: {text!r} is neither epoch ms nor ISO-8601") from e
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def now_value(now: str) -> int | None:
    """``--now``: None for ``store`` (the store's own time, judged by the command), this
    machine's clock for ``wall``, else epoch ms or ISO-8601."""
    if now == "store":
        return None
    if now == "wall":
        import time

        return int(time.time() * 1000)
    return parse_time(now, "--now")


R = TypeVar("R")


def check_body_mode(mode: str) -> str:
    from mqtool.jsonview import BODY_MODES

    if mode not in BODY_MODES:
        import typer

        raise typer.BadParameter(f"--body must be one of {', '.join(BODY_MODES)}, not {mode!r}")
    return mode


def require_with(value: object, needed: object, flag: str, needs: str) -> None:
    """``flag`` only makes sense together with ``needs`` (e.g. --queue with --topic)."""
    if value is not None and needed is None:
        import typer

        raise typer.BadParameter(f"{flag} needs {needs} (a queue id alone names no queue)"
                                 if flag == "--queue" else f"{flag} needs {needs}")


def as_bad_parameter(fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """``fn(*args, **kwargs)``, a usage error it raises (exit 2: the arguments contradict each
    other) said as typer says a bad parameter."""
    from mqtool.formats.errors import EXIT_USAGE

    try:
        return fn(*args, **kwargs)
    except MqtoolError as e:
        if e.exit_status != EXIT_USAGE:
            raise
        import typer

        raise typer.BadParameter(str(e)) from None


def exactly_one(what: str, given: dict[str, object]) -> None:
    """Exactly one of ``given`` (name -> value) must be set; ``what`` says what they identify.

    ``exactly_one("the message to trace", {"ID": msg_id, "--key": key})``
    """
    options = " or ".join(given)
    n = sum(v is not None for v in given.values())
    if n == 1:
        return
    import typer

    if n == 0:
        raise typer.BadParameter(f"give {what}: {options}")
    if n > 1:
        raise typer.BadParameter(f"give {options}, not both")
