"""The checks written once over arrays give the same findings on both backings.

A small input is checked over Python lists (no numpy import: :mod:`mqtool.formats.smallarray`
for an index file's tables, one unit at a time for consume-queue units), a large one with numpy.
Here the real 4.9.7 journey store is damaged in many places and each check runs both ways (the
size threshold set to 0 forces numpy): the findings must be the same, text and offset.
"""

from __future__ import annotations

import random
import shutil
import struct
from pathlib import Path

import pytest

from conftest import store_dir
from mqtool.formats import indexfile
from mqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
from mqtool.formats.indexfile import IndexReader
from mqtool.store import Store, reader, unit_check


def _index_problems(buf: bytes) -> list[tuple[int | None, str]]:
    try:
        r = IndexReader(buf, file="index/x")
        return [(p.offset, p.detail) for p in r.problems()]
    except Exception as err:  # noqa: BLE001 - the same refusal both ways is what is compared
        return [(None, f"{type(err).__name__}: {err}")]


def _index_file() -> bytes:
    return next((store_dir("4.9.7/journey") / "index").iterdir()).read_bytes()


def test_index_checks_agree_on_damaged_files(monkeypatch: pytest.MonkeyPatch) -> None:
    clean = _index_file()
    g = IndexReader(clean).geometry
    rng = random.Random(7)
    cases = [clean]
    for _ in range(120):
        buf = bytearray(clean)
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.4:  # a slot
                at = g.slot_pos(rng.randrange(g.hash_slot_num))
                v = rng.choice([-1, 0, 1, 2, 50, 100, 101, 255, 256, 1 << 30])
                struct.pack_into(">i", buf, at, v)
            else:  # a field of an entry: keyHash, phyOffset, prevIndex
                n = rng.randrange(1, 101)
                field, fmt = rng.choice([(0, ">i"), (4, ">q"), (16, ">i")])
                v = rng.choice([-5, -(1 << 31), 0, 1, n - 1, n, n + 1, 9999, 18754, 18755])
                struct.pack_into(fmt, buf, g.entry_pos(n) + field, v)
        cases.append(bytes(buf))
    small = [_index_problems(b) for b in cases]
    monkeypatch.setattr(indexfile, "SMALL_TABLE", 0)
    large = [_index_problems(b) for b in cases]
    assert small == large
    assert sum(1 for s in small if s) > 100  # the damage was seen


def _queue_findings(root: Path) -> list[tuple[object, ...]]:
    st = Store.open(root)
    infos = [st.queue_info(t, q) for t, q in st.queue_ids()]
    entries = [(qe.queue_offset, qe.entry) for t, q in st.queue_ids()
               for qe in st.queue_entries(t, q)]
    return [*((i.topic, i.queue_id, i.min_offset, i.max_offset, i.last_commit_log_offset)
              for i in infos), *entries,
            *((f.kind, f.file, f.offset, f.detail, f.phy) for f in st.findings)]


def test_unit_rule_agrees_on_damaged_queues(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(11)
    roots = []
    for k in range(12):
        root = tmp_path / f"s{k}"
        shutil.copytree(store_dir("4.9.7/journey"), root)
        files = sorted(p for p in (root / "consumequeue").rglob("*") if p.is_file())
        for _ in range(rng.randint(1, 3)):
            p = rng.choice(files)
            units = p.stat().st_size // CQ_STORE_UNIT_SIZE
            with p.open("r+b") as f:
                f.seek(rng.randrange(min(units, 8)) * CQ_STORE_UNIT_SIZE)
                off, size, tags = struct.unpack(">qiq", f.read(CQ_STORE_UNIT_SIZE))
                what = rng.choice(["off", "size", "tags", "neg", "past"])
                off, size, tags = {
                    "off": (off + 1, size, tags), "size": (off, size + 8, tags),
                    "tags": (off, size, tags ^ 0x5A5A5A5A), "neg": (-1, size, tags),
                    "past": (1 << 40, size, tags)}[what]
                f.seek(-CQ_STORE_UNIT_SIZE, 1)
                f.write(struct.pack(">qiq", off, size, tags))
        roots.append(root)
    small = [_queue_findings(r) for r in roots]
    monkeypatch.setattr(unit_check, "KERNEL_MIN_UNITS", 0)  # records read at once
    monkeypatch.setattr(reader, "KERNEL_MIN_UNITS", 0)  # units read by numpy
    large = [_queue_findings(r) for r in roots]
    assert small == large
    assert all(any(isinstance(x, tuple) and x[0] in ("cq", "bad-field") for x in s)
               for s in small)


def test_distinct_is_np_unique_on_both_sides_of_the_threshold() -> None:
    """:func:`mqtool.store.facts.distinct` sorts a short array (no numpy.ma import) and asks
    np.unique for a long one: the values and dtype are np.unique's either way."""
    import numpy as np

    from mqtool.store.facts import SORT_DISTINCT_BELOW, distinct

    rng = np.random.default_rng(7)
    at = SORT_DISTINCT_BELOW
    for n in (0, 1, 2, 3, 17, at - 1, at, 3 * at):
        for hi in (2, 1000, 1 << 40):
            a = rng.integers(-hi, hi, n, dtype=np.int64)
            got, want = distinct(a), np.unique(a)
            assert got.dtype == want.dtype and got.tolist() == want.tolist(), (n, hi)
    assert distinct(np.array([5, 5, 5], np.int32)).tolist() == [5]
