"""Shared fixtures: the real RocketMQ stores copied into fixtures/ (see fixtures/PROVENANCE.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "rocketmq-stores"
SCENARIOS = ["4.9.7/plain", "4.9.7/plain-crashed", "4.9.7/journey", "5.3.3/plain"]


# manifest field (commitlog.jsonl) -> mqtool's JSON field (``messages --jsonl``)
MSG_FIELDS = {
    "phyOffset": "commitLogOffset", "size": "storeSize", "topic": "topic", "queueId": "queueId",
    "queueOffset": "queueOffset", "flag": "flag", "sysFlag": "sysFlag", "bodyCRC": "bodyCRC",
    "bornTimestamp": "bornTimestamp", "storeTimestamp": "storeTimestamp",
    "reconsumeTimes": "reconsumeTimes", "preparedTransactionOffset": "preparedTransactionOffset",
    "bodyLength": "bodyLength", "properties": "properties", "tags": "tags", "keys": "keys",
    "uniqKey": "uniqKey", "offsetMsgId": "offsetMsgId", "crcOk": "crcOk",
}


def scenario_dir(name: str) -> Path:
    return FIXTURES / name


def store_dir(name: str) -> Path:
    return FIXTURES / name / "store"


def manifest_jsonl(name: str, file: str) -> list[dict[str, Any]]:
    text = (FIXTURES / name / "manifest" / file).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def manifest_json(name: str, file: str) -> Any:
    return json.loads((FIXTURES / name / "manifest" / file).read_text(encoding="utf-8"))


@pytest.fixture(params=SCENARIOS)
def scenario(request: pytest.FixtureRequest) -> str:
    """Each real store scenario name, e.g. ``4.9.7/journey``."""
    return str(request.param)


@pytest.fixture
def store_copy(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Factory: a writable copy of a fixture store root in tmp_path."""

    def make(name: str) -> Path:
        dst = tmp_path / name.replace("/", "_") / "store"
        shutil.copytree(store_dir(name), dst)
        return dst

    return make


class SmallFs:
    """A tmpfs of its own size, mounted for one test (see the ``small_fs`` fixture)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def resize(self, size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[SmallFs]:
    """An empty 1 MiB tmpfs at tmp_path/fs, unmounted after the test: a disk that fills up
    (``.resize`` grows it). Mounting needs root, which the tests have on CI."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    mnt = tmp_path / "fs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        yield SmallFs(mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


# Test files that share what a test process made once (a real broker's run, tests/realmq_run.py):
# `make test`'s --dist loadfile gives each group to one pytest-xdist worker, as one file.
TOGETHER = {
    "tests/integrity/test_repair_realbroker.py": "tests/realmq/test_realmq.py",
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """--dist loadfile with the files of :data:`TOGETHER` in their group's work unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LoadFileTogether(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            scope = str(super()._split_scope(nodeid))
            return TOGETHER.get(scope, scope)

    return LoadFileTogether(config, log)
