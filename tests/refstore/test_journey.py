"""Replay the real 4.9.7 journey store through the reference store.

The real store (fixtures/rocketmq-stores/4.9.7/journey) was written by RocketMQ 4.9.7's own
store code and the broker's send-back logic. ``journey-log.txt`` says what the producer and the
consumer did: which messages were produced, and which consumption failed with which delay level.
The broker-internal schedule deliveries are timer driven (one task per level every 100 ms), so
their interleaving with the other operations is taken from the real records' store timestamps:
a delivery is replayed as ``tick(now=<its store time>, levels=[<its level>], limit=1)``.

What the producer put in (bodies, flags, user properties in insertion order, born hosts, queue
ids) is not in the log; it is taken from the originals in the manifest. Everything else (topics,
queue ids, queue offsets, reconsume times, retry/DLQ properties and their order, record sizes,
physical offsets, file rolls, consume queues, index entries, delayOffset.json) is the engine's
own doing and must equal RocketMQ's, field for field, apart from UNIQ_KEY values.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from mqtool.formats.commitlog import HostPort, parse_properties
from mqtool.formats.consumequeue import iter_cq
from mqtool.formats.indexfile import IndexReader
from mqtool.refstore.engine import ManualClock, Message, RefStore, StoreConfig
from mqtool.refstore.uniqkey import UniqKeyGenerator
from mqtool.store import Store

JOURNEY = Path(__file__).resolve().parents[2] / "fixtures/rocketmq-stores/4.9.7/journey"
GROUP = "cg_journey"
CONFIG = StoreConfig(
    commitlog_file_size=4096,
    cq_entries_per_file=8,
    index_hash_slots=64,
    index_max_entries=256,
    message_delay_level="1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 10s 1h 2h",
    store_host="192.168.1.10:10911",
    cluster_name="DefaultCluster",
    dialect="4.9.7",
)
BROKER_ADDED = {"UNIQ_KEY", "CLUSTER", "REAL_TOPIC", "REAL_QID"}


def _manifest() -> list[dict[str, Any]]:
    lines = (JOURNEY / "manifest/commitlog.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _pairs(raw: str) -> list[tuple[str, str]]:
    out = []
    for seg in raw.split("\x02"):
        if seg:
            k, _, v = seg.partition("\x01")
            out.append((k, v))
    return out


def _mask_uniq(raw: str) -> str:
    return re.sub("UNIQ_KEY\x01[0-9A-F]+", "UNIQ_KEY\x01*", raw)


def _log() -> tuple[list[str], list[tuple[str, str, int]]]:
    """(produced names in order, [(name, 'topic/q@off' or '', delayLevel)] send-backs)."""
    produced: list[str] = []
    sendbacks: list[tuple[str, str, int]] = []
    for line in (JOURNEY / "journey-log.txt").read_text("utf-8").splitlines():
        _, _, event = line.partition(" ")
        m = re.match(r"produced (?:delayed |pending )?(.*)", event)
        if m:
            for name in m.group(1).split(", "):
                name = name.split(" ")[0].strip()
                if name.endswith("retry"):
                    continue
                produced.append(name)
            continue
        m = re.match(
            r"consume FAILED (\S+) rt=\d+(?: from (\S+))? -> sendBack\(delayLevel=(-?\d+)\)", event
        )
        if m:
            sendbacks.append((m.group(1), m.group(2) or "", int(m.group(3))))
    return produced, sendbacks


def _kind(rec: dict[str, Any]) -> str:
    props = rec["properties"]
    if rec["topic"].startswith("%DLQ%"):
        return "sendback"
    if rec["topic"] == "SCHEDULE_TOPIC_XXXX":
        return "sendback" if "RETRY_TOPIC" in props else "produce"
    if "REAL_TOPIC" in props:
        return "deliver"
    return "produce"


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("journey") / "store"
    manifest = _manifest()
    msgs = [r for r in manifest if r["kind"] == "msg"]
    originals = {r["keys"]: r for r in msgs if _kind(r) == "produce"}
    produced, sendbacks = _log()
    assert produced == [r["keys"] for r in msgs if _kind(r) == "produce"]
    clock = ManualClock(msgs[0]["storeTimestamp"])
    uniq = UniqKeyGenerator("192.0.2.2", pid=0x47AB, class_loader_hash=0x5FFD2B27, clock=clock)
    store = RefStore.open(root, CONFIG, clock=clock, uniq=uniq, seed=7)
    store.create_group(GROUP, retry_max_times=3)
    produce_i = sendback_i = 0
    results = []
    for rec in msgs:
        clock.set(rec["storeTimestamp"])
        kind = _kind(rec)
        if kind == "produce":
            name = produced[produce_i]
            produce_i += 1
            orig = originals[name]
            props = [(k, v) for k, v in _pairs(orig["propertiesRaw"]) if k not in BROKER_ADDED]
            real_topic = orig["properties"].get("REAL_TOPIC", orig["topic"])
            qid = int(orig["properties"].get("REAL_QID", orig["queueId"]))
            body = base64.b64decode(orig["bodyBase64"])
            r = store.put(
                Message(
                    real_topic, body, tuple(props), queue_id=qid, flag=orig["flag"],
                    sys_flag=orig["sysFlag"] & ~0x30, born_timestamp=orig["bornTimestamp"],
                    born_host=orig["bornHost"],
                )
            )
        elif kind == "sendback":
            name, where, level = sendbacks[sendback_i]
            sendback_i += 1
            if where:
                tq, _, off = where.partition("@")
                topic, _, q = tq.rpartition("/")
                entry = next(
                    e for o, e in store.iter_queue(topic, int(q), int(off)) if o == int(off)
                )
            else:
                entry = next(
                    m for o, m in store.iter_queue("JourneyTopic", 0) if m.keys == name
                )
            assert entry.keys == name
            r = store.send_back(GROUP, entry.physical_offset, delay_level=level)
        else:
            level = int(rec["properties"]["DELAY"])
            delivered = store.tick(rec["storeTimestamp"], levels=[level], limit=1)
            assert len(delivered) == 1, rec
            r = delivered[0]
        results.append(r)
    assert produce_i == len(produced) and sendback_i == len(sendbacks)
    store.close()
    return root, manifest


def test_records_field_for_field(replay: tuple[Path, list[dict[str, Any]]]) -> None:
    root, manifest = replay
    with Store.open(root) as st:
        mine = list(st.messages())
        blanks = [(e.physical_offset, e.kind) for _, e, _ in st.file_ends()]
    real = [r for r in manifest if r["kind"] == "msg"]
    assert len(mine) == len(real) == 50
    for m, r in zip(mine, real, strict=True):
        where = f"record @{r['phyOffset']} ({r['keys']})"
        assert m.physical_offset == r["phyOffset"], where
        assert m.total_size == r["size"], where
        assert m.topic == r["topic"], where
        assert m.queue_id == r["queueId"], where
        assert m.queue_offset == r["queueOffset"], where
        assert m.reconsume_times == r["reconsumeTimes"], where
        assert m.flag == r["flag"], where
        assert m.sys_flag == r["sysFlag"], where
        assert m.body_crc == r["bodyCRC"], where
        assert m.magic == int(r["magic"], 16), where
        assert _mask_uniq(m.properties_raw) == _mask_uniq(r["propertiesRaw"]), where
        assert m.store_timestamp == r["storeTimestamp"], where
        assert m.born_timestamp == r["bornTimestamp"], where
        assert m.born_host == HostPort.parse(r["bornHost"]), where
        assert m.store_host == HostPort.parse(r["storeHost"]), where
    real_blanks = [(b["phyOffset"], "blank") for b in manifest if b["kind"] == "blank"]
    assert [b for b in blanks if b[1] == "blank"] == real_blanks
    names = sorted(p.name for p in (root / "commitlog").iterdir())
    assert names == sorted(p.name for p in (JOURNEY / "store/commitlog").iterdir())


def test_consume_queues_equal(replay: tuple[Path, list[dict[str, Any]]]) -> None:
    root, _ = replay
    real = [
        json.loads(line)
        for line in (JOURNEY / "manifest/consumequeue.jsonl").read_text("utf-8").splitlines()
    ]
    mine = []
    for tdir in sorted((root / "consumequeue").iterdir()):
        for qdir in sorted(tdir.iterdir(), key=lambda p: int(p.name)):
            for f in sorted(qdir.iterdir()):
                for pos, e in iter_cq(f.read_bytes()):
                    mine.append(
                        (tdir.name, int(qdir.name), (int(f.name) + pos) // 20, f.name,
                         e.commit_log_offset, e.size, e.tags_code)
                    )
    want = [
        (r["topic"], r["queueId"], r["index"], r["file"], r["phyOffset"], r["size"], r["tagsCode"])
        for r in real
    ]
    assert sorted(mine) == sorted(want)
    # the CQ files themselves: same names and sizes as RocketMQ's
    def files(base: Path) -> list[tuple[str, int]]:
        return sorted(
            (str(p.relative_to(base)), p.stat().st_size)
            for p in base.rglob("*") if p.is_file()
        )

    assert files(root / "consumequeue") == files(JOURNEY / "store/consumequeue")


def test_delay_offset_json_text(replay: tuple[Path, list[dict[str, Any]]]) -> None:
    root, _ = replay
    mine = (root / "config/delayOffset.json").read_bytes()
    assert mine == (JOURNEY / "store/config/delayOffset.json").read_bytes()
    assert mine == (JOURNEY / "manifest/delayOffset.json.raw").read_bytes()


def test_index_entries(replay: tuple[Path, list[dict[str, Any]]]) -> None:
    root, _ = replay
    real = [
        json.loads(line)
        for line in (JOURNEY / "manifest/index_entries.jsonl").read_text("utf-8").splitlines()
    ]
    files = sorted((root / "index").iterdir())
    assert len(files) == 1
    buf = files[0].read_bytes()
    assert len(buf) == (JOURNEY / "store/index").iterdir().__next__().stat().st_size
    reader = IndexReader(buf, hash_slot_num=64)
    mine = [(e.phy_offset, e.time_diff) for _, e in reader.entries()]
    assert mine == [(r["phyOffset"], r["timeDiffSec"]) for r in real]
    # KEYS entries hash identically (UNIQ_KEY values differ by design)
    for (_, e), r in zip(reader.entries(), real, strict=True):
        key = r.get("key") or ""
        if "#j-" in key or "#d-" in key:
            assert e.key_hash == r["keyHash"], r


def test_reads_back_and_round_trips(replay: tuple[Path, list[dict[str, Any]]]) -> None:
    from mqtool.formats.commitlog import build_message

    root, _ = replay
    with Store.open(root) as st:
        for m in st.messages():
            raw = st.message_at(m.physical_offset)
            start = m.physical_offset - m.physical_offset % CONFIG.commitlog_file_size
            data = (root / "commitlog" / f"{start:020d}").read_bytes()
            pos = m.physical_offset - start
            assert build_message(raw) == data[pos : pos + m.total_size]
            assert parse_properties(m.properties_raw) == m.properties
            hits = st.query_index(m.topic, m.uniq_key or "")
            assert m.physical_offset in hits
        assert not st.findings
