"""Read commands never change a store: every file checksummed before and after every command.

For a copy of each fixture store, every file's sha256, size and mtime (ns) and the set of
files and directories are recorded; then each read command runs (every output mode that reads
differently) and the snapshot must be identical afterwards: no byte changed, no file touched,
created or removed. Commands of other groups (trace, dlq list/show/export, scan) are included
when this mqtool has them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from robust_harness import STORES, run_inproc, run_subprocess

from mqtool.cli import app
from mqtool.store import Store


def snapshot(root: Path) -> dict[str, tuple[str, int, int] | str]:
    """path -> (sha256, size, mtime_ns) for files, "dir" for directories."""
    out: dict[str, tuple[str, int, int] | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        for name in dirnames:
            out[(d / name).relative_to(root).as_posix()] = "dir"
        for name in filenames:
            p = d / name
            st = p.stat()
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for chunk in iter(lambda f=f: f.read(1 << 20), b""):  # type: ignore[misc]
                    h.update(chunk)
            out[p.relative_to(root).as_posix()] = (h.hexdigest(), st.st_size, st.st_mtime_ns)
    return out


def _commands() -> set[str]:
    """Top-level commands and groups this mqtool has."""
    from typer.main import get_command

    return set(get_command(app).commands)  # type: ignore[attr-defined]


def read_commands(root: Path) -> list[list[str]]:
    with Store.open(root) as st:
        first = next(iter(st.messages()))
        uniq = next((m.uniq_key for m in st.messages() if m.uniq_key), None)
        key = next((k for m in st.messages() for k in m.key_list), "order-0")
        dlq = next((t for t in st.topics() if t.startswith("%DLQ%")), "%DLQ%cg_journey")
    r = str(root)
    cmds = [
        ["inspect", r], ["inspect", r, "--json"],
        ["messages", r, "--jsonl", "--body", "base64"], ["messages", r, "--json", "--limit", "5"],
        ["messages", r, "--limit", "20"],
        ["cq", r, "--jsonl"], ["cq", r, "--json"],
        ["msg", r, str(first.physical_offset), "--json"], ["msg", r, first.offset_msg_id],
        ["index", r], ["index", r, "--json"], ["index", r, "--key", key, "--json"],
    ]
    if uniq:
        cmds.append(["msg", r, uniq, "--json"])
    have = _commands()
    if "trace" in have:
        cmds.append(["trace", r, uniq or first.offset_msg_id, "--json"])
        cmds.append(["trace", r, "--key", key, "--json"])
    if "dlq" in have:
        group = dlq.removeprefix("%DLQ%")
        cmds += [
            ["dlq", "list", r, "--json"],
            ["dlq", "show", r, "--group", group, "--json"],
            ["dlq", "export", r, "--group", group],
            ["dlq", "export", r, "--group", group, "--format", "csv"],
        ]
    return cmds


@pytest.mark.parametrize("name", list(STORES))
def test_read_commands_change_nothing(tmp_path: Path, name: str) -> None:
    root = tmp_path / "store"
    shutil.copytree(STORES[name], root)
    before = snapshot(root)
    assert len(before) > 5
    for cmd in read_commands(root):
        run = run_inproc(cmd)
        assert "Traceback" not in run.stderr
        after = snapshot(root)
        changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        assert not changed, (cmd, sorted(changed))


@pytest.mark.slow
def test_spark_scan_changes_nothing(tmp_path: Path) -> None:
    if "scan" not in _commands():  # pragma: no cover - scan lands with the Spark work
        return
    roots = []
    for name in STORES:
        root = tmp_path / name.replace("/", "_")
        shutil.copytree(STORES[name], root)
        roots.append(root)
    before = {r: snapshot(r) for r in roots}
    run = run_subprocess(["scan", *map(str, roots), "--json"], limit_memory=False, timeout=300)
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    for r in roots:
        assert snapshot(r) == before[r], r

