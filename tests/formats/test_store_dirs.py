"""The listers of a store's files and queue directories (mqtool.formats.store_dirs), and what
the read commands say of a name that is not one of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mqtool.formats.store_dirs import index_files, is_queue_id, queue_dirs, queue_id_dirs

MQTOOL = [sys.executable, "-m", "mqtool"]


def _tree(root: Path, dirs: list[str], files: list[str]) -> None:
    for d in dirs:
        (root / d).mkdir(parents=True, exist_ok=True)
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_bytes(b"")


def test_queue_dirs_in_queue_id_order_with_the_rest_as_others(tmp_path: Path) -> None:
    cq = tmp_path / "consumequeue"
    _tree(cq, ["TopicA/10", "TopicA/2", "TopicA/-1", "TopicA/x1", "TopicB/0", "Empty"],
          ["TopicA/3", "stray", "TopicB/0/00000000000000000000"])
    others: list[Path] = []
    got = queue_dirs(cq, others)
    assert [(t, q) for t, q, _ in got] == [("TopicA", -1), ("TopicA", 2), ("TopicA", 10),
                                           ("TopicB", 0)]
    assert all(p == cq / t / str(q) for t, q, p in got)
    assert sorted(p.relative_to(cq).as_posix() for p in others) == [
        "TopicA/3", "TopicA/x1", "stray"]
    assert [(t, q) for t, q, _ in queue_dirs(cq, topics={"TopicB"})] == [("TopicB", 0)]
    assert queue_dirs(tmp_path / "missing") == []
    assert queue_id_dirs(cq / "stray") == []
    assert [q for q, _ in queue_id_dirs(cq / "TopicA")] == [-1, 2, 10]


def test_queue_id_names() -> None:
    assert [n for n in ("0", "17", "-1", "--1", "-", "", "1a", "\u0661", "+1")
            if is_queue_id(n)] == ["0", "17", "-1"]


def test_index_files_oldest_first_others_apart(tmp_path: Path) -> None:
    d = tmp_path / "index"
    _tree(d, ["20261121210445999"], ["20261121210445634", "20261121210445514", "index.bak"])
    others: list[Path] = []
    assert [p.name for p in index_files(d, others)] == ["20261121210445514",
                                                         "20261121210445634"]
    assert [p.name for p in others] == ["index.bak"]


def test_verify_says_each_misnamed_queue_and_index_entry(
        store_copy) -> None:  # type: ignore[no-untyped-def]
    """A file in a queue directory, a directory among the queues and a file among the index
    files whose names are no numbers are warnings of verify, each naming its path."""
    root: Path = store_copy("4.9.7/plain")
    (root / "consumequeue" / "TopicA" / "0" / "notes.txt").write_bytes(b"x")
    (root / "consumequeue" / "TopicA" / "backup").mkdir()
    (root / "index" / "index.bak").write_bytes(b"x" * 40)
    res = subprocess.run([*MQTOOL, "verify", str(root), "--json"], capture_output=True,
                         text=True, env={**os.environ, "COLUMNS": "200"}, check=False)
    assert res.returncode == 0, res.stderr
    found = {f["file"]: f for f in json.loads(res.stdout)["findings"]}
    for rel, what in (("consumequeue/TopicA/0/notes.txt", "a consume-queue file name"),
                      ("consumequeue/TopicA/backup", "a queue directory name"),
                      ("index/index.bak", "an index file name")):
        assert found[rel]["severity"] == "warning", found.get(rel)
        assert found[rel]["detail"].startswith(f"not {what}"), found[rel]


def test_verify_says_a_file_where_a_queue_directory_belongs(
        store_copy) -> None:  # type: ignore[no-untyped-def]
    """A file among the topic directories and a file named like a queue id among a topic's
    queue directories are errors of verify (the broker loads no queue from them)."""
    root: Path = store_copy("4.9.7/plain")
    (root / "consumequeue" / "stray").write_bytes(b"x")
    (root / "consumequeue" / "TopicA" / "7").write_bytes(b"x")
    res = subprocess.run([*MQTOOL, "verify", str(root), "--json"], capture_output=True,
                         text=True, env={**os.environ, "COLUMNS": "200"}, check=False)
    assert res.returncode == 1, res.stderr
    found = {f["file"]: f for f in json.loads(res.stdout)["findings"]}
    assert found["consumequeue/stray"]["detail"] == "expected a topic directory, found a file"
    assert found["consumequeue/TopicA/7"]["detail"] == (
        "expected a queue directory, found a file")
    assert {found[k]["severity"] for k in ("consumequeue/stray", "consumequeue/TopicA/7")} == {
        "error"}
