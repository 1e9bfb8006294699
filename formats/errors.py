"""The one exception hierarchy of mqtool, and the one ``Finding`` type (the Spark adapter's
errors, :mod:`mqtool.spark.errors`, derive from it one layer up).

Every error mqtool raises on purpose derives from :class:`MqtoolError`; the CLI catches exactly
that base, prints one line and exits with the error's :attr:`MqtoolError.exit_status` (the
table below). Format errors carry the file, the byte offset inside that
file and what was expected versus found, e.g.::

    commitlog/00000000001073741824 @ 0x3ff2a0: bad magic: expected 0xdaa320a7 or 0xdaa320ab,
    found 0x00000000

Each kind of damage is a class here (in the style of kafka's ``CorruptRecordError``), and its
``kind`` is the name a :class:`Finding` carries, so that every finding kind is a name, not a
free-form string. Readers that keep going past damage turn an error into a finding with
:meth:`FormatError.finding`.

Offset convention (everywhere): ``FILE @ OFFSET`` is the byte offset *inside that file*; for a
commitlog record the commitlog position may follow as ``(phy N)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

EXIT_OK = 0
"""Exit status: the command did what was asked and found nothing wrong."""
EXIT_FINDINGS = 1
"""Exit status: the command ran and found something wrong or missing: damage in a store (one
line each), a message, group or topic the store does not hold, records not resent."""
EXIT_USAGE = 2
"""Exit status: what the command was given is wrong: an unknown option, a bad value, options
that do not go together, a path that names no store or a file that is not there."""
EXIT_ENVIRONMENT = 3
"""Exit status: something outside mqtool stopped it: no Java or Spark for a scan, a name
server or broker that cannot be reached or refuses, a store a running broker holds, a full
disk, no permission."""


class MqtoolError(Exception):
    """Base of every error mqtool raises deliberately.

    ``exit_status``: what the command line exits with when this error ends a command (one of
    the ``EXIT_*`` values); a class sets its own, :func:`usage` and :func:`environment` set it
    on one error.
    """

    exit_status: int = EXIT_FINDINGS


_E = TypeVar("_E", bound=MqtoolError)


def usage(error: _E) -> _E:
    """``error``, exiting with :data:`EXIT_USAGE` (what the command was given is wrong)."""
    error.exit_status = EXIT_USAGE
    return error


def environment(error: _E) -> _E:
    """``error``, exiting with :data:`EXIT_ENVIRONMENT` (something outside mqtool)."""
    error.exit_status = EXIT_ENVIRONMENT
    return error


def failed_path(e: OSError) -> str | None:
    """The path an OSError names: a two-path call's target (a copy's destination), else its
    file; None when it names none."""
    where = e.filename2 or e.filename
    return None if where is None else str(where)


class Severity(StrEnum):
    """How bad a finding is: an ``error`` makes a read command exit 1."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


#: Every finding kind, with what it means. A :class:`Finding` must use one of these names.
FINDING_KINDS: dict[str, str] = {}


def _kind(name: str, meaning: str) -> str:
    FINDING_KINDS[name] = meaning
    return name


class FormatError(MqtoolError):
    """Bytes that do not match a RocketMQ on-disk format.

    ``file`` is a path (or a name relative to the store root), ``offset`` the byte offset in that
    file where the problem was found (``None`` when not applicable).
    """

    kind: ClassVar[str] = _kind("corrupt", "bytes that match no RocketMQ structure")

    def __init__(
        self,
        file: str | None,
        offset: int | None,
        detail: str,
        *,
        expected: str | None = None,
        found: str | None = None,
        phy: int | None = None,
    ) -> None:
        self.file = file
        self.offset = offset
        self.detail = detail
        self.expected = expected
        self.found = found
        self.phy = phy
        super().__init__(self.__str__())

    def __str__(self) -> str:
        return _where(self.file or "<bytes>", self.offset, self.phy) + f": {self.detail}"

    def finding(self, severity: Severity = Severity.ERROR) -> Finding:
        """This error as a finding of the same kind, file and offset."""
        return Finding(
            self.kind, self.file or "<bytes>", self.offset, self.detail, severity=severity,
            expected=self.expected, found=self.found, phy=self.phy,
        )


class TruncatedError(FormatError):
    """A structure runs past the end of its file or buffer."""

    kind = _kind("truncated", "a structure runs past the end of its file")


class BadMagicError(FormatError):
    """A record's magic code is none of the known ones."""

    kind = _kind("bad-magic", "a record's magic code is none of the known ones")


class BadSizeError(FormatError):
    """A size field is impossible (negative, past the file, or disagreeing with its parts)."""

    kind = _kind("bad-size", "a size field is impossible or disagrees with the record")


class CrcMismatchError(FormatError):
    """A stored CRC (body CRC, 5.x ``__CRC32#`` property) does not match the bytes."""

    kind = _kind("crc-mismatch", "a stored CRC does not match the bytes")


class TornRecordError(FormatError):
    """A record that was being written when the writer died (incomplete tail)."""

    kind = _kind("torn-record", "an incomplete record at the end of the written data")


class TornPropertiesError(FormatError):
    """A message record whose properties end in a zero byte: the tail of the record (the
    properties are its last field) was never written, a torn write that still adds up."""

    kind = _kind("properties-torn", "a record whose properties end in zeros (its tail was "
                 "never written)")


class UnexpectedZerosError(FormatError):
    """Zeros where data must be (data ends before the last file, a zeroed record)."""

    kind = _kind("unexpected-zeros", "zeros where written data must be")


class BadFieldError(FormatError):
    """A field holds a value RocketMQ never writes (offset -1, a position not its own, ...)."""

    kind = _kind("bad-field", "a field holds a value RocketMQ never writes")


class BadConfigError(FormatError):
    """A config file (``config/*.json``) that cannot be read."""

    kind = _kind("bad-config", "a config file that cannot be parsed")


# Kinds used by readers for facts about auxiliary files (kept until every caller names the
# precise error class above).
_kind("cq", "a consume-queue file or unit that is damaged or points past the data")
_kind("index", "an index file or entry that is damaged or points past the data")
_kind("config", "a config file that is empty, damaged or replaced by its .bak")
_kind("checkpoint", "a checkpoint that disagrees with the data")
_kind("layout", "unexpected file names or sizes in the store layout")
_kind("torn", "the written data ends inside a record")
_kind("zeros", "the written data ends before the last commitlog file")
_kind("gap", "commitlog data missing between two files")
# Kinds of the cross-file checks (mqtool scan's integrity audit)
UNREADABLE = _kind("unreadable", "a commitlog region that holds no readable record")
CQ_DANGLING = _kind("cq-dangling", "a consume-queue unit that points at no message")
CQ_MISMATCH = _kind("cq-mismatch", "a consume-queue unit that points at another message, or "
                    "whose tagsCode is not what its message gives")
CQ_MISSING = _kind("cq-missing", "a message without its consume-queue unit")
INDEX_DANGLING = _kind("index-dangling", "an index entry that points at no message start")
INDEX_MISMATCH = _kind("index-mismatch", "an index entry whose keyHash is none of its "
                       "message's index keys, or whose prevIndex names no earlier entry")
# Kinds of the delay-level evidence (mqtool/delaylevels.py) and the 5.x timer files checks
DELAY_LEVELS = _kind(
    "delay-levels", "delay levels given or configured that contradict the store's evidence")
TIMER = _kind("timer", "a 5.x timer file (timerlog, timerwheel, timercheck) that is damaged "
              "or disagrees with the others or the commitlog")


def _where(file: str, offset: int | None, phy: int | None) -> str:
    where = file if offset is None else f"{file} @ {offset:#x}"
    if phy is not None:
        where += f" (phy {phy})"
    return where


@dataclass(frozen=True, slots=True)
class Finding:
    """Something a reader found wrong or notable, with where it is.

    ``file`` is relative to the store root; ``offset`` is the byte offset inside that file (the
    one offset convention); ``phy`` optionally gives the commitlog position it concerns.
    ``kind`` is a name in :data:`FINDING_KINDS`.
    """

    kind: str
    file: str
    offset: int | None
    detail: str
    severity: Severity = Severity.ERROR
    expected: str | None = None
    found: str | None = None
    phy: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in FINDING_KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}")

    def __str__(self) -> str:
        return _where(self.file, self.offset, self.phy) + f": {self.detail}"

    def to_json(self) -> dict[str, Any]:
        """The JSON shape shared by every command: severity, kind, file, offset, ..."""
        return {
            "severity": str(self.severity), "kind": self.kind, "file": self.file,
            "offset": self.offset, "expected": self.expected, "found": self.found,
            "detail": self.detail, "phy": self.phy,
        }
