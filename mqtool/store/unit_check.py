"""The unit rule: consume-queue units against the records they name.

:func:`unit_findings` is ``verify``'s rule for consume-queue units (:mod:`mqtool.integrity.queues`)
and is applied by every read of a queue (:meth:`mqtool.store.reader.Store.units_ok`): each unit is
checked against the record at its commitlog offset, read in place
(:func:`mqtool.store.records_at.messages_at`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.consumequeue import MAX_ADDR
from mqtool.formats.errors import Finding
from mqtool.integrity import dispatch_rules
from mqtool.integrity.lmq import is_lmq, lmq_finding, lmq_unit_problem
from mqtool.store.records_at import CommitLogReader, messages_at


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
    tag_hash = dispatch_rules.tags_code_is_tag_hash(topic)
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
