"""mqtool's writers (the reference store engine: ``dlq resend --target``, ``serve``, ``store``)
refuse a real 5.x store with options the engine does not write, before writing a byte: the
plain commitlog and consume-queue files they write may leave a store such a broker does not
load (file queues for a BatchCQ topic stop a 5.3.3 broker's start; a RocksDB broker keeps its
queues and topics in RocksDB)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import store_dir
from mqtool.cli import app

KINDS = {
    "rocksdb": "a RocksDB consume queue", "batchcq": "batch consume queues",
    "lmq": "LMQ queues (consumequeue/%LMQ%*, enableLmq)",
}


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("dry", [False, True])
def test_dlq_resend_into_a_5x_option_store_is_refused(kind: str, dry: bool,
                                                      tmp_path: Path) -> None:
    target = tmp_path / "target"
    shutil.copytree(store_dir(f"5.3.3/{kind}"), target)
    before = _digests(target)
    args = ["dlq", "resend", str(store_dir("5.3.3/pop")), "--group", "cg_pop",
            "--target", str(target), *(["--dry-run"] if dry else [])]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert f"error: --target {target}: a store with {KINDS[kind]}" in res.stderr
    assert "resend through the broker: --namesrv" in res.stderr
    assert _digests(target) == before


def test_serve_over_a_5x_option_store_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "store"
    shutil.copytree(store_dir("5.3.3/batchcq"), root)
    before = _digests(root)
    env = dict(os.environ, NO_COLOR="1")
    res = subprocess.run(
        [sys.executable, "-m", "mqtool", "serve", str(root), "--namesrv-port", "0",
         "--broker-port", "0"], capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 2, res.stderr
    assert f"error: {root}: a store with batch consume queues" in res.stderr
    assert _digests(root) == before
