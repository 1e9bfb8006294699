"""Shared helpers for the bad-input and read-only tests (imported as ``robust_harness``).

Damaged stores are always built from copies of ``fixtures/rocketmq-stores/...`` in a temporary
directory; the fixtures themselves are never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from typer.testing import CliRunner

from mqtool.cli import app

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures" / "rocketmq-stores"
STORES = {
    "4.9.7/plain": FIXTURES / "4.9.7" / "plain" / "store",
    "4.9.7/plain-crashed": FIXTURES / "4.9.7" / "plain-crashed" / "store",
    "4.9.7/journey": FIXTURES / "4.9.7" / "journey" / "store",
    "5.3.3/plain": FIXTURES / "5.3.3" / "plain" / "store",
}

# Budget: the whole directory should stay well under a minute on a shared 2-core box.
# MQTOOL_FUZZ_SCALE=20 scales the property tests up for a long local fuzz run.
FUZZ_SCALE = float(os.environ.get("MQTOOL_FUZZ_SCALE", "1"))


def fuzz_settings(n: int) -> settings:
    """Hypothesis settings for ``n`` examples (times MQTOOL_FUZZ_SCALE), derandomised."""
    return settings(
        max_examples=max(1, int(n * FUZZ_SCALE)), deadline=None, derandomize=FUZZ_SCALE == 1,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )


# `error: <file> @ 0x<hex>: <detail>`, or for whole-file problems `error: <file>: <detail>`
ERROR_LINE = re.compile(
    r"^error: (?P<file>[^\n@]*?[^\s@])(?: @ 0x(?P<off>[0-9a-f]+)(?: \(phy (?P<phy>\d+)\))?)?: "
    r"\S.*$"
)
TIMEOUT_S = 30
MEMORY_LIMIT = 1536 * 1024 * 1024  # address space cap for subprocess runs (bytes)


def copy_store(name: str, dest: Path) -> Path:
    """A private copy of fixture store ``name`` under ``dest`` (returned: the store root)."""
    root = dest / name.replace("/", "_")
    shutil.copytree(STORES[name], root)
    return root


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]


_runner = CliRunner()


def run_inproc(args: list[str]) -> Run:
    """The CLI in-process (fast). A Python exception escaping the app fails the test."""
    res = _runner.invoke(app, [str(a) for a in args], catch_exceptions=True)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        import traceback

        tb = "".join(traceback.format_exception(res.exception))
        raise AssertionError(f"mqtool {' '.join(map(str, args))} raised:\n{tb}")
    return Run(res.exit_code, res.stdout, res.stderr)


def _limit_memory() -> None:  # runs in the child before exec
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_subprocess(
    args: list[str], *, limit_memory: bool = True, timeout: float = TIMEOUT_S
) -> Run:
    """``python -m mqtool`` in a child with a memory cap and a timeout (a hang fails).

    ``limit_memory=False`` for commands that start a JVM (Spark reserves far more address
    space than it uses).
    """
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200", PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mqtool", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO,
        preexec_fn=_limit_memory if limit_memory else None, check=False,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def assert_clean_failure(run: Run, *, file: str | None = None, offset: bool = True,
                         exit_code: int = 1) -> None:
    """Exit ``exit_code`` (1: findings; 2: a path that names no store) with one well-formed
    line per finding (no traceback), one of them naming ``file`` (with a byte offset inside it
    when ``offset``)."""
    assert "Traceback" not in run.stderr, run.stderr
    assert run.exit_code == exit_code, (run.exit_code, run.stdout[-500:], run.stderr)
    lines = run.error_lines
    assert lines, run.stderr
    errors = []
    for ln in lines:
        if ln.startswith("warning: "):
            continue
        m = ERROR_LINE.match(ln)
        assert m, ln
        errors.append(m)
    assert errors, run.stderr
    if file is not None:
        named = [m for m in errors if file in m["file"]]
        assert named, (file, run.stderr)
        if offset:
            assert any(m["off"] is not None for m in named), run.stderr


def assert_no_crash(run: Run) -> None:
    """Whatever the outcome: no traceback, and stderr holds only one-line messages."""
    assert "Traceback" not in run.stderr, run.stderr
    assert run.exit_code in (0, 1, 2), (run.exit_code, run.stderr)
    for ln in run.error_lines:
        assert ln.startswith(("error: ", "warning: ")) or run.exit_code == 2, ln


# --- locating and damaging records in a store copy ---------------------------------------------
@dataclass(frozen=True)
class RecordAt:
    """One commitlog message record of a store copy: file, position in it, field offsets."""

    path: Path
    pos: int  # byte position in the file
    total_size: int
    props_pos: int  # position of the first properties byte in the file
    props_len: int
    topic_pos: int
    topic_len: int


def records(root: Path) -> list[RecordAt]:
    """Every message record of the store copy at ``root``, in physical order."""
    from mqtool.formats.commitlog import CommitLogMessage
    from mqtool.formats.walker import scan_file

    out = []
    for p in sorted((root / "commitlog").iterdir()):
        data = p.read_bytes()
        for item in scan_file(data, file=p.name, file_start=int(p.name)):
            if isinstance(item, CommitLogMessage):
                pos = item.physical_offset - int(p.name)
                end = pos + item.total_size
                plen = len(item.properties_raw.encode())
                tlen = len(item.topic.encode())
                out.append(RecordAt(p, pos, item.total_size, end - plen, plen,
                                    end - plen - 2 - tlen, tlen))
    return out


def patch(path: Path, pos: int, data: bytes) -> None:
    """Overwrite ``len(data)`` bytes of ``path`` at ``pos`` (a copy, never a fixture)."""
    assert FIXTURES not in path.parents, path
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def truncate(path: Path, size: int) -> None:
    assert FIXTURES not in path.parents, path
    os.truncate(path, size)
