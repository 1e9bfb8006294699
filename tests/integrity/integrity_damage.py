"""Seeded damage on copies of the real fixture stores (fixtures/rocketmq-stores, see
fixtures/PROVENANCE.md), and a runner for the real ``mqtool`` command in its own process."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "rocketmq-stores"


def copy_store(name: str, dst: Path) -> Path:
    out = dst / name.replace("/", "_") / "store"
    shutil.copytree(FIXTURES / name / "store", out)
    return out


def manifest(name: str, file: str) -> list[dict[str, Any]]:
    text = (FIXTURES / name / "manifest" / file).read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def messages(name: str) -> list[dict[str, Any]]:
    return [r for r in manifest(name, "commitlog.jsonl") if r["kind"] == "msg"]


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (and the names): proves nothing was written."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def run(*args: str | Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "mqtool", *map(str, args)], capture_output=True, text=True,
        timeout=timeout, env=env,
    )


def verify_json(store: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    res = run("verify", store, "--json", *extra)
    assert "Traceback" not in res.stderr, res.stderr
    return res.returncode, json.loads(res.stdout)


def patch(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def read_at(path: Path, offset: int, n: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(n)


def put_i64(path: Path, offset: int, value: int) -> None:
    patch(path, offset, struct.pack(">q", value))


# --- seeded damage on a copy of the journey store: each returns where it must be reported ---
JOURNEY = "4.9.7/journey"


def _journey_msgs() -> list[dict[str, Any]]:
    return messages(JOURNEY)


def torn_tail(store: Path) -> dict[str, Any]:
    """The writer died inside the last record: only TOTALSIZE, MAGICCODE and BODYCRC reached
    the disk."""
    last = _journey_msgs()[-1]
    patch(store / "commitlog" / last["file"], last["fileOffset"] + 12, bytes(last["size"] - 12))
    return {"file": f"commitlog/{last['file']}", "offset": last["fileOffset"], "msg": last}


def zeroed_magic(store: Path) -> dict[str, Any]:
    first = next(m for m in _journey_msgs() if m["file"] == "00000000000000004096")
    patch(store / "commitlog" / first["file"], first["fileOffset"] + 4, bytes(4))
    return {"file": f"commitlog/{first['file']}", "offset": first["fileOffset"], "msg": first}


def crc_flip(store: Path) -> dict[str, Any]:
    """Flip the first body byte of the first record of commitlog/…8192 (inside the window
    RocketMQ's normal recovery reads: the last three files)."""
    m = next(x for x in _journey_msgs() if x["bodyLength"] > 4 and x["file"] ==
             "00000000000000008192")
    path = store / "commitlog" / m["file"]
    # BODY comes before TOPICLEN (1 byte, V1) + TOPIC and PROPERTIESLEN (2) + PROPERTIES
    tail = 1 + len(m["topic"].encode()) + 2 + m["propertiesLength"]
    body_at = m["fileOffset"] + m["size"] - tail - m["bodyLength"]
    patch(path, body_at, bytes([read_at(path, body_at, 1)[0] ^ 0xFF]))
    return {"file": f"commitlog/{m['file']}", "offset": m["fileOffset"], "kind": "crc-mismatch",
            "msg": m}


def cq_unit_past_data(store: Path) -> dict[str, Any]:
    units = [u for u in manifest(JOURNEY, "consumequeue.jsonl")
             if u["topic"] == "JourneyTopic" and u["queueId"] == 0]
    last = units[-1]
    path = store / "consumequeue" / "JourneyTopic" / "0" / last["file"]
    pos = last["fileOffset"] + 20
    assert pos < path.stat().st_size
    end = max(m["phyOffset"] + m["size"] for m in _journey_msgs())
    patch(path, pos, struct.pack(">qiq", end + 100, 200, 0))
    return {"file": f"consumequeue/JourneyTopic/0/{last['file']}", "offset": pos, "kind": "cq"}


def index_entry_damaged(store: Path) -> dict[str, Any]:
    e = manifest(JOURNEY, "index_entries.jsonl")[5]
    path = store / "index" / e["file"]
    slots = (path.stat().st_size - 40) // (4 + 4 * 20)  # RocketMQ's ratio: 4 entries per slot
    pos = 40 + slots * 4 + e["index"] * 20
    put_i64(path, pos + 4, e["phyOffset"] + 3)  # phyOffset now points inside a record
    return {"file": f"index/{e['file']}", "offset": pos, "kind": "index"}


def empty_config_with_bak(store: Path) -> dict[str, Any]:
    (store / "config" / "delayOffset.json").write_bytes(b"")
    return {"file": "config/delayOffset.json", "offset": 0, "kind": "config"}


def delay_offset_beyond_max(store: Path) -> dict[str, Any]:
    p = store / "config" / "delayOffset.json"
    text = p.read_text("utf-8")
    p.write_text(text.replace("3:", "3:9", 1), "utf-8")  # level 3's offset grows a digit
    return {"file": "config/delayOffset.json", "offset": len(text[: text.index("3:")].encode()),
            "kind": "config"}


def checkpoint_ahead(store: Path) -> dict[str, Any]:
    last_ts = max(m["storeTimestamp"] for m in _journey_msgs())
    put_i64(store / "checkpoint", 0, last_ts + 3_600_000)
    return {"file": "checkpoint", "offset": 0, "kind": "checkpoint"}


SEEDS = {
    "torn-tail": torn_tail, "zeroed-magic": zeroed_magic, "crc-flip": crc_flip,
    "cq-unit-past-data": cq_unit_past_data, "index-entry-damaged": index_entry_damaged,
    "empty-config-with-bak": empty_config_with_bak,
    "delay-offset-beyond-max": delay_offset_beyond_max, "checkpoint-ahead": checkpoint_ahead,
}
