"""Transactional messages in the reference store, as the broker writes them.

Two forms, both byte for byte what RocketMQ stores (record layout: the one encoder through
``RecordWriter.put_fields``; dispatch rules: ``CommitLogDispatcherBuildConsumeQueue`` gives
PREPARED and ROLLBACK records no consume-queue unit and ``IndexService#buildIndex`` skips
ROLLBACK records, see :mod:`mqtool.refstore.dispatch`).

**4.3 and later** (``TransactionalMessageBridge``, ``TransactionalMessageServiceImpl``,
``EndTransactionProcessor``; checked against 4.9.7 and 5.3.3):

* :func:`send_half`: the producer puts ``TRAN_MSG=true`` and ``PGROUP`` (and drops DELAY), the
  client's sysFlag carries TRANSACTION_PREPARED_TYPE; the broker adds CLUSTER (4.9.7: WAIT is
  removed and put back, so it goes after CLUSTER in the map), then ``parseHalfMessageInner``
  adds (5.x: ``__transactionId__`` = UNIQ_KEY) ``REAL_TOPIC`` and ``REAL_QID``, resets the
  transaction type to NOT_TYPE and stores the record in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0.
* :func:`end_transaction` commit: ``endMessageTransaction`` copies the half record to its real
  topic and queue with the half's properties string (encoded *before* REAL_TOPIC, REAL_QID and
  TRAN_MSG are cleared from the map, so they stay in the stored bytes), body, flag, born
  time/host and reconsumeTimes; sysFlag type COMMIT; PREPARED_TRANSACTION_OFFSET = the half's
  commitlog offset; the store time is the put's own. Then the op record.
* rollback: only the op record. ``makeOpMessageInner``: topic ``RMQ_SYS_TRANS_OP_HALF_TOPIC``,
  the half's queue id, body = the half's queue offset (4.9.7 ``"12"``; 5.x ``"12,"``, the
  batched form with its separator), properties ``TAGS=d`` and ``WAIT=true`` only (the UNIQ_KEY
  is set after the string is encoded, so the stored record has none), sysFlag 0, born and
  store host the broker's, born now.
* :func:`check_half`: the check service's re-put (``needDiscard`` then ``putBackHalfMsgQueue``
  / ``renewHalfMessageInner``): TRANSACTION_CHECK_TIMES is put (1, or +1), and a new half
  record goes to the same half queue with flag 0 and reconsumeTimes 0 (not copied); the check
  group's offset on the half queue moves past the old record. At ``transactionCheckMax`` the
  half is discarded instead: ``resolveDiscardMsg`` copies it to ``TRANS_CHECK_MAX_TIME_TOPIC``.

**Before 4.3** (the legacy form, 4.2 ``EndTransactionProcessor``): :func:`legacy_prepare`
stores the record in its real topic with sysFlag TRANSACTION_PREPARED_TYPE (queue offset 0, no
consume-queue unit, indexed); :func:`legacy_end` writes the COMMIT or ROLLBACK record to the
same topic and queue with the prepared record's properties, PREPARED_TRANSACTION_OFFSET = the
prepared record's offset and, for a rollback, an empty body (no consume-queue unit, not
indexed).

Transactional messages at three layers, one module each: the store writes their records
(:mod:`mqtool.refstore.transaction`), the served broker answers their requests
(:mod:`mqtool.serve.transaction`), a trace reads them back (:mod:`mqtool.trace.transaction`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from mqtool.formats.commitlog import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    HostPort,
    parse_properties,
)
from mqtool.formats.rules import (
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANS_CHECK_GROUP,
    TRANS_CHECK_MAX_TIME_QUEUE_NUMS,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANS_OP_OFFSET_SEPARATOR,
    TRANS_OP_REMOVE_TAG,
    TRANSACTION_TYPE_MASK,
)
from mqtool.refstore.mapped import RefStoreError
from mqtool.refstore.put import DEFAULT_BORN_HOST
from mqtool.refstore.values import Message, PutResult

if TYPE_CHECKING:
    from mqtool.refstore.engine import RefStore

__all__ = [
    "TRANSACTION_CHECK_MAX", "TransactionEnd", "check_half", "end_transaction",
    "legacy_end", "legacy_prepare", "send_half",
]

TRANSACTION_CHECK_MAX = 15  # BrokerConfig.transactionCheckMax
_HOST_BITS = 0x30  # born/store host IPv6 flags: put_fields sets them from the hosts


class TransactionEnd(NamedTuple):
    """What ending a transaction stored: the committed record (None on rollback) and the op."""

    committed: PutResult | None
    op: PutResult


def _with_type(sys_flag: int, tran_type: int) -> int:
    """``MessageSysFlag.resetTransactionValue`` (host flags are the put's own)."""
    return (sys_flag & ~TRANSACTION_TYPE_MASK & ~_HOST_BITS) | tran_type


def _born(msg: Message) -> HostPort:
    return HostPort.parse(msg.born_host) if msg.born_host else DEFAULT_BORN_HOST


def _client_props(store: RefStore, msg: Message, producer_group: str) -> dict[str, str]:
    """The map the broker decodes from a transactional send: the client's puts
    (``sendMessageInTransaction``: DELAY cleared, TRAN_MSG, PGROUP; ``sendKernelImpl``:
    UNIQ_KEY) sent as ``messageProperties2String`` and decoded in that order."""
    props = {k: v for k, v in msg.properties if k != PROPERTY_DELAY_TIME_LEVEL}
    props[PROPERTY_TRANSACTION_PREPARED] = "true"
    props[PROPERTY_PRODUCER_GROUP] = producer_group
    if PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in props:
        props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = store.uniq.create()
    return parse_properties(store.writer.encode_props(props))


def _queue_of(store: RefStore, msg: Message) -> int:
    tc = store.topics.get(msg.topic) or store.create_topic(msg.topic)
    if msg.queue_id is None:
        return store.writer.next_queue(msg.topic, tc.write_queue_nums)
    if not 0 <= msg.queue_id < tc.write_queue_nums:
        raise RefStoreError(f"queue {msg.queue_id} of topic {msg.topic} does not exist")
    return msg.queue_id


def _received(store: RefStore, msg: Message, producer_group: str) -> tuple[int, dict[str, str]]:
    """The queue and the map the broker holds for a transactional send (CLUSTER put)."""
    store.check_open()
    qid = _queue_of(store, msg)
    props = _client_props(store, msg, producer_group)
    if store.writer.cluster:
        props[PROPERTY_CLUSTER] = store.writer.cluster
    return qid, props


def send_half(store: RefStore, msg: Message, producer_group: str) -> PutResult:
    """A 4.3+ transactional send: the half record in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0."""
    qid, props = _received(store, msg, producer_group)
    if not store.config.v5 and PROPERTY_WAIT_STORE_MSG_OK in props:
        props[PROPERTY_WAIT_STORE_MSG_OK] = props.pop(PROPERTY_WAIT_STORE_MSG_OK)  # 4.9.7
    uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if store.config.v5 and uniq:
        props[PROPERTY_TRANSACTION_ID] = uniq
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(qid)
    now = store.clock()
    return store.writer.put_fields(
        TRANS_HALF_TOPIC, 0, msg.body, props, msg.flag,
        _with_type(msg.sys_flag, TRANSACTION_NOT_TYPE),
        msg.born_timestamp if msg.born_timestamp is not None else now, _born(msg),
        0, now, True, 0,
    )


def _op_record(store: RefStore, half_queue_id: int, half_queue_offset: int) -> PutResult:
    """``addRemoveTagInTransactionOp``: the op record that closes one half message."""
    body = str(half_queue_offset)
    if store.config.v5:
        body += TRANS_OP_OFFSET_SEPARATOR
    props = {PROPERTY_TAGS: TRANS_OP_REMOVE_TAG, PROPERTY_WAIT_STORE_MSG_OK: "true"}
    now = store.clock()
    return store.writer.put_fields(
        TRANS_OP_HALF_TOPIC, half_queue_id, body.encode("utf-8"), props, 0, 0, now,
        store.writer.store_host, 0, now, False, 0,
    )


def end_transaction(
    store: RefStore, half_offset: int, *, commit: bool, producer_group: str | None = None
) -> TransactionEnd:
    """``END_TRANSACTION`` for the half record at ``half_offset``: commit (the real record,
    then the op) or rollback (the op only). ``producer_group``, when given, must be the half's
    PGROUP (``checkPrepareMessage``)."""
    store.check_open()
    half = store.read_message(half_offset)
    if half.topic != TRANS_HALF_TOPIC:
        raise RefStoreError(f"record at {half_offset} is in {half.topic}, not a half message")
    props = parse_properties(half.properties_raw)
    if producer_group is not None and props.get(PROPERTY_PRODUCER_GROUP) != producer_group:
        raise RefStoreError("The producer group wrong")
    committed = None
    if commit:
        real, real_qid = props.get(PROPERTY_REAL_TOPIC), props.get(PROPERTY_REAL_QUEUE_ID)
        if real is None or real_qid is None:
            raise RefStoreError(f"half message at {half_offset} has no REAL_TOPIC/REAL_QID")
        store.topics.get(real) or store.create_topic(real)
        committed = store.writer.put_fields(
            real, int(real_qid), half.body, props, half.flag,
            _with_type(half.sys_flag, TRANSACTION_COMMIT_TYPE), half.born_timestamp,
            half.born_host, half.reconsume_times, store.clock(), True, half.physical_offset,
        )
    op = _op_record(store, half.queue_id, half.queue_offset)
    return TransactionEnd(committed, op)


def check_half(
    store: RefStore, half_offset: int, *, check_max: int = TRANSACTION_CHECK_MAX
) -> PutResult:
    """One transaction check of the half record at ``half_offset`` (no op yet): the re-put
    half record (TRANSACTION_CHECK_TIMES set), or, once checked ``check_max`` times, its
    discarded copy in ``TRANS_CHECK_MAX_TIME_TOPIC``. Moves the check group's half-queue
    offset past the checked record."""
    store.check_open()
    half = store.read_message(half_offset)
    if half.topic != TRANS_HALF_TOPIC:
        raise RefStoreError(f"record at {half_offset} is in {half.topic}, not a half message")
    props = parse_properties(half.properties_raw)
    times = props.get(PROPERTY_TRANSACTION_CHECK_TIMES)
    now = store.clock()
    n = 1 if times is None else int(times)
    discard = times is not None and n >= check_max
    store.commit_offset(TRANS_CHECK_GROUP, TRANS_HALF_TOPIC, half.queue_id,
                        half.queue_offset + 1)
    if discard:  # DefaultTransactionalMessageCheckListener#toMessageExtBrokerInner
        store.create_topic(TRANS_CHECK_MAX_TIME_TOPIC, TRANS_CHECK_MAX_TIME_QUEUE_NUMS)
        qid = store.writer.rnd.randrange(99999999) % TRANS_CHECK_MAX_TIME_QUEUE_NUMS
        return store.writer.put_fields(
            TRANS_CHECK_MAX_TIME_TOPIC, qid, half.body, props, half.flag,
            half.sys_flag & ~_HOST_BITS, half.born_timestamp, half.born_host,
            half.reconsume_times, now, True, 0,
        )
    props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(n if times is None else n + 1)
    return store.writer.put_fields(  # renewHalfMessageInner: flag and reconsumeTimes not copied
        TRANS_HALF_TOPIC, half.queue_id, half.body, props, 0, half.sys_flag & ~_HOST_BITS,
        half.born_timestamp, half.born_host, 0, now, True, 0,
    )


def legacy_prepare(store: RefStore, msg: Message, producer_group: str) -> PutResult:
    """A transactional send to a broker before 4.3: the PREPARED record in the real topic."""
    qid, props = _received(store, msg, producer_group)
    now = store.clock()
    return store.writer.put_fields(
        msg.topic, qid, msg.body, props, msg.flag,
        _with_type(msg.sys_flag, TRANSACTION_PREPARED_TYPE),
        msg.born_timestamp if msg.born_timestamp is not None else now, _born(msg),
        0, now, True, 0,
    )


def legacy_end(store: RefStore, prepared_offset: int, *, commit: bool) -> PutResult:
    """``END_TRANSACTION`` on a broker before 4.3: the COMMIT or ROLLBACK record of the
    PREPARED record at ``prepared_offset`` (rollback: empty body)."""
    store.check_open()
    prep = store.read_message(prepared_offset)
    if prep.sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_PREPARED_TYPE:
        raise RefStoreError(f"record at {prepared_offset} is not a PREPARED record")
    props = parse_properties(prep.properties_raw)
    tran = TRANSACTION_COMMIT_TYPE if commit else TRANSACTION_ROLLBACK_TYPE
    return store.writer.put_fields(
        prep.topic, prep.queue_id, prep.body if commit else b"", props, prep.flag,
        _with_type(prep.sys_flag, tran), prep.born_timestamp, prep.born_host,
        prep.reconsume_times, store.clock(), True, prep.physical_offset,
    )
