"""The journey builder: collect a message's copies (through :mod:`mqtool.store.search`), build
its hops in commitlog order, give the verdict, and the two entry points ``trace_id`` and
``trace_key``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mqtool.backlog import timer_read_ms
from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.errors import usage
from mqtool.formats.msgid import classify_id
from mqtool.formats.pop import dead_letter_origin
from mqtool.formats.rules import (
    DLQ_GROUP_TOPIC_PREFIX,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    is_system_topic,
    parse_delay_levels,
)
from mqtool.formats.walker import Unreadable
from mqtool.integrity.record_check import RecordCheck
from mqtool.overview import (
    DEFAULT_DELAY_LEVELS,
    load_consumer_offsets,
    load_delay_offsets,
    store_time,
)
from mqtool.store.reader import Store
from mqtool.store.search import Finder, ProgressFn, search
from mqtool.timefmt import fmt_time
from mqtool.trace.checkouts import journey_checkouts
from mqtool.trace.hops import (
    TraceContext,
    consumers,
    consumption_state,
    fmt_duration,
    int_prop,
    is_resend,
    retry_group,
    schedule_state,
    sent_back,
    timer_state,
)
from mqtool.trace.reported import client_events
from mqtool.trace.results import (
    RESEND_PROPERTY_NAMES,
    RESEND_TARGET_PLACEHOLDER,
    ConsumerState,
    Hop,
    KeyTrace,
    Trace,
    TraceError,
)
from mqtool.trace.transaction import (
    dlq_counts,
    transaction_records,
    tx_kind,
    tx_state,
    tx_verdict,
)

DelayLevelsArg = str | Mapping[int, int]
"""A ``messageDelayLevel`` string or a resolved ``{level: delay ms}`` (mqtool.delaylevels)."""


def scan_for(
    store: Store,
    patterns: Iterable[bytes],
    *,
    start_offset: int = 0,
    progress: ProgressFn | None = None,
) -> list[CommitLogMessage]:
    """Messages whose bytes contain any of ``patterns``: :func:`mqtool.store.search.search`."""
    return search(store, patterns, start_offset=start_offset, progress=progress)


def _collect(
    store: Store, finder: Finder, seeds: list[CommitLogMessage], searched: set[str]
) -> list[CommitLogMessage]:
    """Close ``seeds`` over the UNIQ_KEY / ORIGIN_MESSAGE_ID links (``searched``: UNIQ_KEYs
    whose records are all among the seeds already)."""
    got: dict[int, CommitLogMessage] = {m.physical_offset: m for m in seeds}
    done_u: set[str] = set(searched)
    done_o: set[str] = set()
    for _ in range(8):  # links are at most a couple of steps deep
        new_u: set[str] = set()
        new_o: set[str] = set()
        for m in list(got.values()):
            u = m.uniq_key
            if u and u not in done_u:
                new_u.add(u)
            o = m.properties.get(PROPERTY_ORIGIN_MESSAGE_ID)
            if o and o.upper() not in done_o:
                first = store.find_by_offset_msg_id(o)
                done_o.add(o.upper())
                if first is not None and first.offset_msg_id.upper() == o.upper():
                    got.setdefault(first.physical_offset, first)
                    if first.uniq_key and first.uniq_key not in done_u:
                        new_u.add(first.uniq_key)
            if not u and m.offset_msg_id.upper() not in done_o:
                new_o.add(m.offset_msg_id)  # copies of a message without UNIQ_KEY
        if not new_u and not new_o:
            break
        for m in finder.find(new_u, new_o, set()):
            got.setdefault(m.physical_offset, m)
        done_u |= new_u
        done_o |= {o.upper() for o in new_o}
    return [got[k] for k in sorted(got)]


def _build_hops(ctx: TraceContext, msgs: list[CommitLogMessage]) -> list[Hop]:
    original_topic = None
    for m in msgs:
        if m.properties.get(PROPERTY_RETRY_TOPIC):
            # a POP dead letter names its retry topic
            original_topic = dead_letter_origin(m.topic, m.properties.get(PROPERTY_RETRY_TOPIC))
            break
    if original_topic is None:
        for m in msgs:
            if not is_system_topic(m.topic) and tx_kind(m) in (None, "commit"):
                original_topic = m.topic
                break
    hops: list[Hop] = []
    prev: CommitLogMessage | None = None
    seen_dlq = resent = False
    for i, m in enumerate(msgs):
        later = msgs[i + 1:]
        since = None if prev is None else m.store_timestamp - prev.store_timestamp
        prev = m
        note: str | None = None
        tx = tx_state(m, msgs, fmt_duration(ctx.now - m.store_timestamp))
        if tx is not None:
            kind, state, detail, note = tx
            hops.append(Hop(kind, m, since, None, None, None, state, detail, None, (), note))
            continue
        delay_prop = int_prop(m, PROPERTY_DELAY_TIME_LEVEL)
        level: int | None = delay_prop
        delay_ms: int | None = None
        if level is not None:
            delay_ms = ctx.levels.get(level)
        due: int | None = None
        group: str | None = None
        cons: tuple[ConsumerState, ...] = ()
        t = m.topic
        if t == SCHEDULE_TOPIC:
            kind = "schedule"
            level, delay_ms, due, state, detail = schedule_state(ctx, m)
            real = m.properties.get(PROPERTY_REAL_TOPIC, "?")
            if real.startswith(RETRY_GROUP_TOPIC_PREFIX):
                group = retry_group(real, original_topic)[0]
            elif real.startswith(DLQ_GROUP_TOPIC_PREFIX):
                group = real[len(DLQ_GROUP_TOPIC_PREFIX):]
                retries, attempts, orderly = dlq_counts(m, msgs[:i])
                note = (f"bound for {real} after {retries} retries ({attempts} failed attempts"
                        + (", retried locally by an orderly consumer" if orderly else "") + ")")
            if state == "delivered" and not any(x.topic == real for x in later):
                detail += f"; the copy in {real} was not found"
        elif t == TIMER_TOPIC:
            kind = "timer"
            real = m.properties.get(PROPERTY_REAL_TOPIC, "?")
            due, state, detail = timer_state(ctx, m, any(x.topic == real for x in later))
        elif t.startswith(DLQ_GROUP_TOPIC_PREFIX):
            kind = "dlq"
            seen_dlq, resent = True, False
            group = t[len(DLQ_GROUP_TOPIC_PREFIX):]
            state = "dead-lettered"
            retries, attempts, orderly = dlq_counts(m, msgs[:i])
            detail = f"dead-lettered for group {group} after {retries} retries"
            if orderly:
                detail += (f" ({attempts} failed attempts: an orderly consumer retries locally, "
                           "no record per attempt)")
            cons = consumers(ctx, m, None)
            read = [c.group for c in cons if c.consumed]
            if read:
                detail += "; read from the DLQ by " + ", ".join(read)
        else:
            pop = False
            if t.startswith(RETRY_GROUP_TOPIC_PREFIX):
                group, pop = retry_group(t, original_topic)
            if (seen_dlq and not resent) or (is_resend(m) and m.reconsume_times == 0):
                kind = "resend"  # the first copy after a DLQ hop, or marked by `dlq resend`
                resent = True
            elif t.startswith(RETRY_GROUP_TOPIC_PREFIX):
                kind = "pop-retry" if pop or PROPERTY_FIRST_POP_TIME in m.properties else "retry"
            elif tx_kind(m) == "commit":
                kind = "commit"
                note = (f"transaction committed: PREPARED_TRANSACTION_OFFSET "
                        f"{m.prepared_transaction_offset}")
            elif hops and hops[-1].kind in ("schedule", "timer"):
                kind = "delivered"
            else:
                kind = "original"
            state, detail, cons = consumption_state(ctx, m, group)
            if kind == "resend":
                origin = m.properties.get(RESEND_PROPERTY_NAMES[0])
                note = (f"resent from DLQ record {origin}" if origin else
                        "stored after the DLQ copy: a resend")
            back = sent_back(m, later, original_topic)
            if back is not None:
                state, detail = "consumed", f"consumed by {back} and sent back" + (
                    "" if ctx.consumer_offsets is None else f"; {detail}")
            pops = ctx.checkouts.get(m.physical_offset, ())
            if pops and back is None:  # POP: what became of the last checkout
                last = pops[-1]
                state = {"acked": "consumed", "changed": "consumed"}.get(last.state, last.state)
                n = f"{len(pops)} times" if len(pops) > 1 else "once"
                verb = {"acked": "was acked", "changed": "had its invisible time changed",
                        "revived": "was not acked and was revived",
                        "revive-due": "was not acked and is due for revive"}.get(
                    last.state, f"is in flight, invisible until {fmt_time(last.revive_time)}")
                detail = f"checked out by {last.group} (POP) {n}; the last checkout {verb}"
        hops.append(Hop(kind, m, since, level, delay_ms, due, state, detail, group, cons, note,
                        ctx.checkouts.get(m.physical_offset, ())))
    return hops


def _verdict(ctx: TraceContext, hops: list[Hop]) -> tuple[str, str]:
    if not hops:
        return "not found", "unknown"
    dlqs = [h for h in hops if h.kind == "dlq"]
    prefix = ""
    tail = hops
    if dlqs:
        last_dlq = dlqs[-1]
        after = [h for h in hops if h.commit_log_offset > last_dlq.commit_log_offset]
        resent = [h for h in after if h.kind not in ("op", "rollback")]
        if not resent:
            before = [h.message for h in hops if h.commit_log_offset < last_dlq.commit_log_offset]
            retries, attempts, orderly = dlq_counts(last_dlq.message, before)
            how = (f"; {attempts} failed attempts, retried locally by an orderly consumer"
                   if orderly else "")
            return (
                f"dead-lettered after {retries} retries (group {last_dlq.group}{how})",
                "dead-lettered",
            )
        prefix = (f"resent from %DLQ%{last_dlq.group} at {fmt_time(resent[0].store_timestamp)}; ")
        tail = resent
    else:
        began = next((h for h in hops if h.kind in ("half", "prepared")), hops[0])
        tx = tx_verdict(hops, fmt_duration(ctx.now - began.store_timestamp))
        if tx is not None:
            return tx
        commit = next((h for h in hops if h.kind == "commit"), None)
        if commit is not None:
            prefix = f"transaction committed at {fmt_time(commit.store_timestamp)}; "
            tail = [h for h in hops if h.commit_log_offset >= commit.commit_log_offset]
    last = next((h for h in reversed(tail) if h.kind not in ("op", "rollback")), tail[-1])
    due = fmt_time(last.deliver_timestamp) if last.deliver_timestamp else "?"
    rel = ""
    if last.deliver_timestamp:
        d = last.deliver_timestamp - ctx.now
        rel = f", in {fmt_duration(d)}" if d >= 0 else f", overdue by {fmt_duration(-d)}"
    if last.kind == "schedule":
        real = last.real_topic or "?"
        if last.state in ("pending", "overdue", "unknown"):
            if real.startswith(RETRY_GROUP_TOPIC_PREFIX):
                return (prefix + f"waiting for retry {last.reconsume_times} at {due}{rel} "
                        f"(group {last.group}, delay level {last.delay_level})", "waiting-retry")
            if real.startswith(DLQ_GROUP_TOPIC_PREFIX):
                before = [h.message for h in hops if h.commit_log_offset < last.commit_log_offset]
                retries, attempts, orderly = dlq_counts(last.message, before)
                how = ", retried locally by an orderly consumer" if orderly else ""
                return (prefix + f"on its way to {real} after {retries} retries ({attempts} "
                        f"failed attempts{how}): delay level {last.delay_level} due at "
                        f"{due}{rel}", "scheduled")
            return (prefix + f"still scheduled: delay level {last.delay_level} due at {due}{rel}",
                    "scheduled")
        return prefix + f"delivered by the schedule service to {real}; copy not found", "delivered"
    if last.kind == "timer":
        if last.state == "never-delivered":
            return (prefix + f"lost: timer due at {due} is before the read time a broker "
                    f"starting at {fmt_time(ctx.now)} keeps (the wheel holds 7 days): never "
                    "delivered", "lost")
        if last.state in ("pending", "overdue"):
            return prefix + f"still scheduled: timer due at {due}{rel}", "scheduled"
        return prefix + f"delivered by the timer to {last.real_topic}; copy not found", "delivered"
    pop = last.checkouts[-1] if last.checkouts else None
    if pop is not None and pop.state in ("in-flight", "revive-due"):
        until = fmt_time(pop.revive_time)
        if pop.state == "in-flight":
            return (prefix + f"checked out by group {pop.group} (POP) at "
                    f"{fmt_time(pop.pop_time)}, not acked: invisible until {until}, in "
                    f"{fmt_duration(pop.revive_time - ctx.now)}", "in-flight")
        return (prefix + f"checked out by group {pop.group} (POP) at {fmt_time(pop.pop_time)}, "
                f"not acked: due for revive since {until}", "waiting-retry")
    retries = len([h for h in tail if h.kind in ("retry", "pop-retry")])
    what = "delivered" if retries == 0 else (
        f"delivered after {retries} {'retry' if retries == 1 else 'retries'}")
    if last.state == "consumed":
        return prefix + f"{what} and consumed ({last.state_detail})", "consumed"
    return prefix + f"{what}; {last.state_detail}", "delivered"


def _store_now(store: Store, msgs: list[CommitLogMessage]) -> int:
    """The store's own "now" (:func:`mqtool.overview.store_time`), or the journey's latest
    store time when that is later."""
    return max([m.store_timestamp for m in msgs] + [store_time(store)])


def _context(
    store: Store, levels: DelayLevelsArg, now: int | None, msgs: list[CommitLogMessage],
    unreached: set[int],
) -> tuple[TraceContext, str]:
    if now is None:
        now_v, src = _store_now(store, msgs), "store"
    else:
        now_v, src = now, "given"
    ctx = TraceContext(
        store=store,
        levels=parse_delay_levels(levels) if isinstance(levels, str) else dict(levels),
        delay_offsets=load_delay_offsets(store),
        consumer_offsets=load_consumer_offsets(store),
        timer_read_ms=timer_read_ms(store),
        now=now_v,
        unreached=frozenset(unreached),
    )
    return ctx, src


def _resolve(
    store: Store, finder: Finder, msg_id: str
) -> tuple[list[CommitLogMessage], set[str]]:
    t = msg_id.strip()
    kind = classify_id(t)
    if kind == "invalid":
        raise usage(TraceError(
            f"{msg_id!r} is not a message id (offsetMsgId or UNIQ_KEY: 32 or 56 hex characters; "
            "5.x id: 34 characters starting 01)"))
    if kind != "v5":
        m = store.find_by_offset_msg_id(t)
        if m is not None and m.offset_msg_id == t.upper():
            return [m], set()
    found = finder.find({t, t.upper()}, set(), set())
    if not found and kind != "v5":
        m = store.find_by_offset_msg_id(t)
        if m is not None:  # the offset names a record, stored under another host address
            return [m], set()
    return found, {t, t.upper()}


def _make_trace(
    store: Store, finder: Finder, ident: str, seeds: list[CommitLogMessage],
    searched: set[str], *, delay_levels: DelayLevelsArg, now: int | None, store_label: str,
    check: RecordCheck,
) -> Trace:
    msgs = _collect(store, finder, seeds, searched)
    extra, tx_notes = transaction_records(store, finder, msgs)
    if extra:
        msgs = sorted(msgs + extra, key=lambda m: m.physical_offset)
    # a client names the message by its UNIQ_KEY (by its offsetMsgId when it has none)
    client = client_events(store, finder, {m.uniq_key for m in msgs if m.uniq_key}
                           or {m.offset_msg_id for m in msgs})
    # the damage around the journey's records (and those the search read on the way)
    unreached = check.check([*msgs, *finder.walked])
    ctx, src = _context(store, delay_levels, now, msgs, unreached)
    ctx.checkouts = journey_checkouts(store, msgs, ctx.now)
    hops = _build_hops(ctx, msgs)
    uniq = next((m.uniq_key for m in msgs if m.uniq_key), None)
    verdict, vkind = _verdict(ctx, hops)
    tr = Trace(ident, uniq, hops, verdict, vkind, finder.via, ctx.now, src, client=client)
    dlqs = [h for h in hops if h.kind == "dlq"]
    if dlqs:
        import shlex

        d = dlqs[-1]
        tr.dlq_group = d.group
        tr.dlq_msg_id = d.offset_msg_id  # exact even when the message was dead-lettered twice
        copies = [h for h in hops if h.kind == "resend"
                  and h.commit_log_offset > d.commit_log_offset]
        if copies:  # resent already: where the copy went, not a command to resend it again
            c = copies[0]
            tr.resent_to = (f"{c.topic} q{c.queue_id}@{c.queue_offset} at "
                            f"{fmt_time(c.store_timestamp)} (offsetMsgId {c.offset_msg_id})")
        else:
            tr.resend_command = (
                f"mqtool dlq resend {shlex.quote(store_label)} --group "
                f"{shlex.quote(d.group or '')} --msg-id {tr.dlq_msg_id} --target "
                f"{RESEND_TARGET_PLACEHOLDER}"
            )
    tr.notes.extend(tx_notes)
    if finder.via == "index" and finder.tail_bytes:
        tr.notes.append(f"scanned {finder.tail_bytes} bytes written after the last indexed record")
    if finder.via != "index" and store.index_damaged:
        tr.notes.append("an index file is damaged: the commitlog was searched instead")
    for f in store.findings:  # damage met on the way: a copy there cannot be read
        if isinstance(f, Unreadable) and f.file.startswith("commitlog/"):
            tr.notes.append(f"a hop may be missing: {f}")
    if tr.verdict_kind == "transaction-pending" and any(
            n.startswith("a hop may be missing") for n in tr.notes):
        tr.verdict += " as far as the readable records show (a commit or rollback may be in " \
            "the damaged part: see the notes)"
    return tr


def _key_mismatch(finder: Finder, key: str) -> str:
    """What the index named for ``key`` that does not carry it (:meth:`Finder.not_carrying`),
    as the end of a not-found error."""
    return "".join(
        f"; the index names commitlog offset {m.physical_offset} for it, whose record's "
        f"UNIQ_KEY is {m.uniq_key} and KEYS {' '.join(m.key_list)!r}: the record's "
        "key does not match" for m in finder.not_carrying(key))


def trace_id(
    store: Store,
    msg_id: str,
    *,
    delay_levels: DelayLevelsArg = DEFAULT_DELAY_LEVELS,
    now: int | None = None,
    progress: ProgressFn | None = None,
    store_label: str | None = None,
) -> Trace:
    """The journey of the message ``msg_id`` names: an offsetMsgId of any of its records, its
    UNIQ_KEY (32/56 hex) or a 5.x ``01...`` id.

    ``delay_levels`` is the broker's ``messageDelayLevel``; ``now`` (epoch ms) is the time
    pending copies are measured against (default: the store's latest recorded store time);
    ``progress`` is called during a commitlog scan; ``store_label`` is the store path shown in
    the suggested ``dlq resend`` command. Raises :class:`TraceError` when nothing matches.
    """
    finder = Finder(store, progress)
    check = RecordCheck(store)
    seeds, searched = _resolve(store, finder, msg_id)
    if not seeds:
        check.check(finder.walked)  # what the search read may say why
        raise TraceError(
            f"no record with offsetMsgId or UNIQ_KEY {msg_id} (searched by {finder.via})"
            + _key_mismatch(finder, msg_id.strip())
        )
    return _make_trace(store, finder, msg_id.strip(), seeds, searched,
                       delay_levels=delay_levels, now=now,
                       store_label=store_label or str(store.root), check=check)


def trace_key(
    store: Store,
    key: str,
    *,
    topic: str | None = None,
    delay_levels: DelayLevelsArg = DEFAULT_DELAY_LEVELS,
    now: int | None = None,
    progress: ProgressFn | None = None,
    store_label: str | None = None,
) -> KeyTrace:
    """Every journey whose records carry the business key ``key`` (KEYS), optionally only
    those with a record in ``topic``; one :class:`Trace` per message (UNIQ_KEY)."""
    finder = Finder(store, progress)
    check = RecordCheck(store)
    found = finder.find(set(), set(), {key}, topic)
    if not found:
        check.check(finder.walked)  # what the search read may say why
        where = f" in topic {topic}" if topic else ""
        raise TraceError(f"no record with key {key!r}{where} (searched by {finder.via})"
                         + _key_mismatch(finder, key))
    traces: list[Trace] = []
    covered: set[int] = set()
    for m in found:
        if m.physical_offset in covered:
            continue
        # copies keep KEYS: without --topic the key search already found every copy
        same = [x for x in found if m.uniq_key and x.uniq_key == m.uniq_key] or [m]
        searched = {m.uniq_key} if m.uniq_key and topic is None else set()
        tr = _make_trace(store, finder, m.uniq_key or m.offset_msg_id, same, searched,
                         delay_levels=delay_levels, now=now,
                         store_label=store_label or str(store.root), check=check)
        covered.update(h.commit_log_offset for h in tr.hops)
        traces.append(tr)
    return KeyTrace(key, topic, finder.via, traces)
