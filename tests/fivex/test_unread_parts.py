"""Parts of a 5.x store mqtool does not read are named, not passed over: ``inspect`` and
``verify`` warn, ``repair`` refuses the store (it would copy them unchecked)."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from conftest import store_dir
from mqtool.cli import app

WARNING = ("warning: compaction/: compacted topics (cleanup.policy=COMPACTION): their "
           "compaction log and queues are not read")


def test_a_compaction_store_is_named(tmp_path: Path) -> None:
    root = tmp_path / "store"
    shutil.copytree(store_dir("5.3.3/pop"), root)
    # every 5.x broker makes compaction/ with its position-checkpoint: no compacted topic yet
    assert sorted(p.name for p in (root / "compaction").iterdir()) == \
        ["position-checkpoint", "position-checkpoint.bak"]
    runner = CliRunner()
    for args in (["inspect", str(root)], ["verify", str(root)]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0 and WARNING not in res.stdout + res.stderr, args
    # CompactionStore's layout: compaction/compactionLog/<topic>/<queueId>/, compactionCq/...
    (root / "compaction" / "compactionLog" / "CTopic" / "0").mkdir(parents=True)
    (root / "compaction" / "compactionCq" / "CTopic" / "0").mkdir(parents=True)
    res = runner.invoke(app, ["inspect", str(root)])
    assert res.exit_code == 0 and WARNING in res.stderr, res.output
    res = runner.invoke(app, ["verify", str(root)])
    assert WARNING.removeprefix("warning: ") in res.stdout + res.stderr, res.output
    out = tmp_path / "fixed"
    res = runner.invoke(app, ["repair", str(root), "--out", str(out)])
    assert res.exit_code == 1 and "compacted topics (compaction/" in res.stderr, res.output
    assert not out.exists() or not any(out.iterdir())
