"""Read commands never change a store: every file checksummed before and after every command.

For a copy of each fixture store, every file's sha256, size and mtime (ns) and the set of
files and directories are recorded; then each read command runs (every output mode that reads
differently) and the snapshot must be identical afterwards: no byte changed, no file touched,
created or removed, neither in the store nor beside it (``dlq resend --dry-run`` is pointed at
a target that must not be created).

Every read command is run on every store, and its exit status is checked: a command that
disappears, or starts failing, fails this test (it is never skipped). The one exception is a
command slot the CLI reserves for work that has not landed yet (``verify``): it is run when it
is registered. ``test_every_command_is_classified`` makes sure no command escapes: each
registered command is either read-only (covered here) or a named writer.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from robust_harness import STORES, run_inproc, run_subprocess

from mqtool.cli import app
from mqtool.store import Store

# Commands (top level, or "group sub") that write by design, and are therefore not run here.
WRITERS = {"demo", "store", "dlq resend", "repair", "serve"}
# Reserved CLI slots (mqtool/cli/__init__.py) for read commands that have not landed yet: run
# when registered. Everything else in READ_COMMANDS must be registered.
RESERVED_READ = {"verify"}
# Spark: too slow for the per-store loop; covered by test_spark_scan_changes_nothing.
SLOW_READ = {"scan"}


def snapshot(root: Path) -> dict[str, tuple[str, int, int] | str]:
    """path -> (sha256, size, mtime_ns) for files, "dir" for directories (mtime_ns too)."""
    out: dict[str, tuple[str, int, int] | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        for name in dirnames:
            p = d / name
            out[p.relative_to(root).as_posix()] = f"dir {p.stat().st_mtime_ns}"
        for name in filenames:
            p = d / name
            st = p.stat()
            h = hashlib.sha256()
            with open(p, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
            out[p.relative_to(root).as_posix()] = (h.hexdigest(), st.st_size, st.st_mtime_ns)
    return out


def registered() -> set[str]:
    """Every command this mqtool has, as "name" or "group sub"."""
    from typer.main import get_command

    top: Any = get_command(app)
    out: set[str] = set()
    for name, cmd in top.commands.items():
        out.add(name)
        out.update(f"{name} {sub}" for sub in getattr(cmd, "commands", {}))
    return out


@dataclass(frozen=True)
class Facts:
    """What the read commands are pointed at, taken from the store copy."""

    root: str
    offset: int
    offset_msg_id: str
    uniq: str | None
    key: str
    group: str  # a group with a %DLQ% topic when the store has one
    has_dlq: bool
    target: str  # dry-run resend target beside the store; must never be created


def facts(root: Path, target: Path) -> Facts:
    with Store.open(root) as st:
        first = next(iter(st.messages()))
        uniq = next((m.uniq_key for m in st.messages() if m.uniq_key), None)
        key = next((k for m in st.messages() for k in m.key_list), "order-0")
        dlq = next((t for t in st.topics() if t.startswith("%DLQ%")), None)
    return Facts(str(root), first.physical_offset, first.offset_msg_id, uniq, key,
                 (dlq or "%DLQ%cg_journey").removeprefix("%DLQ%"), dlq is not None, str(target))


# command name -> argument lists built from the store's facts. Each runs on every store.
READ_COMMANDS: dict[str, Callable[[Facts], list[list[str]]]] = {
    "inspect": lambda f: [["inspect", f.root], ["inspect", f.root, "--json"]],
    "messages": lambda f: [
        ["messages", f.root, "--jsonl", "--body", "base64"],
        ["messages", f.root, "--json", "--limit", "5"],
        ["messages", f.root, "--limit", "20"],
    ],
    "cq": lambda f: [["cq", f.root, "--jsonl"], ["cq", f.root, "--json"], ["cq", f.root]],
    "msg": lambda f: [
        ["msg", f.root, str(f.offset), "--json"], ["msg", f.root, f.offset_msg_id],
        *([["msg", f.root, f.uniq, "--json"]] if f.uniq else []),
    ],
    "index": lambda f: [
        ["index", f.root], ["index", f.root, "--json"],
        ["index", f.root, "--key", f.key, "--json"],
    ],
    "trace": lambda f: [
        ["trace", f.root, f.uniq or f.offset_msg_id, "--json"],
        ["trace", f.root, f.uniq or f.offset_msg_id],
        ["trace", f.root, "--key", f.key, "--json"],
    ],
    "dlq list": lambda f: [["dlq", "list", f.root, "--json"], ["dlq", "list", f.root]],
    "dlq show": lambda f: [
        ["dlq", "show", f.root, "--group", f.group, "--json"],
        ["dlq", "show", f.root, "--group", f.group],
    ],
    "dlq export": lambda f: [
        ["dlq", "export", f.root, "--group", f.group],
        ["dlq", "export", f.root, "--group", f.group, "--format", "csv"],
    ],
    "dlq resend --dry-run": lambda f: [
        ["dlq", "resend", f.root, "--group", f.group, "--target", f.target, "--dry-run"],
        ["dlq", "resend", f.root, "--group", f.group, "--target", f.root, "--dry-run", "--json"],
    ],
    "verify": lambda f: [["verify", f.root], ["verify", f.root, "--json"]],
}


def _command_of(entry: str) -> str:
    return entry.removesuffix(" --dry-run")


def test_every_command_is_classified() -> None:
    """A command nobody classified would escape the read-only check: fail instead."""
    have = registered()
    groups = {c for c in have if any(o.startswith(c + " ") for o in have)}
    leaves = have - groups
    covered = {_command_of(e) for e in READ_COMMANDS} | SLOW_READ | WRITERS
    unclassified = {c for c in leaves if c not in covered and c.split()[0] not in WRITERS}
    assert not unclassified, f"classify these as read (READ_COMMANDS) or WRITERS: {unclassified}"
    # Every read command this test names exists (only reserved slots may be absent).
    missing = {_command_of(e) for e in READ_COMMANDS} - have - RESERVED_READ
    assert not missing, f"read commands gone from the CLI: {missing}"
    assert "dlq resend" in have and SLOW_READ <= have


def _expected_exit(name: str, entry: str, f: Facts) -> tuple[int, str | None]:
    """Exit status each command must give on each fixture store (and its error, if any).

    The fixtures are undamaged stores, so every read command succeeds (0). On a store without
    any %DLQ% topic, the group-specific dlq commands name an unknown group: one error line, 1.
    Only ``verify`` on the store of a killed broker may report what the kill left (1).
    """
    if entry.startswith("dlq ") and entry != "dlq list" and not f.has_dlq:
        return 1, "unknown consumer group"
    if entry == "verify" and name == "4.9.7/plain-crashed":
        return -1, None  # 0 or 1
    return 0, None


@pytest.mark.parametrize("name", list(STORES))
def test_read_commands_change_nothing(tmp_path: Path, name: str) -> None:
    root = tmp_path / "store"
    shutil.copytree(STORES[name], root)
    f = facts(root, tmp_path / "dry-run-target")
    have = registered()
    before = snapshot(tmp_path)
    assert len(before) > 5
    ran: set[str] = set()
    for entry, build in READ_COMMANDS.items():
        if _command_of(entry) in RESERVED_READ and _command_of(entry) not in have:
            continue
        for args in build(f):
            run = run_inproc(args)
            assert "Traceback" not in run.stderr, (args, run.stderr)
            code, error = _expected_exit(name, entry, f)
            assert run.exit_code == code or (code == -1 and run.exit_code in (0, 1)), (
                args, run.exit_code, run.stdout[-1000:], run.stderr[-1000:])
            if error is not None:
                assert run.stderr.startswith("error: ") and error in run.stderr, run.stderr
            after = snapshot(tmp_path)
            changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
            assert not changed, (args, sorted(changed))
        ran.add(entry)
    assert ran >= set(READ_COMMANDS) - RESERVED_READ


def test_dry_run_resend_selects_and_writes_nothing(tmp_path: Path) -> None:
    """On the store with a DLQ, the dry run really selects records (so it is really exercised)."""
    root = tmp_path / "store"
    shutil.copytree(STORES["4.9.7/journey"], root)
    f = facts(root, tmp_path / "target")
    before = snapshot(tmp_path)
    run = run_inproc(["dlq", "resend", f.root, "--group", f.group, "--target", f.target,
                      "--dry-run", "--json"])
    assert run.exit_code == 0, run.stderr
    assert "would" in run.stdout.lower() or '"dryRun": true' in run.stdout, run.stdout[:500]
    assert snapshot(tmp_path) == before
    assert not Path(f.target).exists()


@pytest.mark.slow
def test_spark_scan_changes_nothing(tmp_path: Path) -> None:
    assert "scan" in registered()
    roots = []
    for name in STORES:
        root = tmp_path / name.replace("/", "_")
        shutil.copytree(STORES[name], root)
        roots.append(root)
    before = snapshot(tmp_path)
    run = run_subprocess(["scan", *map(str, roots), "--json"], limit_memory=False, timeout=300)
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.exit_code == 0, (run.exit_code, run.stderr[-2000:])
    assert snapshot(tmp_path) == before
