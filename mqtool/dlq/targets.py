"""Where resent messages go: the :class:`ResendTarget` protocol and its implementations.

* :class:`RefStoreTarget`: a store directory, written through :mod:`mqtool.refstore` (created
  when missing). :func:`check_store_target` is the safety check a real run and ``--dry-run``
  share: an existing directory must be a RocketMQ store, not locked by a running broker.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from mqtool.dlq.journal import crash_point
from mqtool.dlq.outgoing import (
    RESEND_ID_PROPERTY,
    OutgoingMessage,
    ResendError,
    SendFailure,
    SendResult,
)
from mqtool.formats.errors import MqtoolError, environment, usage
from mqtool.formats.store_dirs import COMMITLOG_DIR, store_root
from mqtool.store import Store
from mqtool.store.search import find_by_key

__all__ = [
    "RefStoreTarget",
    "ResendTarget",
    "check_store_target",
]



class ResendTarget(Protocol):
    """Where resent messages go: a store directory or a live cluster."""

    @property
    def description(self) -> str:
        """Human name of the target (a path, a broker address)."""
        ...

    def position(self) -> int | None:
        """An opaque hint recorded in the journal before a put: a later :meth:`contains` for
        that message need only look from here (a store's commitlog write position)."""
        ...

    def put(self, message: OutgoingMessage) -> SendResult:
        """Store/send one message; raise :class:`MqtoolError` when it was not accepted."""
        ...

    def check(self, message: OutgoingMessage) -> None:
        """Raise :class:`ResendError` when ``message`` cannot be sent (run for ``--dry-run``
        outcomes too, so a dry run checks what a real run checks)."""
        ...

    def put_many(self, messages: list[OutgoingMessage]) -> list[SendResult | SendFailure]:
        """Send several messages (a live target keeps them in flight together); one result
        per message, in order."""
        ...

    def contains(self, message: OutgoingMessage, since: int | None = None) -> bool:
        """Whether the target holds a message carrying ``message.resend_id`` in
        ``MQTOOL_RESEND_ID`` (searching from the ``since`` position when given)."""
        ...

    def sync(self) -> None:
        """Make every put so far durable (called before their ``done`` lines are written)."""
        ...

    def close(self) -> None:
        """Flush and release the target."""
        ...


def _nearest_existing(p: Path) -> Path:
    q = p.absolute()
    while not q.exists() and q != q.parent:
        q = q.parent
    return q


def _only_journal(p: Path) -> bool:
    """An empty directory, or one holding nothing but a resend journal (a run that never had
    to create the store)."""
    from mqtool.dlq.journal import JOURNAL_DIR

    for e in p.iterdir():
        if e.name != JOURNAL_DIR.parts[0] or not e.is_dir():
            return False
        if any(x.name != JOURNAL_DIR.parts[1] for x in e.iterdir()):
            return False
    return True


def check_store_target(root: str | os.PathLike[str]) -> str:
    """The safety check of a store target, the same for a real run and ``--dry-run``: raise
    :class:`ResendError` when resending into ``root`` must not go ahead, else say what will
    happen (``"create a new store"`` or ``"existing store"``).

    Refused: a file; an existing non-empty directory that is not a RocketMQ store (no
    ``commitlog/`` directory; a broker's parent directory gets a hint to its ``store/``); a
    store with 5.x options the reference store does not write
    (:func:`mqtool.refstore.engine.refuse_special`); a store whose ``lock`` is held by another
    process (a running broker); a place this user cannot write.
    """
    p = Path(root)
    if p.exists() and not p.is_dir():
        raise usage(ResendError(f"--target {p}: not a directory (give a store root)"))
    if not p.exists() or _only_journal(p):
        base = _nearest_existing(p)
        if not os.access(base, os.W_OK | os.X_OK):
            raise environment(ResendError(f"--target {p}: cannot create a store there ({base} "
                                          "is not writable)"))
        return "create a new store"
    if not (p / COMMITLOG_DIR).is_dir():
        hint = (f"; did you mean {store_root(p)}?" if store_root(p) != p
                else "; give a store root or a new/empty directory")
        raise usage(ResendError(f"--target {p}: exists and is not a RocketMQ store (no "
                                f"commitlog/ directory){hint}"))
    from mqtool.refstore.engine import refuse_special
    from mqtool.refstore.mapped import RefStoreError

    try:
        refuse_special(p)
    except RefStoreError as e:
        raise usage(ResendError(f"--target {e} (resend through the broker: --namesrv)")) from None
    with Store.open(p) as st:
        lock = st.lock_state()
    if lock.locked:
        who = f" (pid {lock.holder_pid})" if lock.holder_pid else ""
        raise environment(ResendError(
            f"--target {p}: the store is locked by a running process{who}; a running "
            "broker's store cannot be written (resend through the broker: --namesrv)"))
    for sub in (p, p / COMMITLOG_DIR):
        if not os.access(sub, os.W_OK | os.X_OK):
            raise environment(ResendError(f"--target {p}: {sub} is not writable"))
    return "existing store"


class RefStoreTarget:
    """Resend into a store written by :mod:`mqtool.refstore` (created when missing).

    The store is opened for writing (locked, recovered) on the first :meth:`put`,
    :meth:`position` or :meth:`contains`; with ``read_only`` it is never opened for writing
    (``--dry-run``): :meth:`contains` then reads the files as they are.
    """

    def __init__(
        self, root: str | os.PathLike[str], *, config: Any = None, read_only: bool = False,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.root = Path(root)
        self.config = config
        self.read_only = read_only
        self.clock = clock
        self._rs: Any = None
        self.plan = check_store_target(self.root)

    @property
    def description(self) -> str:
        return str(self.root)

    def _store(self) -> Any:
        if self.read_only:
            raise ResendError("internal: a read-only target cannot be written")
        if self._rs is None:
            from mqtool.refstore.engine import RefStore

            # config None: RefStore takes its saved settings, or infers a broker store's
            # geometry and address from its files (refstore.persist.infer_config)
            self._rs = RefStore.open(self.root, self.config, clock=self.clock)
        return self._rs

    def position(self) -> int | None:
        if self.read_only:
            return None
        return int(self._store().write_position)

    def put(self, message: OutgoingMessage) -> SendResult:
        from mqtool.refstore.engine import Message

        rs = self._store()
        if message.topic not in rs.topics and message.topic.startswith("%RETRY%"):
            rs.create_topic(message.topic, 1)  # retryQueueNums
        r = rs.put(Message(
            message.topic, message.body, message.properties, flag=message.flag,
            sys_flag=message.sys_flag, born_timestamp=message.born_timestamp,
            born_host=message.born_host, reconsume_times=0,
        ))
        return SendResult(r.msg_id, r.topic, r.queue_id, r.queue_offset, r.physical_offset,
                          r.store_timestamp)

    def check(self, message: OutgoingMessage) -> None:
        """Nothing per message: the store itself was checked when the target was made."""

    def put_many(self, messages: list[OutgoingMessage]) -> list[SendResult | SendFailure]:
        out: list[SendResult | SendFailure] = []
        for m in messages:
            try:
                out.append(self.put(m))
            except MqtoolError as e:
                out.append(SendFailure(str(e)))
            crash_point("put")
        return out

    def contains(self, message: OutgoingMessage, since: int | None = None) -> bool:
        if not self.read_only:
            self._store()  # recovery first: a torn copy is cut, a whole one re-dispatched
        if not (self.root / COMMITLOG_DIR).is_dir():
            return False
        with Store.open(self.root) as st:
            if since is None and message.uniq_key and st.has_index:
                found, _ = find_by_key(st, message.uniq_key, topic=message.topic, uniq=True)
                if any(m.properties.get(RESEND_ID_PROPERTY) == message.resend_id
                       for m in found):
                    return True
            for m in st.messages(since or 0):
                if m.properties.get(RESEND_ID_PROPERTY) == message.resend_id:
                    return True
        return False

    def sync(self) -> None:
        if self._rs is not None:
            self._rs.flush()

    def close(self) -> None:
        if self._rs is not None:
            self._rs.close()
            self._rs = None

