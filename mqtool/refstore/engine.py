"""The reference store engine: RocketMQ's ``DefaultMessageStore`` and the broker around it.

One :class:`RefStore` owns one store root while it is open: it holds the broker's ``lock`` file
(POSIX record lock on byte 0, as ``FileChannel.tryLock(0, 1, false)``), keeps ``abort`` present
until a clean :meth:`RefStore.close`, and writes

* ``commitlog/`` records byte for byte as :func:`mqtool.formats.commitlog.build_message` builds
  them (written by :func:`mqtool.formats.encoder.pack_record_into` straight into the mapping;
  a test proves the two agree): V1, V2 for long topics, IPv4/IPv6 hosts; files roll with a BLANK
  end-of-file record when a record plus 8 bytes does not fit
  (``CommitLog.DefaultAppendMessageCallback#doAppend``);
* ``consumequeue/`` units synchronously (tagsCode = ``String.hashCode`` of TAGS, the deliver
  time for ``SCHEDULE_TOPIC_XXXX``) and ``index/`` entries (UNIQ_KEY and every KEYS token) in
  vectorised batches of 1,024 keys (RocketMQ dispatches asynchronously too), then the
  ``checkpoint`` timestamps: physic/logics per put, index per written batch;
* ``config/delayOffset.json``, ``consumerOffset.json``, ``topics.json``,
  ``subscriptionGroup.json`` in fastjson's dialect, with a ``.bak`` of the previous content,
  atomically (temporary file + rename; fsync with ``StoreConfig.fsync_configs``).

Reopening recovers as RocketMQ does: the commitlog is scanned from the file the checkpoint
points at (``recoverAbnormally`` / ``isMappedFileMatchedRecover``), the torn tail is cut
(TOTALSIZE is written last, so a torn record reads as end of data), consume-queue units past the
valid end are dropped, and consume queues and index are re-dispatched past the checkpoint; a kill
between an index batch's header and slot writes is repaired. Schedule progress is recorded per
delivery in ``config/mqtool-delay-progress`` (delayOffset.json is rewritten per tick), so a kill
neither loses nor repeats a delivery. After a clean close the saved end
(``config/mqtool-refstore-state.json``) makes reopening O(1) when the files still agree.

Time comes from an injectable clock (epoch ms), so journeys replay deterministically.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path

from mqtool.formats.errors import failed_path
from mqtool.refstore.mapped import (
    RefStoreError,
)
from mqtool.refstore.model import (
    ManualClock,
    Message,
    PullResult,
    PutResult,
    StoreConfig,
    StoreLockedError,
    system_clock,
)
from mqtool.refstore.persist import infer_config
from mqtool.refstore.uniqkey import UniqKeyGenerator

__all__ = [  # the public API (model types re-exported from mqtool.refstore.model)
    "CONFIG_FILE",
    "ManualClock",
    "Message",
    "PullResult",
    "PutResult",
    "RefStore",
    "RefStoreError",
    "StoreConfig",
    "StoreLockedError",
    "infer_config",
    "system_clock",
]
from mqtool.refstore.consumer import ConsumerMixin
from mqtool.refstore.state import (
    _LOCKED_ROOTS,
    CONFIG_FILE,
)


class RefStore(ConsumerMixin):
    """A writable RocketMQ store with the broker's delay, retry and DLQ behaviour.

    Use :meth:`open` (or ``with RefStore.open(root) as s:``). Not thread-safe: one writer.
    """

    # -- lifecycle ----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        root: str | os.PathLike[str],
        config: StoreConfig | None = None,
        *,
        clock: Callable[[], int] | None = None,
        uniq: UniqKeyGenerator | None = None,
        seed: int | None = None,
        create: bool = True,
    ) -> RefStore:
        """Lock, load and recover the store at ``root`` (created when missing and ``create``).

        ``config`` defaults to the one saved in ``config/mqtool-refstore.json``, else to what
        :func:`infer_config` reads from an existing (broker-written) store, else RocketMQ's
        defaults; it is saved there. Raises :class:`StoreLockedError` when another
        process holds the store's lock.
        """
        rootp = Path(root)
        if not rootp.exists():
            if not create:
                raise RefStoreError(f"{rootp}: no such store")
            rootp.mkdir(parents=True)
        saved = rootp / "config" / CONFIG_FILE
        if config is None:
            if saved.exists():
                try:
                    config = StoreConfig.from_json(json.loads(saved.read_text("utf-8")))
                except (ValueError, TypeError) as e:
                    raise RefStoreError(f"{saved}: unreadable refstore settings: {e}") from e
            else:
                config = infer_config(rootp) or StoreConfig()
        clk = clock or system_clock
        if uniq is None:
            uniq = UniqKeyGenerator("127.0.0.1", clock=clk, seed=seed)
        store = cls(rootp, config, clk, uniq, seed)
        try:
            store._lock()
        except OSError as e:
            raise RefStoreError(f"{rootp}: cannot open the lock file: {e.strerror}") from e
        try:
            store._load()
        except OSError as e:
            store._release(abort_file=True)
            where = failed_path(e)
            raise RefStoreError(
                f"{rootp}: {e.strerror or e}" + (f": {where}" if where else "")
            ) from e
        except BaseException:
            store._release(abort_file=True)
            raise
        return store

    def __enter__(self) -> RefStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _lock(self) -> None:
        key = str(self.root.resolve())
        if key in _LOCKED_ROOTS:  # checked first: closing any fd of the file would drop the lock
            raise StoreLockedError(
                f"{self.root}: store is already open for writing in this process"
            )
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError as e:
            os.close(fd)
            raise StoreLockedError(
                f"{self.root}: store is locked by another process (a running broker or "
                "another mqtool writer); stop it first, read-only commands still work"
            ) from e
        self._lock_fd = fd
        _LOCKED_ROOTS.add(key)

    def _release(self, *, abort_file: bool) -> None:
        if not abort_file:
            try:
                (self.root / "abort").unlink()
            except FileNotFoundError:
                pass
        if self._lock_fd is not None:
            try:
                fcntl.lockf(self._lock_fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None
                _LOCKED_ROOTS.discard(str(self.root.resolve()))

    def close(self) -> None:
        """Flush, persist configs, write the checkpoint, remove ``abort``, unlock."""
        if self._closed:
            return
        self.flush()
        self._save_clean_state()
        self._commitlog.close()
        for cq in self._cqs.values():
            cq.close()
        for ix in (self._index, self._prev_index):
            if ix is not None:
                ix.close()
        if self._cp_mf is not None:
            self._cp_mf.close()
        if self._progress_mf is not None:
            self._progress_mf.close()
        self._closed = True
        self._release(abort_file=False)

    def flush(self) -> None:
        """msync data files, persist dirty offsets and the checkpoint."""
        self._check_open()
        self._flush_index()
        self._commitlog.flush()
        for cq in self._cqs.values():
            cq.flush()
        if self._index is not None:
            self._index.flush()
        self._write_checkpoint()
        if self._cp_mf is not None:
            self._cp_mf.flush()
        if self._offsets_dirty:
            self._persist_consumer_offsets()
