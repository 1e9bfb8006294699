"""Message selection over a store: filters applied in physical order."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.store import Store


@dataclass(frozen=True, slots=True)
class MessageFilter:
    """What to select. Times are epoch ms (``until`` exclusive)."""

    topic: str | None = None
    queue_id: int | None = None
    since: int | None = None
    until: int | None = None
    tag: str | None = None
    key: str | None = None
    start_offset: int = 0
    limit: int | None = None

    def matches(self, m: CommitLogMessage) -> bool:
        if self.topic is not None and m.topic != self.topic:
            return False
        if self.queue_id is not None and m.queue_id != self.queue_id:
            return False
        if self.since is not None and m.store_timestamp < self.since:
            return False
        if self.until is not None and m.store_timestamp >= self.until:
            return False
        if self.tag is not None and m.tags != self.tag:
            return False
        return self.key is None or self.key in m.key_list


def select_messages(store: Store, flt: MessageFilter) -> Iterator[CommitLogMessage]:
    """Messages matching ``flt`` in commitlog order (files before ``since`` are skipped)."""
    n = 0
    if flt.limit is not None and flt.limit <= 0:
        return
    for m in store.messages(flt.start_offset, since=flt.since):
        if flt.matches(m):
            yield m
            n += 1
            if flt.limit is not None and n >= flt.limit:
                return
