"""`mqtool repair` against damage an operator meets: commitlog files misnamed, missing,
duplicated or cut short in the first, a middle and the last position, and one flipped bit in a
record's UNIQ_KEY or TAGS (no CRC covers them in 4.x). RocketMQ's own store code is the judge
(tests/judge: 4.9.7's and 5.3.3's DefaultMessageStore loads, starts, serves every unit with
getMessage and finds every listed key with queryMessage): whatever it keeps of the damaged store,
it keeps of the repaired copy; the copy loads; where repair cannot write a copy RocketMQ would
start on, it says why in one line, exits 1 and writes nothing.

The stores are copies of the real fixture stores a 4.9.7 and a 5.3.3 broker wrote (journey:
4 KiB commitlog files; plain-crashed: 256 KiB files and an abort file, so RocketMQ runs its
abnormal recovery). Damage helpers: layout_damage.py."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import layout_damage as ld
import pytest
from integrity_damage import FIXTURES, ROOT, copy_store, messages, run, tree_digest, verify_json

sys.path.insert(0, str(ROOT / "tests" / "judge"))
from rocketmq_judge import geometry, judge_copy, keys_file, problems  # noqa: E402

JOURNEY = "4.9.7/journey"
CRASHED = "4.9.7/plain-crashed"
V5 = "5.3.3/plain"


@dataclass
class Kept:
    """What RocketMQ keeps of a store: each queue's [min, max), the units getMessage serves
    as their own message, the listed keys queryMessage finds."""

    loaded: bool
    queues: dict[str, tuple[int, int]]
    served: int
    keys: int
    doc: dict[str, Any]


def _judge(store: Path, tmp: Path, name: str) -> Kept:
    version = name.split("/")[0]
    sizes = {p.stat().st_size for p in (store / "commitlog").iterdir()}
    extra: list[str | Path] = ["--keys", keys_file(name, tmp / "keys.tsv")]
    if len(sizes) > 1:  # RocketMQ's own load decides about a file of another size
        extra += ["--commitlog-file-size", str(max(sizes))]
    if version.startswith("5."):
        extra += geometry(name)
    rc, doc, err = judge_copy(store, tmp, *extra, version=version)
    assert rc in (0, 1) and doc, err[-3000:]
    if not doc["loaded"]:
        return Kept(False, {}, 0, 0, doc)
    queues = {k: (q["min"], q["max"]) for k, q in doc["afterLoad"]["consumeQueues"].items()}
    return Kept(True, queues, doc["getMessage"]["found"], doc["keyFile"]["found"], doc)


def _lost(name: str, kind: str, what: dict[str, Any]) -> set[int]:
    """The commitlog offsets of the records the damage destroyed (no copy can hold them): a
    missing file's, those of a file another's copy overwrote, those past a file's cut."""
    msgs = messages(name)
    if kind in ("missing", "duplicated"):
        gone = what["file"] if kind == "missing" else what["copy"]
        return {m["phyOffset"] for m in msgs if f"commitlog/{m['file']}" == gone}
    if kind == "short":
        start = int(what["file"].split("/")[1])
        return {m["phyOffset"] for m in msgs if start <= m["phyOffset"] < start + what[
            "expected"] and m["phyOffset"] + m["size"] > start + what["size"]}
    return set()


def _lost_keys(name: str, lost: set[int]) -> set[tuple[str, str]]:
    """The listed keys (topic, key) all of whose records are lost."""
    out = set()
    text = (FIXTURES / name / "manifest" / "index_queries.jsonl").read_text("utf-8")
    for line in text.splitlines():
        if line.strip():
            q = json.loads(line)
            if set(q["expectedPhyOffsets"]) <= lost:
                out.add((q["topic"], q["key"]))
    return out


def _explained(doc: dict[str, Any], lost: set[int], lost_keys: set[tuple[str, str]],
               gaps: list[tuple[int, int]]) -> None:
    """Every problem the judge has with the copy is about a record the damage destroyed: a
    unit RocketMQ keeps for it (and cannot serve), its listed key, the walk stopping at the
    missing file."""
    # at most one per lost record's unit, per lost key, per walk stopped at a missing file
    assert doc["problemCount"] <= len(lost) + len(lost_keys) + len(gaps), problems(doc)
    for p in doc["problems"]:
        m = re.search(r"queryMessage\((.*), (.*)\) finds nothing", p["detail"])
        if p["kind"] == "listed-key-missing" and m:
            assert (m.group(1), m.group(2)) in lost_keys, p
            continue
        m = re.search(r"the unit holds phy (\d+)", p["detail"])
        if m:
            assert int(m.group(1)) in lost, p
            continue
        m = re.search(r"getData returned nothing at phy (\d+)", p["detail"])
        assert m is not None, (p, problems(doc))
        assert any(lo <= int(m.group(1)) < hi for lo, hi in gaps), p


def _assert_keeps(damaged: Kept, repaired: Kept) -> None:
    """What RocketMQ keeps of the damaged store, it keeps of the copy: every queue's units,
    every unit it serves, every listed key it finds."""
    assert repaired.loaded, problems(repaired.doc)
    for q, (lo, hi) in damaged.queues.items():
        if hi > lo:
            rlo, rhi = repaired.queues.get(q, (0, 0))
            assert rlo <= lo and rhi >= hi, (q, (lo, hi), (rlo, rhi))
    assert repaired.served >= damaged.served
    assert repaired.keys >= damaged.keys


def _repair(src: Path, tmp: Path) -> tuple[int, dict[str, Any], str, Path]:
    out = tmp / "repaired"
    before = tree_digest(src)
    res = run("repair", src, "--out", out, "--json")
    assert "Traceback" not in res.stderr, res.stderr
    assert tree_digest(src) == before  # the source is only read
    doc = json.loads(res.stdout) if res.stdout.strip() else {}
    return res.returncode, doc, res.stderr, out


def _gaps(rep: dict[str, Any]) -> list[tuple[int, int]]:
    """The missing commitlog ranges repair reported (kept as gaps in the copy)."""
    out = []
    for n in rep["notRepaired"]:
        m = re.search(r"missing \(commitlog offset ([\d,]+) to ([\d,]+)\)", n)
        if m:
            out.append((int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))))
    return out


LAYOUT_CASES = [(k, p) for k in ("misnamed", "missing", "duplicated", "short")
                for p in ld.POSITIONS]
# a file cut short before other data, with units pointing into what it lost: no copy
REFUSED = {("short", "first"), ("short", "middle")}


def _layout_case(name: str, kind: str, position: str, tmp: Path) -> None:
    src = copy_store(name, tmp)
    what = ld.LAYOUT[kind](src, position)
    damaged = _judge(src, tmp, name)
    rc, rep, err, out = _repair(src, tmp)
    if (kind, position) in REFUSED:
        assert rc == 1 and not out.exists(), (rc, err)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        assert what["file"] in lines[0] and "nothing written" in lines[0], lines[0]
        assert not damaged.loaded  # RocketMQ refuses the damaged store too
        assert not any(p.name.startswith(".") for p in out.parent.iterdir())
        return
    assert rc in (0, 1), err
    assert out.is_dir(), err
    repaired = _judge(out, tmp, name)
    lost = _lost(name, kind, what)
    lost_keys = _lost_keys(name, lost)
    gaps = _gaps(rep)
    # the copy serves every message whose record survived, finds every key of one
    assert repaired.loaded, problems(repaired.doc)
    assert repaired.served == len(messages(name)) - len(lost), problems(repaired.doc)
    assert repaired.keys == repaired.doc["keyFile"]["keys"] - len(lost_keys)
    _explained(repaired.doc, lost, lost_keys, gaps)
    if kind == "short":
        assert not damaged.loaded  # RocketMQ refuses a store with a file cut short
    elif kind == "duplicated":
        # at the offsets of the file the copy overwrote, the damaged store serves the copied
        # records in place of the lost ones (the judge counts a key found there, wrongly)
        assert repaired.served >= damaged.served
    else:
        _assert_keeps(damaged, repaired)
    # a missing file, and records a file cut short lost, are reported (not repaired)
    cut_lost = kind == "short" and any(
        n.startswith(f"{what['file']}: cut short") for n in rep["notRepaired"])
    assert cut_lost == (kind == "short" and bool(lost)), rep["notRepaired"]
    assert rc == (1 if gaps or cut_lost else 0), rep["notRepaired"]
    if not lost and not gaps:
        assert repaired.doc["verdict"] == "clean", problems(repaired.doc)
        vrc, vdoc = verify_json(out)
        assert vrc == 0, [f for f in vdoc["findings"] if f["severity"] == "error"]


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "position"), LAYOUT_CASES)
def test_layout_damage_journey(kind: str, position: str, tmp_path: Path) -> None:
    _layout_case(JOURNEY, kind, position, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "position"), [("missing", "middle"), ("short", "last")])
def test_layout_damage_crashed(kind: str, position: str, tmp_path: Path) -> None:
    _layout_case(CRASHED, kind, position, tmp_path)


@pytest.mark.slow
def test_misnamed_8th_file_of_a_crashed_store(tmp_path: Path) -> None:
    """The 8th commitlog file of the real crashed store renamed 4,096 too high: RocketMQ's
    abnormal recovery walks it (records are not checked against their place) and serves all
    but the units in its first 4,096 bytes (findMappedFileByOffset finds no file for them); the
    repaired copy puts the file back where its records say, and RocketMQ serves every unit."""
    src = copy_store(CRASHED, tmp_path)
    eighth = sorted((src / "commitlog").iterdir())[7]
    assert eighth.name == "00000000000001835008"
    eighth.rename(eighth.with_name(f"{int(eighth.name) + 4096:020d}"))
    damaged = _judge(src, tmp_path, CRASHED)
    assert damaged.loaded and damaged.served < len(messages(CRASHED))
    rc, rep, err, out = _repair(src, tmp_path)
    assert rc == 0, (err, rep.get("notRepaired"))
    assert {"file": "commitlog/00000000000001839104", "offset": None,
            "after": "renamed commitlog/00000000000001835008"}.items() <= next(
        c for c in rep["changes"] if c["file"] == "commitlog/00000000000001839104").items()
    repaired = _judge(out, tmp_path, CRASHED)
    _assert_keeps(damaged, repaired)
    assert repaired.doc["verdict"] == "clean", problems(repaired.doc)
    assert repaired.served == len(messages(CRASHED)) == 2099
    assert repaired.doc["commitlogWalk"]["messages"] == 2099


@pytest.mark.slow
def test_misnamed_file_5x(tmp_path: Path) -> None:
    """5.3.3's store code on its store whose commitlog file is renamed 4,096 too high: it
    serves none of the units in the file's first 4,096 bytes; the repaired copy all of them."""
    src = copy_store(V5, tmp_path)
    ld.misname(src, "first")
    damaged = _judge(src, tmp_path, V5)
    rc, rep, err, out = _repair(src, tmp_path)
    assert rc == 0, (err, rep.get("notRepaired"))
    repaired = _judge(out, tmp_path, V5)
    assert repaired.doc["verdict"] == "clean", problems(repaired.doc)
    _assert_keeps(damaged, repaired)
    assert damaged.served < repaired.served == len(messages(V5))


@pytest.mark.slow
@pytest.mark.parametrize("key", ["UNIQ_KEY", "TAGS"])
def test_flipped_property_is_reported_not_laundered(key: str, tmp_path: Path) -> None:
    """One bit flipped in a record's UNIQ_KEY or TAGS: the copy is the damaged store byte for
    byte (the index entry and the unit's tag hash still say what the producer sent, so the
    original key and tag still find the message), repair names the record and exits 1, and
    RocketMQ keeps the same of both."""
    src = copy_store(JOURNEY, tmp_path)
    what = ld.flip_property(src, key)
    damaged = _judge(src, tmp_path, JOURNEY)
    rc, rep, err, out = _repair(src, tmp_path)
    assert rc == 1, err
    assert rep["changes"] == []
    named = [n for n in rep["notRepaired"] if f"commitlog offset {what['phy']}" in n
             or f"(phy {what['phy']}" in n]
    assert named, rep["notRepaired"]
    assert tree_digest(out) == tree_digest(src)
    repaired = _judge(out, tmp_path, JOURNEY)
    assert (repaired.queues, repaired.served, repaired.keys) == (
        damaged.queues, damaged.served, damaged.keys)
    assert repaired.keys == damaged.doc["keyFile"]["keys"]  # the original key finds it
    rc_v, vdoc = verify_json(out)
    assert rc_v == 1  # the damage is still there to be seen
