"""Message selection over a store: filters applied in physical order, with progress."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from mqtool.formats.commitlog import CommitLogMessage
from mqtool.store import Store

ProgressFn = Callable[[int, int], None]
"""``progress(bytes done, bytes total)`` over the commitlog."""
PROGRESS_EVERY = 2048  # records between progress calls


@dataclass(frozen=True, slots=True)
class MessageFilter:
    """What to select. Times are epoch ms (``until`` exclusive); ``where`` is any further test
    (e.g. the DLQ selection's original topic and message ids)."""

    topic: str | None = None
    queue_id: int | None = None
    since: int | None = None
    until: int | None = None
    tag: str | None = None
    key: str | None = None
    start_offset: int = 0
    limit: int | None = None
    where: Callable[[CommitLogMessage], bool] | None = None

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
        if self.key is not None and self.key not in m.key_list:
            return False
        return self.where is None or self.where(m)


def scan_messages(
    store: Store, start_offset: int = 0, *, since: int | None = None,
    progress: ProgressFn | None = None,
) -> Iterator[CommitLogMessage]:
    """Every message in physical order, reporting progress in commitlog bytes."""
    if progress is None:
        yield from store.messages(start_offset, since=since)
        return
    total = sum(f.size for f in store.commitlog_files)
    base = store.commitlog_files[0].start if store.commitlog_files else 0
    n = 0
    for m in store.messages(start_offset, since=since):
        n += 1
        if n % PROGRESS_EVERY == 0:
            progress(m.physical_offset - base, total)
        yield m
    progress(total, total)


def select_messages(
    store: Store, flt: MessageFilter, *, progress: ProgressFn | None = None
) -> Iterator[CommitLogMessage]:
    """Messages matching ``flt`` in commitlog order (files before ``since`` are skipped)."""
    n = 0
    if flt.limit is not None and flt.limit <= 0:
        return
    for m in scan_messages(store, flt.start_offset, since=flt.since, progress=progress):
        if flt.matches(m):
            yield m
            n += 1
            if flt.limit is not None and n >= flt.limit:
                return
