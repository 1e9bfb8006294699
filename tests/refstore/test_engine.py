"""Reference store: Java compatibility helpers, encoder agreement, broker rules, lock, rolls."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from mqtool.formats.commitlog import (
    MAGIC_V1,
    MAGIC_V2,
    HostPort,
    build_message,
    make_message,
    parse_message,
)
from mqtool.formats.commitlog_construct import build_message_construct
from mqtool.formats.config import parse_consumer_offset, parse_subscription_groups, parse_topics
from mqtool.formats.encoder import magic_for, pack_record_into, record_size, topic_header
from mqtool.formats.javacompat import (
    JavaHashMap,
    hashmap_key_order,
    hashmap_order_pairs,
    java_string_hash,
)
from mqtool.refstore import redelivery
from mqtool.refstore.engine import (
    ManualClock,
    Message,
    RefStore,
    RefStoreError,
    StoreConfig,
    StoreLockedError,
)
from mqtool.refstore.key_hashes import JavaHashCache
from mqtool.refstore.uniqkey import UniqKeyGenerator
from mqtool.store import Store

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures/rocketmq-stores"
SMALL = StoreConfig(
    commitlog_file_size=4096,
    cq_entries_per_file=8,
    index_hash_slots=8,
    index_max_entries=16,
    message_delay_level="1s 2s 3s",
    store_host="10.0.0.1:10911",
)


def _manifest(ver: str, name: str) -> list[dict[str, object]]:
    path = FIXTURES / ver / name / "manifest/commitlog.jsonl"
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    return [r for r in rows if r["kind"] == "msg"]


# -- javacompat -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ver", "name", "capacity"),
    [("4.9.7", "journey", None), ("4.9.7", "plain", None), ("5.3.3", "plain", 128)],
)
def test_hashmap_order_matches_real_stores(ver: str, name: str, capacity: int | None) -> None:
    """Every stored property string is a HashMap iteration order: re-inserting the pairs in
    stored order into a map of RocketMQ's capacity gives the same order back."""
    checked = 0
    for r in _manifest(ver, name):
        raw = str(r["propertiesRaw"]).rstrip("\x02")
        pairs = [tuple(s.split("\x01", 1)) for s in raw.split("\x02") if s]
        pairs = [p for p in pairs if p[0] != "__CRC32#"]
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):  # batch messages carry WAIT twice (string append)
            continue
        ordered = hashmap_order_pairs(pairs, capacity)  # type: ignore[arg-type]
        assert [k for k, _ in ordered] == keys
        checked += 1
    assert checked > 40


def test_hashmap_collisions_resize_and_remove() -> None:
    assert java_string_hash("Aa") == java_string_hash("BB")
    m = JavaHashMap()
    m.put("BB", "1")
    m.put("Aa", "2")
    assert list(m.keys()) == ["BB", "Aa"]  # same bucket: insertion order
    m.put("BB", "3")  # replacing keeps the position
    assert list(m.items())[0] == ("BB", "3")
    assert m.remove("BB") == "3"
    m.put("BB", "4")
    assert list(m.keys()) == ["Aa", "BB"]
    big = JavaHashMap()
    for i in range(13):  # 13 > 12 = 16 * 0.75: resize to 32
        big.put(f"k{i}", str(i))
    assert big.capacity == 32
    assert JavaHashMap(100).capacity == 0
    sized = JavaHashMap(100)
    sized.put("a", "b")
    assert sized.capacity == 128
    copy = JavaHashMap.copy_of(big)
    assert list(copy.keys()) == list(big.keys())
    assert hashmap_key_order(("BB", "Aa")) == (0, 1)


def test_uniq_key_matches_client_layout() -> None:
    # the first UNIQ_KEY of the journey store: 192.0.2.2, pid 0x47AB, classloader 0x5FFD2B27,
    # created 1 ms before its bornTimestamp, month start in UTC
    clock = ManualClock(1795294972305)
    g = UniqKeyGenerator("192.0.2.2", pid=0x47AB, class_loader_hash=0x5FFD2B27, clock=clock)
    assert g.create() == "C000020247AB5FFD2B276B8361910000"
    assert g.create().endswith("0001")
    v6 = UniqKeyGenerator("2001:db8::1", seed=1, clock=clock)
    assert len(v6.create()) == 56


# -- encoder agreement ------------------------------------------------------------------------


def test_the_one_encoder_equals_the_construct_reference() -> None:
    rnd = random.Random(3)
    hosts = [HostPort("10.1.2.3", 51234), HostPort("2001:db8::1234", 51235)]
    for i in range(300):
        topic = "t" * rnd.choice([1, 10, 127, 128, 300])
        body = rnd.randbytes(rnd.choice([0, 1, 100, 5000]))
        props = rnd.choice(["", "KEYS\x01a b", "用户\x01张三\x02TAGS\x01🎉", "A\x01b\x02"])
        born, store = rnd.choice(hosts), rnd.choice(hosts)
        sys_flag = rnd.choice([0, 1, 0x301, 8]) | (0x10 if born.is_v6 else 0)
        sys_flag |= 0x20 if store.is_v6 else 0
        msg = make_message(
            topic=topic, body=body, properties_raw=props, queue_id=i % 7,
            queue_offset=i * 3, physical_offset=i * 1000, flag=i, sys_flag=sys_flag,
            born_timestamp=1_700_000_000_000 + i, born_host=born,
            store_timestamp=1_700_000_000_500 + i, store_host=store, reconsume_times=i % 4,
            prepared_transaction_offset=i * 5,
        )
        ref = build_message_construct(msg)  # the readable reference
        assert build_message(msg) == ref  # the one encoder, pack_record_into
        pb = props.encode("utf-8")
        tb = topic.encode("utf-8")
        size = record_size(sys_flag, len(body), len(tb), len(pb))
        buf = bytearray(size + 16)
        pack_record_into(
            buf, 8, size, magic=magic_for(len(tb)), queue_id=i % 7, flag=i,
            queue_offset=i * 3, physical_offset=i * 1000, sys_flag=sys_flag,
            born_timestamp=1_700_000_000_000 + i, born_ip=born.packed, born_port=born.port,
            store_timestamp=1_700_000_000_500 + i, store_ip=store.packed, store_port=store.port,
            reconsume_times=i % 4, prepared_transaction_offset=i * 5, body=body,
            topic_hdr=topic_header(tb), props_b=pb,
        )
        assert bytes(buf[8 : 8 + size]) == ref
        assert buf[:8] == bytes(8) and buf[8 + size :] == bytes(8)


def test_java_hash_cache() -> None:
    hc = JavaHashCache()
    for key in ["k", "用户-1", "C000020247AB5FFD2B276B8361910000", ""]:
        h = java_string_hash(f"Topic#{key}")
        want = 0 if h == -(2**31) else abs(h)
        assert hc.index_hash("Topic", key) == want
    assert hc.tags_code("TagJ") == 2598928 and hc.tags_code(None) == 0


# -- broker rules -----------------------------------------------------------------------------


def test_delay_levels_and_send_back_rules() -> None:
    t = redelivery.parse_delay_levels()
    assert len(t) == 18 and t[1] == 1000 and t[5] == 60_000 and t[18] == 7_200_000
    with pytest.raises(redelivery.BrokerRuleError):
        redelivery.parse_delay_levels("1s 5x")
    assert redelivery.decide_send_back("g", 0, 0, 16) == redelivery.SendBackDecision(
        "%RETRY%g", 3, False)
    assert redelivery.decide_send_back("g", 2, 0, 16).delay_level == 5
    assert redelivery.decide_send_back("g", 2, 7, 16).delay_level == 7
    assert redelivery.decide_send_back("g", 16, 0, 16) == redelivery.SendBackDecision(
        "%DLQ%g", 0, True)
    assert redelivery.decide_send_back("g", 0, -1, 16).to_dlq
    assert redelivery.correct_deliver_timestamp(1000, 5000, 1000) == 1000
    assert redelivery.correct_deliver_timestamp(1000, 1500, 1000) == 1500
    assert redelivery.index_keys("T", {"UNIQ_KEY": "U", "KEYS": "a  b"}) == ["T#U", "T#a", "T#b"]


# -- engine -----------------------------------------------------------------------------------


def _open(root: Path, clock: ManualClock | None = None, cfg: StoreConfig = SMALL) -> RefStore:
    return RefStore.open(root, cfg, clock=clock or ManualClock(), seed=1)


def test_lock_refuses_second_writer_and_readers_still_work(tmp_path: Path) -> None:
    root = tmp_path / "store"
    s = _open(root)
    s.put(Message.create("T", b"x", tags="A"))
    with pytest.raises(StoreLockedError):
        _open(root)
    code = (
        "import sys\n"
        "from mqtool.refstore.engine import RefStore, StoreLockedError\n"
        "try:\n"
        f"    RefStore.open({str(root)!r})\n"
        "except StoreLockedError as e:\n"
        "    from mqtool.store import Store\n"
        f"    st = Store.open({str(root)!r})\n"
        "    print(e, st.lock_state().locked, len(list(st.messages())))\n"
        "    sys.exit(3)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stderr
    assert "locked by another process" in r.stdout
    assert r.stdout.strip().endswith("True 1")  # another process sees the lock, reads fine
    with Store.open(root) as st:  # the read-only reader does not care
        assert [m.body for m in st.messages()] == [b"x"]
        assert st.abort_exists
    s.close()
    assert not (root / "abort").exists()
    with Store.open(root) as st:
        assert not st.lock_state().locked
    _open(root).close()  # free again


def test_rolls_v2_ipv6_and_reopen(tmp_path: Path) -> None:
    root = tmp_path / "store"
    clock = ManualClock(1_795_000_000_000)
    s = _open(root, clock)
    long_topic = "L" * 150
    sent = []
    for i in range(60):
        clock.advance(10)
        topic = long_topic if i % 10 == 0 else "T"
        r = s.put(
            Message.create(
                topic, f"body {i}".encode() * (i % 5), tags=f"tag{i % 3}", keys=[f"k{i}", f"x{i}"],
                born_host="[2001:db8::7]:4000" if i % 7 == 0 else "10.9.9.9:4000",
            )
        )
        sent.append(r)
    s.close()
    with Store.open(root) as st:
        msgs = list(st.messages())
        assert [m.physical_offset for m in msgs] == [r.physical_offset for r in sent]
        assert len(st.commitlog_files) > 3
        assert not st.findings
        for m, r in zip(msgs, sent, strict=True):
            assert m.magic == (MAGIC_V2 if m.topic == long_topic else MAGIC_V1)
            assert m.born_host.is_v6 == (m.born_host.ip == "2001:db8::7")
            assert m.uniq_key == r.uniq_key and m.offset_msg_id == r.msg_id
            for key in [m.uniq_key or "", *m.key_list]:
                assert m.physical_offset in st.query_index(m.topic, key)
        assert len(st.index_files()) > 5  # 16-entry index files rolled
        entries = list(st.queue_entries("T", 0))
        assert [e.queue_offset for e in entries] == list(range(len(entries)))
    s = _open(root, clock)
    r = s.put(Message.create("T", b"after reopen", queue_id=0))
    assert r.queue_offset == len(entries)
    s.close()


def test_schedule_retry_dlq_and_offsets(tmp_path: Path) -> None:
    root = tmp_path / "store"
    clock = ManualClock(1_795_000_000_000)
    s = _open(root, clock)
    s.create_group("g", retry_max_times=1)
    d = s.put(Message.create("T", b"later", tags="D", delay_level=2, queue_id=1))
    assert (d.topic, d.queue_id) == (redelivery.SCHEDULE_TOPIC, 1)
    assert s.tick() == []
    clock.advance(2000)
    (delivered,) = s.tick()
    assert (delivered.topic, delivered.queue_id) == ("T", 1)
    assert s.delay_offsets == {2: 1}
    m = s.put(Message.create("T", b"fail", tags="F", queue_id=0))
    r1 = s.send_back("g", m.physical_offset)
    assert (r1.topic, r1.queue_id) == (redelivery.SCHEDULE_TOPIC, 2)  # level 3 + 0
    clock.advance(3000)
    (retry,) = s.tick()
    assert retry.topic == "%RETRY%g"
    back = s.read_message(retry.physical_offset)
    assert back.reconsume_times == 1 and back.properties["RETRY_TOPIC"] == "T"
    assert back.properties["ORIGIN_MESSAGE_ID"] == m.msg_id
    dlq = s.send_back("g", retry.physical_offset)
    assert dlq.topic == "%DLQ%g"
    dl = s.read_message(dlq.physical_offset)
    assert dl.reconsume_times == 2 and dl.properties["DELAY"] == "0"
    straight = s.send_back("g", m.physical_offset, delay_level=-1)
    assert straight.topic == "%DLQ%g"
    pulled = s.pull("g", "T", 0)
    assert [x.body for x in pulled.messages] == [b"fail"]
    s.commit_offset("g", "T", 0, pulled.next_offset)
    assert s.pull("g", "T", 0).messages == []
    with pytest.raises(RefStoreError):
        s.put(Message.create("T", b"x", queue_id=99))
    s.close()
    cfg = root / "config"
    assert parse_consumer_offset((cfg / "consumerOffset.json").read_text()).offset_table == {
        "T@g": {0: 1}
    }
    topics = parse_topics((cfg / "topics.json").read_text()).topic_config_table
    assert topics["%DLQ%g"].perm == 6 and topics["%DLQ%g"].write_queue_nums == 1
    assert topics["%RETRY%g"].write_queue_nums == 1
    groups = parse_subscription_groups((cfg / "subscriptionGroup.json").read_text())
    assert groups.subscription_group_table["g"].retry_max_times == 1
    assert (cfg / "delayOffset.json.bak").exists()


def test_consume_helper_and_5x_dialect(tmp_path: Path) -> None:
    cfg = StoreConfig(commitlog_file_size=1 << 16, dialect="5.3.3", message_delay_level="1s")
    clock = ManualClock(1_795_000_000_000)
    with RefStore.open(tmp_path / "s5", cfg, clock=clock, seed=2) as s:
        for i in range(4):
            s.put(Message.create("V5Topic", f"m{i}", tags="TagA", keys=f"v5-{i}",
                                 properties={"seq": str(i)}, wait_store_msg_ok=None))
        counts = s.consume("cg", "V5Topic", lambda m: m.body != b"m1")
        assert counts == {"ok": 3, "retried": 1, "dlq": 0}
        clock.advance(5000)
        assert len(s.tick()) == 1
        assert s.consume("cg", "V5Topic", lambda m: True) == {"ok": 1, "retried": 0, "dlq": 0}
    with Store.open(tmp_path / "s5") as st:
        first = next(iter(st.messages()))
        # 5.x: HashMap(128) order and a trailing separator, as the 5.3.3 store shows
        real = _manifest("5.3.3", "plain")[0]["propertiesRaw"]
        assert isinstance(real, str)
        keys = [p.split("\x01")[0] for p in first.properties_raw.split("\x02")]
        assert keys == [p.split("\x01")[0] for p in real.split("\x02") if "__CRC32#" not in p]
    text = (tmp_path / "s5/config/consumerOffset.json").read_text()
    assert '"dataVersion"' in text and '"groupTopicMap"' in text


def test_recovery_cuts_torn_tail(tmp_path: Path) -> None:
    root = tmp_path / "store"
    s = _open(root)
    rs = [s.put(Message.create("T", b"m%d" % i, keys=f"k{i}", queue_id=0)) for i in range(5)]
    s.flush()
    last = rs[-1]
    # simulate a kill in the middle of copying the last record: body written, size not
    path = root / "commitlog" / f"{last.physical_offset - last.physical_offset % 4096:020d}"
    fd = os.open(path, os.O_RDWR)
    os.pwrite(fd, bytes(4), last.physical_offset % 4096)
    os.close(fd)
    s._lock.release(abort_file=True)  # the process "dies": lock gone, abort stays
    s2 = _open(root)
    assert s2.recovered_abnormally
    assert s2.write_position == last.physical_offset
    assert s2.max_offset("T", 0) == 4
    r = s2.put(Message.create("T", b"again", queue_id=0))
    assert r.physical_offset == last.physical_offset and r.queue_offset == 4
    s2.close()
    with Store.open(root) as st:
        assert [m.body for m in st.messages()] == [b"m0", b"m1", b"m2", b"m3", b"again"]
        assert [e.entry.commit_log_offset for e in st.queue_entries("T", 0)] == [
            m.physical_offset for m in st.messages()
        ]
        assert not st.findings
    raw = (root / "commitlog" / "00000000000000000000").read_bytes()
    assert parse_message(raw, r.physical_offset % 4096).body == b"again"  # type: ignore[union-attr]


def test_orderly_consumer_path(tmp_path: Path) -> None:
    clock = ManualClock(1_795_000_000_000)
    with _open(tmp_path / "s", clock) as s:
        s.create_group("og", retry_max_times=2, consume_orderly=True)
        m = s.put(Message.create("T", b"ordered", tags="O", keys="o-1", queue_id=0))
        r = s.send_back_orderly("og", m.physical_offset)  # rt 0 < 2: retry via schedule
        assert (r.topic, r.queue_id) == (redelivery.SCHEDULE_TOPIC, 2)
        sched = s.read_message(r.physical_offset)
        p = sched.properties
        assert sched.reconsume_times == 0  # the client's header value, not + 1
        assert p["RETRY_TOPIC"] == "T" and p["REAL_TOPIC"] == "%RETRY%og"
        assert p["RECONSUME_TIME"] == "0" and p["MAX_RECONSUME_TIMES"] == "2"
        assert {"MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME", "UNIQ_KEY"} <= set(p)
        clock.advance(5000)
        (retry,) = s.tick()
        again = s.read_message(retry.physical_offset)
        # a later attempt of a message already at the max: the broker dead-letters it, but
        # 4.9.7 keeps the client's DELAY (handleRetryAndDLQ's DELAY=0 is overwritten by the
        # client's properties), so the DLQ copy waits in the schedule topic first (#2724)
        s3 = s.send_back_orderly("og", again.physical_offset, max_reconsume_times=0)
        assert s3.topic == redelivery.SCHEDULE_TOPIC
        parked = s.read_message(s3.physical_offset).properties
        assert parked["REAL_TOPIC"] == "%DLQ%og" and parked["DELAY"] == "3"
        clock.advance(5000)
        (dlq,) = s.tick()
        dl = s.read_message(dlq.physical_offset)
        assert dl.topic == "%DLQ%og" and dl.reconsume_times == 0
        assert dl.properties["DELAY"] == "3" and dl.properties["RETRY_TOPIC"] == "T"
        assert dl.properties["ORIGIN_MESSAGE_ID"] == m.uniq_key


def test_batch_matches_real_4_9_7_batch_records(tmp_path: Path) -> None:
    """The plain store's TopicBatch batch 0: ten messages of one client MessageBatch."""
    import base64
    import re

    real = [r for r in _manifest("4.9.7", "plain") if r["topic"] == "TopicBatch"][:10]
    msgs = [
        Message.create(
            "TopicBatch", base64.b64decode(str(r["bodyBase64"])), tags="batchTag",
            keys=str(r["keys"]), properties={"batchNo": "0"},
            born_host=str(r["bornHost"]),
        )
        for r in real
    ]
    with _open(tmp_path / "s", cfg=StoreConfig(commitlog_file_size=1 << 16,
                                               store_host="192.168.1.10:10911")) as s:
        s.create_topic("TopicBatch", 4)
        rs = s.put_batch(msgs, queue_id=0)
        got = [s.read_message(r.physical_offset) for r in rs]
    def mask(raw: object) -> str:
        return re.sub("UNIQ_KEY\x01[0-9A-F]+", "UNIQ_KEY\x01*", str(raw))

    for g, r in zip(got, real, strict=True):
        assert g.total_size == r["size"]
        assert mask(g.properties_raw) == mask(r["propertiesRaw"])
        assert g.queue_offset == r["queueOffset"]
    assert [r.physical_offset - rs[0].physical_offset for r in rs] == [
        int(str(r["phyOffset"])) - int(str(real[0]["phyOffset"])) for r in real
    ]


def test_open_a_real_broker_store(tmp_path: Path) -> None:
    """A copy of the real journey store: settings inferred, opening changes no data byte, and
    the schedule service delivers what RocketMQ left pending."""
    import shutil

    from mqtool.refstore.engine import infer_config

    root = tmp_path / "store"
    shutil.copytree(FIXTURES / "4.9.7/journey/store", root)
    cfg = infer_config(root)
    assert cfg is not None
    assert (cfg.commitlog_file_size, cfg.cq_entries_per_file) == (4096, 8)
    assert (cfg.index_hash_slots, cfg.index_max_entries) == (64, 256)
    assert cfg.store_host == "192.168.1.10:10911" and cfg.dialect == "4.9.7"
    assert cfg.message_delay_level.split()[15:] == ["10s", "1h", "2h"]

    def data_files() -> dict[str, bytes]:
        return {
            str(p.relative_to(root)): p.read_bytes()
            for sub in ("commitlog", "consumequeue", "index")
            for p in sorted((root / sub).rglob("*")) if p.is_file()
        }

    before = data_files()
    clock = ManualClock(1_795_294_984_603 + 1)
    with RefStore.open(root, clock=clock) as s:
        assert s.delay_offsets == {2: 1, 3: 6, 4: 4, 5: 3, 16: 1}
        assert s.pending_delayed() == {16: 2, 17: 1, 18: 1}
    assert data_files() == before  # open + close: not a byte of data changed
    with RefStore.open(root, clock=clock) as s:
        clock.advance(3 * 3600 * 1000)
        delivered = s.tick()
        assert sorted(r.topic for r in delivered) == [
            "%RETRY%cg_journey", "%RETRY%cg_journey", "DelayTopic", "DelayTopic"
        ]
        assert s.pending_delayed() == {}
    with Store.open(root) as st:
        assert not st.findings
        assert sum(1 for _ in st.messages()) == 54


@pytest.mark.parametrize("name", ["4.9.7/plain", "4.9.7/plain-crashed", "5.3.3/plain"])
def test_open_close_other_real_stores_changes_no_data(tmp_path: Path, name: str) -> None:
    import shutil

    root = tmp_path / "store"
    shutil.copytree(FIXTURES / name / "store", root)

    def data_files() -> dict[str, bytes]:
        out = {}
        for sub in ("commitlog", "consumequeue", "index"):
            for p in sorted((root / sub).rglob("*")):
                if p.is_file():
                    data = p.read_bytes()
                    # a crashed broker's pre-allocated next file is all zeros: keep its length
                    out[str(p.relative_to(root))] = data if any(data) else bytes(len(data))
        return out

    before = data_files()
    with RefStore.open(root, clock=ManualClock(1_795_400_000_000)) as s:
        dialect, crc = s.config.dialect, s.config.append_prop_crc
        pos = s.write_position
    assert dialect == ("5.3.3" if name.startswith("5") else "4.9.7")
    assert crc == name.startswith("5")
    after = data_files()
    if name.endswith("crashed"):  # recovery may only drop the empty pre-allocated file
        assert {k: v for k, v in after.items() if any(v)} == {
            k: v for k, v in before.items() if any(v)
        }
    else:
        assert after == before
    with Store.open(root) as st:
        assert st.max_physical_offset() == pos
        assert not [f for f in st.findings if f.kind != "layout"]


def test_5x_records_byte_exact_with_prop_crc(tmp_path: Path) -> None:
    """The first records of the real 5.3.3 store, rebuilt byte for byte (HashMap(128) order,
    trailing separator, the __CRC32# property with its CRC), then a delivered delay copy."""
    import base64

    real = _manifest("5.3.3", "plain")
    raw_store = FIXTURES / "5.3.3/plain/store/commitlog/00000000000000000000"
    data = raw_store.read_bytes()
    cfg = StoreConfig(commitlog_file_size=65536, cq_entries_per_file=30, dialect="5.3.3",
                      append_prop_crc=True, store_host="192.168.1.10:10911",
                      message_delay_level="1s 2s 3s 3s 3s 3s 3s 3s 3s 3s 3s 3s 3s 3s 3s 30m 1h 2h")
    clock = ManualClock()
    with RefStore.open(tmp_path / "s", cfg, clock=clock, seed=1) as s:
        s.create_topic("V5Topic", 2)
        for r in real[:6]:
            props = [tuple(p.split("\x01", 1)) for p in str(r["propertiesRaw"]).split("\x02")
                     if p and not p.startswith(("__CRC32#", "CLUSTER"))]
            clock.set(int(str(r["storeTimestamp"])))
            got = s.put(Message(
                "V5Topic", base64.b64decode(str(r["bodyBase64"])), tuple(props),  # type: ignore[arg-type]
                queue_id=int(str(r["queueId"])), born_timestamp=int(str(r["bornTimestamp"])),
                born_host=str(r["bornHost"]),
            ))
            start = int(str(r["phyOffset"]))
            assert got.physical_offset == start
            mine = s.read_message(start)
            assert build_message(mine) == data[start : start + int(str(r["size"]))]
            assert mine.prop_crc() is not None and mine.prop_crc()[0] == mine.prop_crc()[1]  # type: ignore[index]


def test_vectorised_index_hashes() -> None:
    from mqtool.formats.indexfile import index_key_hash
    from mqtool.refstore.key_hashes import index_hashes, java_hash_unsigned

    keys = ["k", "", "order-1", "C000020247AB5FFD2B276B8361910000", "用户-1", "🎉x", "order-22"]
    topics = ["T", "TopicA", "T", "%RETRY%g", "T", "T", "SCHEDULE_TOPIC_XXXX"]
    pre = [java_hash_unsigned(t + "#") for t in topics]
    assert index_hashes(pre, keys) == [
        index_key_hash(f"{t}#{k}") for t, k in zip(topics, keys, strict=True)
    ]
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert index_hashes([0], ["polygenelubricants"]) == [0]  # Integer.MIN_VALUE -> 0


@pytest.mark.parametrize("v5", [False, True])
def test_batch_properties_as_sent_are_the_encoded_ones(tmp_path: Path, v5: bool) -> None:
    """A batch message's properties as the client sent them (kept when in the store's order,
    as ``MessageExtBatchEncoder`` copies them) give the same records as their re-encoding;
    properties out of order, with a repeated key or an empty segment are re-encoded."""
    import dataclasses

    from mqtool.formats.commitlog import parse_properties
    from mqtool.formats.javacompat import hashmap_key_order
    from mqtool.refstore.values import BatchItem

    pairs = [("KEYS", "k-1 k-2"), ("UNIQ_KEY", "AC11000100002A9F0000000000000001"),
             ("WAIT", "true"), ("TAGS", "TagA"), ("a", "1")]
    order = hashmap_key_order(tuple(k for k, _ in pairs), 16)
    java = "\x02".join(f"{pairs[i][0]}\x01{pairs[i][1]}" for i in order)
    sents = [java, java + "\x02", "\x02".join(f"{k}\x01{v}" for k, v in pairs),
             java + "\x02TAGS\x01TagA", java + "\x02\x02x", "", "WAIT\x01true"]
    stores = []
    for mode in ("as_sent", "encoded"):
        cfg = dataclasses.replace(SMALL, dialect="5.3.3") if v5 else SMALL
        with _open(tmp_path / mode, cfg=cfg) as s:
            s.create_topic("TB", 1)
            items = [BatchItem(0, b"body", parse_properties(p), 0, 1, "10.0.0.1:5", 0,
                               p if mode == "as_sent" else None) for p in sents]
            rs = s.put_batch_items("TB", 0, items, (("WAIT", "true"),))
            got = [s.read_message(r.physical_offset) for r in rs]
            stores.append([(g.properties_raw.replace(g.properties.get("UNIQ_KEY", "-"), "U"),
                            g.total_size, g.tags) for g in got])
    assert stores[0] == stores[1]
    assert stores[0][0][2] == "TagA"


def test_queue_units_and_record_bytes(tmp_path: Path) -> None:
    """A queue's units read without their records; a record's stored bytes are what parsing
    and encoding it again give; a unit that does not match its record is an error."""
    from mqtool.formats.commitlog import build_message

    with _open(tmp_path / "s") as s:
        s.create_topic("T", 1)
        rs = s.put_batch([Message.create("T", b"x" * n, tags="A", queue_id=0)
                          for n in (1, 10, 100)], queue_id=0)
        units = list(s.queue_units("T", 0, 1))
        assert [(u[0], u[1], u[2]) for u in units] == [
            (r.queue_offset, r.physical_offset, r.size) for r in rs[1:]]
        for r in rs:
            raw = s.record_bytes(r.physical_offset, r.size)
            assert raw == build_message(s.read_message(r.physical_offset))
        with pytest.raises(RefStoreError):
            s.record_bytes(rs[0].physical_offset, rs[0].size + 1)


def test_consume_queue_run_writes_what_single_units_write(tmp_path: Path) -> None:
    """``put_run`` across a file end gives the bytes of one ``put`` after the other."""
    from mqtool.refstore.mapped import ConsumeQueueFiles

    units = [(1000 + 37 * i, 37 + i, -5 + i) for i in range(13)]
    one, run = ConsumeQueueFiles(tmp_path / "one", 5), ConsumeQueueFiles(tmp_path / "run", 5)
    for i, u in enumerate(units):
        one.put(3 + i, *u)
    run.put_run(3, units[:1])
    run.put_run(4, units[1:])
    assert (one.max_offset, one.max_physic_end) == (run.max_offset, run.max_physic_end) == (
        16, units[-1][0] + units[-1][1])
    assert [one.get(i) for i in range(3, 16)] == [run.get(i) for i in range(3, 16)] == units
    for a, b in zip(sorted((tmp_path / "one").iterdir()), sorted((tmp_path / "run").iterdir()),
                    strict=True):
        assert a.read_bytes() == b.read_bytes()
    one.close()
    run.close()
