"""The compiled batch encoder (formats/batch_encoder.py, RecordWriter.put_raw_batch) writes
what the Python put path writes for the same client batches: the same records, consume queue
units, index files, checkpoint and results, byte for byte; a batch it does not take leaves
the store untouched for the Python path."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from mqtool.formats.commitlog import parse_properties
from mqtool.formats.javacompat import hashmap_key_order
from mqtool.formats.rules import TRANSACTION_PREPARED_TYPE
from mqtool.refstore import put as put_module
from mqtool.refstore import redelivery
from mqtool.refstore.engine import RefStore
from mqtool.refstore.values import BatchItem, ManualClock, PutResult, StoreConfig
from mqtool.remoting.bodies import BatchMessage, decode_batch, encode_batch

# small files: commitlog, consume queue and index files roll within a test
CFG = dataclasses.replace(StoreConfig(), commitlog_file_size=64 * 1024, cq_entries_per_file=8,
                          index_hash_slots=8, index_max_entries=16, store_host="10.0.0.1:10911")
BORN = ["10.0.0.7:50001", "[2001:db8::7]:50002"]


@pytest.fixture(scope="module", autouse=True)
def compiled() -> None:
    put_module.load_batch_encoder()


def _props(pairs: dict[str, str], cfg: StoreConfig, trailing: bool) -> str:
    """A client's properties text: its map's keys in the store's order (a HashMap filled in
    this order)."""
    keys = tuple(pairs)
    text = "\x02".join(f"{keys[i]}\x01{pairs[keys[i]]}"
                       for i in hashmap_key_order(keys, cfg.properties_capacity))
    return text + "\x02" if trailing else text


def _batch(rnd: random.Random, cfg: StoreConfig, n: int, uniq: int) -> bytes:
    shape = rnd.choice(["java", "no-tags", "no-keys", "extra", "odd-value"])
    trailing = rnd.random() < 0.5
    msgs = []
    for i in range(n):
        pairs = {"WAIT": "true"}
        if shape != "no-keys":
            pairs["KEYS"] = rnd.choice([f"k-{i}", "a b", "  x   y ", "solo", "p  q r"])
        if shape != "no-tags":
            pairs["TAGS"] = rnd.choice(["TagA", "t", "Tag With Space"])
        if shape == "extra":
            pairs["a"] = str(rnd.randrange(1000))
            pairs["zz"] = "v"
        if shape == "odd-value":
            pairs["b"] = "x\x01y"  # a value may hold the pair separator
        pairs["UNIQ_KEY"] = f"0A00000700002A9F{uniq + i:016X}"
        body = rnd.randbytes(rnd.choice([0, 1, 7, 8, 9, 100, 1024, rnd.randrange(2000)]))
        msgs.append(BatchMessage(rnd.randrange(-3, 4), body, _props(pairs, cfg, trailing)))
    return encode_batch(msgs)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "lock"}


def _python_put(s: RefStore, topic: str, qid: int, raw: bytes, sys_flag: int, born_ts: int,
                born: str, times: int, bprops: tuple[tuple[str, str], ...]) -> list[PutResult]:
    items = [BatchItem(m.flag, m.body, parse_properties(m.properties), sys_flag, born_ts,
                       born, times, m.properties) for m in decode_batch(raw)]
    return s.put_batch_items(topic, qid, items, bprops)


@pytest.mark.parametrize("dialect", ["4.9.7", "5.3.3"])
def test_compiled_batches_write_the_python_bytes(tmp_path: Path, dialect: str) -> None:
    cfg = dataclasses.replace(CFG, dialect=dialect)
    rnd = random.Random(7)
    batches = []
    uniq = 0
    for _ in range(60):
        n = rnd.choice([1, 2, 3, 8, 32, rnd.randrange(1, 40)])
        batches.append((rnd.choice(["TB", "TopicB"]), rnd.randrange(4), _batch(rnd, cfg, n, uniq),
                        rnd.choice([0, 2]), rnd.choice(BORN), rnd.randrange(3),
                        rnd.choice([(("WAIT", "true"),), (), (("WAIT", "true"), ("x", "1"))])))
        uniq += n
    got: dict[str, tuple[list[list[PutResult]], dict[str, bytes]]] = {}
    for mode in ("compiled", "compiled, dispatched later", "python"):
        clock = ManualClock(1_795_000_000_000)
        root = tmp_path / mode.replace(" ", "_")
        with RefStore.open(root, cfg, clock=clock, seed=1) as s:
            results = []
            for topic, qid, raw, sys_flag, born, times, bprops in batches:
                clock.advance(3)
                if mode.startswith("compiled"):
                    later: list[Callable[[], None]] | None = [] if "later" in mode else None
                    rs = s.put_raw_batch(topic, qid, raw, sys_flag, clock() - 5, born, times,
                                         bprops, later)
                    assert rs is not None, "the compiled encoder refused a batch it takes"
                    for work in later or ():
                        work()
                else:
                    rs = _python_put(s, topic, qid, raw, sys_flag, clock() - 5, born, times,
                                     bprops)
                results.append(rs)
        got[mode] = (results, _files(root))
    python_results, python_files = got["python"]
    assert any(name.startswith("index/") for name in python_files)
    assert sum(name.startswith("commitlog/") for name in python_files) > 1  # files rolled
    for mode in ("compiled", "compiled, dispatched later"):
        compiled_results, compiled_files = got[mode]
        assert compiled_results == python_results, mode
        assert sorted(compiled_files) == sorted(python_files), mode
        for name, data in python_files.items():
            assert compiled_files[name] == data, (mode, name)


_KILLED_BEFORE_DISPATCH = """
import os, sys
from pathlib import Path
from mqtool.refstore import put
from mqtool.refstore.engine import RefStore
put.load_batch_encoder()
s = RefStore.open(sys.argv[1])
for b, path in enumerate(sys.argv[2:]):
    later = []
    assert s.put_raw_batch("TK", 0, Path(path).read_bytes(), 0, 1, "10.0.0.7:50001", 0,
                           (("WAIT", "true"),), later) is not None
    if b < 2:
        for work in later:
            work()
os._exit(0)  # as kill -9: no close, the last batch's dispatch never ran
"""


def test_a_kill_before_the_later_dispatch_loses_nothing(tmp_path: Path) -> None:
    """Records committed but not yet dispatched (their answer may be out) are dispatched by
    the recovery at the next open: their units and index keys are all there."""
    import subprocess
    import sys

    from mqtool.store import Store

    root = tmp_path / "s"
    batches = []
    for b in range(3):
        path = tmp_path / f"batch{b}"
        path.write_bytes(encode_batch([
            BatchMessage(0, b"body", _props({"WAIT": "true", "KEYS": f"k-{b}-{i}", "TAGS": "A",
                                             "UNIQ_KEY": f"0A00000700002A9F{100 * b + i:016X}"},
                                            StoreConfig(), False))
            for i in range(32)]))
        batches.append(str(path))
    res = subprocess.run([sys.executable, "-c", _KILLED_BEFORE_DISPATCH, str(root), *batches],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (root / "abort").exists()
    with RefStore.open(root) as s:
        assert s.recovered_abnormally
    with Store.open(root) as st:
        units = list(st.queue_entries("TK", 0, 0))
        assert len(units) == 96 and not st.findings
        assert [st.message_at(u.entry.commit_log_offset).keys for u in units[64:]] == [
            f"k-2-{i}" for i in range(32)]
        from mqtool.store.search import find_by_key

        found, via = find_by_key(st, "k-2-31", topic="TK")
        assert [m.keys for m in found] == ["k-2-31"] and via == "index", via


def _java_message(i: int, **extra: str) -> BatchMessage:
    pairs = {"WAIT": "true", "KEYS": f"k-{i}", "TAGS": "TagA",
             "UNIQ_KEY": f"0A00000700002A9F{i:016X}", **extra}
    return BatchMessage(0, b"body %d" % i, _props(pairs, CFG, False))


@pytest.mark.parametrize("why", [
    "other keys", "non-ASCII tag", "non-ASCII key", "delay", "no UNIQ_KEY", "torn body",
    "empty value", "transaction", "schedule topic", "property CRC",
])
def test_batches_it_does_not_take_change_nothing(tmp_path: Path, why: str) -> None:
    """None, and not a byte changed: the caller's Python path then stores (or refuses) it."""
    cfg = dataclasses.replace(CFG, append_prop_crc=True) if why == "property CRC" else CFG
    msgs = [_java_message(i) for i in range(4)]
    topic, sys_flag = "TB", 0
    if why == "other keys":
        msgs[2] = _java_message(2, extra="1")
    elif why == "non-ASCII tag":
        msgs[3] = _java_message(3, TAGS="Tág")
    elif why == "non-ASCII key":
        msgs[1] = _java_message(1, KEYS="ключ")
    elif why == "delay":
        msgs = [_java_message(i, DELAY="2") for i in range(4)]
    elif why == "no UNIQ_KEY":
        msgs = [BatchMessage(0, b"b", "WAIT\x01true\x02TAGS\x01A") for _ in range(4)]
    elif why == "empty value":
        msgs[1] = BatchMessage(0, b"b", msgs[1].properties.replace("TagA", ""))
    elif why == "transaction":
        sys_flag = TRANSACTION_PREPARED_TYPE
    elif why == "schedule topic":
        topic = redelivery.SCHEDULE_TOPIC
    raw = encode_batch(msgs)
    if why == "torn body":
        raw = raw[:-3]
    root = tmp_path / "s"
    with RefStore.open(root, cfg, clock=ManualClock(), seed=1) as s:
        s.put_raw_batch("TB", 0, encode_batch([_java_message(9)]), 0, 1, BORN[0], 0,
                        (("WAIT", "true"),))
        s.flush()
        before = _files(root)
        assert s.put_raw_batch(topic, 0, raw, sys_flag, 1, BORN[0], 0,
                               (("WAIT", "true"),)) is None
        s.flush()
        assert _files(root) == before

