"""Transactional messages in the reference store: the records RocketMQ writes (4.3+ half/op
topics, commit, check re-puts, discard; the legacy PREPARED/COMMIT/ROLLBACK sysFlags) and the
dispatch rules (PREPARED and ROLLBACK records get no consume-queue unit; ROLLBACK records are
not indexed). Facts: apache/rocketmq 4.2.0, 4.9.7 and 5.3.3 (TransactionalMessageBridge,
TransactionalMessageServiceImpl, EndTransactionProcessor, CommitLog, DefaultMessageStore
CommitLogDispatcherBuildConsumeQueue, IndexService#buildIndex)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mqtool.formats.commitlog import parse_properties
from mqtool.formats.javacompat import java_string_hash
from mqtool.refstore import transaction
from mqtool.refstore.engine import ManualClock, Message, RefStore, RefStoreError, StoreConfig
from mqtool.store import Store

CFG = StoreConfig(commitlog_file_size=1 << 16, cq_entries_per_file=8, index_hash_slots=64,
                  index_max_entries=256)


def _open(root: Path, clock: ManualClock, cfg: StoreConfig = CFG) -> RefStore:
    return RefStore.open(root, cfg, clock=clock, seed=7)


def _cq(st: Store, topic: str, qid: int) -> list[tuple[int, int]]:
    return [(e.queue_offset, e.entry.commit_log_offset) for e in st.queue_entries(topic, qid)]


def test_half_commit_and_op_records(tmp_path: Path) -> None:
    clock = ManualClock(1_795_000_000_000)
    with _open(tmp_path / "s", clock) as s:
        s.create_topic("Tx", 4)
        h = transaction.send_half(s, Message.create("Tx", b"pay", tags="T1", keys="k1", queue_id=2,
                                          properties={"DELAY": "3"}), "pg")
        half = s.read_message(h.physical_offset)
        clock.advance(500)
        end = transaction.end_transaction(s, h.physical_offset, commit=True, producer_group="pg")
        assert end.committed is not None
        com = s.read_message(end.committed.physical_offset)
        op = s.read_message(end.op.physical_offset)
    # the half: system topic, queue 0, transaction type NOT, REAL_TOPIC/REAL_QID, no DELAY
    assert (half.topic, half.queue_id, half.sys_flag & 0xC) == ("RMQ_SYS_TRANS_HALF_TOPIC", 0, 0)
    p = half.properties
    assert p["REAL_TOPIC"] == "Tx" and p["REAL_QID"] == "2"
    assert p["TRAN_MSG"] == "true" and p["PGROUP"] == "pg" and "DELAY" not in p
    assert {"UNIQ_KEY", "CLUSTER", "TAGS", "KEYS"} <= set(p)
    assert "__transactionId__" not in p  # 4.9.7
    # the commit: real topic and queue, type COMMIT, PREPARED_TRANSACTION_OFFSET = the half,
    # the half's properties string (REAL_TOPIC, REAL_QID, TRAN_MSG stay in the bytes)
    assert (com.topic, com.queue_id, com.sys_flag & 0xC) == ("Tx", 2, 0x8)
    assert com.prepared_transaction_offset == h.physical_offset
    assert com.properties_raw == half.properties_raw and com.body == b"pay"
    assert com.born_timestamp == half.born_timestamp
    assert com.store_timestamp == clock.now  # the put's own store time
    # the op: op topic, the half's queue id, body = half queue offset, TAGS=d and WAIT only
    assert (op.topic, op.queue_id, op.body) == ("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, b"0")
    assert parse_properties(op.properties_raw) == {"TAGS": "d", "WAIT": "true"}
    assert op.sys_flag == 0 and op.uniq_key is None
    assert str(op.born_host) == str(op.store_host)
    with Store.open(tmp_path / "s") as st:
        assert _cq(st, "Tx", 2) == [(0, com.physical_offset)]
        assert _cq(st, "RMQ_SYS_TRANS_HALF_TOPIC", 0) == [(0, half.physical_offset)]
        assert _cq(st, "RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) == [(0, op.physical_offset)]
        unit = next(iter(st.queue_entries("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0))).entry
        assert unit.tags_code == java_string_hash("d") == 100
        assert not st.findings


def test_rollback_writes_only_the_op(tmp_path: Path) -> None:
    clock = ManualClock()
    with _open(tmp_path / "s", clock) as s:
        s.create_topic("Tx", 1)
        transaction.send_half(s, Message.create("Tx", b"a", keys="ka"), "pg")
        h = transaction.send_half(s, Message.create("Tx", b"b", keys="kb"), "pg")
        end = transaction.end_transaction(s, h.physical_offset, commit=False)
        assert end.committed is None
        assert s.read_message(end.op.physical_offset).body == b"1"
        with pytest.raises(RefStoreError, match="producer group"):
            transaction.end_transaction(s, h.physical_offset, commit=True, producer_group="other")
        with pytest.raises(RefStoreError, match="not a half"):
            transaction.end_transaction(s, end.op.physical_offset, commit=False)
    with Store.open(tmp_path / "s") as st:
        assert not list(st.queue_entries("Tx", 0))
        assert [m.topic for m in st.messages()] == [
            "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"]


def test_check_reputs_then_discards(tmp_path: Path) -> None:
    clock = ManualClock()
    with _open(tmp_path / "s", clock) as s:
        h = transaction.send_half(s, Message.create("Tx", b"x", keys="kx", flag=5), "pg")
        first = s.read_message(h.physical_offset)
        r1 = transaction.check_half(s, h.physical_offset)
        c1 = s.read_message(r1.physical_offset)
        r2 = transaction.check_half(s, r1.physical_offset, check_max=2)
        c2 = s.read_message(r2.physical_offset)
        gone = transaction.check_half(s, r2.physical_offset, check_max=2)
        g = s.read_message(gone.physical_offset)
        assert s.get_consumer_offset("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", 0) == 3
    assert first.flag == 5
    assert (c1.topic, c1.queue_offset, c1.flag) == ("RMQ_SYS_TRANS_HALF_TOPIC", 1, 0)
    assert c1.properties["TRANSACTION_CHECK_TIMES"] == "1" and c1.uniq_key == first.uniq_key
    assert c1.born_timestamp == first.born_timestamp
    assert c2.properties["TRANSACTION_CHECK_TIMES"] == "2"
    assert g.topic == "TRANS_CHECK_MAX_TIME_TOPIC" and g.queue_id == 0
    assert g.properties["TRANSACTION_CHECK_TIMES"] == "2" and g.flag == 0


def test_legacy_prepared_commit_rollback(tmp_path: Path) -> None:
    clock = ManualClock()
    with _open(tmp_path / "s", clock) as s:
        s.create_topic("L", 1)
        p1 = transaction.legacy_prepare(s, Message.create("L", b"one", tags="t", keys="l1"), "pg")
        p2 = transaction.legacy_prepare(s, Message.create("L", b"two", tags="t", keys="l2"), "pg")
        rb = transaction.legacy_end(s, p1.physical_offset, commit=False)
        cm = transaction.legacy_end(s, p2.physical_offset, commit=True)
        with pytest.raises(RefStoreError, match="PREPARED"):
            transaction.legacy_end(s, rb.physical_offset, commit=True)
        prep, roll, com = (s.read_message(x.physical_offset) for x in (p1, rb, cm))
    assert (prep.topic, prep.sys_flag & 0xC, prep.queue_offset) == ("L", 0x4, 0)
    assert prep.properties["TRAN_MSG"] == "true" and prep.properties["PGROUP"] == "pg"
    assert (roll.sys_flag & 0xC, roll.queue_offset, roll.body) == (0xC, 0, b"")
    assert roll.prepared_transaction_offset == p1.physical_offset
    assert roll.properties_raw == prep.properties_raw
    assert (com.sys_flag & 0xC, com.queue_offset, com.body) == (0x8, 0, b"two")
    assert com.prepared_transaction_offset == p2.physical_offset
    with Store.open(tmp_path / "s") as st:
        assert _cq(st, "L", 0) == [(0, cm.physical_offset)]  # only the COMMIT record
        assert set(st.query_index("L", "l1")) == {p1.physical_offset}  # ROLLBACK not indexed
        assert set(st.query_index("L", "l2")) == {p2.physical_offset, cm.physical_offset}


def test_v5_op_body_and_transaction_id(tmp_path: Path) -> None:
    cfg = StoreConfig(commitlog_file_size=1 << 16, dialect="5.3.3")
    with _open(tmp_path / "s", ManualClock(), cfg) as s:
        h = transaction.send_half(s, Message.create("Tx", b"v5", keys="k5"), "pg")
        end = transaction.end_transaction(s, h.physical_offset, commit=False)
        half = s.read_message(h.physical_offset)
        op = s.read_message(end.op.physical_offset)
    assert half.properties["__transactionId__"] == half.uniq_key
    assert op.body == b"0,"  # 5.x: offsets each followed by ","


def test_read_commands_clean_on_transaction_store(tmp_path: Path) -> None:
    clock = ManualClock()
    root = tmp_path / "s"
    with _open(root, clock) as s:
        s.create_topic("Tx", 2)
        for i in range(6):
            h = transaction.send_half(s, Message.create("Tx", f"b{i}".encode(), keys=f"k{i}"), "pg")
            if i % 3 != 2:
                transaction.end_transaction(s, h.physical_offset, commit=i % 3 == 0)
            p = transaction.legacy_prepare(s, Message.create("L", b"x", keys=f"l{i}"), "pg")
            if i % 3 != 2:
                transaction.legacy_end(s, p.physical_offset, commit=i % 3 == 0)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    for cmd in (["verify"], ["cq"], ["inspect"], ["messages"], ["verify", "--json"]):
        r = subprocess.run([sys.executable, "-m", "mqtool", *cmd, str(root)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (cmd, r.stdout[-2000:], r.stderr[-2000:])
        assert "Traceback" not in r.stderr
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
