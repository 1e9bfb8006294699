"""What the clients themselves reported about a message: the trace records producers and
consumers with message trace on write to ``RMQ_SYS_TRACE_TOPIC``
(:mod:`mqtool.formats.clienttrace`).

Those records carry the traced message's id in their ``KEYS``, so they are found like any key
(the index, else a commitlog scan); only the contexts about the message itself are kept. A trace
context that does not read is damage: noted on the store at its record's file and offset;
the record's other contexts are still read.
"""

from __future__ import annotations

from collections.abc import Iterable

from mqtool.formats.clienttrace import parse_trace_body
from mqtool.formats.errors import BadFieldError
from mqtool.formats.rules import TRACE_TOPIC
from mqtool.store.reader import Store
from mqtool.store.search import Finder
from mqtool.trace.results import ClientEvent

_ORDER = {"Pub": 0, "EndTransaction": 1, "SubBefore": 2, "SubAfter": 3}


def client_events(store: Store, finder: Finder, ids: Iterable[str]) -> list[ClientEvent]:
    """The trace contexts about any of ``ids`` (the message's UNIQ_KEY, or its offsetMsgIds), by
    the client's time; at the same millisecond a send before a consume's start before its end
    (trace records reach the broker in batches, not in the order of the events)."""
    want = {i.upper() for i in ids if i}
    out: list[ClientEvent] = []
    if not want or TRACE_TOPIC not in store.topics():
        return out  # no trace records: no second look (a commitlog scan without an index)
    for m in finder.find(set(), set(), want, TRACE_TOPIC):
        f = store.file_for(m.physical_offset)
        bad: list[BadFieldError] = []
        contexts = parse_trace_body(
            m.decompressed_body(), file=f.rel if f else None,
            offset=m.physical_offset - f.start if f else None, phy=m.physical_offset, bad=bad)
        for e in bad:
            store.note(e.finding())
        out.extend(ClientEvent(c, m.physical_offset) for c in contexts
                   if c.msg_id.upper() in want)
    out.sort(key=lambda e: (e.context.timestamp or 0, _ORDER.get(e.context.type, len(_ORDER))))
    return out
