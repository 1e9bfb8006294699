"""Resend dead-lettered messages, idempotently, with a write-ahead journal per target.

What a resent copy is
---------------------
``build_outgoing`` turns one ``%DLQ%<group>`` record into the message to send. The copy keeps
the body (bytes as stored, with the compression bits of SYSFLAG), FLAG, TAGS, KEYS, every user
property, ``UNIQ_KEY`` (the client msgId), ``RETRY_TOPIC``, ``ORIGIN_MESSAGE_ID`` and the born
timestamp/host; its reconsume count is reset to 0. Properties that only describe the old
record's trip through the broker are dropped (:data:`DROPPED_PROPERTIES`: ``DELAY``,
``REAL_TOPIC``, ``REAL_QID``, ``CLUSTER``, ``__CRC32#``, ``TIMER_*``, ``RECONSUME_TIME``, POP and
inner-batch bookkeeping), so the copy is neither delayed nor re-routed again.

Tie properties (what ``mqtool trace`` reads to show the resend as a hop)
-----------------------------------------------------------------------
* ``ORIGIN_MESSAGE_ID`` (kept): offsetMsgId of the message's very first stored copy;
* ``MQTOOL_DLQ_TOPIC`` = the DLQ topic the record was taken from (``%DLQ%<group>``);
* ``MQTOOL_DLQ_MSG_ID`` = the offsetMsgId of that DLQ record;
  (deliberately not RocketMQ 5.x's ``DLQ_ORIGIN_TOPIC`` / ``DLQ_ORIGIN_MESSAGE_ID``: the 5.x
  gRPC proxy reads those to present a message *as a dead letter* of its original topic, which
  a resent copy is not);
* ``MQTOOL_RESEND_ID`` (:data:`RESEND_ID_PROPERTY`) = a 32-hex id derived only from the DLQ
  record (:func:`resend_id`): the same record always gets the same id, which is what makes a
  resend idempotent and checkable in the target.

Destinations (``--to``)
-----------------------
``retry`` (default): ``%RETRY%<group>``: only the group that failed consumes it again (its
client maps it back to RETRY_TOPIC). ``original``: the topic in RETRY_TOPIC; every group
subscribed to that topic receives it again, not only the failed one. Anything else: that topic.

The journal (exactly once across kills)
---------------------------------------
Each target keeps an append-only JSON-lines journal, by default
``<target store>/config/mqtool-resend/journal.jsonl`` (:func:`default_journal_path`). Per
message, in this order, each step durable before the next:

1. ``intent`` (resend id, DLQ record, destination, the target's write position before the put);
2. the put into the target;
3. ``done`` (where the copy landed) or ``failed`` (why).

Lines are group-committed (intents of a batch of puts in one fsync, the puts, a sync of the
target, then their ``done`` lines in one fsync), so a kill leaves at most one batch pending.

A re-run skips ids that are ``done``. An id whose last line is ``intent`` or ``failed`` is
resolved by looking for a message carrying its ``MQTOOL_RESEND_ID`` in the target, from the
recorded write position on (:meth:`ResendTarget.contains`): found means the put happened before
the kill (a ``done`` line with ``how: found`` is appended, nothing is sent), not found means it
is sent now. A torn last line (killed mid-write) is cut off when the journal is opened for
writing. The journal file is ``flock``-ed for the duration of a run.

Targets implement :class:`ResendTarget` (``put``, ``contains``, ``position``): the reference
store (:class:`RefStoreTarget`, through :mod:`mqtool.refstore`) now; a live broker over the
remoting protocol later (``contains`` through queryMessage by ``topic#UNIQ_KEY``).
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mqtool.dlq import DlqError, DlqSelection, original_topic, retry_topic, select_dlq
from mqtool.formats.commitlog import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    CommitLogMessage,
)
from mqtool.formats.errors import MqtoolError
from mqtool.store import DLQ_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC, Store

__all__ = [
    "RESEND_DLQ_MSG_ID",
    "RESEND_DLQ_TOPIC",
    "DROPPED_PROPERTIES",
    "RESEND_ID_PROPERTY",
    "Outcome",
    "OutgoingMessage",
    "RefStoreTarget",
    "ResendError",
    "ResendJournal",
    "ResendReport",
    "ResendTarget",
    "SendResult",
    "build_outgoing",
    "default_journal_path",
    "destination_topic",
    "resend",
    "resend_id",
    "resent_checker",
]

RESEND_ID_PROPERTY = "MQTOOL_RESEND_ID"
# Not 5.x's DLQ_ORIGIN_TOPIC / DLQ_ORIGIN_MESSAGE_ID (the gRPC proxy would mark the copy as a
# dead letter): mqtool's own names.
RESEND_DLQ_TOPIC = "MQTOOL_DLQ_TOPIC"
RESEND_DLQ_MSG_ID = "MQTOOL_DLQ_MSG_ID"

DROPPED_PROPERTIES = frozenset({
    "DELAY", "REAL_TOPIC", "REAL_QID", "CLUSTER", "__CRC32#", "RECONSUME_TIME",
    "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_DELAY_MS", "TIMER_OUT_MS", "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_DEL_UNIQKEY", "1ST_POP_TIME", "POP_CK",
    "DUP_INFO", "INNER_NUM", "INNER_BASE",
})
"""Properties of the DLQ record that the resent copy does not carry."""

JOURNAL_DIR = Path("config") / "mqtool-resend"
JOURNAL_NAME = "journal.jsonl"

TO_RETRY = "retry"
TO_ORIGINAL = "original"


class ResendError(DlqError):
    """A resend that cannot go ahead (bad destination, journal locked or damaged, ...)."""


def default_journal_path(target_root: str | os.PathLike[str]) -> Path:
    """Where a target store keeps its resend journal."""
    return Path(target_root) / JOURNAL_DIR / JOURNAL_NAME


def resend_id(m: CommitLogMessage) -> str:
    """The id of resending this DLQ record: the same for every run and every copy of the
    store (DLQ topic, offsetMsgId, store time, body CRC and UNIQ_KEY), 32 upper-case hex."""
    text = "|".join((m.topic, m.offset_msg_id, str(m.store_timestamp), str(m.body_crc),
                     m.uniq_key or ""))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32].upper()


def destination_topic(to: str, group: str, m: CommitLogMessage) -> str:
    """``retry`` -> ``%RETRY%<group>``, ``original`` -> RETRY_TOPIC, else ``to`` itself."""
    if to == TO_RETRY:
        return retry_topic(group)
    if to == TO_ORIGINAL:
        t = original_topic(m)
        if not t:
            raise ResendError("the DLQ record has no RETRY_TOPIC property (original unknown)")
        return t
    if not to or to.startswith(DLQ_GROUP_TOPIC_PREFIX) or to == SCHEDULE_TOPIC:
        raise ResendError(f"refusing to resend into {to!r} (a DLQ or system topic)")
    return to


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """One message to send, built from a DLQ record by :func:`build_outgoing`."""

    resend_id: str
    topic: str
    body: bytes
    properties: tuple[tuple[str, str], ...]
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    # where it comes from
    dlq_topic: str
    dlq_msg_id: str
    dlq_offset: int
    uniq_key: str | None
    origin_msg_id: str | None
    original_topic: str | None

    def to_dict(self, body: str = "utf8") -> dict[str, Any]:
        """What would be sent (``--dry-run`` output): topic, properties, flags, body."""
        d: dict[str, Any] = {
            "resendId": self.resend_id,
            "topic": self.topic,
            "flag": self.flag,
            "sysFlag": self.sys_flag,
            "bornTimestamp": self.born_timestamp,
            "bornHost": self.born_host,
            "reconsumeTimes": 0,
            "properties": dict(self.properties),
            "bodyLength": len(self.body),
        }
        if body == "utf8":
            d["body"] = self.body.decode("utf-8", "replace")
        elif body == "base64":
            d["body"] = base64.b64encode(self.body).decode("ascii")
        elif body == "hex":
            d["body"] = self.body.hex()
        if body != "none":
            d["bodyEncoding"] = body
        return d


def build_outgoing(m: CommitLogMessage, group: str, to: str = TO_RETRY) -> OutgoingMessage:
    """The resent copy of DLQ record ``m`` (see the module docstring for what it keeps)."""
    topic = destination_topic(to, group, m)
    rid = resend_id(m)
    props = [(k, v) for k, v in m.properties.items() if k not in DROPPED_PROPERTIES
             and k not in (RESEND_DLQ_TOPIC, RESEND_DLQ_MSG_ID, RESEND_ID_PROPERTY)]
    props += [
        (RESEND_DLQ_TOPIC, m.topic),
        (RESEND_DLQ_MSG_ID, m.offset_msg_id),
        (RESEND_ID_PROPERTY, rid),
    ]
    return OutgoingMessage(
        resend_id=rid, topic=topic, body=m.body, properties=tuple(props), flag=m.flag,
        sys_flag=m.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG),
        born_timestamp=m.born_timestamp, born_host=str(m.born_host), dlq_topic=m.topic,
        dlq_msg_id=m.offset_msg_id, dlq_offset=m.physical_offset, uniq_key=m.uniq_key,
        origin_msg_id=m.properties.get("ORIGIN_MESSAGE_ID"), original_topic=original_topic(m),
    )


# ---------------------------------------------------------------------------------------------
# targets


@dataclass(frozen=True, slots=True)
class SendResult:
    """Where a resent copy landed (``msg_id``: its offsetMsgId in the target)."""

    msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int | None
    store_timestamp: int


class ResendTarget(Protocol):
    """Where resent messages go: a reference store today, a live broker later."""

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

    def contains(self, message: OutgoingMessage, since: int | None = None) -> bool:
        if not self.read_only:
            self._store()  # recovery first: a torn copy is cut, a whole one re-dispatched
        if not (self.root / "commitlog").is_dir():
            return False
        with Store.open(self.root) as st:
            if since is None and message.uniq_key and st.has_index:
                found, _ = st.find_by_key(message.uniq_key, topic=message.topic, uniq=True)
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


# ---------------------------------------------------------------------------------------------
# journal


@dataclass(slots=True)
class JournalEntry:
    """The latest state of one resend id: ``intent``, ``done`` or ``failed``."""

    op: str
    record: dict[str, Any]
    position: int | None = None  # from the latest intent


class ResendJournal:
    """The append-only resend journal of one target (see the module docstring).

    :meth:`read` loads one read-only (a missing file is an empty journal); :meth:`open`
    creates, locks and repairs it for appending.
    """

    def __init__(self, path: Path, entries: dict[str, JournalEntry], fd: int | None) -> None:
        self.path = path
        self.entries = entries
        self._fd = fd

    @staticmethod
    def _parse(path: Path, data: bytes) -> tuple[dict[str, JournalEntry], int]:
        """Entries and the length of the whole-line prefix (a torn last line is dropped)."""
        entries: dict[str, JournalEntry] = {}
        end = data.rfind(b"\n") + 1
        for n, line in enumerate(data[:end].splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                rid, op = rec["resendId"], rec["op"]
            except (ValueError, KeyError, TypeError) as e:
                raise ResendError(f"{path}: line {n} is not a journal record: {e}") from None
            cur = entries.get(rid)
            if op == "intent":
                entries[rid] = JournalEntry(op, rec, rec.get("position"))
            elif cur is None:
                entries[rid] = JournalEntry(op, rec)
            else:
                cur.op, cur.record = op, rec
        return entries, end

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> ResendJournal:
        p = Path(path)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            data = b""
        entries, _ = cls._parse(p, data)
        return cls(p, entries, None)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> ResendJournal:
        p = Path(path)
        new_dir = not p.parent.exists()
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise ResendError(
                    f"{p}: another resend into this target is running (journal locked)"
                ) from None
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0) if size else b""
            entries, end = cls._parse(p, data)
            if end < size:  # torn last line from a killed run: nothing was put after it
                os.ftruncate(fd, end)
                os.fsync(fd)
            if new_dir or size == 0:
                _fsync_dir(p.parent)
        except BaseException:
            os.close(fd)
            raise
        return cls(p, entries, fd)

    def get(self, rid: str) -> JournalEntry | None:
        return self.entries.get(rid)

    def done_ids(self) -> set[str]:
        return {k for k, e in self.entries.items() if e.op == "done"}

    def _apply(self, rec: dict[str, Any]) -> None:
        rid = rec["resendId"]
        cur = self.entries.get(rid)
        if rec["op"] == "intent":
            self.entries[rid] = JournalEntry("intent", rec, rec.get("position"))
        elif cur is None:
            self.entries[rid] = JournalEntry(rec["op"], rec)
        else:
            cur.op, cur.record = rec["op"], rec

    def append(self, recs: list[dict[str, Any]]) -> None:
        """Append records as whole lines in one write, then fdatasync: durable on return."""
        if not recs:
            return
        if self._fd is None:
            raise ResendError(f"{self.path}: journal opened read-only")
        data = b"".join(
            (json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
            for r in recs
        )
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        os.fdatasync(self._fd)
        for r in recs:
            self._apply(r)

    @staticmethod
    def intent_record(out: OutgoingMessage, position: int | None, source: str) -> dict[str, Any]:
        return {
            "op": "intent", "resendId": out.resend_id, "at": _now_ms(), "source": source,
            "dlqTopic": out.dlq_topic, "dlqMsgId": out.dlq_msg_id, "dlqOffset": out.dlq_offset,
            "uniqKey": out.uniq_key, "originMsgId": out.origin_msg_id, "to": out.topic,
            "position": position,
        }

    @staticmethod
    def done_record(out: OutgoingMessage, res: SendResult | None, how: str) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "op": "done", "resendId": out.resend_id, "at": _now_ms(), "how": how,
            "dlqTopic": out.dlq_topic, "dlqMsgId": out.dlq_msg_id, "to": out.topic,
        }
        if res is not None:
            rec.update(msgId=res.msg_id, queueId=res.queue_id, queueOffset=res.queue_offset,
                       commitLogOffset=res.physical_offset)
        return rec

    @staticmethod
    def failed_record(out: OutgoingMessage, reason: str) -> dict[str, Any]:
        return {"op": "failed", "resendId": out.resend_id, "at": _now_ms(),
                "dlqTopic": out.dlq_topic, "dlqMsgId": out.dlq_msg_id, "reason": reason}

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the flock
            self._fd = None


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def resent_checker(
    journals: Iterable[str | os.PathLike[str]],
) -> Callable[[CommitLogMessage], bool]:
    """For ``dlq list``: whether a DLQ record is ``done`` in any of these journals."""
    done: set[str] = set()
    for p in journals:
        done |= ResendJournal.read(p).done_ids()
    return lambda m: bool(done) and resend_id(m) in done


# ---------------------------------------------------------------------------------------------
# the run


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one selected DLQ record.

    ``status``: ``sent``, ``skipped`` (already resent), ``failed`` (``reason`` says why) or,
    with ``--dry-run``, ``would-send``.
    """

    status: str
    dlq_msg_id: str
    uniq_key: str | None
    resend_id: str | None
    topic: str | None
    reason: str | None = None
    result: SendResult | None = None
    message: OutgoingMessage | None = None

    def to_dict(self, body: str = "none") -> dict[str, Any]:
        d: dict[str, Any] = {
            "status": self.status,
            "dlqMsgId": self.dlq_msg_id,
            "uniqKey": self.uniq_key,
            "resendId": self.resend_id,
            "topic": self.topic,
            "reason": self.reason,
        }
        if self.result is not None:
            d["msgId"] = self.result.msg_id
            d["queueId"] = self.result.queue_id
            d["queueOffset"] = self.result.queue_offset
        if self.message is not None:
            d["message"] = self.message.to_dict(body)
        return d


@dataclass(slots=True)
class ResendReport:
    """The summary of a run (``dlq resend --json``)."""

    dry_run: bool
    target: str
    journal: str
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def ok(self) -> bool:
        return self.count("failed") == 0

    def to_dict(self, body: str = "none") -> dict[str, Any]:
        return {
            "selected": len(self.outcomes),
            "sent": self.count("sent"),
            "skipped": self.count("skipped"),
            "failed": self.count("failed"),
            "wouldSend": self.count("would-send"),
            "dryRun": self.dry_run,
            "target": self.target,
            "journal": self.journal,
            "outcomes": [o.to_dict(body) for o in self.outcomes],
        }


DEFAULT_BATCH = 64


def resend(
    source: Store,
    sel: DlqSelection,
    target: ResendTarget,
    journal: ResendJournal,
    *,
    to: str = TO_RETRY,
    dry_run: bool = False,
    rate: float | None = None,
    batch: int = DEFAULT_BATCH,
    on_outcome: Callable[[Outcome], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ResendReport:
    """Resend the selected DLQ records of ``source`` into ``target``, journaled.

    Puts are group-committed: the intents of up to ``batch`` messages are made durable with one
    fsync, the messages are put, the target is synced, then their ``done``/``failed`` lines are
    made durable with one more fsync; only then are their outcomes reported. With ``dry_run``
    nothing is written anywhere: the outcomes say what would be sent (journal and target are
    only read). ``rate`` limits puts per second (and the batch to one second of puts).
    """
    if rate is not None and rate <= 0:
        raise ResendError("--rate must be positive")
    if batch < 1:
        raise ResendError("batch must be at least 1")
    if rate is not None:
        batch = max(1, min(batch, int(rate)))
    report = ResendReport(dry_run, target.description, str(journal.path))
    records = list(select_dlq(source, sel))  # fixed before the first put
    src = str(source.root)
    start = time.monotonic()
    n_put = 0
    items: list[Outcome | OutgoingMessage] = []  # in selection order, flushed per batch

    def emit(o: Outcome) -> None:
        report.outcomes.append(o)
        if on_outcome is not None:
            on_outcome(o)

    def run_batch() -> None:
        nonlocal n_put
        sends = [i for i in items if isinstance(i, OutgoingMessage)]
        done: dict[str, Outcome] = {}
        if sends:
            pos = target.position()
            journal.append([ResendJournal.intent_record(o, pos, src) for o in sends])
            lines = []
            for out in sends:
                base = (out.dlq_msg_id, out.uniq_key, out.resend_id, out.topic)
                if rate is not None:
                    wait = start + n_put / rate - time.monotonic()
                    if wait > 0:
                        sleep(wait)
                n_put += 1
                try:
                    res = target.put(out)
                except MqtoolError as e:
                    lines.append(ResendJournal.failed_record(out, str(e)))
                    done[out.resend_id] = Outcome("failed", *base, str(e))
                    continue
                lines.append(ResendJournal.done_record(out, res, "sent"))
                done[out.resend_id] = Outcome("sent", *base, result=res)
            target.sync()
            journal.append(lines)
        for i in items:
            emit(done[i.resend_id] if isinstance(i, OutgoingMessage) else i)
        items.clear()

    for m in records:
        rid = resend_id(m)
        entry = journal.get(rid)
        if entry is not None and entry.op == "done":
            r = entry.record
            how = "found in the target" if r.get("how") == "found" else f"as {r.get('msgId')}"
            items.append(Outcome("skipped", m.offset_msg_id, m.uniq_key, rid, r.get("to"),
                                 f"already resent ({how}, journal)"))
            continue
        try:
            out = build_outgoing(m, sel.group, to)
        except ResendError as e:
            items.append(Outcome("failed", m.offset_msg_id, m.uniq_key, rid, None, str(e)))
            continue
        base = (m.offset_msg_id, m.uniq_key, rid, out.topic)
        if entry is not None and target.contains(out, entry.position):
            if not dry_run:
                journal.append([ResendJournal.done_record(out, None, "found")])
            items.append(Outcome(
                "skipped", *base, "already in the target (put by an interrupted run)"))
            continue
        if dry_run:
            items.append(Outcome("would-send", *base, message=out))
            continue
        items.append(out)
        if sum(isinstance(i, OutgoingMessage) for i in items) >= batch:
            run_batch()
    run_batch()
    return report
