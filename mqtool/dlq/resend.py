"""The resend run: select, skip what the journal says is done, resolve what a killed run left
pending, send the rest in group-committed batches, report every outcome.

See :mod:`mqtool.dlq.outgoing` for what a copy is, :mod:`mqtool.dlq.journal` for the journal and
:mod:`mqtool.dlq.targets` for where copies go.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mqtool.dlq.journal import ResendJournal
from mqtool.dlq.outgoing import (
    TO_RETRY,
    OutgoingMessage,
    ResendError,
    build_outgoing,
    resend_id,
)
from mqtool.dlq.selection import DlqSelection, require_group, select_dlq
from mqtool.dlq.targets import ResendTarget, SendResult
from mqtool.formats.errors import MqtoolError
from mqtool.store import Store

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
    if not records:
        require_group(source, sel.group)
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
