"""The records at given commitlog positions, read in place by the compiled kernel.

Consume-queue units, index entries and timerlog units name a record by its commitlog offset.
:func:`records_at` answers, for many offsets at once, whether the kernel accepts a record
starting exactly there (the kernel's one rule: magic, TOTALSIZE bounds, every length adding up
to TOTALSIZE, PHYSICALOFFSET equal to the position, UTF-8 topic and properties) and gives its
fields (:mod:`mqtool.formats.commitlog_fields`'s field table, one column per offset). Nothing is
kept between calls: the answer is read from the mapped commitlog, so a check that joins units or
entries to their records needs memory for one batch, not for every message of the store.

The kernel never judges damage: where it does not accept the bytes, callers that need the
walker's verdict (the record may still be one the walker reads) ask :mod:`mqtool.formats`'s
Python rule for those offsets only (:func:`message_at`).

:func:`unit_findings` is verify's rule for consume-queue units against the records they name;
``verify`` (:mod:`mqtool.integrity.queues`) and every read of a queue
(:meth:`mqtool.store.reader.Store.units_ok`) apply it.
"""

from __future__ import annotations

# isort: off
from mqtool.formats import jit  # first: it sets NUMBA_CACHE_DIR for numba
# isort: on
import mmap
from collections.abc import Callable
from typing import Protocol

import numba as nb
import numpy as np

from mqtool.formats import commitlog_fields
from mqtool.formats.commitlog import CommitLogMessage, parse_message
from mqtool.formats.consumequeue import MAX_ADDR
from mqtool.formats.errors import Finding, MqtoolError
from mqtool.integrity import rules
from mqtool.integrity.lmq import is_lmq, lmq_finding, lmq_unit_problem
from mqtool.store.facts import Messages, MessagesBuilder
from mqtool.store.files import CommitLogFile


class CommitLogReader(Protocol):
    """What reading records at offsets needs of a store (:class:`mqtool.store.reader.Store`)."""

    commitlog_files: list[CommitLogFile]

    def mapped(self, f: CommitLogFile) -> bytes | mmap.mmap: ...

    def file_for(self, offset: int) -> CommitLogFile | None: ...


KERNEL_MIN_UNITS = 4096
"""Records at this many commitlog offsets or more (a batch of consume-queue units or of index
entries) are read by the compiled kernel; fewer by the Python rule, one by one
(:func:`messages_at`)."""


@nb.njit(cache=True, nogil=True)
def _scan_at(
    buf: np.ndarray, words: np.ndarray, pos: np.ndarray, file_start: int, out: np.ndarray,
    tables: np.ndarray,
) -> np.ndarray:
    """For each in-file position, :func:`commitlog_fields.scan` of exactly one record there (into
    ``out``'s column); whether the kernel accepted it."""
    n = pos.shape[0]
    ok = np.zeros(n, dtype=np.bool_)
    one = np.empty((out.shape[0], 1), dtype=np.int64)
    size = buf.shape[0]
    for i in range(n):
        p = pos[i]
        if p < 0 or p + 8 > size:
            continue
        count, _q, _status = commitlog_fields.scan(
            buf, words, p, p + 1, file_start, False, one, tables
        )
        if count == 1:
            ok[i] = True
            for k in range(out.shape[0]):
                out[k, i] = one[k, 0]
    return ok


def records_at(
    store: CommitLogReader, phys: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each commitlog offset in ``phys``: (index of its commitlog file in
    ``store.commitlog_files``, -1 when in none; whether the kernel accepts a record starting
    exactly there; the kernel's field table, ``N_FIELDS`` x len(phys), filled for accepted
    offsets, positions in-file)."""
    phys = np.asarray(phys, dtype=np.int64)
    n = len(phys)
    fields = commitlog_fields.field_table(n)
    ok = np.zeros(n, dtype=bool)
    files = store.commitlog_files
    fi = np.full(n, -1, dtype=np.int64)
    if not n or not files:
        return fi, ok, fields
    starts = np.array([f.start for f in files], dtype=np.int64)
    sizes = np.array([f.size for f in files], dtype=np.int64)
    k = np.searchsorted(starts, phys, side="right") - 1
    kc = np.maximum(k, 0)
    inside = (k >= 0) & (phys - starts[kc] < sizes[kc])
    fi[inside] = k[inside]
    for j in np.unique(fi[inside]).tolist():
        sel = np.flatnonzero(fi == j)
        f = files[j]
        a = commitlog_fields.as_bytes(store.mapped(f))
        part = commitlog_fields.field_table(len(sel))
        got = _scan_at(a, commitlog_fields.words_of(a), phys[sel] - f.start, f.start, part,
                       jit.CRC_TABLES)
        ok[sel] = got
        fields[:, sel] = part
        del a
    return fi, ok, fields


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
    """The compact facts (:class:`mqtool.integrity.model.Messages`, in commitlog order) of the
    records starting at the distinct offsets of ``phys``: those the kernel accepts, and those
    only the Python rule reads (:func:`message_at`). Offsets where no record starts are not in
    the table. ``keys``: also the index key hashes; ``tags``: the tagsCodes (else 0)."""

    at = np.unique(np.asarray(phys, dtype=np.int64))
    cols = MessagesBuilder(keys=keys, tags=tags)
    if len(at) < KERNEL_MIN_UNITS:  # the Python rule for each: fewer than loading the kernel costs
        for p in at.tolist():
            m = message_at(store, int(p))
            if m is not None:
                cols.add_message(m, True)
        return cols.messages()
    fi, ok, fields = records_at(store, at)
    files = store.commitlog_files
    for j in np.unique(fi[ok]).tolist():
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


class UnitReader(CommitLogReader, Protocol):
    """What the unit rule reads of a store (:class:`mqtool.store.reader.Store`)."""

    live: bool

    def listed_end(self) -> int: ...

    def try_message_at(self, offset: int) -> CommitLogMessage | None: ...


def unit_findings(
    store: UnitReader, topic: str, qid: int, offsets: np.ndarray, phys: np.ndarray,
    sizes: np.ndarray, tags: np.ndarray, where: Callable[[int], tuple[str, int | None]],
    first_start: int, data_end: int,
) -> list[tuple[int, Finding]]:
    """The rule for consume-queue units of ``topic``/``qid`` (logical ``offsets`` and their
    commitlog offsets, sizes and tagsCodes; ``where`` gives a unit's file and in-file offset),
    each checked against the record at its commitlog offset (read in place,
    :func:`messages_at`): impossible values, a record past the valid
    data (``data_end``), no record there, another queue's record (topic, queueId,
    queueOffset, size; an LMQ's unit must name a record dispatched to it,
    :mod:`mqtool.integrity.lmq`), a tagsCode that is not the record's tag hash. Units below
    ``first_start`` (commitlog files deleted first) are no findings; on a live store, neither
    are units of records past the files it was opened with (written since), and records past
    ``data_end`` are read as they are now. Returns (index into the arrays, finding) for each
    unit that is a finding."""
    tag_hash = rules.tags_code_is_tag_hash(topic)
    impossible = (phys < 0) | (sizes <= 0)
    below = (~impossible) & (phys < first_start)
    n = len(phys)
    if store.live:  # records written since the pass are read as they are now
        later = (~impossible) & (~below) & (phys >= store.listed_end())
        past = np.zeros(n, bool)
    else:
        later = np.zeros(n, bool)
        past = (~impossible) & (~below) & (phys + sizes > data_end)
    check = ~(impossible | below | past | later)
    msgs = messages_at(store, phys[check], tags=tag_hash)
    if len(msgs):
        idx_c = np.minimum(np.searchsorted(msgs.phy, phys), len(msgs) - 1)
        hit = msgs.phy[idx_c] == phys
    else:
        idx_c = np.zeros(n, np.int64)
        hit = np.zeros(n, bool)
    dangling = check & ~hit
    matched = check & hit
    wrong = np.zeros(n, bool)
    wrong_tags = np.zeros(n, bool)
    lmq_why: dict[int, str] = {}
    if matched.any() and is_lmq(topic):  # units naming another topic's records
        for i in np.flatnonzero(matched).tolist():
            why = lmq_unit_problem(store, topic, int(offsets[i]), int(phys[i]), int(sizes[i]))
            if why is not None:
                lmq_why[i] = why
                wrong[i] = True
        if tag_hash:
            wrong_tags = matched & ~wrong & (tags > MAX_ADDR) & (msgs.tags_code[idx_c] != tags)
    elif matched.any():
        topic_idx = msgs.topics.index(topic) if topic in msgs.topics else -1
        same = (
            (msgs.topic[idx_c] == topic_idx) & (msgs.queue_id[idx_c] == qid)
            & (msgs.queue_offset[idx_c] == offsets) & (msgs.size[idx_c] == sizes)
        )
        wrong = matched & ~same
        if tag_hash:
            wrong_tags = (matched & same & (tags > MAX_ADDR)
                          & (msgs.tags_code[idx_c] != tags))
    out: list[tuple[int, Finding]] = []
    for i in np.flatnonzero(impossible | past | dangling | wrong | wrong_tags).tolist():
        lo = int(offsets[i])
        rel, pos = where(lo)
        phy, size, tag = int(phys[i]), int(sizes[i]), int(tags[i])
        unit = f"unit {topic}/{qid}@{lo} -> commitlog offset {phy} size {size}"
        r = int(idx_c[i])
        if impossible[i]:
            f = Finding("bad-field", rel, pos, f"{unit}: impossible values (RocketMQ's "
                        "ConsumeQueue.recover stops at this unit)")
        elif past[i]:
            f = Finding("cq", rel, pos, f"{unit}: points past the valid commitlog data "
                        f"(ends at {data_end})", phy=phy)
        elif dangling[i]:
            f = Finding("cq", rel, pos, f"{unit}: no readable message starts there", phy=phy)
        elif i in lmq_why:
            f = lmq_finding(rel, pos, unit, lmq_why[i], phy)
        elif wrong[i]:
            f = Finding(
                "cq", rel, pos,
                f"{unit}: the message there is {msgs.topics[int(msgs.topic[r])]}/"
                f"{int(msgs.queue_id[r])}@{int(msgs.queue_offset[r])} size "
                f"{int(msgs.size[r])}", phy=phy,
            )
        else:
            f = Finding("cq", rel, pos, f"{unit}: tagsCode is not the message's tag hash",
                        expected=str(int(msgs.tags_code[r])), found=str(tag), phy=phy)
        out.append((i, f))
    return out
