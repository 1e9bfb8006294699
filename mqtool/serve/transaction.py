"""Transactional messages as the broker serves them (4.3 and later).

The half message is stored by the send path (:mod:`mqtool.serve.send`:
:func:`mqtool.refstore.transaction.send_half`, in ``RMQ_SYS_TRANS_HALF_TOPIC``).

* END_TRANSACTION (37, oneway; ``EndTransactionProcessor``): COMMIT copies the half message to
  its real topic and queue and writes the op record (``RMQ_SYS_TRANS_OP_HALF_TOPIC``, tag ``d``,
  body the half's queue offset); ROLLBACK writes the op record only; NOT_TYPE (unknown) does
  nothing. The half must be where the header says (commitlog offset, queue offset, producer
  group: ``checkPrepareMessage``), else nothing is written.
* The check service (``TransactionalMessageCheckService`` / ``TransactionalMessageServiceImpl
  #check``), one round every ``transactionCheckInterval``: per half queue, from the check
  group's (``CID_RMQ_SYS_TRANS``) offset, a half with an op is done; one checked
  ``transactionCheckMax`` times is discarded to ``TRANS_CHECK_MAX_TIME_TOPIC``; one stored since
  the round began or born less than ``transactionTimeOut`` ago (or its
  ``CHECK_IMMUNITY_TIME_IN_SECONDS``) ends the round for that queue; any other is re-put with
  TRANSACTION_CHECK_TIMES + 1 (:func:`mqtool.refstore.transaction.check_half`) and its producer
  group asked CHECK_TRANSACTION_STATE (39, oneway, the re-put message as body) on one of the
  group's connections, if it has any. The group's offsets on the half and op queues move past
  what the round finished.

Transactional messages at three layers, one module each: the store writes their records
(:mod:`mqtool.refstore.transaction`), the served broker answers their requests
(:mod:`mqtool.serve.transaction`), a trace reads them back (:mod:`mqtool.trace.transaction`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace

from mqtool.formats.commitlog import CommitLogMessage, build_message, encode_properties
from mqtool.formats.errors import MqtoolError
from mqtool.formats.rules import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANS_CHECK_GROUP,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANS_OP_OFFSET_SEPARATOR,
    TRANS_OP_REMOVE_TAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from mqtool.refstore import transaction
from mqtool.refstore.engine import PutResult
from mqtool.remoting import headers
from mqtool.remoting.codes import RequestCode, ResponseCode
from mqtool.remoting.frame import RemotingCommand
from mqtool.remoting.server import Peer
from mqtool.serve.core import BrokerCore

#: ``MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS``.
PROPERTY_CHECK_IMMUNITY_TIME = "CHECK_IMMUNITY_TIME_IN_SECONDS"
NOT_FOUND = "Find prepared transaction message failed"


def op_half_offsets(m: CommitLogMessage) -> list[int]:
    """The half queue offsets an op record closes (4.x: one number; 5.x: each followed by
    ``,``); none for a record that is not a remove op."""
    if m.tags != TRANS_OP_REMOVE_TAG:
        return []
    out = []
    for part in m.body.decode("utf-8", "replace").split(TRANS_OP_OFFSET_SEPARATOR):
        if part.strip():
            try:
                out.append(int(part))
            except ValueError:
                continue  # the broker skips what it cannot parse (getLong: -1)
    return out


def immunity_ms(m: CommitLogMessage, timeout_ms: int) -> int:
    """``getImmunityTime``: the message's CHECK_IMMUNITY_TIME_IN_SECONDS (s), else the
    broker's transactionTimeOut; never less than it."""
    raw = m.properties.get(PROPERTY_CHECK_IMMUNITY_TIME)
    if raw is None:
        return timeout_ms
    try:
        ms = int(raw) * 1000
    except ValueError:
        return timeout_ms
    return max(ms, timeout_ms)


class Transactions:
    """END_TRANSACTION and the check service of one broker."""

    def __init__(self, broker: BrokerCore, log: Callable[[str], None]) -> None:
        self.broker = broker
        self.log = log
        self.counts = {"committed": 0, "rolled_back": 0, "checked": 0, "discarded": 0}
        self._pick = itertools.count()
        self.pending = False  # a half message was stored since the last round

    def half_put(self) -> None:
        self.pending = True

    # -- END_TRANSACTION ----------------------------------------------------------------------

    async def end_transaction(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand | None:
        h = headers.decode_header(headers.EndTransactionRequestHeader, cmd.ext_fields)
        kind = h.commitOrRollback
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            return None  # NOT_TYPE (unknown) or anything else: nothing, no answer
        store = self.broker.store
        try:
            half = store.read_message(h.commitLogOffset)
        except MqtoolError:
            return cmd.response(ResponseCode.SYSTEM_ERROR, NOT_FOUND)
        wrong = self._wrong(half, h)
        if wrong is not None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, wrong)
        end = transaction.end_transaction(store, h.commitLogOffset,
                                          commit=kind == TRANSACTION_COMMIT_TYPE)
        results: list[PutResult] = [end.op]
        if end.committed is not None:
            results.append(end.committed)
            self.counts["committed"] += 1
        else:
            self.counts["rolled_back"] += 1
        self.broker.notify_put(results)
        return cmd.response()

    @staticmethod
    def _wrong(half: CommitLogMessage, h: headers.EndTransactionRequestHeader) -> str | None:
        """``checkPrepareMessage``'s refusals (None: the half is the one the header names)."""
        if half.topic != TRANS_HALF_TOPIC:
            return NOT_FOUND
        if half.properties.get(PROPERTY_PRODUCER_GROUP) != h.producerGroup:
            return "The producer group wrong"
        if half.queue_offset != h.tranStateTableOffset:
            return "The transaction state table offset wrong"
        if half.physical_offset != h.commitLogOffset:
            return "The commit log offset wrong"
        return None

    # -- the check service --------------------------------------------------------------------

    def check_round(self) -> list[tuple[Peer, RemotingCommand]]:
        """One round of the check service over every half queue: the CHECK_TRANSACTION_STATE
        requests to send (one per checked half whose producer group has a connection)."""
        store = self.broker.store
        settings = self.broker.settings
        out = []
        for qid in store.queue_ids(TRANS_HALF_TOPIC):
            for msg in self._check_queue(qid, settings.transactionTimeOut,
                                         settings.transactionCheckMax):
                ask = self._ask_producer(msg)
                if ask is not None:
                    out.append(ask)
        return out

    def _check_queue(self, qid: int, timeout_ms: int, check_max: int) -> list[CommitLogMessage]:
        store = self.broker.store
        start = store.clock()
        half_off = store.get_consumer_offset(TRANS_CHECK_GROUP, TRANS_HALF_TOPIC, qid)
        op_off = store.get_consumer_offset(TRANS_CHECK_GROUP, TRANS_OP_HALF_TOPIC, qid)
        half_off, op_off = max(half_off, 0), max(op_off, 0)
        done_ops: dict[int, int] = {}  # half queue offset -> op queue offset
        below: list[int] = []  # op queue offsets of ops for halves already passed
        for op_qoff, op in store.iter_queue(TRANS_OP_HALF_TOPIC, qid, op_off):
            for hoff in op_half_offsets(op):
                if hoff < half_off:
                    below.append(op_qoff)
                else:
                    done_ops.setdefault(hoff, op_qoff)
        checked: list[CommitLogMessage] = []
        new_off = half_off
        for i, half in store.iter_queue(TRANS_HALF_TOPIC, qid, half_off):
            if i in done_ops:
                below.append(done_ops.pop(i))
                new_off = i + 1
                continue
            times = half.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES)
            if times is not None and _int(times) >= check_max:
                transaction.check_half(store, half.physical_offset,
                                       check_max=check_max)  # discarded
                self.counts["discarded"] += 1
                new_off = i + 1
                continue
            if half.store_timestamp >= start:
                break
            age = store.clock() - half.born_timestamp
            if 0 <= age < immunity_ms(half, timeout_ms):
                break
            r = transaction.check_half(store, half.physical_offset, check_max=check_max)
            checked.append(store.read_message(r.physical_offset))
            self.counts["checked"] += 1
            new_off = i + 1
        if new_off != half_off:
            store.commit_offset(TRANS_CHECK_GROUP, TRANS_HALF_TOPIC, qid, new_off)
        new_op = op_off
        for q in sorted(set(below)):  # calculateOpOffset: only a contiguous run from the start
            if q != new_op:
                break
            new_op += 1
        if new_op != op_off:
            store.commit_offset(TRANS_CHECK_GROUP, TRANS_OP_HALF_TOPIC, qid, new_op)
        return checked

    def _ask_producer(self, half: CommitLogMessage) -> tuple[Peer, RemotingCommand] | None:
        """CHECK_TRANSACTION_STATE for one connection of the half's producer group
        (``ProducerManager#getAvailableChannel``: round robin); None when it has none."""
        props = half.properties
        members = self.broker.producers.get(props.get(PROPERTY_PRODUCER_GROUP, ""), {})
        live = [m for m in members.values() if not m.peer.closed]
        if not live:
            return None
        who = live[next(self._pick) % len(live)]
        uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        header = headers.CheckTransactionStateRequestHeader(
            tranStateTableOffset=half.queue_offset, commitLogOffset=half.physical_offset,
            msgId=uniq, transactionId=uniq, offsetMsgId=half.offset_msg_id,
        )
        # renewHalfMessageInner shares the half's property map and sets WAIT=false on it after
        # the re-put record's properties were written: the producer is shown WAIT=false
        shown_props = dict(props)
        shown_props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        shown = replace(half, topic=props.get(PROPERTY_REAL_TOPIC, half.topic),
                        queue_id=_int(props.get(PROPERTY_REAL_QUEUE_ID, "0")),
                        properties_raw=encode_properties(
                            shown_props.items(), self.broker.store.config.v5),
                        _props=None)
        return who.peer, RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext(), build_message(shown),
            oneway=True)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1
