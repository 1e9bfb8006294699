"""What the reference store writes reads back through mqtool's reader
and round-trips through the formats, file by file (commitlog, consume queues, index files,
checkpoint, config JSON), for both dialects, with small files so that everything rolls."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqtool.formats.checkpoint import build_checkpoint, parse_checkpoint
from mqtool.formats.commitlog import BlankRecord, CommitLogMessage, FileEnd, build_message
from mqtool.formats.config import (
    build_consumer_offset,
    build_delay_offset,
    build_subscription_groups,
    build_topics,
    dumps_fastjson,
    loads_fastjson,
    parse_consumer_offset,
    parse_delay_offset,
    parse_subscription_groups,
    parse_topics,
)
from mqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE, build_cq_entry, parse_cq_entry
from mqtool.formats.indexfile import IndexReader, build_entry, build_header
from mqtool.formats.walker import scan_file
from mqtool.overview import inspect_store
from mqtool.refstore.demo import build_demo
from mqtool.refstore.engine import StoreConfig
from mqtool.store import Store

SMALL = dict(
    commitlog_file_size=64 * 1024, cq_entries_per_file=50, index_hash_slots=32,
    index_max_entries=128, store_host="10.1.1.1:10911",
)


@pytest.fixture(scope="module", params=["4.9.7", "5.3.3"])
def demo_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp(f"demo-{request.param}") / "store"
    cfg = StoreConfig(dialect=request.param, **SMALL)  # type: ignore[arg-type]
    build_demo(root, messages=500, config=cfg, end_time=1_795_300_000_000)
    return root


def test_commitlog_files_round_trip(demo_store: Path) -> None:
    files = sorted((demo_store / "commitlog").iterdir())
    assert len(files) > 5
    n = 0
    for i, f in enumerate(files):
        buf = f.read_bytes()
        start = int(f.name)
        end: FileEnd | None = None
        for item in scan_file(buf, file=f.name, file_start=start):
            if isinstance(item, CommitLogMessage):
                pos = item.physical_offset - start
                assert build_message(item) == buf[pos : pos + item.total_size]
                assert item.crc_ok
                n += 1
            elif isinstance(item, BlankRecord):
                assert item.total_size == len(buf) - (item.physical_offset - start)
            else:
                end = item
        assert end is not None
        assert end.kind == ("zeros" if i == len(files) - 1 else "blank")
        tail = end.physical_offset - start + (8 if end.kind == "blank" else 0)
        assert not any(buf[tail:])  # nothing after the data
    assert n > 1000


def test_consume_queue_files_round_trip(demo_store: Path) -> None:
    count = 0
    for f in (demo_store / "consumequeue").rglob("*"):
        if not f.is_file():
            continue
        buf = f.read_bytes()
        assert len(buf) == 50 * CQ_STORE_UNIT_SIZE
        for pos in range(0, len(buf), CQ_STORE_UNIT_SIZE):
            unit = buf[pos : pos + CQ_STORE_UNIT_SIZE]
            if unit == bytes(CQ_STORE_UNIT_SIZE):
                assert not any(buf[pos:])
                break
            assert build_cq_entry(parse_cq_entry(buf, pos)) == unit
            count += 1
    assert count > 1000


def test_index_files_round_trip(demo_store: Path) -> None:
    files = sorted((demo_store / "index").iterdir())
    assert len(files) > 10
    for f in files:
        buf = f.read_bytes()
        r = IndexReader(buf, file=f.name)  # geometry proven from content alone
        assert (r.geometry.hash_slot_num, r.geometry.index_num) == (32, 128)
        assert build_header(r.header) == buf[:40]
        for n, e in r.entries():
            pos = r.geometry.entry_pos(n)
            assert build_entry(e) == buf[pos : pos + 20]


def test_checkpoint_and_configs_round_trip(demo_store: Path) -> None:
    cp = (demo_store / "checkpoint").read_bytes()
    assert build_checkpoint(parse_checkpoint(cp)) == cp
    cfg = demo_store / "config"
    typed = {
        "delayOffset.json": (parse_delay_offset, build_delay_offset),
        "consumerOffset.json": (parse_consumer_offset, build_consumer_offset),
        "topics.json": (parse_topics, build_topics),
        "subscriptionGroup.json": (parse_subscription_groups, build_subscription_groups),
    }
    for name, (parse, build) in typed.items():
        for p in (cfg / name, cfg / f"{name}.bak"):
            if not p.exists():
                continue
            text = p.read_text("utf-8")
            assert dumps_fastjson(loads_fastjson(text)) == text, p.name
            assert build(parse(text)) == text, p.name  # type: ignore[operator]


def test_reader_checks_pass(demo_store: Path) -> None:
    with Store.open(demo_store) as st:
        msgs = {m.physical_offset: m for m in st.messages()}
        ov = inspect_store(st, StoreConfig().message_delay_level)
        assert ov.data["state"] == "clean"
        for topic, qid in st.queue_ids():
            for e in st.queue_entries(topic, qid):
                m = msgs[e.entry.commit_log_offset]
                assert (m.topic, m.queue_id, m.queue_offset, m.total_size) == (
                    topic, qid, e.queue_offset, e.entry.size)
        for m in msgs.values():
            for key in [m.uniq_key or "", *m.key_list]:
                assert m.physical_offset in st.query_index(m.topic, key)
            assert st.find_by_offset_msg_id(m.offset_msg_id) == m
        assert not st.findings
