"""A full disk under mqtool's writers: one clear error, nothing acknowledged lost.

The store writers write through shared mappings of sparse files. A store into a mapped page the
file system has no room for is SIGBUS: before the fix, ``mqtool demo`` and ``mqtool dlq resend
--target`` on a full disk died with "Bus error" (exit 135) and no word of why, and ``repair``
and ``dlq export`` ended in a traceback. Each test runs the writer in its own process on a
small tmpfs (mounted here: the tests run as root, as CI does), so a regression kills that
process, not the test runner.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest
from crashkit import verify

from conftest import ROOT, SmallFs
from mqtool.cli.exits import handle_errors
from mqtool.refstore.engine import RefStore

JOURNEY = ROOT / "fixtures" / "rocketmq-stores" / "4.9.7" / "journey" / "store"
NO_SPACE = "No space left on device"


def mqtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqtool", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


def one_error_line(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 3, (p.returncode, p.stderr[-2000:])  # environment: a full disk
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr[-2000:]
    assert NO_SPACE in lines[0] and "Traceback" not in p.stderr
    return lines[0]


def test_demo_on_a_full_disk_is_one_error_line(small_fs: SmallFs) -> None:
    line = one_error_line(mqtool("demo", str(small_fs.path / "store")))
    assert str(small_fs.path / "store") in line  # names the file it could not write


def test_dlq_resend_into_a_full_disk_is_one_error_line_and_can_be_run_again(
    small_fs: SmallFs,
) -> None:
    target = small_fs.path / "replay"
    one_error_line(mqtool("dlq", "resend", str(JOURNEY), "--group", "cg_journey",
                          "--target", str(target)))
    small_fs.resize("64m")  # room again: the same command finishes the job, once
    p = mqtool("dlq", "resend", str(JOURNEY), "--group", "cg_journey", "--target", str(target),
               "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    p = mqtool("dlq", "list", str(JOURNEY), "--target", str(target), "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    [row] = json.loads(p.stdout)
    assert (row["count"], row["resent"]) == (4, 4)  # each dead letter resent once
    with RefStore.open(target) as s:  # and stored once
        topic = "%RETRY%cg_journey"  # resent for the group to consume again
        assert sum(1 for q in s.queue_ids(topic) for _ in s.iter_queue(topic, q)) == 4


WRITER = r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from crashkit import CRASH_CONFIG
from mqtool.refstore.engine import Message, RefStore
from mqtool.refstore.mapped import RefStoreError

s = RefStore.open(Path(sys.argv[1]), CRASH_CONFIG)
i = 0
try:
    while True:
        key = f"a{i}"
        if i % 5 == 4:
            keys = [f"{key}-{j}" for j in range(3)]
            s.put_batch([Message.create("T", bytes(900), keys=[k],
                                        properties={"batch": key}) for k in keys])
            print("".join(f"P {k}\n" for k in keys), end="", flush=True)
        else:
            s.put(Message.create("T", bytes(300 + 97 * (i % 20)), keys=[key, f"b{i}"]))
            print(f"P {key}", flush=True)
        i += 1
except RefStoreError as e:
    print(f"E {e}", flush=True)
    sys.exit(3)
"""


def test_puts_on_a_full_disk_fail_cleanly_and_lose_nothing_acknowledged(small_fs: SmallFs) -> None:
    root = small_fs.path / "store"
    p = subprocess.run([sys.executable, "-c", WRITER, str(root), str(Path(__file__).parent)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 3, (p.returncode, p.stderr[-2000:])  # not -7: SIGBUS
    lines = p.stdout.splitlines()
    acked = {ln[2:] for ln in lines if ln.startswith("P ")}
    assert len(acked) > 50 and lines[-1].startswith("E ") and NO_SPACE in lines[-1]
    small_fs.resize("64m")
    counts = verify(root, acked)  # recovery, then every acknowledged put exactly once,
    assert counts["messages"] >= len(acked)  # queues and index agree with the commitlog
    p = mqtool("verify", str(root))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]


def test_repair_onto_a_full_disk_is_one_error_line_and_leaves_nothing(small_fs: SmallFs) -> None:
    small_fs.resize("64k")
    store = ROOT / "fixtures" / "rocketmq-stores" / "4.9.7" / "plain" / "store"
    line = one_error_line(mqtool("repair", str(store), "--out", str(small_fs.path / "rep")))
    assert "untouched" in line
    assert list(small_fs.path.iterdir()) == []  # the half-written staging copy is gone


def test_dlq_export_onto_a_full_disk_is_one_error_line_and_no_partial_file(
    small_fs: SmallFs,
) -> None:
    small_fs.resize("4k")
    out = small_fs.path / "dlq.jsonl"
    line = one_error_line(mqtool("dlq", "export", str(JOURNEY), "--group", "cg_journey",
                                 "--output", str(out)))
    assert "partial file was removed" in line and not out.exists()


def test_any_command_reports_a_full_disk_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI's one error handler: ENOSPC/EDQUOT from any write is one line and exit 3
    (environment; an OSError other than a full disk or a refused permission is a bug and keeps
    its traceback)."""
    with pytest.raises(SystemExit) as ex, handle_errors():
        raise OSError(errno.ENOSPC, "No space left on device", "/data/out.html")
    assert ex.value.code == 3
    assert capsys.readouterr().err.strip() == "error: /data/out.html: No space left on device"
    with pytest.raises(SystemExit) as ex, handle_errors():  # a file this user may not write
        raise PermissionError(errno.EACCES, "Permission denied", "/data/out.html")
    assert ex.value.code == 3
    assert capsys.readouterr().err.strip() == "error: /data/out.html: Permission denied"
    with pytest.raises(OSError), handle_errors():
        raise OSError(errno.EIO, "Input/output error", "/data/out.html")
