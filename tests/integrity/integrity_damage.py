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
