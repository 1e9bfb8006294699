"""The Java commitlog reader (spark/java, built by ``make dev``) gives exactly the rows of the
Python decoder: on every fixture store and on damaged copies, with whole and tiny splits.

The Java reader accepts only records that pass every check of the record kernel, the BLANK and
zeros to the end of the data; every other byte range is handed to the Python decoder
(``deferred`` rows). These tests pin that the two paths never disagree, that damage is still
reported (never hidden) and that the hand-over really happens.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from sparkfix import spark  # noqa: F401

from conftest import SCENARIOS, store_dir

pytestmark = pytest.mark.slow

SPLITS = (1 << 27, 3000)


def _rows(df: Any) -> list[str]:
    return sorted(repr(sorted(r.asDict(recursive=True).items())) for r in df.collect())


def _both(spark: Any, stores: list[str], split: int, **kw: Any) -> tuple[list[str], list[str]]:  # noqa: F811
    from mqtool.spark import source

    java, _ = source.records(spark, stores, split_size=split, partition_bytes=1 << 20,
                             java=True, **kw)
    py, _ = source.records(spark, stores, split_size=split, partition_bytes=1 << 20,
                           java=False, **kw)
    return _rows(java), _rows(py)


def test_the_jar_is_built_and_on_the_session(spark: Any) -> None:  # noqa: F811
    from mqtool.spark import source
    from mqtool.spark.session import java_reader_jar

    assert java_reader_jar() is not None, "make dev builds spark/jars/mqtool-spark.jar"
    assert source.java_reader_on(spark.sparkContext)


def test_java_equals_python_on_every_fixture_store(spark: Any) -> None:  # noqa: F811
    stores = [str(store_dir(s)) for s in SCENARIOS]
    java, py = _both(spark, stores, 3000)  # (whole files: the scan tests)
    assert len(java) > 1000
    assert java == py


def test_projection_and_properties_for(spark: Any) -> None:  # noqa: F811
    from mqtool.spark.scan import AUDIT_COLUMNS

    stores = [str(store_dir(s)) for s in SCENARIOS]
    java, py = _both(spark, stores, 3000, columns=[*AUDIT_COLUMNS[2:], "properties"],
                     properties_for=["%DLQ%"], check_crc=False)
    assert java == py


def _patch(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the plain store with damage of every shape in its commitlogs."""
    return make_damaged(tmp_path_factory.mktemp("java-damaged") / "store")


def make_damaged(root: Path) -> Path:
    shutil.copytree(store_dir("4.9.7/plain"), root)
    files = sorted((root / "commitlog").iterdir())

    def records_of(f: Path) -> list[tuple[int, int]]:  # (offset, size) of its messages
        from mqtool.spark.decode import decode_commitlog_file_messages

        t = decode_commitlog_file_messages(str(f))
        return list(zip(t["fileOffset"].to_pylist(), t["storeSize"].to_pylist(), strict=True))

    _patch(files[1], 0, b"\xff" * 20)  # the first record of a file
    off, size = records_of(files[2])[5]
    _patch(files[2], off, b"\x00" * (size + 10))  # zeros over a record and a bit, records after
    off, _ = records_of(files[3])[7]
    _patch(files[3], off + 4, b"\x00\x11\x22\x33")  # a destroyed magic
    recs4 = records_of(files[4])
    _patch(files[4], recs4[3][0] + 28, b"\x00" * 8)  # a PHYSICALOFFSET not the record's place
    _patch(files[4], sum(recs4[9]) - 3, b"\x00" * 3)  # torn properties: zeros at a record's end
    rng = random.Random(13)
    for f in files[5:8]:
        size = f.stat().st_size
        for _ in range(3):
            _patch(f, rng.randrange(size), bytes(rng.randrange(256) for _ in range(4)))
    last = records_of(files[-1])
    with open(files[-1], "r+b") as fh:  # a torn last file: cut in the middle of a record
        fh.truncate(last[-1][0] + 40)
    return root


@pytest.mark.parametrize("split", SPLITS)
def test_java_equals_python_on_damaged_stores(
    spark: Any, damaged: Path, split: int  # noqa: F811
) -> None:
    from mqtool.spark import source
    from mqtool.spark.schema import RECORD_KIND_DEFERRED

    java, py = _both(spark, [str(damaged)], split)
    assert java == py
    unreadable = [r for r in py if "'unreadable'" in r]
    assert any("('fileOffset', 0)" in r for r in unreadable)  # damage at a file's start shown
    assert len(unreadable) >= 5
    assert any("properties torn" in r for r in unreadable)
    # the Java reader handed the damaged ranges over, it did not judge them itself
    raw = source.java_records(  # the reader's own output
        spark, [str(damaged)], columns=None, check_crc=True, properties_for=(),
        split_size=split, partition_bytes=1 << 20,
    )
    assert raw is not None
    assert raw.filter(raw.recordType == RECORD_KIND_DEFERRED).count() >= 4
    assert raw.filter(raw.recordType == "unreadable").count() == 0


@pytest.fixture(scope="module")
def aux_damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the plain store whose consume queues and index files are damaged: a queue
    file cut inside a unit, a zeroed unit in the middle (the queue ends there), a queue file
    of 0 bytes, an index header claiming more entries than the file holds, an empty index."""
    root = tmp_path_factory.mktemp("java-aux") / "store"
    shutil.copytree(store_dir("4.9.7/plain"), root)
    cqs = sorted(p for p in (root / "consumequeue").rglob("*") if p.is_file())
    cqs = [p for p in cqs if p.stat().st_size >= 200]
    with open(cqs[0], "r+b") as fh:
        fh.truncate(fh.seek(0, 2) // 20 * 20 - 7)
    _patch(cqs[1], 40, b"\x00" * 20)
    (cqs[2].parent / f"{int(cqs[2].name) + 10**12:020d}").write_bytes(b"")
    index = sorted((root / "index").iterdir())
    _patch(index[0], 36, (10**6).to_bytes(4, "big"))
    (root / "index" / "20991231235959999").write_bytes(b"")
    return root


@pytest.mark.parametrize("table", ["consumequeue", "index"])
def test_java_consume_queue_and_index_equal_python(
    spark: Any, aux_damaged: Path, table: str  # noqa: F811
) -> None:
    from mqtool.spark import source

    stores = [*(str(store_dir(s)) for s in SCENARIOS), str(aux_damaged)]
    for topics in (None, ["SCHEDULE_TOPIC_XXXX", "TopicTest"]):
        if table == "index" and topics:
            continue
        java = source.java_aux(spark, stores, table, topics=topics, partition_bytes=1 << 16)
        assert java is not None
        py = source.load(spark, stores, table, topics=topics, partition_bytes=1 << 16)
        got, want = _rows(java), _rows(py)
        assert len(want) > (100 if topics is None else 10)
        assert got == want
        # and through the one entry point, with the reader on
        assert _rows(source.table(spark, stores, table, topics=topics, java=True)) == want


# The reader's text rules (spark/java CommitlogDecoder: the UTF-8 check of topic and properties
# in one pass, the separator scan eight bytes at a time, TAGS / KEYS / UNIQ_KEY compared as
# words) on records made to hit them: multibyte text at every position of a word, keys of the
# picked keys' lengths that are not them, duplicates, empty keys and values, separators at
# both ends; and records whose topic or properties are not UTF-8 (handed over).
_PIECES = ["a", "bcdefgh", "\x01", "\x02", "é", "€", "😀", "TAGS", "KEYS", "UNIQ_KEY", "WAIT",
           "TAGX", "UNIQ_KEZ", "KEYS\x01k\x02KEYS", "\x02\x02", "\x01\x01", "a\x00b"]


def _text_store(root: Path, seed: int, bad: bool) -> Path:
    from mqtool.formats.commitlog import build_message, make_message

    rnd = random.Random(seed)
    (root / "commitlog").mkdir(parents=True)
    recs: list[bytes] = []
    p = 0
    for i in range(400):
        raw = "".join(rnd.choice(_PIECES) for _ in range(rnd.randrange(0, 14)))
        topic = "".join(rnd.choice(["T", "opic", "é", "€", "😀", "x" * 7])
                        for _ in range(rnd.randrange(1, 5)))
        rec = bytearray(build_message(make_message(
            topic=topic, properties_raw=raw, body=b"b" * (i % 23), physical_offset=p,
            queue_offset=i)))
        n_props = len(raw.encode())
        if bad and i % 37 == 5 and n_props:  # a byte that is never UTF-8 in the properties
            rec[len(rec) - 1 - rnd.randrange(n_props)] = 0xFF
        if bad and i % 41 == 7:  # a multibyte sequence cut at the topic's end
            rec[len(rec) - 2 - n_props - 1] = 0xC3
        recs.append(bytes(rec))
        p += len(rec)
    (root / "commitlog" / f"{0:020d}").write_bytes(b"".join(recs) + b"\x00" * (1 << 16))
    return root


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("bad", [False, True])
def test_java_equals_python_on_any_text(
    spark: Any, tmp_path: Path, split: int, bad: bool  # noqa: F811
) -> None:
    from mqtool.spark import source
    from mqtool.spark.schema import RECORD_KIND_DEFERRED

    store = _text_store(tmp_path / "store", 13, bad)
    java, py = _both(spark, [str(store)], split)
    assert java == py
    assert sum("'msg'" in r for r in py) > (300 if bad else 399)
    assert (sum("'unreadable'" in r for r in py) > 0) == bad
    raw = source.java_records(spark, [str(store)], columns=None, check_crc=True,
                              properties_for=(), split_size=split, partition_bytes=1 << 20)
    assert raw is not None
    deferred = raw.filter(raw.recordType == RECORD_KIND_DEFERRED).count()
    assert deferred > 0 if bad else deferred == 0  # every valid record read by Java itself
