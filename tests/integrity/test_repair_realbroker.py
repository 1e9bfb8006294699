"""A real RocketMQ broker (tests/realmq.py: 4.9.7 and 5.3.3 from Maven Central, name server and
broker JVMs) on `mqtool repair`'s copy of a store it wrote itself, after the store was damaged:
one middle commitlog file renamed 4,096 bytes too high and the file after it removed. The broker
starts on the copy, the official push consumer gets every message whose record survived (and
no other), and the broker stops cleanly (SIGTERM handled, no abort file left).

The store is a copy of the one the cluster run of tests/realmq_run.py left at its clean stop
(300 messages from the official producer in 16 KiB commitlog files), made once per version for
this file and tests/realmq/test_realmq.py."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from integrity_damage import ROOT, run, tree_digest

sys.path.insert(0, str(ROOT / "tests"))
import realmq  # noqa: E402
from realmq_run import CONF, COUNT, TOPIC, written  # noqa: E402

pytestmark = pytest.mark.slow

FILE = int(CONF["mappedFileSizeCommitLog"])  # small commitlog files: the messages span several


def _phy(offset_msg_id: str) -> int:
    """The commitlog offset an offsetMsgId carries (its last 8 bytes)."""
    return int(offset_msg_id[-16:], 16)


@pytest.mark.parametrize("version", realmq.VERSIONS)
def test_real_broker_serves_the_repaired_copy(version: str, tmp_path: Path,
                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    written_run = written(version, tmp_path_factory)
    assert written_run.stop_code == 143  # the broker's clean stop left this store
    sent = written_run.sent
    assert len(sent) == COUNT
    store = tmp_path / "store"
    shutil.copytree(written_run.clean, store)
    data = [p for p in sorted((store / "commitlog").iterdir()) if p.read_bytes()[:8].strip(b"\0")]
    assert len(data) >= 4, [p.name for p in data]
    misnamed, missing = data[len(data) // 2 - 1], data[len(data) // 2]
    misnamed.rename(misnamed.with_name(f"{int(misnamed.name) + 4096:020d}"))
    missing.unlink()
    gone = range(int(missing.name), int(missing.name) + FILE)
    kept = {s["key"] for s in sent if _phy(str(s["offsetMsgId"])) not in gone}
    assert 0 < len(kept) < COUNT

    before = tree_digest(store)
    out = tmp_path / "repaired"
    res = run("repair", store, "--out", out, "--json")
    assert res.returncode == 1, res.stderr  # the missing file is reported, not repaired
    assert tree_digest(store) == before
    rep = json.loads(res.stdout)
    assert any(c["after"] == f"renamed commitlog/{misnamed.name}" for c in rep["changes"])
    assert any(n.startswith(f"commitlog/{missing.name}: missing") for n in rep["notRepaired"])

    broker = realmq.Cluster(version, out, broker_conf=CONF, home=tmp_path / "home-2")
    broker.start()  # the reput service need not cross the missing file: start returns
    try:
        got = realmq.consume_all(version, broker.namesrv_addr, TOPIC, "repaired_group",
                                 len(kept))
    finally:
        code = broker.stop()
    assert {m["keys"] for m in got} == kept
    by_key = {s["key"]: s for s in sent}
    for m in got:
        s = by_key[m["keys"]]
        assert (m["offsetMsgId"], m["queueId"], m["queueOffset"], m["body"]) == (
            s["offsetMsgId"], s["queueId"], s["queueOffset"], s["key"])
    assert code == 143 and not (out / "abort").exists()
