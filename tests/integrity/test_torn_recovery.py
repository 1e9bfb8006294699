"""A record with torn properties (formats.commitlog.properties_torn) is an error finding at the
record, but RocketMQ's recovery reads past it: ``checkMessageAndReturnSize`` checks the body CRC
and, only with ``forceVerifyPropCRC`` (default false, 5.x), the property CRC; 4.9.7 checks no
property bytes. So verify's "restart would lose" loses nothing for it, and ``repair`` keeps it
and every record after it, as the broker does: the record is reported as not repaired (exit 1),
the copy holds every message of the damaged store (on 5.3.3 the timer files are left whole)."""

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
def test_torn_properties_are_kept_by_recovery_and_by_repair(name: str,
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
    assert res.returncode == 1, res.stderr
    rep = json.loads(res.stdout)
    assert any(n.startswith(f"{rel} @ {pos:#x}: a record whose properties are torn")
               for n in rep["notRepaired"]), rep["notRepaired"]
    assert not any(c["file"] == rel for c in rep["changes"]), rep["changes"]
    assert not any(c["file"].startswith(("timerlog/", "timerwheel")) for c in rep["changes"])
    rc2, vdoc = verify_json(out)
    assert rc2 == 1
    assert vdoc["summary"]["messages"] == doc["summary"]["messages"]
    assert vdoc["summary"]["consumeQueueUnits"] == doc["summary"]["consumeQueueUnits"]
    # what verify says of the damaged store (the record, the unit pointing at it), of the copy
    errors = [[(f["file"], f["offset"]) for f in d["findings"] if f["severity"] == "error"]
              for d in (doc, vdoc)]
    assert errors[1] == errors[0] and (rel, pos) in errors[1]
