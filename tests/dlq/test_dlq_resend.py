"""`mqtool dlq resend`: resent copies, idempotence, interrupted runs, --dry-run, --rate.

Sources are the real journey store (RocketMQ 4.9.7's own bytes) and DLQs of thousands of records
written by the reference store; targets are reference stores.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import manifest_jsonl, store_dir
from mqtool.cli import app
from mqtool.dlq import DlqSelection, select_dlq
from mqtool.dlq.journal import ResendJournal, default_journal_path
from mqtool.dlq.outgoing import (
    DROPPED_PROPERTIES,
    RESEND_DLQ_MSG_ID,
    RESEND_DLQ_TOPIC,
    RESEND_ID_PROPERTY,
    build_outgoing,
)
from mqtool.dlq.resend import resend
from mqtool.dlq.targets import RefStoreTarget
from mqtool.formats.commitlog import CommitLogMessage
from mqtool.refstore.engine import ManualClock, Message, RefStore, StoreConfig
from mqtool.store import Store
from mqtool.store.search import find_id

JOURNEY = "4.9.7/journey"
SMALL = StoreConfig(commitlog_file_size=1 << 20, cq_entries_per_file=1000,
                    index_hash_slots=1000, index_max_entries=4000)
runner = CliRunner()


def make_target(path: Path) -> Path:
    RefStore.open(path, SMALL, clock=ManualClock()).close()
    return path


def make_dlq_source(path: Path, n: int, group: str = "g") -> Path:
    """A store whose %DLQ%<group> holds ``n`` records as the broker writes them."""
    with RefStore.open(path, SMALL, clock=ManualClock(), seed=7) as rs:
        rs.create_topic(f"%DLQ%{group}", 1)
        for i in range(n):
            rs.put(Message.create(
                f"%DLQ%{group}", f"body {i}", tags="T", keys=f"k{i} order-{i % 7}",
                properties={"RETRY_TOPIC": "Orders", "ORIGIN_MESSAGE_ID": f"{i:032X}",
                            "DELAY": "0", "REAL_TOPIC": f"%RETRY%{group}", "REAL_QID": "0",
                            "user": f"u{i}"},
                wait_store_msg_ok=False, queue_id=0,
            ))
    return path


def resent_copies(target: Path) -> list[CommitLogMessage]:
    with Store.open(target) as st:
        return [m for m in st.messages() if RESEND_ID_PROPERTY in m.properties]


def tree_digest(*roots: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for root in roots:
        for dirpath, dirnames, files in os.walk(root):
            dirnames.sort()
            out[dirpath] = "dir"
            for f in sorted(files):
                p = Path(dirpath) / f
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def test_resent_copy_keeps_the_message_and_ties_it_to_the_dlq_record(tmp_path: Path) -> None:
    target = make_target(tmp_path / "t")
    want = [r for r in manifest_jsonl(JOURNEY, "commitlog.jsonl")
            if r.get("kind") == "msg" and r["topic"] == "%DLQ%cg_journey"]
    res = runner.invoke(app, ["dlq", "resend", str(store_dir(JOURNEY)), "-g", "cg_journey",
                              "--target", str(target), "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert (rep["selected"], rep["sent"], rep["skipped"], rep["failed"]) == (4, 4, 0, 0)
    assert [o["dlqMsgId"] for o in rep["outcomes"]] == [w["offsetMsgId"] for w in want]
    copies = resent_copies(target)
    assert len(copies) == 4
    with Store.open(store_dir(JOURNEY)) as src:
        for c, w, o in zip(copies, want, rep["outcomes"], strict=True):
            dlq = src.message_at(w["phyOffset"])
            assert c.topic == "%RETRY%cg_journey" and c.reconsume_times == 0
            assert o["msgId"] == c.offset_msg_id and o["status"] == "sent"
            assert c.body == dlq.body and c.body_crc == dlq.body_crc
            assert c.sys_flag & 0x701 == dlq.sys_flag & 0x701  # compression kept
            assert c.decompressed_body() == dlq.decompressed_body()
            assert (c.tags, c.uniq_key) == (dlq.tags, dlq.uniq_key)
            assert c.keys == dlq.keys  # exactly, the resend id is a property only
            assert c.born_timestamp == dlq.born_timestamp and c.born_host == dlq.born_host
            p = c.properties
            assert p["behavior"] == dlq.properties["behavior"] and p["用户"] == "张三"
            assert p["ORIGIN_MESSAGE_ID"] == w["properties"]["ORIGIN_MESSAGE_ID"]
            assert p["RETRY_TOPIC"] == "JourneyTopic"
            assert p[RESEND_DLQ_TOPIC] == "%DLQ%cg_journey"
            assert p[RESEND_DLQ_MSG_ID] == w["offsetMsgId"]
            assert p[RESEND_ID_PROPERTY] == o["resendId"]
            assert not ({"DELAY", "REAL_TOPIC", "REAL_QID"} & set(p))
    # a consumer of the group pulling its retry topic on the target sees exactly these
    with RefStore.open(target) as rs:
        pulled = [m for q in rs.queue_ids("%RETRY%cg_journey")
                  for m in rs.pull("cg_journey", "%RETRY%cg_journey", q, max_nums=100).messages]
    assert [m.physical_offset for m in pulled] == [c.physical_offset for c in copies]
    # the same command again sends nothing
    res = runner.invoke(app, ["dlq", "resend", str(store_dir(JOURNEY)), "-g", "cg_journey",
                              "--target", str(target), "--json"])
    rep2 = json.loads(res.stdout)
    assert (rep2["sent"], rep2["skipped"]) == (0, 4)
    assert len(resent_copies(target)) == 4
    # and `dlq list` counts them from the target's journal
    res = runner.invoke(app, ["dlq", "list", str(store_dir(JOURNEY)), "--target", str(target),
                              "--json"])
    assert json.loads(res.stdout)[0]["resent"] == 4


def test_resend_into_a_copy_of_the_broker_store(tmp_path: Path) -> None:
    """Target = a copy of the broker's own store: geometry and store host come from its files,
    and the resent copies follow the journey's records."""
    target = tmp_path / "journey"
    shutil.copytree(store_dir(JOURNEY), target)
    res = runner.invoke(app, ["dlq", "resend", str(store_dir(JOURNEY)), "-g", "cg_journey",
                              "--target", str(target), "--key", "j-always-1"])
    assert res.exit_code == 0, res.output
    with Store.open(target) as st:
        found, _ = find_id(st, "C000020247AB5FFD2B276B8361EB0007")
        assert [m.topic for m in found][-2:] == ["%DLQ%cg_journey", "%RETRY%cg_journey"]
        copy = found[-1]
        assert str(copy.store_host) == "192.168.1.10:10911"
        assert copy.properties[RESEND_DLQ_MSG_ID] == found[-2].offset_msg_id
        assert not st.findings


def test_destinations(tmp_path: Path) -> None:
    target = make_target(tmp_path / "t")
    src = str(store_dir(JOURNEY))
    res = runner.invoke(app, ["dlq", "resend", src, "-g", "cg_journey", "--target", str(target),
                              "--to", "original", "--limit", "1", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["outcomes"][0]["topic"] == "JourneyTopic"
    res = runner.invoke(app, ["dlq", "resend", src, "-g", "cg_journey", "--target", str(target),
                              "--to", "%DLQ%other", "--json"])
    assert res.exit_code == 1
    rep = json.loads(res.stdout)
    assert rep["failed"] == 3 and rep["skipped"] == 1  # the first one is already resent
    assert "refusing" in rep["outcomes"][1]["reason"]
    journal = ResendJournal.read(default_journal_path(target))
    assert len(journal.done_ids()) == 1
    with Store.open(store_dir(JOURNEY)) as st:
        m = next(x for x in st.messages() if x.topic == "%DLQ%cg_journey")
        assert build_outgoing(m, "cg_journey", "Repair").topic == "Repair"
        assert not DROPPED_PROPERTIES & set(dict(build_outgoing(m, "cg_journey").properties))


def test_dry_run_changes_no_byte(tmp_path: Path) -> None:
    src = make_dlq_source(tmp_path / "src", 50)
    target = make_target(tmp_path / "t")
    res = runner.invoke(app, ["dlq", "resend", str(src), "-g", "g", "--target", str(target),
                              "--limit", "20"])
    assert res.exit_code == 0, res.output
    missing = tmp_path / "nowhere"
    before = tree_digest(src, target, tmp_path)
    res = runner.invoke(app, ["dlq", "resend", str(src), "-g", "g", "--target", str(target),
                              "--dry-run", "--json", "--body", "utf8"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert (rep["wouldSend"], rep["skipped"], rep["sent"]) == (30, 20, 0)
    first = next(o for o in rep["outcomes"] if o["status"] == "would-send")
    assert first["message"]["topic"] == "%RETRY%g" and first["message"]["body"] == "body 20"
    assert first["message"]["properties"][RESEND_ID_PROPERTY] == first["resendId"]
    res = runner.invoke(app, ["dlq", "resend", str(src), "-g", "g", "--target", str(missing),
                              "--dry-run"])
    assert res.exit_code == 0, res.output
    assert res.stdout.count("would-send") == 50
    assert tree_digest(src, target, tmp_path) == before
    assert not missing.exists()
    # what the dry run printed is exactly what the real run sends
    res = runner.invoke(app, ["dlq", "resend", str(src), "-g", "g", "--target", str(target),
                              "--json"])
    sent = {m.properties[RESEND_ID_PROPERTY]: m for m in resent_copies(target)}
    for o in rep["outcomes"]:
        if o["status"] == "would-send":
            m = sent[o["resendId"]]
            assert m.topic == o["message"]["topic"]
            props = dict(m.properties)
            props.pop("CLUSTER")  # the storing broker adds its cluster name
            assert props == o["message"]["properties"]
            assert m.body.decode() == o["message"]["body"]


def test_interrupted_run_is_resolved_against_the_target(tmp_path: Path) -> None:
    """Intent lines without done: one whose put happened (found, not resent), one whose put
    never happened (sent now), plus a torn last line."""
    src = make_dlq_source(tmp_path / "src", 6)
    target = make_target(tmp_path / "t")
    jpath = default_journal_path(target)
    with Store.open(src) as st:
        recs = [m for m in st.messages() if m.topic == "%DLQ%g"]
        a, b = (build_outgoing(m, "g") for m in recs[:2])
        tgt = RefStoreTarget(target)
        j = ResendJournal.open(jpath)
        j.append([ResendJournal.intent_record(a, tgt.position(), str(src))])
        tgt.put(a)  # killed here: put done, no done line
        j.append([ResendJournal.intent_record(b, tgt.position(), str(src))])
        j.close()
        tgt.close()
        with open(jpath, "ab") as f:
            f.write(b'{"op":"done","resendId":"' + b.resend_id.encode())  # torn
        j = ResendJournal.open(jpath)
        assert jpath.read_bytes().endswith(b"\n")
        tgt = RefStoreTarget(target)
        try:
            rep = resend(select_dlq(st, DlqSelection("g")), "g", tgt, j, source=str(src))
        finally:
            j.close()
            tgt.close()
    assert [o.status for o in rep.outcomes] == ["skipped", "sent", "sent", "sent", "sent", "sent"]
    assert "interrupted" in (rep.outcomes[0].reason or "")
    ids = [m.properties[RESEND_ID_PROPERTY] for m in resent_copies(target)]
    assert sorted(ids) == sorted({*ids}) and len(ids) == 6
    assert ResendJournal.read(jpath).done_ids() == set(ids)


def test_journal_is_locked_during_a_run(tmp_path: Path) -> None:
    jpath = tmp_path / "j.jsonl"
    j = ResendJournal.open(jpath)
    try:
        with pytest.raises(Exception, match="journal locked"):
            ResendJournal.open(jpath)
    finally:
        j.close()


def test_rate_limits_puts(tmp_path: Path) -> None:
    src = make_dlq_source(tmp_path / "src", 6)
    target = make_target(tmp_path / "t")
    t0 = time.monotonic()
    res = runner.invoke(app, ["dlq", "resend", str(src), "-g", "g", "--target", str(target),
                              "--rate", "20"])
    took = time.monotonic() - t0
    assert res.exit_code == 0, res.output
    assert res.stdout.count("sent ") == 6
    assert took >= 5 / 20
