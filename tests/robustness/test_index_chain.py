"""A key lookup checks the index chain it walks (not the whole table: that is verify's work).

Damage on the walked chain (a prevIndex that is not an earlier entry, an entry of another slot)
is a finding at that entry's in-file offset, and the lookup reads the commitlog instead, so the
key's messages are still found; ``index`` (no key), ``inspect`` and ``verify`` check every entry.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from robust_harness import ERROR_LINE, STORES, run_inproc

from mqtool.formats.indexfile import IndexReader, build_key, index_key_hash
from mqtool.store import Store


def _chain(root: Path) -> tuple[Path, str, str, int, int]:
    """An index file, a topic and key whose chain has at least two entries, the newest entry's
    number and the number of messages the key has."""
    st = Store.open(root)
    for m in st.messages():
        for k in m.key_list:
            h = index_key_hash(build_key(m.topic, k))
            for rel, r in st.index_files():
                hits = r.lookup_hash_at(h)
                if hits and r.entry(hits[0][0]).prev_index > 0:
                    want = sum(1 for x in st.messages() if k in x.key_list and x.topic == m.topic)
                    return root / rel, m.topic, k, hits[0][0], want
    raise AssertionError("no chained key in the store")


@pytest.mark.parametrize("bad", ["prev-forward", "other-slot"])
def test_lookup_reports_a_cut_chain_and_reads_the_commitlog(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "store"
    shutil.copytree(STORES["4.9.7/journey"], root)
    path, topic, key, n, want = _chain(root)
    reader = IndexReader(path.read_bytes())
    at = reader.geometry.entry_pos(n)
    with path.open("r+b") as f:
        if bad == "prev-forward":  # prevIndex pointing at a later entry
            f.seek(at + 16)
            f.write(struct.pack(">i", n + 1))
        else:  # the keyHash of an entry of the next slot: the chain is not this slot's
            h = reader.entry(n).key_hash
            f.seek(at)
            f.write(struct.pack(">i", h + 1 if (h + 1) % reader.geometry.hash_slot_num else h - 1))
    run = run_inproc(["index", str(root), "--key", key, "--topic", topic, "--json"])
    assert run.exit_code == 1, run.stdout + run.stderr
    named = [g for ln in run.stderr.splitlines() if (g := ERROR_LINE.match(ln))]
    rel = path.relative_to(root).as_posix()
    assert any(g["file"] == rel and g["off"] is not None and int(g["off"], 16) == at
               for g in named), run.stderr
    found = json.loads(run.stdout)
    rows = found["messages"] if isinstance(found, dict) else found
    assert len(rows) == want  # read from the commitlog: nothing behind the cut is lost


def test_an_undamaged_lookup_does_not_check_the_whole_table(tmp_path: Path) -> None:
    """Damage off the walked chain is not the lookup's: it answers by the index, exit 0; the
    listing (``index`` without a key) checks every entry and exits 1 naming it."""
    root = tmp_path / "store"
    shutil.copytree(STORES["4.9.7/journey"], root)
    path, topic, key, n, want = _chain(root)
    reader = IndexReader(path.read_bytes())
    chain = {m for m, _ in reader.lookup_hash_at(index_key_hash(build_key(topic, key)))}
    other = next(i for i in range(reader.header.index_count - 1, 0, -1)
                 if i not in chain and reader.entry(i).prev_index == 0)
    at = reader.geometry.entry_pos(other)
    with path.open("r+b") as f:
        f.seek(at + 16)
        f.write(struct.pack(">i", reader.header.index_count + 5))
    run = run_inproc(["index", str(root), "--key", key, "--topic", topic, "--json"])
    assert run.exit_code == 0, run.stdout + run.stderr
    listing = run_inproc(["index", str(root), "--json"])
    assert listing.exit_code == 1
    assert f"{path.relative_to(root).as_posix()} @ {at:#x}" in listing.stderr.lower() or any(
        (g := ERROR_LINE.match(ln)) and g["off"] and int(g["off"], 16) == at
        for ln in listing.stderr.splitlines()), listing.stderr


@pytest.mark.parametrize("chunk", [3, 1 << 18])
def test_slot_table_check_in_chunks_finds_what_a_whole_table_check_finds(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """The header-and-slots check (``problems(entries=False)``, what every lookup and
    ``store_time`` run) reads the slot table a chunk at a time, so its memory stays a few MiB:
    it names the same slots (the first 20 in slot order) as the whole-table rule does."""
    import numpy as np

    from mqtool.formats import indexfile

    src = next((STORES["4.9.7/journey"] / "index").iterdir())
    buf = bytearray(src.read_bytes())
    r = IndexReader(bytes(buf))
    g, count = r.geometry, r.header.index_count
    slots = np.frombuffer(bytes(buf), dtype=">i4", count=g.hash_slot_num,
                          offset=indexfile.INDEX_HEADER_SIZE)
    heads = np.flatnonzero((slots > 0) & (slots < count))
    assert len(heads) > 30
    for i in heads[::2][:30].tolist():  # 30 head entries given another slot's keyHash
        at = g.entry_pos(int(slots[i]))
        h = r.entry(int(slots[i])).key_hash
        buf[at:at + 4] = (h + 1 if (h + 1) % g.hash_slot_num else h - 1).to_bytes(4, "big")
    # the whole-table rule, as it was written before the chunks
    ent = np.frombuffer(bytes(buf), dtype=indexfile.INDEX_ENTRY_DTYPE, count=count - 1,
                        offset=g.entry_pos(1))
    head_slot = ent["h"][slots[heads] - 1].astype(np.int64) % g.hash_slot_num
    want = [g.slot_pos(i) for i in heads[head_slot != heads][:20].tolist()]
    assert len(want) == 20
    monkeypatch.setattr(indexfile, "SLOT_CHUNK", chunk)
    got = [p.offset for p in IndexReader(bytes(buf)).problems(entries=False)
           if "belongs to another slot" in p.detail]
    assert got == want
