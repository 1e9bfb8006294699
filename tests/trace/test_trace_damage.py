"""Damage is never hidden by ``trace`` and ``msg``: a damaged store reproduced and a damaged
index, on private copies of the real journey store (RocketMQ 4.9.7)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from conftest import manifest_jsonl, store_dir
from mqtool.cli import app
from mqtool.formats import commitlog_columns
from mqtool.formats.walker import next_record
from mqtool.store import Store
from mqtool.store.search import find_by_key, search
from mqtool.trace import trace_key

JOURNEY = "4.9.7/journey"
LEVELS = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 10s 1h 2h"
DAMAGED_FILE = "commitlog/00000000000000004096"


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(store_dir(JOURNEY), root)
    return root


def _zero_first_magic(root: Path) -> None:
    """The issue's reproduction: no index/, the first record of commitlog/...4096 loses its
    magic."""
    shutil.rmtree(root / "index")
    p = root / DAMAGED_FILE
    data = bytearray(p.read_bytes())
    data[4:8] = bytes(4)
    p.write_bytes(bytes(data))


def _first_record_of_damaged_file() -> dict[str, Any]:
    return next(r for r in manifest_jsonl(JOURNEY, "commitlog.jsonl")
                if r["kind"] == "msg" and r["file"] == DAMAGED_FILE.split("/")[1])


def _clean_hops(key: str) -> list[int]:
    with Store.open(store_dir(JOURNEY)) as st:
        [tr] = trace_key(st, key, delay_levels=LEVELS).traces
        return [h.commit_log_offset for h in tr.hops]


def _trace(root: Path, key: str) -> tuple[int, dict[str, Any], str]:
    res = CliRunner().invoke(app, ["trace", str(root), "--key", key, "--delay-levels", LEVELS,
                                   "--json"])
    return res.exit_code, json.loads(res.stdout), res.output


def test_issue_reproduction_trace_keeps_every_readable_hop_and_reports_the_damage(
    tmp_path: Path,
) -> None:
    root = _copy(tmp_path)
    _zero_first_magic(root)
    bad = _first_record_of_damaged_file()
    want = _clean_hops("j-always-0")
    assert len(want) == 8
    code, doc, out = _trace(root, "j-always-0")
    assert code == 1
    [tr] = doc["traces"]
    got = [h["commitLogOffset"] for h in tr["hops"]]
    lost = [o for o in want if o == bad["phyOffset"]]
    # every hop outside the damaged record is there (the walk resynchronises past the damage)
    assert got == [o for o in want if o not in lost]
    # the damage: one error line naming the file and the offset inside it
    assert f"error: {DAMAGED_FILE} @ 0x0 (phy {bad['phyOffset']}): " in out
    assert "bad magic" in out
    if lost:  # the verdict says a hop may be missing, and why
        assert any(DAMAGED_FILE in n and "may be missing" in n for n in tr["notes"])
    # the text form too
    res = CliRunner().invoke(app, ["trace", str(root), "--key", "j-always-0",
                                   "--delay-levels", LEVELS])
    assert res.exit_code == 1
    assert f"{DAMAGED_FILE} @ 0x0" in res.output


def test_issue_reproduction_msg_finds_records_after_the_damage(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _zero_first_magic(root)
    rows = [r for r in manifest_jsonl(JOURNEY, "commitlog.jsonl")
            if r["kind"] == "msg" and r["file"] == DAMAGED_FILE.split("/")[1]]
    later = rows[1]
    res = CliRunner().invoke(app, ["msg", str(root), later["uniqKey"], "--json"])
    assert res.exit_code == 1
    assert later["phyOffset"] in [m["commitLogOffset"] for m in json.loads(res.stdout)] or \
        later["phyOffset"] in [m.get("physicalOffset") for m in json.loads(res.stdout)]
    assert f"{DAMAGED_FILE} @ 0x0 (phy {rows[0]['phyOffset']})" in res.output


def test_damaged_index_falls_back_to_the_commitlog_and_says_so(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    [idx] = sorted((root / "index").iterdir())
    data = bytearray(idx.read_bytes())
    n_slots = (len(data) - 40) // 84  # RocketMQ's 4 entries per slot
    data[40:40 + 4 * n_slots] = bytes(4 * n_slots)  # the slot table is gone: no key is found
    idx.write_bytes(bytes(data))
    code, doc, out = _trace(root, "j-always-0")
    assert code == 1
    [tr] = doc["traces"]
    assert [h["commitLogOffset"] for h in tr["hops"]] == _clean_hops("j-always-0")
    assert doc["via"] == "scan (index damaged)"
    assert f"error: index/{idx.name}" in out  # the damaged index file is named
    res = CliRunner().invoke(app, ["index", str(root), "--key", "j-always-0", "--json"])
    assert res.exit_code == 1
    assert json.loads(res.stdout)["messages"]


def test_index_entry_that_leads_nowhere_falls_back_with_progress(tmp_path: Path) -> None:
    """An index entry of the traced key points at no record (its phyOffset damaged, the file
    otherwise consistent): the lookup names the entry, reads the commitlog instead (progress
    reported) and finds every hop."""
    import struct

    from mqtool.formats.indexfile import IndexReader, build_key, index_key_hash

    root = _copy(tmp_path)
    [idx] = sorted((root / "index").iterdir())
    data = bytearray(idx.read_bytes())
    reader = IndexReader(bytes(data))
    want = _clean_hops("j-always-0")
    h = index_key_hash(build_key("JourneyTopic", "j-always-0"))
    [(n, e)] = reader.lookup_hash_at(h)
    pos = reader.geometry.entry_pos(n)
    struct.pack_into(">q", data, pos + 4, e.phy_offset + 3)  # inside its record: no start
    idx.write_bytes(bytes(data))
    with Store.open(root) as st:
        assert st.index_usable  # the cheap checks at open do not see it
        seen: list[tuple[int, int]] = []
        [tr] = trace_key(st, "j-always-0", delay_levels=LEVELS,
                         progress=lambda d, t: seen.append((d, t))).traces
        assert [h.commit_log_offset for h in tr.hops] == want
        assert st.index_damaged and seen and seen[-1][0] == seen[-1][1] > 0
        assert [(f.kind, f.file, f.offset) for f in st.findings] == [
            ("index-dangling", f"index/{idx.name}", pos)]
    code, doc, out = _trace(root, "j-always-0")
    assert code == 1 and doc["via"] == "scan (index damaged)"
    assert f"error: index/{idx.name} @ {pos:#x} (phy {e.phy_offset + 3}): entry {n}" in out
    res = CliRunner().invoke(app, ["index", str(root), "--key", "j-always-0", "--json"])
    assert res.exit_code == 1 and json.loads(res.stdout)["messages"]


def test_every_reader_gives_the_same_records_on_the_damaged_store(tmp_path: Path) -> None:
    """Store iteration, the key search shared by msg and trace, and the bulk decoder agree."""
    root = _copy(tmp_path)
    _zero_first_magic(root)
    p = root / "commitlog" / "00000000000000008192"  # and a zeroed record in the middle
    rows = [r for r in manifest_jsonl(JOURNEY, "commitlog.jsonl")
            if r["kind"] == "msg" and r["file"] == p.name]
    data = bytearray(p.read_bytes())
    a = rows[2]["fileOffset"]
    data[a:a + rows[2]["size"]] = bytes(rows[2]["size"])
    p.write_bytes(bytes(data))
    with Store.open(root) as st:
        walked = [m.physical_offset for m in st.messages()]
        where = sorted((f.file, f.offset) for f in st.findings)
    with Store.open(root) as st:
        searched = [m.physical_offset for m in search(st, [b"UNIQ_KEY\x01"])]
        assert sorted((f.file, f.offset) for f in st.findings) == where
    with Store.open(root) as st:
        found = [m.physical_offset for u in {r["uniqKey"] for r in manifest_jsonl(
            JOURNEY, "commitlog.jsonl") if r["kind"] == "msg" and r["uniqKey"]}
            for m in find_by_key(st, u, uniq=True)[0]]
    bulk: list[int] = []
    for f in sorted((root / "commitlog").iterdir()):
        # the bulk decoder stops at damage; it resumes where the walker's rule finds a record
        buf, base, pos = f.read_bytes(), int(f.name), 0
        while True:
            view = memoryview(buf)[pos:]
            cols, end = commitlog_columns.decode_file(view, file=f"commitlog/{f.name}",
                                               file_start=base + pos)
            bulk += [int(x) for x in cols["physical_offset"]]
            view.release()
            if end.clean:
                break
            nxt = next_record(buf, end.physical_offset - base + 1, base)
            if nxt is None:
                break
            pos = nxt
    every = [r["phyOffset"] for r in manifest_jsonl(JOURNEY, "commitlog.jsonl")
             if r["kind"] == "msg"]
    lost = {_first_record_of_damaged_file()["phyOffset"], rows[2]["phyOffset"]}
    assert walked == [o for o in every if o not in lost]
    assert searched == walked
    assert sorted(set(found)) == walked
    assert bulk == walked
    assert where == [(DAMAGED_FILE, 0), (f"commitlog/{p.name}", a)]
