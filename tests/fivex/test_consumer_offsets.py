"""Consumer offsets from wherever a 5.x broker keeps them: the RocksDB ``config/consumerOffsets/``
(``storeType=defaultRocksDB``), ``lmqConsumerOffset.json`` (``enableLmq=true``) or
``consumerOffset.json``, read by ``inspect``, ``verify`` and ``scan`` alike.

The RocksDB store is the real 5.3.3 broker's (fixtures/rocketmq-stores/5.3.3/rocksdb): its
consumer ``cg_rdb`` consumed every ``RdbTopic`` message (the scenario's log). The LMQ cases
write ``lmqConsumerOffset.json`` into a copy of the real LMQ store in the shape
``LmqConsumerOffsetManager`` persists (its consumer committed nothing).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from conftest import FIXTURES, store_dir
from mqtool.cli import app
from mqtool.integrity import verify
from mqtool.overview import inspect_store
from mqtool.spark.scan import load_store_config
from mqtool.store import Store
from mqtool.store.consumer_offsets import load_consumer_offsets

ROCKS = "5.3.3/rocksdb"
LMQ = "5.3.3/lmq"


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _groups(root: Path) -> dict[tuple[str, str, int], tuple[int, int | None]]:
    with Store.open(root) as st:
        d = inspect_store(st).data
    return {(g["group"], g["topic"], g["queueId"]): (g["offset"], g["lag"])
            for g in d["consumerGroups"]}


def _copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / "store"
    shutil.copytree(store_dir(name), dst)
    return dst


def test_rocksdb_offsets_are_what_the_consumer_committed() -> None:
    root = store_dir(ROCKS)
    before = _digests(root)
    consumed = sum(1 for ln in (FIXTURES / ROCKS / "scenario-log.txt").read_text().splitlines()
                   if " consumed RdbTopic-" in ln)
    groups = _groups(root)
    assert groups == {("cg_rdb", "RdbTopic", q): (30, 0) for q in range(4)}
    assert sum(off for off, _ in groups.values()) == consumed == 120
    loaded = load_consumer_offsets(root)
    assert loaded.source == "config/consumerOffsets/" and not loaded.findings
    res = CliRunner().invoke(app, ["inspect", str(root)])
    assert res.exit_code == 0, res.output
    assert "consumer groups (RocksDB config/consumerOffsets/)" in res.stdout
    cfg = load_store_config(str(root))
    assert cfg.has_consumer_offsets
    assert sorted(cfg.consumer_offsets) == [("cg_rdb", "RdbTopic", q, 30) for q in range(4)]
    assert _digests(root) == before  # read-only: RocksDB opened through a private view


def test_rocksdb_takes_the_json_file_only_when_its_version_is_newer(tmp_path: Path) -> None:
    root = _copy(ROCKS, tmp_path)

    def write(counter: int) -> None:
        (root / "config" / "consumerOffset.json").write_text(json.dumps({
            "offsetTable": {"RdbTopic@cg_json": {"0": 7}},
            "dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": 1},
        }))

    write(0)  # the RocksDB data version is 0 (never written): not newer, RocksDB it is
    assert set(_groups(root)) == {("cg_rdb", "RdbTopic", q) for q in range(4)}
    write(3)  # RocksDBConsumerOffsetManager#merge: the JSON file replaces the table
    assert _groups(root) == {("cg_json", "RdbTopic", 0): (7, 23)}
    assert load_consumer_offsets(root).source == "config/consumerOffset.json"


def _rocks_put(path: Path, key: bytes, value: bytes) -> None:
    """Write one key into the RocksDB database at ``path`` (a store copy's)."""
    from rocksdict import Options, Rdict

    cfs = Rdict.list_cf(str(path), Options(raw_mode=True))
    db = Rdict(str(path), options=Options(raw_mode=True),
               column_families={n: Options(raw_mode=True) for n in cfs if n != "default"})
    db[key] = value
    db.close()


def test_rocksdb_value_that_does_not_parse_is_a_finding(tmp_path: Path) -> None:
    root = _copy(ROCKS, tmp_path)
    _rocks_put(root / "config" / "consumerOffsets", b"RdbOther@cg_bad", b'{"offsetTable":{"0":')
    res = CliRunner().invoke(app, ["inspect", str(root)])
    assert res.exit_code == 1, res.output
    assert "error: config/consumerOffsets/: consumer offsets of 'RdbOther@cg_bad' cannot be " \
        "read" in res.stderr
    assert "cg_rdb" in res.stdout  # the others are read


def _lmq_offsets(root: Path, offset_table: dict[str, dict[str, int]],
                 lmq_table: dict[str, int]) -> None:
    (root / "config" / "lmqConsumerOffset.json").write_text(json.dumps({
        "dataVersion": {"counter": 2, "stateVersion": 0, "timestamp": 1795767920961},
        "groupTopicMap": {}, "lmqOffsetTable": lmq_table, "offsetTable": offset_table,
    }, indent="\t"))


def test_lmq_offsets_come_from_lmq_consumer_offset_json(tmp_path: Path) -> None:
    root = _copy(LMQ, tmp_path)
    assert not (root / "config" / "consumerOffset.json").exists()
    _lmq_offsets(root, {"LmqParent@cg_parent": {"0": 25, "1": 30}},
                 {"%LMQ%order-1@%LMQ%order-1": 12})
    assert _groups(root) == {
        ("cg_parent", "LmqParent", 0): (25, 5), ("cg_parent", "LmqParent", 1): (30, 0),
        ("%LMQ%order-1", "%LMQ%order-1", 0): (12, 8),
    }
    res = CliRunner().invoke(app, ["inspect", str(root)])
    assert res.exit_code == 0, res.output
    assert "consumer groups (lmqConsumerOffset.json)" in res.stdout
    assert verify(root).findings == []
    # an offset beyond the queue is verify's finding, naming the file and the key's place
    _lmq_offsets(root, {"LmqParent@cg_parent": {"0": 99}}, {})
    res = CliRunner().invoke(app, ["verify", str(root)])
    assert res.exit_code == 1, res.output
    text = (root / "config" / "lmqConsumerOffset.json").read_text()
    at = text.index('"LmqParent@cg_parent"')
    assert f"error: config/lmqConsumerOffset.json @ {at:#x}: group cg_parent on LmqParent/0: " \
        "offset 99 is beyond the queue's max offset 30" in res.stdout


def test_both_json_files_read_consumer_offset_json_and_say_so(tmp_path: Path) -> None:
    root = _copy(LMQ, tmp_path)
    _lmq_offsets(root, {"LmqParent@cg_lmq": {"0": 1}}, {})
    (root / "config" / "consumerOffset.json").write_text(
        '{"offsetTable":{"LmqParent@cg_plain":{0:30}}}')
    loaded = load_consumer_offsets(root)
    assert loaded.source == "config/consumerOffset.json"
    assert loaded.table == {("LmqParent", "cg_plain"): {0: 30}}
    (note,) = loaded.findings
    assert str(note.severity) == "info" and "enableLmq=true" in note.detail
    assert note.file == "config/lmqConsumerOffset.json"


def test_repair_clamps_the_lmq_file_as_consumer_offset_json(tmp_path: Path) -> None:
    root = _copy("5.3.3/trace", tmp_path)  # a store repair rewrites, with one consumer group
    for p in (root / "config").glob("consumerOffset.json*"):
        p.unlink()
    _lmq_offsets(root, {"TraceTopic@cg": {"0": 999}}, {})
    out = tmp_path / "fixed"
    res = CliRunner().invoke(app, ["repair", str(root), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "config/lmqConsumerOffset.json: TraceTopic@cg queue 0 offset 999 -> 10" in res.stdout
    assert load_consumer_offsets(out).table == {("TraceTopic", "cg"): {0: 10}}


def test_config_manager_v2_is_named_not_read(tmp_path: Path) -> None:
    root = _copy(ROCKS, tmp_path)
    shutil.copytree(root / "config" / "consumerOffsets", root / "config" / "rdb")
    loaded = load_consumer_offsets(root)
    assert loaded.table is None
    (w,) = loaded.findings
    assert str(w.severity) == "warning" and w.file == "config/rdb/"
    res = CliRunner().invoke(app, ["inspect", str(root)])
    assert res.exit_code == 0, res.output
    assert "warning: config/rdb/: the broker keeps its topics, groups and consumer offsets" \
        in res.stderr


def test_rocksdb_that_cannot_be_opened_is_one_line_naming_it(tmp_path: Path) -> None:
    root = _copy(ROCKS, tmp_path)
    (root / "config" / "consumerOffsets" / "CURRENT").unlink()
    res = CliRunner().invoke(app, ["inspect", str(root)])
    assert res.exit_code == 1, res.output
    (line,) = res.stderr.splitlines()
    assert line.startswith("error: config/consumerOffsets/: RocksDB consumer offsets cannot be "
                           "opened read-only: ")
    assert str(root / "config" / "consumerOffsets" / "CURRENT") in line  # not a private view


def test_rocksdb_topic_and_group_configs_that_do_not_load_are_verify_findings(
        tmp_path: Path) -> None:
    root = _copy(ROCKS, tmp_path)
    assert verify(root).findings == []
    _rocks_put(root / "config" / "subscriptionGroups", b"cg_broken", b'{"groupName":')
    (root / "config" / "topics" / "CURRENT").unlink()
    res = CliRunner().invoke(app, ["verify", str(root)])
    assert res.exit_code == 1, res.output
    assert "error: config/subscriptionGroups/: subscription group 'cg_broken' cannot be read" \
        in res.stdout
    assert "error: config/topics/: RocksDB topic configs cannot be opened read-only: " \
        in res.stdout
    assert "configs the broker cannot load, so it does not start: config/subscriptionGroups/, " \
        "config/topics/" in res.stdout
    assert "nothing: the broker would start" not in res.stdout


def test_verify_names_every_bad_key_of_a_database(tmp_path: Path) -> None:
    """Findings without an offset in one file (keys of one RocksDB) are each their own."""
    root = _copy(ROCKS, tmp_path)
    for group in ("cg_bad1", "cg_bad2"):
        _rocks_put(root / "config" / "consumerOffsets", f"RdbOther@{group}".encode(),
                   b'{"offsetTable":{"0":')
    for cmd in ("inspect", "verify"):
        res = CliRunner().invoke(app, [cmd, str(root)])
        assert res.exit_code == 1, res.output
        for group in ("cg_bad1", "cg_bad2"):
            assert f"consumer offsets of 'RdbOther@{group}' cannot be read" in res.output, (
                cmd, group, res.output)
