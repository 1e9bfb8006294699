"""The broker's ``lock`` file: one writer per store root (POSIX record lock on byte 0, as
``FileChannel.tryLock(0, 1, false)``), and the ``abort`` file a clean close removes."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from mqtool.refstore.values import StoreLockedError

_LOCKED_ROOTS: set[str] = set()  # POSIX locks do not conflict inside one process


class StoreLock:
    """The lock on one store root while a :class:`~mqtool.refstore.engine.RefStore` holds it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock; :class:`StoreLockedError` when a broker, another writer or this
        process already holds it (``OSError`` when the lock file cannot be opened)."""
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
        self._fd = fd
        _LOCKED_ROOTS.add(key)

    def release(self, *, abort_file: bool) -> None:
        """Unlock; without ``abort_file`` (a clean close) the ``abort`` file goes first."""
        if not abort_file:
            try:
                (self.root / "abort").unlink()
            except FileNotFoundError:
                pass
        if self._fd is not None:
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(self._fd)
                self._fd = None
                _LOCKED_ROOTS.discard(str(self.root.resolve()))
