"""LMQ units in ``mqtool verify``: a ``%LMQ%<name>/0`` unit names a record of another topic.

With ``enableLmq`` and ``enableMultiDispatch`` the broker writes a record once, under its own
topic and queue, and adds a unit for it to every LMQ its ``INNER_MULTI_DISPATCH`` property
names (``MultiDispatchUtils``, ``ConsumeQueue#multiDispatchLmqQueue``), at the queue offset it
also records in ``INNER_MULTI_QUEUE_OFFSET`` (same order). So an LMQ unit is right when the
record at its offset has its size, names the LMQ in ``INNER_MULTI_DISPATCH`` and gives the
unit's queue offset for it; its tagsCode is the record's tag hash like any unit's.
"""

from __future__ import annotations

from typing import Protocol

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.errors import Finding
from mqtool.formats.rules import is_lmq as is_lmq
from mqtool.formats.rules import lmq_dispatch


class RecordReader(Protocol):
    """What the rule reads of a store (:class:`mqtool.store.Store`)."""

    def try_message_at(self, offset: int) -> CommitLogMessage | None: ...


def lmq_unit_problem(store: RecordReader, topic: str, queue_offset: int, phy: int, size: int
                     ) -> str | None:
    """Why the LMQ unit ``topic/0@queue_offset -> phy size`` names no record dispatched to it,
    or None."""
    m = store.try_message_at(phy)
    if m is None:
        return "no readable message starts there"
    if m.total_size != size:
        return f"the message there is {m.total_size} bytes"
    disp = lmq_dispatch(m.properties)
    if topic not in disp:
        return (f"the message there ({m.topic}/{m.queue_id}@{m.queue_offset}) does not name "
                f"{topic} in INNER_MULTI_DISPATCH ({m.properties.get('INNER_MULTI_DISPATCH')!r})")
    want = disp[topic]
    if want is not None and want != queue_offset:
        return (f"the message there ({m.topic}/{m.queue_id}@{m.queue_offset}) was dispatched to "
                f"{topic} at offset {want} (INNER_MULTI_QUEUE_OFFSET)")
    return None


def lmq_finding(rel: str, pos: int | None, unit: str, why: str, phy: int) -> Finding:
    return Finding("cq", rel, pos, f"{unit}: {why}", phy=phy)
