"""Where a store's files are: the store root, and the files named by a number (commitlog,
consume-queue and timerlog files by the offset of their first byte, index files by a time).

Every reader and writer of a store finds the root and lists numbered files here; the standard
library only, so the write engine and the Spark driver import it for nothing.
"""

from __future__ import annotations

from pathlib import Path

COMMITLOG_DIR = "commitlog"


def offset_name(offset: int) -> str:
    """``UtilAll.offset2FileName``: the 20-digit zero-padded offset a file is named by."""
    return f"{offset:020d}"


def holds_commitlog(directory: Path) -> bool:
    """Whether ``directory`` holds a commitlog: ``commitlog/`` or a DLedger
    ``dledger-<id>/data/``."""
    return (directory / COMMITLOG_DIR).is_dir() or any(
        p.is_dir() for p in directory.glob("dledger-*/data"))


def store_root(given: Path) -> Path:
    """The store root ``given`` names: itself, or its ``store/`` when only that holds a
    commitlog (a broker's home directory given for its store)."""
    if not holds_commitlog(given) and holds_commitlog(given / "store"):
        return given / "store"
    return given


def root_above(given: Path) -> Path | None:
    """The store root ``given`` lies inside (``store/commitlog`` given for ``store``), None when
    no parent of it holds a commitlog."""
    return next((p for p in given.resolve().parents if holds_commitlog(p)), None)


def is_numbered(name: str, *, strict: bool = True) -> bool:
    """Whether ``name`` is a numbered store file's.

    ``strict``: 20 digits, the offset of its first byte (``UtilAll.offset2FileName``): what a
    reader of a store takes as data, any other name being a stray file it reports. Not strict:
    any name of digits only, as ``MappedFileQueue#load`` parses every name as a number: what the
    write engine opens and appends after, and what a Spark scan splits.
    """
    if strict:
        return len(name) == 20 and name.isdigit()
    return name.isdigit()


def numbered_files(directory: Path, others: list[Path] | None = None, *,
                   strict: bool = True) -> list[Path]:
    """The regular files of ``directory`` named by a number (:func:`is_numbered`, ``strict`` as
    there), in number order; none when it is missing or not a directory. The other regular files
    are added to ``others`` (in name order) when it is given."""
    try:
        entries = sorted(directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    files = [p for p in entries if p.is_file()]
    if others is not None:
        others.extend(p for p in files if not is_numbered(p.name, strict=strict))
    return sorted((p for p in files if is_numbered(p.name, strict=strict)),
                  key=lambda p: int(p.name))
