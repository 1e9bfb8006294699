"""scan finds what verify finds: seeded random damage to the consume queues and index files of
stores RocketMQ wrote (a unit's tagsCode; an index entry's keyHash, phyOffset, timeDiff or
prevIndex; a hash slot), then the integrity audit's findings in those files against verify's,
on the same copy: the same files and offsets, nothing more, nothing less."""

from __future__ import annotations

import random
import shutil
import struct
from pathlib import Path

import pytest
from sparkfix import NOW_MS, spark  # noqa: F401

from conftest import store_dir
from mqtool.formats.indexfile import index_geometry

STORES = ["4.9.7/journey", "4.9.7/plain", "5.3.3/plain", "5.3.3/pop", "5.3.3/timer",
          "5.3.3/trace"]
CASES = 12
DAMAGED = ("consumequeue/", "index/")


def _units(root: Path) -> list[Path]:
    """The consume-queue files of ``root`` that hold units (not LMQ queues: scan leaves them
    to verify, and says so)."""
    return [p for p in (root / "consumequeue").rglob("*")
            if p.is_file() and p.name.isdigit() and "%LMQ%" not in str(p)
            and p.stat().st_size >= 20]


def _damage_unit(rnd: random.Random, path: Path) -> str:
    data = bytearray(path.read_bytes())
    units = [i for i in range(0, len(data) - 19, 20) if any(data[i : i + 20])]
    at = rnd.choice(units)
    (tag,) = struct.unpack(">q", data[at + 12 : at + 20])
    # (a schedule unit's deliver time 1 s off is a changed delay level: no damage)
    how = rnd.choice(["+1", "bit", "random"] if "SCHEDULE_TOPIC" in str(path)
                     else ["+1", "+1000", "bit", "random"])
    new = {"+1": tag + 1, "+1000": tag + 1000, "bit": tag ^ (1 << rnd.randrange(63)),
           "random": rnd.randrange(-(2**63), 2**63)}[how]
    data[at + 12 : at + 20] = struct.pack(">q", new)
    path.write_bytes(bytes(data))
    return f"{path.name}@{at} tagsCode {how}"


def _damage_index(rnd: random.Random, path: Path) -> str:
    data = bytearray(path.read_bytes())
    geo = index_geometry(len(data), buf=bytes(data))
    (count,) = struct.unpack(">i", data[36:40])
    how = rnd.choice(["keyHash", "phyOffset", "timeDiff", "timeDiff", "prevIndex", "slot"])
    if how == "timeDiff" and count < 3:
        how = "keyHash"
    if how == "slot":
        used = [i for i in range(geo.hash_slot_num)
                if struct.unpack(">i", data[geo.slot_pos(i) : geo.slot_pos(i) + 4])[0]]
        at = geo.slot_pos(rnd.choice(used))
        data[at : at + 4] = struct.pack(">i", rnd.choice([0, count + 3, -1]))
    else:  # (entry 1's timeDiff is not checked: the broker measures it against another time)
        n = rnd.randrange(2 if how == "timeDiff" else 1, count)
        at = geo.entry_pos(n)
        kh, phy, td, prev = struct.unpack(">iqii", data[at : at + 20])
        if how == "keyHash":
            kh ^= 1 << rnd.randrange(31)
        elif how == "phyOffset":
            phy += rnd.choice([1, 8, -4, 1000])
        elif how == "timeDiff":
            td = max(-(2**31), min(td + rnd.choice([1, -1, 1000, -1000]), 2**31 - 1))
        else:
            prev = rnd.choice([n, n + 7, -1])
        data[at : at + 20] = struct.pack(">iqii", kh, phy, td, prev)
    path.write_bytes(bytes(data))
    return f"{path.name}@{at} {how}"


@pytest.mark.slow
@pytest.mark.parametrize("case", range(CASES))
def test_scan_finds_in_damaged_files_what_verify_finds(spark, tmp_path: Path,  # noqa: F811
                                                       case: int) -> None:
    from mqtool.integrity.checks import verify
    from mqtool.spark.scan import run_scan

    rnd = random.Random(case)
    name = STORES[case % len(STORES)]
    root = tmp_path / "store"
    shutil.copytree(store_dir(name), root)
    index = [p for p in sorted((root / "index").iterdir())
             if struct.unpack(">i", p.read_bytes()[36:40])[0] > 1]
    done = []
    for _ in range(rnd.randint(1, 3)):
        if rnd.random() < 0.4:
            done.append(_damage_unit(rnd, rnd.choice(_units(root))))
        else:
            done.append(_damage_index(rnd, rnd.choice(index)))
    found = {(f.file, f.offset) for f in verify(root).errors if f.file.startswith(DAMAGED)}
    got = run_scan(spark, [str(root)], now_ms=NOW_MS, split_size=1 << 16, audits=["integrity"])
    said = {(f["file"], f["offset"]) for f in got.summary["integrity"]
            if f["severity"] == "error" and f["file"].startswith(DAMAGED)}
    assert found, f"{name}: {done}: verify found nothing"
    assert said == found, f"{name}: {done}"
