"""The unit rule: consume-queue units against the records they name.

:func:`unit_findings` is ``verify``'s rule for consume-queue units (:mod:`mqtool.integrity.queues`)
and is applied by every read of a queue (:meth:`mqtool.store.reader.Store.units_ok`): each unit is
checked against the record at its commitlog offset, read in place. The rule is written once, for
one unit (:class:`_UnitRule`). A batch of fewer than
:data:`~mqtool.store.records_at.KERNEL_MIN_UNITS` units reads each unit's record with the Python
rule (:func:`mqtool.store.records_at.message_at`) and imports no numpy; a larger batch reads its
records at once (:func:`mqtool.store.records_at.messages_at`) and gives the rule only the units
that are not plainly their record's (the others are no findings).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeAlias

from mqtool.formats.commitlog import PROPERTY_TAGS, CommitLogMessage
from mqtool.formats.consumequeue import MAX_ADDR, tags_code_of
from mqtool.formats.errors import Finding
from mqtool.formats.rules import SCHEDULE_TOPIC, delay_written, schedule_unit_delay
from mqtool.integrity import dispatch_rules
from mqtool.integrity.lmq import is_lmq, lmq_finding, lmq_unit_problem
from mqtool.store.records_at import KERNEL_MIN_UNITS, CommitLogReader, message_at

if TYPE_CHECKING:
    import numpy as np

    Ints: TypeAlias = Sequence[int] | np.ndarray
    """A column of integers: a list (a few units) or a numpy array (verify's batches)."""


DELIVER_EXPECTED = "storeTimestamp + the level's delay"
"""What a schedule unit's tagsCode should be (a finding's ``expected``)."""


class UnitReader(CommitLogReader, Protocol):
    """What the unit rule reads of a store (:class:`mqtool.store.reader.Store`)."""

    live: bool

    def listed_end(self) -> int: ...

    def try_message_at(self, offset: int) -> CommitLogMessage | None: ...


class UnitRecord(NamedTuple):
    """What the unit rule compares of the record a unit names."""

    topic: str
    queue_id: int
    queue_offset: int
    size: int
    tags_code: int  # the tag's hash (0 without a tag; 0 when the rule does not compare it)
    store_timestamp: int  # what a schedule unit's deliver time counts from

    @classmethod
    def of(cls, m: CommitLogMessage | None, tags: bool) -> UnitRecord | None:
        if m is None:
            return None
        tag = m.properties.get(PROPERTY_TAGS) if tags else None
        return cls(m.topic, m.queue_id, m.queue_offset, m.total_size,
                   tags_code_of(tag) if tag else 0, m.store_timestamp)


class _UnitRule:
    """The rule for one unit of ``topic``/``qid`` (see :func:`unit_findings`)."""

    def __init__(self, store: UnitReader, topic: str, qid: int,
                 where: Callable[[int], tuple[str, int | None]], first_start: int,
                 data_end: int) -> None:
        self.store, self.topic, self.qid, self.where = store, topic, qid, where
        self.first_start, self.data_end = first_start, data_end
        self.tag_hash = dispatch_rules.tags_code_is_tag_hash(topic)
        self.schedule = topic == SCHEDULE_TOPIC
        self.lmq = is_lmq(topic)
        self.listed_end = store.listed_end() if store.live else 0

    def finding(self, lo: int, phy: int, size: int, tag: int,
                record: Callable[[], UnitRecord | None]) -> Finding | None:
        """The finding of unit ``lo`` (commitlog offset ``phy``, ``size``, tagsCode ``tag``;
        ``record`` reads the record at ``phy``, None where none starts), or None."""
        rel, pos = self.where(lo)
        unit = f"unit {self.topic}/{self.qid}@{lo} -> commitlog offset {phy} size {size}"
        if phy < 0 or size <= 0:
            return Finding("bad-field", rel, pos, f"{unit}: impossible values (RocketMQ's "
                           "ConsumeQueue.recover stops at this unit)")
        if phy < self.first_start:
            return None
        if self.store.live:
            if phy >= self.listed_end:
                return None
        elif phy + size > self.data_end:
            return Finding("cq", rel, pos, f"{unit}: points past the valid commitlog data "
                           f"(ends at {self.data_end})", phy=phy)
        r = record()
        if r is None:
            return Finding("cq", rel, pos, f"{unit}: no readable message starts there", phy=phy)
        if self.lmq:
            why = lmq_unit_problem(self.store, self.topic, lo, phy, size)
            if why is not None:
                return lmq_finding(rel, pos, unit, why, phy)
        elif (r.topic, r.queue_id, r.queue_offset, r.size) != (self.topic, self.qid, lo, size):
            return Finding("cq", rel, pos, f"{unit}: the message there is {r.topic}/"
                           f"{r.queue_id}@{r.queue_offset} size {r.size}", phy=phy)
        if self.tag_hash and tag > MAX_ADDR and r.tags_code != tag:
            return Finding("cq", rel, pos, f"{unit}: tagsCode is not the message's tag hash",
                           expected=str(r.tags_code), found=str(tag), phy=phy)
        if self.schedule and tag > MAX_ADDR and not delay_written(
                delay := schedule_unit_delay(tag, r.store_timestamp)):
            return Finding("cq", rel, pos, f"{unit}: tagsCode {tag} (the deliver time) is {delay} "
                           "ms after the message's storeTimestamp, a delay no messageDelayLevel "
                           "gives (whole seconds, at most 10 years): the unit's tagsCode or the "
                           "message's storeTimestamp is damaged",
                           expected=DELIVER_EXPECTED, found=str(tag),
                           phy=phy)
        return None


def unit_findings(
    store: UnitReader, topic: str, qid: int, offsets: Ints, phys: Ints, sizes: Ints, tags: Ints,
    where: Callable[[int], tuple[str, int | None]], first_start: int, data_end: int,
) -> list[tuple[int, Finding]]:
    """The rule for consume-queue units of ``topic``/``qid`` (logical ``offsets`` and their
    commitlog offsets, sizes and tagsCodes; ``where`` gives a unit's file and in-file offset),
    each checked against the record at its commitlog offset (read in place): impossible values,
    a record past the valid data (``data_end``), no record there, another queue's record
    (topic, queueId, queueOffset, size; an LMQ's unit must name a record dispatched to it,
    :mod:`mqtool.integrity.lmq`), a tagsCode that is not the record's tag hash, a schedule
    unit's deliver time that no delay level gives from the record's store time. Units below
    ``first_start`` (commitlog files deleted first) are no findings; on a live store, neither
    are units of records past the files it was opened with (written since), and records past
    ``data_end`` are read as they are now. Returns (index into the columns, finding) for each
    unit that is a finding."""
    rule = _UnitRule(store, topic, qid, where, first_start, data_end)
    record: Callable[[int], UnitRecord | None]
    todo: Iterable[int]
    if len(phys) < KERNEL_MIN_UNITS:
        todo = range(len(phys))

        def record(i: int) -> UnitRecord | None:
            return UnitRecord.of(message_at(store, int(phys[i])), rule.tag_hash)
    else:
        todo, record = _not_plain(rule, offsets, phys, sizes, tags)
    out: list[tuple[int, Finding]] = []
    for i in todo:
        f = rule.finding(int(offsets[i]), int(phys[i]), int(sizes[i]), int(tags[i]),
                         partial(record, i))
        if f is not None:
            out.append((i, f))
    return out


def _not_plain(rule: _UnitRule, offsets: Ints, phys: Ints, sizes: Ints, tags: Ints
               ) -> tuple[list[int], Callable[[int], UnitRecord | None]]:
    """For a large batch: the units the rule must look at (every unit but those whose record
    is plainly theirs: checked, a record there of their topic, queue, queue offset and size,
    and the tagsCode the rule compares equal) and their records, read at once
    (:func:`messages_at`)."""
    import numpy as np

    from mqtool.store.records_at import messages_at

    phy, size, lo, tag = (np.asarray(c, dtype=np.int64) for c in (phys, sizes, offsets, tags))
    n = len(phy)
    if rule.store.live:
        check = (phy >= 0) & (size > 0) & (phy >= rule.first_start) & (phy < rule.listed_end)
    else:
        check = (phy >= 0) & (size > 0) & (phy >= rule.first_start) & (phy + size <= rule.data_end)
    below = (phy >= 0) & (size > 0) & (phy < rule.first_start)
    later = (phy >= 0) & (size > 0) & ~below & (phy >= rule.listed_end) if rule.store.live else \
        np.zeros(n, bool)
    msgs = messages_at(rule.store, phy[check], tags=rule.tag_hash)
    if len(msgs):
        row = np.minimum(np.searchsorted(msgs.phy, phy), len(msgs) - 1)
        hit = msgs.phy[row] == phy
    else:
        row, hit = np.zeros(n, np.int64), np.zeros(n, bool)
    plain = np.zeros(n, bool)
    if not rule.lmq and len(msgs):
        t = msgs.topics.index(rule.topic) if rule.topic in msgs.topics else -1
        plain = (check & hit & (msgs.topic[row] == t) & (msgs.queue_id[row] == rule.qid)
                 & (msgs.queue_offset[row] == lo) & (msgs.size[row] == size))
        if rule.tag_hash:
            plain &= (tag <= MAX_ADDR) | (msgs.tags_code[row] == tag)
        if rule.schedule:
            plain &= (tag <= MAX_ADDR) | delay_written(schedule_unit_delay(tag, msgs.store_ts[row]))

    def record(i: int) -> UnitRecord | None:
        if not hit[i]:
            return None
        r = int(row[i])
        return UnitRecord(msgs.topics[int(msgs.topic[r])], int(msgs.queue_id[r]),
                          int(msgs.queue_offset[r]), int(msgs.size[r]), int(msgs.tags_code[r]),
                          int(msgs.store_ts[r]))

    return np.flatnonzero(~(plain | below | later)).tolist(), record
