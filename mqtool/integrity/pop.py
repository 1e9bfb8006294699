"""POP records in ``mqtool verify``: every checkpoint and ack in the revive topic must be the
JSON the broker writes. The checks over the POP records that :mod:`mqtool.formats.pop` parses.

The broker stores a POP checkpoint or ack as a message of ``rmq_sys_REVIVE_LOG_<cluster>``
(tag ``ck``, ``ack`` or ``bAck``), put through the timer with a delivery time: while it waits it
is a record of ``rmq_sys_wheel_timer`` whose ``REAL_TOPIC`` is the revive topic, then a record
of the revive topic itself. Both are read through their consume queues; a body PopReviveService
could not parse is a finding naming the record's file and offset.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.errors import Finding, FormatError
from mqtool.formats.pop import REVIVE_TOPIC_PREFIX, PopAck, PopCheckPoint, parse_revive_body
from mqtool.formats.rules import PROPERTY_REAL_TOPIC, PROPERTY_TAGS, TIMER_TOPIC
from mqtool.store.reader import Store


def revive_records(store: Store, since: int = 0) -> Iterator[CommitLogMessage]:
    """The revive topics' records, and the timer's records bound for a revive topic (those at
    commitlog offset ``since`` or later)."""
    seen: set[int] = set()
    for topic, qid in store.queue_ids():
        timer = topic == TIMER_TOPIC
        if not (timer or topic.startswith(REVIVE_TOPIC_PREFIX)):
            continue
        for qe in store.queue_entries(topic, qid):
            phy = qe.entry.commit_log_offset
            if phy in seen or phy < since:
                continue
            m = store.try_message_at(phy)
            if m is None:
                continue  # a unit naming no record is the queue check's finding
            if timer and not m.properties.get(PROPERTY_REAL_TOPIC, "").startswith(
                    REVIVE_TOPIC_PREFIX):
                continue
            seen.add(phy)
            yield m


def parse_record(store: Store, m: CommitLogMessage) -> PopCheckPoint | PopAck:
    """The checkpoint or ack a revive record holds (BadFieldError at its file and offset)."""
    f = store.file_for(m.physical_offset)
    rel, pos = (f.rel, m.physical_offset - f.start) if f else (None, None)
    return parse_revive_body(m.properties.get(PROPERTY_TAGS), m.decompressed_body(), file=rel,
                             offset=pos, phy=m.physical_offset)


def check_pop(store: Store, add: Callable[[Finding], None]) -> int:
    """Parse every revive record (a record that does not parse is given to ``add``); returns
    how many were read."""
    n = 0
    for m in revive_records(store):
        n += 1
        try:
            parse_record(store, m)
        except FormatError as e:
            add(e.finding())
    return n
