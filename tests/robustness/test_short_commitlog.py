"""A commitlog file whose size is not the others' (cut short, or longer) is damage every read
command reports: RocketMQ's ``MappedFileQueue.load`` refuses to load such a store. The commands
print what they read, then one error line naming the file and its size, and exit 1; an empty
last file (5.x deletes it at load) is a warning only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from robust_harness import copy_store, run_inproc, truncate

NAME = "4.9.7/plain"
LAST = "commitlog/00000000000003145728"
UNIQ = "C000020255505FFD2B276B851BCD0005"  # a TopicA message in an earlier file


def _short_last(tmp_path: Path) -> Path:
    root = copy_store(NAME, tmp_path)
    truncate(root / LAST, 125_000)  # 500,000 of each 1,048,576 bytes of a 256 KiB file
    return root


@pytest.mark.parametrize("args", [["inspect"], ["inspect", "--json"], ["messages"],
                                  ["messages", "--json"], ["trace", UNIQ], ["msg", UNIQ],
                                  ["cq"], ["index"]])
def test_short_last_file_is_reported_by_every_read_command(args: list[str],
                                                           tmp_path: Path) -> None:
    root = _short_last(tmp_path)
    res = run_inproc([args[0], str(root), *args[1:]])
    assert res.exit_code == 1, (res.stdout[-500:], res.stderr)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert errors == [f"error: {LAST}: 125,000 bytes where the other commitlog files have "
                      "262,144 (cut short): RocketMQ refuses to load the store "
                      "(MappedFileQueue.load)"], res.stderr
    assert res.stdout.strip()  # what was read is still printed


def test_verify_reports_the_short_file_once(tmp_path: Path) -> None:
    root = _short_last(tmp_path)
    res = run_inproc(["verify", str(root), "--json"])
    assert res.exit_code == 1
    named = [f for f in json.loads(res.stdout)["findings"] if f["file"] == LAST
             and f["kind"] == "layout"]
    assert [(f["severity"], f["expected"], f["found"]) for f in named] == [
        ("error", "262144", "125000")]


def test_empty_last_file_is_a_warning(tmp_path: Path) -> None:
    root = copy_store(NAME, tmp_path)
    (root / "commitlog" / "00000000000003407872").touch()
    os.truncate(root / "commitlog" / "00000000000003407872", 0)
    res = run_inproc(["inspect", str(root)])
    assert res.exit_code == 0, res.stderr
    assert res.stderr.strip().startswith("warning: commitlog/00000000000003407872: empty last "
                                         "commitlog file (0 bytes)"), res.stderr
