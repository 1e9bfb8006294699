"""A record with torn properties (formats.commitlog.properties_torn) is an error finding at the
record, but RocketMQ's recovery reads past it: ``checkMessageAndReturnSize`` checks the body CRC
and, only with ``forceVerifyPropCRC`` (default false, 5.x), the property CRC; 4.9.7 checks no
property bytes. So verify's "restart would lose" loses nothing for it, while ``repair`` cuts
the copy there (the records after it are reported), so the copy verifies clean: on 5.3.3 the
timer files too (their units point past the cut; tests/integrity/test_timer_repair.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from integrity_damage import copy_store, run, verify_json

from mqtool.store import Store


def _tear_middle_record(root: Path) -> tuple[str, int]:
    """Zero the properties of a record in the middle of the last multi-record file (inside
    the files RocketMQ's recovery reads; damage before them is reported, not repaired)."""
    with Store.open(root) as st:
        for f in reversed(st.commitlog_files):
            msgs = [m for m in st.messages() if f.start <= m.physical_offset < f.start + f.size]
            if len(msgs) >= 3:
                m = msgs[len(msgs) // 2]
                plen = len(m.properties_raw.encode())
                at = m.physical_offset - f.start + m.total_size - plen
                rel, pos = f.rel, m.physical_offset - f.start
                break
        else:  # pragma: no cover
            raise AssertionError("no file with three records")
    with (root / rel).open("r+b") as fh:
        fh.seek(at)
        fh.write(bytes(plen))
    return rel, pos


@pytest.mark.parametrize("name", ["4.9.7/journey", "5.3.3/plain"])
def test_torn_properties_are_kept_by_recovery_and_cut_by_repair(name: str,
                                                                tmp_path: Path) -> None:
    src = copy_store(name, tmp_path)
    rel, pos = _tear_middle_record(src)
    rc, doc = verify_json(src)
    assert rc == 1
    torn = [f for f in doc["findings"] if f["kind"] == "properties-torn"]
    assert [(f["file"], f["offset"]) for f in torn] == [(rel, pos)]
    assert doc["restartWouldLose"]["lostMessages"] == 0  # the broker reads past it
    # a 4.x store has no timer files, so its restart loss has no timer part
    assert ("timer" in doc["restartWouldLose"]) == name.startswith("5.")
    out = tmp_path / "repaired"
    res = run("repair", src, "--out", out, "--json")
    assert res.returncode == 0, res.stderr
    changes = json.loads(res.stdout)["changes"]
    assert any(c["file"] == rel and c["offset"] == pos for c in changes), changes
    if name.startswith("5."):
        # every timer record is after the torn one: the timerlog is truncated to nothing, the
        # wheel's slots emptied, the timer checkpoint follows
        files = {c["file"] for c in changes}
        assert {"timerlog/00000000000000000000", "timerwheel", "config/timercheck"} <= files
        assert any(c["file"] == "timerlog/00000000000000000000" and c["offset"] == 0
                   for c in changes), changes
    rc2, vdoc = verify_json(out)
    bad = [f for f in vdoc["findings"] if f["severity"] in ("error", "warning")]
    assert rc2 == 0 and bad == [], bad
