"""Transactions and orderly retries in a journey: which records belong to a transactional
message, what each says, and the verdict (RocketMQ's rules, checked against 4.2, 4.9.7 and
5.3.3; the writer side is :mod:`mqtool.refstore.transaction`).

4.3 and later: the half record (``RMQ_SYS_TRANS_HALF_TOPIC``, REAL_TOPIC/REAL_QID, sysFlag
type NOT), the check service's re-puts of it (TRANSACTION_CHECK_TIMES, same UNIQ_KEY), on
commit a record in the real topic with sysFlag type COMMIT whose PREPARED_TRANSACTION_OFFSET is
the half's commitlog offset, and on commit *and* rollback an op record in
``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (same queue id as the half, tag ``d``, body = the half's queue
offset, 5.x ``"12,"`` or several ``"12,13,"``). The op record carries no UNIQ_KEY (it is set
after the properties are encoded), so it is found through the op topic's consume queue; a
rollback is an op record with no committed copy. A half checked ``transactionCheckMax`` times
is copied to ``TRANS_CHECK_MAX_TIME_TOPIC`` (discarded).

Before 4.3 (legacy): a PREPARED record (sysFlag 0x4) in the real topic, then a COMMIT (0x8) or
ROLLBACK (0xC) record in the same queue whose PREPARED_TRANSACTION_OFFSET names it. PREPARED
and ROLLBACK records have no consume-queue unit (queue offset 0) and ROLLBACK records are not
indexed, so with an index the rollback record is looked for by reading the commitlog from the
PREPARED record on.

Orderly consumers retry locally (``ConsumeMessageOrderlyService#checkReconsumeTimes``): no
record per attempt. Once the local count reaches maxReconsumeTimes the client sends the message
to ``%RETRY%<group>`` with RECONSUME_TIME (the count, or from 5.1.1 the count + 1) and the
broker dead-letters it (4.9.7: through SCHEDULE_TOPIC_XXXX, the client's DELAY being kept;
see :func:`dlq_counts`).

Transactional messages at three layers, one module each: the store writes their records
(:mod:`mqtool.refstore.transaction`), the served broker answers their requests
(:mod:`mqtool.serve.transaction`), a trace reads them back (:mod:`mqtool.trace.transaction`).
"""

from __future__ import annotations

import struct

from mqtool.formats.commitlog import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    CommitLogMessage,
)
from mqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
from mqtool.formats.errors import Finding, MqtoolError
from mqtool.formats.rules import (
    DLQ_GROUP_TOPIC_PREFIX,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    SEND_BACK_BASE_DELAY_LEVEL,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANS_OP_OFFSET_SEPARATOR,
    TRANSACTION_TYPE_MASK,
)
from mqtool.formats.store_dirs import numbered_files
from mqtool.store.reader import Store
from mqtool.store.search import Finder, search
from mqtool.timefmt import fmt_time
from mqtool.trace.results import Hop

TX_KINDS = ("half", "op", "prepared", "commit", "rollback", "discarded")
"""Hop kinds of a transaction journey."""



def tran_type(m: CommitLogMessage) -> int:
    return m.sys_flag & TRANSACTION_TYPE_MASK


def op_offsets(m: CommitLogMessage) -> set[int]:
    """Half-message queue offsets an op record names (``"12"``, 5.x ``"12,"``/``"12,13,"``)."""
    try:
        text = m.decompressed_body().decode("ascii")
    except (MqtoolError, UnicodeDecodeError):
        return set()
    return {int(t) for t in text.split(TRANS_OP_OFFSET_SEPARATOR) if t.strip().isdigit()}


def _first_unit_at_or_after(store: Store, queue_id: int, phys: int) -> int:
    """Logical offset of the first op-queue unit whose record starts at or after ``phys``
    (units are in commitlog order: a binary search, one pread per probe)."""
    files = numbered_files(store.consumequeue_dir / TRANS_OP_HALF_TOPIC / str(queue_id))
    if not files:
        return 0
    lo = int(files[0].name) // CQ_STORE_UNIT_SIZE
    hi = (int(files[-1].name) + files[-1].stat().st_size) // CQ_STORE_UNIT_SIZE
    while lo < hi:
        mid = (lo + hi) // 2
        unit = store.unit_at(TRANS_OP_HALF_TOPIC, queue_id, mid)
        if unit is None or unit.commit_log_offset >= phys:  # None: the zero tail after the units
            hi = mid
        else:
            lo = mid + 1
    return lo


def op_records(store: Store, half: CommitLogMessage) -> list[CommitLogMessage]:
    """Op records (RMQ_SYS_TRANS_OP_HALF_TOPIC, same queue id) that close ``half``; an op
    unit whose record cannot be read is a finding (that op may be the missing hop)."""
    out = []
    start = _first_unit_at_or_after(store, half.queue_id, half.physical_offset)
    for qe in store.queue_entries(TRANS_OP_HALF_TOPIC, half.queue_id, start):
        if qe.entry.commit_log_offset < half.physical_offset:
            continue  # an op is written after its half
        try:
            m = store.message_at(qe.entry.commit_log_offset)
        except MqtoolError as e:
            store.note(Finding("cq", qe.file, qe.file_offset,
                               f"op record unreadable (a rollback or commit may be missing): {e}",
                               phy=qe.entry.commit_log_offset))
            continue
        if m.topic == TRANS_OP_HALF_TOPIC and half.queue_offset in op_offsets(m):
            out.append(m)
    return out


def _is_legacy_prepared(m: CommitLogMessage) -> bool:
    return tran_type(m) == TRANSACTION_PREPARED_TYPE and m.topic != TRANS_HALF_TOPIC


def transaction_records(
    store: Store, finder: Finder, msgs: list[CommitLogMessage]
) -> tuple[list[CommitLogMessage], list[str]]:
    """Records of the journey's transaction that the UNIQ_KEY lookup cannot find: op records
    of its half messages and (with an index) the legacy ROLLBACK record. Returns them and notes
    on how they were looked for."""
    extra: dict[int, CommitLogMessage] = {}
    notes: list[str] = []
    have = {m.physical_offset for m in msgs}
    known = len(store.findings)
    for m in msgs:
        if m.topic == TRANS_HALF_TOPIC:
            for op in op_records(store, m):
                if op.physical_offset not in have:
                    extra[op.physical_offset] = op
        elif _is_legacy_prepared(m):
            ended = any(
                x.prepared_transaction_offset == m.physical_offset
                and tran_type(x) in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE)
                for x in msgs
            )
            if ended or not finder.by_index:
                continue  # a scan has seen every record already
            uniq = m.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            pat = (f"{PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX}\x01{uniq}".encode() if uniq
                   else struct.pack(">q", m.physical_offset))
            for x in search(store, [pat], start_offset=m.end_offset, progress=finder.progress):
                if (x.prepared_transaction_offset == m.physical_offset
                        and tran_type(x) in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE)
                        and x.physical_offset not in have):
                    extra[x.physical_offset] = x
            size = max((f.start + f.size for f in store.commitlog_files), default=0)
            notes.append(
                f"read the commitlog from {m.end_offset} to {size} for the COMMIT/ROLLBACK "
                "record of the PREPARED record (ROLLBACK records are not indexed)"
            )
    notes += [f"a hop may be missing: {f}" for f in store.findings[known:]]
    return [extra[k] for k in sorted(extra)], notes


def tx_kind(m: CommitLogMessage) -> str | None:
    """The transaction hop kind of a record, or None for a record of no transaction."""
    if m.topic == TRANS_HALF_TOPIC:
        return "half"
    if m.topic == TRANS_OP_HALF_TOPIC:
        return "op"
    if m.topic == TRANS_CHECK_MAX_TIME_TOPIC:
        return "discarded"
    t = tran_type(m)
    if t == TRANSACTION_PREPARED_TYPE:
        return "prepared"
    if t == TRANSACTION_ROLLBACK_TYPE:
        return "rollback"
    if t == TRANSACTION_COMMIT_TYPE:
        return "commit"
    return None


def _end_of(
    m: CommitLogMessage, msgs: list[CommitLogMessage], tran: int
) -> CommitLogMessage | None:
    return next((x for x in msgs if x.prepared_transaction_offset == m.physical_offset
                 and x.physical_offset > m.physical_offset and tran_type(x) == tran), None)


def _closing_ops(half: CommitLogMessage, msgs: list[CommitLogMessage]) -> list[CommitLogMessage]:
    return [x for x in msgs if x.topic == TRANS_OP_HALF_TOPIC and x.queue_id == half.queue_id
            and x.physical_offset > half.physical_offset and half.queue_offset in op_offsets(x)]


def tx_state(
    m: CommitLogMessage, msgs: list[CommitLogMessage], pending_for: str
) -> tuple[str, str, str, str | None] | None:
    """(kind, state, detail, note) of a transaction record that is not a committed copy
    (committed copies are ordinary deliveries: the caller gives their consumption state);
    None for other records. ``pending_for`` is how long a half has waited, for people."""
    kind = tx_kind(m)
    if kind is None or kind == "commit":
        return None
    later = [x for x in msgs if x.physical_offset > m.physical_offset]
    if kind == "half":
        real = m.properties.get(PROPERTY_REAL_TOPIC, "?")
        checks = m.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES)
        suffix = f"; checked {checks} time{'s' if checks != '1' else ''}" if checks else ""
        commit = _end_of(m, later, TRANSACTION_COMMIT_TYPE)
        ops = _closing_ops(m, later)
        if commit is not None:
            return kind, "committed", f"committed to {real} (commitlog {commit.physical_offset})" \
                + suffix, None
        if ops:
            return kind, "rolled-back", (
                f"rolled back: op record at commitlog {ops[0].physical_offset} closes it and "
                f"no copy was committed to {real}" + suffix), None
        uniq = m.uniq_key
        renew = next((x for x in later if x.topic == TRANS_HALF_TOPIC and uniq
                      and x.uniq_key == uniq), None)
        if renew is not None:
            return kind, "checked", (
                f"checked by the broker: re-put as the half message at commitlog "
                f"{renew.physical_offset}" + suffix), None
        gone = next((x for x in later if x.topic == TRANS_CHECK_MAX_TIME_TOPIC and uniq
                     and x.uniq_key == uniq), None)
        if gone is not None:
            return kind, "discarded", "discarded after the last check" + suffix, None
        return kind, "pending", (
            f"in doubt: no commit or rollback for {pending_for}" + suffix), None
    if kind == "op":
        offs = sorted(op_offsets(m))
        halves = [x for x in msgs if x.topic == TRANS_HALF_TOPIC and x.queue_id == m.queue_id
                  and x.queue_offset in offs and x.physical_offset < m.physical_offset]
        committed = any(_end_of(h, msgs, TRANSACTION_COMMIT_TYPE) for h in halves)
        where = f"half queue offset{'s' if len(offs) != 1 else ''} " + ",".join(map(str, offs))
        if committed:
            return "op", "committed", f"op record 'd': closes {where} after the commit", None
        return "rollback", "rolled-back", (
            f"rollback: op record 'd' closes {where}; nothing was committed"), (
            f"{TRANS_OP_HALF_TOPIC} body {','.join(map(str, offs))}")
    if kind == "prepared":
        if _end_of(m, later, TRANSACTION_COMMIT_TYPE) is not None:
            return kind, "committed", "PREPARED record (before 4.3): committed", None
        rb = _end_of(m, later, TRANSACTION_ROLLBACK_TYPE)
        if rb is not None:
            return kind, "rolled-back", (
                f"PREPARED record (before 4.3): rolled back by the ROLLBACK record at commitlog "
                f"{rb.physical_offset}"), None
        return kind, "pending", (
            f"PREPARED record (before 4.3): in doubt, no COMMIT or ROLLBACK record for "
            f"{pending_for}"), None
    if kind == "rollback":
        return kind, "rolled-back", (
            f"ROLLBACK record of the PREPARED record at commitlog "
            f"{m.prepared_transaction_offset} (empty body, no consume-queue unit)"), None
    checks = m.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES, "?")
    return kind, "discarded", (
        f"discarded: checked {checks} times without an answer, moved to "
        f"{TRANS_CHECK_MAX_TIME_TOPIC}"), None


def tx_verdict(hops: list[Hop], pending_for: str) -> tuple[str, str] | None:
    """The verdict of a transaction that was not committed; None when the journey holds no
    transaction or it was committed (then the committed copy's delivery decides)."""
    kinds = {h.kind for h in hops}
    if not kinds & {"half", "prepared", "rollback", "discarded"} or "commit" in kinds:
        return None
    rb = [h for h in hops if h.kind == "rollback"]
    if rb:
        form = (f"op record in {TRANS_OP_HALF_TOPIC}" if rb[-1].topic == TRANS_OP_HALF_TOPIC
                else "ROLLBACK record")
        return (f"transaction rolled back at {fmt_time(rb[-1].store_timestamp)} ({form}); the "
                "message never reached its topic", "rolled-back")
    if "discarded" in kinds:
        return ("transaction discarded: the broker checked it transactionCheckMax times "
                f"without an answer and moved it to {TRANS_CHECK_MAX_TIME_TOPIC}", "discarded")
    checks = [h.state_detail for h in hops if h.kind in ("half", "prepared")]
    return (f"transaction in doubt: neither committed nor rolled back after {pending_for}",
            "transaction-pending") if checks else None


def dlq_counts(
    dlq: CommitLogMessage, before: list[CommitLogMessage]
) -> tuple[int, int, bool]:
    """(retries, failed attempts, orderly) behind a DLQ record (or a schedule copy bound for
    the DLQ).

    The broker's send-back stores reconsumeTimes + 1 of the consumed copy, so a record that
    got there that way holds the failed attempts (retries + 1). An orderly consumer retries
    locally, leaving no record per attempt, then its client sends the message with
    RECONSUME_TIME and DELAY = 3 + its local count: clients before 5.1.1 store the local count
    itself (the retries; failed attempts one more), 5.1.1 and later (apache/rocketmq #6164)
    the count + 1 (the failed attempts; a 5.x broker then stores DELAY=-1). DELAY tells them
    apart; a DELAY clamped to the last delay level cannot, and is read as the newer client.
    """
    n = dlq.reconsume_times
    retried = any(
        x.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or (
            x.topic == SCHEDULE_TOPIC
            and x.properties.get(PROPERTY_REAL_TOPIC, "").startswith(RETRY_GROUP_TOPIC_PREFIX))
        for x in before
    )
    if PROPERTY_RECONSUME_TIME not in dlq.properties or retried:
        return max(0, n - 1), n, False
    try:
        delay: int | None = int(dlq.properties.get(PROPERTY_DELAY_TIME_LEVEL, ""))
    except ValueError:
        delay = None
    if delay == n + SEND_BACK_BASE_DELAY_LEVEL:
        return n, n + 1, True
    return max(0, n - 1), n, True


def is_dlq_bound(m: CommitLogMessage) -> bool:
    """A schedule copy whose real topic is a DLQ (4.9.7 keeps the client's DELAY on an
    orderly consumer's dead-lettered message, so it waits in SCHEDULE_TOPIC_XXXX first)."""
    return m.topic == SCHEDULE_TOPIC and m.properties.get(PROPERTY_REAL_TOPIC, "").startswith(
        DLQ_GROUP_TOPIC_PREFIX)
