"""A RocketMQ store root, read-only: its commitlog, consume queues and index files, records
looked up by offset and by key.

- :mod:`.reader`: :class:`Store`, a store root opened read-only (the commitlog walked by the one
  walker, consume-queue units read and checked, damage as findings);
- :mod:`.files`: its value types, how its files are mapped, where a store root is and how its
  numbered files are listed;
- :mod:`.queue_sources` (RocksDB and batch consume queues, :mod:`.rocksdb_queue`),
  :mod:`.indexfiles` (index files), :mod:`.dledger_log` (a DLedger commitlog);
- :mod:`.records_at` (records at given commitlog offsets, by the compiled kernel),
  :mod:`.facts` (their compact facts), :mod:`.unit_check` (consume-queue units against their
  records), :mod:`.search` (records by UNIQ_KEY, ORIGIN_MESSAGE_ID and KEYS).

``Store`` and ``StoreError`` load on first use, so that a small module of the package
(``store.files``) is imported without numpy and the commitlog reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mqtool.store.files import StoreError
    from mqtool.store.reader import Store

__all__ = ["Store", "StoreError"]


def __getattr__(name: str) -> Any:
    if name == "Store":
        from mqtool.store import reader

        return reader.Store
    if name == "StoreError":
        from mqtool.store import files

        return files.StoreError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
