"""The records at given commitlog positions, read in place by the compiled kernel.

Consume-queue units, index entries and timerlog units name a record by its commitlog offset.
:func:`~mqtool.store.records_kernel.records_at` answers, for many offsets at once, whether the
kernel accepts a record starting exactly there (the kernel's one rule: magic, TOTALSIZE bounds,
every length adding up to TOTALSIZE, PHYSICALOFFSET equal to the position, UTF-8 topic and
properties) and gives its fields (:mod:`mqtool.formats.commitlog_fields`'s field table, one
column per offset). Nothing is kept between calls: the answer is read from the mapped commitlog,
so a check that joins units or entries to their records needs memory for one batch, not for
every message of the store.

The kernel never judges damage: where it does not accept the bytes, callers that need the
walker's verdict (the record may still be one the walker reads) ask :mod:`mqtool.formats`'s
Python rule for those offsets only (:func:`message_at`).

The unit rule (:mod:`mqtool.store.unit_check`) reads the records its units name through
:func:`messages_at`.
"""

from __future__ import annotations

import mmap
from typing import TYPE_CHECKING, Protocol

from mqtool.formats.commitlog import CommitLogMessage, parse_message
from mqtool.formats.errors import MqtoolError
from mqtool.store.files import CommitLogFile

if TYPE_CHECKING:  # numpy and the facts table are imported by messages_at
    import numpy as np

    from mqtool.store.facts import Messages


class CommitLogReader(Protocol):
    """What reading records at offsets needs of a store (:class:`mqtool.store.reader.Store`)."""

    commitlog_files: list[CommitLogFile]

    def mapped(self, f: CommitLogFile) -> bytes | mmap.mmap: ...

    def file_for(self, offset: int) -> CommitLogFile | None: ...


KERNEL_MIN_UNITS = 4096
"""Records at this many commitlog offsets or more (a batch of consume-queue units or of index
entries) are read by the compiled kernel; fewer by the Python rule, one by one
(:func:`messages_at`)."""


def message_at(store: CommitLogReader, phy: int) -> CommitLogMessage | None:
    """The record the Python rule (:func:`parse_message`) reads at commitlog offset ``phy``
    when its PHYSICALOFFSET says ``phy``, else None (no findings are noted)."""
    f = store.file_for(phy)
    if f is None:
        return None
    try:
        rec = parse_message(store.mapped(f), phy - f.start, file=f.rel, file_start=f.start)
    except MqtoolError:
        return None
    if isinstance(rec, CommitLogMessage) and rec.physical_offset == phy:
        return rec
    return None


def messages_at(
    store: CommitLogReader, phys: np.ndarray, *, keys: bool = False, tags: bool = True
) -> Messages:
    """The compact facts (:class:`mqtool.store.facts.Messages`, in commitlog order) of the
    records starting at the distinct offsets of ``phys``: those the kernel accepts, and those
    only the Python rule reads (:func:`message_at`). Offsets where no record starts are not in
    the table. ``keys``: also the index key hashes; ``tags``: the tagsCodes (else 0)."""
    import numpy as np

    from mqtool.store.facts import MessagesBuilder, distinct

    at = distinct(np.asarray(phys, dtype=np.int64))
    cols = MessagesBuilder(keys=keys, tags=tags)
    if len(at) < KERNEL_MIN_UNITS:  # the Python rule for each: fewer than loading the kernel costs
        for p in at.tolist():
            m = message_at(store, int(p))
            if m is not None:
                cols.add_message(m, True)
        return cols.messages()
    from mqtool.formats import commitlog_fields
    from mqtool.store.records_kernel import records_at

    fi, ok, fields = records_at(store, at)
    files = store.commitlog_files
    for j in distinct(fi[ok]).tolist():
        sel = np.flatnonzero(ok & (fi == j))
        a = commitlog_fields.as_bytes(store.mapped(files[j]))
        cols.add_fields(a, np.ascontiguousarray(fields[:, sel]), False)
        del a
    extra = 0
    for p in at[~ok & (fi >= 0)].tolist():
        m = message_at(store, int(p))
        if m is not None:
            cols.add_message(m, True)
            extra += 1
    msgs = cols.messages()
    if extra:
        msgs = msgs.take(np.argsort(msgs.phy, kind="stable"))
    return msgs
