"""A DLedger commitlog read as the commitlog it wraps (``enableDLegerCommitLog``).

The data files (``dledger-<id>/data/<20-digit>``) hold DLedger entries
(:mod:`mqtool.formats.dledger`); each entry's body is one commitlog record whose
PHYSICALOFFSET is its own position in the log (entry position + 48), so a record is read at
its offset as in a plain commitlog, and only a walk needs the entries. The walk yields what
:meth:`mqtool.store.Store.walk_commitlog_file` yields for a plain file, and checks each entry
as DLedger's recovery does (magic, size, pos, the index one more than the last, the term never
going down) plus a set bodyCrc against the body.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mqtool.formats.buffers import Buffer
from mqtool.formats.commitlog import BlankRecord, CommitLogMessage, FileEnd, parse_message
from mqtool.formats.dledger import (
    BODY_OFFSET,
    DLedgerBlank,
    DLedgerEntry,
    entry_problems,
    iter_entries,
)
from mqtool.formats.errors import BadFieldError, Finding, FormatError
from mqtool.formats.walker import crc_findings
from mqtool.store.files import CommitLogFile


def walk_dledger_file(
    buf: Buffer, f: CommitLogFile, files: list[CommitLogFile],
    last: dict[Path, tuple[int, int]], *, decode: bool = True, start: int = 0,
    check: bool = True,
) -> Iterator[CommitLogMessage | BlankRecord | Finding | FileEnd | int]:
    """Records (or, ``decode=False``, record positions), findings and last the FileEnd of the
    DLedger data file ``f`` (bytes ``buf``; one of the log's ``files``), from in-file ``start``
    (an entry boundary, or a record's offset); ``check``: check each record's CRCs. ``last``
    carries (index, term) of a file's last entry to the next file's walk."""
    if start >= BODY_OFFSET:
        start -= BODY_OFFSET  # a record offset names the entry 48 bytes before it
    end = FileEnd(f.start + start, "zeros")
    prev = last.get(f.path)
    for item in iter_entries(buf, file=f.rel, start=start):
        if isinstance(item, FormatError):
            fd = item.finding()
            yield fd
            end = FileEnd(f.start + (item.offset or 0), "corrupt", item.detail)
            break
        if isinstance(item, DLedgerBlank):
            end = FileEnd(f.start + item.offset, "blank")
            break
        e: DLedgerEntry = item
        problems = entry_problems(e, buf, f.start, file=f.rel)
        if prev is not None and not problems:
            if e.index != prev[0] + 1:
                problems.append(BadFieldError(
                    f.rel, e.offset, f"DLedger entry index {e.index} after {prev[0]} (DLedger's "
                    "recovery requires the next index)", expected=str(prev[0] + 1),
                    found=str(e.index)))
            if e.term < prev[1]:
                problems.append(BadFieldError(
                    f.rel, e.offset, f"DLedger entry term {e.term} below the previous entry's "
                    f"{prev[1]}", expected=f">= {prev[1]}", found=str(e.term)))
        for p in problems:
            yield p.finding()
        if problems and (e.magic != 1 or e.size != BODY_OFFSET + e.body_length):
            end = FileEnd(f.start + e.offset, "corrupt", problems[0].detail)
            break
        prev = (e.index, e.term)
        pos = e.body_offset
        if not decode:
            yield pos
        else:
            try:
                rec = parse_message(buf, pos, file=f.rel, file_start=f.start)
            except FormatError as err:
                yield err.finding()
            else:
                if isinstance(rec, CommitLogMessage):
                    if check:
                        yield from crc_findings(rec, f.rel, pos, f.start)
                    if rec.total_size != e.body_length:
                        yield Finding("bad-size", f.rel, pos, f"record of {rec.total_size} bytes "
                                      f"in a DLedger entry body of {e.body_length}",
                                      phy=f.start + pos)
                yield rec
        end = FileEnd(f.start + e.offset + e.size, "zeros")
    else:
        if end.physical_offset >= f.start + len(buf):
            end = FileEnd(f.start + len(buf), "eof")
    i = files.index(f)
    if prev is not None and i + 1 < len(files):  # the next file's first entry follows this one
        last[files[i + 1].path] = prev
    yield end
