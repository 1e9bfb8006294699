"""POP checkouts of a journey's copies: each checkpoint (``ck``) that holds a copy's queue
offset, and what became of it (acked, invisible time changed, revived into the group's POP
retry topic, due for revive, in flight), from the revive records
(:class:`mqtool.backlog.PopLedger`).

A revived checkout is one whose copy has a later copy in the group's POP retry topic
(``%RETRY%<group>_<topic>`` or ``+``) with one more reconsume time, or whose checkpoint the
revive service has passed."""

from __future__ import annotations

from mqtool.backlog import PopLedger, revived_copy_of
from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.pop import REVIVE_TOPIC_PREFIX
from mqtool.store.reader import Store
from mqtool.timefmt import fmt_time
from mqtool.trace.hops import fmt_duration
from mqtool.trace.results import PopCheckout


def journey_checkouts(store: Store, msgs: list[CommitLogMessage], now: int
                      ) -> dict[int, tuple[PopCheckout, ...]]:
    """The checkouts of each copy in ``msgs`` (commitlog order), by the copy's commitlog
    offset; none when the store has no revive topic."""
    if not msgs or not any(t.startswith(REVIVE_TOPIC_PREFIX) for t, _ in store.queue_ids()):
        return {}
    ledger = PopLedger(store, since=msgs[0].physical_offset, topics={m.topic for m in msgs})
    out: dict[int, list[PopCheckout]] = {}
    for key, c in sorted(ledger.checkouts.items(), key=lambda kv: kv[0][4]):
        group, topic, qid = key[0], key[1], key[2]
        for i, m in enumerate(msgs):
            if (m.topic, m.queue_id) != (topic, qid) or m.queue_offset not in c.ck.queue_offsets():
                continue
            copy = revived_copy_of(m, group, msgs[i + 1:])
            state = ledger.state(c, m.queue_offset, now, revived=copy is not None)
            ack = ledger.ack_of(c.ck, m.queue_offset)
            at: int | None = None
            until = fmt_time(c.ck.revive_time)
            if state == "acked" and ack is not None:
                at, detail = ack.store_timestamp, (
                    f"acked at {fmt_time(ack.store_timestamp)} (ack record at commitlog "
                    f"{ack.physical_offset})")
            elif state == "changed" and ack is not None:
                at, detail = ack.store_timestamp, (
                    f"invisible time changed at {fmt_time(ack.store_timestamp)}: checked out "
                    "again (the next checkout)")
            elif state == "revived" and copy is not None:
                at, detail = copy.store_timestamp, (
                    f"not acked: revived into {copy.topic} q{copy.queue_id}@{copy.queue_offset}"
                    f" at {fmt_time(copy.store_timestamp)}")
            elif state == "revived":
                detail = "not acked: revived (the revive service passed its checkpoint)"
            elif state == "revive-due":
                detail = (f"not acked: invisible until {until}, due for revive (overdue by "
                          f"{fmt_duration(now - c.ck.revive_time)})")
            else:
                detail = (f"in flight: not acked, invisible until {until} (in "
                          f"{fmt_duration(c.ck.revive_time - now)})")
            out.setdefault(m.physical_offset, []).append(PopCheckout(
                group, c.ck.pop_time, c.ck.invisible_time, c.ck.revive_time, state, at,
                detail, c.record.physical_offset, None if ack is None else ack.physical_offset))
    return {k: tuple(v) for k, v in out.items()}
