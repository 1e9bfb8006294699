"""Damage to a store copy's commitlog file layout, the way operators and disks make it: a file
with a wrong name, a missing file, a file duplicated over its neighbour, a file cut short, and
one flipped bit inside a record's UNIQ_KEY or TAGS property. Each helper works on a copy (never a
fixture) and returns what it did (the file names involved)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

POSITIONS = ("first", "middle", "last")


def data_files(store: Path) -> list[Path]:
    """The commitlog files that hold data (not all zero), in commitlog order."""
    out = []
    for p in sorted((store / "commitlog").iterdir(), key=lambda p: int(p.name)):
        with open(p, "rb") as f:
            head = f.read(8)
        if head.strip(b"\0"):
            out.append(p)
    return out


def pick(store: Path, position: str) -> Path:
    files = data_files(store)
    return {"first": files[0], "middle": files[len(files) // 2], "last": files[-1]}[position]


def file_size(store: Path) -> int:
    return max(p.stat().st_size for p in (store / "commitlog").iterdir())


def _name(offset: int) -> str:
    return f"{offset:020d}"


def misname(store: Path, position: str, delta: int | None = None) -> dict[str, Any]:
    """Rename one data file ``delta`` bytes too high (4,096, or half a file when files are
    that small)."""
    p = pick(store, position)
    size = file_size(store)
    d = delta if delta is not None else (4096 if size > 8192 else size // 2)
    new = p.with_name(_name(int(p.name) + d))
    assert not new.exists(), new
    p.rename(new)
    return {"file": f"commitlog/{p.name}", "renamed": f"commitlog/{new.name}"}


def remove(store: Path, position: str) -> dict[str, Any]:
    p = pick(store, position)
    p.unlink()
    return {"file": f"commitlog/{p.name}"}


def duplicate(store: Path, position: str) -> dict[str, Any]:
    """Copy one data file's bytes over the file after it (an extra file when it is the last),
    as a bad restore does."""
    p = pick(store, position)
    nxt = p.with_name(_name(int(p.name) + file_size(store)))
    shutil.copyfile(p, nxt)
    return {"file": f"commitlog/{p.name}", "copy": f"commitlog/{nxt.name}"}


def shorten(store: Path, position: str, size: int | None = None) -> dict[str, Any]:
    """Cut one data file short (500,000 of each 1,048,576 bytes unless ``size``)."""
    p = pick(store, position)
    full = p.stat().st_size
    n = size if size is not None else full * 500_000 // 1_048_576
    os.truncate(p, n)
    return {"file": f"commitlog/{p.name}", "size": n, "expected": full}


LAYOUT = {"misnamed": misname, "missing": remove, "duplicated": duplicate, "short": shorten}


def flip_property(store: Path, key: str, nth: int = 0) -> dict[str, Any]:
    """Flip one bit inside the ``nth`` record's value of property ``key`` (UNIQ_KEY, TAGS):
    no CRC covers the properties in 4.x, so the record still reads."""
    from mqtool.formats.commitlog import CommitLogMessage
    from mqtool.formats.walker import scan_file

    seen = 0
    for p in sorted((store / "commitlog").iterdir(), key=lambda p: int(p.name)):
        data = p.read_bytes()
        for item in scan_file(data, file=p.name, file_start=int(p.name)):
            if not isinstance(item, CommitLogMessage) or key not in item.properties:
                continue
            if seen < nth:
                seen += 1
                continue
            raw = item.properties_raw.encode()
            pos = item.physical_offset - int(p.name)
            props_at = pos + item.total_size - len(raw)
            at = props_at + raw.index(f"{key}\x01".encode()) + len(key) + 1
            value = item.properties[key]
            flipped = bytes([data[at] ^ 0x01])  # a letter or digit stays printable
            with open(p, "r+b") as f:
                f.seek(at)
                f.write(flipped)
            return {"file": f"commitlog/{p.name}", "offset": pos, "phy": item.physical_offset,
                    "key": key, "value": value,
                    "flipped": chr(flipped[0]) + value[1:], "topic": item.topic}
    raise AssertionError(f"no record with {key}")
