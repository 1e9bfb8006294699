"""Verify's rules for the records a read command shows: the consume-queue unit at each record's
place and the index entries that point at it.

``msg``, ``trace``, ``index --key`` and ``messages`` read records; the damage around them is
checked with the rules ``mqtool verify`` applies to the whole store, not with a copy of them:

* the unit at the record's place (its topic, queue id and queue offset) must point at it, with
  its size and tag hash (:func:`mqtool.integrity.queues.check_places`: verify's
  ``check_window``, then verify's unit rule for each unit there that is not the record's own);
* every index entry that points at the record must carry the hash of one of its index keys
  (UNIQ_KEY, each KEYS token) and its time difference (:meth:`IndexCheck.records`: verify's
  entry rule; entries are found by a binary search, since the broker writes them in commitlog
  order).

Findings are noted in the store (:meth:`mqtool.store.Store.note`). A command keeps one
:class:`RecordCheck` (the queues read stay cached for its next records); :func:`records_named`
and :func:`records_keyed` are what ``msg`` and ``index --key`` show.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.errors import Finding
from mqtool.integrity.indexcheck import IndexCheck
from mqtool.integrity.queues import check_places
from mqtool.integrity.verify_report import FindingSink, QueueScan
from mqtool.store.reader import Store
from mqtool.store.records_at import messages_at
from mqtool.store.search import find_by_key, find_id


class _StoreSink(FindingSink):
    """Findings go to the store (once each)."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    def add(self, f: Finding) -> None:
        self.store.note(f)


class RecordCheck:
    """The checks of the module doc for one store, along one command."""

    REMEMBER = 1 << 16  # records remembered as checked (a trace checks some more than once)

    def __init__(self, store: Store) -> None:
        self.store = store
        self.sink = _StoreSink(store)
        self.queues: dict[tuple[str, int], QueueScan] = {}
        self.index: IndexCheck | None = None
        self.checked: set[int] = set()
        self.unreached: set[int] = set()

    def check(self, records: Iterable[CommitLogMessage]) -> set[int]:
        """Check ``records`` (those not checked before); returns the commitlog offsets of the
        checked records whose consume-queue place holds no unit of theirs (no consumer reads
        them from the queue)."""
        phys = np.array(sorted({m.physical_offset for m in records} - self.checked),
                        dtype=np.int64)
        if not phys.size:
            return self.unreached
        if len(self.checked) < self.REMEMBER:  # (a listing's batches never repeat a record)
            self.checked.update(phys.tolist())
        store = self.store
        msgs = messages_at(store, phys, keys=True)
        if not len(msgs):
            return self.unreached
        first = store.commitlog_files[0].start if store.commitlog_files else 0
        self.unreached |= check_places(store, msgs, self.queues, store.abort_exists, first,
                                       self.sink)
        if self.index is None:
            self.index = IndexCheck.of_store(store, self.sink)
        self.index.records(msgs)
        return self.unreached


def records_named(
    store: Store, msg_id: str, *, by_offset: bool
) -> tuple[list[CommitLogMessage], str]:
    """What ``msg`` shows, checked: the record at commitlog offset ``msg_id`` (``by_offset``),
    else every record the offsetMsgId or UNIQ_KEY names (:func:`mqtool.store.search.find_id`);
    and how they were found."""
    if by_offset:
        found, how = [store.message_at(int(msg_id))], "commitlog offset"
    else:
        found, how = find_id(store, msg_id)
    RecordCheck(store).check(found)
    return found, how


def records_keyed(
    store: Store, key: str, topic: str | None
) -> tuple[list[CommitLogMessage], str]:
    """What ``index --key`` shows, checked: the records whose KEYS or UNIQ_KEY is ``key`` (in
    ``topic``, else any), in commitlog order; and how they were found."""
    found, via = find_by_key(store, key, topic=topic)
    uniq, _ = find_by_key(store, key, topic=topic, uniq=True)
    seen = {m.physical_offset for m in found}
    found += [m for m in uniq if m.physical_offset not in seen]
    found.sort(key=lambda m: m.physical_offset)
    RecordCheck(store).check(found)
    return found, via
