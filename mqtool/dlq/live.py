"""Dead letters of a live cluster, over the remoting protocol (:mod:`mqtool.remoting.client`).

* :class:`LiveDlq`: ``%DLQ%<group>`` read from the brokers as a record source: each readable
  queue is pulled from its min to its max offset as they were when the read began (records
  arriving later wait for the next run). Records are the same :class:`CommitLogMessage` the
  offline commands read, so ``list``/``show``/``export`` print the same fields. Nothing is
  committed unless asked (:meth:`LiveDlq.commit`, ``--commit``).
* :class:`BrokerTarget`: a :class:`~mqtool.dlq.targets.ResendTarget` that sends over the wire.
  Whether a copy is already in the cluster is asked with QUERY_MESSAGE by its ``UNIQ_KEY``;
  a copy is an answer carrying its resend id (see :mod:`mqtool.dlq.outgoing`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from mqtool.dlq.journal import crash_point
from mqtool.dlq.outgoing import (
    RESEND_ID_PROPERTY,
    OutgoingMessage,
    ResendError,
    SendFailure,
    SendResult,
)
from mqtool.dlq.selection import DlqError, DlqGroup, DlqSelection, group_of
from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.errors import usage
from mqtool.formats.rules import (
    RETRY_GROUP_TOPIC_PREFIX,
    dlq_topic,
    retry_topic,
    topic_refusal,
)
from mqtool.remoting.client import (
    ClientError,
    LiveClient,
    Outgoing,
    SendNotDurable,
    SendReceipt,
    SendUnknown,
)

__all__ = ["BrokerTarget", "LiveDlq", "live_groups"]


@dataclass
class _QueueRead:
    """What was read of one DLQ queue: its bounds and, in order, (offset, selected) pairs."""

    min_offset: int
    max_offset: int
    seen: list[tuple[int, str | None]] = field(default_factory=list)  # (offset, resend id)


class LiveDlq:
    """``%DLQ%<group>`` on a live cluster."""

    def __init__(self, client: LiveClient, group: str) -> None:
        self.client = client
        self.group = group
        self.topic = dlq_topic(group)
        self.reads: dict[int, _QueueRead] = {}

    @property
    def label(self) -> str:
        return f"{self.topic} on {';'.join(self.client.namesrv)}"

    def require_group(self) -> None:
        """DlqError unless the cluster knows the group (its %DLQ% or %RETRY% topic exists)."""
        if not self.group:
            raise usage(DlqError("--group must not be empty"))
        topics = self.client.topics()
        if self.topic not in topics and retry_topic(self.group) not in topics:
            raise DlqError(
                f"unknown consumer group {self.group!r} on {';'.join(self.client.namesrv)}: "
                f"no {self.topic} or {retry_topic(self.group)} topic (see `mqtool dlq list "
                "--namesrv ...`)")

    def records(self, sel: DlqSelection | None = None) -> Iterator[CommitLogMessage]:
        """The records ``sel`` selects, queue by queue in offset order."""
        from mqtool.dlq.outgoing import resend_id

        queues = self.client.read_queues(self.topic)
        if queues is None:
            return
        n = 0
        for q in queues:
            lo, hi = self.client.offsets(self.topic, q)
            read = self.reads[q.queue_id] = _QueueRead(lo, hi)
            off = lo
            while off < hi:
                msgs, nxt = self.client.pull(self.group, self.topic, q, off,
                                             max_nums=min(32, hi - off))
                for m in msgs:
                    if m.queue_offset >= hi:
                        break
                    picked = sel is None or sel.matches(m)
                    read.seen.append((m.queue_offset, resend_id(m) if picked else None))
                    if picked:
                        yield m
                        n += 1
                        if sel is not None and sel.limit is not None and n >= sel.limit:
                            return
                if nxt <= off:
                    raise ClientError(f"broker {q.addr}: {self.topic} queue {q.queue_id} gave "
                                      f"nothing at offset {off} (max {hi})", fatal=True)
                off = nxt

    def commit(self, done: set[str]) -> dict[int, int]:
        """UPDATE_CONSUMER_OFFSET for each queue read: up to the first record that was not
        selected or not resent (so nothing unhandled is marked consumed). Queue id -> offset."""
        out: dict[int, int] = {}
        queues = {q.queue_id: q for q in self.client.read_queues(self.topic) or []}
        for qid, read in self.reads.items():
            upto = read.max_offset
            for off, rid in read.seen:
                if rid is None or rid not in done:
                    upto = off
                    break
            else:
                if read.seen and read.seen[-1][0] + 1 < read.max_offset:
                    upto = read.seen[-1][0] + 1  # stopped early (--limit)
            if qid in queues and upto > read.min_offset:
                self.client.commit_offset(self.group, self.topic, queues[qid], upto)
                out[qid] = upto
        return out


def live_groups(
    client: LiveClient,
    resent_ids: Callable[[str], Callable[[CommitLogMessage], bool]] | None = None,
) -> list[DlqGroup]:
    """``dlq list`` of a live cluster: every %DLQ%<group> topic, its records counted;
    ``resent_ids(group)`` says whether a record of that group was already resent."""
    out: list[DlqGroup] = []
    for topic in sorted(client.topics()):
        g = group_of(topic)
        if g is None:
            continue
        d = DlqGroup(g, topic)
        resent = resent_ids(g) if resent_ids is not None else None
        for m in LiveDlq(client, g).records():
            d.add(m, resent=resent is not None and resent(m))
        out.append(d)
    return out


class BrokerTarget:
    """Resend into a live cluster (see the module docstring)."""

    def __init__(self, client: LiveClient, group: str, *, check_topics: bool = True) -> None:
        self.client = client
        self.group = group
        self.check_topics = check_topics
        self._known: set[str] | None = None

    @property
    def description(self) -> str:
        return f"cluster {';'.join(self.client.namesrv)}"

    def check_topic(self, topic: str) -> None:
        """A destination must be a topic a broker takes sends to (a POP retry topic of the
        ``%RETRY%<group>+<topic>`` form is not: the broker pops it, but refuses its name in a
        send) and must exist in the cluster (a mistyped ``--to`` must not create a topic);
        ``%RETRY%<group>`` is created by the broker as for any consumer."""
        refused = topic_refusal(topic)
        if refused is not None:
            raise ClientError(f"a broker refuses sends to {topic}: {refused}; resend with "
                              "--to original, or --to TOPIC", fatal=True)
        if not self.check_topics or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return
        if self._known is None:
            self._known = self.client.topics()
        if topic not in self._known:
            raise ClientError(f"topic {topic} does not exist in the cluster "
                              f"{';'.join(self.client.namesrv)}", fatal=True)

    def check(self, message: OutgoingMessage) -> None:
        """What a real send checks first (``--dry-run`` runs it too): the name servers answer,
        the destination exists and has a writable queue on a master (a ``%RETRY%`` topic no
        broker has yet: the cluster has a master, which creates it on the first send)."""
        try:
            self.check_topic(message.topic)
            self.client.write_queues(message.topic)
        except ClientError as e:  # fatal: a real send would stop the run here too
            raise SendFailure(str(e), fatal=e.fatal) from None

    def position(self) -> int | None:
        return None

    def put(self, message: OutgoingMessage) -> SendResult:
        r = self.put_many([message])[0]
        if isinstance(r, SendFailure):
            raise r
        return r

    def put_many(self, messages: list[OutgoingMessage]) -> list[SendResult | SendFailure]:
        try:
            for t in {m.topic for m in messages}:
                self.check_topic(t)
            results = self.client.send_many([
                Outgoing(m.topic, m.body, m.properties, m.flag, m.sys_flag, m.born_timestamp)
                for m in messages])
        except ClientError as e:
            return [SendFailure(str(e), fatal=True) for _ in messages]
        out: list[SendResult | SendFailure] = []
        for r in results:
            out.append(_result(r))
            crash_point("put")
        return out

    def contains(self, message: OutgoingMessage, since: int | None = None) -> bool:
        try:
            found = self.client.query(message.topic, message.uniq_key or message.resend_id)
        except ClientError as e:
            raise ResendError(f"cannot ask the cluster whether {message.resend_id} was sent "
                              f"by the interrupted run: {e}") from None
        return any(m.properties.get(RESEND_ID_PROPERTY) == message.resend_id for m in found)

    def sync(self) -> None:
        """Nothing to do: a SEND_OK answer means the broker has the message."""

    def close(self) -> None:
        """The client belongs to the caller."""


def _result(r: SendReceipt | ClientError) -> SendResult | SendFailure:
    if isinstance(r, SendReceipt):
        return SendResult(r.msg_id, r.topic, r.queue_id, r.queue_offset, None, 0)
    if isinstance(r, SendNotDurable):
        return SendFailure(f"{r}; left unresolved: a rerun asks the broker before sending again",
                           unknown=True)
    if isinstance(r, SendUnknown):
        return SendFailure(f"outcome unknown ({r}); a rerun asks the broker before sending "
                           "again", unknown=True)
    return SendFailure(str(r), fatal=r.fatal)
