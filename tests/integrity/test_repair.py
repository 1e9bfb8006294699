"""``mqtool repair``: a repaired copy verifies clean and opens in mqtool's reference store
without truncation; the source is never written; an existing non-empty --out is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from integrity_damage import (
    FIXTURES,
    JOURNEY,
    SEEDS,
    copy_store,
    run,
    tree_digest,
    verify_json,
    zeroed_magic,
)

from mqtool.integrity import verify
from mqtool.refstore.engine import RefStore

REPAIRABLE = sorted(s for s in SEEDS if s != "zeroed-magic")


def _opens_without_truncation(copy: Path, tmp_path: Path) -> None:
    """mqtool's reference store (its RocketMQ-style recovery) keeps every byte and unit."""
    probe = tmp_path / "probe"
    shutil.copytree(copy, probe)
    want = verify(probe)
    with RefStore.open(probe, create=False) as rs:
        assert rs.write_position >= want.data_end  # no readable record was cut
        assert not rs.recovered_abnormally
        for q in want.queues:
            assert rs.max_offset(q.topic, q.queue_id) == q.max_offset, (q.topic, q.queue_id)


@pytest.mark.parametrize("seed", REPAIRABLE)
def test_repaired_copy_verifies_clean(seed: str, tmp_path: Path) -> None:
    src = copy_store(JOURNEY, tmp_path)
    SEEDS[seed](src)
    before = tree_digest(src)
    out = tmp_path / "repaired"
    res = run("repair", src, "--out", out, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["changes"], "a damaged store needs changes"
    assert tree_digest(src) == before  # the source is only read
    rc, vdoc = verify_json(out)
    assert rc == 0, [f for f in vdoc["findings"] if f["severity"] == "error"]
    assert vdoc["restartWouldLose"]["lostMessages"] == 0
    assert vdoc["restartWouldLose"]["cqUnitsDroppedTotal"] == 0
    _opens_without_truncation(out, tmp_path)


def test_crashed_store_repairs_to_a_clean_store(tmp_path: Path) -> None:
    src = FIXTURES / "4.9.7/plain-crashed" / "store"
    before = tree_digest(src)
    out = tmp_path / "out"
    res = run("repair", src, "--out", out)
    assert res.returncode == 0, res.stderr
    assert "abort" in res.stdout
    assert tree_digest(src) == before
    assert not (out / "abort").exists()
    rc, doc = verify_json(out)
    assert rc == 0 and doc["summary"]["state"] == "clean shutdown"
    assert doc["summary"]["messages"] == 2099
    _opens_without_truncation(out, tmp_path)


def test_clean_store_copy_is_unchanged(tmp_path: Path) -> None:
    src = FIXTURES / JOURNEY / "store"
    out = tmp_path / "out"
    res = run("repair", src, "--out", out)
    assert res.returncode == 0, res.stderr
    assert "no changes" in res.stdout
    assert tree_digest(out) == tree_digest(src)


def test_damage_outside_recovery_window_is_reported_not_repaired(tmp_path: Path) -> None:
    src = copy_store(JOURNEY, tmp_path)
    want = zeroed_magic(src)
    res = run("repair", src, "--out", tmp_path / "out")
    assert res.returncode == 1
    assert "not repaired" in res.stderr and want["file"] in res.stderr


def test_refuses_non_empty_out_and_dry_run_writes_nothing(tmp_path: Path) -> None:
    src = copy_store(JOURNEY, tmp_path)
    SEEDS["torn-tail"](src)
    out = tmp_path / "busy"
    out.mkdir()
    (out / "x").write_text("keep me")
    res = run("repair", src, "--out", out)
    assert res.returncode == 2 and "not empty" in res.stderr and "Traceback" not in res.stderr
    assert (out / "x").read_text() == "keep me"
    res = run("repair", src, "--dry-run")
    assert res.returncode == 0 and "zeroed" in res.stdout
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())
    res = run("repair", src)
    assert res.returncode == 2 and "--out" in res.stderr


def test_misnamed_file_repairs_from_a_relative_store_path(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The store given as a relative path: the renamed file's copy is written and verifies
    clean, and the dry run lists the same (the whole log, not an empty one)."""
    src = copy_store(JOURNEY, tmp_path)
    cl = src / "commitlog"
    (cl / "00000000000000008192").rename(cl / "00000000000000010240")
    monkeypatch.chdir(src.parent)
    dry = run("repair", "store", "--dry-run", "--json")
    res = run("repair", "store", "--out", "repaired", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(dry.stdout)["cutAt"] == json.loads(res.stdout)["cutAt"] > 16384
    rc, doc = verify_json(src.parent / "repaired")
    assert rc == 0, [f for f in doc["findings"] if f["severity"] == "error"]
    assert sorted(p.name for p in (src.parent / "repaired" / "commitlog").iterdir()) == [
        f"{i * 4096:020d}" for i in range(5)]
    assert [p.name for p in src.parent.iterdir() if p.name.startswith(".")] == []
