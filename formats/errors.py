"""The one exception hierarchy of mqtool.

Every error mqtool raises on purpose derives from :class:`MqtoolError`; the CLI catches exactly
that base, prints one line and exits 1. Format errors carry the file, the absolute offset and
what was expected versus found, e.g.::

    commitlog/00000000001073741824 @ 0x3ff2a0: bad magic: expected 0xdaa320a7 or 0xdaa320ab,
    found 0x00000000
"""

from __future__ import annotations


class MqtoolError(Exception):
    """Base of every error mqtool raises deliberately."""


class FormatError(MqtoolError):
    """Bytes that do not match a RocketMQ on-disk format.

    ``file`` is a path (or a name relative to the store root), ``offset`` the absolute byte
    offset in that file where the problem was found (``None`` when not applicable).
    """

    def __init__(self, file: str | None, offset: int | None, detail: str) -> None:
        self.file = file
        self.offset = offset
        self.detail = detail
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = self.file or "<bytes>"
        if self.offset is not None:
            where += f" @ {self.offset:#x}"
        return f"{where}: {self.detail}"


class TruncatedError(FormatError):
    """A structure runs past the end of its file or buffer."""
