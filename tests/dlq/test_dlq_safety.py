"""Target safety: `--target` refuses what is not a store, `--dry-run` checks
the target exactly as a real run does, an unknown `--group` is an error (exit 1, one line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_dlq_resend import make_dlq_source, make_target, resent_copies, tree_digest

from mqtool.refstore.engine import ManualClock, RefStore

ROOT = Path(__file__).resolve().parents[2]


def mqtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqtool", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def one_line_error(res: subprocess.CompletedProcess[str], *words: str, code: int) -> None:
    """One ``error:`` line with ``words``, and exit status ``code`` (1 findings, 2 usage,
    3 environment)."""
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    assert "Traceback" not in res.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dlq_source(tmp_path_factory.mktemp("src") / "src", 5)


@pytest.mark.parametrize("dry", [False, True])
def test_existing_directory_that_is_not_a_store_is_refused(
    src: Path, tmp_path: Path, dry: bool
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine\n")
    (home / "photos").mkdir()
    before = tree_digest(home, src)
    res = mqtool("dlq", "resend", str(src), "-g", "g", "--target", str(home),
                 *(["--dry-run"] if dry else []))
    one_line_error(res, "not a RocketMQ store", str(home), code=2)
    assert tree_digest(home, src) == before  # nothing created inside it, not even a journal
    assert "would-send" not in res.stdout


@pytest.mark.parametrize("dry", [False, True])
def test_a_file_and_a_brokers_parent_directory_are_refused(
    src: Path, tmp_path: Path, dry: bool
) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    flag = ["--dry-run"] if dry else []
    one_line_error(mqtool("dlq", "resend", str(src), "-g", "g", "--target", str(f), *flag),
                   "not a directory", code=2)
    parent = tmp_path / "broker"
    make_target(parent / "store")
    res = mqtool("dlq", "resend", str(src), "-g", "g", "--target", str(parent), *flag)
    one_line_error(res, "not a RocketMQ store", f"did you mean {parent / 'store'}", code=2)
    assert sorted(p.name for p in parent.iterdir()) == ["store"]


def test_store_locked_by_a_running_process_is_refused_in_dry_run_too(
    src: Path, tmp_path: Path
) -> None:
    target = make_target(tmp_path / "t")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from mqtool.refstore.engine import RefStore\n"
         f"rs = RefStore.open({str(target)!r})\n"
         "print('locked', flush=True)\n"
         "sys.stdin.read()\n"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        for flag in ([], ["--dry-run"]):
            res = mqtool("dlq", "resend", str(src), "-g", "g", "--target", str(target), *flag)
            one_line_error(res, "locked", f"pid {holder.pid}", code=3)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    assert resent_copies(target) == []


def test_new_or_empty_target_is_created_and_dry_run_creates_nothing(
    src: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    res = mqtool("dlq", "resend", str(src), "-g", "g", "--target", str(empty), "--dry-run")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("would-send") == 5 and list(empty.iterdir()) == []
    res = mqtool("dlq", "resend", str(src), "-g", "g", "--target", str(empty))
    assert res.returncode == 0, res.stderr
    assert len(resent_copies(empty)) == 5
    fresh = tmp_path / "a" / "b"
    res = mqtool("dlq", "resend", str(src), "-g", "g", "--target", str(fresh), "--limit", "1")
    assert res.returncode == 0, res.stderr
    assert len(resent_copies(fresh)) == 1


def test_unknown_group_is_an_error_not_zero_records(src: Path, tmp_path: Path) -> None:
    target = tmp_path / "t"
    for args in (["show", str(src), "-g", "nope"], ["show", str(src), "-g", "nope", "--json"],
                 ["export", str(src), "-g", "nope"],
                 ["resend", str(src), "-g", "nope", "--target", str(target), "--dry-run"],
                 ["resend", str(src), "-g", "nope", "--target", str(target)]):
        res = mqtool("dlq", *args)
        one_line_error(res, "unknown consumer group 'nope'", code=1)
        assert res.stdout == ""
    assert not target.exists()


def test_known_group_without_dead_letters_is_zero_records(tmp_path: Path) -> None:
    """A group that has a retry queue but nothing in its DLQ is known: 0 records, exit 0."""
    root = tmp_path / "s"
    with RefStore.open(root, clock=ManualClock()) as rs:
        rs.create_topic("%RETRY%calm", 1)
        from mqtool.refstore.engine import Message

        rs.put(Message.create("%RETRY%calm", "x", queue_id=0))
    res = mqtool("dlq", "show", str(root), "-g", "calm", "--json")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
