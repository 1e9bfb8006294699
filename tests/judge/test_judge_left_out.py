"""A consume-queue file none of whose units survives a repair is left out of the copy, as
RocketMQ's own recovery deletes it: written back all zero, RocketMQ 4.9.7 and 5.3.3 would serve a
phantom unit 0 (phy 0, size 0) from it (tests/judge/test_rocketmq_judge.py pins that behaviour).
Found by the judge on copies cut in the middle of the data, where the cut drops every unit of a
queue."""

from __future__ import annotations

from pathlib import Path

import pytest
from rocketmq_judge import damage, geometry, judge_copy, problems, queue_max

from mqtool.store import Store


def _flip_middle_body(root: Path) -> None:
    """Flip the first body byte of a record in the middle of the last multi-record file (inside
    the files RocketMQ's recovery reads): its body CRC no longer matches, and the recovery
    (checkCRCOnRecover) ends the log there."""
    with Store.open(root) as st:
        for f in reversed(st.commitlog_files):
            msgs = [m for m in st.messages() if f.start <= m.physical_offset < f.start + f.size]
            if len(msgs) >= 3:
                m = msgs[len(msgs) // 2]
                tail = (2 if m.is_v2 else 1) + len(m.topic.encode()) + 2 + len(
                    m.properties_raw.encode())
                at = m.physical_offset - f.start + m.total_size - tail - len(m.body)
                path = f.path
                break
        else:  # pragma: no cover
            raise AssertionError("no file with three records")
    damage.patch(path, at, bytes([damage.read_at(path, at, 1)[0] ^ 0xFF]))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["4.9.7/journey", "5.3.3/plain"])
def test_queue_emptied_by_repair_is_left_out(name: str, tmp_path: Path) -> None:
    src = damage.copy_store(name, tmp_path)
    _flip_middle_body(src)
    out = tmp_path / "repaired"
    res = damage.run("repair", src, "--out", out, "--json")
    assert res.returncode == 0, res.stderr
    vrc, _ = damage.verify_json(out)
    assert vrc == 0
    emptied = [line for line in res.stdout.splitlines() if "(offsets 0.." in line]
    assert emptied, res.stdout  # the cut drops every unit of at least one queue
    version = name.split("/")[0]
    rc, doc, err = judge_copy(out, tmp_path, *geometry(name), version=version)
    assert rc == 0, (problems(doc), err[-2000:])
    assert doc["verdict"] == "clean"
    assert doc["getMessage"]["found"] == doc["commitlogWalk"]["messages"], queue_max(doc)


def test_all_zero_queue_file_is_an_error_and_repair_rebuilds_it(tmp_path: Path) -> None:
    """verify names the all-zero consume-queue file RocketMQ would serve a phantom unit from
    (tests/judge/test_rocketmq_judge.py shows RocketMQ doing it); repair re-dispatches the queue's
    records and RocketMQ loads the copy clean."""
    src = damage.copy_store(damage.JOURNEY, tmp_path)
    rel = "consumequeue/DelayTopic/0/00000000000000000000"
    cq = src / rel
    cq.write_bytes(bytes(cq.stat().st_size))
    vrc, vdoc = damage.verify_json(src)
    assert vrc == 1
    assert any(f["severity"] == "error" and f["file"] == rel and f["offset"] == 0
               and "phantom unit" in f["detail"] for f in vdoc["findings"]), vdoc["findings"]
    out = tmp_path / "repaired"
    res = damage.run("repair", src, "--out", out, "--json")
    assert res.returncode == 0, res.stderr
    vrc, vdoc = damage.verify_json(out)
    assert vrc == 0, vdoc["findings"]
    rc, doc, err = judge_copy(out, tmp_path)
    assert rc == 0, (problems(doc), err[-2000:])
    assert doc["verdict"] == "clean"
    assert queue_max(doc)["DelayTopic/0"] == 1
