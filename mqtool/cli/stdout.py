"""A closed stdout (``mqtool ... | head``): what is written after is dropped, without a
traceback, and the command goes on to its findings (still on stderr) and its own exit status;
a listing that streams (``--jsonl``, ``dlq export``) stops there instead, its reader being gone,
and says the damage it met until then (:func:`mqtool.cli.exits.handle_errors`). Neither rich nor
click see the error (both would end with status 1, which says the store has findings)."""

from __future__ import annotations

import errno
import os
import sys
from typing import Any, TextIO


def drop_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered or written later goes nowhere (the
    interpreter's flush at exit included), without another error."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


class GuardedStdout:
    """``sys.stdout`` for the command line: a write or flush that finds it closed drops it
    (:func:`drop_stdout`) and says so in :attr:`closed_by_reader`, instead of raising (the
    interpreter's own flush at exit included)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.closed_by_reader = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._dropped()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._dropped()

    def _dropped(self) -> None:
        self.closed_by_reader = True
        drop_stdout()
        self._stream.flush()  # what was buffered goes to /dev/null now

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard() -> None:
    """Install :class:`GuardedStdout` (the entry point does, once)."""
    if sys.stdout is not None and not isinstance(sys.stdout, GuardedStdout):
        sys.stdout = GuardedStdout(sys.stdout)


def stop_if_reader_gone() -> None:
    """For a streaming listing, after each row: BrokenPipeError once a write found stdout
    closed (the listing stops; ``handle_errors`` ends it)."""
    out = sys.stdout
    if isinstance(out, GuardedStdout) and out.closed_by_reader:
        raise BrokenPipeError(errno.EPIPE, "stdout's reader is gone")
