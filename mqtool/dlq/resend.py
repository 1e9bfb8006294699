"""The resend run: select, skip what the journal says is done, resolve what a killed run left
pending, send the rest in group-committed batches, report every outcome.

See :mod:`mqtool.dlq.outgoing` for what a copy is, :mod:`mqtool.dlq.journal` for the journal and
:mod:`mqtool.dlq.targets` for where copies go.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from mqtool.dlq.journal import ResendJournal, crash_point
from mqtool.dlq.outgoing import (
    TO_RETRY,
    OutgoingMessage,
    ResendError,
    SendFailure,
    SendResult,
    build_outgoing,
    resend_id,
)
from mqtool.dlq.targets import ResendTarget
from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.errors import usage

__all__ = ["DEFAULT_BATCH", "Outcome", "ResendReport", "resend"]



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

    stopped: str | None = None  # why the run stopped early (a fault that ends it)
    not_sent: int = 0  # selected records the stopped run did not get to

    @property
    def ok(self) -> bool:
        return self.count("failed") == 0 and self.stopped is None

    def to_dict(self, body: str = "none") -> dict[str, Any]:
        return {
            "selected": len(self.outcomes),
            "sent": self.count("sent"),
            "skipped": self.count("skipped"),
            "failed": self.count("failed"),
            "wouldSend": self.count("would-send"),
            "notSent": self.not_sent,
            "stopped": self.stopped,
            "dryRun": self.dry_run,
            "target": self.target,
            "journal": self.journal,
            "outcomes": [o.to_dict(body) for o in self.outcomes],
        }


DEFAULT_BATCH = 64


def resend(
    records: Iterable[CommitLogMessage],
    group: str,
    target: ResendTarget,
    journal: ResendJournal,
    *,
    source: str,
    to: str = TO_RETRY,
    dry_run: bool = False,
    rate: float | None = None,
    batch: int = DEFAULT_BATCH,
    on_outcome: Callable[[Outcome], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ResendReport:
    """Resend the DLQ records ``records`` of ``group`` (read from ``source``, a label for the
    journal) into ``target``, journaled.

    Sends are group-committed: the intents of up to ``batch`` messages are made durable with one
    fdatasync, the messages are sent (:meth:`ResendTarget.put_many`: a live target keeps them
    in flight together), the target is synced, and their ``done``/``failed`` lines are made
    durable together with the next batch's intents (or at the end); only then are their
    outcomes reported. A fault that ends the
    run (:class:`SendFailure` with ``fatal``) stops it after that batch's lines are durable:
    the report says why (``stopped``) and how many selected records were not reached. With
    ``dry_run`` nothing is written anywhere: the outcomes say what would be sent (journal and
    target are only read). ``rate`` limits sends per second.
    """
    if rate is not None and rate <= 0:
        raise usage(ResendError("--rate must be positive"))
    if batch < 1:
        raise usage(ResendError("--batch must be at least 1"))
    report = ResendReport(dry_run, target.description, str(journal.path))
    todo = list(records)  # fixed before the first send
    start = time.monotonic()
    n_put = 0
    chunk = batch if rate is None else max(1, min(batch, int(rate // 10) or 1))
    items: list[Outcome | OutgoingMessage] = []  # in selection order, flushed per batch

    def emit(o: Outcome) -> None:
        report.outcomes.append(o)
        if on_outcome is not None:
            on_outcome(o)

    # Done/failed lines of the last batch and the outcomes waiting for them. They become
    # durable with the next batch's intents (one fdatasync per batch, not two) or at the end:
    # a kill before that leaves those ids at "intent", which a rerun resolves by asking the
    # target, so nothing is lost or sent twice - outcomes are reported only once durable.
    carry: list[dict[str, Any]] = []
    waiting: list[Outcome] = []

    def settle(lines: list[dict[str, Any]]) -> None:
        had = bool(carry)
        journal.append(carry + lines)
        carry.clear()
        for o in waiting:
            emit(o)
        waiting.clear()
        if had:
            crash_point("after-done")

    def run_batch() -> str | None:
        """Send the pending batch; the reason when a fault ends the run."""
        nonlocal n_put
        sends = [i for i in items if isinstance(i, OutgoingMessage)]
        done: dict[str, Outcome] = {}
        fatal: str | None = None
        if sends:
            pos = target.position()
            settle([ResendJournal.intent_record(o, pos, source) for o in sends])
            crash_point("after-intent")
            for k in range(0, len(sends), chunk):
                part = sends[k:k + chunk]
                if fatal is None:
                    if rate is not None:  # message i goes no earlier than start + i / rate:
                        # a chunk waits for the slot of its last message
                        wait = start + (n_put + len(part) - 1) / rate - time.monotonic()
                        if wait > 0:
                            sleep(wait)
                    n_put += len(part)
                    results: list[SendResult | SendFailure] = target.put_many(part)
                else:
                    results = [SendFailure(f"not sent: {fatal}") for _ in part]
                for out, res in zip(part, results, strict=True):
                    base = (out.dlq_msg_id, out.uniq_key, out.resend_id, out.topic)
                    if isinstance(res, SendFailure):
                        if res.fatal and fatal is None:
                            fatal = str(res)
                        carry.append(ResendJournal.failed_record(out, str(res)))
                        done[out.resend_id] = Outcome("failed", *base, str(res))
                    else:
                        carry.append(ResendJournal.done_record(out, res, "sent"))
                        done[out.resend_id] = Outcome("sent", *base, result=res)
            target.sync()
            crash_point("before-done")
        for i in items:
            waiting.append(done[i.resend_id] if isinstance(i, OutgoingMessage) else i)
        items.clear()
        if not carry:
            for o in waiting:
                emit(o)
            waiting.clear()
        return fatal

    pending = 0  # messages in ``items``
    for n, m in enumerate(todo):
        rid = resend_id(m)
        entry = journal.get(rid)
        if entry is not None and entry.op == "done":
            r = entry.record
            how = "found in the target" if r.get("how") == "found" else f"as {r.get('msgId')}"
            items.append(Outcome("skipped", m.offset_msg_id, m.uniq_key, rid, r.get("to"),
                                 f"already resent ({how}, journal)"))
            continue
        try:
            out = build_outgoing(m, group, to)
        except ResendError as e:
            items.append(Outcome("failed", m.offset_msg_id, m.uniq_key, rid, None, str(e)))
            continue
        base = (m.offset_msg_id, m.uniq_key, rid, out.topic)
        if entry is not None and target.contains(out, entry.position):
            if not dry_run:
                carry.append(ResendJournal.done_record(out, None, "found"))
            items.append(Outcome(
                "skipped", *base, "already in the target (put by an interrupted run)"))
            continue
        if dry_run:
            try:
                target.check(out)
            except ResendError as e:
                items.append(Outcome("failed", *base, str(e)))
                if isinstance(e, SendFailure) and e.fatal:  # as the real run stops
                    run_batch()
                    settle([])
                    report.stopped, report.not_sent = str(e), len(todo) - n - 1
                    return report
                continue
            items.append(Outcome("would-send", *base, message=out))
            continue
        items.append(out)
        pending += 1
        if pending >= batch:
            pending = 0
            stop = run_batch()
            if stop is not None:
                settle([])
                report.stopped, report.not_sent = stop, len(todo) - n - 1
                return report
    stop = run_batch()
    if carry or waiting:
        settle([])
    if stop is not None:
        report.stopped = stop
    return report
