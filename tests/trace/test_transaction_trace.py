"""Transactions and orderly retries in ``trace``, on stores the reference
store writes as RocketMQ does (tests/refstore/test_transaction.py pins the records).

Rules checked: a rollback (4.3+: an op record in RMQ_SYS_TRANS_OP_HALF_TOPIC and no committed
copy; before 4.3: a ROLLBACK record naming the PREPARED record) is a hop and the verdict says
"rolled back"; a committed one says committed and delivered; a half with no op is in doubt;
an orderly consumer's DLQ verdict counts its local retries (the DLQ record's reconsumeTimes is
the retries there, not the failed attempts as on the broker's send-back path)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mqtool.refstore import transaction
from mqtool.refstore.engine import ManualClock, Message, RefStore, StoreConfig
from mqtool.store import Store
from mqtool.trace import trace_key

CFG = StoreConfig(commitlog_file_size=1 << 16, cq_entries_per_file=16, index_hash_slots=64,
                  index_max_entries=512, message_delay_level="1s 2s 3s 4s 5s 6s 7s 8s")
ORDERLY_MAX = 3


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    root = tmp_path_factory.mktemp("tx") / "store"
    clock = ManualClock(1_795_000_000_000)
    facts: dict[str, int] = {}
    with RefStore.open(root, CFG, clock=clock, seed=3) as s:
        s.create_topic("Tx", 2)
        s.create_topic("Legacy", 1)
        s.create_topic("Ordered", 1)
        # 4.3+: commit, rollback, in doubt, checked then rolled back
        h = transaction.send_half(s, Message.create("Tx", b"c", keys="tx-commit"), "pg")
        clock.advance(1000)
        transaction.end_transaction(s, h.physical_offset, commit=True, producer_group="pg")
        h = transaction.send_half(s, Message.create("Tx", b"r", keys="tx-rollback"), "pg")
        clock.advance(1000)
        transaction.end_transaction(s, h.physical_offset, commit=False, producer_group="pg")
        transaction.send_half(s, Message.create("Tx", b"d", keys="tx-doubt"), "pg")
        h = transaction.send_half(s, Message.create("Tx", b"k", keys="tx-checked"), "pg")
        clock.advance(60_000)
        again = transaction.check_half(s, h.physical_offset)
        clock.advance(1000)
        transaction.end_transaction(s, again.physical_offset, commit=False)
        h = transaction.send_half(s, Message.create("Tx", b"g", keys="tx-discard"), "pg")
        for _ in range(3):  # checked twice without an answer, then discarded (max 2)
            clock.advance(60_000)
            h = transaction.check_half(s, h.physical_offset, check_max=2)
        assert h.topic == "TRANS_CHECK_MAX_TIME_TOPIC"
        # before 4.3: PREPARED then ROLLBACK / COMMIT in the real topic
        p = transaction.legacy_prepare(s, Message.create("Legacy", b"x", keys="lg-rollback"), "pg")
        clock.advance(1000)
        transaction.legacy_end(s, p.physical_offset, commit=False)
        p = transaction.legacy_prepare(s, Message.create("Legacy", b"y", keys="lg-commit"), "pg")
        clock.advance(1000)
        transaction.legacy_end(s, p.physical_offset, commit=True)
        transaction.legacy_prepare(s, Message.create("Legacy", b"z", keys="lg-doubt"), "pg")
        # an orderly consumer fails ORDERLY_MAX + 1 times: local retries, then the client
        # sends it back with RECONSUME_TIME = its local count and the broker dead-letters it
        s.create_group("og", retry_max_times=ORDERLY_MAX, consume_orderly=True)
        m = s.put(Message.create("Ordered", b"o", keys="ord-dlq", queue_id=0))
        local = 0  # ConsumeMessageOrderlyService#checkReconsumeTimes
        attempts = 0
        while True:
            attempts += 1  # the listener returns SUSPEND_CURRENT_QUEUE_A_MOMENT
            if local >= ORDERLY_MAX:
                r = s.send_back_orderly("og", m.physical_offset, reconsume_times=local,
                                        max_reconsume_times=ORDERLY_MAX)
                assert r.topic == "SCHEDULE_TOPIC_XXXX"  # 4.9.7 keeps the client's DELAY
                clock.advance(10_000)
                assert [x.topic for x in s.tick()] == ["%DLQ%og"]
                break
            local += 1
            clock.advance(1000)
        facts["orderly_attempts"] = attempts
        # a concurrent consumer of another group fails every attempt (broker send-back)
        s.create_group("cg", retry_max_times=2)
        s.create_topic("Conc", 1)
        s.put(Message.create("Conc", b"p", keys="conc-dlq", queue_id=0))
        failed = 0

        def fail(msg: object) -> bool:
            nonlocal failed
            failed += 1
            return False

        for _ in range(6):
            s.consume("cg", "Conc", fail)
            clock.advance(10_000)
            s.tick()
        facts["concurrent_attempts"] = failed
        # another orderly failure, still parked in the schedule topic on its way to the DLQ
        m = s.put(Message.create("Ordered", b"q", keys="ord-parked", queue_id=0))
        s.send_back_orderly("og", m.physical_offset, reconsume_times=ORDERLY_MAX,
                            max_reconsume_times=ORDERLY_MAX)
    return root, facts


def _trace(root: Path, key: str) -> dict[str, object]:
    with Store.open(root) as st:
        kt = trace_key(st, key, delay_levels=CFG.message_delay_level)
        assert len(kt.traces) == 1
        return kt.traces[0].to_json()


def test_rollback_43_has_the_op_hop(store: tuple[Path, dict[str, int]]) -> None:
    tr = _trace(store[0], "tx-rollback")
    kinds = [h["kind"] for h in tr["hops"]]  # type: ignore[index]
    assert kinds == ["half", "rollback"]
    op = tr["hops"][1]  # type: ignore[index]
    assert op["topic"] == "RMQ_SYS_TRANS_OP_HALF_TOPIC" and op["state"] == "rolled-back"
    assert tr["verdictKind"] == "rolled-back"
    v = str(tr["verdict"])
    assert "rolled back" in v and "delivered" not in v and "not yet committed" not in v


def test_checked_then_rolled_back(store: tuple[Path, dict[str, int]]) -> None:
    tr = _trace(store[0], "tx-checked")
    hops = tr["hops"]  # type: ignore[index]
    assert [h["kind"] for h in hops] == ["half", "half", "rollback"]
    assert hops[0]["state"] == "checked" and hops[1]["state"] == "rolled-back"
    assert "checked 1 time" in hops[1]["stateDetail"]
    assert tr["verdictKind"] == "rolled-back"


def test_commit_43(store: tuple[Path, dict[str, int]]) -> None:
    tr = _trace(store[0], "tx-commit")
    hops = tr["hops"]  # type: ignore[index]
    assert [h["kind"] for h in hops] == ["half", "commit", "op"]
    assert hops[1]["topic"] == "Tx" and hops[0]["state"] == "committed"
    assert tr["verdictKind"] == "delivered"
    assert str(tr["verdict"]).startswith("transaction committed at ")
    assert "rolled back" not in str(tr["verdict"])


def test_half_without_op_is_in_doubt(store: tuple[Path, dict[str, int]]) -> None:
    tr = _trace(store[0], "tx-doubt")
    assert [h["kind"] for h in tr["hops"]] == ["half"]  # type: ignore[index]
    assert tr["verdictKind"] == "transaction-pending"
    assert "in doubt" in str(tr["verdict"]) and "delivered" not in str(tr["verdict"])


def test_legacy_rollback_found_past_the_index(store: tuple[Path, dict[str, int]]) -> None:
    tr = _trace(store[0], "lg-rollback")
    hops = tr["hops"]  # type: ignore[index]
    assert [h["kind"] for h in hops] == ["prepared", "rollback"]
    assert hops[1]["topic"] == "Legacy" and hops[1]["state"] == "rolled-back"
    assert tr["via"] == "index"
    assert any("ROLLBACK records are not indexed" in n for n in tr["notes"])  # type: ignore[attr-defined]
    assert tr["verdictKind"] == "rolled-back" and "rolled back" in str(tr["verdict"])
    assert "delivered" not in str(tr["verdict"])


def test_legacy_commit_and_doubt(store: tuple[Path, dict[str, int]]) -> None:
    tr = _trace(store[0], "lg-commit")
    assert [h["kind"] for h in tr["hops"]] == ["prepared", "commit"]  # type: ignore[index]
    assert tr["verdictKind"] == "delivered" and "committed" in str(tr["verdict"])
    tr = _trace(store[0], "lg-doubt")
    assert [h["kind"] for h in tr["hops"]] == ["prepared"]  # type: ignore[index]
    assert tr["verdictKind"] == "transaction-pending"


def test_orderly_dlq_counts_local_retries(store: tuple[Path, dict[str, int]]) -> None:
    root, facts = store
    tr = _trace(root, "ord-dlq")
    assert tr["verdictKind"] == "dead-lettered"
    attempts = facts["orderly_attempts"]
    assert attempts == ORDERLY_MAX + 1
    v = str(tr["verdict"])
    assert f"after {attempts - 1} retries" in v and f"{attempts} failed attempts" in v
    dlq = [h for h in tr["hops"] if h["kind"] == "dlq"]  # type: ignore[index]
    assert dlq and f"{attempts} failed attempts" in dlq[-1]["stateDetail"]


def test_concurrent_dlq_count_unchanged(store: tuple[Path, dict[str, int]]) -> None:
    root, facts = store
    tr = _trace(root, "conc-dlq")
    assert tr["verdictKind"] == "dead-lettered"
    retries = facts["concurrent_attempts"] - 1
    assert f"after {retries} retries (group cg)" in str(tr["verdict"])
    assert "failed attempts" not in str(tr["verdict"])


def test_cli_shows_the_rollback_hop(store: tuple[Path, dict[str, int]]) -> None:
    root = store[0]
    r = subprocess.run([sys.executable, "-m", "mqtool", "trace", str(root), "--key",
                        "lg-rollback", "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    tr = doc["traces"][0] if "traces" in doc else doc
    assert [h["kind"] for h in tr["hops"]] == ["prepared", "rollback"]
    r = subprocess.run([sys.executable, "-m", "mqtool", "trace", str(root), "--key",
                        "tx-rollback"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "rollback  RMQ_SYS_TRANS_OP_HALF_TOPIC" in r.stdout
    assert "transaction rolled back" in r.stdout


def test_orderly_parked_on_its_way_to_the_dlq(store: tuple[Path, dict[str, int]]) -> None:
    tr = _trace(store[0], "ord-parked")
    assert [h["kind"] for h in tr["hops"]] == ["original", "schedule"]  # type: ignore[index]
    v = str(tr["verdict"])
    assert tr["verdictKind"] == "scheduled" and v.startswith("on its way to %DLQ%og")
    assert f"after {ORDERLY_MAX} retries ({ORDERLY_MAX + 1} failed attempts" in v


def test_orderly_dlq_5x_counts_attempts(tmp_path: Path) -> None:
    """5.3.3: the client sends its local count + 1 (apache/rocketmq #6164) and the broker
    dead-letters at once with DELAY=-1: the record holds the failed attempts."""
    cfg = StoreConfig(commitlog_file_size=1 << 16, dialect="5.3.3")
    root = tmp_path / "s5"
    with RefStore.open(root, cfg, clock=ManualClock(), seed=1) as s:
        s.create_group("og5", retry_max_times=2, consume_orderly=True)
        m = s.put(Message.create("O5", b"o", keys="ord5", queue_id=0))
        r = s.send_back_orderly("og5", m.physical_offset, reconsume_times=2,
                                max_reconsume_times=2)  # 3 failed attempts
        dl = s.read_message(r.physical_offset)
    assert dl.topic == "%DLQ%og5" and dl.reconsume_times == 3
    assert dl.properties["DELAY"] == "-1" and dl.properties["RECONSUME_TIME"] == "3"
    with Store.open(root) as st:
        tr = trace_key(st, "ord5").traces[0]
    assert tr.verdict_kind == "dead-lettered"
    assert "after 2 retries" in tr.verdict and "3 failed attempts" in tr.verdict


def test_unreadable_op_record_is_a_finding(
    store: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    """Damage is never hidden: an op record that cannot be read makes trace say which hop may
    be missing, name the op unit's file and offset, and exit 1."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(store[0], copy)
    shutil.rmtree(copy / "index")
    tr = _trace(store[0], "tx-rollback")
    op = tr["hops"][1]["commitLogOffset"]  # type: ignore[index]
    cl = copy / "commitlog" / "00000000000000000000"
    raw = bytearray(cl.read_bytes())
    raw[op + 4:op + 8] = bytes(4)  # the record's magic
    cl.write_bytes(bytes(raw))
    r = subprocess.run([sys.executable, "-m", "mqtool", "trace", str(copy), "--key",
                        "tx-rollback"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    out = " ".join((r.stdout + r.stderr).split())  # rich wraps lines
    assert "consumequeue/RMQ_SYS_TRANS_OP_HALF_TOPIC/0/00000000000000000000 @ " in out
    assert "a hop may be missing" in out and "may be in the damaged part" in out
    assert "Traceback" not in out


def test_discarded_after_checks(store: tuple[Path, dict[str, int]]) -> None:
    tr = _trace(store[0], "tx-discard")
    hops = tr["hops"]  # type: ignore[index]
    assert [h["kind"] for h in hops] == ["half", "half", "half", "discarded"]
    assert [h["state"] for h in hops] == ["checked", "checked", "discarded", "discarded"]
    assert tr["verdictKind"] == "discarded"
    v = str(tr["verdict"])
    assert "discarded" in v and "delivered" not in v and "rolled back" not in v


def test_html_page_holds_the_rollback_hop(
    store: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    page = tmp_path / "journey.html"
    r = subprocess.run([sys.executable, "-m", "mqtool", "trace", str(store[0]), "--key",
                        "tx-rollback", "--html", str(page)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    text = page.read_text("utf-8")
    assert "RMQ_SYS_TRANS_OP_HALF_TOPIC" in text and "rolled-back" in text
