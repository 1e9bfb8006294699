"""A closed stdout (``mqtool ... | head``) is no error of a command that prints: no traceback, no
error line, and not status 1 (which says the store has findings); the command's findings
still go to stderr with their status.

stdout is a pipe whose reading end is closed before the command starts, so its first write
fails: the same for a command whatever the size of its output. Both ways of printing are
provoked: plain rows (a pipe) and rich's tables (``COLUMNS`` set, as on a terminal).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JOURNEY = REPO / "fixtures" / "rocketmq-stores" / "4.9.7" / "journey" / "store"
ID = "C000020247AB5FFD2B276B8361EB0007"

#: Every command that prints what it read of a store (STORE is put first).
PRINTERS: dict[str, list[str]] = {
    "inspect": [], "messages": [], "cq": [], "msg": [ID], "index": [],
    "index --key": ["--key", "j-always-0"], "trace": [ID], "verify": [],
    "repair": ["--dry-run"], "dlq list": [], "dlq show": ["-g", "cg_journey"],
    "dlq export": ["-g", "cg_journey"], "store status": [],
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the journey store (``store status`` opens it for writing)."""
    root = tmp_path_factory.mktemp("closed") / "store"
    shutil.copytree(JOURNEY, root)
    return root


def _closed_stdout_run(args: list[str], columns: str | None) -> subprocess.CompletedProcess[str]:
    r, w = os.pipe()
    os.close(r)  # nobody reads: the command's first write to stdout fails (EPIPE)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["NO_COLOR"] = "1"
    if columns is not None:
        env["COLUMNS"] = columns
    try:
        return subprocess.run([sys.executable, "-m", "mqtool", *args], stdout=w,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    finally:
        os.close(w)


@pytest.mark.parametrize("columns", [None, "120"], ids=["plain", "rich"])
@pytest.mark.parametrize("name", sorted(PRINTERS))
def test_a_closed_stdout_ends_quietly(name: str, columns: str | None, store: Path) -> None:
    cmd = name.split(" --")[0].split()
    run = _closed_stdout_run([*cmd, str(store), *PRINTERS[name]], columns)
    assert "Traceback" not in run.stderr, run.stderr
    assert "error" not in run.stderr.lower(), run.stderr
    assert run.returncode == 0, (run.returncode, run.stderr)


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["inspect", "--help"],
                                  ["store", "--help"]], ids=" ".join)
def test_help_and_version_too(args: list[str]) -> None:
    run = _closed_stdout_run(args, None)
    assert "Traceback" not in run.stderr and run.returncode == 0, (run.returncode, run.stderr)


def test_damage_is_still_said_when_stdout_is_closed(store: Path, tmp_path: Path) -> None:
    """A report is dropped, not the command: the damage lines still go to stderr and the
    status stays 1 (a streaming listing stops at its first row instead, exit 0)."""
    root = tmp_path / "torn"
    shutil.copytree(store, root)
    last = root / "commitlog" / "00000000000000016384"
    data = bytearray(last.read_bytes())
    data[18754 - 16384 + 60:] = bytes(len(data) - (18754 - 16384 + 60))
    last.write_bytes(bytes(data))
    for columns in (None, "120"):
        for cmd in (["inspect"], ["messages"], ["cq"]):
            run = _closed_stdout_run([*cmd, str(root)], columns)
            assert run.returncode == 1, (cmd, run.returncode, run.stderr)
            assert "error: commitlog/00000000000000016384 @ 0x942" in run.stderr, run.stderr
        run = _closed_stdout_run(["verify", str(root)], columns)
        assert run.returncode == 1 and "error finding(s)" in run.stderr, run.stderr
    run = _closed_stdout_run(["messages", str(root), "--jsonl"], None)
    assert run.returncode == 0 and not run.stderr, run.stderr  # stopped before the torn end


def test_a_stopped_listing_says_the_damage_it_met(store: Path, tmp_path: Path) -> None:
    """``messages --jsonl`` stops at its first row when stdout is closed; damage the walk met
    before that row (the first record's magic) is still said, exit 1."""
    root = tmp_path / "early"
    shutil.copytree(store, root)
    first = root / "commitlog" / "00000000000000000000"
    data = bytearray(first.read_bytes())
    data[4:8] = (1).to_bytes(4, "big")
    first.write_bytes(bytes(data))
    run = _closed_stdout_run(["messages", str(root), "--jsonl"], None)
    assert run.returncode == 1, (run.returncode, run.stderr)
    assert "error: commitlog/00000000000000000000 @ 0x0" in run.stderr, run.stderr


def test_the_json_forms_too(store: Path) -> None:
    for args in (["inspect", "--json"], ["messages", "--jsonl"], ["verify", "--json"],
                 ["store", "status", "--json"]):
        cmd = [a for a in args if not a.startswith("--")]
        run = _closed_stdout_run([*cmd, str(store), *(a for a in args if a.startswith("--"))],
                                 None)
        assert "Traceback" not in run.stderr and run.returncode == 0, (args, run.returncode,
                                                                         run.stderr)


#: Commands that write (a store, a copy) and then print what they did.
WRITERS: dict[str, list[str]] = {
    "store init": ["store", "init", "{new}"],
    "store produce": ["store", "produce", "{new}", "-t", "T", "--count", "5"],
    "store consume": ["store", "consume", "{new}", "-g", "g", "-t", "T"],
    "store tick": ["store", "tick", "{new}"],
    "demo": ["demo", "{new}"],
    "dlq resend": ["dlq", "resend", "{store}", "-g", "cg_journey", "--target", "{new}"],
}


@pytest.mark.parametrize("columns", [None, "120"], ids=["plain", "rich"])
def test_writers_end_quietly_and_keep_their_work(columns: str | None, store: Path,
                                                 tmp_path: Path) -> None:
    new = tmp_path / "new"
    for name, args in WRITERS.items():
        where = new / "demo" if name == "demo" else new / "resent" if name == "dlq resend" else new
        run = _closed_stdout_run([a.format(new=where, store=store) for a in args], columns)
        assert "Traceback" not in run.stderr and run.returncode == 0, (name, run.returncode,
                                                                         run.stderr)
    # what they wrote is there: the 5 messages, the demo store, the resent copies
    status = subprocess.run([sys.executable, "-m", "mqtool", "store", "status", str(new),
                             "--json"], capture_output=True, text=True, timeout=120)
    assert status.returncode == 0 and '"T"' in status.stdout, status.stderr
    assert (new / "demo" / "commitlog").is_dir()
    resent = subprocess.run([sys.executable, "-m", "mqtool", "messages", str(new / "resent"),
                             "--jsonl"], capture_output=True, text=True, timeout=120)
    assert resent.returncode == 0 and resent.stdout.count("\n") >= 1, resent.stderr
