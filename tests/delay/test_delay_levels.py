"""Delay levels from evidence (mqtool/delaylevels.py) in inspect, trace and verify.

The real stores were written with custom levels (fixtures/PROVENANCE.md, manifest summary.json
``storeConfig.messageDelayLevel``): what the store shows must be exactly those levels' delays.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mqtool.delaylevels import SAMPLE, resolve_delay_levels
from mqtool.formats.rules import DEFAULT_MESSAGE_DELAY_LEVEL, SCHEDULE_TOPIC, parse_delay_levels
from mqtool.refstore.engine import RefStore
from mqtool.refstore.values import ManualClock, Message, StoreConfig
from mqtool.store import Store

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "rocketmq-stores"
JOURNEY = FIXTURES / "4.9.7" / "journey" / "store"
V5 = FIXTURES / "5.3.3" / "plain" / "store"


def _real_levels(store: Path) -> dict[int, int]:
    summary = json.loads((store.parent / "manifest" / "summary.json").read_text("utf-8"))
    return parse_delay_levels(summary["storeConfig"]["messageDelayLevel"])


def _schedule_units(store: Path) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for line in (store.parent / "manifest" / "consumequeue.jsonl").read_text().splitlines():
        u = json.loads(line)
        if u["topic"] == SCHEDULE_TOPIC:
            out.setdefault(u["queueId"], []).append(u)
    return out


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    res = subprocess.run([sys.executable, "-m", "mqtool", *map(str, args)], capture_output=True,
                         text=True, timeout=300, env=env)
    assert "Traceback" not in res.stderr, res.stderr
    return res


@pytest.mark.parametrize("store", [JOURNEY, V5], ids=["4.9.7-journey", "5.3.3-plain"])
def test_evidence_gives_the_levels_the_broker_had(store: Path) -> None:
    real = _real_levels(store)
    units = _schedule_units(store)
    with Store.open(store) as st:
        lv = resolve_delay_levels(st)
    assert sorted(lv.evidence) == sorted(q + 1 for q in units)  # every queue with units
    for level, ev in lv.evidence.items():
        assert ev.delay_ms == real[level], level
        assert lv.table[level] == real[level]
        assert lv.sources[level] == "evidence"
        last = units[level - 1][-1]  # the latest unit is the one named
        assert (ev.latest.file, ev.latest.offset) == (
            f"consumequeue/{SCHEDULE_TOPIC}/{level - 1}/{last['file']}", last["fileOffset"])
    default = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)
    for level in set(default) - set(lv.evidence):
        assert lv.sources[level] == "default" and lv.table[level] == default[level]
    assert lv.origin == "evidence + default"
    assert lv.findings == []


def test_store_without_schedule_units_uses_the_default() -> None:
    with Store.open(FIXTURES / "4.9.7" / "plain" / "store") as st:
        lv = resolve_delay_levels(st)
    assert lv.evidence == {} and lv.origin == "default"
    assert lv.table == parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)


def _warnings(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in findings if f["kind"] == "delay-levels" and f["severity"] == "warning"]


def test_contradicting_delay_levels_warn_in_all_three_commands() -> None:
    real = _real_levels(V5)
    units = _schedule_units(V5)
    wrong = "1s 5s 10s"  # level 2 is 2s in the store; level 18 does not exist here
    q1_last = units[1][-1]
    q17 = units[17][-1]
    expect = {
        (f"consumequeue/{SCHEDULE_TOPIC}/1/{q1_last['file']}", q1_last["fileOffset"]),
        (f"consumequeue/{SCHEDULE_TOPIC}/17/{q17['file']}", q17["fileOffset"]),
    }

    res = run("inspect", V5, "--json", "--delay-levels", wrong)
    assert res.returncode == 0, res.stderr
    src = json.loads(res.stdout)["delayLevelSource"]
    assert src["origin"] == "--delay-levels"
    assert {(f["file"], f["offset"]) for f in _warnings(src["findings"])} == expect
    assert "warning: consumequeue/SCHEDULE_TOPIC_XXXX/1/" in res.stderr

    res = run("verify", V5, "--json", "--delay-levels", wrong)
    assert res.returncode == 0, res.stderr  # a warning is not an error
    doc = json.loads(res.stdout)
    assert {(f["file"], f["offset"]) for f in _warnings(doc["findings"])} == expect
    w = next(f for f in _warnings(doc["findings"]) if "/1/" in f["file"])
    assert (w["expected"], w["found"]) == ("2s", "5s")
    assert doc["summary"]["delayLevels"]["origin"] == "--delay-levels"

    uniq = _uniq_of_delayed(V5)
    res = run("trace", V5, uniq, "--json", "--delay-levels", wrong)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert {(f["file"], f["offset"]) for f in _warnings(doc["delayLevels"]["findings"])} == expect
    assert "warning: consumequeue/SCHEDULE_TOPIC_XXXX/1/" in res.stderr

    # the right levels: no warning anywhere
    for cmd in ("inspect", "verify"):
        res = run(cmd, V5, "--json", "--delay-levels", " ".join(
            f"{real[i] // 1000}s" for i in sorted(real)))
        assert res.returncode == 0 and "warning" not in res.stderr


def _uniq_of_delayed(store: Path) -> str:
    for line in (store.parent / "manifest" / "commitlog.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("topic") == SCHEDULE_TOPIC and r.get("uniqKey"):
            return str(r["uniqKey"])
    raise AssertionError("no schedule record in the manifest")


def test_sources_are_shown_in_tables_and_json() -> None:
    res = run("inspect", JOURNEY)
    assert res.returncode == 0, res.stderr
    assert "delay levels from" in res.stdout and "evidence" in res.stdout
    res = run("inspect", JOURNEY, "--json")
    rows = {r["level"]: r for r in json.loads(res.stdout)["delayLevels"]}
    assert rows[16]["delay"] == "10s" and rows[16]["source"] == "evidence"
    res = run("verify", JOURNEY)
    assert res.returncode == 0 and "delay levels from" in res.stdout
    res = run("trace", JOURNEY, "--key", "j-always-0")
    assert "delay levels from: evidence + default" in res.stdout
    assert "delay level 5 (1s)" in res.stdout  # the journey store's level 5 is 1s, not 1m
    doc = json.loads(run("trace", JOURNEY, "--key", "j-always-0", "--json").stdout)
    levels = {r["level"]: r for r in doc["delayLevels"]["levels"]}
    assert levels[5]["source"] == "evidence" and levels[5]["delayMs"] == 1000
    assert levels[1]["source"] == "default"


def test_broker_conf(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    real = _real_levels(V5)
    text = " ".join(f"{real[i] // 1000}s" for i in sorted(real))
    conf.write_text(f"# broker-a\nbrokerName = broker-a\nmessageDelayLevel : {text} \\\n\n",
                    encoding="latin-1")
    for cmd in ("inspect", "verify"):
        res = run(cmd, V5, "--json", "--broker-conf", conf)
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        src = doc["delayLevelSource"] if cmd == "inspect" else doc["summary"]["delayLevels"]
        assert src["origin"] == f"broker.conf {conf}"
        assert {r["source"] for r in src["levels"]} == {f"broker.conf {conf}"}
        assert _warnings(src["findings"]) == []
    # no messageDelayLevel: the broker runs with its default, which the store contradicts
    conf.write_text("brokerName=b\n", encoding="latin-1")
    res = run("verify", V5, "--json", "--broker-conf", conf)
    doc = json.loads(res.stdout)
    assert doc["summary"]["delayLevels"]["origin"].startswith("default (")
    assert len(_warnings(doc["findings"])) == 1  # level 2: 5s by default, 2s in the store
    # bad input: one line, exit 2 (usage)
    res = run("inspect", V5, "--broker-conf", tmp_path / "nope.conf")
    assert res.returncode == 2 and res.stderr.startswith("error:")
    assert len(res.stderr.strip().splitlines()) == 1
    conf.write_text("messageDelayLevel=1s  2s\n")
    res = run("trace", V5, "--key", "x", "--broker-conf", conf)
    assert res.returncode == 2 and "bad delay level 2" in res.stderr
    res = run("verify", V5, "--broker-conf", conf, "--delay-levels", "1s")
    assert res.returncode == 2 and "not both" in res.stderr


def _refstore(root: Path, levels: str, clock: ManualClock) -> RefStore:
    cfg = StoreConfig(commitlog_file_size=64 * 1024, cq_entries_per_file=10,
                      message_delay_level=levels)
    return RefStore.open(root, cfg, clock=clock, seed=1)


def test_reference_store_with_custom_levels_and_a_change(tmp_path: Path) -> None:
    root = tmp_path / "store"
    clock = ManualClock()
    with _refstore(root, "3s 7s 1m 90s 2d", clock) as s:
        for i in range(2 * SAMPLE + 5):  # more units than the two samples read
            clock.advance(13)
            s.put(Message.create("T", f"m{i}", delay_level=1))
        s.put(Message.create("T", b"x", delay_level=4))
        s.put(Message.create("T", b"y", delay_level=9))  # clamped to the max level, 5
    with Store.open(root) as st:
        lv = resolve_delay_levels(st)
    assert {lv_: e.delay_ms for lv_, e in lv.evidence.items()} == {
        1: 3000, 4: 90_000, 5: 2 * 86_400_000}
    assert lv.evidence[1].units == 2 * SAMPLE
    assert lv.findings == []

    # the broker restarts with level 1 = 4s: later units of queue 0 say so
    with _refstore(root, "4s 7s 1m 90s 2d", clock) as s:
        clock.advance(1000)
        s.put(Message.create("T", b"z", delay_level=1))
    with Store.open(root) as st:
        lv = resolve_delay_levels(st)
        assert lv.evidence[1].delay_ms == 4000  # the latest unit wins
        assert lv.evidence[1].delays == {3000: 2 * SAMPLE - 1, 4000: 1}
        (info,) = lv.findings
        assert info.severity == "info" and info.file == f"consumequeue/{SCHEDULE_TOPIC}/0/" + (
            "0" * 20)
        lv2 = resolve_delay_levels(st, "3s 7s 1m 90s 2d")
    (w,) = [f for f in lv2.findings if f.severity == "warning"]
    assert (w.expected, w.found) == ("4s", "3s")
    assert w.file.startswith(f"consumequeue/{SCHEDULE_TOPIC}/0/")


def test_a_damaged_schedule_unit_is_damage_not_a_level_change(tmp_path: Path) -> None:
    """A unit whose tagsCode gives a delay no ``messageDelayLevel`` gives (not whole seconds)
    is damage, named by file and offset in every command, not evidence that the levels
    changed; the level's other units still give the real delay."""
    import shutil

    store = tmp_path / "store"
    shutil.copytree(JOURNEY, store)
    real = _real_levels(JOURNEY)
    units = _schedule_units(JOURNEY)
    qid = next(q for q, us in sorted(units.items()) if len(us) > 1)
    first = units[qid][0]
    rel = f"consumequeue/{SCHEDULE_TOPIC}/{qid}/{first['file']}"
    with open(store / rel, "r+b") as f:
        f.seek(first["fileOffset"] + 12)  # the unit's tagsCode
        f.write((7_143_517_753_971_253_763).to_bytes(8, "big"))
    where = f"{rel} @ {first['fileOffset']:#x}"

    with Store.open(store) as st:
        lv = resolve_delay_levels(st)
        assert lv.evidence[qid + 1].delay_ms == real[qid + 1]
        assert lv.findings == []  # no "the broker's messageDelayLevel changed"
        assert lv.unusable_units == 1
        (bad,) = [f for f in st.findings if f.severity == "error"]
        assert (bad.file, bad.offset, bad.kind) == (rel, first["fileOffset"], "cq")
    uniq = _uniq_of_delayed(JOURNEY)
    for args in (("inspect", store), ("verify", store), ("trace", store, uniq)):
        res = run(*args)
        assert res.returncode == 1, (args, res.stdout, res.stderr)
        out = res.stdout if args[0] == "verify" else res.stderr  # verify lists its findings
        assert f"{where} (phy {first['phyOffset']})" in out, (args, out)
        assert "messageDelayLevel changed" not in res.stdout + res.stderr


def test_verify_checks_every_schedule_unit_and_repair_rebuilds_it(tmp_path: Path) -> None:
    """The unit rule checks every schedule unit's deliver time (not only the units the
    evidence samples): one damaged in the middle of a long queue is named by verify, and
    repair's copy has it rebuilt from the level's delay, as the reput service writes it."""
    root = tmp_path / "store"
    clock = ManualClock()
    with _refstore(root, "3s 7s", clock) as s:
        for i in range(2 * SAMPLE + 9):
            clock.advance(17)
            s.put(Message.create("T", f"m{i}", delay_level=1))
    lo = SAMPLE + 4  # read by neither of the evidence's samples
    per_file = 10
    rel = f"consumequeue/{SCHEDULE_TOPIC}/0/{(lo - lo % per_file) * 20:020d}"
    at = (lo % per_file) * 20
    with open(root / rel, "r+b") as f:
        f.seek(at + 12)
        good = int.from_bytes(f.read(8), "big")
        f.seek(at + 12)
        f.write((good + 1).to_bytes(8, "big"))  # a deliver time one millisecond off

    res = run("verify", root, "--json")
    assert res.returncode == 1, res.stderr
    (bad,) = [f for f in json.loads(res.stdout)["findings"] if f["severity"] == "error"]
    assert (bad["file"], bad["offset"]) == (rel, at), bad
    assert "a delay no messageDelayLevel gives" in bad["detail"]
    with Store.open(root) as st:
        assert resolve_delay_levels(st).evidence[1].delay_ms == 3000
    out = tmp_path / "fixed"
    res = run("repair", root, "--out", out)
    assert res.returncode == 0, res.stdout + res.stderr
    with open(out / rel, "rb") as f:
        f.seek(at + 12)
        assert int.from_bytes(f.read(8), "big") == good  # storeTimestamp + 3 s again
    assert run("verify", out).returncode == 0
